//! CPDAGs against the GraN-DAG Syntren fixtures, and Markov equivalence over every 3-node DAG.

use std::collections::HashSet;
use std::path::PathBuf;

use occam::graph::{all_dags, cpdag, markov_equivalent, read_adjacency, Dag, Pdag};

fn fixture(name: &str) -> String {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests",
        "fixtures",
        "syntren",
        name,
    ]
    .iter()
    .collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn cpdag_of_each_syntren_truth_equals_the_shipped_cpdag() {
    let mut undirected_total = 0;
    for k in 1..=10 {
        let truth = read_adjacency(&fixture(&format!("syntren{k:02}_truth.csv")), None).unwrap();
        let truth = Dag::try_from(truth).unwrap();
        let shipped = read_adjacency(&fixture(&format!("syntren{k:02}_cpdag.csv")), None).unwrap();
        let shipped = Pdag::from_matrix(&shipped.to_matrix()).unwrap();
        let ours = cpdag(&truth);
        assert_eq!(ours.n(), 20);
        assert_eq!(ours, shipped, "syntren{k:02}");
        assert_eq!(ours.to_matrix(), shipped.to_matrix(), "syntren{k:02}");
        // Same skeleton as the DAG, and every DAG edge either kept or made undirected.
        for (a, b) in truth.edges() {
            assert!(ours.has_directed(a, b) || ours.has_undirected(a, b));
        }
        undirected_total += ours.undirected_edges().len();
    }
    // The fixtures are not trivially all-directed: the comparison exercised undirected edges.
    assert!(undirected_total > 0);
}

#[test]
fn markov_equivalence_matches_cpdag_equality_over_all_three_node_dags() {
    let dags = all_dags(3).unwrap();
    assert_eq!(dags.len(), 25);
    for a in &dags {
        for b in &dags {
            assert_eq!(
                markov_equivalent(a, b),
                cpdag(a) == cpdag(b),
                "{:?} vs {:?}",
                a.edges(),
                b.edges()
            );
        }
    }
    let classes: HashSet<Pdag> = dags.iter().map(cpdag).collect();
    assert_eq!(classes.len(), 11);
    // Class sizes: 1 empty, 3 single edges (2 DAGs each), 3 chains/forks over a path (3 DAGs
    // each), 3 colliders (1 each), 1 complete skeleton (6 DAGs): 1 + 6 + 9 + 3 + 6 = 25.
    let mut sizes: Vec<usize> = classes
        .iter()
        .map(|c| dags.iter().filter(|d| &cpdag(d) == c).count())
        .collect();
    sizes.sort_unstable();
    assert_eq!(sizes, vec![1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 6]);
}

#[test]
fn every_dag_in_a_class_extends_its_cpdag() {
    // Directed CPDAG edges are shared by the whole class; undirected ones are oriented both ways
    // by some member (checked over all 543 four-node DAGs).
    let dags = all_dags(4).unwrap();
    // 185 equivalence classes on four labelled nodes (OEIS A007984: 1, 2, 11, 185, 8782).
    let classes: HashSet<Pdag> = dags.iter().map(cpdag).collect();
    assert_eq!(classes.len(), 185);
    for d in &dags {
        let c = cpdag(d);
        let members: Vec<&Dag> = dags.iter().filter(|e| markov_equivalent(d, e)).collect();
        for (a, b) in c.directed_edges() {
            assert!(members.iter().all(|m| m.has_edge(a, b)));
        }
        for (a, b) in c.undirected_edges() {
            assert!(members.iter().any(|m| m.has_edge(a, b)));
            assert!(members.iter().any(|m| m.has_edge(b, a)));
        }
    }
}

#[test]
fn five_node_dags_fall_into_the_known_number_of_classes() {
    // OEIS A007984: 8782 Markov equivalence classes among the 29281 DAGs on five labelled nodes.
    let classes: HashSet<Pdag> = all_dags(5).unwrap().iter().map(cpdag).collect();
    assert_eq!(classes.len(), 8782);
}
