//! SID against ground truth computed from linear-Gaussian structural equation models.
//!
//! For a true DAG G with edge weights B (x = Bᵀx + e, e ~ N(0, I)) the population covariance is
//! Σ = M Mᵀ with M = (I − Bᵀ)⁻¹. The intervention do(x_i = v) removes i's incoming edges and fixes
//! x_i, so x_j | do(x_i = v) is Gaussian with mean M'_{ji} v and variance (M' D M'ᵀ)_{jj}, where M'
//! is built from the mutilated weights and D = I with D_ii = 0. A predicted DAG H estimates the same
//! distribution by adjusting for Z = PA_H(i): regressing x_j on (x_i, Z) in Σ gives coefficient β_i
//! and the adjusted variance σ²_res + β_Zᵀ Σ_ZZ β_Z; when j ∈ PA_H(i), H claims no effect and the
//! estimate is the marginal of x_j (coefficient 0, variance Σ_jj). The pairs whose coefficient or
//! variance differ must be exactly the pairs [`sid_pairs`] reports, since random weights are
//! generic (a wrong adjustment gives a wrong answer for almost every weight choice).

use nalgebra::{DMatrix, DVector};
use occam::graph::{all_dags, sid, sid_pairs, Dag};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const TOLERANCE: f64 = 1e-8;

fn random_dag(rng: &mut ChaCha8Rng, n: usize, p: f64) -> Dag {
    let mut order: Vec<usize> = (0..n).collect();
    for k in (1..n).rev() {
        order.swap(k, rng.random_range(0..=k));
    }
    let mut edges = Vec::new();
    for a in 0..n {
        for b in a + 1..n {
            if rng.random_bool(p) {
                edges.push((order[a], order[b]));
            }
        }
    }
    Dag::from_edges(n, &edges).unwrap()
}

/// A few random edits of `g` (add, remove or reverse an edge) that keep it acyclic, so the
/// prediction is close to the truth, where the subtle cases are.
fn perturb(rng: &mut ChaCha8Rng, g: &Dag, edits: usize) -> Dag {
    let n = g.n();
    let mut h = g.clone();
    for _ in 0..edits {
        let (a, b) = (rng.random_range(0..n), rng.random_range(0..n));
        if a == b {
            continue;
        }
        let mut d = h.as_digraph().clone();
        if d.has_edge(a, b) {
            d.remove_edge(a, b);
            if rng.random_bool(0.5) {
                d.add_edge(b, a).unwrap();
            }
        } else {
            d.remove_edge(b, a);
            d.add_edge(a, b).unwrap();
        }
        if let Ok(next) = Dag::try_from(d) {
            h = next;
        }
    }
    h
}

fn random_weights(rng: &mut ChaCha8Rng, g: &Dag) -> DMatrix<f64> {
    let n = g.n();
    let mut b = DMatrix::zeros(n, n);
    for (from, to) in g.edges() {
        let magnitude = rng.random_range(0.5..=2.0);
        b[(from, to)] = if rng.random_bool(0.5) {
            magnitude
        } else {
            -magnitude
        };
    }
    b
}

/// (I − Bᵀ)⁻¹: column k holds the total effects of noise term k on every variable.
fn total_effects(b: &DMatrix<f64>) -> DMatrix<f64> {
    let n = b.nrows();
    (DMatrix::identity(n, n) - b.transpose())
        .try_inverse()
        .expect("I − Bᵀ is unit triangular up to permutation")
}

/// True coefficient and variance of x_j under do(x_i), for every j.
fn interventional(b: &DMatrix<f64>, i: usize) -> (DVector<f64>, DVector<f64>) {
    let n = b.nrows();
    let mut mutilated = b.clone();
    mutilated.column_mut(i).fill(0.0);
    let m = total_effects(&mutilated);
    let mut noise = DMatrix::identity(n, n);
    noise[(i, i)] = 0.0;
    let cov = &m * noise * m.transpose();
    (m.column(i).clone_owned(), cov.diagonal())
}

/// Coefficient of x_i and implied variance of x_j from adjusting for `z` in covariance `sigma`.
fn adjusted(sigma: &DMatrix<f64>, i: usize, j: usize, z: &[usize]) -> (f64, f64) {
    let s: Vec<usize> = std::iter::once(i).chain(z.iter().copied()).collect();
    let k = s.len();
    let sigma_ss = DMatrix::from_fn(k, k, |r, c| sigma[(s[r], s[c])]);
    let sigma_sj = DVector::from_fn(k, |r, _| sigma[(s[r], j)]);
    let beta = sigma_ss
        .clone()
        .cholesky()
        .expect("a covariance of distinct variables with unit noise is positive definite")
        .solve(&sigma_sj);
    let residual = sigma[(j, j)] - sigma_sj.dot(&beta);
    let beta_z = beta.rows(1, k - 1).clone_owned();
    let sigma_zz = sigma_ss.view((1, 1), (k - 1, k - 1)).clone_owned();
    let spread = (beta_z.transpose() * &sigma_zz * &beta_z)[(0, 0)];
    (beta[0], residual + spread)
}

fn differ(a: f64, b: f64) -> bool {
    (a - b).abs() > TOLERANCE * (1.0 + a.abs().max(b.abs()))
}

/// The ordered pairs whose parent-adjustment estimate from `h` is wrong in the SEM on `g`, with
/// the smallest discrepancy among wrong pairs and the largest among right ones.
fn wrong_pairs_by_regression(
    g: &Dag,
    h: &Dag,
    b: &DMatrix<f64>,
) -> (Vec<(usize, usize)>, f64, f64) {
    let n = g.n();
    let m = total_effects(b);
    let sigma = &m * m.transpose();
    let mut wrong = Vec::new();
    let (mut smallest_wrong, mut largest_right) = (f64::INFINITY, 0.0f64);
    for i in 0..n {
        let (true_coef, true_var) = interventional(b, i);
        let z = h.parents(i);
        for j in (0..n).filter(|&j| j != i) {
            let (coef, var) = if z.contains(&j) {
                (0.0, sigma[(j, j)])
            } else {
                adjusted(&sigma, i, j, &z)
            };
            let gap = ((coef - true_coef[j]).abs() / (1.0 + coef.abs().max(true_coef[j].abs())))
                .max((var - true_var[j]).abs() / (1.0 + var.abs().max(true_var[j].abs())));
            if differ(coef, true_coef[j]) || differ(var, true_var[j]) {
                wrong.push((i, j));
                smallest_wrong = smallest_wrong.min(gap);
            } else {
                largest_right = largest_right.max(gap);
            }
        }
    }
    (wrong, smallest_wrong, largest_right)
}

#[test]
fn a_graph_has_distance_zero_to_itself() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for _ in 0..200 {
        let n = rng.random_range(1..=9);
        let g = random_dag(&mut rng, n, 0.35);
        assert_eq!(sid(&g, &g), 0, "{:?}", g.edges());
    }
}

#[test]
fn sid_is_at_most_the_number_of_ordered_pairs() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for _ in 0..100 {
        let n = rng.random_range(2..=8);
        let g = random_dag(&mut rng, n, 0.4);
        let h = random_dag(&mut rng, n, 0.4);
        assert!(sid(&g, &h) <= n * (n - 1));
    }
}

#[test]
fn sid_equals_the_count_of_wrong_linear_gaussian_estimates_on_random_pairs() {
    let mut rng = ChaCha8Rng::seed_from_u64(2015);
    let (mut smallest_wrong, mut largest_right) = (f64::INFINITY, 0.0f64);
    let mut total_wrong = 0;
    for round in 0..400 {
        let n = rng.random_range(2..=7);
        let density = rng.random_range(0.2..0.7);
        let g = random_dag(&mut rng, n, density);
        let h = if round % 2 == 0 {
            let density = rng.random_range(0.2..0.7);
            random_dag(&mut rng, n, density)
        } else {
            let edits = rng.random_range(1..=3);
            perturb(&mut rng, &g, edits)
        };
        let b = random_weights(&mut rng, &g);
        let (wrong, sw, lr) = wrong_pairs_by_regression(&g, &h, &b);
        assert_eq!(
            sid_pairs(&g, &h),
            wrong,
            "round {round}: G {:?}, H {:?}",
            g.edges(),
            h.edges()
        );
        assert_eq!(sid(&g, &h), wrong.len());
        smallest_wrong = smallest_wrong.min(sw);
        largest_right = largest_right.max(lr);
        total_wrong += wrong.len();
    }

    // The two kinds of pairs are far apart relative to the tolerance, so the count is not an
    // artefact of where the tolerance sits.
    assert!(total_wrong > 500, "{total_wrong}");
    assert!(
        largest_right < 1e-10,
        "largest error on a right pair {largest_right:e}"
    );
    assert!(
        smallest_wrong > 1e-6,
        "smallest error on a wrong pair {smallest_wrong:e}"
    );
}

#[test]
fn sid_equals_the_count_of_wrong_linear_gaussian_estimates_on_all_three_node_pairs() {
    let dags = all_dags(3).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for g in &dags {
        let b = random_weights(&mut rng, g);
        for h in &dags {
            let (wrong, _, _) = wrong_pairs_by_regression(g, h, &b);
            assert_eq!(
                sid_pairs(g, h),
                wrong,
                "G {:?}, H {:?}",
                g.edges(),
                h.edges()
            );
        }
    }
}
