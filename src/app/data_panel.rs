//! Data in: the drop zone, the file picker, the built-in examples and opening a saved run record;
//! then the view of what the worker made of the file (progress while reading, summary,
//! per-column statistics, preview, problems with what is done about each).

use super::{examples, AppState, DataState};
use crate::data::DatasetSummary;

use crate::page_model::{format_bytes, format_number, read_record};
use crate::worker::protocol::ProblemReport;
use leptos::prelude::*;
use wasm_bindgen_futures::JsFuture;
use web_sys::File;

/// Largest run record read back (they are a few kB to a few MB).
const MAX_RECORD_BYTES: f64 = 64.0 * 1024.0 * 1024.0;

fn submit_user_file(state: AppState, file: File) {
    // A user's own file comes without a ground truth.
    state.set_truth(None);
    state.submit_file(file.name(), file.into());
}

/// Reads a saved run record and shows its result.
fn open_record(state: AppState, file: File) {
    let name = file.name();
    if file.size() > MAX_RECORD_BYTES {
        state.show_error(format!(
            "{name} is {}: too large for a run record",
            format_bytes(file.size() as usize)
        ));
        return;
    }
    wasm_bindgen_futures::spawn_local(async move {
        let text = match JsFuture::from(file.text()).await {
            Ok(t) => t.as_string().unwrap_or_default(),
            Err(e) => {
                state.show_error(format!("the browser could not read {name}: {e:?}"));
                return;
            }
        };
        match read_record(&text) {
            Ok(result) => state.show_record(name, result),
            Err(e) => state.show_error(format!("{name} was not opened: {e}")),
        }
    });
}

#[component]
pub fn DataPanel(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    let dragging = RwSignal::new(false);
    // No new file while a run is in progress or other data are still on their way.
    let busy = move || state.busy_with().is_some();
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        if let Some(work) = state.busy_with() {
            state.show_error(format!(
                "{work}: wait for it (or stop the run) before loading other data"
            ));
            return;
        }
        let file = ev
            .data_transfer()
            .and_then(|dt| dt.files())
            .and_then(|files| files.get(0));
        if let Some(file) = file {
            submit_user_file(state, file);
        }
    };
    let on_change = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(file) = input.files().and_then(|files| files.get(0)) {
            submit_user_file(state, file);
        }
        // Allow choosing the same file again after fixing it.
        input.set_value("");
    };
    let on_example = move |ev: web_sys::Event| {
        let select: web_sys::HtmlSelectElement = event_target(&ev);
        let stem = select.value();
        if let Some(example) = examples::EXAMPLES.iter().find(|e| e.stem == stem) {
            examples::load(state, example.stem);
        }
        // Back to "choose…", so choosing the same example again reloads it.
        select.set_value("");
    };
    let on_record = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(file) = input.files().and_then(|files| files.get(0)) {
            open_record(state, file);
        }
        input.set_value("");
    };

    view! {
        <section class="panel" aria-labelledby="data-heading">
            <h2 id="data-heading">"1. Data"</h2>
            <label
                class="drop-zone"
                class:dragging=move || dragging.get()
                data-testid="drop-zone"
                on:dragover=move |ev: web_sys::DragEvent| {
                    ev.prevent_default();
                    dragging.set(true);
                }
                on:dragleave=move |_| dragging.set(false)
                on:drop=on_drop
            >
                <input type="file" accept=".csv,.tsv,.txt,text/csv" data-testid="file-input" on:change=on_change prop:disabled=busy />
                <strong>"Drop a CSV file here"</strong>
                " or click to choose one."
                <span class="hint">"One header row; comma, semicolon or tab separated; '.' decimals. Nothing is uploaded: the file is read inside this page."</span>
            </label>
            <div class="row">
                <label class="inline">
                    "Or try an example: "
                    <select data-testid="example-select" on:change=on_example prop:disabled=busy>
                        <option value="" selected>"choose…"</option>
                        {examples::EXAMPLES.iter().map(|e| view! { <option value=e.stem>{e.title}</option> }).collect_view()}
                    </select>
                </label>
                <label class="inline file-button">
                    "Open a saved run record (.json)"
                    <input type="file" accept=".json,application/json" data-testid="record-input" on:change=on_record prop:disabled=busy />
                </label>
            </div>
            {move || view_state(state.page.data.get())}
        </section>
    }
}

fn view_state(data: DataState) -> AnyView {
    match data {
        DataState::Empty | DataState::Rejected { .. } => ().into_any(),
        DataState::Reading {
            file_name,
            bytes_read,
            total_bytes,
        } => {
            let fraction = if total_bytes > 0 {
                bytes_read as f64 / total_bytes as f64
            } else {
                0.0
            };
            view! {
                <div class="reading" data-testid="load-progress">
                    <p>"Reading " {file_name} ": " {format_bytes(bytes_read)} " of " {format_bytes(total_bytes)}</p>
                    <progress max="1" prop:value=fraction></progress>
                </div>
            }
            .into_any()
        }
        DataState::Loaded {
            file_name,
            summary,
            delimiter,
            problems,
            preview,
        } => view_summary(file_name, summary, delimiter, problems, preview),
    }
}

fn view_summary(
    file_name: String,
    summary: DatasetSummary,
    delimiter: char,
    problems: Vec<ProblemReport>,
    preview: Vec<Vec<f64>>,
) -> AnyView {
    let delimiter = match delimiter {
        '\t' => "tab".to_string(),
        c => format!("'{c}'"),
    };
    let names = summary.names.clone();
    let columns = summary.column_summaries.clone();
    view! {
        <div class="summary" data-testid="data-summary">
            <h3>{file_name}</h3>
            <p class="shape">
                <span data-testid="rows">{summary.rows}</span> " rows × "
                <span data-testid="columns">{summary.columns}</span> " columns, delimiter " {delimiter}
            </p>
            {if problems.is_empty() {
                view! { <p class="ok">"No problems found."</p> }.into_any()
            } else {
                view! {
                    <ul class="problems" data-testid="problems">
                        {problems.into_iter().map(|p| view! {
                            <li>{p.message} " — " <em>{p.action}</em></li>
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
            <details open>
                <summary>"Columns"</summary>
                <div class="scroll">
                    <table class="stats">
                        <thead><tr><th>"column"</th><th>"mean"</th><th>"sd"</th><th>"min"</th><th>"max"</th><th>"distinct"</th></tr></thead>
                        <tbody>
                            {columns.into_iter().map(|c| view! {
                                <tr>
                                    <td class="name">{c.name}</td>
                                    <td>{format_number(c.mean)}</td>
                                    <td>{format_number(c.sd)}</td>
                                    <td>{format_number(c.min)}</td>
                                    <td>{format_number(c.max)}</td>
                                    <td>{c.distinct}</td>
                                </tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            </details>
            <details open>
                <summary>"First rows"</summary>
                <div class="scroll">
                    <table class="preview">
                        <thead><tr>{names.into_iter().map(|n| view! { <th>{n}</th> }).collect_view()}</tr></thead>
                        <tbody>
                            {preview.into_iter().map(|row| view! {
                                <tr>{row.into_iter().map(|v| view! { <td>{format_number(v)}</td> }).collect_view()}</tr>
                            }).collect_view()}
                        </tbody>
                    </table>
                </div>
            </details>
        </div>
    }
    .into_any()
}
