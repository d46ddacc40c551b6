//! The uncollapsed (SVGP) evidence bound of one GP-CDE variable with a latent input, and its full
//! gradient by hand-derived adjoints (MODEL.md §3.1–3.4), in the GPU-friendly algebraic form:
//! α = L⁻ᵀm and Q = L⁻ᵀ(S − I)L⁻¹ turn the predictive means and variances into one GEMM and
//! column dot products, with no per-point triangular solves.
//!
//! This module computes; it owns no parameters. The caller supplies constrained values (kernel,
//! Z, q(v) = N(m, S), φ²) and a minibatch with its q(w) moments and Monte Carlo noise.

use super::kernel::{Kernel, KernelGrad, LatentBlockGrad, LatentObserved};
use super::lane_math::{lane_dot, vectorised};
use super::linalg::{
    cholesky_backward_with_inverse, cholesky_jittered, logdet_from_factor, lower_inverse,
    solve_lower_vec, solve_upper_transposed_vec, transpose_times, CholeskyError, Factor,
    JitterPolicy,
};
use crate::base::pool::{join, split_map};
use nalgebra::{DMatrix, DMatrixView, DVector};
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

/// The T = S·b evaluation points u_t (t = n·S + s, a row's samples adjacent): row n of x with the
/// latent slot set to w_sn.
pub fn evaluation_points(x: &DMatrix<f64>, latent: Option<&LatentBatch>) -> DMatrix<f64> {
    let Some(lat) = latent else {
        return x.clone();
    };
    let (b, samples) = (x.nrows(), lat.eps.nrows());
    let mut u = DMatrix::zeros(samples * b, x.ncols());
    for n in 0..b {
        for s in 0..samples {
            let t = n * samples + s;
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
    crate::base::heartbeat::beat();
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
    /// ([`Kernel::latent_observed`]), the rest fused block by block of rows
    /// ([`predictions_shared`]); falls back to dense without a latent.
    SharedObserved,
}

/// What the predictions at the T evaluation points contribute: the sums of the expected
/// log-likelihood and the K_Zt products the inducing-point algebra needs, and the gradients that
/// flow through K_Zt and k_tt into the kernel, Z and the draws. Computed on the CPU here, or by a
/// device from a [`PredictionRequest`].
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    /// Σ_t [(y_t − mean_t)² + var_t].
    pub misfit: f64,
    /// The products of K_Zt the inducing-point algebra needs.
    pub products: Products,
    /// The kernel's gradient through K_Zt and k_tt.
    pub kernel: KernelGrad,
    /// ∂L̂/∂Z through K_Zt.
    pub z: DMatrix<f64>,
    /// ∂L̂/∂w_sn (S × b), when there is a latent.
    pub draws: Option<DMatrix<f64>>,
}

/// The products of K_Zt with g_mean, y_T and itself, as the inducing-point algebra needs them.
#[derive(Debug, Clone, PartialEq)]
pub enum Products {
    /// ḡ_α = K_Zt g_mean, K_Zt K_Ztᵀ and K_Zt y_T (the CPU's f64 paths).
    Raw {
        g_alpha: DVector<f64>,
        kkt: DMatrix<f64>,
        ky: DVector<f64>,
    },
    /// Whitened by Ã = L⁻¹K_Zt: L⁻¹ḡ_α = Ã g_mean, P = Ã Ãᵀ and L⁻¹K_Zt y_T = Ã y_T. A device in
    /// float32 gives these: P formed as Ã Ãᵀ is positive semi-definite whatever the rounding,
    /// where L⁻¹(K Kᵀ)L⁻ᵀ from a rounded K Kᵀ is not (its error grows with cond(K_ZZ) and turns
    /// q(v)'s natural-gradient step indefinite; MODEL.md §11.3).
    Whitened {
        g_alpha: DVector<f64>,
        p: DMatrix<f64>,
        ky: DVector<f64>,
    },
}

/// The inducing-point quantities the predictions use: α = L⁻ᵀm, Q = L⁻ᵀ(S − I)L⁻¹, and the
/// backward seeds g_mean = c(y − mean)/φ², g_var = −c/(2φ²).
struct Projection<'a> {
    alpha: &'a DVector<f64>,
    q: &'a DMatrix<f64>,
    noise: f64,
    c: f64,
}

/// Everything a device needs to compute [`Predictions`] with a latent input in the whitened form
/// ([`Products::Whitened`]): the kernel, Z, the minibatch, the draws w_sn = μ_n + √Σ_n ε_sn
/// (S × b), L⁻¹, m, S − I, φ² and c = N/(bS). With Ã = L⁻¹K_Zt: mean = Ãᵀm,
/// var_t = k_tt + ã_tᵀ(S − I)ã_t, and K̄_Zt = L⁻ᵀ[m g_meanᵀ + 2 g_var (S − I)Ã] (the same K̄ as
/// α g_meanᵀ + 2 g_var Q K_Zt).
#[derive(Debug, Clone, Copy)]
pub struct PredictionRequest<'a> {
    /// The evaluation's kernel, Z, minibatch, m and φ² ([`SvgpInput`]).
    pub input: SvgpInput<'a>,
    /// `input.latent` itself, unwrapped: the device path needs a latent input.
    pub latent: &'a LatentBatch,
    /// The draws w_sn = μ_n + √Σ_n ε_sn (S × b).
    pub draws: &'a DMatrix<f64>,
    /// L⁻¹, with K_ZZ + εI = LLᵀ.
    pub l_inv: &'a DMatrix<f64>,
    /// S − I (q(v)'s covariance less the prior's).
    pub s_minus_i: &'a DMatrix<f64>,
    /// c = N/(bS), the weight of each draw's term in the minibatch estimate.
    pub c: f64,
}

/// The inducing-point half of one evaluation, before the predictions: K_ZZ + εI = LLᵀ, L⁻¹,
/// α = L⁻ᵀm, S − I, and q(v)'s own factor and S⁻¹. All in f64 on the CPU, whichever device
/// computes the predictions (MODEL.md §11.3: the M × M algebra is where float32 fails). The CPU's
/// own path also forms Q = L⁻ᵀ(S − I)L⁻¹, which the whitened device path does not need.
#[derive(Debug, Clone)]
pub struct InducingStep {
    factor: Factor,
    l_inv: DMatrix<f64>,
    alpha: DVector<f64>,
    s_minus_i: DMatrix<f64>,
    s_factor: Factor,
    s_inv: DMatrix<f64>,
    /// The draws w_sn (S × b), when there is a latent.
    draws: Option<DMatrix<f64>>,
}

/// The factor of K_ZZ and the quantities built on it (the first half of [`InducingStep`]).
type KzzHalf = (Factor, DMatrix<f64>, DVector<f64>, DMatrix<f64>);

/// The relative jitter floor of an evaluation whose predictions a float32 device computes:
/// K_ZZ + εI with ε ≥ 1e-4 · mean diag(K_ZZ) (MODEL.md §11.3, 1). With precisions near their
/// starting 0.01, K_ZZ is nearly singular; the f64 default of 1e-6 leaves L⁻¹ entries near 10³,
/// which float32 products with K_Zt cannot carry. A documented deviation from the f64 bound, a
/// shift of the inducing prior's covariance by at most 1e-4 of its scale.
pub const FLOAT32_RELATIVE_JITTER: f64 = 1e-4;

/// K_ZZ's factor with at least `relative_floor` · mean diag(K_ZZ) of jitter (0 on the CPU).
fn kzz_half(input: &SvgpInput, relative_floor: f64) -> Result<KzzHalf, CholeskyError> {
    let mm = input.z.nrows();
    let gram = input.kernel.gram(input.z);
    let mut policy = input.jitter;
    if relative_floor > 0.0 && mm > 0 {
        policy.initial = policy
            .initial
            .max(relative_floor * gram.trace() / mm as f64);
    }
    let factor = cholesky_jittered(&gram, policy)?;
    let l_inv = lower_inverse(&factor.l);
    let alpha = solve_upper_transposed_vec(&factor.l, input.q_mean);
    let s_minus_i = input.q_cov - DMatrix::<f64>::identity(mm, mm);
    Ok((factor, l_inv, alpha, s_minus_i))
}

/// q(v)'s factor and S⁻¹. S must be positive definite as it stands: jitter here would silently
/// change the KL, so a failure is reported instead (one attempt, no jitter).
fn covariance_half(input: &SvgpInput) -> Result<(Factor, DMatrix<f64>), CholeskyError> {
    let s_factor = cholesky_jittered(input.q_cov, JitterPolicy::exactly(0.0))?;
    let li = lower_inverse(&s_factor.l);
    let s_inv = transpose_times(&li, &li);
    Ok((s_factor, s_inv))
}

impl InducingStep {
    /// The inducing-point half of `input`'s evaluation, on the calling thread, with K_ZZ's jitter
    /// at least `relative_floor` · mean diag(K_ZZ) ([`FLOAT32_RELATIVE_JITTER`] when a float32
    /// device computes the predictions; 0 leaves `input.jitter` as it is).
    pub fn new(input: &SvgpInput, relative_floor: f64) -> Result<Self, CholeskyError> {
        let kzz = kzz_half(input, relative_floor)?;
        let cov = covariance_half(input)?;
        Ok(Self::from_halves(input, kzz, cov))
    }

    fn from_halves(
        input: &SvgpInput,
        (factor, l_inv, alpha, s_minus_i): KzzHalf,
        (s_factor, s_inv): (Factor, DMatrix<f64>),
    ) -> Self {
        InducingStep {
            factor,
            l_inv,
            alpha,
            s_minus_i,
            s_factor,
            s_inv,
            draws: input.latent.map(latent_draws),
        }
    }

    /// What a device needs for the predictions of `input` (`None` without a latent input:
    /// that case stays on the CPU's dense path).
    pub fn request<'a>(&'a self, input: &SvgpInput<'a>) -> Option<PredictionRequest<'a>> {
        let (latent, draws) = (input.latent?, self.draws.as_ref()?);
        Some(PredictionRequest {
            input: *input,
            latent,
            draws,
            l_inv: &self.l_inv,
            s_minus_i: &self.s_minus_i,
            c: scales(input).1,
        })
    }

    /// The bound, its gradient and the natural-gradient statistics from this step and the
    /// predictions `pred` (the second half of every evaluation).
    pub fn finish(self, input: &SvgpInput, pred: Predictions) -> SvgpOutput {
        finish(input, self, pred)
    }
}

/// The minibatch scale N/b and c = N/(bS).
fn scales(input: &SvgpInput) -> (f64, f64) {
    let samples = input.latent.map_or(1, |l| l.eps.nrows());
    let scale = input.total_rows as f64 / input.x.nrows() as f64;
    (scale, scale / samples as f64)
}

fn evaluate(input: &SvgpInput, path: KernelPath) -> Result<SvgpOutput, CholeskyError> {
    let SvgpInput {
        kernel,
        z,
        noise,
        x,
        y,
        latent,
        ..
    } = *input;
    let c = scales(input).1;
    let w = latent.map(latent_draws);
    // The inducing-point algebra and, beside it (on another thread of the caller's pool), what
    // does not depend on it: q(v)'s own factor and inverse, and the fast path's observed part.
    let (kzz, side) = join(
        || {
            kzz_half(input, 0.0).map(|half| {
                // Q = L⁻ᵀ(S − I)L⁻¹, the CPU path's form of q(v) in K_Zt's coordinates.
                let q = transpose_times(&half.1, &half.3) * &half.1;
                (half, q)
            })
        },
        || -> Result<_, CholeskyError> {
            let cov = covariance_half(input)?;
            let observed = match (path, latent, &w) {
                (KernelPath::SharedObserved, Some(lat), Some(w)) => {
                    Some(kernel.latent_observed(z, x, lat.slot, w))
                }
                _ => None,
            };
            Ok((cov, observed))
        },
    );
    let (cov, observed) = side?;
    let (kzz, q) = kzz?;
    let step = InducingStep::from_halves(input, kzz, cov);

    // Predictions at the T evaluation points and their adjoints.
    let proj = Projection {
        alpha: &step.alpha,
        q: &q,
        noise,
        c,
    };
    let pred = match (&observed, latent, &w) {
        (Some(obs), Some(lat), Some(w)) => predictions_shared(kernel, obs, x, y, lat, w, &proj),
        _ => predictions_dense(kernel, z, x, y, latent, &proj),
    };
    Ok(finish(input, step, pred))
}

/// The second half of an evaluation: the bound's terms and every gradient from the inducing step
/// and the predictions.
fn finish(input: &SvgpInput, step: InducingStep, pred: Predictions) -> SvgpOutput {
    let SvgpInput {
        kernel,
        z,
        q_mean: m,
        q_cov: s_cov,
        noise,
        x,
        latent,
        ..
    } = *input;
    let mm = z.nrows();
    let b = x.nrows();
    let samples = latent.map_or(1, |l| l.eps.nrows());
    let t_count = samples * b;
    let (scale, c) = scales(input);
    let l = &step.factor.l;
    let expected_log_lik =
        c * (-0.5 * t_count as f64 * (2.0 * PI * noise).ln() - pred.misfit / (2.0 * noise));
    let kl_latent = latent.map_or(0.0, |lat| {
        scale
            * (0..b)
                .map(|n| kl_standard_normal(lat.mu[n], lat.var[n]))
                .sum::<f64>()
    });
    let kl_inducing =
        0.5 * (s_cov.trace() + m.dot(m) - mm as f64 - logdet_from_factor(&step.s_factor.l));
    let elbo = expected_log_lik - kl_latent - kl_inducing;

    // ∂/∂φ² of c Σ_t [−½ log(2πφ²) − misfit_t/(2φ²)].
    let d_noise = c * (-0.5 * t_count as f64 / noise + pred.misfit / (2.0 * noise * noise));
    let g_var = -c / (2.0 * noise);

    // P = L⁻¹ K_Zt K_Ztᵀ L⁻ᵀ serves the gradient in S and the natural-gradient statistics, with
    // L⁻¹ḡ_α and L⁻¹K_Zt y.
    let (l_inv_g_alpha, p_mat, l_inv_ky) = match pred.products {
        Products::Raw { g_alpha, kkt, ky } => (
            solve_lower_vec(l, &g_alpha),
            &step.l_inv * &kkt * step.l_inv.transpose(),
            solve_lower_vec(l, &ky),
        ),
        Products::Whitened { g_alpha, p, ky } => (g_alpha, p, ky),
    };

    // Two independent chains, on two threads of the caller's pool: through K_ZZ to the kernel and
    // Z, and the rest.
    let (through_kzz, rest) = join(
        || {
            // Back to L (through α and Q = L⁻ᵀ(S − I)L⁻¹ with Ḡ_Q = g_var K_Zt K_Ztᵀ), then K_ZZ:
            // L̄ = tril(−α (L⁻¹ḡ_α)ᵀ − 2 Q Ḡ_Q L⁻ᵀ), and Q Ḡ_Q L⁻ᵀ = g_var L⁻ᵀ(S − I) P.
            let l_bar = -(&step.alpha * l_inv_g_alpha.transpose())
                - transpose_times(&step.l_inv, &(&step.s_minus_i * &p_mat)) * (2.0 * g_var);
            let kzz_bar = cholesky_backward_with_inverse(l, &step.l_inv, &l_bar);
            // Through the kernel's Gram matrix.
            let (mut k_grad, mut d_z) = kernel.gram_backward(z, &kzz_bar);
            k_grad.add_assign(&pred.kernel);
            d_z += &pred.z;
            // q(v): α = L⁻ᵀm ⇒ ∂/∂m = L⁻¹ḡ_α, minus the KL's m.
            (k_grad, d_z, &l_inv_g_alpha - m)
        },
        || {
            // Q = L⁻ᵀ S L⁻¹ + const ⇒ ∂/∂S = L⁻¹ Ḡ_Q L⁻ᵀ = g_var P; minus the KL.
            let d_q_cov = &p_mat * g_var - (DMatrix::identity(mm, mm) - &step.s_inv) * 0.5;
            // The draws → q(w) by reparameterisation (∂w/∂μ = 1, ∂w/∂Σ = ε/(2√Σ)), plus the KL
            // of q(w).
            let (latent_mu, latent_var) = match (latent, &pred.draws) {
                (Some(lat), Some(d_w)) => latent_gradient(lat, d_w, scale),
                _ => (DVector::zeros(0), DVector::zeros(0)),
            };
            // Natural-gradient statistics: Λ = (c/φ²) P, r = (c/φ²) L⁻¹ K_Zt y.
            let lambda = &p_mat * (c / noise);
            let r = &l_inv_ky * (c / noise);
            (d_q_cov, latent_mu, latent_var, lambda, r)
        },
    );
    let (k_grad, d_z, d_q_mean) = through_kzz;
    let (d_q_cov, latent_mu, latent_var, lambda, r) = rest;

    SvgpOutput {
        terms: SvgpTerms {
            expected_log_lik,
            kl_latent,
            kl_inducing,
            elbo,
            jitter: step.factor.jitter,
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
    }
}

/// What a device that holds q(v), Z, the hyperparameters and its M × M algebra returns for one
/// evaluation (issue 34: `backend::gpu::Gpu::resident_evaluations`): the predictions' misfit, the
/// squared norm of the gradient of Z (and of q(w)'s encoder when it runs it), q(w)'s part, K_ZZ's
/// jitter and KL(q(v) ‖ N(0, I)). The kernel's and φ²'s gradients stay there with their step.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldPredictions {
    /// Σ_t [(y_t − mean_t)² + var_t].
    pub misfit: f64,
    /// ‖∂L̂/∂Z‖² + ‖∂L̂/∂encoder‖² (the latter when the device runs the encoder): finite exactly
    /// when those gradients are.
    pub held_norm: f64,
    pub latent: HeldLatent,
    pub jitter: f64,
    pub kl_inducing: f64,
}

/// q(w)'s part of a held evaluation.
#[derive(Debug, Clone, PartialEq)]
pub enum HeldLatent {
    /// The host holds q(w) (free per-row latents, or an encoder it runs): Σ_s ∂L̂/∂w_sn and
    /// Σ_s ∂L̂/∂w_sn ε_sn/(2√Σ_n) (b each), ∂L̂/∂μ_n and ∂L̂/∂Σ_n through the predictions, before
    /// KL(q(w_n)).
    Sums {
        d_mu: DVector<f64>,
        d_var: DVector<f64>,
    },
    /// The device ran q(w)'s encoder and took its Adam step beside Z's: Σ_n KL(q(w_n) ‖ N(0, 1))
    /// of the moments it formed.
    Encoded { kl: f64 },
}

/// The bound and the gradients the host's optimiser uses (not q(v)'s, Z's, the kernel's nor
/// φ²'s: their steps were taken where they are held) of an evaluation whose q(v) and Z a device
/// holds.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct HeldOutput {
    pub terms: SvgpTerms,
    /// ‖∂L̂/∂Z‖² (+ ‖∂L̂/∂encoder‖² when the device runs the encoder).
    pub held_norm: f64,
    pub noise: f64,
    /// q(w)'s gradients (b each) when the host holds q(w); empty when the device does.
    pub latent_mu: DVector<f64>,
    pub latent_var: DVector<f64>,
}

/// The bound and gradients of `input` (its q(v) fields unused) from what the device holding q(v)
/// computed: with c = N/(bS) and T = S·b,
///   L̂ = c[−½T log(2πφ²) − misfit/(2φ²)] − (N/b) Σ_n KL(q(w_n)) − KL(q(v)),
///   ∂L̂/∂φ² = c[−½T/φ² + misfit/(2φ⁴)],
/// and, when the host holds q(w), ∂L̂/∂μ_n, ∂L̂/∂Σ_n from the device's sums over the draws with
/// KL(q(w_n))'s gradient, as [`bound_and_gradient`] finishes them (Σ_n KL(q(w_n)) from `input`'s
/// moments; from the device's when it ran the encoder).
///
/// Panics if `input` has no latent input (a device holding q(v) is asked only with one).
pub fn finish_held(input: &SvgpInput, held: HeldPredictions) -> HeldOutput {
    let lat = input.latent.expect("a held evaluation has a latent input");
    let (samples, b) = lat.eps.shape();
    let t_count = samples * b;
    let (scale, c) = scales(input);
    let noise = input.noise;
    let expected_log_lik =
        c * (-0.5 * t_count as f64 * (2.0 * PI * noise).ln() - held.misfit / (2.0 * noise));
    let d_noise = c * (-0.5 * t_count as f64 / noise + held.misfit / (2.0 * noise * noise));
    let (kl_sum, latent_mu, latent_var) = match held.latent {
        HeldLatent::Sums { d_mu, d_var } => {
            let kl = (0..b)
                .map(|n| kl_standard_normal(lat.mu[n], lat.var[n]))
                .sum::<f64>();
            let (d_mu, d_var) = with_latent_kl(lat, scale, d_mu, d_var);
            (kl, d_mu, d_var)
        }
        HeldLatent::Encoded { kl } => (kl, DVector::zeros(0), DVector::zeros(0)),
    };
    let kl_latent = scale * kl_sum;
    HeldOutput {
        terms: SvgpTerms {
            expected_log_lik,
            kl_latent,
            kl_inducing: held.kl_inducing,
            elbo: expected_log_lik - kl_latent - held.kl_inducing,
            jitter: held.jitter,
        },
        held_norm: held.held_norm,
        noise: d_noise,
        latent_mu,
        latent_var,
    }
}

/// ∂L̂/∂μ_n and ∂L̂/∂Σ_n from the draws' gradient ∂L̂/∂w_sn (S × b) by reparameterisation
/// (∂w/∂μ = 1, ∂w/∂Σ = ε/(2√Σ)), minus (N/b) times the gradient of KL(q(w_n) ‖ N(0, 1)).
fn latent_gradient(
    lat: &LatentBatch,
    d_w: &DMatrix<f64>,
    scale: f64,
) -> (DVector<f64>, DVector<f64>) {
    let (samples, b) = d_w.shape();
    let mut d_mu = DVector::zeros(b);
    let mut d_var = DVector::zeros(b);
    for n in 0..b {
        for s in 0..samples {
            let dw = d_w[(s, n)];
            d_mu[n] += dw;
            d_var[n] += dw * lat.eps[(s, n)] / (2.0 * lat.var[n].sqrt());
        }
    }
    with_latent_kl(lat, scale, d_mu, d_var)
}

/// The q(w) gradients through the predictions, `d_mu` = Σ_s ∂L̂/∂w_sn and `d_var` =
/// Σ_s ∂L̂/∂w_sn ε_sn/(2√Σ_n), minus (N/b) times KL(q(w_n) ‖ N(0, 1))'s gradient:
/// ∂KL/∂μ_n = μ_n, ∂KL/∂Σ_n = ½(1 − 1/Σ_n).
fn with_latent_kl(
    lat: &LatentBatch,
    scale: f64,
    mut d_mu: DVector<f64>,
    mut d_var: DVector<f64>,
) -> (DVector<f64>, DVector<f64>) {
    for n in 0..d_mu.len() {
        d_mu[n] -= scale * lat.mu[n];
        d_var[n] -= scale * 0.5 * (1.0 - 1.0 / lat.var[n]);
    }
    (d_mu, d_var)
}

/// The dense reference: K_Zt formed point by point, one matrix product per step:
/// mean = K_Ztᵀα, var_t = k_tt + k_tᵀQk_t, K̄_Zt = α g_meanᵀ + 2 g_var Q K_Zt, k̄_tt = g_var.
fn predictions_dense(
    kernel: &Kernel,
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    latent: Option<&LatentBatch>,
    proj: &Projection,
) -> Predictions {
    let samples = latent.map_or(1, |l| l.eps.nrows());
    let t_count = samples * x.nrows();
    let u = evaluation_points(x, latent);
    let k_zt = kernel.cross(z, &u);
    let k_tt = kernel.diag(&u);
    let qk = proj.q * &k_zt;
    let mean = k_zt.transpose() * proj.alpha;
    let y_t = DVector::from_fn(t_count, |t, _| y[t / samples]);
    let residual = &y_t - &mean;
    let misfit: f64 = (0..t_count)
        .map(|t| residual[t] * residual[t] + k_tt[t] + k_zt.column(t).dot(&qk.column(t)))
        .sum();
    let g_mean = residual.scale(proj.c / proj.noise);
    let g_var = -proj.c / (2.0 * proj.noise);
    let mut k_zt_bar = proj.alpha * g_mean.transpose();
    k_zt_bar += &qk * (2.0 * g_var);
    let k_tt_bar = DVector::from_element(t_count, g_var);

    let (mut k_grad, d_z, d_u) = kernel.cross_backward(z, &u, &k_zt_bar);
    let (g_diag, d_u_diag) = kernel.diag_backward(&u, &k_tt_bar);
    k_grad.add_assign(&g_diag);
    let draws = latent.map(|lat| {
        DMatrix::from_fn(samples, x.nrows(), |s, n| {
            let t = n * samples + s;
            d_u[(t, lat.slot)] + d_u_diag[(t, lat.slot)]
        })
    });
    Predictions {
        misfit,
        products: Products::Raw {
            g_alpha: &k_zt * &g_mean,
            kkt: &k_zt * k_zt.transpose(),
            ky: &k_zt * &y_t,
        },
        kernel: k_grad,
        z: d_z,
        draws,
    }
}

/// The fast path with a latent input, fused block by block of minibatch rows (spread over the
/// caller's pool, partial sums combined in block order): K_Zt for the block's columns by
/// [`Kernel::latent_block`], QK = Q K_Zt by one GEMM, mean, var and the misfit, K̄_Zt overwriting
/// QK in place, the block's share of ḡ_α, K_Zt y and K_Zt K_Ztᵀ, then the kernel's backward pass
/// for the block. No M × T matrix is ever whole: each block's fit in cache. The same quantities as
/// [`predictions_dense`] (tested).
fn predictions_shared(
    kernel: &Kernel,
    obs: &LatentObserved,
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    lat: &LatentBatch,
    w: &DMatrix<f64>,
    proj: &Projection,
) -> Predictions {
    let (mm, b, samples) = (proj.q.nrows(), x.nrows(), lat.eps.nrows());
    let g_var = -proj.c / (2.0 * proj.noise);

    let blocks = split_map(obs.block_starts(), |(n0, rows)| {
        let block = kernel.latent_block(obs, n0, rows);
        let k = &block.k;
        let cols = k.ncols();
        // The block's evaluation points, for k_tt and its gradient.
        let u = DMatrix::from_fn(cols, x.ncols(), |j, d| {
            let n = n0 + j / samples;
            if d == lat.slot {
                w[(j % samples, n)]
            } else {
                x[(n, d)]
            }
        });
        let k_tt = kernel.diag(&u);
        let mut qk = DMatrix::<f64>::zeros(mm, cols);
        qk.gemm(1.0, proj.q, k, 0.0);
        let y_cols: Vec<f64> = (0..cols).map(|j| y[n0 + j / samples]).collect();
        let mut g_alpha = DVector::zeros(mm);
        let mut ky = DVector::zeros(mm);
        // K̄ overwrites QK.
        let misfit = column_pass(
            k.as_slice(),
            qk.as_mut_slice(),
            proj.alpha.as_slice(),
            k_tt.as_slice(),
            &y_cols,
            (proj.c / proj.noise, g_var),
            g_alpha.as_mut_slice(),
            ky.as_mut_slice(),
        );
        let k_bar = qk;
        let mut grad = kernel.latent_block_backward(obs, &block, &k_bar);
        let (g_diag, d_u) = kernel.diag_backward(&u, &DVector::from_element(cols, g_var));
        grad.kernel.add_assign(&g_diag);
        for j in 0..cols {
            grad.draws[(j % samples, j / samples)] += d_u[(j, lat.slot)];
        }
        BlockShare {
            misfit,
            g_alpha,
            ky,
            kkt: symmetric_outer(k),
            grad,
        }
    });

    let mut misfit = 0.0;
    let mut g_alpha = DVector::zeros(mm);
    let mut kkt = DMatrix::zeros(mm, mm);
    let mut ky = DVector::zeros(mm);
    let mut kernel_grad = kernel.new_zeroed_grad();
    let mut z_grad = DMatrix::zeros(mm, x.ncols());
    let mut draws = DMatrix::zeros(samples, b);
    let mut n0 = 0;
    for share in &blocks {
        misfit += share.misfit;
        g_alpha += &share.g_alpha;
        ky += &share.ky;
        kkt += &share.kkt;
        kernel_grad.add_assign(&share.grad.kernel);
        z_grad += &share.grad.z;
        let rows = share.grad.draws.ncols();
        draws.columns_mut(n0, rows).copy_from(&share.grad.draws);
        n0 += rows;
    }
    Predictions {
        misfit,
        products: Products::Raw { g_alpha, kkt, ky },
        kernel: kernel_grad,
        z: z_grad,
        draws: Some(draws),
    }
}

vectorised! {
/// The per-column algebra of one block (M × cols, column-major), one pass over each column:
/// mean_t = k_tᵀα, var_t = k_tt + k_tᵀ(QK)_t, misfit += (y_t − mean_t)² + var_t and
/// g_mean_t = c(y_t − mean_t)/φ²; then (QK)_t is overwritten by K̄_t = α g_mean_t + 2 g_var (QK)_t,
/// ḡ_α += k_t g_mean_t and K y += k_t y_t. `seeds` = (c/φ², g_var). Returns the block's misfit.
#[allow(clippy::too_many_arguments)]
fn column_pass(
    k: &[f64],
    qk: &mut [f64],
    alpha: &[f64],
    k_tt: &[f64],
    y_cols: &[f64],
    (c_over_noise, g_var): (f64, f64),
    g_alpha: &mut [f64],
    ky: &mut [f64],
) -> f64 {
    let m = alpha.len();
    let mut misfit = 0.0;
    if m == 0 {
        // No inducing points: mean 0, var k_tt.
        return y_cols.iter().zip(k_tt).map(|(y, v)| y * y + v).sum();
    }
    let (g_alpha, ky) = (&mut g_alpha[..m], &mut ky[..m]);
    for (((kc, qc), &ktt), &yt) in k
        .chunks_exact(m)
        .zip(qk.chunks_exact_mut(m))
        .zip(k_tt)
        .zip(y_cols)
    {
        let residual = yt - lane_dot(kc, alpha);
        misfit += residual * residual + ktt + lane_dot(kc, qc);
        let gm = residual * c_over_noise;
        for i in 0..m {
            qc[i] = alpha[i] * gm + 2.0 * g_var * qc[i];
            g_alpha[i] += kc[i] * gm;
            ky[i] += kc[i] * yt;
        }
    }
    misfit
}
}

/// One block's contributions to [`Predictions`].
struct BlockShare {
    misfit: f64,
    g_alpha: DVector<f64>,
    ky: DVector<f64>,
    kkt: DMatrix<f64>,
    grad: LatentBlockGrad,
}

/// Rows per block row of [`symmetric_outer`] for M rows (a function of M only, so the split never
/// depends on threads): up to M = 128, two block rows (a quarter of the products saved, the GEMMs
/// still large enough to run at speed); beyond, blocks of 64 rows.
fn outer_block_rows(mm: usize) -> usize {
    if mm <= 128 {
        mm.div_ceil(2).next_multiple_of(8).max(8)
    } else {
        64
    }
}

/// A Aᵀ for a wide A (M × T) from its lower block triangle: block row i is A_i A_{0..=i}ᵀ, one
/// GEMM each (spread over the caller's pool), then mirrored, so about half the products of the
/// full one. Exactly symmetric.
fn symmetric_outer(a: &DMatrix<f64>) -> DMatrix<f64> {
    let mm = a.nrows();
    let block_rows = outer_block_rows(mm);
    let starts: Vec<usize> = (0..mm).step_by(block_rows).collect();
    let t = a.ncols();
    let blocks = split_map(starts.clone(), |i0| {
        let rows = block_rows.min(mm - i0);
        // A_{0..i0+rows}ᵀ as a strided view of A's own storage (no transposed copy):
        // element (t, r) = A[r, t] = data[r + t·M]. It must stay the second operand: nalgebra's
        // small-size fallback mishandles a strided first operand (see `linalg::transpose_times`).
        let lhs_t = DMatrixView::from_slice_with_strides(a.as_slice(), t, i0 + rows, mm, 1);
        let mut blk = DMatrix::zeros(rows, i0 + rows);
        blk.gemm(1.0, &a.rows(i0, rows), &lhs_t, 0.0);
        blk
    });
    let mut out = DMatrix::zeros(mm, mm);
    for (&i0, blk) in starts.iter().zip(&blocks) {
        for j in 0..blk.ncols() {
            for r in 0..blk.nrows() {
                let i = i0 + r;
                if j <= i {
                    out[(i, j)] = blk[(r, j)];
                    out[(j, i)] = blk[(r, j)];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the plain product, for shapes on both sides of nalgebra's small-size fallback
    /// (any side ≤ 5) and of one block row.
    #[test]
    fn symmetric_outer_equals_the_plain_product() {
        for (m, t) in [(1, 1), (3, 7), (7, 3), (5, 40), (70, 9), (130, 20)] {
            let a = DMatrix::from_fn(m, t, |i, j| ((i * 7 + j * 3) % 11) as f64 * 0.1 - 0.5);
            let got = symmetric_outer(&a);
            let want = &a * a.transpose();
            assert!((&got - &want).amax() <= 1e-12, "{m} × {t}");
            assert_eq!(got, got.transpose(), "exactly symmetric");
        }
    }
}
