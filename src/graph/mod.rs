//! Directed graphs over named variables, in one orientation convention everywhere outside the model
//! internals: `A[i][j] = 1` means variable i → variable j (row = cause, column = effect).
//!
//! Owns: [`Digraph`] (any directed graph, possibly cyclic, as predictions and prior knowledge can be)
//! and [`Dag`] (a digraph proven acyclic); topological order and cycle reporting; enumeration of all
//! DAGs on few nodes; CPDAGs by Meek's rules; comparison metrics; reading and writing graph files.
//!
//! Files, one job each: `digraph` (storage), `enumerate` (all DAGs on ≤ 5 nodes), `cpdag` (Markov
//! equivalence), `dsep` (d-separation), `sid` (structural intervention distance), `metrics` (SHD,
//! precision/recall/F1, edge classes), `export` (writers) and `import` (readers). The drawing
//! geometry belongs to the page (`page_model::graph_layout`).

mod cpdag;
mod digraph;
mod dsep;
mod enumerate;
mod export;
mod import;
mod metrics;
mod sid;

pub use cpdag::{cpdag, markov_equivalent, v_structures, Pdag};
pub use digraph::{Dag, Digraph, GraphError};
pub use dsep::d_separated;
pub use enumerate::{all_dags, dag_count, EnumerateError, MAX_ENUMERATION_NODES};
pub use export::{
    tetrad_names, to_adjacency_csv, to_dagitty, to_dot, to_edge_list_csv, to_graph_json,
    to_probability_csv, to_tetrad, ADJACENCY_ORIENTATION, STOPPED_NOTE,
};
pub use import::{
    adjacency_labels, read_adjacency, read_edge_list, read_graph_json, stopped_note, GraphIoError,
    NamedGraph,
};
pub use metrics::{
    classify_edges, compare, f1, precision, recall, shd, shd_reversal_1, Comparison, EdgeClass,
    EdgeKind,
};
pub use sid::{is_valid_adjustment_set, sid, sid_pairs};
