//! Property-based fuzzing of every reader of user files (issue 12, item 8): the CSV data reader,
//! the adjacency / edge-list / JSON graph readers, the page's truth reader and the run-record
//! reader. Each is fed arbitrary bytes and text built from the characters that steer their
//! parsers (delimiters, quotes, line endings, digits, signs, NUL, ESC), and must return a value or
//! an error, never panic; what they accept must satisfy their documented invariants.
//!
//! The test command runs a bounded number of cases per reader (`CASES`); a longer run is
//! `PROPTEST_CASES=200000 cargo test --release --test integration fuzz_readers::` (TESTING.md records one).

use occam::data::{parse_csv, CsvOptions};
use occam::graph::{adjacency_labels, read_adjacency, read_edge_list, read_graph_json};
use occam::page_model::{parse_truth, read_record};
use proptest::prelude::*;

/// Cases per property in the test command (the environment's PROPTEST_CASES wins when set).
const CASES: u32 = 1500;

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        // Failures are reported with the smallest input found; nothing is written to disk.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Text over the characters CSV and matrix parsing branch on, in runs long enough to form rows.
fn csvish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        ",",
        ";",
        "\t",
        "\n",
        "\r\n",
        "\r",
        "\"",
        " ",
        "0",
        "1",
        "2.5",
        "-3",
        "1e400",
        "1e-320",
        "nan",
        "inf",
        "NA",
        ".",
        "e",
        "x",
        "y",
        "a",
        "#",
        "\0",
        "\u{1b}[2J",
        "é",
        "\u{feff}",
        ",,",
        "0,1",
        "1,0",
        "from,to",
        ",x,y",
    ]);
    prop::collection::vec(pieces, 0..200).prop_map(|v| v.concat())
}

/// A plausible numeric CSV with perturbations: most rows well formed, so the reader gets past
/// the header and into its row, column and statistics checks.
fn numeric_csv() -> impl Strategy<Value = String> {
    let cell = prop_oneof![
        8 => (-1e6f64..1e6).prop_map(|v| format!("{v}")),
        1 => prop::sample::select(vec!["", "NA", "nan", "1e400", "\"3\"", "x", " 7 ", "1e-320"])
            .prop_map(String::from),
    ];
    let row = (
        prop::collection::vec(cell, 1..5),
        prop::sample::select(vec![",", ";", "\t"]),
    );
    prop::collection::vec(row, 0..40).prop_map(|rows| {
        let mut out = String::from("a,b,c\n");
        for (cells, delimiter) in rows {
            out.push_str(&cells.join(delimiter));
            out.push('\n');
        }
        out
    })
}

/// JSON-shaped text: fragments of the graph and run-record formats, shuffled and cut.
fn jsonish() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\"nodes\"",
        "\"edges\"",
        "\"adjacency\"",
        "\"orientation\"",
        "\"from\"",
        "\"to\"",
        "\"names\"",
        "\"a\"",
        "\"b\"",
        "0",
        "1",
        "-1",
        "1e999",
        "null",
        "true",
        "0.5",
        " ",
        "\n",
    ]);
    prop::collection::vec(pieces, 0..120).prop_map(|v| v.concat())
}

fn names(d: usize) -> Vec<String> {
    ["x", "y", "z", "w"][..d]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

fn check_csv(bytes: &[u8]) {
    if let Ok(parsed) = parse_csv(bytes, &CsvOptions::default()) {
        let d = &parsed.dataset;
        assert!(
            d.cols() >= 2 && d.rows() >= 10,
            "accepted a file too small to use"
        );
        assert!(d.columns().iter().flatten().all(|v| v.is_finite()));
        let summary = d.summary();
        assert!(summary
            .column_summaries
            .iter()
            .all(|c| c.sd.is_finite() && c.sd > 0.0));
    }
}

fn check_graph_text(text: &str) {
    if let Ok(g) = read_adjacency(text, None) {
        assert!(
            (0..g.n()).all(|i| !g.has_edge(i, i)),
            "a self-loop was accepted"
        );
    }
    let _ = adjacency_labels(text);
    for d in 2..=4 {
        let n = names(d);
        if let Ok(g) = read_adjacency(text, Some(&n)) {
            assert_eq!(g.n(), d);
        }
        if let Ok(g) = read_edge_list(text, &n) {
            assert_eq!(g.n(), d);
        }
        if let Ok(g) = parse_truth(text, &n) {
            assert_eq!(g.n(), d);
        }
    }
}

fn check_json_text(text: &str) {
    if let Ok(g) = read_graph_json(text) {
        assert_eq!(g.names.len(), g.graph.n());
        let _ = g.aligned_to(&names(2));
    }
    if let Ok(r) = read_record(text) {
        let d = r.names.len();
        assert!(r.adjacency.len() == d && r.edges.iter().all(|&(i, j)| i < d && j < d && i != j));
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn the_csv_reader_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check_csv(&bytes);
    }

    #[test]
    fn the_csv_reader_never_panics_on_csv_like_text(text in csvish()) {
        check_csv(text.as_bytes());
    }

    #[test]
    fn the_csv_reader_checks_what_it_accepts(text in numeric_csv()) {
        check_csv(text.as_bytes());
    }

    #[test]
    fn the_graph_readers_never_panic(text in csvish()) {
        check_graph_text(&text);
    }

    #[test]
    fn the_graph_readers_never_panic_on_any_string(text in any::<String>()) {
        check_graph_text(&text);
        check_json_text(&text);
    }

    #[test]
    fn the_json_readers_never_panic(text in jsonish()) {
        check_json_text(&text);
        check_graph_text(&text);
    }
}
