//! Time per call of the GPU kernels against the CPU f64 code they replace, at the uncollapsed
//! bound's shapes: the kernel matrix K(Z, U) (M × T) and the products Q·K (M × M by M × T) and
//! K·Kᵀ. Natively wgpu runs on whatever adapter it finds; on a machine without a GPU that is Mesa's
//! lavapipe, whose figures are correctness-grade (a software rasteriser), not a GPU's speed.
//! Every GPU call here uploads its inputs and reads its result back, as the kernels do today.
//!
//! Run: `cargo bench --bench gpu` (prints the adapter, then median ms per call and the GEMM's
//! GFLOP/s). Under `cargo test` (no `--bench` argument) it times only the smallest size, once, so
//! the test command checks that it runs without spending minutes.

mod common;

use nalgebra::DMatrix;
use occam::backend::gpu::{Accumulation, Gpu, Op};
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
    let sizes: &[(usize, usize, usize)] = if quick {
        &[(50, 1280, 5)]
    } else {
        &[(50, 1280, 5), (100, 2560, 10), (200, 5120, 10)]
    };
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    println!(
        "{:>5} {:>6} {:>3} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "M", "T", "D", "K cpu ms", "K gpu ms", "QK cpu ms", "QK gpu ms", "gpu GFLOP/s"
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
        let (qs, ks) = (vec![q.clone()], vec![k.clone()]);
        let qk_gpu = median(quick, || {
            std::hint::black_box(
                gpu.gemm(&qs, Op::AsIs, &ks, Op::AsIs, Accumulation::Single)
                    .expect("QK on the GPU"),
            );
        });
        let flops = 2.0 * (m * m * t) as f64;
        println!(
            "{m:>5} {t:>6} {d:>3} {:>12.2} {:>12.2} {:>12.2} {:>12.2} {:>10.1}",
            k_cpu * 1e3,
            k_gpu * 1e3,
            qk_cpu * 1e3,
            qk_gpu * 1e3,
            flops / qk_gpu / 1e9
        );
    }
}
