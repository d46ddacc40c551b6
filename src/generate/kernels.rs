//! Kernel values for *sampling* synthetic data (no gradients): the stationary shapes of the GP-CDE
//! recipe, the linear kernel, and the scaled distance they share.
//!
//! The model's own kernels (with adjoints) live elsewhere; these exist so the generators have a
//! small, independently checked set of closed forms. Every stationary kernel is a function of the
//! ARD-scaled distance `r = √(Σ_j s_j² (a_j − b_j)²)` (MODEL.md §2.2, form P1), where `s_j` is a
//! precision (inverse lengthscale).

use serde::{Deserialize, Serialize};

/// A stationary kernel shape κ(r) of the scaled distance r, with κ(0) = 1; the kernel is
/// `k(a, b) = σ · κ(r(a, b))` for a variance σ (see [`StationaryKernel::value`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StationaryKernel {
    /// Matérn-1/2 (exponential): κ(r) = e^{−r}.
    Matern12,
    /// Matérn-3/2: κ(r) = (1 + √3 r) e^{−√3 r}.
    Matern32,
    /// Matérn-5/2: κ(r) = (1 + √5 r + 5r²/3) e^{−√5 r}.
    Matern52,
    /// Squared exponential: κ(r) = e^{−r²/2}.
    SquaredExponential,
    /// Rational quadratic with shape α > 0: κ(r) = (1 + r²/(2α))^{−α}; tends to the squared
    /// exponential as α → ∞.
    RationalQuadratic {
        /// The shape α (the paper's `a`).
        alpha: f64,
    },
}

impl StationaryKernel {
    /// κ(r), the unit-variance value at scaled distance `r ≥ 0`.
    pub fn unit_value(&self, r: f64) -> f64 {
        match *self {
            Self::Matern12 => (-r).exp(),
            Self::Matern32 => {
                let s = 3f64.sqrt() * r;
                (1.0 + s) * (-s).exp()
            }
            Self::Matern52 => {
                let s = 5f64.sqrt() * r;
                (1.0 + s + 5.0 * r * r / 3.0) * (-s).exp()
            }
            Self::SquaredExponential => (-0.5 * r * r).exp(),
            Self::RationalQuadratic { alpha } => (1.0 + r * r / (2.0 * alpha)).powf(-alpha),
        }
    }

    /// k = σ · κ(r): the kernel value for variance `variance` at scaled distance `r`.
    pub fn value(&self, variance: f64, r: f64) -> f64 {
        variance * self.unit_value(r)
    }
}

/// The ARD-scaled Euclidean distance r = √(Σ_j (s_j (a_j − b_j))²), with `scales` the precisions
/// s_j (inverse lengthscales). All three slices have the same length.
pub(crate) fn scaled_distance(a: &[f64], b: &[f64], scales: &[f64]) -> f64 {
    debug_assert!(a.len() == b.len() && a.len() == scales.len());
    a.iter()
        .zip(b)
        .zip(scales)
        .map(|((x, y), s)| {
            let d = s * (x - y);
            d * d
        })
        .sum::<f64>()
        .sqrt()
}

/// The linear kernel with one shared variance: k(a, b) = σ · Σ_j a_j b_j.
pub(crate) fn linear(variance: f64, a: &[f64], b: &[f64]) -> f64 {
    variance * a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nalgebra::{Cholesky, DMatrix};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    const ALL: [StationaryKernel; 6] = [
        StationaryKernel::Matern12,
        StationaryKernel::Matern32,
        StationaryKernel::Matern52,
        StationaryKernel::SquaredExponential,
        StationaryKernel::RationalQuadratic { alpha: 1.0 },
        StationaryKernel::RationalQuadratic { alpha: 0.3 },
    ];

    #[test]
    fn value_at_zero_is_the_variance() {
        for k in ALL {
            assert_eq!(k.value(7.5, 0.0), 7.5, "{k:?}");
        }
    }

    #[test]
    fn values_at_one_match_hand_computed_closed_forms() {
        // Matérn-1/2: e^{-1} = 0.36787944117144233.
        // Matérn-3/2: (1 + √3) e^{-√3} = 2.7320508075688772 × 0.17692120631776423
        //             = 0.4833577245965077.
        // Matérn-5/2: (1 + √5 + 5/3) e^{-√5} = 4.902734644166457 × 0.10687792566038574
        //             = 0.5239941088318203.
        // SE: e^{-1/2} = 0.6065306597126334.
        // RQ α = 1: (1 + 1/2)^{-1} = 2/3.  RQ α = 1/2: (1 + 1)^{-1/2} = 1/√2.
        let cases = [
            (StationaryKernel::Matern12, 0.367_879_441_171_442_3),
            (StationaryKernel::Matern32, 0.483_357_724_596_507_7),
            (StationaryKernel::Matern52, 0.523_994_108_831_820_3),
            (
                StationaryKernel::SquaredExponential,
                0.606_530_659_712_633_4,
            ),
            (
                StationaryKernel::RationalQuadratic { alpha: 1.0 },
                2.0 / 3.0,
            ),
            (
                StationaryKernel::RationalQuadratic { alpha: 0.5 },
                std::f64::consts::FRAC_1_SQRT_2,
            ),
        ];
        for (k, expected) in cases {
            let got = k.unit_value(1.0);
            assert!((got - expected).abs() < 1e-12, "{k:?}: {got} vs {expected}");
            assert!((k.value(3.0, 1.0) - 3.0 * expected).abs() < 1e-12);
        }
    }

    #[test]
    fn shapes_decrease_with_distance_and_rq_tends_to_se() {
        for k in ALL {
            let mut prev = k.unit_value(0.0);
            for step in 1..60 {
                let v = k.unit_value(0.1 * step as f64);
                assert!(v < prev && v > 0.0, "{k:?} at r = {}", 0.1 * step as f64);
                prev = v;
            }
        }
        let rq = StationaryKernel::RationalQuadratic { alpha: 1e7 };
        let se = StationaryKernel::SquaredExponential;
        for r in [0.3, 1.0, 2.5] {
            assert!((rq.unit_value(r) - se.unit_value(r)).abs() < 1e-6);
        }
    }

    #[test]
    fn scaled_distance_and_linear_by_hand() {
        // (2·(1 − 0))² + (0.5·(3 − 1))² = 4 + 1 = 5.
        let r = scaled_distance(&[1.0, 3.0], &[0.0, 1.0], &[2.0, 0.5]);
        assert!((r - 5f64.sqrt()).abs() < 1e-15);
        // 2 · (1·4 + 3·(−1)) = 2.
        assert_eq!(linear(2.0, &[1.0, 3.0], &[4.0, -1.0]), 2.0);
    }

    #[test]
    fn kernel_matrices_of_random_points_are_positive_semidefinite() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (n, d) = (60, 3);
        let points: Vec<Vec<f64>> = (0..n)
            .map(|_| (0..d).map(|_| rng.random_range(-2.0..2.0)).collect())
            .collect();
        let scales = [0.7, 1.9, 0.2];
        for k in ALL {
            // Stationary part plus the linear part, as the GP-CDE generator builds it.
            let gram = DMatrix::from_fn(n, n, |a, b| {
                k.value(4.0, scaled_distance(&points[a], &points[b], &scales))
                    + linear(2.5, &points[a], &points[b])
            });
            assert!((&gram - gram.transpose()).amax() == 0.0);
            let jittered = gram + DMatrix::identity(n, n) * 1e-10;
            assert!(Cholesky::new(jittered).is_some(), "{k:?} is not PSD");
        }
        // The check can fail: a matrix with a negative eigenvalue is refused.
        let mut bad = DMatrix::identity(2, 2);
        bad[(0, 1)] = 2.0;
        bad[(1, 0)] = 2.0;
        assert!(Cholesky::new(bad).is_none());
    }
}
