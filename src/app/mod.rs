//! The page (wasm only): Leptos components that show what the worker reports.
//!
//! Owns the user interface. It never parses data or trains anything itself: files go to the Web
//! Worker ([`worker_client`]) and the page renders the replies. The state and every change to it
//! live in the native, tested `page_model::page::PageModel`; [`AppState`] holds it, mirrors its fields in
//! signals for the components, and carries out what its transitions ask (requests, file reads).
//! Panels get the shell as a prop; the settings form and the prior-knowledge grid are one
//! [`settings_store::SettingsStore`] in Leptos context, read by the panels that use them; display
//! components get only the signals they draw. A panic
//! anywhere in the page is turned into a visible error message instead of a blank page; a worker
//! that dies is reported and can be restarted with the data re-sent.

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
mod settings_store;
mod svg;
mod worker_client;

use crate::engine::{RunResult, Snapshot};
use crate::page_model::page::{PageEffect, PageModel};
use crate::page_model::History;
use crate::worker::protocol::{ComputeBackend, FromWorker, ToWorker};
use js_sys::ArrayBuffer;
use leptos::prelude::*;
use settings_store::SettingsStore;
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

pub use crate::page_model::drawing::{edge_weight, result_graph};
pub use crate::page_model::page::{
    BackendState, DataState, Explanation, RunState, SimulationState,
};
pub use crate::page_model::Truth;

/// Declares the [`PageModel`] fields the components read, each as `view = path.to.field: Type`
/// (a field of a sub-model), mirrored in a read-only signal `view` of [`PageViews`] that
/// [`AppState::update`] sets after a transition when (and only when) the field changed, so a
/// component redraws for its own field only.
macro_rules! page_views {
    ($($(#[$doc:meta])* $view:ident = $($path:ident).+ : $ty:ty,)*) => {
        /// The model's fields as signals, for the components (read-only: every change goes
        /// through a [`PageModel`] transition).
        #[derive(Clone, Copy)]
        pub struct PageViews {
            $($(#[$doc])* pub $view: ReadSignal<$ty>,)*
        }

        /// The writing halves of [`PageViews`].
        #[derive(Clone, Copy)]
        struct PageWriters {
            $($view: WriteSignal<$ty>,)*
        }

        impl PageViews {
            fn new(model: &PageModel) -> (Self, PageWriters) {
                $(let $view = signal(model.$($path).+.clone());)*
                (
                    Self { $($view: $view.0,)* },
                    PageWriters { $($view: $view.1,)* },
                )
            }

            /// Sets each signal whose field differs from `model`'s.
            fn publish(&self, writers: &PageWriters, model: &PageModel) {
                $(
                    if self.$view.with_untracked(|shown| shown != &model.$($path).+) {
                        writers.$view.set(model.$($path).+.clone());
                    }
                )*
            }
        }
    };
}

page_views! {
    backend = worker.backend: BackendState,
    /// Compute workers of the current or last run (1: the worker computes alone).
    compute_workers = run.compute_workers: Option<usize>,
    data = load.data: DataState,
    run = run.state: RunState,
    /// Runs started on this page so far (a lesson's check waits for a run after its change).
    runs_started = run.runs_started: u64,
    snapshot = run.snapshot: Option<Snapshot>,
    /// Snapshots received during the current run (the end-to-end test reads the rate).
    snapshots_seen = run.snapshots_seen: u64,
    /// A pause was asked for and the worker has not confirmed it yet.
    pause_pending = run.pause_pending: bool,
    history = run.history: History,
    result = run.result: Option<RunResult>,
    /// Set when the result shown was loaded from a saved run record (its file name).
    record_file = run.record_file: Option<String>,
    truth = load.truth: Option<Truth>,
    /// The one error the banner shows.
    error = error: Option<String>,
    /// Whether the worker died and must be restarted.
    worker_dead = worker.dead: bool,
    /// The current run saved whole: shown as the `resume-run` button while one is kept.
    saved_run = run.saved_run: Option<String>,
    simulation = load.simulation: SimulationState,
    explanation = explain.explanation: Explanation,
}

/// The page's shell, handed to each panel as a prop (`Copy`): the model of its state ([`PageModel`],
/// native and tested) with its fields mirrored as signals ([`PageViews`], `state.page`), the view
/// toggles, and the worker and the current file. The settings and prior knowledge are the
/// [`SettingsStore`]'s, read by the panels from context.
#[derive(Clone, Copy)]
pub struct AppState {
    /// The model's fields, for the components to read.
    pub page: PageViews,
    writers: PageWriters,
    model: StoredValue<PageModel>,
    /// The store whose knowledge grid a [`PageEffect::ResetKnowledge`] clears (the panels read
    /// it from context; worker replies arrive outside any component).
    settings: SettingsStore,
    /// Whether the result's Markov equivalence class is drawn beside it (`cpdag-toggle`).
    pub cpdag_shown: RwSignal<bool>,
    worker: StoredValue<Option<WorkerClient>, LocalStorage>,
    /// The current file's bytes, kept so a restarted worker can be given it again.
    source: StoredValue<Option<Blob>, LocalStorage>,
}

impl AppState {
    fn new(settings: SettingsStore) -> Self {
        let model = PageModel::new(js_sys::Date::now());
        let (page, writers) = PageViews::new(&model);
        Self {
            page,
            writers,
            model: StoredValue::new(model),
            settings,
            cpdag_shown: RwSignal::new(false),
            worker: StoredValue::new_local(None),
            source: StoredValue::new_local(None),
        }
    }

    /// Runs one transition of the model and shows what it changed.
    pub fn update<R>(self, transition: impl FnOnce(&mut PageModel) -> R) -> R {
        let out = self
            .model
            .try_update_value(transition)
            .expect("the page's model lives as long as the page");
        self.model
            .with_value(|model| self.page.publish(&self.writers, model));
        out
    }

    /// Reads the model (untracked: for event handlers, not for views).
    pub fn read<R>(self, query: impl FnOnce(&PageModel) -> R) -> R {
        self.model.with_value(query)
    }

    /// Carries out what a transition asked for, in order.
    fn carry_out(self, effects: Vec<PageEffect>) {
        for effect in effects {
            match effect {
                PageEffect::Send(request) => self.send(&request),
                PageEffect::ReadSource { load_id } => {
                    if let Some(blob) = self.source.get_value() {
                        self.read_and_send(load_id, blob);
                    }
                }
                PageEffect::LoadText { file_name, csv } => {
                    let parts = js_sys::Array::of1(&wasm_bindgen::JsValue::from_str(&csv));
                    match Blob::new_with_str_sequence(&parts) {
                        Ok(blob) => self.submit_file(file_name, blob),
                        Err(e) => self.update(|m| {
                            m.show_error(format!(
                                "the simulated data could not be kept by the browser: {e:?}"
                            ))
                        }),
                    }
                }
                PageEffect::ResetKnowledge { columns } => self.settings.clear_knowledge(columns),
                // Dropping the client terminates the worker and detaches its handlers.
                PageEffect::EndWorker => self.worker.set_value(None),
            }
        }
    }

    /// Shows `message` in the error banner.
    pub fn show_error(self, message: impl Into<String>) {
        let message = message.into();
        self.update(|m| m.show_error(message));
    }

    /// Restarts the worker and goes on with the saved run once it holds the data again.
    pub fn continue_saved_run(self) {
        if self.update(|m| m.continue_saved_run(js_sys::Date::now())) {
            spawn_worker(self);
        }
    }

    /// Asks the worker to stop the run. A worker inside a long unit of work (a fit of many
    /// inducing points can take minutes) reads the request only when the unit ends, so if no
    /// result has come after [`STOP_GRACE_MS`] the page ends the worker, shows the run's last
    /// checkpoint as the stopped result, and starts a fresh worker with the same data.
    pub fn request_stop(self) {
        self.send(&ToWorker::Stop);
        let run_id = self.read(PageModel::stop_requested);
        let check = wasm_bindgen::closure::Closure::once_into_js(move || {
            if self.read(|m| m.stop_unanswered(run_id)) {
                self.worker.set_value(None);
                self.update(|m| m.end_unanswered_stop(js_sys::Date::now()));
                spawn_worker(self);
            }
        });
        if let Some(window) = web_sys::window() {
            let _ = window.set_timeout_with_callback_and_timeout_and_arguments_0(
                check.unchecked_ref(),
                STOP_GRACE_MS,
            );
        }
    }

    /// Sends a request to the worker; a failure is shown in the error banner.
    pub fn send(self, request: &ToWorker) {
        let sent = self.worker.with_value(|w| match w {
            Some(w) => w.send(request, None),
            None => Err("the Web Worker is not running: restart it first".into()),
        });
        if let Err(e) = sent {
            self.show_error(e);
        }
    }

    /// Starts a run of `request` (its run id is given by the model).
    pub fn start_run(self, request: crate::worker::protocol::RunRequest) {
        let start = self.update(|m| m.start_run(request, js_sys::Date::now()));
        self.send(&start);
    }

    /// Pauses a running run or resumes a paused one.
    pub fn toggle_pause(self) {
        if let Some(request) = self.update(PageModel::toggle_pause) {
            self.send(&request);
        }
    }

    /// Has the worker simulate data from a drawn graph; they are loaded as a dropped file, with
    /// the drawing among its observed variables as the ground truth.
    pub fn simulate(self, spec: crate::generate::SimulationSpec) {
        let request = self.update(|m| m.simulate(spec));
        self.send(&request);
    }

    /// Asks the worker to explain `edge` of the result on screen by its evidence.
    pub fn explain(self, edge: (usize, usize)) {
        self.ask(|m| m.ask_about_edge(edge, false));
    }

    /// Asks the worker about the pair clicked in the graph or a heatmap
    /// ([`PageModel::ask_about_pair`]).
    pub fn explain_pair(self, pair: (usize, usize)) {
        self.ask(|m| m.ask_about_pair(pair));
    }

    /// Asks the worker to draw `edge` of the result on screen and its reversal side by side.
    pub fn compare_directions(self, edge: (usize, usize)) {
        self.ask(|m| m.ask_about_edge(edge, true));
    }

    /// Asks the worker for variable `child`'s fitted conditional along its strongest parent.
    pub fn explain_variable(self, child: usize) {
        self.ask(|m| m.ask_about_variable(child));
    }

    fn ask(self, question: impl FnOnce(&mut PageModel) -> Option<ToWorker>) {
        if let Some(request) = self.update(question) {
            self.send(&request);
        }
    }

    /// Shows a saved run record `file_name` in place of a run.
    pub fn show_record(self, file_name: String, result: RunResult) {
        self.update(|m| m.show_record(file_name, result));
    }

    /// Sets (or clears) the ground truth the result is compared with.
    pub fn set_truth(self, truth: Option<Truth>) {
        self.update(|m| m.load.truth = truth);
    }

    /// Reads `blob` and hands its bytes to the worker as the data set `file_name`.
    pub fn submit_file(self, file_name: String, blob: Blob) {
        let bytes = blob.size() as usize;
        self.source.set_value(Some(blob.clone()));
        let load_id = self.update(|m| m.begin_load(file_name, bytes, js_sys::Date::now()));
        self.read_and_send(load_id, blob);
    }

    /// Reads `blob` and sends it to the worker as load `load_id`, unless a newer file was chosen
    /// meanwhile.
    fn read_and_send(self, load_id: u64, blob: Blob) {
        let file_name = self.read(|m| match &m.load.data {
            DataState::Reading { file_name, .. } => file_name.clone(),
            _ => String::new(),
        });
        wasm_bindgen_futures::spawn_local(async move {
            let buffer = match JsFuture::from(blob.array_buffer()).await {
                Ok(b) => b.unchecked_into::<ArrayBuffer>(),
                Err(e) => {
                    let message = format!("the browser could not read {file_name}: {e:?}");
                    self.update(|m| m.load_failed(load_id, message));
                    return;
                }
            };
            if !self.read(|m| m.is_current_load(load_id)) {
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
                self.update(|m| m.load_failed(load_id, e));
            }
        });
    }

    /// Starts a fresh worker (dropping the old one), which is given the current file again.
    pub fn restart_worker(self) {
        self.worker.set_value(None);
        self.update(|m| m.worker_restarted(js_sys::Date::now()));
        spawn_worker(self);
    }

    fn worker_died(self, message: String) {
        // Dropping the client terminates the worker and detaches its handlers.
        self.worker.set_value(None);
        self.update(|m| m.worker_died(&message));
    }

    fn on_reply(self, reply: FromWorker) {
        let effects = self.update(|m| m.on_reply(reply, js_sys::Date::now()));
        self.carry_out(effects);
    }

    /// What keeps the page from starting other work (a run, loading other data, simulating),
    /// or `None` when nothing is under way. Tracked: the buttons it disables follow it.
    pub fn busy_with(self) -> Option<&'static str> {
        // Read through the signals so a view that asks follows the change.
        self.page.run.track();
        self.page.data.track();
        self.page.simulation.track();
        self.read(PageModel::busy_with)
    }

    /// The variable names shown: the result's when a result is on screen, else the data's.
    /// Tracked.
    pub fn names(self) -> Option<Vec<String>> {
        self.page.result.track();
        self.page.data.track();
        self.read(PageModel::names)
    }

    /// The word the `status` element shows. Tracked.
    pub fn status_code(self) -> &'static str {
        self.page.run.track();
        self.page.data.track();
        self.page.result.track();
        self.read(PageModel::status_code)
    }
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
        if let Some(silent) = state.read(|m| m.silent_too_long(js_sys::Date::now(), limit)) {
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
    crate::worker::protocol::test_hooks_shown(crate::worker::protocol::TEST_HOOKS_BUILT, &hash)
}

#[component]
fn App() -> impl IntoView {
    let state = AppState::new(SettingsStore::provide());
    spawn_worker(state);
    start_watchdog(state);
    guard_window_drops();

    view! {
        <header class="top">
            <div class="brand">
                <h1>"Occam"</h1>
                <p class="tagline">"Bayesian causal discovery, in your browser. Your data never leave this machine."</p>
            </div>
            <BackendBadge backend=state.page.backend compute_workers=state.page.compute_workers />
        </header>
        <ErrorBanner state=state />
        <main class="layout">
            <div class="column inputs">
                <lesson_panel::LessonPanel state=state />
                <data_panel::DataPanel state=state />
                <graph_editor::GraphEditorPanel state=state />
                <settings_panel::SettingsPanel />
                <knowledge_panel::KnowledgePanel data=state.page.data />
            </div>
            <div class="column outputs">
                <run_panel::RunPanel state=state />
                <results_panel::ResultsPanel state=state />
            </div>
        </main>
        {test_hooks_enabled().then(|| view! {
            <footer class="test-hooks">
                <button data-testid="crash-worker" on:click=move |_| state.send(&ToWorker::Panic)>
                    "Make the worker panic (test hook)"
                </button>
                <button data-testid="hang-worker" on:click=move |_| {
                    // Pretend a run started so the watchdog expects answers.
                    state.update(|m| {
                        m.mark_alive(js_sys::Date::now());
                        m.run.state = RunState::Starting;
                    });
                    state.send(&ToWorker::Hang);
                }>
                                        "Make the worker hang (test hook)"
                </button>
                <button data-testid="lose-gpu" on:click=move |_| state.send(&ToWorker::LoseGpu)>
                    "Destroy the worker's GPU device (test hook)"
                </button>
                <button data-testid="psi2-gpu-always" on:click=move |_| {
                    state.send(&ToWorker::CollapsedOn { gpu: true })
                }>
                    "Send every collapsed Ψ2 to the GPU, unmeasured (test hook)"
                </button>
                <button data-testid="families-gpu-always" on:click=move |_| {
                    state.send(&ToWorker::FamilyFitsOn { gpu: true })
                }>
                    "Fit every family on the GPU, unmeasured (test hook)"
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
fn ErrorBanner(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    move || {
        state.page.error.get().map(|message| {
            view! {
                <div class="error" data-testid="error" role="alert">
                    <p>{message}</p>
                    <div class="error-actions">
                        {move || state.page.worker_dead.get().then(|| view! {
                            <button data-testid="restart-worker" on:click=move |_| state.restart_worker()>
                                "Restart the worker"
                            </button>
                        })}
                        {move || (state.page.worker_dead.get() && state.page.saved_run.with(Option::is_some)).then(|| view! {
                            <button data-testid="resume-run" class="primary" on:click=move |_| state.continue_saved_run()
                                title="Start a fresh worker and go on with the run from its last save (every 5 s); it ends as it would have uninterrupted">
                                "Go on with the run"
                            </button>
                        })}
                        <button class="quiet" on:click=move |_| state.update(PageModel::dismiss_error)>"Dismiss"</button>
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
fn BackendBadge(
    #[prop(into)] backend: Signal<BackendState>,
    /// Compute workers of the current or last run.
    #[prop(into)]
    compute_workers: Signal<Option<usize>>,
) -> impl IntoView {
    let text = move || match backend.get() {
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
    let code = move || match backend.get() {
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
    let adapter = move || match backend.get() {
        BackendState::Known {
            adapter: Some(_), ..
        } => "available",
        BackendState::Known { adapter: None, .. } => "none",
        _ => "unknown",
    };
    let switched = move || match backend.get() {
        BackendState::Known { switched: true, .. } => "yes",
        _ => "no",
    };
    let title = move || {
        match backend.get() {
        BackendState::Known {
            backend: ComputeBackend::WebGpu,
            adapter,
            ..
        } => format!(
            "This run computes on WebGPU ({}): the uncollapsed bound's kernel matrices, predictions, q(v) and its M × M algebra in float32 and double-float (the encoder, Adam and the bound's last sums in f64 on the CPU), or the collapsed bound's Ψ2 sums in double-float — for the exact search's family fits in lockstep, each round's sums of every fit in one submission, where measured faster than the CPU.",
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
        compute_workers.get().map(|n| {
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
