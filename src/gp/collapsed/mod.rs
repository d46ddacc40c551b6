//! The collapsed bound of the GP-CDE (MODEL.md §4; Titsias 2009, Bayesian GPLVM): q(u) is
//! integrated out in closed form, the latent input w enters through psi-statistics, and the whole
//! bound and its gradient are deterministic full-batch computations in f64. This is the local
//! score of the DGP-CDE (MODEL.md §6) and of the two-variable direction test (§7.3(a)).
//!
//! - [`psi`]: ψ0, Ψ1, Ψ2 for SE-ARD + linear-ARD with a Gaussian latent input, and their adjoints;
//! - [`bound`]: the bound F, its hand-derived gradient, and the SGPR bound without a latent;
//! - [`noise`]: the noise-model values (root: Gaussian; conditional: Bayesian linear regression);
//! - [`fit`]: initialisation and Adam-then-L-BFGS fitting of one variable given its parents;
//! - [`predict`]: the predictive of f at new inputs under the bound's optimal q(u).

pub mod awaited;
pub mod bound;
pub mod fit;
pub mod noise;
pub mod predict;
pub mod psi;

pub use awaited::{
    bound_with_grad_awaited, AwaitedPsi2, Psi2Answer, Psi2Replay, Psi2Sums, Psi2Wanted, PSI2_PASSES,
};
pub use bound::{
    collapsed_bound, collapsed_bound_with_grad, collapsed_bound_with_grad_on, sgpr_bound,
    CollapsedGrad, CollapsedParams, DEFAULT_JITTER,
};
pub use fit::{
    precision_scale, CollapsedFit, CollapsedModel, FitError, FitSettings, FitSettingsError,
    FitStart, GpInitialisation, LatentStart, StageStats, MIN_START_SE_VARIANCE,
};
pub use noise::{linear_regression_evidence, root_noise_value, LinearEvidence};
pub use predict::{CollapsedPredictor, LatentFunctionPrediction};
pub use psi::{psi_statistics, LatentPosterior, Psi2Device, Psi2Factors, PsiGrad, PsiStatistics};

use crate::gp::device::DeviceError;
use crate::gp::linalg::CholeskyError;

/// Why the collapsed bound could not be evaluated.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum CollapsedError {
    /// K_ZZ + εI could not be factorised at the jitter given.
    #[error("K_ZZ + jitter·I could not be factorised: {0}")]
    InducingCovariance(CholeskyError),
    /// I + L⁻¹Ψ2L⁻ᵀ/σ² could not be factorised (only with non-finite or wildly scaled inputs).
    #[error("I + C2 could not be factorised: {0}")]
    InnerCovariance(CholeskyError),
    /// The bound came out NaN or infinite.
    #[error("the collapsed bound is not finite ({value})")]
    NonFinite {
        #[serde(with = "crate::base::float_text")]
        value: f64,
    },
    /// Inconsistent sizes of data, inducing inputs, kernel or q(w).
    #[error("inconsistent shapes: {0}")]
    Shape(String),
    /// A kernel without closed-form psi-statistics.
    #[error("unsupported kernel: {0}")]
    UnsupportedKernel(String),
    /// A parameter outside its domain (σ² ≤ 0, s_n ≤ 0, negative jitter).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// A stop was requested while the bound was wanted ([`crate::base::heartbeat::interrupted`]).
    #[error("stopped on request")]
    Interrupted,
    /// The device computing Ψ2's sums failed (the GPU backend then computes on the CPU).
    #[error("the device computing Ψ2 failed: {0}")]
    Device(DeviceError),
}
