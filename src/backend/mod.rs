//! The per-iteration numerical work of the model behind one trait, so the engine does not care
//! whether it runs on the CPU (f64, the reference) or, later, on a GPU (f32, WGSL).
//!
//! Owns: [`Backend`] and the CPU implementation [`CpuBackend`]. The unit of work is a *batch* of
//! independent bound evaluations, one per (restart, variable): all share the shapes (M, D, S, b),
//! which is what lets a GPU run them as one dispatch over a batch dimension.

pub mod pool;

pub use pool::{available_threads, Pool, PoolError, MAX_POOL_THREADS};

use crate::gp::linalg::CholeskyError;
use crate::gp::svgp::{bound_and_gradient, SvgpInput, SvgpOutput};

/// Computes uncollapsed bounds, gradients and natural-gradient statistics for batches of
/// independent problems.
pub trait Backend {
    /// Name shown to users ("CPU (f64)", "WebGPU (f32)", …).
    fn name(&self) -> String;

    /// Evaluates every problem of the batch. Results are in the order of `batch`; a numerical
    /// failure in one problem (a Cholesky that cannot be repaired) does not affect the others.
    fn evaluate(&mut self, batch: &[SvgpInput<'_>]) -> Vec<Result<SvgpOutput, CholeskyError>>;
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
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        let threads = self.pool.threads();
        format!(
            "CPU (f64, {threads} thread{})",
            if threads == 1 { "" } else { "s" }
        )
    }

    fn evaluate(&mut self, batch: &[SvgpInput<'_>]) -> Vec<Result<SvgpOutput, CholeskyError>> {
        self.pool.map(batch, bound_and_gradient)
    }
}
