//! The exact and hybrid methods driven through `engine::Session`, as the CLI and the worker drive
//! them: progress in the snapshots, the result's exact keys, a second run served from the first
//! run's score cache, a stop that keeps the families fitted, and settings refused up front.

use crate::common;

use occam::data::Dataset;
use occam::discovery::exact::{ExactSettings, GraphPrior};
use occam::discovery::family::FamilyScoreSettings;
use occam::discovery::knowledge::Knowledge;
use occam::discovery::settings::{Method, Preset, SearchSettings};
use occam::engine::{Session, Status};

/// a → b → c with non-linear mechanisms, 120 rows.
fn chain() -> Dataset {
    common::nonlinear_chain(5, 120)
}

fn settings(method: Method) -> SearchSettings {
    let mut s = Preset::Interactive.settings();
    s.method = method;
    s.threads = 2;
    s.exact = ExactSettings {
        max_parents: 2,
        candidates: 2,
        family: FamilyScoreSettings {
            restarts: 1,
            adam_steps: 80,
            lbfgs_iterations: 80,
            ..FamilyScoreSettings::with_inducing(10)
        },
        prior: GraphPrior::Uniform,
        prune_below: None,
        few_rows: None,
        widen_saturated: 0,
    };
    s
}

fn run_to_end(session: &mut Session) -> Vec<occam::engine::Snapshot> {
    let mut snaps = Vec::new();
    while !session.is_finished() {
        snaps.push(session.step(0.0));
    }
    snaps
}

#[test]
fn an_exact_run_reports_its_families_posterior_and_edge_probabilities() {
    let data = chain();
    let mut session = Session::new(
        &data,
        Knowledge::none(3),
        settings(Method::Exact).check().unwrap(),
        0,
        None,
    )
    .unwrap();
    let snaps = run_to_end(&mut session);
    // Progress is reported family by family, and the stage total is known while it runs.
    let progress: Vec<_> = snaps.iter().filter_map(|s| s.exact.clone()).collect();
    assert!(
        progress.len() >= 2,
        "{} snapshots with progress",
        progress.len()
    );
    assert_eq!(
        progress[0].planned_screening, 9,
        "3 empty + 6 one-parent families"
    );
    assert!(progress.iter().all(|p| p.done <= p.total));
    let result = session.result();
    assert_eq!(result.status, Status::Done);
    assert_eq!(result.method, Method::Exact);
    // 9 screening families and one two-parent family per variable.
    assert_eq!(result.families_fitted, 12);
    assert_eq!(result.cache_hits, 0);
    let posterior = result.posterior.as_ref().expect("D ≤ 5 lists every DAG");
    assert_eq!(posterior.graphs.len(), 25);
    let total: f64 = posterior.graphs.iter().map(|g| g.probability).sum();
    assert!((total - 1.0).abs() < 1e-9);
    // The chosen graph is the most probable one (uniform prior), and the chain's skeleton.
    let mut best = posterior.graphs[0].edges.clone();
    best.sort_unstable();
    let mut chosen = result.edges.clone();
    chosen.sort_unstable();
    assert_eq!(best, chosen);
    let skeleton: Vec<(usize, usize)> = chosen.iter().map(|&(a, b)| (a.min(b), a.max(b))).collect();
    assert!(
        skeleton.contains(&(0, 1)) && skeleton.contains(&(1, 2)),
        "{chosen:?}"
    );
    let p = result.edge_probabilities.as_ref().unwrap();
    assert_eq!(p, &posterior.edge_probabilities);
    for (a, b) in &chosen {
        assert_eq!(result.adjacency[*a][*b], p[*a][*b]);
        assert!(p[*a][*b] > 0.0 && p[*a][*b] <= 1.0);
    }
    let summary = result.exact.as_ref().unwrap();
    assert!(summary.complete);
    assert!(summary.prior.contains("uniform"), "{}", summary.prior);
    // The JSON keys the issue names.
    let json: serde_json::Value = serde_json::to_value(&result).unwrap();
    for key in [
        "method",
        "families_fitted",
        "cache_hits",
        "posterior",
        "edge_probabilities",
    ] {
        assert!(json.get(key).is_some_and(|v| !v.is_null()), "{key}");
    }
    assert_eq!(json["method"], "exact");

    // A second run with other knowledge reads every score from the first run's cache.
    let cache = session.score_cache().clone();
    let forbid = Knowledge::from_indices(3, vec![(2, 1)], vec![], None).unwrap();
    let mut again = Session::new(
        &data,
        forbid,
        settings(Method::Exact).check().unwrap(),
        0,
        None,
    )
    .unwrap();
    assert!(again.use_score_cache(cache.clone()));
    run_to_end(&mut again);
    let second = again.result();
    assert_eq!(second.families_fitted, 0);
    assert!(second.cache_hits > 0);
    assert!(!second.edges.contains(&(2, 1)));
    // Another seed is another key: the cache is refused.
    let mut other = Session::new(
        &data,
        Knowledge::none(3),
        settings(Method::Exact).check().unwrap(),
        1,
        None,
    )
    .unwrap();
    assert!(!other.use_score_cache(cache));
}

#[test]
fn a_running_exact_search_shows_the_best_graph_so_far_and_its_edge_probabilities() {
    let data = chain();
    let mut s = settings(Method::Exact);
    // One family per step, so the larger families arrive one at a time.
    s.threads = 1;
    let mut session = Session::new(&data, Knowledge::none(3), s.check().unwrap(), 0, None).unwrap();
    let snaps = run_to_end(&mut session);
    let live: Vec<_> = snaps
        .iter()
        .filter(|s| s.status == Status::Running)
        .filter_map(|s| Some((s, s.exact.as_ref()?.live_log_score?)))
        .collect();
    // Screening shows the one-parent gains; each of the three two-parent families but the last
    // is followed by a live view.
    assert!(live.len() >= 2, "{} live snapshots", live.len());
    assert!(snaps
        .iter()
        .filter(|s| s
            .exact
            .as_ref()
            .is_some_and(|x| x.stage == occam::discovery::exact::ExactStage::Screening))
        .all(|s| s.exact.as_ref().unwrap().live_log_score.is_none() && s.edges.is_empty()));
    let mut last = f64::NEG_INFINITY;
    for (snap, score) in &live {
        // A family scored can only raise the best score: every family's value is at least its
        // best scored subset's.
        assert!(*score >= last - 1e-9, "{score} after {last}");
        last = *score;
        let dag =
            occam::graph::Dag::from_edges(3, &snap.edges).expect("the best graph so far is a DAG");
        assert_eq!(dag.n(), 3);
        for row in &snap.adjacency {
            assert!(
                row.iter().all(|p| (0.0..=1.0 + 1e-12).contains(p)),
                "{row:?}"
            );
        }
        for &(a, b) in &snap.edges {
            assert!(snap.adjacency[a][b] > 0.0);
        }
        assert!(snap
            .phase_text
            .contains("best graph over the families scored so far"));
    }
    let result = session.result();
    assert_eq!(result.status, Status::Done);
    let final_score = result.exact.as_ref().unwrap().log_score;
    assert!(final_score >= last - 1e-9, "{final_score} < {last}");
}

#[test]
fn a_stopped_exact_run_keeps_what_it_fitted() {
    let data = chain();
    let mut s = settings(Method::Exact);
    s.threads = 1;
    let mut session = Session::new(&data, Knowledge::none(3), s.check().unwrap(), 0, None).unwrap();
    // Fit the screening stage one family per step (planning the search needs no step), then stop.
    for _ in 0..9 {
        session.step(0.0);
    }
    session.stop();
    assert!(session.is_finished());
    let result = session.result();
    assert_eq!(result.status, Status::Stopped);
    assert_eq!(
        session.score_cache().len(),
        9,
        "the 9 screening families are kept"
    );
    assert!(!result.exact.as_ref().unwrap().complete);
    assert!(
        result
            .failures
            .iter()
            .any(|f| f.contains("stopped before every planned family")),
        "{:?}",
        result.failures
    );
}

#[test]
fn a_hybrid_run_adds_the_continuous_graphs_edges_to_the_candidates() {
    let data = chain();
    let mut s = settings(Method::Hybrid);
    s.exact.candidates = 1;
    s.restarts = 1;
    s.cap_iterations(120);
    let mut session = Session::new(&data, Knowledge::none(3), s.check().unwrap(), 0, None).unwrap();
    let snaps = run_to_end(&mut session);
    // The continuous search runs first, then the exact one.
    let first_exact = snaps.iter().position(|s| s.exact.is_some()).unwrap();
    assert!(first_exact > 0 && snaps[..first_exact].iter().all(|s| s.exact.is_none()));
    let result = session.result();
    assert_eq!(result.method, Method::Hybrid);
    assert_eq!(result.status, Status::Done);
    let cgp_edges = &result.restarts[0].edges;
    let candidates = &result.exact.as_ref().unwrap().candidates;
    for &(cause, effect) in cgp_edges {
        assert!(
            candidates[effect].contains(&cause),
            "{cgp_edges:?} {candidates:?}"
        );
    }
}

#[test]
fn impossible_exact_settings_are_refused_before_any_work() {
    let data = chain();
    let mut s = settings(Method::Exact);
    s.exact.max_parents = 0;
    let e = s.check().unwrap_err();
    assert_eq!(e.setting(), "exact", "{e}");
    // Two required parents with K = 1.
    let mut s = settings(Method::Exact);
    s.exact.max_parents = 1;
    let k = Knowledge::from_indices(3, vec![], vec![(0, 2), (1, 2)], None).unwrap();
    let e = Session::new(&data, k, s.check().unwrap(), 0, None)
        .unwrap_err()
        .to_string();
    assert!(e.contains("required parents"), "{e}");
}
