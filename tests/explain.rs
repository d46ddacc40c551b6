//! Explaining a DAG by its evidence (issue 15) on data with a known structure: removing a true
//! edge costs many nats, reversing a collider's edge loses evidence, the numbers are the direct
//! differences of the family scores, and the fitted conditional of y = sin(2x) + noise follows
//! sin(2x) with a band that covers about 80 % of the points.

use std::time::Instant;

use nalgebra::DMatrix;
use occam::data::standardise;
use occam::discovery::explain::{
    fitted_conditional, strongest_parent, CurveSettings, EdgeEvidence, EdgeEvidencePlan, Reversal,
};
use occam::discovery::family::{family_score, FamilyScoreSettings};
use occam::engine::explain_edges;
use occam::graph::Dag;
use occam::runner::{CpuBackend, Pool};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// Short fits: enough for the large evidence gaps these tests look at.
fn quick() -> FamilyScoreSettings {
    FamilyScoreSettings {
        restarts: 2,
        adam_steps: 100,
        lbfgs_iterations: 100,
        ..FamilyScoreSettings::with_inducing(12)
    }
}

/// Standardised columns as an N × D matrix.
fn matrix(columns: &[Vec<f64>]) -> DMatrix<f64> {
    let columns: Vec<Vec<f64>> = columns.iter().map(|c| standardise(c)).collect();
    DMatrix::from_fn(columns[0].len(), columns.len(), |r, c| columns[c][r])
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    rng.sample(StandardNormal)
}

/// a → c ← b with c = tanh(2a) + 0.6 b² + noise: a and b are independent, and dependent given c.
fn collider(n: usize, seed: u64) -> DMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
    let b: Vec<f64> = (0..n).map(|_| normal(&mut rng)).collect();
    let c: Vec<f64> = (0..n)
        .map(|r| (2.0 * a[r]).tanh() + 0.6 * b[r] * b[r] + 0.2 * normal(&mut rng))
        .collect();
    matrix(&[a, b, c])
}

/// a → b → c with b = sin(2a) + noise and c = b² + noise.
fn chain(n: usize, seed: u64) -> DMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let a: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let b: Vec<f64> = a
        .iter()
        .map(|&v| (2.0 * v).sin() + 0.2 * normal(&mut rng))
        .collect();
    let c: Vec<f64> = b.iter().map(|&v| v * v + 0.2 * normal(&mut rng)).collect();
    matrix(&[a, b, c])
}

fn edge(evidence: &[EdgeEvidence], from: usize, to: usize) -> &EdgeEvidence {
    evidence
        .iter()
        .find(|e| (e.from, e.to) == (from, to))
        .expect("the edge was explained")
}

/// On a 500-row nonlinear chain, removing either true edge costs tens of nats (very strong
/// evidence for keeping it), and the numbers do not depend on how many threads ran the fits.
#[test]
fn removing_a_true_edge_of_a_chain_costs_many_nats() {
    let started = Instant::now();
    let data = chain(500, 1);
    let dag = Dag::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
    let backend = CpuBackend::new(Pool::new(2).unwrap());
    let evidence = explain_edges(&backend, &data, &dag, quick(), 3).unwrap();
    let names: Vec<String> = ["A", "B", "C"].map(String::from).to_vec();
    for e in &evidence {
        eprintln!(
            "{} → {}: removed {:.1}, reversed {:?}\n  {}\n  {}",
            e.from,
            e.to,
            e.removed,
            e.reversed_delta(),
            e.removal_words(&names),
            e.reversal_words(&names)
        );
        assert!(e.removed < -20.0, "{e:?}");
        assert!(e.removal_words(&names).contains("very strong evidence"));
    }
    assert_eq!(strongest_parent(&evidence, 1), Some(0));
    let serial = explain_edges(&CpuBackend::serial(), &data, &dag, quick(), 3).unwrap();
    assert_eq!(serial, evidence);
    eprintln!("took {:.1} s", started.elapsed().as_secs_f64());
}

/// On a 500-row collider a → c ← b, removing either edge costs many nats, and reversing a → c
/// (to b → c → a, which makes a and b dependent) loses evidence too; each number is the direct
/// difference of `family_score` values.
#[test]
fn a_collider_edge_loses_evidence_when_reversed_and_the_numbers_are_family_differences() {
    let started = Instant::now();
    let data = collider(500, 2);
    let dag = Dag::from_edges(3, &[(0, 2), (1, 2)]).unwrap();
    let plan = EdgeEvidencePlan::new(&dag, quick(), 5).unwrap();
    let backend = CpuBackend::new(Pool::new(2).unwrap());
    let evidence = plan.assemble(&occam::runner::Backend::run(&backend, &data, &plan.jobs()));
    let evidence = evidence.unwrap();
    let a_to_c = edge(&evidence, 0, 2);
    eprintln!("{a_to_c:?}");
    eprintln!("{:?}", edge(&evidence, 1, 2));
    assert!(a_to_c.removed < -20.0, "{a_to_c:?}");
    assert!(edge(&evidence, 1, 2).removed < -20.0);
    let Reversal::Scored {
        parent_family,
        parent_family_reversed,
        delta,
    } = a_to_c.reversed
    else {
        panic!("a → c reverses without a cycle")
    };
    assert!(delta < -5.0, "reversing a → c gains {delta}");

    // The same numbers from family_score directly.
    let f = |child: usize, parents: &[usize]| {
        family_score(&data, child, parents, &quick(), 5, None)
            .unwrap()
            .value
    };
    let (c_ab, c_b, a_none, a_c) = (f(2, &[0, 1]), f(2, &[1]), f(0, &[]), f(0, &[2]));
    assert_eq!(a_to_c.child_family, c_ab);
    assert_eq!(a_to_c.child_family_without, c_b);
    assert_eq!(a_to_c.removed, c_b - c_ab);
    assert_eq!(parent_family, a_none);
    assert_eq!(parent_family_reversed, a_c);
    assert_eq!(delta, (c_b + a_c) - (c_ab + a_none));
    eprintln!("took {:.1} s", started.elapsed().as_secs_f64());
}

/// y = sin(2x) + 0.1 noise on 200 rows: the fitted conditional's mean follows sin(2x) (in
/// standardised units) and its 10–90 % band holds about 80 % of the points.
#[test]
fn the_fitted_conditional_of_a_sine_follows_it() {
    let started = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let n = 200;
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let y: Vec<f64> = x
        .iter()
        .map(|&v| (2.0 * v).sin() + 0.1 * normal(&mut rng))
        .collect();
    let moments = |v: &[f64]| {
        let m = v.iter().sum::<f64>() / v.len() as f64;
        let s = (v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        (m, s)
    };
    let ((mx, sx), (my, sy)) = (moments(&x), moments(&y));
    let data = matrix(&[x, y]);
    let settings = FamilyScoreSettings {
        restarts: 2,
        adam_steps: 200,
        lbfgs_iterations: 200,
        ..FamilyScoreSettings::with_inducing(20)
    };
    let curve_settings = CurveSettings::default();
    let curve = fitted_conditional(&data, 1, &[0], 0, &settings, 4, &curve_settings).unwrap();
    assert_eq!(curve.grid.len(), curve_settings.grid_points);
    assert_eq!(curve.points.len(), n);
    assert!(curve.held_at.is_empty());
    // The curve is of the model that was scored.
    let score = family_score(&data, 1, &[0], &settings, 4, None).unwrap();
    assert_eq!(curve.score, score);

    let truth = |g: f64| ((2.0 * (g * sx + mx)).sin() - my) / sy;
    let mut worst: f64 = 0.0;
    for (g, m) in curve.grid.iter().zip(&curve.mean) {
        worst = worst.max((m - truth(*g)).abs());
    }
    eprintln!(
        "largest |mean − sin| {worst:.3} (standardised units; noise sd {:.3})",
        0.1 / sy
    );
    assert!(worst < 0.15, "the mean is {worst} from sin(2x)");
    for g in 0..curve.grid.len() {
        assert!(curve.lower[g] < curve.mean[g] && curve.mean[g] < curve.upper[g]);
    }

    // The band at each point's x, by linear interpolation on the grid.
    let band = |v: f64| {
        let step = curve.grid[1] - curve.grid[0];
        let k = (((v - curve.grid[0]) / step).floor() as usize).min(curve.grid.len() - 2);
        let t = (v - curve.grid[k]) / step;
        let lerp = |a: &[f64]| a[k] + t * (a[k + 1] - a[k]);
        (lerp(&curve.lower), lerp(&curve.upper))
    };
    let inside = curve
        .points
        .iter()
        .filter(|[px, py]| {
            let (lo, hi) = band(*px);
            lo <= *py && *py <= hi
        })
        .count() as f64
        / n as f64;
    eprintln!(
        "{:.0} % of the points inside the 10–90 % band",
        100.0 * inside
    );
    assert!((0.7..=0.9).contains(&inside), "{inside}");
    // It travels as JSON.
    let back: occam::discovery::explain::ConditionalCurve =
        serde_json::from_str(&serde_json::to_string(&curve).unwrap()).unwrap();
    assert_eq!(back, curve);
    eprintln!("took {:.1} s", started.elapsed().as_secs_f64());
}

/// Requests that do not fit are errors, not panics.
#[test]
fn bad_requests_are_named_errors() {
    let data = chain(30, 0);
    let s = quick();
    let c = CurveSettings::default();
    assert!(fitted_conditional(&data, 1, &[0], 2, &s, 0, &c).is_err());
    assert!(fitted_conditional(&data, 5, &[0], 0, &s, 0, &c).is_err());
    assert!(fitted_conditional(&data, 1, &[1], 1, &s, 0, &c).is_err());
    let few = CurveSettings {
        grid_points: 1,
        ..c
    };
    assert!(fitted_conditional(&data, 1, &[0], 0, &s, 0, &few).is_err());
    let wide = Dag::from_edges(4, &[(0, 1)]).unwrap();
    assert!(explain_edges(&CpuBackend::serial(), &data, &wide, s, 0).is_err());
}
