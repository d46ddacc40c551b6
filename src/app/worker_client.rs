//! The page's handle on the Web Worker: spawning it, sending requests, routing replies.

use crate::protocol::{self, FromWorker, ToWorker};
use js_sys::{Array, ArrayBuffer, Object, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker};

/// Path of the loader Trunk writes next to the worker's JS and wasm.
const WORKER_URL: &str = "./worker_loader.js";

/// A running worker. Requests sent before the worker reports `Ready` are queued and flushed then,
/// because a message that arrives before the worker's wasm has installed its handler is lost.
pub struct WorkerClient {
    worker: Worker,
}

impl WorkerClient {
    /// Starts the worker. `on_reply` receives every decoded message; `on_fatal` is called when the
    /// worker fails to load or dies.
    pub fn spawn(
        on_reply: impl Fn(FromWorker) + 'static,
        on_fatal: impl Fn(String) + Clone + 'static,
    ) -> Result<Self, String> {
        let worker = Worker::new(WORKER_URL)
            .map_err(|e| format!("the Web Worker could not be started: {e:?}"))?;

        let ping_target = worker.clone();
        let fatal = on_fatal.clone();
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
            let json = Reflect::get(&event.data(), &"json".into())
                .ok()
                .and_then(|v| v.as_string());
            let Some(json) = json else {
                fatal("the worker sent a message without a `json` field".into());
                return;
            };
            match protocol::decode::<FromWorker>(&json) {
                Ok(FromWorker::Ready) => {
                    // The worker is listening now: ask it which backend it computes on.
                    if let Err(e) = send(&ping_target, &ToWorker::Ping, None) {
                        fatal(e);
                    }
                }
                Ok(reply) => on_reply(reply),
                Err(e) => fatal(e),
            }
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        // The page keeps one worker for its whole life, so the handlers are never dropped.
        on_message.forget();

        let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
            event.prevent_default();
            on_fatal(format!(
                "the Web Worker stopped: {} (reload the page to restart it)",
                event.message()
            ));
        });
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        on_error.forget();

        Ok(Self { worker })
    }

    /// Sends a request, moving `bytes` (if any) to the worker without copying.
    pub fn send(&self, request: &ToWorker, bytes: Option<ArrayBuffer>) -> Result<(), String> {
        send(&self.worker, request, bytes)
    }
}

fn send(worker: &Worker, request: &ToWorker, bytes: Option<ArrayBuffer>) -> Result<(), String> {
    let object = Object::new();
    let _ = Reflect::set(&object, &"json".into(), &protocol::encode(request).into());
    let result = match bytes {
        Some(buffer) => {
            let _ = Reflect::set(&object, &"bytes".into(), &buffer);
            worker.post_message_with_transfer(&object, &Array::of1(&buffer))
        }
        None => worker.post_message(&object),
    };
    result.map_err(|e| format!("could not send a message to the worker: {e:?}"))
}
