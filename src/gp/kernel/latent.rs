//! The fast path for K(Z, u_t) when the evaluation points are minibatch rows x_n whose latent slot
//! holds S Monte Carlo draws w_sn (t = n·S + s: a row's samples are adjacent), MODEL.md §3.4: the
//! observed dimensions of u_t do not depend on s, so their part of every scaled distance is
//! computed once per (m, n), and the backward pass reduces over samples before contracting over
//! dimensions:
//!
//! ```text
//! r²_c[m,(n,s)] = R_c[m,n] + (θ̃^c_i)² (w_sn − z_mi)²,   R_c[m,n] = Σ_{j≠i} (θ̃^c_j)² (x_nj − z_mj)²
//! E_c[m,n]      = Σ_s K̄[m,(n,s)] ∂k_c/∂r²[m,(n,s)]          (then O(M·b·D) per kind, not O(M·S·b·D))
//! ```
//!
//! The O(M·S·b) loops run down columns of M contiguous entries with no calls and no branches
//! (the shapes use `gp::lane_math`'s `exp`/`ln_1p`; sums accumulate per row and are reduced in 8
//! lanes), and are compiled for AVX2 and AVX-512 as well, picked at run time (`multiversion`).
//! Versions with FMA fuse the polynomials' multiply-adds, so two CPUs can differ in the last bits;
//! on one machine the results are fixed.
//!
//! Both passes split the minibatch into blocks of [`ROWS_PER_BLOCK`] rows (contiguous columns)
//! that run on the threads of the caller's pool ([`split_map`]); partial sums are combined in
//! block order, so the results do not depend on the thread count.
//!
//! Equal to [`Kernel::cross`] / [`Kernel::cross_backward`] on the expanded points (tested).

use std::mem::MaybeUninit;

use nalgebra::DMatrix;

use crate::base::pool::split_map;

use super::dense::{add_scaled_outer, col};
use super::shapes::{cell, Rq, Se, Shape, M12, M32};
use super::{Kernel, KernelGrad, StationaryKind};
use crate::gp::lane_math::{lane_sum, vectorised};

vectorised! {
/// R[m,n] = Σ_{j≠slot} θ_j² (x_nj − z_mj)² over dimensions with θ_j ≠ 0 (masked ones skipped).
fn observed_sq_dist(
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    theta: &[f64],
    slot: usize,
) -> DMatrix<f64> {
    let m = z.nrows();
    let mut r = DMatrix::<f64>::zeros(m, x.nrows());
    if m == 0 {
        return r;
    }
    for (j, &t) in theta.iter().enumerate() {
        if j == slot || t == 0.0 {
            continue;
        }
        let t2 = t * t;
        let zj = col(z, j);
        // Plain slices, not nalgebra's strided column iterators, so the loop vectorises.
        for (rcol, &xn) in r.as_mut_slice().chunks_exact_mut(m).zip(col(x, j)) {
            for (rv, &zm) in rcol.iter_mut().zip(zj) {
                let d = xn - zm;
                *rv += t2 * d * d;
            }
        }
    }
    r
}
}

/// Minibatch rows per block of work (fixed, so the split never depends on the thread count).
pub const ROWS_PER_BLOCK: usize = 16;

/// The s-independent parts of K(Z, u_t), computed once per evaluation and shared by every block:
/// the linear part's Σ_{j≠slot} θ̃_j z_mj x_nj and each stationary part's R_c (both M × b).
pub struct LatentObserved<'a> {
    z: &'a DMatrix<f64>,
    x: &'a DMatrix<f64>,
    slot: usize,
    /// The S × b draws.
    w: &'a DMatrix<f64>,
    /// The masked linear variances and the observed linear part.
    linear: Option<(Vec<f64>, DMatrix<f64>)>,
    parts: Vec<ObservedPart>,
}

struct ObservedPart {
    /// The masked precisions θ̃^c.
    theta: Vec<f64>,
    r_obs: DMatrix<f64>,
}

/// K(Z, u_t) for one block of minibatch rows (columns t = (n − n0)·S + s), with what its backward
/// pass needs: each stationary part's κ_c, ∂κ_c/∂r² and (RQ) ∂κ_c/∂a per entry.
pub struct LatentBlock {
    pub n0: usize,
    pub rows: usize,
    /// M × (S·rows).
    pub k: DMatrix<f64>,
    parts: Vec<PartValues>,
}

/// One block's gradients: the kernel's, ∂L/∂Z (M × D) and ∂L/∂w_sn (S × rows).
pub struct LatentBlockGrad {
    pub kernel: KernelGrad,
    pub z: DMatrix<f64>,
    pub draws: DMatrix<f64>,
}

/// One block's columns: rows n0..n0 + rows of the minibatch, all S samples of each.
#[derive(Clone, Copy)]
struct BlockColumns<'a> {
    m: usize,
    samples: usize,
    n0: usize,
    rows: usize,
    z_slot: &'a [f64],
    /// w_sn at `w[s + n·S]` (column-major S × b, all rows).
    w: &'a [f64],
}

impl BlockColumns<'_> {
    /// (local column, row n, w_sn) for the block's evaluation points, in column order
    /// (local column (n − n0)·S + s).
    fn points(&self) -> impl Iterator<Item = (usize, usize, f64)> + '_ {
        (0..self.rows).flat_map(move |r| {
            let n = self.n0 + r;
            (0..self.samples).map(move |s| (r * self.samples + s, n, self.w[s + n * self.samples]))
        })
    }
}

vectorised! {
/// One stationary part's forward pass over the block's columns: K[:, t] += s·κ(r²), and what the
/// backward pass needs kept per entry: κ, κ′ and (RQ) ∂κ/∂a, with (1, 0, 0) at r² ≤ 0.
fn stationary_forward(part: PartForward, lay: BlockColumns, k: &mut [f64], kept: &mut KeptSlots) {
    // Fused multiply-adds where this version's target has them (same accuracy bound).
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        match part.kind {
            StationaryKind::SquaredExponential => forward_columns::<Se, true>(part, lay, k, kept),
            StationaryKind::Matern12 => forward_columns::<M12, true>(part, lay, k, kept),
            StationaryKind::Matern32 => forward_columns::<M32, true>(part, lay, k, kept),
            StationaryKind::RationalQuadratic => forward_columns::<Rq, true>(part, lay, k, kept),
        }
    } else {
        match part.kind {
            StationaryKind::SquaredExponential => forward_columns::<Se, false>(part, lay, k, kept),
            StationaryKind::Matern12 => forward_columns::<M12, false>(part, lay, k, kept),
            StationaryKind::Matern32 => forward_columns::<M32, false>(part, lay, k, kept),
            StationaryKind::RationalQuadratic => forward_columns::<Rq, false>(part, lay, k, kept),
        }
    }
}
}

/// One stationary part as its forward pass over a block sees it.
#[derive(Clone, Copy)]
struct PartForward<'a> {
    kind: StationaryKind,
    /// s^c.
    variance: f64,
    /// The rational quadratic's a (unused by the other kinds).
    alpha: f64,
    /// θ̃_i², the latent slot's squared precision.
    slot_precision_sq: f64,
    /// R_c, the observed part of r² (M × b).
    r_obs: &'a [f64],
}

#[inline(always)]
fn forward_columns<S: Shape, const FMA: bool>(
    part: PartForward,
    lay: BlockColumns,
    k: &mut [f64],
    kept: &mut KeptSlots,
) {
    let PartForward {
        variance,
        alpha,
        slot_precision_sq,
        r_obs,
        ..
    } = part;
    let m = lay.m;
    let has_alpha = S::KIND == StationaryKind::RationalQuadratic;
    for (t, n, wsn) in lay.points() {
        let ro = &r_obs[n * m..(n + 1) * m];
        let kc = &mut k[t * m..(t + 1) * m];
        let vc = &mut kept.value[t * m..(t + 1) * m];
        let sc = &mut kept.slope[t * m..(t + 1) * m];
        // Only the rational quadratic keeps ∂κ/∂a; the others get an empty slice, never touched
        // (the branch is on a constant, so each kind's loop has none).
        let ac: &mut [MaybeUninit<f64>] = if has_alpha {
            &mut kept.dalpha[t * m..(t + 1) * m]
        } else {
            &mut []
        };
        for i in 0..m {
            let d = wsn - lay.z_slot[i];
            let r2 = ro[i] + slot_precision_sq * d * d;
            let (v, dv, da) = cell::<S, FMA>(r2, alpha);
            kc[i] += variance * v;
            vc[i] = MaybeUninit::new(v);
            sc[i] = MaybeUninit::new(dv);
            if has_alpha {
                ac[i] = MaybeUninit::new(da);
            }
        }
    }
}

/// What one stationary part's forward pass keeps for its backward pass, per entry of the block
/// (M × S·rows, column-major): κ, κ′ = ∂κ/∂r² and, for the rational quadratic only (else empty),
/// ∂κ/∂a. Keeping them costs memory but saves the backward pass every exponential, square root,
/// logarithm and division.
struct PartValues {
    value: Vec<f64>,
    slope: Vec<f64>,
    dalpha: Vec<f64>,
}

/// [`PartValues`]' storage before the forward pass writes it: every slot is written exactly once
/// (the loops cover every column and row of the block), so it is never zeroed first; zeroing
/// was 4 % of the bound's time at (M, b, S, D) = (50, 128, 10, 5).
struct KeptSlots<'a> {
    value: &'a mut [MaybeUninit<f64>],
    slope: &'a mut [MaybeUninit<f64>],
    dalpha: &'a mut [MaybeUninit<f64>],
}

impl PartValues {
    /// One stationary part's forward pass over the block ([`stationary_forward`]): adds s·κ to
    /// `k` and returns what it keeps, in storage it writes once and never zeroes.
    fn forward(part: PartForward, lay: BlockColumns, k: &mut [f64]) -> Self {
        let entries = lay.m * lay.samples * lay.rows;
        assert_eq!(k.len(), entries, "K covers the block");
        let alpha_entries = if part.kind == StationaryKind::RationalQuadratic {
            entries
        } else {
            0
        };
        let mut value = Vec::with_capacity(entries);
        let mut slope = Vec::with_capacity(entries);
        let mut dalpha = Vec::with_capacity(alpha_entries);
        stationary_forward(
            part,
            lay,
            k,
            &mut KeptSlots {
                value: &mut value.spare_capacity_mut()[..entries],
                slope: &mut slope.spare_capacity_mut()[..entries],
                dalpha: &mut dalpha.spare_capacity_mut()[..alpha_entries],
            },
        );
        // SAFETY: `stationary_forward`'s loops run over every column t < S·rows of the block
        // (`BlockColumns::points`) and every row i < M, and write value, slope and, for the rational
        // quadratic (the only kind given ∂κ/∂a slots), ∂κ/∂a at t·M + i: every one of the
        // `entries` (and `alpha_entries`) reserved slots is initialised before the lengths are set.
        unsafe {
            value.set_len(entries);
            slope.set_len(entries);
            dalpha.set_len(alpha_entries);
        }
        PartValues {
            value,
            slope,
            dalpha,
        }
    }
}

vectorised! {
/// The linear part's forward pass: K[:, t] += O[:, n] + θ̃_i z_i w_sn, with O the observed part.
fn linear_forward(obs: &[f64], slot_theta: f64, lay: BlockColumns, k: &mut [f64]) {
    let m = lay.m;
    for (t, n, wsn) in lay.points() {
        let oc = &obs[n * m..(n + 1) * m];
        let kc = &mut k[t * m..(t + 1) * m];
        for ((kv, &o), &zm) in kc.iter_mut().zip(oc).zip(lay.z_slot) {
            *kv += o + slot_theta * zm * wsn;
        }
    }
}
}

/// Sums of one stationary part's backward pass (see [`stationary_backward`]).
#[derive(Default, Clone, Copy)]
struct PartSums {
    variance: f64,
    alpha: f64,
    slot_precision: f64,
}

vectorised! {
/// One stationary part's backward pass over the block's columns, with G = K̄ ∘ s·κ′ and
/// δ = w_sn − z_mi: E[:, n] += Σ_s G[:, (s,n)], ∂Z[:, i] −= 2θ̃_i² Σ_t G δ, ∂w_sn += 2θ̃_i² Σ_m G δ,
/// and the sums ∂s = Σ K̄ κ, ∂a = s Σ K̄ ∂κ/∂a (RQ), ∂θ_i = 2θ̃_i Σ G δ², from the values the
/// forward pass kept.
#[allow(clippy::too_many_arguments)]
fn stationary_backward(
    variance: f64,
    slot_theta: f64,
    lay: BlockColumns,
    kept: &PartValues,
    k_bar: &[f64],
    e_sum: &mut [f64],
    dz_slot: &mut [f64],
    dw: &mut [f64],
) -> PartSums {
    let args = (variance, slot_theta, lay, kept, k_bar);
    if kept.dalpha.is_empty() {
        backward_columns::<false>(args, e_sum, dz_slot, dw)
    } else {
        backward_columns::<true>(args, e_sum, dz_slot, dw)
    }
}
}

type BackwardArgs<'a> = (f64, f64, BlockColumns<'a>, &'a PartValues, &'a [f64]);

#[inline(always)]
fn backward_columns<const HAS_ALPHA: bool>(
    (variance, slot_theta, lay, kept, k_bar): BackwardArgs,
    e_sum: &mut [f64],
    dz_slot: &mut [f64],
    dw: &mut [f64],
) -> PartSums {
    let m = lay.m;
    let ts2 = slot_theta * slot_theta;
    // The global sums accumulate per row m (element-wise, so the loop vectorises) and are reduced
    // once at the end: Σ K̄κ, Σ K̄ ∂κ/∂a, Σ G δ². G δ is kept per row for the per-column ∂w.
    let mut row_var = vec![0.0; m];
    let mut row_alpha = vec![0.0; m];
    let mut row_theta = vec![0.0; m];
    let mut g_delta = vec![0.0; m];
    let dz_slot = &mut dz_slot[..m];
    for (t, n, wsn) in lay.points() {
        let vc = &kept.value[t * m..(t + 1) * m];
        let sc = &kept.slope[t * m..(t + 1) * m];
        let ac: &[f64] = if HAS_ALPHA {
            &kept.dalpha[t * m..(t + 1) * m]
        } else {
            &[]
        };
        let kb = &k_bar[t * m..(t + 1) * m];
        let r = n - lay.n0;
        let es = &mut e_sum[r * m..(r + 1) * m];
        for i in 0..m {
            let delta = wsn - lay.z_slot[i];
            row_var[i] += kb[i] * vc[i];
            if HAS_ALPHA {
                row_alpha[i] += kb[i] * ac[i];
            }
            // κ′ is exactly 0 at r² = 0 (the branch), so coincident points add nothing.
            let g = kb[i] * variance * sc[i];
            es[i] += g;
            row_theta[i] += g * delta * delta;
            g_delta[i] = g * delta;
            dz_slot[i] -= g * 2.0 * ts2 * delta;
        }
        dw[t] += 2.0 * ts2 * lane_sum(m, |i| g_delta[i]);
    }
    PartSums {
        variance: lane_sum(m, |i| row_var[i]),
        alpha: variance * lane_sum(m, |i| row_alpha[i]),
        slot_precision: 2.0 * slot_theta * lane_sum(m, |i| row_theta[i]),
    }
}

vectorised! {
/// The observed dimensions' backward pass of one stationary part over a block of rows: with E the
/// sample-summed G (M × rows), ∂θ_j += 2θ̃_j Σ E (x_nj − z_mj)² and ∂Z[:, j] −= 2θ̃_j² Σ_n E
/// (x_nj − z_mj), for every j ≠ slot with θ̃_j ≠ 0.
#[allow(clippy::too_many_arguments)]
fn observed_backward(
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    theta: &[f64],
    slot: usize,
    n0: usize,
    e_sum: &[f64],
    dz: &mut DMatrix<f64>,
    d_theta: &mut [f64],
) {
    let m = z.nrows();
    for (j, &tj) in theta.iter().enumerate() {
        if j == slot || tj == 0.0 {
            continue;
        }
        let zj = col(z, j);
        let xj = col(x, j);
        let dzj = &mut dz.as_mut_slice()[j * m..(j + 1) * m];
        let mut g = 0.0;
        for (r, es) in e_sum.chunks_exact(m).enumerate() {
            let xn = xj[n0 + r];
            g += lane_sum(m, |i| {
                let delta = xn - zj[i];
                es[i] * delta * delta
            });
            for ((d, &e), &zm) in dzj.iter_mut().zip(es).zip(zj) {
                *d -= e * 2.0 * tj * tj * (xn - zm);
            }
        }
        d_theta[j] += 2.0 * tj * g;
    }
}
}

vectorised! {
/// The linear part's backward pass over a block: through the latent column (with ⟨·⟩ over m,
/// ∂θ_i = Σ_t ⟨K̄_t, z_i⟩ w_t, ∂w_t += θ̃_i ⟨K̄_t, z_i⟩, ∂Z[:, i] += θ̃_i Σ_t K̄_t w_t) and through the
/// observed ones (with Ē[:, n] = Σ_s K̄[:, (n,s)]: ∂θ_j = Σ Ē z_mj x_nj, ∂Z[:, j] += θ̃_j Σ_n Ē x_nj).
#[allow(clippy::too_many_arguments)]
fn linear_backward(
    kernel_mask: &[f64],
    theta: &[f64],
    z: &DMatrix<f64>,
    x: &DMatrix<f64>,
    slot: usize,
    lay: BlockColumns,
    k_bar: &[f64],
    d_theta: &mut [f64],
    dz: &mut DMatrix<f64>,
    dz_slot: &mut [f64],
    dw: &mut [f64],
) {
    let m = lay.m;
    if kernel_mask[slot] != 0.0 {
        let ts = theta[slot];
        let mut g = 0.0;
        for (t, _, wsn) in lay.points() {
            let kb = &k_bar[t * m..(t + 1) * m];
            let dot = lane_sum(m, |i| kb[i] * lay.z_slot[i]);
            g += dot * wsn;
            dw[t] += ts * dot;
            for (d, &kv) in dz_slot.iter_mut().zip(kb) {
                *d += ts * kv * wsn;
            }
        }
        d_theta[slot] += g;
    }
    // Ē for the block's rows.
    let mut k_bar_sum = vec![0.0; m * lay.rows];
    for (t, n, _) in lay.points() {
        let r = n - lay.n0;
        for (e, &kv) in k_bar_sum[r * m..(r + 1) * m]
            .iter_mut()
            .zip(&k_bar[t * m..(t + 1) * m])
        {
            *e += kv;
        }
    }
    for (j, &tj) in theta.iter().enumerate() {
        if j == slot || kernel_mask[j] == 0.0 {
            continue;
        }
        let (zj, xj) = (col(z, j), col(x, j));
        let dzj = &mut dz.as_mut_slice()[j * m..(j + 1) * m];
        let mut g = 0.0;
        for (r, es) in k_bar_sum.chunks_exact(m).enumerate() {
            let xn = xj[lay.n0 + r];
            g += xn * lane_sum(m, |i| es[i] * zj[i]);
            for (d, &e) in dzj.iter_mut().zip(es) {
                *d += tj * e * xn;
            }
        }
        d_theta[j] += g;
    }
}
}

impl Kernel {
    /// The s-independent parts of K(Z, u_t) for the minibatch `x` (b × D) whose column `slot`
    /// holds the S × b draws `w` (u_(n·S+s) is row n of `x` with column `slot` set to w_sn).
    pub fn latent_observed<'a>(
        &self,
        z: &'a DMatrix<f64>,
        x: &'a DMatrix<f64>,
        slot: usize,
        w: &'a DMatrix<f64>,
    ) -> LatentObserved<'a> {
        self.check_points(z);
        self.check_points(x);
        assert_eq!(w.ncols(), x.nrows(), "one draw column per minibatch row");
        let (m, b) = (z.nrows(), x.nrows());
        let linear = self.linear.as_ref().map(|lin| {
            let theta = self.masked(lin);
            let mut obs = DMatrix::<f64>::zeros(m, b);
            for (j, &t) in theta.iter().enumerate() {
                if j == slot || self.mask[j] == 0.0 {
                    continue;
                }
                add_scaled_outer(obs.as_mut_slice(), col(z, j), col(x, j), t);
            }
            (theta, obs)
        });
        let parts = self
            .stationary
            .iter()
            .map(|p| {
                let theta = self.masked(&p.precision);
                let r_obs = observed_sq_dist(z, x, &theta, slot);
                ObservedPart { theta, r_obs }
            })
            .collect();
        LatentObserved {
            z,
            x,
            slot,
            w,
            linear,
            parts,
        }
    }

    /// K(Z, u_t) for the block of `rows` minibatch rows from `n0`, keeping the per-part slopes
    /// for [`Kernel::latent_block_backward`].
    pub fn latent_block(&self, obs: &LatentObserved, n0: usize, rows: usize) -> LatentBlock {
        let (m, samples) = (obs.z.nrows(), obs.w.nrows());
        assert!(
            n0 + rows <= obs.x.nrows(),
            "the block lies inside the minibatch"
        );
        let lay = obs.layout(n0, rows);
        let mut k = DMatrix::<f64>::zeros(m, samples * rows);
        if let Some((theta, lin_obs)) = &obs.linear {
            linear_forward(lin_obs.as_slice(), theta[obs.slot], lay, k.as_mut_slice());
        }
        let parts = self
            .stationary
            .iter()
            .zip(&obs.parts)
            .map(|(part, op)| {
                let part = PartForward {
                    kind: part.kind,
                    variance: part.variance,
                    alpha: part.shape(),
                    slot_precision_sq: op.theta[obs.slot] * op.theta[obs.slot],
                    r_obs: op.r_obs.as_slice(),
                };
                PartValues::forward(part, lay, k.as_mut_slice())
            })
            .collect();
        LatentBlock { n0, rows, k, parts }
    }

    /// The backward pass of one block: given K̄ = ∂L/∂K for its columns (M × S·rows), the kernel
    /// gradient, ∂L/∂Z and ∂L/∂w_sn of its rows. Summed over the blocks, the same as
    /// [`Kernel::cross_backward`] on the expanded points (the point gradient restricted to the
    /// latent column).
    pub fn latent_block_backward(
        &self,
        obs: &LatentObserved,
        block: &LatentBlock,
        k_bar: &DMatrix<f64>,
    ) -> LatentBlockGrad {
        let (m, samples, d, slot) = (obs.z.nrows(), obs.w.nrows(), self.dim(), obs.slot);
        assert_eq!(k_bar.shape(), block.k.shape(), "K̄ has K's shape");
        let lay = obs.layout(block.n0, block.rows);
        let mut grad = self.new_zeroed_grad();
        let mut dz = DMatrix::zeros(m, d);
        let mut dz_slot = vec![0.0; m];
        let mut dw = DMatrix::zeros(samples, block.rows);
        if let (Some((theta, _)), Some(glin)) = (&obs.linear, grad.linear.as_mut()) {
            linear_backward(
                &self.mask,
                theta,
                obs.z,
                obs.x,
                slot,
                lay,
                k_bar.as_slice(),
                glin,
                &mut dz,
                &mut dz_slot,
                dw.as_mut_slice(),
            );
        }
        for (c, (part, op)) in self.stationary.iter().zip(&obs.parts).enumerate() {
            let mut e_sum = vec![0.0; m * block.rows]; // E_c[:, n] = Σ_s G[:, (n,s)]
            let sums = stationary_backward(
                part.variance,
                op.theta[slot],
                lay,
                &block.parts[c],
                k_bar.as_slice(),
                &mut e_sum,
                &mut dz_slot,
                dw.as_mut_slice(),
            );
            let gpart = &mut grad.stationary[c];
            observed_backward(
                obs.z,
                obs.x,
                &op.theta,
                slot,
                block.n0,
                &e_sum,
                &mut dz,
                &mut gpart.precision,
            );
            gpart.variance += sums.variance;
            if let Some(alpha) = gpart.alpha.as_mut() {
                *alpha += sums.alpha;
            }
            gpart.precision[slot] += sums.slot_precision;
        }
        // Gradients are with respect to the unmasked θ: θ̃ = Eθ.
        if let Some(glin) = grad.linear.as_mut() {
            glin.iter_mut().zip(&self.mask).for_each(|(g, e)| *g *= e);
        }
        for gpart in &mut grad.stationary {
            gpart
                .precision
                .iter_mut()
                .zip(&self.mask)
                .for_each(|(g, e)| *g *= e);
        }
        for (dst, v) in dz.column_mut(slot).iter_mut().zip(&dz_slot) {
            *dst += v;
        }
        LatentBlockGrad {
            kernel: grad,
            z: dz,
            draws: dw,
        }
    }

    /// K(Z, u_t), `M × (S·b)`, where u_(n·S+s) is row n of `x` with column `slot` replaced by
    /// `w[(s, n)]` (`w` is S × b). Same values as [`Kernel::cross`]`(z, u)`.
    pub fn cross_latent(
        &self,
        z: &DMatrix<f64>,
        x: &DMatrix<f64>,
        slot: usize,
        w: &DMatrix<f64>,
    ) -> DMatrix<f64> {
        let obs = self.latent_observed(z, x, slot, w);
        let blocks = split_map(obs.block_starts(), |(n0, rows)| {
            self.latent_block(&obs, n0, rows).k
        });
        let mut k = DMatrix::zeros(z.nrows(), w.nrows() * x.nrows());
        let mut t0 = 0;
        for blk in blocks {
            k.columns_mut(t0, blk.ncols()).copy_from(&blk);
            t0 += blk.ncols();
        }
        k
    }

    /// Backward of [`Kernel::cross_latent`]: given K̄ = ∂L/∂K (M × S·b), the kernel gradient,
    /// ∂L/∂Z (M × D) and ∂L/∂w (S × b), block by block over the caller's pool, combined in block
    /// order. Same results as [`Kernel::cross_backward`] on the expanded points (restricted to the
    /// latent column for the point gradient).
    pub fn cross_latent_backward(
        &self,
        z: &DMatrix<f64>,
        x: &DMatrix<f64>,
        slot: usize,
        w: &DMatrix<f64>,
        k_bar: &DMatrix<f64>,
    ) -> (KernelGrad, DMatrix<f64>, DMatrix<f64>) {
        let samples = w.nrows();
        let obs = self.latent_observed(z, x, slot, w);
        let blocks = split_map(obs.block_starts(), |(n0, rows)| {
            let block = self.latent_block(&obs, n0, rows);
            let k_bar_block = k_bar.columns(n0 * samples, rows * samples).into_owned();
            self.latent_block_backward(&obs, &block, &k_bar_block)
        });
        let mut grad = self.new_zeroed_grad();
        let mut dz = DMatrix::zeros(z.nrows(), self.dim());
        let mut dw = DMatrix::zeros(samples, x.nrows());
        let mut n0 = 0;
        for blk in blocks {
            grad.add_assign(&blk.kernel);
            dz += &blk.z;
            dw.columns_mut(n0, blk.draws.ncols()).copy_from(&blk.draws);
            n0 += blk.draws.ncols();
        }
        (grad, dz, dw)
    }
}

impl LatentObserved<'_> {
    /// The blocks (first row, rows) that cover the minibatch.
    pub fn block_starts(&self) -> Vec<(usize, usize)> {
        let b = self.x.nrows();
        (0..b)
            .step_by(ROWS_PER_BLOCK)
            .map(|n0| (n0, ROWS_PER_BLOCK.min(b - n0)))
            .collect()
    }

    fn layout(&self, n0: usize, rows: usize) -> BlockColumns<'_> {
        BlockColumns {
            m: self.z.nrows(),
            samples: self.w.nrows(),
            n0,
            rows,
            z_slot: col(self.z, self.slot),
            w: self.w.as_slice(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::StationaryPart;
    use super::*;

    /// u_t = x_n with the slot set to w_sn, t = n·S + s.
    fn expand(x: &DMatrix<f64>, slot: usize, w: &DMatrix<f64>) -> DMatrix<f64> {
        let (b, samples) = (x.nrows(), w.nrows());
        let mut u = DMatrix::zeros(samples * b, x.ncols());
        for s in 0..samples {
            for n in 0..b {
                u.row_mut(n * samples + s).copy_from(&x.row(n));
                u[(n * samples + s, slot)] = w[(s, n)];
            }
        }
        u
    }

    fn kernel(d: usize, mask: Vec<f64>) -> Kernel {
        Kernel {
            linear: Some((0..d).map(|j| 0.3 + 0.1 * j as f64).collect()),
            stationary: StationaryKind::ALL
                .iter()
                .enumerate()
                .map(|(c, &kind)| {
                    StationaryPart::new(
                        kind,
                        0.5 + 0.3 * c as f64,
                        (0..d).map(|j| 0.4 + 0.15 * (j + c) as f64).collect(),
                        1.7,
                    )
                })
                .collect(),
            mask,
        }
    }

    /// Inputs on a coarse grid, so some evaluation points coincide with inducing points exactly
    /// (r² = 0, the branch), others are near and far; m = 11 exercises the lane remainder and
    /// b = 37 rows three blocks, the last one partial.
    fn problem(d: usize) -> (DMatrix<f64>, DMatrix<f64>, DMatrix<f64>, DMatrix<f64>) {
        let grid = |k: usize| (k % 5) as f64 * 0.5 - 1.0;
        let z = DMatrix::from_fn(11, d, |i, j| grid(i * 3 + j));
        let mut x = DMatrix::from_fn(37, d, |i, j| grid(i * 2 + j * 3) + 0.01 * i as f64);
        x.row_mut(0).copy_from(&z.row(2));
        let mut w = DMatrix::from_fn(3, 37, |s, n| grid(s + 2 * n) + 0.1 * s as f64);
        w[(0, 0)] = z[(2, 1)]; // u_0 = z_2 exactly (slot 1)
        let k_bar = DMatrix::from_fn(11, 111, |i, t| ((i * 7 + t * 3) % 13) as f64 / 6.0 - 1.0);
        (z, x, w, k_bar)
    }

    /// Splitting the work over threads changes no bit of the results.
    #[test]
    fn the_results_do_not_depend_on_the_thread_count() {
        let kern = kernel(4, vec![1.0; 4]);
        let (z, x, w, k_bar) = problem(4);
        let run = |threads: usize| {
            crate::base::pool::Pool::new(threads).unwrap().run(|| {
                let k = kern.cross_latent(&z, &x, 1, &w);
                let (g, dz, dw) = kern.cross_latent_backward(&z, &x, 1, &w, &k_bar);
                (k, g, dz, dw)
            })
        };
        let one = run(1);
        for threads in [2, 3] {
            assert!(run(threads) == one, "{threads} threads differ from 1");
        }
    }

    #[test]
    fn the_fast_path_equals_the_dense_kernel_on_the_expanded_points() {
        for mask in [
            vec![1.0; 4],
            vec![1.0, 1.0, 0.0, 1.0],
            vec![1.0, 0.0, 1.0, 1.0],
        ] {
            let kern = kernel(4, mask.clone());
            let (z, x, w, k_bar) = problem(4);
            let slot = 1;
            let u = expand(&x, slot, &w);
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-13 * (1.0 + a.abs().max(b.abs()));

            let fast = kern.cross_latent(&z, &x, slot, &w);
            let dense = kern.cross(&z, &u);
            for (a, b) in fast.iter().zip(dense.iter()) {
                assert!(close(*a, *b), "mask {mask:?}: K {a} vs {b}");
            }

            let (g_fast, dz_fast, dw_fast) = kern.cross_latent_backward(&z, &x, slot, &w, &k_bar);
            let (g_dense, dz_dense, du_dense) = kern.cross_backward(&z, &u, &k_bar);
            for (a, b) in g_fast.to_vec().iter().zip(g_dense.to_vec()) {
                assert!(close(*a, b), "mask {mask:?}: kernel gradient {a} vs {b}");
            }
            for (a, b) in dz_fast.iter().zip(dz_dense.iter()) {
                assert!(close(*a, *b), "mask {mask:?}: dZ {a} vs {b}");
            }
            for s in 0..w.nrows() {
                for n in 0..x.nrows() {
                    let (a, b) = (dw_fast[(s, n)], du_dense[(n * w.nrows() + s, slot)]);
                    assert!(close(a, b), "mask {mask:?}: dw[{s},{n}] {a} vs {b}");
                }
            }
        }
    }
}
