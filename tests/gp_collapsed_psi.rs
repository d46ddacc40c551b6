//! Psi-statistics (MODEL.md §4.2) against Monte Carlo expectations over q(w), with tolerances
//! from the Monte Carlo standard error; the SE × linear cross term on its own; the small-variance
//! limit against plain kernel values; and the no-latent reduction to kernel products.

use nalgebra::{DMatrix, DVector};
use occam::gp::collapsed::{psi_statistics, LatentPosterior, PsiStatistics};
use occam::gp::kernel::Kernel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// Draws of w per data row.
const DRAWS: usize = 200_000;
/// Allowed deviation in standard errors (a Gaussian exceeds 5σ with probability 6e-7).
const SIGMAS: f64 = 5.0;

struct Setup {
    sf2: f64,
    theta: Vec<f64>,
    v: Vec<f64>,
    x: DMatrix<f64>,
    z: DMatrix<f64>,
    q: LatentPosterior,
}

fn setup(rng: &mut ChaCha8Rng, obs: usize, n: usize, m: usize) -> Setup {
    let dim = obs + 1;
    Setup {
        sf2: rng.random_range(0.5..2.0),
        theta: (0..dim).map(|_| rng.random_range(0.5..1.5)).collect(),
        v: (0..dim).map(|_| rng.random_range(0.2..1.0)).collect(),
        x: DMatrix::from_fn(n, obs, |_, _| rng.random_range(-1.5..1.5)),
        z: DMatrix::from_fn(m, dim, |_, _| rng.random_range(-1.5..1.5)),
        q: LatentPosterior {
            mean: DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0)),
            variance: DVector::from_fn(n, |_, _| rng.random_range(0.05..0.8)),
        },
    }
}

impl Setup {
    fn kernel(&self, sf2: f64, v_scale: f64) -> Kernel {
        Kernel::se_plus_linear(
            self.v.iter().map(|v| v * v_scale).collect(),
            sf2,
            self.theta.clone(),
        )
    }

    /// (k_se(u, z_m), k_lin(u, z_m)) for u = [x_n, w], written out independently of the kernel
    /// module.
    fn parts(&self, n: usize, w: f64, m: usize) -> (f64, f64) {
        let obs = self.x.ncols();
        let (mut r2, mut lin) = (0.0, 0.0);
        for d in 0..=obs {
            let u = if d < obs { self.x[(n, d)] } else { w };
            let diff = u - self.z[(m, d)];
            r2 += self.theta[d] * self.theta[d] * diff * diff;
            lin += self.v[d] * u * self.z[(m, d)];
        }
        (self.sf2 * (-0.5 * r2).exp(), lin)
    }
}

/// Running mean and variance of a batch of estimators.
struct Moments {
    sum: Vec<f64>,
    sq: Vec<f64>,
}

impl Moments {
    fn new(len: usize) -> Self {
        Self {
            sum: vec![0.0; len],
            sq: vec![0.0; len],
        }
    }
    fn add(&mut self, k: usize, v: f64) {
        self.sum[k] += v;
        self.sq[k] += v * v;
    }
    /// (mean, variance of the mean).
    fn estimate(&self, k: usize, draws: usize) -> (f64, f64) {
        let s = draws as f64;
        let mean = self.sum[k] / s;
        let var = (self.sq[k] / s - mean * mean).max(0.0) * s / (s - 1.0);
        (mean, var / s)
    }
}

fn close(what: &str, exact: f64, mc: f64, var_of_mean: f64) {
    let tol = SIGMAS * var_of_mean.sqrt() + 1e-12;
    assert!(
        (exact - mc).abs() <= tol,
        "{what}: exact {exact} vs Monte Carlo {mc} (tolerance {tol:.3e})"
    );
}

/// ψ0, Ψ1 and Ψ2 (with the cross term inside) against Monte Carlo, and the cross term alone:
/// Ψ2(sf2, v) − Ψ2(sf2, 0) − Ψ2(0, v) = Σ_n E[k_se k_linᵀ + k_lin k_seᵀ].
#[test]
fn psi_statistics_match_monte_carlo() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    for obs in [0usize, 2] {
        let (n, m) = (3, 4);
        let s = setup(&mut rng, obs, n, m);
        let full = psi_statistics(&s.kernel(s.sf2, 1.0), &s.x, &s.z, Some(&s.q)).unwrap();
        let se_only = psi_statistics(&s.kernel(s.sf2, 0.0), &s.x, &s.z, Some(&s.q)).unwrap();
        let lin_only = psi_statistics(&s.kernel(0.0, 1.0), &s.x, &s.z, Some(&s.q)).unwrap();
        let cross_exact = &full.psi2 - &se_only.psi2 - &lin_only.psi2;

        // Per row: ψ0 (1), Ψ1 (m), Ψ2 (m²), cross (m²).
        let mut psi2_mc = DMatrix::zeros(m, m);
        let mut psi2_var = DMatrix::zeros(m, m);
        let mut cross_mc = DMatrix::zeros(m, m);
        let mut cross_var = DMatrix::zeros(m, m);
        let (mut psi0_mc, mut psi0_var) = (0.0, 0.0);
        for row in 0..n {
            let (mu, sd) = (s.q.mean[row], s.q.variance[row].sqrt());
            let mut mom = Moments::new(1 + m + 2 * m * m);
            let mut se = vec![0.0; m];
            let mut lin = vec![0.0; m];
            for _ in 0..DRAWS {
                let w = mu + sd * rng.sample::<f64, _>(StandardNormal);
                for j in 0..m {
                    (se[j], lin[j]) = s.parts(row, w, j);
                }
                let mut kuu = s.sf2 + s.v[obs] * w * w;
                for d in 0..obs {
                    kuu += s.v[d] * s.x[(row, d)] * s.x[(row, d)];
                }
                mom.add(0, kuu);
                for j in 0..m {
                    let kj = se[j] + lin[j];
                    mom.add(1 + j, kj);
                    for l in 0..m {
                        let kl = se[l] + lin[l];
                        mom.add(1 + m + j * m + l, kj * kl);
                        mom.add(1 + m + m * m + j * m + l, se[j] * lin[l] + lin[j] * se[l]);
                    }
                }
            }
            let (p0, v0) = mom.estimate(0, DRAWS);
            psi0_mc += p0;
            psi0_var += v0;
            for j in 0..m {
                let (p1, v1) = mom.estimate(1 + j, DRAWS);
                close(
                    &format!("|O|={obs} Ψ1[{row},{j}]"),
                    full.psi1[(row, j)],
                    p1,
                    v1,
                );
                for l in 0..m {
                    let (p2, v2) = mom.estimate(1 + m + j * m + l, DRAWS);
                    psi2_mc[(j, l)] += p2;
                    psi2_var[(j, l)] += v2;
                    let (c, vc) = mom.estimate(1 + m + m * m + j * m + l, DRAWS);
                    cross_mc[(j, l)] += c;
                    cross_var[(j, l)] += vc;
                }
            }
        }
        close(&format!("|O|={obs} ψ0"), full.psi0, psi0_mc, psi0_var);
        for j in 0..m {
            for l in 0..m {
                close(
                    &format!("|O|={obs} Ψ2[{j},{l}]"),
                    full.psi2[(j, l)],
                    psi2_mc[(j, l)],
                    psi2_var[(j, l)],
                );
                close(
                    &format!("|O|={obs} cross[{j},{l}]"),
                    cross_exact[(j, l)],
                    cross_mc[(j, l)],
                    cross_var[(j, l)],
                );
            }
        }
        // The cross term is not negligible here: it exceeds the largest Ψ2 tolerance tenfold, so
        // dropping it would fail the Ψ2 check.
        assert!(cross_exact.amax() > 10.0 * SIGMAS * psi2_var.amax().sqrt());
    }
}

/// As s_n → 0, q(w_n) is a point mass at μ_n: the statistics tend to the plain kernel values at
/// u_n = [x_n, μ_n] (the error is O(s), checked at s = 1e-12).
#[test]
fn small_latent_variance_gives_kernel_values() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for obs in [0usize, 1, 2] {
        let mut s = setup(&mut rng, obs, 6, 5);
        s.q.variance.fill(1e-12);
        let kernel = s.kernel(s.sf2, 1.0);
        let psi = psi_statistics(&kernel, &s.x, &s.z, Some(&s.q)).unwrap();
        let u = DMatrix::from_fn(
            6,
            obs + 1,
            |i, d| {
                if d < obs {
                    s.x[(i, d)]
                } else {
                    s.q.mean[i]
                }
            },
        );
        let k = kernel.cross(&u, &s.z);
        let expect = PsiStatistics {
            psi0: kernel.diag(&u).sum(),
            psi2: k.tr_mul(&k),
            psi1: k,
        };
        let rel = |a: &DMatrix<f64>, b: &DMatrix<f64>| (a - b).amax() / b.amax();
        assert!(rel(&psi.psi1, &expect.psi1) < 1e-10, "|O|={obs} Ψ1");
        assert!(rel(&psi.psi2, &expect.psi2) < 1e-10, "|O|={obs} Ψ2");
        assert!((psi.psi0 - expect.psi0).abs() < 1e-10 * expect.psi0.abs());
    }
}

/// Without a latent the statistics are exactly kernel values: ψ0 = Σ k(x_n, x_n), Ψ1 = K_xZ,
/// Ψ2 = K_Zx K_xZ (same arithmetic, so equal to the last bit).
#[test]
fn no_latent_reduces_to_kernel_products() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    for dim in [1usize, 2, 3] {
        let kernel = Kernel::se_plus_linear(
            (0..dim).map(|_| rng.random_range(0.1..1.0)).collect(),
            1.7,
            (0..dim).map(|_| rng.random_range(0.3..2.0)).collect(),
        );
        let x = DMatrix::from_fn(7, dim, |_, _| rng.random_range(-2.0..2.0));
        let z = DMatrix::from_fn(4, dim, |_, _| rng.random_range(-2.0..2.0));
        let psi = psi_statistics(&kernel, &x, &z, None).unwrap();
        let kxz = kernel.cross(&x, &z);
        assert_eq!(psi.psi1, kxz);
        assert_eq!(psi.psi2, kxz.transpose() * &kxz);
        assert_eq!(psi.psi0, kernel.diag(&x).sum());
    }
}

#[test]
fn shape_and_kernel_errors_are_typed() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let s = setup(&mut rng, 1, 4, 3);
    // Kernel of the wrong dimension for [x, w].
    let wrong = Kernel::se_plus_linear(vec![1.0], 1.0, vec![1.0]);
    assert!(psi_statistics(&wrong, &s.x, &s.z, Some(&s.q)).is_err());
    // A kernel without an SE part has no closed form here.
    let mut no_se = s.kernel(1.0, 1.0);
    no_se.stationary.clear();
    let err = psi_statistics(&no_se, &s.x, &s.z, Some(&s.q)).unwrap_err();
    assert!(err.to_string().contains("squared-exponential"), "{err}");
}
