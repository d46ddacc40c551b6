//! Occam: Bayesian causal discovery with Gaussian-process conditional density estimators.
//!
//! One engine, several drivers (see `DESIGN.md` in the shared docs). Dependencies point downwards:
//!
//! ```text
//! app (wasm) ─► worker protocol ─► engine ─► backend ─► discovery ─► gp / graph / data
//! ```
//!
//! Modules present now:
//! - [`backend`]: where the numeric work runs: batches of independent jobs
//!   ([`discovery::jobs`]) behind one trait (CPU f64 on a thread pool now).
//! - [`checksum`]: the FNV-1a hash behind data fingerprints and checkpoint checksums.
//! - [`clock`] and [`heartbeat`]: a clock that works in the browser too, and stop requests and
//!   liveness beats from inside long units of work.
//! - [`gp`]: the GP-CDE model: kernels, bounds, gradients, optimisers.
//! - [`discovery`]: causal decisions from model evidence: the two-variable direction test, the
//!   CGP-CDE continuous search (restarts as step-wise state machines), prior knowledge, the
//!   spectral acyclicity penalty.
//! - [`engine`]: `Session`, which drivers step with a time budget and which returns snapshots and
//!   the run record.
//! - [`data`]: CSV parsing and validation, [`data::Dataset`], standardisation, synthetic generators.
//! - [`graph`]: directed graphs and DAGs in the one orientation convention `A[i][j] = 1 ⇔ i → j`,
//!   DAG enumeration, CPDAGs, metrics (SHD, SID, precision/recall/F1), imports and exports.
//! - [`names`]: how the engine's choices (methods, presets, mechanisms, …) are spelled, declared
//!   once per enum.
//! - [`driver`]: what the Web Worker does with each request (load, start, pause, resume, stop,
//!   step), natively testable.
//! - [`protocol`]: the messages between the page and the Web Worker (plain serde types, so they are
//!   tested natively).
//! - [`ui`]: what the page computes that is not DOM (settings form, knowledge grid, truth
//!   comparison, curves, formatting), natively testable.
//! - `app` and `worker` (wasm32 only): the Leptos page and the Web Worker around the engine.
//!
//! The GPU: [`backend::gpu`] holds the device and its WGSL kernels (it knows the model layer, not
//! jobs); [`backend::gpu_executor`] runs a batch of jobs on it by one plan, natively
//! (`GpuBackend`) and in the page's worker alike, the device holding each uncollapsed variable's
//! q(v) and its M × M algebra between iterations; [`backend::cost_model`] measures where a kind
//! of work is cheaper (the exact search's family fits) and places it there.

pub mod base;
pub mod data;
pub mod discovery;
pub mod engine;
pub mod generate;
pub mod gp;
pub mod graph;
pub mod page_model;
pub mod runner;
pub mod worker;

#[cfg(target_arch = "wasm32")]
pub mod app;
