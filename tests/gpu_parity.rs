//! The GPU kernels (float32, WGSL through wgpu) against the CPU f64 reference. They run on whatever
//! adapter wgpu finds natively: in the README's test command that is Mesa's lavapipe (Vulkan on the
//! CPU, installed by `scripts/test.sh`), so no GPU is needed. Without any adapter the tests fail with
//! wgpu's reason, unless `OCCAM_SKIP_GPU_TESTS=1` says to skip them on purpose.

use nalgebra::DMatrix;
use occam::gp::kernel::{
    unit_dvalue_dalpha, unit_value_and_dr2, Kernel, StationaryKind, StationaryPart,
};
use occam::runner::gpu::{Accumulation, Batched, Gpu, GpuError, Op, Spacing};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn gpu() -> Option<Gpu> {
    crate::gpu_device::open("GPU parity tests")
}

fn random_kernel(d: usize, parts: &[StationaryKind], rng: &mut ChaCha8Rng) -> Kernel {
    // Drawn in the order the fields were once written: θ^lin, the parts, a, the mask.
    let linear = rng
        .random_bool(0.7)
        .then(|| (0..d).map(|_| rng.random_range(0.0..0.5)).collect());
    let stationary = parts
        .iter()
        .map(|&kind| {
            StationaryPart::new(
                kind,
                rng.random_range(0.2..2.0),
                (0..d).map(|_| rng.random_range(0.01..1.5)).collect(),
                1.0,
            )
        })
        .collect();
    let alpha = rng.random_range(0.2..8.0);
    // Some inputs masked off, never all.
    let mask = (0..d)
        .map(|j| {
            if j > 0 && rng.random_bool(0.3) {
                0.0
            } else {
                1.0
            }
        })
        .collect();
    Kernel {
        linear,
        stationary,
        mask,
    }
    .with_rq_alpha(alpha)
}

/// The bound the comparison is held to. Every input is rounded to float32 (relative 2⁻²⁴), and
/// r² is a sum of D squared differences each rounded a few times, so r² carries a relative error of
/// about (D + 3)·2⁻²⁴. Each shape turns a relative error δ in r² into an absolute error of at most
/// |r² ∂κ/∂r²|·δ ≤ δ (r²κ′ is below e⁻¹ for every kind), plus a few ulp of exp/log; the linear
/// part's terms carry (D + 2)·2⁻²⁴ of their magnitude. A factor 16 over that covers the
/// accumulation order and the looser functions WGSL allows a real GPU (exp within 3 + 2|x| ulp).
/// On lavapipe the largest difference measured is 50–150 times below this bound.
fn tolerance(kernel: &Kernel, a: &DMatrix<f64>, b: &DMatrix<f64>) -> f64 {
    let d = kernel.dim() as f64;
    let eps = f64::from(f32::EPSILON) / 2.0;
    let variances: f64 = kernel.stationary.iter().map(|p| p.variance).sum();
    let linear: f64 = kernel
        .linear
        .as_ref()
        .map_or(0.0, |lin| lin.iter().sum::<f64>() * a.amax() * b.amax());
    16.0 * (d + 4.0) * eps * (variances + linear)
}

#[test]
fn the_kernel_matrix_equals_the_cpu_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(14);
    let all = StationaryKind::ALL;
    let cases: &[(usize, usize, usize, &[StationaryKind])] = &[
        (1, 1, 1, &all),
        (7, 13, 1, &all),
        (50, 37, 5, &all),
        (9, 70, 3, &[StationaryKind::Matern12]),
        (
            33,
            8,
            6,
            &[
                StationaryKind::RationalQuadratic,
                StationaryKind::SquaredExponential,
            ],
        ),
        (20, 20, 4, &[]),
    ];
    for &(n, m, d, parts) in cases {
        let kernel = random_kernel(d, parts, &mut rng);
        let a = DMatrix::from_fn(n, d, |_, _| rng.random_range(-2.5..2.5));
        let mut b = DMatrix::from_fn(m, d, |_, _| rng.random_range(-2.5..2.5));
        // Coincident points (r² = 0 exactly: the κ = 1 branch), and a point that differs from
        // one in A only in the masked dimensions (also r² = 0).
        b.row_mut(0).copy_from(&a.row(0));
        if m > 1 && n > 1 {
            b.row_mut(1).copy_from(&a.row(1));
            for j in 0..d {
                if kernel.mask[j] == 0.0 {
                    b[(1, j)] += 1.0;
                }
            }
        }
        let want = kernel.cross(&a, &b);
        let got = gpu.cross(&kernel, &a, &b).expect("the GPU computes K");
        assert_eq!(got.shape(), (n, m));
        let tol = tolerance(&kernel, &a, &b);
        let worst = (&got - &want).amax();
        assert!(
            worst <= tol,
            "({n}, {m}, D = {d}, {parts:?}): largest difference {worst:e} over the bound {tol:e}"
        );
        // The coincident pair sits on the r² = 0 branch on both sides.
        let expected_diag = want[(0, 0)];
        assert!((got[(0, 0)] - expected_diag).abs() <= tol);
    }
}

#[test]
fn empty_point_sets_give_empty_matrices_and_oversized_ones_a_clear_error() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let kernel = random_kernel(2, &StationaryKind::ALL, &mut rng);
    let none = DMatrix::<f64>::zeros(0, 2);
    let some = DMatrix::from_element(3, 2, 0.5);
    assert_eq!(gpu.cross(&kernel, &none, &some).unwrap().shape(), (0, 3));
    assert_eq!(gpu.cross(&kernel, &some, &none).unwrap().shape(), (3, 0));
    // 12,000 × 12,000 float32 entries are 576 MB, more than one storage binding holds by default.
    let big = DMatrix::from_element(12_000, 2, 0.1);
    match gpu.cross(&kernel, &big, &big) {
        Err(e @ GpuError::TooLarge { .. }) => {
            assert!(e.to_string().contains("kernel matrix"), "{e}");
        }
        other => panic!("expected a too-large error, got {other:?}"),
    }
}

/// |C_gpu − C|_ij ≤ 2 (k + 2) u (|op(A)| |op(B)|)_ij with u = 2⁻²⁴: the classical bound for a
/// float32 dot product of length k (γ_k) plus the rounding of both inputs to float32, doubled.
/// op(X): X itself or its transpose.
fn op(x: &DMatrix<f64>, o: Op) -> DMatrix<f64> {
    match o {
        Op::AsIs => x.clone(),
        Op::Transposed => x.transpose(),
    }
}

/// `batch` random pairs (A, B), entries in [−1, 1), stored so that op_a(A) is m × k and
/// op_b(B) is k × n; all of the A drawn first, then all of the B.
fn operands(
    (m, k, n): (usize, usize, usize),
    batch: usize,
    (op_a, op_b): (Op, Op),
    rng: &mut ChaCha8Rng,
) -> (Vec<DMatrix<f64>>, Vec<DMatrix<f64>>) {
    let stored = |op: Op, rows: usize, cols: usize| match op {
        Op::AsIs => (rows, cols),
        Op::Transposed => (cols, rows),
    };
    let mut draw = |(rows, cols): (usize, usize)| -> Vec<DMatrix<f64>> {
        (0..batch)
            .map(|_| DMatrix::from_fn(rows, cols, |_, _| rng.random_range(-1.0..1.0)))
            .collect()
    };
    let a = draw(stored(op_a, m, k));
    let b = draw(stored(op_b, k, n));
    (a, b)
}

#[test]
fn batched_products_equal_nalgebras() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(16);
    let u = f64::from(f32::EPSILON) / 2.0;
    // (m, k, n, batch, op_a, op_b): tile edges (16), odd sizes, the bound's shapes, several of
    // the float32 product's 64 × 64 blocks each way with ragged edges, an empty inner dimension,
    // and products large enough for its 128 × 128 blocks.
    let cases = [
        (1, 1, 1, 1, Op::AsIs, Op::AsIs),
        (130, 70, 200, 2, Op::AsIs, Op::AsIs),
        (100, 33, 150, 1, Op::Transposed, Op::Transposed),
        (64, 17, 128, 2, Op::AsIs, Op::Transposed),
        (16, 16, 16, 2, Op::AsIs, Op::AsIs),
        (50, 50, 160, 3, Op::AsIs, Op::AsIs),
        (50, 160, 50, 2, Op::AsIs, Op::Transposed),
        (33, 17, 9, 4, Op::Transposed, Op::AsIs),
        (7, 40, 21, 1, Op::Transposed, Op::Transposed),
        (5, 0, 6, 2, Op::AsIs, Op::AsIs),
        // Enough 128 × 128 blocks for `gemm_wide` (2 · 33 · 4 = 264), every operand order,
        // ragged edges both ways.
        (130, 24, 4224, 4, Op::AsIs, Op::AsIs),
        (130, 11, 4224, 4, Op::Transposed, Op::Transposed),
        (4224, 9, 130, 4, Op::AsIs, Op::Transposed),
        (130, 13, 4224, 4, Op::Transposed, Op::AsIs),
        // Few blocks and a long inner dimension: split along it (16, 5 and 2 splits), the
        // planes added in split order by `split_sum_single`.
        (64, 2048, 64, 1, Op::AsIs, Op::AsIs),
        (130, 700, 20, 2, Op::Transposed, Op::AsIs),
        (50, 300, 50, 1, Op::Transposed, Op::Transposed),
    ];
    for (m, k, n, batch, op_a, op_b) in cases {
        let (a, b) = operands((m, k, n), batch, (op_a, op_b), &mut rng);
        let products = Batched::new(&a, op_a, &b, op_b);
        let got = gpu
            .gemm(products, Accumulation::Single)
            .expect("the GPU multiplies");
        assert_eq!(got.len(), batch);
        let again = gpu.gemm(products, Accumulation::Single).unwrap();
        assert_eq!(
            got, again,
            "the same words every time (splits added in a fixed order)"
        );
        for z in 0..batch {
            let (oa, ob) = (op(&a[z], op_a), op(&b[z], op_b));
            let want = &oa * &ob;
            let bound = (oa.abs() * ob.abs()) * (2.0 * (k as f64 + 2.0) * u);
            assert_eq!(got[z].shape(), (m, n));
            for ((g, w), e) in got[z].iter().zip(want.iter()).zip(bound.iter()) {
                assert!(
                    (g - w).abs() <= *e,
                    "({m}×{k})·({k}×{n}) {op_a:?}/{op_b:?}, batch {z}: {g} vs {w} (bound {e:e})"
                );
            }
        }
    }
    assert!(gpu
        .gemm(
            Batched::new(&[], Op::AsIs, &[], Op::AsIs),
            Accumulation::Single
        )
        .unwrap()
        .is_empty());
}

/// A batch whose factors and results lie apart in their buffers (`Product::with_strides`, so that
/// a batch over slots can read one part of each slot's larger buffer and write into one): each
/// product equals nalgebra's as the packed batch does, reads none of the gaps (NaN there) and
/// writes none of them; for an unsplit and a split float32 product, the wide blocks, and the
/// compensated product, in several operand orders; the compensated ones also with each product's
/// tail plane right after its head plane (`Product::with_plane`, the batched predictions' P and
/// [Ãg, Ãy]).
#[test]
fn spaced_batches_read_and_write_only_their_own_places() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(20);
    let u = f64::from(f32::EPSILON) / 2.0;
    // (m, k, n, batch, op_a, op_b, accumulation, gaps)
    let cases = [
        (
            7,
            5,
            9,
            3,
            Op::AsIs,
            Op::AsIs,
            Accumulation::Single,
            [5, 7, 3],
        ),
        (
            33,
            17,
            20,
            2,
            Op::Transposed,
            Op::AsIs,
            Accumulation::Single,
            [1, 0, 64],
        ),
        // Split along k (partial planes packed, their sums placed at the stride).
        (
            64,
            2048,
            64,
            2,
            Op::AsIs,
            Op::AsIs,
            Accumulation::Single,
            [3, 2, 11],
        ),
        // 128 × 128 blocks.
        (
            130,
            11,
            4224,
            4,
            Op::AsIs,
            Op::Transposed,
            Accumulation::Single,
            [9, 4, 13],
        ),
        (
            40,
            300,
            2,
            3,
            Op::AsIs,
            Op::AsIs,
            Accumulation::Compensated,
            [6, 1, 5],
        ),
        // Room in C's stride for each product's tails after its heads (and many splits).
        (
            40,
            300,
            2,
            3,
            Op::AsIs,
            Op::AsIs,
            Accumulation::Compensated,
            [6, 1, 83],
        ),
        (
            24,
            4096,
            2,
            2,
            Op::AsIs,
            Op::AsIs,
            Accumulation::Compensated,
            [0, 0, 53],
        ),
    ];
    // Each case packed-plane, and interleaved where C's gaps hold a product's tails.
    let runs = cases.iter().flat_map(|&case| {
        let (m, _, n, _, _, _, accumulation, gaps) = case;
        let interleaves = accumulation == Accumulation::Compensated && gaps[2] >= m * n;
        std::iter::once((case, false)).chain(interleaves.then_some((case, true)))
    });
    for ((m, k, n, batch, op_a, op_b, accumulation, gaps), interleaved) in runs {
        let (a, b) = operands((m, k, n), batch, (op_a, op_b), &mut rng);
        let products = Batched::new(&a, op_a, &b, op_b);
        let (got, in_gaps) = gpu
            .gemm_spaced(products, accumulation, Spacing { gaps, interleaved })
            .expect("the GPU multiplies");
        let packed = gpu.gemm(products, accumulation).unwrap();
        assert_eq!(
            in_gaps, 0.0,
            "({m}×{k})·({k}×{n}), interleaved {interleaved}: C's gaps written"
        );
        assert_eq!(
            got, packed,
            "({m}×{k})·({k}×{n}) {accumulation:?}: the same words as the packed batch"
        );
        for z in 0..batch {
            let (oa, ob) = (op(&a[z], op_a), op(&b[z], op_b));
            let want = &oa * &ob;
            let bound = (oa.abs() * ob.abs()) * (2.0 * (k as f64 + 2.0) * u);
            for ((g, w), e) in got[z].iter().zip(want.iter()).zip(bound.iter()) {
                assert!(
                    g.is_finite() && (g - w).abs() <= *e,
                    "({m}×{k})·({k}×{n}) {op_a:?}/{op_b:?} {accumulation:?}, batch {z}: {g} vs {w}"
                );
            }
        }
    }
}

/// The compensated product, split along the inner dimension when its 64 × 64 blocks are too few
/// (the bound's [Ãg, Ãy] is M × 2 with T inner terms: one block, dozens of splits), against
/// nalgebra's f64 product of the float32-rounded factors: about 2⁻⁴⁰ of Σ|a b| per entry, the
/// splits added in a fixed order (so two runs give identical words).
#[test]
fn compensated_products_split_along_the_inner_dimension_equal_nalgebras() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(19);
    let u = f64::from(f32::EPSILON) / 2.0;
    // Every operand order stages its tiles differently (each coalesced for its layout).
    for (m, k, n, batch, op_a, op_b) in [
        (130, 2000, 2, 2, Op::AsIs, Op::AsIs),
        (40, 3200, 2, 1, Op::AsIs, Op::AsIs),
        (70, 500, 90, 1, Op::AsIs, Op::AsIs),
        (5, 9, 3, 1, Op::AsIs, Op::AsIs),
        (70, 300, 90, 1, Op::Transposed, Op::Transposed),
        (33, 700, 20, 2, Op::Transposed, Op::AsIs),
        (66, 250, 67, 1, Op::AsIs, Op::Transposed),
    ] {
        let a: Vec<DMatrix<f64>> = (0..batch)
            .map(|_| {
                op(
                    &DMatrix::from_fn(m, k, |_, _| rng.random_range(-1.0..1.0)),
                    op_a,
                )
            })
            .collect();
        let b: Vec<DMatrix<f64>> = (0..batch)
            .map(|_| {
                op(
                    &DMatrix::from_fn(k, n, |_, _| rng.random_range(-1.0..1.0)),
                    op_b,
                )
            })
            .collect();
        let products = Batched::new(&a, op_a, &b, op_b);
        let got = gpu
            .gemm(products, Accumulation::Compensated)
            .expect("the GPU multiplies");
        let again = gpu.gemm(products, Accumulation::Compensated).unwrap();
        assert_eq!(got, again, "the splits are added in a fixed order");
        for z in 0..batch {
            let (a32, b32) = (
                op(&a[z], op_a).map(|v| f64::from(v as f32)),
                op(&b[z], op_b).map(|v| f64::from(v as f32)),
            );
            let want = &a32 * &b32;
            let magnitude = a32.abs() * b32.abs();
            for ((g, w), e) in got[z].iter().zip(want.iter()).zip(magnitude.iter()) {
                let allowed = 2.0 * (k as f64 + 2.0) * u * u * 4096.0 * e + 1e-30;
                assert!(
                    (g - w).abs() <= allowed,
                    "({m}×{k})·({k}×{n}) {op_a:?}/{op_b:?}, batch {z}: {g} vs {w} (allowed {allowed:e})"
                );
            }
        }
    }
}

/// The largest |x − y| over two equally long lists, relative to the largest |y| (at least 1).
fn worst_relative(x: &[f64], y: &[f64]) -> f64 {
    assert_eq!(x.len(), y.len());
    let scale = y.iter().fold(1.0f64, |s, v| s.max(v.abs()));
    x.iter()
        .zip(y)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max)
        / scale
}

/// The adjoint against `Kernel::cross_backward`. Each output is a sum over up to n·m terms, which
/// the GPU adds in float32 along one row (m or n terms) and the host in f64 across rows; the
/// classical bound for a float32 sum of L terms is L·u times the sum of their magnitudes. Held here
/// to 32 (n + m + D) u relative to the largest entry of each output (the parameter gradient, ∂A,
/// ∂B), which covers that with the terms' own rounding (as in the forward bound).
#[test]
fn the_kernel_adjoint_equals_the_cpu_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let u = f64::from(f32::EPSILON) / 2.0;
    let all = StationaryKind::ALL;
    let cases: &[(usize, usize, usize, &[StationaryKind])] = &[
        (1, 1, 1, &all),
        (9, 13, 3, &all),
        (50, 70, 5, &all),
        (65, 3, 2, &[StationaryKind::RationalQuadratic]),
        (20, 30, 4, &[]),
    ];
    for &(n, m, d, parts) in cases {
        let kernel = random_kernel(d, parts, &mut rng);
        let a = DMatrix::from_fn(n, d, |_, _| rng.random_range(-2.0..2.0));
        let mut b = DMatrix::from_fn(m, d, |_, _| rng.random_range(-2.0..2.0));
        b.row_mut(0).copy_from(&a.row(0)); // a coincident pair: κ′ = 0 there
        let dk = DMatrix::from_fn(n, m, |_, _| rng.random_range(-1.0..1.0));
        let (want_grad, want_da, want_db) = kernel.cross_backward(&a, &b, &dk);
        let (got_grad, got_da, got_db) = gpu
            .cross_backward(&kernel, &a, &b, &dk)
            .expect("the GPU computes the adjoint");
        let bound = 32.0 * (n + m + d) as f64 * u;
        let checks = [
            (
                "kernel gradient",
                worst_relative(&got_grad.to_vec(), &want_grad.to_vec()),
            ),
            (
                "dL/dA",
                worst_relative(got_da.as_slice(), want_da.as_slice()),
            ),
            (
                "dL/dB",
                worst_relative(got_db.as_slice(), want_db.as_slice()),
            ),
        ];
        for (what, worst) in checks {
            assert!(
                worst <= bound,
                "({n}, {m}, D = {d}, {parts:?}) {what}: {worst:e} over the bound {bound:e}"
            );
        }
        // Masked dimensions get exactly 0, as on the CPU.
        for (j, &e) in kernel.mask.iter().enumerate() {
            if e == 0.0 {
                for part in &got_grad.stationary {
                    assert_eq!(part.precision[j], 0.0);
                }
            }
        }
    }
}

/// kernel_shapes.wgsl's (κ, ∂κ/∂r², ∂κ/∂a) against `gp::kernel::scalar` for every kind, from
/// coincident points (r² = 0, where both give exactly (1, 0, 0)) through r² small enough for the
/// Matérn-1/2 guard (1e-37 < 1e-36) up to far points. The CPU is evaluated at the float32-rounded
/// inputs, so the difference is the shader's arithmetic alone: a relative 10⁻⁵ (exp of an
/// argument up to ~40, whose relative error grows with it, and WGSL's looser exp/log) plus an
/// absolute 10⁻⁶ (the RQ's ∂κ/∂a is a difference of two nearly equal terms at small r²).
#[test]
fn the_shapes_equal_the_cpus() {
    let Some(gpu) = gpu() else { return };
    let r2s = [
        0.0, 1e-37, 1e-30, 1e-12, 1e-6, 1e-3, 0.1, 0.5, 1.0, 2.0, 7.5, 30.0, 1e2, 1e3,
    ];
    let alphas = [0.5, 1.0, 2.5, 10.0];
    let f32_rounded = |x: f64| f64::from(x as f32);
    let mut probes = Vec::new();
    for kind in StationaryKind::ALL {
        for alpha in alphas {
            for r2 in r2s {
                probes.push((kind, f32_rounded(r2), f32_rounded(alpha)));
            }
        }
    }
    let got = gpu
        .probe_shapes(&probes)
        .expect("the GPU evaluates the shapes");
    assert_eq!(got.len(), probes.len());
    let (relative, absolute) = (1e-5, 1e-6);
    let mut worst = 0.0f64;
    for (&(kind, r2, alpha), got) in probes.iter().zip(&got) {
        let (value, slope) = unit_value_and_dr2(kind, r2, alpha);
        let dalpha = match kind {
            StationaryKind::RationalQuadratic => unit_dvalue_dalpha(r2, alpha),
            _ => 0.0,
        };
        for (what, want, got) in [
            ("κ", value, got[0]),
            ("∂κ/∂r²", slope, got[1]),
            ("∂κ/∂a", dalpha, got[2]),
        ] {
            let bound = relative * want.abs() + absolute;
            worst = worst.max((got - want).abs() / bound);
            assert!(
                (got - want).abs() <= bound,
                "{kind:?} at r² = {r2:e}, a = {alpha}: {what} is {got:e} on the GPU, {want:e} on the CPU"
            );
        }
        if r2 == 0.0 {
            assert_eq!(
                *got,
                [1.0, 0.0, 0.0],
                "{kind:?}: the coincident-point branch"
            );
        }
    }
    eprintln!("largest difference: {worst:.3} of the bound");
}
