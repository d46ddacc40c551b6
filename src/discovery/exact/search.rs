//! The exact search from data to DAG: score every variable's empty and one-parent families, keep
//! as candidate parents those with the largest one-parent gains F(i | {j}) − F(i | ∅), score every
//! admissible family within the candidates (at most K parents, knowledge respected), then take the
//! best DAG by dynamic programming and the posterior (every DAG for D ≤ 5, edge probabilities over
//! orders above that). The number of fits is known before the second stage starts.

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::dp::{best_dag, DpError, ExactDag, Mask, MAX_CANDIDATES, MAX_DP_VARIABLES};
use super::orders::order_edge_probabilities;
use super::posterior::{enumerate_posterior, GraphPosterior, GraphPrior};
use super::scores::{fit_families, ScoreCache};
use super::{admissible_families, FamilyError};
use crate::discovery::family::{FamilyKey, FamilyScoreSettings};
use crate::discovery::knowledge::Knowledge;
use crate::graph::MAX_ENUMERATION_NODES;

/// Settings of the exact search, validated by [`ExactSettings::validate`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ExactSettings {
    /// K: the most parents a variable may have.
    pub max_parents: usize,
    /// P: candidate parents kept per variable (by one-parent gain).
    pub candidates: usize,
    pub family: FamilyScoreSettings,
    pub prior: GraphPrior,
}

impl ExactSettings {
    /// Checks the ranges: 1 ≤ K ≤ P ≤ [`MAX_CANDIDATES`], valid family settings and, for the
    /// edge-count prior, 0 < q < 1.
    pub fn validate(self) -> Result<Self, String> {
        if self.max_parents == 0 {
            return Err("the maximum number of parents must be at least 1".into());
        }
        if self.candidates == 0 || self.candidates > MAX_CANDIDATES {
            return Err(format!(
                "candidate parents per variable must be between 1 and {MAX_CANDIDATES}, got {}",
                self.candidates
            ));
        }
        if let GraphPrior::EdgeCount { edge_probability } = self.prior {
            if !(edge_probability > 0.0 && edge_probability < 1.0) {
                return Err(format!(
                    "the edge probability of the prior must lie strictly between 0 and 1, got \
                     {edge_probability}"
                ));
            }
        }
        self.family.validate()?;
        Ok(self)
    }
}

/// Every variable's empty family and each allowed single parent: the first stage.
pub fn first_stage_families(knowledge: &Knowledge) -> Vec<FamilyKey> {
    let d = knowledge.d();
    let mut out = Vec::new();
    for i in 0..d {
        out.push((i, vec![]));
        out.extend(
            (0..d)
                .filter(|&j| knowledge.allowed(j, i))
                .map(|j| (i, vec![j])),
        );
    }
    out
}

/// F(i | {j}) − F(i | ∅) for every allowed pair, None where a score is missing or failed.
pub fn one_parent_gains(cache: &ScoreCache, knowledge: &Knowledge) -> Vec<Vec<Option<f64>>> {
    let d = knowledge.d();
    let value = |k: FamilyKey| cache.get(&k).and_then(|r| r.as_ref().ok()).map(|s| s.value);
    (0..d)
        .map(|i| {
            let base = value((i, vec![]));
            (0..d)
                .map(|j| {
                    if !knowledge.allowed(j, i) {
                        return None;
                    }
                    Some(value((i, vec![j]))? - base?)
                })
                .collect()
        })
        .collect()
}

/// Each variable's candidate parents: its required parents, then the allowed variables with the
/// largest one-parent gains (ties to the lower index) up to `p` in all; sorted.
pub fn choose_candidates(
    gains: &[Vec<Option<f64>>],
    knowledge: &Knowledge,
    p: usize,
) -> Vec<Vec<usize>> {
    let d = knowledge.d();
    (0..d)
        .map(|i| {
            let mut chosen: Vec<usize> = (0..d).filter(|&j| knowledge.is_required(j, i)).collect();
            let mut ranked: Vec<(usize, f64)> = (0..d)
                .filter(|j| !chosen.contains(j))
                .filter_map(|j| gains[i][j].map(|g| (j, g)))
                .collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            for (j, _) in ranked {
                if chosen.len() >= p {
                    break;
                }
                chosen.push(j);
            }
            chosen.sort_unstable();
            chosen
        })
        .collect()
}

/// The admissible families of every variable within its candidates, and how many there are.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyPlan {
    pub candidates: Vec<Vec<usize>>,
    pub families: Vec<Vec<Mask>>,
}

impl FamilyPlan {
    pub fn new(
        candidates: Vec<Vec<usize>>,
        max_parents: usize,
        knowledge: &Knowledge,
    ) -> Result<Self, FamilyError> {
        let families = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| admissible_families(i, c, max_parents, knowledge))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            candidates,
            families,
        })
    }

    /// Every family of the plan as (child, sorted parents).
    pub fn keys(&self) -> Vec<FamilyKey> {
        self.families
            .iter()
            .enumerate()
            .flat_map(|(i, masks)| {
                masks.iter().map(move |&m| {
                    let parents = (0..Mask::BITS as usize)
                        .filter(|&j| m & (1 << j) != 0)
                        .collect();
                    (i, parents)
                })
            })
            .collect()
    }

    /// The score table for the DP: each planned family with its cached value (families that are
    /// missing or failed are left out, so they are not admissible).
    pub fn table(&self, cache: &ScoreCache) -> Vec<Vec<(Mask, f64)>> {
        self.families
            .iter()
            .enumerate()
            .map(|(i, masks)| {
                masks
                    .iter()
                    .filter_map(|&m| {
                        let parents: Vec<usize> = (0..Mask::BITS as usize)
                            .filter(|&j| m & (1 << j) != 0)
                            .collect();
                        let s = cache.get(&(i, parents))?.as_ref().ok()?;
                        Some((m, s.value))
                    })
                    .collect()
            })
            .collect()
    }
}

/// What the exact search found.
#[derive(Debug, Clone, PartialEq)]
pub struct ExactOutcome {
    pub best: ExactDag,
    /// Every DAG with its probability, for D ≤ 5.
    pub posterior: Option<GraphPosterior>,
    /// P(i → j | X) at [i][j]: from the listed DAGs for D ≤ 5 (the chosen prior), over orders
    /// (order-modular prior) above.
    pub edge_probabilities: Vec<Vec<f64>>,
    /// Which prior the edge probabilities are under, in words.
    pub edge_probability_prior: String,
    pub candidates: Vec<Vec<usize>>,
    /// Families fitted in this run, and families found in the cache.
    pub families_fitted: usize,
    pub cache_hits: usize,
    /// Families in the plan that could not be fitted (left out of the search).
    pub families_failed: usize,
    /// False when a stop came before every planned family was scored: the DAG is then the best
    /// over the families fitted so far.
    pub complete: bool,
}

/// Why the exact search could not produce a DAG.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExactError {
    #[error("{0}")]
    Settings(String),
    #[error(transparent)]
    Family(#[from] FamilyError),
    #[error(transparent)]
    Search(#[from] DpError),
    #[error("stopped before every variable had a scored family, so there is no graph yet")]
    Stopped,
}

/// Runs both stages on `data` (N × D, standardised) with `cache` holding any scores already known,
/// on up to `threads` threads; `progress(stage, done, total)` after each family fitted, with
/// `total` known before the stage starts; `stop()` ends the run between families: the cache keeps
/// what was fitted and the DAG is the best over those families.
pub fn run_exact(
    data: &DMatrix<f64>,
    knowledge: &Knowledge,
    settings: &ExactSettings,
    cache: &mut ScoreCache,
    threads: usize,
    progress: impl Fn(usize, usize, usize) + Sync,
    stop: impl Fn() -> bool + Sync,
) -> Result<ExactOutcome, ExactError> {
    let settings = settings.validate().map_err(ExactError::Settings)?;
    let d = data.ncols();
    if d > MAX_DP_VARIABLES {
        return Err(DpError::TooManyVariables {
            d,
            max: MAX_DP_VARIABLES,
        }
        .into());
    }
    let mut fitted = 0;
    let mut hits = 0;
    let first = first_stage_families(knowledge);
    let todo = cache.missing(&first);
    hits += first.len() - todo.len();
    fit_families(data, &todo, cache, threads, |k, n| progress(1, k, n), &stop);
    fitted += todo.len() - cache.missing(&first).len();
    let mut complete = cache.missing(&first).is_empty();
    let gains = one_parent_gains(cache, knowledge);
    let p = settings.candidates.min(d.saturating_sub(1));
    let candidates = choose_candidates(&gains, knowledge, p);
    let plan = FamilyPlan::new(candidates, settings.max_parents, knowledge)?;
    let keys = plan.keys();
    if complete {
        let todo = cache.missing(&keys);
        hits += keys.iter().filter(|k| k.1.len() >= 2).count() - todo.len();
        fit_families(data, &todo, cache, threads, |k, n| progress(2, k, n), &stop);
        fitted += todo.len() - cache.missing(&keys).len();
        complete = cache.missing(&keys).is_empty();
    }
    let failed = keys
        .iter()
        .filter(|k| matches!(cache.get(k), Some(Err(_))))
        .count();
    let table = plan.table(cache);
    // A stopped run searches over the families fitted so far; it needs one per variable.
    let best = match best_dag(&table) {
        Ok(b) => b,
        Err(_) if !complete => return Err(ExactError::Stopped),
        Err(e) => return Err(e.into()),
    };
    let (posterior, edge_probabilities, edge_probability_prior) = if d <= MAX_ENUMERATION_NODES {
        let post =
            enumerate_posterior(&table, settings.prior).expect("D is within the enumeration limit");
        let edges = post.edge_probabilities.clone();
        let prior = post.prior.clone();
        (Some(post), edges, prior)
    } else {
        (
            None,
            order_edge_probabilities(&table)?,
            "order-modular: orders uniform, each variable's parents any admissible set of its \
             predecessors"
                .to_string(),
        )
    };
    Ok(ExactOutcome {
        best,
        posterior,
        edge_probabilities,
        edge_probability_prior,
        candidates: plan.candidates,
        families_fitted: fitted,
        cache_hits: hits,
        families_failed: failed,
        complete,
    })
}
