//! The exact search inside a session (`method` exact or hybrid): [`ExactSearch`] advances an
//! [`ExactRun`] a batch of families per unit of work (one family on one thread, a few per thread
//! or worker otherwise), times the fits for the time left, and keeps the outcome once every
//! planned family is scored or the run is stopped. [`run_exact`] drives a whole exact search on a
//! backend outside a session.

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use std::borrow::Cow;

use crate::discovery::error::DiscoveryError;
use crate::discovery::exact::{
    CacheKey, ExactError, ExactOutcome, ExactRun, ExactSettings, ExactStage as Stage, ScoreCache,
};
use crate::discovery::family::{FamilyKey, WarmStart};
use crate::discovery::knowledge::Knowledge;
use crate::runner::{Backend, Job, Outcome};

/// Families handed out per thread in one unit natively: enough to balance slow and fast fits
/// across threads (the largest are handed out first), few enough that snapshots stay frequent; a
/// stop is answered inside a fit anyway.
const FAMILIES_PER_THREAD: usize = 4;

/// Where an exact search is, as a snapshot shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactProgress {
    pub stage: Stage,
    /// Families of the current stage scored (fitted or found in the cache), and in the stage.
    pub done: usize,
    pub total: usize,
    /// Fits the whole search needs: screening (every empty and one-parent family) and the larger
    /// families within the candidates (exact once screening is over, an estimate before).
    pub planned_screening: usize,
    pub planned_families: usize,
    /// Families fitted by this run so far, and families found in the cache.
    pub families_fitted: usize,
    pub cache_hits: usize,
    /// The best DAG's score over the families scored so far, when the snapshot shows that DAG
    /// and the edge probabilities so far (not during screening).
    #[serde(default)]
    pub live_log_score: Option<f64>,
}

/// An exact search being driven by a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExactSearch {
    run: ExactRun,
    outcome: Option<Result<ExactOutcome, ExactError>>,
    /// Seconds per family fit, smoothed (for the time left).
    family_seconds: Option<f64>,
    fitted: usize,
    /// Families whose outcome a backend lost (a worker died, a job went missing), with how
    /// often: they are fitted again, and recorded as failed only after [`MAX_LOSSES`].
    #[serde(default)]
    lost: Vec<(FamilyKey, usize)>,
    /// The best DAG over the families scored so far, for the live view (recomputed from the
    /// cache, so not saved).
    #[serde(skip)]
    live: Option<LiveBest>,
    #[serde(skip)]
    live_clock: LiveClock,
    /// Whether the outcome was taken at a stop (over the families scored so far), so that a
    /// resumed run drops it and goes on.
    #[serde(default)]
    stopped: bool,
}

/// The best DAG and the edge probabilities over the families scored so far: what a snapshot of
/// a running exact search shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LiveBest {
    /// The best DAG's edges (cause, effect).
    pub edges: Vec<(usize, usize)>,
    /// Σ_i F(i | pa(i)) plus the graph prior's log (up to a constant) of that DAG, nats.
    pub log_score: f64,
    /// P(i → j | X) at [i][j] over the families scored so far (unscored ones take their best
    /// scored subset's value).
    pub edge_probabilities: Vec<Vec<f64>>,
    /// Families in the cache when it was computed.
    pub families_scored: usize,
}

/// When the live best is recomputed: after a batch, once the fitting since the last one took at
/// least [`LIVE_COST_FACTOR`] times what the last computation cost (so it never takes more than
/// about 1/[`LIVE_COST_FACTOR`] of the time), and at least every [`LIVE_MIN_SECONDS`] of fitting.
#[derive(Debug, Clone, Default)]
struct LiveClock {
    /// Seconds the last computation took.
    cost: f64,
    /// Seconds of fitting since.
    since: f64,
}

const LIVE_COST_FACTOR: f64 = 20.0;
const LIVE_MIN_SECONDS: f64 = 0.25;

/// How often a family's outcome may be lost before the family is recorded as failed (so a
/// backend that loses it every time cannot hold the search forever).
pub const MAX_LOSSES: usize = 3;

/// The key a session's score cache is filed under: the data as used (fingerprint and rows), the
/// family-fit settings and the seed the family seeds derive from.
pub fn cache_key(
    fingerprint: u64,
    rows_used: usize,
    settings: &ExactSettings,
    seed: u64,
) -> CacheKey {
    CacheKey::new(
        format!("{fingerprint:016x}/{rows_used}"),
        settings.family,
        seed,
    )
}

impl ExactSearch {
    /// A search over `d` variables starting from `cache`, with `extra` candidate parents per
    /// variable (hybrid) or none.
    pub fn new(
        d: usize,
        knowledge: Knowledge,
        settings: ExactSettings,
        cache: ScoreCache,
        extra: Option<Vec<Vec<usize>>>,
    ) -> Result<Self, ExactError> {
        let run = match extra {
            Some(extra) => ExactRun::with_extra_candidates(d, knowledge, settings, cache, extra)?,
            None => ExactRun::new(d, knowledge, settings, cache)?,
        };
        let mut stage = Self {
            run,
            outcome: None,
            family_seconds: None,
            fitted: 0,
            lost: Vec::new(),
            live: None,
            live_clock: LiveClock::default(),
            stopped: false,
        };
        // Everything may already be in the cache.
        stage.finish_if_scored();
        Ok(stage)
    }

    /// Whether the outcome is known (every family scored, or stopped).
    pub fn finished(&self) -> bool {
        self.outcome.is_some()
    }

    /// The outcome, once finished.
    pub fn outcome(&self) -> Option<&Result<ExactOutcome, ExactError>> {
        self.outcome.as_ref()
    }

    /// The families scored so far.
    pub fn cache(&self) -> &ScoreCache {
        self.run.cache()
    }

    /// F(i | {j}) − F(i | ∅) at [i][j] as far as known.
    pub fn one_parent_gains(&self) -> Vec<Vec<Option<f64>>> {
        self.run.one_parent_gains()
    }

    fn finish_if_scored(&mut self) {
        if self.outcome.is_none() && self.run.stage() == Stage::Scored {
            self.outcome = Some(self.run.outcome());
        }
    }

    /// The next families to fit for a backend `width` jobs wide: one family with one thread, a
    /// few per thread otherwise.
    pub fn next_batch(&self, width: usize) -> Vec<FamilyKey> {
        let batch_size = if width <= 1 {
            1
        } else {
            width * FAMILIES_PER_THREAD
        };
        self.run.todo().iter().take(batch_size).cloned().collect()
    }

    /// The jobs fitting `keys` with the cache's family settings and seed.
    pub fn family_jobs<'a>(&self, keys: &'a [FamilyKey]) -> Vec<Job<'a>> {
        family_jobs(keys, self.run.cache())
    }

    /// Keeps the scores of `keys` (the outcomes of [`ExactSearch::family_jobs`], fitted in
    /// `seconds` on a backend `width` jobs wide), then plans the next stage or computes the
    /// outcome when none is left.
    pub fn apply(
        &mut self,
        keys: Vec<FamilyKey>,
        outcomes: Vec<Outcome>,
        seconds: f64,
        width: usize,
    ) {
        if self.finished() {
            return;
        }
        let mut fitted = 0;
        for (key, outcome) in keys.into_iter().zip(outcomes) {
            match outcome {
                Outcome::Family(score) => {
                    self.run.cache_mut().insert(key, score);
                    fitted += 1;
                }
                other => {
                    // Not a score: the backend lost the job. Fitted again unless lost too often.
                    let count = match self.lost.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, n)) => {
                            *n += 1;
                            *n
                        }
                        None => {
                            self.lost.push((key.clone(), 1));
                            1
                        }
                    };
                    if count >= MAX_LOSSES {
                        self.run.cache_mut().insert(
                            key,
                            Err(DiscoveryError::OutcomeLost {
                                times: count,
                                got: other.kind().into(),
                            }),
                        );
                    }
                }
            }
        }
        self.fitted += fitted;
        if fitted > 0 {
            // Thread-seconds per family, so the time left divides by the width again.
            let per = seconds * width.min(fitted) as f64 / fitted as f64;
            self.family_seconds = Some(self.family_seconds.map_or(per, |s| 0.8 * s + 0.2 * per));
        }
        if let Err(e) = self.run.advance() {
            self.outcome = Some(Err(e));
            return;
        }
        self.finish_if_scored();
        self.live_clock.since += seconds;
        self.update_live();
    }

    /// Recomputes [`ExactSearch::live`] when it is due: while the families within the candidates
    /// are being scored (during screening the one-parent gains are the live view).
    fn update_live(&mut self) {
        if self.finished() || self.run.stage() != Stage::Families {
            return;
        }
        let clock = &self.live_clock;
        let due = self.live.is_none()
            || clock.since >= (LIVE_COST_FACTOR * clock.cost).max(LIVE_MIN_SECONDS);
        if !due {
            return;
        }
        let started = crate::base::clock::now_seconds();
        // An outcome that cannot be formed yet (a variable without a scored family) leaves the
        // last live view in place.
        if let Ok(o) = self.run.outcome() {
            self.live = Some(LiveBest {
                edges: o.best.dag.edges(),
                log_score: o.best.score,
                edge_probabilities: o.edge_probabilities,
                families_scored: self.run.cache().len(),
            });
        }
        self.live_clock = LiveClock {
            cost: crate::base::clock::now_seconds() - started,
            since: 0.0,
        };
    }

    /// The best DAG over the families scored so far while the search runs (None during
    /// screening, before the first batch of larger families, and once finished).
    pub fn live(&self) -> Option<&LiveBest> {
        self.live.as_ref().filter(|_| !self.finished())
    }

    /// Ends the search now: the outcome is the best DAG over the families scored so far.
    pub fn stop(&mut self) {
        if self.outcome.is_none() {
            self.outcome = Some(self.run.outcome());
            self.stopped = true;
        }
    }

    /// Undoes [`ExactSearch::stop`] for a run that goes on (a resumed checkpoint written at a
    /// stop): the outcome over the families scored so far is dropped, the rest is still to fit.
    pub fn go_on(&mut self) {
        if self.stopped {
            self.outcome = None;
            self.stopped = false;
        }
    }

    /// Takes the scores of `cache` this search does not hold yet (families another run of the
    /// same key fitted, or this run fitted after its checkpoint), drops them from the to-do
    /// list, and returns how many it took. A cache of another key gives nothing.
    pub fn absorb(&mut self, cache: &ScoreCache) -> usize {
        if self.outcome.is_some() {
            return 0;
        }
        match self.run.absorb(cache) {
            Ok(taken) => {
                self.finish_if_scored();
                taken
            }
            Err(e) => {
                self.outcome = Some(Err(e));
                0
            }
        }
    }

    pub fn progress(&self) -> ExactProgress {
        let (done, total) = self.run.stage_progress();
        let (planned_screening, planned_families) = self.run.planned_fits();
        ExactProgress {
            stage: self.run.stage(),
            done,
            total,
            planned_screening,
            planned_families,
            families_fitted: self.fitted,
            cache_hits: self.run.cache_hits(),
            live_log_score: self.live().map(|l| l.log_score),
        }
    }

    /// Seconds left on `threads` threads: the families still planned times the seconds per fit.
    pub fn remaining_seconds(&self, threads: usize) -> Option<f64> {
        if self.finished() {
            return Some(0.0);
        }
        let p = self.progress();
        let left = match p.stage {
            Stage::Screening => (p.total - p.done) + p.planned_families,
            Stage::Families => p.total - p.done,
            Stage::Scored => 0,
        };
        // None until a family fit has been timed.
        self.family_seconds
            .map(|per| left as f64 * per / threads.max(1) as f64)
    }
}

/// The jobs fitting `keys` with `cache`'s family settings and seed; with a warm-starting scheme,
/// each family of two or more parents starts from its best subset's fit in `cache`
/// ([`WarmStart::best_subset`]).
pub fn family_jobs<'a>(keys: &'a [FamilyKey], cache: &ScoreCache) -> Vec<Job<'a>> {
    let settings = cache.key.settings;
    keys.iter()
        .map(|key| Job::Family {
            child: key.0,
            parents: Cow::Borrowed(&key.1),
            settings,
            seed: cache.key.seed,
            warm: settings
                .scheme
                .warm_starts()
                .then(|| {
                    WarmStart::best_subset(key, |k| cache.get(k).and_then(|s| s.as_ref().ok()))
                })
                .flatten()
                .map(Cow::Owned),
        })
        .collect()
}

/// Fits every family of `todo` on `data` (N × D, standardised) on `backend` and stores the
/// scores in `cache`, a batch of the backend's width at a time (with warm starts, a size at a
/// time, smallest first), calling `done(k, total)` for
/// each family once its batch is back. `stop()` is checked between batches: what was fitted before it is kept. A stop
/// request on the watched flag ([`crate::base::heartbeat`]) also ends the batch being fitted, which is
/// then not kept.
pub fn fit_families(
    data: &DMatrix<f64>,
    todo: &[FamilyKey],
    cache: &mut ScoreCache,
    backend: &dyn Backend,
    done: impl Fn(usize, usize),
    stop: impl Fn() -> bool,
) {
    let width = backend.width();
    let batch = if width <= 1 {
        1
    } else {
        width * FAMILIES_PER_THREAD
    };
    // With warm starts a family starts from its subsets' fits, so every size is fitted before
    // the next one begins and no batch mixes sizes: the scores then do not depend on the width.
    let warm = cache.key.settings.scheme.warm_starts();
    let mut ordered = todo.to_vec();
    if warm {
        ordered.sort_by_key(|k| k.1.len());
    }
    let groups = ordered.chunk_by(|a, b| !warm || a.1.len() == b.1.len());
    let mut finished = 0;
    for keys in groups.flat_map(|group| group.chunks(batch)) {
        if stop() || crate::base::heartbeat::interrupted() {
            return;
        }
        let outcomes = backend.run(data, &family_jobs(keys, cache));
        // Fits cut short by a stop request are no scores: they are left for a later run.
        if crate::base::heartbeat::interrupted() {
            return;
        }
        for (key, outcome) in keys.iter().zip(outcomes) {
            // Anything but a score is a lost job: left for a later run, never cached as failed.
            if let Outcome::Family(score) = outcome {
                cache.insert(key.clone(), score);
            }
            finished += 1;
            done(finished, todo.len());
        }
    }
}

/// Runs both stages of the exact search on `data` (N × D, standardised) with `cache` holding any
/// scores already known, on `backend`; `progress(stage, done, total)` after each batch of
/// families, with `total` known before the stage starts (stage 1 screening, 2 families); `stop()`
/// ends the run between batches: the cache keeps what was fitted and the DAG is the best over
/// those families.
pub fn run_exact(
    data: &DMatrix<f64>,
    knowledge: &Knowledge,
    settings: &ExactSettings,
    cache: &mut ScoreCache,
    backend: &dyn Backend,
    progress: impl Fn(usize, usize, usize),
    stop: impl Fn() -> bool,
) -> Result<ExactOutcome, ExactError> {
    ExactRun::check(data.ncols(), knowledge, settings)?;
    let taken = std::mem::replace(cache, ScoreCache::new(cache.key.clone()));
    let mut run = ExactRun::new(data.ncols(), knowledge.clone(), *settings, taken)?;
    let mut work = || -> Result<ExactOutcome, ExactError> {
        while run.stage() != Stage::Scored && !stop() {
            let stage = if run.stage() == Stage::Screening {
                1
            } else {
                2
            };
            let todo = run.todo().to_vec();
            let scored_before = run.cache().len();
            let (before, total) = run.stage_progress();
            fit_families(
                data,
                &todo,
                run.cache_mut(),
                backend,
                |k, _| progress(stage, before + k, total),
                &stop,
            );
            if run.cache().len() == scored_before {
                // Nothing came back (a stop, or a backend that lost every job): the answer is
                // the best over what was scored, marked incomplete.
                break;
            }
            run.advance()?;
        }
        run.outcome()
    };
    let outcome = work();
    *cache = run.into_cache();
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::family::{FamilyScore, FamilyScoreSettings};

    /// A job whose outcome the backend lost is handed out again, not cached as a failure; after
    /// [`MAX_LOSSES`] losses it is recorded as failed, so the search cannot be held forever.
    #[test]
    fn a_lost_family_is_fitted_again_and_failed_only_after_repeated_losses() {
        let settings = ExactSettings {
            max_parents: 1,
            candidates: 1,
            family: FamilyScoreSettings::with_inducing(5),
            ..ExactSettings::default()
        };
        let cache = ScoreCache::new(cache_key(1, 50, &settings, 0));
        let mut search = ExactSearch::new(2, Knowledge::none(2), settings, cache, None).unwrap();
        let first = search.next_batch(1);
        assert_eq!(first.len(), 1);
        let key = first[0].clone();
        let lost = || {
            vec![Outcome::Value(Err(DiscoveryError::NotRun(
                crate::discovery::error::NotRun::NoOutcome,
            )))]
        };
        for _ in 1..MAX_LOSSES {
            search.apply(vec![key.clone()], lost(), 0.1, 1);
            assert!(search.cache().get(&key).is_none(), "a loss is not a score");
            assert_eq!(search.next_batch(1), vec![key.clone()], "handed out again");
            assert_eq!(search.progress().families_fitted, 0);
        }
        search.apply(vec![key.clone()], lost(), 0.1, 1);
        assert!(matches!(search.cache().get(&key), Some(Err(e)) if e.to_string().contains("lost")));
        assert_ne!(search.next_batch(1), vec![key.clone()]);
        // A score is kept as it comes.
        let next = search.next_batch(1);
        let score = FamilyScore {
            value: -10.0,
            best_bound: Some(-10.0),
            floor: -12.0,
            fits_failed: 0,
            fits: Vec::new(),
            best_params: None,
            switched_off: Vec::new(),
            computed_on: None,
        };
        search.apply(
            next.clone(),
            vec![Outcome::Family(Ok(score.clone()))],
            0.1,
            1,
        );
        assert_eq!(search.cache().get(&next[0]), Some(&Ok(score)));
        assert_eq!(search.progress().families_fitted, 1);
    }
}
