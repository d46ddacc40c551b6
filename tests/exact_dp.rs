//! The exact DAG search against brute force: on random score tables for D = 2..5, with and
//! without prior knowledge and in-degree limits, the dynamic programme's DAG must have the highest
//! score among every DAG whose families are all admissible.

use occam::discovery::exact::{admissible_families, best_dag, Mask};
use occam::discovery::knowledge::Knowledge;
use occam::graph::{all_dags, Dag};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The parents of every variable of `dag` as masks.
fn parent_masks(dag: &Dag) -> Vec<Mask> {
    (0..dag.n())
        .map(|i| dag.parents(i).iter().fold(0, |m, &j| m | (1 << j)))
        .collect()
}

/// Σ_i score of i's family, or None when a family is not admissible.
fn brute_score(dag: &Dag, families: &[Vec<(Mask, f64)>]) -> Option<f64> {
    parent_masks(dag)
        .iter()
        .enumerate()
        .map(|(i, m)| families[i].iter().find(|(f, _)| f == m).map(|&(_, s)| s))
        .sum()
}

/// Random knowledge on `d` variables: a few forbidden and required edges, sometimes tiers, always
/// valid (redrawn until it is).
fn random_knowledge(d: usize, rng: &mut ChaCha8Rng) -> Knowledge {
    loop {
        let mut pick = || {
            let a = rng.random_range(0..d);
            let b = (a + rng.random_range(1..d)) % d;
            (a, b)
        };
        let forbidden = (0..2).map(|_| pick()).collect();
        let required = (0..1).map(|_| pick()).collect();
        let tiers = rng.random_bool(0.4).then(|| {
            (0..d)
                .map(|_| rng.random_bool(0.7).then(|| rng.random_range(0..2)))
                .collect()
        });
        if let Ok(k) = Knowledge::from_indices(d, forbidden, required, tiers) {
            return k;
        }
    }
}

#[test]
fn the_dynamic_programme_finds_the_best_dag_that_brute_force_finds() {
    let mut rng = ChaCha8Rng::seed_from_u64(2026);
    let mut checked = 0;
    for d in 2..=5 {
        let dags = all_dags(d).unwrap();
        for trial in 0..40 {
            let knowledge = if trial % 2 == 0 {
                Knowledge::none(d)
            } else {
                random_knowledge(d, &mut rng)
            };
            let max_parents = if trial % 3 == 0 {
                d - 1
            } else {
                rng.random_range(1..d)
            };
            // Candidate lists: everything, or a random subset that keeps the required parents.
            let families: Option<Vec<Vec<(Mask, f64)>>> = (0..d)
                .map(|i| {
                    let candidates: Vec<usize> = (0..d)
                        .filter(|&j| {
                            j != i
                                && (trial % 4 != 1
                                    || knowledge.is_required(j, i)
                                    || rng.random_bool(0.7))
                        })
                        .collect();
                    let masks =
                        admissible_families(i, &candidates, max_parents, &knowledge).ok()?;
                    // Scores on a coarse grid so ties happen and are handled.
                    Some(
                        masks
                            .into_iter()
                            .map(|m| (m, -(rng.random_range(0..40) as f64) / 4.0))
                            .collect(),
                    )
                })
                .collect();
            let Some(families) = families else {
                // Too many required parents for K: no table to test.
                continue;
            };
            let brute = dags
                .iter()
                .filter_map(|g| brute_score(g, &families))
                .fold(f64::NEG_INFINITY, f64::max);
            let found = best_dag(&families).unwrap();
            assert!(
                (found.score - brute).abs() < 1e-9,
                "d {d} trial {trial}: DP {} against brute force {brute}",
                found.score
            );
            // The DAG returned scores what the DP says, is admissible, and keeps the knowledge.
            assert_eq!(brute_score(&found.dag, &families), Some(found.score));
            assert_eq!(parent_masks(&found.dag), found.parents);
            for &(a, b) in knowledge.required() {
                assert!(found.dag.has_edge(a, b), "required {a} -> {b} missing");
            }
            for (a, b) in found.dag.edges() {
                assert!(knowledge.allowed(a, b), "{a} -> {b} is not allowed");
            }
            assert!((0..d).all(|i| found.dag.parents(i).len() <= max_parents));
            checked += 1;
        }
    }
    assert!(checked > 120, "only {checked} tables checked");
}
