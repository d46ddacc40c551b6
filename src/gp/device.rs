//! Why a device computing part of a bound (the GPU, through [`crate::gp::collapsed::Psi2Device`]
//! or a variable's resident state) gave no answer, as the model layer sees it. The runner's own
//! `GpuError` sits a layer above and arrives here as its message ([`DeviceError::Failed`]); every
//! other reason is one this layer or the runner's batching names.

use serde::{Deserialize, Serialize};

/// Why a device gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum DeviceError {
    /// The device itself failed (lost, a failed read-back, a problem too large): the runner's
    /// `GpuError` as text, because this layer cannot name that type.
    #[error("{0}")]
    Failed(String),
    /// The runner gave the device up for these fits before they were submitted (it was slower
    /// than the CPU): the fits are computed again on the CPU.
    #[error("the GPU was given up for these fits (slower than the CPU)")]
    Abandoned,
    /// The device's submission ended without an answer (the thread submitting it panicked).
    #[error("the GPU's submission ended without an answer")]
    NoAnswer,
    /// The device answered a batch without this request's result.
    #[error("the GPU returned no result")]
    Unanswered,
    /// A replay does not hold the sums asked for yet (the awaited evaluation fetches them and
    /// runs again).
    #[error("Ψ2 sums not computed yet")]
    Pending,
    /// The backward pass was asked for a device its forward pass used, and none was given.
    #[error("the forward pass's device is not given")]
    Missing,
    /// An awaited evaluation still asked for sums after the most runs it may need.
    #[error("an evaluation still asked for Ψ2 sums after {0} runs")]
    TooManyPasses(usize),
    /// The device stepped another number of hyperparameters than the variable holds.
    #[error("the device stepped {stepped} hyperparameters, the variable has {held}")]
    StepCount { stepped: usize, held: usize },
}
