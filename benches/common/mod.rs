//! What more than one bench builds the same way.

use occam::gp::kernel::Kernel;

/// The kernel the bound benches time: the §2.2 kernel (linear 0.25 + the four stationary kinds
/// with variance 1), every part with precisions 0.2 + 0.1 j, RQ shape 2, on `d` inputs.
pub fn bench_kernel(d: usize) -> Kernel {
    let precisions: Vec<f64> = (0..d).map(|j| 0.2 + 0.1 * j as f64).collect();
    Kernel::cgp_cde(
        d,
        0.25,
        1.0,
        std::array::from_fn(|_| precisions.clone()),
        2.0,
    )
}
