//! The page binary (built by Trunk). Natively it does nothing; it exists so `cargo test` builds.

#[cfg(target_arch = "wasm32")]
fn main() {
    occam::app::start();
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {}
