//! The exact best DAG for a decomposable score, by dynamic programming over variable subsets
//! (after Silander & Myllymäki 2006): for a score Σ_i F(i | pa(i)),
//!
//!   bps_i(C)  = max over admissible S ⊆ C of F(i | S)            (best parents within C),
//!   best(W)   = max over s ∈ W of best(W \ {s}) + bps_s(W \ {s})  (s is a sink of W),
//!
//! with best(∅) = 0. best(V) is the score of the best DAG; following the sinks back from V gives an
//! order and each variable's parents. Which families are admissible (the in-degree limit, the
//! candidate lists, prior knowledge) is decided by which families are scored: the search never
//! looks at a family it was not given, so knowledge shapes the search and not its result.

use crate::graph::Dag;
use serde::{Deserialize, Serialize};

/// A set of variables as bits: bit j is variable j.
pub type Mask = u32;

/// The most variables the subset tables are built for (2^20 entries of best(W)).
pub const MAX_DP_VARIABLES: usize = 20;
/// The most distinct parents one variable's families may draw on (2^16 entries of bps_i).
pub const MAX_CANDIDATES: usize = 16;

/// Why no best DAG could be found.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum DpError {
    #[error("exact search is limited to {max} variables; this data has {d}")]
    TooManyVariables { d: usize, max: usize },
    #[error(
        "variable {child} draws its parents from {count} candidates; the limit is {max}: \
         lower the number of candidate parents"
    )]
    TooManyCandidates {
        child: usize,
        count: usize,
        max: usize,
    },
    #[error("variable {child} has no family with a finite score, so no DAG can be scored")]
    NoFamily { child: usize },
    #[error(
        "no DAG can be built from the scored families (the admissible families leave a cycle)"
    )]
    NoDag,
    #[error("families were given for {got} variables, expected {d}")]
    WrongLength { got: usize, d: usize },
}

/// The variables that appear as a parent in any of `child`'s scored families (global masks), in
/// index order: the positions a subset table over its candidates is written over. More than
/// [`MAX_CANDIDATES`] is refused (the table has 2^candidates entries).
pub(super) fn candidate_parents(
    child: usize,
    families: &[(Mask, f64)],
) -> Result<Vec<usize>, DpError> {
    let union = families.iter().fold(0, |u, &(m, _)| u | m);
    let candidates: Vec<usize> = (0..Mask::BITS as usize)
        .filter(|&j| union & (1 << j) != 0)
        .collect();
    if candidates.len() > MAX_CANDIDATES {
        return Err(DpError::TooManyCandidates {
            child,
            count: candidates.len(),
            max: MAX_CANDIDATES,
        });
    }
    Ok(candidates)
}

/// One variable's admissible families over its candidate parents, by local subset: `best[c]` is
/// the score of the family whose parents are the local subset c (−∞ where none is admissible) and
/// `family[c]` its global mask. A family listed twice counts once, at its higher score (the first
/// of equals).
pub(super) struct LocalFamilies {
    pub candidates: Vec<usize>,
    pub best: Vec<f64>,
    pub family: Vec<Mask>,
}

impl LocalFamilies {
    pub(super) fn new(child: usize, families: &[(Mask, f64)]) -> Result<Self, DpError> {
        let candidates = candidate_parents(child, families)?;
        let size = 1usize << candidates.len();
        let mut best = vec![f64::NEG_INFINITY; size];
        let mut family = vec![0; size];
        for &(mask, score) in families {
            if !score.is_finite() {
                continue;
            }
            let local = compress(mask, &candidates);
            if score > best[local] {
                best[local] = score;
                family[local] = mask;
            }
        }
        if best.iter().all(|v| *v == f64::NEG_INFINITY) {
            return Err(DpError::NoFamily { child });
        }
        Ok(Self {
            candidates,
            best,
            family,
        })
    }
}

/// The steps of a subset (zeta) transform over `bits` local bits: `step(c, c without b)` for each
/// bit b in turn and each subset c holding b, so that afterwards every entry has combined the
/// entries of all its subsets.
pub(super) fn over_subsets(bits: usize, mut step: impl FnMut(usize, usize)) {
    for bit in 0..bits {
        for c in 0..1usize << bits {
            if c & (1 << bit) != 0 {
                step(c, c ^ (1 << bit));
            }
        }
    }
}

/// The best score within each subset of one variable's candidate parents, and which family
/// attains it: `best[c]` and `argmax[c]` for a subset c written over the candidates' positions.
struct BestWithin {
    candidates: Vec<usize>,
    best: Vec<f64>,
    argmax: Vec<Mask>,
}

impl BestWithin {
    /// Builds the table from the scored families (global masks), by the subset-max transform:
    /// for each candidate bit b, best[c] = max(best[c], best[c without b]).
    fn new(child: usize, families: &[(Mask, f64)]) -> Result<Self, DpError> {
        let LocalFamilies {
            candidates,
            mut best,
            family: mut argmax,
        } = LocalFamilies::new(child, families)?;
        over_subsets(candidates.len(), |c, without| {
            // ≥: of two families with equal scores the smaller one wins (Occam).
            if best[without] >= best[c] {
                best[c] = best[without];
                argmax[c] = argmax[without];
            }
        });
        Ok(Self {
            candidates,
            best,
            argmax,
        })
    }

    /// bps(allowed): the best score of a family inside `allowed` (a global mask), and the family.
    fn within(&self, allowed: Mask) -> (f64, Mask) {
        let c = compress(allowed, &self.candidates);
        (self.best[c], self.argmax[c])
    }
}

/// The positions, among `candidates`, of the variables in `mask`, as a local bit set.
pub(super) fn compress(mask: Mask, candidates: &[usize]) -> usize {
    candidates
        .iter()
        .enumerate()
        .filter(|&(_, &v)| mask & (1 << v) != 0)
        .fold(0, |c, (k, _)| c | (1 << k))
}

/// The best DAG found by [`best_dag`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactDag {
    pub dag: Dag,
    /// Σ_i F(i | pa(i)) of `dag`.
    pub score: f64,
    /// Each variable's parents as a mask.
    pub parents: Vec<Mask>,
}

/// One table per variable, `make(i, families[i])`, once D = `families.len()` is within
/// [`MAX_DP_VARIABLES`] (the subset tables have 2^D entries).
pub(super) fn per_variable<T>(
    families: &[Vec<(Mask, f64)>],
    make: impl Fn(usize, &[(Mask, f64)]) -> Result<T, DpError>,
) -> Result<Vec<T>, DpError> {
    let d = families.len();
    if d > MAX_DP_VARIABLES {
        return Err(DpError::TooManyVariables {
            d,
            max: MAX_DP_VARIABLES,
        });
    }
    families
        .iter()
        .enumerate()
        .map(|(i, f)| make(i, f))
        .collect()
}

/// The highest-scoring DAG over `families.len()` variables, where `families[i]` lists the
/// admissible parent sets of variable i (global masks) with their scores F(i | S); a family not
/// listed, or with a non-finite score, is not admissible. Of families with equal scores the one with
/// fewer parents (a subset) is kept; of equal sinks, the lower index.
pub fn best_dag(families: &[Vec<(Mask, f64)>]) -> Result<ExactDag, DpError> {
    let d = families.len();
    let tables = per_variable(families, BestWithin::new)?;
    let full: usize = (1 << d) - 1;
    let mut best = vec![f64::NEG_INFINITY; full + 1];
    let mut sink = vec![u8::MAX; full + 1];
    best[0] = 0.0;
    for w in 1..=full {
        let mut bits = w;
        while bits != 0 {
            let s = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let rest = w & !(1 << s);
            if best[rest] == f64::NEG_INFINITY {
                continue;
            }
            let (local, _) = tables[s].within(rest as Mask);
            let total = best[rest] + local;
            if total > best[w] {
                best[w] = total;
                sink[w] = s as u8;
            }
        }
    }
    if best[full] == f64::NEG_INFINITY {
        return Err(DpError::NoDag);
    }
    let mut parents = vec![0 as Mask; d];
    let mut w = full;
    while w != 0 {
        let s = sink[w] as usize;
        let rest = w & !(1 << s);
        parents[s] = tables[s].within(rest as Mask).1;
        w = rest;
    }
    let mut edges = Vec::new();
    for (i, &p) in parents.iter().enumerate() {
        edges.extend((0..d).filter(|&j| p & (1 << j) != 0).map(|j| (j, i)));
    }
    let dag = Dag::from_edges(d, &edges).map_err(|_| DpError::NoDag)?;
    Ok(ExactDag {
        dag,
        score: best[full],
        parents,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_variables_take_the_better_orientation() {
        // F(0|∅) = −10, F(0|{1}) = −7, F(1|∅) = −10, F(1|{0}) = −8: 1 → 0 scores −17, 0 → 1 −18.
        let families = vec![
            vec![(0, -10.0), (0b10, -7.0)],
            vec![(0, -10.0), (0b01, -8.0)],
        ];
        let best = best_dag(&families).unwrap();
        assert_eq!(best.dag.edges(), vec![(1, 0)]);
        assert_eq!(best.score, -17.0);
        assert_eq!(best.parents, vec![0b10, 0]);
    }

    #[test]
    fn of_two_equal_families_the_smaller_wins() {
        // An input the fit switched off scores the same as leaving it out.
        let families = vec![vec![(0, -10.0), (0b10, -10.0)], vec![(0, -10.0)]];
        let best = best_dag(&families).unwrap();
        assert!(best.dag.edges().is_empty());
        assert_eq!(best.score, -20.0);
    }

    #[test]
    fn missing_families_are_errors_not_panics() {
        assert_eq!(
            best_dag(&[vec![(0, -1.0)], vec![(0b1, f64::NAN)]]),
            Err(DpError::NoFamily { child: 1 })
        );
        // Each variable may only have the other as parent: every DAG would need a cycle.
        assert_eq!(
            best_dag(&[vec![(0b10, -1.0)], vec![(0b01, -1.0)]]),
            Err(DpError::NoDag)
        );
        let many = vec![vec![(0, 0.0)]; MAX_DP_VARIABLES + 1];
        assert!(matches!(
            best_dag(&many),
            Err(DpError::TooManyVariables { .. })
        ));
    }
}
