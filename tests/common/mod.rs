//! Helpers shared by the integration tests (a module of each test crate that declares it).

use occam::gp::kernel::{Kernel, StationaryKind, StationaryPart};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

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
