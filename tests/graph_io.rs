//! Round trips through every graph format that has a reader, with hostile names, and the plain
//! `shared/data` matrix layout on the Syntren fixtures.

use std::path::PathBuf;

use occam::graph::{
    read_adjacency, read_edge_list, read_graph_json, to_adjacency_csv, to_edge_list_csv,
    to_graph_json, Digraph, GraphIoError,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Names chosen to break naive writers: quotes, backslashes, markup, delimiters of every format,
/// a comment marker, a line break, non-ASCII text.
fn hostile_names() -> Vec<String> {
    [
        "a \"b\"\\c",
        "<img src=x onerror=alert(1)>",
        "x,y",
        "#not a comment",
        "semi;colon",
        "two\nlines",
        "tab\there",
        "ünï cødé ✓",
        "plain",
        "\"",
        "ends\\",
        "from",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn random_digraph(rng: &mut ChaCha8Rng, n: usize, p: f64) -> Digraph {
    let mut g = Digraph::empty(n);
    for i in 0..n {
        for j in 0..n {
            if i != j && rng.random_bool(p) {
                g.add_edge(i, j).unwrap();
            }
        }
    }
    g
}

#[test]
fn every_readable_format_round_trips_with_hostile_names() {
    let all_names = hostile_names();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..60 {
        let n = rng.random_range(1..=all_names.len());
        let names = &all_names[..n];
        // Cyclic graphs included: predictions and consensus truths can be cyclic.
        let g = random_digraph(&mut rng, n, 0.3);

        let csv = to_adjacency_csv(&g, names);
        assert_eq!(read_adjacency(&csv, Some(names)).unwrap(), g, "{csv}");
        assert_eq!(read_adjacency(&csv, None).unwrap(), g, "{csv}");

        let edges = to_edge_list_csv(&g, names);
        assert_eq!(read_edge_list(&edges, names).unwrap(), g, "{edges}");

        let json = to_graph_json(&g, names);
        let back = read_graph_json(&json).unwrap();
        assert_eq!(back.names, names);
        assert_eq!(back.graph, g, "{json}");
    }
}

#[test]
fn labelled_adjacency_follows_the_data_order() {
    let names: Vec<String> = ["p", "q", "r"].iter().map(|s| s.to_string()).collect();
    let g = Digraph::from_edges(3, &[(0, 1), (2, 1)]).unwrap();
    let csv = to_adjacency_csv(&g, &names);
    // The data lists the same variables in another order.
    let reordered: Vec<String> = ["r", "p", "q"].iter().map(|s| s.to_string()).collect();
    let read = read_adjacency(&csv, Some(&reordered)).unwrap();
    assert_eq!(read.edges(), vec![(0, 2), (1, 2)]);
}

#[test]
fn shared_data_plain_matrices_read_as_written() {
    for k in 1..=10 {
        let path: PathBuf = [
            env!("CARGO_MANIFEST_DIR"),
            "tests",
            "fixtures",
            "syntren",
            &format!("syntren{k:02}_truth.csv"),
        ]
        .iter()
        .collect();
        let text = std::fs::read_to_string(&path).unwrap();
        let g = read_adjacency(&text, None).unwrap();
        assert_eq!(g.n(), 20);
        assert!(g.is_acyclic());
        // Writing the matrix back in the plain layout reproduces the file's rows.
        let written: Vec<String> = g
            .to_matrix()
            .iter()
            .map(|row| {
                row.iter()
                    .map(|v| v.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            })
            .collect();
        let original: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(written, original, "syntren{k:02}");
        // The labelled layout of the same graph, read against names, gives the same graph.
        let names: Vec<String> = (1..=20).map(|i| format!("X{i}")).collect();
        assert_eq!(
            read_adjacency(&to_adjacency_csv(&g, &names), Some(&names)).unwrap(),
            g
        );
        // A truth file with the wrong number of variables for the data is refused.
        assert!(matches!(
            read_adjacency(&text, Some(&names[..19])),
            Err(GraphIoError::NameCount {
                found: 20,
                expected: 19,
                ..
            })
        ));
    }
}
