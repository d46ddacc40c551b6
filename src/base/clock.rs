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

/// The wall-clock time now in RFC 3339, UTC, to the second ("2026-12-02T13:40:12Z"), for records
/// a person reads (when a run stopped).
#[cfg(not(target_arch = "wasm32"))]
pub fn utc_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// [`utc_now`] from the browser's clock (`Date.toISOString`, its milliseconds dropped).
#[cfg(target_arch = "wasm32")]
pub fn utc_now() -> String {
    let iso: String = js_sys::Date::new_0().to_iso_string().into();
    match iso.split_once('.') {
        Some((seconds, _)) => format!("{seconds}Z"),
        None => iso,
    }
}
