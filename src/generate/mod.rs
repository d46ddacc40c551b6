//! Seeded synthetic data with a known causal graph: random ER / scale-free DAGs and the mechanisms
//! of the paper's experiments.
//!
//! Owns: [`GeneratorSettings`] and their validation, [`generate`] (graph, then columns in
//! topological order, each standardised before its children read it), and the record of what was
//! drawn ([`GenerationMeta`]). Randomness comes only from the seed: the graph from ChaCha8 stream 0
//! of `seed`, the mechanisms and noise from stream 1, so the same seed gives the same graph whatever
//! the mechanism or sample count, and the same settings give bit-identical output.
//!
//! Files: `graphs` (ER and Barabási–Albert DAGs), `mechanisms` (one node's column), `mlp` (random
//! ReLU networks), `kernels` (kernel values for sampling), `gp_draw` (exact GP draws by Cholesky).

mod gp_draw;
mod graphs;
mod kernels;
mod mechanisms;
mod mlp;

use std::str::FromStr;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use crate::base::names::{self, named_choices};
use crate::data::Dataset;
use crate::data::{mean_sd, standardise};
use crate::graph::Dag;

pub use graphs::random_dag;
pub use kernels::StationaryKernel;
pub use mechanisms::NodeMechanism;

/// Most nodes a generated data set may have.
pub const MAX_NODES: usize = 1000;
/// Most rows a generated data set may have.
pub const MAX_SAMPLES: usize = 100_000;
/// Most cells (nodes × samples) a generated data set may have: 10⁷ f64 values are 80 MB.
pub const MAX_CELLS: usize = 10_000_000;
/// Most rows for the exact-GP mechanisms ([`Mechanism::Gp`], [`Mechanism::GpCde`]): each node
/// factorises an N × N kernel matrix (N² f64 of memory, about N³/3 flops), 128 MB at the cap.
/// Measured at the cap (release build, 2-core Xeon): about 8 s per non-root node for `gp` and 9 s
/// per node for `gpcde`; at N = 1000 a 3-node `gpcde` set takes 0.2 s.
pub const MAX_EXACT_GP_SAMPLES: usize = 4000;

named_choices! {
    /// The random graph model.
    #[derive(Hash, strum::Display)]
    pub enum GraphKind in "lowercase" {
        /// Erdős–Rényi over a random order: each forward pair is an edge with
        /// p = min(1, 2k/(D−1)).
        Er,
        /// Barabási–Albert scale-free: node t of a random order sends min(k, t) edges t → s to
        /// earlier nodes, preferring those with many parents, so hubs have many parents.
        Sf,
    }
}

named_choices! {
    /// How each node is computed from its parents (see [`NodeMechanism`] for the exact formulas).
    #[derive(Hash, strum::Display)]
    pub enum Mechanism in "lowercase" {
        /// X_i = MLP_i([X_pa(i), ε_i]), the paper's 20/50-variable recipe.
        Mlp,
        /// Linear Gaussian: X_i = Σ_p w_ip X_p + ε_i with w ~ ±U(0.5, 2).
        Linear,
        /// Additive-noise GP: X_i = f_i(X_pa(i)) + σ_i ε_i with an SE kernel.
        Gp,
        /// GP-CDE samples (linear + random stationary kernel over [X_pa(i), w_i]), the paper's
        /// three-variable recipe applied to any graph.
        GpCde,
    }
}

impl GraphKind {
    /// All kinds, in the order listed to users.
    pub const ALL: &'static [GraphKind] = <Self as strum::VariantArray>::VARIANTS;

    /// The lowercase name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        names::name(self)
    }
}

impl Mechanism {
    /// All mechanisms, in the order listed to users.
    pub const ALL: &'static [Mechanism] = <Self as strum::VariantArray>::VARIANTS;

    /// The lowercase name used on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        names::name(self)
    }

    /// True for the mechanisms that draw an exact GP (an N × N Cholesky per node).
    pub fn is_exact_gp(self) -> bool {
        matches!(self, Mechanism::Gp | Mechanism::GpCde)
    }
}

impl FromStr for GraphKind {
    type Err = GenerateError;

    /// Parses "er" or "sf" (case-insensitive, surrounding spaces ignored).
    fn from_str(s: &str) -> Result<Self, GenerateError> {
        names::parse(s).ok_or_else(|| GenerateError::UnknownGraphKind {
            given: s.to_string(),
            valid: names::list::<GraphKind>(),
        })
    }
}

impl FromStr for Mechanism {
    type Err = GenerateError;

    /// Parses "mlp", "linear", "gp" or "gpcde" (case-insensitive, surrounding spaces ignored).
    fn from_str(s: &str) -> Result<Self, GenerateError> {
        names::parse(s).ok_or_else(|| GenerateError::UnknownMechanism {
            given: s.to_string(),
            valid: names::list::<Mechanism>(),
        })
    }
}

/// Everything that determines a generated data set.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GeneratorSettings {
    /// The random graph model.
    pub graph: GraphKind,
    /// Number of variables D (1..=[`MAX_NODES`]).
    pub nodes: usize,
    /// k: ER expects k·D edges; SF attaches k edges per new node. Saturates at the complete DAG.
    pub edges_per_node: usize,
    /// Number of rows N (2..=[`MAX_SAMPLES`]; ≤ [`MAX_EXACT_GP_SAMPLES`] for the GP mechanisms).
    pub samples: usize,
    /// How each node is computed from its parents.
    pub mechanism: Mechanism,
    /// The seed of every random draw.
    pub seed: u64,
}

impl Default for GeneratorSettings {
    /// The shared benchmarks' ER1 recipe: 10 nodes, one expected edge per node, 1,000 rows, MLP
    /// mechanisms, seed 0.
    fn default() -> Self {
        Self {
            graph: GraphKind::Er,
            nodes: 10,
            edges_per_node: 1,
            samples: 1000,
            mechanism: Mechanism::Mlp,
            seed: 0,
        }
    }
}

impl GeneratorSettings {
    /// Checks the sizes against the documented limits, naming the first one broken.
    pub fn validate(&self) -> Result<(), GenerateError> {
        if !(1..=MAX_NODES).contains(&self.nodes) {
            return Err(GenerateError::Nodes { nodes: self.nodes });
        }
        // Two rows at least: a single row cannot be standardised to sd 1.
        if !(2..=MAX_SAMPLES).contains(&self.samples) {
            return Err(GenerateError::Samples {
                samples: self.samples,
            });
        }
        if self.nodes * self.samples > MAX_CELLS {
            return Err(GenerateError::TooManyCells {
                nodes: self.nodes,
                samples: self.samples,
            });
        }
        if self.mechanism.is_exact_gp() && self.samples > MAX_EXACT_GP_SAMPLES {
            return Err(GenerateError::ExactGpTooLarge {
                mechanism: self.mechanism,
                samples: self.samples,
            });
        }
        Ok(())
    }
}

/// Why settings were refused or a data set could not be generated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GenerateError {
    /// The node count is outside 1..=MAX_NODES.
    #[error("nodes must be between 1 and {MAX_NODES}, got {nodes}")]
    Nodes {
        /// The requested node count.
        nodes: usize,
    },
    /// The row count is outside 2..=MAX_SAMPLES.
    #[error(
        "samples must be between 2 and {MAX_SAMPLES} (a column is standardised, which needs at \
         least two rows), got {samples}"
    )]
    Samples {
        /// The requested row count.
        samples: usize,
    },
    /// nodes × samples exceeds MAX_CELLS.
    #[error(
        "{nodes} nodes × {samples} samples = {} values is more than the limit of {MAX_CELLS}; \
         use fewer nodes or samples",
        nodes * samples
    )]
    TooManyCells {
        /// The requested node count.
        nodes: usize,
        /// The requested row count.
        samples: usize,
    },
    /// An exact-GP mechanism was asked for more than MAX_EXACT_GP_SAMPLES rows.
    #[error(
        "the {mechanism} mechanism draws an exact Gaussian process (an N × N Cholesky per node), \
         limited to {MAX_EXACT_GP_SAMPLES} samples, got {samples}; use fewer samples or the mlp or \
         linear mechanism"
    )]
    ExactGpTooLarge {
        /// The exact-GP mechanism requested.
        mechanism: Mechanism,
        /// The requested row count.
        samples: usize,
    },
    /// A graph kind name that is not one of the valid ones.
    #[error("unknown graph kind '{given}'; valid values: {valid}")]
    UnknownGraphKind {
        /// The text given.
        given: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A mechanism name that is not one of the valid ones.
    #[error("unknown mechanism '{given}'; valid values: {valid}")]
    UnknownMechanism {
        /// The text given.
        given: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A node's kernel matrix could not be factorised even with the largest jitter.
    #[error(
        "the kernel matrix of {node} is not positive definite even with jitter {jitter:e} on its \
         diagonal; try another seed"
    )]
    NotPositiveDefinite {
        /// The node's column name.
        node: String,
        /// The last absolute jitter tried.
        jitter: f64,
    },
    /// A drawn graph that cannot be simulated (a cycle, a bad name, an unknown variable).
    #[error("the drawn graph cannot be simulated: {reason}")]
    Graph {
        /// What is wrong with it.
        reason: String,
    },
    /// A node's column came out constant or non-finite, so it cannot be standardised.
    #[error(
        "{node} came out {reason}, so it cannot be standardised; try another seed or more samples"
    )]
    Degenerate {
        /// The node's column name.
        node: String,
        /// What was wrong ("constant", "non-finite").
        reason: String,
    },
}

/// A generated data set and the graph that generated it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Generated {
    /// Columns X1..XD (N rows), each standardised to mean 0 and population sd 1.
    pub dataset: Dataset,
    /// The true DAG over the columns, `A[i][j] = 1 ⇔ column i → column j`.
    pub truth: Dag,
    /// What was drawn, for the run record.
    pub meta: GenerationMeta,
}

/// A serialisable description of a generation run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationMeta {
    /// The settings used.
    pub settings: GeneratorSettings,
    /// Number of edges of the true graph.
    pub edge_count: usize,
    /// The order in which columns were generated (a topological order of the truth, 0-based).
    pub generation_order: Vec<usize>,
    /// One entry per column, in column order.
    pub nodes: Vec<NodeMeta>,
}

/// What was drawn for one column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeMeta {
    /// Column name (X1..XD).
    pub name: String,
    /// Parents as 0-based column indices, ascending (the order of the mechanism's inputs).
    pub parents: Vec<usize>,
    /// The mechanism's drawn parameters.
    pub mechanism: NodeMechanism,
}

/// The column names X1..XD.
fn column_names(nodes: usize) -> Vec<String> {
    (1..=nodes).map(|i| format!("X{i}")).collect()
}

/// Generates a data set: validates `settings`, draws the graph with [`random_dag`], then visits the
/// nodes in topological order, drawing each column from its parents' standardised columns with the
/// chosen [`Mechanism`] and standardising it (mean 0, population sd 1) before any child reads it.
/// Same settings give bit-identical output.
pub fn generate(settings: &GeneratorSettings) -> Result<Generated, GenerateError> {
    generate_with_progress(settings, &mut |_, _, _| {})
}

/// [`generate`], calling `progress(done, total, name)` after each column is drawn (a GP mechanism
/// factorises an N × N matrix per column: minutes at large N).
pub fn generate_with_progress(
    settings: &GeneratorSettings,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<Generated, GenerateError> {
    settings.validate()?;
    let GeneratorSettings {
        graph,
        nodes,
        edges_per_node,
        samples,
        mechanism,
        seed,
    } = *settings;

    // Separate streams, so the graph does not depend on the mechanism or the row count.
    let mut graph_rng = ChaCha8Rng::seed_from_u64(seed);
    graph_rng.set_stream(0);
    let mut data_rng = ChaCha8Rng::seed_from_u64(seed);
    data_rng.set_stream(1);

    let truth = random_dag(graph, nodes, edges_per_node, &mut graph_rng);
    let names = column_names(nodes);
    let (columns, nodes_meta) =
        draw_columns(&truth, &names, mechanism, samples, &mut data_rng, progress)?;
    Ok(Generated {
        dataset: Dataset::new(names, columns),
        meta: GenerationMeta {
            settings: settings.clone(),
            edge_count: truth.edge_count(),
            generation_order: truth.order(),
            nodes: nodes_meta,
        },
        truth,
    })
}

/// Draws every column of `truth`'s nodes: in topological order, each from its parents'
/// standardised columns with `mechanism`, then standardised (mean 0, population sd 1) before any
/// child reads it. Returns the columns and what was drawn for each, in node order.
fn draw_columns(
    truth: &Dag,
    names: &[String],
    mechanism: Mechanism,
    samples: usize,
    rng: &mut ChaCha8Rng,
    progress: &mut dyn FnMut(usize, usize, &str),
) -> Result<(Vec<Vec<f64>>, Vec<NodeMeta>), GenerateError> {
    let nodes = truth.n();
    let mut done = 0;
    let mut columns: Vec<Option<Vec<f64>>> = vec![None; nodes];
    let mut node_meta: Vec<Option<NodeMeta>> = vec![None; nodes];
    for node in truth.order() {
        let parents = truth.parents(node);
        let parent_columns: Vec<&[f64]> = parents
            .iter()
            .map(|&p| {
                columns[p]
                    .as_deref()
                    .expect("a topological order visits parents first")
            })
            .collect();
        let (raw, drawn) = mechanisms::sample_node(mechanism, &parent_columns, samples, rng)
            .map_err(|e| GenerateError::NotPositiveDefinite {
                node: names[node].clone(),
                jitter: e.jitter,
            })?;
        columns[node] = Some(standardised_or_error(&raw, &names[node])?);
        node_meta[node] = Some(NodeMeta {
            name: names[node].clone(),
            parents,
            mechanism: drawn,
        });
        done += 1;
        progress(done, nodes, &names[node]);
    }
    let columns = columns
        .into_iter()
        .map(|c| c.expect("every node is in the order"))
        .collect();
    let meta = node_meta
        .into_iter()
        .map(|m| m.expect("every node is in the order"))
        .collect();
    Ok((columns, meta))
}

/// A graph someone drew, and how to simulate data from it ([`simulate`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SimulationSpec {
    /// The variables' names, unique and non-empty.
    pub names: Vec<String>,
    /// The drawn edges (cause, effect) as indices into `names`; they must form a DAG.
    pub edges: Vec<(usize, usize)>,
    /// Variables generated but left out of the data set (a hidden confounder, say).
    #[serde(default)]
    pub hidden: Vec<usize>,
    /// How each variable is computed from its parents.
    pub mechanism: Mechanism,
    /// Rows N.
    pub samples: usize,
    /// The seed of every random draw (ChaCha8 stream 1 of it, as [`generate`]'s data).
    pub seed: u64,
}

/// Data simulated from a drawn graph: the observed columns and the truth among them.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulated {
    /// The observed columns (hidden variables left out), standardised.
    pub dataset: Dataset,
    /// The drawn graph restricted to the observed variables, over the dataset's columns.
    pub truth: Dag,
}

/// Simulates `spec`: the drawn DAG's columns in topological order with [`generate`]'s mechanisms
/// (each standardised before its children read it), then the hidden variables dropped. The truth
/// returned keeps the edges between observed variables only (a hidden common cause leaves its
/// children unconnected in it). Same spec, same data, bit for bit.
pub fn simulate(spec: &SimulationSpec) -> Result<Simulated, GenerateError> {
    let nodes = spec.names.len();
    GeneratorSettings {
        nodes,
        samples: spec.samples,
        mechanism: spec.mechanism,
        ..GeneratorSettings::default()
    }
    .validate()?;
    let mut seen = std::collections::HashSet::new();
    for name in &spec.names {
        if name.trim().is_empty() {
            return Err(GenerateError::Graph {
                reason: "every variable needs a name".into(),
            });
        }
        if !seen.insert(name.as_str()) {
            return Err(GenerateError::Graph {
                reason: format!("two variables are called {name}"),
            });
        }
    }
    if let Some(&h) = spec.hidden.iter().find(|&&h| h >= nodes) {
        return Err(GenerateError::Graph {
            reason: format!("hidden variable {h} does not exist ({nodes} variables)"),
        });
    }
    let observed: Vec<usize> = (0..nodes).filter(|i| !spec.hidden.contains(i)).collect();
    if observed.is_empty() {
        return Err(GenerateError::Graph {
            reason: "every variable is hidden: nothing would be observed".into(),
        });
    }
    let truth = Dag::from_edges(nodes, &spec.edges).map_err(|e| GenerateError::Graph {
        reason: e.to_string(),
    })?;
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    rng.set_stream(1);
    let (columns, _) = draw_columns(
        &truth,
        &spec.names,
        spec.mechanism,
        spec.samples,
        &mut rng,
        &mut |_, _, _| {},
    )?;
    let position = |i: usize| observed.iter().position(|&o| o == i);
    let edges: Vec<(usize, usize)> = spec
        .edges
        .iter()
        .filter_map(|&(a, b)| Some((position(a)?, position(b)?)))
        .collect();
    let observed_truth =
        Dag::from_edges(observed.len(), &edges).map_err(|e| GenerateError::Graph {
            reason: e.to_string(),
        })?;
    Ok(Simulated {
        dataset: Dataset::new(
            observed.iter().map(|&i| spec.names[i].clone()).collect(),
            observed.iter().map(|&i| columns[i].clone()).collect(),
        ),
        truth: observed_truth,
    })
}

/// z-scores a raw column, refusing one that is non-finite or (numerically) constant: a relative
/// spread below 1e-12 would be standardised into amplified rounding noise.
fn standardised_or_error(raw: &[f64], name: &str) -> Result<Vec<f64>, GenerateError> {
    if raw.iter().any(|v| !v.is_finite()) {
        return Err(GenerateError::Degenerate {
            node: name.to_string(),
            reason: "non-finite".to_string(),
        });
    }
    let (mean, sd) = mean_sd(raw);
    if sd <= 1e-12 * mean.abs().max(1.0) {
        return Err(GenerateError::Degenerate {
            node: name.to_string(),
            reason: "constant".to_string(),
        });
    }
    Ok(standardise(raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_case_insensitively_and_round_trip() {
        for &k in GraphKind::ALL {
            assert_eq!(k.as_str().parse::<GraphKind>().unwrap(), k);
            assert_eq!(
                k.to_string().to_uppercase().parse::<GraphKind>().unwrap(),
                k
            );
            assert_eq!(serde_json::to_string(&k).unwrap(), format!("\"{k}\""));
        }
        for &m in Mechanism::ALL {
            assert_eq!(format!(" {m} ").parse::<Mechanism>().unwrap(), m);
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
        }
        assert_eq!("GpCde".parse::<Mechanism>().unwrap(), Mechanism::GpCde);
    }

    #[test]
    fn unknown_names_list_the_valid_values() {
        let e = "ba".parse::<GraphKind>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown graph kind 'ba'; valid values: er, sf"
        );
        let e = "nn".parse::<Mechanism>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown mechanism 'nn'; valid values: mlp, linear, gp, gpcde"
        );
    }

    #[test]
    fn constant_and_non_finite_columns_are_refused() {
        let e = standardised_or_error(&[3.0, 3.0, 3.0], "X2").unwrap_err();
        assert_eq!(
            e.to_string(),
            "X2 came out constant, so it cannot be standardised; try another seed or more samples"
        );
        let e = standardised_or_error(&[1.0, f64::NAN], "X1").unwrap_err();
        assert!(
            matches!(e, GenerateError::Degenerate { ref reason, .. } if reason == "non-finite")
        );
        let ok = standardised_or_error(&[1.0, 2.0, 4.0], "X3").unwrap();
        let (m, sd) = mean_sd(&ok);
        assert!(m.abs() < 1e-15 && (sd - 1.0).abs() < 1e-15);
    }

    #[test]
    fn meta_records_parents_and_one_mechanism_per_node() {
        let settings = GeneratorSettings {
            graph: GraphKind::Sf,
            nodes: 6,
            edges_per_node: 2,
            samples: 40,
            mechanism: Mechanism::Linear,
            seed: 3,
        };
        let g = generate(&settings).unwrap();
        assert_eq!(g.meta.settings, settings);
        assert_eq!(g.meta.edge_count, g.truth.edge_count());
        assert_eq!(g.meta.generation_order, g.truth.order());
        for (j, node) in g.meta.nodes.iter().enumerate() {
            assert_eq!(node.name, format!("X{}", j + 1));
            assert_eq!(node.parents, g.truth.parents(j));
            match &node.mechanism {
                NodeMechanism::Noise => assert!(node.parents.is_empty()),
                NodeMechanism::Linear { weights } => assert_eq!(weights.len(), node.parents.len()),
                other => panic!("unexpected {other:?}"),
            }
        }
        // The record round-trips through JSON (floats compared loosely: serde_json's default float
        // parsing need not be exact to the last bit).
        let json = serde_json::to_string(&g.meta).unwrap();
        assert!(json.contains(r#""mechanism":"linear""#) && json.contains(r#""type":"linear""#));
        let back: GenerationMeta = serde_json::from_str(&json).unwrap();
        assert_eq!(back.settings, settings);
        assert_eq!(back.nodes.len(), 6);
        assert_eq!(back.edge_count, g.meta.edge_count);
    }
}
