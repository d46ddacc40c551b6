//! The files a finished (or stopped) run writes (DESIGN.md §3): `adjacency.csv` (with a comment
//! line stating the orientation), `edges.csv`, `graph.dot` and `result.json`, as text, so the CLI
//! writes them to disk and the browser offers them as downloads.
//!
//! A stopped run's graph files begin with a comment line saying so ([`STOPPED_NOTE`]: when, after
//! how much work, in which phase), so that no reader takes the best graph so far for a finished
//! result; a run with no graph (stopped before it had one, or failed) writes none of them, only
//! result.json, which says why.

use super::session::{RunResult, StopRecord};
use crate::graph::{to_adjacency_csv, to_dot, to_edge_list_csv, to_probability_csv, Digraph};

pub use crate::graph::STOPPED_NOTE;

/// Every graph file a run may write (all but result.json): a rerun that does not write one must
/// remove an older run's copy, so that it is never read beside the new result.
pub const GRAPH_FILES: [&str; 4] = [
    "adjacency.csv",
    "edges.csv",
    "graph.dot",
    "edge_probabilities.csv",
];

/// The chosen graph of a result.
pub fn result_graph(result: &RunResult) -> Digraph {
    Digraph::from_edges(result.names.len(), &result.edges)
        .expect("a result's edges index its own variables")
}

/// When and where a run stopped: "at 2026-12-02T13:40:12Z, after 12.3 s of work, in the
/// acyclic phase of restart 2 of 3 (iteration 140)".
pub fn stop_note(stop: &StopRecord) -> String {
    let at = stop
        .at
        .as_deref()
        .map(|t| format!("at {t}, "))
        .unwrap_or_default();
    format!(
        "{at}after {:.1} s of work, in {}",
        stop.elapsed_seconds, stop.phase
    )
}

/// One sentence naming the result's edges that rest on a nearly determined column (a column
/// almost a function of one other alone), with which column that is; None when there are none.
pub fn determined_note(result: &RunResult) -> Option<String> {
    if result.edges_on_determined.is_empty() {
        return None;
    }
    let names = &result.names;
    let edges: Vec<String> = result
        .edges_on_determined
        .iter()
        .map(|&(a, b)| format!("{} -> {}", names[a], names[b]))
        .collect();
    let why: Vec<String> = result
        .determined
        .iter()
        .map(|d| format!("{} is almost a function of {} alone", d.column, d.by))
        .collect();
    Some(format!(
        "{} edge{} rest{} on a nearly determined column ({}): {}. Such a column's noise is at its \
         floor, so a small gain from any other input is scored as a confident edge: read {} with \
         care.",
        edges.len(),
        if edges.len() == 1 { "" } else { "s" },
        if edges.len() == 1 { "s" } else { "" },
        why.join("; "),
        edges.join(", "),
        if edges.len() == 1 { "it" } else { "them" }
    ))
}

/// (file name, contents) of every output file: the graph files ([`GRAPH_FILES`]; the edge
/// probabilities only when the exact search gave them) when the result has a graph, each led by
/// the stop note when the run was stopped, and `result.json`, last.
pub fn output_files(result: &RunResult) -> Vec<(&'static str, String)> {
    let json = serde_json::to_string_pretty(result).expect("a result serialises to JSON");
    let mut files = Vec::new();
    if result.has_graph() {
        let graph = result_graph(result);
        let (hash, slashes) = match &result.stopped {
            Some(stop) => {
                let note = format!(
                    "{STOPPED_NOTE} {}; the best graph so far, not a finished result",
                    stop_note(stop)
                );
                (format!("# {note}\n"), format!("// {note}\n"))
            }
            None => (String::new(), String::new()),
        };
        files.push((
            "adjacency.csv",
            hash.clone() + &to_adjacency_csv(&graph, &result.names),
        ));
        files.push((
            "edges.csv",
            hash.clone() + &to_edge_list_csv(&graph, &result.names),
        ));
        files.push(("graph.dot", slashes + &to_dot(&graph, &result.names)));
        if let (Some(p), Some(x)) = (&result.edge_probabilities, &result.exact) {
            files.push((
                "edge_probabilities.csv",
                hash + &to_probability_csv(p, &result.names, &x.edge_probability_prior),
            ));
        }
    }
    files.push(("result.json", json + "\n"));
    files
}
