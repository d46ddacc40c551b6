//! Finding out whether WebGPU is available by actually requesting an adapter: `navigator.gpu` exists in Chromium even
//! when no adapter will be granted, so its presence proves nothing.

use js_sys::{Function, Promise, Reflect};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

fn get(target: &JsValue, key: &str) -> Option<JsValue> {
    Reflect::get(target, &JsValue::from_str(key))
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// Requests a WebGPU adapter; returns a description of it (vendor, architecture, description as
/// the browser reports them) when one is granted.
pub async fn probe() -> Option<String> {
    request_adapter().await.map(|adapter| describe(&adapter))
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
