//! What the GPU test files share: opening the device (or skipping on purpose) and the problem
//! shapes the bound's and the resident evaluation's comparisons both start from.

use std::path::Path;
use std::process::Output;

use occam::discovery::settings::{CheckedSettings, Preset, SearchSettings, UncollapsedSettings};
use occam::runner::gpu::Gpu;

use crate::common::{self, SvgpProblem};

/// The device, or `None` when `OCCAM_SKIP_GPU_TESTS=1` skips the GPU tests on purpose (`what`
/// names them in the message). Without an adapter the test fails with wgpu's reason: natively
/// that is Mesa's lavapipe (Vulkan on the CPU, installed by `scripts/test.sh`), so no GPU is
/// needed.
pub fn open(what: &str) -> Option<Gpu> {
    if std::env::var("OCCAM_SKIP_GPU_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("OCCAM_SKIP_GPU_TESTS=1: {what} skipped");
        return None;
    }
    match Gpu::open() {
        Ok(gpu) => {
            eprintln!("{what} on {}", gpu.adapter());
            Some(gpu)
        }
        Err(e) => panic!("{e} (set OCCAM_SKIP_GPU_TESTS=1 to skip these tests on purpose)"),
    }
}

/// (D, M, b, S) shapes at the edges of the device's passes: one point, tile edges, several
/// chunks of the adjoint (T > 256).
pub const EDGE_SHAPES: [(usize, usize, usize, usize); 4] =
    [(1, 1, 1, 1), (2, 16, 8, 2), (3, 7, 30, 10), (5, 40, 64, 10)];

/// One CGP problem per (D, M, b, S) shape, the k-th drawn with seed `first_seed + k`.
pub fn problems(shapes: &[(usize, usize, usize, usize)], first_seed: u64) -> Vec<SvgpProblem> {
    shapes
        .iter()
        .enumerate()
        .map(|(k, &(d, m, b, s))| common::cgp_problem(d, m, b, s, first_seed + k as u64))
        .collect()
}

/// The paper's settings with `inducing_points` M and an uncollapsed minibatch of `batch_size`
/// rows and `samples` draws of the latent input, checked.
pub fn uncollapsed_settings(
    inducing_points: usize,
    batch_size: usize,
    samples: usize,
) -> CheckedSettings {
    SearchSettings {
        inducing_points,
        uncollapsed: UncollapsedSettings {
            batch_size,
            samples,
        },
        ..Preset::Paper.settings()
    }
    .check()
    .unwrap()
}

/// `occam discover www/examples/fork.csv --out <out> <options>`, checked to succeed: what it
/// printed and the result.json it wrote.
pub fn discover_fork(out: &Path, options: &[&str]) -> (Output, String) {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("www/examples/fork.csv");
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_occam"))
        .args(["discover", data.to_str().unwrap(), "--out"])
        .arg(out)
        .args(options)
        .output()
        .expect("occam runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let result = std::fs::read_to_string(out.join("result.json")).unwrap();
    (run, result)
}
