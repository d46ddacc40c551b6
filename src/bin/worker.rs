//! The Web Worker binary (built by Trunk as `worker.js` + `worker_bg.wasm`, started by the page
//! through `worker_loader.js`). Natively it does nothing; it exists so `cargo test` builds.

#[cfg(target_arch = "wasm32")]
fn main() {
    occam::worker::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {}
