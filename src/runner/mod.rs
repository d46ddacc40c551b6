//! Where numeric work runs. The engine hands a [`Backend`] a *batch* of independent
//! [`Job`]s (bounds and gradients, starting fits, refits, final bounds, family scores) with the
//! data they read, and gets one [`Outcome`] per job back, in order. Every job is independent of
//! the others and serialises, so a backend may run them on this thread, on a thread pool
//! ([`CpuBackend`]), in other Web Workers, or send the device's share to a GPU by one plan
//! ([`gpu_executor::run_batch`]: natively `gpu_executor::GpuBackend` blocks on it, the browser's
//! coordinating worker awaits it). The outcome of a job never depends on where it ran.
//!
//! Owns: [`Backend`], the CPU executor [`CpuBackend`], the GPU executor ([`gpu_executor`]) and
//! the device it drives ([`gpu`], which knows nothing of jobs). The threads both fan out on are
//! [`crate::base::pool`]'s.

pub mod cost_model;
pub mod gpu;
pub mod gpu_executor;

use std::fmt;

use nalgebra::DMatrix;

pub use crate::discovery::jobs::{Job, Outcome};
// The pool the executors fan out on, named here for the callers that hand one to a backend.
pub use crate::base::pool::{
    available_threads, join, split_map, Pool, PoolError, MAX_POOL_THREADS,
};

/// Runs batches of independent jobs.
pub trait Backend: fmt::Debug + Send + Sync {
    /// Name shown to users ("CPU (f64, 4 threads)", "WebGPU (f32)", …).
    fn name(&self) -> String;

    /// How many jobs it runs at once (threads, workers); drivers size their batches by it.
    fn width(&self) -> usize;

    /// Runs every job of `jobs` on `data` (the rows used, N × D, standardised). Outcomes are in
    /// the order of `jobs`; a failure in one job (a Cholesky that cannot be repaired) is that
    /// job's outcome and does not affect the others.
    fn run(&self, data: &DMatrix<f64>, jobs: &[Job<'_>]) -> Vec<Outcome>;

    /// What has crossed between host and a GPU so far ([`gpu::DeviceTraffic`]), while this
    /// backend computes on one; None for the CPU and after a GPU was given up.
    fn device_traffic(&self) -> Option<gpu::DeviceTraffic> {
        None
    }

    /// Where this backend placed each kind of work it measured, and why ([`DeviceChoice`]);
    /// empty for the CPU.
    fn device_choices(&self) -> Vec<cost_model::DeviceChoice> {
        Vec::new()
    }
}

/// The f64 reference on the CPU, spread over a [`Pool`] (one thread in the browser's worker).
#[derive(Debug, Clone)]
pub struct CpuBackend {
    pool: Pool,
}

impl CpuBackend {
    /// A backend computing on `pool`.
    pub fn new(pool: Pool) -> Self {
        Self { pool }
    }

    /// The calling thread only.
    pub fn serial() -> Self {
        Self::new(Pool::serial())
    }

    /// The threads it computes on.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        let threads = self.pool.threads();
        format!(
            "CPU (f64, {threads} thread{})",
            if threads == 1 { "" } else { "s" }
        )
    }

    fn width(&self) -> usize {
        self.pool.threads()
    }

    fn run(&self, data: &DMatrix<f64>, jobs: &[Job<'_>]) -> Vec<Outcome> {
        self.pool.map(jobs, |job| job.run(data))
    }
}
