//! How a collapsed fit is set up and what it refuses: its settings, the starts of the latent
//! input's hyperparameters, and the fit's errors.

use super::*;
use crate::gp::linalg::JitterError;

/// Φ⁻¹(p) for p in (0, 1): statrs's −√2 · erfc⁻¹(2p). Against Python's `NormalDist.inv_cdf`
/// (AS241) on 1006 points it is within 1.4e-15; the Acklam approximation it replaced was within
/// 5.0e-9 (measured 2026-11-25).
pub(super) fn inverse_normal_cdf(p: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::standard().inverse_cdf(p)
}

/// How a collapsed model is fitted.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FitSettings {
    /// M_max: the model uses M = min(M_max, N) inducing points (200 in [B] and [P]).
    pub inducing_points: usize,
    /// The most Adam steps before L-BFGS (5000).
    pub adam_steps: usize,
    /// Adam's learning rate (0.05).
    pub adam_learning_rate: f64,
    /// L-BFGS settings (SciPy's defaults with `max_iterations` 10 000, as [B]).
    pub lbfgs: LbfgsSettings,
    /// L-BFGS settings of the GP-regression start (None: the same as `lbfgs`).
    #[serde(default)]
    pub start_lbfgs: Option<LbfgsSettings>,
    /// The jitter ladder: 1e-6 ×10 up to 1 (as [B]); a failed attempt restarts one rung up.
    pub jitter: JitterPolicy,
    /// Whether a fit starts from data: a conditional from a GP regression fit (a coin flip, as
    /// [B]), a root from the normal scores of y (unless `Never`).
    pub gp_initialisation: GpInitialisation,
    /// The range U(lo, hi) of the initial SE precisions λ ((1, 100) as [B]; the CGP-CDE draws
    /// from (0.01, 1), MODEL.md §2.4, scaled by [`precision_scale`]).
    pub initial_precision: (f64, f64),
    /// What the latent w starts as after a GP-regression start.
    #[serde(default)]
    pub latent_start: LatentStart,
    /// The smallest SE variance a GP-regression start keeps (0: whatever the regression fit
    /// found, as [B]). The CGP-CDE uses [`MIN_START_SE_VARIANCE`].
    #[serde(default)]
    pub min_start_se_variance: f64,
}

/// What the latent input w starts as after the GP-regression start of a conditional.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatentStart {
    /// [B]'s: q(w) mean = the regression residual, the latent's precision and linear variance
    /// copied from the first parent, φ² = the regression's noise variance. w then has nothing
    /// left to explain (the noise term already does), and in every CGP-CDE run measured it stayed
    /// switched off (BENCHMARKS.md).
    #[default]
    Residual,
    /// w explains the residual r = y − E[f(x)] and φ² starts small, as the paper's φ² ∈ [1e-4,
    /// 4e-4] (MODEL.md §2.4): φ² = floor + 1/κ², κ ~ U(50, 100); the latent's linear variance is
    /// v_w = mean(r²), so f(x, w) ≈ E[f(x)] + √v_w · w; q(w_n) is the exact posterior of w_n in that
    /// linear-in-w model, mean √v_w r_n/(v_w + φ²) and variance φ²/(v_w + φ²); the latent's SE
    /// precision keeps its drawn value.
    Explained,
    /// As `Explained`, but w takes [`SHARED_LATENT_FRACTION`] of the residual variance and φ² the
    /// rest: φ² = (1 − f)·mean(r²), v_w = f·mean(r²). φ² stays an order of magnitude below the
    /// regression's noise yet far above the paper's 1e-4, where the trace term
    /// tr(K_nn − Q_nn)/(2φ²) of a few inducing points costs thousands of nats (BENCHMARKS.md).
    Shared,
    /// w starts switched off: q(w_n) = N(0, 1) (the prior), w's linear variance
    /// [`OFF_LATENT_LINEAR`] and SE precision [`OFF_LATENT_PRECISION`], so the start is the
    /// regression fit itself (SE + linear on the parents, φ² = its noise). Fits from the `Residual`
    /// start can settle where w explains part of the residual although the model without w is
    /// better: on the 3-variable set edge_isolated_s1, F(X2 | X3) ended at −205.2 nats with w on
    /// (mean Var q(w) 0.26) from both residual restarts, while the w-off solution, reached from the
    /// fit with an extra parent that the fit then switched off, has −196.3 (BENCHMARKS.md, issue 11).
    /// The family score alternates the two starts across its restarts.
    Off,
}

/// The linear variance of w in the [`LatentStart::Off`] start: small enough that w changes
/// nothing at the start, positive so that the optimiser can still switch it on.
pub const OFF_LATENT_LINEAR: f64 = 1e-4;
/// The SE precision of w in the [`LatentStart::Off`] start (a lengthscale of 100 standard
/// deviations of the N(0, 1) prior on w).
pub const OFF_LATENT_PRECISION: f64 = 0.01;

/// The SE precision and the linear variance a warm start ([`CollapsedModel::warm_start`]) gives
/// the parent it adds: θ is an inverse lengthscale (r² = Σ θ_j² Δ_j²), so a lengthscale of 10
/// standard deviations of the standardised input, and a linear slope of about √0.1 ≈ 0.3; large
/// enough that the gradient can grow them when the parent
/// explains something (at zero both the value and its gradient in the log-parameters vanish),
/// small enough that the start stays near the subset's optimum.
pub const WARM_NEW_PRECISION: f64 = 0.1;
pub const WARM_NEW_LINEAR: f64 = 0.1;

/// The share of the regression residual's variance that w explains in [`LatentStart::Shared`].
pub const SHARED_LATENT_FRACTION: f64 = 0.9;

/// The smallest SE variance the CGP-CDE's regression start keeps: the regression fit of SE + linear
/// on all candidate parents switches the SE part off (variances 1e-48 to 1e-12 measured on
/// ER4_d20_s0, with or without precisions scaled to the number of inputs), which leaves the
/// stationary precisions with no gradient for the rest of the run, so the model stays linear.
/// Flooring it at 0.05 raised the final evidence of all 8 restarts measured (BENCHMARKS.md).
pub const MIN_START_SE_VARIANCE: f64 = 0.05;

/// The factor by which a CGP-CDE start scales precisions drawn from U(0.01, 1) for a kernel on
/// `inputs` standardised inputs, so that the expected scaled squared distance between two rows is
/// about 1: E[r²] = Σ_j θ_j² E[(x_j − x'_j)²] = inputs · c² · E[u²] · 2 with E[u²] = (0.01² +
/// 0.01 + 1)/3 for u ~ U(0.01, 1), so c = 1/√(2 · inputs · E[u²]). Unscaled, 20 inputs give
/// E[r²] ≈ 13, where the SE kernel between any two rows is e^{−6.7} ≈ 0.001: the start's regression
/// fit then switches the SE part off (BENCHMARKS.md).
pub fn precision_scale(inputs: usize) -> f64 {
    let mean_square = (0.01f64 * 0.01 + 0.01 + 1.0) / 3.0;
    1.0 / (2.0 * inputs.max(1) as f64 * mean_square).sqrt()
}

/// When a conditional model is initialised from a GP regression of y on its parents (MODEL.md §6).
/// A root model (no parents) starts from the normal scores of y whenever this is not `Never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GpInitialisation {
    /// Always from the random draws.
    Never,
    /// With probability ½, one draw from the generator ([B]'s behaviour).
    CoinFlip,
    Always,
}

impl Default for FitSettings {
    fn default() -> Self {
        Self {
            inducing_points: 200,
            adam_steps: 5000,
            adam_learning_rate: 0.05,
            lbfgs: LbfgsSettings {
                max_iterations: 10_000,
                ..LbfgsSettings::default()
            },
            start_lbfgs: None,
            jitter: JitterPolicy::up_to(1e-6, 10.0, 1.0),
            gp_initialisation: GpInitialisation::CoinFlip,
            initial_precision: (1.0, 100.0),
            latent_start: LatentStart::Residual,
            min_start_se_variance: 0.0,
        }
    }
}

impl FitSettings {
    /// The L-BFGS settings of the GP-regression start.
    pub fn start_lbfgs(&self) -> LbfgsSettings {
        self.start_lbfgs.unwrap_or(self.lbfgs)
    }
}

/// Why a fit returned no model.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum FitError {
    #[error("invalid data for a collapsed model: {0}")]
    InvalidData(String),
    #[error("invalid fit settings: {0}")]
    InvalidSettings(#[from] FitSettingsError),
    #[error("invalid initial parameters: {0}")]
    InvalidInitial(String),
    /// Every attempt failed (factorisation or non-finite bound), up to the largest jitter.
    #[error(
        "the fit failed at every jitter up to {jitter:.1e} ({attempts} attempts); last: {source}"
    )]
    JitterExhausted {
        #[serde(with = "crate::base::float_text")]
        jitter: f64,
        attempts: usize,
        source: CollapsedError,
    },
    /// An error that more jitter cannot repair (e.g. inconsistent shapes).
    #[error("the collapsed bound could not be evaluated: {0}")]
    Bound(CollapsedError),
    /// A stop was requested during the fit ([`crate::base::heartbeat::interrupted`]); the parameters
    /// reached are not a fit and are not returned.
    #[error("the fit was stopped on request")]
    Interrupted,
}

/// Why fit settings cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum FitSettingsError {
    #[error("at least one inducing point is needed")]
    NoInducingPoints,
    #[error(transparent)]
    Jitter(#[from] JitterError),
    #[error("the initial precision range must satisfy 0 < lo < hi, got ({lo}, {hi})")]
    PrecisionRange {
        #[serde(with = "crate::base::float_text")]
        lo: f64,
        #[serde(with = "crate::base::float_text")]
        hi: f64,
    },
    #[error("the Adam learning rate must be positive, got {0}")]
    LearningRate(#[serde(with = "crate::base::float_text")] f64),
}

/// Checks `s` before a fit: M ≥ 1, a usable jitter ladder, 0 < lo < hi < ∞ for the initial
/// precisions and a positive, finite Adam learning rate.
pub(super) fn check_settings(s: &FitSettings) -> Result<(), FitSettingsError> {
    if s.inducing_points == 0 {
        return Err(FitSettingsError::NoInducingPoints);
    }
    s.jitter.check()?;
    let (lo, hi) = s.initial_precision;
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Err(FitSettingsError::PrecisionRange { lo, hi });
    }
    if !(s.adam_learning_rate > 0.0 && s.adam_learning_rate.is_finite()) {
        return Err(FitSettingsError::LearningRate(s.adam_learning_rate));
    }
    Ok(())
}
