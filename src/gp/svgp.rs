//! The uncollapsed (SVGP) evidence bound of one GP-CDE variable with a latent input, and its full
//! gradient by hand-derived adjoints (MODEL.md §3.1–3.4), in the GPU-friendly algebraic form:
//! α = L⁻ᵀm and Q = L⁻ᵀ(S − I)L⁻¹ turn the predictive means and variances into one GEMM and
//! column dot products, with no per-point triangular solves.
//!
//! This module computes; it owns no parameters. The caller supplies constrained values (kernel,
//! Z, q(v) = N(m, S), φ²) and a minibatch with its q(w) moments and Monte Carlo noise.

use super::kernel::{Kernel, KernelGrad};
use super::linalg::{
    cholesky_backward, cholesky_jittered, logdet_from_factor, solve_lower, solve_lower_vec,
    solve_upper_transposed_vec, CholeskyError, JitterPolicy,
};
use nalgebra::{DMatrix, DVector};
use std::f64::consts::PI;

/// The latent input of a minibatch: q(w_n) = N(μ_n, Σ_n) and the standard-normal draws ε_sn of the
/// reparameterisation w_sn = μ_n + √Σ_n ε_sn.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LatentBatch {
    /// Which input column holds w (the variable's own slot, MODEL.md §2.1).
    pub slot: usize,
    pub mu: DVector<f64>,
    pub var: DVector<f64>,
    /// S × b standard-normal draws.
    pub eps: DMatrix<f64>,
}

/// One variable's bound evaluation request.
#[derive(Debug, Clone, Copy)]
pub struct SvgpInput<'a> {
    pub kernel: &'a Kernel,
    /// Inducing inputs, M × D.
    pub z: &'a DMatrix<f64>,
    /// Whitened q(v) = N(m, S).
    pub q_mean: &'a DVector<f64>,
    pub q_cov: &'a DMatrix<f64>,
    /// Likelihood variance φ².
    pub noise: f64,
    /// Minibatch inputs, b × D; the latent slot's values are ignored (w replaces them).
    pub x: &'a DMatrix<f64>,
    /// Minibatch targets (the modelled variable), length b.
    pub y: &'a DVector<f64>,
    /// The latent input, or `None` for a plain GP regression (one evaluation per row).
    pub latent: Option<&'a LatentBatch>,
    /// Total rows N of the data set, for the minibatch scale N/b.
    pub total_rows: usize,
    pub jitter: JitterPolicy,
}

/// The bound's terms: L̂ = (N/b) Σ_n [ (1/S) Σ_s ELL_sn − KLw_n ] − KLu.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SvgpTerms {
    /// (N/b)(1/S) Σ ELL: the scaled expected log-likelihood.
    pub expected_log_lik: f64,
    /// (N/b) Σ_n KL(q(w_n) ‖ N(0,1)).
    pub kl_latent: f64,
    /// KL(q(v) ‖ N(0, I)).
    pub kl_inducing: f64,
    /// The bound L̂.
    pub elbo: f64,
    /// Jitter added to K_ZZ.
    pub jitter: f64,
}

/// The gradient of L̂ with respect to every input of the computation.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SvgpGrad {
    pub kernel: KernelGrad,
    pub z: DMatrix<f64>,
    pub noise: f64,
    pub q_mean: DVector<f64>,
    /// ∂L̂/∂S as a symmetric matrix (the derivative along a symmetric perturbation δS is
    /// Σ_ij G_ij δS_ij).
    pub q_cov: DMatrix<f64>,
    /// ∂L̂/∂μ_n and ∂L̂/∂Σ_n of the minibatch rows (empty without a latent).
    pub latent_mu: DVector<f64>,
    pub latent_var: DVector<f64>,
}

/// The minibatch statistics of the natural-gradient step (MODEL.md §3.5):
/// Λ = (c/φ²) L⁻¹ (K_Zt K_Ztᵀ) L⁻ᵀ and r = (c/φ²) L⁻¹ K_Zt y_T, with c = N/(bS).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct NatGradStats {
    pub lambda: DMatrix<f64>,
    pub r: DVector<f64>,
}

/// Everything one evaluation produces.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SvgpOutput {
    pub terms: SvgpTerms,
    pub grad: SvgpGrad,
    pub natgrad: NatGradStats,
}

/// The T = S·b evaluation points u_t (t = s·b + n): row n of x with the latent slot set to w_sn.
pub fn evaluation_points(x: &DMatrix<f64>, latent: Option<&LatentBatch>) -> DMatrix<f64> {
    let Some(lat) = latent else {
        return x.clone();
    };
    let (b, samples) = (x.nrows(), lat.eps.nrows());
    let mut u = DMatrix::zeros(samples * b, x.ncols());
    for s in 0..samples {
        for n in 0..b {
            let t = s * b + n;
            u.row_mut(t).copy_from(&x.row(n));
            u[(t, lat.slot)] = lat.mu[n] + lat.var[n].sqrt() * lat.eps[(s, n)];
        }
    }
    u
}

/// The S × b matrix of draws w_sn = μ_n + √Σ_n ε_sn.
fn latent_draws(lat: &LatentBatch) -> DMatrix<f64> {
    DMatrix::from_fn(lat.eps.nrows(), lat.eps.ncols(), |s, n| {
        lat.mu[n] + lat.var[n].sqrt() * lat.eps[(s, n)]
    })
}

/// KL(N(μ, Σ) ‖ N(0, 1)) = ½(Σ + μ² − 1 − log Σ).
pub fn kl_standard_normal(mu: f64, var: f64) -> f64 {
    0.5 * (var + mu * mu - 1.0 - var.ln())
}

/// Evaluates the bound, its gradient and the natural-gradient statistics (dense reference path:
/// K_Zt is formed point by point with [`Kernel::cross`]).
///
/// Forward, with K = K_ZZ + εI = LLᵀ, α = L⁻ᵀm, Q = L⁻ᵀ(S − I)L⁻¹:
///   mean_t = k_tᵀα,  var_t = k_tt + k_tᵀ Q k_t,
///   ELL_t = −½ log(2πφ²) − [(y_t − mean_t)² + var_t]/(2φ²),
///   L̂ = (N/b) Σ_n [(1/S) Σ_s ELL − KLw_n] − ½(tr S + mᵀm − M − log det S).
/// Backward (c = N/(bS)): g_mean = c(y − mean)/φ², g_var = −c/(2φ²),
///   K̄_Zt = α g_meanᵀ + 2 (Q K_Zt) diag(g_var),  k̄_tt = g_var,  ḡ_α = K_Zt g_mean,
///   Ḡ_Q = g_var K_Zt K_Ztᵀ,  L̄ = tril(−α (L⁻¹ḡ_α)ᵀ − 2 Q Ḡ_Q L⁻ᵀ),  K̄_ZZ = chol_backward(L, L̄);
///   then through the kernel to θ, Z and the latent column of u_t, and by reparameterisation
///   ∂w/∂μ = 1, ∂w/∂Σ = ε/(2√Σ).
pub fn bound_and_gradient(input: &SvgpInput) -> Result<SvgpOutput, CholeskyError> {
    crate::heartbeat::beat();
    evaluate(input, KernelPath::SharedObserved)
}

/// The same computation with K_Zt and its adjoint formed point by point by the generic kernel
/// (the dense reference the fast path is tested against).
pub fn bound_and_gradient_reference(input: &SvgpInput) -> Result<SvgpOutput, CholeskyError> {
    evaluate(input, KernelPath::Dense)
}

/// How K_Zt and its adjoint are computed.
#[derive(Clone, Copy, PartialEq)]
enum KernelPath {
    /// Every evaluation point on its own ([`Kernel::cross`]).
    Dense,
    /// The observed coordinates shared by a row's S samples computed once
    /// ([`Kernel::cross_latent`]); falls back to dense without a latent.
    SharedObserved,
}

fn evaluate(input: &SvgpInput, path: KernelPath) -> Result<SvgpOutput, CholeskyError> {
    let SvgpInput {
        kernel,
        z,
        q_mean: m,
        q_cov: s_cov,
        noise,
        x,
        y,
        latent,
        total_rows,
        jitter,
    } = *input;
    let mm = z.nrows();
    let b = x.nrows();
    let samples = latent.map_or(1, |l| l.eps.nrows());
    let t_count = samples * b;
    let scale = total_rows as f64 / b as f64;
    let c = scale / samples as f64;

    // Inducing-point algebra.
    let kzz = kernel.gram(z);
    let factor = cholesky_jittered(&kzz, jitter)?;
    let l = &factor.l;
    let alpha = solve_upper_transposed_vec(l, m);
    let l_inv = solve_lower(l, &DMatrix::identity(mm, mm));
    let s_minus_i = s_cov - DMatrix::<f64>::identity(mm, mm);
    let q = l_inv.transpose() * &s_minus_i * &l_inv;

    // Predictions at the T evaluation points.
    let u = evaluation_points(x, latent);
    let fast = match (path, latent) {
        (KernelPath::SharedObserved, Some(lat)) => Some((lat, latent_draws(lat))),
        _ => None,
    };
    let cached = fast
        .as_ref()
        .map(|(lat, w)| kernel.cross_latent_cached(z, x, lat.slot, w));
    let dense_k_zt;
    let k_zt = match &cached {
        Some(c) => &c.k,
        None => {
            dense_k_zt = kernel.cross(z, &u);
            &dense_k_zt
        }
    };
    let k_tt = kernel.diag(&u);
    let qk = &q * k_zt;
    let mean = k_zt.transpose() * &alpha;
    let var = DVector::from_fn(t_count, |t, _| k_tt[t] + k_zt.column(t).dot(&qk.column(t)));
    let y_t = DVector::from_fn(t_count, |t, _| y[t % b]);

    let residual = &y_t - &mean;
    let ell_sum: f64 = (0..t_count)
        .map(|t| {
            -0.5 * (2.0 * PI * noise).ln() - (residual[t] * residual[t] + var[t]) / (2.0 * noise)
        })
        .sum();
    let expected_log_lik = c * ell_sum;
    let kl_latent = latent.map_or(0.0, |lat| {
        scale
            * (0..b)
                .map(|n| kl_standard_normal(lat.mu[n], lat.var[n]))
                .sum::<f64>()
    });
    // S must be positive definite as it stands: jitter here would silently change the KL, so a
    // failure is reported instead (one attempt, no jitter).
    let s_factor = cholesky_jittered(
        s_cov,
        JitterPolicy {
            initial: 0.0,
            factor: 1.0,
            max_attempts: 1,
        },
    )?;
    let kl_inducing =
        0.5 * (s_cov.trace() + m.dot(m) - mm as f64 - logdet_from_factor(&s_factor.l));
    let elbo = expected_log_lik - kl_latent - kl_inducing;

    // Backward through the predictions.
    let g_mean = residual.scale(c / noise);
    let g_var = -c / (2.0 * noise);
    let d_noise = c
        * (0..t_count)
            .map(|t| -0.5 / noise + (residual[t] * residual[t] + var[t]) / (2.0 * noise * noise))
            .sum::<f64>();
    let mut k_zt_bar = &alpha * g_mean.transpose();
    k_zt_bar += &qk * (2.0 * g_var);
    let k_tt_bar = DVector::from_element(t_count, g_var);
    let g_alpha = k_zt * &g_mean;
    let kkt = k_zt * k_zt.transpose();
    let g_q = &kkt * g_var;

    // Back to L (through α and Q), then K_ZZ.
    let l_inv_g_alpha = solve_lower_vec(l, &g_alpha);
    let l_bar = -(&alpha * l_inv_g_alpha.transpose()) - (&q * &g_q * l_inv.transpose()) * 2.0;
    let kzz_bar = cholesky_backward(l, &l_bar);

    // q(v): α = L⁻ᵀm ⇒ ∂/∂m = L⁻¹ḡ_α; Q = L⁻ᵀ S L⁻¹ + const ⇒ ∂/∂S = L⁻¹ Ḡ_Q L⁻ᵀ; minus the KL.
    let d_q_mean = &l_inv_g_alpha - m;
    let s_inv = {
        let li = solve_lower(&s_factor.l, &DMatrix::identity(mm, mm));
        li.transpose() * li
    };
    let d_q_cov = &l_inv * &g_q * l_inv.transpose() - (DMatrix::identity(mm, mm) - s_inv) * 0.5;

    // Through the kernel.
    let (mut k_grad, mut d_z) = kernel.gram_backward(z, &kzz_bar);
    let (g_diag, mut d_u) = kernel.diag_backward(&u, &k_tt_bar);
    k_grad.add_assign(&g_diag);
    match &fast {
        Some((lat, w)) => {
            let cache = cached
                .as_ref()
                .expect("the fast path keeps its forward cache");
            let (g_cross, d_z_cross, d_w) =
                kernel.cross_latent_backward_cached(z, x, lat.slot, w, cache, &k_zt_bar);
            k_grad.add_assign(&g_cross);
            d_z += d_z_cross;
            for s in 0..samples {
                for n in 0..b {
                    d_u[(s * b + n, lat.slot)] += d_w[(s, n)];
                }
            }
        }
        None => {
            let (g_cross, d_z_cross, d_u_cross) = kernel.cross_backward(z, &u, &k_zt_bar);
            k_grad.add_assign(&g_cross);
            d_z += d_z_cross;
            d_u += d_u_cross;
        }
    }

    // Latent column → q(w) by reparameterisation, plus the KL of q(w).
    let (latent_mu, latent_var) = match latent {
        Some(lat) => {
            let mut d_mu = DVector::zeros(b);
            let mut d_var = DVector::zeros(b);
            for s in 0..samples {
                for n in 0..b {
                    let dw = d_u[(s * b + n, lat.slot)];
                    d_mu[n] += dw;
                    d_var[n] += dw * lat.eps[(s, n)] / (2.0 * lat.var[n].sqrt());
                }
            }
            for n in 0..b {
                d_mu[n] -= scale * lat.mu[n];
                d_var[n] -= scale * 0.5 * (1.0 - 1.0 / lat.var[n]);
            }
            (d_mu, d_var)
        }
        None => (DVector::zeros(0), DVector::zeros(0)),
    };

    // Natural-gradient statistics: Λ = (c/φ²) L⁻¹ K_Zt K_Ztᵀ L⁻ᵀ, r = (c/φ²) L⁻¹ K_Zt y.
    let lambda = (&l_inv * &kkt * l_inv.transpose()) * (c / noise);
    let r = solve_lower_vec(l, &(k_zt * &y_t)) * (c / noise);

    Ok(SvgpOutput {
        terms: SvgpTerms {
            expected_log_lik,
            kl_latent,
            kl_inducing,
            elbo,
            jitter: factor.jitter,
        },
        grad: SvgpGrad {
            kernel: k_grad,
            z: d_z,
            noise: d_noise,
            q_mean: d_q_mean,
            q_cov: d_q_cov,
            latent_mu,
            latent_var,
        },
        natgrad: NatGradStats { lambda, r },
    })
}
