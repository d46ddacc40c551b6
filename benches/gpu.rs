//! Time per call of the GPU kernels against the CPU f64 code they replace, at the uncollapsed
//! bound's shapes: the kernel matrix K(Z, U) (M × T) and the products Q·K (M × M by M × T) and
//! K·Kᵀ. Natively wgpu runs on whatever adapter it finds; on a machine without a GPU that is Mesa's
//! lavapipe, whose figures are correctness-grade (a software rasteriser), not a GPU's speed.
//! Every GPU call here uploads its inputs and reads its result back, as the kernels do today.
//!
//! The second table times whole evaluations of the uncollapsed bound with every gradient: the CPU's
//! f64 path (`svgp::bound_and_gradient`, on the calling thread and on a pool of all cores) against
//! the GPU backend's host-half path (the M × M algebra in f64 here, the predictions in one
//! submission) and its resident one (q(v), the M × M algebra and the natural step on the device,
//! what the engine runs natively), for a batch of `V` variables evaluated together as the engine
//! batches them.
//!
//! The third table times the collapsed bound with every gradient, with a latent input (the
//! interactive and thorough presets' bound): all on the CPU against Ψ2's O(N M²) sums on the GPU
//! in double-float (`Psi2Device`; the rest on the CPU).
//!
//! Run: `cargo bench --bench gpu` (prints the adapter, then median ms per call and the GEMM's
//! GFLOP/s). Under `cargo test` (no `--bench` argument) it times only the smallest size, once, so
//! the test command checks that it runs without spending minutes. With `--issue-sizes` it times
//! the sizes issue 34 names instead, for `scripts/gpu-bench.sh`: whole evaluations of all D
//! variables at (M, b, S, D) = (50, 128, 10, 5), (100, 256, 10, 10), (400, 256, 50, 10), the
//! GEMM Q·K and the compensated SYRK K·Kᵀ at (M, T) = (400, 12 800) with their GFLOP/s, ten
//! double-float Cholesky factorisations with inverses and ten natural-gradient steps of q(v) at
//! M = 400 against the CPU's f64, and the
//! collapsed bound at (N, M, D) = (5000, 400, 20); each figure also as a JSON line
//! (`{"bench": …}`) for the script to read. With `--cholesky=M,N` it times only N double-float
//! factorisations with inverses and N natural steps at size M.

mod common;

use nalgebra::{DMatrix, DVector};
use occam::gp::collapsed::{collapsed_bound_with_grad_on, CollapsedParams, LatentPosterior};
use occam::gp::encoder::Encoder;
use occam::gp::kernel::Kernel;
use occam::gp::linalg::{cholesky_jittered, JitterPolicy};
use occam::gp::natgrad::InducingPosterior;
use occam::gp::svgp::{
    bound_and_gradient, LatentBatch, NatGradStats, SvgpInput, FLOAT32_RELATIVE_JITTER,
};
use occam::runner::gpu::{Accumulation, Batched, Gpu, Op, Psi2OnGpu, ResidentRequest, StateChange};
use occam::runner::{available_threads, Pool};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

/// Median seconds of `run`: one warm-up, then until 2 s or 50 runs (at least 3; one when quick).
fn median(quick: bool, mut run: impl FnMut()) -> f64 {
    run();
    let mut times = Vec::new();
    let started = Instant::now();
    let least = if quick { 1 } else { 3 };
    while times.len() < least
        || (!quick && times.len() < 50 && started.elapsed().as_secs_f64() < 2.0)
    {
        let t = Instant::now();
        run();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    let gpu = match Gpu::open() {
        Ok(gpu) => gpu,
        Err(e) => {
            eprintln!("no GPU to time: {e}");
            return;
        }
    };
    println!("adapter: {}", gpu.adapter());
    let quick = !std::env::args().any(|a| a == "--bench");
    if std::env::args().any(|a| a == "--issue-sizes") {
        issue_sizes(&gpu, quick);
        return;
    }
    if let Some(sizes) =
        std::env::args().find_map(|a| a.strip_prefix("--cholesky=").map(String::from))
    {
        factorisations_only(&gpu, quick, &sizes);
        return;
    }
    let sizes: &[(usize, usize, usize)] = if quick {
        &[(50, 1280, 5)]
    } else {
        &[(50, 1280, 5), (100, 2560, 10), (200, 5120, 10)]
    };
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    println!(
        "{:>5} {:>6} {:>3} {:>12} {:>12} {:>12} {:>12} {:>10} {:>14}",
        "M",
        "T",
        "D",
        "K cpu ms",
        "K gpu ms",
        "QK cpu ms",
        "QK gpu ms",
        "gpu GFLOP/s",
        "KKt comp ms"
    );
    for &(m, t, d) in sizes {
        let kernel = common::bench_kernel(d);
        let z = DMatrix::from_fn(m, d, |_, _| rng.random_range(-2.0..2.0));
        let u = DMatrix::from_fn(t, d, |_, _| rng.random_range(-2.0..2.0));
        let q = DMatrix::from_fn(m, m, |_, _| rng.random_range(-0.1..0.1));
        let k = kernel.cross(&z, &u);
        let k_cpu = median(quick, || {
            std::hint::black_box(kernel.cross(&z, &u));
        });
        let k_gpu = median(quick, || {
            std::hint::black_box(gpu.cross(&kernel, &z, &u).expect("K on the GPU"));
        });
        let qk_cpu = median(quick, || {
            std::hint::black_box(&q * &k);
        });
        let [qk_gpu, syrk_comp] = time_products(&gpu, quick, &q, &k);
        let flops = 2.0 * (m * m * t) as f64;
        println!(
            "{m:>5} {t:>6} {d:>3} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>10.1} {:>14.2}",
            k_cpu * 1e3,
            k_gpu * 1e3,
            qk_cpu * 1e3,
            qk_gpu * 1e3,
            flops / qk_gpu / 1e9,
            syrk_comp * 1e3
        );
    }
    whole_evaluations(&gpu, quick);
    collapsed_psi2(&gpu, quick);
}

/// The sizes issue 34 names (see the module's comment); `quick` shrinks them to a smoke test.
fn issue_sizes(gpu: &Gpu, quick: bool) {
    let whole: &[(usize, usize, usize, usize)] = if quick {
        &[(20, 32, 4, 3)]
    } else {
        &[(50, 128, 10, 5), (100, 256, 10, 10), (400, 256, 50, 10)]
    };
    for &size in whole {
        let (
            [cpu_serial, cpu_pool, on_gpu, resident, with_encoder, encoder_host],
            (read_back, uploaded),
        ) = time_evaluations(gpu, quick, size, size.3);
        let (sizes, variables, threads) = (
            [size.0, size.1, size.2, size.3],
            size.3,
            available_threads(),
        );
        println!(
            "{{\"bench\": \"whole\", \"size\": {sizes:?}, \"variables\": {variables}, \
             \"cpu_1_thread_ms\": {cpu_serial:.3}, \"cpu_all_threads_ms\": {cpu_pool:.3}, \
             \"threads\": {threads}, \"gpu_ms\": {on_gpu:.3}, \"gpu_resident_ms\": {resident:.3}, \
             \"resident_bytes_read_back_per_variable\": {read_back}, \
             \"resident_bytes_uploaded_per_variable\": {uploaded}, \
             \"gpu_resident_with_encoder_ms\": {with_encoder:.3}, \
             \"encoder_cpu_1_thread_ms\": {encoder_host:.3}}}"
        );
    }
    let (m, t) = if quick { (40, 640) } else { (400, 12_800) };
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let q = DMatrix::from_fn(m, m, |_, _| rng.random_range(-0.1..0.1));
    let k = DMatrix::from_fn(m, t, |_, _| rng.random_range(-1.0..1.0));
    let [gemm, syrk] = time_products(gpu, quick, &q, &k);
    // Q·K: 2M²T flops; the SYRK's useful half: M²T (its compensated form does more per term).
    let flops = (m * m * t) as f64;
    println!(
        "{{\"bench\": \"gemm\", \"m\": {m}, \"t\": {t}, \"gemm_ms\": {:.3}, \"gemm_gflops\": {:.2}, \
         \"syrk_compensated_ms\": {:.3}, \"syrk_gflops\": {:.2}}}",
        gemm * 1e3,
        2.0 * flops / gemm / 1e9,
        syrk * 1e3,
        flops / syrk / 1e9
    );
    let (m, slots) = if quick { (40, 3) } else { (400, 10) };
    let t = time_cholesky_jobs(gpu, quick, m, slots, &mut rng);
    println!(
        "{{\"bench\": \"cholesky\", \"m\": {m}, \"matrices\": {slots}, \"cpu_1_thread_ms\": {:.3}, \
         \"gpu_double_float_ms\": {:.3}, \"natural_step_cpu_1_thread_ms\": {:.3}, \
         \"natural_step_gpu_ms\": {:.3}}}",
        t.factorise_cpu * 1e3,
        t.factorise_gpu * 1e3,
        t.natural_step_cpu * 1e3,
        t.natural_step_gpu * 1e3
    );
    let (n, m, d) = if quick { (100, 10, 3) } else { (5000, 400, 20) };
    let [cpu, on_gpu] = time_collapsed(gpu, quick, (n, m, d), &mut rng);
    println!(
        "{{\"bench\": \"collapsed\", \"size\": [{n}, {m}, {d}], \"cpu_1_thread_ms\": {:.3}, \
         \"psi2_on_gpu_ms\": {:.3}}}",
        cpu * 1e3,
        on_gpu * 1e3
    );
}

/// `--cholesky=M,N`: only the double-float factorisations with inverses and the natural steps,
/// N matrices of size M, against the CPU (to time `cholesky.wgsl`'s passes alone).
fn factorisations_only(gpu: &Gpu, quick: bool, sizes: &str) {
    let parsed: Vec<usize> = sizes.split(',').filter_map(|v| v.parse().ok()).collect();
    let [m, slots] = parsed[..] else {
        eprintln!("--cholesky=M,N takes two whole numbers, not {sizes:?}");
        std::process::exit(2);
    };
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let t = time_cholesky_jobs(gpu, quick, m, slots, &mut rng);
    println!(
        "{slots} factorisations with inverses at M = {m}: CPU f64 1 thread {:.1} ms, GPU \
         double-float {:.1} ms; {slots} natural steps: CPU {:.1} ms, GPU {:.1} ms",
        t.factorise_cpu * 1e3,
        t.factorise_gpu * 1e3,
        t.natural_step_cpu * 1e3,
        t.natural_step_gpu * 1e3
    );
}

/// Median seconds of `cholesky.wgsl`'s two jobs on `slots` M × M problems, each on one CPU
/// thread in f64 and in one double-float batch on the GPU (upload and read-back included):
/// - factorising and inverting positive definite matrices (one iteration's K_ZZ of every
///   variable; `cholesky_jittered` and the triangular inverse on the CPU);
/// - natural-gradient steps of q(v) (one iteration's for every variable;
///   `InducingPosterior::natural_step` on the CPU).
///
fn time_cholesky_jobs(
    gpu: &Gpu,
    quick: bool,
    m: usize,
    slots: usize,
    rng: &mut ChaCha8Rng,
) -> CholeskyTimes {
    let policy = JitterPolicy::up_to(1e-6, 10.0, 1e-1);
    let matrices: Vec<DMatrix<f64>> = (0..slots)
        .map(|_| {
            let g = DMatrix::from_fn(m, m, |_, _| rng.random_range(-1.0..1.0));
            &g * g.transpose() / m as f64 + DMatrix::identity(m, m) * 0.1
        })
        .collect();
    let cpu = median(quick, || {
        for a in &matrices {
            let factor = cholesky_jittered(a, policy).expect("positive definite");
            std::hint::black_box(
                factor
                    .l
                    .solve_lower_triangular(&DMatrix::identity(m, m))
                    .expect("a factor has a positive diagonal"),
            );
        }
    });
    let on_gpu = median(quick, || {
        std::hint::black_box(
            gpu.cholesky_batch(&matrices, policy)
                .expect("the factorisations on the GPU"),
        );
    });
    let posteriors = vec![InducingPosterior::prior(m); slots];
    let stats: Vec<NatGradStats> = (0..slots)
        .map(|_| {
            let g = DMatrix::from_fn(m, m, |_, _| rng.random_range(-1.0..1.0));
            NatGradStats {
                lambda: &g * g.transpose() * 10.0,
                r: DVector::from_fn(m, |_, _| rng.random_range(-1.0..1.0)),
            }
        })
        .collect();
    let step_cpu = median(quick, || {
        for (q, st) in posteriors.iter().zip(&stats) {
            let mut q = q.clone();
            q.natural_step(st, 0.1).expect("P is positive definite");
            std::hint::black_box(q);
        }
    });
    let refs: Vec<&InducingPosterior> = posteriors.iter().collect();
    let stat_refs: Vec<&NatGradStats> = stats.iter().collect();
    let step_gpu = median(quick, || {
        std::hint::black_box(
            gpu.natural_steps(&refs, &stat_refs, 0.1)
                .expect("the natural steps on the GPU"),
        );
    });
    CholeskyTimes {
        factorise_cpu: cpu,
        factorise_gpu: on_gpu,
        natural_step_cpu: step_cpu,
        natural_step_gpu: step_gpu,
    }
}

/// Median seconds of [`time_cholesky_jobs`]' two jobs on each side.
struct CholeskyTimes {
    factorise_cpu: f64,
    factorise_gpu: f64,
    natural_step_cpu: f64,
    natural_step_gpu: f64,
}

/// Median seconds on the GPU of the float32 product Q·K and of the compensated SYRK K·Kᵀ.
fn time_products(gpu: &Gpu, quick: bool, q: &DMatrix<f64>, k: &DMatrix<f64>) -> [f64; 2] {
    let (qs, ks) = (vec![q.clone()], vec![k.clone()]);
    let gemm = median(quick, || {
        std::hint::black_box(
            gpu.gemm(
                Batched::new(&qs, Op::AsIs, &ks, Op::AsIs),
                Accumulation::Single,
            )
            .expect("QK on the GPU"),
        );
    });
    let syrk = median(quick, || {
        std::hint::black_box(
            gpu.syrk(k, Accumulation::Compensated)
                .expect("K Kᵀ on the GPU"),
        );
    });
    [gemm, syrk]
}

/// One random uncollapsed problem at (M, b, S, D), the latent in slot 0.
struct Problem {
    kernel: Kernel,
    z: DMatrix<f64>,
    q_mean: DVector<f64>,
    q_cov: DMatrix<f64>,
    x: DMatrix<f64>,
    y: DVector<f64>,
    latent: LatentBatch,
}

impl Problem {
    fn new((m, b, s, d): (usize, usize, usize, usize), rng: &mut ChaCha8Rng) -> Self {
        let mut r = |lo: f64, hi: f64| rng.random_range(lo..hi);
        let a = DMatrix::from_fn(m, m, |_, _| r(-0.1, 0.1));
        Problem {
            kernel: common::bench_kernel(d),
            z: DMatrix::from_fn(m, d, |_, _| r(-2.0, 2.0)),
            q_mean: DVector::from_fn(m, |_, _| r(-0.5, 0.5)),
            q_cov: &a * a.transpose() + DMatrix::identity(m, m) * 0.5,
            x: DMatrix::from_fn(b, d, |_, _| r(-2.0, 2.0)),
            y: DVector::from_fn(b, |_, _| r(-2.0, 2.0)),
            latent: LatentBatch {
                slot: 0,
                mu: DVector::from_fn(b, |_, _| r(-0.5, 0.5)),
                var: DVector::from_fn(b, |_, _| r(0.1, 0.5)),
                eps: DMatrix::from_fn(s, b, |_, _| r(-2.0, 2.0)),
            },
        }
    }

    fn input(&self) -> SvgpInput<'_> {
        SvgpInput {
            kernel: &self.kernel,
            z: &self.z,
            q_mean: &self.q_mean,
            q_cov: &self.q_cov,
            noise: 0.1,
            x: &self.x,
            y: &self.y,
            latent: Some(&self.latent),
            total_rows: 2 * self.x.nrows(),
            jitter: JitterPolicy::default(),
        }
    }
}

/// Whole evaluations (bound + every gradient) of `V` variables: the CPU on one thread and on all
/// cores (the variables spread over the pool), the GPU backend's path with the M × M algebra on
/// one thread.
fn whole_evaluations(gpu: &Gpu, quick: bool) {
    const V: usize = 3;
    let sizes: &[(usize, usize, usize, usize)] = if quick {
        &[(20, 32, 4, 3)]
    } else {
        &[(20, 64, 5, 3), (50, 128, 10, 5), (100, 256, 10, 10)]
    };
    let threads = available_threads();
    println!(
        "\nwhole evaluations, {V} variables per batch, median ms per batch\n{:>18} {:>12} {:>14} {:>12} {:>14} {:>16} {:>16} {:>18} {:>16}",
        "(M, b, S, D)",
        "cpu 1 thread",
        format!("cpu {threads} threads"),
        "gpu",
        "gpu resident",
        "read back B/var",
        "uploaded B/var",
        "+ encoder on gpu",
        "encoder cpu 1 th"
    );
    for &size in sizes {
        let (
            [cpu_serial, cpu_pool, on_gpu, resident, with_encoder, encoder_host],
            (read_back, uploaded),
        ) = time_evaluations(gpu, quick, size, V);
        let size = format!("{size:?}");
        println!(
            "{size:>18} {cpu_serial:>12.2} {cpu_pool:>14.2} {on_gpu:>12.2} {resident:>14.2} \
             {read_back:>16} {uploaded:>16} {with_encoder:>18.2} {encoder_host:>16.2}"
        );
    }
}

/// Median milliseconds of one batch of `variables` whole evaluations at `size` = (M, b, S, D):
/// on one CPU thread, on a pool of all cores, through the host-half GPU path (the M × M algebra in
/// f64 on the host), and resident (`Gpu::resident_evaluations`: q(v) and the M × M algebra on
/// the device, the natural step included, each batch committing the last one's step, as the
/// engine's iterations do), the same with the paper's encoder run on the device, and that
/// encoder's forward and backward passes alone on one CPU thread; with the resident path's bytes
/// read back and uploaded per variable per batch after the first (the device's traffic
/// counters).
fn time_evaluations(
    gpu: &Gpu,
    quick: bool,
    size: (usize, usize, usize, usize),
    variables: usize,
) -> ([f64; 6], (u64, u64)) {
    let pool = Pool::new(available_threads()).expect("a pool");
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let problems: Vec<Problem> = (0..variables)
        .map(|_| Problem::new(size, &mut rng))
        .collect();
    let cpu_serial = median(quick, || {
        for p in &problems {
            std::hint::black_box(bound_and_gradient(&p.input()).expect("the CPU bound"));
        }
    });
    let cpu_pool = median(quick, || {
        std::hint::black_box(pool.map(&problems, |p| {
            bound_and_gradient(&p.input())
                .expect("the CPU bound")
                .terms
                .elbo
        }));
    });
    let on_gpu = median(quick, || {
        let inputs: Vec<SvgpInput> = problems.iter().map(Problem::input).collect();
        std::hint::black_box(
            gpu.bounds_and_gradients(&inputs, FLOAT32_RELATIVE_JITTER)
                .expect("the GPU"),
        );
    });
    let (resident, traffic) = time_resident(gpu, quick, &problems, None);
    // q(w)'s encoder (the paper's: 5 layers of 128) on the device, beside the same evaluation;
    // and its forward and backward passes on one CPU thread, which is what the host did for it
    // before the device ran it.
    let encoders: Vec<Encoder> = problems
        .iter()
        .map(|p| Encoder::new(p.x.ncols(), 128, 5, &mut rng))
        .collect();
    let (with_encoder, _) = time_resident(gpu, quick, &problems, Some(&encoders));
    let encoder_host = median(quick, || {
        for (p, e) in problems.iter().zip(&encoders) {
            let (mu, var, tape) = e.forward(&p.x);
            std::hint::black_box(e.backward(&tape, &mu, &var));
        }
    });
    let seconds = [
        cpu_serial,
        cpu_pool,
        on_gpu,
        resident,
        with_encoder,
        encoder_host,
    ];
    (seconds.map(|s| s * 1e3), traffic)
}

/// φ² of the benches' resident problems.
const NOISE: f64 = 0.1;

/// The raw numbers of `kernel`'s hyperparameters and of φ² = `noise` (floor 0) with zero
/// moments, as a device holding them starts.
fn held_parameters(kernel: &Kernel, noise: f64) -> occam::gp::gp_cde::HeldWeights {
    let values: Vec<f64> = kernel
        .params_to_vec()
        .into_iter()
        .chain([noise])
        .map(occam::gp::transform::softplus_inverse)
        .collect();
    occam::gp::gp_cde::HeldWeights {
        first: vec![0.0; values.len()],
        second: vec![0.0; values.len()],
        values,
    }
}

/// Median seconds of one batch of resident evaluations of `problems` (q(v), Z and the M × M
/// algebra on the device, each batch committing the last one's step, as the engine's iterations
/// do), with `encoders` run on the device when given (the problems' q(w) moments otherwise); and
/// the bytes read back and uploaded per variable per batch after the first (the device's traffic
/// counters).
fn time_resident(
    gpu: &Gpu,
    quick: bool,
    problems: &[Problem],
    encoders: Option<&[Encoder]>,
) -> (f64, (u64, u64)) {
    // Apart from the other run's slots, so that each keeps its own states.
    let base = if encoders.is_some() {
        problems.len()
    } else {
        0
    };
    let encoder = |k: usize| encoders.map(|e| &e[k]);
    // The graph prior's gradient on every hyperparameter, as in the engine's warm-up.
    let extras: Vec<Vec<f64>> = problems
        .iter()
        .map(|p| vec![-10.0; p.kernel.param_count()])
        .collect();
    for (k, p) in problems.iter().enumerate() {
        let factor = cholesky_jittered(&p.q_cov, JitterPolicy::exactly(0.0)).expect("S is SPD");
        let li = occam::gp::linalg::lower_inverse(&factor.l);
        let precision = li.transpose() * &li;
        let q = InducingPosterior {
            eta1: &precision * &p.q_mean,
            precision,
            mean: p.q_mean.clone(),
            cov: p.q_cov.clone(),
        };
        let zeros = vec![0.0; p.z.len()];
        let weights = vec![0.0; encoder(k).map_or(0, Encoder::param_count)];
        let view = occam::gp::gp_cde::ResidentView {
            posterior: &q,
            z: &p.z,
            z_first: &zeros,
            z_second: &zeros,
            encoder: encoder(k),
            encoder_first: &weights,
            encoder_second: &weights,
            parameters: held_parameters(&p.kernel, NOISE),
        };
        gpu.upload_state(base + k, view).expect("P factorises");
    }
    let mut first = true;
    let (mut calls, mut before) = (0u64, gpu.traffic());
    let resident = median(quick, || {
        let requests: Vec<ResidentRequest> = problems
            .iter()
            .enumerate()
            .map(|(k, p)| ResidentRequest {
                slot: base + k,
                kernel: &p.kernel,
                z: &p.z,
                encoder: encoder(k),
                x: &p.x,
                y: &p.y,
                rows: None,
                latent: &p.latent,
                noise: NOISE,
                c: 2.0 / p.latent.eps.nrows() as f64,
                jitter: JitterPolicy::default(),
                relative_jitter: FLOAT32_RELATIVE_JITTER,
                gamma: 1e-4,
                // A tiny Adam step, so that Z stays near the problem's as the natural steps do.
                adam: occam::gp::adam::HeldAdamStep {
                    rate: 1e-6,
                    beta1: 0.9,
                    beta2: 0.999,
                    epsilon: 1e-7,
                },
                parameters: occam::runner::gpu::ParameterStep {
                    extra: &extras[k],
                    noise_floor: 0.0,
                    upload: None,
                },
                before: if first {
                    StateChange::Keep
                } else {
                    StateChange::Commit
                },
                read_current: false,
            })
            .collect();
        if first {
            // The first batch makes the slots' buffers; count the steady state after it.
            std::hint::black_box(gpu.resident_evaluations(&requests).expect("the GPU"));
            before = gpu.traffic();
        } else {
            std::hint::black_box(gpu.resident_evaluations(&requests).expect("the GPU"));
            calls += 1;
        }
        first = false;
    });
    let after = gpu.traffic();
    let per_variable = |a: u64, b: u64| (a - b) / (calls * problems.len() as u64).max(1);
    (
        resident,
        (
            per_variable(after.bytes_read_back, before.bytes_read_back),
            per_variable(after.bytes_uploaded, before.bytes_uploaded),
        ),
    )
}

/// One collapsed bound with every gradient (D − 1 observed inputs and the latent), on one thread:
/// all on the CPU, and with Ψ2's sums on the GPU.
fn collapsed_psi2(gpu: &Gpu, quick: bool) {
    let sizes: &[(usize, usize, usize)] = if quick {
        &[(100, 10, 3)]
    } else {
        &[
            (500, 50, 5),
            (1000, 100, 10),
            (1000, 200, 10),
            (2000, 400, 10),
        ]
    };
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    println!(
        "\ncollapsed bound + gradient with a latent input, median ms\n{:>16} {:>12} {:>14}",
        "(N, M, D)", "cpu", "Ψ2 on gpu"
    );
    for &(n, m, d) in sizes {
        let [cpu, on_gpu] = time_collapsed(gpu, quick, (n, m, d), &mut rng);
        println!(
            "{:>16} {:>12.2} {:>14.2}",
            format!("{:?}", (n, m, d)),
            cpu * 1e3,
            on_gpu * 1e3
        );
    }
}

/// Median seconds of one collapsed bound with every gradient at (N, M, D) (D − 1 observed inputs
/// and the latent), on one thread: all on the CPU, and with Ψ2's sums on the GPU.
fn time_collapsed(
    gpu: &Gpu,
    quick: bool,
    (n, m, d): (usize, usize, usize),
    rng: &mut ChaCha8Rng,
) -> [f64; 2] {
    let obs = d - 1;
    let x = DMatrix::from_fn(n, obs, |_, _| rng.random_range(-1.5..1.5));
    let y = DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0));
    let params = CollapsedParams {
        kernel: Kernel::se_plus_linear(
            (0..d).map(|_| rng.random_range(0.1..0.5)).collect(),
            1.0,
            (0..d).map(|_| rng.random_range(0.5..1.5)).collect(),
        ),
        noise_variance: 0.1,
        z: DMatrix::from_fn(m, d, |_, _| rng.random_range(-1.5..1.5)),
        latent: Some(LatentPosterior {
            mean: DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0)),
            variance: DVector::from_fn(n, |_, _| rng.random_range(0.05..0.5)),
        }),
    };
    let device = Psi2OnGpu(gpu);
    let cpu = median(quick, || {
        std::hint::black_box(
            collapsed_bound_with_grad_on(&x, &y, &params, 1e-6, 1.0, None).expect("the bound"),
        );
    });
    let on_gpu = median(quick, || {
        std::hint::black_box(
            collapsed_bound_with_grad_on(&x, &y, &params, 1e-6, 1.0, Some(&device))
                .expect("the bound"),
        );
    });
    [cpu, on_gpu]
}
