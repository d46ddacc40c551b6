//! Writing graphs for other tools: adjacency CSV, edge-list CSV, Graphviz DOT, DAGitty model code,
//! Tetrad text graph and JSON. Every writer takes the graph and one name per node, and returns the
//! file's text.
//!
//! Names are arbitrary user text (column headers), so each format quotes or rewrites them by its
//! own rules; the rules are on each function. Every writer panics if the number of names differs
//! from the number of nodes: the names come from the same data set as the graph, so a mismatch is
//! a bug, not a user error.

use serde::{Deserialize, Serialize};

use super::Digraph;

/// The words that begin the first comment line of a stopped run's graph file (after `# ` in CSV,
/// `// ` in DOT): what follows says when and where it stopped. Readers that score or compare a
/// graph look for it ([`super::stopped_note`]).
pub const STOPPED_NOTE: &str = "stopped before the end:";

/// The orientation sentence written into adjacency CSV comments and JSON files.
pub const ADJACENCY_ORIENTATION: &str = "A[i][j] = 1 means row variable i -> column variable j";

fn assert_names(graph: &Digraph, names: &[String]) {
    assert_eq!(
        graph.n(),
        names.len(),
        "the graph has {} nodes but {} names were given",
        graph.n(),
        names.len()
    );
}

/// Quotes a CSV field when a reader could misread it: empty, containing a comma, quote or line
/// break, or starting with `#` (which the adjacency reader takes for a comment). Quotes inside
/// are doubled (RFC 4180).
fn csv_field(name: &str) -> String {
    let needs_quotes =
        name.is_empty() || name.starts_with('#') || name.contains([',', '"', '\n', '\r']);
    if needs_quotes {
        format!("\"{}\"", name.replace('"', "\"\""))
    } else {
        name.to_string()
    }
}

/// Labelled adjacency matrix as CSV: the comment line
/// `# adjacency: A[i][j] = 1 means row variable i -> column variable j`, a header
/// `,name1,name2,...`, then one row `name_i,A[i][0],...,A[i][n−1]` per node with 0/1 entries.
/// Names are quoted when needed (empty, containing `,`, `"` or a line break, or starting with `#`).
///
/// # Panics
/// If `names.len() != graph.n()`.
pub fn to_adjacency_csv(graph: &Digraph, names: &[String]) -> String {
    assert_names(graph, names);
    let mut out = format!("# adjacency: {ADJACENCY_ORIENTATION}\n");
    for name in names {
        out.push(',');
        out.push_str(&csv_field(name));
    }
    out.push('\n');
    for (i, name) in names.iter().enumerate() {
        out.push_str(&csv_field(name));
        for j in 0..graph.n() {
            out.push_str(if graph.has_edge(i, j) { ",1" } else { ",0" });
        }
        out.push('\n');
    }
    out
}

/// Posterior edge probabilities as CSV, laid out like [`to_adjacency_csv`]: the comment lines
/// `# edge probabilities: P[i][j] = posterior probability of the edge row variable i -> column
/// variable j` and `# prior: <prior>`, a header `,name1,...`, then one row per variable with the
/// probabilities to 6 decimals.
///
/// # Panics
/// If `probabilities` is not `names.len()` × `names.len()`.
pub fn to_probability_csv(probabilities: &[Vec<f64>], names: &[String], prior: &str) -> String {
    assert!(
        probabilities.len() == names.len() && probabilities.iter().all(|r| r.len() == names.len()),
        "a {n} × {n} matrix is needed for {n} names",
        n = names.len()
    );
    let mut out = format!(
        "# edge probabilities: P[i][j] = posterior probability of the edge row variable i -> \
         column variable j\n# prior: {}\n",
        prior.replace('\n', " ")
    );
    for name in names {
        out.push(',');
        out.push_str(&csv_field(name));
    }
    out.push('\n');
    for (name, row) in names.iter().zip(probabilities) {
        out.push_str(&csv_field(name));
        for p in row {
            out.push_str(&format!(",{p:.6}"));
        }
        out.push('\n');
    }
    out
}

/// Edge list as CSV: header `from,to`, then one line per edge `from → to` in row-major order;
/// names are quoted by the `csv` crate where RFC 4180 needs it.
///
/// # Panics
/// If `names.len() != graph.n()`.
pub fn to_edge_list_csv(graph: &Digraph, names: &[String]) -> String {
    assert_names(graph, names);
    let mut writer = csv::WriterBuilder::new()
        .terminator(csv::Terminator::Any(b'\n'))
        .from_writer(Vec::new());
    let write_all = |writer: &mut csv::Writer<Vec<u8>>| -> csv::Result<()> {
        writer.write_record(["from", "to"])?;
        for (a, b) in graph.edges() {
            writer.write_record([names[a].as_str(), names[b].as_str()])?;
        }
        writer.flush()?;
        Ok(())
    };
    write_all(&mut writer).expect("writing CSV into memory cannot fail");
    let bytes = writer
        .into_inner()
        .expect("flushing CSV into memory cannot fail");
    String::from_utf8(bytes).expect("the CSV was written from UTF-8 strings")
}

/// A DOT double-quoted string. Graphviz treats `\"` as a quote inside the string and later reads
/// backslash sequences in the default node label (`\N`) as escString escapes, where `\\` shows a
/// backslash and `\n` a line break. So `\` becomes `\\`, `"` becomes `\"`, a line feed becomes
/// `\n`, and other control characters become spaces.
fn dot_quote(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for ch in name.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Graphviz DOT: `digraph G {`, every node declared on its own line (so isolated nodes are
/// kept), then one `"from" -> "to";` line per edge, then `}`. Every name is double-quoted: `\`
/// and `"` are backslash-escaped, a line feed is written `\n`, other control characters become
/// spaces.
///
/// # Panics
/// If `names.len() != graph.n()`.
pub fn to_dot(graph: &Digraph, names: &[String]) -> String {
    assert_names(graph, names);
    let mut out = String::from("digraph G {\n");
    for name in names {
        out.push_str(&format!("  {};\n", dot_quote(name)));
    }
    for (a, b) in graph.edges() {
        out.push_str(&format!(
            "  {} -> {};\n",
            dot_quote(&names[a]),
            dot_quote(&names[b])
        ));
    }
    out.push_str("}\n");
    out
}

/// A DAGitty identifier, following DAGitty's own serialiser and grammar: bare when it is made of
/// `[0-9a-zA-Z_.]` only, otherwise double-quoted with `"` written `\"`. DAGitty reads any other
/// backslash literally except before a line break, where `\` + line break is a continuation that
/// reads as nothing; so a name ending in `\` gets a `\` + line feed before the closing quote to
/// keep its last backslash from escaping the quote. Control characters, which DAGitty's quoted
/// strings cannot hold, become spaces.
fn dagitty_id(name: &str) -> String {
    let bare = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if bare {
        return name.to_string();
    }
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for ch in name.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    if name.ends_with('\\') {
        out.push_str("\\\n");
    }
    out.push('"');
    out
}

/// DAGitty model code: `dag {`, every variable on its own line, then one `from -> to` line per
/// edge, then `}`. Identifiers made of letters, digits, `_` and `.` are written bare; any other
/// name is double-quoted as DAGitty's serialiser does, with `"` escaped as `\"` and other
/// backslashes kept as they are; a name ending in `\` gets `\` plus a line break before its closing
/// quote, which DAGitty reads as an empty line continuation. Control characters become spaces.
/// DAGitty itself refuses variables named `graph` or `node`, quoted or not.
///
/// # Panics
/// If `names.len() != graph.n()`.
pub fn to_dagitty(graph: &Digraph, names: &[String]) -> String {
    assert_names(graph, names);
    let mut out = String::from("dag {\n");
    for name in names {
        out.push_str(&dagitty_id(name));
        out.push('\n');
    }
    for (a, b) in graph.edges() {
        out.push_str(&format!(
            "{} -> {}\n",
            dagitty_id(&names[a]),
            dagitty_id(&names[b])
        ));
    }
    out.push_str("}\n");
    out
}

/// Tetrad node names: Tetrad splits the node line on `;` (older versions on `,`) and edge lines on
/// whitespace, so whitespace, `;` and `,` become `_`; an empty name becomes `_`; a name that
/// collides with an earlier one gets `_2`, `_3`, ... appended.
pub fn tetrad_names(names: &[String]) -> Vec<String> {
    let mut used = std::collections::HashSet::new();
    names
        .iter()
        .map(|name| {
            let mut base: String = name
                .chars()
                .map(|c| {
                    if c.is_whitespace() || c == ';' || c == ',' {
                        '_'
                    } else {
                        c
                    }
                })
                .collect();
            if base.is_empty() {
                base.push('_');
            }
            let mut candidate = base.clone();
            let mut suffix = 2;
            while used.contains(&candidate) {
                candidate = format!("{base}_{suffix}");
                suffix += 1;
            }
            used.insert(candidate.clone());
            candidate
        })
        .collect()
}

/// Tetrad text graph: `Graph Nodes:`, the names joined by `;`, a blank line, `Graph Edges:`, then
/// `k. from --> to` for the k-th edge (1-based, row-major order). Names are rewritten by
/// [`tetrad_names`] (whitespace, `;` and `,` become `_`, collisions get a numeric suffix).
///
/// # Panics
/// If `names.len() != graph.n()`.
pub fn to_tetrad(graph: &Digraph, names: &[String]) -> String {
    assert_names(graph, names);
    let safe = tetrad_names(names);
    let mut out = format!("Graph Nodes:\n{}\n\nGraph Edges:\n", safe.join(";"));
    for (k, (a, b)) in graph.edges().into_iter().enumerate() {
        out.push_str(&format!("{}. {} --> {}\n", k + 1, safe[a], safe[b]));
    }
    out
}

/// One edge of the JSON graph format.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct JsonEdge {
    pub(crate) from: String,
    pub(crate) to: String,
}

/// The JSON graph format: orientation sentence, node names, edges by name, adjacency matrix.
/// `edges` and `adjacency` are optional when reading (at least one is required).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct GraphJson {
    pub(crate) orientation: String,
    pub(crate) nodes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) edges: Option<Vec<JsonEdge>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) adjacency: Option<Vec<Vec<u8>>>,
}

/// JSON: `{"orientation": "A[i][j] = 1 means row variable i -> column variable j", "nodes": [...],
/// "edges": [{"from": name, "to": name}, ...], "adjacency": [[0, 1], [0, 0]]}` with edges in
/// row-major order.
///
/// # Panics
/// If `names.len() != graph.n()`.
pub fn to_graph_json(graph: &Digraph, names: &[String]) -> String {
    assert_names(graph, names);
    let doc = GraphJson {
        orientation: ADJACENCY_ORIENTATION.to_string(),
        nodes: names.to_vec(),
        edges: Some(
            graph
                .edges()
                .into_iter()
                .map(|(a, b)| JsonEdge {
                    from: names[a].clone(),
                    to: names[b].clone(),
                })
                .collect(),
        ),
        adjacency: Some(graph.to_matrix()),
    };
    serde_json::to_string(&doc).expect("a graph document always serialises")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn small() -> (Digraph, Vec<String>) {
        // a → b, a → c, and an isolated d.
        let g = Digraph::from_edges(4, &[(0, 1), (0, 2)]).unwrap();
        (g, names(&["a", "b", "c d", "e"]))
    }

    #[test]
    fn probability_csv_exact_text() {
        let p = vec![vec![0.0, 0.25], vec![0.7, 0.0]];
        assert_eq!(
            to_probability_csv(&p, &names(&["x", "y,z"]), "uniform over\nDAGs"),
            "# edge probabilities: P[i][j] = posterior probability of the edge row variable i -> \
             column variable j\n\
             # prior: uniform over DAGs\n\
             ,x,\"y,z\"\n\
             x,0.000000,0.250000\n\
             \"y,z\",0.700000,0.000000\n"
        );
    }

    #[test]
    fn adjacency_csv_exact_text() {
        let (g, n) = small();
        assert_eq!(
            to_adjacency_csv(&g, &n),
            "# adjacency: A[i][j] = 1 means row variable i -> column variable j\n\
             ,a,b,c d,e\n\
             a,0,1,1,0\n\
             b,0,0,0,0\n\
             c d,0,0,0,0\n\
             e,0,0,0,0\n"
        );
        let g = Digraph::from_edges(2, &[(1, 0)]).unwrap();
        assert_eq!(
            to_adjacency_csv(&g, &names(&["x,y", "#z"])),
            "# adjacency: A[i][j] = 1 means row variable i -> column variable j\n\
             ,\"x,y\",\"#z\"\n\
             \"x,y\",0,0\n\
             \"#z\",1,0\n"
        );
    }

    #[test]
    fn edge_list_exact_text() {
        let (g, n) = small();
        assert_eq!(to_edge_list_csv(&g, &n), "from,to\na,b\na,c d\n");
        let g = Digraph::from_edges(2, &[(0, 1)]).unwrap();
        assert_eq!(
            to_edge_list_csv(&g, &names(&["say \"hi\"", "x,y"])),
            "from,to\n\"say \"\"hi\"\"\",\"x,y\"\n"
        );
    }

    #[test]
    fn dot_exact_text_and_escaping() {
        let (g, n) = small();
        assert_eq!(
            to_dot(&g, &n),
            "digraph G {\n  \"a\";\n  \"b\";\n  \"c d\";\n  \"e\";\n  \"a\" -> \"b\";\n  \"a\" -> \"c d\";\n}\n"
        );
        let g = Digraph::from_edges(2, &[(0, 1)]).unwrap();
        let hostile = names(&["a \"b\"\\c", "<img src=x onerror=alert(1)>"]);
        assert_eq!(
            to_dot(&g, &hostile),
            "digraph G {\n  \"a \\\"b\\\"\\\\c\";\n  \"<img src=x onerror=alert(1)>\";\n  \
             \"a \\\"b\\\"\\\\c\" -> \"<img src=x onerror=alert(1)>\";\n}\n"
        );
        assert_eq!(dot_quote("line\nbreak\ttab\\"), "\"line\\nbreak tab\\\\\"");
    }

    #[test]
    fn dagitty_exact_text_and_escaping() {
        let (g, n) = small();
        assert_eq!(
            to_dagitty(&g, &n),
            "dag {\na\nb\n\"c d\"\ne\na -> b\na -> \"c d\"\n}\n"
        );
        let g = Digraph::from_edges(2, &[(0, 1)]).unwrap();
        let hostile = names(&["a \"b\"\\c", "<img src=x onerror=alert(1)>"]);
        assert_eq!(
            to_dagitty(&g, &hostile),
            "dag {\n\"a \\\"b\\\"\\c\"\n\"<img src=x onerror=alert(1)>\"\n\
             \"a \\\"b\\\"\\c\" -> \"<img src=x onerror=alert(1)>\"\n}\n"
        );
        assert_eq!(dagitty_id("x_1.2"), "x_1.2");
        assert_eq!(dagitty_id(""), "\"\"");
        assert_eq!(dagitty_id("né"), "\"né\"");
        assert_eq!(dagitty_id("tab\there"), "\"tab here\"");
        assert_eq!(dagitty_id("ends\\"), "\"ends\\\\\n\"");
    }

    #[test]
    fn tetrad_exact_text_and_renaming() {
        let (g, n) = small();
        assert_eq!(
            to_tetrad(&g, &n),
            "Graph Nodes:\na;b;c_d;e\n\nGraph Edges:\n1. a --> b\n2. a --> c_d\n"
        );
        assert_eq!(
            tetrad_names(&names(&["a b", "a_b", "x;y", "p,q", "", "a b"])),
            names(&["a_b", "a_b_2", "x_y", "p_q", "_", "a_b_3"])
        );
        let g = Digraph::from_edges(2, &[(1, 0)]).unwrap();
        let hostile = names(&["a \"b\"\\c", "<img src=x onerror=alert(1)>"]);
        assert_eq!(
            to_tetrad(&g, &hostile),
            "Graph Nodes:\na_\"b\"\\c;<img_src=x_onerror=alert(1)>\n\nGraph Edges:\n\
             1. <img_src=x_onerror=alert(1)> --> a_\"b\"\\c\n"
        );
    }

    #[test]
    fn json_exact_text() {
        let g = Digraph::from_edges(2, &[(0, 1)]).unwrap();
        assert_eq!(
            to_graph_json(&g, &names(&["x", "y \"q\""])),
            "{\"orientation\":\"A[i][j] = 1 means row variable i -> column variable j\",\
             \"nodes\":[\"x\",\"y \\\"q\\\"\"],\"edges\":[{\"from\":\"x\",\"to\":\"y \\\"q\\\"\"}],\
             \"adjacency\":[[0,1],[0,0]]}"
        );
    }

    #[test]
    #[should_panic(expected = "2 nodes but 1 names")]
    fn name_count_mismatch_panics() {
        to_dot(&Digraph::empty(2), &names(&["a"]));
    }
}
