//! Time per evaluation of the collapsed GP-CDE bound + its full gradient (the interactive hot
//! path, MODEL.md §4), one variable, CPU f64, one thread, at the sizes the presets fit: the
//! interactive preset's 200 rows with M = 20 and the 300-row / M = 30 alternative, on a 10-node
//! set's 9 observed inputs plus the latent (and the 20-node size). Uses only the collapsed bound's
//! public API, so the same file builds against earlier commits for before/after figures.
//!
//! Run: `cargo bench --bench collapsed`. Prints the median and the minimum of repeated runs.

use nalgebra::{DMatrix, DVector};
use occam::gp::collapsed::{collapsed_bound_with_grad, CollapsedParams, LatentPosterior};
use occam::gp::kernel::Kernel;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

fn problem(
    rows: usize,
    m: usize,
    observed: usize,
    rng: &mut ChaCha8Rng,
) -> (DMatrix<f64>, DVector<f64>, CollapsedParams) {
    let dim = observed + 1;
    let x = DMatrix::from_fn(rows, observed, |_, _| rng.random_range(-1.5..1.5));
    let y = DVector::from_fn(rows, |i, _| {
        f64::sin(x.row(i).sum()) + 0.3 * rng.random_range(-1.0..1.0f64)
    });
    let kernel = Kernel::se_plus_linear(
        (0..dim).map(|_| rng.random_range(0.2..1.0)).collect(),
        1.0,
        (0..dim).map(|_| rng.random_range(0.5..1.5)).collect(),
    );
    let params = CollapsedParams {
        kernel,
        noise_variance: 0.2,
        z: DMatrix::from_fn(m, dim, |_, _| rng.random_range(-2.0..2.0)),
        latent: Some(LatentPosterior {
            mean: DVector::from_fn(rows, |_, _| rng.random_range(-1.0..1.0)),
            variance: DVector::from_fn(rows, |_, _| rng.random_range(0.05..0.5)),
        }),
    };
    (x, y, params)
}

fn main() {
    println!("collapsed bound + full gradient, one variable, CPU f64, one thread");
    println!(
        "{:>5} {:>4} {:>4} {:>10} {:>10}",
        "rows", "M", "D", "median ms", "min ms"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    for &(rows, m, observed) in &[(200, 20, 9), (300, 30, 9), (200, 20, 19), (300, 30, 19)] {
        let (x, y, params) = problem(rows, m, observed, &mut rng);
        let run = || {
            let out =
                collapsed_bound_with_grad(&x, &y, &params, 1e-6).expect("the problem factorises");
            std::hint::black_box(out);
        };
        run();
        let mut times = Vec::new();
        let started = Instant::now();
        while times.len() < 200 && (times.len() < 5 || started.elapsed().as_secs_f64() < 2.0) {
            let t = Instant::now();
            run();
            times.push(t.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{rows:>5} {m:>4} {:>4} {:>10.3} {:>10.3}",
            observed + 1,
            times[times.len() / 2] * 1e3,
            times[0] * 1e3
        );
    }
}
