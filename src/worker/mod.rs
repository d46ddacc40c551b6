//! The Web Worker side of the page: the messages between the page and its workers
//! ([`protocol`]), what the worker does with each of them ([`driver`], natively testable), and,
//! in the browser only, the worker itself around them (`web`).

pub mod driver;
pub mod protocol;

#[cfg(target_arch = "wasm32")]
mod web;

#[cfg(target_arch = "wasm32")]
pub use web::start;
