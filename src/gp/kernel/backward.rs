//! Adjoints of the dense kernel matrices (GPy's `update_gradients_full` shape): given dL/dK,
//! return dL/d(hyperparameters) and dL/d(inputs). Per stationary part the elementwise
//! G = dL/dK ∘ s ∂κ/∂r² is formed once and then contracted with Δ² (precisions) and Δ (inputs),
//! one pass over the n × m pairs per active dimension: O(n m D) per part.

use nalgebra::{DMatrix, DVector};

use super::dense::{col, scaled_sq_dist};
use super::shapes::backward_values;
use super::{Kernel, KernelGrad};
use crate::base::pool::split_map;
use crate::gp::lane_math::{lane_sum, vectorised};

impl Kernel {
    /// Adjoint of [`Kernel::cross`]: for L with dL/dK(a, b) = `dk` (n×m), returns
    /// (dL/dθ, dL/da (n×D), dL/db (m×D)) by the chain rule through
    /// - ∂k_lin/∂θ^lin_j = E_j a_pj b_qj, ∂k_lin/∂a_pj = θ̃^lin_j b_qj;
    /// - ∂k_c/∂s^c = κ_c; ∂k_c/∂r² = s^c ∂κ_c/∂r² (see [`super::unit_value_and_dr2`]);
    /// - ∂r²/∂θ^c_j = 2 E_j θ̃^c_j Δ_j², ∂r²/∂a_pj = −∂r²/∂b_qj = 2 (θ̃^c_j)² Δ_j,
    ///   with Δ_j = a_pj − b_qj;
    /// - ∂k_rq/∂a = s κ_rq [r²/(2a + r²) − ln(1 + r²/(2a))].
    ///
    /// Pairs with r² = 0 contribute exactly 0 through r²; masked dimensions get exactly 0.
    pub fn cross_backward(
        &self,
        a: &DMatrix<f64>,
        b: &DMatrix<f64>,
        dk: &DMatrix<f64>,
    ) -> (KernelGrad, DMatrix<f64>, DMatrix<f64>) {
        self.check_points(a);
        self.check_points(b);
        let (n, m, d) = (a.nrows(), b.nrows(), self.dim());
        assert_eq!(dk.shape(), (n, m), "dL/dK must be n × m");
        let mut grad = self.new_zeroed_grad();
        let mut da = DMatrix::zeros(n, d);
        let mut db = DMatrix::zeros(m, d);

        if let (Some(lin), Some(glin)) = (&self.linear, grad.linear.as_mut()) {
            let (dk_b, dkt_a) = (dk * b, dk.tr_mul(a));
            for (j, t) in self.masked(lin).into_iter().enumerate() {
                if self.mask[j] == 0.0 {
                    continue;
                }
                let g: f64 = col(a, j)
                    .iter()
                    .zip(col(&dk_b, j))
                    .map(|(x, y)| x * y)
                    .sum();
                glin[j] = self.mask[j] * g;
                da.column_mut(j).axpy(t, &dk_b.column(j), 1.0);
                db.column_mut(j).axpy(t, &dkt_a.column(j), 1.0);
            }
        }

        // The parts are independent: spread over the caller's pool, combined in part order.
        let parts = split_map(self.stationary.iter().collect(), |part| {
            let theta = self.masked(&part.precision);
            let r2 = scaled_sq_dist(a, b, &theta);
            let (s, alpha) = (part.variance, part.shape());
            let mut g = DMatrix::zeros(n, m);
            let (dvar, da_sum) = backward_values(
                part.kind,
                s,
                alpha,
                r2.as_slice(),
                dk.as_slice(),
                g.as_mut_slice(),
            );
            let mut share = PartShare {
                variance: dvar,
                alpha: part.alpha.map(|_| s * da_sum),
                precision: vec![0.0; d],
                da: DMatrix::zeros(n, d),
                db: DMatrix::zeros(m, d),
            };
            contract(
                &g,
                a,
                b,
                &theta,
                &self.mask,
                &mut share.precision,
                &mut share.da,
                &mut share.db,
            );
            share
        });
        for (share, pgrad) in parts.iter().zip(&mut grad.stationary) {
            pgrad.variance = share.variance;
            pgrad.precision.copy_from_slice(&share.precision);
            pgrad.alpha = share.alpha;
            da += &share.da;
            db += &share.db;
        }
        (grad, da, db)
    }

    /// Adjoint of [`Kernel::gram`]: `dk` (n×n, need not be symmetric) is dL/dK(a, a); `a` sits in
    /// both slots, so dL/da = dL/da|slot 1 + dL/da|slot 2 of [`Kernel::cross_backward`]. The exact
    /// diagonal has the same derivative as the cross form (no r-dependence, ∂/∂a_pj of
    /// θ̃^lin_j a_pj² = 2 θ̃^lin_j a_pj).
    pub fn gram_backward(&self, a: &DMatrix<f64>, dk: &DMatrix<f64>) -> (KernelGrad, DMatrix<f64>) {
        let (grad, da, db) = self.cross_backward(a, a, dk);
        (grad, da + db)
    }

    /// Adjoint of [`Kernel::diag`]: with dL/dk(a_p, a_p) = `dkdiag`,
    /// dL/dθ^lin_j = E_j Σ_p dkdiag_p a_pj², dL/da_pj = 2 θ̃^lin_j a_pj dkdiag_p,
    /// dL/ds^c = Σ_p dkdiag_p; precisions and a get 0 (the diagonal has r = 0).
    pub fn diag_backward(
        &self,
        a: &DMatrix<f64>,
        dkdiag: &DVector<f64>,
    ) -> (KernelGrad, DMatrix<f64>) {
        self.check_points(a);
        assert_eq!(
            dkdiag.len(),
            a.nrows(),
            "dL/ddiag must have one entry per point"
        );
        let mut grad = self.new_zeroed_grad();
        let mut da = DMatrix::zeros(a.nrows(), self.dim());
        if let (Some(lin), Some(glin)) = (&self.linear, grad.linear.as_mut()) {
            for (j, t) in self.masked(lin).into_iter().enumerate() {
                if self.mask[j] == 0.0 {
                    continue;
                }
                let mut g = 0.0;
                for ((dap, &ap), &w) in da
                    .column_mut(j)
                    .iter_mut()
                    .zip(col(a, j))
                    .zip(dkdiag.iter())
                {
                    g += w * ap * ap;
                    *dap = 2.0 * t * ap * w;
                }
                glin[j] = self.mask[j] * g;
            }
        }
        let total = dkdiag.sum();
        grad.stationary.iter_mut().for_each(|p| p.variance = total);
        (grad, da)
    }

    /// The parameter half of [`Kernel::diag_backward`] when every point has the same weight
    /// dL/dk(a_p, a_p) = `weight`, from each column's sum of squares `squares[j]` = Σ_p a_pj²
    /// over `points` points: dL/dθ^lin_j = E_j · weight · squares[j], dL/ds^c = weight · points,
    /// the precisions 0. O(D) where the dense form is O(points · D): the uncollapsed bound's
    /// k_tt adjoint has weight g_var for all T = S·b points, whose column sums the host forms
    /// from the b rows (each repeated S times) without building the points.
    pub fn diag_gradient(&self, squares: &[f64], points: usize, weight: f64) -> KernelGrad {
        assert_eq!(squares.len(), self.dim(), "one sum of squares per input");
        let mut grad = self.new_zeroed_grad();
        if let Some(glin) = grad.linear.as_mut() {
            for (j, g) in glin.iter_mut().enumerate() {
                if self.mask[j] != 0.0 {
                    *g = self.mask[j] * weight * squares[j];
                }
            }
        }
        let total = weight * points as f64;
        grad.stationary.iter_mut().for_each(|p| p.variance = total);
        grad
    }
}

/// One stationary part's share of [`Kernel::cross_backward`].
struct PartShare {
    variance: f64,
    alpha: Option<f64>,
    precision: Vec<f64>,
    da: DMatrix<f64>,
    db: DMatrix<f64>,
}

/// Contracts G (= dL/dK ∘ ∂k/∂r²) with the distance derivatives, per active dimension j:
/// dL/dθ_j = 2 E_j θ̃_j Σ_pq G_pq Δ_pqj², dL/da_pj += 2 θ̃_j² Σ_q G_pq Δ_pqj,
/// dL/db_qj −= 2 θ̃_j² Σ_p G_pq Δ_pqj. Dimensions with θ̃_j = 0 contribute exactly 0.
#[allow(clippy::too_many_arguments)]
fn contract(
    g: &DMatrix<f64>,
    a: &DMatrix<f64>,
    b: &DMatrix<f64>,
    theta: &[f64],
    mask: &[f64],
    dtheta: &mut [f64],
    da: &mut DMatrix<f64>,
    db: &mut DMatrix<f64>,
) {
    let (n, m) = (a.nrows(), b.nrows());
    if n == 0 || m == 0 {
        return;
    }
    let mut scratch = ContractScratch {
        ga: vec![0.0; n],
        sq_rows: vec![0.0; n],
        w: vec![0.0; n],
    };
    for (j, &t) in theta.iter().enumerate().filter(|(_, &t)| t != 0.0) {
        let scale = 2.0 * t * t;
        let dbj = &mut db.as_mut_slice()[j * m..(j + 1) * m];
        let sq = contract_dimension(g.as_slice(), col(a, j), col(b, j), scale, dbj, &mut scratch);
        dtheta[j] = mask[j] * 2.0 * t * sq;
        da.column_mut(j)
            .iter_mut()
            .zip(&scratch.ga)
            .for_each(|(x, y)| *x += scale * y);
    }
}

/// Per-row buffers of [`contract_dimension`], allocated once per [`contract`].
struct ContractScratch {
    /// Σ_q G_pq Δ_pq.
    ga: Vec<f64>,
    /// Σ_q G_pq Δ_pq², reduced to one sum at the end.
    sq_rows: Vec<f64>,
    /// One column's G_pq Δ_pq, reduced for dL/db_q.
    w: Vec<f64>,
}

vectorised! {
/// One dimension of [`contract`] over plain slices: fills `ga` with Σ_q G_pq Δ_pq, subtracts
/// `scale`·Σ_p G_pq Δ_pq from `dbj`, and returns Σ_pq G_pq Δ_pq² (row sums, then 8 lanes, in a fixed
/// order), so every loop vectorises.
fn contract_dimension(
    g: &[f64],
    aj: &[f64],
    bj: &[f64],
    scale: f64,
    dbj: &mut [f64],
    scratch: &mut ContractScratch,
) -> f64 {
    let n = aj.len();
    let ContractScratch { ga, sq_rows, w } = scratch;
    ga.fill(0.0);
    sq_rows.fill(0.0);
    for ((gcol, &bq), dbq) in g.chunks_exact(n).zip(bj).zip(dbj.iter_mut()) {
        for p in 0..n {
            let delta = aj[p] - bq;
            let wp = gcol[p] * delta;
            sq_rows[p] += wp * delta;
            ga[p] += wp;
            w[p] = wp;
        }
        *dbq -= scale * lane_sum(n, |p| w[p]);
    }
    lane_sum(n, |p| sq_rows[p])
}
}
