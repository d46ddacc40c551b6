//! Time per iteration of the uncollapsed bound + its full gradient (one variable, CPU f64, one
//! thread unless `threads=N`), over a grid of (M, b, S, D), including DESIGN.md §6's GPflow
//! comparison sizes.
//!
//! Run: `cargo bench --bench bound` (add `-- quick` for a 3-size smoke run, or `-- gpflow` for
//! exactly the sizes `../shared/bench/anchor_gpflow.py` times by default, fast path only, to run
//! side by side with it: `scripts/bench-gpflow.sh`). Prints the median of repeated runs and the
//! minimum for the fast path, and the dense reference path's median, so a speed-up is read off one
//! run. `size=MxBxSxD` restricts a run to the grid's sizes named (for profiling one size).

mod common;
// The tests' problem type (tests/common), so benches and tests build the bound's input one way.
#[path = "../tests/common/mod.rs"]
mod test_common;

use nalgebra::{DMatrix, DVector};
use occam::gp::svgp::{bound_and_gradient, bound_and_gradient_reference, LatentBatch, SvgpOutput};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use std::time::Instant;
use test_common::SvgpProblem;

/// The benchmark problem of size (M, b, S, D): fixed q(w) and noise, the benches' kernel, drawn
/// from `rng` in the same order as before the tests' problem type was shared.
fn problem(m: usize, b: usize, samples: usize, d: usize, rng: &mut ChaCha8Rng) -> SvgpProblem {
    let mut normal = || -> f64 { rng.sample(StandardNormal) };
    let z = DMatrix::from_fn(m, d, |_, _| normal());
    let x = DMatrix::from_fn(b, d, |_, _| normal());
    let y = DVector::from_fn(b, |_, _| normal());
    let a = DMatrix::from_fn(m, m, |_, _| 0.05 * normal());
    let q_cov = &a * a.transpose() + DMatrix::identity(m, m) * 0.5;
    let q_mean = DVector::from_fn(m, |_, _| 0.1 * normal());
    let eps = DMatrix::from_fn(samples, b, |_, _| normal());
    SvgpProblem {
        kernel: common::bench_kernel(d),
        z,
        q_mean,
        q_cov,
        noise: 0.1,
        x,
        y,
        latent: Some(LatentBatch {
            slot: 0,
            mu: DVector::from_element(b, 0.1),
            var: DVector::from_element(b, 0.3),
            eps,
        }),
        total_rows: 1000,
    }
}

/// (median, minimum) seconds of repeated runs: one warm-up, then until 2 s or 500 runs (at least
/// 3), so the small sizes get enough runs for a stable median on a noisy machine.
fn time(
    mut run: impl FnMut() -> Result<SvgpOutput, occam::gp::linalg::CholeskyError>,
) -> (f64, f64) {
    run().expect("benchmark problem factorises");
    let mut times = Vec::new();
    let started = Instant::now();
    while times.len() < 500 && (times.len() < 3 || started.elapsed().as_secs_f64() < 2.0) {
        let t = Instant::now();
        let out = run().expect("benchmark problem factorises");
        times.push(t.elapsed().as_secs_f64());
        std::hint::black_box(out);
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], times[0])
}

fn main() {
    // As the CLI does: freed scratch matrices are reused (`plain-heap` keeps glibc's defaults, to
    // measure the difference).
    if !std::env::args().any(|a| a == "plain-heap") {
        occam::base::heap::reuse_freed_memory();
    }
    let quick = std::env::args().any(|a| a == "quick");
    let gpflow = std::env::args().any(|a| a == "gpflow");
    // `cargo bench` passes `--bench`; without it (`cargo test --all-targets`, a step of the test
    // command) one small size shows the bench still runs: the whole grid at opt-level 1 took
    // most of the benches' 87 s in that step.
    let smoke = !std::env::args().any(|a| a == "--bench");
    // (M, b, S, D); the first five rows are the GPflow comparison sizes of DESIGN.md §6.
    let grid: &[(usize, usize, usize, usize)] = if smoke {
        &[(50, 64, 5, 3)]
    } else if quick {
        &[(50, 128, 10, 5), (100, 256, 10, 10), (200, 256, 20, 10)]
    } else if gpflow {
        // anchor_gpflow.py's GRID, in its order.
        &[
            (50, 128, 10, 5),
            (100, 256, 10, 10),
            (200, 256, 20, 10),
            (400, 256, 50, 10),
            (400, 256, 50, 20),
        ]
    } else {
        &[
            (400, 256, 50, 10),
            (200, 256, 20, 10),
            (100, 256, 10, 10),
            (50, 128, 10, 5),
            (50, 64, 5, 3),
            (100, 128, 10, 3),
            (100, 256, 20, 20),
            (200, 128, 10, 5),
            (400, 128, 10, 10),
        ]
    };
    // `threads=N` runs each evaluation inside a pool of N threads, which the bound splits its
    // work over (the default 1 keeps everything on the calling thread).
    let threads: usize = std::env::args()
        .find_map(|a| {
            a.strip_prefix("threads=")
                .map(|n| n.parse().expect("threads=N"))
        })
        .unwrap_or(1);
    let pool = occam::runner::Pool::new(threads).expect("a pool of the requested size");
    println!(
        "uncollapsed bound + full gradient, one variable, CPU f64, {} thread(s)",
        pool.threads()
    );
    println!("fast = observed part shared across samples (the default); dense = point-by-point reference");
    println!(
        "{:>5} {:>5} {:>4} {:>4} {:>14} {:>12} {:>15} {:>8}",
        "M", "b", "S", "D", "fast median ms", "fast min ms", "dense median ms", "speed-up"
    );
    // `size=MxBxSxD` (repeatable) times only those sizes of the chosen grid, e.g. for a profile.
    let only: Vec<(usize, usize, usize, usize)> = std::env::args()
        .filter_map(|a| {
            let v: Vec<usize> = a
                .strip_prefix("size=")?
                .split('x')
                .map(|p| p.parse().expect("size=MxBxSxD with integers"))
                .collect();
            Some((v[0], v[1], v[2], v[3]))
        })
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    for &(m, b, s, d) in grid {
        if !only.is_empty() && !only.contains(&(m, b, s, d)) {
            continue;
        }
        let p = problem(m, b, s, d, &mut rng);
        let input = p.input();
        let fast = pool.run(|| time(|| bound_and_gradient(&input)));
        if gpflow {
            println!(
                "{m:>5} {b:>5} {s:>4} {d:>4} {:>14.2} {:>12.2} {:>15} {:>8}",
                fast.0 * 1e3,
                fast.1 * 1e3,
                "-",
                "-"
            );
            continue;
        }
        let dense = time(|| bound_and_gradient_reference(&input));
        println!(
            "{m:>5} {b:>5} {s:>4} {d:>4} {:>14.2} {:>12.2} {:>15.2} {:>7.2}x",
            fast.0 * 1e3,
            fast.1 * 1e3,
            dense.0 * 1e3,
            dense.0 / fast.0
        );
    }
}
