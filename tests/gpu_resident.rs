//! The uncollapsed evaluation with its M × M algebra on the device and q(v) and Z resident there
//! (issue 34, items 1–2: `Gpu::resident_evaluations`) against the CPU's f64 path: the bound's
//! terms, every gradient the optimiser uses (kernel, the draws → q(w); Z's through the Adam step
//! the device takes and ‖∂Z‖²), K_ZZ's jitter, and the natural step's q(v) and Z's Adam state read
//! back after a commit, for several shapes in one submission (two of them twice, so that the
//! factorisations batched by shape hold several requests); a step that is not committed leaves
//! the slot as it was. Run on Mesa's lavapipe by the README's test
//! command; without an adapter they fail unless `OCCAM_SKIP_GPU_TESTS=1` says to skip them.

use crate::common;
use crate::gpu_device::{self, EDGE_SHAPES};

use common::SvgpProblem;
use nalgebra::DMatrix;
use occam::gp::adam::HeldAdamStep;
use occam::gp::gp_cde::{HeldWeights, ResidentView};
use occam::gp::linalg::{cholesky_jittered, lower_inverse, JitterPolicy};
use occam::gp::natgrad::InducingPosterior;
use occam::gp::svgp::{bound_and_gradient, HeldLatent, SvgpInput, SvgpOutput};
use occam::gp::transform::softplus_inverse;
use occam::runner::gpu::{
    Gpu, ParameterStep, ResidentEvaluation, ResidentRequest, StateChange, StateShape,
};

/// q(v)'s natural step size in these tests.
const GAMMA: f64 = 0.1;

/// Z's Adam step in these tests.
const ADAM: HeldAdamStep = HeldAdamStep {
    rate: 0.01,
    beta1: 0.9,
    beta2: 0.999,
    epsilon: 1e-7,
};

/// Adam's step size for slot `k`: each its own, as restarts at different iterations have, so that
/// a step batched over slots must take each slot's.
fn rate_of(k: usize) -> f64 {
    ADAM.rate * (1.0 + 0.25 * k as f64)
}

/// Uploads q(v) `q`, the problem's Z and Z's Adam moments (`first`, `second`, in Z's
/// column-major order) to slot `slot`, with the problem's hyperparameters and φ² (zero
/// moments).
fn upload(
    gpu: &Gpu,
    slot: usize,
    p: &SvgpProblem,
    q: &InducingPosterior,
    first: &[f64],
    second: &[f64],
) {
    let count = p.kernel.param_count() + 1;
    gpu.upload_state(
        slot,
        ResidentView {
            posterior: q,
            z: &p.z,
            z_first: first,
            z_second: second,
            encoder: None,
            encoder_first: &[],
            encoder_second: &[],
            parameters: parameters_of(p, &vec![0.0; count], floor_of(slot, p)),
        },
    )
    .expect("P factorises");
}

/// φ²'s floor in slot `slot`: each slot's its own (a column recorded at a coarse resolution has
/// Δ²/12), so that a pass batched over slots must read each slot's; 0 in slot 0.
fn floor_of(slot: usize, p: &SvgpProblem) -> f64 {
    p.noise * 0.2 * (slot % 4) as f64
}

/// The raw numbers of the problem's hyperparameters ([`Kernel::params_to_vec`]'s order) and of
/// φ² above `floor` as a device holds them: values = softplus⁻¹(θ) and softplus⁻¹(φ² − floor),
/// zero first moments and `second`.
fn parameters_of(p: &SvgpProblem, second: &[f64], floor: f64) -> HeldWeights {
    let values: Vec<f64> = p
        .kernel
        .params_to_vec()
        .into_iter()
        .chain([p.noise - floor])
        .map(softplus_inverse)
        .collect();
    HeldWeights {
        first: vec![0.0; values.len()],
        second: second.to_vec(),
        values,
    }
}

/// No graph gradient (a slice of it: one per hyperparameter).
static NO_EXTRA: [f64; 512] = [0.0; 512];

/// A parameter step for slot `slot` with no graph gradient, the slot's floor of φ² and nothing
/// uploaded.
fn parameter_step(slot: usize, p: &SvgpProblem) -> ParameterStep<'static> {
    ParameterStep {
        extra: &NO_EXTRA[..p.kernel.param_count()],
        noise_floor: floor_of(slot, p),
        upload: None,
    }
}

/// Zero moments for Z of problem `p`.
fn zeros(p: &SvgpProblem) -> Vec<f64> {
    vec![0.0; p.z.len()]
}

fn gpu() -> Option<Gpu> {
    crate::gpu_device::open("resident GPU tests")
}

/// q(v) = N(m, S) of a problem in its natural parameters (P = S⁻¹, η₁ = P m), in f64.
fn posterior(p: &SvgpProblem) -> InducingPosterior {
    let factor = cholesky_jittered(&p.q_cov, JitterPolicy::exactly(0.0)).expect("S is SPD");
    let li = lower_inverse(&factor.l);
    let precision = li.transpose() * &li;
    InducingPosterior {
        eta1: &precision * &p.q_mean,
        precision,
        mean: p.q_mean.clone(),
        cov: p.q_cov.clone(),
    }
}

/// c = N/(bS) of a problem.
fn scale_c(p: &SvgpProblem) -> f64 {
    let (samples, b) = p.latent.as_ref().expect("a latent input").eps.shape();
    p.total_rows as f64 / (b * samples) as f64
}

/// ∂L̂/∂μ_n and ∂L̂/∂Σ_n from the device's sums over the draws, minus (N/b) times
/// KL(q(w_n) ‖ N(0, 1))'s gradient, as the CPU finishes them.
fn latent_gradient(p: &SvgpProblem, got: &ResidentEvaluation) -> (Vec<f64>, Vec<f64>) {
    let lat = p.latent.as_ref().unwrap();
    let b = lat.mu.len();
    let HeldLatent::Sums { d_mu, d_var } = &got.latent else {
        panic!("the host holds q(w): the device sends its sums");
    };
    assert_eq!((d_mu.len(), d_var.len()), (b, b));
    let scale = p.total_rows as f64 / b as f64;
    let mu = (0..b).map(|n| d_mu[n] - scale * lat.mu[n]).collect();
    let var = (0..b)
        .map(|n| d_var[n] - scale * 0.5 * (1.0 - 1.0 / lat.var[n]))
        .collect();
    (mu, var)
}

/// Each block's largest error relative to its largest entry, by name.
fn errors(
    p: &SvgpProblem,
    got: &ResidentEvaluation,
    want: &SvgpOutput,
    c: f64,
) -> Vec<(&'static str, f64)> {
    let rel = |g: &[f64], w: &[f64]| -> f64 {
        assert_eq!(g.len(), w.len());
        let scale = w.iter().fold(1e-12f64, |s, v| s.max(v.abs()));
        g.iter()
            .zip(w)
            .fold(0.0f64, |e, (a, b)| e.max((a - b).abs() / scale))
    };
    let (mu, var) = latent_gradient(p, got);
    let t = p.latent.as_ref().unwrap().eps.len() as f64;
    let expected_log_lik =
        c * (-0.5 * t * (2.0 * std::f64::consts::PI * p.noise).ln() - got.misfit / (2.0 * p.noise));
    let want_ell = want.terms.expected_log_lik;
    vec![
        (
            "‖∂Z‖²",
            (got.held_norm - want.grad.z.norm_squared()).abs()
                / want.grad.z.norm_squared().max(1e-12),
        ),
        ("latent mean", rel(&mu, want.grad.latent_mu.as_slice())),
        (
            "latent variance",
            rel(&var, want.grad.latent_var.as_slice()),
        ),
        (
            "expected log-likelihood",
            (expected_log_lik - want_ell).abs() / want_ell.abs().max(1.0),
        ),
        (
            "KL(q(v))",
            (got.kl_inducing - want.terms.kl_inducing).abs()
                / want.terms.kl_inducing.abs().max(1.0),
        ),
    ]
}

/// The errors of a slot's hyperparameters and φ² after one step from those of problem `p` with
/// zero moments (`held`: the committed state's), each relative to the size it is checked
/// against: the device's gradient read through its first moment (m = (1 − β₁)g from 0) against
/// the CPU's ∂L̂/∂θ plus the graph gradient `extra`, times softplus'(r) (φ²'s, whose two terms
/// cancel near the optimum, against their size c·T/(2φ²)); v; and Adam's step of size `rate`.
fn parameter_errors(
    p: &SvgpProblem,
    want: &SvgpOutput,
    extra: &[f64],
    held: &HeldWeights,
    rate: f64,
    floor: f64,
) -> Vec<(&'static str, f64)> {
    let raw = parameters_of(p, &[], floor).values;
    let sigmoid = |r: f64| 1.0 / (1.0 + (-r).exp());
    let count = raw.len();
    let ascent: Vec<f64> = want
        .grad
        .kernel
        .to_vec()
        .iter()
        .zip(extra)
        .map(|(g, e)| g + e)
        .chain([want.grad.noise])
        .zip(&raw)
        .map(|(g, &r)| g * sigmoid(r))
        .collect();
    let first: Vec<f64> = ascent.iter().map(|g| -(1.0 - ADAM.beta1) * g).collect();
    let second: Vec<f64> = ascent.iter().map(|g| (1.0 - ADAM.beta2) * g * g).collect();
    let step: Vec<f64> = first
        .iter()
        .zip(&second)
        .map(|(m, v)| -rate * m / (v.sqrt() + ADAM.epsilon))
        .collect();
    let moved: Vec<f64> = (0..count).map(|i| held.values[i] - raw[i]).collect();
    let relative = |got: &[f64], want: &[f64]| -> f64 {
        let scale = want.iter().fold(1e-12f64, |s, v| s.max(v.abs()));
        got.iter()
            .zip(want)
            .fold(0.0f64, |e, (a, b)| e.max((a - b).abs() / scale))
    };
    let n = count - 1;
    let t = p.latent.as_ref().unwrap().eps.len() as f64;
    let noise_size = (1.0 - ADAM.beta1) * scale_c(p) * t / (2.0 * p.noise) * sigmoid(raw[n]);
    vec![
        (
            "the hyperparameters' gradient, from m",
            relative(&held.first[..n], &first[..n]),
        ),
        (
            "φ²'s gradient, from m",
            (held.first[n] - first[n]).abs() / noise_size,
        ),
        ("the hyperparameters' v", relative(&held.second, &second)),
        ("the hyperparameters' step", relative(&moved, &step)),
    ]
}

/// The float32 tolerance of the predictions' blocks (as `gpu_bound.rs`): dot products of M terms
/// and sums of up to 256 per chunk, with cancellation below 64 and chained passes, relative to
/// the block's largest entry; the M × M chain back to K_ZZ adds four products of M terms.
fn tolerance(m: usize, d: usize) -> f64 {
    (5 * m + 256 + d + 4) as f64 * f64::from(f32::EPSILON) / 2.0 * 256.0
}

#[test]
fn the_resident_evaluation_and_natural_step_equal_the_cpus() {
    let Some(gpu) = gpu() else { return };
    // (D, M, b, S): the edge shapes, a larger M, and an M
    // large enough that the float32 products split their inner dimension (M = 264: the M × M
    // products' 25 blocks and L⁻¹K's 5 each run as 2 splits added by `split_sum_single`).
    // The last two repeat shapes (other data), so that the factorisations batched by shape
    // (one dispatch per M) hold more than one request, placed apart in the submission.
    let cases = [
        &EDGE_SHAPES[..],
        &[
            (4, 70, 128, 5),
            (2, 264, 16, 2),
            (3, 7, 30, 10),
            (5, 40, 64, 10),
        ],
    ]
    .concat();
    let problems = gpu_device::problems(&cases, 200);
    let posteriors: Vec<InducingPosterior> = problems.iter().map(posterior).collect();
    let gamma = GAMMA;
    // Z's moments: m = 0, so that the stepped m = (1 − β₁)g gives the device's gradient back to
    // float32 precision, and v of the order of g², so that the step depends on v too.
    let wants: Vec<SvgpOutput> = problems
        .iter()
        .map(|p| bound_and_gradient(&p.input()).expect("the CPU computes"))
        .collect();
    let seconds: Vec<Vec<f64>> = wants
        .iter()
        .map(|w| {
            let g = w.grad.z.amax().max(1e-6);
            (0..w.grad.z.len())
                .map(|k| g * g * (0.5 + (k % 7) as f64 / 4.0))
                .collect()
        })
        .collect();
    for (k, (p, q)) in problems.iter().zip(&posteriors).enumerate() {
        upload(&gpu, k, p, q, &zeros(p), &seconds[k]);
    }
    // A graph gradient on every hyperparameter: the prior's −10 and a penalty's share, each
    // slot's its own.
    let extras: Vec<Vec<f64>> = problems
        .iter()
        .enumerate()
        .map(|(slot, p)| {
            (0..p.kernel.param_count())
                .map(|k| -10.0 - 0.5 * (k % 3) as f64 - 0.25 * slot as f64)
                .collect()
        })
        .collect();
    let requests: Vec<ResidentRequest> = problems
        .iter()
        .enumerate()
        .map(|(k, p)| ResidentRequest {
            parameters: ParameterStep {
                extra: &extras[k],
                ..parameter_step(k, p)
            },
            adam: HeldAdamStep {
                rate: rate_of(k),
                ..ADAM
            },
            ..request(k, p, JitterPolicy::default(), 0.0, false)
        })
        .collect();
    let got = gpu
        .resident_evaluations(&requests)
        .expect("the GPU computes");
    let mut worst = 0.0f64;
    for (k, ((p, evaluation), request)) in problems.iter().zip(&got).zip(&requests).enumerate() {
        let (d, m, ..) = cases[k];
        let input: SvgpInput = p.input();
        let want = bound_and_gradient(&input).expect("the CPU computes");
        let jitter = evaluation.jitter.clone().expect("K_ZZ factorises");
        assert!(
            (jitter - want.terms.jitter).abs() <= 1e-12 * want.terms.jitter.max(1.0),
            "case {:?}: K_ZZ's jitter {jitter} on the device, {} on the CPU",
            cases[k],
            want.terms.jitter
        );
        let tol = tolerance(m, d);
        for (name, error) in errors(p, evaluation, &want, request.c) {
            eprintln!(
                "case {:?}: {name}: {error:.2e} (tolerance {tol:.1e})",
                cases[k]
            );
            worst = worst.max(error / tol);
            assert!(
                error <= tol,
                "case {:?}: {name} differs from the CPU's by {error:e} > {tol:e}",
                cases[k]
            );
        }
        evaluation
            .stepped
            .clone()
            .expect("the natural step factorises");
    }
    // Before a commit the slots hold the posteriors they were given.
    for (k, (p, q)) in problems.iter().zip(&posteriors).enumerate() {
        let held = gpu.read_state(k, shape_of(p)).expect("readable").posterior;
        let error = (&held.cov - &q.cov).amax() / q.cov.amax();
        assert!(
            error < 1e-12,
            "slot {k} changed before its commit: {error:e}"
        );
    }
    // After it, each holds the CPU's natural step from the CPU's own statistics (to within the
    // statistics' float32 error: Λ and r come from the device's products), and Z after the
    // CPU's Adam step from the CPU's gradient.
    for (k, (p, q)) in problems.iter().zip(&posteriors).enumerate() {
        let (m, d) = p.z.shape();
        gpu.commit_states(&[k], shape_of(p)).expect("committed");
        let state = gpu.read_state(k, shape_of(p)).expect("readable");
        let want = &wants[k];
        let tol = tolerance(m, d);
        // The loss's gradient g = −∂L̂/∂Z, its moments and the step, in f64.
        let g = -&want.grad.z;
        let v0 = DMatrix::from_column_slice(m, d, &seconds[k]);
        let first = &g * (1.0 - ADAM.beta1);
        let second = v0 * ADAM.beta2 + g.component_mul(&g) * (1.0 - ADAM.beta2);
        let step = DMatrix::from_fn(m, d, |i, j| {
            -rate_of(k) * first[(i, j)] / (second[(i, j)].sqrt() + ADAM.epsilon)
        });
        for (name, got, want) in [
            ("Z's gradient, from m", state.z_first.clone(), first),
            ("Z's v", state.z_second.clone(), second),
            ("Z's step", &state.z - &p.z, step),
        ] {
            let error = (&got - &want).amax() / want.amax().max(1e-12);
            eprintln!("case {:?}: {name}: {error:.2e}", cases[k]);
            assert!(
                error <= tol,
                "case {:?}: {name}: {error:e} > {tol:e}",
                cases[k]
            );
        }
        for (name, error) in parameter_errors(
            p,
            want,
            &extras[k],
            &state.parameters,
            rate_of(k),
            floor_of(k, p),
        ) {
            eprintln!("case {:?}: {name}: {error:.2e}", cases[k]);
            assert!(
                error <= tol,
                "case {:?}: {name}: {error:e} > {tol:e}",
                cases[k]
            );
        }
        assert_eq!(
            got[k].parameters, state.parameters,
            "case {:?}: the stepped hyperparameters read back with the evaluation are the slot's",
            cases[k]
        );
        let held = state.posterior;
        let mut stepped = q.clone();
        stepped.natural_step(&want.natgrad, gamma).unwrap();
        for (name, g, w) in [
            (
                "m",
                DMatrix::from_column_slice(m, 1, held.mean.as_slice()),
                DMatrix::from_column_slice(m, 1, stepped.mean.as_slice()),
            ),
            ("S", held.cov.clone(), stepped.cov.clone()),
            ("P", held.precision.clone(), stepped.precision.clone()),
        ] {
            let error = (&g - &w).amax() / w.amax().max(1e-12);
            eprintln!("case {:?}: stepped {name}: {error:.2e}", cases[k]);
            assert!(
                error <= tol,
                "case {:?}: stepped {name}: {error:e} > {tol:e}",
                cases[k]
            );
        }
    }
    eprintln!("largest error / tolerance: {worst:.3e}");
}

/// q(w)'s encoder run by the device (issue 34 item 1): its forward pass gives the CPU's q(w)
/// (checked through the bound's terms and gradients, which the device computes from its own
/// moments: the request's μ and Σ are zeros and never read), KL(q(w)) and k_tt's latent share
/// come from the device's sums, and after the commit the encoder's weights and Adam moments are
/// the CPU's step from the CPU's backward pass. Shapes: a one-layer head only, the paper's
/// 128-wide layers (depth 2 here), and a narrow deep one; two of them in one submission.
#[test]
fn the_encoder_on_the_device_equals_the_cpus() {
    use occam::gp::encoder::Encoder;
    use rand::{Rng, SeedableRng};
    let Some(gpu) = gpu() else { return };
    // (D, M, b, S, width, depth)
    let cases = [
        (2, 5, 9, 3, 4, 0),
        (3, 12, 64, 5, 128, 2),
        (4, 20, 40, 4, 7, 5),
    ];
    let mut problems = Vec::new();
    let mut encoders = Vec::new();
    for (k, &(d, m, b, s, width, depth)) in cases.iter().enumerate() {
        let mut p = common::cgp_problem(d, m, b, s, 300 + k as u64);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(40 + k as u64);
        let mut e = Encoder::new(d, width, depth, &mut rng);
        // Biases away from 0, so that ReLU's kinks are not at the data.
        let mut w = e.params_to_vec();
        for v in &mut w {
            *v += rng.random_range(-0.1..0.1);
        }
        e.set_params_from_slice(&w);
        let (mu, var, _) = e.forward(&p.x);
        let lat = p.latent.as_mut().unwrap();
        lat.mu = mu;
        lat.var = var;
        problems.push(p);
        encoders.push(e);
    }
    let wants: Vec<SvgpOutput> = problems
        .iter()
        .map(|p| bound_and_gradient(&p.input()).expect("the CPU computes"))
        .collect();
    // The encoder's loss gradient −∂L̂/∂weights from the CPU's backward pass.
    let encoder_grads: Vec<Vec<f64>> = problems
        .iter()
        .zip(&encoders)
        .zip(&wants)
        .map(|((p, e), w)| {
            let (_, _, tape) = e.forward(&p.x);
            e.backward(&tape, &(-&w.grad.latent_mu), &(-&w.grad.latent_var))
        })
        .collect();
    // Moments: m = 0 (so the stepped m returns the device's gradient), v of the order of g².
    let seconds = |g: &[f64]| -> Vec<f64> {
        let top = g.iter().fold(1e-6f64, |a, v| a.max(v.abs()));
        (0..g.len())
            .map(|k| top * top * (0.5 + (k % 5) as f64 / 4.0))
            .collect()
    };
    let posteriors: Vec<InducingPosterior> = problems.iter().map(posterior).collect();
    let z_second: Vec<Vec<f64>> = wants.iter().map(|w| seconds(w.grad.z.as_slice())).collect();
    let e_second: Vec<Vec<f64>> = encoder_grads.iter().map(|g| seconds(g)).collect();
    let e_first: Vec<Vec<f64>> = encoder_grads.iter().map(|g| vec![0.0; g.len()]).collect();
    for k in 0..cases.len() {
        let p = &problems[k];
        gpu.upload_state(
            10 + k,
            ResidentView {
                posterior: &posteriors[k],
                z: &p.z,
                z_first: &zeros(p),
                z_second: &z_second[k],
                encoder: Some(&encoders[k]),
                encoder_first: &e_first[k],
                encoder_second: &e_second[k],
                parameters: parameters_of(
                    p,
                    &vec![0.0; p.kernel.param_count() + 1],
                    floor_of(10 + k, p),
                ),
            },
        )
        .expect("P factorises");
    }
    // The device must not read the host's moments: give it zeros.
    let blind: Vec<occam::gp::svgp::LatentBatch> = problems
        .iter()
        .map(|p| {
            let mut lat = p.latent.clone().unwrap();
            lat.mu.fill(0.0);
            lat.var.fill(0.0);
            lat
        })
        .collect();
    let requests: Vec<ResidentRequest> = (0..cases.len())
        .map(|k| ResidentRequest {
            encoder: Some(&encoders[k]),
            latent: &blind[k],
            ..request(10 + k, &problems[k], JitterPolicy::default(), 0.0, false)
        })
        .collect();
    let got = gpu
        .resident_evaluations(&requests)
        .expect("the GPU computes");
    for (k, (evaluation, want)) in got.iter().zip(&wants).enumerate() {
        let (d, m, b, ..) = cases[k];
        let p = &problems[k];
        let lat = p.latent.as_ref().unwrap();
        let tol = tolerance(m, d);
        let HeldLatent::Encoded { kl } = evaluation.latent else {
            panic!("the device ran the encoder");
        };
        let scale = p.total_rows as f64 / b as f64;
        let kl_want = want.terms.kl_latent / scale;
        let norm_want =
            want.grad.z.norm_squared() + encoder_grads[k].iter().map(|g| g * g).sum::<f64>();
        let c = scale_c(p);
        let t = lat.eps.len() as f64;
        let ell = c
            * (-0.5 * t * (2.0 * std::f64::consts::PI * p.noise).ln()
                - evaluation.misfit / (2.0 * p.noise));
        for (name, error) in [
            ("Σ KL(q(w))", (kl - kl_want).abs() / kl_want.abs().max(1.0)),
            (
                "‖∂Z‖² + ‖∂encoder‖²",
                (evaluation.held_norm - norm_want).abs() / norm_want.max(1e-12),
            ),
            (
                "expected log-likelihood",
                (ell - want.terms.expected_log_lik).abs()
                    / want.terms.expected_log_lik.abs().max(1.0),
            ),
        ] {
            eprintln!(
                "encoder case {:?}: {name}: {error:.2e} (tolerance {tol:.1e})",
                cases[k]
            );
            assert!(
                error <= tol,
                "encoder case {:?}: {name}: {error:e} > {tol:e}",
                cases[k]
            );
        }
        assert!(evaluation.state.is_none());
    }
    // After the commit: the encoder's Adam state is the CPU's step from the CPU's gradient.
    for k in 0..cases.len() {
        let shape = StateShape {
            encoder: encoders[k].param_count(),
            ..shape_of(&problems[k])
        };
        gpu.commit_states(&[10 + k], shape).expect("committed");
        let state = gpu.read_state(10 + k, shape).expect("readable");
        // The kernel's gradient (with k_tt's share from the draws the device formed) and φ²'s,
        // through their step.
        let p = &problems[k];
        let extra = &NO_EXTRA[..p.kernel.param_count()];
        let (d, m, ..) = cases[k];
        for (name, error) in parameter_errors(
            p,
            &wants[k],
            extra,
            &state.parameters,
            ADAM.rate,
            floor_of(10 + k, p),
        ) {
            let tol = tolerance(m, d);
            eprintln!("encoder case {:?}: {name}: {error:.2e}", cases[k]);
            assert!(
                error <= tol,
                "encoder case {:?}: {name}: {error:e} > {tol:e}",
                cases[k]
            );
        }
        let g = &encoder_grads[k];
        let first: Vec<f64> = g.iter().map(|v| (1.0 - ADAM.beta1) * v).collect();
        let second: Vec<f64> = g
            .iter()
            .zip(&e_second[k])
            .map(|(v, v0)| ADAM.beta2 * v0 + (1.0 - ADAM.beta2) * v * v)
            .collect();
        let before = encoders[k].params_to_vec();
        let step: Vec<f64> = first
            .iter()
            .zip(&second)
            .map(|(m1, v)| -ADAM.rate * m1 / (v.sqrt() + ADAM.epsilon))
            .collect();
        let moved: Vec<f64> = state
            .encoder
            .values
            .iter()
            .zip(&before)
            .map(|(a, b)| a - b)
            .collect();
        let rel = |got: &[f64], want: &[f64]| -> f64 {
            assert_eq!(got.len(), want.len());
            let top = want.iter().fold(1e-12f64, |a, v| a.max(v.abs()));
            got.iter()
                .zip(want)
                .fold(0.0f64, |e, (a, b)| e.max((a - b).abs() / top))
        };
        // Float32 sums of at most 128 products (a layer) and 64 rows (a weight's gradient):
        // measured within 4.1·10⁻⁷ for m and v and 2.2·10⁻⁵ for the step (the weights' float32
        // rounding against a step of ~10⁻³) on lavapipe; a 1 % error in KL(q(w))'s gradient
        // gives 1.4·10⁻³.
        for (name, error, tol) in [
            (
                "the encoder's gradient, from m",
                rel(&state.encoder.first, &first),
                1e-5,
            ),
            ("the encoder's v", rel(&state.encoder.second, &second), 1e-5),
            ("the encoder's step", rel(&moved, &step), 2e-4),
        ] {
            eprintln!(
                "encoder case {:?}: {name}: {error:.2e} (tolerance {tol:.0e})",
                cases[k]
            );
            assert!(
                error <= tol,
                "encoder case {:?}: {name}: {error:e} > {tol:e}",
                cases[k]
            );
        }
    }
}

/// The minibatch gathered from the data the device holds (`Gpu::hold_data`, the request's row
/// indices) gives the evaluation the uploaded rows give, bit for bit (the same float32 values),
/// for two requests gathered in one batch, each with its own rows and its own latent column (its
/// targets that column); another data set held after it is used in its place.
#[test]
fn rows_gathered_from_the_held_data_equal_the_uploaded_ones() {
    let Some(gpu) = gpu() else { return };
    let mut p = common::cgp_problem(3, 9, 20, 4, 500);
    let (b, d) = p.x.shape();
    // The data: 3b rows, the first minibatch's at rows 3r + 1 (in reverse order), the second's
    // at rows 3r + 2; the rest noise.
    let rows: Vec<usize> = (0..b).map(|r| 3 * (b - 1 - r) + 1).collect();
    let mut data = DMatrix::from_fn(3 * b, d, |i, j| (i * d + j) as f64 * 0.37 - 5.0);
    for (r, &row) in rows.iter().enumerate() {
        data.row_mut(row).copy_from(&p.x.row(r));
    }
    let other_rows: Vec<usize> = (0..b).map(|r| 3 * r + 2).collect();
    // The targets are the rows' own column, as in the engine's minibatches; the second request
    // is another variable (its latent input in another column).
    let mut second = p.clone();
    second.x = DMatrix::from_fn(b, d, |r, j| data[(other_rows[r], j)]);
    let latent = second.latent.as_mut().unwrap();
    latent.slot = (latent.slot + 1) % d;
    let column = latent.slot;
    second.y = second.x.column(column).into_owned();
    let column = p.latent.as_ref().unwrap().slot;
    p.y = p.x.column(column).into_owned();
    let problems = [&p, &second];
    let row_sets = [rows.as_slice(), other_rows.as_slice()];
    let evaluate = |first_slot: usize, gathered: bool| {
        let requests: Vec<ResidentRequest> = problems
            .iter()
            .zip(row_sets)
            .enumerate()
            .map(|(k, (problem, rows))| {
                let slot = first_slot + k;
                upload(
                    &gpu,
                    slot,
                    problem,
                    &posterior(problem),
                    &zeros(problem),
                    &zeros(problem),
                );
                ResidentRequest {
                    rows: gathered.then_some(rows),
                    ..request(slot, problem, JitterPolicy::default(), 0.0, false)
                }
            })
            .collect();
        gpu.resident_evaluations(&requests).unwrap()
    };
    assert!(gpu.hold_data(&data).unwrap(), "the data fits");
    // Slots 4 apart, so that each pair has the same floors of φ² (0 and 0.2 φ², one batch).
    let uploaded = evaluate(20, false);
    let gathered = evaluate(24, true);
    assert_eq!(gathered, uploaded);
    assert_ne!(uploaded[0].misfit, uploaded[1].misfit, "two problems");
    // Another data set replaces it: the same rows now hold other values.
    let other = data.map(|v| v + 1.0);
    assert!(gpu.hold_data(&other).unwrap());
    let moved = evaluate(28, true);
    assert_ne!(moved[0].misfit, uploaded[0].misfit, "the new data is used");
}

/// What a slot holding problem `p` (without an encoder) holds.
fn shape_of(p: &SvgpProblem) -> StateShape {
    StateShape::of(&p.z, None, &p.kernel)
}

/// One request for slot `slot` of problem `p`.
fn request(
    slot: usize,
    p: &SvgpProblem,
    jitter: JitterPolicy,
    relative_jitter: f64,
    commit: bool,
) -> ResidentRequest<'_> {
    ResidentRequest {
        slot,
        kernel: &p.kernel,
        z: &p.z,
        encoder: None,
        x: &p.x,
        y: &p.y,
        rows: None,
        latent: p.latent.as_ref().unwrap(),
        noise: p.noise,
        c: scale_c(p),
        jitter,
        relative_jitter,
        gamma: GAMMA,
        adam: ADAM,
        parameters: parameter_step(slot, p),
        before: if commit {
            StateChange::Commit
        } else {
            StateChange::Keep
        },
        read_current: commit,
    }
}

/// The float32 hazard of MODEL.md §11.3: at the start of training every precision is near 0.01,
/// K_ZZ is nearly a matrix of ones, and the device raises the ladder's first rung to
/// 1e-4 · mean diag K_ZZ (computed on the device from its own K_ZZ); the CPU with that jitter
/// gives the same bound and gradients.
#[test]
fn a_nearly_singular_k_zz_takes_the_relative_floor_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let mut p = common::cgp_problem(3, 30, 32, 4, 7);
    for part in &mut p.kernel.stationary {
        part.precision.iter_mut().for_each(|t| *t = 0.01);
    }
    let floor = occam::gp::svgp::FLOAT32_RELATIVE_JITTER;
    upload(&gpu, 0, &p, &posterior(&p), &zeros(&p), &zeros(&p));
    let got = gpu
        .resident_evaluations(&[request(0, &p, JitterPolicy::default(), floor, false)])
        .unwrap()
        .remove(0);
    let gram = p.kernel.gram(&p.z);
    let mut input = p.input();
    input.jitter.initial = floor * gram.trace() / gram.nrows() as f64;
    let want = bound_and_gradient(&input).unwrap();
    let jitter = got.jitter.clone().expect("factorises at the floor");
    assert!(
        (jitter / want.terms.jitter - 1.0).abs() < 1e-6,
        "jitter {jitter} on the device, {} on the CPU",
        want.terms.jitter
    );
    let tol = tolerance(30, 3);
    for (name, error) in errors(&p, &got, &want, request(0, &p, input.jitter, 0.0, false).c) {
        eprintln!("{name}: {error:.2e}");
        assert!(error <= tol, "{name}: {error:e} > {tol:e}");
    }
}

/// Hyperparameters the host changed itself (thresholding switches an edge off and re-initialises
/// the kept ones) go with the request: written over the slot's current ones before anything
/// reads them, they are the ones evaluated (the bound is the CPU's with the changed kernel and
/// φ²) and stepped from (their moments too: a first moment of 0.5 on every entry shows in the
/// step), and without an upload the slot keeps what it had.
#[test]
fn hyperparameters_the_host_changed_go_with_the_request() {
    let Some(gpu) = gpu() else { return };
    let p = common::cgp_problem(3, 9, 24, 3, 31);
    let q = posterior(&p);
    upload(&gpu, 5, &p, &q, &zeros(&p), &zeros(&p));
    // The host's change: every hyperparameter and φ² scaled (a mask change would go with the
    // request's kernel anyway), and moments the device never had.
    let mut changed = p.clone();
    let mut values = changed.kernel.params_to_vec();
    for (k, v) in values.iter_mut().enumerate() {
        *v *= 1.0 + 0.1 * (k % 4) as f64;
    }
    changed.kernel.set_params_from_slice(&values);
    changed.noise *= 1.7;
    let count = changed.kernel.param_count() + 1;
    let mut host = parameters_of(&changed, &vec![0.25; count], floor_of(5, &p));
    host.first = vec![0.5; count];
    let want = bound_and_gradient(&changed.input()).expect("the CPU computes");
    let evaluate = |request: ResidentRequest| {
        gpu.resident_evaluations(&[request])
            .expect("the GPU computes")
            .remove(0)
    };
    // Shapes from the problem as it was: only the slot's numbers differ.
    let got = evaluate(ResidentRequest {
        parameters: ParameterStep {
            upload: Some(&host),
            ..parameter_step(5, &p)
        },
        noise: changed.noise,
        ..request(5, &p, JitterPolicy::default(), 0.0, false)
    });
    let c = scale_c(&p);
    let t = p.latent.as_ref().unwrap().eps.len() as f64;
    let ell = |misfit: f64, noise: f64| {
        c * (-0.5 * t * (2.0 * std::f64::consts::PI * noise).ln() - misfit / (2.0 * noise))
    };
    let want_ell = want.terms.expected_log_lik;
    let error = (ell(got.misfit, changed.noise) - want_ell).abs() / want_ell.abs().max(1.0);
    assert!(
        error < 1e-4,
        "the changed kernel and φ² were evaluated: expected log-likelihood off by {error:e}"
    );
    // The step from the uploaded moments: m = β₁·0.5 + (1 − β₁)g for each entry, so m is at
    // least 0.45 − 0.1|g|; from zero moments it would be −0.1g.
    let sigmoid = |r: f64| 1.0 / (1.0 + (-r).exp());
    let ascent: Vec<f64> = want
        .grad
        .kernel
        .to_vec()
        .into_iter()
        .chain([want.grad.noise])
        .zip(&host.values)
        .map(|(g, &r)| g * sigmoid(r))
        .collect();
    for (k, (m, g)) in got.parameters.first.iter().zip(&ascent).enumerate() {
        let expected = ADAM.beta1 * 0.5 - (1.0 - ADAM.beta1) * g;
        assert!(
            (m - expected).abs() <= 1e-3 * expected.abs().max(1.0),
            "entry {k}: first moment {m}, {expected} expected from the uploaded moments"
        );
    }
    // Without an upload the next evaluation sees the slot's state (the changed numbers, as the
    // step above was not committed), not the request's kernel.
    let again = evaluate(ResidentRequest {
        noise: changed.noise,
        ..request(5, &p, JitterPolicy::default(), 0.0, false)
    });
    assert_eq!(again.misfit, got.misfit, "the slot kept the host's numbers");
}

/// A K_ZZ that no rung of the ladder factorises (a "jitter" of −100 makes it indefinite) is
/// reported with the failing pivot, as on the CPU; a request with `commit` set makes the last
/// step current in the same submission.
#[test]
fn a_failed_factorisation_is_reported_and_a_commit_rides_with_the_next_request() {
    let Some(gpu) = gpu() else { return };
    let p = common::cgp_problem(2, 6, 8, 2, 9);
    let q = posterior(&p);
    upload(&gpu, 3, &p, &q, &zeros(&p), &zeros(&p));
    let failed = gpu
        .resident_evaluations(&[request(3, &p, JitterPolicy::exactly(-100.0), 0.0, false)])
        .unwrap()
        .remove(0);
    let cpu = cholesky_jittered(&p.kernel.gram(&p.z), JitterPolicy::exactly(-100.0))
        .expect_err("the CPU fails too");
    match (failed.jitter.expect_err("the device fails"), cpu) {
        (
            occam::gp::linalg::CholeskyError::NotPositiveDefinite { size, pivot, .. },
            occam::gp::linalg::CholeskyError::NotPositiveDefinite {
                size: cpu_size,
                pivot: cpu_pivot,
                ..
            },
        ) => assert_eq!((size, pivot), (cpu_size, cpu_pivot)),
        other => panic!("unexpected errors {other:?}"),
    }
    // With the default ladder it factorises; the step waits until the next request commits it.
    let first = gpu
        .resident_evaluations(&[request(3, &p, JitterPolicy::default(), 0.0, false)])
        .unwrap()
        .remove(0);
    first.stepped.expect("stepped");
    let before_state = gpu.read_state(3, shape_of(&p)).unwrap();
    let before = before_state.posterior.clone();
    assert!(
        (&before.cov - &q.cov).amax() < 1e-12,
        "nothing committed yet"
    );
    let second = gpu
        .resident_evaluations(&[request(3, &p, JitterPolicy::default(), 0.0, true)])
        .unwrap()
        .remove(0);
    let after = gpu.read_state(3, shape_of(&p)).unwrap();
    assert_eq!(
        second.state.as_ref(),
        Some(&after),
        "the state read back with the evaluation is the committed one"
    );
    // Zero moments: the first step moves each entry by rate·(1 − β₁)/√(1 − β₂) ≈ 0.0316.
    let moved = (&after.z - &before_state.z).amax();
    assert!(
        (moved - 0.01 * 0.1 / 0.001f64.sqrt()).abs() < 1e-4,
        "the commit took Z's Adam step: moved {moved}"
    );
    let after = after.posterior;
    let want = bound_and_gradient(&p.input()).unwrap();
    let mut stepped = q.clone();
    stepped.natural_step(&want.natgrad, GAMMA).unwrap();
    assert!(
        (&after.cov - &stepped.cov).amax() < 1e-5,
        "the commit took the step"
    );
    // The second evaluation saw the committed q(v): its KL is the stepped posterior's.
    let s_factor = cholesky_jittered(&stepped.cov, JitterPolicy::exactly(0.0)).unwrap();
    let logdet: f64 = s_factor.l.diagonal().iter().map(|v| 2.0 * v.ln()).sum();
    let kl = 0.5 * (stepped.cov.trace() + stepped.mean.norm_squared() - 6.0 - logdet);
    assert!(
        (second.kl_inducing - kl).abs() < 1e-5 * kl.abs().max(1.0),
        "KL {} after the commit, {kl} expected",
        second.kl_inducing
    );
    assert!(
        (first.kl_inducing - kl).abs() > 1e-6,
        "the first saw the old q(v)"
    );
}

/// A 3-variable chain of `n` rows.
fn chain(n: usize) -> DMatrix<f64> {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let mut data = DMatrix::zeros(n, 3);
    for r in 0..n {
        let a: f64 = rng.sample(rand_distr::StandardNormal);
        let e1: f64 = rng.sample(rand_distr::StandardNormal);
        let e2: f64 = rng.sample(rand_distr::StandardNormal);
        let b = a.tanh() * 1.5 + 0.3 * e1;
        data[(r, 0)] = a;
        data[(r, 1)] = b;
        data[(r, 2)] = (b * 1.3).sin() + 0.3 * e2;
    }
    data
}

/// The engine's uncollapsed variables of `data`, evaluated with seed `seed` (as
/// `Restart::evaluation_jobs` would send them).
fn evaluations(
    variables: &[occam::discovery::cgp::Conditional],
    seed: u64,
) -> Vec<occam::runner::Job<'_>> {
    variables
        .iter()
        .map(|v| occam::runner::Job::Evaluate {
            variable: std::borrow::Cow::Borrowed(v),
            jitter: 1e-6,
            seed,
        })
        .collect()
}

fn evaluation(outcome: occam::runner::Outcome) -> occam::discovery::cgp::Evaluation {
    match outcome {
        occam::runner::Outcome::Evaluation(e) => e.expect("evaluated"),
        other => panic!("not an evaluation: {other:?}"),
    }
}

/// The engine's protocol with the device holding q(v): an evaluation whose step the restart does
/// not apply leaves the device's q(v) as it was (the same evaluation again gives the same value);
/// applied steps are the CPU's (the next evaluation agrees with the CPU's run of the same steps);
/// a restart that undoes a committed step (a fault restores the checkpoint from before it) is
/// evaluated at the state it returned to; and a final bound of a variable whose own copy of q(v)
/// lags reads the current one from the device.
#[test]
fn the_engine_commits_only_the_steps_it_applies() {
    use occam::discovery::cgp::Conditional;
    use occam::runner::gpu_executor::GpuBackend;
    use occam::runner::{Backend, CpuBackend};
    use std::sync::Arc;
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let settings = crate::gpu_device::uncollapsed_settings(12, 40, 4);
    let start: Vec<Conditional> =
        common::evaluation_jobs(&data, &settings, 11, |child| 60 + child as u64)
            .into_iter()
            .map(|job| match job {
                occam::runner::Job::Evaluate { variable, .. } => variable.into_owned(),
                _ => unreachable!("evaluations"),
            })
            .collect();
    // The variables' own copies are never refreshed by the clock, so that they lag for certain
    // on any machine (on a slower one a refresh every 2 s would land mid-test).
    gpu.set_sync(f64::INFINITY, usize::MAX);
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::serial());
    let cpu = CpuBackend::serial();
    let value = |b: &dyn Backend, vs: &[Conditional], seed: u64| -> Vec<f64> {
        b.run(&data, &evaluations(vs, seed))
            .into_iter()
            .map(|o| o.into_value().unwrap())
            .collect()
    };
    // The graph prior's gradient goes with the evaluation (as `Restart::begin_iteration` gives
    // it), so that the device can step the hyperparameters with it.
    let step = |b: &dyn Backend, vs: &mut Vec<Conditional>, seed: u64| {
        let graph = |v: &Conditional| vec![-10.0; v.parents().len()];
        for v in vs.iter_mut() {
            let d_theta = graph(v);
            v.prepare_step(&d_theta);
        }
        let outcomes = b.run(&data, &evaluations(vs, seed));
        for (v, outcome) in vs.iter_mut().zip(outcomes) {
            let d_theta = graph(v);
            v.ascend(evaluation(outcome), &d_theta).expect("a step");
        }
    };
    // Float32 predictions against f64 after several Adam and natural steps, in bounds of −10⁵
    // to −10⁶ while φ² is still small: measured within 8.4·10⁻⁴ relative on lavapipe; 5·10⁻³
    // leaves room for another rasteriser's rounding, and the faults this test is for are far
    // larger (the lagging copy's bound is 4–8 times the current one's).
    let close = |what: &str, got: &[f64], want: &[f64]| {
        for (g, w) in got.iter().zip(want) {
            eprintln!("{what}: GPU {g}, CPU {w}");
            assert!(
                (g - w).abs() <= 5e-3 * w.abs().max(1.0),
                "{what}: GPU {g} vs CPU {w}"
            );
        }
    };

    // Four applied steps on each side (the natural steps' ramp makes the later ones large).
    let (mut on_gpu, mut on_cpu) = (start.clone(), start.clone());
    for seed in 2..6 {
        step(&backend, &mut on_gpu, seed);
        step(&cpu, &mut on_cpu, seed);
    }
    assert!(
        on_gpu.iter().all(|v| v.lagging_posterior().is_some()),
        "the GPU side's copies of q(v) lag the device's"
    );
    // Not applied: the same evaluation twice (the first commits the last step, the second must
    // not commit the step the first computed) gives the same values, bit for bit, the CPU's.
    let first = value(&backend, &on_gpu, 9);
    let again = value(&backend, &on_gpu, 9);
    assert_eq!(first, again, "an unapplied step is never committed");
    close("after four steps", &first, &value(&cpu, &on_cpu, 9));

    // A fault undoes a committed step: the restart keeps a checkpoint from before the step,
    // applies it, evaluates (committing it), and then restores the checkpoint.
    let checkpoint = on_gpu.clone();
    step(&backend, &mut on_gpu, 10);
    let _ = value(&backend, &on_gpu, 11);
    close(
        "after a restored step",
        &value(&backend, &checkpoint, 12),
        &value(&cpu, &on_cpu, 12),
    );
    // And it goes on from there as the CPU does.
    let mut restored = checkpoint;
    step(&backend, &mut restored, 13);
    step(&cpu, &mut on_cpu, 13);
    close(
        "a step after the restore",
        &value(&backend, &restored, 14),
        &value(&cpu, &on_cpu, 14),
    );

    // A final bound reads the current q(v) from the device.
    let finals = |vs: &[Conditional]| -> Vec<occam::runner::Job<'static>> {
        vs.iter()
            .map(|v| occam::runner::Job::FinalBound {
                variable: std::borrow::Cow::Owned(v.clone()),
                evaluated: 0.0,
                seed: 5,
            })
            .collect()
    };
    let got = backend.run(&data, &finals(&restored));
    let want = cpu.run(&data, &finals(&on_cpu));
    let stale = cpu.run(&data, &finals(&restored));
    for ((g, w), s) in got.into_iter().zip(want).zip(stale) {
        let (g, w, s) = (
            g.into_value().unwrap(),
            w.into_value().unwrap(),
            s.into_value().unwrap(),
        );
        eprintln!("final bound: GPU {g}, CPU {w}, from the lagging copy {s}");
        assert!(
            (g - w).abs() <= 5e-3 * w.abs().max(1.0),
            "final bound: GPU {g} vs CPU {w}"
        );
        assert!(
            (s - w).abs() > 100.0 * (g - w).abs(),
            "the lagging copy's bound {s} is not the current one's {w}"
        );
    }
    // A step whose graph gradient is not the one the device was given (prepare_step skipped
    // or called with another) is refused, not taken with the wrong one.
    let mut unprepared = restored.clone();
    for v in unprepared.iter_mut() {
        let given = vec![-10.0; v.parents().len()];
        v.prepare_step(&given);
    }
    let outcomes = backend.run(&data, &evaluations(&unprepared, 15));
    for (v, outcome) in unprepared.iter_mut().zip(outcomes) {
        let other = vec![-11.0; v.parents().len()];
        let refused = v.ascend(evaluation(outcome), &other);
        assert!(
            matches!(
                refused,
                Err(occam::discovery::cgp::EvaluationError::Mismatch(_))
            ),
            "{refused:?}"
        );
    }
    assert!(backend.failure().is_none());
}
