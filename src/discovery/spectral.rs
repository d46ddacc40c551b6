//! The spectral acyclicity penalty h(A) = |λ_max(A)| of MODEL.md §5.3, estimated by warm-started
//! power iteration (as SDCD does), with its gradient.
//!
//! Owns: the left and right power-iteration vectors, which persist between optimisation steps so a
//! few iterations per step track the dominant eigenpair as A changes slowly.

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

/// Added to every entry of A before iterating, so the iterated matrix is positive and irreducible
/// (Perron–Frobenius: a unique dominant eigenvalue with positive eigenvectors).
const POSITIVE_SHIFT: f64 = 1e-6;

/// Added to vLᵀvR in the gradient's denominator.
const DENOMINATOR_SHIFT: f64 = 1e-6;

/// The power-iteration state: the right vector vR and the left vector vL, both unit length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PowerIteration {
    right: DVector<f64>,
    left: DVector<f64>,
}

/// One estimate of the penalty and its gradient.
#[derive(Debug, Clone, PartialEq)]
pub struct SpectralEstimate {
    /// h = Σ_ij G_ij A_ij = vLᵀ A vR / (vLᵀ vR + 1e-6): the Rayleigh-quotient estimate of λ_max(A).
    pub value: f64,
    /// G = vL vRᵀ / (vLᵀ vR + 1e-6) = ∂λ_max/∂A (treated as a constant by the optimiser).
    pub gradient: DMatrix<f64>,
}

impl PowerIteration {
    /// vR = vL = 1/√D.
    pub fn new(d: usize) -> Self {
        let start = DVector::from_element(d, 1.0 / (d.max(1) as f64).sqrt());
        Self {
            right: start.clone(),
            left: start,
        }
    }

    /// The dimension D.
    pub fn dim(&self) -> usize {
        self.right.len()
    }

    /// Runs `iterations` steps of vR ← normalise(A_d vR), vL ← normalise(A_dᵀ vL) with
    /// A_d = A + 1e-6 (entry-wise), warm-started from the previous vectors, and returns
    /// h = vLᵀ A vR / (vLᵀ vR + 1e-6) and G = vL vRᵀ / (vLᵀ vR + 1e-6).
    ///
    /// A must be square, D × D, with non-negative entries (any orientation: the spectrum of A and
    /// Aᵀ is the same, and the gradient is returned in A's orientation).
    pub fn estimate(&mut self, a: &DMatrix<f64>, iterations: usize) -> SpectralEstimate {
        assert_eq!(
            (a.nrows(), a.ncols()),
            (self.dim(), self.dim()),
            "power iteration on a matrix of the wrong size"
        );
        let shifted = a.add_scalar(POSITIVE_SHIFT);
        for _ in 0..iterations {
            self.right = normalised(&shifted * &self.right);
            self.left = normalised(shifted.tr_mul(&self.left));
        }
        let denominator = self.left.dot(&self.right) + DENOMINATOR_SHIFT;
        let gradient = &self.left * self.right.transpose() / denominator;
        let value = gradient.component_mul(a).sum();
        SpectralEstimate { value, gradient }
    }
}

/// The 2-cycle penalty: the sum, over unordered pairs {a, b}, of the spectral radius of the pair's
/// 2 × 2 block, smoothed by ε:
///
/// ```text
///     h₂(A) = Σ_{a<b} ( √(A_ab A_ba + ε²) − ε ),
///     ∂h₂/∂A_ab = A_ba / (2 √(A_ab A_ba + ε²)).
/// ```
///
/// Why next to λ_max: the power iteration's gradient G = vL vRᵀ/(vLᵀvR) lives on the dominant
/// strongly connected part of the graph, so when several 2-cycles are left only the strongest is
/// pushed and the others (0.04–1.8 % of its gradient, BENCHMARKS.md) are not; h₂ sees every
/// 2-cycle, and within one it pushes the weaker edge harder (∂/∂A_ab ∝ A_ba). It is zero on any
/// graph without 2-cycles, so it never changes which DAGs are allowed. ε > 0 keeps the gradient
/// bounded (≤ max A/(2ε)). Returns (h₂, ∂h₂/∂A) in A's orientation.
pub fn two_cycle_penalty(a: &DMatrix<f64>, epsilon: f64) -> (f64, DMatrix<f64>) {
    let d = a.nrows();
    assert_eq!(a.ncols(), d, "the 2-cycle penalty needs a square matrix");
    let mut value = 0.0;
    let mut gradient = DMatrix::zeros(d, d);
    for i in 0..d {
        for j in i + 1..d {
            let root = (a[(i, j)] * a[(j, i)] + epsilon * epsilon).sqrt();
            value += root - epsilon;
            gradient[(i, j)] = a[(j, i)] / (2.0 * root);
            gradient[(j, i)] = a[(i, j)] / (2.0 * root);
        }
    }
    (value, gradient)
}

/// v/‖v‖, or v unchanged when it is zero or not finite (then the next step decides).
fn normalised(v: DVector<f64>) -> DVector<f64> {
    let norm = v.norm();
    if norm > 0.0 && norm.is_finite() {
        v / norm
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// h₂ against central differences, against the exact spectral radius of each 2 × 2 block
    /// at ε = 0, and zero on a DAG-supported matrix.
    #[test]
    fn two_cycle_penalty_matches_blocks_and_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let d = 5;
        let a = DMatrix::from_fn(d, d, |i, j| {
            if i == j {
                0.0
            } else {
                rng.random_range(0.01..2.0)
            }
        });
        let eps = 0.005;
        let (value, grad) = two_cycle_penalty(&a, eps);
        let h = 1e-6;
        for i in 0..d {
            for j in 0..d {
                if i == j {
                    continue;
                }
                let mut p = a.clone();
                let mut m = a.clone();
                p[(i, j)] += h;
                m[(i, j)] -= h;
                let fd = (two_cycle_penalty(&p, eps).0 - two_cycle_penalty(&m, eps).0) / (2.0 * h);
                assert!(
                    (fd - grad[(i, j)]).abs() < 1e-7,
                    "({i},{j}) fd {fd} vs {}",
                    grad[(i, j)]
                );
            }
        }
        let mut blocks = 0.0;
        for i in 0..d {
            for j in i + 1..d {
                let b = DMatrix::from_row_slice(2, 2, &[0.0, a[(i, j)], a[(j, i)], 0.0]);
                blocks += spectral_radius(&b);
            }
        }
        assert!((two_cycle_penalty(&a, 0.0).0 - blocks).abs() < 1e-10);
        assert!(value < blocks && value > blocks - 10.0 * eps);
        let upper = DMatrix::from_fn(d, d, |i, j| if i < j { 1.5 } else { 0.0 });
        assert_eq!(two_cycle_penalty(&upper, eps).0, 0.0);
    }

    /// The largest modulus among A's eigenvalues, by nalgebra's Schur decomposition (an
    /// independent computation).
    fn spectral_radius(a: &DMatrix<f64>) -> f64 {
        a.complex_eigenvalues()
            .iter()
            .map(|z| z.norm())
            .fold(0.0, f64::max)
    }

    fn random_positive(d: usize, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
        DMatrix::from_fn(d, d, |i, j| {
            if i == j {
                0.0
            } else {
                rng.random_range(0.0..1.0)
            }
        })
    }

    #[test]
    fn the_estimate_matches_the_spectral_radius() {
        // D ≥ 3: with every off-diagonal entry positive there are cycles of lengths 2 and 3, so A
        // is primitive and λ_max is strictly dominant. (For D = 2, A = [[0, a], [b, 0]] has the
        // eigenvalues ±√(ab) of equal modulus and power iteration oscillates; the 1e-6 shift
        // makes the dominance only marginal.)
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for d in 3..8 {
            let a = random_positive(d, &mut rng);
            let mut power = PowerIteration::new(d);
            let est = power.estimate(&a, 200);
            let exact = spectral_radius(&a);
            assert!(
                (est.value - exact).abs() < 1e-5 * exact.max(1.0),
                "d {d}: {} vs {exact}",
                est.value
            );
        }
    }

    #[test]
    fn the_gradient_matches_finite_differences_of_the_exact_radius() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for d in [3, 4, 6] {
            let a = random_positive(d, &mut rng);
            let est = PowerIteration::new(d).estimate(&a, 500);
            let eps = 1e-6;
            for i in 0..d {
                for j in 0..d {
                    let mut plus = a.clone();
                    plus[(i, j)] += eps;
                    let mut minus = a.clone();
                    minus[(i, j)] -= eps;
                    let fd = (spectral_radius(&plus) - spectral_radius(&minus)) / (2.0 * eps);
                    assert!(
                        (fd - est.gradient[(i, j)]).abs() < 1e-5,
                        "d {d} ({i},{j}): fd {fd} vs {}",
                        est.gradient[(i, j)]
                    );
                }
            }
        }
    }

    #[test]
    fn a_dag_has_a_small_penalty_and_a_cycle_does_not() {
        // Chain 0 → 1 → 2 (nilpotent): λ_max = 0.
        let mut a = DMatrix::zeros(3, 3);
        a[(0, 1)] = 1.0;
        a[(1, 2)] = 1.0;
        let h_dag = PowerIteration::new(3).estimate(&a, 50).value;
        assert!(h_dag.abs() < 0.01, "{h_dag}");
        // Closing the cycle 2 → 0 makes λ_max = 1.
        a[(2, 0)] = 1.0;
        let h_cycle = PowerIteration::new(3).estimate(&a, 200).value;
        assert!((h_cycle - 1.0).abs() < 1e-3, "{h_cycle}");
    }

    #[test]
    fn warm_starts_track_a_slowly_changing_matrix_with_few_iterations() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut a = random_positive(6, &mut rng);
        let mut power = PowerIteration::new(6);
        power.estimate(&a, 100);
        for _ in 0..20 {
            a.iter_mut()
                .for_each(|v| *v = (*v * rng.random_range(0.97..1.03)).max(0.0));
            for k in 0..6 {
                a[(k, k)] = 0.0;
            }
            let est = power.estimate(&a, 5);
            let exact = spectral_radius(&a);
            assert!(
                (est.value - exact).abs() < 1e-3 * exact,
                "{} vs {exact}",
                est.value
            );
        }
    }

    #[test]
    fn the_transpose_has_the_same_value_and_the_transposed_gradient() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let a = random_positive(4, &mut rng);
        let e = PowerIteration::new(4).estimate(&a, 300);
        let t = PowerIteration::new(4).estimate(&a.transpose(), 300);
        assert!((e.value - t.value).abs() < 1e-9);
        assert!((e.gradient.transpose() - t.gradient).amax() < 1e-9);
    }
}
