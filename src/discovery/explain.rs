//! Explaining a result DAG by its evidence (issue 15): what each edge is worth, and what the fitted
//! conditional of a variable looks like.
//!
//! A DAG's score is Σ_i F(i | pa(i)) ([`family`](super::family): each term a lower bound on the
//! log evidence of x_i given its parents, in nats), so changing one edge changes one or two terms:
//!
//! ```text
//! removed(j → i)  = F(i | pa(i) \ {j}) − F(i | pa(i))
//! reversed(j → i) = [F(i | pa(i) \ {j}) + F(j | pa(j) ∪ {i})] − [F(i | pa(i)) + F(j | pa(j))]
//! ```
//!
//! A negative value means the change lowers the evidence: the data favour the edge as it is, by a
//! Bayes factor of about e^{|Δ|} (the scores are bounds, so this is a difference of bounds; the
//! words follow Kass & Raftery 1995, [`EvidenceStrength`]). A reversal is not scored when j has
//! another directed path to i: the reversed graph would have a cycle.
//!
//! The work is a list of [`Job::Family`] jobs ([`EdgeEvidencePlan::jobs`], each family once), so
//! any backend runs them side by side; [`EdgeEvidencePlan::assemble`] turns their outcomes into
//! [`EdgeEvidence`]; `engine::explain_edges` does both on a backend.
//!
//! [`fitted_conditional`] refits one family exactly as its score was fitted and draws its
//! predictive p(x_i | x_S) along one parent, the latent w integrated out ([`ConditionalCurve`]).
//!
//! Owns: edge evidence, its words, and the partial-dependence curve of a fitted family.

use std::borrow::Cow;
use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector, SymmetricEigen};
use serde::{Deserialize, Serialize};

use super::family::{family_fit, FamilyKey, FamilyRequest, FamilyScore, FamilyScoreSettings};
use super::jobs::{Job, Outcome};
use crate::discovery::error::DiscoveryError;
use crate::gp::collapsed::CollapsedPredictor;
use crate::graph::Dag;

/// Why an explanation could not be computed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum ExplainError {
    /// The graph does not fit the data, or an edge asked about is not in it.
    #[error("invalid graph: {0}")]
    Graph(String),
    /// A child, parent or setting outside its range.
    #[error("invalid request: {0}")]
    Request(String),
    /// The outcomes handed to [`EdgeEvidencePlan::assemble`] do not answer its jobs.
    #[error("the outcomes do not match the plan: {0}")]
    Outcomes(String),
    /// A family could not be fitted at all (its model could not be built from the data).
    #[error("the family {child} | {parents:?} could not be scored: {reason}")]
    Family {
        child: usize,
        parents: Vec<usize>,
        reason: DiscoveryError,
    },
    /// The fitted model could not predict (a factorisation failed).
    #[error("the fitted model could not predict: {0}")]
    Prediction(String),
}

// ---------------------------------------------------------------------------------------------
// Bayes factors in words

/// How strong a difference of log evidence is, on Kass & Raftery's (1995) scale, which is stated
/// for 2 ln B and here applied to |Δ| = |ln B| in nats: below 1 not worth more than a bare mention,
/// 1 to 3 positive, 3 to 5 strong, above 5 very strong (boundaries: [0, 1), [1, 3), [3, 5], (5, ∞)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EvidenceStrength {
    BareMention,
    Positive,
    Strong,
    VeryStrong,
}

impl EvidenceStrength {
    /// The band of |Δ| = |`delta_nats`| = |ln B| (the sign says in whose favour, not how strongly).
    /// NaN reads as a bare mention.
    pub fn from_nats(delta_nats: f64) -> Self {
        let size = delta_nats.abs();
        if size > 5.0 {
            Self::VeryStrong
        } else if size >= 3.0 {
            Self::Strong
        } else if size >= 1.0 {
            Self::Positive
        } else {
            Self::BareMention
        }
    }

    /// The band in Kass & Raftery's words.
    pub fn describe(self) -> &'static str {
        match self {
            Self::BareMention => "not worth more than a bare mention",
            Self::Positive => "positive evidence",
            Self::Strong => "strong evidence",
            Self::VeryStrong => "very strong evidence",
        }
    }
}

/// Differences smaller than this print as e^0.0: neither side is favoured.
const TIE_NATS: f64 = 0.05;
/// Above this, e^Δ is printed by its exponent only (e^709.8 is the largest finite f64).
const LARGEST_PRINTED_FACTOR_NATS: f64 = 700.0;

/// The Bayes factor e^{|Δ|} in a readable form: "Bayes factor ≈ e^4.2 ≈ 67". Factors below 10 get
/// one decimal, below 10⁵ a whole number, then "m × 10^k"; above e^700 only the exponent is
/// printed, with "more than 10^304".
pub fn bayes_factor_text(delta_nats: f64) -> String {
    let size = delta_nats.abs();
    if size.is_nan() {
        return "Bayes factor unknown".into();
    }
    if size.is_infinite() {
        return "Bayes factor infinite".into();
    }
    if size > LARGEST_PRINTED_FACTOR_NATS {
        return format!("Bayes factor ≈ e^{size:.1}, more than 10^304");
    }
    let factor = size.exp();
    let readable = if factor < 10.0 {
        format!("{factor:.1}")
    } else if factor < 1e5 {
        format!("{factor:.0}")
    } else {
        // e^x = 10^(x / ln 10) = m × 10^k, from the exponent, so no rounding of a huge number.
        let decimal = size / std::f64::consts::LN_10;
        let mut k = decimal.floor();
        let mut mantissa = 10f64.powf(decimal - k);
        if mantissa >= 9.95 {
            mantissa /= 10.0;
            k += 1.0;
        }
        format!("{mantissa:.1} × 10^{k:.0}")
    };
    format!("Bayes factor ≈ e^{size:.1} ≈ {readable}")
}

/// Words for a change of evidence Δ = F(changed) − F(as is) in nats: who is favoured, how strongly,
/// and the factor, e.g. "the data favour keeping X → Y: strong evidence (Bayes factor ≈ e^4.2 ≈
/// 67)" for `as_is` = "keeping X → Y" and Δ = −4.2. |Δ| < 0.05 reads "neither is favoured".
pub fn favour_words(delta_nats: f64, as_is: &str, changed: &str) -> String {
    if delta_nats.is_nan() {
        return format!("no comparison of {as_is} and {changed}: the evidence is not a number");
    }
    if delta_nats.abs() < TIE_NATS {
        return format!(
            "the data favour neither {as_is} nor {changed} (Bayes factor ≈ 1, Δ = {delta_nats:.2} nats)"
        );
    }
    let favoured = if delta_nats < 0.0 { as_is } else { changed };
    format!(
        "the data favour {favoured}: {} ({})",
        EvidenceStrength::from_nats(delta_nats).describe(),
        bayes_factor_text(delta_nats)
    )
}

/// [`favour_words`] for Δ = F(after the change) − F(the graph as it is), in nats: negative favours
/// "the graph as it is", positive "the change".
pub fn bayes_factor_words(delta_nats: f64) -> String {
    favour_words(delta_nats, "the graph as it is", "the change")
}

// ---------------------------------------------------------------------------------------------
// Edge evidence

/// What reversing an edge j → i does to the DAG's score.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Reversal {
    /// reversed = [F(i | pa(i) \ {j}) + F(j | pa(j) ∪ {i})] − [F(i | pa(i)) + F(j | pa(j))].
    Scored {
        /// F(j | pa(j)), nats.
        parent_family: f64,
        /// F(j | pa(j) ∪ {i}), nats.
        parent_family_reversed: f64,
        /// The change, nats.
        delta: f64,
    },
    /// Not scored: j reaches i along `path` (j first, i last, at least one node between), so
    /// i → j would close a cycle.
    CreatesCycle { path: Vec<usize> },
}

/// The evidence for one edge `from` → `to` (j → i) of a DAG, in nats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeEvidence {
    pub from: usize,
    pub to: usize,
    /// F(i | pa(i)).
    pub child_family: f64,
    /// F(i | pa(i) \ {j}).
    pub child_family_without: f64,
    /// removed = F(i | pa(i) \ {j}) − F(i | pa(i)): negative when the data favour the edge.
    pub removed: f64,
    pub reversed: Reversal,
}

/// `names[i]`, or "X{i+1}" when there is no such name.
fn name_of(names: &[String], i: usize) -> String {
    names
        .get(i)
        .cloned()
        .unwrap_or_else(|| format!("X{}", i + 1))
}

impl EdgeEvidence {
    /// The change of score on reversal, [F(i | pa(i) \ {j}) + F(j | pa(j) ∪ {i})] − [F(i | pa(i)) +
    /// F(j | pa(j))]; None when the reversal would create a cycle.
    pub fn reversed_delta(&self) -> Option<f64> {
        match self.reversed {
            Reversal::Scored { delta, .. } => Some(delta),
            Reversal::CreatesCycle { .. } => None,
        }
    }

    /// "X → Y", by the variables' names.
    fn edge_name(&self, names: &[String]) -> String {
        format!(
            "{} → {}",
            name_of(names, self.from),
            name_of(names, self.to)
        )
    }

    /// [`favour_words`] for Δ = `removed` = F(i | pa(i) \ {j}) − F(i | pa(i)): "the data favour
    /// keeping X → Y: …" when Δ < 0, "… favour removing X → Y: …" when Δ > 0, Bayes factor e^{|Δ|}
    /// (variables named by `names`, by index; "X{i+1}" past its end).
    pub fn removal_words(&self, names: &[String]) -> String {
        let edge = self.edge_name(names);
        favour_words(
            self.removed,
            &format!("keeping {edge}"),
            &format!("removing {edge}"),
        )
    }

    /// The same evidence read for an edge the graph leaves out, scored in the graph with it added:
    /// [`favour_words`] for Δ = F(i | pa(i)) − F(i | pa(i) \ {j}) = −`removed`, "the data favour
    /// leaving X → Y out: …" when Δ < 0, "… favour adding X → Y: …" when Δ > 0.
    pub fn addition_words(&self, names: &[String]) -> String {
        let edge = self.edge_name(names);
        favour_words(
            -self.removed,
            &format!("leaving {edge} out"),
            &format!("adding {edge}"),
        )
    }

    /// [`favour_words`] for Δ = the reversal's change ([`EdgeEvidence::reversed_delta`]): "the data
    /// favour X → Y over Y → X: …" when Δ < 0, the other way round when Δ > 0; or why it is not
    /// scored ("Y → X is not scored: it would close the cycle Y → X → Z → Y").
    pub fn reversal_words(&self, names: &[String]) -> String {
        let (from, to) = (name_of(names, self.from), name_of(names, self.to));
        match &self.reversed {
            Reversal::Scored { delta, .. } => favour_words(
                *delta,
                &format!("{from} → {to} over {to} → {from}"),
                &format!("{to} → {from} over {from} → {to}"),
            ),
            Reversal::CreatesCycle { path } => {
                let cycle: Vec<String> = std::iter::once(self.to)
                    .chain(path.iter().copied())
                    .map(|v| name_of(names, v))
                    .collect();
                format!(
                    "{to} → {from} is not scored: it would close the cycle {}",
                    cycle.join(" → ")
                )
            }
        }
    }
}

/// The parent of `child` whose removal costs the most evidence, argmin_j removed(j → child) =
/// argmin_j [F(child | pa \ {j}) − F(child | pa)] (the most negative `removed`
/// among `evidence`'s edges into `child`; the lower index on a tie), None when no edge enters it.
/// This is the parent a partial-dependence plot of `child` shows first.
pub fn strongest_parent(evidence: &[EdgeEvidence], child: usize) -> Option<usize> {
    evidence
        .iter()
        .filter(|e| e.to == child && !e.removed.is_nan())
        .min_by(|a, b| a.removed.total_cmp(&b.removed).then(a.from.cmp(&b.from)))
        .map(|e| e.from)
}

/// One edge of a plan: the edge, and the path that forbids its reversal, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedEdge {
    pub from: usize,
    pub to: usize,
    /// Another directed path from → … → to, when there is one.
    pub cycle_path: Option<Vec<usize>>,
}

/// The family fits that explain some edges of a DAG, each family once, and how to read their
/// outcomes. Serialisable, so a page can keep it while the jobs run elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EdgeEvidencePlan {
    /// pa(i) for every variable, ascending.
    pub parents: Vec<Vec<usize>>,
    pub edges: Vec<PlannedEdge>,
    /// The families to fit, in the order of [`EdgeEvidencePlan::jobs`].
    pub families: Vec<FamilyKey>,
    pub settings: FamilyScoreSettings,
    pub seed: u64,
}

/// A directed path from `from` to `to` in `dag` other than the edge from → to itself (BFS, so a
/// shortest one), or None.
fn other_path(dag: &Dag, from: usize, to: usize) -> Option<Vec<usize>> {
    let n = dag.n();
    let mut previous: Vec<Option<usize>> = vec![None; n];
    let mut queue = std::collections::VecDeque::new();
    for c in dag.children(from) {
        if c != to {
            previous[c] = Some(from);
            queue.push_back(c);
        }
    }
    while let Some(v) = queue.pop_front() {
        if v == to {
            let mut path = vec![to];
            let mut at = to;
            while let Some(p) = previous[at] {
                path.push(p);
                if p == from {
                    break;
                }
                at = p;
            }
            path.reverse();
            return Some(path);
        }
        for c in dag.children(v) {
            if c != from && previous[c].is_none() {
                previous[c] = Some(v);
                queue.push_back(c);
            }
        }
    }
    None
}

impl EdgeEvidencePlan {
    /// The plan for every edge of `dag`, fitting families with `settings` and run seed `seed` (as
    /// the score they explain was computed, so the values are the same).
    pub fn new(dag: &Dag, settings: FamilyScoreSettings, seed: u64) -> Result<Self, ExplainError> {
        Self::for_edges(dag, &dag.edges(), settings, seed)
    }

    /// The plan for the edges `edges` (from, to) of `dag` (each must be an edge of it). The
    /// families are F(i | pa(i)) and F(i | pa(i) \ {j}) for every edge j → i, and F(j | pa(j)) and
    /// F(j | pa(j) ∪ {i}) when its reversal keeps the graph acyclic; shared ones once.
    pub fn for_edges(
        dag: &Dag,
        edges: &[(usize, usize)],
        settings: FamilyScoreSettings,
        seed: u64,
    ) -> Result<Self, ExplainError> {
        let settings = settings
            .validate()
            .map_err(|e| ExplainError::Request(e.to_string()))?;
        let parents: Vec<Vec<usize>> = (0..dag.n()).map(|i| dag.parents(i)).collect();
        let mut families: Vec<FamilyKey> = Vec::new();
        let mut add = |key: FamilyKey| {
            if !families.contains(&key) {
                families.push(key);
            }
        };
        let mut planned = Vec::with_capacity(edges.len());
        for &(from, to) in edges {
            if !dag.has_edge(from, to) {
                return Err(ExplainError::Graph(format!(
                    "{from} → {to} is not an edge of the graph"
                )));
            }
            add((to, parents[to].clone()));
            add((to, without(&parents[to], from)));
            let cycle_path = other_path(dag, from, to);
            if cycle_path.is_none() {
                add((from, parents[from].clone()));
                add((from, with(&parents[from], to)));
            }
            planned.push(PlannedEdge {
                from,
                to,
                cycle_path,
            });
        }
        Ok(Self {
            parents,
            edges: planned,
            families,
            settings,
            seed,
        })
    }

    /// One [`Job::Family`] per family (i, S) of the plan, computing F(i | S), in the order of
    /// `families`: hand them to a backend and give the outcomes to [`EdgeEvidencePlan::assemble`].
    pub fn jobs(&self) -> Vec<Job<'_>> {
        self.families
            .iter()
            .map(|(child, parents)| Job::Family {
                child: *child,
                parents: Cow::Borrowed(parents.as_slice()),
                settings: self.settings,
                seed: self.seed,
                warm: None,
            })
            .collect()
    }

    /// The [`EdgeEvidence`] of every planned edge from the outcomes of [`EdgeEvidencePlan::jobs`]
    /// (in that order), by the formulas of the module documentation. Pure: no fitting.
    pub fn assemble(&self, outcomes: &[Outcome]) -> Result<Vec<EdgeEvidence>, ExplainError> {
        if outcomes.len() != self.families.len() {
            return Err(ExplainError::Outcomes(format!(
                "{} outcomes for {} family jobs",
                outcomes.len(),
                self.families.len()
            )));
        }
        let mut values: BTreeMap<&FamilyKey, f64> = BTreeMap::new();
        for (key, outcome) in self.families.iter().zip(outcomes) {
            let value = match outcome {
                Outcome::Family(Ok(score)) => score.value,
                Outcome::Family(Err(reason)) => {
                    return Err(ExplainError::Family {
                        child: key.0,
                        parents: key.1.clone(),
                        reason: reason.clone(),
                    })
                }
                other => {
                    return Err(ExplainError::Outcomes(format!(
                        "the job for family {} | {:?} answered with {}",
                        key.0,
                        key.1,
                        other.kind()
                    )))
                }
            };
            values.insert(key, value);
        }
        let value = |key: FamilyKey| -> Result<f64, ExplainError> {
            values.get(&key).copied().ok_or_else(|| {
                ExplainError::Outcomes(format!("family {} | {:?} is not planned", key.0, key.1))
            })
        };
        // A plan read back from elsewhere may name variables it has no parents for.
        let parents_of = |v: usize| -> Result<&Vec<usize>, ExplainError> {
            self.parents.get(v).ok_or_else(|| {
                ExplainError::Graph(format!(
                    "variable {v} is not among the plan's {} variables",
                    self.parents.len()
                ))
            })
        };
        self.edges
            .iter()
            .map(|edge| {
                let (j, i) = (edge.from, edge.to);
                let child_family = value((i, parents_of(i)?.clone()))?;
                let child_family_without = value((i, without(parents_of(i)?, j)))?;
                let removed = child_family_without - child_family;
                let reversed = match &edge.cycle_path {
                    Some(path) => Reversal::CreatesCycle { path: path.clone() },
                    None => {
                        let parent_family = value((j, parents_of(j)?.clone()))?;
                        let parent_family_reversed = value((j, with(parents_of(j)?, i)))?;
                        Reversal::Scored {
                            parent_family,
                            parent_family_reversed,
                            // The formula as written, so it equals the direct difference.
                            delta: (child_family_without + parent_family_reversed)
                                - (child_family + parent_family),
                        }
                    }
                };
                Ok(EdgeEvidence {
                    from: j,
                    to: i,
                    child_family,
                    child_family_without,
                    removed,
                    reversed,
                })
            })
            .collect()
    }
}

/// `set` without `v` (ascending stays ascending).
fn without(set: &[usize], v: usize) -> Vec<usize> {
    set.iter().copied().filter(|&p| p != v).collect()
}

/// `set` with `v`, ascending.
fn with(set: &[usize], v: usize) -> Vec<usize> {
    let mut out = set.to_vec();
    if let Err(at) = out.binary_search(&v) {
        out.insert(at, v);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The fitted conditional along one parent

/// How a [`ConditionalCurve`] is computed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurveSettings {
    /// G, the grid points along the shown parent (at least 2).
    pub grid_points: usize,
    /// Gauss–Hermite nodes for the integral over the latent w (1 to [`MAX_LATENT_NODES`]).
    pub latent_nodes: usize,
    /// The quantiles drawn as the band, 0 < lower < upper < 1.
    pub lower_quantile: f64,
    pub upper_quantile: f64,
}

/// The most Gauss–Hermite nodes [`CurveSettings`] accepts.
pub const MAX_LATENT_NODES: usize = 200;

impl Default for CurveSettings {
    /// 60 grid points, 48 nodes (exact for polynomials in w up to degree 95; tested against Monte
    /// Carlo), the 10 % and 90 % quantiles.
    fn default() -> Self {
        Self {
            grid_points: 60,
            latent_nodes: 48,
            lower_quantile: 0.1,
            upper_quantile: 0.9,
        }
    }
}

impl CurveSettings {
    fn validate(&self) -> Result<(), ExplainError> {
        let bad = |m: String| Err(ExplainError::Request(m));
        if self.grid_points < 2 {
            return bad(format!(
                "a curve needs at least 2 grid points, got {}",
                self.grid_points
            ));
        }
        if !(1..=MAX_LATENT_NODES).contains(&self.latent_nodes) {
            return bad(format!(
                "the latent quadrature needs 1 to {MAX_LATENT_NODES} nodes, got {}",
                self.latent_nodes
            ));
        }
        let (lo, hi) = (self.lower_quantile, self.upper_quantile);
        if !(lo > 0.0 && lo < hi && hi < 1.0) {
            return bad(format!(
                "the quantiles must satisfy 0 < lower < upper < 1, got {lo} and {hi}"
            ));
        }
        Ok(())
    }
}

/// The predictive p(x_i | x_S) of a fitted family along one parent x_p, the other parents held at
/// their means, for a partial-dependence plot. Every curve value is in the data's (standardised)
/// units; `mean[g]`, `sd[g]`, `lower[g]` and `upper[g]` belong to `grid[g]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionalCurve {
    pub child: usize,
    /// S, ascending (the model's input order).
    pub parents: Vec<usize>,
    /// p, the parent along which the curve runs.
    pub shown_parent: usize,
    /// (parent, value) of every other parent: its column mean.
    pub held_at: Vec<(usize, f64)>,
    /// G values of x_p from its smallest to its largest value in the data.
    pub grid: Vec<f64>,
    /// E[x_i | x_p = grid[g]], w integrated out.
    pub mean: Vec<f64>,
    /// The predictive standard deviation of x_i (of the mixture over w, noise included).
    pub sd: Vec<f64>,
    /// The `lower_quantile` and `upper_quantile` quantiles of the mixture.
    pub lower: Vec<f64>,
    pub upper: Vec<f64>,
    pub lower_quantile: f64,
    pub upper_quantile: f64,
    /// The data (x_p, x_i) of every row, to draw beside the curve (raw values: with other parents,
    /// a point's x_i also reflects them).
    pub points: Vec<[f64; 2]>,
    /// The family's score; the curve is of its best fit (`score.best_bound`).
    pub score: FamilyScore,
    /// Gauss–Hermite nodes used for w.
    pub latent_nodes: usize,
}

/// One edge j → i and its reversal side by side, as a student compares "cause or effect": the
/// edge's evidence, the effect's fitted conditional p(x_i | x_pa(i)) along j, and the cause's
/// p(x_j | x_pa(j) ∪ {i}) along i (the family the reversal would give j). Their scores are
/// F(i | pa(i)) and F(j | pa(j) ∪ {i}) of the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionComparison {
    pub evidence: EdgeEvidence,
    /// The effect given its parents, along the cause.
    pub forward: ConditionalCurve,
    /// The cause given its parents and the effect, along the effect.
    pub backward: ConditionalCurve,
}

/// Fits the family x_`child` | x_`parents` exactly as its score is fitted ([`family_fit`]: the
/// same restarts, starts and family-derived seed from run seed `seed`, so the model is the one
/// whose bound F(i | S) the evidence used) and computes its predictive along `shown_parent` ∈ S.
///
/// At each grid value g of x_p (other parents at their column means, 0 for standardised data) the
/// predictive of x_i at a new point mixes the Gaussian predictives at fixed w over w's prior
/// N(0, 1), by Gauss–Hermite quadrature with nodes w_k and weights ω_k:
///
/// ```text
/// p(x_i | x_S) = ∫ N(x_i; m(x_S, w), v(x_S, w) + σ²) N(w; 0, 1) dw ≈ Σ_k ω_k N(x_i; m_k, v_k + σ²)
/// mean = Σ_k ω_k m_k,   sd² = Σ_k ω_k (m_k² + v_k + σ²) − mean²
/// ```
///
/// with m, v the mean and variance of f under the collapsed bound's optimal q(u)
/// ([`CollapsedPredictor`]); the quantiles solve Σ_k ω_k Φ((q − m_k)/√(v_k + σ²)) = level by
/// bisection.
pub fn fitted_conditional(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    shown_parent: usize,
    settings: &FamilyScoreSettings,
    seed: u64,
    curve: &CurveSettings,
) -> Result<ConditionalCurve, ExplainError> {
    curve.validate()?;
    let settings = settings
        .validate()
        .map_err(|e| ExplainError::Request(e.to_string()))?;
    let (n, d) = (data.nrows(), data.ncols());
    let mut parents = parents.to_vec();
    parents.sort_unstable();
    parents.dedup();
    if child >= d || parents.iter().any(|&p| p >= d || p == child) {
        return Err(ExplainError::Request(format!(
            "the family {child} | {parents:?} does not fit data with {d} columns"
        )));
    }
    let Some(shown_at) = parents.iter().position(|&p| p == shown_parent) else {
        return Err(ExplainError::Request(format!(
            "{shown_parent} is not one of the parents {parents:?}"
        )));
    };
    if n < 2 {
        return Err(ExplainError::Request(format!(
            "a curve needs at least 2 rows, got {n}"
        )));
    }
    let family_error = |reason: DiscoveryError| ExplainError::Family {
        child,
        parents: parents.clone(),
        reason,
    };
    let request = FamilyRequest {
        data,
        child,
        parents: &parents,
        settings: &settings,
        seed,
        warm: None,
    };
    let fitted = family_fit(request).map_err(|e| family_error(e.into()))?;
    let Some(best) = fitted.best else {
        return Err(family_error(DiscoveryError::AllFitsFailed {
            fits: fitted.score.fits_failed,
        }));
    };
    let x = DMatrix::from_fn(n, parents.len(), |r, k| data[(r, parents[k])]);
    let y = DVector::from_fn(n, |r, _| data[(r, child)]);
    let predictor = CollapsedPredictor::new(&x, &y, &best.params, best.jitter)
        .map_err(|e| ExplainError::Prediction(e.to_string()))?;

    let column_mean = |k: usize| x.column(k).mean();
    let shown = x.column(shown_at);
    let (lo, hi) = (shown.min(), shown.max());
    let g_count = curve.grid_points;
    let grid: Vec<f64> = (0..g_count)
        .map(|g| lo + (hi - lo) * g as f64 / (g_count - 1) as f64)
        .collect();
    let mut at = DVector::from_fn(parents.len(), |k, _| column_mean(k));
    let mixture = PredictiveMixture::new(&predictor, curve.latent_nodes);
    let (mut mean, mut sd, mut lower, mut upper) = (
        Vec::with_capacity(g_count),
        Vec::with_capacity(g_count),
        Vec::with_capacity(g_count),
        Vec::with_capacity(g_count),
    );
    for &g in &grid {
        at[shown_at] = g;
        let p = mixture.at(&at)?;
        mean.push(p.mean);
        sd.push(p.sd);
        lower.push(p.quantile(curve.lower_quantile));
        upper.push(p.quantile(curve.upper_quantile));
    }
    Ok(ConditionalCurve {
        child,
        held_at: parents
            .iter()
            .enumerate()
            .filter(|&(k, _)| k != shown_at)
            .map(|(k, &p)| (p, column_mean(k)))
            .collect(),
        parents,
        shown_parent,
        grid,
        mean,
        sd,
        lower,
        upper,
        lower_quantile: curve.lower_quantile,
        upper_quantile: curve.upper_quantile,
        points: (0..n).map(|r| [shown[r], y[r]]).collect(),
        score: fitted.score,
        latent_nodes: curve.latent_nodes,
    })
}

/// Nodes and weights of the n-point Gauss–Hermite rule for the standard normal weight,
/// Σ_k ω_k h(w_k) ≈ E[h(w)], w ~ N(0, 1) (exact for polynomials of degree < 2n), by Golub–Welsch:
/// the nodes are the eigenvalues of the Jacobi matrix of the probabilists' Hermite polynomials
/// (zero diagonal, off-diagonal √k, k = 1..n−1), the weights the squared first components of its
/// unit eigenvectors. Nodes ascending.
fn gauss_hermite(n: usize) -> (Vec<f64>, Vec<f64>) {
    let jacobi = DMatrix::from_fn(n, n, |r, c| {
        if r.abs_diff(c) == 1 {
            (r.max(c) as f64).sqrt()
        } else {
            0.0
        }
    });
    let eigen = SymmetricEigen::new(jacobi);
    let mut pairs: Vec<(f64, f64)> = (0..n)
        .map(|k| (eigen.eigenvalues[k], eigen.eigenvectors[(0, k)].powi(2)))
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = pairs.iter().map(|p| p.1).sum();
    pairs.into_iter().map(|(w, o)| (w, o / total)).unzip()
}

/// Φ(x), the standard normal CDF, from erfc (absolute error below 1e-15 for every x).
fn normal_cdf(x: f64) -> f64 {
    0.5 * erfc(-x / std::f64::consts::SQRT_2)
}

/// erfc(z). For |z| ≤ 3, from erf(z) = (2/√π) e^{−z²} Σ_k 2^k z^{2k+1} / (1·3·…·(2k+1)) (all terms
/// positive, so no cancellation); for z > 3 the continued fraction
/// erfc(z) = (e^{−z²}/√π) · 1/(z + (1/2)/(z + 1/(z + (3/2)/(z + …)))), evaluated bottom-up with 60
/// terms; erfc(−z) = 2 − erfc(z).
fn erfc(z: f64) -> f64 {
    if z.is_nan() {
        return f64::NAN;
    }
    if z < -3.0 {
        return 2.0 - erfc(-z);
    }
    if z <= 3.0 {
        let mut term = z;
        let mut sum = z;
        let mut k = 0.0;
        while term.abs() > 1e-17 * sum.abs() {
            k += 1.0;
            term *= 2.0 * z * z / (2.0 * k + 1.0);
            sum += term;
        }
        return 1.0 - 2.0 / std::f64::consts::PI.sqrt() * (-z * z).exp() * sum;
    }
    let mut tail = z;
    for k in (1..=60).rev() {
        tail = z + (k as f64 / 2.0) / tail;
    }
    (-z * z).exp() / std::f64::consts::PI.sqrt() / tail
}

/// The predictive of y at new observed inputs as a Gauss–Hermite mixture over w ~ N(0, 1).
struct PredictiveMixture<'a> {
    predictor: &'a CollapsedPredictor,
    nodes: Vec<f64>,
    weights: Vec<f64>,
}

/// One mixture Σ_k ω_k N(m_k, s_k²).
struct Mixture {
    weights: Vec<f64>,
    means: Vec<f64>,
    sds: Vec<f64>,
    mean: f64,
    sd: f64,
}

impl<'a> PredictiveMixture<'a> {
    fn new(predictor: &'a CollapsedPredictor, nodes: usize) -> Self {
        let (nodes, weights) = gauss_hermite(nodes);
        Self {
            predictor,
            nodes,
            weights,
        }
    }

    /// The mixture at observed inputs `x` (the model's observed columns; w, when the model has
    /// it, is the one input more).
    fn at(&self, x: &DVector<f64>) -> Result<Mixture, ExplainError> {
        let dim = self.predictor.input_dim();
        let latent = dim == x.len() + 1;
        if !latent && dim != x.len() {
            return Err(ExplainError::Prediction(format!(
                "the model has {dim} inputs, {} were given",
                x.len()
            )));
        }
        let (nodes, weights): (&[f64], &[f64]) = if latent {
            (&self.nodes, &self.weights)
        } else {
            (&[0.0], &[1.0])
        };
        let inputs = DMatrix::from_fn(
            nodes.len(),
            dim,
            |k, c| {
                if c < x.len() {
                    x[c]
                } else {
                    nodes[k]
                }
            },
        );
        let f = self
            .predictor
            .predict_f(&inputs)
            .map_err(|e| ExplainError::Prediction(e.to_string()))?;
        let noise = self.predictor.noise_variance();
        let means: Vec<f64> = f.mean.iter().copied().collect();
        let sds: Vec<f64> = f.variance.iter().map(|v| (v + noise).sqrt()).collect();
        let mean: f64 = weights.iter().zip(&means).map(|(w, m)| w * m).sum();
        let second: f64 = weights
            .iter()
            .zip(means.iter().zip(&sds))
            .map(|(w, (m, s))| w * (m * m + s * s))
            .sum();
        Ok(Mixture {
            weights: weights.to_vec(),
            means,
            sds,
            mean,
            sd: (second - mean * mean).max(0.0).sqrt(),
        })
    }
}

impl Mixture {
    /// P(y ≤ q) = Σ_k ω_k Φ((q − m_k)/s_k).
    fn cdf(&self, q: f64) -> f64 {
        self.weights
            .iter()
            .zip(self.means.iter().zip(&self.sds))
            .map(|(w, (m, s))| w * normal_cdf((q - m) / s))
            .sum()
    }

    /// The `level` quantile by bisection between the components' ±10 sd (where the CDF is 0 and 1
    /// to within 1e-23), to 1e-10 of the bracket's width.
    fn quantile(&self, level: f64) -> f64 {
        let mut lo = f64::INFINITY;
        let mut hi = f64::NEG_INFINITY;
        for (m, s) in self.means.iter().zip(&self.sds) {
            lo = lo.min(m - 10.0 * s);
            hi = hi.max(m + 10.0 * s);
        }
        let tolerance = 1e-10 * (hi - lo).max(1e-300);
        while hi - lo > tolerance {
            let mid = 0.5 * (lo + hi);
            if self.cdf(mid) < level {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        0.5 * (lo + hi)
    }
}

#[cfg(test)]
mod tests;
