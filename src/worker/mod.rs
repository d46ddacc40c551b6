//! The Web Worker: owns everything heavy (parsing now, training later) so the page never blocks.
//!
//! Owns the worker side of [`crate::protocol`]: it announces itself with `Ready`, answers `Ping`
//! by requesting a WebGPU adapter, and turns `LoadCsv` into `DataLoaded` or `DataRejected`. A panic
//! is reported to the page as `Failed` rather than dying silently.

mod gpu_probe;

use crate::protocol::{self, FromWorker, ToWorker};
use js_sys::{ArrayBuffer, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

/// Posts `message` to the page (as `{json}`).
fn post(message: &FromWorker) {
    let object = Object::new();
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(&object, &"json".into(), &protocol::encode(message).into());
    if let Err(e) = scope().post_message(&object) {
        web_sys::console::error_2(&"occam worker: postMessage failed".into(), &e);
    }
}

/// Entry point of the worker binary.
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("occam worker panicked: {info}").into());
        post(&FromWorker::Failed {
            message: format!("the worker stopped on an internal error: {info}"),
        });
    }));
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(handle_message);
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker itself.
    on_message.forget();
    post(&FromWorker::Ready);
}

fn handle_message(event: MessageEvent) {
    let data = event.data();
    let json = Reflect::get(&data, &"json".into())
        .ok()
        .and_then(|v| v.as_string());
    let Some(json) = json else {
        post(&FromWorker::Failed {
            message: "the worker received a message without a `json` field".into(),
        });
        return;
    };
    let request = match protocol::decode::<ToWorker>(&json) {
        Ok(r) => r,
        Err(message) => {
            post(&FromWorker::Failed { message });
            return;
        }
    };
    match request {
        ToWorker::Ping => wasm_bindgen_futures::spawn_local(async {
            let (backend, adapter) = gpu_probe::probe().await;
            post(&FromWorker::Pong { backend, adapter });
        }),
        ToWorker::LoadCsv { file_name, options } => {
            let bytes = Reflect::get(&data, &"bytes".into())
                .ok()
                .and_then(|b| b.dyn_into::<ArrayBuffer>().ok());
            let reply = match bytes {
                Some(buffer) => {
                    let bytes = Uint8Array::new(&buffer).to_vec();
                    protocol::load_csv(&file_name, &bytes, &options)
                }
                None => FromWorker::Failed {
                    message: format!("the file {file_name} arrived without its contents"),
                },
            };
            post(&reply);
        }
    }
}
