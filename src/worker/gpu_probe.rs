//! Deciding CPU or WebGPU by actually requesting an adapter: `navigator.gpu` exists in Chromium even
//! when no adapter will be granted, so its presence proves nothing.

use crate::protocol::ComputeBackend;
use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

fn get(target: &JsValue, key: &str) -> Option<JsValue> {
    Reflect::get(target, &JsValue::from_str(key))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// Requests a WebGPU adapter; returns the backend and, when granted, a description of the adapter
/// (vendor, architecture, description as the browser reports them).
pub async fn probe() -> (ComputeBackend, Option<String>) {
    match request_adapter().await {
        Some(adapter) => (ComputeBackend::WebGpu, Some(describe(&adapter))),
        None => (ComputeBackend::Cpu, None),
    }
}

async fn request_adapter() -> Option<JsValue> {
    let navigator = get(&js_sys::global(), "navigator")?;
    let gpu = get(&navigator, "gpu")?;
    let request: Function = get(&gpu, "requestAdapter")?.dyn_into().ok()?;
    let promise: Promise = request.call0(&gpu).ok()?.dyn_into().ok()?;
    let adapter = JsFuture::from(promise).await.ok()?;
    (!adapter.is_null() && !adapter.is_undefined()).then_some(adapter)
}

fn describe(adapter: &JsValue) -> String {
    let Some(info) = get(adapter, "info") else {
        return "unnamed adapter".into();
    };
    let parts: Vec<String> = ["vendor", "architecture", "description"]
        .iter()
        .filter_map(|k| get(&info, k).and_then(|v| v.as_string()))
        .filter(|s| !s.is_empty())
        .collect();
    if parts.is_empty() {
        "unnamed adapter".into()
    } else {
        parts.join(" ")
    }
}
