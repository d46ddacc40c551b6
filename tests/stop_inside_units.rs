//! Issue 12, item 6: a stop request is answered inside a long unit of work (a fit of hundreds of
//! bound evaluations), and nothing a cut-short computation produced is kept as if it were done:
//! no half-optimised fit, no family score, no failure or fault in the run record.
//!
//! The stop is raised from the heartbeat hook ([`occam::base::heartbeat`]), which the bound evaluations
//! call: the first evaluation raises it, so the test knows the request arrived mid-unit without
//! depending on timing.

use std::cell::Cell;
use std::rc::Rc;

use nalgebra::{DMatrix, DVector};
use occam::base::heartbeat::{self, StopFlag};
use occam::data::Dataset;
use occam::discovery::exact::{CacheKey, ScoreCache};
use occam::discovery::family::{family_score, FamilyScoreSettings};
use occam::discovery::knowledge::Knowledge;
use occam::discovery::settings::{Method, Preset, SearchSettings};
use occam::engine::fit_families;
use occam::engine::{Session, Status};
use occam::gp::collapsed::{CollapsedModel, FitError, FitSettings};
use occam::runner::{CpuBackend, Pool};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;

/// A 3-variable chain a → b → c with nonlinear mechanisms, `n` rows.
fn chain(n: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut noise = || rng.sample::<f64, _>(StandardNormal);
    let a: Vec<f64> = (0..n).map(|_| noise()).collect();
    let b: Vec<f64> = a.iter().map(|&x| (1.5 * x).sin() + 0.3 * noise()).collect();
    let c: Vec<f64> = b.iter().map(|&x| x * x + 0.3 * noise()).collect();
    (a, b, c)
}

/// Installs a hook on this thread that raises `flag` at the first beat and counts the beats; the
/// guard removes it.
struct RaiseAtFirstBeat {
    beats: Rc<Cell<usize>>,
}

impl RaiseAtFirstBeat {
    fn install(flag: &StopFlag) -> Self {
        let beats = Rc::new(Cell::new(0));
        let (b, f) = (beats.clone(), flag.clone());
        heartbeat::install(Some(Box::new(move || {
            b.set(b.get() + 1);
            f.raise();
        })));
        Self { beats }
    }
}

impl Drop for RaiseAtFirstBeat {
    fn drop(&mut self) {
        heartbeat::install(None);
    }
}

#[test]
fn a_fit_stopped_at_its_first_evaluation_returns_interrupted_not_a_model() {
    let (a, b, _) = chain(80);
    let model =
        CollapsedModel::new(DMatrix::from_column_slice(80, 1, &a), DVector::from_vec(b)).unwrap();
    // Through Adam, and with no Adam steps straight into L-BFGS's first evaluation.
    for adam_steps in [200, 0] {
        let settings = FitSettings {
            inducing_points: 10,
            adam_steps,
            ..FitSettings::default()
        };
        let flag = StopFlag::new();
        let fit = {
            let _hook = RaiseAtFirstBeat::install(&flag);
            let _watch = heartbeat::watch(Some(flag.clone()));
            model.fit(&settings, &mut ChaCha8Rng::seed_from_u64(1))
        };
        assert_eq!(
            fit.unwrap_err(),
            FitError::Interrupted,
            "adam_steps {adam_steps}"
        );
        assert!(flag.is_raised());
        // Unwatched, the same fit runs to its end.
        let fit = model.fit(&settings, &mut ChaCha8Rng::seed_from_u64(1));
        assert!(fit.is_ok(), "{fit:?}");
    }
}

/// A fit the stop cut short must not enter the score cache: a later run would take a half-done
/// optimisation's bound for the family's evidence.
#[test]
fn families_cut_short_are_not_cached_and_the_rest_are_exact() {
    let (a, b, c) = chain(60);
    let data = DMatrix::from_fn(60, 3, |r, k| [&a, &b, &c][k][r]);
    let settings = FamilyScoreSettings {
        restarts: 1,
        adam_steps: 50,
        lbfgs_iterations: 30,
        ..FamilyScoreSettings::with_inducing(8)
    };
    let todo = vec![(1, vec![0]), (2, vec![1]), (0, vec![])];
    let key = CacheKey::new("chain", settings, 3);

    let flag = StopFlag::new();
    let mut cut = ScoreCache::new(key.clone());
    {
        let hook = RaiseAtFirstBeat::install(&flag);
        let _watch = heartbeat::watch(Some(flag.clone()));
        fit_families(
            &data,
            &todo,
            &mut cut,
            &CpuBackend::new(Pool::new(1).unwrap()),
            |_, _| {},
            || false,
        );
        assert!(hook.beats.get() >= 1, "the fits reached the bound");
    }
    assert_eq!(
        cut.len(),
        0,
        "the family being fitted at the stop is not kept"
    );

    let mut whole = ScoreCache::new(key);
    fit_families(
        &data,
        &todo,
        &mut whole,
        &CpuBackend::new(Pool::new(1).unwrap()),
        |_, _| {},
        || false,
    );
    assert_eq!(whole.len(), todo.len());
    for family in &todo {
        let direct = family_score(&data, family.0, &family.1, &settings, 3, None).unwrap();
        let cached = whole.get(family).unwrap().as_ref().unwrap();
        assert_eq!(cached.value, direct.value, "{family:?}");
    }
}

fn chain_dataset(n: usize) -> Dataset {
    let (a, b, c) = chain(n);
    Dataset::new(vec!["a".into(), "b".into(), "c".into()], vec![a, b, c])
}

/// The session's own flag stops it inside its first unit (a variable's starting fit), and the
/// record says "stopped", with no failed restart, no fault and no family score from the cut fit.
#[test]
fn a_session_stops_inside_a_unit_and_records_no_failure_or_fault() {
    for method in [Method::Cgp, Method::Exact] {
        let settings = SearchSettings {
            max_rows: 60,
            inducing_points: 8,
            restarts: 2,
            threads: 1,
            method,
            ..Preset::Interactive.settings()
        };
        let dataset = chain_dataset(60);
        let mut session = Session::new(
            &dataset,
            Knowledge::none(3),
            settings.check().unwrap(),
            7,
            None,
        )
        .unwrap();
        let flag = session.stop_flag();
        let snapshot = {
            let hook = RaiseAtFirstBeat::install(&flag);
            // A budget far beyond the whole run: only the stop can end this step early.
            let s = session.step(1e9);
            assert_eq!(hook.beats.get(), 1, "{method:?}: one beat, then the stop");
            s
        };
        assert!(session.is_finished(), "{method:?}");
        assert_eq!(snapshot.status, Status::Stopped, "{method:?}");
        let result = session.result();
        assert_eq!(result.status, Status::Stopped, "{method:?}");
        assert!(result.faults.is_empty(), "{method:?}: {:?}", result.faults);
        assert!(
            result.failures.iter().all(|f| f.contains("stopped before")),
            "{method:?}: only the stop is reported: {:?}",
            result.failures
        );
        assert_eq!(session.score_cache().len(), 0, "{method:?}");
    }
}
