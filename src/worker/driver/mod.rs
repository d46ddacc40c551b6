//! The Web Worker's logic without the browser: it holds the loaded data set and the run, and turns
//! each request of [`crate::worker::protocol`] into the messages to post back.
//!
//! Why a separate, native module: the worker itself (wasm only) is a thin shell of timers and
//! `postMessage`; everything that decides what happens on start, pause, resume and stop lives here
//! and is tested natively. The shell calls [`Driver::tick`] from a zero-delay timer, so between two
//! steps of at most [`STEP_SECONDS`] the worker's event loop runs and pause or stop requests are
//! seen at once.
//!
//! With a pool of compute workers (more than one asked for), the driver does not compute: each
//! tick begins a unit of the session and hands its jobs out as a [`Dispatch`]; the shell spreads
//! them over the compute workers (each runs [`ComputeWorker`]) and gives the outcomes back through
//! [`Driver::outcomes`], which finishes the unit and schedules the next. The coordinating worker
//! stays idle meanwhile, so pause and stop are read at once even inside long fits. Every job's
//! outcome is the same wherever it runs, so the run's graph does not depend on the pool's size.
//!
//! With a WebGPU device in the coordinating worker ([`Driver::set_gpu`]) a run with the
//! uncollapsed bound is dispatched the same way even on one worker: the shell computes each
//! unit's evaluations on the device and reports a lost device through [`Driver::gpu_lost`], after
//! which the run goes on on the CPU. The driver tells the page which backend each run computes on.

mod dispatch;
mod explain;
mod gpu_choice;

pub use dispatch::{data_message, jobs_message, jobs_per_message, read_reply, ComputeWorker};
pub use explain::{EXPLAIN_INDUCING, EXPLAIN_MAX_ROWS};

use nalgebra::DMatrix;

use std::sync::Arc;

use crate::data::subsample::{subsample_rows, take_rows};
use crate::data::{CsvOptions, Dataset};
use crate::discovery::cgp::BoundKind;
use crate::discovery::explain::{
    fitted_conditional, ConditionalCurve, CurveSettings, DirectionComparison, EdgeEvidence,
    EdgeEvidencePlan,
};
use crate::discovery::family::FamilyScoreSettings;
use crate::discovery::jobs::{Job, Outcome};
use crate::discovery::settings::Method;
use crate::engine::{now_seconds, Session, SessionError};
use crate::graph::Dag;
use crate::runner::cost_model::{DeviceChoice, PlacementProbe, Side};
use crate::runner::gpu::DeviceTraffic;
use crate::runner::gpu_executor::{collapsed_probe, COLLAPSED_ITERATIONS, PSI2_MIN_WORK};
use crate::worker::protocol::{
    compute_workers, decode_compute, encode_compute, load_csv, ComputeBackend, FromCompute,
    FromWorker, RunRequest, ToCompute,
};

/// Seconds of work per step: short enough that pause and stop act within a tenth of a second and
/// snapshots reach the page about ten times a second, long enough that the timer between steps
/// costs little.
pub const STEP_SECONDS: f64 = 0.08;

/// What the shell must do after a request or a step.
#[derive(Debug, Default)]
pub struct Reaction {
    /// Messages to post to the page, in order.
    pub messages: Vec<FromWorker>,
    /// Schedule [`Driver::tick`] with this generation.
    pub step: Option<u64>,
    /// Jobs to spread over the compute workers; their outcomes go to [`Driver::outcomes`].
    pub dispatch: Option<Dispatch>,
    /// End the compute workers' current jobs (their outcomes are no longer wanted): the shell
    /// replaces the workers.
    pub reset_pool: bool,
}

/// A unit's jobs for the compute workers.
#[derive(Debug)]
pub struct Dispatch {
    /// Echoed with every outcome; outcomes of an older batch are dropped.
    pub batch: u64,
    /// The data the jobs read ([`Driver::data`] gives it; a worker that lacks it gets it first).
    pub data_id: u64,
    pub jobs: Vec<Job<'static>>,
}

/// Compute workers lost in one run before the run goes on in the coordinating worker alone.
const MAX_POOL_LOSSES: usize = 3;

impl Reaction {
    fn message(message: FromWorker) -> Self {
        Self {
            messages: vec![message],
            ..Self::default()
        }
    }
}

/// The worker's state.
#[derive(Default)]
pub struct Driver {
    dataset: Option<Dataset>,
    session: Option<Session>,
    paused: bool,
    /// The page's id of the current run, echoed in its messages.
    run_id: u64,
    /// Raised whenever a scheduled step must no longer run (pause, stop, a new run, new data):
    /// a tick carrying an older generation does nothing.
    generation: u64,
    /// When the run was last sent to the page whole ([`FromWorker::Saved`]).
    saved_at: f64,
    /// Logical cores the browser reports (for the default pool size).
    cores: usize,
    /// Compute workers of the current run (1: this worker computes itself).
    workers: usize,
    /// Identifies the current run's data for the compute workers.
    data_id: u64,
    /// The batch handed out and not yet back.
    in_flight: Option<u64>,
    batch: u64,
    /// When progress was last reported (pool mode reports at most every [`STEP_SECONDS`]).
    reported_at: f64,
    /// Compute workers lost in this run.
    losses: usize,
    /// Whether this run gave up on compute workers ([`MAX_POOL_LOSSES`]): it computes here.
    pool_given_up: bool,
    /// The family scores of the last run that had any: a next run on the same data, rows, family
    /// settings and seed starts from them (a stopped exact run goes on where it stopped, a run
    /// with other knowledge refits nothing already scored).
    kept_scores: Option<crate::discovery::exact::ScoreCache>,
    /// The WebGPU adapter (described) on which the shell holds a working device, if any.
    gpu: Option<String>,
    /// The adapter the browser granted (described), whether or not a device works on it.
    adapter: Option<String>,
    /// Why the adapter is not computing (its device failed to open, or was lost), if it is not.
    gpu_note: Option<String>,
    /// Why the GPU was left during the current run, if it was (for the run's result).
    gpu_lost_in_run: Option<String>,
    /// N·M² from which a collapsed run's Ψ2 may go to the GPU, when a test set it
    /// ([`PSI2_MIN_WORK`] otherwise).
    psi2_min_work: Option<f64>,
    /// Where the current collapsed continuous run computes, measured while it runs (a run with a
    /// working GPU and Ψ2 work from [`PSI2_MIN_WORK`] on): the shell's WebGPU or the compute
    /// workers.
    collapsed_probe: Option<Arc<PlacementProbe>>,
    /// The side a test put every collapsed run on, instead of measuring.
    collapsed_side: Option<Side>,
    /// Where the current run's family fits compute, measured while it runs (a run with a
    /// working GPU only): the shell's lockstep on WebGPU or the compute workers.
    family_probe: Option<Arc<PlacementProbe>>,
    /// The side a test put every run's family fits on, instead of measuring.
    family_side: Option<Side>,
    /// Whether the page was told where the probes placed the run's work (once, when they do).
    placements_told: bool,
}

/// What the family fits' probe is about (its report's `work`).
const FAMILY_FITS: &str = "family fits";

/// Compute workers' worth of family fits in a unit when they go to the GPU: its lockstep rounds
/// carry one request per fit, so a unit the size of the pool's would leave the device idle.
const GPU_FAMILY_WIDTH: usize = 8;

impl Driver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Tells the driver how many logical cores the browser reports.
    pub fn set_cores(&mut self, cores: usize) {
        self.cores = cores;
    }

    /// Compute workers of the current run (1 when this worker computes itself).
    pub fn workers(&self) -> usize {
        self.workers.max(1)
    }

    /// The current run's data for the compute workers, under its id.
    pub fn data(&self) -> Option<(u64, &DMatrix<f64>)> {
        self.session.as_ref().map(|s| (self.data_id, s.data()))
    }

    /// Whether a run is in progress (running or paused).
    pub fn is_running(&self) -> bool {
        self.session.is_some()
    }

    /// Parses a CSV file and keeps its data set when it is accepted (none when it is refused). A
    /// new file ends any run.
    pub fn load(
        &mut self,
        load_id: u64,
        file_name: &str,
        bytes: &[u8],
        options: &CsvOptions,
        progress: &mut dyn FnMut(FromWorker),
    ) -> Reaction {
        self.session = None;
        self.generation += 1;
        let (reply, parsed) = load_csv(load_id, file_name, bytes, options, progress);
        // A refused file leaves no data behind, so the worker holds what the page shows.
        self.dataset = parsed.map(|p| p.dataset);
        self.kept_scores = None;
        Reaction::message(reply)
    }

    /// Starts a run on the loaded data, replacing any run in progress.
    pub fn start(&mut self, request: RunRequest) -> Reaction {
        self.generation += 1;
        self.session = None;
        self.run_id = request.run_id;
        let run_id = self.run_id;
        let Some(dataset) = &self.dataset else {
            return Reaction::message(FromWorker::RunRefused {
                run_id,
                message: "load a data set before starting a run".into(),
            });
        };
        let workers = compute_workers(request.settings.threads, self.cores);
        // The page checks its form too; the request is still checked here, where it is used.
        let started = request
            .settings
            .check()
            .map_err(SessionError::Settings)
            .and_then(|settings| {
                Session::new(
                    dataset,
                    request.knowledge,
                    settings,
                    request.seed,
                    Some(request.preset),
                )
            });
        match started {
            Ok(mut session) => {
                // Refused (and left alone) when it was made for other data or settings.
                if let Some(kept) = self.kept_scores.clone() {
                    session.use_score_cache(kept);
                }
                self.begin(session, workers)
            }
            Err(e) => Reaction::message(FromWorker::RunRefused {
                run_id,
                message: format!("the run could not start: {e}"),
            }),
        }
    }

    /// Goes on with a run saved by an earlier worker ([`FromWorker::Saved`]) on the loaded data.
    pub fn continue_run(&mut self, run_id: u64, saved: &str) -> Reaction {
        self.generation += 1;
        self.session = None;
        self.run_id = run_id;
        let Some(dataset) = &self.dataset else {
            return Reaction::message(FromWorker::RunRefused {
                run_id,
                message: "load the run's data set before going on with it".into(),
            });
        };
        match Session::resume(saved, 1, Some(dataset.fingerprint())) {
            Ok(session) => {
                let workers = compute_workers(session.settings().threads, self.cores);
                self.begin(session, workers)
            }
            Err(e) => Reaction::message(FromWorker::RunRefused {
                run_id,
                message: format!("the saved run could not go on: {e}"),
            }),
        }
    }

    /// Makes `session` the running run on `workers` compute workers and schedules its first
    /// step.
    fn begin(&mut self, session: Session, workers: usize) -> Reaction {
        let snapshot = session.snapshot();
        self.session = Some(session);
        self.gpu_lost_in_run = None;
        self.paused = false;
        self.saved_at = now_seconds();
        self.reported_at = now_seconds();
        self.workers = workers;
        self.data_id += 1;
        self.in_flight = None;
        self.losses = 0;
        self.pool_given_up = false;
        self.family_probe = (self.gpu.is_some() && self.run_fits_families()).then(|| {
            Arc::new(match self.family_side {
                Some(side) => PlacementProbe::forced(FAMILY_FITS, side),
                None => PlacementProbe::measured(FAMILY_FITS),
            })
        });
        let collapsed_work = self.collapsed_psi2_work();
        self.collapsed_probe = match (self.gpu.is_some(), collapsed_work) {
            (true, Some(work)) if work >= self.psi2_min_work() => {
                Some(Arc::new(match self.collapsed_side {
                    Some(side) => PlacementProbe::forced(COLLAPSED_ITERATIONS, side),
                    None => collapsed_probe(),
                }))
            }
            _ => None,
        };
        self.placements_told = !self.probing();
        Reaction {
            messages: vec![
                self.backend_message(false),
                FromWorker::Compute {
                    run_id: self.run_id,
                    workers,
                },
                FromWorker::Progress {
                    run_id: self.run_id,
                    snapshot,
                    paused: false,
                },
            ],
            step: Some(self.generation),
            ..Reaction::default()
        }
    }

    /// Pauses a running run (no-op otherwise), reporting the paused state.
    pub fn pause(&mut self) -> Reaction {
        match &self.session {
            Some(session) if !self.paused => {
                self.paused = true;
                self.generation += 1;
                Reaction::message(FromWorker::Progress {
                    run_id: self.run_id,
                    snapshot: session.snapshot(),
                    paused: true,
                })
            }
            _ => Reaction::default(),
        }
    }

    /// Resumes a paused run (no-op otherwise).
    pub fn resume(&mut self) -> Reaction {
        match &self.session {
            Some(session) if self.paused => {
                self.paused = false;
                self.generation += 1;
                Reaction {
                    messages: vec![FromWorker::Progress {
                        run_id: self.run_id,
                        snapshot: session.snapshot(),
                        paused: false,
                    }],
                    // A unit still out resumes the run when it comes back.
                    step: self.in_flight.is_none().then_some(self.generation),
                    ..Reaction::default()
                }
            }
            _ => Reaction::default(),
        }
    }

    /// Stops the run (running or paused) and reports its result: the best graph so far.
    pub fn stop(&mut self) -> Reaction {
        self.generation += 1;
        let backend = self.result_backend();
        let choices = self.device_choices();
        match self.session.take() {
            Some(mut session) => {
                // What the compute workers are doing is no longer wanted.
                let reset_pool = self.in_flight.take().is_some();
                session.abandon_unit();
                session.stop();
                self.keep_scores(&session);
                Reaction {
                    reset_pool,
                    ..Reaction::message(finished(self.run_id, &session, backend, choices))
                }
            }
            None => Reaction::default(),
        }
    }

    /// One step of about `budget_seconds` when `generation` is current and the run is not paused;
    /// reports progress, or the result once the run has ended.
    pub fn tick(&mut self, generation: u64, budget_seconds: f64) -> Reaction {
        if generation != self.generation || self.paused {
            return Reaction::default();
        }
        if self.dispatches() {
            return self.dispatch_unit(generation, budget_seconds);
        }
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        let started = now_seconds();
        // A unit that may run long is left for the next tick, which sends it away.
        let snapshot = if self.pool_given_up {
            session.step(budget_seconds)
        } else {
            session.step_short_units(budget_seconds)
        };
        if session.is_finished() {
            return self.end_run();
        }
        if self.session.is_none() {
            return Reaction::default();
        }
        let mut messages = vec![FromWorker::Progress {
            run_id: self.run_id,
            snapshot,
            paused: false,
        }];
        if unit_was_long(now_seconds() - started, budget_seconds) {
            let backend = self.result_backend();
            if let Some(session) = self.session.as_ref() {
                messages.push(checkpoint(self.run_id, session, backend));
            }
        }
        messages.extend(self.save_if_due());
        Reaction {
            messages,
            step: Some(generation),
            ..Reaction::default()
        }
    }

    /// Whether the next unit goes out as a [`Dispatch`] (to the compute workers, or to the GPU)
    /// rather than being computed in this worker: with a pool, with a GPU run, and always for a
    /// unit that may run long (the exact search's family fits, starting fits, pruning refits,
    /// final bounds, long iterations: one compute worker when one is asked for), so that this
    /// worker stays free to act on a stop or a pause at once even inside a fit of many seconds;
    /// unless the run has given up on compute workers.
    fn dispatches(&self) -> bool {
        if self.pool_given_up {
            return self.run_uses_gpu();
        }
        self.workers() > 1
            || self.run_uses_gpu()
            || self.probing()
            || self
                .session
                .as_ref()
                .is_some_and(Session::next_unit_may_be_long)
    }

    /// Ends the run that has finished: its result for the page, its scores kept for the next.
    fn end_run(&mut self) -> Reaction {
        let backend = self.result_backend();
        let choices = self.device_choices();
        let Some(session) = self.session.take() else {
            return Reaction::default();
        };
        self.keep_scores(&session);
        Reaction::message(finished(self.run_id, &session, backend, choices))
    }

    /// What computed the current run, for its result: the page's GPU and compute workers (the
    /// session's own backend in this worker is only their CPU stand-in).
    fn result_backend(&self) -> String {
        let workers = self.workers();
        let cpu = format!(
            "CPU (f64, {workers} worker{})",
            if workers == 1 { "" } else { "s" }
        );
        match (&self.gpu, self.run_uses_gpu(), &self.gpu_lost_in_run) {
            (Some(adapter), true, _) => format!("WebGPU (f32, {adapter}) with {cpu}"),
            (_, _, Some(why)) => format!("{cpu} (WebGPU failed and was left: {why})"),
            _ => cpu,
        }
    }

    /// Keeps `session`'s family scores for the next run, when it has any.
    fn keep_scores(&mut self, session: &Session) {
        let scores = session.score_cache();
        if !scores.is_empty() {
            self.kept_scores = Some(scores.clone());
        }
    }

    /// The whole run for the page ([`FromWorker::Saved`]) when the last copy is at least
    /// [`SAVE_SECONDS`] old. Called between units only, so a copy never holds half a unit.
    fn save_if_due(&mut self) -> Option<FromWorker> {
        let session = self.session.as_ref()?;
        if now_seconds() - self.saved_at < SAVE_SECONDS {
            return None;
        }
        self.saved_at = now_seconds();
        Some(FromWorker::Saved {
            run_id: self.run_id,
            session: session.checkpoint(),
        })
    }

    /// Progress for the page when the last report is at least [`STEP_SECONDS`] old.
    fn progress_if_due(&mut self) -> Vec<FromWorker> {
        let Some(session) = self.session.as_mut() else {
            return Vec::new();
        };
        if now_seconds() - self.reported_at < STEP_SECONDS {
            return Vec::new();
        }
        self.reported_at = now_seconds();
        vec![FromWorker::Progress {
            run_id: self.run_id,
            snapshot: session.report(),
            paused: self.paused,
        }]
    }
}

/// A note for the browser's console (nothing natively).
fn web_log(_message: &str) {
    #[cfg(target_arch = "wasm32")]
    web_sys::console::warn_1(&_message.into());
}

/// Seconds between two [`FromWorker::Saved`] copies of a run sent to the page.
pub const SAVE_SECONDS: f64 = 5.0;

/// Seconds a step may overrun its budget before its units count as long: the page can then no
/// longer rely on a stop request being read between steps, and needs a checkpoint.
pub const LONG_UNIT_SECONDS: f64 = 0.5;

/// Whether a step that took `step_seconds` for a budget of `budget_seconds` did a long unit.
fn unit_was_long(step_seconds: f64, budget_seconds: f64) -> bool {
    step_seconds - budget_seconds > LONG_UNIT_SECONDS
}

/// The result the run would give if it were stopped now, without stopping it: what the page shows
/// if it must end a worker that is inside a long unit of work and cannot read the stop request
/// (a single-threaded worker reads messages only between units).
fn checkpoint(run_id: u64, session: &Session, backend: String) -> FromWorker {
    let mut stopped = session.clone();
    stopped.stop();
    let mut result = stopped.result();
    result.backend = backend;
    FromWorker::Checkpoint {
        run_id,
        result: Box::new(result),
    }
}

/// The page's message for a run that has ended, its result saying what computed it (`backend`).
fn finished(
    run_id: u64,
    session: &Session,
    backend: String,
    device_choices: Vec<DeviceChoice>,
) -> FromWorker {
    let mut result = session.result();
    result.backend = backend;
    result.device_choices = device_choices;
    FromWorker::Finished {
        run_id,
        snapshot: session.snapshot(),
        result: Box::new(result),
    }
}

#[cfg(test)]
mod tests;
