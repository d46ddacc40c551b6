//! Helpers shared by the integration tests (`tests/main.rs` declares it once for every file).
// Not every helper is used in every configuration.
#![allow(dead_code)]

use std::borrow::Cow;

use nalgebra::{DMatrix, DVector};
use occam::data::Dataset;
use occam::discovery::jobs::start::ConditionalStart;
use occam::discovery::settings::CheckedSettings;
use occam::gp::kernel::{Kernel, StationaryKind, StationaryPart};
use occam::gp::linalg::JitterPolicy;
use occam::gp::svgp::{LatentBatch, SvgpInput};
use occam::runner::Job;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// A random CGP-CDE kernel (a linear part and every stationary kind) on `mask.len()` inputs,
/// switched by `mask`: θ^lin ~ U(0.1, 0.6), each kind's s and θ ~ U(0.3, 1.5), then the
/// rational-quadratic shape a ~ U(0.5, 3), drawn from `rng` in that order.
pub fn random_cgp_kernel(mask: Vec<f64>, rng: &mut ChaCha8Rng) -> Kernel {
    let d = mask.len();
    let linear = Some((0..d).map(|_| rng.random_range(0.1..0.6)).collect());
    let stationary = StationaryKind::ALL
        .iter()
        .map(|&kind| {
            StationaryPart::new(
                kind,
                rng.random_range(0.3..1.5),
                (0..d).map(|_| rng.random_range(0.3..1.5)).collect(),
                1.0,
            )
        })
        .collect();
    let alpha = rng.random_range(0.5..3.0);
    Kernel {
        linear,
        stationary,
        mask,
    }
    .with_rq_alpha(alpha)
}

/// A random uncollapsed problem: every kernel kind, one input masked off when `d > 2`, the latent
/// in slot 0, q(v) with a full covariance, the minibatch standing for 3b rows.
pub fn cgp_problem(d: usize, m: usize, b: usize, samples: usize, seed: u64) -> SvgpProblem {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut mask = vec![1.0; d];
    if d > 2 {
        mask[rng.random_range(1..d)] = 0.0;
    }
    let kernel = random_cgp_kernel(mask, &mut rng);
    let spread = 0.3 / (m as f64).sqrt();
    SvgpProblem::random(kernel, m, b, samples, true, spread, 3 * b, &mut rng)
}

/// One variable's uncollapsed-bound problem: kernel, inducing inputs, q(v), noise, a minibatch
/// and (optionally) its latent inputs.
#[derive(Clone)]
pub struct SvgpProblem {
    pub kernel: Kernel,
    pub z: DMatrix<f64>,
    pub q_mean: DVector<f64>,
    pub q_cov: DMatrix<f64>,
    pub noise: f64,
    pub x: DMatrix<f64>,
    pub y: DVector<f64>,
    pub latent: Option<LatentBatch>,
    /// N: the minibatch stands for this many rows.
    pub total_rows: usize,
}

impl SvgpProblem {
    /// A random problem with `kernel` (drawn first from `rng`) on M = `m` inducing points and a
    /// minibatch of `b` rows: z, x, y ~ N(0, 1), q's mean ~ N(0, 0.25), q's covariance
    /// A Aᵀ + 0.2 I with A's entries ~ N(0, `spread`²), the latent (slot 0, `samples` draws per
    /// row, when `latent`), then σ² ~ U(0.05, 0.5), drawn in that order.
    #[allow(clippy::too_many_arguments)]
    pub fn random(
        kernel: Kernel,
        m: usize,
        b: usize,
        samples: usize,
        latent: bool,
        spread: f64,
        total_rows: usize,
        rng: &mut ChaCha8Rng,
    ) -> Self {
        let d = kernel.mask.len();
        let normal = |rng: &mut ChaCha8Rng| -> f64 { rng.sample(StandardNormal) };
        let z = DMatrix::from_fn(m, d, |_, _| normal(rng));
        let q_mean = DVector::from_fn(m, |_, _| 0.5 * normal(rng));
        let a = DMatrix::from_fn(m, m, |_, _| spread * normal(rng));
        let q_cov = &a * a.transpose() + DMatrix::identity(m, m) * 0.2;
        let x = DMatrix::from_fn(b, d, |_, _| normal(rng));
        let y = DVector::from_fn(b, |_, _| normal(rng));
        let latent = latent.then(|| LatentBatch {
            slot: 0,
            mu: DVector::from_fn(b, |_, _| 0.5 * normal(rng)),
            var: DVector::from_fn(b, |_, _| rng.random_range(0.05..0.8)),
            eps: DMatrix::from_fn(samples, b, |_, _| normal(rng)),
        });
        Self {
            kernel,
            z,
            q_mean,
            q_cov,
            noise: rng.random_range(0.05..0.5),
            x,
            y,
            latent,
            total_rows,
        }
    }

    /// The bound's input for this problem (default jitter).
    pub fn input(&self) -> SvgpInput<'_> {
        SvgpInput {
            kernel: &self.kernel,
            z: &self.z,
            q_mean: &self.q_mean,
            q_cov: &self.q_cov,
            noise: self.noise,
            x: &self.x,
            y: &self.y,
            latent: self.latent.as_ref(),
            total_rows: self.total_rows,
            jitter: JitterPolicy::default(),
        }
    }
}

/// One evaluation job per variable of `data`, every other variable a candidate parent, each
/// variable built as the engine builds it with `settings` from seed `seed + i` and evaluated with
/// seed `job_seed(i)`.
pub fn evaluation_jobs(
    data: &DMatrix<f64>,
    settings: &CheckedSettings,
    seed: u64,
    job_seed: impl Fn(usize) -> u64,
) -> Vec<Job<'static>> {
    (0..data.ncols())
        .map(|child| {
            let start = ConditionalStart {
                child,
                parents: (0..data.ncols()).filter(|&j| j != child).collect(),
                noise_floor: 1e-4,
                total_rows: data.nrows(),
                settings: settings.clone(),
            };
            let mut rng = ChaCha8Rng::seed_from_u64(seed + child as u64);
            let variable = start.build(data, &mut rng).expect("a variable");
            Job::Evaluate {
                variable: Cow::Owned(variable),
                jitter: 1e-6,
                seed: job_seed(child),
            }
        })
        .collect()
}

/// a → b → c with non-linear mechanisms on `n` rows drawn from `seed`: a ~ N(0, 1),
/// b = 1.5 sin(1.5 a) + ε, c = 0.8 b² + ε with ε ~ N(0, 0.25²).
pub fn nonlinear_chain(seed: u64, n: usize) -> Dataset {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut noise = || rng.sample::<f64, _>(StandardNormal);
    let a: Vec<f64> = (0..n).map(|_| noise()).collect();
    let b: Vec<f64> = a
        .iter()
        .map(|&x| (1.5 * x).sin() * 1.5 + 0.25 * noise())
        .collect();
    let c: Vec<f64> = b.iter().map(|&x| x * x * 0.8 + 0.25 * noise()).collect();
    Dataset::new(vec!["a".into(), "b".into(), "c".into()], vec![a, b, c])
}
