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

use crate::graph::Digraph;
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
        Self::from_indices_named(names, forbidden, required, tiers)
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
pub(crate) fn tiers_forbid(tiers: Option<&[Option<usize>]>, i: usize, j: usize) -> bool {
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

#[cfg(test)]
mod tests;
