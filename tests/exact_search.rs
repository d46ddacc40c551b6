//! The exact search end to end on a small non-linear chain: the number of fits, the cache reused
//! by a second run with other knowledge (nothing new fitted), the posterior agreeing with the best
//! DAG, and a stop keeping what was fitted.

use crate::common;

use nalgebra::DMatrix;
use occam::discovery::exact::{CacheKey, ExactError, ExactSettings, GraphPrior, ScoreCache};
use occam::discovery::family::FamilyScoreSettings;
use occam::discovery::knowledge::Knowledge;
use occam::engine::run_exact;
use occam::runner::{CpuBackend, Pool};
use std::sync::atomic::{AtomicUsize, Ordering};

/// a → b → c with non-linear mechanisms, 80 rows, standardised.
fn chain() -> DMatrix<f64> {
    common::nonlinear_chain(21, 80).standardised().to_matrix()
}

fn settings() -> ExactSettings {
    ExactSettings {
        max_parents: 2,
        candidates: 2,
        family: FamilyScoreSettings {
            restarts: 1,
            adam_steps: 60,
            lbfgs_iterations: 60,
            ..FamilyScoreSettings::with_inducing(10)
        },
        prior: GraphPrior::Uniform,
        prune_below: None,
        few_rows: None,
        widen_saturated: 0,
    }
}

fn cache() -> ScoreCache {
    ScoreCache::new(CacheKey::new("chain", settings().family, 0))
}

#[test]
fn the_exact_search_counts_its_fits_and_reuses_them() {
    let data = chain();
    let mut scores = cache();
    let calls = AtomicUsize::new(0);
    let out = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut scores,
        &CpuBackend::new(Pool::new(2).unwrap()),
        |_, _, _| {
            calls.fetch_add(1, Ordering::Relaxed);
        },
        || false,
    )
    .unwrap();
    // Stage 1: 3 empty + 6 one-parent families; stage 2: one two-parent family per variable.
    assert_eq!(out.families_fitted, 12);
    assert_eq!(calls.load(Ordering::Relaxed), 12);
    assert_eq!(out.cache_hits, 0);
    assert!(out.complete);
    // The skeleton of the chain is found (orientation within the class is the evidence's call).
    let edges = out.best.dag.edges();
    let adjacent = |x: usize, y: usize| edges.contains(&(x, y)) || edges.contains(&(y, x));
    assert!(adjacent(0, 1) && adjacent(1, 2), "{edges:?}");
    // D = 3: the posterior lists all 25 DAGs and its top graph is the best DAG.
    let post = out.posterior.as_ref().unwrap();
    assert_eq!(post.graphs.len(), 25);
    assert_eq!(post.graphs[0].edges, edges);
    let total: f64 = post.graphs.iter().map(|g| g.probability).sum();
    assert!((total - 1.0).abs() < 1e-9);
    assert_eq!(out.edge_probabilities, post.edge_probabilities);

    // Other knowledge, same data and settings: nothing new is fitted and the knowledge holds.
    let forbid = Knowledge::from_indices(3, vec![(0, 1), (1, 0)], vec![], None).unwrap();
    let again = run_exact(
        &data,
        &forbid,
        &settings(),
        &mut scores,
        &CpuBackend::new(Pool::new(2).unwrap()),
        |_, _, _| {},
        || false,
    )
    .unwrap();
    assert_eq!(again.families_fitted, 0);
    assert!(again.cache_hits > 0);
    assert!(!again.best.dag.adjacent(0, 1));
    assert!(again
        .posterior
        .unwrap()
        .graphs
        .iter()
        .all(|g| !g.edges.contains(&(0, 1)) && !g.edges.contains(&(1, 0))));
}

#[test]
fn a_stop_keeps_the_families_fitted_and_searches_over_them() {
    let data = chain();
    // Stop at once: nothing fitted, no graph.
    let mut empty = cache();
    let r = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut empty,
        &CpuBackend::new(Pool::new(1).unwrap()),
        |_, _, _| {},
        || true,
    );
    assert_eq!(r.unwrap_err(), ExactError::Stopped);
    assert!(empty.is_empty());
    // Stop after the first stage: a DAG over the empty and one-parent families.
    let mut partial = cache();
    let fitted = AtomicUsize::new(0);
    let out = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut partial,
        &CpuBackend::new(Pool::new(1).unwrap()),
        |_, _, _| {
            fitted.fetch_add(1, Ordering::Relaxed);
        },
        || fitted.load(Ordering::Relaxed) >= 9,
    )
    .unwrap();
    assert!(!out.complete);
    assert_eq!(partial.len(), 9);
    assert!(out.best.parents.iter().all(|p| p.count_ones() <= 1));
    // Bad settings are refused by name.
    let bad = ExactSettings {
        candidates: 0,
        ..settings()
    };
    let r = run_exact(
        &data,
        &Knowledge::none(3),
        &bad,
        &mut cache(),
        &CpuBackend::new(Pool::new(1).unwrap()),
        |_, _, _| {},
        || false,
    );
    assert!(matches!(r, Err(ExactError::Settings(m)) if m.contains("candidate parents")));
}

#[test]
fn stepping_one_family_at_a_time_gives_the_same_answer_as_the_batch_run() {
    use occam::discovery::exact::{ExactRun, ExactStage};
    use occam::discovery::family::{family_score, WarmStart};
    let data = chain();
    let mut batch_cache = cache();
    let batch = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut batch_cache,
        &CpuBackend::new(Pool::new(2).unwrap()),
        |_, _, _| {},
        || false,
    )
    .unwrap();
    // As the browser drives it: one family per step, progress known per stage.
    let mut run = ExactRun::new(3, Knowledge::none(3), settings(), cache()).unwrap();
    let mut steps = 0;
    assert_eq!(run.stage_progress(), (0, 9));
    while run.stage() != ExactStage::Scored {
        let family = run.todo()[0].clone();
        // A family of two parents starts from its best subset's fit, as the jobs start it.
        let warm = WarmStart::best_subset(&family, |k| {
            run.cache().get(k).and_then(|r| r.as_ref().ok())
        });
        let score = family_score(
            &data,
            family.0,
            &family.1,
            &settings().family,
            0,
            warm.as_ref(),
        );
        run.cache_mut().insert(family, score.map_err(Into::into));
        run.advance().unwrap();
        steps += 1;
    }
    assert_eq!(steps, 12);
    let stepped = run.outcome().unwrap();
    assert_eq!(stepped, batch);
    assert_eq!(run.cache(), &batch_cache);
    // Too many required parents for K is refused before anything is fitted.
    let k = Knowledge::from_indices(3, vec![], vec![(0, 2), (1, 2)], None).unwrap();
    let tight = ExactSettings {
        max_parents: 1,
        ..settings()
    };
    assert!(matches!(
        ExactRun::new(3, k, tight, cache()),
        Err(ExactError::Family(_))
    ));
}

/// A run stopped midway and resumed from its score cache read back from JSON (as `occam
/// discover` rereads score_cache.json) ends with the uninterrupted run's scores and DAG, fitting
/// only what was missing: the warm starts of the larger families read their subsets' fits from
/// the cache, which must survive the file bit for bit.
#[test]
fn a_stopped_run_resumed_from_its_cache_file_ends_as_the_uninterrupted_one() {
    let data = chain();
    let backend = CpuBackend::new(Pool::new(1).unwrap());
    let mut whole = cache();
    let uninterrupted = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut whole,
        &backend,
        |_, _, _| {},
        || false,
    )
    .unwrap();
    // Stop after the screening stage and one two-parent family (one family per batch).
    let mut part = cache();
    let fitted = AtomicUsize::new(0);
    let stopped = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut part,
        &backend,
        |_, _, _| {
            fitted.fetch_add(1, Ordering::Relaxed);
        },
        || fitted.load(Ordering::Relaxed) >= 10,
    )
    .unwrap();
    assert!(!stopped.complete);
    assert_eq!(part.len(), 10);
    let read = ScoreCache::from_json_for(&part.to_json(), &part.key).expect("the same key");
    assert_eq!(
        read, part,
        "the cache file holds every score and fit bit for bit"
    );
    let mut resumed_cache = read;
    let resumed = run_exact(
        &data,
        &Knowledge::none(3),
        &settings(),
        &mut resumed_cache,
        &backend,
        |_, _, _| {},
        || false,
    )
    .unwrap();
    assert_eq!(resumed.families_fitted, 2, "only the missing families");
    assert_eq!(resumed.cache_hits, 10);
    assert_eq!(resumed_cache, whole);
    assert_eq!(resumed.best, uninterrupted.best);
    assert_eq!(resumed.edge_probabilities, uninterrupted.edge_probabilities);
}
