//! The collapsed bound's O(N M²) Ψ2 sums on the GPU (float32 with compensated sums, WGSL through
//! wgpu) against f64 references: the pair sums against a plain triple loop and, through
//! [`Psi2Factors`], against the CPU's Ψ2 itself (with the linear part switched off, Ψ2 is
//! sf2² Σ_n p); the row sums of the reverse mode against a triple loop; and whole collapsed
//! evaluations (the bound and every gradient) with the sums on the GPU against the CPU's, through
//! the variables and through [`GpuBackend`], with its fallback when the device is lost. Like `gpu_bound.rs`, these
//! run on Mesa's lavapipe in the README's test command and fail without an adapter unless
//! `OCCAM_SKIP_GPU_TESTS=1` says to skip them on purpose.
//!
//! Tolerance: the device computes in double-float (about 48 bits). Each term's exponent comes from
//! double-float B, h and Δ² (relative error about 2⁻⁴⁸ · |exponent|, 5·10⁻¹³ at −150), its
//! exponential and product are a few 2⁻⁴⁸ more, and the sums lose nothing: an error of 10⁻¹¹ of the
//! sum of the terms' magnitudes leaves a margin of 20. Terms below float32's range (e^−87) are 0
//! on the device; sums of such terms may be off by 10⁻³⁰ absolutely (the bound adds them to
//! quantities of order 1).

use crate::common;

use std::borrow::Cow;
use std::sync::Arc;

use nalgebra::{DMatrix, DVector};
use occam::discovery::cgp::{Conditional, Evaluation};
use occam::discovery::settings::{Preset, SearchSettings};
use occam::gp::collapsed::{psi_statistics, LatentPosterior};
use occam::gp::kernel::Kernel;
use occam::runner::cost_model::{Side, PROBE_JOBS_PER_SIDE};
use occam::runner::gpu::{Gpu, Psi2Factors, Psi2OnGpu};
use occam::runner::gpu_executor::GpuBackend;
use occam::runner::{Backend, CpuBackend, Job, Outcome};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn gpu() -> Option<Gpu> {
    crate::gpu_device::open("GPU Ψ tests")
}

const TOLERANCE: f64 = 1e-11;

/// Random factors: B ≤ 0 (a few rows far below, whose terms underflow), h ≥ 0, pref in (0, 1].
fn factors(n: usize, m: usize, seed: u64) -> Psi2Factors {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let far: Vec<bool> = (0..n).map(|_| rng.random_bool(0.05)).collect();
    Psi2Factors {
        b: DMatrix::from_fn(n, m, |r, _| {
            if far[r] {
                -rng.random_range(200.0..900.0)
            } else {
                -rng.random_range(0.0..6.0)
            }
        }),
        h: DVector::from_fn(n, |_, _| rng.random_range(0.0..2.0)),
        pref: DVector::from_fn(n, |_, _| rng.random_range(0.2..1.0)),
        zw: DVector::from_fn(m, |_, _| rng.random_range(-2.0..2.0)),
    }
}

/// p(n, i, j) in f64, written out from its definition.
fn p(f: &Psi2Factors, n: usize, i: usize, j: usize) -> f64 {
    let dz = f.zw[i] - f.zw[j];
    f.pref[n] * (f.b[(n, i)] + f.b[(n, j)] - f.h[n] * dz * dz).exp()
}

/// |gpu − exact| ≤ TOLERANCE · scale, entry by entry; returns the worst ratio to the tolerance.
fn compare(what: &str, gpu: &DMatrix<f64>, exact: &DMatrix<f64>, scale: &DMatrix<f64>) -> f64 {
    assert_eq!(gpu.shape(), exact.shape(), "{what}");
    let mut worst: f64 = 0.0;
    for ((g, e), s) in gpu.iter().zip(exact.iter()).zip(scale.iter()) {
        let allowed = TOLERANCE * s + 1e-30;
        assert!(
            (g - e).abs() <= allowed,
            "{what}: {g} against {e} (scale {s})"
        );
        worst = worst.max((g - e).abs() / allowed);
    }
    worst
}

#[test]
fn the_pair_sums_equal_a_triple_loop() {
    let Some(gpu) = gpu() else { return };
    for (n, m, seed) in [(1, 1, 1), (37, 5, 2), (300, 24, 3), (1200, 40, 4)] {
        let mut f = factors(n, m, seed);
        // An exponent beyond float32's range (its term is 0, not NaN).
        f.b[(n - 1, 0)] = -1e40;
        let (sums, weighted) = gpu.psi2_pair_sums(&f).unwrap();
        let exact = DMatrix::from_fn(m, m, |i, j| (0..n).map(|k| p(&f, k, i, j)).sum::<f64>());
        let exact_h = DMatrix::from_fn(m, m, |i, j| {
            (0..n).map(|k| f.h[k] * p(&f, k, i, j)).sum::<f64>()
        });
        let worst = compare("Σ p", &sums, &exact, &exact)
            .max(compare("Σ h p", &weighted, &exact_h, &exact_h));
        eprintln!("N {n}, M {m}: worst error {worst:.3} of the tolerance");
    }
}

#[test]
fn the_row_sums_equal_a_triple_loop() {
    let Some(gpu) = gpu() else { return };
    for (n, m, seed) in [(1, 1, 5), (41, 7, 6), (500, 30, 7)] {
        let f = factors(n, m, seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed + 100);
        let half = DMatrix::from_fn(m, m, |_, _| rng.random_range(-1.0..1.0));
        let w = &half + half.transpose();
        let (wp, wpd) = gpu.psi2_row_sums(&f, &w).unwrap();
        let dz2 = |i: usize, j: usize| (f.zw[i] - f.zw[j]).powi(2);
        let sum = |k: usize, i: usize, g: &dyn Fn(usize) -> f64| {
            (0..m).map(g).sum::<f64>() + 0.0 * (k + i) as f64
        };
        let exact = DMatrix::from_fn(n, m, |k, i| sum(k, i, &|j| w[(i, j)] * p(&f, k, i, j)));
        let scale = DMatrix::from_fn(n, m, |k, i| {
            sum(k, i, &|j| (w[(i, j)] * p(&f, k, i, j)).abs())
        });
        let exact_d = DMatrix::from_fn(n, m, |k, i| {
            sum(k, i, &|j| w[(i, j)] * p(&f, k, i, j) * dz2(i, j))
        });
        let scale_d = DMatrix::from_fn(n, m, |k, i| {
            sum(k, i, &|j| (w[(i, j)] * p(&f, k, i, j) * dz2(i, j)).abs())
        });
        let worst = compare("Σ W p", &wp, &exact, &scale).max(compare(
            "Σ W p Δ²",
            &wpd,
            &exact_d,
            &scale_d,
        ));
        eprintln!("N {n}, M {m}: worst error {worst:.3} of the tolerance");
    }
}

/// Through the factors the CPU's own Ψ2 is reproduced: with every linear variance 0, Ψ2 =
/// sf2² Σ_n p (the cross terms C vanish with the linear part).
#[test]
fn the_factors_give_the_cpus_psi2() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let (n, m, obs) = (250, 16, 3);
    let x = DMatrix::from_fn(n, obs, |_, _| rng.random_range(-1.5..1.5));
    let z = DMatrix::from_fn(m, obs + 1, |_, _| rng.random_range(-1.5..1.5));
    let q = LatentPosterior {
        mean: DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0)),
        variance: DVector::from_fn(n, |_, _| rng.random_range(0.05..0.8)),
    };
    let sf2 = 1.3;
    let mut kernel = Kernel::se_plus_linear(vec![0.0; obs + 1], sf2, vec![0.9, 0.6, 1.4, 1.1]);
    kernel.mask[1] = 0.0;
    let cpu = psi_statistics(&kernel, &x, &z, Some(&q)).unwrap();
    let f = Psi2Factors::new(&kernel, &x, &z, &q).unwrap();
    let (sums, _) = gpu.psi2_pair_sums(&f).unwrap();
    let device = sums * (sf2 * sf2);
    // A problem beyond one storage binding is the CPU's, not a device failure.
    assert!(gpu.psi2_fits(n, m) && !gpu.psi2_fits(1 << 40, m));
    let worst = compare("Ψ2", &device, &cpu.psi2, &cpu.psi2.abs());
    eprintln!("Ψ2 through the factors: worst error {worst:.3} of the tolerance");
    // A kernel without the closed form is refused with the CPU's reason.
    let mut other = kernel.clone();
    other.linear = None;
    assert!(Psi2Factors::new(&other, &x, &z, &q).is_err());
}

/// Collapsed evaluation jobs (interactive preset, every other variable a candidate parent) on a
/// nonlinear chain: each variable's start fitted on the CPU.
fn collapsed_jobs(data: &DMatrix<f64>, m: usize) -> Vec<Job<'static>> {
    let settings = SearchSettings {
        inducing_points: m,
        start_iterations: 30,
        ..Preset::Interactive.settings()
    }
    .check()
    .unwrap();
    let jobs = common::evaluation_jobs(data, &settings, 17, |_| 3);
    for job in &jobs {
        assert!(matches!(
            job,
            Job::Evaluate {
                variable: Cow::Owned(Conditional::Collapsed(_)),
                ..
            }
        ));
    }
    jobs
}

fn chain(n: usize) -> DMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut data = DMatrix::zeros(n, 3);
    for r in 0..n {
        let a: f64 = rng.random_range(-2.0..2.0);
        let b = a.tanh() * 1.5 + 0.3 * rng.random_range(-1.0..1.0);
        data[(r, 0)] = a;
        data[(r, 1)] = b;
        data[(r, 2)] = (b * 1.3).sin() + 0.3 * rng.random_range(-1.0..1.0);
    }
    data
}

fn collapsed(outcome: &Outcome) -> (f64, Vec<f64>) {
    match outcome {
        Outcome::Evaluation(Ok(Evaluation::Collapsed { value, gradient })) => {
            (*value, gradient.clone())
        }
        other => panic!("a collapsed evaluation, got {other:?}"),
    }
}

/// The collapsed bound and its whole gradient with Ψ2's sums on the GPU equal the CPU's f64 ones
/// (through the variables' own evaluation, as training calls it), and the GPU backend sends
/// such evaluations to the GPU from its work threshold on, falling back to the CPU's exact values
/// when the device is lost.
#[test]
fn collapsed_evaluations_with_psi2_on_the_gpu_match_the_cpu_and_fall_back() {
    let Some(gpu) = gpu() else { return };
    let data = chain(160);
    let jobs = collapsed_jobs(&data, 24);
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let device = Psi2OnGpu(&gpu);
    for (job, want) in jobs.iter().zip(&cpu) {
        let Job::Evaluate {
            variable, jitter, ..
        } = job
        else {
            unreachable!()
        };
        let got = Outcome::Evaluation(
            variable
                .evaluate_collapsed_on(&data, *jitter, Some(&device))
                .unwrap(),
        );
        let ((gv, gg), (wv, wg)) = (collapsed(&got), collapsed(want));
        // The bound: Ψ2's relative error (≈ 3·10⁻¹⁴) amplified through K_ZZ's solves (about 10⁶
        // here: a float32 Ψ2 moved one of these bounds by 0.035 nats).
        assert!((gv - wv).abs() <= 1e-8 * wv.abs().max(1.0), "{gv} vs {wv}");
        let scale = wg.iter().fold(0.0f64, |a, g| a.max(g.abs()));
        let worst = gg
            .iter()
            .zip(&wg)
            .fold(0.0f64, |a, (g, w)| a.max((g - w).abs()));
        // The gradient, the same amplification: about 10⁻⁷ absolutely (a float32 Ψ2: 10⁻²).
        assert!(
            worst <= 1e-6 * scale.max(1.0),
            "gradient: worst error {worst} at scale {scale}"
        );
        eprintln!(
            "bound {wv:.6}: error {:.2e}; gradient error {worst:.2e} of {scale:.2e}",
            gv - wv
        );
    }

    let gpu = Arc::new(gpu);
    let backend = GpuBackend::new(gpu.clone(), CpuBackend::serial())
        .with_psi2_min_work(0.0)
        .with_collapsed_on(Side::Device);
    for (g, w) in backend.run(&data, &jobs).iter().zip(&cpu) {
        let ((gv, _), (wv, _)) = (collapsed(g), collapsed(w));
        assert!((gv - wv).abs() <= 1e-8 * wv.abs().max(1.0), "{gv} vs {wv}");
    }
    assert!(backend.failure().is_none());
    // Below the threshold the CPU computes: even a lost device is never asked.
    let high = GpuBackend::new(Arc::new(Gpu::open().unwrap()), CpuBackend::serial())
        .with_psi2_min_work(f64::INFINITY);
    high.gpu().lose_device();
    for (g, w) in high.run(&data, &jobs).iter().zip(&cpu) {
        assert_eq!(collapsed(g), collapsed(w));
    }
    assert!(high.failure().is_none(), "the GPU was not asked");
    // From the threshold on it is asked: the device goes away, the batch is computed on the
    // CPU, whole, and the loss is recorded.
    backend.gpu().lose_device();
    for (g, w) in backend.run(&data, &jobs).iter().zip(&cpu) {
        assert_eq!(collapsed(g), collapsed(w));
    }
    assert!(backend.failure().is_some());
}

/// Unforced, the backend measures where the collapsed search computes: whole batches alternate
/// between the device and the host (the first on each untimed), then every batch, and the refits,
/// go to the side with the lower measured cost per unit of Ψ2 work, which `device_choices`
/// reports with its figures. Every outcome is the CPU's to the device's rounding.
#[test]
fn the_collapsed_probe_alternates_batches_then_keeps_the_cheaper_side() {
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let jobs = collapsed_jobs(&data, 16);
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::serial()).with_psi2_min_work(0.0);
    assert!(backend.device_choices().is_empty(), "nothing timed yet");
    let mut sides = Vec::new();
    let batches = 2 * (PROBE_JOBS_PER_SIDE + 1) + 1;
    for _ in 0..batches {
        let before = backend.gpu().traffic();
        let outcomes = backend.run(&data, &jobs);
        let on_device = (backend.gpu().traffic() - before).submissions > 0;
        sides.push(if on_device { Side::Device } else { Side::Host });
        for (g, w) in outcomes.iter().zip(&cpu) {
            let ((gv, _), (wv, _)) = (collapsed(g), collapsed(w));
            assert!((gv - wv).abs() <= 1e-8 * wv.abs().max(1.0), "{gv} vs {wv}");
        }
    }
    assert!(backend.failure().is_none());
    let choice = backend.device_choices()[0].clone();
    eprintln!("{sides:?}: {choice:?}");
    assert_eq!(choice.work, "collapsed search iterations");
    assert!(
        choice
            .reason
            .starts_with("measured on 2 GPU and 2 CPU jobs"),
        "{}",
        choice.reason
    );
    use Side::{Device as D, Host as H};
    let chosen = if choice.chosen == "GPU" { D } else { H };
    assert_eq!(sides, vec![D, H, D, H, D, H, chosen]);
    let (d, c) = (
        choice.device_seconds_per_unit.unwrap(),
        choice.cpu_seconds_per_unit.unwrap(),
    );
    assert_eq!(chosen, if d < c { D } else { H });
}

/// A refit (L-BFGS on a collapsed variable's objective, as the cool-down and pruning run it) with
/// each evaluation's Ψ2 sums on the GPU reaches the CPU's objective, and falls back to the CPU's
/// exact result when the device is lost.
#[test]
fn refits_with_psi2_on_the_gpu_match_the_cpu_and_fall_back() {
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let jobs: Vec<Job<'static>> = collapsed_jobs(&data, 16)
        .into_iter()
        .enumerate()
        .map(|(child, job)| {
            let Job::Evaluate { variable, .. } = job else {
                unreachable!()
            };
            let Conditional::Collapsed(component) = variable.into_owned() else {
                unreachable!()
            };
            Job::Refine {
                component: Cow::Owned(*component),
                // One refit drops a parent, as pruning's test of an edge does.
                without: (child == 1).then_some(0),
                jitter: 1e-6,
                iterations: 15,
            }
        })
        .collect();
    let objective = |outcome: &Outcome| match outcome {
        Outcome::Refined {
            objective: Ok(value),
            ..
        } => *value,
        other => panic!("a refit, got {other:?}"),
    };
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::serial())
        .with_psi2_min_work(0.0)
        .with_collapsed_on(Side::Device);
    for (g, w) in backend.run(&data, &jobs).iter().zip(&cpu) {
        let (gv, wv) = (objective(g), objective(w));
        // Fifteen L-BFGS steps from the same point on gradients that agree to 10⁻⁷: the paths
        // stay together, and the objectives agree far inside the 10⁻² nats an edge's test uses.
        assert!((gv - wv).abs() <= 1e-6 * wv.abs().max(1.0), "{gv} vs {wv}");
        eprintln!("refit objective {wv:.6}: error {:.2e}", gv - wv);
    }
    assert!(backend.failure().is_none());
    backend.gpu().lose_device();
    for (g, w) in backend.run(&data, &jobs).iter().zip(&cpu) {
        assert_eq!(objective(g), objective(w));
    }
    assert!(backend.failure().is_some());
}

/// `occam discover --backend gpu` says what of a collapsed run computes on the GPU (and the
/// result names the GPU backend).
#[test]
fn discover_with_the_gpu_says_what_of_a_collapsed_run_it_computes() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (out, result) = crate::gpu_device::discover_fork(
        &dir.path().join("run"),
        &[
            "--method",
            "cgp",
            "--backend",
            "gpu",
            "--quiet",
            "--seed",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bound is collapsed; its first iterations are timed"),
        "{stderr}"
    );
    assert!(result.contains("\"backend\": \"GPU (f32, "), "{result}");
    // The probe timed both sides and placed the rest; stdout and result.json say where and why.
    let json: serde_json::Value = serde_json::from_str(&result).unwrap();
    let choice = &json["device_choices"][0];
    assert_eq!(choice["work"], "collapsed search iterations", "{json}");
    assert!(
        choice["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("measured on 2 GPU and 2 CPU jobs")),
        "{choice}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let chosen = choice["chosen"].as_str().unwrap();
    assert!(
        stdout.contains(&format!("collapsed search iterations on the {chosen}")),
        "{stdout}"
    );
}

/// The executor's plan, which the native backend blocks on and the browser's worker awaits:
/// jobs below the Ψ2 threshold run on the host, the others send their sums to the device, and
/// every outcome equals the CPU's. When the device fails after the host's share is done, the plan
/// keeps what the host finished, names the device's error, and completes the rest on the CPU to
/// the same outcomes.
#[test]
fn the_plan_places_jobs_by_their_work_and_keeps_the_hosts_outcomes_when_the_device_fails() {
    use occam::runner::gpu_executor::{placement, run_batch, DeviceUse, Placement};
    use occam::runner::Pool;
    let Some(gpu) = gpu() else { return };
    let data = chain(160);
    // N·M² = 160·8² = 10,240 (host) and 160·24² = 92,160 (device) against 50,000.
    let mut jobs = collapsed_jobs(&data, 8);
    let small = jobs.len();
    jobs.extend(collapsed_jobs(&data, 24));
    let usage = DeviceUse {
        psi2_min_work: 5e4,
        ..DeviceUse::default()
    };
    let places: Vec<Placement> = jobs
        .iter()
        .map(|j| placement(j, data.nrows(), &gpu, usage))
        .collect();
    assert!(places[..small].iter().all(|&p| p == Placement::Host));
    assert!(places[small..]
        .iter()
        .all(|&p| p == Placement::Psi2Evaluation));
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let host = Pool::serial();
    let before = gpu.traffic();
    let outcomes = pollster::block_on(run_batch(&gpu, &host, &data, &jobs, usage, &|| {}))
        .expect("the device works");
    let traffic = gpu.traffic() - before;
    // Two phases (pair sums, then row sums), each one submission for the whole batch.
    assert_eq!(traffic.submissions, 2, "{traffic:?}");
    for (g, w) in outcomes.iter().zip(&cpu) {
        let ((gv, _), (wv, _)) = (collapsed(g), collapsed(w));
        assert!((gv - wv).abs() <= 1e-8 * wv.abs().max(1.0), "{gv} vs {wv}");
    }
    gpu.lose_device();
    let failure = pollster::block_on(run_batch(&gpu, &host, &data, &jobs, usage, &|| {}))
        .expect_err("the device is gone");
    assert!(
        failure.error.to_string().contains("lost"),
        "{}",
        failure.error
    );
    for (k, done) in failure.done.iter().enumerate() {
        match done {
            Some(outcome) => {
                assert!(k < small, "job {k} was the device's");
                assert_eq!(collapsed(outcome), collapsed(&cpu[k]));
            }
            None => assert!(k >= small, "the host's job {k} was lost"),
        }
    }
    for (g, w) in failure.complete_on(&host, &data, &jobs).iter().zip(&cpu) {
        assert_eq!(collapsed(g), collapsed(w));
    }
}
