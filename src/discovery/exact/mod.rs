//! Exact Bayesian model selection over DAGs (DGP-CDE, MODEL.md §6): a DAG's evidence is the sum
//! of its families' local scores F(i | pa(i)), so the best DAG, and the posterior over DAGs, follow
//! from a table of local scores by dynamic programming.
//!
//! Owns: which families are admissible ([`admissible_families`]) and the exact search over them
//! ([`dp`]), the posterior over DAGs for D ≤ 5 ([`posterior`]) and posterior edge probabilities
//! over orders for larger D ([`orders`]).

use serde::{Deserialize, Serialize};
pub mod dp;
pub mod orders;
pub mod posterior;
pub mod scores;
pub mod search;

pub use dp::{best_dag, DpError, ExactDag, Mask, MAX_CANDIDATES, MAX_DP_VARIABLES};
pub use orders::order_edge_probabilities;
pub use posterior::{
    enumerate_posterior, ClassPosterior, GraphPosterior, GraphPrior, GraphPriorError, ScoredGraph,
};
pub use scores::{CacheKey, ScoreCache, FAMILY_SCORE_VERSION};
pub use search::{
    ExactError, ExactOutcome, ExactRun, ExactSettings, ExactSettingsError, ExactStage, FamilyPlan,
};

use crate::discovery::knowledge::Knowledge;

/// Why a variable has no admissible family.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum FamilyError {
    #[error(
        "variable {child} has {required} required parents but at most {max_parents} parents are \
         allowed: raise the maximum in-degree"
    )]
    TooManyRequired {
        child: usize,
        required: usize,
        max_parents: usize,
    },
    #[error("variable {child}: required parent {parent} is not among its candidate parents")]
    RequiredNotCandidate { child: usize, parent: usize },
}

impl FamilyError {
    /// This error in words with the variables' names (`names[i]` is variable i) and, for a
    /// variable with too many required parents, which they are.
    pub fn named(&self, names: &[String], knowledge: &Knowledge) -> String {
        let name = |i: usize| {
            names
                .get(i)
                .map_or_else(|| format!("variable {i}"), Clone::clone)
        };
        match *self {
            FamilyError::TooManyRequired {
                child,
                required,
                max_parents,
            } => {
                let parents: Vec<String> = (0..knowledge.d())
                    .filter(|&j| knowledge.is_required(j, child))
                    .map(name)
                    .collect();
                format!(
                    "{} has {required} required parents ({}) but the exact search allows at most \
                     {max_parents} parent{} per variable (max_parents, --max-parents): raise it \
                     to at least {required} or require fewer",
                    name(child),
                    parents.join(", "),
                    if max_parents == 1 { "" } else { "s" }
                )
            }
            FamilyError::RequiredNotCandidate { child, parent } => format!(
                "{}: its required parent {} is not among its candidate parents",
                name(child),
                name(parent)
            ),
        }
    }
}

/// The admissible parent sets of `child` as masks: every S ⊆ `candidates` with |S| ≤
/// `max_parents`, each parent allowed by `knowledge` (not forbidden, not from a later tier), and
/// every required parent in S. Listed by size, then by mask.
pub fn admissible_families(
    child: usize,
    candidates: &[usize],
    max_parents: usize,
    knowledge: &Knowledge,
) -> Result<Vec<Mask>, FamilyError> {
    let required: Vec<usize> = (0..knowledge.d())
        .filter(|&j| knowledge.is_required(j, child))
        .collect();
    if required.len() > max_parents {
        return Err(FamilyError::TooManyRequired {
            child,
            required: required.len(),
            max_parents,
        });
    }
    if let Some(&parent) = required.iter().find(|j| !candidates.contains(j)) {
        return Err(FamilyError::RequiredNotCandidate { child, parent });
    }
    let required_mask: Mask = required.iter().fold(0, |m, &j| m | (1 << j));
    let open: Vec<usize> = candidates
        .iter()
        .copied()
        .filter(|&j| j != child && knowledge.allowed(j, child) && required_mask & (1 << j) == 0)
        .collect();
    let room = max_parents - required.len();
    let mut families = Vec::new();
    for pick in 0u64..(1u64 << open.len()) {
        if pick.count_ones() as usize > room {
            continue;
        }
        let mask = open
            .iter()
            .enumerate()
            .filter(|&(k, _)| pick & (1 << k) != 0)
            .fold(required_mask, |m, (_, &j)| m | (1 << j));
        families.push(mask);
    }
    families.sort_by_key(|m| (m.count_ones(), *m));
    Ok(families)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_respect_in_degree_knowledge_and_candidates() {
        // Four variables; child 3; candidates 0, 1, 2; 0 → 3 forbidden; 1 → 3 required; K = 2.
        let k = Knowledge::from_indices(4, vec![(0, 3)], vec![(1, 3)], None).unwrap();
        let f = admissible_families(3, &[0, 1, 2], 2, &k).unwrap();
        assert_eq!(f, vec![0b0010, 0b0110]);
        // Without knowledge and K = 1: ∅ and each single candidate.
        let f = admissible_families(3, &[0, 1, 2], 1, &Knowledge::none(4)).unwrap();
        assert_eq!(f, vec![0, 0b001, 0b010, 0b100]);
        // Tiers: variable 3 in tier 0, the others in tier 1: no parent allowed.
        let tiers = Knowledge::from_indices(
            4,
            vec![],
            vec![],
            Some(vec![Some(1), Some(1), Some(1), Some(0)]),
        )
        .unwrap();
        assert_eq!(
            admissible_families(3, &[0, 1, 2], 3, &tiers).unwrap(),
            vec![0]
        );
    }

    #[test]
    fn impossible_requirements_are_named() {
        let k = Knowledge::from_indices(3, vec![], vec![(0, 2), (1, 2)], None).unwrap();
        assert_eq!(
            admissible_families(2, &[0, 1], 1, &k),
            Err(FamilyError::TooManyRequired {
                child: 2,
                required: 2,
                max_parents: 1
            })
        );
        assert_eq!(
            admissible_families(2, &[0], 2, &k),
            Err(FamilyError::RequiredNotCandidate {
                child: 2,
                parent: 1
            })
        );
    }
}
