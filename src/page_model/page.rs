//! The page's state and every change made to it, without the browser: what the worker's replies,
//! the user's commands and the watchdog do to the run, the data, the result and the messages.
//!
//! Why a separate, native module (as `driver.rs` is for the worker): the page (`app`, wasm only)
//! is a shell of signals, files and timers; everything that decides what the page shows after a
//! reply or a click lives here, in [`PageModel`], and is tested natively. A transition returns the
//! [`PageEffect`]s the shell must carry out (a request to send, a file to read); the shell then
//! publishes the model's fields to the signals its components read.

use crate::data::DatasetSummary;
use crate::engine::{RunResult, Snapshot, Status};
use crate::generate::SimulationSpec;
use crate::page_model::drawing::edge_weight;
use crate::page_model::truth::Truth;
use crate::page_model::History;
use crate::worker::protocol::{
    ComputeBackend, ErrorReport, FromWorker, ProblemReport, RunRequest, ToWorker,
};

/// What the page knows about the worker's compute backend.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendState {
    /// The worker has not answered the ping yet.
    Probing,
    Known {
        backend: ComputeBackend,
        /// The WebGPU adapter the browser granted (described), whether or not it computes.
        adapter: Option<String>,
        /// Why the adapter is not computing, when there is one and it is not.
        note: Option<String>,
        /// The run left the GPU (it failed) and goes on on the CPU.
        switched: bool,
    },
    /// The worker failed to start or died.
    Unavailable,
}

/// What the page shows about the current file.
#[derive(Debug, Clone, PartialEq)]
pub enum DataState {
    Empty,
    Reading {
        file_name: String,
        bytes_read: usize,
        total_bytes: usize,
    },
    Loaded {
        file_name: String,
        summary: DatasetSummary,
        delimiter: char,
        problems: Vec<ProblemReport>,
        preview: Vec<Vec<f64>>,
    },
    Rejected {
        file_name: String,
        error: ErrorReport,
    },
}

impl DataState {
    /// The loaded data's column names.
    pub fn names(&self) -> Option<Vec<String>> {
        match self {
            DataState::Loaded { summary, .. } => Some(summary.names.clone()),
            _ => None,
        }
    }

    /// The loaded file's name without its extension, for export file names.
    pub fn stem(&self) -> Option<String> {
        match self {
            DataState::Loaded { file_name, .. } => Some(
                file_name
                    .rsplit_once('.')
                    .map_or(file_name.as_str(), |(s, _)| s)
                    .to_string(),
            ),
            _ => None,
        }
    }
}

/// Where the run is, from the page's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Idle,
    /// Start was sent; the first snapshot has not arrived.
    Starting,
    Running,
    Paused,
    /// The run ended (its result says how: done, stopped or failed).
    Ended(Status),
}

impl RunState {
    /// Whether a run is starting, running or paused.
    pub fn active(self) -> bool {
        matches!(
            self,
            RunState::Starting | RunState::Running | RunState::Paused
        )
    }
}

/// The explanation of one edge or variable of the result on screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Explanation {
    None,
    /// Asked of the worker (`subject`: "a → b" or a variable's name); it is refitting.
    Working {
        subject: String,
    },
    Edge(Box<crate::discovery::explain::EdgeEvidence>),
    Curve(Box<crate::discovery::explain::ConditionalCurve>),
    /// An edge and its reversal side by side.
    Directions(Box<crate::discovery::explain::DirectionComparison>),
    Failed {
        subject: String,
        message: String,
    },
}

/// Where a simulation from the drawn graph is.
#[derive(Debug, Clone, PartialEq)]
pub enum SimulationState {
    Idle,
    /// Sent to the worker; its data have not come back yet.
    Running,
    /// The worker could not simulate the drawing, and why.
    Failed(String),
}

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
    pub backend: BackendState,
    /// Compute workers of the current or last run (1: the worker computes alone).
    pub compute_workers: Option<usize>,
    pub data: DataState,
    pub run: RunState,
    /// Runs started on this page so far (a lesson's check waits for a run after its step's change).
    pub runs_started: u64,
    pub snapshot: Option<Snapshot>,
    /// Snapshots received during the current run (the end-to-end test reads it to check the rate).
    pub snapshots_seen: u64,
    /// A pause was asked for and the worker has not confirmed it yet (it reads requests between
    /// units of work, so inside a long fit the pause waits for the fit's end).
    pub pause_pending: bool,
    pub history: History,
    pub result: Option<RunResult>,
    /// Set when the result shown was loaded from a saved run record (its file name).
    pub record_file: Option<String>,
    pub truth: Option<Truth>,
    /// The one error the banner shows (worker, data, run or record problems).
    pub error: Option<String>,
    /// Whether the worker died and must be restarted.
    pub worker_dead: bool,
    /// The current run saved whole ([`FromWorker::Saved`]): if its worker dies, a fresh one can
    /// go on from here.
    pub saved_run: Option<String>,
    /// A simulation from the drawn graph in progress or failed.
    pub simulation: SimulationState,
    /// The explanation of an edge or variable of the result on screen.
    pub explanation: Explanation,
    /// Id of the latest file sent to the worker; replies about older files are ignored.
    load_seq: u64,
    /// Id of the latest run started; messages about older runs are ignored.
    run_seq: u64,
    /// Id of the latest explanation asked for; answers to older ones are ignored.
    explain_seq: u64,
    /// The column names the knowledge grid was made for (kept when the same file is read again).
    knowledge_names: Vec<String>,
    /// When the worker last sent anything (ms since the epoch), for the watchdog.
    last_message_ms: f64,
    /// The current file's name and size (its bytes stay with the shell), kept so a restarted
    /// worker can be given it again.
    source: Option<(String, usize)>,
    /// The current run's latest [`FromWorker::Checkpoint`]: shown if the worker must be ended
    /// because it is inside a long unit of work when the user stops the run.
    checkpoint: Option<RunResult>,
    /// The user chose to go on with the saved run: sent once the fresh worker holds the data.
    continue_pending: bool,
}

impl PageModel {
    /// A page with nothing loaded, its worker starting at `now_ms`.
    pub fn new(now_ms: f64) -> Self {
        Self {
            backend: BackendState::Probing,
            compute_workers: None,
            data: DataState::Empty,
            run: RunState::Idle,
            runs_started: 0,
            snapshot: None,
            snapshots_seen: 0,
            pause_pending: false,
            history: History::default(),
            result: None,
            record_file: None,
            truth: None,
            error: None,
            worker_dead: false,
            saved_run: None,
            simulation: SimulationState::Idle,
            explanation: Explanation::None,
            load_seq: 0,
            run_seq: 0,
            explain_seq: 0,
            knowledge_names: Vec::new(),
            last_message_ms: now_ms,
            source: None,
            checkpoint: None,
            continue_pending: false,
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
        } else if matches!(self.data, DataState::Reading { .. }) {
            Some("data are being read")
        } else if self.simulation == SimulationState::Running {
            // The simulated data replace what is loaded when they arrive: a run started on the
            // old data would be dropped with them.
            Some("data are being simulated")
        } else {
            None
        }
    }

    /// The word the `status` element shows.
    pub fn status_code(&self) -> &'static str {
        match self.run {
            RunState::Starting | RunState::Running => "running",
            RunState::Paused => "paused",
            RunState::Ended(Status::Done) => "done",
            RunState::Ended(Status::Stopped) => "stopped",
            RunState::Ended(Status::Failed) => "failed",
            RunState::Ended(Status::Running) => "running",
            RunState::Idle => match self.data {
                DataState::Reading { .. } => "loading",
                DataState::Loaded { .. } => "ready",
                _ if self.result.is_some() => "done",
                _ => "idle",
            },
        }
    }

    /// The variable names shown: the result's when a result is on screen, else the data's.
    pub fn names(&self) -> Option<Vec<String>> {
        self.result
            .as_ref()
            .map(|r| r.names.clone())
            .or_else(|| self.data.names())
    }

    /// Restarts the watchdog's clock (a request that expects answers was sent at `now_ms`).
    pub fn mark_alive(&mut self, now_ms: f64) {
        self.last_message_ms = now_ms;
    }

    /// Seconds the worker has been silent at `now_ms` when it should be answering (a run going,
    /// data being read) and that is longer than `limit_seconds`: the watchdog's verdict that it is
    /// stuck. `None` when all is well.
    pub fn silent_too_long(&self, now_ms: f64, limit_seconds: f64) -> Option<f64> {
        let waiting = matches!(self.run, RunState::Starting | RunState::Running)
            || matches!(self.data, DataState::Reading { .. });
        let silent = (now_ms - self.last_message_ms) / 1000.0;
        (waiting && !self.worker_dead && silent > limit_seconds).then_some(silent)
    }

    /// Shows `message` in the error banner (replacing what it showed).
    pub fn show_error(&mut self, message: impl Into<String>) {
        self.error = Some(message.into());
    }

    /// Clears the error banner.
    pub fn dismiss_error(&mut self) {
        self.error = None;
    }

    /// A new run id (messages about older runs are ignored from now on).
    fn next_run_id(&mut self) -> u64 {
        self.run_seq += 1;
        self.pause_pending = false;
        self.checkpoint = None;
        self.run_seq
    }

    /// A new file `file_name` of `bytes` bytes is to be read at `now_ms`: what was on screen for
    /// the old one goes. Returns the load's id, for [`PageModel::is_current_load`].
    pub fn begin_load(&mut self, file_name: String, bytes: usize, now_ms: f64) -> u64 {
        self.source = Some((file_name.clone(), bytes));
        self.history = History::default();
        self.error = None;
        self.explanation = Explanation::None;
        self.result = None;
        self.record_file = None;
        self.snapshot = None;
        self.run = RunState::Idle;
        self.reading(file_name, bytes, now_ms)
    }

    /// Marks the current file as being read again (load id returned), keeping the screen.
    fn reading(&mut self, file_name: String, total_bytes: usize, now_ms: f64) -> u64 {
        self.load_seq += 1;
        self.mark_alive(now_ms);
        self.data = DataState::Reading {
            file_name,
            bytes_read: 0,
            total_bytes,
        };
        self.load_seq
    }

    /// Whether `load_id` is still the file wanted (a newer one may have been chosen meanwhile).
    pub fn is_current_load(&self, load_id: u64) -> bool {
        load_id == self.load_seq
    }

    /// The file of load `load_id` could not be read or sent, and why.
    pub fn load_failed(&mut self, load_id: u64, message: String) {
        if self.is_current_load(load_id) {
            self.data = DataState::Empty;
            self.error = Some(message);
        }
    }

    /// A saved run record `file_name` is shown in place of a run.
    pub fn show_record(&mut self, file_name: String, result: RunResult) {
        self.error = None;
        self.run = RunState::Idle;
        self.snapshot = None;
        self.history = History::default();
        self.result = Some(result);
        self.record_file = Some(file_name);
    }

    /// Starts a run of `request` (its run id is filled in here) at `now_ms`: what the last run
    /// showed goes, and the request to send is returned.
    pub fn start_run(&mut self, mut request: RunRequest, now_ms: f64) -> ToWorker {
        self.error = None;
        self.saved_run = None;
        self.result = None;
        self.record_file = None;
        self.snapshot = None;
        self.snapshots_seen = 0;
        self.history = History::default();
        self.run = RunState::Starting;
        self.runs_started += 1;
        self.mark_alive(now_ms);
        self.explanation = Explanation::None;
        request.run_id = self.next_run_id();
        ToWorker::Start(Box::new(request))
    }

    /// Pause or resume, whichever the run's state calls for (`None`: no run to pause).
    pub fn toggle_pause(&mut self) -> Option<ToWorker> {
        match self.run {
            RunState::Running | RunState::Starting => {
                self.pause_pending = true;
                Some(ToWorker::Pause)
            }
            RunState::Paused => Some(ToWorker::Resume),
            _ => None,
        }
    }

    /// The id of the run a stop request is sent for, to check later with
    /// [`PageModel::stop_unanswered`].
    pub fn stop_requested(&self) -> u64 {
        self.run_seq
    }

    /// Whether the stop sent for run `run_id` is still unanswered (that run is still going).
    pub fn stop_unanswered(&self, run_id: u64) -> bool {
        self.run_active() && self.run_seq == run_id
    }

    /// The worker did not answer a stop in time and is replaced (the shell starts the fresh one,
    /// at `now_ms`): the run's last checkpoint is shown as its stopped result.
    pub fn end_unanswered_stop(&mut self, now_ms: f64) {
        // A stopped run is over: nothing to go on with.
        self.saved_run = None;
        let checkpoint = self.checkpoint.take();
        let had_checkpoint = checkpoint.is_some();
        // A newer run id makes anything the old worker still had in flight stale.
        self.next_run_id();
        self.worker_restarted(now_ms);
        self.result = checkpoint;
        self.record_file = None;
        self.run = RunState::Ended(Status::Stopped);
        let shown = if had_checkpoint {
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
        self.worker_dead = false;
        self.error = None;
        if self.run_active() {
            self.run = RunState::Idle;
        }
        self.backend = BackendState::Probing;
        self.mark_alive(now_ms);
    }

    /// Goes on with the saved run in a fresh worker (the shell starts it, at `now_ms`) once it
    /// holds the data again. False when no run is saved.
    pub fn continue_saved_run(&mut self, now_ms: f64) -> bool {
        if self.saved_run.is_none() {
            return false;
        }
        self.continue_pending = true;
        self.worker_restarted(now_ms);
        self.run = RunState::Starting;
        true
    }

    /// The worker died or was ended (`message` says why): whatever waited for it is told, and
    /// everything on the page stays.
    pub fn worker_died(&mut self, message: &str) {
        self.worker_dead = true;
        self.backend = BackendState::Unavailable;
        if let Explanation::Working { subject } = &self.explanation {
            self.explanation = Explanation::Failed {
                subject: subject.clone(),
                message: "the worker stopped before it was done: restart it and ask again".into(),
            };
        }
        if self.simulation == SimulationState::Running {
            self.simulation = SimulationState::Failed(
                "the worker stopped before the simulation was done: restart it and simulate again"
                    .into(),
            );
        }
        if self.run_active() {
            self.run = RunState::Idle;
        }
        if matches!(self.data, DataState::Reading { .. }) {
            self.data = DataState::Empty;
        }
        self.error = Some(format!(
            "{message}. Your data and results on this page are kept: restart the worker to go on."
        ));
    }

    /// Asks for data simulated from a drawn graph.
    pub fn simulate(&mut self, spec: SimulationSpec) -> ToWorker {
        self.simulation = SimulationState::Running;
        ToWorker::Simulate { spec }
    }

    /// Asks for the evidence of `edge` of the result on screen, or (`both_directions`) for the
    /// edge and its reversal drawn side by side. `None` without a result.
    pub fn ask_about_edge(
        &mut self,
        edge: (usize, usize),
        both_directions: bool,
    ) -> Option<ToWorker> {
        let r = self.result.as_ref()?;
        let (edges, seed) = (r.edges.clone(), r.seed);
        let name = |i: usize| r.names.get(i).cloned().unwrap_or_default();
        let (cause, effect) = (name(edge.0), name(edge.1));
        let subject = if both_directions {
            format!("{cause} → {effect} against {effect} → {cause}")
        } else {
            format!("{cause} → {effect}")
        };
        let request_id = self.next_explanation(subject);
        Some(if both_directions {
            ToWorker::CompareDirections {
                request_id,
                edges,
                edge,
                seed,
            }
        } else {
            ToWorker::ExplainEdge {
                request_id,
                edges,
                edge,
                seed,
            }
        })
    }

    /// Asks about the pair `(cause, effect)` clicked in the drawn graph or the heatmap: an edge of
    /// the result on screen in either direction is explained as its "Why?" button explains it; a
    /// pair the result does not join is scored as if the edge were added (cause → effect, or the
    /// other way when that direction would close a cycle), so the answer says how strongly the
    /// data favour leaving it out. `None` without a result, or for a variable with itself.
    pub fn ask_about_pair(&mut self, pair: (usize, usize)) -> Option<ToWorker> {
        let r = self.result.as_ref()?;
        let (a, b) = pair;
        let d = r.names.len();
        if a == b || a >= d || b >= d {
            return None;
        }
        if r.edges.contains(&(a, b)) {
            return self.ask_about_edge((a, b), false);
        }
        if r.edges.contains(&(b, a)) {
            return self.ask_about_edge((b, a), false);
        }
        let with = |edge: (usize, usize)| {
            let mut edges = r.edges.clone();
            edges.push(edge);
            crate::graph::Dag::from_edges(d, &edges)
                .ok()
                .map(|_| (edge, edges))
        };
        // One of the two directions keeps the graph acyclic: cycles both ways would need paths
        // b ⇝ a and a ⇝ b in the DAG itself.
        let (edge, edges) = with((a, b)).or_else(|| with((b, a)))?;
        let seed = r.seed;
        let subject = format!(
            "{} → {}, which the graph leaves out (scored as if added)",
            r.names[edge.0], r.names[edge.1]
        );
        let request_id = self.next_explanation(subject);
        Some(ToWorker::ExplainEdge {
            request_id,
            edges,
            edge,
            seed,
        })
    }

    /// Asks for variable `child`'s fitted conditional along its strongest parent (the parent
    /// with the largest weight in the result's adjacency). `None` without a result or a parent.
    pub fn ask_about_variable(&mut self, child: usize) -> Option<ToWorker> {
        let r = self.result.as_ref()?;
        let strongest = r
            .edges
            .iter()
            .filter(|&&(_, j)| j == child)
            .map(|&(i, _)| i)
            .max_by(|&a, &b| {
                edge_weight(&r.adjacency, a, child).total_cmp(&edge_weight(&r.adjacency, b, child))
            })?;
        let (edges, seed, name) = (r.edges.clone(), r.seed, r.names.get(child)?.clone());
        let request_id = self.next_explanation(name);
        Some(ToWorker::FitConditional {
            request_id,
            edges,
            child,
            shown_parent: strongest,
            seed,
        })
    }

    /// Marks a new explanation of `subject` as asked for; returns its request id.
    fn next_explanation(&mut self, subject: String) -> u64 {
        self.explain_seq += 1;
        self.explanation = Explanation::Working { subject };
        self.explain_seq
    }

    /// What the worker's `reply`, received at `now_ms`, changes, and what the shell must do.
    pub fn on_reply(&mut self, reply: FromWorker, now_ms: f64) -> Vec<PageEffect> {
        self.last_message_ms = now_ms;
        let mut effects = Vec::new();
        match reply {
            FromWorker::Ready => {
                effects.push(PageEffect::Send(ToWorker::Ping));
                // A restarted worker gets the current file again; what is on screen stays (the
                // result, the last snapshot and curves, the note on why the worker restarted),
                // but not an explanation the old worker left unanswered: it can be asked again.
                if let Some((name, bytes)) = self.source.clone() {
                    if !matches!(self.data, DataState::Rejected { .. }) {
                        self.explanation = Explanation::None;
                        let load_id = self.reading(name, bytes, now_ms);
                        effects.push(PageEffect::ReadSource { load_id });
                    }
                }
            }
            // Alive inside a long unit: the time of this message is all the watchdog needs.
            FromWorker::Busy => {}
            FromWorker::Pong {
                backend,
                adapter,
                note,
                switched,
            } => {
                self.backend = BackendState::Known {
                    backend,
                    adapter,
                    note,
                    switched,
                }
            }
            FromWorker::LoadProgress { load_id, .. }
            | FromWorker::DataLoaded { load_id, .. }
            | FromWorker::DataRejected { load_id, .. }
                if !self.is_current_load(load_id) => {}
            FromWorker::RunRefused { run_id, .. }
            | FromWorker::Progress { run_id, .. }
            | FromWorker::Checkpoint { run_id, .. }
            | FromWorker::Finished { run_id, .. }
            | FromWorker::Compute { run_id, .. }
            | FromWorker::Saved { run_id, .. }
                if run_id != self.run_seq => {}
            FromWorker::Checkpoint { result, .. } => self.checkpoint = Some(*result),
            FromWorker::Compute { workers, .. } => self.compute_workers = Some(workers),
            FromWorker::Saved { session, .. } => self.saved_run = Some(session),
            FromWorker::LoadProgress {
                file_name,
                bytes_read,
                total_bytes,
                ..
            } => {
                self.data = DataState::Reading {
                    file_name,
                    bytes_read,
                    total_bytes,
                }
            }
            FromWorker::DataLoaded {
                file_name,
                summary,
                delimiter,
                problems,
                preview,
                ..
            } => {
                // The grid survives reading the same columns again (a restarted worker).
                if self.knowledge_names != summary.names {
                    self.knowledge_names = summary.names.clone();
                    effects.push(PageEffect::ResetKnowledge {
                        columns: summary.columns,
                    });
                }
                self.data = DataState::Loaded {
                    file_name,
                    summary,
                    delimiter,
                    problems,
                    preview,
                };
                if std::mem::take(&mut self.continue_pending) {
                    if let Some(session) = self.saved_run.clone() {
                        let run_id = self.next_run_id();
                        self.result = None;
                        self.record_file = None;
                        self.run = RunState::Starting;
                        self.mark_alive(now_ms);
                        effects.push(PageEffect::Send(ToWorker::Continue { run_id, session }));
                    }
                }
            }
            FromWorker::DataRejected {
                file_name, error, ..
            } => {
                self.error = Some(format!("{file_name} was not loaded: {}", error.message));
                self.data = DataState::Rejected { file_name, error };
            }
            FromWorker::RunRefused { message, .. } => {
                self.run = RunState::Idle;
                self.error = Some(message);
            }
            FromWorker::Progress {
                snapshot, paused, ..
            } => {
                // A late snapshot after the run ended (or after the worker moved on) is ignored.
                if !matches!(self.run, RunState::Idle | RunState::Ended(_)) {
                    self.history.record(&snapshot);
                    self.snapshots_seen += 1;
                    self.snapshot = Some(snapshot);
                    if paused {
                        self.pause_pending = false;
                    }
                    self.run = if paused {
                        RunState::Paused
                    } else {
                        RunState::Running
                    };
                }
            }
            FromWorker::Finished {
                snapshot, result, ..
            } => {
                if self.run_active() {
                    self.history.record(&snapshot);
                    self.snapshots_seen += 1;
                    self.snapshot = Some(snapshot);
                    self.run = RunState::Ended(result.status);
                    self.pause_pending = false;
                    // An ended run is not continued.
                    self.saved_run = None;
                    self.record_file = None;
                    self.result = Some(*result);
                }
            }
            FromWorker::Simulated {
                file_name,
                csv,
                truth_csv,
            } => {
                self.simulation = SimulationState::Idle;
                self.truth = Some(Truth {
                    file_name: "the simulated graph".into(),
                    text: truth_csv,
                });
                effects.push(PageEffect::LoadText { file_name, csv });
            }
            FromWorker::EdgeExplained {
                request_id,
                evidence,
            } => self.explained(request_id, Explanation::Edge(evidence)),
            FromWorker::ConditionalFitted { request_id, curve } => {
                self.explained(request_id, Explanation::Curve(curve))
            }
            FromWorker::DirectionsCompared {
                request_id,
                comparison,
            } => self.explained(request_id, Explanation::Directions(comparison)),
            FromWorker::ExplainFailed {
                request_id,
                message,
            } => {
                let subject = match &self.explanation {
                    Explanation::Working { subject } => subject.clone(),
                    _ => String::new(),
                };
                self.explained(request_id, Explanation::Failed { subject, message });
            }
            FromWorker::SimulationFailed { message } => {
                self.simulation = SimulationState::Failed(message);
            }
            FromWorker::Failed { message } => {
                if self.simulation == SimulationState::Running {
                    self.simulation = SimulationState::Idle;
                }
                // Whatever was waiting for an answer will not get one.
                if self.run_active() {
                    self.run = RunState::Idle;
                }
                if matches!(self.data, DataState::Reading { .. }) {
                    self.data = DataState::Empty;
                }
                self.error = Some(message);
            }
            FromWorker::Crashed { message } => {
                self.worker_died(&message);
                effects.push(PageEffect::EndWorker);
            }
        }
        effects
    }

    /// Shows the answer to explanation request `request_id` if it is the latest asked for.
    fn explained(&mut self, request_id: u64, explanation: Explanation) {
        if request_id == self.explain_seq {
            self.explanation = explanation;
        }
    }
}

#[cfg(test)]
mod tests;
