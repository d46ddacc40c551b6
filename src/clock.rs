//! Seconds on a monotonic clock, natively and in the browser (where `std::time::Instant` is not
//! available on wasm32-unknown-unknown).

/// Seconds since an arbitrary fixed origin.
#[cfg(not(target_arch = "wasm32"))]
pub fn now_seconds() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    ORIGIN.get_or_init(Instant::now).elapsed().as_secs_f64()
}

/// Seconds since the Unix epoch (`Date.now()`; a worker's `performance` would also do, but `Date`
/// exists in every JavaScript context).
#[cfg(target_arch = "wasm32")]
pub fn now_seconds() -> f64 {
    js_sys::Date::now() / 1000.0
}
