//! Results: the chosen graph's summary, every restart's evidence, the comparison with an optional
//! ground truth (SHD in both conventions, SID, precision, recall, F1), and the exports.

use super::dag_view::truth_report;
use super::download::{download_graph_png, download_text, graph_svg_text};
use super::exact_view::ExactResults;
use super::explain_view::{EdgeExplanation, EquivalenceClass};
use super::{edge_weight, result_graph, AppState, Explanation, Truth};
use crate::base::names::Choice;
use crate::discovery::settings::Method;
use crate::engine::output::{determined_note, output_files};
use crate::engine::{RunResult, Status};
use crate::graph::{to_dagitty, to_tetrad, EdgeKind};
use crate::page_model::format_number;
use crate::runner::gpu::SteadyState;
use leptos::prelude::*;
use wasm_bindgen_futures::JsFuture;

fn export_name(state: AppState, suffix: &str) -> String {
    let stem = state
        .page
        .data
        .with_untracked(|d| d.stem())
        .or_else(|| {
            state
                .page
                .record_file
                .get_untracked()
                .map(|f| f.trim_end_matches(".json").to_string())
        })
        .unwrap_or_else(|| "occam".into());
    format!("{stem}-{suffix}")
}

/// One export button.
fn export_button(
    state: AppState,
    testid: &'static str,
    label: &'static str,
    make: fn(AppState, &RunResult) -> Result<(), String>,
) -> impl IntoView {
    let on_click = move |_| {
        let outcome = state.page.result.with_untracked(|r| match r {
            Some(r) => make(state, r),
            None => Err("there is no result to export".into()),
        });
        if let Err(e) = outcome {
            state.show_error(format!("export failed: {e}"));
        }
    };
    view! { <button data-testid=testid on:click=on_click>{label}</button> }
}

/// Downloads one of the files `occam discover` writes (the same text: a stopped run's graph files
/// begin with the line saying so; a run without a graph has none).
fn result_file(state: AppState, r: &RunResult, name: &str, mime: &str) -> Result<(), String> {
    let text = output_files(r)
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| text)
        .ok_or("the run stopped before it had a graph: there is none to export")?;
    download_text(&export_name(state, name), mime, &text)
}

fn graph_text(
    state: AppState,
    r: &RunResult,
    suffix: &str,
    mime: &str,
    write: fn(&crate::graph::Digraph, &[String]) -> String,
) -> Result<(), String> {
    let graph = result_graph(r).ok_or("the result's edges do not fit its variables")?;
    download_text(&export_name(state, suffix), mime, &write(&graph, &r.names))
}

#[component]
pub fn ResultsPanel(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    let on_truth = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        let Some(file) = input.files().and_then(|f| f.get(0)) else {
            return;
        };
        input.set_value("");
        wasm_bindgen_futures::spawn_local(async move {
            match JsFuture::from(file.text()).await {
                Ok(text) => state.set_truth(Some(Truth {
                    file_name: file.name(),
                    text: text.as_string().unwrap_or_default(),
                })),
                Err(e) => {
                    state.show_error(format!("the browser could not read {}: {e:?}", file.name()))
                }
            }
        });
    };

    move || {
        let result = state.page.result.get()?;
        let status = match result.status {
            Status::Done => "finished",
            Status::Stopped => "stopped early: the best graph so far",
            Status::Failed => "failed",
            Status::Running => "running",
        };
        let source = state
            .page
            .record_file
            .get()
            .map(|f| view! { <p class="note">"Loaded from the saved run record " <strong>{f}</strong> "."</p> });
        let chosen = result.chosen_restart;
        let restart_rows = result
            .restarts
            .iter()
            .map(|o| {
                let mark = (Some(o.index) == chosen).then_some("✓ chosen");
                view! {
                    <tr class:chosen=Some(o.index) == chosen>
                        <td>{o.index + 1}</td>
                        <td>{format_number(o.score)}</td>
                        <td>{format_number(o.elbo)}</td>
                        <td>{format_number(o.log_prior)}</td>
                        <td>{o.edges.len()}</td>
                        <td>{o.iterations}</td>
                        <td>{mark}</td>
                    </tr>
                }
            })
            .collect_view();
        let failures = result
            .failures
            .iter()
            .map(|f| view! { <li>{f.clone()}</li> })
            .collect_view();
        let edge_list = result
            .edges
            .iter()
            .map(|&(i, j)| {
                let w = edge_weight(&result.adjacency, i, j);
                let what = if result.exact.is_some() { " (posterior probability " } else { " (weight " };
                let busy = move || matches!(state.page.explanation.get(), Explanation::Working { .. });
                view! {
                    <li>
                        <span class="name">{result.names[i].clone()}</span> " → " <span class="name">{result.names[j].clone()}</span> {what} {format_number(w)} ")"
                        " "
                        <button class="small" data-testid="explain-edge" data-edge=format!("{i}->{j}")
                            title="Refit the variables this edge concerns without it and reversed, and compare the evidence"
                            disabled=busy on:click=move |_| state.explain((i, j))>"Why?"</button>
                    </li>
                }
            })
            .collect_view();
        // Every variable with a parent can show its fitted conditional.
        let with_parents: Vec<usize> = (0..result.names.len())
            .filter(|&j| result.edges.iter().any(|&(_, c)| c == j))
            .collect();
        let variable_buttons = (!with_parents.is_empty()).then(|| {
            let buttons = with_parents
                .into_iter()
                .map(|j| {
                    let busy = move || matches!(state.page.explanation.get(), Explanation::Working { .. });
                    view! {
                        <button class="small" data-testid="explain-variable" data-variable=result.names[j].clone()
                            disabled=busy on:click=move |_| state.explain_variable(j)>{result.names[j].clone()}</button>
                    }
                })
                .collect_view();
            view! { <p class="variable-buttons">"Fitted conditional of: " {buttons}</p> }
        });
        let truth_name = state.page.truth.get().map(|t| t.file_name);
        Some(view! {
            <section class="panel" data-testid="results" aria-labelledby="results-heading">
                <h2 id="results-heading">"5. Result"</h2>
                {source}
                <p data-testid="result-summary">
                    "Status: " {status} " · " {result.edges.len()} " edges among " {result.names.len()}
                    " variables · seed " {result.seed} " · " {format!("{:.1}", result.seconds)} " s on " {result.backend.clone()}
                    " · rows used " {result.rows_used} " of " {result.rows}
                    " · method " <span data-testid="result-method">{result.method.name()}</span>
                </p>
                {result.method_reason.clone().map(|why| view! {
                    <p class="hint" data-testid="result-method-reason">{why}</p>
                })}
                {determined_note(&result).map(|note| view! {
                    <p class="warning" data-testid="determined-note">{note}</p>
                })}
                {result.device_choices.iter().map(|choice| view! {
                    <p class="hint" data-testid="device-choice" data-work=choice.work.clone()
                        data-chosen=choice.chosen.clone() data-device-jobs=choice.device_jobs.to_string()
                        data-cpu-jobs=choice.cpu_jobs.to_string()>
                        {format!("The {} computed on the {}: {}.", choice.work, choice.chosen, choice.reason)}
                    </p>
                }).collect_view()}
                {result.gpu.map(|gpu| view! { <GpuTraffic steady=gpu.steady_state /> })}
                <details open>
                    <summary>"Edges"</summary>
                    <ul class="edges" data-testid="edge-list">{edge_list}</ul>
                    {variable_buttons}
                    <EdgeExplanation state=state />
                    <EquivalenceClass result=state.page.result shown=state.cpdag_shown />
                </details>
                <ExactResults result=state.page.result on_pair=Callback::new(move |pair| state.explain_pair(pair)) />
                {(result.method != Method::Exact).then(|| view! {
                    <h3>"Restarts (evidence in nats; the highest score wins)"</h3>
                    <div class="scroll">
                        <table class="restarts" data-testid="restarts">
                            <thead><tr><th>"restart"</th><th>"score = bound + log prior"</th><th>"bound"</th><th>"log prior"</th><th>"edges"</th><th>"iterations"</th><th></th></tr></thead>
                            <tbody>{restart_rows}</tbody>
                        </table>
                    </div>
                    {result.restarts.is_empty().then(|| view! {
                        <p class="hint">"No restart ran to its end, so none has a final score. The graph shown is the best running restart's, thresholded to a DAG as the search would."</p>
                    })}
                })}
                {(!result.failures.is_empty()).then(|| view! { <ul class="problems">{failures}</ul> })}
                <h3>"Compare with a ground truth"</h3>
                <label class="inline file-button">
                    "Upload the true graph (adjacency matrix, from,to edge list or graph.json; labelled files are matched by name)"
                    <input type="file" accept=".csv,.txt,.tsv,.json" data-testid="truth-input" on:change=on_truth />
                </label>
                {truth_name.map(|n| view! { <span class="hint">" Truth: " {n}</span> })}
                <Metrics state=state />
                <h3>"Export"</h3>
                <div class="exports">
                    {export_button(state, "export-csv", "Adjacency CSV", |s, r| result_file(s, r, "adjacency.csv", "text/csv"))}
                    {export_button(state, "export-edges", "Edge list CSV", |s, r| result_file(s, r, "edges.csv", "text/csv"))}
                    {export_button(state, "export-dot", "DOT (Graphviz)", |s, r| result_file(s, r, "graph.dot", "text/vnd.graphviz"))}
                    {export_button(state, "export-dagitty", "DAGitty", |s, r| graph_text(s, r, "dagitty.txt", "text/plain", to_dagitty))}
                    {export_button(state, "export-tetrad", "Tetrad", |s, r| graph_text(s, r, "tetrad.txt", "text/plain", to_tetrad))}
                    {export_button(state, "export-json", "Run record (JSON)", |s, r| {
                        let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
                        download_text(&export_name(s, "result.json"), "application/json", &(json + "\n"))
                    })}
                    {export_button(state, "export-svg", "Graph SVG", |s, _| {
                        download_text(&export_name(s, "graph.svg"), "image/svg+xml", &graph_svg_text()?)
                    })}
                    {export_button(state, "export-png", "Graph PNG", |s, _| download_graph_png(export_name(s, "graph.png")))}
                </div>
            </section>
        })
    }
}

/// The metrics against the truth, with the edge-colour legend.
#[component]
fn Metrics(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    move || match truth_report(state)? {
        Err(e) => Some(
            view! { <p class="invalid" data-testid="truth-error" role="alert">{e}</p> }.into_any(),
        ),
        Ok(report) => {
            let c = &report.comparison;
            let count = |k: EdgeKind| report.classes.iter().filter(|e| e.kind == k).count();
            let sid = match c.sid {
                Some(s) => s.to_string(),
                None => "undefined (a graph has a cycle)".into(),
            };
            Some(
                view! {
                    <div class="metrics" data-testid="metrics">
                        <table>
                            <tbody>
                                <tr><th>"SHD (reversed edge counts 2)"</th><td data-metric="shd">{c.shd}</td></tr>
                                <tr><th>"SHD (reversed edge counts 1)"</th><td data-metric="shd_reversal_1">{c.shd_reversal_1}</td></tr>
                                <tr><th>"SID (Peters & Bühlmann)"</th><td data-metric="sid">{sid}</td></tr>
                                <tr><th>"Precision (directed edges)"</th><td data-metric="precision">{format!("{:.3}", c.precision)}</td></tr>
                                <tr><th>"Recall (directed edges)"</th><td data-metric="recall">{format!("{:.3}", c.recall)}</td></tr>
                                <tr><th>"F1 (directed edges)"</th><td data-metric="f1">{format!("{:.3}", c.f1)}</td></tr>
                            </tbody>
                        </table>
                        <ul class="legend">
                            <li class="correct">"correct: " {count(EdgeKind::Correct)}</li>
                            <li class="reversed">"reversed: " {count(EdgeKind::Reversed)}</li>
                            <li class="missing">"missing (dashed): " {count(EdgeKind::Missing)}</li>
                            <li class="extra">"extra: " {count(EdgeKind::Extra)}</li>
                            <li>"true edges: " {report.truth_edges}</li>
                        </ul>
                    </div>
                }
                .into_any(),
            )
        }
    }
}

/// What crossed between this worker and the GPU per training iteration (result.json's
/// `gpu.steady_state`), so a user sees how the engine drives the device.
#[component]
fn GpuTraffic(
    /// The run's traffic over its iterations after the first.
    steady: SteadyState,
) -> impl IntoView {
    let t = steady.traffic;
    let kb = |bytes: u64| format!("{:.1}", steady.per_evaluation(bytes) / 1024.0);
    view! {
        <p class="hint" data-testid="gpu-traffic"
            data-iterations=steady.iterations.to_string()
            data-submissions=t.submissions.to_string()
            data-blocking-waits=t.blocking_waits.to_string()
            data-buffers-created=t.buffers_created.to_string()
            data-bind-groups-created=t.bind_groups_created.to_string()
            data-dispatches=t.dispatches.to_string()
            data-copies=t.copies.to_string()
            data-mappings=t.mappings.to_string()
            title="Counted over the iterations after the first (which creates the device's buffers and bind groups)">
            "GPU per iteration, over " {steady.iterations} " iterations: "
            {format!("{:.2}", steady.per_iteration(t.submissions))} " submissions, "
            {format!("{:.2}", steady.per_iteration(t.blocking_waits))} " blocking waits, "
            {format!("{:.1}", steady.per_iteration(t.dispatches))} " kernel dispatches, "
            {format!("{:.1}", steady.per_iteration(t.copies))} " buffer copies; per variable "
            {kb(t.bytes_uploaded)} " KiB uploaded and " {kb(t.bytes_read_back)} " KiB read back; "
            {t.buffers_created} " buffers and " {t.bind_groups_created} " bind groups created."
        </p>
    }
}
