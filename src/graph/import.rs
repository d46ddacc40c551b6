//! Reading graphs: adjacency matrices (plain or labelled), edge lists by name, and the JSON graph
//! format of [`to_graph_json`](super::to_graph_json). Every refusal is a [`GraphIoError`] that
//! names the 1-based line (and column where there is one) and what is wrong.

use std::collections::{HashMap, HashSet};

use super::export::{GraphJson, ADJACENCY_ORIENTATION};
use super::Digraph;

/// Why a graph file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphIoError {
    /// Nothing but blank lines and `#` comments.
    #[error("the file holds no matrix rows (only blank lines, '#' comments or empty cells)")]
    Empty,
    /// A row with the wrong number of entries.
    #[error("line {line}: this row has {found} entries but the matrix has {expected} columns")]
    RowLength {
        line: usize,
        found: usize,
        expected: usize,
    },
    /// More rows than columns.
    #[error(
        "line {line}: one row more than the matrix's {columns} columns; an adjacency matrix is \
         square (one row and one column per variable)"
    )]
    TooManyRows { line: usize, columns: usize },
    /// Fewer rows than columns.
    #[error(
        "line {line}: the matrix ends after {rows} rows but has {columns} columns; an adjacency \
         matrix is square (one row and one column per variable)"
    )]
    TooFewRows {
        line: usize,
        rows: usize,
        columns: usize,
    },
    /// An entry other than 0 or 1.
    #[error("line {line}, column {column}: '{value}' is not 0 or 1")]
    BadEntry {
        line: usize,
        column: usize,
        value: String,
    },
    /// A first row of names without the empty corner cell of a labelled file.
    #[error(
        "line {line}: this row holds names ({}), not 0s and 1s: a labelled adjacency file starts \
         its header with an empty cell (',{}') and each row with its name; or leave the header \
         out",
        .names.join(", "),
        .names.join(",")
    )]
    HeaderWithoutCorner { line: usize, names: Vec<String> },
    /// A variable pointing at itself.
    #[error("line {line}: self-loop on '{name}'; a variable cannot cause itself")]
    SelfLoop { line: usize, name: String },
    /// The matrix size differs from the number of variables.
    #[error("line {line}: the matrix has {found} variables but the data has {expected}")]
    NameCount {
        line: usize,
        found: usize,
        expected: usize,
    },
    /// A name in the file that is not a variable of the data.
    #[error("line {line}: '{name}' is not a variable of the data")]
    UnknownName { line: usize, name: String },
    /// A labelled file whose names are not the variables it is read against (listing them all).
    #[error(
        "line {line}: the file's names do not match the variables{}{}",
        name_list("; missing from the file", missing),
        name_list("; not variables here", unknown)
    )]
    NameMismatch {
        line: usize,
        /// Variables the file does not name.
        missing: Vec<String>,
        /// Names in the file that are not variables.
        unknown: Vec<String>,
    },
    /// A name listed twice in a header.
    #[error("line {line}: '{name}' appears twice in the header")]
    DuplicateName { line: usize, name: String },
    /// The caller's variable names contain a duplicate, so names cannot identify nodes.
    #[error("the data has two variables named '{name}', so a file cannot refer to them by name")]
    DuplicateVariable { name: String },
    /// A labelled row whose label differs from the header at that position.
    #[error("line {line}: the row is labelled '{found}' but the header has '{expected}' there")]
    RowLabel {
        line: usize,
        found: String,
        expected: String,
    },
    /// An edge-list header without `from` and `to` columns.
    #[error("line {line}: the header needs columns named 'from' and 'to'")]
    MissingColumns { line: usize },
    /// An edge-list line without a value in a required column.
    #[error("line {line}: no value in the '{field}' column")]
    MissingField { line: usize, field: &'static str },
    /// Malformed CSV (for example an unterminated quote).
    #[error("line {line}: {message}")]
    Csv { line: usize, message: String },
    /// Malformed JSON, or JSON of the wrong shape.
    #[error("line {line}, column {column}: {message}")]
    Json {
        line: usize,
        column: usize,
        message: String,
    },
    /// A JSON graph whose orientation sentence is not ours, so its matrix could be transposed.
    #[error("the JSON's orientation is '{found}', expected '{ADJACENCY_ORIENTATION}'")]
    Orientation { found: String },
    /// A JSON graph that parses but is inconsistent.
    #[error("invalid JSON graph: {message}")]
    JsonInvalid { message: String },
}

/// `"; label: 'a', 'b'"`, or nothing for an empty list (at most 20 names, then a count).
fn name_list(label: &str, names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    const SHOWN: usize = 20;
    let mut text: Vec<String> = names
        .iter()
        .take(SHOWN)
        .map(|n| format!("'{}'", n.escape_debug()))
        .collect();
    if names.len() > SHOWN {
        text.push(format!("and {} more", names.len() - SHOWN));
    }
    format!("{label}: {}", text.join(", "))
}

/// Every name that does not match, both ways, between the `expected` variables and the names a
/// file gives (`found`), as one error; None when the two sets are equal.
fn name_mismatch(line: usize, expected: &[String], found: &[String]) -> Option<GraphIoError> {
    let found_set: HashSet<&str> = found.iter().map(String::as_str).collect();
    let expected_set: HashSet<&str> = expected.iter().map(String::as_str).collect();
    let missing: Vec<String> = expected
        .iter()
        .filter(|n| !found_set.contains(n.as_str()))
        .cloned()
        .collect();
    let unknown: Vec<String> = found
        .iter()
        .filter(|n| !expected_set.contains(n.as_str()))
        .cloned()
        .collect();
    (!missing.is_empty() || !unknown.is_empty()).then_some(GraphIoError::NameMismatch {
        line,
        missing,
        unknown,
    })
}

/// A graph together with its node names, as read from a self-describing file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamedGraph {
    /// Node names, index i naming node i.
    pub names: Vec<String>,
    /// The graph, `A[i][j] = 1 ⇔ names[i] → names[j]`.
    pub graph: Digraph,
}

impl NamedGraph {
    /// The same graph with its nodes in the order of `names`, matched by name: refused, listing
    /// every name that does not match both ways, unless the two name sets are equal.
    pub fn aligned_to(&self, names: &[String]) -> Result<Digraph, GraphIoError> {
        let index = index_names(names)?;
        if let Some(e) = name_mismatch(1, names, &self.names) {
            return Err(e);
        }
        // Equal sets without repeats on either side are the same names in another order.
        index_names(&self.names)?;
        let position: Vec<usize> = self.names.iter().map(|n| index[n.as_str()]).collect();
        let mut out = Digraph::empty(names.len());
        for (a, b) in self.graph.edges() {
            out.add_edge(position[a], position[b])
                .expect("positions are distinct and in range");
        }
        Ok(out)
    }
}

/// One non-blank, non-comment row of a matrix file with its 1-based line number.
struct Row {
    line: usize,
    cells: Vec<String>,
}

fn is_skippable(line: &str) -> bool {
    line.trim().is_empty() || line.starts_with('#')
}

/// Splits a matrix file into rows. The delimiter comes from the first row that is not blank or a
/// comment: `,` if it has one, else `;`, else runs of whitespace. Delimited files go through the
/// `csv` crate so quoted names may hold delimiters; cells are trimmed.
/// The text with CRLF and lone CR line breaks turned into LF, so every reader splits lines and
/// counts line numbers the same way whatever system wrote the file.
fn unix_lines(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

fn matrix_rows(text: &str) -> Result<Vec<Row>, GraphIoError> {
    let text = &*unix_lines(text);
    let first = text
        .lines()
        .find(|l| !is_skippable(l))
        .ok_or(GraphIoError::Empty)?;
    let delimiter = if first.contains(',') {
        Some(b',')
    } else if first.contains(';') {
        Some(b';')
    } else {
        None
    };
    let mut rows = Vec::new();
    match delimiter {
        None => {
            for (k, line) in text.lines().enumerate() {
                if !is_skippable(line) {
                    rows.push(Row {
                        line: k + 1,
                        cells: line.split_whitespace().map(str::to_string).collect(),
                    });
                }
            }
        }
        Some(d) => {
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .flexible(true)
                .comment(Some(b'#'))
                .trim(csv::Trim::All)
                .delimiter(d)
                .from_reader(text.as_bytes());
            for record in reader.records() {
                let record = record.map_err(|e| csv_error(text, e, true))?;
                let line = line_at(text, record.position(), true);
                if record.iter().all(str::is_empty) {
                    continue;
                }
                rows.push(Row {
                    line,
                    cells: record.iter().map(str::to_string).collect(),
                });
            }
        }
    }
    // A file of delimiters only (`,` or `;;`) has lines but no cell with anything in it.
    if rows.is_empty() {
        return Err(GraphIoError::Empty);
    }
    Ok(rows)
}

/// 1-based line where a `csv` record starts. The crate's own line counter skips blank lines, and a
/// record's byte position can point at blank or comment lines skipped before it, so the line is
/// counted from the byte position after stepping over such lines (comment lines only where the
/// reader skips them).
fn line_at(text: &str, position: Option<&csv::Position>, comments: bool) -> usize {
    let bytes = text.as_bytes();
    let mut byte = position.map_or(0, |p| p.byte() as usize).min(bytes.len());
    loop {
        let rest = &bytes[byte..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            break;
        };
        let line = &rest[..end];
        let blank = line.iter().all(|b| b.is_ascii_whitespace());
        if blank || (comments && line.first() == Some(&b'#')) {
            byte += end + 1;
        } else {
            break;
        }
    }
    1 + bytes[..byte].iter().filter(|&&b| b == b'\n').count()
}

fn csv_error(text: &str, e: csv::Error, comments: bool) -> GraphIoError {
    GraphIoError::Csv {
        line: line_at(text, e.position(), comments),
        message: e.to_string(),
    }
}

/// 0 or 1 written as an integer or a decimal (`1`, `1.0`, `0e0`).
fn parse_entry(cell: &str) -> Option<bool> {
    match cell {
        "0" => Some(false),
        "1" => Some(true),
        _ => match cell.parse::<f64>() {
            Ok(0.0) => Some(false),
            Ok(1.0) => Some(true),
            _ => None,
        },
    }
}

fn index_names(names: &[String]) -> Result<HashMap<&str, usize>, GraphIoError> {
    let mut index = HashMap::with_capacity(names.len());
    for (k, name) in names.iter().enumerate() {
        if index.insert(name.as_str(), k).is_some() {
            return Err(GraphIoError::DuplicateVariable { name: name.clone() });
        }
    }
    Ok(index)
}

/// The names of a labelled adjacency file (its header after the empty first cell), or None for a
/// plain matrix. The file is only split into rows here; [`read_adjacency`] checks the rest.
pub fn adjacency_labels(text: &str) -> Result<Option<Vec<String>>, GraphIoError> {
    let rows = matrix_rows(text)?;
    let header = &rows[0];
    Ok((header.cells.len() > 1 && header.cells[0].is_empty()).then(|| header.cells[1..].to_vec()))
}

/// Reads an adjacency matrix, `A[i][j] = 1 ⇔ variable i → variable j`, in either of two layouts:
/// - plain (as in `shared/data`): D lines of D entries, no header;
/// - labelled (as written by [`to_adjacency_csv`](super::to_adjacency_csv)): a header whose first
///   cell is empty followed by the D names, then D rows each starting with its name.
///
/// Entries are separated by `,`, `;` or whitespace (decided by the first row) and must be 0 or 1
/// (`1.0` is accepted); blank lines and lines starting with `#` are skipped; cells are trimmed.
/// With `names`, the matrix must have one row per name; a labelled file's header must hold
/// exactly those names, in any order, and the result follows the order of `names`. Refused: a
/// non-square matrix, an entry other than 0/1, a 1 on the diagonal, unknown or repeated names.
pub fn read_adjacency(text: &str, names: Option<&[String]>) -> Result<Digraph, GraphIoError> {
    let rows = matrix_rows(text)?;
    let header = &rows[0];
    let labelled = header.cells.len() > 1 && header.cells[0].is_empty();
    // A header of names without the corner cell: say so rather than "'X1' is not 0 or 1".
    if !labelled
        && header.cells.len() > 1
        && header
            .cells
            .iter()
            .all(|c| !c.is_empty() && c.parse::<f64>().is_err())
    {
        return Err(GraphIoError::HeaderWithoutCorner {
            line: header.line,
            names: header.cells.clone(),
        });
    }
    // Column labels (when labelled) and the rows holding entries.
    let (labels, body): (Option<&[String]>, &[Row]) = if labelled {
        (Some(&header.cells[1..]), &rows[1..])
    } else {
        (None, &rows[..])
    };
    let d = labels.map_or(header.cells.len(), <[String]>::len);
    let offset = usize::from(labelled); // entries start after the row label

    if let Some(labels) = labels {
        let mut seen = HashMap::new();
        for name in labels {
            if seen.insert(name.as_str(), ()).is_some() {
                return Err(GraphIoError::DuplicateName {
                    line: header.line,
                    name: name.clone(),
                });
            }
        }
    }

    // position[k] = index in the output of the file's k-th variable.
    let position: Vec<usize> = match names {
        None => (0..d).collect(),
        Some(names) => {
            let index = index_names(names)?;
            if let Some(labels) = labels {
                if let Some(e) = name_mismatch(header.line, names, labels) {
                    return Err(e);
                }
            }
            if d != names.len() {
                return Err(GraphIoError::NameCount {
                    line: header.line,
                    found: d,
                    expected: names.len(),
                });
            }
            match labels {
                None => (0..d).collect(),
                Some(labels) => labels
                    .iter()
                    .map(|l| {
                        index
                            .get(l.as_str())
                            .copied()
                            .ok_or_else(|| GraphIoError::UnknownName {
                                line: header.line,
                                name: l.clone(),
                            })
                    })
                    .collect::<Result<_, _>>()?,
            }
        }
    };
    let display_name = |k: usize| -> String {
        match (labels, names) {
            (Some(labels), _) => labels[k].clone(),
            (None, Some(names)) => names[k].clone(),
            (None, None) => format!("variable {}", k + 1),
        }
    };

    let mut graph = Digraph::empty(d);
    for (i, row) in body.iter().enumerate() {
        if i >= d {
            return Err(GraphIoError::TooManyRows {
                line: row.line,
                columns: d,
            });
        }
        let entries = row.cells.len() - offset;
        if entries != d {
            return Err(GraphIoError::RowLength {
                line: row.line,
                found: entries,
                expected: d,
            });
        }
        if let Some(labels) = labels {
            if row.cells[0] != labels[i] {
                return Err(GraphIoError::RowLabel {
                    line: row.line,
                    found: row.cells[0].clone(),
                    expected: labels[i].clone(),
                });
            }
        }
        for j in 0..d {
            let cell = &row.cells[j + offset];
            let edge = parse_entry(cell).ok_or_else(|| GraphIoError::BadEntry {
                line: row.line,
                column: j + offset + 1,
                value: cell.clone(),
            })?;
            if edge {
                if i == j {
                    return Err(GraphIoError::SelfLoop {
                        line: row.line,
                        name: display_name(i),
                    });
                }
                graph
                    .add_edge(position[i], position[j])
                    .expect("positions are distinct and in range");
            }
        }
    }
    if body.len() < d {
        return Err(GraphIoError::TooFewRows {
            line: body.last().map_or(header.line, |r| r.line),
            rows: body.len(),
            columns: d,
        });
    }
    Ok(graph)
}

/// The stop note of a stopped run's graph file (its first line, `# stopped before the end: …` or
/// `// stopped before the end: …`, see [`super::STOPPED_NOTE`]): the words after the marker, or
/// None for a file of a finished run.
pub fn stopped_note(text: &str) -> Option<&str> {
    let first = text
        .trim_start_matches('\u{feff}')
        .lines()
        .next()?
        .trim_end();
    let comment = first
        .strip_prefix('#')
        .or_else(|| first.strip_prefix("//"))?
        .trim_start();
    comment
        .strip_prefix(super::STOPPED_NOTE)
        .map(str::trim_start)
}

/// Reads an edge list: a CSV header with columns `from` and `to` (any case, any position; other
/// columns are ignored), then one edge per line by variable name. Names must be among `names`
/// (node i is `names[i]`); cells are trimmed; blank lines are skipped; there are no comment lines
/// (a name may start with `#`) but a stopped run's first line ([`stopped_note`]), which is
/// skipped; a repeated edge is kept once; a self-loop is refused.
pub fn read_edge_list(text: &str, names: &[String]) -> Result<Digraph, GraphIoError> {
    let text = &*unix_lines(text);
    // The stop note's line is kept as an empty line, so line numbers still match the file.
    let text = &*match stopped_note(text) {
        Some(_) => format!("\n{}", text.split_once('\n').map_or("", |(_, rest)| rest)),
        None => text.to_string(),
    };
    let index = index_names(names)?;
    // No comment lines here: a name may start with '#', and the csv writer does not quote it.
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(text.as_bytes());
    let header = reader
        .headers()
        .map_err(|e| csv_error(text, e, false))?
        .clone();
    let header_line = line_at(text, header.position(), false);
    let column = |wanted: &str| header.iter().position(|h| h.eq_ignore_ascii_case(wanted));
    let (from_col, to_col) = match (column("from"), column("to")) {
        (Some(f), Some(t)) => (f, t),
        _ => return Err(GraphIoError::MissingColumns { line: header_line }),
    };
    let mut graph = Digraph::empty(names.len());
    for record in reader.records() {
        let record = record.map_err(|e| csv_error(text, e, false))?;
        let line = line_at(text, record.position(), false);
        if record.iter().all(str::is_empty) {
            continue;
        }
        let lookup = |col: usize, field: &'static str| -> Result<usize, GraphIoError> {
            let name = record
                .get(col)
                .filter(|v| !v.is_empty())
                .ok_or(GraphIoError::MissingField { line, field })?;
            index
                .get(name)
                .copied()
                .ok_or_else(|| GraphIoError::UnknownName {
                    line,
                    name: name.to_string(),
                })
        };
        let from = lookup(from_col, "from")?;
        let to = lookup(to_col, "to")?;
        if from == to {
            return Err(GraphIoError::SelfLoop {
                line,
                name: names[from].clone(),
            });
        }
        graph
            .add_edge(from, to)
            .expect("indices come from the name index");
    }
    Ok(graph)
}

/// serde_json's message without its trailing " at line L column C" (reported separately).
fn json_error(e: serde_json::Error) -> GraphIoError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    GraphIoError::Json {
        line: e.line(),
        column: e.column(),
        message,
    }
}

/// Reads the JSON graph format written by [`to_graph_json`](super::to_graph_json):
/// `{"orientation": ..., "nodes": [...], "edges": [{"from", "to"}], "adjacency": [[...]]}`.
/// The orientation must be this crate's sentence (so a transposed matrix is not read silently);
/// node names must be distinct; at least one of `edges` and `adjacency` must be present, and when
/// both are they must describe the same graph. Unknown fields are ignored.
pub fn read_graph_json(text: &str) -> Result<NamedGraph, GraphIoError> {
    let doc: GraphJson = serde_json::from_str(text).map_err(json_error)?;
    if doc.orientation != ADJACENCY_ORIENTATION {
        return Err(GraphIoError::Orientation {
            found: doc.orientation,
        });
    }
    let index = index_names(&doc.nodes)?;
    let n = doc.nodes.len();
    let invalid = |message: String| GraphIoError::JsonInvalid { message };

    let from_matrix = match &doc.adjacency {
        None => None,
        Some(rows) => {
            if rows.len() != n {
                return Err(invalid(format!(
                    "\"adjacency\" has {} rows for {} nodes",
                    rows.len(),
                    n
                )));
            }
            let g =
                Digraph::from_matrix(rows).map_err(|e| invalid(format!("\"adjacency\": {e}")))?;
            Some(g)
        }
    };
    let from_edges = match &doc.edges {
        None => None,
        Some(edges) => {
            let mut g = Digraph::empty(n);
            for (k, edge) in edges.iter().enumerate() {
                let find = |name: &str| {
                    index.get(name).copied().ok_or_else(|| {
                        invalid(format!(
                            "edge {} names '{}', which is not in \"nodes\"",
                            k + 1,
                            name
                        ))
                    })
                };
                let (a, b) = (find(&edge.from)?, find(&edge.to)?);
                if a == b {
                    return Err(invalid(format!(
                        "edge {} is a self-loop on '{}'",
                        k + 1,
                        edge.from
                    )));
                }
                g.add_edge(a, b).expect("indices come from the name index");
            }
            Some(g)
        }
    };
    let graph = match (from_matrix, from_edges) {
        (Some(m), Some(e)) => {
            if m != e {
                let differs = (0..n)
                    .flat_map(|i| (0..n).map(move |j| (i, j)))
                    .find(|&(i, j)| m.has_edge(i, j) != e.has_edge(i, j))
                    .expect("unequal graphs differ somewhere");
                return Err(invalid(format!(
                    "\"edges\" and \"adjacency\" disagree about '{}' -> '{}'",
                    doc.nodes[differs.0], doc.nodes[differs.1]
                )));
            }
            m
        }
        (Some(g), None) | (None, Some(g)) => g,
        (None, None) => {
            return Err(invalid(
                "neither \"edges\" nor \"adjacency\" is present".to_string(),
            ))
        }
    };
    Ok(NamedGraph {
        names: doc.nodes,
        graph,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn plain_matrix_in_every_separator() {
        let expected = Digraph::from_edges(3, &[(0, 1), (2, 1)]).unwrap();
        for text in [
            "0,1,0\n0,0,0\n0,1,0\n",
            "0, 1, 0\r\n0, 0, 0\r\n0, 1, 0",
            "0;1;0\n0;0;0\n0;1;0\n",
            "0 1 0\n0\t0 0\n\n0   1 0\n",
            "# a comment\n0,1,0\n\n0,0,0\n# another\n0,1.0,0\n",
        ] {
            assert_eq!(read_adjacency(text, None).unwrap(), expected, "{text:?}");
        }
        let n = names(&["a", "b", "c"]);
        assert_eq!(
            read_adjacency("0,1,0\n0,0,0\n0,1,0\n", Some(&n)).unwrap(),
            expected
        );
    }

    #[test]
    fn labelled_matrix_is_reordered_to_the_given_names() {
        let text = "# adjacency\n,b,a\nb,0,1\na,0,0\n";
        // File order b, a with b → a; names order a, b: expect 1 → 0.
        let g = read_adjacency(text, Some(&names(&["a", "b"]))).unwrap();
        assert_eq!(g.edges(), vec![(1, 0)]);
        // Without names the file's order is kept.
        assert_eq!(read_adjacency(text, None).unwrap().edges(), vec![(0, 1)]);
    }

    #[test]
    fn line_numbers_are_the_same_for_lf_crlf_and_cr() {
        let n = names(&["a", "b", "c"]);
        let matrix = "# comment\n0,1,0\n\n0,0,2\n0,0,0\n";
        let list = "from,to\na,b\n\nb,zz\n";
        for ending in ["\n", "\r\n", "\r"] {
            let m = matrix.replace('\n', ending);
            assert_eq!(
                read_adjacency(&m, None).unwrap_err(),
                GraphIoError::BadEntry {
                    line: 4,
                    column: 3,
                    value: "2".into()
                },
                "{ending:?}"
            );
            let e = read_edge_list(&list.replace('\n', ending), &n).unwrap_err();
            assert!(e.to_string().starts_with("line 4"), "{ending:?}: {e}");
            let spaced = "0 1\n0 0\n".replace('\n', ending);
            assert_eq!(read_adjacency(&spaced, None).unwrap().edges(), vec![(0, 1)]);
        }
    }

    #[test]
    fn files_of_delimiters_only_are_empty_not_a_panic() {
        for text in [",", ",,\n", ";\n", ", ,\n\n", "\"\",\"\"\n", ";;;\n;;\n"] {
            assert_eq!(
                read_adjacency(text, None),
                Err(GraphIoError::Empty),
                "{text:?}"
            );
            assert_eq!(adjacency_labels(text), Err(GraphIoError::Empty), "{text:?}");
            let n = names(&["a", "b"]);
            assert_eq!(
                read_adjacency(text, Some(&n)),
                Err(GraphIoError::Empty),
                "{text:?}"
            );
        }
    }

    #[test]
    fn matrix_errors_name_the_line() {
        let err = |text: &str| read_adjacency(text, None).unwrap_err();
        assert_eq!(
            err("0,1\n0,0,0\n"),
            GraphIoError::RowLength {
                line: 2,
                found: 3,
                expected: 2
            }
        );
        assert_eq!(
            err("0,1\n0,0\n1,0\n"),
            GraphIoError::TooManyRows {
                line: 3,
                columns: 2
            }
        );
        assert_eq!(
            err("0,1,0\n\n0,0,0\n"),
            GraphIoError::TooFewRows {
                line: 3,
                rows: 2,
                columns: 3
            }
        );
        let e = err("0,1\n0,x\n");
        assert_eq!(
            e,
            GraphIoError::BadEntry {
                line: 2,
                column: 2,
                value: "x".into()
            }
        );
        assert_eq!(e.to_string(), "line 2, column 2: 'x' is not 0 or 1");
        assert!(matches!(err("0,2\n0,0\n"), GraphIoError::BadEntry { .. }));
        assert!(matches!(err("0,-1\n0,0\n"), GraphIoError::BadEntry { .. }));
        let e = err("0,1\n0,1\n");
        assert_eq!(
            e,
            GraphIoError::SelfLoop {
                line: 2,
                name: "variable 2".into()
            }
        );
        assert!(e.to_string().starts_with("line 2: self-loop"));
        assert_eq!(err("\n# only a comment\n"), GraphIoError::Empty);
        assert_eq!(
            err(",a,b\na,0,1\nc,0,0\n"),
            GraphIoError::RowLabel {
                line: 3,
                found: "c".into(),
                expected: "b".into()
            }
        );
        assert_eq!(
            err(",a,a\na,0,1\na,0,0\n"),
            GraphIoError::DuplicateName {
                line: 1,
                name: "a".into()
            }
        );
        // An unterminated quote swallows the rest of the file into one cell.
        assert_eq!(
            err("0,\"1\n0,0\n"),
            GraphIoError::BadEntry {
                line: 1,
                column: 2,
                value: "1\n0,0".into()
            }
        );
    }

    #[test]
    fn matrix_errors_against_names() {
        let n = names(&["a", "b", "c"]);
        assert_eq!(
            read_adjacency("0,1\n0,0\n", Some(&n)).unwrap_err(),
            GraphIoError::NameCount {
                line: 1,
                found: 2,
                expected: 3
            }
        );
        // A labelled file over other names: every name that does not match is listed, both ways,
        // whether or not the counts agree.
        let e = read_adjacency(",a,b,z\na,0,0,0\nb,0,0,0\nz,0,0,0\n", Some(&n)).unwrap_err();
        assert_eq!(
            e,
            GraphIoError::NameMismatch {
                line: 1,
                missing: vec!["c".into()],
                unknown: vec!["z".into()]
            }
        );
        assert_eq!(
            e.to_string(),
            "line 1: the file's names do not match the variables; missing from the file: 'c'; \
             not variables here: 'z'"
        );
        let e = read_adjacency(",x,y\nx,0,1\ny,0,0\n", Some(&n)).unwrap_err();
        assert_eq!(
            e,
            GraphIoError::NameMismatch {
                line: 1,
                missing: names(&["a", "b", "c"]),
                unknown: names(&["x", "y"])
            }
        );
        assert_eq!(
            adjacency_labels(",x,y\nx,0,1\ny,0,0\n").unwrap(),
            Some(names(&["x", "y"]))
        );
        assert_eq!(adjacency_labels("0,1\n0,0\n").unwrap(), None);
        assert_eq!(
            read_adjacency("0,1\n0,0\n", Some(&names(&["a", "a"]))).unwrap_err(),
            GraphIoError::DuplicateVariable { name: "a".into() }
        );
        let e = read_adjacency(",a,b,c\na,0,0,0\nb,0,1,0\nc,0,0,0\n", Some(&n)).unwrap_err();
        assert_eq!(
            e,
            GraphIoError::SelfLoop {
                line: 3,
                name: "b".into()
            }
        );
    }

    #[test]
    fn edge_list_reading_and_errors() {
        let n = names(&["a", "b", "c"]);
        let g = read_edge_list("weight,To,FROM\n0.5,b,a\n1,c, b \n\n1,b,a\n", &n).unwrap();
        assert_eq!(g.edges(), vec![(0, 1), (1, 2)]);
        let e = read_edge_list("from,to\n\n\na,b\n\na,zz\n", &n).unwrap_err();
        assert_eq!(
            e,
            GraphIoError::UnknownName {
                line: 6,
                name: "zz".into()
            }
        );
        assert_eq!(e.to_string(), "line 6: 'zz' is not a variable of the data");
        assert_eq!(
            read_edge_list("source,target\na,b\n", &n).unwrap_err(),
            GraphIoError::MissingColumns { line: 1 }
        );
        assert_eq!(
            read_edge_list("from,to\na\n", &n).unwrap_err(),
            GraphIoError::MissingField {
                line: 2,
                field: "to"
            }
        );
        assert_eq!(
            read_edge_list("from,to\nc,c\n", &n).unwrap_err(),
            GraphIoError::SelfLoop {
                line: 2,
                name: "c".into()
            }
        );
        assert_eq!(
            read_edge_list("from,to\n#x,a\n", &n).unwrap_err(),
            GraphIoError::UnknownName {
                line: 2,
                name: "#x".into()
            }
        );
        assert!(matches!(
            read_edge_list("from,to\na,b\n", &names(&["a", "a"])).unwrap_err(),
            GraphIoError::DuplicateVariable { .. }
        ));
        assert_eq!(read_edge_list("from,to\n", &n).unwrap(), Digraph::empty(3));
    }

    #[test]
    fn json_reading_and_errors() {
        let ok = r#"{"orientation": "A[i][j] = 1 means row variable i -> column variable j",
            "nodes": ["x", "y"], "adjacency": [[0, 1], [0, 0]]}"#;
        let read = read_graph_json(ok).unwrap();
        assert_eq!(read.names, names(&["x", "y"]));
        assert_eq!(read.graph.edges(), vec![(0, 1)]);
        let edges_only = r#"{"orientation": "A[i][j] = 1 means row variable i -> column variable j",
            "nodes": ["x", "y"], "edges": [{"from": "y", "to": "x"}], "extra": 1}"#;
        assert_eq!(
            read_graph_json(edges_only).unwrap().graph.edges(),
            vec![(1, 0)]
        );

        let e = read_graph_json("{\n  \"nodes\": [\"x\"],\n  \"orientation\": 3\n}").unwrap_err();
        assert!(
            matches!(e, GraphIoError::Json { line: 3, .. }),
            "{e:?}: {e}"
        );
        assert!(e.to_string().starts_with("line 3, column"), "{e}");
        assert!(matches!(
            read_graph_json(r#"{"orientation": "A[i][j] = 1 means column i -> row j", "nodes": [], "edges": []}"#)
                .unwrap_err(),
            GraphIoError::Orientation { .. }
        ));
        let bad = |body: &str| {
            let text = format!(
                r#"{{"orientation": "A[i][j] = 1 means row variable i -> column variable j", {body}}}"#
            );
            read_graph_json(&text).unwrap_err().to_string()
        };
        assert!(bad(r#""nodes": ["x", "y"]"#).contains("neither"));
        assert!(bad(r#""nodes": ["x", "x"], "edges": []"#).contains("two variables named 'x'"));
        assert!(bad(r#""nodes": ["x", "y"], "adjacency": [[0, 1]]"#).contains("1 rows for 2"));
        assert!(
            bad(r#""nodes": ["x", "y"], "adjacency": [[0, 2], [0, 0]]"#).contains("only 0 and 1")
        );
        assert!(bad(r#""nodes": ["x", "y"], "adjacency": [[1, 0], [0, 0]]"#).contains("self-loop"));
        assert!(bad(r#""nodes": ["x"], "edges": [{"from": "x", "to": "q"}]"#).contains("'q'"));
        assert!(
            bad(r#""nodes": ["x"], "edges": [{"from": "x", "to": "x"}]"#).contains("self-loop")
        );
        assert!(bad(
            r#""nodes": ["x", "y"], "edges": [{"from": "y", "to": "x"}], "adjacency": [[0, 1], [0, 0]]"#
        )
        .contains("disagree about 'x' -> 'y'"));
    }
}
