//! L-BFGS on problems with known minimisers: Rosenbrock (2-D and 10-D), a convex quadratic, an
//! objective that is NaN outside its domain, and an objective that fails.

use std::cell::Cell;
use std::convert::Infallible;

use occam::gp::lbfgs::{minimize, LbfgsError, LbfgsSettings, StopReason};

/// Tolerances tight enough that the stopping rule, not the test, limits the accuracy.
fn tight() -> LbfgsSettings {
    LbfgsSettings {
        gradient_tolerance: 1e-10,
        relative_tolerance: 0.0,
        ..LbfgsSettings::default()
    }
}

/// f(x) = Σ_{i<n−1} 100 (x_{i+1} − x_i²)² + (1 − x_i)²; minimum 0 at x = 1.
fn rosenbrock(x: &[f64]) -> Result<(f64, Vec<f64>), Infallible> {
    let n = x.len();
    let mut f = 0.0;
    let mut g = vec![0.0; n];
    for i in 0..n - 1 {
        let a = x[i + 1] - x[i] * x[i];
        let b = 1.0 - x[i];
        f += 100.0 * a * a + b * b;
        g[i] += -400.0 * a * x[i] - 2.0 * b;
        g[i + 1] += 200.0 * a;
    }
    Ok((f, g))
}

#[test]
fn rosenbrock_2d_converges_to_one() {
    let r = minimize(rosenbrock, &[-1.2, 1.0], &tight()).unwrap();
    assert_eq!(r.stop, StopReason::GradientTolerance, "{r:?}");
    for xi in &r.x {
        assert!((xi - 1.0).abs() < 1e-6, "{:?}", r.x);
    }
    assert!(r.value < 1e-12);
    assert!(r.iterations < 100, "{} iterations", r.iterations);
}

#[test]
fn rosenbrock_10d_converges_to_one() {
    let x0: Vec<f64> = (0..10)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect();
    let r = minimize(rosenbrock, &x0, &tight()).unwrap();
    assert_eq!(r.stop, StopReason::GradientTolerance, "{r:?}");
    for xi in &r.x {
        assert!((xi - 1.0).abs() < 1e-6, "{:?}", r.x);
    }
    assert!(r.evaluations <= LbfgsSettings::default().max_evaluations);
}

#[test]
fn default_tolerances_stop_by_scipy_rules() {
    // With SciPy's defaults the 2-D Rosenbrock stops by the gradient or relative-reduction rule
    // close to the minimiser, well before the caps.
    let r = minimize(rosenbrock, &[-1.2, 1.0], &LbfgsSettings::default()).unwrap();
    assert!(
        matches!(
            r.stop,
            StopReason::GradientTolerance | StopReason::RelativeReduction
        ),
        "{:?}",
        r.stop
    );
    assert!((r.x[0] - 1.0).abs() < 1e-3 && (r.x[1] - 1.0).abs() < 1e-3);
    // Iteration cap is honoured and reported.
    let capped = minimize(
        rosenbrock,
        &[-1.2, 1.0],
        &LbfgsSettings {
            max_iterations: 3,
            ..tight()
        },
    )
    .unwrap();
    assert_eq!(
        (capped.stop, capped.iterations),
        (StopReason::MaxIterations, 3)
    );
}

#[test]
fn convex_quadratic_in_few_iterations() {
    // f = ½ xᵀAx − bᵀx with A = diag(1..8) plus a coupling; minimiser x* = A⁻¹b.
    let n = 8;
    let a = |i: usize, j: usize| -> f64 {
        if i == j {
            (i + 1) as f64
        } else if i.abs_diff(j) == 1 {
            0.3
        } else {
            0.0
        }
    };
    let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.7).sin()).collect();
    let quad = |x: &[f64]| -> Result<(f64, Vec<f64>), Infallible> {
        let ax: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| a(i, j) * x[j]).sum())
            .collect();
        let f = 0.5 * x.iter().zip(&ax).map(|(p, q)| p * q).sum::<f64>()
            - x.iter().zip(&b).map(|(p, q)| p * q).sum::<f64>();
        Ok((f, ax.iter().zip(&b).map(|(p, q)| p - q).collect()))
    };
    // The gradient tolerance is 1e-8, not 1e-10: at |g| ≈ 1e-8 a step changes f by ~|g|²/λ, below
    // f's rounding, so no method can certify a smaller gradient through f.
    let settings = LbfgsSettings {
        gradient_tolerance: 1e-8,
        ..tight()
    };
    let r = minimize(quad, &vec![0.0; n], &settings).unwrap();
    assert_eq!(r.stop, StopReason::GradientTolerance, "{r:?}");
    assert!(r.iterations <= 20, "{} iterations", r.iterations);
    // Check A x* = b.
    for (i, bi) in b.iter().enumerate() {
        let ax: f64 = (0..n).map(|j| a(i, j) * r.x[j]).sum();
        assert!((ax - bi).abs() < 1e-8);
    }
}

#[test]
fn nan_beyond_the_domain_is_a_too_long_step() {
    // f(x) = Σ −x_i − ln(2 − x_i): NaN for x_i ≥ 2 (ln of a non-positive number), minimum at x = 1.
    // From x = −10 the curvature is tiny, so the secant step jumps far past x = 2.
    let nan_hits = Cell::new(0usize);
    let f = |x: &[f64]| -> Result<(f64, Vec<f64>), Infallible> {
        let mut v = 0.0;
        let mut g = Vec::with_capacity(x.len());
        for &xi in x {
            v += -xi - (2.0 - xi).ln();
            g.push(-1.0 + 1.0 / (2.0 - xi));
        }
        if !v.is_finite() || v.is_nan() {
            nan_hits.set(nan_hits.get() + 1);
        }
        Ok((v, g))
    };
    let r = minimize(f, &[-10.0; 5], &tight()).unwrap();
    assert!(nan_hits.get() > 0, "the test must exercise a NaN trial");
    assert_eq!(r.stop, StopReason::GradientTolerance, "{r:?}");
    for xi in &r.x {
        assert!((xi - 1.0).abs() < 1e-8, "{:?}", r.x);
    }
    assert!(r.value.is_finite());
}

#[test]
fn non_finite_start_is_an_error() {
    let f = |_: &[f64]| -> Result<(f64, Vec<f64>), Infallible> { Ok((f64::NAN, vec![0.0])) };
    assert!(matches!(
        minimize(f, &[0.0], &LbfgsSettings::default()),
        Err(LbfgsError::NonFiniteStart { .. })
    ));
}

#[test]
fn objective_error_aborts_with_that_error() {
    let calls = Cell::new(0);
    let f = |x: &[f64]| -> Result<(f64, Vec<f64>), String> {
        calls.set(calls.get() + 1);
        if calls.get() == 4 {
            return Err("boom at call 4".to_string());
        }
        Ok(rosenbrock(x).unwrap())
    };
    let err = minimize(f, &[-1.2, 1.0], &tight()).unwrap_err();
    assert_eq!(err, LbfgsError::Objective("boom at call 4".to_string()));
    assert_eq!(calls.get(), 4, "no evaluation after the error");
    // A gradient of the wrong length is reported, not indexed out of bounds.
    let short = |_: &[f64]| -> Result<(f64, Vec<f64>), Infallible> { Ok((1.0, vec![0.0])) };
    assert!(matches!(
        minimize(short, &[0.0, 0.0], &LbfgsSettings::default()),
        Err(LbfgsError::GradientLength {
            expected: 2,
            got: 1
        })
    ));
}

#[test]
fn flat_start_stops_at_once() {
    let f = |x: &[f64]| -> Result<(f64, Vec<f64>), Infallible> {
        Ok((
            x.iter().map(|v| (v - 2.0).powi(2)).sum(),
            x.iter().map(|v| 2.0 * (v - 2.0)).collect(),
        ))
    };
    let r = minimize(f, &[2.0, 2.0], &LbfgsSettings::default()).unwrap();
    assert_eq!(
        (r.stop, r.iterations, r.evaluations),
        (StopReason::GradientTolerance, 0, 1)
    );
}

/// On the 10-D Rosenbrock function the stall rule stops the
/// search once a window of iterations gains less than the stated amount, and not before; the
/// trace holds f at the start and after every iteration, never rising.
#[test]
fn the_stall_rule_stops_on_a_window_that_gained_too_little() {
    let x0: Vec<f64> = (0..10)
        .map(|i| if i % 2 == 0 { -1.2 } else { 1.0 })
        .collect();
    let full = minimize(rosenbrock, &x0, &tight()).unwrap();
    assert_eq!(full.trace.len(), full.iterations + 1);
    assert!(
        full.trace.windows(2).all(|w| w[1] <= w[0]),
        "{:?}",
        full.trace
    );
    assert_eq!(*full.trace.last().unwrap(), full.value);

    let rule = occam::gp::lbfgs::StallRule {
        window: 5,
        gain: 1e-3,
    };
    let stalled = minimize(
        rosenbrock,
        &x0,
        &LbfgsSettings {
            stall: Some(rule),
            ..tight()
        },
    )
    .unwrap();
    assert_eq!(stalled.stop, StopReason::Stalled, "{stalled:?}");
    assert!(stalled.iterations < full.iterations);
    // It stopped at the first iteration whose window gained less than the rule's amount, and
    // followed the same path as the full search until then.
    let k = stalled.iterations;
    assert!(k >= rule.window);
    assert_eq!(stalled.trace[..], full.trace[..=k]);
    assert!(stalled.trace[k - rule.window] - stalled.trace[k] < rule.gain);
    for j in rule.window..k {
        assert!(
            full.trace[j - rule.window] - full.trace[j] >= rule.gain,
            "iteration {j} had stalled already"
        );
    }
    assert!(!StopReason::Stalled.hit_cap() && StopReason::MaxIterations.hit_cap());
}
