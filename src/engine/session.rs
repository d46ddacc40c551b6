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

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::exact_search::{cache_key, ExactProgress, ExactSearch};
use crate::base::clock::now_seconds;
use std::sync::Arc;

use crate::base::heartbeat::{self, StopFlag};
use crate::data::determined::{nearly_determined, Determined};
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

/// Where the whole session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    /// Every restart has finished (or failed, with at least one finished).
    Done,
    /// Stopped by the user; the result is the best graph so far.
    Stopped,
    /// Every restart failed.
    Failed,
}

/// One restart's progress, as a snapshot shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartProgress {
    pub index: usize,
    pub phase: Phase,
    pub iteration: usize,
    pub terms: Option<Terms>,
    /// The final score once finished.
    pub score: Option<f64>,
    pub failure: Option<String>,
}

/// One iteration's objective terms, as recorded for the curves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracePoint {
    pub restart: usize,
    pub iteration: usize,
    /// The restart's phase after this iteration.
    pub phase: Phase,
    pub terms: Terms,
}

/// Most trace points one snapshot carries: beyond this the step's points are thinned evenly, so a
/// long step cannot make a huge message.
pub const MAX_TRACE_POINTS: usize = 512;

/// What a driver shows after each step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub status: Status,
    /// The restart shown in detail (the first still running, else the best).
    pub restart: usize,
    pub phase: Phase,
    /// One plain sentence about the phase.
    pub phase_text: String,
    /// Iterations of the shown restart.
    pub iteration: usize,
    pub terms: Option<Terms>,
    /// W[cause][effect] of the shown restart: θ^lin + θ^se of each candidate edge.
    pub adjacency: Vec<Vec<f64>>,
    /// The shown restart's current graph (cause, effect): the edges that pass the final
    /// thresholds now (it may still have cycles before thresholding), or its final edges.
    pub edges: Vec<(usize, usize)>,
    pub restarts: Vec<RestartProgress>,
    pub faults: Vec<FaultEvent>,
    /// Seconds of work so far (time inside `step`).
    pub elapsed_seconds: f64,
    /// The terms of every iteration done in the step that made this snapshot (thinned evenly to
    /// at most [`MAX_TRACE_POINTS`]), so curves can be drawn per iteration, not per snapshot.
    /// Empty from [`Session::snapshot`].
    pub trace: Vec<TracePoint>,
    /// A rough upper estimate of the seconds left (every phase running to its maximum length);
    /// None until an iteration or a family fit has been timed, so nothing claims to be nearly done
    /// before anything is known.
    pub remaining_seconds: Option<f64>,
    /// Fraction done in [0, 1], by the same estimate.
    pub progress: f64,
    /// The exact search's progress (`exact` and `hybrid` runs, once it has begun).
    #[serde(default)]
    pub exact: Option<ExactProgress>,
}

/// A run's result: enough to reproduce it (DESIGN.md §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub names: Vec<String>,
    /// "adjacency[i][j] = weight of the edge names[i] -> names[j] (row = cause, column = effect)".
    pub orientation: String,
    /// The chosen graph's edges (cause, effect).
    pub edges: Vec<(usize, usize)>,
    /// Edge weights θ^lin + θ^se of the chosen graph, cause × effect.
    pub adjacency: Vec<Vec<f64>>,
    /// The winning restart.
    pub chosen_restart: Option<usize>,
    pub restarts: Vec<RestartOutcome>,
    /// Failed restarts, and why the graph is empty when it is empty for a reason.
    pub failures: Vec<String>,
    pub faults: Vec<FaultEvent>,
    /// Whether every restart ran to the end (false after a stop).
    pub complete: bool,
    pub status: Status,
    pub seed: u64,
    pub preset: Option<Preset>,
    pub settings: SearchSettings,
    pub knowledge: Knowledge,
    /// Rows in the data set and rows used for fitting.
    pub rows: usize,
    pub rows_used: usize,
    pub dataset_fingerprint: String,
    pub seconds: f64,
    pub backend: String,
    /// How the GPU engine behaved, when a GPU computed iterations of this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuReport>,
    /// Where a GPU backend placed each kind of work it measured (the exact search's family fits),
    /// with the timings that placed it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_choices: Vec<DeviceChoice>,
    /// Wall time of this run's iterations after the first (none for a run without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_time: Option<IterationTime>,
    pub version: String,
    /// Which search produced the graph.
    #[serde(default)]
    pub method: Method,
    /// Why that search ran, when `auto` chose it.
    #[serde(default)]
    pub method_reason: Option<String>,
    /// Families (variable, parent set) fitted by this run: the exact search's, or the graph
    /// evidence of the restarts' DAGs (`restart_selection: graph_evidence`).
    #[serde(default)]
    pub families_fitted: usize,
    /// Families the exact search found in its score cache instead of fitting them.
    #[serde(default)]
    pub cache_hits: usize,
    /// Every DAG with its log score and posterior probability, grouped by Markov equivalence
    /// class (exact search, D ≤ 5).
    #[serde(default)]
    pub posterior: Option<GraphPosterior>,
    /// P(i → j | data) at [i][j] (row = cause, column = effect), under the prior that
    /// `exact.edge_probability_prior` states (exact search).
    #[serde(default)]
    pub edge_probabilities: Option<Vec<Vec<f64>>>,
    /// What the exact search did (exact search).
    #[serde(default)]
    pub exact: Option<ExactSummary>,
    /// Where a stopped run stood when it stopped (absent for a run that ended by itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopRecord>,
    /// Columns almost a function of one other column alone (`data::determined`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub determined: Vec<DeterminedColumn>,
    /// The chosen graph's edges that rest on such a column: every edge touching it but the one
    /// to or from the column it is a function of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges_on_determined: Vec<(usize, usize)>,
}

/// A column almost a function of another, by name (result.json's `determined`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeterminedColumn {
    pub column: String,
    pub by: String,
    /// The noise variance left by a smooth fit on `by` alone, as a fraction of its variance.
    pub residual_fraction: f64,
}

impl RunResult {
    /// Whether the result has a graph to write: not after a failure, nor after a stop that came
    /// before any graph existed (an empty graph there would read as "no edges found").
    pub fn has_graph(&self) -> bool {
        self.status != Status::Failed && self.stopped.as_ref().is_none_or(|s| s.has_graph)
    }
}

/// How a stopped run stood when it stopped (result.json's `stopped`): its graph, if it has one,
/// is the best so far, not a finished result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Seconds of work done when it stopped.
    pub elapsed_seconds: f64,
    /// Where the run was, in words: "the acyclic phase of restart 2 of 3 (iteration 140)",
    /// "the exact search, scoring families (120 of 400 scored)".
    pub phase: String,
    /// Whether there was a graph yet (the best so far).
    pub has_graph: bool,
    /// The wall-clock time of the stop (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// What an exact search did, for result.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactSummary {
    /// Σ_i F(i | pa(i)) of the chosen DAG, plus the graph prior's per-family terms, nats.
    pub log_score: f64,
    /// The graph prior, in words.
    pub prior: String,
    /// The prior the edge probabilities are under, in words.
    pub edge_probability_prior: String,
    /// Each variable's candidate parents (indices).
    pub candidates: Vec<Vec<usize>>,
    /// Planned families that could not be fitted (left out of the search).
    pub families_failed: usize,
    /// False when the run stopped before every planned family was scored.
    pub complete: bool,
    /// The work behind the scores the search read (its score cache): fits, iterations per stage,
    /// how many fits hit a cap, bound evaluations.
    #[serde(default)]
    pub fit_work: FitWork,
}

/// A unit this long or longer is long ([`Session::next_unit_may_be_long`]).
const LONG_UNIT_SECONDS: f64 = 0.25;
/// Rows × M² × variables of an iteration from which it is taken to be long before any was timed:
/// about a quarter of a second of the bound's O(N M²) work in the browser.
pub const LONG_ITERATION_WORK: f64 = 2e8;

/// The format number written in every checkpoint; raised whenever the session's layout changes
/// (3: a rational-quadratic part carries its own shape a, the kernel no `rq_alpha`; 4: each
/// bound's own settings under `collapsed` and `uncollapsed`, checked when read; 5: a checksum
/// over the session's text).
pub const CHECKPOINT_FORMAT: u32 = 5;

/// The first fields of a checkpoint file, read before the rest so that a checkpoint of another
/// format is refused for its format, not for the first field that moved.
#[derive(Deserialize)]
struct CheckpointHeader {
    format: u32,
    version: String,
}

/// A checkpoint file: the format, the version that wrote it, the checksum of the session's text
/// (FNV-1a, 16 hex digits) and the session, as written.
#[derive(Serialize, Deserialize)]
struct CheckpointFile<'a> {
    format: u32,
    version: String,
    checksum: String,
    #[serde(borrow)]
    session: &'a serde_json::value::RawValue,
}

/// The checksum written beside a session's text.
fn session_checksum(text: &str) -> String {
    format!("{:016x}", crate::base::checksum::Fnv1a::of(text.as_bytes()))
}

/// Why a checkpoint could not be resumed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckpointError {
    #[error("not a readable Occam checkpoint: {0}")]
    Unreadable(String),
    #[error(
        "the checkpoint has format {found} (written by Occam {version}); this version reads \
         format {CHECKPOINT_FORMAT} only"
    )]
    Format { found: u32, version: String },
    #[error(
        "the checkpoint was made for other data (fingerprint {checkpoint}) than the file given \
         (fingerprint {data})"
    )]
    OtherData { checkpoint: String, data: String },
    #[error(
        "the checkpoint was changed after it was written: its checksum is {written} but its \
         contents give {found}; it is refused rather than resumed from numbers the run did not \
         save (use an unedited copy, or start the run again)"
    )]
    Edited { written: String, found: String },
    #[error(transparent)]
    Session(#[from] SessionError),
}

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
            let mut picked = rand::seq::index::sample(&mut rng, rows, used).into_vec();
            picked.sort_unstable();
            DMatrix::from_fn(used, d, |r, c| full[(picked[r], c)])
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
                SessionError::Settings(SettingsError::Exact(text))
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

    /// The whole run as JSON (format [`CHECKPOINT_FORMAT`]): data, settings, every restart's
    /// parameters and optimiser state, the random streams, the exact search and its scores.
    /// [`Session::resume`] continues it to the same result an uninterrupted run gives.
    pub fn checkpoint(&self) -> String {
        // serde_json fails only on a map whose keys are not strings, and a session has none
        // (family caches are written as lists of pairs).
        let session = serde_json::value::to_raw_value(self).expect("a session serialises");
        let file = CheckpointFile {
            format: CHECKPOINT_FORMAT,
            version: env!("CARGO_PKG_VERSION").to_string(),
            checksum: session_checksum(session.get()),
            session: &session,
        };
        serde_json::to_string(&file).expect("a checkpoint serialises")
    }

    /// A run saved by [`Session::checkpoint`], to go on with `threads` workers (0 = all cores;
    /// the thread count never changes the result). Refused: text that is not a checkpoint of
    /// this format, and a checkpoint made for other data than `fingerprint` (when given).
    pub fn resume(
        text: &str,
        threads: usize,
        fingerprint: Option<u64>,
    ) -> Result<Self, CheckpointError> {
        let unreadable = |e: serde_json::Error| CheckpointError::Unreadable(e.to_string());
        let header: CheckpointHeader = serde_json::from_str(text).map_err(unreadable)?;
        if header.format != CHECKPOINT_FORMAT {
            return Err(CheckpointError::Format {
                found: header.format,
                version: header.version,
            });
        }
        let file: CheckpointFile<'_> = serde_json::from_str(text).map_err(unreadable)?;
        let found = session_checksum(file.session.get());
        if found != file.checksum {
            return Err(CheckpointError::Edited {
                written: file.checksum,
                found,
            });
        }
        // The settings are checked as they are read (`CheckedSettings`).
        let mut session: Session = serde_json::from_str(file.session.get()).map_err(unreadable)?;
        if let Some(f) = fingerprint.filter(|&f| f != session.fingerprint) {
            return Err(CheckpointError::OtherData {
                checkpoint: format!("{:016x}", session.fingerprint),
                data: format!("{f:016x}"),
            });
        }
        // A checkpoint is a file a user hands in: its parts must agree before anything indexes
        // with them.
        let d = session.names.len();
        let p = &session.problem;
        let inconsistent = if p.data.ncols() != d || p.noise_floors.len() != d {
            Some("its data, names and noise floors disagree on the number of variables")
        } else if p.knowledge.d() != d {
            Some("its prior knowledge is for another number of variables")
        } else if session.restarts.iter().any(|r| r.components().len() > d) {
            Some("a restart has more models than there are variables")
        } else {
            None
        };
        if let Some(why) = inconsistent {
            return Err(CheckpointError::Unreadable(why.into()));
        }
        session.problem.settings = session
            .problem
            .settings
            .clone()
            .with(|s| s.threads = threads)
            .map_err(SessionError::Settings)?;
        session.set_backend(Arc::new(CpuBackend::new(
            Pool::new(threads).map_err(SessionError::from)?,
        )));
        session.stop_flag = StopFlag::new();
        // A checkpoint written at a stop goes on from where the stop left it.
        session.stopped = false;
        session.stopped_at = None;
        if let Some(x) = session.exact.as_mut() {
            x.go_on();
        }
        Ok(session)
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

    /// Works for about `budget_seconds` (at least one unit of work, unless a stop was requested),
    /// running each unit's jobs on the session's backend, then returns a snapshot.
    pub fn step(&mut self, budget_seconds: f64) -> Snapshot {
        self.step_units(budget_seconds, false)
    }

    /// [`Session::step`] that returns before beginning a unit that may run long
    /// ([`Session::next_unit_may_be_long`]; none is begun when the first may), for a driver that
    /// sends such units to another thread.
    pub fn step_short_units(&mut self, budget_seconds: f64) -> Snapshot {
        self.step_units(budget_seconds, true)
    }

    fn step_units(&mut self, budget_seconds: f64, short_only: bool) -> Snapshot {
        let start = now_seconds();
        let _watch = heartbeat::watch(Some(self.stop_flag.clone()));
        loop {
            if self.stop_flag.is_raised() {
                self.stop();
            }
            if short_only && self.pending.is_none() && self.next_unit_may_be_long() {
                break;
            }
            if self.is_finished() || !self.begin_unit(self.backend.width()) {
                break;
            }
            let jobs = self.unit_jobs();
            let before = self.backend.device_traffic();
            let outcomes = self.backend.run(&self.problem.data, &jobs);
            drop(jobs);
            if let (Some(before), Some(after), false) = (
                before,
                self.backend.device_traffic(),
                heartbeat::interrupted(),
            ) {
                // Counted only when the GPU computed the whole unit (a failure midway leaves
                // `device_traffic` None).
                self.count_device_traffic(after - before);
            }
            if heartbeat::interrupted() {
                // A unit cut short is dropped whole: no restart sees half an iteration as
                // faults, no family a fit stopped half-way as its score.
                self.abandon_unit();
            } else {
                self.finish_unit(outcomes);
            }
            if now_seconds() - start >= budget_seconds {
                break;
            }
        }
        self.report()
    }

    /// Counts `traffic`, what crossed to and from a GPU while it computed the whole of the unit
    /// begun (before [`Session::finish_unit`]), into the result's `gpu.steady_state` when the
    /// unit is an iteration that used the device (at least one submission): every such iteration
    /// after the first since the session was made or resumed (the warm-up creates the device's
    /// resident buffers and bind groups). An iteration the host computed alone (a collapsed
    /// bound below the Ψ2 threshold) is not a GPU iteration.
    pub fn count_device_traffic(&mut self, traffic: DeviceTraffic) {
        if traffic.submissions == 0
            || !matches!(
                self.pending.as_ref().map(|p| &p.unit),
                Some(Unit::Iteration(_))
            )
        {
            return;
        }
        let evaluations = self.unit_job_count();
        let counts = &mut self.gpu_traffic;
        if counts.warmed_up {
            counts
                .steady
                .get_or_insert_with(SteadyState::default)
                .add_iteration(evaluations, traffic);
        }
        counts.warmed_up = true;
    }

    /// The snapshot now, with the objective terms of the iterations since the last report.
    pub fn report(&mut self) -> Snapshot {
        let mut snapshot = self.snapshot();
        snapshot.trace = thin(std::mem::take(&mut self.trace), MAX_TRACE_POINTS);
        snapshot
    }

    /// The data every job of this session reads (the rows used, N × D, standardised).
    pub fn data(&self) -> &DMatrix<f64> {
        &self.problem.data
    }

    /// Whether the next unit of work may run long (over about a quarter of a second) on one
    /// thread: anything but an iteration of the continuous search (starting fits, pruning refits,
    /// final bounds, family fits), or iterations measured to take that long, or, before any was
    /// timed, estimated to (rows × M² × variables ≥ [`LONG_ITERATION_WORK`]). A driver that must
    /// answer a stop or a pause at once (the page's worker) sends such a unit to another thread.
    pub fn next_unit_may_be_long(&self) -> bool {
        if self.stopped || self.is_finished() {
            return false;
        }
        if self.rescoring()
            || self.exact_due()
            || self.exact.as_ref().is_some_and(|x| !x.finished())
        {
            return true;
        }
        if self
            .restarts
            .iter()
            .any(|r| !r.finished() && !r.wants_evaluation())
        {
            return true;
        }
        match self.iteration_seconds {
            Some(seconds) => seconds >= LONG_UNIT_SECONDS,
            None => {
                let d = self.names.len();
                let s = &self.problem.settings;
                let m = s
                    .inducing_for(d.saturating_sub(1))
                    .min(self.problem.data.nrows()) as f64;
                let iterating = self
                    .restarts
                    .iter()
                    .filter(|r| r.wants_evaluation())
                    .count();
                self.problem.data.nrows() as f64 * m * m * (d * iterating) as f64
                    >= LONG_ITERATION_WORK
            }
        }
    }

    /// Prepares the next unit of work for a backend that runs `width` jobs at once, and says
    /// whether there is one (false once the run is finished or stopped). A unit is the families
    /// of the restarts' DAGs still to fit, a batch of the exact search, every restart's pending
    /// work between iterations, or one iteration of every iterating restart. Work that needs no
    /// numerics (planning the exact search, thresholding) is done here. A unit already begun
    /// stays the one handed out.
    pub fn begin_unit(&mut self, width: usize) -> bool {
        if self.pending.is_some() {
            return true;
        }
        let width = width.max(1);
        self.width = width;
        let mut undo = Vec::new();
        loop {
            if self.stopped || self.is_finished() {
                return false;
            }
            let unit = if self.rescoring() {
                Unit::Rescore(self.pending_families().into_iter().take(width).collect())
            } else if self.exact_due() {
                self.start_exact();
                continue;
            } else if let Some(x) = self.exact.as_ref().filter(|x| !x.finished()) {
                Unit::Exact(x.next_batch(width))
            } else if self
                .restarts
                .iter()
                .any(|r| !r.finished() && !r.wants_evaluation())
            {
                // Each restart has its own random stream, so doing their chores together
                // changes no result.
                let problem = &self.problem;
                Unit::Chores(
                    self.restarts
                        .iter_mut()
                        .enumerate()
                        .filter(|(_, r)| !r.finished() && !r.wants_evaluation())
                        .map(|(k, r)| (k, r.chore(problem)))
                        .collect(),
                )
            } else {
                let mut iterating = Vec::new();
                let problem = &self.problem;
                for (k, r) in self.restarts.iter_mut().enumerate() {
                    if r.wants_evaluation() {
                        undo.push((k, r.iteration_undo()));
                        r.begin_iteration(problem);
                        iterating.push(k);
                    }
                }
                Unit::Iteration(iterating)
            };
            self.pending = Some(PendingUnit {
                unit,
                started: now_seconds(),
                undo,
            });
            return true;
        }
    }

    /// The jobs of the unit begun, in the order their outcomes are expected (none when no unit is
    /// begun or the unit needs no numeric work).
    pub fn unit_jobs(&self) -> Vec<Job<'_>> {
        let Some(pending) = &self.pending else {
            return Vec::new();
        };
        match &pending.unit {
            Unit::Rescore(keys) => keys
                .iter()
                .map(|(child, parents)| Job::Family {
                    child: *child,
                    parents: std::borrow::Cow::Borrowed(parents),
                    settings: self.rescore_settings(parents.len()),
                    seed: self.seed,
                    warm: None,
                })
                .collect(),
            Unit::Exact(keys) => self
                .exact
                .as_ref()
                .map_or_else(Vec::new, |x| x.family_jobs(keys)),
            Unit::Chores(chores) => chores
                .iter()
                .flat_map(|(_, jobs)| jobs.iter().cloned())
                .collect(),
            Unit::Iteration(positions) => positions
                .iter()
                .flat_map(|&k| self.restarts[k].evaluation_jobs())
                .collect(),
        }
    }

    fn unit_job_count(&self) -> usize {
        match self.pending.as_ref().map(|p| &p.unit) {
            None => 0,
            Some(Unit::Rescore(keys) | Unit::Exact(keys)) => keys.len(),
            Some(Unit::Chores(chores)) => chores.iter().map(|(_, jobs)| jobs.len()).sum(),
            Some(Unit::Iteration(positions)) => positions
                .iter()
                .map(|&k| self.restarts[k].components().len())
                .sum(),
        }
    }

    /// Completes the unit begun with its jobs' outcomes, in the order of
    /// [`Session::unit_jobs`]. A job without an outcome (a backend that lost it) counts as a
    /// failed one, which a restart handles as any numerical failure; a family is fitted again
    /// ([`ExactSearch::apply`]).
    pub fn finish_unit(&mut self, mut outcomes: Vec<Outcome>) {
        let expected = self.unit_job_count();
        let Some(PendingUnit { unit, started, .. }) = self.pending.take() else {
            return;
        };
        outcomes.truncate(expected);
        while outcomes.len() < expected {
            outcomes.push(Outcome::Value(Err(
                "the backend gave no outcome for this job".into(),
            )));
        }
        let seconds = now_seconds() - started;
        self.elapsed += seconds;
        match unit {
            Unit::Rescore(keys) => {
                let fitted = keys.len();
                for (key, outcome) in keys.into_iter().zip(outcomes) {
                    self.families.insert(key, outcome.into_value());
                }
                // Thread-seconds per family, so the time left divides by the width again.
                let per_family = seconds * self.width.min(fitted) as f64 / fitted.max(1) as f64;
                self.family_seconds = Some(
                    self.family_seconds
                        .map_or(per_family, |s| 0.8 * s + 0.2 * per_family),
                );
                self.record_graph_evidence();
            }
            Unit::Exact(keys) => {
                let width = self.width;
                if let Some(x) = self.exact.as_mut() {
                    x.apply(keys, outcomes, seconds, width);
                }
            }
            Unit::Chores(chores) => {
                let mut outcomes = outcomes.into_iter();
                for (k, jobs) in chores {
                    let mine: Vec<Outcome> = outcomes.by_ref().take(jobs.len()).collect();
                    self.restarts[k].apply_chore(mine, &self.problem);
                }
            }
            Unit::Iteration(positions) => {
                let mut outcomes = outcomes.into_iter();
                for k in positions {
                    let r = &mut self.restarts[k];
                    let evals: Vec<Result<Evaluation, EvaluationError>> = outcomes
                        .by_ref()
                        .take(r.components().len())
                        .map(|o| match o {
                            Outcome::Evaluation(e) => e,
                            other => Err(EvaluationError::Mismatch(format!(
                                "an evaluation came back as {}",
                                other.kind()
                            ))),
                        })
                        .collect();
                    r.finish_iteration(evals, &self.problem);
                    if let Some(terms) = r.last_terms() {
                        self.trace.push(TracePoint {
                            restart: r.index(),
                            iteration: r.iterations(),
                            phase: r.phase(),
                            terms,
                        });
                    }
                }
                self.iteration_seconds = Some(match self.iteration_seconds {
                    Some(s) => 0.9 * s + 0.1 * seconds,
                    None => seconds,
                });
                self.iteration_time.add(seconds);
            }
        }
    }

    /// Drops the unit begun (its jobs were cut short by a stop, or their worker died): nothing
    /// it computed is kept, what beginning it changed is put back (an iteration's seeds and
    /// penalty), and the next unit plans the same work again, so a checkpoint taken now resumes
    /// to the uninterrupted run's result.
    pub fn abandon_unit(&mut self) {
        if let Some(p) = self.pending.take() {
            self.elapsed += now_seconds() - p.started;
            for (k, undo) in p.undo {
                self.restarts[k].undo_iteration(undo);
            }
        }
    }

    /// Takes the family scores of `cache` this run does not hold (a score cache file written as
    /// an earlier run of the same data, settings and seed fitted them, or this run after its
    /// checkpoint): the exact search skips them. Returns how many were taken (0 for a cache of
    /// another key).
    pub fn merge_score_cache(&mut self, cache: &ScoreCache) -> usize {
        match self.exact.as_mut() {
            Some(x) => x.absorb(cache),
            None => self.score_cache.merge(cache),
        }
    }

    /// Every restart's numerical faults, restart by restart.
    pub fn faults(&self) -> Vec<FaultEvent> {
        self.restarts
            .iter()
            .flat_map(|r| r.faults().iter().cloned())
            .collect()
    }

    /// Stops the run; [`Session::result`] then reports the best graph so far.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped_at = Some(crate::base::clock::utc_now());
        }
        self.stopped = true;
        if let Some(x) = &mut self.exact {
            x.stop();
        }
    }

    fn status(&self) -> Status {
        let exact_incomplete = self.problem.settings.method.runs_exact()
            && self.exact_failure.is_none()
            && !self
                .exact
                .as_ref()
                .and_then(ExactSearch::outcome)
                .is_some_and(|o| o.as_ref().is_ok_and(|o| o.complete));
        if self.stopped && (!self.restarts.iter().all(Restart::finished) || exact_incomplete) {
            Status::Stopped
        } else if !self.is_finished() {
            Status::Running
        } else if self.problem.settings.method.runs_exact()
            && self
                .exact
                .as_ref()
                .and_then(ExactSearch::outcome)
                .is_some_and(|o| o.is_ok())
        {
            Status::Done
        } else if self.problem.settings.method == Method::Exact {
            Status::Failed
        } else if self.rescoring() {
            Status::Running
        } else if self.restarts.iter().all(Restart::finished) {
            if self.restarts.iter().any(|r| r.outcome().is_some()) {
                Status::Done
            } else {
                Status::Failed
            }
        } else {
            Status::Running
        }
    }

    fn shown_restart(&self) -> &Restart {
        if let Some(r) = self.restarts.iter().find(|r| !r.finished()) {
            return r;
        }
        self.best_finished().unwrap_or(&self.restarts[0])
    }

    /// The finished restart with the highest graph evidence when every finished restart has one
    /// (restarts compared by `RestartSelection::GraphEvidence`), else the highest final objective.
    fn best_finished(&self) -> Option<&Restart> {
        let finished: Vec<&Restart> = self
            .restarts
            .iter()
            .filter(|r| r.outcome().is_some())
            .collect();
        let by_evidence = finished
            .iter()
            .all(|r| r.outcome().is_some_and(|o| o.graph_evidence.is_some()));
        finished.into_iter().max_by(|a, b| {
            let s = |r: &Restart| {
                r.outcome().map_or(f64::NEG_INFINITY, |o| {
                    if by_evidence {
                        o.graph_evidence.unwrap_or(f64::NEG_INFINITY)
                    } else {
                        o.score
                    }
                })
            };
            s(a).total_cmp(&s(b))
        })
    }

    /// The iterations each restart may still need (every phase at its maximum length).
    fn remaining_iterations(&self, r: &Restart) -> usize {
        let s = &self.problem.settings;
        let left = |max: usize| max.saturating_sub(r.phase_iterations());
        // Pruning refits one variable at a time, about (edges + D) refits of at most
        // `prune_iterations` evaluations of one variable, i.e. about 2 · prune_iterations
        // iterations of all D variables when there are about D edges.
        let pruning = 2 * s.collapsed.prune_iterations;
        match r.phase() {
            Phase::Initialising => s.warmup.max + s.acyclic_max + s.cooldown.max + pruning,
            Phase::WarmUp => left(s.warmup.max) + s.acyclic_max + s.cooldown.max + pruning,
            Phase::Acyclic => left(s.acyclic_max) + s.cooldown.max + pruning,
            Phase::Thresholding => s.cooldown.max + pruning,
            Phase::CoolDown => left(s.cooldown.max) + pruning,
            Phase::Pruning => pruning / 2,
            Phase::Families => 0,
            Phase::Done | Phase::Failed => 0,
        }
    }

    /// The snapshot of an exact search: families scored so far, the one-parent gains as the heatmap
    /// while screening (cause × effect, gains below 0 shown as 0), then the edge probabilities and
    /// the best DAG over the families scored so far, and at the end over all of them.
    fn exact_snapshot(&self, x: &ExactSearch) -> Snapshot {
        let d = self.names.len();
        let progress = x.progress();
        let status = self.status();
        let (adjacency, edges) = match (x.outcome(), x.live()) {
            (Some(Ok(o)), _) => (o.edge_probabilities.clone(), o.best.dag.edges()),
            (None, Some(live)) => (live.edge_probabilities.clone(), live.edges.clone()),
            _ => {
                let gains = x.one_parent_gains();
                let adj = (0..d)
                    .map(|cause| {
                        (0..d)
                            .map(|effect| gains[effect][cause].unwrap_or(0.0).max(0.0))
                            .collect()
                    })
                    .collect();
                (adj, Vec::new())
            }
        };
        let remaining_seconds = x.remaining_seconds(self.width);
        let stage_text = match progress.stage {
            crate::discovery::exact::ExactStage::Screening => "screening every one-parent family",
            crate::discovery::exact::ExactStage::Families => {
                "scoring every family within the candidate parents"
            }
            crate::discovery::exact::ExactStage::Scored => "every family scored",
        };
        Snapshot {
            status,
            restart: 0,
            phase: if x.finished() {
                Phase::Done
            } else {
                Phase::Families
            },
            phase_text: format!(
                "Exact search: {stage_text} ({} of {} families; {} fitted, {} from the cache).{}",
                progress.done,
                progress.total,
                progress.families_fitted,
                progress.cache_hits,
                match x.live() {
                    Some(live) => format!(
                        " The best graph over the families scored so far has {} edge{} \
                         (score {:.1} nats); the heatmap shows each edge's probability so far.",
                        live.edges.len(),
                        if live.edges.len() == 1 { "" } else { "s" },
                        live.log_score
                    ),
                    None => String::new(),
                }
            ),
            iteration: progress.families_fitted,
            terms: None,
            adjacency,
            edges,
            restarts: self.restart_progress(),
            faults: self.faults(),
            trace: Vec::new(),
            elapsed_seconds: self.elapsed,
            remaining_seconds,
            progress: self.fraction_done(status, remaining_seconds),
            exact: Some(progress),
        }
    }

    /// Elapsed / (elapsed + remaining) while running, 1 once ended.
    fn fraction_done(&self, status: Status, remaining_seconds: Option<f64>) -> f64 {
        if status != Status::Running {
            return 1.0;
        }
        // Not timed yet: no claim of progress at all (never 100 % before the first iteration).
        let Some(remaining_seconds) = remaining_seconds else {
            return 0.0;
        };
        let total = self.elapsed + remaining_seconds;
        if total > 0.0 {
            (self.elapsed / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    fn restart_progress(&self) -> Vec<RestartProgress> {
        self.restarts
            .iter()
            .map(|r| RestartProgress {
                index: r.index(),
                phase: r.phase(),
                iteration: r.iterations(),
                terms: r.last_terms(),
                score: r.outcome().map(|o| o.score),
                failure: r.failure().map(str::to_string),
            })
            .collect()
    }

    /// The current state, without doing any work.
    pub fn snapshot(&self) -> Snapshot {
        if let Some(x) = &self.exact {
            return self.exact_snapshot(x);
        }
        let d = self.names.len();
        if self.restarts.is_empty() {
            // An exact run before its first unit.
            return Snapshot {
                status: self.status(),
                restart: 0,
                phase: Phase::Families,
                phase_text: "Exact search: starting.".into(),
                iteration: 0,
                terms: None,
                adjacency: vec![vec![0.0; d]; d],
                edges: Vec::new(),
                restarts: Vec::new(),
                faults: Vec::new(),
                trace: Vec::new(),
                elapsed_seconds: self.elapsed,
                remaining_seconds: Some(0.0),
                progress: 0.0,
                exact: None,
            };
        }
        let shown = self.shown_restart();
        let (adjacency, edges) = match shown.outcome() {
            Some(o) if shown.finished() => (o.weights.clone(), o.edges.clone()),
            _ => (
                to_rows(&shown.weights(d)),
                shown.surviving_edges(&self.problem),
            ),
        };
        let remaining_iterations = self
            .restarts
            .iter()
            .map(|r| self.remaining_iterations(r))
            .max()
            .unwrap_or(0);
        let status = self.status();
        let remaining_seconds = if self.rescoring() {
            self.family_seconds
                .map(|per| self.pending_families().len() as f64 * per / self.width as f64)
        } else if status == Status::Running {
            self.iteration_seconds
                .map(|per| remaining_iterations as f64 * per)
        } else {
            Some(0.0)
        };
        let progress = self.fraction_done(status, remaining_seconds);
        Snapshot {
            status,
            restart: shown.index(),
            phase: shown.phase(),
            phase_text: if self.rescoring() {
                format!(
                    "comparing the restarts' graphs by their evidence ({} families left)",
                    self.pending_families().len()
                )
            } else {
                shown.phase().describe().to_string()
            },
            iteration: shown.iterations(),
            terms: shown.last_terms(),
            adjacency,
            edges,
            restarts: self.restart_progress(),
            faults: self.faults(),
            trace: Vec::new(),
            elapsed_seconds: self.elapsed,
            remaining_seconds,
            progress,
            exact: None,
        }
    }

    /// The result: the finished restart with the highest score, or, when none has finished (after a
    /// stop), the running restart with the highest current objective, thresholded to a DAG the way
    /// the search would (weakest edges out until acyclic, then the final thresholds).
    pub fn result(&self) -> RunResult {
        let d = self.names.len();
        let s = &self.problem.settings;
        let mut notes = Vec::new();
        // Whether a graph exists, to tell a stopped run's best-so-far from "no graph yet".
        let mut has_graph = true;
        let (edges, adjacency, chosen) = if let Some(best) = self.best_finished() {
            let o = best.outcome().expect("finished");
            (o.edges.clone(), o.weights.clone(), Some(best.index()))
        } else if let Some(r) = self
            .restarts
            .iter()
            .filter(|r| r.last_terms().is_some() && !r.finished())
            .max_by(|a, b| {
                let o = |r: &Restart| r.last_terms().map_or(f64::NEG_INFINITY, |t| t.objective);
                o(a).total_cmp(&o(b))
            })
        {
            let w = r.weights(d);
            let mut kept = DMatrix::zeros(d, d);
            for c in r.components() {
                for (j, lin, se) in c.edge_hyperparameters() {
                    if s.edge_passes_thresholds(lin, &se) {
                        kept[(j, c.child())] = 1.0;
                    }
                }
            }
            // The same rule a finished restart uses, so a stop never changes how cycles break.
            match s.dag_rule.apply(&w, &kept, &self.problem.knowledge) {
                Ok(dag) => {
                    let edges = dag.edges();
                    let mut adj = vec![vec![0.0; d]; d];
                    for &(a, b) in &edges {
                        adj[a][b] = w[(a, b)];
                    }
                    (edges, adj, Some(r.index()))
                }
                Err(e) => {
                    notes.push(format!(
                        "the best unfinished restart could not be thresholded to a DAG: {e}"
                    ));
                    has_graph = false;
                    (Vec::new(), vec![vec![0.0; d]; d], None)
                }
            }
        } else {
            if !self.restarts.iter().all(Restart::finished) {
                notes.push(
                    "stopped before any restart had begun iterating, so there is no graph yet"
                        .into(),
                );
            }
            has_graph = false;
            (Vec::new(), vec![vec![0.0; d]; d], None)
        };
        if s.restart_selection == RestartSelection::GraphEvidence
            && self.restarts.iter().all(Restart::finished)
        {
            if self.rescoring() || (self.stopped && !self.pending_families().is_empty()) {
                notes.push(
                    "stopped while comparing the restarts' graphs by their evidence, so the \
                     restart with the highest final objective was chosen"
                        .into(),
                );
            }
            for o in self.restarts.iter().filter_map(Restart::outcome) {
                if let Some(Err(e)) = self.families.graph_evidence(d, &o.edges) {
                    notes.push(format!(
                        "restart {}: the evidence of its graph could not be computed ({e}), so the \
                         restarts were compared by their final objectives",
                        o.index
                    ));
                }
            }
        }
        if let Some(note) = chosen
            .and_then(|k| self.restarts.get(k))
            .and_then(Restart::outcome)
            .and_then(|o| unconverged_acyclic_note(o, s))
        {
            notes.push(note);
        }
        let mut failures: Vec<String> = self
            .restarts
            .iter()
            .filter_map(|r| r.failure().map(|f| format!("restart {}: {f}", r.index())))
            .collect();
        failures.extend(notes);
        // The exact search's graph replaces the continuous one when it has one.
        let (mut edges, mut adjacency, mut chosen) = (edges, adjacency, chosen);
        let mut exact_parts = ExactParts::default();
        if s.method.runs_exact() {
            if let Some(f) = &self.exact_failure {
                failures.push(f.clone());
            }
            match self.exact.as_ref().and_then(ExactSearch::outcome) {
                Some(Ok(o)) => {
                    has_graph = true;
                    edges = o.best.dag.edges();
                    adjacency = vec![vec![0.0; d]; d];
                    for &(a, b) in &edges {
                        adjacency[a][b] = o.edge_probabilities[a][b];
                    }
                    chosen = None;
                    if !o.complete {
                        failures.push(format!(
                            "stopped before every planned family was scored: the graph is the \
                             best over the {} families scored so far",
                            self.score_cache().len()
                        ));
                    }
                    if o.families_failed > 0 {
                        failures.push(format!(
                            "{} families could not be fitted: each stands at its best subset's \
                             value (or is left out when it has none)",
                            o.families_failed
                        ));
                    }
                    let work = self.score_cache().work();
                    if work.families_on_floor_after_failures > 0 {
                        failures.push(format!(
                            "{} families had every fit fail and stand at their closed-form floor \
                             (the noise model or Bayesian linear regression)",
                            work.families_on_floor_after_failures
                        ));
                    }
                    exact_parts = ExactParts {
                        fitted: o.families_fitted,
                        hits: o.cache_hits,
                        posterior: o.posterior.clone(),
                        edge_probabilities: Some(o.edge_probabilities.clone()),
                        summary: Some(ExactSummary {
                            log_score: o.best.score,
                            prior: s.exact.prior.describe(),
                            edge_probability_prior: o.edge_probability_prior.clone(),
                            candidates: o.candidates.clone(),
                            families_failed: o.families_failed,
                            complete: o.complete,
                            fit_work: self.score_cache().work(),
                        }),
                    };
                }
                Some(Err(e)) => {
                    let fallback = if s.method == Method::Hybrid && chosen.is_some() {
                        ", so the graph is the continuous search's"
                    } else {
                        ""
                    };
                    failures.push(format!("the exact search found no graph: {e}{fallback}"));
                    if s.method == Method::Exact {
                        edges = Vec::new();
                        adjacency = vec![vec![0.0; d]; d];
                        has_graph = false;
                    }
                }
                None => {
                    if s.method == Method::Hybrid && chosen.is_some() {
                        failures.push(
                            "stopped before the exact search began, so the graph is the \
                             continuous search's"
                                .into(),
                        );
                    } else if s.method == Method::Exact {
                        failures.push("stopped before any family was scored".into());
                        has_graph = false;
                    } else if chosen.is_none() {
                        has_graph = false;
                    }
                }
            }
        }
        let edges_on_determined: Vec<(usize, usize)> = edges
            .iter()
            .copied()
            .filter(|&(a, b)| {
                self.determined
                    .iter()
                    .any(|d| (a == d.column || b == d.column) && !(a == d.by || b == d.by))
            })
            .collect();
        let status = self.status();
        let stopped = (status == Status::Stopped).then(|| StopRecord {
            elapsed_seconds: self.elapsed,
            phase: self.stop_phase(),
            has_graph,
            at: self.stopped_at.clone(),
        });
        let orientation = if exact_parts.summary.is_some() {
            "adjacency[i][j] is the posterior probability of the chosen edge names[i] -> names[j] \
             (row = cause, column = effect)"
        } else {
            "adjacency[i][j] is the weight of the edge names[i] -> names[j] (row = cause, column = effect)"
        };
        RunResult {
            names: self.names.clone(),
            orientation: orientation.into(),
            edges,
            adjacency,
            chosen_restart: chosen,
            restarts: self
                .restarts
                .iter()
                .filter_map(|r| r.outcome().cloned())
                .collect(),
            failures,
            faults: self.faults(),
            complete: self.restarts.iter().all(Restart::finished),
            status,
            seed: self.seed,
            preset: self.preset,
            settings: s.clone().into_inner(),
            knowledge: self.problem.knowledge.clone(),
            rows: self.problem.total_rows,
            rows_used: self.problem.data.nrows(),
            dataset_fingerprint: format!("{:016x}", self.fingerprint),
            seconds: self.elapsed,
            backend: self.backend.name(),
            iteration_time: Some(self.iteration_time.time).filter(|t| t.iterations > 0),
            gpu: self
                .gpu_traffic
                .steady
                .map(|steady_state| GpuReport { steady_state }),
            device_choices: self.backend.device_choices(),
            version: env!("CARGO_PKG_VERSION").into(),
            method: s.method,
            method_reason: self.method_reason.clone(),
            families_fitted: exact_parts.fitted + self.families.len(),
            cache_hits: exact_parts.hits,
            posterior: exact_parts.posterior,
            edge_probabilities: exact_parts.edge_probabilities,
            exact: exact_parts.summary,
            stopped,
            determined: self
                .determined
                .iter()
                .map(|d| DeterminedColumn {
                    column: self.names[d.column].clone(),
                    by: self.names[d.by].clone(),
                    residual_fraction: d.residual_fraction,
                })
                .collect(),
            edges_on_determined,
        }
    }

    /// Where the run is, in words, for a stopped run's record: the exact search's stage while it
    /// scores families, else the first unfinished restart's phase and iteration.
    fn stop_phase(&self) -> String {
        if let Some(x) = self.exact.as_ref() {
            let complete = x
                .outcome()
                .is_some_and(|o| o.as_ref().is_ok_and(|o| o.complete));
            if !complete {
                let p = x.progress();
                let stage = match p.stage {
                    crate::discovery::exact::ExactStage::Screening => {
                        "screening one-parent families"
                    }
                    crate::discovery::exact::ExactStage::Families => "scoring families",
                    crate::discovery::exact::ExactStage::Scored => "every family scored",
                };
                return format!(
                    "the exact search, {stage} ({} of {} scored)",
                    p.done, p.total
                );
            }
        }
        let n = self.restarts.len();
        match self.restarts.iter().find(|r| !r.finished()) {
            Some(r) => format!(
                "the {} phase of restart {} of {n} (iteration {})",
                phase_name(r.phase()),
                r.index() + 1,
                r.iterations()
            ),
            None if self.rescoring() || !self.pending_families().is_empty() => {
                "comparing the restarts' graphs by their evidence".into()
            }
            None if self.problem.settings.method.runs_exact() => {
                "before the exact search began".into()
            }
            None => "after every restart finished".into(),
        }
    }
}

/// A phase's name in a sentence ("the warm-up phase").
fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Initialising => "initialising",
        Phase::WarmUp => "warm-up",
        Phase::Acyclic => "acyclic",
        Phase::Thresholding => "thresholding",
        Phase::CoolDown => "cool-down",
        Phase::Pruning => "pruning",
        Phase::Families => "family-scoring",
        Phase::Done => "finished",
        Phase::Failed => "failed",
    }
}

/// The exact search's share of a result.
#[derive(Default)]
struct ExactParts {
    fitted: usize,
    hits: usize,
    posterior: Option<GraphPosterior>,
    edge_probabilities: Option<Vec<Vec<f64>>>,
    summary: Option<ExactSummary>,
}

fn to_rows(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    (0..m.nrows())
        .map(|i| m.row(i).iter().copied().collect())
        .collect()
}

/// Keeps at most `max` of `points`, evenly spread, always keeping the last.
fn thin<T>(points: Vec<T>, max: usize) -> Vec<T> {
    let n = points.len();
    if n <= max || max == 0 {
        return points;
    }
    // Keep index k·n/max for k < max − 1, then the last.
    let mut keep = vec![false; n];
    for k in 0..max - 1 {
        keep[k * n / max] = true;
    }
    keep[n - 1] = true;
    points
        .into_iter()
        .zip(keep)
        .filter_map(|(p, k)| k.then_some(p))
        .collect()
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

/// A plain note when the chosen restart's acyclic phase ran to its cap without h(A) < τ, so the
/// DAG reported is the one the thresholding rule cut from a graph that still had cycles.
fn unconverged_acyclic_note(o: &RestartOutcome, s: &SearchSettings) -> Option<String> {
    let acyclic = o.phases.iter().find(|p| p.phase == Phase::Acyclic)?;
    if acyclic.ended_by != PhaseEnd::Cap {
        return None;
    }
    let rule = match s.dag_rule {
        DagRule::Prefix => "dropping the lightest edges until the rest was acyclic",
        DagRule::Greedy => {
            "keeping edges from the heaviest down and skipping each that closed a cycle"
        }
    };
    Some(format!(
        "restart {}: the acyclic phase did not converge: it ended at its cap of {} iterations \
         with h(A) = {:.3} ≥ τ = {} and {} edges ({} 2-cycles) still passing the thresholds; \
         the reported DAG was cut from that graph by {rule}",
        o.index,
        acyclic.iterations,
        acyclic.h,
        s.tau,
        acyclic.edges.len(),
        acyclic.two_cycles
    ))
}

#[cfg(test)]
mod tests;
