//! An uploaded ground truth: reading it (adjacency matrix or edge list, told apart by the header)
//! and comparing the result's graph with it.

use crate::graph::{
    classify_edges, compare, read_adjacency, read_edge_list, read_graph_json, Comparison, Digraph,
    EdgeClass,
};

/// A ground truth the user uploaded (or an example brought along).
#[derive(Debug, Clone, PartialEq)]
pub struct Truth {
    pub file_name: String,
    /// The raw text, kept so it can be re-read against other column names.
    pub text: String,
}

/// The comparison of a predicted graph with a ground truth.
#[derive(Debug, Clone, PartialEq)]
pub struct TruthReport {
    pub comparison: Comparison,
    /// Every edge of both graphs, classified (correct, reversed, missing, extra).
    pub classes: Vec<EdgeClass>,
    pub truth_edges: usize,
}

/// Reads a ground truth for the variables `names`: Occam's JSON graph when the text starts with
/// `{`, an edge list when the first non-blank line has cells named `from` and `to` (any case),
/// else an adjacency matrix (plain D × D, or labelled with names). Labelled formats are matched
/// by name, in any order; other names are refused, listing every one that does not match.
/// Errors say which format was assumed and what is wrong.
pub fn parse_truth(text: &str, names: &[String]) -> Result<Digraph, String> {
    let header = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let cells: Vec<String> = header
        .split([',', ';', '\t'])
        .map(|c| c.trim().trim_matches('"').to_ascii_lowercase())
        .collect();
    let is_edge_list = cells.iter().any(|c| c == "from") && cells.iter().any(|c| c == "to");
    if header.trim_start().starts_with('{') {
        // A graph.json written by Occam: its nodes are matched to the variables by name.
        read_graph_json(text)
            .and_then(|g| g.aligned_to(names))
            .map_err(|e| format!("JSON graph: {e}"))
    } else if is_edge_list {
        read_edge_list(text, names).map_err(|e| format!("edge list (from,to): {e}"))
    } else {
        read_adjacency(text, Some(names)).map_err(|e| format!("adjacency matrix: {e}"))
    }
}

/// Compares `pred` with `truth` (both over the same variables).
pub fn compare_to_truth(truth: &Digraph, pred: &Digraph) -> Result<TruthReport, String> {
    if truth.n() != pred.n() {
        return Err(format!(
            "the truth has {} variables, the result {}",
            truth.n(),
            pred.n()
        ));
    }
    Ok(TruthReport {
        comparison: compare(truth, pred),
        classes: classify_edges(truth, pred),
        truth_edges: truth.edge_count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::EdgeKind;

    fn names() -> Vec<String> {
        ["x", "y", "z"].map(String::from).to_vec()
    }

    #[test]
    fn both_formats_are_read() {
        let from_list = parse_truth("From,To\nx,y\ny,z\n", &names()).unwrap();
        let from_matrix = parse_truth("0,1,0\n0,0,1\n0,0,0\n", &names()).unwrap();
        assert_eq!(from_list, from_matrix);
        assert_eq!(from_list.edges(), vec![(0, 1), (1, 2)]);
    }

    #[test]
    fn errors_name_the_format_assumed() {
        let err = parse_truth("from,to\nx,w\n", &names()).unwrap_err();
        assert!(err.starts_with("edge list") && err.contains('w'), "{err}");
        let err = parse_truth("0,1\n0,0\n", &names()).unwrap_err();
        assert!(err.starts_with("adjacency matrix"), "{err}");
    }

    #[test]
    fn labelled_truths_are_matched_by_name_in_any_order() {
        let expected = Digraph::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
        // x -> y -> z as a labelled matrix in the order z, x, y.
        let matrix = ",z,x,y\nz,0,0,0\nx,0,0,1\ny,1,0,0\n";
        assert_eq!(parse_truth(matrix, &names()).unwrap(), expected);
        let json = r#"{"orientation": "ORIENT", "nodes": ["y", "z", "x"],
            "edges": [{"from": "x", "to": "y"}, {"from": "y", "to": "z"}]}"#
            .replace("ORIENT", crate::graph::ADJACENCY_ORIENTATION);
        assert_eq!(parse_truth(&json, &names()).unwrap(), expected);
        // Other names: every one that does not match is listed.
        let err = parse_truth(",x,y,w\nx,0,1,0\ny,0,0,0\nw,0,0,0\n", &names()).unwrap_err();
        assert!(
            err.contains("missing from the file: 'z'") && err.contains("not variables here: 'w'"),
            "{err}"
        );
        let json = json.replace("\"z\"", "\"v\"");
        let err = parse_truth(&json, &names()).unwrap_err();
        assert!(
            err.starts_with("JSON graph") && err.contains("'v'"),
            "{err}"
        );
    }

    #[test]
    fn the_report_classifies_and_scores() {
        let truth = Digraph::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
        let pred = Digraph::from_edges(3, &[(1, 0), (0, 2)]).unwrap();
        let r = compare_to_truth(&truth, &pred).unwrap();
        assert_eq!(r.comparison.shd, 2 + 1 + 1);
        assert_eq!(r.comparison.shd_reversal_1, 3);
        assert_eq!(r.truth_edges, 2);
        let kinds: Vec<EdgeKind> = r.classes.iter().map(|c| c.kind).collect();
        assert!(kinds.contains(&EdgeKind::Reversed));
        assert!(kinds.contains(&EdgeKind::Missing));
        assert!(kinds.contains(&EdgeKind::Extra));
        assert!(compare_to_truth(&Digraph::empty(2), &pred).is_err());
    }
}
