//! The exact search inside a session (`method` exact or hybrid): [`ExactSearch`] advances an
//! [`ExactRun`] a batch of families per unit of work (one family in the browser, a few per thread
//! natively), times the fits for the time left, and keeps the outcome once every planned family is
//! scored or the run is stopped.

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

use super::clock::now_seconds;
use crate::backend::Pool;
use crate::discovery::exact::{
    fit_families, CacheKey, ExactError, ExactOutcome, ExactRun, ExactSettings, ExactStage as Stage,
    ScoreCache,
};
use crate::discovery::knowledge::Knowledge;

/// Families handed out per thread in one unit natively: enough to balance slow and fast fits
/// across threads, few enough that a stop is answered within seconds.
const FAMILIES_PER_THREAD: usize = 2;

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
}

/// An exact search being driven by a session.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExactSearch {
    run: ExactRun,
    outcome: Option<Result<ExactOutcome, ExactError>>,
    /// Seconds per family fit, smoothed (for the time left).
    family_seconds: Option<f64>,
    fitted: usize,
}

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

    /// Fits the next batch of families on `data` (one family with one thread, a few per thread
    /// otherwise), then plans the next stage or computes the outcome when none is left.
    pub fn unit(&mut self, data: &DMatrix<f64>, pool: &Pool) {
        if self.finished() {
            return;
        }
        let threads = pool.threads();
        let batch_size = if threads == 1 {
            1
        } else {
            threads * FAMILIES_PER_THREAD
        };
        let batch: Vec<_> = self.run.todo().iter().take(batch_size).cloned().collect();
        let t0 = now_seconds();
        fit_families(
            data,
            &batch,
            self.run.cache_mut(),
            pool,
            |_, _| {},
            || false,
        );
        self.fitted += batch.len();
        if !batch.is_empty() {
            // Thread-seconds per family, so the time left divides by the threads again.
            let per = (now_seconds() - t0) * threads.min(batch.len()) as f64 / batch.len() as f64;
            self.family_seconds = Some(self.family_seconds.map_or(per, |s| 0.8 * s + 0.2 * per));
        }
        if let Err(e) = self.run.advance() {
            self.outcome = Some(Err(e));
            return;
        }
        self.finish_if_scored();
    }

    /// Ends the search now: the outcome is the best DAG over the families scored so far.
    pub fn stop(&mut self) {
        if self.outcome.is_none() {
            self.outcome = Some(self.run.outcome());
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
