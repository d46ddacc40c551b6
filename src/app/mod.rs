//! The page (wasm only): Leptos components that show what the worker reports.
//!
//! Owns the user interface. It never parses data or trains anything itself: files go to the Web
//! Worker ([`worker_client`]) and the page renders the replies. The state lives in [`AppState`], a
//! bundle of signals every component reads from context. A panic anywhere in the page is turned
//! into a visible error message instead of a blank page; a worker that dies is reported and can be
//! restarted with the data re-sent.

mod charts;
mod dag_view;
mod data_panel;
mod download;
mod exact_view;
mod examples;
mod explain_view;
mod graph_editor;
mod knowledge_panel;
mod lesson_panel;
mod results_panel;
mod run_panel;
mod settings_panel;
mod worker_client;

use crate::data::DatasetSummary;
use crate::discovery::cgp::{Method, Preset};
use crate::engine::{RunResult, Snapshot, Status};
use crate::graph::Digraph;
use crate::protocol::{ComputeBackend, ErrorReport, FromWorker, ProblemReport, ToWorker};
use crate::ui::{preset_values, EdgeRule, History};
use js_sys::ArrayBuffer;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::Blob;
use worker_client::WorkerClient;

/// Entry point of the page binary.
pub fn start() {
    install_panic_hook();
    leptos::mount::mount_to_body(App);
}

/// Shows a panic in the page's fatal-error box (plain DOM, because the reactive system may be the
/// thing that broke) and logs it to the console.
fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        console_error_panic_hook::hook(info);
        let message =
            format!("Occam stopped on an internal error: {info}. Reload the page to start again.");
        // The first panic is the cause; later ones (a trapped wasm instance) only follow from it.
        if let Some(el) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.get_element_by_id("fatal"))
            .filter(|el| el.has_attribute("hidden"))
        {
            el.set_text_content(Some(&message));
            let _ = el.set_attribute("data-testid", "error");
            let _ = el.remove_attribute("hidden");
        }
    }));
}

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

/// A ground truth the user uploaded (or an example brought along).
#[derive(Debug, Clone, PartialEq)]
pub struct Truth {
    pub file_name: String,
    /// The raw text, kept so it can be re-read against other column names.
    pub text: String,
}

/// The page's state, shared through context. Every field is a signal or a stored value, so the
/// bundle is `Copy`.
#[derive(Clone, Copy)]
pub struct AppState {
    pub backend: RwSignal<BackendState>,
    /// Compute workers of the current or last run (1: the worker computes alone).
    pub compute_workers: RwSignal<Option<usize>>,
    pub data: RwSignal<DataState>,
    pub run: RwSignal<RunState>,
    /// Runs started on this page so far (a lesson's check waits for a run after its step's change).
    pub runs_started: RwSignal<u64>,
    pub snapshot: RwSignal<Option<Snapshot>>,
    /// Snapshots received during the current run (the end-to-end test reads it to check the rate).
    pub snapshots_seen: RwSignal<u64>,
    /// A pause was asked for and the worker has not confirmed it yet (it reads requests between
    /// units of work, so inside a long fit the pause waits for the fit's end).
    pub pause_pending: RwSignal<bool>,
    pub history: RwSignal<History>,
    pub result: RwSignal<Option<RunResult>>,
    /// Set when the result shown was loaded from a saved run record (its file name).
    pub record_file: RwSignal<Option<String>>,
    pub truth: RwSignal<Option<Truth>>,
    /// The one error the banner shows (worker, data, run or record problems).
    pub error: RwSignal<Option<String>>,
    /// Whether the worker died and must be restarted.
    pub worker_dead: RwSignal<bool>,
    pub preset: RwSignal<Preset>,
    /// The search the next run uses (`method-select`).
    pub method: RwSignal<Method>,
    pub settings_values: RwSignal<Vec<String>>,
    pub rules: RwSignal<Vec<EdgeRule>>,
    pub tiers: RwSignal<Vec<String>>,
    worker: StoredValue<Option<WorkerClient>, LocalStorage>,
    /// Id of the latest file sent to the worker; replies about older files are ignored.
    load_seq: StoredValue<u64>,
    /// Id of the latest run started; messages about older runs are ignored.
    run_seq: StoredValue<u64>,
    /// The column names the knowledge grid was made for (kept when the same file is read again).
    knowledge_names: StoredValue<Vec<String>>,
    /// When the worker last sent anything (ms since the epoch), for the watchdog.
    last_message_ms: StoredValue<f64>,
    /// The current file, kept so a restarted worker can be given it again.
    source: StoredValue<Option<(String, Blob)>, LocalStorage>,
    /// The current run's latest [`FromWorker::Checkpoint`]: shown if the worker must be ended
    /// because it is inside a long unit of work when the user stops the run.
    checkpoint: StoredValue<Option<RunResult>>,
    /// The current run saved whole ([`FromWorker::Saved`]): if its worker dies, a fresh one can
    /// go on from here. Shown as the `resume-run` button while one is kept.
    pub saved_run: RwSignal<Option<String>>,
    /// Set when the user chose to go on with the saved run: sent once the fresh worker holds the
    /// data again.
    continue_pending: StoredValue<bool>,
    /// A simulation from the drawn graph in progress or failed.
    pub simulation: RwSignal<SimulationState>,
    /// The explanation of an edge of the result on screen.
    pub explanation: RwSignal<Explanation>,
    /// Whether the result's Markov equivalence class is drawn beside it (`cpdag-toggle`).
    pub cpdag_shown: RwSignal<bool>,
    /// Id of the latest explanation asked for; answers to older ones are ignored.
    explain_seq: StoredValue<u64>,
}

impl AppState {
    fn new() -> Self {
        Self {
            backend: RwSignal::new(BackendState::Probing),
            compute_workers: RwSignal::new(None),
            data: RwSignal::new(DataState::Empty),
            run: RwSignal::new(RunState::Idle),
            runs_started: RwSignal::new(0),
            snapshot: RwSignal::new(None),
            snapshots_seen: RwSignal::new(0),
            pause_pending: RwSignal::new(false),
            history: RwSignal::new(History::default()),
            result: RwSignal::new(None),
            record_file: RwSignal::new(None),
            truth: RwSignal::new(None),
            error: RwSignal::new(None),
            worker_dead: RwSignal::new(false),
            preset: RwSignal::new(Preset::Interactive),
            method: RwSignal::new(Method::Cgp),
            settings_values: RwSignal::new(preset_values(Preset::Interactive, 0)),
            rules: RwSignal::new(Vec::new()),
            tiers: RwSignal::new(Vec::new()),
            worker: StoredValue::new_local(None),
            last_message_ms: StoredValue::new(js_sys::Date::now()),
            load_seq: StoredValue::new(0),
            run_seq: StoredValue::new(0),
            knowledge_names: StoredValue::new(Vec::new()),
            source: StoredValue::new_local(None),
            checkpoint: StoredValue::new(None),
            saved_run: RwSignal::new(None),
            continue_pending: StoredValue::new(false),
            simulation: RwSignal::new(SimulationState::Idle),
            explanation: RwSignal::new(Explanation::None),
            cpdag_shown: RwSignal::new(false),
            explain_seq: StoredValue::new(0),
        }
    }

    /// Restarts the worker and goes on with the saved run once it holds the data again.
    pub fn continue_saved_run(self) {
        if self.saved_run.with_untracked(Option::is_none) {
            return;
        }
        self.continue_pending.set_value(true);
        self.restart_worker();
        self.run.set(RunState::Starting);
    }

    /// Asks the worker to stop the run. A worker inside a long unit of work (a fit of many
    /// inducing points can take minutes) reads the request only when the unit ends, so if no
    /// result has come after [`STOP_GRACE_MS`] the page ends the worker, shows the run's last
    /// checkpoint as the stopped result, and starts a fresh worker with the same data.
    pub fn request_stop(self) {
        self.send(&ToWorker::Stop);
        let run_id = self.run_seq.get_value();
        let check = wasm_bindgen::closure::Closure::once_into_js(move || {
            if self.run_active() && self.run_seq.get_value() == run_id {
                self.end_busy_worker();
            }
        });
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(
                check.unchecked_ref(),
                STOP_GRACE_MS,
            );
        }
    }

    /// Ends a worker that did not answer a stop in time, keeping everything on the page.
    fn end_busy_worker(self) {
        // A stopped run is over: nothing to go on with.
        self.saved_run.set(None);
        let checkpoint = self.checkpoint.get_value();
        let had_checkpoint = checkpoint.is_some();
        // A newer run id makes anything the old worker still had in flight stale.
        self.next_run_id();
        self.restart_worker();
        self.result.set(checkpoint);
        self.record_file.set(None);
        self.run.set(RunState::Ended(Status::Stopped));
        let shown = if had_checkpoint {
            "the result shown is the run as it stood after its last completed step"
        } else {
            "it had not completed a step of the run yet, so there is no graph"
        };
        self.error.set(Some(format!(
            "Stopped. The worker was inside one long computation and could not read the stop \
             request, so it was ended and a fresh one started with the same data; {shown}."
        )));
    }

    /// Sends a request to the worker; a failure is shown in the error banner.
    pub fn send(self, request: &ToWorker) {
        let sent = self.worker.with_value(|w| match w {
            Some(w) => w.send(request, None),
            None => Err("the Web Worker is not running: restart it first".into()),
        });
        if let Err(e) = sent {
            self.error.set(Some(e));
        }
    }

    /// Has the worker simulate data from a drawn graph; they are loaded as a dropped file, with
    /// the drawing among its observed variables as the ground truth.
    pub fn simulate(self, spec: crate::data::generate::SimulationSpec) {
        self.simulation.set(SimulationState::Running);
        self.send(&ToWorker::Simulate { spec });
    }

    /// Asks the worker to explain `edge` of the result on screen by its evidence.
    pub fn explain(self, edge: (usize, usize)) {
        self.ask_about_edge(edge, false);
    }

    /// Asks the worker to draw `edge` of the result on screen and its reversal side by side.
    pub fn compare_directions(self, edge: (usize, usize)) {
        self.ask_about_edge(edge, true);
    }

    fn ask_about_edge(self, edge: (usize, usize), both_directions: bool) {
        let Some((edges, seed, names)) = self.result.with_untracked(|r| {
            r.as_ref()
                .map(|r| (r.edges.clone(), r.seed, r.names.clone()))
        }) else {
            return;
        };
        let name = |i: usize| names.get(i).cloned().unwrap_or_default();
        let (cause, effect) = (name(edge.0), name(edge.1));
        let subject = if both_directions {
            format!("{cause} → {effect} against {effect} → {cause}")
        } else {
            format!("{cause} → {effect}")
        };
        let request_id = self.next_explanation(subject);
        self.send(&if both_directions {
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
        });
    }

    /// Asks the worker for variable `child`'s fitted conditional along its strongest parent (the
    /// parent with the largest weight in the result's adjacency).
    pub fn explain_variable(self, child: usize) {
        let Some((edges, seed, name, strongest)) = self.result.with_untracked(|r| {
            let r = r.as_ref()?;
            let strongest = r
                .edges
                .iter()
                .filter(|&&(_, j)| j == child)
                .map(|&(i, _)| i)
                .max_by(|&a, &b| {
                    edge_weight(&r.adjacency, a, child).total_cmp(&edge_weight(
                        &r.adjacency,
                        b,
                        child,
                    ))
                })?;
            Some((
                r.edges.clone(),
                r.seed,
                r.names.get(child)?.clone(),
                strongest,
            ))
        }) else {
            return;
        };
        let request_id = self.next_explanation(name);
        self.send(&ToWorker::FitConditional {
            request_id,
            edges,
            child,
            shown_parent: strongest,
            seed,
        });
    }

    /// Marks a new explanation of `subject` as asked for; returns its request id.
    fn next_explanation(self, subject: String) -> u64 {
        let request_id = self.explain_seq.get_value() + 1;
        self.explain_seq.set_value(request_id);
        self.explanation.set(Explanation::Working { subject });
        request_id
    }

    /// Restarts the watchdog's clock (when a request that expects answers is sent).
    pub fn mark_alive(self) {
        self.last_message_ms.set_value(js_sys::Date::now());
    }

    /// Reads `blob` and hands its bytes to the worker as the data set `file_name`.
    pub fn submit_file(self, file_name: String, blob: Blob) {
        let load_id = self.load_seq.get_value() + 1;
        self.load_seq.set_value(load_id);
        self.source
            .set_value(Some((file_name.clone(), blob.clone())));
        self.history.set(History::default());
        self.error.set(None);
        self.explanation.set(Explanation::None);
        self.result.set(None);
        self.record_file.set(None);
        self.snapshot.set(None);
        self.run.set(RunState::Idle);
        self.mark_alive();
        self.data.set(DataState::Reading {
            file_name: file_name.clone(),
            bytes_read: 0,
            total_bytes: blob.size() as usize,
        });
        wasm_bindgen_futures::spawn_local(async move {
            let buffer = match JsFuture::from(blob.array_buffer()).await {
                Ok(b) => b.unchecked_into::<ArrayBuffer>(),
                Err(e) => {
                    self.data.set(DataState::Empty);
                    self.error.set(Some(format!(
                        "the browser could not read {file_name}: {e:?}"
                    )));
                    return;
                }
            };
            // A newer file was chosen while this one was being read: send only the newer.
            if self.load_seq.get_value() != load_id {
                return;
            }
            let request = ToWorker::LoadCsv {
                load_id,
                file_name,
                options: Default::default(),
            };
            let sent = self.worker.with_value(|w| match w {
                Some(w) => w.send(&request, Some(buffer)),
                None => Err("the Web Worker is not running: restart it first".into()),
            });
            if let Err(e) = sent {
                self.data.set(DataState::Empty);
                self.error.set(Some(e));
            }
        });
    }

    /// Starts a fresh worker (dropping the old one) and gives it the current file again.
    pub fn restart_worker(self) {
        self.worker.set_value(None);
        self.worker_dead.set(false);
        self.error.set(None);
        if matches!(
            self.run.get_untracked(),
            RunState::Starting | RunState::Running | RunState::Paused
        ) {
            self.run.set(RunState::Idle);
        }
        self.backend.set(BackendState::Probing);
        self.last_message_ms.set_value(js_sys::Date::now());
        spawn_worker(self);
    }

    fn worker_died(self, message: String) {
        // Dropping the client terminates the worker and detaches its handlers.
        self.worker.set_value(None);
        self.worker_dead.set(true);
        self.backend.set(BackendState::Unavailable);
        if let Explanation::Working { subject } = self.explanation.get_untracked() {
            self.explanation.set(Explanation::Failed {
                subject,
                message: "the worker stopped before it was done: restart it and ask again".into(),
            });
        }
        if self.simulation.get_untracked() == SimulationState::Running {
            self.simulation.set(SimulationState::Failed(
                "the worker stopped before the simulation was done: restart it and simulate again"
                    .into(),
            ));
        }
        if matches!(
            self.run.get_untracked(),
            RunState::Starting | RunState::Running | RunState::Paused
        ) {
            self.run.set(RunState::Idle);
        }
        if matches!(self.data.get_untracked(), DataState::Reading { .. }) {
            self.data.set(DataState::Empty);
        }
        self.error.set(Some(format!(
            "{message}. Your data and results on this page are kept: restart the worker to go on."
        )));
    }

    fn on_reply(self, reply: FromWorker) {
        self.last_message_ms.set_value(js_sys::Date::now());
        match reply {
            FromWorker::Ready => {
                self.send(&ToWorker::Ping);
                // A restarted worker gets the current file again.
                if let Some((name, blob)) = self.source.get_value() {
                    if !matches!(self.data.get_untracked(), DataState::Rejected { .. }) {
                        let result = self.result.get_untracked();
                        let record = self.record_file.get_untracked();
                        let run = self.run.get_untracked();
                        let snapshot = self.snapshot.get_untracked();
                        let history = self.history.get_untracked();
                        let error = self.error.get_untracked();
                        self.submit_file(name, blob);
                        // Re-reading the file must not throw away what is on screen: the result,
                        // the last snapshot and curves, and the note on why the worker restarted.
                        self.result.set(result);
                        self.record_file.set(record);
                        self.run.set(run);
                        self.snapshot.set(snapshot);
                        self.history.set(history);
                        self.error.set(error);
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
            } => self.backend.set(BackendState::Known {
                backend,
                adapter,
                note,
                switched,
            }),
            FromWorker::LoadProgress { load_id, .. }
            | FromWorker::DataLoaded { load_id, .. }
            | FromWorker::DataRejected { load_id, .. }
                if load_id != self.load_seq.get_value() => {}
            FromWorker::RunRefused { run_id, .. }
            | FromWorker::Progress { run_id, .. }
            | FromWorker::Checkpoint { run_id, .. }
            | FromWorker::Finished { run_id, .. }
                if run_id != self.run_seq.get_value() => {}
            FromWorker::Checkpoint { result, .. } => self.checkpoint.set_value(Some(*result)),
            FromWorker::Compute { run_id, .. } if run_id != self.run_seq.get_value() => {}
            FromWorker::Compute { workers, .. } => self.compute_workers.set(Some(workers)),
            FromWorker::Saved { run_id, .. } if run_id != self.run_seq.get_value() => {}
            FromWorker::Saved { session, .. } => self.saved_run.set(Some(session)),
            FromWorker::LoadProgress {
                file_name,
                bytes_read,
                total_bytes,
                ..
            } => self.data.set(DataState::Reading {
                file_name,
                bytes_read,
                total_bytes,
            }),
            FromWorker::DataLoaded {
                file_name,
                summary,
                delimiter,
                problems,
                preview,
                ..
            } => {
                let d = summary.columns;
                // The grid survives reading the same columns again (a restarted worker).
                if self.knowledge_names.get_value() != summary.names {
                    self.knowledge_names.set_value(summary.names.clone());
                    self.rules.set(vec![EdgeRule::Free; d * d]);
                    self.tiers.set(vec![String::new(); d]);
                }
                self.data.set(DataState::Loaded {
                    file_name,
                    summary,
                    delimiter,
                    problems,
                    preview,
                });
                if self.continue_pending.get_value() {
                    self.continue_pending.set_value(false);
                    if let Some(session) = self.saved_run.get_untracked() {
                        let run_id = self.next_run_id();
                        self.result.set(None);
                        self.record_file.set(None);
                        self.run.set(RunState::Starting);
                        self.mark_alive();
                        self.send(&ToWorker::Continue { run_id, session });
                    }
                }
            }
            FromWorker::DataRejected {
                file_name, error, ..
            } => {
                self.error.set(Some(format!(
                    "{file_name} was not loaded: {}",
                    error.message
                )));
                self.data.set(DataState::Rejected { file_name, error });
            }
            FromWorker::RunRefused { message, .. } => {
                self.run.set(RunState::Idle);
                self.error.set(Some(message));
            }
            FromWorker::Progress {
                snapshot, paused, ..
            } => {
                // A late snapshot after the run ended (or after the worker moved on) is ignored.
                if matches!(
                    self.run.get_untracked(),
                    RunState::Idle | RunState::Ended(_)
                ) {
                    return;
                }
                self.history.update(|h| h.record(&snapshot));
                self.snapshots_seen.update(|n| *n += 1);
                self.snapshot.set(Some(snapshot));
                if paused {
                    self.pause_pending.set(false);
                }
                self.run.set(if paused {
                    RunState::Paused
                } else {
                    RunState::Running
                });
            }
            FromWorker::Finished {
                snapshot, result, ..
            } => {
                if !self.run_active() {
                    return;
                }
                self.history.update(|h| h.record(&snapshot));
                self.snapshots_seen.update(|n| *n += 1);
                self.snapshot.set(Some(snapshot));
                self.run.set(RunState::Ended(result.status));
                self.pause_pending.set(false);
                // An ended run is not continued.
                self.saved_run.set(None);
                self.record_file.set(None);
                self.result.set(Some(*result));
            }
            FromWorker::Simulated {
                file_name,
                csv,
                truth_csv,
            } => {
                let truth = Truth {
                    file_name: "the simulated graph".into(),
                    text: truth_csv,
                };
                self.simulation.set(SimulationState::Idle);
                let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(&csv));
                match Blob::new_with_str_sequence(&parts) {
                    Ok(blob) => {
                        self.submit_file(file_name, blob);
                        self.truth.set(Some(truth));
                    }
                    Err(e) => self.error.set(Some(format!(
                        "the simulated data could not be kept by the browser: {e:?}"
                    ))),
                }
            }
            FromWorker::EdgeExplained {
                request_id,
                evidence,
            } => {
                if request_id == self.explain_seq.get_value() {
                    self.explanation.set(Explanation::Edge(evidence));
                }
            }
            FromWorker::ConditionalFitted { request_id, curve } => {
                if request_id == self.explain_seq.get_value() {
                    self.explanation.set(Explanation::Curve(curve));
                }
            }
            FromWorker::DirectionsCompared {
                request_id,
                comparison,
            } => {
                if request_id == self.explain_seq.get_value() {
                    self.explanation.set(Explanation::Directions(comparison));
                }
            }
            FromWorker::ExplainFailed {
                request_id,
                message,
            } => {
                if request_id == self.explain_seq.get_value() {
                    let subject = match self.explanation.get_untracked() {
                        Explanation::Working { subject } => subject,
                        _ => String::new(),
                    };
                    self.explanation
                        .set(Explanation::Failed { subject, message });
                }
            }
            FromWorker::SimulationFailed { message } => {
                self.simulation.set(SimulationState::Failed(message));
            }
            FromWorker::Failed { message } => {
                if self.simulation.get_untracked() == SimulationState::Running {
                    self.simulation.set(SimulationState::Idle);
                }
                // Whatever was waiting for an answer will not get one.
                if self.run_active() {
                    self.run.set(RunState::Idle);
                }
                if matches!(self.data.get_untracked(), DataState::Reading { .. }) {
                    self.data.set(DataState::Empty);
                }
                self.error.set(Some(message));
            }
            FromWorker::Crashed { message } => self.worker_died(message),
        }
    }

    /// Whether a run is starting, running or paused.
    pub fn run_active(self) -> bool {
        matches!(
            self.run.get_untracked(),
            RunState::Starting | RunState::Running | RunState::Paused
        )
    }

    /// What keeps the page from starting other work (a run, loading other data, simulating),
    /// or `None` when nothing is under way. Tracked: the buttons it disables follow it.
    pub fn busy_with(self) -> Option<&'static str> {
        if matches!(
            self.run.get(),
            RunState::Starting | RunState::Running | RunState::Paused
        ) {
            Some("a run is in progress")
        } else if matches!(self.data.get(), DataState::Reading { .. }) {
            Some("data are being read")
        } else if self.simulation.get() == SimulationState::Running {
            // The simulated data replace what is loaded when they arrive: a run started on
            // the old data would be dropped with them.
            Some("data are being simulated")
        } else {
            None
        }
    }

    /// A new run id (messages about older runs are ignored from now on).
    pub fn next_run_id(self) -> u64 {
        let id = self.run_seq.get_value() + 1;
        self.run_seq.set_value(id);
        self.pause_pending.set(false);
        self.checkpoint.set_value(None);
        id
    }

    /// The variable names shown: the result's when a result is on screen, else the data's.
    pub fn names(self) -> Option<Vec<String>> {
        self.result
            .with(|r| r.as_ref().map(|r| r.names.clone()))
            .or_else(|| self.data.with(DataState::names))
    }

    /// The word the `status` element shows.
    pub fn status_code(self) -> &'static str {
        match self.run.get() {
            RunState::Starting | RunState::Running => "running",
            RunState::Paused => "paused",
            RunState::Ended(Status::Done) => "done",
            RunState::Ended(Status::Stopped) => "stopped",
            RunState::Ended(Status::Failed) => "failed",
            RunState::Ended(Status::Running) => "running",
            RunState::Idle => match self.data.get() {
                DataState::Reading { .. } => "loading",
                DataState::Loaded { .. } => "ready",
                _ if self.result.with(Option::is_some) => "done",
                _ => "idle",
            },
        }
    }
}

/// The weight of the edge i → j in a cause × effect matrix (0 where the matrix has no entry).
pub fn edge_weight(adjacency: &[Vec<f64>], i: usize, j: usize) -> f64 {
    adjacency
        .get(i)
        .and_then(|row| row.get(j))
        .copied()
        .unwrap_or(0.0)
}

/// The chosen graph of a result.
pub fn result_graph(result: &RunResult) -> Option<Digraph> {
    Digraph::from_edges(result.names.len(), &result.edges).ok()
}

fn spawn_worker(state: AppState) {
    let on_reply = move |reply: FromWorker| state.on_reply(reply);
    let on_fatal = move |message: String| state.worker_died(message);
    match WorkerClient::spawn(on_reply, on_fatal) {
        Ok(w) => state.worker.set_value(Some(w)),
        Err(message) => state.worker_died(message),
    }
}

/// How long a stop request may go unanswered before the page ends the worker (a worker between
/// steps answers within a tenth of a second).
const STOP_GRACE_MS: i32 = 2000;

/// Seconds without any message from a worker that should be stepping before the page calls it
/// unresponsive. A step is 80 ms and the longest single unit of work (one variable's starting fit)
/// takes a few seconds at most, so this only fires when the worker is stuck.
const WATCHDOG_SECONDS: f64 = 30.0;
/// The watchdog's limit on the `#test-hooks` page, so the end-to-end test need not wait 30 s.
const WATCHDOG_TEST_SECONDS: f64 = 3.0;

/// Checks every 2 s that a running worker still reports; a silent one is ended and reported like
/// a dead one, so the page never waits forever.
fn start_watchdog(state: AppState) {
    let limit = if test_hooks_enabled() {
        WATCHDOG_TEST_SECONDS
    } else {
        WATCHDOG_SECONDS
    };
    let check = move || {
        let waiting = matches!(
            state.run.get_untracked(),
            RunState::Starting | RunState::Running
        ) || matches!(state.data.get_untracked(), DataState::Reading { .. });
        let silent = (js_sys::Date::now() - state.last_message_ms.get_value()) / 1000.0;
        if waiting && !state.worker_dead.get_untracked() && silent > limit {
            state.worker_died(format!(
                "the Web Worker has not answered for {silent:.0} s and was ended"
            ));
        }
    };
    // Cleared with the component that started it (the page, for its whole life).
    if let Ok(handle) = set_interval_with_handle(check, std::time::Duration::from_secs(2)) {
        on_cleanup(move || handle.clear());
    }
}

/// A file dropped outside the drop zone would make the browser open it in place of the app (and
/// lose everything on the page): cancel the default for drags and drops on the whole window, for
/// as long as the component that calls this lives.
fn guard_window_drops() {
    let listeners = [
        window_event_listener(leptos::ev::dragover, |e| e.prevent_default()),
        window_event_listener(leptos::ev::drop, |e| e.prevent_default()),
    ];
    on_cleanup(move || listeners.into_iter().for_each(WindowListenerHandle::remove));
}

/// Whether the page shows the fault-injection buttons: a build made with `OCCAM_TEST_HOOKS` (the
/// test command's) opened with `#test-hooks`.
fn test_hooks_enabled() -> bool {
    let hash = web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default();
    crate::protocol::test_hooks_shown(crate::protocol::TEST_HOOKS_BUILT, &hash)
}

#[component]
fn App() -> impl IntoView {
    let state = AppState::new();
    provide_context(state);
    spawn_worker(state);
    start_watchdog(state);
    guard_window_drops();

    view! {
        <header class="top">
            <div class="brand">
                <h1>"Occam"</h1>
                <p class="tagline">"Bayesian causal discovery, in your browser. Your data never leave this machine."</p>
            </div>
            <BackendBadge />
        </header>
        <ErrorBanner />
        <main class="layout">
            <div class="column inputs">
                <lesson_panel::LessonPanel />
                <data_panel::DataPanel />
                <graph_editor::GraphEditorPanel />
                <settings_panel::SettingsPanel />
                <knowledge_panel::KnowledgePanel />
            </div>
            <div class="column outputs">
                <run_panel::RunPanel />
                <results_panel::ResultsPanel />
            </div>
        </main>
        {test_hooks_enabled().then(|| view! {
            <footer class="test-hooks">
                <button data-testid="crash-worker" on:click=move |_| state.send(&ToWorker::Panic)>
                    "Make the worker panic (test hook)"
                </button>
                <button data-testid="hang-worker" on:click=move |_| {
                    state.mark_alive();
                    // Pretend a run started so the watchdog expects answers.
                    state.run.set(RunState::Starting);
                    state.send(&ToWorker::Hang);
                }>
                                        "Make the worker hang (test hook)"
                </button>
                <button data-testid="lose-gpu" on:click=move |_| state.send(&ToWorker::LoseGpu)>
                    "Destroy the worker's GPU device (test hook)"
                </button>
                <button data-testid="psi2-gpu-always" on:click=move |_| {
                    state.send(&ToWorker::GpuPsi2Threshold { work: 0.0 })
                }>
                    "Send every collapsed Ψ2 to the GPU (test hook)"
                </button>
                <button data-testid="crash-page" on:click=move |_| {
                    panic!("deliberate panic in the page (test hook)")
                }>
                    "Make the page panic (test hook)"
                </button>
            </footer>
        })}
    }
}

/// The one place errors appear, with a restart button when the worker died.
#[component]
fn ErrorBanner() -> impl IntoView {
    let state = expect_context::<AppState>();
    move || {
        state.error.get().map(|message| {
            view! {
                <div class="error" data-testid="error" role="alert">
                    <p>{message}</p>
                    <div class="error-actions">
                        {move || state.worker_dead.get().then(|| view! {
                            <button data-testid="restart-worker" on:click=move |_| state.restart_worker()>
                                "Restart the worker"
                            </button>
                        })}
                        {move || (state.worker_dead.get() && state.saved_run.with(Option::is_some)).then(|| view! {
                            <button data-testid="resume-run" class="primary" on:click=move |_| state.continue_saved_run()
                                title="Start a fresh worker and go on with the run from its last save (every 5 s); it ends as it would have uninterrupted">
                                "Go on with the run"
                            </button>
                        })}
                        <button class="quiet" on:click=move |_| state.error.set(None)>"Dismiss"</button>
                    </div>
                </div>
            }
        })
    }
}

/// The badge naming where the engine computes, as the worker reports it: "WebGPU" with the
/// adapter when the worker holds a working device and the run's bound has a GPU path, "CPU"
/// otherwise, with the reason in its title, and the switch shown when a run left a failed GPU.
#[component]
fn BackendBadge() -> impl IntoView {
    let state = expect_context::<AppState>();
    let text = move || match state.backend.get() {
        BackendState::Probing => "Backend: checking…".to_string(),
        BackendState::Known {
            backend: ComputeBackend::WebGpu,
            adapter,
            ..
        } => match adapter {
            Some(a) => format!("Backend: WebGPU ({a})"),
            None => "Backend: WebGPU".to_string(),
        },
        BackendState::Known {
            backend: ComputeBackend::Cpu,
            switched,
            ..
        } => {
            if switched {
                "Backend: CPU (WebAssembly), switched from WebGPU".to_string()
            } else {
                "Backend: CPU (WebAssembly)".to_string()
            }
        }
        BackendState::Unavailable => "Backend: worker unavailable".to_string(),
    };
    let code = move || match state.backend.get() {
        BackendState::Probing => "probing",
        BackendState::Known {
            backend: ComputeBackend::WebGpu,
            ..
        } => "webgpu",
        BackendState::Known {
            backend: ComputeBackend::Cpu,
            ..
        } => "cpu",
        BackendState::Unavailable => "unavailable",
    };
    let adapter = move || match state.backend.get() {
        BackendState::Known {
            adapter: Some(_), ..
        } => "available",
        BackendState::Known { adapter: None, .. } => "none",
        _ => "unknown",
    };
    let switched = move || match state.backend.get() {
        BackendState::Known { switched: true, .. } => "yes",
        _ => "no",
    };
    let title = move || {
        match state.backend.get() {
        BackendState::Known {
            backend: ComputeBackend::WebGpu,
            adapter,
            ..
        } => format!(
            "This run computes on WebGPU ({}): the uncollapsed bound's predictions (the paper preset's bound) in float32, or the collapsed bound's Ψ2 sums in double-float when they are large; each variable's M × M algebra, starts and final bounds stay in f64 on the CPU.",
            adapter.unwrap_or_else(|| "unnamed adapter".into())
        ),
        BackendState::Known {
            backend: ComputeBackend::Cpu,
            adapter: Some(a),
            note,
            ..
        } => format!(
            "The engine computes on the CPU. WebGPU adapter: {a}. {}",
            note.unwrap_or_default()
        ),
        BackendState::Known {
            backend: ComputeBackend::Cpu,
            adapter: None,
            ..
        } => "The engine computes on the CPU; this browser offers no WebGPU adapter.".to_string(),
        _ => "Where the Web Worker computes".to_string(),
    }
    };
    let workers = move || {
        state.compute_workers.get().map(|n| {
            let text = if n == 1 {
                "1 worker computes".to_string()
            } else {
                format!("{n} workers compute")
            };
            view! {
                <span class="badge" data-testid="worker-count" data-workers=n.to_string()
                    title="Web Workers running this run's numeric work in parallel (set under Settings; the graph does not depend on it)">
                    {text}
                </span>
            }
        })
    };
    view! {
        <span class="badge" data-testid="backend-badge" data-backend=code data-gpu-adapter=adapter
            data-switched=switched title=title>
            {text}
        </span>
        {workers}
    }
}
