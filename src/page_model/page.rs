//! The page's state and every change made to it, without the browser: what the worker's replies,
//! the user's commands and the watchdog do to the run, the data, the result and the messages.
//!
//! Why a separate, native module (as `driver.rs` is for the worker): the page (`app`, wasm only)
//! is a shell of signals, files and timers; everything that decides what the page shows after a
//! reply or a click lives here, in [`PageModel`], and is tested natively. A transition returns the
//! [`PageEffect`]s the shell must carry out (a request to send, a file to read); the shell then
//! publishes the model's fields to the signals its components read.
//!
//! The model is four sub-models, each owning its fields and transitions: [`LoadModel`] (the data,
//! the ground truth, simulations), [`RunModel`] (the run and its result), [`ExplainModel`] (the
//! explanation on screen) and [`WorkerHealth`] (the backend, death, the watchdog's clock).
//! [`PageModel`] holds them with the one error banner they share; its commands and
//! [`PageModel::on_reply`] route each event to the sub-models it concerns, and the effects that
//! cross them (the banner, the watchdog's clock, clearing what other data make stale) stay here,
//! in plain sight.

mod explain;
mod health;
mod load;
mod run;

pub use explain::{ExplainModel, Explanation};
pub use health::{BackendState, WorkerHealth};
pub use load::{DataState, LoadModel, SimulationState};
pub use run::{RunModel, RunState};

use crate::engine::{RunResult, Status};
use crate::generate::SimulationSpec;
use crate::worker::protocol::{FromWorker, RunRequest, ToWorker};

/// What the shell must do after a transition, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum PageEffect {
    /// Post this request to the worker.
    Send(ToWorker),
    /// Read the current file's bytes and send them to the worker as load `load_id`.
    ReadSource { load_id: u64 },
    /// Make `csv` the current file `file_name` and load it as if it had been dropped.
    LoadText { file_name: String, csv: String },
    /// The data have other columns: every prior-knowledge rule free, every tier empty.
    ResetKnowledge { columns: usize },
    /// End the worker and detach its handlers: it reported its own death, and what it may still
    /// send (the runtime's error after its panic) must not replace that report.
    EndWorker,
}

/// The page's state: everything the worker's replies and the user's commands change.
#[derive(Debug, Clone, PartialEq)]
pub struct PageModel {
    /// The worker's backend, death and the watchdog's clock.
    pub worker: WorkerHealth,
    /// The data, the ground truth and simulations.
    pub load: LoadModel,
    /// The run and its result.
    pub run: RunModel,
    /// The explanation of an edge or variable of the result on screen.
    pub explain: ExplainModel,
    /// The one error the banner shows (worker, data, run or record problems).
    pub error: Option<String>,
}

impl PageModel {
    /// A page with nothing loaded, its worker starting at `now_ms`.
    pub fn new(now_ms: f64) -> Self {
        Self {
            worker: WorkerHealth::new(now_ms),
            load: LoadModel::new(),
            run: RunModel::new(),
            explain: ExplainModel::new(),
            error: None,
        }
    }

    /// Whether a run is starting, running or paused.
    pub fn run_active(&self) -> bool {
        self.run.active()
    }

    /// What keeps the page from starting other work (a run, loading other data, simulating), or
    /// `None` when nothing is under way.
    pub fn busy_with(&self) -> Option<&'static str> {
        if self.run_active() {
            Some("a run is in progress")
        } else if self.load.reading_now() {
            Some("data are being read")
        } else if self.load.simulation == SimulationState::Running {
            // The simulated data replace what is loaded when they arrive: a run started on the
            // old data would be dropped with them.
            Some("data are being simulated")
        } else {
            None
        }
    }

    /// The word the `status` element shows.
    pub fn status_code(&self) -> &'static str {
        match self.run.state {
            RunState::Starting | RunState::Running => "running",
            RunState::Paused => "paused",
            RunState::Ended(Status::Done) => "done",
            RunState::Ended(Status::Stopped) => "stopped",
            RunState::Ended(Status::Failed) => "failed",
            RunState::Ended(Status::Running) => "running",
            RunState::Idle => match self.load.data {
                DataState::Reading { .. } => "loading",
                DataState::Loaded { .. } => "ready",
                _ if self.run.result.is_some() => "done",
                _ => "idle",
            },
        }
    }

    /// The variable names shown: the result's when a result is on screen, else the data's.
    pub fn names(&self) -> Option<Vec<String>> {
        self.run
            .result
            .as_ref()
            .map(|r| r.names.clone())
            .or_else(|| self.load.data.names())
    }

    /// Restarts the watchdog's clock (a request that expects answers was sent at `now_ms`).
    pub fn mark_alive(&mut self, now_ms: f64) {
        self.worker.mark_alive(now_ms);
    }

    /// Seconds the worker has been silent at `now_ms` when it should be answering (a run going,
    /// data being read) and that is longer than `limit_seconds`: the watchdog's verdict that it is
    /// stuck. `None` when all is well.
    pub fn silent_too_long(&self, now_ms: f64, limit_seconds: f64) -> Option<f64> {
        let waiting = matches!(self.run.state, RunState::Starting | RunState::Running)
            || self.load.reading_now();
        self.worker.silent_too_long(now_ms, limit_seconds, waiting)
    }

    /// Shows `message` in the error banner (replacing what it showed).
    pub fn show_error(&mut self, message: impl Into<String>) {
        self.error = Some(message.into());
    }

    /// Clears the error banner.
    pub fn dismiss_error(&mut self) {
        self.error = None;
    }

    /// A new file `file_name` of `bytes` bytes is to be read at `now_ms`: what was on screen for
    /// the old one goes. Returns the load's id, for [`PageModel::is_current_load`].
    pub fn begin_load(&mut self, file_name: String, bytes: usize, now_ms: f64) -> u64 {
        self.error = None;
        self.explain.clear();
        self.run.clear_screen();
        self.mark_alive(now_ms);
        self.load.begin(file_name, bytes)
    }

    /// Whether `load_id` is still the file wanted (a newer one may have been chosen meanwhile).
    pub fn is_current_load(&self, load_id: u64) -> bool {
        self.load.is_current(load_id)
    }

    /// The file of load `load_id` could not be read or sent, and why.
    pub fn load_failed(&mut self, load_id: u64, message: String) {
        if self.load.failed(load_id) {
            self.error = Some(message);
        }
    }

    /// A saved run record `file_name` is shown in place of a run.
    pub fn show_record(&mut self, file_name: String, result: RunResult) {
        self.error = None;
        self.run.show_record(file_name, result);
    }

    /// Starts a run of `request` (its run id is filled in here) at `now_ms`: what the last run
    /// showed goes, and the request to send is returned.
    pub fn start_run(&mut self, request: RunRequest, now_ms: f64) -> ToWorker {
        self.error = None;
        self.explain.clear();
        self.mark_alive(now_ms);
        self.run.start(request)
    }

    /// Pause or resume, whichever the run's state calls for (`None`: no run to pause).
    pub fn toggle_pause(&mut self) -> Option<ToWorker> {
        self.run.toggle_pause()
    }

    /// The id of the run a stop request is sent for, to check later with
    /// [`PageModel::stop_unanswered`].
    pub fn stop_requested(&self) -> u64 {
        self.run.seq
    }

    /// Whether the stop sent for run `run_id` is still unanswered (that run is still going).
    pub fn stop_unanswered(&self, run_id: u64) -> bool {
        self.run.stop_unanswered(run_id)
    }

    /// The worker did not answer a stop in time and is replaced (the shell starts the fresh one,
    /// at `now_ms`): the run's last checkpoint is shown as its stopped result.
    pub fn end_unanswered_stop(&mut self, now_ms: f64) {
        self.worker_restarted(now_ms);
        let shown = if self.run.stopped_unanswered() {
            "the result shown is the run as it stood after its last completed step"
        } else {
            "it had not completed a step of the run yet, so there is no graph"
        };
        self.error = Some(format!(
            "Stopped. The worker was inside one long computation and could not read the stop \
             request, so it was ended and a fresh one started with the same data; {shown}."
        ));
    }

    /// A fresh worker replaces the old one at `now_ms` (the shell starts it).
    pub fn worker_restarted(&mut self, now_ms: f64) {
        self.error = None;
        self.run.interrupted();
        self.worker.restarted(now_ms);
    }

    /// Goes on with the saved run in a fresh worker (the shell starts it, at `now_ms`) once it
    /// holds the data again. False when no run is saved.
    pub fn continue_saved_run(&mut self, now_ms: f64) -> bool {
        if self.run.saved_run.is_none() {
            return false;
        }
        self.worker_restarted(now_ms);
        self.run.continue_saved()
    }

    /// The worker died or was ended (`message` says why): whatever waited for it is told, and
    /// everything on the page stays.
    pub fn worker_died(&mut self, message: &str) {
        self.worker.died();
        self.explain.worker_died();
        self.load.worker_died();
        self.run.interrupted();
        self.error = Some(format!(
            "{message}. Your data and results on this page are kept: restart the worker to go on."
        ));
    }

    /// Asks for data simulated from a drawn graph.
    pub fn simulate(&mut self, spec: SimulationSpec) -> ToWorker {
        self.load.simulate(spec)
    }

    /// Asks for the evidence of `edge` of the result on screen, or (`both_directions`) for the
    /// edge and its reversal drawn side by side. `None` without a result.
    pub fn ask_about_edge(
        &mut self,
        edge: (usize, usize),
        both_directions: bool,
    ) -> Option<ToWorker> {
        let result = self.run.result.as_ref()?;
        Some(self.explain.about_edge(result, edge, both_directions))
    }

    /// Asks about the pair `(cause, effect)` clicked in the drawn graph or the heatmap: an edge of
    /// the result on screen in either direction is explained as its "Why?" button explains it; a
    /// pair the result does not join is scored as if the edge were added (cause → effect, or the
    /// other way when that direction would close a cycle), so the answer says how strongly the
    /// data favour leaving it out. `None` without a result, or for a variable with itself.
    pub fn ask_about_pair(&mut self, pair: (usize, usize)) -> Option<ToWorker> {
        let result = self.run.result.as_ref()?;
        self.explain.about_pair(result, pair)
    }

    /// Asks for variable `child`'s fitted conditional along its strongest parent (the parent
    /// with the largest weight in the result's adjacency). `None` without a result or a parent.
    pub fn ask_about_variable(&mut self, child: usize) -> Option<ToWorker> {
        let result = self.run.result.as_ref()?;
        self.explain.about_variable(result, child)
    }

    /// What the worker's `reply`, received at `now_ms`, changes, and what the shell must do: each
    /// reply goes to the sub-model it concerns; stale replies (an older file, run or question)
    /// are dropped there.
    pub fn on_reply(&mut self, reply: FromWorker, now_ms: f64) -> Vec<PageEffect> {
        self.worker.mark_alive(now_ms);
        let mut effects = Vec::new();
        match reply {
            FromWorker::Ready => {
                effects.push(PageEffect::Send(ToWorker::Ping));
                // A restarted worker gets the current file again; what is on screen stays (the
                // result, the last snapshot and curves, the note on why the worker restarted),
                // but not an explanation the old worker left unanswered: it can be asked again.
                if let Some(load_id) = self.load.read_again() {
                    self.explain.clear();
                    effects.push(PageEffect::ReadSource { load_id });
                }
            }
            // Alive inside a long unit: the time of this message is all the watchdog needs.
            FromWorker::Busy => {}
            FromWorker::Pong {
                backend,
                adapter,
                note,
                switched,
            } => self.worker.pong(backend, adapter, note, switched),
            FromWorker::LoadProgress {
                load_id,
                file_name,
                bytes_read,
                total_bytes,
            } => self
                .load
                .progress(load_id, file_name, bytes_read, total_bytes),
            FromWorker::DataLoaded {
                load_id,
                file_name,
                summary,
                delimiter,
                problems,
                preview,
            } => {
                let data = DataState::Loaded {
                    file_name,
                    summary,
                    delimiter,
                    problems,
                    preview,
                };
                if let Some(reset) = self.load.loaded(load_id, data) {
                    if let Some(columns) = reset {
                        effects.push(PageEffect::ResetKnowledge { columns });
                    }
                    // The fresh worker holds the data: a saved run the user chose goes on.
                    if let Some(request) = self.run.continue_request() {
                        self.mark_alive(now_ms);
                        effects.push(PageEffect::Send(request));
                    }
                }
            }
            FromWorker::DataRejected {
                load_id,
                file_name,
                error,
            } => {
                if let Some(message) = self.load.rejected(load_id, file_name, error) {
                    self.error = Some(message);
                }
            }
            FromWorker::RunRefused { run_id, message } => {
                if self.run.refused(run_id) {
                    self.error = Some(message);
                }
            }
            FromWorker::Checkpoint { run_id, result } => self.run.checkpoint(run_id, *result),
            FromWorker::Compute { run_id, workers } => self.run.compute(run_id, workers),
            FromWorker::Saved { run_id, session } => self.run.saved(run_id, session),
            FromWorker::Progress {
                run_id,
                snapshot,
                paused,
            } => self.run.progress(run_id, snapshot, paused),
            FromWorker::Finished {
                run_id,
                snapshot,
                result,
            } => self.run.finished(run_id, snapshot, *result),
            FromWorker::Simulated {
                file_name,
                csv,
                truth_csv,
            } => {
                self.load.simulated(truth_csv);
                effects.push(PageEffect::LoadText { file_name, csv });
            }
            FromWorker::SimulationFailed { message } => {
                self.load.simulation = SimulationState::Failed(message);
            }
            FromWorker::EdgeExplained {
                request_id,
                evidence,
            } => self
                .explain
                .answered(request_id, Explanation::Edge(evidence)),
            FromWorker::ConditionalFitted { request_id, curve } => {
                self.explain.answered(request_id, Explanation::Curve(curve))
            }
            FromWorker::DirectionsCompared {
                request_id,
                comparison,
            } => self
                .explain
                .answered(request_id, Explanation::Directions(comparison)),
            FromWorker::ExplainFailed {
                request_id,
                message,
            } => self.explain.failed(request_id, message),
            FromWorker::Failed { message } => {
                // Whatever was waiting for an answer will not get one.
                self.load.worker_failed();
                self.run.interrupted();
                self.error = Some(message);
            }
            FromWorker::Crashed { message } => {
                self.worker_died(&message);
                effects.push(PageEffect::EndWorker);
            }
        }
        effects
    }
}

#[cfg(test)]
mod tests;
