use super::*;
use crate::discovery::knowledge::{tiers_forbid, Knowledge};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The greedy rule keeps edges that lie on no cycle, where the prefix cut loses every edge
/// lighter than a strong 2-cycle.
#[test]
fn greedy_cut_keeps_light_edges_that_close_no_cycle() {
    // a ↔ b strongly (0.9 / 0.8), and a light chain c → d → e (0.1).
    let mut w = DMatrix::zeros(5, 5);
    w[(0, 1)] = 0.9;
    w[(1, 0)] = 0.8;
    w[(2, 3)] = 0.1;
    w[(3, 4)] = 0.1;
    let active = w.map(|v: f64| if v > 0.0 { 1.0 } else { 0.0 });
    let k = Knowledge::none(5);
    let prefix = threshold_to_dag(&w, &active, &k).unwrap();
    assert_eq!(prefix.edges(), vec![(0, 1)]);
    let greedy = AcyclicCut::new(&w, &active, &k).unwrap().greedy().unwrap();
    assert_eq!(greedy.edges(), vec![(0, 1), (2, 3), (3, 4)]);
}

/// On random weights and knowledge: the greedy result is a DAG with every required edge, no
/// forbidden or inactive one, and maximal (each candidate left out would close a cycle).
#[test]
fn greedy_cut_is_a_maximal_dag_that_respects_knowledge() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let names: Vec<String> = (0..6).map(|i| format!("v{i}")).collect();
    for _ in 0..200 {
        let d = 6;
        let w = DMatrix::from_fn(d, d, |i, j| {
            if i == j {
                0.0
            } else {
                rng.random_range(0.0..1.0)
            }
        });
        let active = DMatrix::from_fn(d, d, |i, j| {
            if i != j && rng.random_bool(0.7) {
                1.0
            } else {
                0.0
            }
        });
        let forbid = vec![format!("v{}->v{}", 0, rng.random_range(1..d))];
        let require = vec![format!("v{}->v{}", 2, rng.random_range(3..d))];
        let k = Knowledge::new(&names, &forbid, &require, None).unwrap();
        let dag = AcyclicCut::new(&w, &active, &k).unwrap().greedy().unwrap();
        let g = dag.as_digraph();
        for &(i, j) in k.required() {
            assert!(g.has_edge(i, j));
        }
        for i in 0..d {
            for j in 0..d {
                if i == j || g.has_edge(i, j) {
                    continue;
                }
                let candidate = active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0;
                if candidate {
                    assert!(
                        g.descendants(j)[i],
                        "{i}->{j} was dropped but closes no cycle"
                    );
                }
            }
        }
        for (i, j) in dag.edges() {
            assert!(k.allowed(i, j));
            assert!(k.is_required(i, j) || active[(i, j)] == 1.0);
        }
    }
}

fn ones(d: usize) -> DMatrix<f64> {
    DMatrix::from_element(d, d, 1.0)
}

fn weights(d: usize, edges: &[(usize, usize, f64)]) -> DMatrix<f64> {
    let mut w = DMatrix::zeros(d, d);
    for &(i, j, v) in edges {
        w[(i, j)] = v;
    }
    w
}

#[test]
fn three_cycle_loses_exactly_its_lightest_edge() {
    let w = weights(3, &[(0, 1, 0.9), (1, 2, 0.5), (2, 0, 0.7)]);
    let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1), (2, 0)]);
}

#[test]
fn acyclic_input_is_kept_whole() {
    let w = weights(4, &[(0, 1, 0.1), (1, 2, 0.2), (0, 3, 0.01), (3, 2, 5.0)]);
    let dag = threshold_to_dag(&w, &ones(4), &Knowledge::none(4)).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1), (0, 3), (1, 2), (3, 2)]);
}

#[test]
fn ties_are_broken_by_edge_order() {
    let w = weights(2, &[(0, 1, 0.5), (1, 0, 0.5)]);
    let dag = threshold_to_dag(&w, &ones(2), &Knowledge::none(2)).unwrap();
    assert_eq!(dag.edges(), vec![(1, 0)]);
}

#[test]
fn required_edge_with_zero_weight_is_kept_and_a_heavier_edge_goes() {
    // Required 0 → 1 with weight 0 (and even inactive in the mask); 1 → 2 (0.9) and
    // 2 → 0 (0.8) close the cycle 0 → 1 → 2 → 0 with it. The lightest non-required edge,
    // 2 → 0, goes although it is far heavier than the required edge.
    let k = Knowledge::from_indices(3, vec![], vec![(0, 1)], None).unwrap();
    let w = weights(3, &[(1, 2, 0.9), (2, 0, 0.8)]);
    let mut active = ones(3);
    active[(0, 1)] = 0.0;
    let dag = threshold_to_dag(&w, &active, &k).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1), (1, 2)]);
    // Without the requirement the zero-weight edge is absent and nothing needs removing.
    let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
    assert_eq!(dag.edges(), vec![(1, 2), (2, 0)]);
    // A 2-cycle against a light required edge: the heavy reverse edge goes.
    let w = weights(2, &[(0, 1, 0.1), (1, 0, 0.9)]);
    let k = Knowledge::from_indices(2, vec![], vec![(0, 1)], None).unwrap();
    let dag = threshold_to_dag(&w, &ones(2), &k).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1)]);
}

#[test]
fn lightest_edges_go_first_even_off_the_remaining_cycle() {
    // The paper's rule, not a minimum feedback arc set: with required 0 → 1, the cycles
    // 0 → 1 → 0 and 0 → 1 → 2 → 0 are broken by dropping 2 → 0 (0.6), then 1 → 2 (0.8), then
    // 1 → 0 (0.9); only the last removal was needed for 0 → 1 → 0, but 1 → 2 was lighter.
    let k = Knowledge::from_indices(3, vec![], vec![(0, 1)], None).unwrap();
    let w = weights(3, &[(1, 0, 0.9), (1, 2, 0.8), (2, 0, 0.6)]);
    let dag = threshold_to_dag(&w, &ones(3), &k).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1)]);
}

#[test]
fn forbidden_inactive_and_tier_violating_edges_never_appear() {
    let cols = names(&["a", "b", "c"]);
    let k = Knowledge::new(&cols, &strs(&["a->b"]), &[], Some("a\nb\nc")).unwrap();
    let w = weights(
        3,
        &[
            (0, 1, 100.0),
            (2, 0, 50.0),
            (1, 2, 0.1),
            (0, 2, 0.2),
            (2, 1, 70.0),
        ],
    );
    let mut active = ones(3);
    active[(0, 2)] = 0.0;
    let dag = threshold_to_dag(&w, &active, &k).unwrap();
    // a→b forbidden, c→a and c→b backward in the tiers, a→c inactive: only b→c is left.
    assert_eq!(dag.edges(), vec![(1, 2)]);
}

#[test]
fn zero_weights_mean_no_edge() {
    let w = weights(3, &[(0, 1, 0.0), (1, 2, 1e-300)]);
    let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
    assert_eq!(dag.edges(), vec![(1, 2)]);
}

#[test]
fn bad_matrices_are_errors_not_panics() {
    let k = Knowledge::none(3);
    let err = threshold_to_dag(&DMatrix::zeros(2, 3), &ones(3), &k).unwrap_err();
    assert!(
        matches!(err, KnowledgeError::InvalidMatrix { .. }),
        "{err:?}"
    );
    let err = threshold_to_dag(&DMatrix::zeros(3, 3), &ones(4), &k).unwrap_err();
    assert!(err.to_string().contains("active mask"), "{err}");
    for bad in [f64::NAN, f64::INFINITY, -0.5] {
        let w = weights(3, &[(0, 2, bad)]);
        let err = threshold_to_dag(&w, &ones(3), &k).unwrap_err();
        assert!(err.to_string().contains("weight (0, 2)"), "{bad}: {err}");
    }
    let mut active = ones(3);
    active[(1, 0)] = 0.5;
    let err = threshold_to_dag(&DMatrix::zeros(3, 3), &active, &k).unwrap_err();
    assert!(err.to_string().contains("(1, 0)"), "{err}");
    // Diagonals are ignored, whatever they hold.
    let mut w = DMatrix::zeros(3, 3);
    w[(1, 1)] = f64::NAN;
    let mut active = ones(3);
    active[(2, 2)] = 0.3;
    assert!(threshold_to_dag(&w, &active, &k).is_ok());
}

/// The paper's rule taken literally: while the graph has a cycle, drop the lightest remaining
/// non-required edge (ties: smallest (i, j)), re-checking acyclicity by DFS each time.
fn brute_force(w: &DMatrix<f64>, active: &DMatrix<f64>, k: &Knowledge) -> Digraph {
    let d = k.d();
    let mut g = Digraph::empty(d);
    for i in 0..d {
        for j in 0..d {
            let candidate = i != j && active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0;
            if candidate || k.is_required(i, j) {
                g.add_edge(i, j).unwrap();
            }
        }
    }
    while !g.is_acyclic() {
        let mut lightest: Option<(f64, usize, usize)> = None;
        for (i, j) in g.edges() {
            if k.is_required(i, j) {
                continue;
            }
            let v = w[(i, j)];
            if lightest.is_none_or(|(lv, li, lj)| v < lv || (v == lv && (i, j) < (li, lj))) {
                lightest = Some((v, i, j));
            }
        }
        let (_, i, j) = lightest.expect("a cycle with only required edges");
        g.remove_edge(i, j);
    }
    g
}

fn random_knowledge(rng: &mut ChaCha8Rng, d: usize) -> Knowledge {
    let tiers = rng.random_bool(0.5).then(|| {
        (0..d)
            .map(|_| rng.random_bool(0.7).then(|| rng.random_range(0..3)))
            .collect::<Vec<_>>()
    });
    let mut order: Vec<usize> = (0..d).collect();
    order.shuffle(rng);
    let pos = |v: usize| order.iter().position(|&x| x == v).unwrap();
    let mut required = Vec::new();
    let mut forbidden = Vec::new();
    for i in 0..d {
        for j in 0..d {
            if i == j {
                continue;
            }
            let tier_ok = !tiers_forbid(tiers.as_deref(), i, j);
            if pos(i) < pos(j) && tier_ok && rng.random_bool(0.15) {
                required.push((i, j));
            } else if rng.random_bool(0.1) {
                forbidden.push((i, j));
            }
        }
    }
    Knowledge::from_indices(d, forbidden, required, tiers).unwrap()
}

#[test]
fn matches_brute_force_on_random_graphs() {
    let mut rng = ChaCha8Rng::seed_from_u64(20_240_517);
    let mut removed_total = 0usize;
    for case in 0..200 {
        let d = rng.random_range(2..8);
        let k = if rng.random_bool(0.3) {
            Knowledge::none(d)
        } else {
            random_knowledge(&mut rng, d)
        };
        // Half the cases draw from a few levels, so ties and zeros are common.
        let coarse = rng.random_bool(0.5);
        let w = DMatrix::from_fn(d, d, |_, _| {
            if coarse {
                f64::from(rng.random_range(0..4u8)) / 4.0
            } else if rng.random_bool(0.1) {
                0.0
            } else {
                rng.random::<f64>()
            }
        });
        let active = DMatrix::from_fn(d, d, |_, _| f64::from(u8::from(rng.random_bool(0.85))));

        let dag = threshold_to_dag(&w, &active, &k).unwrap();
        let reference = brute_force(&w, &active, &k);
        assert_eq!(dag.edges(), reference.edges(), "case {case}, d = {d}");
        assert!(dag.topological_order().is_ok() && dag.find_cycle().is_none());
        for &(i, j) in k.required() {
            assert!(dag.has_edge(i, j), "case {case}: required {i} → {j} lost");
        }
        for (i, j) in dag.edges() {
            assert!(k.allowed(i, j), "case {case}: {i} → {j} not allowed");
            assert!(
                k.is_required(i, j) || (active[(i, j)] == 1.0 && w[(i, j)] > 0.0),
                "case {case}: {i} → {j} was not a candidate"
            );
        }
        let candidates = (0..d)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .filter(|&(i, j)| {
                k.is_required(i, j)
                    || (i != j && active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0)
            })
            .count();
        removed_total += candidates - dag.edge_count();
    }
    // The random cases must actually exercise the removal, not only pass acyclic inputs.
    assert!(removed_total > 100, "only {removed_total} edges removed");
}

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    names(v)
}
