//! The page's handle on the Web Worker: spawning it, sending requests, routing replies, and
//! ending it so a fresh one can replace a worker that died.

use crate::worker::protocol::{self, FromWorker, ToWorker};
use js_sys::{Array, ArrayBuffer, Object, Reflect};
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker};

/// Path of the loader Trunk writes next to the worker's JS and wasm.
const WORKER_URL: &str = "./worker_loader.js";

/// A running worker. The page sends its first request only after the worker reports `Ready`
/// (a message that arrives before the worker's wasm has installed its handler is lost).
pub struct WorkerClient {
    worker: Worker,
    // Kept so the handlers live exactly as long as this client.
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(ErrorEvent)>,
}

impl WorkerClient {
    /// Starts a worker. `on_reply` receives every decoded message (`Ready` included); `on_fatal`
    /// is called when the worker fails to load, dies, or sends something unreadable.
    pub fn spawn(
        on_reply: impl Fn(FromWorker) + 'static,
        on_fatal: impl Fn(String) + Clone + 'static,
    ) -> Result<Self, String> {
        let worker = Worker::new(WORKER_URL)
            .map_err(|e| format!("the Web Worker could not be started: {e:?}"))?;

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
                // The saved run comes beside the JSON (see `FromWorker::Saved`).
                Ok(FromWorker::Saved { run_id, .. }) => {
                    let session = Reflect::get(&event.data(), &"session".into())
                        .ok()
                        .and_then(|v| v.as_string());
                    match session {
                        Some(session) => on_reply(FromWorker::Saved { run_id, session }),
                        None => fatal("the worker sent a saved run without its contents".into()),
                    }
                }
                Ok(reply) => on_reply(reply),
                Err(e) => fatal(e),
            }
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));

        let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
            event.prevent_default();
            let detail = event.message();
            on_fatal(if detail.is_empty() {
                "the Web Worker stopped unexpectedly".to_string()
            } else {
                format!("the Web Worker stopped: {detail}")
            });
        });
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));

        Ok(Self {
            worker,
            _on_message: on_message,
            _on_error: on_error,
        })
    }

    /// Sends a request, moving `bytes` (if any) to the worker without copying.
    pub fn send(&self, request: &ToWorker, bytes: Option<ArrayBuffer>) -> Result<(), String> {
        let object = Object::new();
        let _ = Reflect::set(&object, &"json".into(), &protocol::encode(request).into());
        let result = match bytes {
            Some(buffer) => {
                let _ = Reflect::set(&object, &"bytes".into(), &buffer);
                self.worker
                    .post_message_with_transfer(&object, &Array::of1(&buffer))
            }
            None => self.worker.post_message(&object),
        };
        result.map_err(|e| format!("could not send a message to the worker: {e:?}"))
    }
}

impl Drop for WorkerClient {
    /// Ends the worker and detaches its handlers, so a dead or replaced worker sends nothing more.
    fn drop(&mut self) {
        self.worker.set_onmessage(None);
        self.worker.set_onerror(None);
        self.worker.terminate();
    }
}
