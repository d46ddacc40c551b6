//! [`Session`]: settings + data + the restarts' state machines. [`Session::step`] does a bounded
//! amount of work and returns a [`Snapshot`]; the CLI, the Web Worker, tests and benchmarks all
//! drive the same type.
//!
//! Work comes in units, and every unit's numeric work is a batch of independent
//! [`Job`]s that goes through the session's [`Backend`] (a thread pool natively):
//! [`Session::begin_unit`] prepares a unit, [`Session::unit_jobs`] lists its jobs and
//! [`Session::finish_unit`] takes their outcomes. [`Session::step`] does that in a loop; a driver
//! that runs jobs elsewhere (the browser's pool of compute workers) calls the three itself.
//!
//! All restarts advance together: each iteration evaluates every variable of every running
//! restart, then each restart applies its own step; between iterations, every restart that needs
//! a start, a refit or its final bounds gets it in the same unit. Every random choice flows from
//! the session's seed: the row subset from `seed`, restart r from `seed + 1 + r`; the width of the
//! backend changes how work is batched, never a result.

mod checkpoint;
mod record;
mod result;
mod snapshot;
mod units;

pub use checkpoint::{CheckpointError, CHECKPOINT_FORMAT};
pub use record::{
    DeterminedColumn, ExactSummary, RestartProgress, RunResult, Snapshot, Status, StopRecord,
    TracePoint, MAX_TRACE_POINTS,
};
use result::{thin, to_rows};

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::exact_search::{cache_key, ExactProgress, ExactSearch};
use crate::base::clock::now_seconds;
use std::sync::Arc;

use crate::base::heartbeat::{self, StopFlag};
use crate::data::determined::{nearly_determined, Determined};
use crate::data::subsample::{subsample_rows, take_rows};
use crate::data::Dataset;
use crate::discovery::cgp::{Evaluation, EvaluationError};
use crate::discovery::continuous::{
    FaultEvent, IterationUndo, Phase, PhaseEnd, Problem, Restart, RestartOutcome, Terms,
};
use crate::discovery::exact::{ExactError, ExactRun, ExactSettings, GraphPosterior, ScoreCache};
use crate::discovery::family::{families, FamilyCache, FamilyKey, FamilyScoreSettings, FitWork};
use crate::discovery::jobs::{Job, Outcome};
use crate::discovery::knowledge::Knowledge;
use crate::discovery::settings::{
    CheckedSettings, DagRule, Method, Preset, RestartSelection, SearchSettings, SettingsError,
};
use crate::gp::resolution::resolution_noise_floor;
use crate::gp::NOISE_VARIANCE_FLOOR;
use crate::runner::cost_model::DeviceChoice;
use crate::runner::gpu::{DeviceTraffic, GpuReport, SteadyState};
use crate::runner::{Backend, CpuBackend, Pool, PoolError};

/// Why a session could not start.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SessionError {
    #[error("invalid settings: {0}")]
    Settings(#[from] SettingsError),
    #[error("the prior knowledge is for {knowledge} variables but the data have {data}")]
    KnowledgeSize { knowledge: usize, data: usize },
    #[error(
        "the data need at least 2 columns and {} rows (got {cols} columns, {rows} rows)",
        crate::data::MIN_ROWS
    )]
    TooSmall { rows: usize, cols: usize },
    /// A column the model cannot use (the data layer refuses these when it reads a CSV; this
    /// guards datasets built in code).
    #[error("column '{name}' {problem}")]
    UnusableColumn { name: String, problem: String },
    /// The models would not fit in memory: refused before anything is allocated.
    #[error(
        "the models would need about {needed_gib:.1} GiB ({restarts} restarts × {variables} \
         variables, M = {inducing} inducing points on {rows} rows); the limit here is \
         {limit_gib:.0} GiB: use fewer restarts, inducing points or rows"
    )]
    TooLarge {
        needed_gib: f64,
        limit_gib: f64,
        restarts: usize,
        variables: usize,
        inducing: usize,
        rows: usize,
    },
    #[error("the compute pool could not start: {0}")]
    Pool(#[from] PoolError),
}

/// The most memory a run's models may need: a wasm32 page has a 4 GiB address space, of which
/// the page needs its share; natively a generous ceiling that still refuses the absurd.
#[cfg(target_arch = "wasm32")]
pub const MAX_MODEL_BYTES: f64 = 2.0 * GIB;
#[cfg(not(target_arch = "wasm32"))]
pub const MAX_MODEL_BYTES: f64 = 64.0 * GIB;
const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Bytes the models of a run hold at once, a lower estimate (so nothing that fits is refused):
/// every restart keeps, per variable, its
/// B × M cross-covariance and gradient (B = N for the collapsed bound, the minibatch for the
/// uncollapsed one), a few M × M matrices and the N × D inputs, 8 bytes each, with
/// M = min(M for D inputs, N).
pub fn model_bytes(settings: &SearchSettings, variables: usize, rows_used: usize) -> f64 {
    let n = rows_used as f64;
    let batch = match settings.bound {
        crate::discovery::cgp::BoundKind::Collapsed => n,
        crate::discovery::cgp::BoundKind::Uncollapsed => {
            settings.uncollapsed.batch_size.min(rows_used) as f64
        }
    };
    let m = settings.inducing_for(variables).min(rows_used) as f64;
    let per_variable = 8.0 * (2.0 * batch * m + 4.0 * m * m + n * variables as f64);
    settings.restarts as f64 * variables as f64 * per_variable
}

/// A unit this long or longer is long ([`Session::next_unit_may_be_long`]).
const LONG_UNIT_SECONDS: f64 = 0.25;
/// Rows × M² × variables of an iteration from which it is taken to be long before any was timed:
/// about a quarter of a second of the bound's O(N M²) work in the browser.
pub const LONG_ITERATION_WORK: f64 = 2e8;

/// A discovery run in progress. It serialises whole (data, restarts, optimiser states, random
/// streams, the exact search and its scores), so a run can be saved and resumed: see
/// [`Session::checkpoint`] and [`Session::resume`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    names: Vec<String>,
    fingerprint: u64,
    seed: u64,
    preset: Option<Preset>,
    problem: Problem,
    restarts: Vec<Restart>,
    elapsed: f64,
    iteration_seconds: Option<f64>,
    stopped: bool,
    /// Where every job of this run goes (natively a pool of `settings.threads` threads); made
    /// again when a session is resumed.
    #[serde(skip, default = "serial_backend")]
    backend: Arc<dyn Backend>,
    /// The unit handed out and not yet finished.
    #[serde(skip)]
    pending: Option<PendingUnit>,
    /// Jobs the last unit could run at once (for the time left).
    #[serde(skip, default = "one")]
    width: usize,
    /// Terms of the iterations done since the last `step` returned.
    trace: Vec<TracePoint>,
    /// Family evidences of the finished restarts' DAGs (`RestartSelection::GraphEvidence`).
    families: FamilyCache,
    /// Seconds per family fit so far (for the time left).
    family_seconds: Option<f64>,
    /// The exact search (`exact`: from the start; `hybrid`: once the restarts are done).
    exact: Option<ExactSearch>,
    /// Scores known before the exact search starts (a cache file); it takes them over.
    score_cache: ScoreCache,
    /// Why the exact search could not start, when it could not.
    exact_failure: Option<String>,
    /// Why this method runs, when `auto` chose it.
    #[serde(default)]
    method_reason: Option<String>,
    /// Columns almost a function of one other column alone (`data::determined`).
    #[serde(default)]
    determined: Vec<Determined>,
    /// When [`Session::stop`] was called (RFC 3339, UTC).
    #[serde(default)]
    stopped_at: Option<String>,
    /// A stop request from outside the loop that calls [`Session::step`] (a signal handler, another
    /// thread): answered inside the unit of work being done, within one bound evaluation.
    #[serde(skip)]
    stop_flag: StopFlag,
    /// The GPU's traffic over the iterations since the backend was set: result.json's `gpu`.
    #[serde(skip)]
    gpu_traffic: IterationTraffic,
    /// Wall time of the iterations since the session was made or resumed: result.json's
    /// `iteration_time`.
    #[serde(skip)]
    iteration_time: IterationClock,
}

/// Wall time of iteration units (one iteration of every iterating restart, whatever computes
/// it), the first left out as a warm-up: what a backend's speed is compared by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct IterationTime {
    /// Iteration units timed.
    pub iterations: u64,
    pub seconds: f64,
}

/// Times iteration units into an [`IterationTime`], leaving out the first.
#[derive(Debug, Clone, Copy, Default)]
struct IterationClock {
    warmed_up: bool,
    time: IterationTime,
}

impl IterationClock {
    fn add(&mut self, seconds: f64) {
        if self.warmed_up {
            self.time.iterations += 1;
            self.time.seconds += seconds;
        }
        self.warmed_up = true;
    }
}

/// Counts a GPU backend's traffic iteration by iteration, leaving out the first after the
/// backend was set (the warm-up: it creates the resident buffers and bind groups).
#[derive(Debug, Clone, Default)]
struct IterationTraffic {
    warmed_up: bool,
    steady: Option<SteadyState>,
}

impl Session {
    /// Prepares a run on `dataset` (standardised here; the rows used are a seeded subset when there
    /// are more than `settings.max_rows`).
    pub fn new(
        dataset: &Dataset,
        knowledge: Knowledge,
        settings: CheckedSettings,
        seed: u64,
        preset: Option<Preset>,
    ) -> Result<Self, SessionError> {
        let (rows, d) = (dataset.rows(), dataset.cols());
        if d < 2 || rows < crate::data::MIN_ROWS {
            return Err(SessionError::TooSmall { rows, cols: d });
        }
        if knowledge.d() != d {
            return Err(SessionError::KnowledgeSize {
                knowledge: knowledge.d(),
                data: d,
            });
        }
        for (name, column) in dataset.names().iter().zip(dataset.columns()) {
            let problem = if column.iter().any(|v| !v.is_finite()) {
                Some("has a value that is not a finite number")
            } else if column.iter().all(|&v| v == column[0]) {
                Some("is constant, so it carries no information about causes or effects")
            } else {
                None
            };
            if let Some(p) = problem {
                return Err(SessionError::UnusableColumn {
                    name: name.clone(),
                    problem: p.into(),
                });
            }
        }
        // `auto` becomes a concrete method here, once D is known; the reason goes in the result.
        let (method, method_reason) = settings.method.resolve(d);
        let settings = if method == settings.method {
            settings
        } else {
            settings
                .with(|s| s.method = method)
                .map_err(SessionError::Settings)?
        };
        // A few variables make a small plan: their larger families get the cold fits too, and
        // an exact search over them fits its own rows (`few_rows`); an automatic prior becomes
        // the q measured for the search (the result's settings record what was used).
        let family = settings.exact.family.for_variables(d);
        let (max_rows, exact) =
            settings
                .exact
                .for_search(d, settings.max_rows, method == Method::Exact);
        let exact = ExactSettings { family, ..exact };
        let settings = if exact == settings.exact && max_rows == settings.max_rows {
            settings
        } else {
            settings
                .with(|s| {
                    s.exact = exact;
                    s.max_rows = max_rows;
                })
                .map_err(SessionError::Settings)?
        };
        let used = settings.max_rows.min(rows);
        let needed = model_bytes(&settings, d, used);
        if needed > MAX_MODEL_BYTES {
            return Err(SessionError::TooLarge {
                needed_gib: needed / GIB,
                limit_gib: MAX_MODEL_BYTES / GIB,
                restarts: settings.restarts,
                variables: d,
                inducing: settings.inducing_for(d).min(used),
                rows: used,
            });
        }
        let full = dataset.standardised().to_matrix();
        let data = if used < rows {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            take_rows(&full, &subsample_rows(rows, used, &mut rng))
        } else {
            full
        };
        let noise_floors = (0..d)
            .map(|j| {
                let col: Vec<f64> = data.column(j).iter().copied().collect();
                resolution_noise_floor(&col, NOISE_VARIANCE_FLOOR)
            })
            .collect();
        if settings.method.runs_exact() {
            ExactRun::check(d, &knowledge, &settings.exact).map_err(|e| {
                let text = match &e {
                    ExactError::Family(f) => f.named(dataset.names(), &knowledge),
                    other => other.to_string(),
                };
                SessionError::Settings(SettingsError::ExactOnData(text))
            })?;
        }
        let restarts = if settings.method.runs_cgp() {
            (0..settings.restarts)
                .map(|r| Restart::new(r, seed.wrapping_add(1 + r as u64), d))
                .collect()
        } else {
            Vec::new()
        };
        let score_cache = ScoreCache::new(cache_key(
            dataset.fingerprint(),
            data.nrows(),
            &settings.exact,
            seed,
        ));
        let backend = Arc::new(CpuBackend::new(Pool::new(settings.threads)?));
        Ok(Self {
            names: dataset.names().to_vec(),
            fingerprint: dataset.fingerprint(),
            seed,
            preset,
            problem: Problem {
                data,
                total_rows: rows,
                noise_floors,
                knowledge,
                settings,
            },
            restarts,
            elapsed: 0.0,
            iteration_seconds: None,
            stopped: false,
            width: backend.width(),
            backend,
            pending: None,
            trace: Vec::new(),
            families: FamilyCache::default(),
            family_seconds: None,
            exact: None,
            score_cache,
            stop_flag: StopFlag::new(),
            gpu_traffic: IterationTraffic::default(),
            iteration_time: IterationClock::default(),
            exact_failure: None,
            method_reason,
            determined: nearly_determined(dataset.columns()),
            stopped_at: None,
        })
    }

    /// The key a score cache must have to be used by this run.
    pub fn score_cache_key(&self) -> &crate::discovery::exact::CacheKey {
        &self.score_cache.key
    }

    /// Gives the exact search family scores known from an earlier run (a cache file), before it
    /// starts. A cache for other data, settings or seed is refused (false) and nothing changes.
    pub fn use_score_cache(&mut self, cache: ScoreCache) -> bool {
        if self.exact.is_some() || cache.key != self.score_cache.key {
            return false;
        }
        self.score_cache = cache;
        true
    }

    /// Whether the exact search is scoring families now, or starts with the next unit (its units
    /// are family fits of up to many seconds each).
    pub fn fitting_families(&self) -> bool {
        !self.is_finished()
            && (self.exact_due() || self.exact.as_ref().is_some_and(|x| !x.finished()))
    }

    /// The exact search's planned fits (screening, larger families; see
    /// `ExactRun::planned_fits`), before or while it runs; (0, 0) for the continuous method.
    pub fn planned_exact_fits(&self) -> (usize, usize) {
        if let Some(x) = &self.exact {
            let p = x.progress();
            return (p.planned_screening, p.planned_families);
        }
        if !self.problem.settings.method.runs_exact() {
            return (0, 0);
        }
        match ExactRun::new(
            self.names.len(),
            self.problem.knowledge.clone(),
            self.problem.settings.exact,
            ScoreCache::new(self.score_cache.key.clone()),
        ) {
            Ok(run) => run.planned_fits(),
            Err(_) => (0, 0),
        }
    }

    /// Every family score known to this run (to save as a cache file).
    pub fn score_cache(&self) -> &ScoreCache {
        self.exact
            .as_ref()
            .map_or(&self.score_cache, ExactSearch::cache)
    }

    /// Whether the continuous part (restarts, then the comparison of their graphs) is over.
    fn cgp_done(&self) -> bool {
        self.restarts.iter().all(Restart::finished) && self.pending_families().is_empty()
    }

    /// Whether the exact search should start now.
    fn exact_due(&self) -> bool {
        self.problem.settings.method.runs_exact()
            && self.exact.is_none()
            && self.exact_failure.is_none()
            && !self.stopped
            && self.cgp_done()
    }

    /// Whether the exact search still has work (started or not).
    fn exact_pending(&self) -> bool {
        self.problem.settings.method.runs_exact()
            && self.exact_failure.is_none()
            && self.exact.as_ref().is_none_or(|x| !x.finished())
    }

    /// Starts the exact search; a hybrid run passes its chosen graph's parents as candidates.
    fn start_exact(&mut self) {
        let d = self.names.len();
        let extra = (self.problem.settings.method == Method::Hybrid).then(|| {
            let mut extra = vec![Vec::new(); d];
            if let Some(o) = self.best_finished().and_then(Restart::outcome) {
                for &(cause, effect) in &o.edges {
                    extra[effect].push(cause);
                }
            }
            extra
        });
        let key = self.score_cache.key.clone();
        let cache = std::mem::replace(&mut self.score_cache, ScoreCache::new(key));
        match ExactSearch::new(
            d,
            self.problem.knowledge.clone(),
            self.problem.settings.exact,
            cache,
            extra,
        ) {
            Ok(x) => self.exact = Some(x),
            Err(e) => self.exact_failure = Some(format!("the exact search could not start: {e}")),
        }
    }

    /// The column names.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The settings in use.
    pub fn settings(&self) -> &SearchSettings {
        &self.problem.settings
    }

    /// Whether no more work is left (finished, failed or stopped).
    pub fn is_finished(&self) -> bool {
        self.stopped
            || (self.restarts.iter().all(Restart::finished)
                && !self.rescoring()
                && !self.exact_pending())
    }

    /// Whether the restarts are done and their graphs' families are still being fitted.
    fn rescoring(&self) -> bool {
        !self.stopped
            && self.restarts.iter().all(Restart::finished)
            && !self.pending_families().is_empty()
    }

    /// The families of finished restarts' DAGs not fitted yet, in a fixed order, each once.
    fn pending_families(&self) -> Vec<FamilyKey> {
        if self.problem.settings.restart_selection != RestartSelection::GraphEvidence {
            return Vec::new();
        }
        let d = self.names.len();
        let mut pending: Vec<FamilyKey> = self
            .restarts
            .iter()
            .filter_map(Restart::outcome)
            .flat_map(|o| families(d, &o.edges))
            .filter(|k| self.families.get(k).is_none())
            .collect();
        pending.sort();
        pending.dedup();
        pending
    }

    /// Records the graph evidence of every finished restart once every family of their DAGs is
    /// fitted.
    fn record_graph_evidence(&mut self) {
        if !self.pending_families().is_empty() {
            return;
        }
        let d = self.names.len();
        for r in &mut self.restarts {
            let value = r
                .outcome()
                .and_then(|o| self.families.graph_evidence(d, &o.edges));
            if let Some(Ok(v)) = value {
                r.set_graph_evidence(v);
            }
        }
    }

    /// How a family of a restart's DAG is fitted: the default family fit with the run's M for
    /// its size.
    fn rescore_settings(&self, parents: usize) -> FamilyScoreSettings {
        FamilyScoreSettings::with_inducing(self.problem.settings.inducing_for(parents + 1))
    }

    /// Where this session's jobs go.
    pub fn backend(&self) -> &dyn Backend {
        self.backend.as_ref()
    }

    /// Sends this session's jobs to `backend` from the next unit on (any backend gives the same
    /// result; it changes only where and how fast the work runs).
    pub fn set_backend(&mut self, backend: Arc<dyn Backend>) {
        self.width = backend.width();
        self.backend = backend;
        self.gpu_traffic = IterationTraffic::default();
    }

    /// The flag that stops this session from any thread: raising it ends the unit of work being
    /// done within one bound evaluation (what that unit computed is dropped, what earlier units
    /// found is kept), and the session then stops as [`Session::stop`] does.
    pub fn stop_flag(&self) -> StopFlag {
        self.stop_flag.clone()
    }
}

/// A session made without a backend (deserialised) computes on the calling thread.
fn serial_backend() -> Arc<dyn Backend> {
    Arc::new(CpuBackend::new(Pool::serial()))
}

fn one() -> usize {
    1
}

/// A unit of work handed out by [`Session::begin_unit`].
#[derive(Debug, Clone)]
enum Unit {
    /// Families of the finished restarts' DAGs (graph evidence).
    Rescore(Vec<FamilyKey>),
    /// A batch of the exact search's families.
    Exact(Vec<FamilyKey>),
    /// Restarts' work between iterations: (restart position, its jobs).
    Chores(Vec<(usize, Vec<Job<'static>>)>),
    /// One iteration of the restarts at these positions.
    Iteration(Vec<usize>),
}

#[derive(Debug, Clone)]
struct PendingUnit {
    unit: Unit,
    started: f64,
    /// What beginning an iteration changed in each iterating restart (by index), put back when
    /// the unit is abandoned.
    undo: Vec<(usize, IterationUndo)>,
}

#[cfg(test)]
mod tests;
