//! The page (wasm only): Leptos components that show what the worker reports.
//!
//! Owns the user interface. It never parses or computes anything heavy itself: files go to the Web
//! Worker ([`worker_client`]) and the page renders the replies. A panic anywhere in the page is
//! turned into a visible error message instead of a blank page.

mod charts;
mod data_panel;
mod worker_client;

use crate::protocol::{ComputeBackend, FromWorker};
use data_panel::{DataPanel, DataState};
use leptos::prelude::*;
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
        if let Some(el) = web_sys::window()
            .and_then(|w| w.document())
            .and_then(|d| d.get_element_by_id("fatal"))
        {
            el.set_text_content(Some(&message));
            let _ = el.set_attribute("data-testid", "error");
            let _ = el.remove_attribute("hidden");
        }
    }));
}

/// What the page knows about the worker's compute backend.
#[derive(Debug, Clone, PartialEq)]
enum BackendState {
    /// The worker has not answered the ping yet.
    Probing,
    Known {
        backend: ComputeBackend,
        adapter: Option<String>,
    },
    /// The worker failed to start or died.
    Unavailable(String),
}

#[component]
fn App() -> impl IntoView {
    let backend = RwSignal::new(BackendState::Probing);
    let data = RwSignal::new(DataState::Empty);

    let on_reply = move |reply: FromWorker| match reply {
        FromWorker::Ready => {}
        FromWorker::Pong {
            backend: b,
            adapter,
        } => backend.set(BackendState::Known {
            backend: b,
            adapter,
        }),
        FromWorker::DataLoaded { .. } | FromWorker::DataRejected { .. } => {
            data.set(DataState::from_reply(reply));
        }
        FromWorker::Failed { message } => data.set(DataState::WorkerFailed(message)),
    };
    let on_fatal = move |message: String| {
        backend.set(BackendState::Unavailable(message.clone()));
        data.set(DataState::WorkerFailed(message));
    };
    let worker = match WorkerClient::spawn(on_reply, on_fatal) {
        Ok(w) => Some(StoredValue::new_local(w)),
        Err(message) => {
            backend.set(BackendState::Unavailable(message));
            None
        }
    };

    view! {
        <header class="top">
            <div class="brand">
                <h1>"Occam"</h1>
                <p class="tagline">"Bayesian causal discovery, in your browser. Your data never leaves this machine."</p>
            </div>
            <BackendBadge state=backend />
        </header>
        <main>
            <DataPanel data=data worker=worker />
        </main>
    }
}

/// The badge naming where the worker computes, with the adapter when it is a GPU.
#[component]
fn BackendBadge(state: RwSignal<BackendState>) -> impl IntoView {
    let text = move || match state.get() {
        BackendState::Probing => "Backend: checking…".to_string(),
        BackendState::Known { backend, adapter } => match adapter {
            Some(a) => format!("Backend: {} ({a})", backend.label()),
            None => format!("Backend: {}", backend.label()),
        },
        BackendState::Unavailable(_) => "Backend: worker unavailable".to_string(),
    };
    let code = move || match state.get() {
        BackendState::Probing => "probing",
        BackendState::Known {
            backend: ComputeBackend::WebGpu,
            ..
        } => "webgpu",
        BackendState::Known {
            backend: ComputeBackend::Cpu,
            ..
        } => "cpu",
        BackendState::Unavailable(_) => "unavailable",
    };
    view! {
        <span class="badge" data-testid="backend-badge" data-backend=code title="Where the Web Worker computes">
            {text}
        </span>
    }
}
