//! Occam: Bayesian causal discovery with Gaussian-process conditional density estimators.
//!
//! One engine, several drivers (see `DESIGN.md` in the shared docs). The rooms, bottom to top;
//! a room imports only from its own layer and those below, and the parts of a module import each
//! other without a circle (`tests/layers.rs` reads every `crate::` path and holds both):
//!
//! ```text
//! page and worker   app (Leptos view, wasm) ─► page_model ─► worker (protocol, driver, web shell)
//! engine            engine: Session, checkpoints, the run record
//! job runner        runner: Backend, the CPU executor, gpu (device, WGSL), gpu_executor, cost_model
//! discovery         discovery: family scores, bivariate, exact, cgp, settings, jobs, continuous
//! model             generate ─► gp, data ─► graph
//! base              base: clock, heartbeat, pool, heap, checksum, names, float_text
//! ```
//!
//! - [`base`]: a clock that works in the browser too, stop requests and liveness beats from
//!   inside long units of work, the one thread pool, scratch memory, the FNV-1a checksum, how
//!   the engine's choices are spelled, and how JSON carries a non-finite number.
//! - [`graph`]: directed graphs and DAGs in the one orientation convention `A[i][j] = 1 ⇔ i → j`,
//!   DAG enumeration, CPDAGs, metrics (SHD, SID, precision/recall/F1), imports and exports.
//! - [`data`]: CSV parsing and validation, [`data::Dataset`], standardisation.
//! - [`gp`]: the GP-CDE model: kernels, bounds, gradients, optimisers, one variable's trainable
//!   model (`gp::gp_cde::GpCdeModel`), parameter blocks reached through typed handles
//!   (`gp::params::ParamBlock`); its errors are typed
//!   (`FitError`, `CollapsedError`, `StepError`, and `gp::device::DeviceError` for a device that
//!   gave no answer).
//! - [`generate`]: synthetic data sets (random DAGs, mechanisms, GP draws).
//! - [`discovery`]: causal decisions from model evidence: family scores, the two-variable direction
//!   test, the exact search, the CGP-CDE continuous search (restarts as step-wise state machines),
//!   the run's settings, prior knowledge, the spectral acyclicity penalty, and every piece of
//!   numeric work as a serialisable job; one error, `discovery::error::DiscoveryError`, carried in
//!   a job's outcome across the worker boundary and kept in score caches and checkpoints.
//! - [`runner`]: where the jobs run: one trait, a CPU executor on the pool and a GPU executor;
//!   [`runner::gpu`] holds the device and its WGSL kernels (it knows the model layer, not jobs),
//!   [`runner::gpu_executor`] runs a batch of jobs on it by one plan, natively (`GpuBackend`) and
//!   in the page's worker alike, and [`runner::cost_model`] measures where a kind of work is
//!   cheaper and places it there.
//! - [`engine`]: `Session`, which drivers step with a time budget and which returns snapshots and
//!   the run record.
//! - [`worker`]: the messages between the page and the Web Worker, what the worker does with each
//!   request (natively testable), and in the browser the worker itself.
//! - [`page_model`]: what the page computes that is not DOM (its state and transitions, settings
//!   form, knowledge grid, truth comparison, curves, formatting), natively testable.
//! - `app` (wasm32 only): the Leptos page.

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
