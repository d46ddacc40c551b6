//! The posterior over DAGs for small D by listing every DAG:
//!
//!   log p(G | X) = Σ_i F(i | pa_G(i)) + log p(G) − log Z,   Z = Σ_G exp(Σ_i F(i | pa_G(i)) + log p(G)),
//!
//! where F is the family evidence (a lower bound on log p(x_i | x_pa), so these are the posterior
//! probabilities the bounds imply), and the sum runs over the DAGs whose families are all
//! admissible (knowledge and limits give every other DAG probability zero).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::dp::Mask;
use crate::graph::{all_dags, cpdag, Dag, EnumerateError, Pdag};

/// The prior over graphs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum GraphPrior {
    /// Every admissible DAG equally likely a priori.
    #[default]
    Uniform,
    /// Each of the D(D−1)/2 variable pairs independently joined with probability
    /// `edge_probability`: log p(G) = |E| log q + (D(D−1)/2 − |E|) log(1 − q) + const.
    EdgeCount { edge_probability: f64 },
    /// The edge-count prior with q chosen by measurement for the search it is used in
    /// ([`GraphPrior::resolve`]): [`AUTO_SMALL_EXACT_Q`] for an exact search over at most
    /// [`FEW_VARIABLES`](super::search::FEW_VARIABLES) variables (which fits more rows), else
    /// [`AUTO_Q`]. A session resolves it once D and the method are known; the result states q.
    Auto,
}

/// q of [`GraphPrior::Auto`] in general: log((1 − q) / q) ≈ 1.4 nats per edge. Maximised GP
/// evidence barely penalises a parent the fit switches off, so a superset family ties or wins by
/// a hair; the penalty breaks those ties towards the smaller graph. Measured on the 10-node sets
/// at 200 rows (BENCHMARKS.md, issues 11 and 33): on ER1 q = 0.2 gave mean SHD 2.67 against 4.00
/// with q = 0.1 or 0.05 (issue 11's fits); with today's fits q = 0.05 helps the sparse groups and
/// costs ER4 (mean F1 0.723 → 0.700 over three seeds).
pub const AUTO_Q: f64 = 0.2;
/// q of [`GraphPrior::Auto`] for an exact search over at most 5 variables, which fits up to
/// 1000 rows: ≈ 2.9 nats per edge. On the 18 public 3-variable sets at 1000 rows q = 0.2 gets 16
/// right (a spurious edge on an empty graph: the fits' own noise grows with the rows), q = 0.05
/// gets 17 (BENCHMARKS.md, issue 33).
pub const AUTO_SMALL_EXACT_Q: f64 = 0.05;

/// A graph prior's text that is none of `uniform`, `auto` or a probability in (0, 1).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is neither \"uniform\", \"auto\" nor an edge probability strictly between 0 and 1")]
pub struct GraphPriorError(pub String);

impl GraphPrior {
    /// The prior with [`GraphPrior::Auto`] made concrete: q = [`AUTO_SMALL_EXACT_Q`] when
    /// `small_exact` (an exact search over at most 5 variables), else [`AUTO_Q`]. Other priors
    /// are returned as they are.
    pub fn resolve(self, small_exact: bool) -> Self {
        match self {
            Self::Auto => Self::EdgeCount {
                edge_probability: if small_exact {
                    AUTO_SMALL_EXACT_Q
                } else {
                    AUTO_Q
                },
            },
            other => other,
        }
    }

    /// q of an edge-count prior, None for the uniform one; unresolved, `Auto` is [`AUTO_Q`]
    /// (sessions resolve it first, [`GraphPrior::resolve`]).
    pub fn edge_probability(self) -> Option<f64> {
        match self {
            GraphPrior::Uniform => None,
            GraphPrior::EdgeCount { edge_probability } => Some(edge_probability),
            GraphPrior::Auto => Some(AUTO_Q),
        }
    }

    /// log p(G) up to a constant, for a graph with `edges` edges on `d` variables:
    /// |E| log q + (D(D−1)/2 − |E|) log(1 − q) for the edge-count prior, 0 for uniform.
    pub fn log_prior(self, d: usize, edges: usize) -> f64 {
        match self.edge_probability() {
            None => 0.0,
            Some(q) => {
                let pairs = d * (d - 1) / 2;
                edges as f64 * q.ln() + (pairs - edges) as f64 * (1.0 - q).ln()
            }
        }
    }

    /// The family scores with the prior's per-family term added: |S| log(q / (1 − q)) for the
    /// edge-count prior (log p(G) = Σ_i |pa(i)| log(q / (1 − q)) + const), nothing for uniform.
    pub fn weigh_families(self, families: &[Vec<(Mask, f64)>]) -> Vec<Vec<(Mask, f64)>> {
        match self.edge_probability() {
            None => families.to_vec(),
            Some(q) => {
                let per_edge = (q / (1.0 - q)).ln();
                families
                    .iter()
                    .map(|f| {
                        f.iter()
                            .map(|&(m, s)| (m, s + per_edge * m.count_ones() as f64))
                            .collect()
                    })
                    .collect()
            }
        }
    }

    /// Parses `uniform`, `auto` or an edge probability q with 0 < q < 1 (the CLI's
    /// `--edge-prior`, the page's field).
    pub fn parse(text: &str) -> Result<Self, GraphPriorError> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("uniform") {
            return Ok(Self::Uniform);
        }
        if text.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        match text.parse::<f64>() {
            Ok(q) if q > 0.0 && q < 1.0 => Ok(Self::EdgeCount {
                edge_probability: q,
            }),
            _ => Err(GraphPriorError(text.to_string())),
        }
    }

    /// The text [`GraphPrior::parse`] reads back.
    pub fn as_text(self) -> String {
        match self {
            Self::Uniform => "uniform".into(),
            Self::EdgeCount { edge_probability } => edge_probability.to_string(),
            Self::Auto => "auto".into(),
        }
    }

    /// A sentence for the output, so nobody has to guess which prior was used.
    pub fn describe(self) -> String {
        match self {
            GraphPrior::Uniform => "uniform over the admissible DAGs".into(),
            GraphPrior::EdgeCount { edge_probability } => format!(
                "each pair of variables joined independently with probability {edge_probability}"
            ),
            GraphPrior::Auto => format!(
                "auto: each pair of variables joined independently with probability \
                 {AUTO_SMALL_EXACT_Q} in an exact search over at most 5 variables, {AUTO_Q} otherwise"
            ),
        }
    }
}

/// One DAG with its score and posterior probability.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredGraph {
    /// (cause, effect) pairs.
    pub edges: Vec<(usize, usize)>,
    /// Σ_i F(i | pa(i)) + log p(G), nats (up to the prior's constant).
    pub log_score: f64,
    pub probability: f64,
    /// Index into [`GraphPosterior::classes`].
    pub class: usize,
}

/// One Markov equivalence class with its posterior mass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassPosterior {
    /// The CPDAG: directed edges (a, b) mean a → b in every member; undirected edges as (a, b), a < b.
    pub directed: Vec<(usize, usize)>,
    pub undirected: Vec<(usize, usize)>,
    pub probability: f64,
    /// The member DAGs, as indices into [`GraphPosterior::graphs`].
    pub members: Vec<usize>,
}

/// The posterior over every admissible DAG on D ≤ 5 variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphPosterior {
    pub prior: String,
    /// Most probable first.
    pub graphs: Vec<ScoredGraph>,
    /// Most probable first.
    pub classes: Vec<ClassPosterior>,
    /// P(i → j | X) at [i][j].
    pub edge_probabilities: Vec<Vec<f64>>,
    /// The posterior mass of the class of the most probable DAG.
    pub best_class_probability: f64,
}

/// Lists every DAG on `families.len()` variables, scores those whose families are all listed in
/// `families` (variable i's admissible parent sets with F(i | S)), and normalises.
pub fn enumerate_posterior(
    families: &[Vec<(Mask, f64)>],
    prior: GraphPrior,
) -> Result<GraphPosterior, EnumerateError> {
    let d = families.len();
    let lookup: Vec<HashMap<Mask, f64>> = families
        .iter()
        .map(|f| f.iter().copied().filter(|(_, s)| s.is_finite()).collect())
        .collect();
    let mut scored: Vec<(Dag, f64)> = Vec::new();
    for dag in all_dags(d)? {
        let mut total = prior.log_prior(d, dag.edges().len());
        let mut admissible = true;
        for (i, table) in lookup.iter().enumerate() {
            let mask = dag.parents(i).iter().fold(0, |m: Mask, &j| m | (1 << j));
            match table.get(&mask) {
                Some(s) => total += s,
                None => {
                    admissible = false;
                    break;
                }
            }
        }
        if admissible {
            scored.push((dag, total));
        }
    }
    let top = scored
        .iter()
        .map(|(_, s)| *s)
        .fold(f64::NEG_INFINITY, f64::max);
    let z: f64 = scored.iter().map(|(_, s)| (s - top).exp()).sum();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1));

    let mut class_of: HashMap<Pdag, usize> = HashMap::new();
    let mut classes: Vec<ClassPosterior> = Vec::new();
    let mut graphs = Vec::with_capacity(scored.len());
    let mut edge_probabilities = vec![vec![0.0; d]; d];
    for (k, (dag, log_score)) in scored.into_iter().enumerate() {
        let probability = (log_score - top).exp() / z;
        let pdag = cpdag(&dag);
        let class = *class_of.entry(pdag.clone()).or_insert_with(|| {
            classes.push(ClassPosterior {
                directed: pdag.directed_edges(),
                undirected: pdag.undirected_edges(),
                probability: 0.0,
                members: Vec::new(),
            });
            classes.len() - 1
        });
        classes[class].probability += probability;
        classes[class].members.push(k);
        let edges = dag.edges();
        for &(a, b) in &edges {
            edge_probabilities[a][b] += probability;
        }
        graphs.push(ScoredGraph {
            edges,
            log_score,
            probability,
            class,
        });
    }
    let best_class_probability = graphs.first().map_or(0.0, |g| classes[g.class].probability);
    // Classes most probable first, with the graphs' class indices renumbered to match.
    let mut order: Vec<usize> = (0..classes.len()).collect();
    order.sort_by(|&a, &b| classes[b].probability.total_cmp(&classes[a].probability));
    let mut renumber = vec![0; classes.len()];
    for (new, &old) in order.iter().enumerate() {
        renumber[old] = new;
    }
    for g in &mut graphs {
        g.class = renumber[g.class];
    }
    let classes = order.into_iter().map(|k| classes[k].clone()).collect();
    Ok(GraphPosterior {
        prior: prior.describe(),
        graphs,
        classes,
        edge_probabilities,
        best_class_probability,
    })
}
