//! What the graph view draws, computed from the page's state without the DOM: the result's edges
//! classed against a ground truth when one is known, else the running restart's.

use super::truth::Truth;
use super::{compare_to_truth, parse_truth, TruthReport};
use crate::engine::{RunResult, Snapshot};
use crate::graph::{Digraph, EdgeKind};

/// The graph a result chose, when its edges form one over its variables.
pub fn result_graph(result: &RunResult) -> Option<Digraph> {
    Digraph::from_edges(result.names.len(), &result.edges).ok()
}

/// The comparison of `result` with the uploaded `truth` (the truth's file named in a message).
pub fn truth_report(truth: &Truth, result: &RunResult) -> Option<Result<TruthReport, String>> {
    let predicted = result_graph(result)?;
    Some(
        parse_truth(&truth.text, &result.names)
            .map_err(|e| format!("{}: {e}", truth.file_name))
            .and_then(|t| compare_to_truth(&t, &predicted)),
    )
}

/// What the view draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Drawing {
    pub names: Vec<String>,
    /// (from, to, weight, kind): kind is the edge's class against the truth, when one is known.
    pub edges: Vec<(usize, usize, f64, Option<EdgeKind>)>,
    /// Whether these are a result's edges (which can be explained), not a running search's.
    pub of_result: bool,
}

/// The graph on screen over `names`: the result's edges (classed by `report` when it compared
/// them with a truth), else the running search's `snapshot`, else none; edges outside the
/// variables shown are left out.
pub fn drawing(
    names: Vec<String>,
    result: Option<&RunResult>,
    report: Option<&TruthReport>,
    snapshot: Option<&Snapshot>,
) -> Drawing {
    let d = names.len();
    let edges: Vec<(usize, usize, f64, Option<EdgeKind>)> = match (result, report) {
        (Some(result), Some(report)) => report
            .classes
            .iter()
            .map(|c| {
                let w = edge_weight(&result.adjacency, c.from, c.to);
                (c.from, c.to, w, Some(c.kind))
            })
            .collect(),
        (Some(result), None) => result
            .edges
            .iter()
            .map(|&(i, j)| (i, j, edge_weight(&result.adjacency, i, j), None))
            .collect(),
        (None, _) => snapshot.map_or_else(Vec::new, |s| {
            s.edges
                .iter()
                .map(|&(i, j)| (i, j, edge_weight(&s.adjacency, i, j), None))
                .collect()
        }),
    };
    Drawing {
        names,
        edges: edges
            .into_iter()
            .filter(|&(i, j, _, _)| i < d && j < d)
            .collect(),
        of_result: result.is_some(),
    }
}

/// The weight of the edge i → j in a cause × effect matrix (0 where the matrix has no entry).
pub fn edge_weight(adjacency: &[Vec<f64>], i: usize, j: usize) -> f64 {
    adjacency
        .get(i)
        .and_then(|row| row.get(j))
        .copied()
        .unwrap_or(0.0)
}
