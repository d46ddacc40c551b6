//! Saving files from the page: text as a download, and the graph's SVG element as SVG or PNG.
//! Everything is made locally from blob URLs; nothing leaves the machine.

use js_sys::{Array, Function};
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;
use web_sys::{Blob, BlobPropertyBag, HtmlAnchorElement, HtmlCanvasElement, HtmlImageElement, Url};

fn document() -> Result<web_sys::Document, String> {
    web_sys::window()
        .and_then(|w| w.document())
        .ok_or_else(|| "no document".to_string())
}

fn blob_of(text: &str, mime: &str) -> Result<Blob, String> {
    let options = BlobPropertyBag::new();
    options.set_type(mime);
    Blob::new_with_str_sequence_and_options(&Array::of1(&JsValue::from_str(text)), &options)
        .map_err(|e| format!("could not make the file: {e:?}"))
}

/// Offers `blob` as a download named `file_name`.
pub fn download_blob(blob: &Blob, file_name: &str) -> Result<(), String> {
    let url = Url::create_object_url_with_blob(blob)
        .map_err(|e| format!("could not make a download link: {e:?}"))?;
    let anchor: HtmlAnchorElement = document()?
        .create_element("a")
        .map_err(|e| format!("{e:?}"))?
        .unchecked_into();
    anchor.set_href(&url);
    anchor.set_download(file_name);
    anchor.click();
    // Revoke later: the download reads the URL after this function returns.
    let revoke = Closure::once_into_js(move || {
        let _ = Url::revoke_object_url(&url);
    });
    if let Some(window) = web_sys::window() {
        let _ = window
            .set_timeout_with_callback_and_timeout_and_arguments_0(revoke.unchecked_ref(), 60_000);
    }
    Ok(())
}

/// Offers `text` as a download.
pub fn download_text(file_name: &str, mime: &str, text: &str) -> Result<(), String> {
    download_blob(&blob_of(text, mime)?, file_name)
}

/// The page's graph (`data-testid="dag-svg"`) as standalone SVG text.
pub fn graph_svg_text() -> Result<String, String> {
    let svg = document()?
        .query_selector("[data-testid=dag-svg]")
        .map_err(|e| format!("{e:?}"))?
        .ok_or("there is no graph to save")?;
    // The transparent strokes that take clicks on the page are no part of the drawing.
    let svg = svg
        .clone_node_with_deep(true)
        .map_err(|e| format!("{e:?}"))?;
    if let Some(copy) = svg.dyn_ref::<web_sys::Element>() {
        let hits = copy
            .query_selector_all(".edge-hit")
            .map_err(|e| format!("{e:?}"))?;
        for k in 0..hits.length() {
            if let Some(hit) = hits
                .item(k)
                .and_then(|n| n.dyn_into::<web_sys::Element>().ok())
            {
                hit.remove();
            }
        }
    }
    let text = web_sys::XmlSerializer::new()
        .and_then(|s| s.serialize_to_string(&svg))
        .map_err(|e| format!("could not serialise the graph: {e:?}"))?;
    Ok(format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n{text}\n"
    ))
}

/// Renders the graph's SVG at twice its size on a white canvas and offers it as a PNG download.
pub fn download_graph_png(file_name: String) -> Result<(), String> {
    let svg_text = graph_svg_text()?;
    let svg_blob = blob_of(&svg_text, "image/svg+xml")?;
    let url = Url::create_object_url_with_blob(&svg_blob).map_err(|e| format!("{e:?}"))?;
    let image = HtmlImageElement::new().map_err(|e| format!("{e:?}"))?;
    let loaded = image.clone();
    let source_url = url.clone();
    let url_for_error = url.clone();
    let on_load = Closure::once_into_js(move || {
        let result = (|| -> Result<(), String> {
            let _ = Url::revoke_object_url(&source_url);
            let (w, h) = (
                loaded.natural_width().max(1),
                loaded.natural_height().max(1),
            );
            let canvas: HtmlCanvasElement = document()?
                .create_element("canvas")
                .map_err(|e| format!("{e:?}"))?
                .unchecked_into();
            canvas.set_width(2 * w);
            canvas.set_height(2 * h);
            let ctx: web_sys::CanvasRenderingContext2d = canvas
                .get_context("2d")
                .map_err(|e| format!("{e:?}"))?
                .ok_or("no 2d context")?
                .unchecked_into();
            ctx.set_fill_style_str("#ffffff");
            ctx.fill_rect(0.0, 0.0, 2.0 * w as f64, 2.0 * h as f64);
            ctx.draw_image_with_html_image_element_and_dw_and_dh(
                &loaded,
                0.0,
                0.0,
                2.0 * w as f64,
                2.0 * h as f64,
            )
            .map_err(|e| format!("{e:?}"))?;
            let name = file_name.clone();
            let on_blob = Closure::once_into_js(move |blob: JsValue| {
                if let Ok(blob) = blob.dyn_into::<Blob>() {
                    let _ = download_blob(&blob, &name);
                }
            });
            canvas
                .to_blob_with_type(on_blob.unchecked_ref::<Function>(), "image/png")
                .map_err(|e| format!("{e:?}"))
        })();
        if let Err(e) = result {
            web_sys::console::error_1(&format!("PNG export failed: {e}").into());
        }
    });
    image.set_onload(Some(on_load.unchecked_ref()));
    let on_error = Closure::once_into_js(move || {
        let _ = Url::revoke_object_url(&url_for_error);
        web_sys::console::error_1(
            &"PNG export failed: the graph could not be drawn as an image".into(),
        );
    });
    image.set_onerror(Some(on_error.unchecked_ref()));
    image.set_src(&url);
    Ok(())
}
