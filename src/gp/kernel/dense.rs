//! Dense forward matrices K(a, b), K(a, a) and diag K(a, a), and the one distance core they and
//! the backward pass share. Points are rows of an `n × D` matrix.

use nalgebra::{DMatrix, DVector};

use super::shapes::add_values;
use super::Kernel;
use crate::gp::lane_math::vectorised;

/// Column `j` of a column-major matrix as a slice.
pub(super) fn col(m: &DMatrix<f64>, j: usize) -> &[f64] {
    let n = m.nrows();
    &m.as_slice()[j * n..(j + 1) * n]
}

/// The shared distance core: r²(p, q) = Σ_j (θ̃_j a_pj − θ̃_j b_qj)², an `n × m` matrix. Dimensions
/// with θ̃_j = 0 are skipped, so a masked input never enters (not even as 0 × NaN), and points that
/// coincide in the active dimensions get r² = 0 exactly (the branch of MODEL.md §2.2).
pub(super) fn scaled_sq_dist(a: &DMatrix<f64>, b: &DMatrix<f64>, theta: &[f64]) -> DMatrix<f64> {
    let n = a.nrows();
    let mut r2 = DMatrix::zeros(n, b.nrows());
    if n == 0 {
        return r2;
    }
    let mut sa = vec![0.0; n];
    for (j, &t) in theta.iter().enumerate().filter(|(_, &t)| t != 0.0) {
        sa.iter_mut().zip(col(a, j)).for_each(|(s, x)| *s = t * x);
        add_sq_diffs(r2.as_mut_slice(), &sa, col(b, j), t);
    }
    r2
}

vectorised! {
/// out[p, q] += t·a_p·b_q for the column-major `out` (len(a) × len(b)): one dimension of a linear
/// kernel part.
pub(super) fn add_scaled_outer(out: &mut [f64], a: &[f64], b: &[f64], t: f64) {
    if a.is_empty() {
        return;
    }
    for (ocol, &bq) in out.chunks_exact_mut(a.len()).zip(b) {
        for (o, &ap) in ocol.iter_mut().zip(a) {
            *o += t * ap * bq;
        }
    }
}
}

vectorised! {
/// r2[:, q] += (sa − θ b_q)² for every column q: one dimension's share of [`scaled_sq_dist`], over
/// plain slices (nalgebra's strided column iterators do not vectorise).
fn add_sq_diffs(r2: &mut [f64], sa: &[f64], b: &[f64], t: f64) {
    for (rcol, &bq) in r2.chunks_exact_mut(sa.len()).zip(b) {
        let sb = t * bq;
        for (r, x) in rcol.iter_mut().zip(sa) {
            let d = x - sb;
            *r += d * d;
        }
    }
}
}

impl Kernel {
    /// Panics unless the points have D columns.
    pub(super) fn check_points(&self, x: &DMatrix<f64>) {
        assert_eq!(
            x.ncols(),
            self.dim(),
            "points must have one column per kernel dimension"
        );
    }

    /// The cross-covariance K(a, b), `n × m` for `a` n×D and `b` m×D:
    /// K_pq = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²(a_p, b_q)),
    /// r_c² = Σ_j (θ̃^c_j)² (a_pj − b_qj)², θ̃ = E ∘ θ.
    pub fn cross(&self, a: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
        self.check_points(a);
        self.check_points(b);
        let mut k = DMatrix::zeros(a.nrows(), b.nrows());
        if let Some(lin) = &self.linear {
            // Skip masked dimensions by E_j, not θ̃_j: their inputs must never enter.
            for (j, t) in self.masked(lin).into_iter().enumerate() {
                if self.mask[j] == 0.0 {
                    continue;
                }
                add_scaled_outer(k.as_mut_slice(), col(a, j), col(b, j), t);
            }
        }
        for part in &self.stationary {
            let r2 = scaled_sq_dist(a, b, &self.masked(&part.precision));
            add_values(
                part.kind,
                part.variance,
                part.shape(),
                r2.as_slice(),
                k.as_mut_slice(),
            );
        }
        k
    }

    /// The Gram matrix K(a, a): [`Kernel::cross`] made exactly symmetric (upper triangle mirrored)
    /// with the exact diagonal of [`Kernel::diag`], Σ_j θ̃^lin_j a_pj² + Σ_c s^c.
    pub fn gram(&self, a: &DMatrix<f64>) -> DMatrix<f64> {
        let mut k = self.cross(a, a);
        k.fill_lower_triangle_with_upper_triangle();
        k.set_diagonal(&self.diag(a));
        k
    }

    /// The diagonal k(a_p, a_p) = Σ_j θ̃^lin_j a_pj² + Σ_c s^c (r = 0 for every stationary part).
    pub fn diag(&self, a: &DMatrix<f64>) -> DVector<f64> {
        self.check_points(a);
        let mut d = DVector::zeros(a.nrows());
        if let Some(lin) = &self.linear {
            for (j, t) in self.masked(lin).into_iter().enumerate() {
                if self.mask[j] != 0.0 {
                    d.iter_mut()
                        .zip(col(a, j))
                        .for_each(|(dv, ap)| *dv += t * ap * ap);
                }
            }
        }
        // Added part by part, in the order `cross` adds them, so gram's diagonal equals cross's.
        for part in &self.stationary {
            d.add_scalar_mut(part.variance);
        }
        d
    }
}
