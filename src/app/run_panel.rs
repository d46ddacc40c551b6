//! The run: start, pause/resume and stop; the status word, the phase banner, the progress bar with
//! time left; and the live views (adjacency heatmap, DAG, objective curves) redrawn from each
//! snapshot the worker sends.

use super::charts::{draw_curves, draw_heatmap, heatmap_cell_at};
use super::dag_view::{drawing, DagView};
use super::settings_store::SettingsStore;
use super::{AppState, DataState, RunState};
use crate::discovery::settings::Method;
use crate::engine::{RunResult, Snapshot, Status};
use crate::page_model::chart_scale::HeatmapScale;
use crate::page_model::{
    format_number, fraction_reached, phase_name, progress_shown, History, RunProgress,
};
use crate::worker::protocol::RunRequest;
use leptos::prelude::*;

/// Why the Run button is disabled, or `None` when a run can start with the settings and knowledge
/// of `store`.
pub(super) fn blocker(state: AppState, store: SettingsStore) -> Option<String> {
    if state.page.worker_dead.get() {
        return Some("the worker must be restarted first".into());
    }
    if let Some(work) = state.busy_with() {
        return Some(work.into());
    }
    if !matches!(state.page.data.get(), DataState::Loaded { .. }) {
        return Some("load data first".into());
    }
    if let Err(e) = store.settings() {
        return Some(format!("fix the settings: {e}"));
    }
    if let Some(Err(e)) = store.knowledge(state.page.data.with(DataState::names)) {
        return Some(format!("fix the prior knowledge: {e}"));
    }
    None
}

/// Starts a run with the settings and knowledge of `store`, if they can be used.
pub(super) fn start_run(state: AppState, store: SettingsStore) {
    let names = state.page.data.with(DataState::names);
    let (Ok((settings, seed)), Some(Ok(knowledge))) = (store.settings(), store.knowledge(names))
    else {
        return;
    };
    state.start_run(RunRequest {
        // Given by the model.
        run_id: 0,
        preset: store.preset.get_untracked(),
        settings,
        seed,
        knowledge,
    });
}

#[component]
pub fn RunPanel(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    let store = SettingsStore::expect();
    let active = move || state.page.run.get().active();
    let on_pause = move |_| state.toggle_pause();
    let pause_label = move || {
        if state.page.run.get() == RunState::Paused {
            "Resume"
        } else if state.page.pause_pending.get() {
            "Pausing…"
        } else {
            "Pause"
        }
    };
    let pause_title = move || {
        state.page.pause_pending.get().then_some(
            "The worker pauses when the computation it is inside ends (a large fit can take a \
             while); Stop acts within 2 s.",
        )
    };

    view! {
        <section class="panel run" aria-labelledby="run-heading">
            <h2 id="run-heading">"4. Discover"</h2>
            <div class="controls">
                <button class="primary" data-testid="run-button" on:click=move |_| start_run(state, store)
                    prop:disabled=move || blocker(state, store).is_some()
                    title=move || blocker(state, store).unwrap_or_else(|| "Start a run with these settings".into())>
                    "Run"
                </button>
                <button data-testid="pause-button" on:click=on_pause title=pause_title
                    prop:disabled=move || !active() || state.page.pause_pending.get()>
                    {pause_label}
                </button>
                <button data-testid="stop-button" on:click=move |_| state.request_stop() prop:disabled=move || !active()>
                    "Stop"
                </button>
                <span class="status-label">"Status: "
                                        <strong data-testid="status" aria-live="polite" data-snapshots=move || state.page.snapshots_seen.get() data-saved=move || state.page.saved_run.with(Option::is_some).to_string()>{move || state.status_code()}</strong>
                </span>
            </div>
                        {move || blocker(state, store).filter(|_| !active()).map(|b| view! {
                <p class="hint">"Run is unavailable: " {b} " "
                    {move || state.page.worker_dead.get().then(|| view! {
                        <button on:click=move |_| state.restart_worker()>"Restart the worker"</button>
                    })}
                </p>
            })}
            <PhaseBanner snapshot=state.page.snapshot />
            <ProgressBar snapshot=state.page.snapshot run=state.page.run />
            <div class="live">
                // More than 12 variables get the whole width, so that every name fits.
                <figure class:wide=move || heatmap_size(state.names().as_deref()).is_some()>
                    <figcaption>{move || heatmap_caption(state)}</figcaption>
                    <Heatmap names=Signal::derive(move || state.names()) result=state.page.result
                        snapshot=state.page.snapshot on_pair=Callback::new(move |pair| state.explain_pair(pair)) />
                </figure>
                // A graph of more than 8 variables gets the whole width.
                <figure class:wide=move || state.names().is_some_and(|n| n.len() > 8)>
                    <figcaption>"Graph"</figcaption>
                    <DagView drawing=Signal::derive(move || drawing(state))
                        on_edge=Callback::new(move |pair| state.explain_pair(pair)) />
                </figure>
                // The exact search optimises no objective over iterations: nothing to plot
                // (`auto` is exact too for the loaded data's size).
                <figure class="wide" data-testid="objective-figure"
                    class:hidden=move || {
                        let d = state.names().map_or(0, |n| n.len());
                        store.method.get().resolve(d).0 == Method::Exact
                    }>
                    <figcaption>"Objective: evidence bound, h(A) and γ"</figcaption>
                    <LossChart snapshot=state.page.snapshot history=state.page.history />
                </figure>
            </div>
        </section>
    }
}

/// What the live heatmap shows now.
fn heatmap_caption(state: AppState) -> &'static str {
    let exact_result = state
        .page
        .result
        .with(|r| r.as_ref().map(|r| r.exact.is_some()));
    let (exact_running, exact_live) = state.page.snapshot.with(|s| {
        let x = s.as_ref().and_then(|s| s.exact.as_ref());
        (x.is_some(), x.is_some_and(|x| x.live_log_score.is_some()))
    });
    match exact_result {
        Some(true) => "Posterior probabilities of the chosen edges (row = cause, column = effect)",
        Some(false) => "Weighted adjacency (row = cause, column = effect)",
        None if exact_live => {
            "Edge probabilities over the families scored so far; outlined: the best graph so far (row = cause, column = effect)"
        }
        None if exact_running => {
            "One-parent evidence gains F(effect | cause) − F(effect | ∅), nats (row = cause, column = effect)"
        }
        None => "Weighted adjacency (row = cause, column = effect)",
    }
}

/// The phase and one plain sentence of what is happening now.
#[component]
fn PhaseBanner(#[prop(into)] snapshot: Signal<Option<Snapshot>>) -> impl IntoView {
    move || {
        snapshot.get().map(|s| {
            let restarts = s.restarts.len();
            let code = serde_json::to_value(s.phase)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let detail = s.terms.map(|t| {
                format!(
                    " · bound {} nats · h(A) {} · γ {}",
                    format_number(t.elbo),
                    format_number(t.h),
                    format_number(t.gamma)
                )
            });
            let stopped = s.status == Status::Stopped;
            let sentence = if stopped {
                format!(
                    "You stopped the run during the {} phase: the result below is the best graph so far.",
                    phase_name(s.phase)
                )
            } else {
                s.phase_text.clone()
            };
            let where_text = match &s.exact {
                Some(x) => view! {
                    " · families "
                    <span data-testid="families-progress" data-done=x.done data-total=x.total
                        data-live-score=x.live_log_score.map(|v| format!("{v:.3}"))>
                        {x.done} " / " {x.total}
                    </span>
                    " · " {x.families_fitted} " fitted, " {x.cache_hits} " from the cache"
                }
                .into_any(),
                None => view! { " · restart " {s.restart + 1} " of " {restarts} " · iteration " {s.iteration} }
                    .into_any(),
            };
            view! {
                <div class="phase" class:stopped=stopped data-testid="phase" data-phase=code>
                    <strong>{if stopped { "stopped".to_string() } else { phase_name(s.phase).to_string() }}</strong>
                    {where_text}
                    {detail}
                                        <p>{sentence}</p>
                </div>
            }
        })
    }
}

/// Fraction done, and an upper estimate of the time left; a stopped run's bar stays where the run
/// stopped.
#[component]
fn ProgressBar(
    #[prop(into)] snapshot: Signal<Option<Snapshot>>,
    #[prop(into)] run: Signal<RunState>,
) -> impl IntoView {
    // The fraction the run had reached: the worker's final snapshot of a stopped run says 1, so
    // the bar keeps the last running snapshot's fraction instead.
    let reached = RwSignal::new(0.0);
    Effect::new(move |_| {
        let next = snapshot.with(|s| match s {
            None => 0.0,
            Some(s) => fraction_reached(
                reached.get_untracked(),
                s.status == Status::Running,
                s.progress,
            ),
        });
        reached.set(next);
    });
    let shown = Memo::new(move |_| {
        let run = run.get();
        let reached = reached.get();
        snapshot.with(|s| {
            let progress = match s {
                None => RunProgress::NotStarted,
                Some(s) => match run {
                    RunState::Paused => RunProgress::Paused {
                        fraction: s.progress,
                    },
                    RunState::Ended(Status::Stopped) => RunProgress::Stopped {
                        reached,
                        elapsed: s.elapsed_seconds,
                    },
                    RunState::Ended(_) => RunProgress::Finished {
                        elapsed: s.elapsed_seconds,
                    },
                    _ => RunProgress::Running {
                        fraction: s.progress,
                        elapsed: s.elapsed_seconds,
                        remaining: s.remaining_seconds,
                    },
                },
            };
            progress_shown(progress)
        })
    });
    let fraction = move || shown.with(|p| p.fraction);
    let bar_state = move || shown.with(|p| p.state);
    view! {
        <div class="progress-row">
            <progress data-testid="progress" aria-label="Progress of the run" max="1"
                data-state=bar_state
                prop:value=fraction data-fraction=move || format!("{:.3}", fraction())></progress>
            <span data-testid="time-left" data-state=bar_state>{move || shown.with(|p| p.text.clone())}</span>
        </div>
    }
}

/// The weighted adjacency of the restart shown, as a heatmap (the result's once a run ends).
#[component]
fn Heatmap(
    /// The variables shown (none before data are loaded).
    #[prop(into)]
    names: Signal<Option<Vec<String>>>,
    #[prop(into)] result: Signal<Option<RunResult>>,
    #[prop(into)] snapshot: Signal<Option<Snapshot>>,
    /// Called with the (cause, effect) cell clicked once a result is shown.
    on_pair: Callback<(usize, usize)>,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        let Some(el) = canvas.get() else { return };
        let names = names.get().unwrap_or_default();
        // The exact search's matrices are edge probabilities, or while it screens, gains in nats.
        let (weights, edges, kind) = match (result.get(), snapshot.get()) {
            (Some(r), _) => {
                let kind = if r.exact.is_some() {
                    HeatmapScale::Probability
                } else {
                    HeatmapScale::WEIGHT
                };
                (r.adjacency.clone(), r.edges.clone(), kind)
            }
            (None, Some(s)) => {
                let kind = match &s.exact {
                    Some(x) if x.live_log_score.is_some() => HeatmapScale::Probability,
                    Some(_) => HeatmapScale::Weight { title: "nats" },
                    None => HeatmapScale::WEIGHT,
                };
                (s.adjacency.clone(), s.edges.clone(), kind)
            }
            (None, None) => (Vec::new(), Vec::new(), HeatmapScale::WEIGHT),
        };
        if let Err(e) = draw_heatmap(&el, &names, &weights, &edges, kind) {
            web_sys::console::warn_1(&format!("heatmap: {e}").into());
        }
    });
    let class = move || match names.with(|n| heatmap_size(n.as_deref())) {
        Some((size, _)) => format!("heatmap {size}"),
        None => "heatmap".to_string(),
    };
    let has_result = move || result.with(Option::is_some);
    let on_click = move |event: leptos::ev::MouseEvent| {
        if !has_result() {
            return;
        }
        if let Some(cell) = canvas.get().and_then(|el| heatmap_cell_at(&el, &event)) {
            on_pair.run(cell);
        }
    };
    // A large canvas on a narrow screen scrolls inside the figure instead of widening the page.
    view! {
        <div class="heatmap-scroll">
            <canvas node_ref=canvas class=class class:clickable=has_result data-testid="adjacency-canvas" width="420" height="400"
                title=move || has_result().then_some("Click a cell: why the graph has, or leaves out, that edge")
                on:click=on_click
                role="img" aria-label="Heatmap of the weighted adjacency matrix"></canvas>
        </div>
    }
}

/// The heatmap's size class for the variables shown (`None`: the default size).
fn heatmap_size(names: Option<&[String]>) -> Option<(&'static str, f64)> {
    names.and_then(|n| crate::page_model::chart_scale::heatmap_size_class(n.len()))
}

/// The bound, h(A) and γ of the restart shown.
#[component]
fn LossChart(
    #[prop(into)] snapshot: Signal<Option<Snapshot>>,
    #[prop(into)] history: Signal<History>,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        let Some(el) = canvas.get() else { return };
        let shown = snapshot.with(|s| s.as_ref().map_or(0, |s| s.restart));
        let result = history.with(|h| draw_curves(&el, h.points(shown), &h.phase_starts(shown)));
        if let Err(e) = result {
            web_sys::console::warn_1(&format!("curves: {e}").into());
        }
    });
    view! {
        <canvas node_ref=canvas class="curves" data-testid="loss-chart" width="860" height="330"
            role="img" aria-label="Curves of the evidence bound, h(A) and gamma over iterations"></canvas>
    }
}
