//! Random DAG generators: edge counts against their distributions, the label permutation, and the
//! scale-free hub structure.

use occam::generate::{random_dag, GraphKind};
use occam::graph::Dag;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn dag(kind: GraphKind, nodes: usize, k: usize, seed: u64) -> Dag {
    random_dag(kind, nodes, k, &mut ChaCha8Rng::seed_from_u64(seed))
}

fn in_degrees(g: &Dag) -> Vec<usize> {
    (0..g.n()).map(|j| g.parents(j).len()).collect()
}

/// True iff every edge i → j has i < j, i.e. the column order is topological.
fn identity_is_topological(g: &Dag) -> bool {
    g.edges().iter().all(|&(i, j)| i < j)
}

#[test]
fn er_mean_edge_count_is_k_times_d() {
    // D = 10: each of the 45 forward pairs is an edge with p = 2k/9, so a graph's edge count is
    // Binomial(45, p) with mean 45p = 10k and variance 45p(1 − p). The mean of 400 independent
    // graphs has standard error √(45p(1 − p)/400); allow 4 of them.
    let (d, seeds) = (10usize, 400u64);
    let pairs = (d * (d - 1) / 2) as f64;
    for k in [1usize, 4] {
        let p = 2.0 * k as f64 / (d - 1) as f64;
        let total: usize = (0..seeds)
            .map(|s| dag(GraphKind::Er, d, k, s).edge_count())
            .sum();
        let mean = total as f64 / seeds as f64;
        let se = (pairs * p * (1.0 - p) / seeds as f64).sqrt();
        let expected = (k * d) as f64;
        assert!(
            (mean - expected).abs() < 4.0 * se,
            "k = {k}: mean {mean}, expected {expected} ± {se}"
        );
    }
}

#[test]
fn sf_edge_counts_are_exact_and_out_degrees_at_most_k() {
    for d in [1usize, 2, 3, 10, 20, 50] {
        for k in [1usize, 2, 4] {
            let expected: usize = (0..d).map(|t| t.min(k)).sum();
            for seed in 0..5 {
                let g = dag(GraphKind::Sf, d, k, seed);
                assert_eq!(g.n(), d);
                assert_eq!(g.edge_count(), expected, "D = {d}, k = {k}, seed {seed}");
                // Each node sends edges only when it joins, at most k of them.
                assert!((0..d).all(|i| g.children(i).len() <= k));
                assert!(g.is_acyclic());
            }
        }
    }
    // The README's counts: SF1 has D − 1 edges; SF4 has 30 (D = 10) and 70 (D = 20).
    assert_eq!(dag(GraphKind::Sf, 20, 1, 7).edge_count(), 19);
    assert_eq!(dag(GraphKind::Sf, 10, 4, 7).edge_count(), 30);
    assert_eq!(dag(GraphKind::Sf, 20, 4, 7).edge_count(), 70);
}

#[test]
fn node_labels_are_permuted() {
    let seeds = 200u64;
    for &kind in GraphKind::ALL {
        let graphs: Vec<Dag> = (0..seeds).map(|s| dag(kind, 10, 1, s)).collect();
        // With ~10 edges in random label order, the column order is topological only by luck.
        let topological = graphs.iter().filter(|g| identity_is_topological(g)).count();
        assert!(topological < seeds as usize / 10, "{kind}: {topological}");
        // Edges point both up and down the column order (neither order is built in).
        let up = graphs
            .iter()
            .flat_map(|g| g.edges())
            .filter(|&(i, j)| i < j);
        let down = graphs
            .iter()
            .flat_map(|g| g.edges())
            .filter(|&(i, j)| i > j);
        let (up, down) = (up.count(), down.count());
        assert!(up > 0 && down > 0);
        // By symmetry of the permutation, each direction carries about half of the edges.
        let total = (up + down) as f64;
        assert!((up as f64 / total - 0.5).abs() < 4.0 * (0.25 / total).sqrt());
    }
    // SF: the node with most parents (the oldest node, in position) lands on many labels.
    let hub_labels: std::collections::BTreeSet<usize> = (0..seeds)
        .map(|s| {
            let deg = in_degrees(&dag(GraphKind::Sf, 10, 1, s));
            (0..10).max_by_key(|&j| (deg[j], j)).unwrap()
        })
        .collect();
    assert_eq!(hub_labels.len(), 10, "{hub_labels:?}");
}

#[test]
fn sf_hubs_have_many_parents() {
    // Preferential attachment concentrates in-degree: with D = 50 and k = 1 the mean in-degree is
    // 49/50, yet the largest is several times that, and clearly larger than in ER graphs of the
    // same expected size (whose in-degrees are about Binomial with mean ≈ 1).
    let (d, k, seeds) = (50usize, 1usize, 40u64);
    let max_in = |kind: GraphKind| -> f64 {
        (0..seeds)
            .map(|s| *in_degrees(&dag(kind, d, k, s)).iter().max().unwrap() as f64)
            .sum::<f64>()
            / seeds as f64
    };
    let (sf, er) = (max_in(GraphKind::Sf), max_in(GraphKind::Er));
    let mean_in = (d - 1) as f64 / d as f64;
    assert!(sf > 6.0 * mean_in, "SF mean max in-degree {sf}");
    assert!(sf > 1.5 * er, "SF {sf} vs ER {er}");
}

#[test]
fn graphs_are_deterministic_for_a_seed_and_vary_across_seeds() {
    for &kind in GraphKind::ALL {
        for k in [1, 4] {
            assert_eq!(dag(kind, 15, k, 42), dag(kind, 15, k, 42));
            let distinct: std::collections::HashSet<Dag> =
                (0..10).map(|s| dag(kind, 15, k, s)).collect();
            assert!(distinct.len() >= 9, "{kind}{k}: {}", distinct.len());
        }
    }
}
