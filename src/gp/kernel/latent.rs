//! The fast path for K(Z, u_t) when the evaluation points are minibatch rows x_n whose latent slot
//! holds S Monte Carlo draws w_sn (t = s·b + n), MODEL.md §3.4: the observed dimensions of u_t do
//! not depend on s, so their part of every scaled distance is computed once per (m, n), and the
//! backward pass reduces over samples before contracting over dimensions:
//!
//! ```text
//! r²_c[m,(s,n)] = R_c[m,n] + (θ̃^c_i)² (w_sn − z_mi)²,   R_c[m,n] = Σ_{j≠i} (θ̃^c_j)² (x_nj − z_mj)²
//! E_c[m,n]      = Σ_s K̄[m,(s,n)] ∂k_c/∂r²[m,(s,n)]          (then O(M·b·D) per kind, not O(M·S·b·D))
//! ```
//!
//! Equal to [`Kernel::cross`] / [`Kernel::cross_backward`] on the expanded points (tested).

use nalgebra::DMatrix;

use super::dense::col;
use super::{
    unit_dvalue_dalpha_from_value, unit_value_and_dr2, Kernel, KernelGrad, StationaryKind,
};

/// R[m,n] = Σ_{j≠slot} θ_j² (x_nj − z_mj)² over dimensions with θ_j ≠ 0 (masked ones skipped).
fn observed_sq_dist(
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    theta: &[f64],
    slot: usize,
) -> DMatrix<f64> {
    let mut r = DMatrix::<f64>::zeros(z.nrows(), x.nrows());
    for (j, &t) in theta.iter().enumerate() {
        if j == slot || t == 0.0 {
            continue;
        }
        let t2 = t * t;
        let zj = col(z, j);
        for (mut rcol, &xn) in r.column_iter_mut().zip(col(x, j)) {
            for (rv, &zm) in rcol.iter_mut().zip(zj) {
                let d = xn - zm;
                *rv += t2 * d * d;
            }
        }
    }
    r
}

/// K(Z, u_t) with what its backward pass needs: for each stationary part, ∂κ_c/∂r² at every
/// (m, t). Keeping it saves recomputing every exponential in the backward pass (they dominate the
/// cost); the values κ_c are rebuilt from it by the closed-form relations in `value_from_slope`.
#[derive(Debug, Clone)]
pub struct LatentCross {
    pub k: DMatrix<f64>,
    slopes: Vec<DMatrix<f64>>,
}

/// κ from κ′ = ∂κ/∂r² (and r²) without another exponential:
/// SE κ = −2κ′; M12 κ = −2rκ′; M32 κ = −(2/3)(1 + √3 r)κ′; RQ κ = −2(1 + r²/2a)κ′.
/// At r² = 0 the slope is 0 by the branch convention and κ = 1.
fn value_from_slope(kind: StationaryKind, slope: f64, r2: f64, alpha: f64) -> f64 {
    if r2 <= 0.0 {
        return 1.0;
    }
    match kind {
        StationaryKind::SquaredExponential => -2.0 * slope,
        StationaryKind::Matern12 => -2.0 * r2.sqrt() * slope,
        StationaryKind::Matern32 => -(2.0 / 3.0) * (1.0 + 3f64.sqrt() * r2.sqrt()) * slope,
        StationaryKind::RationalQuadratic => -2.0 * (1.0 + r2 / (2.0 * alpha)) * slope,
    }
}

impl Kernel {
    /// K(Z, u_t), `M × (S·b)`, where u_(s·b+n) is row n of `x` with column `slot` replaced by
    /// `w[(s, n)]` (`w` is S × b). Same values as [`Kernel::cross`]`(z, u)`.
    pub fn cross_latent(
        &self,
        z: &DMatrix<f64>,
        x: &DMatrix<f64>,
        slot: usize,
        w: &DMatrix<f64>,
    ) -> DMatrix<f64> {
        self.cross_latent_cached(z, x, slot, w).k
    }

    /// [`Kernel::cross_latent`] keeping the per-part slopes for
    /// [`Kernel::cross_latent_backward_cached`].
    pub fn cross_latent_cached(
        &self,
        z: &DMatrix<f64>,
        x: &DMatrix<f64>,
        slot: usize,
        w: &DMatrix<f64>,
    ) -> LatentCross {
        self.check_points(z);
        self.check_points(x);
        let (m, b, samples) = (z.nrows(), x.nrows(), w.nrows());
        let mut k = DMatrix::<f64>::zeros(m, samples * b);
        let z_slot = col(z, slot);

        if let Some(lin) = &self.linear {
            let theta = self.masked(lin);
            // Observed part once per (m, n): Σ_{j≠slot} θ̃_j z_mj x_nj.
            let mut obs = DMatrix::<f64>::zeros(m, b);
            for (j, &t) in theta.iter().enumerate() {
                if j == slot || self.mask[j] == 0.0 {
                    continue;
                }
                let zj = col(z, j);
                for (mut ocol, &xn) in obs.column_iter_mut().zip(col(x, j)) {
                    ocol.iter_mut()
                        .zip(zj)
                        .for_each(|(o, &zm)| *o += t * zm * xn);
                }
            }
            let ts = theta[slot];
            for s in 0..samples {
                for n in 0..b {
                    let wsn = w[(s, n)];
                    let kcol = k.column_mut(s * b + n);
                    for ((kv, &o), &zm) in kcol.into_iter().zip(obs.column(n).iter()).zip(z_slot) {
                        *kv += o + ts * zm * wsn;
                    }
                }
            }
        }
        let mut slopes = Vec::with_capacity(self.stationary.len());
        for part in &self.stationary {
            let theta = self.masked(&part.precision);
            let r_obs = observed_sq_dist(z, x, &theta, slot);
            let ts2 = theta[slot] * theta[slot];
            let mut slope = DMatrix::<f64>::zeros(m, samples * b);
            for s in 0..samples {
                for n in 0..b {
                    let t = s * b + n;
                    let wsn = w[(s, n)];
                    let r_col = r_obs.column(n);
                    let cells = k.column_mut(t).into_iter().zip(slope.column_mut(t));
                    for (((kv, sv), &ro), &zm) in cells.zip(r_col.iter()).zip(z_slot) {
                        let d = wsn - zm;
                        let (v, dv) =
                            unit_value_and_dr2(part.kind, ro + ts2 * d * d, self.rq_alpha);
                        *kv += part.variance * v;
                        *sv = dv;
                    }
                }
            }
            slopes.push(slope);
        }
        LatentCross { k, slopes }
    }

    /// Backward of [`Kernel::cross_latent`]: given K̄ = ∂L/∂K (M × S·b), the kernel gradient,
    /// ∂L/∂Z (M × D) and ∂L/∂w (S × b). Same results as [`Kernel::cross_backward`] on the expanded
    /// points (restricted to the latent column for the point gradient).
    pub fn cross_latent_backward(
        &self,
        z: &DMatrix<f64>,
        x: &DMatrix<f64>,
        slot: usize,
        w: &DMatrix<f64>,
        k_bar: &DMatrix<f64>,
    ) -> (KernelGrad, DMatrix<f64>, DMatrix<f64>) {
        let cache = self.cross_latent_cached(z, x, slot, w);
        self.cross_latent_backward_cached(z, x, slot, w, &cache, k_bar)
    }

    /// [`Kernel::cross_latent_backward`] reusing the slopes of the forward pass.
    pub fn cross_latent_backward_cached(
        &self,
        z: &DMatrix<f64>,
        x: &DMatrix<f64>,
        slot: usize,
        w: &DMatrix<f64>,
        cache: &LatentCross,
        k_bar: &DMatrix<f64>,
    ) -> (KernelGrad, DMatrix<f64>, DMatrix<f64>) {
        let (m, b, samples, d) = (z.nrows(), x.nrows(), w.nrows(), self.dim());
        let mut grad = self.new_zeroed_grad();
        let mut dz = DMatrix::zeros(m, d);
        let mut dw = DMatrix::zeros(samples, b);
        let z_slot = col(z, slot);

        // Σ_s K̄[m,(s,n)]: what every s-independent term contracts with.
        let mut k_bar_sum = DMatrix::<f64>::zeros(m, b);
        for s in 0..samples {
            for n in 0..b {
                let mut dst = k_bar_sum.column_mut(n);
                dst += k_bar.column(s * b + n);
            }
        }

        if let (Some(lin), Some(glin)) = (&self.linear, grad.linear.as_mut()) {
            let theta = self.masked(lin);
            for j in 0..d {
                if self.mask[j] == 0.0 {
                    continue;
                }
                let zj = col(z, j);
                if j == slot {
                    let (mut g, ts) = (0.0, theta[slot]);
                    for s in 0..samples {
                        for n in 0..b {
                            let t = s * b + n;
                            let wsn = w[(s, n)];
                            let kb = k_bar.column(t);
                            let dot: f64 = kb.iter().zip(zj).map(|(a, c)| a * c).sum();
                            g += dot * wsn;
                            dw[(s, n)] += ts * dot;
                            for (mi, &kv) in kb.iter().enumerate() {
                                dz[(mi, slot)] += ts * kv * wsn;
                            }
                        }
                    }
                    glin[j] += g;
                } else {
                    let xj = col(x, j);
                    let mut g = 0.0;
                    for (n, &xn) in xj.iter().enumerate() {
                        for (mi, (&e, &zm)) in k_bar_sum.column(n).iter().zip(zj).enumerate() {
                            g += e * zm * xn;
                            dz[(mi, j)] += theta[j] * e * xn;
                        }
                    }
                    glin[j] += g;
                }
            }
        }

        for (c, part) in self.stationary.iter().enumerate() {
            let theta = self.masked(&part.precision);
            let r_obs = observed_sq_dist(z, x, &theta, slot);
            let ts = theta[slot];
            let ts2 = ts * ts;
            let mut e_sum = DMatrix::<f64>::zeros(m, b); // E_c[m,n] = Σ_s G[m,(s,n)]
            let (mut g_var, mut g_alpha, mut g_theta_slot) = (0.0, 0.0, 0.0);
            for s in 0..samples {
                for n in 0..b {
                    let t = s * b + n;
                    let wsn = w[(s, n)];
                    let mut dw_t = 0.0;
                    let slope = cache.slopes[c].column(t);
                    for mi in 0..m {
                        let kb = k_bar[(mi, t)];
                        let delta = wsn - z_slot[mi];
                        let r2 = r_obs[(mi, n)] + ts2 * delta * delta;
                        let dv = slope[mi];
                        let v = value_from_slope(part.kind, dv, r2, self.rq_alpha);
                        g_var += kb * v;
                        if part.kind == StationaryKind::RationalQuadratic {
                            g_alpha += kb
                                * part.variance
                                * unit_dvalue_dalpha_from_value(r2, self.rq_alpha, v);
                        }
                        // dv is exactly 0 at r² = 0 (the branch), so coincident points add nothing.
                        let g = kb * part.variance * dv;
                        e_sum[(mi, n)] += g;
                        g_theta_slot += g * 2.0 * ts * delta * delta;
                        dw_t += g * 2.0 * ts2 * delta;
                        dz[(mi, slot)] -= g * 2.0 * ts2 * delta;
                    }
                    dw[(s, n)] += dw_t;
                }
            }
            let gpart = &mut grad.stationary[c];
            gpart.variance += g_var;
            if part.kind == StationaryKind::RationalQuadratic {
                grad.rq_alpha += g_alpha;
            }
            gpart.precision[slot] += g_theta_slot * self.mask[slot];
            for j in 0..d {
                if j == slot || theta[j] == 0.0 {
                    continue;
                }
                let (zj, xj, tj) = (col(z, j), col(x, j), theta[j]);
                let mut g = 0.0;
                for (n, &xn) in xj.iter().enumerate() {
                    for (mi, (&e, &zm)) in e_sum.column(n).iter().zip(zj).enumerate() {
                        let delta = xn - zm;
                        g += e * 2.0 * tj * delta * delta;
                        dz[(mi, j)] -= e * 2.0 * tj * tj * delta;
                    }
                }
                gpart.precision[j] += g * self.mask[j];
            }
        }
        (grad, dz, dw)
    }
}
