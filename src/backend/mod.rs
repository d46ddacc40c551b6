//! The per-iteration numerical work of the model behind one trait, so the engine does not care
//! whether it runs on the CPU (f64, the reference) or, later, on a GPU (f32, WGSL).
//!
//! Owns: [`Backend`] and the CPU implementation [`CpuBackend`]. The unit of work is a *batch* of
//! independent bound evaluations, one per (restart, variable): all share the shapes (M, D, S, b),
//! which is what lets a GPU run them as one dispatch over a batch dimension.

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

/// The f64 reference on the CPU. Natively it spreads the batch over `threads` OS threads; in the
/// browser's worker it runs on the one thread it has.
#[derive(Debug, Clone)]
pub struct CpuBackend {
    threads: usize,
}

impl CpuBackend {
    /// A backend using up to `threads` threads (at least 1).
    pub fn new(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
        }
    }

    /// One thread per available core natively; one thread on wasm.
    pub fn with_available_parallelism() -> Self {
        #[cfg(not(target_arch = "wasm32"))]
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        #[cfg(target_arch = "wasm32")]
        let threads = 1;
        Self::new(threads)
    }
}

impl Backend for CpuBackend {
    fn name(&self) -> String {
        format!(
            "CPU (f64, {} thread{})",
            self.threads,
            if self.threads == 1 { "" } else { "s" }
        )
    }

    fn evaluate(&mut self, batch: &[SvgpInput<'_>]) -> Vec<Result<SvgpOutput, CholeskyError>> {
        if self.threads == 1 || batch.len() < 2 || cfg!(target_arch = "wasm32") {
            return batch.iter().map(bound_and_gradient).collect();
        }
        // Contiguous chunks, one scoped thread each; results are stitched back in order.
        let chunk = batch.len().div_ceil(self.threads);
        std::thread::scope(|scope| {
            let handles: Vec<_> = batch
                .chunks(chunk)
                .map(|part| {
                    scope.spawn(move || part.iter().map(bound_and_gradient).collect::<Vec<_>>())
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a bound evaluation thread panicked"))
                .collect()
        })
    }
}
