//! Dense linear algebra the bounds need and nalgebra does not offer in the form we want: a Cholesky
//! factorisation that escalates jitter, reports how much it added and names the failing pivot, and
//! the reverse-mode derivative of the Cholesky factorisation.

use nalgebra::{DMatrix, DVector};

use super::lane_math::{lane_dot, vectorised};
use serde::{Deserialize, Serialize};

/// Why a Cholesky factorisation gave up.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum CholeskyError {
    /// The matrix holds a NaN or an infinity: no amount of jitter repairs that.
    #[error("the {size}×{size} matrix to factorise contains a non-finite entry at ({row}, {col})")]
    NonFinite { size: usize, row: usize, col: usize },
    /// Still not positive definite after adding the largest jitter allowed.
    #[error(
        "the {size}×{size} matrix is not positive definite: pivot {pivot} stayed at {value:.3e} even with jitter {jitter:.1e} added to the diagonal"
    )]
    NotPositiveDefinite {
        size: usize,
        pivot: usize,
        value: f64,
        jitter: f64,
    },
    /// Not square.
    #[error("cannot factorise a {rows}×{cols} matrix: it is not square")]
    NotSquare { rows: usize, cols: usize },
}

/// How jitter escalates: start at `initial`, multiply by `factor` after each failed attempt, give
/// up after `max_attempts` attempts. The jitter is ε_k = initial · factor^k for k = 0, 1, …,
/// max_attempts − 1, computed by repeated multiplication. It is absolute (added to every diagonal
/// entry) wherever a policy is applied as it stands; a caller that scales it (the simulator's
/// relative jitter) says so. Every jitter ladder in the engine is one of these.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct JitterPolicy {
    pub initial: f64,
    pub factor: f64,
    pub max_attempts: usize,
}

impl Default for JitterPolicy {
    /// GPflow's default jitter 1e-6 in f64, escalated ×10 up to 1e-1 (six attempts), as the
    /// reference code's retry loop does (MODEL.md §11.3).
    fn default() -> Self {
        Self {
            initial: 1e-6,
            factor: 10.0,
            max_attempts: 6,
        }
    }
}

/// The most attempts [`JitterPolicy::up_to`] makes (a ladder from 1e-300 to 1e300 by ×10 fits).
const MAX_LADDER: usize = 700;

impl JitterPolicy {
    /// One attempt at exactly `jitter` (0: the matrix must factorise as it stands).
    pub fn exactly(jitter: f64) -> Self {
        Self {
            initial: jitter,
            factor: 1.0,
            max_attempts: 1,
        }
    }

    /// The ladder initial, initial·factor, … whose last rung is the largest not above `largest`
    /// (with a relative slack of 1e-9, so that a `largest` that is a rung up to rounding, as 1e-1
    /// from 1e-6 by ×10, is still tried). At least one attempt; `factor` ≤ 1 gives one.
    pub fn up_to(initial: f64, factor: f64, largest: f64) -> Self {
        let mut attempts = 1;
        if factor > 1.0 && initial > 0.0 {
            let mut jitter = initial;
            while attempts < MAX_LADDER && jitter * factor <= largest * (1.0 + 1e-9) {
                jitter *= factor;
                attempts += 1;
            }
        }
        Self {
            initial,
            factor,
            max_attempts: attempts,
        }
    }

    /// The jitters tried, in order: ε_0 = initial, ε_{k+1} = ε_k · factor.
    pub fn ladder(self) -> impl Iterator<Item = f64> {
        std::iter::successors(Some(self.initial), move |&j| Some(j * self.factor))
            .take(self.max_attempts.max(1))
    }

    /// The rung after `jitter`, or `None` when `jitter` is the last rung (or beyond it). For a
    /// caller that keeps the current jitter between attempts rather than iterating [`Self::ladder`].
    pub fn next_after(self, jitter: f64) -> Option<f64> {
        let last = self.ladder().last().unwrap_or(self.initial);
        let next = jitter * self.factor;
        (next <= last * (1.0 + 1e-9)).then_some(next)
    }

    /// Why the policy cannot be used, if it cannot: jitter must start positive and finite and grow.
    pub fn check(self) -> Result<(), JitterError> {
        if !(self.initial > 0.0 && self.initial.is_finite()) {
            return Err(JitterError::Initial(self.initial));
        }
        if !(self.factor > 1.0 && self.factor.is_finite()) {
            return Err(JitterError::Factor(self.factor));
        }
        if self.max_attempts == 0 {
            return Err(JitterError::NoAttempts);
        }
        Ok(())
    }
}

/// Why a jitter ladder cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum JitterError {
    #[error("the initial jitter must be positive and finite, got {0}")]
    Initial(#[serde(with = "crate::base::float_text")] f64),
    #[error("the jitter must grow by a finite factor above 1, got {0}")]
    Factor(#[serde(with = "crate::base::float_text")] f64),
    #[error("at least one jitter attempt is needed")]
    NoAttempts,
}

/// A lower-triangular factor L with L Lᵀ = A + jitter·I.
#[derive(Debug, Clone, PartialEq)]
pub struct Factor {
    pub l: DMatrix<f64>,
    /// The jitter actually added.
    pub jitter: f64,
    /// Attempts that failed before this one (0 when the first jitter sufficed).
    pub escalations: usize,
}

/// Factorises `a + jitter·I`, escalating jitter by `policy` until it succeeds.
///
/// Returns L (lower triangular) with L Lᵀ = A + ε I and the ε used, or a typed error naming the
/// pivot that failed at the largest jitter. Only the lower triangle of `a` is read.
pub fn cholesky_jittered(a: &DMatrix<f64>, policy: JitterPolicy) -> Result<Factor, CholeskyError> {
    let n = a.nrows();
    if a.ncols() != n {
        return Err(CholeskyError::NotSquare {
            rows: n,
            cols: a.ncols(),
        });
    }
    for col in 0..n {
        for row in col..n {
            if !a[(row, col)].is_finite() {
                return Err(CholeskyError::NonFinite { size: n, row, col });
            }
        }
    }
    let mut jitter = policy.initial;
    let mut last = (0, 0.0);
    for (attempt, rung) in policy.ladder().enumerate() {
        jitter = rung;
        match cholesky_in_place(a, jitter) {
            Ok(l) => {
                return Ok(Factor {
                    l,
                    jitter,
                    escalations: attempt,
                })
            }
            Err(fail) => last = fail,
        }
    }
    Err(CholeskyError::NotPositiveDefinite {
        size: n,
        pivot: last.0,
        value: last.1,
        jitter,
    })
}

/// One factorisation attempt. Computes the upper factor U = Lᵀ column by column, so every inner
/// product runs over two contiguous column slices of column-major storage:
/// U[i,j] = (A[i,j] − Σ_{k<i} U[k,i] U[k,j]) / U[i,i],  U[j,j] = sqrt(A[j,j] + ε − Σ_{k<j} U[k,j]²).
/// On failure returns the failing pivot and its value.
fn cholesky_in_place(a: &DMatrix<f64>, jitter: f64) -> Result<DMatrix<f64>, (usize, f64)> {
    let n = a.nrows();
    let mut u = DMatrix::<f64>::zeros(n, n);
    factor_upper(a.as_slice(), n, jitter, u.as_mut_slice())?;
    Ok(u.transpose())
}

vectorised! {
/// The loops of [`cholesky_in_place`] over column-major slices (`a` and `u` n × n), with the inner
/// products in 8 lanes ([`lane_dot`]).
fn factor_upper(a: &[f64], n: usize, jitter: f64, u: &mut [f64]) -> Result<(), (usize, f64)> {
    for j in 0..n {
        // Columns before j (done) and column j onwards (being filled).
        let (done, rest) = u.split_at_mut(j * n);
        let uj = &mut rest[..n];
        for i in 0..j {
            let ui = &done[i * n..i * n + i + 1];
            let dot = lane_dot(&ui[..i], &uj[..i]);
            // Lower triangle of a: A[j, i] (= A[i, j] for a symmetric matrix).
            uj[i] = (a[j + i * n] - dot) / ui[i];
        }
        let sq = lane_dot(&uj[..j], &uj[..j]);
        let pivot = a[j + j * n] + jitter - sq;
        if pivot.is_nan() || pivot <= 0.0 {
            return Err((j, pivot));
        }
        uj[j] = pivot.sqrt();
    }
    Ok(())
}
}

/// Reverse mode of A = L Lᵀ: given L and L̄ = ∂f/∂L (only its lower triangle is used), returns the
/// symmetric Ā = ∂f/∂A:
///   P = Φ(Lᵀ L̄)   (Φ keeps the lower triangle and halves the diagonal),
///   X = L⁻ᵀ P L⁻¹,   Ā = (X + Xᵀ)/2.
/// (The same result as TensorFlow's CholeskyGrad; MODEL.md §3.4.)
pub fn cholesky_backward(l: &DMatrix<f64>, l_bar: &DMatrix<f64>) -> DMatrix<f64> {
    let n = l.nrows();
    let lower_bar = l_bar.lower_triangle();
    let mut p = l.transpose() * lower_bar;
    for j in 0..n {
        for i in 0..j {
            p[(i, j)] = 0.0;
        }
        p[(j, j)] *= 0.5;
    }
    // X = L⁻ᵀ P L⁻¹ by two triangular solves: Y = L⁻ᵀ P, then X = Y L⁻¹ = (L⁻ᵀ Yᵀ)ᵀ.
    let y = solve_upper_transposed(l, &p);
    let x = solve_upper_transposed(l, &y.transpose()).transpose();
    (&x + x.transpose()) * 0.5
}

/// [`cholesky_backward`] given L⁻¹ as well (callers that have it anyway): the same
/// X = L⁻ᵀ P L⁻¹ by two matrix products instead of two triangular solves, which for the small
/// dense M × M factors of the bounds run several times faster. Equal up to rounding (tested).
pub fn cholesky_backward_with_inverse(
    l: &DMatrix<f64>,
    l_inv: &DMatrix<f64>,
    l_bar: &DMatrix<f64>,
) -> DMatrix<f64> {
    let n = l.nrows();
    let mut p = transpose_times(l, &l_bar.lower_triangle());
    for j in 0..n {
        for i in 0..j {
            p[(i, j)] = 0.0;
        }
        p[(j, j)] *= 0.5;
    }
    let x = transpose_times(l_inv, &(p * l_inv));
    (&x + x.transpose()) * 0.5
}

/// Aᵀ B by one GEMM on a transposed copy of A. nalgebra's `tr_mul` takes one dot product per
/// entry, several times slower for the M × M products of the bounds; a strided view of A as the
/// first operand is no way out either, since nalgebra's small-size fallback (any side ≤ 5) writes
/// out of bounds for it (nalgebra 0.33.3).
pub fn transpose_times(a: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
    assert_eq!(a.nrows(), b.nrows(), "Aᵀ B needs as many rows in A as in B");
    a.transpose() * b
}

/// Solves L X = B for lower-triangular L (forward substitution), column by column.
pub fn solve_lower(l: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
    let mut x = b.clone();
    l.solve_lower_triangular_unchecked_mut(&mut x);
    x
}

/// Solves Lᵀ X = B for lower-triangular L (back substitution on the transpose).
pub fn solve_upper_transposed(l: &DMatrix<f64>, b: &DMatrix<f64>) -> DMatrix<f64> {
    let mut x = b.clone();
    l.tr_solve_lower_triangular_unchecked_mut(&mut x);
    x
}

/// Solves L x = b for a vector.
pub fn solve_lower_vec(l: &DMatrix<f64>, b: &DVector<f64>) -> DVector<f64> {
    let mut x = b.clone();
    l.solve_lower_triangular_unchecked_mut(&mut x);
    x
}

/// Solves Lᵀ x = b for a vector.
pub fn solve_upper_transposed_vec(l: &DMatrix<f64>, b: &DVector<f64>) -> DVector<f64> {
    let mut x = b.clone();
    l.tr_solve_lower_triangular_unchecked_mut(&mut x);
    x
}

/// L⁻¹ for lower-triangular L (lower triangular itself), column j by forward substitution from
/// row j only (x_i = 0 above it): x_k = (δ_jk − Σ_{j≤i<k} L_ki x_i)/L_kk, written as column axpys
/// over contiguous slices of L, so it costs n³/6 multiply-adds instead of the n³/2 of solving
/// against the identity.
pub fn lower_inverse(l: &DMatrix<f64>) -> DMatrix<f64> {
    let n = l.nrows();
    assert_eq!(l.ncols(), n, "L must be square");
    let mut x = DMatrix::<f64>::zeros(n, n);
    invert_lower(l.as_slice(), n, x.as_mut_slice());
    x
}

vectorised! {
/// The loops of [`lower_inverse`] over column-major slices (n × n; `x` starts at zero).
fn invert_lower(ls: &[f64], n: usize, x: &mut [f64]) {
    for (j, xc) in x.chunks_exact_mut(n.max(1)).enumerate().take(n) {
        xc[j] = 1.0;
        for k in j..n {
            let xk = xc[k] / ls[k + k * n];
            xc[k] = xk;
            // x_i −= L_ik x_k for i > k: column k of L below the diagonal.
            for (xi, &lik) in xc[k + 1..].iter_mut().zip(&ls[k * n + k + 1..(k + 1) * n]) {
                *xi -= lik * xk;
            }
        }
    }
}
}

/// log det(L Lᵀ) = 2 Σ log L_ii.
pub fn logdet_from_factor(l: &DMatrix<f64>) -> f64 {
    2.0 * l.diagonal().iter().map(|d| d.ln()).sum::<f64>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn random_spd(n: usize, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
        let b = DMatrix::from_fn(n, n, |_, _| rng.random_range(-1.0..1.0));
        &b * b.transpose() + DMatrix::identity(n, n) * 0.5
    }

    #[test]
    fn factor_matches_nalgebra_and_reconstructs() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for n in [1, 2, 5, 17, 40] {
            let a = random_spd(n, &mut rng);
            let f = cholesky_jittered(
                &a,
                JitterPolicy {
                    initial: 0.0,
                    ..JitterPolicy::default()
                },
            )
            .unwrap();
            assert_eq!((f.jitter, f.escalations), (0.0, 0));
            let reference = a.clone().cholesky().unwrap().l();
            assert!((&f.l - &reference).amax() < 1e-12 * a.amax());
            assert!((&f.l * f.l.transpose() - &a).amax() < 1e-12 * a.amax());
        }
    }

    #[test]
    fn jitter_escalates_and_is_reported() {
        // Rank-one 3×3 matrix: singular, so it needs jitter; eigenvalues 0, 0, 3.
        let a = DMatrix::from_element(3, 3, 1.0);
        let policy = JitterPolicy {
            initial: 1e-12,
            factor: 10.0,
            max_attempts: 10,
        };
        let f = cholesky_jittered(&a, policy).unwrap();
        assert!(f.jitter > 0.0);
        assert_eq!(f.jitter, 1e-12 * 10f64.powi(f.escalations as i32));
        let shifted = &a + DMatrix::identity(3, 3) * f.jitter;
        assert!((&f.l * f.l.transpose() - shifted).amax() < 1e-10);

        // Indefinite (eigenvalue −1): refused, naming a pivot and the largest jitter tried.
        let b = DMatrix::from_row_slice(2, 2, &[1.0, 0.0, 0.0, -1.0]);
        let err = cholesky_jittered(&b, JitterPolicy::default()).unwrap_err();
        match err {
            CholeskyError::NotPositiveDefinite { pivot, jitter, .. } => {
                assert_eq!(pivot, 1);
                assert!((jitter - 1e-1).abs() < 1e-15);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(err.to_string().contains("pivot 1"));
    }

    #[test]
    fn a_ladder_runs_from_its_first_rung_to_its_last() {
        // GPflow's ladder: 1e-6 … 1e-1, the last rung within rounding of the bound.
        assert_eq!(
            JitterPolicy::up_to(1e-6, 10.0, 1e-1),
            JitterPolicy::default()
        );
        let rungs: Vec<f64> = JitterPolicy::default().ladder().collect();
        assert_eq!(rungs.len(), 6);
        let mut expected = 1e-6;
        for rung in &rungs {
            assert_eq!(*rung, expected);
            expected *= 10.0;
        }
        assert_eq!(JitterPolicy::up_to(1e-8, 10.0, 1e-4).max_attempts, 5);
        assert_eq!(JitterPolicy::up_to(1e-6, 10.0, 1.0).max_attempts, 7);
        // A bound below the first rung still tries the first; a factor ≤ 1 tries once.
        assert_eq!(JitterPolicy::up_to(1e-3, 10.0, 1e-9).max_attempts, 1);
        assert_eq!(JitterPolicy::up_to(1e-3, 1.0, 1.0).max_attempts, 1);
        // Stepping one rung at a time visits the same rungs and stops after the last.
        let policy = JitterPolicy::default();
        let mut stepped = vec![policy.initial];
        while let Some(next) = policy.next_after(*stepped.last().unwrap()) {
            stepped.push(next);
        }
        assert_eq!(stepped, rungs);
        assert_eq!(
            JitterPolicy::exactly(0.0).ladder().collect::<Vec<_>>(),
            [0.0]
        );
        assert!(policy.check().is_ok());
        assert!(JitterPolicy::exactly(1e-6)
            .check()
            .unwrap_err()
            .to_string()
            .contains("factor"));
        assert!(JitterPolicy::up_to(0.0, 10.0, 1.0)
            .check()
            .unwrap_err()
            .to_string()
            .contains("positive"));
    }

    #[test]
    fn non_finite_input_is_a_typed_error_not_a_nan_factor() {
        let mut a = DMatrix::identity(3, 3);
        a[(2, 1)] = f64::NAN;
        assert_eq!(
            cholesky_jittered(&a, JitterPolicy::default()).unwrap_err(),
            CholeskyError::NonFinite {
                size: 3,
                row: 2,
                col: 1
            }
        );
        let rect = DMatrix::<f64>::zeros(2, 3);
        assert!(matches!(
            cholesky_jittered(&rect, JitterPolicy::default()),
            Err(CholeskyError::NotSquare { .. })
        ));
    }

    /// f(A) = Σ W ∘ chol(A) for a fixed random lower W; the backward pass must match central
    /// differences of f under symmetric perturbations A + h(E_ij + E_ji).
    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        for n in [1, 2, 4, 9] {
            let a = random_spd(n, &mut rng);
            let w = DMatrix::from_fn(n, n, |i, j| {
                if i >= j {
                    rng.random_range(-1.0..1.0)
                } else {
                    0.0
                }
            });
            let f = |m: &DMatrix<f64>| -> f64 {
                let l = m.clone().cholesky().unwrap().l();
                l.component_mul(&w).sum()
            };
            let l = a.clone().cholesky().unwrap().l();
            let a_bar = cholesky_backward(&l, &w);
            let h = 1e-6;
            for i in 0..n {
                for j in 0..=i {
                    let mut e = DMatrix::zeros(n, n);
                    e[(i, j)] = h;
                    e[(j, i)] = h;
                    let fd = (f(&(&a + &e)) - f(&(&a - &e))) / (2.0 * h);
                    // A symmetric perturbation of both (i,j) and (j,i) moves f by Ā_ij + Ā_ji.
                    let an = if i == j {
                        a_bar[(i, i)]
                    } else {
                        a_bar[(i, j)] + a_bar[(j, i)]
                    };
                    let err = (fd - an).abs() / fd.abs().max(an.abs()).max(1.0);
                    assert!(err < 1e-6, "n={n} ({i},{j}): fd {fd} vs {an}");
                }
            }
        }
    }

    /// The product form equals the solve form (both against the same L, L̄).
    #[test]
    fn backward_with_the_inverse_equals_backward_by_solves() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for n in [1, 3, 8, 30] {
            let a = random_spd(n, &mut rng);
            let l = a.clone().cholesky().unwrap().l();
            let l_bar = DMatrix::from_fn(n, n, |_, _| rng.random_range(-1.0..1.0));
            let by_solves = cholesky_backward(&l, &l_bar);
            let by_products = cholesky_backward_with_inverse(&l, &lower_inverse(&l), &l_bar);
            let scale = by_solves.amax().max(1.0);
            assert!(
                (&by_solves - &by_products).amax() <= 1e-12 * scale,
                "n = {n}: {}",
                (&by_solves - &by_products).amax()
            );
        }
    }

    #[test]
    fn lower_inverse_inverts() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        assert_eq!(lower_inverse(&DMatrix::zeros(0, 0)).shape(), (0, 0));
        for n in [1, 2, 5, 31] {
            let l = random_spd(n, &mut rng).cholesky().unwrap().l();
            let inv = lower_inverse(&l);
            assert_eq!(inv, inv.lower_triangle(), "lower triangular");
            let by_solve = solve_lower(&l, &DMatrix::identity(n, n));
            assert!(
                (&inv - &by_solve).amax() <= 1e-12 * by_solve.amax(),
                "n = {n}"
            );
            assert!(
                (&l * &inv - DMatrix::identity(n, n)).amax() <= 1e-12,
                "n = {n}"
            );
        }
    }

    #[test]
    fn transpose_times_equals_the_dot_product_form() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for (k, n, m) in [(1, 1, 1), (7, 3, 5), (40, 33, 17), (0, 2, 3)] {
            let a = DMatrix::from_fn(k, n, |_, _| rng.random_range(-1.0..1.0));
            let b = DMatrix::from_fn(k, m, |_, _| rng.random_range(-1.0..1.0));
            let want = a.tr_mul(&b);
            let got = transpose_times(&a, &b);
            assert_eq!(got.shape(), (n, m));
            assert!((&got - &want).amax() <= 1e-13, "{k}×{n}ᵀ · {k}×{m}");
        }
    }

    #[test]
    fn triangular_helpers_solve_what_they_say() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let a = random_spd(6, &mut rng);
        let l = a.clone().cholesky().unwrap().l();
        let b = DMatrix::from_fn(6, 3, |_, _| rng.random_range(-1.0..1.0));
        assert!((&l * solve_lower(&l, &b) - &b).amax() < 1e-12);
        assert!((l.transpose() * solve_upper_transposed(&l, &b) - &b).amax() < 1e-12);
        let v = b.column(0).into_owned();
        assert!((&l * solve_lower_vec(&l, &v) - &v).amax() < 1e-12);
        assert!((l.transpose() * solve_upper_transposed_vec(&l, &v) - &v).amax() < 1e-12);
        assert!((&l * lower_inverse(&l) - DMatrix::identity(6, 6)).amax() < 1e-12);
        let det = a.determinant();
        assert!((logdet_from_factor(&l) - det.ln()).abs() < 1e-10);
    }
}
