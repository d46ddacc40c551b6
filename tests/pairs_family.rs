//! The two-variable direction test of `occam pairs` is the D = 2 case of the exact search: its
//! evidence gap equals the score gap of the DAGs X → Y and Y → X in the exact posterior, and it
//! orients a clear non-linear pair.

use nalgebra::DMatrix;
use occam::data::standardise;
use occam::discovery::bivariate::{direction_evidence_by_family, Direction};
use occam::discovery::exact::{CacheKey, ExactSettings, GraphPrior, ScoreCache};
use occam::discovery::family::{family_score, FamilyScoreSettings};
use occam::discovery::knowledge::Knowledge;
use occam::engine::run_exact;
use occam::runner::{CpuBackend, Pool};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// x uniform on (−2, 2), y = 2 tanh(1.5x) + 0.3x² + noise: an additive-noise pair whose reverse
/// model needs input-dependent noise.
fn clear_pair(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let y: Vec<f64> = x
        .iter()
        .map(|&v| 2.0 * (1.5 * v).tanh() + 0.3 * v * v + 0.2 * rng.sample::<f64, _>(StandardNormal))
        .collect();
    (standardise(&x), standardise(&y))
}

fn family_settings() -> FamilyScoreSettings {
    FamilyScoreSettings {
        restarts: 2,
        adam_steps: 150,
        lbfgs_iterations: 150,
        ..FamilyScoreSettings::with_inducing(15)
    }
}

#[test]
fn the_pair_gap_is_the_exact_searchs_score_gap_of_the_two_one_edge_dags() {
    let (x, y) = clear_pair(120, 3);
    let seed = 17;
    let evidence = direction_evidence_by_family(&x, &y, &family_settings(), seed);
    let gap = evidence.difference().expect("every component fitted");

    let data = DMatrix::from_fn(x.len(), 2, |r, c| if c == 0 { x[r] } else { y[r] });
    let settings = ExactSettings {
        max_parents: 1,
        candidates: 1,
        family: family_settings(),
        prior: GraphPrior::Uniform,
        prune_below: None,
        few_rows: None,
        widen_saturated: 0,
    };
    let mut cache = ScoreCache::new(CacheKey::new("pair", family_settings(), seed));
    let outcome = run_exact(
        &data,
        &Knowledge::none(2),
        &settings,
        &mut cache,
        &CpuBackend::new(Pool::new(1).unwrap()),
        |_, _, _| {},
        || false,
    )
    .expect("the exact search runs on two variables");
    let posterior = outcome.posterior.expect("D = 2 lists every DAG");
    assert_eq!(posterior.graphs.len(), 3, "empty, X → Y and Y → X");
    let score = |edges: &[(usize, usize)]| {
        posterior
            .graphs
            .iter()
            .find(|g| g.edges == edges)
            .map(|g| g.log_score)
            .expect("graph listed")
    };
    let exact_gap = score(&[(0, 1)]) - score(&[(1, 0)]);
    assert!(
        (gap - exact_gap).abs() < 1e-9,
        "pairs gap {gap} vs exact search gap {exact_gap}"
    );
    // The components are family scores, floors included.
    let conditional = family_score(&data, 1, &[0], &family_settings(), seed, None).unwrap();
    assert_eq!(
        evidence.conditional_y_given_x.bound,
        Some(conditional.value)
    );
    assert!(conditional.value >= conditional.floor);
}

#[test]
fn the_family_direction_test_orients_a_clear_non_linear_pair() {
    let (x, y) = clear_pair(150, 8);
    let forward = direction_evidence_by_family(&x, &y, &family_settings(), 1);
    assert_eq!(
        forward.decide(0.5),
        Some(Direction::XToY),
        "gap {:?}",
        forward.difference()
    );
    // Swapping the columns swaps the answer.
    let backward = direction_evidence_by_family(&y, &x, &family_settings(), 1);
    assert_eq!(backward.decide(0.5), Some(Direction::YToX));
}
