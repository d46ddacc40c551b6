//! Exact draws f ~ N(0, K) on a finite set of points, by Cholesky factorisation with escalating
//! jitter.
//!
//! Jitter is relative to the mean of K's diagonal: the GP-CDE recipe's kernel variances reach the
//! hundreds, where an absolute 1e-8 would be below rounding. The ladder [`RELATIVE_JITTER`]
//! (1e-8 ×10 up to 1e-4) is scaled by the mean diagonal; the jitter used is reported so the run
//! record says how far the draw is from the exact kernel.

use nalgebra::{Cholesky, DMatrix};
use rand::Rng;
use rand_distr::StandardNormal;

use crate::gp::linalg::JitterPolicy;

/// The relative jitters tried, as multiples of K's mean diagonal: 1e-8 (for a unit-variance kernel
/// the plain K + 1e-8·I) ×10 up to 1e-4.
pub(crate) const RELATIVE_JITTER: JitterPolicy = JitterPolicy {
    initial: 1e-8,
    factor: 10.0,
    max_attempts: 5,
};

/// One exact GP draw and the absolute jitter that made K factorisable.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Draw {
    /// f = L z with L Lᵀ = K + jitter·I and z ~ N(0, I).
    pub values: Vec<f64>,
    /// The absolute jitter added to the diagonal.
    pub jitter: f64,
}

/// K stayed non-factorisable up to the largest jitter (or its diagonal was not positive and
/// finite); `jitter` is the last absolute jitter tried (0 if none could be formed).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct NotPositiveDefinite {
    pub jitter: f64,
}

/// The symmetric n × n matrix with entries `entry(a, b)`, evaluated once per unordered pair.
pub(crate) fn gram(n: usize, entry: impl Fn(usize, usize) -> f64) -> DMatrix<f64> {
    let mut k = DMatrix::zeros(n, n);
    for a in 0..n {
        for b in 0..=a {
            let v = entry(a, b);
            k[(a, b)] = v;
            k[(b, a)] = v;
        }
    }
    k
}

/// Draws f ~ N(0, K) exactly: f = L z, with L the Cholesky factor of K + jitter·I (jitter
/// escalated as the module doc says) and z ~ N(0, I) drawn from `rng` after the factorisation, so
/// the stream consumed does not depend on how many attempts were needed.
pub(crate) fn draw_exact<R: Rng + ?Sized>(
    k: &DMatrix<f64>,
    rng: &mut R,
) -> Result<Draw, NotPositiveDefinite> {
    let n = k.nrows();
    debug_assert_eq!(n, k.ncols());
    if n == 0 {
        return Ok(Draw {
            values: Vec::new(),
            jitter: 0.0,
        });
    }
    let mean_diag = k.diagonal().mean();
    if !(mean_diag.is_finite() && mean_diag > 0.0) {
        return Err(NotPositiveDefinite { jitter: 0.0 });
    }
    let mut jitter = 0.0;
    for relative in RELATIVE_JITTER.ladder() {
        jitter = relative * mean_diag;
        let mut jittered = k.clone();
        for i in 0..n {
            jittered[(i, i)] += jitter;
        }
        if let Some(chol) = Cholesky::new(jittered) {
            let l = chol.l_dirty();
            let z: Vec<f64> = (0..n).map(|_| rng.sample(StandardNormal)).collect();
            // Only the lower triangle of `l_dirty` is the factor; the upper part is stale input.
            let values = (0..n)
                .map(|i| (0..=i).map(|j| l[(i, j)] * z[j]).sum())
                .collect();
            return Ok(Draw { values, jitter });
        }
    }
    Err(NotPositiveDefinite { jitter })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn draws_have_the_kernel_covariance() {
        // K = [[1, ρ], [ρ, 1]]: the empirical covariance of many draws approaches K.
        let rho = 0.8;
        let k = gram(2, |a, b| if a == b { 1.0 } else { rho });
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let reps = 20_000;
        let (mut s00, mut s01, mut s11) = (0.0, 0.0, 0.0);
        for _ in 0..reps {
            let d = draw_exact(&k, &mut rng).unwrap();
            assert_eq!(d.jitter, 1e-8);
            s00 += d.values[0] * d.values[0];
            s01 += d.values[0] * d.values[1];
            s11 += d.values[1] * d.values[1];
        }
        let r = reps as f64;
        // Standard error of a sample second moment of unit-variance normals is about √(2/r) ≈ 0.01.
        assert!((s00 / r - 1.0).abs() < 0.05);
        assert!((s11 / r - 1.0).abs() < 0.05);
        assert!((s01 / r - rho).abs() < 0.05);
    }

    #[test]
    fn slightly_indefinite_kernel_gets_the_first_jitter_that_works() {
        // K = [[1, ρ], [ρ, 1]] with ρ = 1 + 5e-7 has eigenvalues 2 + 5e-7 and −5e-7: jitter 1e-8 and
        // 1e-7 leave it indefinite, 1e-6 makes it positive definite, and that is what is reported.
        let rho = 1.0 + 5e-7;
        let k = gram(2, |a, b| if a == b { 1.0 } else { rho });
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let d = draw_exact(&k, &mut rng).unwrap();
        assert!((d.jitter - 1e-6).abs() < 1e-18, "{}", d.jitter);
        // The draw lies almost exactly along (1, 1).
        assert!((d.values[0] - d.values[1]).abs() < 1e-2);
        // Relative jitter: the same matrix scaled by 100 reports 100 × the jitter.
        let big = &k * 100.0;
        let d = draw_exact(&big, &mut rng).unwrap();
        assert!((d.jitter - 1e-4).abs() < 1e-16, "{}", d.jitter);
    }

    #[test]
    fn indefinite_kernel_is_refused_after_the_largest_jitter() {
        let mut k = DMatrix::identity(3, 3);
        k[(0, 1)] = 3.0;
        k[(1, 0)] = 3.0;
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let err = draw_exact(&k, &mut rng).unwrap_err();
        assert!((err.jitter - 1e-4).abs() < 1e-18, "{err:?}");
        assert_eq!(RELATIVE_JITTER, JitterPolicy::up_to(1e-8, 10.0, 1e-4));
        let zero = DMatrix::zeros(2, 2);
        assert_eq!(
            draw_exact(&zero, &mut rng).unwrap_err(),
            NotPositiveDefinite { jitter: 0.0 }
        );
    }
}
