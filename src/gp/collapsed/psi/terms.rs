//! The per-row and per-pair terms behind Ψ statistics and their gradients: the inner loops
//! (vectorised over lanes), the factors Ψ2 is built from and the tables that cache them.

use super::*;

vectorised! {
/// One column m of U1 = Ψ1_se/sf2 from its log-part le (in place):
/// u1_n = e^{le_n − θ_w² (μ_n − z_mw)²/(2a_n)} / √a_n, 0 where the exponent is below e^{−708}.
pub(super) fn u1_column(col: &mut [f64], mu: &[f64], a: &[f64], zm: f64, tw2: f64) {
    let fma = multiversion::target::target_cfg_f!(target_feature = "fma");
    for ((u, &m), &ak) in col.iter_mut().zip(mu).zip(a) {
        let delta = m - zm;
        let e = *u - tw2 * delta * delta / (2.0 * ak);
        *u = if fma { exp_with::<true>(e) } else { exp_with::<false>(e) } / ak.sqrt();
    }
}
}

vectorised! {
/// The backward pass of [`u1_column`] for one column m, given q_n = Ū1_nm U1_nm (= ∂/∂log u1):
/// with δ = μ_n − z_mw and ∂log u1/∂a = −1/(2a) + θ_w²δ²/(2a²), adds ∂/∂s_n (through
/// a = 1 + θ_w² s) and ∂/∂μ_n, and returns (∂/∂θ_w, ∂/∂δ summed over n), the latter to be
/// subtracted from ∂z_mw.
pub(super) fn u1_column_backward(
    q: &[f64],
    (mu, s, a): (&[f64], &[f64], &[f64]),
    zm: f64,
    tw: f64,
    g_s: &mut [f64],
    g_mu: &mut [f64],
) -> (f64, f64) {
    let tw2 = tw * tw;
    let (mut acc_t, mut acc_z) = ([0.0; LANES], [0.0; LANES]);
    for (k, &qv) in q.iter().enumerate() {
        let delta = mu[k] - zm;
        let ak = a[k];
        let d_a = -0.5 / ak + tw2 * delta * delta / (2.0 * ak * ak);
        g_s[k] += qv * d_a * tw2;
        acc_t[k % LANES] += qv * (d_a * 2.0 * tw * s[k] - tw * delta * delta / ak);
        let d_delta = -qv * tw2 * delta / ak;
        g_mu[k] += d_delta;
        acc_z[k % LANES] += d_delta;
    }
    (lane_total(&acc_t), lane_total(&acc_z))
}
}

vectorised! {
/// (Σ_n w_n (x_n − c), Σ_n w_n (x_n − c)²), in 8 lanes reduced in a fixed order.
pub(super) fn centred_moments(w: &[f64], x: &[f64], c: f64) -> (f64, f64) {
    let (mut acc_1, mut acc_2) = ([0.0; LANES], [0.0; LANES]);
    let (w_chunks, x_chunks) = (w.chunks_exact(LANES), x.chunks_exact(LANES));
    let (w_rest, x_rest) = (w_chunks.remainder(), x_chunks.remainder());
    for (wc, xc) in w_chunks.zip(x_chunks) {
        for l in 0..LANES {
            let diff = xc[l] - c;
            acc_1[l] += wc[l] * diff;
            acc_2[l] += wc[l] * diff * diff;
        }
    }
    for l in 0..w_rest.len() {
        let diff = x_rest[l] - c;
        acc_1[l] += w_rest[l] * diff;
        acc_2[l] += w_rest[l] * diff * diff;
    }
    (lane_total(&acc_1), lane_total(&acc_2))
}
}

vectorised! {
/// One inducing pair (i, j)'s terms of Σ_n ψ2_se/sf2², out_n = pref_n e^{B_ni + B_nj − h_n Δ²_ij},
/// from the columns B_·i and B_·j (terms below e^{−708} are 0). The loop runs over the rows,
/// contiguous in every array, so it is straight-line vector code.
pub(super) fn psi2_pair_terms(
    (bi, bj): (&[f64], &[f64]),
    (h, pref): (&[f64], &[f64]),
    d2: f64,
    out: &mut [f64],
) {
    let fma = multiversion::target::target_cfg_f!(target_feature = "fma");
    for ((((t, &x), &y), &hk), &pk) in out.iter_mut().zip(bi).zip(bj).zip(h).zip(pref) {
        let e = x + y - hk * d2;
        *t = pk * if fma { exp_with::<true>(e) } else { exp_with::<false>(e) };
    }
}
}

/// Σ_k a_k in 8 lanes reduced in a fixed order.
#[inline(always)]
pub(super) fn lane_sum(a: &[f64]) -> f64 {
    let mut acc = [0.0; LANES];
    let chunks = a.chunks_exact(LANES);
    let rest = chunks.remainder();
    for c in chunks {
        for l in 0..LANES {
            acc[l] += c[l];
        }
    }
    for (l, &v) in rest.iter().enumerate() {
        acc[l] += v;
    }
    lane_total(&acc)
}

/// The per-row adjoint outputs of the pair loops of [`SeLinear::psi2_se_backward`]:
/// Σ q and Σ q Δ² over each row's pairs, and N-long scratch.
pub(super) struct RowSums {
    pub(super) q: Vec<f64>,
    pub(super) q_dz2: Vec<f64>,
    pub(super) scratch: Vec<f64>,
}

vectorised! {
/// The reverse of one pair's share of Σ_n ψ2_se/sf2² given its terms `t` ([`psi2_pair_terms`])
/// and the pair's weight (2W_ij for i ≠ j, W_ii on the diagonal): with q_n = weight · t_n,
/// ∂/∂B_ni and ∂/∂B_nj gain q_n (`bar_j` is `None` on the diagonal, where B_ni enters twice and
/// gains 2q_n), the row sums gain q_n and q_n Δ²; returns Σ_n q_n h_n (8 lanes, fixed order).
pub(super) fn psi2_pair_backward(
    t: &[f64],
    h: &[f64],
    (d2, weight): (f64, f64),
    (bar_i, bar_j): (&mut [f64], Option<&mut [f64]>),
    sums: &mut RowSums,
) -> f64 {
    let q = &mut sums.scratch;
    q.iter_mut().zip(t).for_each(|(qv, &tv)| *qv = weight * tv);
    for ((s, sd), &qv) in sums.q.iter_mut().zip(sums.q_dz2.iter_mut()).zip(q.iter()) {
        *s += qv;
        *sd += qv * d2;
    }
    match bar_j {
        Some(bar_j) => {
            for ((a, b), &qv) in bar_i.iter_mut().zip(bar_j.iter_mut()).zip(q.iter()) {
                *a += qv;
                *b += qv;
            }
        }
        None => bar_i.iter_mut().zip(q.iter()).for_each(|(a, &qv)| *a += 2.0 * qv),
    }
    // Σ q h, reusing q's buffer.
    q.iter_mut().zip(h).for_each(|(qv, &hk)| *qv *= hk);
    lane_sum(q)
}
}

/// The per-row latent constants of ψ2_se: b = 1 + 2θ_w² s, c = θ_w²/b, h = (θ_w² − c)/4 and
/// pref = b^{-1/2}.
pub(super) struct RowLatent {
    pub(super) b: f64,
    pub(super) c: f64,
    pub(super) h: f64,
    pub(super) pref: f64,
}

impl RowLatent {
    pub(super) fn new(tw2: f64, s: f64) -> Self {
        let b = 1.0 + 2.0 * tw2 * s;
        let c = tw2 / b;
        Self {
            b,
            c,
            h: 0.25 * (tw2 - c),
            pref: 1.0 / b.sqrt(),
        }
    }
}

/// The per-row factors of Σ_n ψ2_se/sf2² in the factored form of `psi2_se_unit`:
/// p(n, m, m') = pref_n exp(B_nm + B_nm' − h_n (z_mw − z_m'w)²), every exponent ≤ 0. With them
/// the O(N M²) sums (a device's work, `backend::gpu`) need nothing else of the kernel or the data.
#[derive(Debug, Clone, PartialEq)]
pub struct Psi2Factors {
    /// B_nm = le_nm − (c_n/2)(μ_n − z_mw)², N × M, with c_n = θ_w²/(1 + 2θ_w² s_n).
    pub b: DMatrix<f64>,
    /// h_n = (θ_w² − c_n)/4 ≥ 0.
    pub h: DVector<f64>,
    /// pref_n = (1 + 2θ_w² s_n)^{-1/2}.
    pub pref: DVector<f64>,
    /// z_w, the inducing points' latent coordinates (M).
    pub zw: DVector<f64>,
}

impl Psi2Factors {
    /// The factors for the SE + linear `kernel` with latent posterior `q` (as [`psi_statistics`]
    /// takes them): Ψ2's SE part is sf2² Σ_n p(n, ·, ·).
    pub fn new(
        kernel: &Kernel,
        x: &DMatrix<f64>,
        z: &DMatrix<f64>,
        q: &LatentPosterior,
    ) -> Result<Self, CollapsedError> {
        let p = SeLinear::new(kernel, x, z, q)?;
        Ok(p.factors(&p.log_se_observed()))
    }
}

/// Gradients of the unit-variance Σ_n ψ2_se against W (see [`SeLinear::psi2_se_backward`]).
pub(super) struct Se2Grad {
    pub(super) total: f64,
    pub(super) theta_w: f64,
    pub(super) zw: DVector<f64>,
    pub(super) mu: DVector<f64>,
    pub(super) s: DVector<f64>,
}

impl Se2Grad {
    /// Nothing accumulated yet, for `m` inducing points and `n` rows.
    pub(super) fn zeros(m: usize, n: usize) -> Self {
        Self {
            total: 0.0,
            theta_w: 0.0,
            zw: DVector::zeros(m),
            mu: DVector::zeros(n),
            s: DVector::zeros(n),
        }
    }
}

/// Per inducing pair (m ≥ m', packed lower triangle, row by row): Δ² = (z_mw − z_m'w)².
pub(super) struct PairTable {
    pub(super) m: usize,
    pub(super) dz2: Vec<f64>,
}

impl PairTable {
    pub(super) fn new(zw: &[f64]) -> Self {
        let m = zw.len();
        let mut dz2 = Vec::with_capacity(m * (m + 1) / 2);
        for i in 0..m {
            for j in 0..=i {
                let d = zw[i] - zw[j];
                dz2.push(d * d);
            }
        }
        Self { m, dz2 }
    }

    pub(super) fn len(&self) -> usize {
        self.dz2.len()
    }

    /// The symmetric M × M matrix of a packed lower triangle.
    pub(super) fn unpack(&self, packed: &[f64]) -> DMatrix<f64> {
        let mut out = DMatrix::zeros(self.m, self.m);
        let mut idx = 0;
        for i in 0..self.m {
            for j in 0..=i {
                out[(i, j)] = packed[idx];
                out[(j, i)] = packed[idx];
                idx += 1;
            }
        }
        out
    }
}
