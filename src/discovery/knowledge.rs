//! Prior knowledge about edges: forbidden edges, required edges and temporal tiers, and the
//! acyclic thresholding (MODEL.md §5.4) that honours them.
//!
//! Owns: parsing and validating user knowledge ([`Knowledge`], [`KnowledgeError`]); the edge mask it
//! implies ([`Knowledge::allowed_matrix`]); and turning a weighted adjacency into a DAG that keeps
//! every required edge and never contains a forbidden one ([`threshold_to_dag`]).
//!
//! Knowledge is enforced inside the model, never by editing a result afterwards: forbidden and
//! tier-violating edges are masked out of the kernel through the edge mask E, and required edges are
//! exempt from removal during acyclic thresholding.
//!
//! Orientation, everywhere in this module (DESIGN.md §3): an edge `(i, j)` or a matrix entry
//! `W[(i, j)]` means column i → column j (row = cause, column = effect). The model indexes θ and E
//! as [child][parent] (MODEL.md §5.1); the caller transposes at that boundary.

use crate::graph::{Dag, Digraph};
use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// How many valid column names an "unknown name" error lists before eliding the rest.
const KNOWN_NAMES_SHOWN: usize = 5;

/// Errors in user-supplied knowledge, or in the inputs of [`threshold_to_dag`].
///
/// Variables are named by their column names when the knowledge came with names, otherwise as
/// `variable <index>` (0-based). Tier numbers are shown 1-based: "tier 1" is the earliest tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum KnowledgeError {
    /// A name that is not one of the data's column names.
    #[error(
        "unknown variable `{name}` in {location}; names must match the column names exactly (case-sensitive){}",
        name_hint(suggestion.as_deref(), known, *known_total)
    )]
    UnknownName {
        /// The name as written.
        name: String,
        /// Where it was written, e.g. "the required edge `a->q`".
        location: String,
        /// A column name equal to `name` ignoring case, if there is one.
        suggestion: Option<String>,
        /// The first few valid column names.
        known: Vec<String>,
        /// How many column names there are in all.
        known_total: usize,
    },
    /// Edge text that is not of the form `A->B`.
    #[error(
        "cannot read `{text}` in {location} as an edge: expected the form `A->B` (cause -> effect), for example `x->y`"
    )]
    MalformedEdge {
        /// The text as given.
        text: String,
        /// Which list it was in, e.g. "the forbidden edges".
        location: String,
    },
    /// An edge from a variable to itself.
    #[error(
        "`{variable}->{variable}` in {location} is a self-loop; an edge must join two different variables"
    )]
    SelfLoop {
        /// The variable.
        variable: String,
        /// Which list it was in.
        location: String,
    },
    /// The same edge is both required and forbidden.
    #[error(
        "the edge {from} -> {to} is both required and forbidden; remove it from one of the two lists"
    )]
    RequiredAndForbidden {
        /// Cause.
        from: String,
        /// Effect.
        to: String,
    },
    /// A required edge that points from a later tier back to an earlier one.
    #[error(
        "the required edge {from} -> {to} goes from tier {from_tier} ({from}) back to the earlier tier {to_tier} ({to}), which the tiers forbid (edges may only stay within a tier or go to a later one); drop the requirement or move one of the variables to another tier"
    )]
    RequiredAgainstTiers {
        /// Cause.
        from: String,
        /// Effect.
        to: String,
        /// The cause's tier, 1-based.
        from_tier: usize,
        /// The effect's tier, 1-based.
        to_tier: usize,
    },
    /// A variable listed twice in the tiers text.
    #[error("{}", duplicate_tier_message(variable, *first_tier, *second_tier))]
    DuplicateInTiers {
        /// The variable.
        variable: String,
        /// The tier where it first appears, 1-based.
        first_tier: usize,
        /// The tier where it appears again, 1-based.
        second_tier: usize,
    },
    /// The required edges contain a directed cycle, so no DAG can contain them all.
    #[error(
        "required edges form a cycle: {}; no acyclic graph can contain them all, so drop at least one of them",
        cycle_text(cycle)
    )]
    RequiredCycle {
        /// The variables of the cycle in order; the last one points back to the first.
        cycle: Vec<String>,
    },
    /// A variable index outside `0..d`.
    #[error(
        "variable index {index} in {location} is out of range: there are {d} variables (valid indices 0 to {})",
        d.saturating_sub(1)
    )]
    IndexOutOfRange {
        /// The index given.
        index: usize,
        /// The number of variables.
        d: usize,
        /// Which list it was in.
        location: String,
    },
    /// A tier assignment whose length is not the number of variables.
    #[error("the tier assignment has {len} entries but there are {d} variables; give one entry (a tier or none) per variable")]
    TiersLength {
        /// Entries given.
        len: usize,
        /// The number of variables.
        d: usize,
    },
    /// Two data columns share a name, so a name cannot identify a variable.
    #[error(
        "the column name `{name}` appears more than once in the data; rename the columns so that every name is unique before giving edge knowledge"
    )]
    DuplicateColumn {
        /// The repeated name.
        name: String,
    },
    /// Weight or mask matrices given to [`threshold_to_dag`] that do not fit the knowledge.
    #[error("invalid input to acyclic thresholding: {reason}")]
    InvalidMatrix {
        /// What is wrong, with the offending entry.
        reason: String,
    },
    /// A broken internal invariant (a bug, not a user error).
    #[error("internal error in acyclic thresholding: {reason}")]
    Internal {
        /// What went wrong.
        reason: String,
    },
}

fn name_hint(suggestion: Option<&str>, known: &[String], known_total: usize) -> String {
    if let Some(s) = suggestion {
        return format!("; did you mean `{s}`?");
    }
    if known_total == 0 {
        return "; the data has no columns".to_string();
    }
    let listed: Vec<String> = known.iter().map(|n| format!("`{n}`")).collect();
    let more = if known_total > known.len() {
        format!(", … ({known_total} columns in all)")
    } else {
        String::new()
    };
    format!("; the columns are {}{more}", listed.join(", "))
}

fn duplicate_tier_message(variable: &str, first: usize, second: usize) -> String {
    if first == second {
        format!(
            "variable `{variable}` is listed twice in tier {first}; list each variable at most once"
        )
    } else {
        format!(
            "variable `{variable}` is listed in tier {first} and again in tier {second}; each variable may belong to at most one tier"
        )
    }
}

fn cycle_text(cycle: &[String]) -> String {
    let mut parts: Vec<&str> = cycle.iter().map(String::as_str).collect();
    if let Some(first) = cycle.first() {
        parts.push(first);
    }
    parts.join(" -> ")
}

/// Validated prior knowledge about the edges among `d` variables.
///
/// * `forbidden`: edges `(i, j)` (i → j) that must not appear.
/// * `required`: edges that must appear; they are acyclic, allowed by the tiers and not forbidden.
/// * `tiers`: optionally one entry per variable, `Some(t)` for the 0-based tier t (earlier tiers
///   first) or `None` for an unconstrained variable. An edge from a later tier to an earlier one is
///   forbidden; edges within a tier and forward are allowed.
///
/// Every value of this type has passed validation, including values read by serde (deserialising
/// runs the same checks as [`Knowledge::from_indices`]). Edge lists are sorted and free of
/// duplicates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "KnowledgeData")]
pub struct Knowledge {
    d: usize,
    forbidden: Vec<(usize, usize)>,
    required: Vec<(usize, usize)>,
    tiers: Option<Vec<Option<usize>>>,
}

/// The unvalidated serde form of [`Knowledge`].
#[derive(Deserialize)]
struct KnowledgeData {
    d: usize,
    forbidden: Vec<(usize, usize)>,
    required: Vec<(usize, usize)>,
    tiers: Option<Vec<Option<usize>>>,
}

impl TryFrom<KnowledgeData> for Knowledge {
    type Error = KnowledgeError;

    fn try_from(k: KnowledgeData) -> Result<Self, KnowledgeError> {
        Knowledge::from_indices(k.d, k.forbidden, k.required, k.tiers)
    }
}

/// Names variables in error messages: column names when known, otherwise `variable <index>`.
struct Labels<'a>(Option<&'a [String]>);

impl Labels<'_> {
    fn of(&self, i: usize) -> String {
        match self.0.and_then(|names| names.get(i)) {
            Some(name) => name.clone(),
            None => format!("variable {i}"),
        }
    }
}

const FORBIDDEN_LIST: &str = "the forbidden edges";
const REQUIRED_LIST: &str = "the required edges";

impl Knowledge {
    /// No knowledge about `d` variables: every edge between distinct variables is allowed.
    pub fn none(d: usize) -> Self {
        Self {
            d,
            forbidden: Vec::new(),
            required: Vec::new(),
            tiers: None,
        }
    }

    /// Parses and validates knowledge given as text against the data's column `names`.
    ///
    /// * `forbid`, `require`: edges written `A->B` (or `A -> B`), meaning A → B; whitespace around
    ///   the names is trimmed and the names must match column names exactly.
    /// * `tiers_text`: one tier per line, earliest tier first, names separated by commas; blank
    ///   lines and lines starting with `#` are ignored; a variable not listed is unconstrained.
    ///
    /// Fails with a [`KnowledgeError`] naming the offending variables when the text cannot be
    /// read or the knowledge contradicts itself (see [`Knowledge::from_indices`]).
    pub fn new(
        names: &[String],
        forbid: &[String],
        require: &[String],
        tiers_text: Option<&str>,
    ) -> Result<Knowledge, KnowledgeError> {
        let index = name_index(names)?;
        let forbidden = forbid
            .iter()
            .map(|text| parse_edge(text, FORBIDDEN_LIST, "forbidden", names, &index))
            .collect::<Result<Vec<_>, _>>()?;
        let required = require
            .iter()
            .map(|text| parse_edge(text, REQUIRED_LIST, "required", names, &index))
            .collect::<Result<Vec<_>, _>>()?;
        let tiers = match tiers_text {
            Some(text) => parse_tiers(text, names, &index)?,
            None => None,
        };
        validate(
            names.len(),
            forbidden,
            required,
            tiers,
            &Labels(Some(names)),
        )
    }

    /// Builds knowledge from 0-based variable indices, with the same validation as
    /// [`Knowledge::new`]; errors name variables as `variable <index>`.
    ///
    /// `tiers`, when given, holds one entry per variable: `Some(t)` for tier t (smaller is earlier;
    /// gaps are allowed) or `None` for unconstrained. Fails on an index out of range, a self-loop,
    /// a tier list of the wrong length, an edge both required and forbidden, a required edge the
    /// tiers forbid, or required edges that form a cycle. Duplicate edges are merged.
    pub fn from_indices(
        d: usize,
        forbidden: Vec<(usize, usize)>,
        required: Vec<(usize, usize)>,
        tiers: Option<Vec<Option<usize>>>,
    ) -> Result<Knowledge, KnowledgeError> {
        validate(d, forbidden, required, tiers, &Labels(None))
    }

    /// As [`Knowledge::from_indices`] for `names.len()` variables, with errors naming variables by
    /// their column names (for front ends that hold indices and names).
    pub fn from_indices_named(
        names: &[String],
        forbidden: Vec<(usize, usize)>,
        required: Vec<(usize, usize)>,
        tiers: Option<Vec<Option<usize>>>,
    ) -> Result<Knowledge, KnowledgeError> {
        validate(
            names.len(),
            forbidden,
            required,
            tiers,
            &Labels(Some(names)),
        )
    }

    /// Number of variables.
    pub fn d(&self) -> usize {
        self.d
    }

    /// Forbidden edges `(i, j)` (i → j), sorted, without duplicates. Edges forbidden only by the
    /// tiers are not listed here; use [`Knowledge::allowed`] for the full rule.
    pub fn forbidden(&self) -> &[(usize, usize)] {
        &self.forbidden
    }

    /// Required edges `(i, j)` (i → j), sorted, without duplicates.
    pub fn required(&self) -> &[(usize, usize)] {
        &self.required
    }

    /// The tier of every variable (`Some(t)`, 0-based, earlier first; `None` if unconstrained),
    /// or `None` when no tiers were given.
    pub fn tiers(&self) -> Option<&[Option<usize>]> {
        self.tiers.as_deref()
    }

    /// The tier of variable `i`, if it has one.
    pub fn tier(&self, i: usize) -> Option<usize> {
        self.tiers
            .as_ref()
            .and_then(|t| t.get(i).copied().flatten())
    }

    /// True when there is no knowledge at all: no forbidden or required edges and no tiers.
    pub fn is_unconstrained(&self) -> bool {
        self.forbidden.is_empty() && self.required.is_empty() && self.tiers.is_none()
    }

    /// True iff the edge i → j may appear: i ≠ j, both in range, not forbidden, and not from a
    /// later tier to an earlier one.
    pub fn allowed(&self, i: usize, j: usize) -> bool {
        i != j
            && i < self.d
            && j < self.d
            && !tiers_forbid(self.tiers.as_deref(), i, j)
            && self.forbidden.binary_search(&(i, j)).is_err()
    }

    /// True iff i → j is a required edge.
    pub fn is_required(&self, i: usize, j: usize) -> bool {
        self.required.binary_search(&(i, j)).is_ok()
    }

    /// The d×d edge mask, cause × effect: entry (i, j) is 1.0 iff [`Knowledge::allowed`]`(i, j)`,
    /// else 0.0 (so the diagonal is 0). The model's mask E is indexed [child][parent] and keeps
    /// E_ii = 1 for the latent input (MODEL.md §2.2): transpose this matrix and set its diagonal
    /// to 1 at that boundary.
    pub fn allowed_matrix(&self) -> DMatrix<f64> {
        DMatrix::from_fn(
            self.d,
            self.d,
            |i, j| {
                if self.allowed(i, j) {
                    1.0
                } else {
                    0.0
                }
            },
        )
    }
}

/// True iff the tiers forbid i → j (i's tier is later than j's).
fn tiers_forbid(tiers: Option<&[Option<usize>]>, i: usize, j: usize) -> bool {
    match tiers {
        Some(t) => matches!(
            (t.get(i).copied().flatten(), t.get(j).copied().flatten()),
            (Some(a), Some(b)) if a > b
        ),
        None => false,
    }
}

/// Maps each column name to its index, rejecting duplicate names.
fn name_index(names: &[String]) -> Result<HashMap<&str, usize>, KnowledgeError> {
    let mut index = HashMap::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        if index.insert(name.as_str(), i).is_some() {
            return Err(KnowledgeError::DuplicateColumn { name: name.clone() });
        }
    }
    Ok(index)
}

fn lookup(
    name: &str,
    location: String,
    names: &[String],
    index: &HashMap<&str, usize>,
) -> Result<usize, KnowledgeError> {
    if let Some(&i) = index.get(name) {
        return Ok(i);
    }
    let lower = name.to_lowercase();
    let suggestion = names.iter().find(|n| n.to_lowercase() == lower).cloned();
    Err(KnowledgeError::UnknownName {
        name: name.to_string(),
        location,
        suggestion,
        known: names.iter().take(KNOWN_NAMES_SHOWN).cloned().collect(),
        known_total: names.len(),
    })
}

/// Reads `A->B` (whitespace around the names allowed) into (index of A, index of B).
fn parse_edge(
    text: &str,
    list: &str,
    kind: &str,
    names: &[String],
    index: &HashMap<&str, usize>,
) -> Result<(usize, usize), KnowledgeError> {
    let malformed = || KnowledgeError::MalformedEdge {
        text: text.to_string(),
        location: list.to_string(),
    };
    let (left, right) = text.split_once("->").ok_or_else(malformed)?;
    let (from, to) = (left.trim(), right.trim());
    if from.is_empty() || to.is_empty() || to.contains("->") {
        return Err(malformed());
    }
    let location = format!("the {kind} edge `{}`", text.trim());
    let i = lookup(from, location.clone(), names, index)?;
    let j = lookup(to, location, names, index)?;
    Ok((i, j))
}

/// Reads the tiers text into one entry per variable; `None` when the text lists no variables.
fn parse_tiers(
    text: &str,
    names: &[String],
    index: &HashMap<&str, usize>,
) -> Result<Option<Vec<Option<usize>>>, KnowledgeError> {
    let mut tiers: Vec<Option<usize>> = vec![None; names.len()];
    let mut any = false;
    let mut tier = 0usize;
    for (line_no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        for name in line.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let location = format!("tier {} (line {} of the tiers)", tier + 1, line_no + 1);
            let i = lookup(name, location, names, index)?;
            if let Some(first) = tiers[i] {
                return Err(KnowledgeError::DuplicateInTiers {
                    variable: names[i].clone(),
                    first_tier: first + 1,
                    second_tier: tier + 1,
                });
            }
            tiers[i] = Some(tier);
            any = true;
        }
        tier += 1;
    }
    Ok(any.then_some(tiers))
}

/// The checks shared by every constructor; returns knowledge with sorted, de-duplicated edges and
/// `tiers` normalised to `None` when no variable has a tier.
fn validate(
    d: usize,
    mut forbidden: Vec<(usize, usize)>,
    mut required: Vec<(usize, usize)>,
    tiers: Option<Vec<Option<usize>>>,
    labels: &Labels<'_>,
) -> Result<Knowledge, KnowledgeError> {
    for (list, edges) in [(FORBIDDEN_LIST, &forbidden), (REQUIRED_LIST, &required)] {
        for &(i, j) in edges.iter() {
            for index in [i, j] {
                if index >= d {
                    return Err(KnowledgeError::IndexOutOfRange {
                        index,
                        d,
                        location: list.to_string(),
                    });
                }
            }
            if i == j {
                return Err(KnowledgeError::SelfLoop {
                    variable: labels.of(i),
                    location: list.to_string(),
                });
            }
        }
    }
    if let Some(t) = &tiers {
        if t.len() != d {
            return Err(KnowledgeError::TiersLength { len: t.len(), d });
        }
    }
    let tiers = tiers.filter(|t| t.iter().any(Option::is_some));
    forbidden.sort_unstable();
    forbidden.dedup();
    required.sort_unstable();
    required.dedup();

    for &(i, j) in &required {
        if forbidden.binary_search(&(i, j)).is_ok() {
            return Err(KnowledgeError::RequiredAndForbidden {
                from: labels.of(i),
                to: labels.of(j),
            });
        }
        if tiers_forbid(tiers.as_deref(), i, j) {
            let t = tiers.as_deref().unwrap_or_default();
            return Err(KnowledgeError::RequiredAgainstTiers {
                from: labels.of(i),
                to: labels.of(j),
                from_tier: t[i].unwrap_or_default() + 1,
                to_tier: t[j].unwrap_or_default() + 1,
            });
        }
    }

    let mut g = Digraph::empty(d);
    for &(i, j) in &required {
        g.add_edge(i, j).map_err(|e| KnowledgeError::Internal {
            reason: e.to_string(),
        })?;
    }
    if let Some(cycle) = g.find_cycle() {
        return Err(KnowledgeError::RequiredCycle {
            cycle: cycle.into_iter().map(|v| labels.of(v)).collect(),
        });
    }

    Ok(Knowledge {
        d,
        forbidden,
        required,
        tiers,
    })
}

/// Acyclic thresholding (MODEL.md §5.4, step 2) under prior knowledge.
///
/// Inputs, cause × effect: `weights[(i, j)] ≥ 0` is the strength of i → j (the model's A
/// transposed) and `active[(i, j)] ∈ {0, 1}` says whether i → j is still present (the model's E
/// transposed). Diagonals are ignored.
///
/// Rule. Let R be the required edges, and C the candidate edges: i → j with i ≠ j,
/// `active[(i, j)] = 1`, [`Knowledge::allowed`]`(i, j)`, `weights[(i, j)] > 0`, and not required.
/// Sort C ascending by weight, ties by (i, j) ascending, giving c_1, …, c_m. The result is
///
/// ```text
///     G = R ∪ {c_(k+1), …, c_m},   k = min { k ∈ 0..=m : R ∪ {c_(k+1), …, c_m} is acyclic },
/// ```
///
/// i.e. the lightest non-required edges are removed one at a time until the graph is a DAG. When
/// the weights are distinct this is the smallest cutoff t such that R ∪ {c ∈ C : W_c > t} is
/// acyclic. Since removing edges never creates a cycle, acyclicity is monotone in k and k is found
/// by binary search; each test is a topological sort (not the spectral h). The set k = m is R
/// alone, which validation proved acyclic, so a DAG always exists.
///
/// Guarantees: the result is acyclic, contains every required edge (whatever its weight or mask
/// entry), and contains no forbidden, tier-violating or inactive edge. Like the paper's rule, it
/// may also remove light edges that lie on no cycle; it is not a minimum feedback arc set.
///
/// Fails if a matrix is not d×d, a weight is negative or not finite, or a mask entry is not 0 or 1
/// (off the diagonal).
pub fn threshold_to_dag(
    weights: &DMatrix<f64>,
    active: &DMatrix<f64>,
    knowledge: &Knowledge,
) -> Result<Dag, KnowledgeError> {
    let d = knowledge.d();
    let candidates = threshold_candidates(weights, active, knowledge)?;

    let graph_keeping = |k: usize| -> Result<Digraph, KnowledgeError> {
        let mut g = Digraph::empty(d);
        let kept = candidates[k..].iter().map(|&(_, i, j)| (i, j));
        for (i, j) in knowledge.required().iter().copied().chain(kept) {
            g.add_edge(i, j).map_err(internal)?;
        }
        Ok(g)
    };
    let acyclic = |g: &Digraph| g.topological_order().is_ok();

    // Smallest k in 0..=m with graph_keeping(k) acyclic; k = m (required edges only) always is.
    let (mut lo, mut hi) = (0usize, candidates.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if acyclic(&graph_keeping(mid)?) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Dag::try_from(graph_keeping(lo)?).map_err(internal)
}

/// A graph operation that cannot fail on validated inputs, reported instead of panicking.
fn internal(e: crate::graph::GraphError) -> KnowledgeError {
    KnowledgeError::Internal {
        reason: e.to_string(),
    }
}

/// Greedy acyclic thresholding: the required edges first, then the candidate edges of
/// [`threshold_to_dag`] from the heaviest down (ties by (i, j) ascending), each kept unless it
/// closes a directed cycle with the edges kept so far.
///
/// Unlike the prefix cut of [`threshold_to_dag`], an edge is dropped only when a heavier path
/// already runs the other way, so one strong 2-cycle cannot take every lighter edge with it
/// (BENCHMARKS.md, issue 10: with the prefix cut SF4_d10_s0 kept 12 of the 19 true edges left by
/// the acyclic phase, SF1_d10_s1 3 of 7). The result is a maximal acyclic subgraph:
/// adding any dropped candidate back would close a cycle.
///
/// Same guarantees and failures as [`threshold_to_dag`].
pub fn greedy_dag(
    weights: &DMatrix<f64>,
    active: &DMatrix<f64>,
    knowledge: &Knowledge,
) -> Result<Dag, KnowledgeError> {
    let d = knowledge.d();
    let candidates = threshold_candidates(weights, active, knowledge)?;
    let mut g = Digraph::empty(d);
    for &(i, j) in knowledge.required() {
        g.add_edge(i, j).map_err(internal)?;
    }
    for &(_, i, j) in candidates.iter().rev() {
        // i → j closes a cycle exactly when j already reaches i.
        if !g.descendants(j)[i] {
            g.add_edge(i, j).map_err(internal)?;
        }
    }
    Dag::try_from(g).map_err(internal)
}

/// The candidate edges of the thresholding rules, sorted ascending by weight (ties by (i, j)),
/// after checking the matrices.
fn threshold_candidates(
    weights: &DMatrix<f64>,
    active: &DMatrix<f64>,
    knowledge: &Knowledge,
) -> Result<Vec<(f64, usize, usize)>, KnowledgeError> {
    let d = knowledge.d();
    for (what, m) in [("weight matrix", weights), ("active mask", active)] {
        if m.nrows() != d || m.ncols() != d {
            return Err(KnowledgeError::InvalidMatrix {
                reason: format!(
                    "the {what} is {}×{} but the knowledge covers {d} variables",
                    m.nrows(),
                    m.ncols()
                ),
            });
        }
    }

    let mut candidates: Vec<(f64, usize, usize)> = Vec::new();
    for i in 0..d {
        for j in 0..d {
            if i == j {
                continue;
            }
            let w = weights[(i, j)];
            if !w.is_finite() || w < 0.0 {
                return Err(KnowledgeError::InvalidMatrix {
                    reason: format!(
                        "weight ({i}, {j}) is {w}; weights must be finite and non-negative"
                    ),
                });
            }
            let a = active[(i, j)];
            if a != 0.0 && a != 1.0 {
                return Err(KnowledgeError::InvalidMatrix {
                    reason: format!(
                        "active mask entry ({i}, {j}) is {a}; only 0 and 1 are allowed"
                    ),
                });
            }
            if a == 1.0 && w > 0.0 && knowledge.allowed(i, j) && !knowledge.is_required(i, j) {
                candidates.push((w, i, j));
            }
        }
    }
    candidates.sort_by(|x, y| x.0.total_cmp(&y.0).then((x.1, x.2).cmp(&(y.1, y.2))));
    Ok(candidates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The greedy rule keeps edges that lie on no cycle, where the prefix cut loses every edge
    /// lighter than a strong 2-cycle.
    #[test]
    fn greedy_dag_keeps_light_edges_that_close_no_cycle() {
        // a ↔ b strongly (0.9 / 0.8), and a light chain c → d → e (0.1).
        let mut w = DMatrix::zeros(5, 5);
        w[(0, 1)] = 0.9;
        w[(1, 0)] = 0.8;
        w[(2, 3)] = 0.1;
        w[(3, 4)] = 0.1;
        let active = w.map(|v: f64| if v > 0.0 { 1.0 } else { 0.0 });
        let k = Knowledge::none(5);
        let prefix = threshold_to_dag(&w, &active, &k).unwrap();
        assert_eq!(prefix.edges(), vec![(0, 1)]);
        let greedy = greedy_dag(&w, &active, &k).unwrap();
        assert_eq!(greedy.edges(), vec![(0, 1), (2, 3), (3, 4)]);
    }

    /// On random weights and knowledge: the greedy result is a DAG with every required edge, no
    /// forbidden or inactive one, and maximal (each candidate left out would close a cycle).
    #[test]
    fn greedy_dag_is_a_maximal_dag_that_respects_knowledge() {
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let names: Vec<String> = (0..6).map(|i| format!("v{i}")).collect();
        for _ in 0..200 {
            let d = 6;
            let w = DMatrix::from_fn(d, d, |i, j| {
                if i == j {
                    0.0
                } else {
                    rng.random_range(0.0..1.0)
                }
            });
            let active = DMatrix::from_fn(d, d, |i, j| {
                if i != j && rng.random_bool(0.7) {
                    1.0
                } else {
                    0.0
                }
            });
            let forbid = vec![format!("v{}->v{}", 0, rng.random_range(1..d))];
            let require = vec![format!("v{}->v{}", 2, rng.random_range(3..d))];
            let k = Knowledge::new(&names, &forbid, &require, None).unwrap();
            let dag = greedy_dag(&w, &active, &k).unwrap();
            let g = dag.as_digraph();
            for &(i, j) in k.required() {
                assert!(g.has_edge(i, j));
            }
            for i in 0..d {
                for j in 0..d {
                    if i == j || g.has_edge(i, j) {
                        continue;
                    }
                    let candidate = active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0;
                    if candidate {
                        assert!(
                            g.descendants(j)[i],
                            "{i}->{j} was dropped but closes no cycle"
                        );
                    }
                }
            }
            for (i, j) in dag.edges() {
                assert!(k.allowed(i, j));
                assert!(k.is_required(i, j) || active[(i, j)] == 1.0);
            }
        }
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    fn strs(list: &[&str]) -> Vec<String> {
        names(list)
    }

    fn abc() -> Vec<String> {
        names(&["a", "b", "c"])
    }

    // ---- parsing ----

    #[test]
    fn edges_parse_with_and_without_spaces() {
        let k = Knowledge::new(
            &abc(),
            &strs(&["a->b", " b -> c ", "c->a"]),
            &strs(&["b  ->a"]),
            None,
        )
        .unwrap();
        assert_eq!(k.d(), 3);
        assert_eq!(k.forbidden(), &[(0, 1), (1, 2), (2, 0)]);
        assert_eq!(k.required(), &[(1, 0)]);
        assert!(k.tiers().is_none());
        assert!(k.is_required(1, 0));
        assert!(!k.is_required(0, 1));
    }

    #[test]
    fn duplicate_edges_are_merged() {
        let k = Knowledge::new(&abc(), &strs(&["a->b", "a -> b"]), &[], None).unwrap();
        assert_eq!(k.forbidden(), &[(0, 1)]);
    }

    #[test]
    fn names_with_spaces_and_dashes_parse() {
        let cols = names(&["x-1", "body mass", "y"]);
        let k = Knowledge::new(
            &cols,
            &strs(&["x-1->body mass", "body mass -> y"]),
            &[],
            None,
        )
        .unwrap();
        assert_eq!(k.forbidden(), &[(0, 1), (1, 2)]);
    }

    #[test]
    fn malformed_edges_are_rejected_with_the_expected_form() {
        for bad in [
            "a b", "a-b", "a->", "->b", "", "  ", "a->b->c", "a<-b", "a=>b",
        ] {
            let err = Knowledge::new(&abc(), &strs(&[bad]), &[], None).unwrap_err();
            assert!(
                matches!(&err, KnowledgeError::MalformedEdge { text, location }
                    if text == bad && location == "the forbidden edges"),
                "{bad:?}: {err:?}"
            );
            assert!(err.to_string().contains("`A->B`"), "{err}");
        }
        let err = Knowledge::new(&abc(), &[], &strs(&["a"]), None).unwrap_err();
        assert!(err.to_string().contains("the required edges"), "{err}");
    }

    #[test]
    fn unknown_names_list_valid_names() {
        let err = Knowledge::new(&abc(), &strs(&["a->q"]), &[], None).unwrap_err();
        match &err {
            KnowledgeError::UnknownName {
                name,
                suggestion,
                known,
                known_total,
                ..
            } => {
                assert_eq!(name, "q");
                assert_eq!(suggestion, &None);
                assert_eq!(known, &abc());
                assert_eq!(*known_total, 3);
            }
            other => panic!("{other:?}"),
        }
        let msg = err.to_string();
        assert!(msg.contains("`q`") && msg.contains("`a->q`"), "{msg}");
        assert!(msg.contains("`a`, `b`, `c`"), "{msg}");

        let many: Vec<String> = (0..9).map(|i| format!("v{i}")).collect();
        let msg = Knowledge::new(&many, &[], &strs(&["zz->v1"]), None)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("`v4`") && !msg.contains("`v5`"), "{msg}");
        assert!(msg.contains("9 columns in all"), "{msg}");
    }

    #[test]
    fn names_are_case_sensitive_with_a_suggestion() {
        let cols = names(&["Age", "Income"]);
        let err = Knowledge::new(&cols, &strs(&["age->Income"]), &[], None).unwrap_err();
        assert!(
            matches!(&err, KnowledgeError::UnknownName { suggestion: Some(s), .. } if s == "Age"),
            "{err:?}"
        );
        assert!(err.to_string().contains("did you mean `Age`?"));
    }

    #[test]
    fn duplicate_column_names_are_rejected() {
        let err = Knowledge::new(&names(&["a", "b", "a"]), &[], &[], None).unwrap_err();
        assert_eq!(
            err,
            KnowledgeError::DuplicateColumn {
                name: "a".to_string()
            }
        );
    }

    #[test]
    fn self_loops_are_rejected() {
        let err = Knowledge::new(&abc(), &[], &strs(&["b -> b"]), None).unwrap_err();
        assert_eq!(
            err,
            KnowledgeError::SelfLoop {
                variable: "b".to_string(),
                location: REQUIRED_LIST.to_string()
            }
        );
        assert!(err.to_string().contains("`b->b`"));
        let err = Knowledge::from_indices(3, vec![(2, 2)], vec![], None).unwrap_err();
        assert!(err.to_string().contains("variable 2"), "{err}");
    }

    // ---- tiers ----

    #[test]
    fn tiers_parse_and_forbid_backward_edges() {
        let cols = names(&["a", "b", "c", "d", "e"]);
        let text = "# exposures first\n\n a, b \n  # then\nc,\n\nd\n";
        let k = Knowledge::new(&cols, &[], &[], Some(text)).unwrap();
        assert_eq!(
            k.tiers(),
            Some(&[Some(0), Some(0), Some(1), Some(2), None][..])
        );
        assert_eq!(k.tier(2), Some(1));
        assert_eq!(k.tier(4), None);
        // Within a tier and forward: allowed.
        assert!(k.allowed(0, 1) && k.allowed(1, 0));
        assert!(k.allowed(0, 2) && k.allowed(2, 3) && k.allowed(0, 3));
        // Backward: forbidden.
        assert!(!k.allowed(2, 0) && !k.allowed(3, 2) && !k.allowed(3, 1));
        // The unlisted variable is unconstrained.
        for v in 0..4 {
            assert!(k.allowed(4, v) && k.allowed(v, 4));
        }
        assert!(k.forbidden().is_empty());
    }

    #[test]
    fn empty_tiers_text_means_no_tiers() {
        let k = Knowledge::new(&abc(), &[], &[], Some("\n# nothing\n  \n")).unwrap();
        assert!(k.tiers().is_none());
        assert!(k.is_unconstrained());
        assert_eq!(k, Knowledge::none(3));
    }

    #[test]
    fn tiers_reject_unknown_and_repeated_variables() {
        let err = Knowledge::new(&abc(), &[], &[], Some("a\n\nb, x")).unwrap_err();
        match &err {
            KnowledgeError::UnknownName { name, location, .. } => {
                assert_eq!(name, "x");
                assert_eq!(location, "tier 2 (line 3 of the tiers)");
            }
            other => panic!("{other:?}"),
        }
        let err = Knowledge::new(&abc(), &[], &[], Some("a, b\nc, a")).unwrap_err();
        assert_eq!(
            err,
            KnowledgeError::DuplicateInTiers {
                variable: "a".to_string(),
                first_tier: 1,
                second_tier: 2
            }
        );
        assert!(
            err.to_string().contains("tier 1 and again in tier 2"),
            "{err}"
        );
        let err = Knowledge::new(&abc(), &[], &[], Some("b, a, b")).unwrap_err();
        assert!(err.to_string().contains("twice in tier 1"), "{err}");
    }

    #[test]
    fn tiers_length_must_match() {
        let err = Knowledge::from_indices(3, vec![], vec![], Some(vec![Some(0)])).unwrap_err();
        assert_eq!(err, KnowledgeError::TiersLength { len: 1, d: 3 });
    }

    // ---- contradictions ----

    #[test]
    fn required_and_forbidden_is_a_contradiction() {
        let err = Knowledge::new(&abc(), &strs(&["a->c"]), &strs(&["a -> c"]), None).unwrap_err();
        assert_eq!(
            err,
            KnowledgeError::RequiredAndForbidden {
                from: "a".to_string(),
                to: "c".to_string()
            }
        );
        assert!(err.to_string().contains("a -> c"));
        // The reverse direction is no contradiction.
        assert!(Knowledge::new(&abc(), &strs(&["c->a"]), &strs(&["a->c"]), None).is_ok());
    }

    #[test]
    fn required_edge_against_tiers_names_both_tiers() {
        let err = Knowledge::new(&abc(), &[], &strs(&["c->a"]), Some("a\nb\nc")).unwrap_err();
        assert_eq!(
            err,
            KnowledgeError::RequiredAgainstTiers {
                from: "c".to_string(),
                to: "a".to_string(),
                from_tier: 3,
                to_tier: 1
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("tier 3") && msg.contains("tier 1"), "{msg}");
        // Forward and within-tier requirements are fine.
        let k = Knowledge::new(&abc(), &[], &strs(&["a->c", "b->c"]), Some("a\nb, c")).unwrap();
        assert_eq!(k.required(), &[(0, 2), (1, 2)]);
        assert!(Knowledge::new(&abc(), &[], &strs(&["c->b"]), Some("a\nb, c")).is_ok());
    }

    #[test]
    fn required_cycle_is_named() {
        let err = Knowledge::new(&abc(), &[], &strs(&["a->b", "b->c", "c->a"]), None).unwrap_err();
        match &err {
            KnowledgeError::RequiredCycle { cycle } => {
                assert_eq!(cycle.len(), 3);
                // Rotate so that it starts at `a`, then check the order.
                let start = cycle.iter().position(|v| v == "a").unwrap();
                let rotated: Vec<&str> = (0..3).map(|k| cycle[(start + k) % 3].as_str()).collect();
                assert_eq!(rotated, vec!["a", "b", "c"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(
            err.to_string()
                .contains("required edges form a cycle: a -> b -> c -> a"),
            "{err}"
        );
        let err = Knowledge::from_indices(2, vec![], vec![(0, 1), (1, 0)], None).unwrap_err();
        assert!(
            err.to_string()
                .contains("variable 0 -> variable 1 -> variable 0"),
            "{err}"
        );
        // An acyclic set of required edges is accepted.
        assert!(Knowledge::new(&abc(), &[], &strs(&["a->b", "b->c", "a->c"]), None).is_ok());
    }

    #[test]
    fn indices_out_of_range_are_rejected() {
        let err = Knowledge::from_indices(3, vec![(0, 3)], vec![], None).unwrap_err();
        assert_eq!(
            err,
            KnowledgeError::IndexOutOfRange {
                index: 3,
                d: 3,
                location: FORBIDDEN_LIST.to_string()
            }
        );
        assert!(err.to_string().contains("0 to 2"), "{err}");
        let err = Knowledge::from_indices(2, vec![], vec![(7, 0)], None).unwrap_err();
        assert!(matches!(
            err,
            KnowledgeError::IndexOutOfRange { index: 7, .. }
        ));
    }

    #[test]
    fn named_indices_use_column_names_in_errors() {
        let err =
            Knowledge::from_indices_named(&abc(), vec![(1, 2)], vec![(1, 2)], None).unwrap_err();
        assert!(err.to_string().contains("b -> c"), "{err}");
    }

    #[test]
    fn serde_round_trips_and_revalidates() {
        let k = Knowledge::new(&abc(), &strs(&["c->a"]), &strs(&["a->b"]), Some("a\nb\n")).unwrap();
        let json = serde_json::to_string(&k).unwrap();
        let back: Knowledge = serde_json::from_str(&json).unwrap();
        assert_eq!(back, k);
        let cyclic = r#"{"d":2,"forbidden":[],"required":[[0,1],[1,0]],"tiers":null}"#;
        let err = serde_json::from_str::<Knowledge>(cyclic).unwrap_err();
        assert!(err.to_string().contains("cycle"), "{err}");
    }

    // ---- masks ----

    #[test]
    fn allowed_matrix_is_cause_by_effect() {
        // Tiers: b first, then {c, a}. Forbidden: b→a, which the tiers alone would allow.
        let k =
            Knowledge::new(&abc(), &strs(&["b->a"]), &strs(&["b->c"]), Some("b\nc, a")).unwrap();
        let m = k.allowed_matrix();
        #[rustfmt::skip]
        let expected = DMatrix::from_row_slice(3, 3, &[
            // a→a  a→b  a→c   (a→b backward from tier 2 to tier 1)
            0.0, 0.0, 1.0,
            // b→a  b→b  b→c   (b→a forbidden)
            0.0, 0.0, 1.0,
            // c→a  c→b  c→c   (c→b backward)
            1.0, 0.0, 0.0,
        ]);
        assert_eq!(m, expected);
        for i in 0..3 {
            for j in 0..3 {
                assert_eq!(m[(i, j)] == 1.0, k.allowed(i, j));
            }
        }
        assert!(k.allowed(1, 2) && k.is_required(1, 2));
        assert!(!k.allowed(0, 7) && !k.allowed(7, 0));
        let none = Knowledge::none(3).allowed_matrix();
        assert_eq!(
            none,
            DMatrix::from_fn(3, 3, |i, j| f64::from(u8::from(i != j)))
        );
    }

    // ---- thresholding ----

    fn ones(d: usize) -> DMatrix<f64> {
        DMatrix::from_element(d, d, 1.0)
    }

    fn weights(d: usize, edges: &[(usize, usize, f64)]) -> DMatrix<f64> {
        let mut w = DMatrix::zeros(d, d);
        for &(i, j, v) in edges {
            w[(i, j)] = v;
        }
        w
    }

    #[test]
    fn three_cycle_loses_exactly_its_lightest_edge() {
        let w = weights(3, &[(0, 1, 0.9), (1, 2, 0.5), (2, 0, 0.7)]);
        let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
        assert_eq!(dag.edges(), vec![(0, 1), (2, 0)]);
    }

    #[test]
    fn acyclic_input_is_kept_whole() {
        let w = weights(4, &[(0, 1, 0.1), (1, 2, 0.2), (0, 3, 0.01), (3, 2, 5.0)]);
        let dag = threshold_to_dag(&w, &ones(4), &Knowledge::none(4)).unwrap();
        assert_eq!(dag.edges(), vec![(0, 1), (0, 3), (1, 2), (3, 2)]);
    }

    #[test]
    fn ties_are_broken_by_edge_order() {
        let w = weights(2, &[(0, 1, 0.5), (1, 0, 0.5)]);
        let dag = threshold_to_dag(&w, &ones(2), &Knowledge::none(2)).unwrap();
        assert_eq!(dag.edges(), vec![(1, 0)]);
    }

    #[test]
    fn required_edge_with_zero_weight_is_kept_and_a_heavier_edge_goes() {
        // Required 0 → 1 with weight 0 (and even inactive in the mask); 1 → 2 (0.9) and
        // 2 → 0 (0.8) close the cycle 0 → 1 → 2 → 0 with it. The lightest non-required edge,
        // 2 → 0, goes although it is far heavier than the required edge.
        let k = Knowledge::from_indices(3, vec![], vec![(0, 1)], None).unwrap();
        let w = weights(3, &[(1, 2, 0.9), (2, 0, 0.8)]);
        let mut active = ones(3);
        active[(0, 1)] = 0.0;
        let dag = threshold_to_dag(&w, &active, &k).unwrap();
        assert_eq!(dag.edges(), vec![(0, 1), (1, 2)]);
        // Without the requirement the zero-weight edge is absent and nothing needs removing.
        let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
        assert_eq!(dag.edges(), vec![(1, 2), (2, 0)]);
        // A 2-cycle against a light required edge: the heavy reverse edge goes.
        let w = weights(2, &[(0, 1, 0.1), (1, 0, 0.9)]);
        let k = Knowledge::from_indices(2, vec![], vec![(0, 1)], None).unwrap();
        let dag = threshold_to_dag(&w, &ones(2), &k).unwrap();
        assert_eq!(dag.edges(), vec![(0, 1)]);
    }

    #[test]
    fn lightest_edges_go_first_even_off_the_remaining_cycle() {
        // The paper's rule, not a minimum feedback arc set: with required 0 → 1, the cycles
        // 0 → 1 → 0 and 0 → 1 → 2 → 0 are broken by dropping 2 → 0 (0.6), then 1 → 2 (0.8), then
        // 1 → 0 (0.9); only the last removal was needed for 0 → 1 → 0, but 1 → 2 was lighter.
        let k = Knowledge::from_indices(3, vec![], vec![(0, 1)], None).unwrap();
        let w = weights(3, &[(1, 0, 0.9), (1, 2, 0.8), (2, 0, 0.6)]);
        let dag = threshold_to_dag(&w, &ones(3), &k).unwrap();
        assert_eq!(dag.edges(), vec![(0, 1)]);
    }

    #[test]
    fn forbidden_inactive_and_tier_violating_edges_never_appear() {
        let cols = names(&["a", "b", "c"]);
        let k = Knowledge::new(&cols, &strs(&["a->b"]), &[], Some("a\nb\nc")).unwrap();
        let w = weights(
            3,
            &[
                (0, 1, 100.0),
                (2, 0, 50.0),
                (1, 2, 0.1),
                (0, 2, 0.2),
                (2, 1, 70.0),
            ],
        );
        let mut active = ones(3);
        active[(0, 2)] = 0.0;
        let dag = threshold_to_dag(&w, &active, &k).unwrap();
        // a→b forbidden, c→a and c→b backward in the tiers, a→c inactive: only b→c is left.
        assert_eq!(dag.edges(), vec![(1, 2)]);
    }

    #[test]
    fn zero_weights_mean_no_edge() {
        let w = weights(3, &[(0, 1, 0.0), (1, 2, 1e-300)]);
        let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
        assert_eq!(dag.edges(), vec![(1, 2)]);
    }

    #[test]
    fn bad_matrices_are_errors_not_panics() {
        let k = Knowledge::none(3);
        let err = threshold_to_dag(&DMatrix::zeros(2, 3), &ones(3), &k).unwrap_err();
        assert!(
            matches!(err, KnowledgeError::InvalidMatrix { .. }),
            "{err:?}"
        );
        let err = threshold_to_dag(&DMatrix::zeros(3, 3), &ones(4), &k).unwrap_err();
        assert!(err.to_string().contains("active mask"), "{err}");
        for bad in [f64::NAN, f64::INFINITY, -0.5] {
            let w = weights(3, &[(0, 2, bad)]);
            let err = threshold_to_dag(&w, &ones(3), &k).unwrap_err();
            assert!(err.to_string().contains("weight (0, 2)"), "{bad}: {err}");
        }
        let mut active = ones(3);
        active[(1, 0)] = 0.5;
        let err = threshold_to_dag(&DMatrix::zeros(3, 3), &active, &k).unwrap_err();
        assert!(err.to_string().contains("(1, 0)"), "{err}");
        // Diagonals are ignored, whatever they hold.
        let mut w = DMatrix::zeros(3, 3);
        w[(1, 1)] = f64::NAN;
        let mut active = ones(3);
        active[(2, 2)] = 0.3;
        assert!(threshold_to_dag(&w, &active, &k).is_ok());
    }

    /// The paper's rule taken literally: while the graph has a cycle, drop the lightest remaining
    /// non-required edge (ties: smallest (i, j)), re-checking acyclicity by DFS each time.
    fn brute_force(w: &DMatrix<f64>, active: &DMatrix<f64>, k: &Knowledge) -> Digraph {
        let d = k.d();
        let mut g = Digraph::empty(d);
        for i in 0..d {
            for j in 0..d {
                let candidate =
                    i != j && active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0;
                if candidate || k.is_required(i, j) {
                    g.add_edge(i, j).unwrap();
                }
            }
        }
        while !g.is_acyclic() {
            let mut lightest: Option<(f64, usize, usize)> = None;
            for (i, j) in g.edges() {
                if k.is_required(i, j) {
                    continue;
                }
                let v = w[(i, j)];
                if lightest.is_none_or(|(lv, li, lj)| v < lv || (v == lv && (i, j) < (li, lj))) {
                    lightest = Some((v, i, j));
                }
            }
            let (_, i, j) = lightest.expect("a cycle with only required edges");
            g.remove_edge(i, j);
        }
        g
    }

    fn random_knowledge(rng: &mut ChaCha8Rng, d: usize) -> Knowledge {
        let tiers = rng.random_bool(0.5).then(|| {
            (0..d)
                .map(|_| rng.random_bool(0.7).then(|| rng.random_range(0..3)))
                .collect::<Vec<_>>()
        });
        let mut order: Vec<usize> = (0..d).collect();
        order.shuffle(rng);
        let pos = |v: usize| order.iter().position(|&x| x == v).unwrap();
        let mut required = Vec::new();
        let mut forbidden = Vec::new();
        for i in 0..d {
            for j in 0..d {
                if i == j {
                    continue;
                }
                let tier_ok = !tiers_forbid(tiers.as_deref(), i, j);
                if pos(i) < pos(j) && tier_ok && rng.random_bool(0.15) {
                    required.push((i, j));
                } else if rng.random_bool(0.1) {
                    forbidden.push((i, j));
                }
            }
        }
        Knowledge::from_indices(d, forbidden, required, tiers).unwrap()
    }

    #[test]
    fn matches_brute_force_on_random_graphs() {
        let mut rng = ChaCha8Rng::seed_from_u64(20_240_517);
        let mut removed_total = 0usize;
        for case in 0..200 {
            let d = rng.random_range(2..8);
            let k = if rng.random_bool(0.3) {
                Knowledge::none(d)
            } else {
                random_knowledge(&mut rng, d)
            };
            // Half the cases draw from a few levels, so ties and zeros are common.
            let coarse = rng.random_bool(0.5);
            let w = DMatrix::from_fn(d, d, |_, _| {
                if coarse {
                    f64::from(rng.random_range(0..4u8)) / 4.0
                } else if rng.random_bool(0.1) {
                    0.0
                } else {
                    rng.random::<f64>()
                }
            });
            let active = DMatrix::from_fn(d, d, |_, _| f64::from(u8::from(rng.random_bool(0.85))));

            let dag = threshold_to_dag(&w, &active, &k).unwrap();
            let reference = brute_force(&w, &active, &k);
            assert_eq!(dag.edges(), reference.edges(), "case {case}, d = {d}");
            assert!(dag.topological_order().is_ok() && dag.find_cycle().is_none());
            for &(i, j) in k.required() {
                assert!(dag.has_edge(i, j), "case {case}: required {i} → {j} lost");
            }
            for (i, j) in dag.edges() {
                assert!(k.allowed(i, j), "case {case}: {i} → {j} not allowed");
                assert!(
                    k.is_required(i, j) || (active[(i, j)] == 1.0 && w[(i, j)] > 0.0),
                    "case {case}: {i} → {j} was not a candidate"
                );
            }
            let candidates = (0..d)
                .flat_map(|i| (0..d).map(move |j| (i, j)))
                .filter(|&(i, j)| {
                    k.is_required(i, j)
                        || (i != j && active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0)
                })
                .count();
            removed_total += candidates - dag.edge_count();
        }
        // The random cases must actually exercise the removal, not only pass acyclic inputs.
        assert!(removed_total > 100, "only {removed_total} edges removed");
    }
}
