//! The closed-form natural-gradient step for the whitened q(v) = N(m, S) under a Gaussian
//! likelihood (MODEL.md §3.5), equivalent to GPflow's NaturalGradient in its default (ξ_nat)
//! parameterisation.

use super::linalg::{cholesky_jittered, lower_inverse, CholeskyError, JitterPolicy};
use super::svgp::NatGradStats;
use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

/// q(v) held by its natural parameters η₁ = S⁻¹m and P = S⁻¹, with (m, S) kept in step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InducingPosterior {
    pub eta1: DVector<f64>,
    pub precision: DMatrix<f64>,
    pub mean: DVector<f64>,
    pub cov: DMatrix<f64>,
}

impl InducingPosterior {
    /// GPflow's initialisation: m = 0, S = I (the whitened prior).
    pub fn prior(m: usize) -> Self {
        Self {
            eta1: DVector::zeros(m),
            precision: DMatrix::identity(m, m),
            mean: DVector::zeros(m),
            cov: DMatrix::identity(m, m),
        }
    }

    /// Number of inducing points.
    pub fn len(&self) -> usize {
        self.mean.len()
    }

    /// True when there are no inducing points.
    pub fn is_empty(&self) -> bool {
        self.mean.is_empty()
    }

    /// One damped step towards the minibatch-optimal q:
    ///   P ← (1 − γ)P + γ(I + Λ),  η₁ ← (1 − γ)η₁ + γ r,  S = P⁻¹,  m = S η₁.
    /// P stays a convex combination of SPD matrices. On failure (P not SPD, e.g. from non-finite
    /// statistics) the posterior is left unchanged and the error returned.
    pub fn natural_step(&mut self, stats: &NatGradStats, gamma: f64) -> Result<(), CholeskyError> {
        let m = self.len();
        let precision =
            &self.precision * (1.0 - gamma) + (DMatrix::identity(m, m) + &stats.lambda) * gamma;
        let eta1 = &self.eta1 * (1.0 - gamma) + &stats.r * gamma;
        // Symmetrise: the two SYRK-derived terms are symmetric only up to rounding.
        let precision = (&precision + precision.transpose()) * 0.5;
        let factor = cholesky_jittered(&precision, JitterPolicy::exactly(0.0))?;
        let l_inv = lower_inverse(&factor.l);
        let cov = l_inv.transpose() * &l_inv;
        self.mean = &cov * &eta1;
        self.cov = cov;
        self.eta1 = eta1;
        self.precision = precision;
        Ok(())
    }
}

/// The paper's step-size ramp: γ_t = 1e-4 + (0.1 − 1e-4)·min(t, 5)/5 for step t = 0, 1, …
/// (linear from 1e-4 to 0.1 over the first five steps, then 0.1; MODEL.md §3.5).
pub fn step_size(t: usize) -> f64 {
    1e-4 + (0.1 - 1e-4) * (t.min(5) as f64) / 5.0
}
