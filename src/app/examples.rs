//! The built-in examples: static files under `examples/` (copied from `www/examples` by Trunk),
//! each with its ground truth, fetched from the page's own origin when chosen.

use super::{AppState, Truth};
use js_sys::Uint8Array;
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{Blob, Response};

/// One built-in example.
pub struct Example {
    /// File stem under `examples/`: `STEM.csv` and `STEM.truth.csv`.
    pub stem: &'static str,
    pub title: &'static str,
}

/// Every built-in example, in menu order.
pub const EXAMPLES: [Example; 7] = [
    Example {
        stem: "chain",
        title: "3 variables: chain (synthetic, 500 rows)",
    },
    Example {
        stem: "fork",
        title: "3 variables: fork (synthetic, 500 rows)",
    },
    Example {
        stem: "collider",
        title: "3 variables: collider (synthetic, 500 rows)",
    },
    Example {
        stem: "altitude_temperature",
        title: "Tübingen pair 1: altitude and temperature (349 rows)",
    },
    Example {
        stem: "er1_d10",
        title: "10 variables: random graph ER1 (synthetic, 1,000 rows)",
    },
    Example {
        stem: "sachs",
        title: "Sachs protein signalling, observational (11 variables, 853 rows)",
    },
    Example {
        stem: "syntren01",
        title: "SynTReN gene network 1 (20 variables, 500 rows)",
    },
];

async fn fetch(path: &str) -> Result<Response, String> {
    let window = web_sys::window().ok_or("no window")?;
    let response: Response = JsFuture::from(window.fetch_with_str(path))
        .await
        .map_err(|e| format!("could not fetch {path}: {e:?}"))?
        .unchecked_into();
    if !response.ok() {
        return Err(format!(
            "could not fetch {path}: HTTP {}",
            response.status()
        ));
    }
    Ok(response)
}

pub(super) async fn fetch_text(path: &str) -> Result<String, String> {
    let response = fetch(path).await?;
    let promise = response.text().map_err(|e| format!("{path}: {e:?}"))?;
    JsFuture::from(promise)
        .await
        .map_err(|e| format!("{path}: {e:?}"))?
        .as_string()
        .ok_or_else(|| format!("{path} is not text"))
}

async fn fetch_blob(path: &str) -> Result<Blob, String> {
    let response = fetch(path).await?;
    let promise = response
        .array_buffer()
        .map_err(|e| format!("{path}: {e:?}"))?;
    let buffer = JsFuture::from(promise)
        .await
        .map_err(|e| format!("{path}: {e:?}"))?;
    let parts = js_sys::Array::of1(&Uint8Array::new(&buffer));
    Blob::new_with_u8_array_sequence(&parts).map_err(|e| format!("{path}: {e:?}"))
}

/// Loads the example `stem`: its data go to the worker, its truth is kept for the comparison.
pub fn load(state: AppState, stem: &'static str) {
    wasm_bindgen_futures::spawn_local(async move {
        let data = fetch_blob(&format!("examples/{stem}.csv")).await;
        let truth = fetch_text(&format!("examples/{stem}.truth.csv")).await;
        match data {
            Ok(blob) => {
                state.submit_file(format!("{stem}.csv"), blob);
                state.set_truth(truth.ok().map(|text| Truth {
                    file_name: format!("{stem}.truth.csv"),
                    text,
                }));
            }
            Err(e) => state.show_error(e),
        }
    });
}
