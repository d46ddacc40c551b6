//! The "noise-model" values that a fitted collapsed bound must beat before Adam hands over to
//! L-BFGS (MODEL.md §6): a zero-mean Gaussian for a root, Bayesian linear regression on the
//! parents for a conditional.

use std::convert::Infallible;

use nalgebra::{DMatrix, DVector, SymmetricEigen};

use crate::gp::lbfgs::{minimize, LbfgsSettings};
use crate::gp::params::{ParamStore, Transform};

/// The maximised log-likelihood of y under N(0, σ²I) with σ² ≥ `floor`:
/// −(N/2)(log(2π σ̂²) + σ̄²/σ̂²) with σ̄² = mean(y²) and σ̂² = max(σ̄², floor) (the closed form of
/// [B]'s root "noise model"; σ̂² = 1 for a standardised column and any floor ≤ 1).
pub fn root_noise_value(y: &DVector<f64>, floor: f64) -> f64 {
    let n = y.len() as f64;
    let mean_square = y.norm_squared() / n;
    let var = mean_square.max(floor);
    -0.5 * n * ((2.0 * std::f64::consts::PI * var).ln() + mean_square / var)
}

/// The Bayesian-linear-regression evidence at its maximum over (v, σ²), and the maximiser.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearEvidence {
    /// max log N(y | 0, v X Xᵀ + σ² I).
    pub value: f64,
    /// The weight variance v.
    pub weight_variance: f64,
    /// σ² (≥ the floor).
    pub noise_variance: f64,
}

/// The evidence of y under y = X β + ε, β ~ N(0, v I), ε ~ N(0, σ² I), maximised over v ≥ 0 and
/// σ² ≥ `floor` (v = softplus(a), σ² = softplus(b) + floor, by L-BFGS from v = 1,
/// σ² = max(1/2, 2·floor)).
///
/// Uses only |pa| × |pa| algebra: with XᵀX = U Λ Uᵀ and p = Λ^{-1/2} Uᵀ Xᵀ y (the coordinates of y
/// on X's orthonormal left singular vectors),
/// log N(y | 0, vXXᵀ + σ²I) = −½ [N log 2π + Σ_k log(vλ_k + σ²) + (N − P) log σ²
///                                + Σ_k p_k²/(vλ_k + σ²) + (yᵀy − Σ_k p_k²)/σ²].
/// With no columns (P = 0) this is the root value [`root_noise_value`] with v = 0.
pub fn linear_regression_evidence(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    floor: f64,
) -> LinearEvidence {
    if x.ncols() == 0 {
        return LinearEvidence {
            value: root_noise_value(y, floor),
            weight_variance: 0.0,
            noise_variance: (y.norm_squared() / y.len() as f64).max(floor),
        };
    }
    let stats = SpectralStats::new(x, y);
    let s2_start = (0.5f64).max(2.0 * floor);
    let mut store = ParamStore::new();
    store.add("weight_variance", 1, Transform::POSITIVE);
    store.add("noise", 1, Transform::Positive { floor });
    let start = store.pack(&[1.0, s2_start]);
    let settings = LbfgsSettings {
        max_iterations: 1000,
        gradient_tolerance: 1e-9 * (1.0 + y.len() as f64),
        relative_tolerance: 1e-14,
        ..LbfgsSettings::default()
    };
    let objective = |raw: &[f64]| -> Result<(f64, Vec<f64>), Infallible> {
        let [v, s2] = store.unpack(raw)[..] else {
            unreachable!("two parameters declared")
        };
        let (f, dv, ds2) = stats.evidence(v, s2);
        Ok((-f, store.chain(raw, &[-dv, -ds2])))
    };
    let (v, s2) = match minimize(objective, &start, &settings) {
        Ok(r) => match store.unpack(&r.x)[..] {
            [v, s2] => (v, s2),
            _ => unreachable!("two parameters declared"),
        },
        // The objective is finite everywhere, so this cannot happen; fall back to the start.
        Err(_) => (1.0, s2_start),
    };
    LinearEvidence {
        value: stats.evidence(v, s2).0,
        weight_variance: v,
        noise_variance: s2,
    }
}

/// The eigenvalues of XᵀX and the projections p_k that determine the evidence.
struct SpectralStats {
    n: f64,
    p_dim: f64,
    yy: f64,
    lambda: Vec<f64>,
    proj2: Vec<f64>,
}

impl SpectralStats {
    fn new(x: &DMatrix<f64>, y: &DVector<f64>) -> Self {
        let eig = SymmetricEigen::new(x.tr_mul(x));
        let xty = x.tr_mul(y);
        let top = eig.eigenvalues.iter().fold(0.0f64, |m, &l| m.max(l));
        let mut lambda = Vec::new();
        let mut proj2 = Vec::new();
        for (k, &l) in eig.eigenvalues.iter().enumerate() {
            // Directions with a negligible eigenvalue carry no part of y (p_k = 0 exactly).
            let l = l.max(0.0);
            let p2 = if l > 1e-12 * top.max(f64::MIN_POSITIVE) {
                let u = eig.eigenvectors.column(k).dot(&xty);
                u * u / l
            } else {
                0.0
            };
            lambda.push(l);
            proj2.push(p2);
        }
        Self {
            n: y.len() as f64,
            p_dim: x.ncols() as f64,
            yy: y.norm_squared(),
            lambda,
            proj2,
        }
    }

    /// The evidence and its derivatives with respect to v and σ².
    fn evidence(&self, v: f64, s2: f64) -> (f64, f64, f64) {
        let residual = (self.yy - self.proj2.iter().sum::<f64>()).max(0.0);
        let mut logdet = (self.n - self.p_dim) * s2.ln();
        let mut quad = residual / s2;
        let (mut dv, mut ds2) = (0.0, 0.0);
        // ∂/∂v: −½ Σ λ/e + ½ Σ p²λ/e²;  ∂/∂σ²: −½ [Σ 1/e + (N−P)/σ²] + ½ [Σ p²/e² + r/σ⁴].
        for (&l, &p2) in self.lambda.iter().zip(&self.proj2) {
            let e = v * l + s2;
            logdet += e.ln();
            quad += p2 / e;
            dv += -0.5 * l / e + 0.5 * p2 * l / (e * e);
            ds2 += -0.5 / e + 0.5 * p2 / (e * e);
        }
        ds2 += -0.5 * (self.n - self.p_dim) / s2 + 0.5 * residual / (s2 * s2);
        let value = -0.5 * (self.n * (2.0 * std::f64::consts::PI).ln() + logdet + quad);
        (value, dv, ds2)
    }
}
