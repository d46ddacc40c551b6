//! Data in: the drop zone and file picker, and the view of what the worker made of the file
//! (summary, per-column statistics, preview, problems) or why it refused it.

use super::worker_client::WorkerClient;
use crate::data::{CsvOptions, DatasetSummary};
use crate::protocol::{ErrorReport, FromWorker, ProblemReport, ToWorker};
use js_sys::ArrayBuffer;
use leptos::prelude::*;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::File;

/// What the page shows about the current file.
#[derive(Debug, Clone, PartialEq)]
pub enum DataState {
    Empty,
    Reading(String),
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
    /// The worker could not do its job (it died or reported an internal error).
    WorkerFailed(String),
}

impl DataState {
    /// The state a data reply from the worker leads to.
    pub fn from_reply(reply: FromWorker) -> Self {
        match reply {
            FromWorker::DataLoaded {
                file_name,
                summary,
                delimiter,
                problems,
                preview,
            } => DataState::Loaded {
                file_name,
                summary,
                delimiter,
                problems,
                preview,
            },
            FromWorker::DataRejected { file_name, error } => {
                DataState::Rejected { file_name, error }
            }
            FromWorker::Failed { message } => DataState::WorkerFailed(message),
            FromWorker::Ready | FromWorker::Pong { .. } => DataState::Empty,
        }
    }
}

/// Reads `file` and hands its bytes to the worker.
fn submit(
    file: File,
    data: RwSignal<DataState>,
    worker: Option<StoredValue<WorkerClient, LocalStorage>>,
) {
    let name = file.name();
    let Some(worker) = worker else {
        data.set(DataState::WorkerFailed(
            "the Web Worker is not running, so the file cannot be read".into(),
        ));
        return;
    };
    data.set(DataState::Reading(name.clone()));
    wasm_bindgen_futures::spawn_local(async move {
        let buffer = match JsFuture::from(file.array_buffer()).await {
            Ok(b) => b.unchecked_into::<ArrayBuffer>(),
            Err(e) => {
                data.set(DataState::WorkerFailed(format!(
                    "the browser could not read {name}: {e:?}"
                )));
                return;
            }
        };
        let request = ToWorker::LoadCsv {
            file_name: name,
            options: CsvOptions::default(),
        };
        if let Err(message) = worker.with_value(|w| w.send(&request, Some(buffer))) {
            data.set(DataState::WorkerFailed(message));
        }
    });
}

#[component]
pub fn DataPanel(
    data: RwSignal<DataState>,
    worker: Option<StoredValue<WorkerClient, LocalStorage>>,
) -> impl IntoView {
    let dragging = RwSignal::new(false);
    let on_drop = move |ev: web_sys::DragEvent| {
        ev.prevent_default();
        dragging.set(false);
        let file = ev
            .data_transfer()
            .and_then(|dt| dt.files())
            .and_then(|files| files.get(0));
        if let Some(file) = file {
            submit(file, data, worker);
        }
    };
    let on_change = move |ev: web_sys::Event| {
        let input: web_sys::HtmlInputElement = event_target(&ev);
        if let Some(file) = input.files().and_then(|files| files.get(0)) {
            submit(file, data, worker);
        }
        // Allow choosing the same file again after fixing it.
        input.set_value("");
    };

    view! {
        <section class="panel">
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
                <input type="file" accept=".csv,.tsv,.txt,text/csv" data-testid="file-input" on:change=on_change />
                <strong>"Drop a CSV file here"</strong>
                " or click to choose one."
                <span class="hint">"One header row; comma, semicolon or tab separated; '.' decimals. Nothing is uploaded."</span>
            </label>
            {move || view_state(data.get())}
        </section>
    }
}

fn view_state(state: DataState) -> AnyView {
    match state {
        DataState::Empty => ().into_any(),
        DataState::Reading(name) => {
            view! { <p class="status">"Reading " {name} "…"</p> }.into_any()
        }
        DataState::Rejected { file_name, error } => view! {
            <div class="error" data-testid="error" data-kind=error.kind.clone() role="alert">
                <strong>{file_name} " was not loaded"</strong>
                <p>{error.message}</p>
            </div>
        }
        .into_any(),
        DataState::WorkerFailed(message) => view! {
            <div class="error" data-testid="error" role="alert"><p>{message}</p></div>
        }
        .into_any(),
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
            <h2>{file_name}</h2>
            <p class="shape">
                <span data-testid="rows">{summary.rows}</span> " rows × "
                <span data-testid="columns">{summary.columns}</span> " columns, delimiter " {delimiter}
            </p>
            {if problems.is_empty() {
                view! { <p class="ok">"No problems found."</p> }.into_any()
            } else {
                view! {
                    <ul class="problems">
                        {problems.into_iter().map(|p| view! {
                            <li>{p.message} " — " <em>{p.action}</em></li>
                        }).collect_view()}
                    </ul>
                }.into_any()
            }}
            <h3>"Columns"</h3>
            <table class="stats">
                <thead><tr><th>"column"</th><th>"mean"</th><th>"sd"</th><th>"min"</th><th>"max"</th><th>"distinct"</th></tr></thead>
                <tbody>
                    {columns.into_iter().map(|c| view! {
                        <tr>
                            <td>{c.name}</td>
                            <td>{fmt(c.mean)}</td>
                            <td>{fmt(c.sd)}</td>
                            <td>{fmt(c.min)}</td>
                            <td>{fmt(c.max)}</td>
                            <td>{c.distinct}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <h3>"First rows"</h3>
            <div class="scroll">
                <table class="preview">
                    <thead><tr>{names.into_iter().map(|n| view! { <th>{n}</th> }).collect_view()}</tr></thead>
                    <tbody>
                        {preview.into_iter().map(|row| view! {
                            <tr>{row.into_iter().map(|v| view! { <td>{fmt(v)}</td> }).collect_view()}</tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </div>
        </div>
    }
    .into_any()
}

/// Numbers for tables: 4 significant digits, scientific outside [1e-3, 1e5).
fn fmt(v: f64) -> String {
    if v == 0.0 || (1e-3..1e5).contains(&v.abs()) {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        format!("{v:.3e}")
    }
}
