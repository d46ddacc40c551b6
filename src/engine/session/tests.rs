use super::*;

/// Before anything has been timed the progress claims nothing: 0 %, time left unknown (issue
/// 12: it used to read 100 % and "0 s left" until the first iteration).
#[test]
fn progress_claims_nothing_before_the_first_timing() {
    let n = 40;
    let a: Vec<f64> = (0..n).map(|k| (k as f64 * 0.7).sin()).collect();
    let b: Vec<f64> = a.iter().map(|x| x.tanh() + 0.1 * x.cos()).collect();
    let data = Dataset::new(vec!["a".into(), "b".into()], vec![a, b]);
    let mut settings = Preset::Interactive.settings();
    settings.restarts = 1;
    settings.inducing_points = 5;
    let settings = settings.check().unwrap();
    let mut session = Session::new(&data, Knowledge::none(2), settings, 0, None).unwrap();
    let first = session.snapshot();
    assert_eq!(first.status, Status::Running);
    assert_eq!(first.remaining_seconds, None);
    assert_eq!(first.progress, 0.0);
    let mut timed = None;
    for _ in 0..200 {
        let snap = session.step(0.05);
        if snap.status != Status::Running {
            break;
        }
        assert!(snap.progress < 1.0, "100 % while still running");
        if let Some(left) = snap.remaining_seconds {
            timed = Some(left);
            break;
        }
    }
    assert!(
        timed.is_some_and(|s| s > 0.0),
        "an estimate once iterations are timed"
    );
}

/// Models too large for memory are refused before anything is allocated, with the sizes named.
#[test]
fn a_run_too_large_for_memory_is_refused_up_front() {
    let rows = 20_000;
    let columns: Vec<Vec<f64>> = (0..10)
        .map(|j| {
            (0..rows)
                .map(|n| ((n * (j + 3)) as f64 * 0.001).sin() + j as f64)
                .collect()
        })
        .collect();
    let names = (0..10).map(|j| format!("x{j}")).collect();
    let data = Dataset::new(names, columns);
    let mut settings = Preset::Interactive.settings();
    settings.max_rows = rows;
    settings.inducing_points = 10_000;
    settings.restarts = 1000;
    let checked = settings.clone().check().unwrap();
    let Err(err) = Session::new(&data, Knowledge::none(10), checked, 0, None) else {
        panic!("a run of 1000 restarts at M = 10 000 on 20 000 rows was accepted");
    };
    let text = err.to_string();
    assert!(matches!(err, SessionError::TooLarge { .. }), "{text}");
    assert!(
        text.contains("1000 restarts × 10 variables") && text.contains("GiB"),
        "{text}"
    );
    // The estimate grows with every size it names.
    let base = model_bytes(&settings, 10, rows);
    settings.restarts = 2;
    assert!(model_bytes(&settings, 10, rows) < base);
    let interactive = Preset::Interactive.settings();
    assert!(
        model_bytes(&interactive, 10, 200) < 1e7,
        "the default run is small"
    );
}

#[test]
fn thinning_keeps_an_even_spread_and_the_last() {
    let v: Vec<usize> = (0..10).collect();
    assert_eq!(thin(v.clone(), 20), v);
    assert_eq!(thin(v.clone(), 4), vec![0, 2, 5, 9]);
    let big: Vec<usize> = (0..5000).collect();
    let t = thin(big, 512);
    assert_eq!(t.len(), 512);
    assert_eq!((t[0], *t.last().unwrap()), (0, 4999));
    // Gaps are about n / max (10), the last at most twice that.
    assert!(t.windows(2).all(|w| w[1] > w[0] && w[1] - w[0] <= 20));
}
