//! The uncollapsed bound: every gradient against central finite differences (f64, relative error
//! below 1e-6), and the natural-gradient step against an independent dense collapsed (SGPR) bound.

use crate::common;

use nalgebra::{DMatrix, DVector};
use occam::gp::encoder::Encoder;
use occam::gp::kernel::{Kernel, StationaryKind};
use occam::gp::natgrad::InducingPosterior;
use occam::gp::svgp::bound_and_gradient;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use common::SvgpProblem as Problem;

fn random_kernel(d: usize, masked: bool, rng: &mut ChaCha8Rng) -> Kernel {
    let mut mask = vec![1.0; d];
    if masked && d > 1 {
        // Switch off one non-latent dimension (the latent slot is 0 in these problems).
        mask[rng.random_range(1..d)] = 0.0;
    }
    common::random_cgp_kernel(mask, rng)
}

fn random_problem(
    d: usize,
    m: usize,
    b: usize,
    samples: usize,
    latent: bool,
    masked: bool,
    seed: u64,
) -> Problem {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let kernel = random_kernel(d, masked, &mut rng);
    Problem::random(kernel, m, b, samples, latent, 0.3, 2 * b + 1, &mut rng)
}

fn elbo(p: &Problem) -> f64 {
    bound_and_gradient(&p.input()).unwrap().terms.elbo
}

/// |fd − an| ≤ 1e-6·max(1, |fd|, |an|): relative where the gradient is large, absolute near 0.
fn assert_close(fd: f64, an: f64, what: &str) {
    let scale = 1f64.max(fd.abs()).max(an.abs());
    assert!(
        (fd - an).abs() <= 1e-6 * scale,
        "{what}: finite difference {fd} vs analytic {an}"
    );
}

/// Fourth-order central difference of the bound along `set(problem, value)`:
/// f' ≈ [8(f(v+h) − f(v−h)) − (f(v+2h) − f(v−2h))]/(12h), truncation error O(h⁴). The larger step
/// it allows (h = 1e-4) keeps round-off small where K_ZZ is ill-conditioned.
fn central(p: &mut Problem, get: impl Fn(&Problem) -> f64, set: impl Fn(&mut Problem, f64)) -> f64 {
    let v = get(p);
    let h = 1e-4 * v.abs().max(1.0);
    let mut at = |x: f64| {
        set(p, x);
        elbo(p)
    };
    let d1 = at(v + h) - at(v - h);
    let d2 = at(v + 2.0 * h) - at(v - 2.0 * h);
    set(p, v);
    (8.0 * d1 - d2) / (12.0 * h)
}

fn check_all_gradients(p: &mut Problem, label: &str) {
    let out = bound_and_gradient(&p.input()).unwrap();
    let g = out.grad;

    let kernel_grad = g.kernel.to_vec();
    for k in 0..kernel_grad.len() {
        let fd = central(
            p,
            |p| p.kernel.params_to_vec()[k],
            |p, v| {
                let mut params = p.kernel.params_to_vec();
                params[k] = v;
                p.kernel.set_params_from_slice(&params);
            },
        );
        assert_close(fd, kernel_grad[k], &format!("{label} kernel param {k}"));
    }
    for i in 0..p.z.nrows() {
        for j in 0..p.z.ncols() {
            let fd = central(p, |p| p.z[(i, j)], |p, v| p.z[(i, j)] = v);
            assert_close(fd, g.z[(i, j)], &format!("{label} Z[{i},{j}]"));
        }
    }
    let fd = central(p, |p| p.noise, |p, v| p.noise = v);
    assert_close(fd, g.noise, &format!("{label} noise"));
    for i in 0..p.q_mean.len() {
        let fd = central(p, |p| p.q_mean[i], |p, v| p.q_mean[i] = v);
        assert_close(fd, g.q_mean[i], &format!("{label} m[{i}]"));
    }
    for i in 0..p.q_cov.nrows() {
        for j in 0..=i {
            // A symmetric perturbation of S_ij and S_ji moves the bound by G_ij + G_ji.
            let fd = central(
                p,
                |p| p.q_cov[(i, j)],
                |p, v| {
                    p.q_cov[(i, j)] = v;
                    p.q_cov[(j, i)] = v;
                },
            );
            let an = if i == j {
                g.q_cov[(i, i)]
            } else {
                g.q_cov[(i, j)] + g.q_cov[(j, i)]
            };
            assert_close(fd, an, &format!("{label} S[{i},{j}]"));
        }
    }
    if p.latent.is_some() {
        for n in 0..p.x.nrows() {
            let fd = central(
                p,
                |p| p.latent.as_ref().unwrap().mu[n],
                |p, v| p.latent.as_mut().unwrap().mu[n] = v,
            );
            assert_close(fd, g.latent_mu[n], &format!("{label} mu[{n}]"));
            let fd = central(
                p,
                |p| p.latent.as_ref().unwrap().var[n],
                |p, v| p.latent.as_mut().unwrap().var[n] = v,
            );
            assert_close(fd, g.latent_var[n], &format!("{label} var[{n}]"));
        }
    }
}

#[test]
fn gradients_match_finite_differences_across_shapes() {
    // (D, M, b, S) from small to the upper ends, masks on and off.
    let shapes = [
        (1, 3, 1, 1),
        (2, 5, 7, 3),
        (3, 8, 4, 2),
        (4, 12, 10, 2),
        (5, 6, 3, 4),
        (3, 30, 6, 1),
        (3, 4, 40, 1),
    ];
    for (case, &(d, m, b, s)) in shapes.iter().enumerate() {
        for masked in [false, true] {
            let mut p = random_problem(d, m, b, s, true, masked, 100 + case as u64);
            check_all_gradients(&mut p, &format!("D={d} M={m} b={b} S={s} masked={masked}"));
        }
    }
}

#[test]
fn gradients_match_finite_differences_without_a_latent() {
    let mut p = random_problem(3, 6, 9, 1, false, false, 7);
    check_all_gradients(&mut p, "no latent");
}

#[test]
fn gradients_match_for_each_kernel_kind_alone() {
    for (k, kind) in StationaryKind::ALL.iter().enumerate() {
        let mut p = random_problem(2, 5, 6, 2, true, false, 40 + k as u64);
        p.kernel.linear = None;
        p.kernel.stationary.retain(|part| part.kind == *kind);
        check_all_gradients(&mut p, &format!("{kind:?} alone"));
    }
    let mut p = random_problem(3, 5, 6, 2, true, true, 49);
    p.kernel.stationary.clear();
    check_all_gradients(&mut p, "linear alone");
}

/// The chain through the amortised encoder: q(w_n) = encoder(x_n), gradients of the bound with
/// respect to the encoder's weights.
#[test]
fn encoder_weight_gradients_match_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut p = random_problem(3, 6, 8, 3, true, false, 12);
    let mut encoder = Encoder::new(3, 6, 2, &mut rng);
    let mut params = encoder.params_to_vec();
    for v in &mut params {
        *v += rng.random_range(-0.3..0.3);
    }
    encoder.set_params_from_slice(&params);
    let rows = p.x.clone();
    let bound = |p: &mut Problem, e: &Encoder| {
        let (mu, var, tape) = e.forward(&rows);
        let lat = p.latent.as_mut().unwrap();
        lat.mu = mu;
        lat.var = var;
        (bound_and_gradient(&p.input()).unwrap(), tape)
    };
    let (out, tape) = bound(&mut p, &encoder);
    let grad = encoder.backward(&tape, &out.grad.latent_mu, &out.grad.latent_var);
    // Every third weight keeps the test quick while touching every layer.
    for k in (0..params.len()).step_by(3) {
        let h = 1e-4;
        let mut e = encoder.clone();
        let mut at = |x: f64| {
            let mut shifted = params.clone();
            shifted[k] = x;
            e.set_params_from_slice(&shifted);
            bound(&mut p, &e).0.terms.elbo
        };
        let v = params[k];
        let fd = (8.0 * (at(v + h) - at(v - h)) - (at(v + 2.0 * h) - at(v - 2.0 * h))) / (12.0 * h);
        assert_close(fd, grad[k], &format!("encoder param {k}"));
    }
}

/// Titsias' collapsed bound, computed densely and independently of the library:
/// F = log N(y | 0, Q + σ²I) − tr(K − Q)/(2σ²), Q = K_xZ (K_ZZ + εI)⁻¹ K_Zx.
fn dense_sgpr(
    kernel: &Kernel,
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    z: &DMatrix<f64>,
    noise: f64,
    jitter: f64,
) -> f64 {
    let n = x.nrows();
    let kzz = kernel.gram(z) + DMatrix::identity(z.nrows(), z.nrows()) * jitter;
    let kxz = kernel.cross(x, z);
    let q = &kxz * kzz.clone().try_inverse().unwrap() * kxz.transpose();
    let cov = &q + DMatrix::identity(n, n) * noise;
    let chol = cov.clone().cholesky().unwrap();
    let logdet = 2.0 * chol.l().diagonal().iter().map(|v| v.ln()).sum::<f64>();
    let quad = y.dot(&chol.solve(y));
    let trace = kernel.diag(x).sum() - q.trace();
    -0.5 * (n as f64 * (2.0 * std::f64::consts::PI).ln() + logdet + quad) - trace / (2.0 * noise)
}

#[test]
fn one_full_batch_natural_step_gives_the_collapsed_bound() {
    for (seed, (d, m, n)) in [(1u64, (1, 5, 20)), (2, (2, 8, 30)), (3, (3, 12, 25))] {
        let mut p = random_problem(d, m, n, 1, false, false, seed);
        p.total_rows = n; // full batch: scale N/b = 1
        let mut q = InducingPosterior::prior(m);
        p.q_mean = q.mean.clone();
        p.q_cov = q.cov.clone();
        let before = bound_and_gradient(&p.input()).unwrap();
        q.natural_step(&before.natgrad, 1.0).unwrap();
        p.q_mean = q.mean.clone();
        p.q_cov = q.cov.clone();
        let after = bound_and_gradient(&p.input()).unwrap();
        let collapsed = dense_sgpr(&p.kernel, &p.x, &p.y, &p.z, p.noise, after.terms.jitter);
        let rel = (after.terms.elbo - collapsed).abs() / collapsed.abs();
        assert!(
            rel < 1e-8,
            "D={d} M={m} N={n}: uncollapsed {} vs collapsed {collapsed} (rel {rel:e})",
            after.terms.elbo
        );
        assert!(after.terms.elbo > before.terms.elbo);
        // At the optimal q the gradient with respect to m vanishes.
        assert!(after.grad.q_mean.amax() < 1e-6 * (1.0 + collapsed.abs()));
    }
}

#[test]
fn natural_steps_with_small_gamma_increase_the_bound_monotonically_in_expectation() {
    let mut p = random_problem(2, 6, 15, 1, false, false, 21);
    p.total_rows = 15;
    let mut q = InducingPosterior::prior(6);
    let mut last = f64::NEG_INFINITY;
    for t in 0..8 {
        p.q_mean = q.mean.clone();
        p.q_cov = q.cov.clone();
        let out = bound_and_gradient(&p.input()).unwrap();
        assert!(
            out.terms.elbo > last,
            "step {t}: {} after {last}",
            out.terms.elbo
        );
        last = out.terms.elbo;
        q.natural_step(&out.natgrad, occam::gp::natgrad::step_size(t).max(0.3))
            .unwrap();
    }
}

#[test]
fn an_indefinite_q_covariance_is_an_error_not_a_jittered_kl() {
    let mut p = random_problem(2, 4, 5, 2, true, false, 6);
    p.q_cov[(2, 2)] = -0.5;
    assert!(bound_and_gradient(&p.input()).is_err());
}

#[test]
fn a_failed_factorisation_is_an_error_not_a_nan() {
    let mut p = random_problem(2, 4, 5, 2, true, false, 5);
    p.z[(1, 0)] = f64::NAN;
    assert!(bound_and_gradient(&p.input()).is_err());
}

/// The fast K_Zt path (observed coordinates shared across samples) against the dense reference:
/// same bound, same gradient, same natural-gradient statistics, masks on and off.
#[test]
fn fast_path_matches_the_dense_reference() {
    use occam::gp::svgp::bound_and_gradient_reference;
    // The last three split the minibatch into several row blocks (16 rows each), the last two K K^T
    // into several block rows (64 each), the last of each partial.
    let shapes = [
        (1, 4, 3, 2),
        (3, 7, 6, 4),
        (5, 9, 5, 3),
        (4, 12, 10, 1),
        (3, 12, 37, 3),
        (3, 70, 37, 3),
        (5, 130, 17, 2),
    ];
    for (case, &(d, m, b, s)) in shapes.iter().enumerate() {
        for masked in [false, true] {
            let mut p = random_problem(d, m, b, s, true, masked, 300 + case as u64);
            if m > 50 {
                // Many inducing points in few dimensions crowd together; spread them so K_ZZ's
                // conditioning (which amplifies round-off in both paths alike) stays moderate.
                p.z *= 4.0;
            }
            // Put the latent in a middle slot to exercise the slot bookkeeping.
            p.latent.as_mut().unwrap().slot = d / 2;
            p.kernel.mask[d / 2] = 1.0;
            let fast = bound_and_gradient(&p.input()).unwrap();
            let dense = bound_and_gradient_reference(&p.input()).unwrap();
            // With many inducing points, K_ZZ⁻¹ amplifies the round-off of K_Zt K_Ztᵀ (summed in a
            // different order by the two paths) in the Z gradient, where terms also cancel.
            let tol = if m > 50 { 1e-8 } else { 1e-10 };
            let close = |a: f64, b: f64| (a - b).abs() <= tol * (1.0 + a.abs().max(b.abs()));
            let label = format!("D={d} M={m} b={b} S={s} masked={masked}");
            assert!(close(fast.terms.elbo, dense.terms.elbo), "{label}: bound");
            let pairs = fast
                .grad
                .kernel
                .to_vec()
                .into_iter()
                .zip(dense.grad.kernel.to_vec());
            for (k, (a, b)) in pairs.enumerate() {
                assert!(close(a, b), "{label}: kernel grad {k}: {a} vs {b}");
            }
            for (a, b) in fast.grad.z.iter().zip(dense.grad.z.iter()) {
                assert!(close(*a, *b), "{label}: Z grad {a} vs {b}");
            }
            for (a, b) in fast
                .grad
                .latent_mu
                .iter()
                .chain(fast.grad.latent_var.iter())
                .zip(
                    dense
                        .grad
                        .latent_mu
                        .iter()
                        .chain(dense.grad.latent_var.iter()),
                )
            {
                assert!(close(*a, *b), "{label}: latent grad {a} vs {b}");
            }
            assert!(close(fast.grad.noise, dense.grad.noise), "{label}: noise");
            for (a, b) in fast.grad.q_mean.iter().zip(dense.grad.q_mean.iter()) {
                assert!(close(*a, *b), "{label}: m grad {a} vs {b}");
            }
            for (a, b) in fast.grad.q_cov.iter().zip(dense.grad.q_cov.iter()) {
                assert!(close(*a, *b), "{label}: S grad {a} vs {b}");
            }
            for (a, b) in fast.natgrad.r.iter().zip(dense.natgrad.r.iter()) {
                assert!(close(*a, *b), "{label}: natural-gradient r {a} vs {b}");
            }
            assert!(
                (&fast.natgrad.lambda - &dense.natgrad.lambda).amax()
                    <= tol * (1.0 + dense.natgrad.lambda.amax())
            );
        }
    }
}

/// The fast path splits one evaluation over the threads of the pool it runs in; no bit of the
/// bound, its gradient or the natural-gradient statistics depends on how many there are.
#[test]
fn one_evaluation_gives_the_same_bits_on_any_number_of_threads() {
    let p = random_problem(3, 70, 37, 3, true, false, 77);
    let on = |threads: usize| {
        occam::runner::Pool::new(threads)
            .unwrap()
            .run(|| bound_and_gradient(&p.input()).unwrap())
    };
    let one = on(1);
    for threads in [2, 3] {
        assert!(on(threads) == one, "{threads} threads differ from 1");
    }
}
