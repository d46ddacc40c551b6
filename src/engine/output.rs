//! The files a finished (or stopped) run writes (DESIGN.md §3): `adjacency.csv` (with a comment
//! line stating the orientation), `edges.csv`, `graph.dot` and `result.json`, as text, so the CLI
//! writes them to disk and the browser offers them as downloads.

use super::session::RunResult;
use crate::graph::{to_adjacency_csv, to_dot, to_edge_list_csv, to_probability_csv, Digraph};

/// The chosen graph of a result.
pub fn result_graph(result: &RunResult) -> Digraph {
    Digraph::from_edges(result.names.len(), &result.edges)
        .expect("a result's edges index its own variables")
}

/// (file name, contents) of every output file: the four of every run, and
/// `edge_probabilities.csv` when the exact search gave edge probabilities. `result.json` is last.
pub fn output_files(result: &RunResult) -> Vec<(&'static str, String)> {
    let graph = result_graph(result);
    let json = serde_json::to_string_pretty(result).expect("a result serialises to JSON");
    let mut files = vec![
        ("adjacency.csv", to_adjacency_csv(&graph, &result.names)),
        ("edges.csv", to_edge_list_csv(&graph, &result.names)),
        ("graph.dot", to_dot(&graph, &result.names)),
    ];
    if let (Some(p), Some(x)) = (&result.edge_probabilities, &result.exact) {
        files.push((
            "edge_probabilities.csv",
            to_probability_csv(p, &result.names, &x.edge_probability_prior),
        ));
    }
    files.push(("result.json", json + "\n"));
    files
}
