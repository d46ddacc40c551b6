//! Psi-statistics of the SE-ARD + linear-ARD kernel with one Gaussian latent input (MODEL.md §4.2)
//! and their reverse mode.
//!
//! Inputs are u = [x_O, w]: the |O| observed coordinates are known exactly, the last one is the
//! latent w_n ~ q(w_n) = N(μ_n, s_n). With θ the SE precisions, sf2 the SE variance, v the linear
//! variances (θ_w, v_w the latent ones), a_n = 1 + θ_w² s_n, b_n = 1 + 2θ_w² s_n and
//! e_nm = exp(−½ Σ_{d∈O} θ_d² (x_nd − z_md)²):
//!
//! ```text
//! ψ0          = Σ_n [ sf2 + Σ_{d∈O} v_d x_nd² + v_w (μ_n² + s_n) ]
//! Ψ1_se(n,m)  = sf2 e_nm a_n^{-1/2} exp(−θ_w² (μ_n − z_mw)² / (2 a_n))
//! Ψ1_lin(n,m) = Σ_{d∈O} v_d x_nd z_md + v_w μ_n z_mw
//! ψ2_se(n,m,m') = sf2² e_nm e_nm' b_n^{-1/2} exp(−θ_w² (z_mw − z_m'w)²/4 − θ_w² (μ_n − z̄)² / b_n),
//!                 z̄ = (z_mw + z_m'w)/2
//! ψ2_lin(n,m,m') = Ψ1_lin(n,m) Ψ1_lin(n,m') + v_w² s_n z_mw z_m'w
//! C(n,m,m')   = Ψ1_se(n,m) [ Σ_{d∈O} v_d x_nd z_m'd + v_w z_m'w (μ_n + θ_w² s_n z_mw)/a_n ]
//! Ψ1 = Ψ1_se + Ψ1_lin,   Ψ2 = Σ_n [ ψ2_se + ψ2_lin + C + Cᵀ ]
//! ```
//!
//! Summed over n, ψ2_lin and C are matrix products (Ψ1_linᵀ Ψ1_lin, Ψ1_seᵀ G, ...); only ψ2_se needs
//! the O(N M²) loop, which runs over the packed lower triangle, pair by pair and over the rows
//! inside, with all exponents ≤ 0 (no overflow for any parameter values).
//!
//! Without a latent the inputs are x alone and the statistics are plain kernel values for any
//! [`Kernel`]: ψ0 = Σ_n k(x_n, x_n), Ψ1 = K_xZ, Ψ2 = K_Zx K_xZ.

mod terms;

pub use terms::Psi2Factors;
use terms::*;

use nalgebra::{DMatrix, DVector};

use super::CollapsedError;
use crate::gp::device::DeviceError;
use crate::gp::kernel::{Kernel, KernelGrad, StationaryKind};
use crate::gp::lane_math::{exp_with, lane_total, vectorised, LANES};
use crate::gp::linalg::transpose_times;

/// q(w_n) = N(mean_n, variance_n), one entry per data row.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LatentPosterior {
    pub mean: DVector<f64>,
    pub variance: DVector<f64>,
}

/// ψ0 (a scalar, summed over rows), Ψ1 (N × M) and Ψ2 (M × M, summed over rows).
#[derive(Debug, Clone, PartialEq)]
pub struct PsiStatistics {
    pub psi0: f64,
    pub psi1: DMatrix<f64>,
    pub psi2: DMatrix<f64>,
}

/// Gradients of a scalar F through the psi-statistics: with respect to the kernel's
/// hyperparameters, the inducing inputs Z (M × D) and q(w) (empty vectors without a latent).
#[derive(Debug, Clone, PartialEq)]
pub struct PsiGrad {
    pub kernel: KernelGrad,
    pub z: DMatrix<f64>,
    pub mean: DVector<f64>,
    pub variance: DVector<f64>,
}

/// The psi-statistics of `kernel` for data inputs `x` (N × |O|; |O| may be 0), inducing inputs
/// `z` (M × D) and, if given, the latent posterior (then D = |O| + 1, the latent last, and the
/// kernel must be SE + linear); see the module documentation for the formulas.
pub fn psi_statistics(
    kernel: &Kernel,
    x: &DMatrix<f64>,
    z: &DMatrix<f64>,
    latent: Option<&LatentPosterior>,
) -> Result<PsiStatistics, CollapsedError> {
    match latent {
        None => {
            check_plain(kernel, x, z)?;
            Ok(plain_forward(kernel, x, z))
        }
        Some(q) => {
            let p = SeLinear::new(kernel, x, z, q)?;
            Ok(p.forward()?.0)
        }
    }
}

fn check_plain(kernel: &Kernel, x: &DMatrix<f64>, z: &DMatrix<f64>) -> Result<(), CollapsedError> {
    if x.ncols() != kernel.dim() || z.ncols() != kernel.dim() {
        return Err(CollapsedError::Shape(format!(
            "without a latent, x ({} columns) and Z ({} columns) must have the kernel's {} dimensions",
            x.ncols(),
            z.ncols(),
            kernel.dim()
        )));
    }
    Ok(())
}

/// ψ0 = Σ_n k(x_n, x_n), Ψ1 = K(x, Z), Ψ2 = Ψ1ᵀ Ψ1.
pub(super) fn plain_forward(kernel: &Kernel, x: &DMatrix<f64>, z: &DMatrix<f64>) -> PsiStatistics {
    let psi1 = kernel.cross(x, z);
    let psi2 = transpose_times(&psi1, &psi1);
    PsiStatistics {
        psi0: kernel.diag(x).sum(),
        psi1,
        psi2,
    }
}

/// Adjoint of [`plain_forward`] with a symmetric W = ∂F/∂Ψ2: ∂F/∂Ψ1 = G1 + 2 Ψ1 W, then the
/// kernel's own adjoints of K(x, Z) and diag K(x, x).
pub(super) fn plain_backward(
    kernel: &Kernel,
    x: &DMatrix<f64>,
    z: &DMatrix<f64>,
    psi1: &DMatrix<f64>,
    d_psi0: f64,
    d_psi1: &DMatrix<f64>,
    w: &DMatrix<f64>,
) -> PsiGrad {
    let bar = d_psi1 + psi1 * w * 2.0;
    let (mut grad, _, dz) = kernel.cross_backward(x, z, &bar);
    let (gdiag, _) = kernel.diag_backward(x, &DVector::from_element(x.nrows(), d_psi0));
    grad.add_assign(&gdiag);
    PsiGrad {
        kernel: grad,
        z: dz,
        mean: DVector::zeros(0),
        variance: DVector::zeros(0),
    }
}

/// A device that computes the O(N M²) sums of Ψ2's squared-exponential part from the per-row
/// [`Psi2Factors`] (the GPU backend; without one they run here, in f64, row by row). With
/// p(n, i, j) = pref_n exp(B_ni + B_nj − h_n Δ²_ij), Δ²_ij = (z_iw − z_jw)²:
pub trait Psi2Device: Sync {
    /// (Σ_n p(n, ·, ·), Σ_n h_n p(n, ·, ·)), both M × M and symmetric.
    fn pair_sums(&self, factors: &Psi2Factors)
        -> Result<(DMatrix<f64>, DMatrix<f64>), DeviceError>;

    /// (Σ_j W_ij p(n, i, j), Σ_j W_ij p(n, i, j) Δ²_ij), both N × M, for a symmetric W.
    fn row_sums(
        &self,
        factors: &Psi2Factors,
        w: &DMatrix<f64>,
    ) -> Result<(DMatrix<f64>, DMatrix<f64>), DeviceError>;
}

/// The SE + linear kernel on [x_O, w] unpacked into effective (masked) values.
pub(super) struct SeLinear<'a> {
    /// Where Ψ2's O(N M²) sums run (here when `None`).
    device: Option<&'a dyn Psi2Device>,
    kernel: &'a Kernel,
    x: &'a DMatrix<f64>,
    z: &'a DMatrix<f64>,
    mu: &'a DVector<f64>,
    s: &'a DVector<f64>,
    sf2: f64,
    /// θ̃_d = E_d θ_d for the observed dimensions, then the latent θ̃_w last.
    theta: Vec<f64>,
    /// ṽ_d = E_d v_d, latent last.
    v: Vec<f64>,
}

/// Forward quantities the backward pass reuses.
pub(super) struct LatentCache {
    /// What the reverse pass of Ψ2's SE part needs from the forward pass.
    se2: Se2Forward,
    /// Ψ1_se / sf2.
    u1: DMatrix<f64>,
    /// Σ_{d∈O} v_d x_nd z_md.
    lin_o: DMatrix<f64>,
    /// Ψ1_lin.
    psi1_lin: DMatrix<f64>,
}

/// Σ_n ψ2_se(n, ·, ·) / sf2², by the packed lower triangle, in the factored form
/// ψ2_se/sf2² = b_n^{-1/2} exp(B_nm + B_nm' − h_n (z_mw − z_m'w)²) with
/// B_nm = le_nm − (c_n/2)(μ_n − z_mw)², c_n = θ_w²/b_n, h_n = (θ_w² − c_n)/4 ≥ 0
/// (the same exponent as the module formula, rearranged so that every term is ≤ 0). The loop
/// runs pair by pair over the rows (B is column-major), so its inner loop is N long and
/// contiguous: it was row by row over the packed triangle, whose inner loops were too short to
/// keep the vector units busy (BENCHMARKS.md, issue 33). Also returns the terms themselves
/// (pair-major, N per pair) when they fit in [`MAX_CACHED_TERMS`], so that the reverse pass
/// needs no exponential of its own.
fn psi2_se_unit(factors: &Psi2Factors) -> (DMatrix<f64>, Option<Vec<f64>>) {
    let (n, m) = factors.b.shape();
    let pairs = PairTable::new(factors.zw.as_slice());
    let (h, pref) = (factors.h.as_slice(), factors.pref.as_slice());
    let b = factors.b.as_slice();
    let keep = n * pairs.len() <= MAX_CACHED_TERMS;
    let mut terms = vec![0.0; if keep { n * pairs.len() } else { n }];
    let mut acc = Vec::with_capacity(pairs.len());
    for i in 0..m {
        let bi = &b[i * n..(i + 1) * n];
        for j in 0..=i {
            let p = acc.len();
            let (bj, d2) = (&b[j * n..(j + 1) * n], pairs.dz2[p]);
            let out = if keep {
                &mut terms[p * n..(p + 1) * n]
            } else {
                &mut terms[..]
            };
            psi2_pair_terms((bi, bj), (h, pref), d2, out);
            acc.push(lane_sum(out));
        }
    }
    (pairs.unpack(&acc), keep.then_some(terms))
}

/// The most ψ2 terms (N × M(M+1)/2) the forward pass keeps for the reverse pass: 4 Mi floats
/// (32 MiB), far above the presets' sizes (200 × 210), so only very large fits recompute them.
const MAX_CACHED_TERMS: usize = 1 << 22;

/// The forward pass's share of Ψ2's SE part that its reverse pass reuses.
enum Se2Forward {
    /// Computed here: the factors, and the terms when they were kept.
    Host {
        factors: Psi2Factors,
        terms: Option<Vec<f64>>,
    },
    /// Computed on a device: the factors and Σ_n h_n p (the adjoint of h needs it).
    Device {
        factors: Psi2Factors,
        h_sums: DMatrix<f64>,
    },
}

impl<'a> SeLinear<'a> {
    /// Checks shapes and the kernel's form (one SE part, a linear part).
    pub(super) fn new(
        kernel: &'a Kernel,
        x: &'a DMatrix<f64>,
        z: &'a DMatrix<f64>,
        q: &'a LatentPosterior,
    ) -> Result<Self, CollapsedError> {
        let (Some(lin), [se]) = (&kernel.linear, kernel.stationary.as_slice()) else {
            return Err(CollapsedError::UnsupportedKernel(
                "psi-statistics with a latent input need exactly one squared-exponential part plus a linear part".into(),
            ));
        };
        if se.kind != StationaryKind::SquaredExponential {
            return Err(CollapsedError::UnsupportedKernel(format!(
                "psi-statistics are closed-form only for the squared exponential, not {:?}",
                se.kind
            )));
        }
        let dim = x.ncols() + 1;
        if kernel.dim() != dim || z.ncols() != dim || lin.len() != dim || se.precision.len() != dim
        {
            return Err(CollapsedError::Shape(format!(
                "with a latent, the kernel (mask {}, linear {}, precisions {}) and Z ({}) need \
                 |O| + 1 = {dim} dimensions",
                kernel.dim(),
                lin.len(),
                se.precision.len(),
                z.ncols()
            )));
        }
        if q.mean.len() != x.nrows() || q.variance.len() != x.nrows() {
            return Err(CollapsedError::Shape(format!(
                "q(w) has {} means and {} variances for {} rows",
                q.mean.len(),
                q.variance.len(),
                x.nrows()
            )));
        }
        let masked =
            |t: &[f64]| -> Vec<f64> { t.iter().zip(&kernel.mask).map(|(a, e)| a * e).collect() };
        Ok(Self {
            device: None,
            kernel,
            x,
            z,
            mu: &q.mean,
            s: &q.variance,
            sf2: se.variance,
            theta: masked(&se.precision),
            v: masked(lin),
        })
    }

    fn obs(&self) -> usize {
        self.x.ncols()
    }

    /// The same, with Ψ2's O(N M²) sums on `device` when one is given.
    pub(super) fn on(self, device: Option<&'a dyn Psi2Device>) -> Self {
        Self { device, ..self }
    }

    /// The factors of Σ_n ψ2_se/sf2² ([`Psi2Factors`]) from le.
    fn factors(&self, le: &DMatrix<f64>) -> Psi2Factors {
        let (n, o) = (self.x.nrows(), self.obs());
        let tw2 = self.theta[o] * self.theta[o];
        let zw = self.z.column(o).into_owned();
        let rows: Vec<RowLatent> = (0..n).map(|k| RowLatent::new(tw2, self.s[k])).collect();
        let half_c: Vec<f64> = rows.iter().map(|lat| 0.5 * lat.c).collect();
        // B column by column (contiguous over the rows, like le).
        let mut b = le.clone();
        // Over raw column slices: nalgebra's element iterators do not vectorise.
        let mu = self.mu.as_slice();
        for (col, &z) in b.as_mut_slice().chunks_exact_mut(n.max(1)).zip(zw.iter()) {
            col.iter_mut()
                .zip(mu)
                .zip(&half_c)
                .for_each(|((bv, &mu), &hc)| *bv -= hc * (mu - z) * (mu - z));
        }
        let h = DVector::from_iterator(n, rows.iter().map(|lat| lat.h));
        let pref = DVector::from_iterator(n, rows.iter().map(|lat| lat.pref));
        Psi2Factors { b, h, pref, zw }
    }

    /// The statistics and the cache for [`SeLinear::backward`].
    pub(super) fn forward(&self) -> Result<(PsiStatistics, LatentCache), CollapsedError> {
        let (n, o) = (self.x.nrows(), self.obs());
        let (tw, vw, sf2) = (self.theta[o], self.v[o], self.sf2);
        let tw2 = tw * tw;
        let zw = self.z.column(o);

        let le = self.log_se_observed();
        let a: Vec<f64> = self.s.iter().map(|&s| 1.0 + tw2 * s).collect();
        let mut u1 = le.clone();
        for (mut col, &zm) in u1.column_iter_mut().zip(zw.iter()) {
            u1_column(col.as_mut_slice(), self.mu.as_slice(), &a, zm, tw2);
        }
        let lin_o = self.linear_observed();
        let psi1_lin = &lin_o + (self.mu * vw) * zw.transpose();
        let psi1 = &u1 * sf2 + &psi1_lin;

        let mut psi0 = n as f64 * sf2;
        for d in (0..o).filter(|&d| self.kernel.mask[d] != 0.0) {
            psi0 += self.v[d] * self.x.column(d).norm_squared();
        }
        let s_total = self.s.sum();
        psi0 += vw * (self.mu.norm_squared() + s_total);

        // Ψ2 = sf2² Σ_n ψ2_se + Ψ1_linᵀΨ1_lin + v_w² Σs z_w z_wᵀ + Cs + Csᵀ.
        let factors = self.factors(&le);
        let (se_unit, se2) = match self.device {
            None => {
                let (sums, terms) = psi2_se_unit(&factors);
                (sums, Se2Forward::Host { factors, terms })
            }
            Some(device) => {
                let (sums, h_sums) = device.pair_sums(&factors).map_err(CollapsedError::Device)?;
                (sums, Se2Forward::Device { factors, h_sums })
            }
        };
        let mut psi2 = se_unit * (sf2 * sf2);
        psi2 += transpose_times(&psi1_lin, &psi1_lin);
        psi2 += (zw * zw.transpose()) * (vw * vw * s_total);
        let cs = self.cross_sum(&u1, &lin_o, &a);
        psi2 += &cs + cs.transpose();
        Ok((
            PsiStatistics { psi0, psi1, psi2 },
            LatentCache {
                se2,
                u1,
                lin_o,
                psi1_lin,
            },
        ))
    }

    /// le_nm = −½ Σ_{d∈O} θ_d² (x_nd − z_md)² (N × M), skipping switched-off dimensions.
    fn log_se_observed(&self) -> DMatrix<f64> {
        let (n, m, o) = (self.x.nrows(), self.z.nrows(), self.obs());
        let mut le = DMatrix::zeros(n, m);
        for d in (0..o).filter(|&d| self.theta[d] != 0.0) {
            let t2 = self.theta[d] * self.theta[d];
            let xd = self.x.column(d);
            let xd = xd.as_slice();
            for (col, &zmd) in le
                .as_mut_slice()
                .chunks_exact_mut(n.max(1))
                .zip(self.z.column(d).iter())
            {
                col.iter_mut().zip(xd).for_each(|(l, &xn)| {
                    let diff = xn - zmd;
                    *l -= 0.5 * t2 * diff * diff;
                });
            }
        }
        le
    }

    /// Σ_{d∈O} ṽ_d x_nd z_md (N × M), skipping masked dimensions.
    fn linear_observed(&self) -> DMatrix<f64> {
        let (n, m, o) = (self.x.nrows(), self.z.nrows(), self.obs());
        let mut lin = DMatrix::zeros(n, m);
        for d in (0..o).filter(|&d| self.kernel.mask[d] != 0.0) {
            let xd = self.x.column(d) * self.v[d];
            let xd = xd.as_slice();
            for (col, &zmd) in lin
                .as_mut_slice()
                .chunks_exact_mut(n.max(1))
                .zip(self.z.column(d).iter())
            {
                col.iter_mut().zip(xd).for_each(|(l, &xn)| *l += zmd * xn);
            }
        }
        lin
    }

    /// Σ_n C(n, ·, ·) = sf2 [U1ᵀ G + v_w θ_w² (z_w ∘ t) z_wᵀ] with G = lin_o + v_w (μ/a) z_wᵀ and
    /// t_m = Σ_n u1_nm s_n / a_n.
    fn cross_sum(&self, u1: &DMatrix<f64>, lin_o: &DMatrix<f64>, a: &[f64]) -> DMatrix<f64> {
        let o = self.obs();
        let (tw, vw) = (self.theta[o], self.v[o]);
        let zw = self.z.column(o);
        let mu_over_a = DVector::from_iterator(a.len(), self.mu.iter().zip(a).map(|(m, a)| m / a));
        let g = lin_o + (mu_over_a * vw) * zw.transpose();
        let s_over_a = DVector::from_iterator(a.len(), self.s.iter().zip(a).map(|(s, a)| s / a));
        let t = u1.tr_mul(&s_over_a);
        let zt = zw.component_mul(&t);
        (transpose_times(u1, &g) + (zt * zw.transpose()) * (vw * tw * tw)) * self.sf2
    }

    /// Reverse mode given ∂F/∂ψ0 = `g0`, ∂F/∂Ψ1 = `g1` and a symmetric ∂F/∂Ψ2 = `w`.
    pub(super) fn backward(
        &self,
        cache: &LatentCache,
        g0: f64,
        g1: &DMatrix<f64>,
        w: &DMatrix<f64>,
    ) -> Result<PsiGrad, CollapsedError> {
        let (n, m, o) = (self.x.nrows(), self.z.nrows(), self.obs());
        let (tw, vw, sf2) = (self.theta[o], self.v[o], self.sf2);
        let tw2 = tw * tw;
        let zw = self.z.column(o).into_owned();
        let (mu, s) = (self.mu, self.s);
        let a: Vec<f64> = s.iter().map(|&sv| 1.0 + tw2 * sv).collect();
        let s_total = s.sum();

        let mut g_sf2 = 0.0;
        let mut g_theta = vec![0.0; o + 1];
        let mut g_v = vec![0.0; o + 1];
        let mut g_z = DMatrix::zeros(m, o + 1);
        let mut g_zw = DVector::zeros(m);
        let mut g_mu = DVector::zeros(n);
        let mut g_s = DVector::zeros(n);
        let w2 = w * 2.0;

        // ψ0 = N sf2 + Σ v_d x_nd² + v_w Σ (μ² + s).
        g_sf2 += g0 * n as f64;
        for d in (0..o).filter(|&d| self.kernel.mask[d] != 0.0) {
            g_v[d] += g0 * self.x.column(d).norm_squared();
        }
        g_v[o] += g0 * (mu.norm_squared() + s_total);
        g_mu.axpy(2.0 * g0 * vw, mu, 1.0);
        g_s.add_scalar_mut(g0 * vw);

        // Ψ1 = sf2 U1 + Ψ1_lin: adjoints of Ψ1_se (bar_se) and Ψ1_lin (bar_lin).
        let psi1_se = &cache.u1 * sf2;
        let mut bar_se = g1.clone();
        let mut bar_lin = g1.clone();

        // Ψ1_linᵀΨ1_lin.
        bar_lin += &cache.psi1_lin * &w2;
        // v_w² (Σs) z_w z_wᵀ.
        let wzw = w * &zw;
        let lambda = zw.dot(&wzw);
        g_v[o] += 2.0 * vw * s_total * lambda;
        g_s.add_scalar_mut(vw * vw * lambda);
        g_zw.axpy(2.0 * vw * vw * s_total, &wzw, 1.0);

        // Cs = Ψ1_seᵀ G + κ (z_w ∘ t) z_wᵀ, κ = sf2 v_w θ_w², with adjoint W2 (it enters as Cs + Csᵀ).
        let mu_over_a = DVector::from_iterator(n, mu.iter().zip(&a).map(|(m, a)| m / a));
        let g_mat = &cache.lin_o + (&mu_over_a * vw) * zw.transpose();
        bar_se += &g_mat * &w2;
        let g_bar = &psi1_se * &w2;
        // G = lin_o + v_w (μ/a) z_wᵀ: lin_o's adjoint joins Ψ1_lin's observed part below.
        let gz = &g_bar * &zw;
        g_v[o] += mu_over_a.dot(&gz);
        g_zw.axpy(vw, &g_bar.tr_mul(&mu_over_a), 1.0);
        for k in 0..n {
            // ∂(μ/a)/∂μ = 1/a, ∂/∂s = −μθ_w²/a², ∂/∂θ_w = −2μθ_w s/a².
            let phi = vw * gz[k];
            let a2 = a[k] * a[k];
            g_mu[k] += phi / a[k];
            g_s[k] -= phi * mu[k] * tw2 / a2;
            g_theta[o] -= phi * mu[k] * 2.0 * tw * s[k] / a2;
        }
        let s_over_a = DVector::from_iterator(n, s.iter().zip(&a).map(|(s, a)| s / a));
        let t = cache.u1.tr_mul(&s_over_a);
        let kappa = sf2 * vw * tw2;
        let r = &w2 * &zw;
        let zt = zw.component_mul(&t);
        let kappa_bar: f64 = zt.dot(&r);
        g_sf2 += kappa_bar * vw * tw2;
        g_v[o] += kappa_bar * sf2 * tw2;
        g_theta[o] += kappa_bar * sf2 * vw * 2.0 * tw;
        g_zw.axpy(kappa, &t.component_mul(&r), 1.0);
        g_zw.axpy(kappa, &(&w2 * &zt), 1.0);
        let t_bar = zw.component_mul(&r) * kappa;
        // t_m = Σ_n u1_nm s_n/a_n: u1 gets t̄_m s_n/a_n; s/a gets ρ_n = Σ_m u1_nm t̄_m with
        // ∂(s/a)/∂s = 1/a², ∂(s/a)/∂θ_w = −2θ_w s²/a².
        let mut bar_u1 = &s_over_a * t_bar.transpose();
        let rho = &cache.u1 * &t_bar;
        for k in 0..n {
            let a2 = a[k] * a[k];
            g_s[k] += rho[k] / a2;
            g_theta[o] -= rho[k] * 2.0 * tw * s[k] * s[k] / a2;
        }

        // Ψ1_lin = lin_o + v_w μ z_wᵀ.
        let bar_lin_o = &bar_lin + &g_bar;
        let bz = &bar_lin * &zw;
        g_v[o] += mu.dot(&bz);
        g_zw.axpy(vw, &bar_lin.tr_mul(mu), 1.0);
        g_mu.axpy(vw, &bz, 1.0);
        let bar_lin_o_z = &bar_lin_o * self.z;
        let bar_lin_o_x = transpose_times(&bar_lin_o, self.x);
        for d in (0..o).filter(|&d| self.kernel.mask[d] != 0.0) {
            g_v[d] += self.x.column(d).dot(&bar_lin_o_z.column(d));
            g_z.column_mut(d)
                .axpy(self.v[d], &bar_lin_o_x.column(d), 1.0);
        }

        // Ψ1_se = sf2 U1.
        g_sf2 += bar_se.dot(&cache.u1);
        bar_u1 += &bar_se * sf2;
        // log u1 = le − ½ log a − θ_w² δ²/(2a), δ = μ_n − z_mw.
        let q = bar_u1.component_mul(&cache.u1);
        let mut le_bar = q.clone();
        for (j, col) in q.column_iter().enumerate() {
            let (theta_part, zw_part) = u1_column_backward(
                col.as_slice(),
                (mu.as_slice(), s.as_slice(), &a),
                zw[j],
                tw,
                g_s.as_mut_slice(),
                g_mu.as_mut_slice(),
            );
            g_theta[o] += theta_part;
            g_zw[j] -= zw_part;
        }

        // Σ_n ψ2_se with adjoint sf2² W.
        let se2 = match &cache.se2 {
            Se2Forward::Host { factors, terms } => {
                self.psi2_se_backward(factors, terms.as_deref(), w, &mut le_bar)
            }
            Se2Forward::Device { factors, h_sums } => {
                let device = self
                    .device
                    .ok_or(CollapsedError::Device(DeviceError::Missing))?;
                self.psi2_se_backward_on(device, factors, h_sums, w, &mut le_bar)?
            }
        };
        g_sf2 += 2.0 * sf2 * se2.total;
        g_theta[o] += sf2 * sf2 * se2.theta_w;
        g_zw.axpy(sf2 * sf2, &se2.zw, 1.0);
        g_mu.axpy(sf2 * sf2, &se2.mu, 1.0);
        g_s.axpy(sf2 * sf2, &se2.s, 1.0);

        // le_nm = −½ Σ_d θ_d² (x_nd − z_md)².
        for d in (0..o).filter(|&d| self.theta[d] != 0.0) {
            let td = self.theta[d];
            let xd = self.x.column(d);
            let mut sq = 0.0;
            for (j, col) in le_bar.column_iter().enumerate() {
                let (lin, sq_j) = centred_moments(col.as_slice(), xd.as_slice(), self.z[(j, d)]);
                sq += sq_j;
                g_z[(j, d)] += td * td * lin;
            }
            g_theta[d] -= td * sq;
        }

        g_z.set_column(o, &g_zw);
        let mut kernel_grad = self.kernel.new_zeroed_grad();
        let mask = &self.kernel.mask;
        if let Some(lin) = kernel_grad.linear.as_mut() {
            lin.iter_mut()
                .zip(&g_v)
                .zip(mask)
                .for_each(|((g, v), e)| *g = v * e);
        }
        let part = &mut kernel_grad.stationary[0];
        part.variance = g_sf2;
        part.precision
            .iter_mut()
            .zip(&g_theta)
            .zip(mask)
            .for_each(|((g, t), e)| *g = t * e);
        Ok(PsiGrad {
            kernel: kernel_grad,
            z: g_z,
            mean: g_mu,
            variance: g_s,
        })
    }

    /// Reverse mode of Σ_n ψ2_se/sf2² against the symmetric W, in the factored form of
    /// [`psi2_se_unit`]. Adds sf2²·∂/∂le to `le_bar` and returns the other gradients of
    /// Σ_{n,m,m'} W_mm' ψ2_se(n,m,m')/sf2² (all but `total` still to be multiplied by sf2²).
    /// With p the unit value, δ_nm = μ_n − z_mw and Δ² = (z_mw − z_m'w)²:
    /// ∂log p/∂B_nm = ∂log p/∂B_nm' = 1, ∂log p/∂h_n = −Δ², ∂log p/∂log pref = 1;
    /// ∂B/∂le = 1, ∂B/∂μ_n = −c δ, ∂B/∂z_mw = c δ, ∂B/∂c = −δ²/2, ∂Δ²/∂z_mw = 2(z_mw − z_m'w);
    /// ∂c/∂s = −2θ_w⁴/b², ∂c/∂θ_w = 2θ_w/b², h = (θ_w² − c)/4, log pref = −½ log b.
    fn psi2_se_backward(
        &self,
        factors: &Psi2Factors,
        terms: Option<&[f64]>,
        w: &DMatrix<f64>,
        le_bar: &mut DMatrix<f64>,
    ) -> Se2Grad {
        let (n, m) = (self.x.nrows(), self.z.nrows());
        let pairs = PairTable::new(factors.zw.as_slice());
        let (h, pref) = (factors.h.as_slice(), factors.pref.as_slice());
        let b = factors.b.as_slice();
        // ∂/∂B (N × M, column-major like B), and per row Σ q and Σ q Δ² over its pairs.
        let mut bar = vec![0.0; n * m];
        let mut sums = RowSums {
            q: vec![0.0; n],
            q_dz2: vec![0.0; n],
            scratch: vec![0.0; n],
        };
        // Σ_n q h_n per pair, for the n-independent ∂Δ²/∂z.
        let mut qh_pair = Vec::with_capacity(pairs.len());
        let mut fresh = vec![0.0; if terms.is_some() { 0 } else { n }];
        for i in 0..m {
            let bi = &b[i * n..(i + 1) * n];
            let (below, from_i) = bar.split_at_mut(i * n);
            let bar_i = &mut from_i[..n];
            for j in 0..=i {
                let d2 = pairs.dz2[qh_pair.len()];
                // Each unordered pair m > m' appears twice in Σ_{m,m'}.
                let (bj, weight, bar_j) = if i == j {
                    (bi, w[(i, i)], None)
                } else {
                    let bar_j = &mut below[j * n..(j + 1) * n];
                    (&b[j * n..(j + 1) * n], 2.0 * w[(i, j)], Some(bar_j))
                };
                let p = qh_pair.len();
                let t = match terms {
                    Some(all) => &all[p * n..(p + 1) * n],
                    None => {
                        psi2_pair_terms((bi, bj), (h, pref), d2, &mut fresh);
                        &fresh[..]
                    }
                };
                let bar_i = &mut *bar_i;
                qh_pair.push(psi2_pair_backward(
                    t,
                    h,
                    (d2, weight),
                    (bar_i, bar_j),
                    &mut sums,
                ));
            }
        }
        let mut out = Se2Grad::zeros(m, n);
        let bar = DMatrix::from_vec(n, m, bar);
        self.psi2_rows_chain(&bar, (&sums.q, &sums.q_dz2), &mut out, le_bar);
        self.psi2_pair_chain(&qh_pair, &mut out);
        out
    }

    /// [`SeLinear::psi2_se_backward`] with the O(N M²) sums on `device`, from the forward pass's
    /// `factors` and Σ_n h_n p (`h_sums`): per row, ∂/∂B_ni = 2 Σ_j W_ij p, Σ q = Σ_i Σ_j W_ij p
    /// and Σ q Δ² likewise; per pair, Σ_n q h_n = w'_ij Σ_n h_n p with w' the packed weights.
    fn psi2_se_backward_on(
        &self,
        device: &dyn Psi2Device,
        factors: &Psi2Factors,
        h_sums: &DMatrix<f64>,
        w: &DMatrix<f64>,
        le_bar: &mut DMatrix<f64>,
    ) -> Result<Se2Grad, CollapsedError> {
        let (n, m) = (self.x.nrows(), self.z.nrows());
        let (wp_rows, wpd_rows) = device
            .row_sums(factors, w)
            .map_err(CollapsedError::Device)?;
        let mut out = Se2Grad::zeros(m, n);
        let bar = &wp_rows * 2.0;
        let q_sum: Vec<f64> = wp_rows.row_iter().map(|r| r.sum()).collect();
        let q_dz2: Vec<f64> = wpd_rows.row_iter().map(|r| r.sum()).collect();
        self.psi2_rows_chain(&bar, (&q_sum, &q_dz2), &mut out, le_bar);
        let mut qh_pair = Vec::with_capacity(m * (m + 1) / 2);
        for i in 0..m {
            for j in 0..=i {
                let weight = if i == j { w[(i, i)] } else { 2.0 * w[(i, j)] };
                qh_pair.push(weight * h_sums[(i, j)]);
            }
        }
        self.psi2_pair_chain(&qh_pair, &mut out);
        Ok(out)
    }

    /// The rows' share of [`SeLinear::psi2_se_backward`] from their adjoints: `bar` = ∂/∂B
    /// (N × M), and per row Σ q and Σ q Δ² over its pairs. Column by column, so every inner loop
    /// runs over the rows, contiguous.
    fn psi2_rows_chain(
        &self,
        bar: &DMatrix<f64>,
        (q_sum, q_dz2): (&[f64], &[f64]),
        out: &mut Se2Grad,
        le_bar: &mut DMatrix<f64>,
    ) {
        let (n, o) = (self.x.nrows(), self.obs());
        let tw = self.theta[o];
        let tw2 = tw * tw;
        let zw = self.z.column(o);
        let rows: Vec<RowLatent> = (0..n).map(|k| RowLatent::new(tw2, self.s[k])).collect();
        let c: Vec<f64> = rows.iter().map(|lat| lat.c).collect();
        // Through B_nm = le_nm − (c_n/2) δ², δ = μ_n − z_mw.
        let mut c_bar = vec![0.0; n];
        // Over raw slices: nalgebra's element iterators do not vectorise.
        let (mu, g_mu) = (self.mu.as_slice(), out.mu.as_mut_slice());
        let columns = bar.as_slice().chunks_exact(n.max(1));
        for (col, (g_zw, &z)) in columns.zip(out.zw.iter_mut().zip(zw.iter())) {
            let mut acc = [0.0; LANES];
            for (k, (((&rb, &mu), &ck), (g_mu, cb))) in col
                .iter()
                .zip(mu)
                .zip(&c)
                .zip(g_mu.iter_mut().zip(c_bar.iter_mut()))
                .enumerate()
            {
                let delta = mu - z;
                let t = rb * ck * delta;
                *g_mu -= t;
                acc[k % LANES] += t;
                *cb -= 0.5 * rb * delta * delta;
            }
            *g_zw += lane_total(&acc);
        }
        let sf4 = self.sf2 * self.sf2;
        le_bar
            .as_mut_slice()
            .iter_mut()
            .zip(bar.as_slice())
            .for_each(|(lb, &rb)| *lb += sf4 * rb);
        for (k, lat) in rows.iter().enumerate() {
            let s = self.s[k];
            out.total += q_sum[k];
            // h = (θ² − c)/4 enters as −h Δ².
            let h_bar = -q_dz2[k];
            let c_total = c_bar[k] - 0.25 * h_bar;
            let (b, b2) = (lat.b, lat.b * lat.b);
            out.s[k] += -tw2 / b * q_sum[k] + c_total * (-2.0 * tw2 * tw2 / b2);
            out.theta_w +=
                -2.0 * tw * s / b * q_sum[k] + c_total * (2.0 * tw / b2) + 0.25 * h_bar * 2.0 * tw;
        }
    }

    /// The pairs' share of [`SeLinear::psi2_se_backward`]: −h Δ² with ∂Δ²/∂z_mw =
    /// 2(z_mw − z_m'w) = −∂Δ²/∂z_m'w, from Σ_n q h_n per packed pair.
    fn psi2_pair_chain(&self, qh_pair: &[f64], out: &mut Se2Grad) {
        let (m, o) = (self.z.nrows(), self.obs());
        let zw = self.z.column(o);
        let mut idx = 0;
        for i in 0..m {
            for j in 0..=i {
                let g = -2.0 * qh_pair[idx] * (zw[i] - zw[j]);
                out.zw[i] += g;
                out.zw[j] -= g;
                idx += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests;
