//! The collapsed bound (MODEL.md §4.3): its value against an independent dense formula, its
//! hand-derived gradient against finite differences, and its relation to the exact GP marginal
//! likelihood.
//!
//! Gradient criterion: |fd − an| ≤ 1e-6 · max(1, |fd|, |an|), with fd the Richardson-extrapolated
//! central difference (4 D(h/2) − D(h))/3, D(h) = (F(p + h) − F(p − h))/(2h),
//! h = 1e-3 · max(|p|, 0.05), whose truncation error is O(h⁴).

use nalgebra::{DMatrix, DVector};
use occam::gp::collapsed::{
    collapsed_bound, collapsed_bound_with_grad, collapsed_bound_with_grad_on, psi_statistics,
    sgpr_bound, CollapsedError, CollapsedParams, LatentPosterior,
};
use occam::gp::kernel::Kernel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const JITTER: f64 = 1e-6;

fn random_problem(
    rng: &mut ChaCha8Rng,
    obs: usize,
    m: usize,
    n: usize,
    latent: bool,
) -> (DMatrix<f64>, DVector<f64>, CollapsedParams) {
    let dim = obs + usize::from(latent);
    let x = DMatrix::from_fn(n, obs, |_, _| rng.random_range(-1.5..1.5));
    let y = DVector::from_fn(n, |i, _| {
        let s: f64 = x.row(i).iter().sum();
        (1.5 * s).sin() + 0.3 * rng.random_range(-1.0..1.0)
    });
    let kernel = Kernel::se_plus_linear(
        (0..dim).map(|_| rng.random_range(0.2..1.0)).collect(),
        rng.random_range(0.5..2.0),
        (0..dim).map(|_| rng.random_range(1.5..3.0)).collect(),
    );
    let params = CollapsedParams {
        kernel,
        noise_variance: rng.random_range(0.1..0.5),
        z: spread(rng, m, dim),
        latent: latent.then(|| LatentPosterior {
            mean: DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0)),
            variance: DVector::from_fn(n, |_, _| rng.random_range(0.05..0.5)),
        }),
    };
    (x, y, params)
}

/// M inducing inputs in [−2, 2]^dim whose coordinates are, column by column, a shuffled grid with
/// some noise: no two points crowd together, so K_ZZ stays well conditioned and finite differences
/// of F stay accurate to well below the 1e-6 criterion.
fn spread(rng: &mut ChaCha8Rng, m: usize, dim: usize) -> DMatrix<f64> {
    let mut z = DMatrix::zeros(m, dim);
    for d in 0..dim {
        let mut slots: Vec<usize> = (0..m).collect();
        for k in (1..m).rev() {
            slots.swap(k, rng.random_range(0..=k));
        }
        for (i, &slot) in slots.iter().enumerate() {
            let t = (slot as f64 + 0.5 + 0.3 * rng.random_range(-1.0..1.0)) / m as f64;
            z[(i, d)] = -2.0 + 4.0 * t;
        }
    }
    z
}

/// A handle on one scalar parameter of [`CollapsedParams`].
#[derive(Debug, Clone, Copy)]
enum Slot {
    Sf2,
    Theta(usize),
    Lin(usize),
    Noise,
    Z(usize, usize),
    Mean(usize),
    Var(usize),
}

fn get(p: &CollapsedParams, s: Slot) -> f64 {
    match s {
        Slot::Sf2 => p.kernel.stationary[0].variance,
        Slot::Theta(d) => p.kernel.stationary[0].precision[d],
        Slot::Lin(d) => p.kernel.linear.as_ref().unwrap()[d],
        Slot::Noise => p.noise_variance,
        Slot::Z(i, d) => p.z[(i, d)],
        Slot::Mean(k) => p.latent.as_ref().unwrap().mean[k],
        Slot::Var(k) => p.latent.as_ref().unwrap().variance[k],
    }
}

fn set(p: &mut CollapsedParams, s: Slot, v: f64) {
    match s {
        Slot::Sf2 => p.kernel.stationary[0].variance = v,
        Slot::Theta(d) => p.kernel.stationary[0].precision[d] = v,
        Slot::Lin(d) => p.kernel.linear.as_mut().unwrap()[d] = v,
        Slot::Noise => p.noise_variance = v,
        Slot::Z(i, d) => p.z[(i, d)] = v,
        Slot::Mean(k) => p.latent.as_mut().unwrap().mean[k] = v,
        Slot::Var(k) => p.latent.as_mut().unwrap().variance[k] = v,
    }
}

fn slots(p: &CollapsedParams) -> Vec<Slot> {
    let dim = p.kernel.dim();
    let mut out = vec![Slot::Sf2, Slot::Noise];
    for d in 0..dim {
        out.push(Slot::Theta(d));
        out.push(Slot::Lin(d));
    }
    for i in 0..p.z.nrows() {
        for d in 0..dim {
            out.push(Slot::Z(i, d));
        }
    }
    if let Some(q) = &p.latent {
        for k in 0..q.mean.len() {
            out.push(Slot::Mean(k));
            out.push(Slot::Var(k));
        }
    }
    out
}

fn analytic(g: &occam::gp::collapsed::CollapsedGrad, s: Slot) -> f64 {
    match s {
        Slot::Sf2 => g.kernel.stationary[0].variance,
        Slot::Theta(d) => g.kernel.stationary[0].precision[d],
        Slot::Lin(d) => g.kernel.linear.as_ref().unwrap()[d],
        Slot::Noise => g.noise_variance,
        Slot::Z(i, d) => g.z[(i, d)],
        Slot::Mean(k) => g.latent_mean[k],
        Slot::Var(k) => g.latent_variance[k],
    }
}

/// Checks every parameter's gradient; returns the largest scaled error seen.
fn check_gradient(x: &DMatrix<f64>, y: &DVector<f64>, p: &CollapsedParams, label: &str) -> f64 {
    check_weighted_gradient(x, y, p, 1.0, label)
}

/// [`check_gradient`] for the bound with every row counted `copies` times.
fn check_weighted_gradient(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    p: &CollapsedParams,
    copies: f64,
    label: &str,
) -> f64 {
    let (_, g) = collapsed_bound_with_grad_on(x, y, p, JITTER, copies, None).unwrap();
    let f = |q: &CollapsedParams| {
        collapsed_bound_with_grad_on(x, y, q, JITTER, copies, None)
            .unwrap()
            .0
    };
    let mut worst = 0.0f64;
    let m = p.z.nrows();
    let k = p.kernel.gram(&p.z) + DMatrix::identity(m, m) * JITTER;
    let eig = k.symmetric_eigenvalues();
    for s in slots(p) {
        let p0 = get(p, s);
        let h = 1e-3 * p0.abs().max(0.05);
        let central = |h: f64| {
            let (mut a, mut b) = (p.clone(), p.clone());
            set(&mut a, s, p0 + h);
            set(&mut b, s, p0 - h);
            (f(&a) - f(&b)) / (2.0 * h)
        };
        let fd = (4.0 * central(h / 2.0) - central(h)) / 3.0;
        let an = analytic(&g, s);
        let scale = fd.abs().max(an.abs()).max(1.0);
        let err = (fd - an).abs() / scale;
        worst = worst.max(err);
        assert!(err <= 1e-6, "{label} {s:?}: fd {fd} vs analytic {an}");
    }
    eprintln!(
        "{label}: cond(K_ZZ + εI) = {:.1e}, worst scaled error {worst:.1e}",
        eig.max() / eig.min()
    );
    worst
}

/// Every gradient (sf2, each θ_d, each v_d, each Z entry, σ², each μ_n, each s_n) with a latent,
/// over a Latin square of shapes covering every pair of |O| ∈ {0,1,2}, M ∈ {3,7,12},
/// N ∈ {1,5,20}.
#[test]
fn gradient_matches_finite_differences_with_latent() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    let shapes = [
        (0, 3, 1),
        (0, 7, 5),
        (0, 12, 20),
        (1, 3, 5),
        (1, 7, 20),
        (1, 12, 1),
        (2, 3, 20),
        (2, 7, 1),
        (2, 12, 5),
    ];
    for (obs, m, n) in shapes {
        let (x, y, p) = random_problem(&mut rng, obs, m, n, true);
        check_gradient(&x, &y, &p, &format!("|O|={obs} M={m} N={n}"));
    }
}

/// The no-latent (SGPR) path, which goes through the kernel's own adjoints.
#[test]
fn gradient_matches_finite_differences_without_latent() {
    let mut rng = ChaCha8Rng::seed_from_u64(32);
    for (obs, m, n) in [(1, 3, 5), (1, 7, 20), (2, 12, 5), (2, 3, 1)] {
        let (x, y, p) = random_problem(&mut rng, obs, m, n, false);
        check_gradient(&x, &y, &p, &format!("no latent |O|={obs} M={m} N={n}"));
    }
}

/// The Cholesky route of the bound against the dense identity it implements:
/// F = −(N/2) log 2πσ² − ½ log det(K + Ψ2/σ²) + ½ log det K − yᵀy/2σ² + bᵀ(K + Ψ2/σ²)⁻¹b/(2σ⁴)
///     − ψ0/2σ² + tr(K⁻¹Ψ2)/2σ² − KL,  b = Ψ1ᵀy.
/// The bound with every row counted r times, against the plain bound of the data with every row
/// (and its q(w_n)) written out r times: values equal, gradients equal (the weighted q(w_n)
/// gradient is the sum over the row's copies), and r·F differs (the complexity term is not
/// multiplied).
#[test]
fn row_copies_equal_the_bound_of_replicated_rows() {
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    for (latent, obs) in [(true, 1), (true, 2), (false, 2)] {
        let (x, y, p) = random_problem(&mut rng, obs, 6, 9, latent);
        let r = 3usize;
        let n = x.nrows();
        let xr = DMatrix::from_fn(n * r, x.ncols(), |i, k| x[(i % n, k)]);
        let yr = DVector::from_fn(n * r, |i, _| y[i % n]);
        let mut pr = p.clone();
        if let Some(q) = &mut pr.latent {
            q.mean = DVector::from_fn(n * r, |i, _| q.mean[i % n]);
            q.variance = DVector::from_fn(n * r, |i, _| q.variance[i % n]);
        }
        let (f_rep, g_rep) = collapsed_bound_with_grad(&xr, &yr, &pr, JITTER).unwrap();
        let (f_w, g_w) = collapsed_bound_with_grad_on(&x, &y, &p, JITTER, r as f64, None).unwrap();
        let close = |a: f64, b: f64, what: &str| {
            assert!(
                (a - b).abs() <= 1e-8 * a.abs().max(b.abs()).max(1.0),
                "latent {latent} |O| {obs}: {what}: replicated {a} vs weighted {b}"
            )
        };
        close(f_rep, f_w, "F");
        close(g_rep.noise_variance, g_w.noise_variance, "∂σ²");
        close(
            g_rep.kernel.stationary[0].variance,
            g_w.kernel.stationary[0].variance,
            "∂sf2",
        );
        for d in 0..p.kernel.dim() {
            close(
                g_rep.kernel.stationary[0].precision[d],
                g_w.kernel.stationary[0].precision[d],
                "∂θ",
            );
            close(
                g_rep.kernel.linear.as_ref().unwrap()[d],
                g_w.kernel.linear.as_ref().unwrap()[d],
                "∂v",
            );
        }
        for (a, b) in g_rep.z.iter().zip(g_w.z.iter()) {
            close(*a, *b, "∂Z");
        }
        for k in 0..g_w.latent_mean.len() {
            let sum = |v: &DVector<f64>| (0..r).map(|c| v[k + c * n]).sum::<f64>();
            close(sum(&g_rep.latent_mean), g_w.latent_mean[k], "∂μ");
            close(sum(&g_rep.latent_variance), g_w.latent_variance[k], "∂s");
        }
        let f_one = collapsed_bound(&x, &y, &p, JITTER).unwrap();
        assert!(
            (r as f64 * f_one - f_w).abs() > 1e-3,
            "r·F should differ from the bound of r copies"
        );
    }
}

/// The weighted bound's gradient against finite differences, for a fractional count of copies.
#[test]
fn row_copies_gradient_matches_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    for (latent, obs, m, n) in [(true, 1, 5, 8), (true, 2, 7, 5), (false, 2, 4, 6)] {
        let (x, y, p) = random_problem(&mut rng, obs, m, n, latent);
        check_weighted_gradient(
            &x,
            &y,
            &p,
            2.7,
            &format!("r = 2.7 latent {latent} |O|={obs}"),
        );
    }
}

#[test]
fn value_matches_the_dense_formula() {
    let mut rng = ChaCha8Rng::seed_from_u64(33);
    for (obs, m, n) in [(0, 4, 6), (1, 5, 9), (2, 6, 4)] {
        let (x, y, p) = random_problem(&mut rng, obs, m, n, true);
        let psi = psi_statistics(&p.kernel, &x, &p.z, p.latent.as_ref()).unwrap();
        let s2 = p.noise_variance;
        let k = p.kernel.gram(&p.z) + DMatrix::identity(m, m) * JITTER;
        let sig = &k + &psi.psi2 / s2;
        let b = psi.psi1.tr_mul(&y);
        let q = p.latent.as_ref().unwrap();
        let kl: f64 = (0..n)
            .map(|i| {
                let (mu, v) = (q.mean[i], q.variance[i]);
                0.5 * (v + mu * mu - 1.0 - v.ln())
            })
            .sum();
        let dense = -0.5 * n as f64 * (2.0 * std::f64::consts::PI * s2).ln()
            - 0.5 * sig.determinant().ln()
            + 0.5 * k.determinant().ln()
            - y.norm_squared() / (2.0 * s2)
            + b.dot(&(sig.clone().try_inverse().unwrap() * &b)) / (2.0 * s2 * s2)
            - psi.psi0 / (2.0 * s2)
            + (k.clone().try_inverse().unwrap() * &psi.psi2).trace() / (2.0 * s2)
            - kl;
        let f = collapsed_bound(&x, &y, &p, JITTER).unwrap();
        assert!(
            (f - dense).abs() <= 1e-8 * dense.abs().max(1.0),
            "|O|={obs}: {f} vs dense {dense}"
        );
    }
}

/// log N(y | 0, K + σ²I) by Cholesky.
fn exact_log_marginal(kernel: &Kernel, x: &DMatrix<f64>, y: &DVector<f64>, s2: f64) -> f64 {
    let n = y.len();
    let c = (kernel.gram(x) + DMatrix::identity(n, n) * s2)
        .cholesky()
        .unwrap();
    let alpha = c.solve(y);
    let logdet = 2.0 * c.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
    -0.5 * (n as f64 * (2.0 * std::f64::consts::PI).ln() + logdet + y.dot(&alpha))
}

/// With Z = the inputs (M = N) and no jitter the bound is the exact log marginal likelihood; with
/// fewer inducing points, or jitter, it is below it.
#[test]
fn bound_is_a_lower_bound_and_tight_at_z_equals_x() {
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    for dim in [1usize, 2] {
        let n = 10;
        let (x, y, mut p) = random_problem(&mut rng, dim, n, n, false);
        p.z = x.clone();
        let exact = exact_log_marginal(&p.kernel, &x, &y, p.noise_variance);
        let tight = collapsed_bound(&x, &y, &p, 0.0).unwrap();
        assert!(
            (tight - exact).abs() <= 1e-8 * exact.abs(),
            "dim {dim}: bound {tight} vs exact {exact}"
        );
        let jittered = sgpr_bound(&p.kernel, &x, &y, &p.z, p.noise_variance).unwrap();
        assert!(
            jittered <= exact && exact - jittered < 1e-3,
            "{jittered} vs {exact}"
        );
        for m in [1usize, 3, 6] {
            let z = DMatrix::from_fn(m, dim, |_, _| rng.random_range(-1.5..1.5));
            let f = sgpr_bound(&p.kernel, &x, &y, &z, p.noise_variance).unwrap();
            assert!(f < exact, "M={m}: {f} ≥ exact {exact}");
            let subset = x.rows(0, m).into_owned();
            let f_subset = collapsed_bound(
                &x,
                &y,
                &CollapsedParams {
                    z: subset,
                    ..p.clone()
                },
                0.0,
            )
            .unwrap();
            assert!(f_subset < exact, "M={m} subset: {f_subset} ≥ exact {exact}");
        }
    }
}

/// With a latent and q(w) fixed, the bound never exceeds the exact marginal likelihood at the
/// posterior-mean inputs by more than the KL it subtracts... tested in its sharp form: with
/// s → 0 and μ = 0 (KL = N/2 (s − 1 − log s) > 0 remains), F + KL approaches the SGPR bound on
/// inputs [x, 0].
#[test]
fn point_mass_latent_matches_sgpr_on_augmented_inputs() {
    let mut rng = ChaCha8Rng::seed_from_u64(35);
    let (x, y, mut p) = random_problem(&mut rng, 1, 5, 8, true);
    let s = 1e-12;
    let q = p.latent.as_mut().unwrap();
    q.variance.fill(s);
    let mu = q.mean.clone();
    let kl: f64 = mu.iter().map(|m| 0.5 * (s + m * m - 1.0 - s.ln())).sum();
    let f = collapsed_bound(&x, &y, &p, JITTER).unwrap();
    let u = DMatrix::from_fn(8, 2, |i, d| if d == 0 { x[(i, 0)] } else { mu[i] });
    let sgpr = sgpr_bound(&p.kernel, &u, &y, &p.z, p.noise_variance).unwrap();
    assert!(
        (f + kl - sgpr).abs() < 1e-8 * sgpr.abs(),
        "{} vs {sgpr}",
        f + kl
    );
}

#[test]
fn failures_are_typed_errors_not_nan() {
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    let (x, y, mut p) = random_problem(&mut rng, 1, 4, 6, true);
    // Two inducing points at the origin, sf2 = 1 and no jitter: K_ZZ has the exact block
    // [[1, 1], [1, 1]], whose second pivot is exactly 0.
    p.kernel.stationary[0].variance = 1.0;
    p.z.row_mut(0).fill(0.0);
    p.z.row_mut(1).fill(0.0);
    assert!(matches!(
        collapsed_bound(&x, &y, &p, 0.0),
        Err(CollapsedError::InducingCovariance(_))
    ));
    assert!(collapsed_bound(&x, &y, &p, 1e-6).unwrap().is_finite());
    // Non-positive noise, mismatched y.
    let mut bad = p.clone();
    bad.noise_variance = 0.0;
    assert!(matches!(
        collapsed_bound(&x, &y, &bad, JITTER),
        Err(CollapsedError::InvalidParameter(_))
    ));
    let short = y.rows(0, 5).into_owned();
    assert!(matches!(
        collapsed_bound(&x, &short, &p, JITTER),
        Err(CollapsedError::Shape(_))
    ));
    // NaN in the data reaches the factorisation as a typed error, never a NaN bound.
    let mut xn = x.clone();
    xn[(0, 0)] = f64::NAN;
    assert!(collapsed_bound(&xn, &y, &p, JITTER).is_err());
}
