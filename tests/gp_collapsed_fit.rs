//! Fitting a collapsed GP-CDE (MODEL.md §6): it beats the noise-model and linear baselines on a
//! nonlinear relation, is deterministic for a seed, works on tiny data, and handles factorisation
//! failures by escalating jitter instead of panicking or returning NaN.

use nalgebra::{DMatrix, DVector};
use occam::gp::collapsed::{
    linear_regression_evidence, root_noise_value, CollapsedModel, FitError, FitSettings,
    GpInitialisation,
};
use occam::gp::lbfgs::{LbfgsSettings, StopReason};
use occam::gp::linalg::JitterPolicy;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// Zero mean, unit (population) variance.
fn standardise(v: &mut DVector<f64>) {
    let n = v.len() as f64;
    let mean = v.mean();
    v.add_scalar_mut(-mean);
    let sd = (v.norm_squared() / n).sqrt();
    *v /= sd;
}

/// y = sin(2x) + 0.1 ε with x ~ U(−2, 2), both standardised.
fn sine_data(n: usize, seed: u64) -> (DMatrix<f64>, DVector<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut x: DVector<f64> = DVector::from_fn(n, |_, _| rng.random_range(-2.0..2.0));
    let mut y = DVector::from_fn(n, |i, _| {
        (2.0 * x[i]).sin() + 0.1 * rng.sample::<f64, _>(StandardNormal)
    });
    standardise(&mut x);
    standardise(&mut y);
    (DMatrix::from_column_slice(n, 1, x.as_slice()), y)
}

/// Small enough for a debug build: M = 15, at most 300 L-BFGS iterations.
fn quick_settings() -> FitSettings {
    FitSettings {
        inducing_points: 15,
        lbfgs: LbfgsSettings {
            max_iterations: 300,
            ..FitSettings::default().lbfgs
        },
        ..FitSettings::default()
    }
}

#[test]
fn conditional_fit_beats_noise_and_linear_baselines() {
    let (x, y) = sine_data(40, 1);
    let blr = linear_regression_evidence(&x, &y, 1e-6);
    let root = root_noise_value(&y, 1e-6);
    let model = CollapsedModel::new(x, y).unwrap();
    assert_eq!(model.noise_value(), blr.value);

    // (a) [B]'s procedure with its GP-regression start.
    let settings = FitSettings {
        gp_initialisation: GpInitialisation::Always,
        ..quick_settings()
    };
    let gp_start = model
        .fit(&settings, &mut ChaCha8Rng::seed_from_u64(7))
        .unwrap();
    // (b) The random start. Its precisions in [1, 100) (lengthscales 0.01–1) suit M = 200 inducing
    // points spread over the data range; with M = 15 for a fast debug test, inducing points 0.25
    // apart are uncorrelated at such lengthscales and the fit ends in the noise model. So the
    // draw is kept but the precisions are set to λ = 2 (θ_w = 3λ).
    let settings = FitSettings {
        gp_initialisation: GpInitialisation::Never,
        ..quick_settings()
    };
    let mut init = model.initial_params(&settings, &mut ChaCha8Rng::seed_from_u64(7));
    init.kernel.stationary[0].precision = vec![2.0, 6.0];
    let random_start = model.fit_from(init, &settings).unwrap();

    for (name, fit) in [("GP start", &gp_start), ("random start", &random_start)] {
        eprintln!(
            "{name}: bound {:.3}, BLR {:.3}, root {:.3}, Adam {} steps, L-BFGS {} its ({:?}), jitter {:e}",
            fit.bound,
            blr.value,
            root,
            fit.adam_steps,
            fit.lbfgs_iterations,
            fit.stop,
            fit.jitter
        );
        assert!(fit.bound.is_finite());
        assert!(
            fit.adam_beat_noise,
            "{name}: Adam should pass F_noise on this data"
        );
        // A sine with 10% noise: the GP explains most of the variance, linear regression little.
        assert!(
            fit.bound > blr.value + 10.0,
            "{name}: {} vs BLR {}",
            fit.bound,
            blr.value
        );
        assert!(
            fit.bound > root + 10.0,
            "{name}: {} vs root {}",
            fit.bound,
            root
        );
        assert_eq!(fit.params.z.shape(), (15, 2));
        assert_eq!((fit.attempts, fit.jitter), (1, 1e-6));
    }
    assert!(gp_start.gp_initialised && !random_start.gp_initialised);
}

#[test]
fn fit_is_deterministic_for_a_seed() {
    let (x, y) = sine_data(20, 2);
    let model = CollapsedModel::new(x, y).unwrap();
    let settings = FitSettings {
        inducing_points: 8,
        lbfgs: LbfgsSettings {
            max_iterations: 60,
            ..FitSettings::default().lbfgs
        },
        ..FitSettings::default()
    };
    let a = model
        .fit(&settings, &mut ChaCha8Rng::seed_from_u64(3))
        .unwrap();
    let b = model
        .fit(&settings, &mut ChaCha8Rng::seed_from_u64(3))
        .unwrap();
    assert_eq!(a, b);
    let c = model
        .fit(&settings, &mut ChaCha8Rng::seed_from_u64(4))
        .unwrap();
    assert_ne!(a.params, c.params, "another seed starts elsewhere");
}

#[test]
fn ten_rows_fit_as_root_and_as_conditional() {
    let (x, y) = sine_data(10, 3);
    let settings = FitSettings {
        lbfgs: LbfgsSettings {
            max_iterations: 500,
            ..FitSettings::default().lbfgs
        },
        ..FitSettings::default()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let root = CollapsedModel::new(DMatrix::zeros(10, 0), y.clone()).unwrap();
    assert_eq!(root.noise_value(), root_noise_value(&y, 1e-6));
    let fit = root.fit(&settings, &mut rng).unwrap();
    // M = min(200, N) = 10 inducing points on the latent alone.
    assert_eq!(fit.params.z.shape(), (10, 1));
    assert!(fit.bound.is_finite());
    let cond = CollapsedModel::new(x, y)
        .unwrap()
        .fit(&settings, &mut rng)
        .unwrap();
    assert_eq!(cond.params.z.shape(), (10, 2));
    assert!(cond.bound.is_finite());
    for f in [&fit, &cond] {
        assert!(f.lbfgs_iterations <= 500);
        assert!(matches!(
            f.stop,
            StopReason::GradientTolerance
                | StopReason::RelativeReduction
                | StopReason::MaxIterations
                | StopReason::LineSearchFailed
        ));
    }
}

#[test]
fn initialisation_follows_the_reference() {
    let (x, y) = sine_data(30, 4);
    let model = CollapsedModel::new(x.clone(), y.clone()).unwrap();
    let random = FitSettings {
        gp_initialisation: GpInitialisation::Never,
        ..quick_settings()
    };
    let p = model.initial_params(&random, &mut ChaCha8Rng::seed_from_u64(8));
    let se = &p.kernel.stationary[0];
    assert_eq!(se.variance, 1.0);
    assert_eq!(p.kernel.linear.as_deref(), Some(&[1.0, 1.0][..]));
    // θ_x = λ ∈ [1, 100), θ_w = 3λ.
    assert!((1.0..100.0).contains(&se.precision[0]));
    assert!((se.precision[1] - 3.0 * se.precision[0]).abs() < 1e-12);
    assert!((1e-4..=1e-2).contains(&p.noise_variance));
    // The parent column of Z is linspace(min x, max x, M).
    let (lo, hi) = (x.min(), x.max());
    assert!((p.z[(0, 0)] - lo).abs() < 1e-12 && (p.z[(14, 0)] - hi).abs() < 1e-12);
    let q = p.latent.as_ref().unwrap();
    assert!((&q.mean - &y * 0.01).amax() < 1e-15);
    assert!(q.variance.iter().all(|&s| s > 0.0 && s <= 0.1 + 1e-6));

    // Several parents: Z's parent columns are data rows.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let x2 = DMatrix::from_fn(30, 2, |_, _| rng.random_range(-1.0..1.0));
    let p2 = CollapsedModel::new(x2.clone(), y.clone())
        .unwrap()
        .initial_params(&quick_settings(), &mut rng);
    for i in 0..15 {
        let zi = p2.z.fixed_view::<1, 2>(i, 0);
        assert!((0..30).any(|r| x2.fixed_view::<1, 2>(r, 0) == zi));
    }
    // Root with the random start: μ = 0.1 y, θ_w = λ.
    let never = FitSettings {
        gp_initialisation: GpInitialisation::Never,
        ..quick_settings()
    };
    let root = CollapsedModel::new(DMatrix::zeros(30, 0), y.clone()).unwrap();
    let p3 = root.initial_params(&never, &mut rng);
    assert!((&p3.latent.as_ref().unwrap().mean - &y * 0.1).amax() < 1e-15);
    assert!((1.0..100.0).contains(&p3.kernel.stationary[0].precision[0]));
    // Root with the data-dependent start: μ = normal scores of y (same order as y, symmetric
    // around 0), variance 0.01, θ_w = 1.
    let always = FitSettings {
        gp_initialisation: GpInitialisation::Always,
        ..quick_settings()
    };
    let p4 = root.initial_params(&always, &mut rng);
    let q4 = p4.latent.as_ref().unwrap();
    for a in 0..30 {
        for b in 0..30 {
            if y[a] < y[b] {
                assert!(q4.mean[a] < q4.mean[b]);
            }
        }
    }
    assert!(q4.mean.sum().abs() < 1e-9 && q4.mean.max() > 1.5);
    assert!(q4.variance.iter().all(|&v| v == 0.01));
    assert_eq!(p4.kernel.stationary[0].precision[0], 1.0);

    // GP start: μ is the regression residual (small for a sine with 10% noise), θ_w = 3θ_x, and
    // the same draws otherwise (Z).
    let g = model.initial_params(&always, &mut ChaCha8Rng::seed_from_u64(8));
    let q = g.latent.as_ref().unwrap();
    assert!(
        q.mean.norm() < 0.5 * y.norm(),
        "residual {} vs y {}",
        q.mean.norm(),
        y.norm()
    );
    let se = &g.kernel.stationary[0];
    assert!((se.precision[1] - 3.0 * se.precision[0]).abs() < 1e-12);
    assert!(
        se.precision[0] < 20.0,
        "the regression shortens θ_x: {}",
        se.precision[0]
    );
}

/// Two inducing points at the origin with sf2 = 1 make K_ZZ = [[1, 1], [1, 1]] exactly, which
/// factorises only once 1 + ε differs from 1 in f64 (ε = 1e-15 is the first power of ten that
/// does). Starting at ε = 1e-20 the fit must climb the ladder, report the jitter it used, and
/// give a typed error when the ladder is capped below that.
#[test]
fn cholesky_failure_escalates_jitter_and_is_reported() {
    let (x, y) = sine_data(6, 6);
    let model = CollapsedModel::new(x, y).unwrap();
    let settings = FitSettings {
        inducing_points: 2,
        adam_steps: 20,
        jitter: JitterPolicy::up_to(1e-20, 10.0, 1.0),
        lbfgs: LbfgsSettings {
            max_iterations: 20,
            ..FitSettings::default().lbfgs
        },
        ..FitSettings::default()
    };
    let mut init = model.initial_params(&settings, &mut ChaCha8Rng::seed_from_u64(10));
    init.z.fill(0.0);
    let fit = model.fit_from(init.clone(), &settings).unwrap();
    eprintln!(
        "jitter {:e} after {} attempts; bound {}",
        fit.jitter, fit.attempts, fit.bound
    );
    assert!(fit.attempts >= 6, "{} attempts", fit.attempts);
    assert!(fit.jitter >= 0.99e-15, "jitter {:e}", fit.jitter);
    assert!(fit.bound.is_finite());

    let capped = FitSettings {
        jitter: JitterPolicy::up_to(1e-20, 10.0, 1e-17),
        ..settings
    };
    match model.fit_from(init, &capped) {
        Err(FitError::JitterExhausted {
            jitter, attempts, ..
        }) => {
            assert_eq!(attempts, 4);
            assert!((jitter - 1e-17).abs() < 1e-26);
        }
        other => panic!("expected JitterExhausted, got {other:?}"),
    }
}

#[test]
fn invalid_input_is_rejected_with_a_message() {
    let y = DVector::from_vec(vec![0.1, f64::NAN, 0.3]);
    let err = CollapsedModel::new(DMatrix::zeros(3, 0), y).unwrap_err();
    assert!(err.to_string().contains("y[1]"), "{err}");
    let err = CollapsedModel::new(DMatrix::zeros(2, 1), DVector::zeros(3)).unwrap_err();
    assert!(matches!(err, FitError::InvalidData(_)));
    let (x, y) = sine_data(8, 7);
    let model = CollapsedModel::new(x, y).unwrap();
    let bad = FitSettings {
        jitter: JitterPolicy::up_to(0.0, 10.0, 1.0),
        ..FitSettings::default()
    };
    assert!(matches!(
        model.fit(&bad, &mut ChaCha8Rng::seed_from_u64(0)),
        Err(FitError::InvalidSettings(_))
    ));
}

/// The Bayesian-linear-regression evidence against the dense log N(y | 0, vXXᵀ + σ²I) at its
/// reported maximiser, and stationarity there.
#[test]
fn linear_evidence_is_the_dense_maximum() {
    let mut rng = ChaCha8Rng::seed_from_u64(12);
    let n = 25;
    let x = DMatrix::from_fn(n, 2, |_, _| rng.random_range(-1.0..1.0));
    let y = DVector::from_fn(n, |i, _| {
        0.8 * x[(i, 0)] - 0.5 * x[(i, 1)] + 0.3 * rng.sample::<f64, _>(StandardNormal)
    });
    let dense = |v: f64, s2: f64| {
        let c = (&x * x.transpose() * v + DMatrix::identity(n, n) * s2)
            .cholesky()
            .unwrap();
        let logdet = 2.0 * c.l().diagonal().iter().map(|d| d.ln()).sum::<f64>();
        -0.5 * (n as f64 * (2.0 * std::f64::consts::PI).ln() + logdet + y.dot(&c.solve(&y)))
    };
    let e = linear_regression_evidence(&x, &y, 1e-6);
    let (v, s2) = (e.weight_variance, e.noise_variance);
    assert!((e.value - dense(v, s2)).abs() < 1e-9 * e.value.abs());
    for (dv, ds) in [(1.01, 1.0), (0.99, 1.0), (1.0, 1.01), (1.0, 0.99)] {
        assert!(dense(v * dv, s2 * ds) <= e.value + 1e-9, "not a maximum");
    }
    assert!(e.value > root_noise_value(&y, 1e-6));
}

/// A binary column: without a resolution floor a marginal model can place spikes of unbounded
/// height on the two values; with φ² ≥ Δ²/12 (Δ = 2 for a standardised balanced binary column)
/// its bound stays near the Gaussian baseline and the fitted φ² respects the floor.
#[test]
fn a_resolution_floor_bounds_the_evidence_of_a_binary_column() {
    let n = 60;
    let y = DVector::from_fn(n, |i, _| if i % 2 == 0 { 1.0 } else { -1.0 });
    let floor = occam::gp::resolution::resolution_noise_floor(y.as_slice(), 1e-6);
    assert!((floor - 1.0 / 3.0).abs() < 1e-12);
    let settings = FitSettings {
        gp_initialisation: GpInitialisation::Always,
        ..quick_settings()
    };
    let free = CollapsedModel::new(DMatrix::zeros(n, 0), y.clone()).unwrap();
    let floored = CollapsedModel::with_noise_floor(DMatrix::zeros(n, 0), y.clone(), floor).unwrap();
    assert_eq!(floored.noise_floor(), floor);
    assert_eq!(floored.noise_value(), root_noise_value(&y, floor));
    let a = free
        .fit(&settings, &mut ChaCha8Rng::seed_from_u64(4))
        .unwrap();
    let b = floored
        .fit(&settings, &mut ChaCha8Rng::seed_from_u64(4))
        .unwrap();
    assert!(b.params.noise_variance >= floor);
    // A density convolved with noise of variance ≥ 1/3 has p(1) + p(−1) ≤ N(0 | 0, 1/3)(1 + e⁻⁶),
    // so on 30 + 30 points the log evidence is at most 60 (log ½ + log N(0 | 0, 1/3)) ≈ −63.6
    // plus 60 · log(1 + e⁻⁶) ≈ 0.15.
    let cap = n as f64 * (0.5f64.ln() - 0.5 * (2.0 * std::f64::consts::PI / 3.0).ln());
    assert!(b.bound <= cap + 0.2, "{} > {cap}", b.bound);
    // Without the floor the same data gets far more "evidence" (spikes).
    assert!(a.bound > cap + 1.0 * n as f64, "{} vs {cap}", a.bound);
    // A floor below GPflow's is refused.
    assert!(CollapsedModel::with_noise_floor(DMatrix::zeros(n, 0), y, 1e-9).is_err());
}
