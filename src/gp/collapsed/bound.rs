//! The collapsed variational bound (Titsias 2009; Bayesian GPLVM with psi-statistics), MODEL.md
//! §4.3, for one output column y, and its gradient by hand-derived adjoints.
//!
//! ```text
//! K = K_ZZ + εI = L Lᵀ,   C2 = L⁻¹ Ψ2 L⁻ᵀ / σ²,   B = I + C2 = LB LBᵀ,   c = LB⁻¹ L⁻¹ Ψ1ᵀ y / σ²
//! F = −(N/2) log(2πσ²) − Σ log diag LB − yᵀy/(2σ²) + ½ cᵀc − ψ0/(2σ²) + ½ tr C2 − Σ_n KL(q(w_n) ‖ N(0,1))
//! ```
//!
//! Reverse mode. With ã = LB⁻ᵀ c (= B⁻¹ L⁻¹ Ψ1ᵀ y / σ²) and Ĝ = ∂F/∂C2 = ½ (I − B⁻¹ − ã ãᵀ), the
//! adjoint chain through LB = chol(B), A = L⁻¹ Ψ1ᵀ and L = chol(K) collapses to
//!
//! ```text
//! ∂F/∂Ψ2  = L⁻ᵀ Ĝ L⁻¹ / σ²
//! ∂F/∂Ψ1  = y (L⁻ᵀ ã / σ²)ᵀ
//! ∂F/∂ψ0  = −1/(2σ²)
//! ∂F/∂K   = L⁻ᵀ (Ĝ − ½ C2) L⁻¹
//! ∂F/∂σ²  = −N/(2σ²) + tr(B⁻¹C2)/(2σ²) + yᵀy/(2σ⁴) − cᵀc/σ² + ãᵀ C2 ã/(2σ²) + ψ0/(2σ⁴) − tr C2/(2σ²)
//! ```
//!
//! (because F = … − ½ log det(K + Ψ2/σ²) + ½ log det K + (1/2σ⁴) bᵀ(K + Ψ2/σ²)⁻¹ b + tr(K⁻¹Ψ2)/(2σ²),
//! b = Ψ1ᵀ y, and (K + Ψ2/σ²)⁻¹ = L⁻ᵀ B⁻¹ L⁻¹). Only the bounded matrices B⁻¹ ⪯ I, ã ãᵀ and C2
//! are formed between the triangular solves, so no explicit K⁻¹ appears. ∂F/∂Ψ* then go through the
//! psi-statistics' reverse mode and ∂F/∂K through the kernel's `gram_backward`.
//!
//! Row copies. When the rows fitted are a subset standing for a larger data set, each row can be
//! counted r times (r = N_total / N_rows): the bound of the data set made of r copies of every row,
//! each copy with the same q(w_n), is F above with ψ0, Ψ2, Ψ1ᵀy, N, yᵀy and Σ KL multiplied by r
//! ([`collapsed_bound_with_grad_on`]). This scales the data-fit terms by r but leaves the
//! complexity term −Σ log diag LB of the same order (it grows like log r, not like r), unlike
//! r·F, which would charge the model's complexity r times over.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use super::psi::{
    plain_backward, plain_forward, LatentCache, LatentPosterior, Psi2Device, PsiStatistics,
    SeLinear,
};
use super::CollapsedError;
use crate::gp::kernel::{Kernel, KernelGrad};
use crate::gp::linalg::{
    cholesky_jittered, lower_inverse, solve_lower, solve_lower_vec, solve_upper_transposed_vec,
    transpose_times, JitterPolicy,
};

/// The jitter ε added to K_ZZ's diagonal by [`sgpr_bound`] (GPflow's default in f64).
pub const DEFAULT_JITTER: f64 = 1e-6;

/// Everything the bound depends on besides the data: the kernel on [x_O, w] (or on x alone when
/// `latent` is `None`), σ² = φ², the inducing inputs Z (M × D, the latent column last) and q(w).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollapsedParams {
    pub kernel: Kernel,
    pub noise_variance: f64,
    pub z: DMatrix<f64>,
    pub latent: Option<LatentPosterior>,
}

/// ∂F with respect to every entry of [`CollapsedParams`] (constrained values). The latent
/// vectors are empty when there is no latent.
#[derive(Debug, Clone, PartialEq)]
pub struct CollapsedGrad {
    pub kernel: KernelGrad,
    pub noise_variance: f64,
    pub z: DMatrix<f64>,
    pub latent_mean: DVector<f64>,
    pub latent_variance: DVector<f64>,
}

/// F of the module documentation for data inputs `x` (N × |O|), outputs `y` (N) and jitter ε
/// (one attempt: a failed factorisation is an error, so F stays a smooth function of the
/// parameters; the caller decides whether to retry with more jitter).
pub fn collapsed_bound(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    params: &CollapsedParams,
    jitter: f64,
) -> Result<f64, CollapsedError> {
    crate::base::heartbeat::beat();
    if crate::base::heartbeat::interrupted() {
        return Err(CollapsedError::Interrupted);
    }
    Ok(Forward::new(x, y, params, jitter, 1.0, None)?.value)
}

/// F and ∂F (see the module documentation for the adjoints).
pub fn collapsed_bound_with_grad(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    params: &CollapsedParams,
    jitter: f64,
) -> Result<(f64, CollapsedGrad), CollapsedError> {
    collapsed_bound_with_grad_on(x, y, params, jitter, 1.0, None)
}

/// F and ∂F with every row counted `row_copies` = r times (module documentation, "Row copies"):
/// ψ0 → rψ0, Ψ2 → rΨ2, Ψ1ᵀy → rΨ1ᵀy, N → rN, yᵀy → r yᵀy, Σ KL → r Σ KL. For a whole number r
/// this is exactly the bound of the data with each row repeated r times (and q(w) repeated with
/// it); the gradient with respect to q(w_n) is the sum over the n-th row's copies. Ψ2's O(N M²)
/// sums (forward and reverse) run on `device` when one is given (a latent input and the SE +
/// linear kernel; otherwise there are none to move): the same value and gradient to within the
/// device's rounding.
pub fn collapsed_bound_with_grad_on(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    params: &CollapsedParams,
    jitter: f64,
    row_copies: f64,
    device: Option<&dyn Psi2Device>,
) -> Result<(f64, CollapsedGrad), CollapsedError> {
    // Every fit and training step passes through here: a beat tells a watching driver that a
    // long unit of work is still alive; a stop request ends the fit here, not hundreds of
    // evaluations later.
    crate::base::heartbeat::beat();
    if crate::base::heartbeat::interrupted() {
        return Err(CollapsedError::Interrupted);
    }
    let fwd = Forward::new(x, y, params, jitter, row_copies, device)?;
    if crate::base::heartbeat::interrupted() {
        return Err(CollapsedError::Interrupted);
    }
    let grad = fwd.gradient(x, y, params, device)?;
    Ok((fwd.value, grad))
}

/// The SGPR bound of Titsias (2009), no latent input:
/// F = log N(y | 0, Q + σ²I) − tr(K_xx − Q)/(2σ²), Q = K_xZ (K_ZZ + εI)⁻¹ K_Zx, ε =
/// [`DEFAULT_JITTER`]; `x` is N × D, `z` M × D for the D-dimensional `kernel`.
pub fn sgpr_bound(
    kernel: &Kernel,
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    z: &DMatrix<f64>,
    noise_variance: f64,
) -> Result<f64, CollapsedError> {
    let params = CollapsedParams {
        kernel: kernel.clone(),
        noise_variance,
        z: z.clone(),
        latent: None,
    };
    collapsed_bound(x, y, &params, DEFAULT_JITTER)
}

/// The posterior mean of f at the data inputs under the collapsed q(u) (no latent):
/// E[f(x)] = Ψ1 (K + Ψ2/σ²)⁻¹ Ψ1ᵀ y / σ² = Ψ1 L⁻ᵀ ã (ã of the module documentation); with
/// Ψ1 = K_xZ, Ψ2 = K_Zx K_xZ this is SGPR's predictive mean.
pub(super) fn posterior_mean_at_data(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    params: &CollapsedParams,
    jitter: f64,
) -> Result<DVector<f64>, CollapsedError> {
    let fwd = Forward::new(x, y, params, jitter, 1.0, None)?;
    let a_tilde = solve_upper_transposed_vec(&fwd.lb, &fwd.c);
    Ok(&fwd.psi.psi1 * solve_upper_transposed_vec(&fwd.l, &a_tilde))
}

/// The forward pass and what the reverse pass reuses.
struct Forward {
    value: f64,
    /// r: how many times each row counts.
    copies: f64,
    /// ψ0 and Ψ2 already multiplied by r; Ψ1 as computed (r enters through Ψ1ᵀy).
    psi: PsiStatistics,
    cache: Option<LatentCache>,
    l: DMatrix<f64>,
    lb: DMatrix<f64>,
    c2: DMatrix<f64>,
    c: DVector<f64>,
}

/// σ² of `params` once it and `jitter` are usable: σ² > 0 and the jitter ≥ 0, both finite (the
/// bound and the predictive refuse anything else by name).
pub(super) fn check_noise_and_jitter(
    params: &CollapsedParams,
    jitter: f64,
) -> Result<f64, CollapsedError> {
    let sigma2 = params.noise_variance;
    if !(sigma2 > 0.0 && sigma2.is_finite()) {
        return Err(CollapsedError::InvalidParameter(format!(
            "the noise variance must be positive and finite, got {sigma2}"
        )));
    }
    if !(jitter >= 0.0 && jitter.is_finite()) {
        return Err(CollapsedError::InvalidParameter(format!(
            "the jitter must be non-negative and finite, got {jitter}"
        )));
    }
    Ok(sigma2)
}

/// The factors the bound and the predictive share: K_ZZ + jitter·I = L Lᵀ,
/// C₂ = L⁻¹ Ψ₂ L⁻ᵀ / σ² (symmetrised) and I + C₂ = L_B L_Bᵀ.
pub(super) struct InducingFactors {
    pub l: DMatrix<f64>,
    pub c2: DMatrix<f64>,
    pub lb: DMatrix<f64>,
}

/// [`InducingFactors`] of `params`' kernel and Z with Ψ₂ = `psi2` and σ² = `sigma2`; a factor
/// that fails is reported as the inducing (K_ZZ) or inner (I + C₂) covariance's.
pub(super) fn inducing_factors(
    params: &CollapsedParams,
    psi2: &DMatrix<f64>,
    sigma2: f64,
    jitter: f64,
) -> Result<InducingFactors, CollapsedError> {
    let kzz = params.kernel.gram(&params.z);
    let l = cholesky_jittered(&kzz, JitterPolicy::exactly(jitter))
        .map_err(CollapsedError::InducingCovariance)?
        .l;
    let m = params.z.nrows();
    let l_inv_psi2 = solve_lower(&l, psi2);
    let mut c2 = solve_lower(&l, &l_inv_psi2.transpose()) / sigma2;
    c2 = (&c2 + c2.transpose()) * 0.5;
    let b = &c2 + DMatrix::identity(m, m);
    let lb = cholesky_jittered(&b, JitterPolicy::exactly(0.0))
        .map_err(CollapsedError::InnerCovariance)?
        .l;
    Ok(InducingFactors { l, c2, lb })
}

impl Forward {
    fn new(
        x: &DMatrix<f64>,
        y: &DVector<f64>,
        params: &CollapsedParams,
        jitter: f64,
        copies: f64,
        device: Option<&dyn Psi2Device>,
    ) -> Result<Self, CollapsedError> {
        let n = x.nrows();
        if !(copies > 0.0 && copies.is_finite()) {
            return Err(CollapsedError::InvalidParameter(format!(
                "the row count r must be positive and finite, got {copies}"
            )));
        }
        if y.len() != n {
            return Err(CollapsedError::Shape(format!(
                "y has {} entries for {n} input rows",
                y.len()
            )));
        }
        let sigma2 = check_noise_and_jitter(params, jitter)?;
        let (mut psi, cache) = match &params.latent {
            None => {
                if x.ncols() != params.kernel.dim() || params.z.ncols() != params.kernel.dim() {
                    return Err(CollapsedError::Shape(format!(
                        "without a latent, x ({}) and Z ({}) need the kernel's {} columns",
                        x.ncols(),
                        params.z.ncols(),
                        params.kernel.dim()
                    )));
                }
                (plain_forward(&params.kernel, x, &params.z), None)
            }
            Some(q) => {
                if q.variance.iter().any(|&s| s.is_nan() || s <= 0.0) {
                    return Err(CollapsedError::InvalidParameter(
                        "every q(w) variance must be positive".into(),
                    ));
                }
                let (psi, cache) = SeLinear::new(&params.kernel, x, &params.z, q)?
                    .on(device)
                    .forward()?;
                (psi, Some(cache))
            }
        };
        psi.psi0 *= copies;
        psi.psi2 *= copies;
        let InducingFactors { l, c2, lb } = inducing_factors(params, &psi.psi2, sigma2, jitter)?;
        let b_tilde = solve_lower_vec(&l, &(psi.psi1.tr_mul(y) * copies));
        let c = solve_lower_vec(&lb, &b_tilde) / sigma2;

        let kl = match &params.latent {
            None => 0.0,
            Some(q) => q
                .mean
                .iter()
                .zip(q.variance.iter())
                .map(|(&mu, &s)| 0.5 * (s + mu * mu - 1.0 - s.ln()))
                .sum::<f64>(),
        } * copies;
        let value = -0.5 * copies * n as f64 * (2.0 * std::f64::consts::PI * sigma2).ln()
            - lb.diagonal().iter().map(|d| d.ln()).sum::<f64>()
            - copies * y.norm_squared() / (2.0 * sigma2)
            + 0.5 * c.norm_squared()
            - psi.psi0 / (2.0 * sigma2)
            + 0.5 * c2.trace()
            - kl;
        if !value.is_finite() {
            return Err(CollapsedError::NonFinite { value });
        }
        Ok(Self {
            value,
            copies,
            psi,
            cache,
            l,
            lb,
            c2,
            c,
        })
    }

    fn gradient(
        &self,
        x: &DMatrix<f64>,
        y: &DVector<f64>,
        params: &CollapsedParams,
        device: Option<&dyn Psi2Device>,
    ) -> Result<CollapsedGrad, CollapsedError> {
        let n = x.nrows();
        let m = params.z.nrows();
        let sigma2 = params.noise_variance;
        let l = &self.l;
        let a_tilde = solve_upper_transposed_vec(&self.lb, &self.c);
        let lb_inv = lower_inverse(&self.lb);
        let b_inv = transpose_times(&lb_inv, &lb_inv);
        let eye = DMatrix::<f64>::identity(m, m);
        let g_hat = (&eye - &b_inv - &a_tilde * a_tilde.transpose()) * 0.5;
        // L⁻ᵀ X L⁻¹ for symmetric X by two products with L⁻¹ (for these small dense M × M
        // factors several times faster than two triangular solves with M right-hand sides).
        let l_inv = lower_inverse(l);
        let sandwich = |xm: &DMatrix<f64>| -> DMatrix<f64> {
            let s = transpose_times(&l_inv, &(xm * &l_inv));
            (&s + s.transpose()) * 0.5
        };
        let w = sandwich(&g_hat) / sigma2;
        let k_bar = sandwich(&(&g_hat - &self.c2 * 0.5));
        let r = self.copies;
        let beta = solve_upper_transposed_vec(l, &a_tilde) / sigma2;
        // Adjoints of the psi-statistics as computed (before the factor r).
        let g1 = y * beta.transpose() * r;
        let g0 = -0.5 * r / sigma2;
        let w_raw = &w * r;

        let tr_c2 = self.c2.trace();
        let tr_binv_c2 = m as f64 - b_inv.trace();
        let g_sigma2 = -0.5 * r * n as f64 / sigma2
            + tr_binv_c2 / (2.0 * sigma2)
            + r * y.norm_squared() / (2.0 * sigma2 * sigma2)
            - self.c.norm_squared() / sigma2
            + a_tilde.dot(&(&self.c2 * &a_tilde)) / (2.0 * sigma2)
            + self.psi.psi0 / (2.0 * sigma2 * sigma2)
            - tr_c2 / (2.0 * sigma2);

        let mut psi_grad = match (&params.latent, &self.cache) {
            (Some(q), Some(cache)) => SeLinear::new(&params.kernel, x, &params.z, q)?
                .on(device)
                .backward(cache, g0, &g1, &w_raw)?,
            _ => plain_backward(
                &params.kernel,
                x,
                &params.z,
                &self.psi.psi1,
                g0,
                &g1,
                &w_raw,
            ),
        };
        let (k_grad, z_grad) = params.kernel.gram_backward(&params.z, &k_bar);
        psi_grad.kernel.add_assign(&k_grad);
        psi_grad.z += z_grad;
        if let Some(q) = &params.latent {
            // −r·KL: ∂/∂μ = −rμ, ∂/∂s = −½r(1 − 1/s).
            psi_grad.mean -= &q.mean * r;
            for (g, &s) in psi_grad.variance.iter_mut().zip(q.variance.iter()) {
                *g -= 0.5 * r * (1.0 - 1.0 / s);
            }
        }
        Ok(CollapsedGrad {
            kernel: psi_grad.kernel,
            noise_variance: g_sigma2,
            z: psi_grad.z,
            latent_mean: psi_grad.mean,
            latent_variance: psi_grad.variance,
        })
    }
}
