//! The exact search from data to DAG: score every variable's empty and one-parent families, keep
//! as candidate parents those with the largest one-parent gains F(i | {j}) − F(i | ∅), score every
//! admissible family within the candidates (at most K parents, knowledge respected), then take the
//! best DAG by dynamic programming and the posterior (every DAG for D ≤ 5, edge probabilities over
//! orders above that). The number of fits is known before the second stage starts (an upper
//! bound when pruning is on: then a family is planned once its smaller subsets are scored).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::dp::{best_dag, DpError, ExactDag, Mask, MAX_CANDIDATES, MAX_DP_VARIABLES};
use super::orders::order_edge_probabilities;
use super::posterior::{enumerate_posterior, GraphPosterior, GraphPrior};
use super::scores::ScoreCache;
use super::{admissible_families, FamilyError};
use crate::discovery::family::{FamilyKey, FamilyScore, FamilyScoreSettings, FamilySettingsError};
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
    /// δ, nats: a family with two or more parents is fitted only when every admissible subset
    /// with one parent fewer gained at least −δ over its own best subset (None: every family is
    /// fitted). A family left out takes its best subset's value, as a fit that found nothing more
    /// would. Not part of the score cache's key: it changes which families are fitted, not how.
    #[serde(default)]
    pub prune_below: Option<f64>,
    /// Rows an exact search over at most [`FEW_VARIABLES`] variables fits, in place of the
    /// search's `max_rows` (None: `max_rows`). Such a plan is a few dozen families, so every row
    /// of a typical data set is affordable, and more rows decide more graphs (under a prior that
    /// holds off the fits' noise: [`GraphPrior::Auto`]).
    #[serde(default)]
    pub few_rows: Option<usize>,
    /// Candidates a saturated variable may gain after its families are scored (0: none). A
    /// variable is saturated when its best family holds all its candidates but at most one: its
    /// true parents may be more than P. It then gains the next parent by one-parent gain (a
    /// positive one), and the families with it are scored, once per added candidate.
    #[serde(default)]
    pub widen_saturated: usize,
}

/// Up to this many variables an exact search fits [`ExactSettings::few_rows`] rows (and
/// [`GraphPrior::Auto`] means its own q).
pub const FEW_VARIABLES: usize = 5;

/// The default [`ExactSettings::few_rows`]: every row of the public 3-variable sets (1000).
/// Measured with the exact search on the 18 public 3-variable sets (BENCHMARKS.md, issue 33):
/// 200 rows under q = 0.2 get 16 right; 1000 rows under q = 0.2 get 16 (empty_s1 gains a
/// spurious edge), under q = 0.05, 0.02 or 0.01 get 17 (fork_s2 stays reversed), 44.8 s for all
/// 18 on 2 threads.
pub const DEFAULT_FEW_ROWS: usize = 1000;

/// How many candidates beyond P the continuous search's parents may add to a variable in a hybrid
/// run (the strongest by one-parent gain are kept), so a hub it over-connects costs at most
/// Σ_{k ≤ K} C(P + 2, k) families (247 at P = K = 6) instead of up to 2^16.
pub const MAX_EXTRA_BEYOND_P: usize = 2;

/// Most parents per variable by default (K). K = P lets a variable take any subset of its
/// candidates: 2^P − 1 − P families beyond screening (57 at P = 6, against 35 at K = 3), which on
/// the dense 10-node groups recovered the 12–17 true edges per set that K = 3 cannot hold (ER4_d10:
/// mean SHD 22.00 → 17.00, F1 0.651 → 0.751) and changed nothing on the sparse ones
/// (BENCHMARKS.md, issue 11).
pub const DEFAULT_MAX_PARENTS: usize = DEFAULT_CANDIDATES;
/// Candidate parents per variable by default (P).
pub const DEFAULT_CANDIDATES: usize = 6;
/// Inducing points of a family fit by default.
pub const DEFAULT_FAMILY_INDUCING: usize = 20;

/// The default [`ExactSettings::widen_saturated`]: P + 2 at most, as for a hybrid run's extra
/// candidates. On the 12 public 10-node sets, three seeds rescored and extended from the same
/// score caches (BENCHMARKS.md, issue 33): summed SHD 408 (none) → 379 (1) → 361 (2); ER4 mean
/// SHD / F1 19.00 / 0.723 → 17.11 / 0.754, SF4 19.44 / 0.636 → 16.11 / 0.698; the sparse groups
/// never saturate and are unchanged; about a third more family fits on the dense sets.
pub const DEFAULT_WIDEN_SATURATED: usize = 2;

/// The default δ of [`ExactSettings::prune_below`] (None until measured: every family fitted).
pub const DEFAULT_PRUNE_BELOW: Option<f64> = None;

impl Default for ExactSettings {
    /// K = [`DEFAULT_MAX_PARENTS`], P = [`DEFAULT_CANDIDATES`], family fits with
    /// M = [`DEFAULT_FAMILY_INDUCING`], the edge-count prior with q chosen for the search
    /// ([`GraphPrior::Auto`]: 0.2, or 0.05 for an exact search over at most 5 variables; the q
    /// used is stated in every result; `uniform` and any q are options), and
    /// [`DEFAULT_FEW_ROWS`] rows for an exact search over at most 5 variables.
    fn default() -> Self {
        Self {
            max_parents: DEFAULT_MAX_PARENTS,
            candidates: DEFAULT_CANDIDATES,
            family: FamilyScoreSettings::with_inducing(DEFAULT_FAMILY_INDUCING),
            prior: GraphPrior::Auto,
            prune_below: DEFAULT_PRUNE_BELOW,
            few_rows: Some(DEFAULT_FEW_ROWS),
            widen_saturated: DEFAULT_WIDEN_SATURATED,
        }
    }
}

/// Why exact-search settings cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ExactSettingsError {
    #[error("the maximum number of parents must be at least 1")]
    NoParents,
    #[error("candidate parents per variable must be between 1 and {MAX_CANDIDATES}, got {0}")]
    Candidates(usize),
    #[error("the edge probability of the prior must lie strictly between 0 and 1, got {0}")]
    EdgeProbability(f64),
    #[error("the pruning margin must be a finite number of nats ≥ 0, got {0}")]
    PruneMargin(f64),
    #[error(transparent)]
    Family(#[from] FamilySettingsError),
}

impl ExactSettings {
    /// Checks the ranges: K ≥ 1, 1 ≤ P ≤ [`MAX_CANDIDATES`] (K may exceed P: a hybrid run's
    /// extra candidates can), valid family settings and, for the edge-count prior, 0 < q < 1.
    pub fn validate(self) -> Result<Self, ExactSettingsError> {
        if self.max_parents == 0 {
            return Err(ExactSettingsError::NoParents);
        }
        if self.candidates == 0 || self.candidates > MAX_CANDIDATES {
            return Err(ExactSettingsError::Candidates(self.candidates));
        }
        if let GraphPrior::EdgeCount { edge_probability } = self.prior {
            if !(edge_probability > 0.0 && edge_probability < 1.0) {
                return Err(ExactSettingsError::EdgeProbability(edge_probability));
            }
        }
        if let Some(delta) = self.prune_below {
            if !(delta >= 0.0 && delta.is_finite()) {
                return Err(ExactSettingsError::PruneMargin(delta));
            }
        }
        self.family.validate()?;
        Ok(self)
    }

    /// These settings for an exact search over `d` variables fitting at most `max_rows` rows:
    /// with at most [`FEW_VARIABLES`] variables the rows become [`ExactSettings::few_rows`]
    /// (when set), and an automatic prior is resolved for the search it is used in
    /// ([`GraphPrior::resolve`]). `exact` false is a hybrid search: its candidates are widened
    /// by the continuous search's edges already, and widening saturated variables too was
    /// measured worse there (syntren01 SHD 42 → 47, SF4_d20_s0 34 → 36; BENCHMARKS.md), so
    /// [`ExactSettings::widen_saturated`] is 0 for it. Returns the rows and the settings.
    pub fn for_search(self, d: usize, max_rows: usize, exact: bool) -> (usize, Self) {
        let few = exact && d <= FEW_VARIABLES;
        let rows = if few {
            self.few_rows.unwrap_or(max_rows)
        } else {
            max_rows
        };
        let prior = self.prior.resolve(few);
        let widen_saturated = if exact { self.widen_saturated } else { 0 };
        (
            rows,
            Self {
                prior,
                widen_saturated,
                ..self
            },
        )
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

/// The admissible families of every variable within its candidates, and how many there are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
            .flat_map(|(i, masks)| masks.iter().map(move |&m| (i, mask_parents(m))))
            .collect()
    }

    /// The families the search fits and reads, per variable: with `prune_below` = Some(δ), a
    /// family S is admitted when it is the smallest of its variable's plan, or when every S \ {j}
    /// in the plan is admitted, scored, and gained at least −δ nats over its own best subset
    /// (F(S \ {j}) − max_k F*(S \ {j, k}), F* raised to the best subset as in
    /// [`FamilyPlan::table`]). A family whose subsets are not all scored yet is undecided and
    /// not admitted. With None every planned family is admitted.
    pub fn admitted(&self, cache: &ScoreCache, prune_below: Option<f64>) -> Vec<Vec<Mask>> {
        let Some(delta) = prune_below else {
            return self.families.clone();
        };
        self.families
            .iter()
            .enumerate()
            .map(|(i, masks)| {
                let in_plan: HashSet<Mask> = masks.iter().copied().collect();
                let mut raised: HashMap<Mask, f64> = HashMap::new();
                let mut gain: HashMap<Mask, f64> = HashMap::new();
                let mut out = Vec::new();
                for &m in masks {
                    let subsets: Vec<Mask> = (0..Mask::BITS)
                        .filter(|&j| m & (1 << j) != 0)
                        .map(|j| m & !(1 << j))
                        .filter(|t| in_plan.contains(t))
                        .collect();
                    let admit = subsets.is_empty()
                        || subsets
                            .iter()
                            .all(|t| gain.get(t).is_some_and(|&g| g >= -delta));
                    if !admit {
                        continue;
                    }
                    out.push(m);
                    let best_subset = subsets
                        .iter()
                        .filter_map(|t| raised.get(t).copied())
                        .fold(f64::NEG_INFINITY, f64::max);
                    let fitted = cache
                        .get(&(i, mask_parents(m)))
                        .and_then(|r| r.as_ref().ok())
                        .map(|s| s.value);
                    if let Some(v) = fitted {
                        raised.insert(m, v.max(best_subset));
                        // The smallest family has nothing to gain over: it always counts.
                        let g = if subsets.is_empty() {
                            f64::INFINITY
                        } else {
                            v - best_subset
                        };
                        gain.insert(m, g);
                    } else if cache.get(&(i, mask_parents(m))).is_some() && best_subset.is_finite()
                    {
                        // A failed fit stands at its best subset's value and gains nothing.
                        raised.insert(m, best_subset);
                        gain.insert(m, 0.0);
                    }
                }
                out
            })
            .collect()
    }

    /// The score table for the DP over the `admitted` families (see [`FamilyPlan::admitted`]):
    /// each family with its cached value, first raised to the best value an admitted superset's
    /// fit has with the extra parents switched off (the downward repair,
    /// [`FamilyScore::switched_off`]), then to the best value of its admitted subsets,
    /// F(i | S) = max(F_fit(i | S),
    /// max_{T ⊃ S} F_T(i | S), max_{S' ⊂ S} F(i | S')). The models nest: with the extra
    /// parents' linear variances and SE precisions at 0 the kernel on [x_S, w] is the kernel on
    /// [x_S', w], so the maximised bound of S is at least the value reached for S'; a fit that
    /// ends below a subset's only failed to find it. So a family whose fit failed takes its best
    /// subset's value too. Ties then go to the smaller family in the DP. Families that are
    /// missing, or failed with no scored subset, are left out, so they are not admissible.
    pub fn table(&self, cache: &ScoreCache, admitted: &[Vec<Mask>]) -> Vec<Vec<(Mask, f64)>> {
        admitted
            .iter()
            .enumerate()
            .map(|(i, masks)| {
                let scored: HashMap<Mask, &FamilyScore> = masks
                    .iter()
                    .filter_map(|&m| match cache.get(&(i, mask_parents(m))) {
                        Some(Ok(s)) => Some((m, s)),
                        _ => None,
                    })
                    .collect();
                // Masks are listed by size, so every proper subset is settled before its supersets.
                let mut settled: HashMap<Mask, f64> = HashMap::new();
                let mut out = Vec::new();
                for &m in masks {
                    let fitted = match cache.get(&(i, mask_parents(m))) {
                        None => continue,
                        Some(Ok(s)) => s.value,
                        Some(Err(_)) => f64::NEG_INFINITY,
                    };
                    let fitted = fitted.max(switched_off_value(&scored, m));
                    let best_subset = (0..Mask::BITS)
                        .filter(|&j| m & (1 << j) != 0)
                        .filter_map(|j| settled.get(&(m & !(1 << j))).copied())
                        .fold(f64::NEG_INFINITY, f64::max);
                    let value = fitted.max(best_subset);
                    if value.is_finite() {
                        settled.insert(m, value);
                        out.push((m, value));
                    }
                }
                out
            })
            .collect()
    }
}

/// The downward repair: the best value a fitted superset T ⊋ S among `scored` has with the
/// parents outside S switched off ([`FamilyScore::switched_off`]), a point of S's model and so a
/// lower bound on F(i | S); −∞ when none has one. A superset fitted from S's fit continues S's
/// optimisation, and what it found for the parents they share belongs to S as much as to T.
fn switched_off_value(scored: &HashMap<Mask, &FamilyScore>, m: Mask) -> f64 {
    scored
        .iter()
        .filter(|&(&t, _)| t != m && t & m == m)
        .filter_map(|(&t, score)| {
            let kept: u32 = mask_parents(t)
                .iter()
                .enumerate()
                .filter(|&(_, &p)| m & (1 << p) != 0)
                .map(|(k, _)| 1u32 << k)
                .sum();
            score
                .switched_off
                .iter()
                .find(|&&(mask, _)| mask == kept)
                .map(|&(_, v)| v)
        })
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The parents in a mask, ascending.
fn mask_parents(m: Mask) -> Vec<usize> {
    (0..Mask::BITS as usize)
        .filter(|&j| m & (1 << j) != 0)
        .collect()
}

/// What the exact search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
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

/// Which stage an exact run is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExactStage {
    /// Scoring every variable's empty and one-parent families (to choose candidates).
    Screening,
    /// Scoring every admissible family within the candidates.
    Families,
    /// Every planned family is scored.
    Scored,
}

/// An exact search as a state machine a driver advances a few families at a time (the browser
/// fits one family per step; the CLI hands a stage's families to all cores): [`ExactRun::todo`]
/// lists the families the current stage still needs, the driver stores their scores in
/// [`ExactRun::cache_mut`], and [`ExactRun::advance`] moves on once none is left.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExactRun {
    d: usize,
    knowledge: Knowledge,
    settings: ExactSettings,
    cache: ScoreCache,
    stage: ExactStage,
    plan: Option<FamilyPlan>,
    todo: Vec<FamilyKey>,
    /// Families in the current stage, and how many were already cached when it began.
    stage_total: usize,
    hits: usize,
    cached_at_start: usize,
    /// Parents that join each variable's candidates whatever their gains (hybrid: the edges of
    /// the continuous search's graph).
    extra_candidates: Vec<Vec<usize>>,
    /// Candidates each variable gained for being saturated ([`ExactSettings::widen_saturated`]).
    #[serde(default)]
    widened: Vec<usize>,
}

impl ExactRun {
    /// A run over `d` variables starting from `cache` (scores already known are not refitted).
    pub fn new(
        d: usize,
        knowledge: Knowledge,
        settings: ExactSettings,
        cache: ScoreCache,
    ) -> Result<Self, ExactError> {
        Self::with_extra_candidates(d, knowledge, settings, cache, vec![Vec::new(); d])
    }

    /// A run whose candidate parents also include `extra[i]` for each variable i (the hybrid
    /// search passes the parents the continuous search found). Extra parents that the knowledge
    /// forbids are ignored; the candidates stay within [`MAX_CANDIDATES`], extra parents first.
    /// They are set before the first stage is checked, because with a full cache screening ends
    /// at once and the candidates are fixed then.
    pub fn with_extra_candidates(
        d: usize,
        knowledge: Knowledge,
        settings: ExactSettings,
        cache: ScoreCache,
        extra: Vec<Vec<usize>>,
    ) -> Result<Self, ExactError> {
        if extra.len() != d {
            return Err(ExactError::Settings(format!(
                "extra candidates are given for {} variables, the data have {d}",
                extra.len()
            )));
        }
        let settings = Self::check(d, &knowledge, &settings)?;
        let first = first_stage_families(&knowledge);
        let todo = cache.missing(&first);
        let cached_at_start = cache.len();
        let mut run = Self {
            d,
            hits: first.len() - todo.len(),
            stage_total: first.len(),
            knowledge,
            settings,
            cache,
            stage: ExactStage::Screening,
            plan: None,
            todo,
            cached_at_start,
            extra_candidates: extra,
            widened: vec![0; d],
        };
        run.advance()?;
        Ok(run)
    }

    /// Each variable's candidate parents: the required ones, the extra ones (strongest one-parent
    /// gain first, at most [`MAX_EXTRA_BEYOND_P`] beyond P), then the largest one-parent gains, up
    /// to max(P, required + kept extra) and at most [`MAX_CANDIDATES`].
    fn candidates(&self) -> Vec<Vec<usize>> {
        let p = self.settings.candidates.min(self.d.saturating_sub(1));
        let gains = self.one_parent_gains();
        (0..self.d)
            .map(|i| {
                let mut chosen: Vec<usize> = (0..self.d)
                    .filter(|&j| self.knowledge.is_required(j, i))
                    .collect();
                let required = chosen.len();
                let mut extra: Vec<usize> = Vec::new();
                for &j in &self.extra_candidates[i] {
                    if j < self.d
                        && j != i
                        && self.knowledge.allowed(j, i)
                        && !chosen.contains(&j)
                        && !extra.contains(&j)
                    {
                        extra.push(j);
                    }
                }
                let gain = |j: usize| gains[i][j].unwrap_or(f64::NEG_INFINITY);
                extra.sort_by(|&a, &b| gain(b).total_cmp(&gain(a)).then(a.cmp(&b)));
                // A hub the continuous search gave many parents would otherwise have up to
                // 2^16 families: the extra parents may widen the candidates by a little only.
                let room = p
                    .max((required + extra.len()).min(p + MAX_EXTRA_BEYOND_P))
                    .max(required)
                    .min(MAX_CANDIDATES);
                chosen.extend(extra);
                chosen.truncate(room);
                let mut ranked: Vec<(usize, f64)> = (0..self.d)
                    .filter(|j| !chosen.contains(j))
                    .filter_map(|j| gains[i][j].map(|g| (j, g)))
                    .collect();
                ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                chosen.extend(ranked.into_iter().map(|(j, _)| j).take(room - chosen.len()));
                chosen.sort_unstable();
                chosen
            })
            .collect()
    }

    /// Fits the whole run will need at most: (screening fits, family fits). The second number is
    /// the plan's once screening is over (pruning, when on, fits fewer); before, it counts Σ_i Σ_{k=2..K} C(p_i, k) with p_i = min(P,
    /// allowed parents of i) (required and extra parents can change it).
    pub fn planned_fits(&self) -> (usize, usize) {
        let screening = first_stage_families(&self.knowledge).len();
        if let Some(plan) = &self.plan {
            let families = plan.keys().iter().filter(|k| k.1.len() >= 2).count();
            return (screening, families);
        }
        let families = (0..self.d)
            .map(|i| {
                let allowed = (0..self.d)
                    .filter(|&j| self.knowledge.allowed(j, i))
                    .count();
                let p = self.settings.candidates.min(allowed);
                (2..=self.settings.max_parents.min(p))
                    .map(|k| binomial(p, k))
                    .sum::<usize>()
            })
            .sum();
        (screening, families)
    }

    /// The checks [`ExactRun::new`] makes before it takes the cache: valid settings, D within the
    /// dynamic programme's limit, and no variable with more required parents than K.
    pub fn check(
        d: usize,
        knowledge: &Knowledge,
        settings: &ExactSettings,
    ) -> Result<ExactSettings, ExactError> {
        let settings = settings
            .validate()
            .map_err(|e| ExactError::Settings(e.to_string()))?;
        if d > MAX_DP_VARIABLES {
            return Err(DpError::TooManyVariables {
                d,
                max: MAX_DP_VARIABLES,
            }
            .into());
        }
        for child in 0..d {
            let required = (0..d).filter(|&j| knowledge.is_required(j, child)).count();
            if required > settings.max_parents {
                return Err(FamilyError::TooManyRequired {
                    child,
                    required,
                    max_parents: settings.max_parents,
                }
                .into());
            }
        }
        Ok(settings)
    }

    /// The cache, with every score fitted so far.
    pub fn into_cache(self) -> ScoreCache {
        self.cache
    }

    pub fn stage(&self) -> ExactStage {
        self.stage
    }

    /// The families the current stage still needs and can fit now, in order: all of them, or,
    /// when the family fits start from their subsets'
    /// ([`FamilyFitScheme::warm_starts`](crate::discovery::family::FamilyFitScheme::warm_starts)),
    /// those of the smallest size left (the larger ones wait for them).
    pub fn todo(&self) -> &[FamilyKey] {
        if !self.settings.family.scheme.warm_starts() || self.stage == ExactStage::Screening {
            return &self.todo;
        }
        let size = self.todo.first().map_or(0, |k| k.1.len());
        let ready = self.todo.iter().take_while(|k| k.1.len() == size).count();
        &self.todo[..ready]
    }

    /// (families of the current stage scored, families in the stage).
    pub fn stage_progress(&self) -> (usize, usize) {
        (self.stage_total - self.todo.len(), self.stage_total)
    }

    pub fn cache(&self) -> &ScoreCache {
        &self.cache
    }

    /// Planned families found in the cache rather than fitted, over the stages begun so far.
    pub fn cache_hits(&self) -> usize {
        self.hits
    }

    pub fn cache_mut(&mut self) -> &mut ScoreCache {
        &mut self.cache
    }

    /// F(i | {j}) − F(i | ∅) as far as known.
    pub fn one_parent_gains(&self) -> Vec<Vec<Option<f64>>> {
        one_parent_gains(&self.cache, &self.knowledge)
    }

    /// Takes the scores of `other` (of this run's key) it does not hold yet, counts the planned
    /// families they answer as cache hits, and plans on ([`ExactRun::advance`]); returns how many
    /// scores it took.
    pub fn absorb(&mut self, other: &ScoreCache) -> Result<usize, ExactError> {
        let taken = self.cache.merge(other);
        if taken > 0 {
            let answered = self
                .todo
                .iter()
                .filter(|k| self.cache.get(k).is_some())
                .count();
            self.hits += answered;
            self.advance()?;
        }
        Ok(taken)
    }

    /// Drops the scored families from the to-do list; when none is left, plans the next step:
    /// after screening, the families of the plan; then, with pruning, the families its rule
    /// admits once their subsets are scored (a size at a time); when nothing new is admitted,
    /// every family is scored.
    pub fn advance(&mut self) -> Result<(), ExactError> {
        self.todo.retain(|k| self.cache.get(k).is_none());
        if !self.todo.is_empty() || self.stage == ExactStage::Scored {
            return Ok(());
        }
        if self.stage == ExactStage::Screening {
            let candidates = self.candidates();
            let plan = FamilyPlan::new(candidates, self.settings.max_parents, &self.knowledge)?;
            self.plan = Some(plan);
            self.stage = ExactStage::Families;
            self.stage_total = 0;
        }
        loop {
            let plan = self.plan.as_ref().expect("planned after screening");
            let admitted: Vec<FamilyKey> = plan
                .admitted(&self.cache, self.settings.prune_below)
                .iter()
                .enumerate()
                .flat_map(|(i, masks)| masks.iter().map(move |&m| (i, mask_parents(m))))
                .filter(|k| k.1.len() >= 2)
                .collect();
            let new = admitted.len() - self.stage_total;
            self.todo = self.cache.missing(&admitted);
            if self.settings.family.scheme.warm_starts() {
                // A size at a time, smallest first: each family starts from its subsets' fits.
                self.todo.sort_by_key(|k| k.1.len());
            } else {
                // Largest families first: they take longest, so batches end on short fits and
                // no core waits long for the last one.
                self.todo.sort_by_key(|k| std::cmp::Reverse(k.1.len()));
            }
            self.hits += new.saturating_sub(self.todo.len());
            self.stage_total = admitted.len();
            if !self.todo.is_empty() {
                return Ok(());
            }
            if new == 0 {
                if self.widen()? {
                    continue;
                }
                self.stage = ExactStage::Scored;
                return Ok(());
            }
        }
    }

    /// Gives each saturated variable (its best family so far holds all its candidates but at
    /// most one) the next parent by one-parent gain, a positive one allowed by the knowledge,
    /// at most [`ExactSettings::widen_saturated`] times per variable and within
    /// [`MAX_CANDIDATES`]; re-plans when any gained one. Whether any did.
    fn widen(&mut self) -> Result<bool, ExactError> {
        if self.settings.widen_saturated == 0 {
            return Ok(false);
        }
        let Some(plan) = self.plan.as_ref() else {
            return Ok(false);
        };
        let admitted = plan.admitted(&self.cache, self.settings.prune_below);
        // As the search weighs them: the prior's penalty per parent included.
        let table = self
            .settings
            .prior
            .weigh_families(&plan.table(&self.cache, &admitted));
        let gains = self.one_parent_gains();
        if self.widened.len() != self.d {
            self.widened = vec![0; self.d];
        }
        let mut candidates = plan.candidates.clone();
        let mut any = false;
        for i in 0..self.d {
            let held = &candidates[i];
            if self.widened[i] >= self.settings.widen_saturated
                || held.len() >= MAX_CANDIDATES
                || held.len() < 2
            {
                continue;
            }
            // The best family: the highest value, the smaller family on a tie.
            let best =
                table[i]
                    .iter()
                    .copied()
                    .fold(None, |best: Option<(Mask, f64)>, f| match best {
                        Some(b)
                            if b.1 > f.1
                                || (b.1 == f.1 && b.0.count_ones() <= f.0.count_ones()) =>
                        {
                            Some(b)
                        }
                        _ => Some(f),
                    });
            let Some((mask, _)) = best else { continue };
            if (mask.count_ones() as usize) + 1 < held.len() {
                continue;
            }
            let next = (0..self.d)
                .filter(|j| !held.contains(j))
                .filter_map(|j| gains[i][j].filter(|g| *g > 0.0).map(|g| (j, g)))
                .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
            if let Some((j, _)) = next {
                candidates[i].push(j);
                candidates[i].sort_unstable();
                self.widened[i] += 1;
                any = true;
            }
        }
        if any {
            self.plan = Some(FamilyPlan::new(
                candidates,
                self.settings.max_parents,
                &self.knowledge,
            )?);
        }
        Ok(any)
    }

    /// The best DAG and the posterior over the families scored so far (all of them once the stage
    /// is [`ExactStage::Scored`]; before that, a stopped run's answer).
    pub fn outcome(&self) -> Result<ExactOutcome, ExactError> {
        let complete = self.stage == ExactStage::Scored;
        let plan = match &self.plan {
            Some(plan) => plan.clone(),
            None => {
                // Stopped while screening: candidates from the gains known so far.
                let candidates = self.candidates();
                FamilyPlan::new(candidates, self.settings.max_parents, &self.knowledge)?
            }
        };
        let admitted = plan.admitted(&self.cache, self.settings.prune_below);
        let failed = admitted
            .iter()
            .enumerate()
            .flat_map(|(i, masks)| masks.iter().map(move |&m| (i, mask_parents(m))))
            .filter(|k| matches!(self.cache.get(k), Some(Err(_))))
            .count();
        let table = plan.table(&self.cache, &admitted);
        // The prior enters the best DAG and the order sums family by family (an edge-count prior
        // is modular: |S| log(q / (1 − q)) per family, up to a constant); the enumeration adds it
        // per graph itself.
        let with_prior = self.settings.prior.weigh_families(&table);
        // A stopped run searches over the families fitted so far; it needs one per variable.
        let best = match best_dag(&with_prior) {
            Ok(b) => b,
            Err(_) if !complete => return Err(ExactError::Stopped),
            Err(e) => return Err(e.into()),
        };
        let (posterior, edge_probabilities, edge_probability_prior) =
            if self.d <= MAX_ENUMERATION_NODES {
                let post = enumerate_posterior(&table, self.settings.prior)
                    .expect("D is within the enumeration limit");
                let edges = post.edge_probabilities.clone();
                let prior = post.prior.clone();
                (Some(post), edges, prior)
            } else {
                (
                    None,
                    order_edge_probabilities(&with_prior)?,
                    format!(
                        "order-modular: orders uniform, each variable's parents any admissible \
                         set of its predecessors, weighted {}",
                        self.settings.prior.describe()
                    ),
                )
            };
        Ok(ExactOutcome {
            best,
            posterior,
            edge_probabilities,
            edge_probability_prior,
            candidates: plan.candidates,
            families_fitted: self.cache.len() - self.cached_at_start,
            cache_hits: self.hits,
            families_failed: failed,
            complete,
        })
    }
}

/// C(n, k).
fn binomial(n: usize, k: usize) -> usize {
    if k > n {
        return 0;
    }
    (0..k).fold(1, |acc, i| acc * (n - i) / (i + 1))
}

#[cfg(test)]
mod tests;
