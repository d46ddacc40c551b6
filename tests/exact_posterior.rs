//! The posterior over DAGs by enumeration, against hand computation (D = 2) and against
//! independent sums over the listed graphs (D = 3, 4), and its agreement with the exact search.

use occam::discovery::exact::{
    admissible_families, best_dag, enumerate_posterior, order_edge_probabilities, GraphPrior, Mask,
};
use occam::discovery::knowledge::Knowledge;
use occam::graph::{markov_equivalent, Dag};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn table(d: usize, knowledge: &Knowledge, rng: &mut ChaCha8Rng) -> Vec<Vec<(Mask, f64)>> {
    (0..d)
        .map(|i| {
            let candidates: Vec<usize> = (0..d).filter(|&j| j != i).collect();
            admissible_families(i, &candidates, d - 1, knowledge)
                .unwrap()
                .into_iter()
                .map(|m| (m, rng.random_range(-6.0..0.0)))
                .collect()
        })
        .collect()
}

#[test]
fn two_variables_match_the_hand_computed_posterior() {
    // F(0|∅) = −10, F(0|{1}) = −9, F(1|∅) = −10, F(1|{0}) = −8.
    let families = vec![
        vec![(0, -10.0), (0b10, -9.0)],
        vec![(0, -10.0), (0b01, -8.0)],
    ];
    let post = enumerate_posterior(&families, GraphPrior::Uniform).unwrap();
    // Scores: empty −20, 0 → 1 −18, 1 → 0 −19.
    let z = (-20f64).exp() + (-18f64).exp() + (-19f64).exp();
    let p01 = (-18f64).exp() / z;
    let p10 = (-19f64).exp() / z;
    assert_eq!(post.graphs.len(), 3);
    assert_eq!(post.graphs[0].edges, vec![(0, 1)]);
    assert!((post.graphs[0].probability - p01).abs() < 1e-12);
    assert!((post.edge_probabilities[0][1] - p01).abs() < 1e-12);
    assert!((post.edge_probabilities[1][0] - p10).abs() < 1e-12);
    assert_eq!(post.edge_probabilities[0][0], 0.0);
    // Two classes: the joined pair (both orientations) and the empty graph.
    assert_eq!(post.classes.len(), 2);
    assert!((post.classes[0].probability - (p01 + p10)).abs() < 1e-12);
    assert_eq!(post.classes[0].undirected, vec![(0, 1)]);
    assert_eq!(post.classes[0].members.len(), 2);
    assert!((post.best_class_probability - (p01 + p10)).abs() < 1e-12);

    // The edge-count prior with q = 0.2 adds log 0.2 to a joined pair and log 0.8 to the empty one.
    let post = enumerate_posterior(
        &families,
        GraphPrior::EdgeCount {
            edge_probability: 0.2,
        },
    )
    .unwrap();
    let (e, f, g) = (
        -20.0 + 0.8f64.ln(),
        -18.0 + 0.2f64.ln(),
        -19.0 + 0.2f64.ln(),
    );
    let z = e.exp() + f.exp() + g.exp();
    let empty = post.graphs.iter().find(|x| x.edges.is_empty()).unwrap();
    assert!((empty.probability - e.exp() / z).abs() < 1e-12);
    assert!(post.prior.contains("0.2"));
}

#[test]
fn sums_over_the_listed_graphs_agree_and_the_best_graph_is_the_exact_searchs() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for d in 3..=4 {
        for trial in 0..4 {
            let knowledge = if trial % 2 == 0 {
                Knowledge::none(d)
            } else {
                Knowledge::from_indices(d, vec![(0, 1)], vec![(2, 1)], None).unwrap()
            };
            let families = table(d, &knowledge, &mut rng);
            let post = enumerate_posterior(&families, GraphPrior::Uniform).unwrap();
            let total: f64 = post.graphs.iter().map(|g| g.probability).sum();
            assert!((total - 1.0).abs() < 1e-12);
            assert!(post
                .graphs
                .windows(2)
                .all(|w| w[0].probability >= w[1].probability));
            // Knowledge leaves no mass on a graph that breaks it.
            for g in &post.graphs {
                assert!(!g.edges.contains(&(0, 1)) || trial % 2 == 0);
                assert!(g.edges.contains(&(2, 1)) || trial % 2 == 0);
            }
            // Edge probabilities and class masses are sums over the listed graphs.
            for a in 0..d {
                for b in 0..d {
                    let sum: f64 = post
                        .graphs
                        .iter()
                        .filter(|g| g.edges.contains(&(a, b)))
                        .map(|g| g.probability)
                        .sum();
                    assert!((post.edge_probabilities[a][b] - sum).abs() < 1e-12);
                }
            }
            for (k, class) in post.classes.iter().enumerate() {
                let members: Vec<Dag> = class
                    .members
                    .iter()
                    .map(|&m| Dag::from_edges(d, &post.graphs[m].edges).unwrap())
                    .collect();
                assert!(members.iter().all(|m| markov_equivalent(m, &members[0])));
                let mass: f64 = class
                    .members
                    .iter()
                    .map(|&m| post.graphs[m].probability)
                    .sum();
                assert!((class.probability - mass).abs() < 1e-12);
                assert!(class.members.iter().all(|&m| post.graphs[m].class == k));
            }
            // The most probable graph under a uniform prior is the exact search's best DAG.
            let best = best_dag(&families).unwrap();
            assert!((post.graphs[0].log_score - best.score).abs() < 1e-9);
        }
    }
}

/// Every permutation of 0..n.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for k in 0..=p.len() {
            let mut q = p.clone();
            q.insert(k, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn order_probabilities_equal_enumeration_weighted_by_linear_extensions() {
    // The order-modular prior weights a DAG by its number of topological orders: recompute the
    // edge probabilities that way from the listed DAGs and compare with the dynamic programme.
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for d in 2..=5 {
        let orders = permutations(d);
        for trial in 0..3 {
            let knowledge = if trial == 1 && d >= 3 {
                Knowledge::from_indices(d, vec![(1, 0)], vec![(0, 2)], None).unwrap()
            } else {
                Knowledge::none(d)
            };
            // Scores spread over hundreds of nats, as real evidences are.
            let families: Vec<Vec<(Mask, f64)>> = table(d, &knowledge, &mut rng)
                .into_iter()
                .map(|f| f.into_iter().map(|(m, s)| (m, s * 60.0 - 500.0)).collect())
                .collect();
            let listed = enumerate_posterior(&families, GraphPrior::Uniform).unwrap();
            let weights: Vec<f64> = listed
                .graphs
                .iter()
                .map(|g| {
                    let position = |o: &Vec<usize>, v: usize| o.iter().position(|&x| x == v);
                    orders
                        .iter()
                        .filter(|o| {
                            g.edges
                                .iter()
                                .all(|&(a, b)| position(o, a) < position(o, b))
                        })
                        .count() as f64
                })
                .collect();
            let top = listed.graphs[0].log_score;
            let z: f64 = listed
                .graphs
                .iter()
                .zip(&weights)
                .map(|(g, w)| w * (g.log_score - top).exp())
                .sum();
            let expected = |a: usize, b: usize| -> f64 {
                listed
                    .graphs
                    .iter()
                    .zip(&weights)
                    .filter(|(g, _)| g.edges.contains(&(a, b)))
                    .map(|(g, w)| w * (g.log_score - top).exp())
                    .sum::<f64>()
                    / z
            };
            let got = order_edge_probabilities(&families).unwrap();
            for (a, row) in got.iter().enumerate() {
                for (b, &p) in row.iter().enumerate() {
                    assert!(
                        (p - expected(a, b)).abs() < 1e-9,
                        "d {d} trial {trial} edge {a}->{b}: {p} against {}",
                        expected(a, b)
                    );
                }
            }
        }
    }
}

#[test]
fn the_edge_count_prior_weighs_families_as_it_weighs_graphs() {
    // log p(G) = |E| log q + (pairs − |E|) log(1 − q) = Σ_i |pa(i)| log(q/(1−q)) + pairs log(1 − q):
    // the best DAG over the weighed families is the enumeration's most probable graph, and their
    // scores differ by the constant.
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let q = 0.2f64;
    let prior = GraphPrior::EdgeCount {
        edge_probability: q,
    };
    for d in 2..=5 {
        let families: Vec<Vec<(Mask, f64)>> = table(d, &Knowledge::none(d), &mut rng)
            .into_iter()
            .map(|f| f.into_iter().map(|(m, s)| (m, s * 3.0)).collect())
            .collect();
        let post = enumerate_posterior(&families, prior).unwrap();
        let best = best_dag(&prior.weigh_families(&families)).unwrap();
        let pairs = (d * (d - 1) / 2) as f64;
        assert!(
            (post.graphs[0].log_score - (best.score + pairs * (1.0 - q).ln())).abs() < 1e-9,
            "d {d}"
        );
        assert_eq!(post.graphs[0].edges, best.dag.edges());
    }
    // Uniform leaves the scores alone.
    let f = vec![vec![(0, -1.0), (0b10, -0.5)], vec![(0, -2.0)]];
    assert_eq!(GraphPrior::Uniform.weigh_families(&f), f);
}
