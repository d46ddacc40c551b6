//! Predictions of a fitted collapsed model at new inputs u* = [x*, w*] (MODEL.md §4; Titsias 2009).
//!
//! The collapsed bound is maximised in closed form over q(u) = N(m, S). With K = K_ZZ + εI (the
//! jitter of the fit), Σ = K + Ψ2/σ² and b = Ψ1ᵀ y, the optimum is
//!
//! ```text
//! m = K Σ⁻¹ b / σ²,   S = K Σ⁻¹ K,
//! ```
//!
//! and f(u*) | q(u) is Gaussian with
//!
//! ```text
//! E[f(u*)]   = k_*Z K⁻¹ m = k_*Z Σ⁻¹ b / σ²
//! Var[f(u*)] = k_** − k_*Z K⁻¹ k_Z* + k_*Z K⁻¹ S K⁻¹ k_Z* = k_** − k_*Z (K⁻¹ − Σ⁻¹) k_Z*.
//! ```
//!
//! In the bound's factors (bound.rs: K = L Lᵀ, B = I + L⁻¹Ψ2L⁻ᵀ/σ² = LB LBᵀ, so Σ = L B Lᵀ) and
//! with a = L⁻¹ k_Z*: E[f] = aᵀ B⁻¹ L⁻¹ b / σ² and Var[f] = k_** − aᵀa + |LB⁻¹ a|². Only these
//! bounded quantities are formed (B⁻¹ ⪯ I), as in the bound. Ψ0, Ψ1 and Ψ2 are the training rows'
//! statistics under their q(w_n), so the latent of each training row is integrated out; w* at a
//! new point is an input like x*, and the caller integrates it over its prior.
//!
//! A new observation adds the noise: Var[y*] = Var[f(u*)] + σ².

use nalgebra::{DMatrix, DVector};

use super::bound::CollapsedParams;
use super::psi::psi_statistics;
use super::CollapsedError;
use crate::gp::kernel::Kernel;
use crate::gp::linalg::{solve_lower, solve_lower_vec};

/// What a fitted collapsed model needs to predict: the kernel, Z, the factors L and LB, and the
/// weights β = Σ⁻¹ Ψ1ᵀ y / σ² (module documentation).
#[derive(Debug, Clone)]
pub struct CollapsedPredictor {
    kernel: Kernel,
    z: DMatrix<f64>,
    noise_variance: f64,
    l: DMatrix<f64>,
    lb: DMatrix<f64>,
    /// L⁻ᵀ B⁻¹ L⁻¹ Ψ1ᵀ y / σ² = Σ⁻¹ Ψ1ᵀ y / σ², so E[f(u*)] = k_*Z β.
    weights: DVector<f64>,
}

/// The predictive of f at some inputs: means and variances of f (noise not included).
#[derive(Debug, Clone, PartialEq)]
pub struct LatentFunctionPrediction {
    pub mean: DVector<f64>,
    pub variance: DVector<f64>,
}

impl CollapsedPredictor {
    /// The predictor of the model with parameters `params` fitted to inputs `x` (N × |O|, the
    /// observed columns; the latent column comes from `params.latent` when there is one) and
    /// outputs `y`, at jitter `jitter` (use the fit's: the bound was maximised with it). One
    /// factorisation attempt each for K and B; a failure is a typed error, never a panic.
    pub fn new(
        x: &DMatrix<f64>,
        y: &DVector<f64>,
        params: &CollapsedParams,
        jitter: f64,
    ) -> Result<Self, CollapsedError> {
        let sigma2 = super::bound::check_noise_and_jitter(params, jitter)?;
        if y.len() != x.nrows() {
            return Err(CollapsedError::Shape(format!(
                "y has {} entries for {} input rows",
                y.len(),
                x.nrows()
            )));
        }
        let observed = x.ncols() + usize::from(params.latent.is_some());
        if params.kernel.dim() != observed || params.z.ncols() != observed {
            return Err(CollapsedError::Shape(format!(
                "the kernel ({}) and Z ({}) need {observed} input columns",
                params.kernel.dim(),
                params.z.ncols()
            )));
        }
        let psi = psi_statistics(&params.kernel, x, &params.z, params.latent.as_ref())?;
        let super::bound::InducingFactors { l, lb, .. } =
            super::bound::inducing_factors(params, &psi.psi2, sigma2, jitter)?;
        // β = L⁻ᵀ LB⁻ᵀ LB⁻¹ L⁻¹ Ψ1ᵀ y / σ².
        let mut weights = solve_lower_vec(&l, &psi.psi1.tr_mul(y)) / sigma2;
        lb.solve_lower_triangular_unchecked_mut(&mut weights);
        lb.tr_solve_lower_triangular_unchecked_mut(&mut weights);
        l.tr_solve_lower_triangular_unchecked_mut(&mut weights);
        if weights.iter().any(|v| !v.is_finite()) {
            return Err(CollapsedError::NonFinite { value: f64::NAN });
        }
        Ok(Self {
            kernel: params.kernel.clone(),
            z: params.z.clone(),
            noise_variance: sigma2,
            l,
            lb,
            weights,
        })
    }

    /// σ², the noise variance a new observation adds to Var[f].
    pub fn noise_variance(&self) -> f64 {
        self.noise_variance
    }

    /// The number of input columns a prediction needs (the observed ones, then w when the model
    /// has a latent).
    pub fn input_dim(&self) -> usize {
        self.kernel.dim()
    }

    /// E[f(u*)] = k_*Z β and Var[f(u*)] = k_** − aᵀa + |LB⁻¹ a|², a = L⁻¹ k_Z*, for each row u*
    /// of `inputs` (N* × D in the kernel's column order, w last). Variances below 0 from rounding
    /// are set to 0.
    pub fn predict_f(
        &self,
        inputs: &DMatrix<f64>,
    ) -> Result<LatentFunctionPrediction, CollapsedError> {
        if inputs.ncols() != self.kernel.dim() {
            return Err(CollapsedError::Shape(format!(
                "prediction inputs have {} columns, the kernel {}",
                inputs.ncols(),
                self.kernel.dim()
            )));
        }
        let k_zs = self.kernel.cross(&self.z, inputs);
        let mean = k_zs.tr_mul(&self.weights);
        let a = solve_lower(&self.l, &k_zs);
        let lb_inv_a = solve_lower(&self.lb, &a);
        let prior = self.kernel.diag(inputs);
        let variance = DVector::from_fn(inputs.nrows(), |r, _| {
            let explained = a.column(r).norm_squared() - lb_inv_a.column(r).norm_squared();
            (prior[r] - explained).max(0.0)
        });
        Ok(LatentFunctionPrediction { mean, variance })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::collapsed::LatentPosterior;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// The exact GP regression posterior of f at `test` for `kernel` on inputs `train`, computed
    /// densely: mean k_*X (K_XX + σ²I)⁻¹ y, variance k_** − k_*X (K_XX + σ²I)⁻¹ k_X*.
    /// The predictive's mean and variance equal the dense reference's at every test point.
    fn agrees(p: &LatentFunctionPrediction, mean: &DVector<f64>, var: &DVector<f64>) {
        for r in 0..mean.len() {
            assert!(
                (p.mean[r] - mean[r]).abs() < 1e-7,
                "mean {r}: {} vs {}",
                p.mean[r],
                mean[r]
            );
            assert!(
                (p.variance[r] - var[r]).abs() < 1e-7,
                "var {r}: {} vs {}",
                p.variance[r],
                var[r]
            );
        }
    }

    fn dense_posterior(
        kernel: &Kernel,
        train: &DMatrix<f64>,
        y: &DVector<f64>,
        test: &DMatrix<f64>,
        sigma2: f64,
    ) -> (DVector<f64>, DVector<f64>) {
        let n = train.nrows();
        let k = kernel.gram(train) + DMatrix::identity(n, n) * sigma2;
        let chol = k.cholesky().expect("K + σ²I is positive definite");
        let k_xs = kernel.cross(train, test);
        let mean = k_xs.tr_mul(&chol.solve(y));
        let half = solve_lower(&chol.l(), &k_xs);
        let prior = kernel.diag(test);
        let var = DVector::from_fn(test.nrows(), |r, _| {
            prior[r] - half.column(r).norm_squared()
        });
        (mean, var)
    }

    /// With Z = the training inputs (M = N), Titsias's bound is exact, so the collapsed predictive
    /// equals the dense GP regression posterior: without a latent, and with a latent that the
    /// kernel ignores (θ_w = 0, v_w = 0), whatever q(w) is.
    #[test]
    fn with_inducing_points_at_the_data_the_predictive_is_the_exact_gp_posterior() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 14;
        let x: DMatrix<f64> = DMatrix::from_fn(n, 2, |_, _| rng.random_range(-2.0..2.0));
        let y = DVector::from_fn(n, |r, _| (1.5 * x[(r, 0)]).sin() + 0.3 * x[(r, 1)]);
        let test = DMatrix::from_fn(9, 2, |_, _| rng.random_range(-2.5..2.5));
        let sigma2 = 0.05;
        let jitter = 1e-10;

        let plain = Kernel::se_plus_linear(vec![0.3, 0.2], 1.2, vec![0.9, 0.6]);
        let (mean, var) = dense_posterior(&plain, &x, &y, &test, sigma2);
        let params = CollapsedParams {
            kernel: plain.clone(),
            noise_variance: sigma2,
            z: x.clone(),
            latent: None,
        };
        let p = CollapsedPredictor::new(&x, &y, &params, jitter)
            .unwrap()
            .predict_f(&test)
            .unwrap();
        agrees(&p, &mean, &var);

        // The same with a latent column the kernel does not see.
        let ignored = Kernel::se_plus_linear(vec![0.3, 0.2, 0.0], 1.2, vec![0.9, 0.6, 0.0]);
        let z = DMatrix::from_fn(n, 3, |r, c| {
            if c < 2 {
                x[(r, c)]
            } else {
                rng.random_range(-1.0..1.0)
            }
        });
        let params = CollapsedParams {
            kernel: ignored,
            noise_variance: sigma2,
            z,
            latent: Some(LatentPosterior {
                mean: DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0)),
                variance: DVector::from_fn(n, |_, _| rng.random_range(0.01..1.0)),
            }),
        };
        let with_w = DMatrix::from_fn(
            test.nrows(),
            3,
            |r, c| if c < 2 { test[(r, c)] } else { 0.7 },
        );
        let p = CollapsedPredictor::new(&x, &y, &params, jitter)
            .unwrap()
            .predict_f(&with_w)
            .unwrap();
        agrees(&p, &mean, &var);
    }

    #[test]
    fn mismatched_inputs_are_errors_not_panics() {
        let x = DMatrix::from_column_slice(3, 1, &[0.0, 1.0, 2.0]);
        let y = DVector::from_column_slice(&[0.0, 1.0, 0.5]);
        let params = CollapsedParams {
            kernel: Kernel::se_plus_linear(vec![0.1], 1.0, vec![1.0]),
            noise_variance: 0.1,
            z: x.clone(),
            latent: None,
        };
        let p = CollapsedPredictor::new(&x, &y, &params, 1e-6).unwrap();
        assert!(matches!(
            p.predict_f(&DMatrix::zeros(2, 2)),
            Err(CollapsedError::Shape(_))
        ));
        let bad = CollapsedParams {
            noise_variance: 0.0,
            ..params.clone()
        };
        assert!(CollapsedPredictor::new(&x, &y, &bad, 1e-6).is_err());
        let short = DVector::from_column_slice(&[0.0, 1.0]);
        assert!(CollapsedPredictor::new(&x, &short, &params, 1e-6).is_err());
    }
}
