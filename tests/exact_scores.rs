//! The local-score table of the exact search: every family fitted once, the same score on one
//! thread or several, a cache that round-trips through JSON and refuses other data or settings,
//! and the closed-form floor.

use nalgebra::DMatrix;
use occam::discovery::exact::{CacheKey, ScoreCache, FAMILY_SCORE_VERSION};
use occam::discovery::family::{family_score, FamilyKey, FamilyScoreSettings};
use occam::engine::fit_families;
use occam::runner::{CpuBackend, Pool};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use std::sync::atomic::{AtomicUsize, Ordering};

/// x → y (non-linear), z independent; 60 rows, standardised.
fn data() -> DMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let n = 60;
    let mut cols: Vec<Vec<f64>> = vec![Vec::new(); 3];
    for _ in 0..n {
        let x: f64 = rng.sample(StandardNormal);
        let e: f64 = rng.sample(StandardNormal);
        let z: f64 = rng.sample(StandardNormal);
        cols[0].push(x);
        cols[1].push((1.5 * x).sin() + 0.2 * e);
        cols[2].push(z);
    }
    for c in &mut cols {
        let m = c.iter().sum::<f64>() / n as f64;
        let s = (c.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
        c.iter_mut().for_each(|v| *v = (*v - m) / s);
    }
    DMatrix::from_fn(n, 3, |r, c| cols[c][r])
}

fn settings() -> FamilyScoreSettings {
    FamilyScoreSettings {
        restarts: 1,
        adam_steps: 40,
        lbfgs_iterations: 40,
        ..FamilyScoreSettings::with_inducing(8)
    }
}

fn key(settings: FamilyScoreSettings) -> CacheKey {
    CacheKey::new("test", settings, 3)
}

#[test]
fn families_are_fitted_once_and_the_same_on_any_number_of_threads() {
    let data = data();
    let wanted: Vec<FamilyKey> = vec![
        (1, vec![]),
        (1, vec![0]),
        (1, vec![0, 2]),
        (0, vec![1]),
        (1, vec![0]),
    ];
    let mut one = ScoreCache::new(key(settings()));
    let todo = one.missing(&wanted);
    assert_eq!(todo.len(), 4, "repeats are fitted once");
    let calls = AtomicUsize::new(0);
    fit_families(
        &data,
        &todo,
        &mut one,
        &CpuBackend::new(Pool::new(1).unwrap()),
        |_, _| {
            calls.fetch_add(1, Ordering::Relaxed);
        },
        || false,
    );
    assert_eq!(calls.load(Ordering::Relaxed), 4);
    assert_eq!(one.len(), 4);
    assert!(
        one.missing(&wanted).is_empty(),
        "a second pass fits nothing"
    );

    let mut two = ScoreCache::new(key(settings()));
    fit_families(
        &data,
        &todo,
        &mut two,
        &CpuBackend::new(Pool::new(2).unwrap()),
        |_, _| {},
        || false,
    );
    assert_eq!(one, two, "thread count must not change a score");

    // The cached value is the family's own score.
    let direct = family_score(&data, 1, &[0], &settings(), 3, None).unwrap();
    assert_eq!(one.get(&(1, vec![0])).unwrap().as_ref().unwrap(), &direct);
    // The true parent raises y's evidence.
    let fx = |k: &FamilyKey| one.get(k).unwrap().as_ref().unwrap().value;
    assert!(fx(&(1, vec![0])) > fx(&(1, vec![])) + 10.0);

    // A stop before the first family fits nothing.
    let mut stopped = ScoreCache::new(key(settings()));
    fit_families(
        &data,
        &todo,
        &mut stopped,
        &CpuBackend::new(Pool::new(2).unwrap()),
        |_, _| {},
        || true,
    );
    assert!(stopped.is_empty());
}

#[test]
fn the_cache_round_trips_and_refuses_other_settings_or_data() {
    let data = data();
    let mut cache = ScoreCache::new(key(settings()));
    fit_families(
        &data,
        &[(2, vec![0])],
        &mut cache,
        &CpuBackend::serial(),
        |_, _| {},
        || false,
    );
    let text = cache.to_json();
    assert_eq!(
        ScoreCache::from_json_for(&text, &key(settings())),
        Some(cache.clone())
    );
    // Each score says where it was computed; a score from before that was recorded reads as
    // unknown, not as the CPU's.
    assert_eq!(cache.work().families_on_cpu, 1);
    assert_eq!(cache.work().families_on_gpu, 0);
    assert_eq!(text.matches("\"computed_on\":\"cpu\"").count(), 1, "{text}");
    let unrecorded = text.replace(",\"computed_on\":\"cpu\"", "");
    let unknown = ScoreCache::from_json_for(&unrecorded, &key(settings())).unwrap();
    assert_eq!(unknown.len(), 1);
    assert_eq!(
        (
            unknown.work().families_on_cpu,
            unknown.work().families_on_gpu
        ),
        (0, 0)
    );
    let other = FamilyScoreSettings {
        inducing: 9,
        ..settings()
    };
    assert_eq!(ScoreCache::from_json_for(&text, &key(other)), None);
    let mut other_data = key(settings());
    other_data.data = "other".into();
    assert_eq!(ScoreCache::from_json_for(&text, &other_data), None);
    // A cache written by older fitting code (no version, or another one) is refitted, not mixed in.
    let mut older: serde_json::Value = serde_json::from_str(&text).unwrap();
    older["key"].as_object_mut().unwrap().remove("version");
    assert_eq!(
        ScoreCache::from_json_for(&older.to_string(), &key(settings())),
        None
    );
    older["key"]["version"] = (FAMILY_SCORE_VERSION + 1).into();
    assert_eq!(
        ScoreCache::from_json_for(&older.to_string(), &key(settings())),
        None
    );
    assert_eq!(
        ScoreCache::from_json_for("not json", &key(settings())),
        None
    );
}

#[test]
fn a_score_is_never_below_its_closed_form_floor() {
    let data = data();
    // An independent column given an unrelated parent: the fit may not beat linear regression,
    // and the score then is the floor.
    for (child, parents) in [(2usize, vec![0usize]), (2, vec![]), (1, vec![0])] {
        let s = family_score(&data, child, &parents, &settings(), 1, None).unwrap();
        assert!(s.value >= s.floor);
        assert_eq!(s.value, s.best_bound.unwrap().max(s.floor));
    }
    assert!(FamilyScoreSettings {
        restarts: 0,
        ..settings()
    }
    .validate()
    .is_err());
}
