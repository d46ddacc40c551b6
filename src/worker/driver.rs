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

use nalgebra::DMatrix;

use std::sync::Arc;

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

    /// Tells the driver what the shell found: the browser's WebGPU `adapter` (described) and
    /// whether a device on it works (`Ok`) or why not (`Err`).
    pub fn set_gpu(&mut self, adapter: Option<String>, device: Result<(), String>) {
        self.adapter = adapter.clone();
        match device {
            Ok(()) => {
                self.gpu = adapter;
                self.gpu_note = None;
            }
            Err(why) => {
                self.gpu = None;
                self.gpu_note = Some(why);
            }
        }
    }

    /// Test hook: collapsed runs whose Ψ2 work N·M² is at least `work` may compute on the GPU.
    pub fn set_psi2_min_work(&mut self, work: f64) {
        self.psi2_min_work = Some(work);
    }

    /// Test hook: every collapsed continuous run computes on `side` (with a working GPU),
    /// unmeasured.
    pub fn set_collapsed_side(&mut self, side: Side) {
        self.collapsed_side = Some(side);
    }

    /// The current collapsed continuous run's probe, if it has a working GPU to place it on.
    pub fn collapsed_probe(&self) -> Option<Arc<PlacementProbe>> {
        self.collapsed_probe.clone()
    }

    /// Whether the work `probe` places computes on the GPU now: a device works and the probe
    /// chose it (or a test forced it).
    fn placed_on_gpu(&self, probe: &Option<Arc<PlacementProbe>>) -> bool {
        self.gpu.is_some()
            && probe
                .as_ref()
                .is_some_and(|p| p.placed() == Some(Side::Device))
    }

    /// Whether the current collapsed run computes on the GPU now.
    fn collapsed_on_gpu(&self) -> bool {
        self.placed_on_gpu(&self.collapsed_probe)
    }

    /// Whether a probe of the current run is still timing both sides (its units are then
    /// dispatched, to be timed where they run).
    fn probing(&self) -> bool {
        self.gpu.is_some()
            && [&self.family_probe, &self.collapsed_probe]
                .into_iter()
                .flatten()
                .any(|p| p.probing())
    }

    /// Test hook: every run's family fits compute on `side` (with a working GPU), unmeasured.
    pub fn set_family_side(&mut self, side: Side) {
        self.family_side = Some(side);
    }

    /// The current run's family fits' probe, if the run has a working GPU to place them on.
    pub fn family_probe(&self) -> Option<Arc<PlacementProbe>> {
        self.family_probe.clone()
    }

    /// Whether the current run's family fits compute on the GPU now.
    fn families_on_gpu(&self) -> bool {
        self.placed_on_gpu(&self.family_probe)
    }

    /// Whether the current run fits families (the exact search, or hybrid's second part).
    fn run_fits_families(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| matches!(s.settings().method, Method::Exact | Method::Hybrid))
    }

    /// Why the current run's family fits compute on the CPU with a working GPU: still being
    /// measured, or measured (or forced) there.
    fn families_note(&self) -> String {
        let probe = self.family_probe.as_ref();
        match (probe.map(|p| p.placed()), probe.and_then(|p| p.choice())) {
            (Some(None), _) | (None, _) => "the first family fits are timed on WebGPU (in lockstep, each round's Ψ2 sums in one submission) and on the CPU; the faster computes the rest".into(),
            (Some(Some(_)), Some(choice)) => format!(
                "the family fits compute on the CPU, which is faster here: {}",
                choice.reason
            ),
            (Some(Some(_)), None) => "the family fits compute on the CPU (placed there by a test)".into(),
        }
    }

    /// The choices behind the current run's placements, for its result.
    fn device_choices(&self) -> Vec<DeviceChoice> {
        [&self.collapsed_probe, &self.family_probe]
            .into_iter()
            .flatten()
            .filter_map(|p| p.choice())
            .map(|mut choice| {
                if let Some(why) = &self.gpu_lost_in_run {
                    // Whatever the probe chose, everything after the failure ran on the CPU.
                    choice.reason +=
                        &format!("; then the GPU failed ({why}) and the CPU computed the rest");
                }
                choice
            })
            .collect()
    }

    /// N·M² from which a collapsed run's Ψ2 goes to the GPU.
    fn psi2_min_work(&self) -> f64 {
        self.psi2_min_work.unwrap_or(PSI2_MIN_WORK)
    }

    /// The Ψ2 work N·M² of the current run's largest collapsed variable (every other variable a
    /// candidate parent, N the rows used), if it is a collapsed continuous search.
    fn collapsed_psi2_work(&self) -> Option<f64> {
        let session = self.session.as_ref()?;
        let settings = session.settings();
        if settings.bound != BoundKind::Collapsed || settings.method != Method::Cgp {
            return None;
        }
        let (n, d) = session.data().shape();
        let m = settings.inducing_for(d).min(n) as f64;
        Some(n as f64 * m * m)
    }

    /// Whether the current run computes on the GPU: a device works and the run's work goes
    /// there (the continuous search with the uncollapsed bound; with the collapsed bound, or the
    /// exact search's family fits, where a probe measured the GPU faster).
    pub fn run_uses_gpu(&self) -> bool {
        self.families_on_gpu()
            || self.collapsed_on_gpu()
            || self.gpu.is_some()
                && self.session.as_ref().is_some_and(|s| {
                    let settings = s.settings();
                    settings.method == Method::Cgp && settings.bound == BoundKind::Uncollapsed
                })
    }

    /// Why the current collapsed run computes on the CPU with a working GPU: still being
    /// measured, measured (or forced) there, or too small to time.
    fn collapsed_note(&self, work: f64) -> String {
        match self.collapsed_probe.as_ref() {
            None => format!(
                "this run's Ψ2 work (N·M² = {work:.1e}) is below the {:.0e} from which the \
                 collapsed bound times WebGPU against the CPU: it computes on the CPU",
                self.psi2_min_work()
            ),
            Some(p) => match (p.placed(), p.choice()) {
                (None, _) => "the first iterations are timed with their Ψ2 sums on WebGPU and on \
                              the CPU; the faster computes the rest"
                    .into(),
                (Some(_), Some(choice)) => format!(
                    "the collapsed search computes on the CPU, which is faster here: {}",
                    choice.reason
                ),
                (Some(_), None) => {
                    "the collapsed search computes on the CPU (placed there by a test)".into()
                }
            },
        }
    }

    /// Where the current run computes, for the page.
    pub fn backend_message(&self, switched: bool) -> FromWorker {
        let on_gpu = self.run_uses_gpu();
        let note = match (&self.adapter, on_gpu, &self.gpu_note) {
            (None, _, _) | (Some(_), true, _) => None,
            (Some(_), false, Some(why)) => Some(why.clone()),
            (Some(_), false, None) if self.run_fits_families() => Some(self.families_note()),
            (Some(_), false, None) => Some(match self.collapsed_psi2_work() {
                Some(work) => self.collapsed_note(work),
                None => {
                    "this run's bound has no GPU path at this size: it computes on the CPU".into()
                }
            }),
        };
        FromWorker::Pong {
            backend: if on_gpu {
                ComputeBackend::WebGpu
            } else {
                ComputeBackend::Cpu
            },
            adapter: self.adapter.clone(),
            note,
            switched,
        }
    }

    /// The shell's GPU failed (`why`) during batch `batch`: the shell computes that batch on the
    /// CPU from the same jobs (so nothing is lost), and every later unit computes on the CPU.
    /// The page is told of the switch.
    pub fn gpu_lost(&mut self, why: &str) -> Reaction {
        let was_on_gpu = self.run_uses_gpu();
        // A probe puts some of the run's work on the device before it decides.
        if was_on_gpu || self.family_probe.is_some() || self.collapsed_probe.is_some() {
            self.gpu_lost_in_run = Some(why.into());
        }
        self.gpu = None;
        self.gpu_note = Some(format!(
            "the GPU failed ({why}); the run went on on the CPU from the batch in hand, with nothing lost"
        ));
        web_log(&format!(
            "occam: the GPU failed ({why}); computing on the CPU"
        ));
        Reaction::message(self.backend_message(was_on_gpu))
    }

    /// What an explanation fits on: the loaded data (standardised, at most [`EXPLAIN_MAX_ROWS`]
    /// rows drawn from `seed`) and the graph `edges` over them; or why there is nothing to
    /// explain now (no data, a run in progress, a graph that is not a DAG of the data's columns).
    fn explanation_inputs(
        &self,
        edges: &[(usize, usize)],
        seed: u64,
    ) -> Result<(DMatrix<f64>, Dag), String> {
        let dataset = self.dataset.as_ref().ok_or("load data first")?;
        if self.is_running() {
            return Err("wait for the run to end: an explanation refits variables".into());
        }
        let data = explain_rows(&dataset.standardised().to_matrix(), seed);
        let dag = Dag::from_edges(data.ncols(), edges)
            .map_err(|e| format!("the graph cannot be explained: {e}"))?;
        Ok((data, dag))
    }

    /// The evidence of `edge` in the graph `edges` on the loaded data (standardised, at most
    /// [`EXPLAIN_MAX_ROWS`] rows, a subset drawn from `seed`): the families its removal and
    /// reversal change, fitted as the exact search fits them (`discovery::explain`). Runs here,
    /// one family after another; the page asks only while no run is in progress.
    pub fn explain_edge(
        &self,
        request_id: u64,
        edges: &[(usize, usize)],
        edge: (usize, usize),
        seed: u64,
    ) -> FromWorker {
        let explained = self
            .explanation_inputs(edges, seed)
            .and_then(|(data, dag)| edge_evidence(&data, &dag, edge, seed));
        explanation_reply(request_id, explained, |evidence| {
            FromWorker::EdgeExplained {
                request_id,
                evidence: Box::new(evidence),
            }
        })
    }

    /// Variable `child`'s fitted conditional given its parents in the graph `edges`, along parent
    /// `shown_parent`, on the loaded data (as [`Driver::explain_edge`] reads them).
    pub fn fit_conditional(
        &self,
        request_id: u64,
        edges: &[(usize, usize)],
        child: usize,
        shown_parent: usize,
        seed: u64,
    ) -> FromWorker {
        let fitted = self
            .explanation_inputs(edges, seed)
            .and_then(|(data, dag)| {
                if child >= dag.n() {
                    return Err(format!("there is no variable {child}"));
                }
                conditional(&data, child, &dag.parents(child), shown_parent, seed)
            });
        explanation_reply(request_id, fitted, |curve| FromWorker::ConditionalFitted {
            request_id,
            curve: Box::new(curve),
        })
    }

    /// Edge `edge` = j → i of the graph `edges` and its reversal side by side: the edge's evidence
    /// ([`Driver::explain_edge`]), i's fitted conditional given pa(i) along j, and j's given
    /// pa(j) ∪ {i} along i (the family the reversal would give j). Their scores are the evidence's
    /// F(i | pa(i)) and F(j | pa(j) ∪ {i}).
    pub fn compare_directions(
        &self,
        request_id: u64,
        edges: &[(usize, usize)],
        edge: (usize, usize),
        seed: u64,
    ) -> FromWorker {
        let compared = self
            .explanation_inputs(edges, seed)
            .and_then(|(data, dag)| {
                let evidence = edge_evidence(&data, &dag, edge, seed)?;
                let (cause, effect) = edge;
                let forward = conditional(&data, effect, &dag.parents(effect), cause, seed)?;
                let mut reversed_parents = dag.parents(cause);
                reversed_parents.push(effect);
                let backward = conditional(&data, cause, &reversed_parents, effect, seed)?;
                Ok(DirectionComparison {
                    evidence,
                    forward,
                    backward,
                })
            });
        explanation_reply(request_id, compared, |comparison| {
            FromWorker::DirectionsCompared {
                request_id,
                comparison: Box::new(comparison),
            }
        })
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

    /// Pool mode: begins the next unit with numeric work and hands its jobs out (units without
    /// any are finished on the spot, for at most `budget_seconds`).
    fn dispatch_unit(&mut self, generation: u64, budget_seconds: f64) -> Reaction {
        if self.in_flight.is_some() {
            return Reaction::default();
        }
        // Family fits on the GPU go in lockstep rounds, one request per fit: more of them per
        // unit than the compute workers would take keep the device busier.
        let width = if self.families_on_gpu() {
            self.workers().max(GPU_FAMILY_WIDTH)
        } else {
            self.workers()
        };
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        let started = now_seconds();
        loop {
            if session.is_finished() || !session.begin_unit(width) {
                return self.end_run();
            }
            let jobs: Vec<Job<'static>> = session
                .unit_jobs()
                .into_iter()
                .map(Job::into_owned)
                .collect();
            if jobs.is_empty() {
                session.finish_unit(Vec::new());
                if now_seconds() - started >= budget_seconds {
                    return Reaction {
                        messages: self.progress_if_due(),
                        step: Some(generation),
                        ..Reaction::default()
                    };
                }
                continue;
            }
            self.batch += 1;
            self.in_flight = Some(self.batch);
            return Reaction {
                dispatch: Some(Dispatch {
                    batch: self.batch,
                    data_id: self.data_id,
                    jobs,
                }),
                ..Reaction::default()
            };
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

    /// The outcomes of batch `batch` from the compute workers, in the jobs' order: finishes the
    /// unit, reports, and schedules the next unit unless the run is paused or over. Outcomes of
    /// a batch no longer wanted (the run was stopped or replaced) are dropped.
    pub fn outcomes(&mut self, batch: u64, outcomes: Vec<Outcome>) -> Reaction {
        self.outcomes_with_traffic(batch, outcomes, None)
    }

    /// [`Driver::outcomes`] of a batch the GPU computed whole, with what crossed to and from the
    /// device meanwhile (`traffic`), which the run's result counts as the CLI's does
    /// (`gpu.steady_state`).
    pub fn outcomes_with_traffic(
        &mut self,
        batch: u64,
        outcomes: Vec<Outcome>,
        traffic: Option<DeviceTraffic>,
    ) -> Reaction {
        if self.in_flight != Some(batch) {
            return Reaction::default();
        }
        self.in_flight = None;
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        if let Some(traffic) = traffic {
            session.count_device_traffic(traffic);
        }
        session.finish_unit(outcomes);
        // The probes placed the run's work: the badge says where (and why) once, before the
        // result when this unit was the last.
        let placed = !self.probing();
        let mut messages = Vec::new();
        if placed && !self.placements_told {
            self.placements_told = true;
            messages.push(self.backend_message(false));
        }
        if self.session.as_ref().is_some_and(Session::is_finished) {
            let mut end = self.end_run();
            messages.append(&mut end.messages);
            end.messages = messages;
            return end;
        }
        messages.extend(self.progress_if_due());
        messages.extend(self.save_if_due());
        Reaction {
            messages,
            step: (!self.paused).then_some(self.generation),
            ..Reaction::default()
        }
    }

    /// A compute worker died (or could not start) while batch `batch` was out: the unit is
    /// dropped and planned again on fresh workers. After [`MAX_POOL_LOSSES`] losses in one run
    /// the run goes on in this worker alone.
    pub fn compute_lost(&mut self, batch: u64, why: &str) -> Reaction {
        if self.in_flight != Some(batch) {
            return Reaction::default();
        }
        self.in_flight = None;
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        session.abandon_unit();
        self.losses += 1;
        let mut messages = Vec::new();
        if self.losses >= MAX_POOL_LOSSES {
            self.workers = 1;
            self.pool_given_up = true;
            messages.push(FromWorker::Compute {
                run_id: self.run_id,
                workers: 1,
            });
            web_log(&format!(
                "occam: {} compute workers lost ({why}); this worker computes alone now",
                self.losses
            ));
        }
        Reaction {
            messages,
            step: (!self.paused).then_some(self.generation),
            reset_pool: true,
            ..Reaction::default()
        }
    }
}

/// A note for the browser's console (nothing natively).
fn web_log(_message: &str) {
    #[cfg(target_arch = "wasm32")]
    web_sys::console::warn_1(&_message.into());
}

/// A compute worker's state: the data its jobs read. It answers each [`ToCompute`] message
/// ([`crate::worker::protocol::encode_compute`] bytes) with a [`FromCompute`] one, or nothing for data.
#[derive(Debug, Default)]
pub struct ComputeWorker {
    data: Option<(u64, DMatrix<f64>)>,
}

impl ComputeWorker {
    pub fn new() -> Self {
        Self::default()
    }

    /// Handles one message; the reply to post back, if any.
    pub fn handle(&mut self, bytes: &[u8]) -> Option<Vec<u8>> {
        let reply = match decode_compute::<ToCompute<'static>>(bytes) {
            Ok(ToCompute::Data {
                data_id,
                rows,
                cols,
                values,
            }) => {
                self.data = (values.len() == rows * cols)
                    .then(|| (data_id, DMatrix::from_column_slice(rows, cols, &values)));
                return None;
            }
            Ok(ToCompute::Jobs {
                batch,
                first,
                data_id,
                jobs,
            }) => match &self.data {
                Some((id, data)) if *id == data_id => FromCompute::Done {
                    batch,
                    first,
                    outcomes: jobs.iter().map(|job| job.run(data)).collect(),
                },
                _ => FromCompute::Refused {
                    batch,
                    first,
                    count: jobs.len(),
                    message: format!("no data {data_id} in this compute worker"),
                },
            },
            Err(message) => FromCompute::Refused {
                batch: 0,
                first: 0,
                count: 0,
                message,
            },
        };
        Some(encode_compute(&reply))
    }
}

/// The message a compute worker needs before jobs on `data`.
pub fn data_message(data_id: u64, data: &DMatrix<f64>) -> Vec<u8> {
    encode_compute(&ToCompute::Data {
        data_id,
        rows: data.nrows(),
        cols: data.ncols(),
        values: std::borrow::Cow::Borrowed(data.as_slice()),
    })
}

/// The message running jobs `range` of `dispatch`.
pub fn jobs_message(dispatch: &Dispatch, range: std::ops::Range<usize>) -> Vec<u8> {
    encode_compute(&ToCompute::Jobs {
        batch: dispatch.batch,
        first: range.start,
        data_id: dispatch.data_id,
        jobs: dispatch.jobs[range].to_vec(),
    })
}

/// Jobs per message when `jobs` go to `workers` workers: about two messages per worker, so the
/// workers balance while few messages travel.
pub fn jobs_per_message(jobs: usize, workers: usize) -> usize {
    jobs.div_ceil(2 * workers.max(1)).max(1)
}

/// Reads a compute worker's reply: the batch, the first job's index and one outcome per job. A
/// refusal (the worker lacked the data, or could not read the jobs) or an unreadable reply is an
/// error: the jobs did not run, so the unit is to be planned again, not failed.
pub fn read_reply(bytes: &[u8]) -> Result<(u64, usize, Vec<Outcome>), String> {
    match decode_compute::<FromCompute>(bytes)? {
        FromCompute::Done {
            batch,
            first,
            outcomes,
        } => Ok((batch, first, outcomes)),
        FromCompute::Refused { message, .. } => Err(message),
    }
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

/// Most rows an edge's explanation fits on: each family fit is O(N M²), and a few hundred rows
/// give the evidence of a clear edge many nats to spare.
pub const EXPLAIN_MAX_ROWS: usize = 500;
/// Inducing points of an explanation's family fits (the exact search's default size).
pub const EXPLAIN_INDUCING: usize = 20;

/// The evidence of `edge` in `dag` on `data`: the families its removal and reversal change,
/// fitted as the exact search fits them (`discovery::explain`), one after another.
fn edge_evidence(
    data: &DMatrix<f64>,
    dag: &Dag,
    edge: (usize, usize),
    seed: u64,
) -> Result<EdgeEvidence, String> {
    let settings = FamilyScoreSettings::with_inducing(EXPLAIN_INDUCING);
    let plan =
        EdgeEvidencePlan::for_edges(dag, &[edge], settings, seed).map_err(|e| e.to_string())?;
    let outcomes: Vec<Outcome> = plan.jobs().iter().map(|job| job.run(data)).collect();
    plan.assemble(&outcomes)
        .map_err(|e| e.to_string())?
        .pop()
        .ok_or_else(|| "the edge is not in the graph".to_string())
}

/// One family's fitted conditional along `shown_parent`, fitted as the explanations fit families.
fn conditional(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    shown_parent: usize,
    seed: u64,
) -> Result<ConditionalCurve, String> {
    let settings = FamilyScoreSettings::with_inducing(EXPLAIN_INDUCING);
    fitted_conditional(
        data,
        child,
        parents,
        shown_parent,
        &settings,
        seed,
        &CurveSettings::default(),
    )
    .map_err(|e| e.to_string())
}

/// At most [`EXPLAIN_MAX_ROWS`] rows of `data`: all of them when there are no more, else a subset
/// drawn from `seed` (in their original order).
fn explain_rows(data: &DMatrix<f64>, seed: u64) -> DMatrix<f64> {
    let rows = data.nrows();
    if rows <= EXPLAIN_MAX_ROWS {
        return data.clone();
    }
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed);
    let mut picked = rand::seq::index::sample(&mut rng, rows, EXPLAIN_MAX_ROWS).into_vec();
    picked.sort_unstable();
    DMatrix::from_fn(EXPLAIN_MAX_ROWS, data.ncols(), |r, c| data[(picked[r], c)])
}

/// The reply to explanation request `request_id`: `reply(value)` when it was answered,
/// `ExplainFailed` with the reason when not.
fn explanation_reply<T>(
    request_id: u64,
    answered: Result<T, String>,
    reply: impl FnOnce(T) -> FromWorker,
) -> FromWorker {
    answered.map_or_else(
        |message| FromWorker::ExplainFailed {
            request_id,
            message,
        },
        reply,
    )
}

#[cfg(test)]
mod tests;
