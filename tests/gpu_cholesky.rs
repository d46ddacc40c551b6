//! The device's batched Cholesky factorisation with the jitter ladder in the shader, the factor's
//! inverse, and q(v)'s natural-gradient step, in double-float (`cholesky.wgsl`), against the
//! CPU's f64 `cholesky_jittered`, nalgebra's inverse and `InducingPosterior::natural_step`: the
//! factors and inverses entry by entry, the rung of the ladder each matrix needed, the typed
//! errors of a matrix no rung repairs and of a non-finite entry, the natural step's P, η₁, S and
//! m, and — the measurement that chose double-float — the error of L⁻¹ on the natural step's
//! P = I + Λ with φ² at its floor, where float32 loses every digit (MODEL.md §11.3). Like the other GPU tests these run on Mesa's lavapipe in the README's test
//! command and fail without an adapter unless `OCCAM_SKIP_GPU_TESTS=1` says to skip them.

use nalgebra::{DMatrix, DVector};
use occam::gp::linalg::{cholesky_jittered, CholeskyError, JitterPolicy};
use occam::gp::natgrad::{step_size, InducingPosterior};
use occam::gp::svgp::NatGradStats;
use occam::runner::gpu::Gpu;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn gpu() -> Option<Gpu> {
    crate::gpu_device::open("GPU Cholesky tests")
}

/// A symmetric matrix Q diag(λ) Qᵀ with Q a random orthogonal matrix.
fn with_spectrum(eigenvalues: &[f64], rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    let n = eigenvalues.len();
    let g = DMatrix::from_fn(n, n, |_, _| rng.random_range(-1.0..1.0));
    let q = g.qr().q();
    let a = &q * DMatrix::from_diagonal(&DVector::from_column_slice(eigenvalues)) * q.transpose();
    (&a + a.transpose()) * 0.5
}

/// The largest |x − y| over the lower triangles, relative to the largest |y|.
fn relative_error(x: &DMatrix<f64>, y: &DMatrix<f64>) -> f64 {
    let scale = y
        .iter()
        .fold(0.0f64, |a, v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let n = y.nrows();
    let mut worst = 0.0f64;
    for j in 0..n {
        for i in j..n {
            worst = worst.max((x[(i, j)] - y[(i, j)]).abs());
        }
    }
    worst / scale
}

/// A matrix no rung repairs fails on the device at the CPU's pivot and size, with its value (to
/// `tolerance`) and last jitter.
fn assert_fails_as_on_the_cpu(
    got: &Result<occam::runner::gpu::DeviceFactor, CholeskyError>,
    want: &CholeskyError,
    tolerance: f64,
) {
    match (got, want) {
        (
            Err(CholeskyError::NotPositiveDefinite {
                size,
                pivot,
                value,
                jitter,
            }),
            CholeskyError::NotPositiveDefinite {
                size: cpu_size,
                pivot: cpu_pivot,
                value: cpu_value,
                jitter: cpu_jitter,
            },
        ) => {
            assert_eq!(
                (*size, *pivot),
                (*cpu_size, *cpu_pivot),
                "the failing pivot"
            );
            assert!(
                (value - cpu_value).abs() <= tolerance,
                "{value} vs {cpu_value}"
            );
            assert!((jitter - cpu_jitter).abs() <= 1e-12 * cpu_jitter);
        }
        (other, _) => panic!("a pivot that stays ≤ 0 ({want}), got {other:?}"),
    }
}

/// Well-conditioned matrices of several sizes (one entry; under, one over and twice the
/// factorisation's 32-column blocks; over the workgroup's 256 invocations, with a ragged last
/// block) in one batch each: L and L⁻¹ equal the f64 ones to double-float accuracy, and
/// the first rung is used.
#[test]
fn the_factors_and_inverses_equal_the_cpus() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(34);
    let policy = JitterPolicy::up_to(1e-9, 10.0, 1e-3);
    for (m, batch) in [(1, 1), (5, 3), (17, 2), (33, 2), (64, 2), (300, 1)] {
        let matrices: Vec<DMatrix<f64>> = (0..batch)
            .map(|_| {
                let spectrum: Vec<f64> = (0..m).map(|_| rng.random_range(0.1..3.0)).collect();
                with_spectrum(&spectrum, &mut rng)
            })
            .collect();
        let device = gpu
            .cholesky_batch(&matrices, policy)
            .expect("the device works");
        assert_eq!(device.len(), batch);
        for (a, got) in matrices.iter().zip(device) {
            let got = got.unwrap_or_else(|e| panic!("M = {m}: {e}"));
            let want = cholesky_jittered(a, policy).unwrap();
            let want_inv = want.l.clone().try_inverse().unwrap();
            let (e_l, e_inv) = (
                relative_error(&got.l, &want.l),
                relative_error(&got.l_inv, &want_inv),
            );
            eprintln!("M = {m}: L to {e_l:.1e}, L⁻¹ to {e_inv:.1e}");
            // Double-float is about 2⁻⁴⁸ per operation; M operations per entry, cond(L) ≤ 6.
            assert!(e_l <= 1e-11, "M = {m}: L off by {e_l:e}");
            assert!(e_inv <= 1e-10, "M = {m}: L⁻¹ off by {e_inv:e}");
            assert_eq!(got.escalations, 0);
            assert!((got.jitter - 1e-9).abs() <= 1e-9 * 1e-12);
            for j in 0..m {
                for i in 0..j {
                    assert_eq!(got.l[(i, j)], 0.0, "L is lower triangular");
                    assert_eq!(got.l_inv[(i, j)], 0.0, "L⁻¹ is lower triangular");
                }
            }
        }
    }
}

/// The ladder runs in the shader: a matrix whose smallest eigenvalue is −2·10⁻³ needs the rung
/// 10⁻² (four escalations from 10⁻⁶), as on the CPU; one no rung repairs fails with the CPU's
/// pivot and last jitter; a non-finite entry fails before the device sees it; and a matrix's
/// result does not depend on the others of its batch.
#[test]
fn the_jitter_ladder_runs_on_the_device_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(35);
    let policy = JitterPolicy::up_to(1e-6, 10.0, 1e-1);
    let m = 40;
    let mut spectrum: Vec<f64> = (0..m).map(|_| rng.random_range(0.5..2.0)).collect();
    spectrum[7] = -2e-3;
    let indefinite = with_spectrum(&spectrum, &mut rng);
    let hopeless = -DMatrix::<f64>::identity(m, m);
    let mut broken = with_spectrum(&vec![1.0; m], &mut rng);
    broken[(9, 3)] = f64::NAN;
    let fine = with_spectrum(&vec![1.0; m], &mut rng);
    let batch = [
        indefinite.clone(),
        hopeless.clone(),
        broken.clone(),
        fine.clone(),
    ];
    let device = gpu
        .cholesky_batch(&batch, policy)
        .expect("the device works");

    let repaired = device[0].as_ref().expect("repaired by the ladder");
    let cpu = cholesky_jittered(&indefinite, policy).unwrap();
    assert_eq!(repaired.escalations, 4);
    assert_eq!(repaired.escalations, cpu.escalations);
    assert!((repaired.jitter - cpu.jitter).abs() <= 1e-12 * cpu.jitter);
    assert!(relative_error(&repaired.l, &cpu.l) <= 1e-10);

    let cpu_error = cholesky_jittered(&hopeless, policy).unwrap_err();
    assert_fails_as_on_the_cpu(&device[1], &cpu_error, 1e-9);

    assert_eq!(
        device[2].as_ref().unwrap_err(),
        &cholesky_jittered(&broken, policy).unwrap_err()
    );
    assert_eq!(
        device[2].as_ref().unwrap_err(),
        &CholeskyError::NonFinite {
            size: m,
            row: 9,
            col: 3
        }
    );

    let alone = gpu.cholesky_batch(&[fine], policy).unwrap();
    assert_eq!(
        device[3], alone[0],
        "a matrix's factor does not depend on its batch"
    );
}

/// The blocked factorisation finds a pivot that fails in a later block where the CPU does, with
/// its value: A = I but for A[f, f] = −1 (no rung up to 10⁻¹ repairs it; with one rung and with
/// five), f in the first block, at a block's start, inside one and in a ragged last block;
/// the rows before f factorise whatever follows. And a matrix whose first rung fails only in its
/// third block, which the second rung repairs, gets the CPU's rung and factor.
#[test]
fn a_pivot_that_fails_in_a_later_block_is_found_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let m = 100;
    let failing = [5, 32, 70, 99];
    let batch: Vec<DMatrix<f64>> = failing
        .iter()
        .map(|&f| {
            let mut a = DMatrix::<f64>::identity(m, m);
            a[(f, f)] = -1.0;
            a
        })
        .collect();
    // One rung (the blocked attempt's own status) and five (the later rungs' unblocked one).
    let one_rung = JitterPolicy::exactly(1e-6);
    let policy = JitterPolicy::up_to(1e-6, 10.0, 1e-1);
    for policy in [one_rung, policy] {
        let device = gpu
            .cholesky_batch(&batch, policy)
            .expect("the device works");
        for ((a, &f), got) in batch.iter().zip(&failing).zip(&device) {
            let want = cholesky_jittered(a, policy).unwrap_err();
            assert_fails_as_on_the_cpu(got, &want, 1e-12);
            assert!(
                matches!(want, CholeskyError::NotPositiveDefinite { pivot, .. } if pivot == f),
                "the CPU fails at pivot {f}"
            );
        }
    }

    // Diagonal 1 but for a 2 × 2 block at (80, 81) with eigenvalues 1 ± (1 + 5·10⁻⁶): the
    // first rung (10⁻⁶) leaves pivot 81 at about −4·10⁻⁶, the second (10⁻⁵) repairs it.
    let mut late = DMatrix::<f64>::identity(m, m);
    late[(81, 80)] = 1.0 + 5e-6;
    late[(80, 81)] = 1.0 + 5e-6;
    let device = gpu
        .cholesky_batch(std::slice::from_ref(&late), policy)
        .expect("the device works");
    let got = device[0].as_ref().expect("the second rung repairs it");
    let want = cholesky_jittered(&late, policy).unwrap();
    assert_eq!((got.escalations, want.escalations), (1, 1));
    assert!((got.jitter - want.jitter).abs() <= 1e-12 * want.jitter);
    assert!(relative_error(&got.l, &want.l) <= 1e-10);
}

/// Ã = U Σ Vᵀ (M × T) with the quickly decaying spectrum of a smooth kernel's L⁻¹ K_Zt: singular
/// values from 1 down to 10⁻⁵, U and V random orthonormal.
fn smooth_a_tilde(m: usize, t: usize, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    let u = DMatrix::from_fn(m, m, |_, _| rng.random_range(-1.0..1.0))
        .qr()
        .q();
    let v = DMatrix::from_fn(t, m, |_, _| rng.random_range(-1.0..1.0))
        .qr()
        .q();
    let sigma = DVector::from_fn(m, |k, _| 10f64.powf(-5.0 * k as f64 / (m - 1) as f64));
    &u * DMatrix::from_diagonal(&sigma) * v.transpose()
}

/// float32 with nalgebra's Cholesky and inverse (IEEE single precision, as a float32 shader
/// computes them), for the precision comparison.
fn float32_inverse_factor(a: &DMatrix<f64>) -> Option<DMatrix<f64>> {
    let a32: DMatrix<f32> = a.map(|v| v as f32);
    let l = a32.cholesky()?.unpack();
    Some(l.try_inverse()?.map(f64::from))
}

/// Why the device's M × M algebra is double-float: on P = I + Ã diag(s) Ãᵀ / φ² (the
/// natural-gradient step's precision, MODEL.md §11.3) with φ² from 10⁻² down to the floor 10⁻⁶,
/// float32 loses L⁻¹ as cond(P) grows (at 10⁻⁶ it has no correct digit or fails) while the
/// device's double-float keeps it to about cond · 2⁻⁴⁸. The figures are printed for BENCHMARKS.md.
#[test]
fn double_float_keeps_the_inverse_factor_where_float32_loses_it() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(36);
    let (m, t, n) = (100, 400, 1000.0);
    let a_tilde = smooth_a_tilde(m, t, &mut rng);
    // The bound's weights s_t (positive, spread over a decade), scaled by N as the natural
    // gradient's Λ is (N/b per minibatch row).
    let s = DVector::from_fn(t, |_, _| n * 10f64.powf(rng.random_range(-1.0..0.0)));
    let policy = JitterPolicy::exactly(0.0);
    for phi2 in [1e-2, 1e-4, 1e-6] {
        let lambda = &a_tilde * DMatrix::from_diagonal(&(&s / phi2)) * a_tilde.transpose();
        let p = DMatrix::identity(m, m) + (&lambda + lambda.transpose()) * 0.5;
        let eigen = p.clone().symmetric_eigen().eigenvalues;
        let cond = eigen.max() / eigen.min();
        let want = cholesky_jittered(&p, policy)
            .unwrap()
            .l
            .try_inverse()
            .unwrap();
        let device = gpu
            .cholesky_batch(std::slice::from_ref(&p), policy)
            .unwrap();
        let device_error = relative_error(&device[0].as_ref().unwrap().l_inv, &want);
        let f32_error = float32_inverse_factor(&p).map(|x| relative_error(&x, &want));
        eprintln!(
            "P at φ² = {phi2:.0e}: cond {cond:.1e}; L⁻¹ relative error: double-float {device_error:.1e}, float32 {}",
            f32_error.map_or("failed".into(), |e| format!("{e:.1e}"))
        );
        assert!(
            device_error <= 1e-13 * cond,
            "double-float: {device_error:e} at cond {cond:e}"
        );
        if phi2 <= 1e-6 {
            assert!(
                f32_error.is_none_or(|e| e > 1e3 * device_error),
                "float32 was expected to fail here"
            );
        }
    }
}

/// The relative error of a vector against a reference (largest |x − y| over the largest |y|).
fn vector_error(x: &DVector<f64>, y: &DVector<f64>) -> f64 {
    let scale = y
        .iter()
        .fold(0.0f64, |a, v| a.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    (x - y).amax() / scale
}

/// q(v)'s natural-gradient step on the device against the CPU's `InducingPosterior::natural_step`
/// in f64, from posteriors a few steps into training: with statistics whose I + Λ is well
/// conditioned, and with φ² at its floor (cond(P) about 10⁸, where float32 fails), batched
/// together; the new P, η₁, S and m to about cond · 2⁻⁴⁴. Non-finite statistics fail with the
/// CPU's error and leave nothing half-done.
#[test]
fn the_natural_step_on_the_device_equals_the_cpus() {
    let Some(gpu) = gpu() else { return };
    let mut rng = ChaCha8Rng::seed_from_u64(37);
    let (m, t) = (60, 240);
    // The same Ã at every step (it drifts slowly in training), so P's small eigenvalues stay
    // near 1.
    let a_tilde = smooth_a_tilde(m, t, &mut rng);
    let statistics = |phi2: f64, rng: &mut ChaCha8Rng| {
        let s = DVector::from_fn(t, |_, _| 1000.0 * 10f64.powf(rng.random_range(-1.0..0.0)));
        let lambda = &a_tilde * DMatrix::from_diagonal(&(&s / phi2)) * a_tilde.transpose();
        let r = DVector::from_fn(m, |_, _| rng.random_range(-1.0..1.0) / phi2.sqrt());
        NatGradStats { lambda, r }
    };
    let gamma = step_size(5);
    let mut cases = Vec::new();
    for phi2 in [1e-1, 1e-6] {
        // A posterior three CPU steps in, then the step under test.
        let mut q = InducingPosterior::prior(m);
        for step in 0..3 {
            q.natural_step(&statistics(phi2, &mut rng), step_size(step))
                .unwrap();
        }
        cases.push((phi2, q, statistics(phi2, &mut rng)));
    }
    let mut broken = statistics(1e-1, &mut rng);
    broken.lambda[(4, 2)] = f64::NAN;
    let posteriors: Vec<&InducingPosterior> = cases
        .iter()
        .map(|(_, q, _)| q)
        .chain([&cases[0].1])
        .collect();
    let stats: Vec<&NatGradStats> = cases.iter().map(|(_, _, s)| s).chain([&broken]).collect();
    let device = gpu
        .natural_steps(&posteriors, &stats, gamma)
        .expect("the device works");
    for ((phi2, q, st), got) in cases.iter().zip(&device) {
        let got = got.as_ref().expect("P factorises");
        let mut want = q.clone();
        want.natural_step(st, gamma).unwrap();
        let eigen = want.precision.clone().symmetric_eigen().eigenvalues;
        let cond = eigen.max() / eigen.min();
        let errors = [
            relative_error(&got.precision, &want.precision),
            vector_error(&got.eta1, &want.eta1),
            relative_error(&got.cov, &want.cov),
            vector_error(&got.mean, &want.mean),
        ];
        eprintln!(
            "φ² = {phi2:.0e}, cond(P) {cond:.1e}: P {:.1e}, η₁ {:.1e}, S {:.1e}, m {:.1e}",
            errors[0], errors[1], errors[2], errors[3]
        );
        assert!(errors[0] <= 1e-13 && errors[1] <= 1e-13, "{errors:?}");
        assert!(
            errors[2] <= 1e-13 * cond && errors[3] <= 1e-13 * cond,
            "{errors:?} at cond {cond:e}"
        );
        assert!(
            cond > 1e7 || *phi2 > 1e-3,
            "the floor's P is ill-conditioned"
        );
    }
    let mut cpu = cases[0].1.clone();
    assert_eq!(
        device[2].as_ref().unwrap_err(),
        &cpu.natural_step(&broken, gamma).unwrap_err()
    );
}
