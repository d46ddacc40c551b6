use super::*;
use crate::discovery::error::DiscoveryError;
use crate::discovery::exact::CacheKey;
use crate::discovery::family::FamilyScore;

fn score(value: f64) -> Result<FamilyScore, DiscoveryError> {
    Ok(FamilyScore::made_up(value, value - 10.0))
}

#[test]
fn a_family_is_raised_to_its_best_subset_and_extra_candidates_join() {
    let settings = ExactSettings::default();
    let mut cache = ScoreCache::new(CacheKey::new("t", settings.family, 0));
    // Child 2 with candidates 0, 1: ∅ −10, {0} −4, {1} −8, {0,1} −6 (a fit that fell short
    // of {0}): the table gives {0,1} the value of {0}, and no family exceeds its own fit
    // otherwise.
    for (parents, v) in [
        (vec![], -10.0),
        (vec![0], -4.0),
        (vec![1], -8.0),
        (vec![0, 1], -6.0),
    ] {
        cache.insert((2, parents), score(v));
    }
    cache.insert((2, vec![0, 1]), score(-6.0));
    let k = Knowledge::none(3);
    let plan = FamilyPlan::new(vec![vec![], vec![], vec![0, 1]], 2, &k).unwrap();
    let table = plan.table(&cache, &plan.admitted(&cache, None));
    assert_eq!(
        table[2],
        vec![(0b000, -10.0), (0b001, -4.0), (0b010, -8.0), (0b011, -4.0)]
    );
    // A failed family with no scored subset is left out; with a scored subset, the subset's
    // value stands (it is the same model with the parent switched off).
    cache.insert((1, vec![]), Err(DiscoveryError::AllFitsFailed { fits: 1 }));
    let plan = FamilyPlan::new(vec![vec![], vec![], vec![0, 1]], 2, &k).unwrap();
    assert!(plan.table(&cache, &plan.admitted(&cache, None))[1].is_empty());
    cache.insert(
        (2, vec![0, 1]),
        Err(DiscoveryError::AllFitsFailed { fits: 1 }),
    );
    assert_eq!(
        plan.table(&cache, &plan.admitted(&cache, None))[2],
        vec![(0b000, -10.0), (0b001, -4.0), (0b010, -8.0), (0b011, -4.0)],
        "a failed family stands at its best subset's value"
    );

    // Extra candidates come first and are kept beyond P = 1 (up to P + MAX_EXTRA_BEYOND_P).
    let mut s = settings;
    s.candidates = 1;
    let run = ExactRun::with_extra_candidates(
        3,
        Knowledge::none(3),
        s,
        ScoreCache::new(cache.key.clone()),
        vec![vec![1, 2], vec![], vec![]],
    )
    .unwrap();
    let c = run.candidates();
    assert_eq!(c[0], vec![1, 2]);
    // Without screened gains nothing else is ranked yet.
    assert!(c[1].is_empty());
    assert_eq!(binomial(5, 2), 10);
    assert_eq!(binomial(2, 3), 0);
}

#[test]
fn pruning_admits_a_family_only_when_every_smaller_subset_gained() {
    let settings = ExactSettings::default();
    let mut cache = ScoreCache::new(CacheKey::new("prune", settings.family, 0));
    // Child 3 with candidates 0, 1, 2: {0} gains 5 nats over ∅, {1} loses 4, {2} loses 0.5.
    for (parents, v) in [
        (vec![], -10.0),
        (vec![0], -5.0),
        (vec![1], -14.0),
        (vec![2], -10.5),
    ] {
        cache.insert((3, parents), score(v));
    }
    let k = Knowledge::none(4);
    let plan = FamilyPlan::new(vec![vec![], vec![], vec![], vec![0, 1, 2]], 3, &k).unwrap();
    let masks = |c: &ScoreCache, delta| plan.admitted(c, delta)[3].clone();
    // Without pruning every family is admitted.
    assert_eq!(masks(&cache, None).len(), 8);
    // δ = 1: of the pairs only {0, 2} (both its subsets gained at least −1); nothing larger
    // is decided before it is scored.
    assert_eq!(
        masks(&cache, Some(1.0)),
        vec![0, 0b001, 0b010, 0b100, 0b101]
    );
    // δ = 5 admits every pair, and the triple once every pair is scored and gained.
    assert_eq!(masks(&cache, Some(5.0)).len(), 7);
    cache.insert((3, vec![0, 2]), score(-4.0));
    cache.insert((3, vec![0, 1]), score(-5.5));
    cache.insert((3, vec![1, 2]), score(-10.0));
    assert_eq!(masks(&cache, Some(5.0)).len(), 8);
    // {1, 2} gained 0.5 over {2}; {0, 1} lost 0.5 against {0}: at δ = 0.4 the triple waits
    // on a pair that is not admitted, so it is left out.
    assert!(!masks(&cache, Some(0.4)).contains(&0b111));
    // The table reads only admitted families: at δ = 1, {0, 1} (although cached) is not.
    let admitted = plan.admitted(&cache, Some(1.0));
    let table = plan.table(&cache, &admitted);
    assert_eq!(
        table[3],
        vec![
            (0, -10.0),
            (0b001, -5.0),
            (0b010, -10.0),
            (0b100, -10.0),
            (0b101, -4.0)
        ]
    );
}

#[test]
fn a_hub_of_extra_candidates_is_cut_to_p_plus_two_keeping_the_strongest() {
    let settings = ExactSettings {
        candidates: 1,
        ..ExactSettings::default()
    };
    let mut cache = ScoreCache::new(CacheKey::new("hub", settings.family, 0));
    let k = Knowledge::none(7);
    for key in first_stage_families(&k) {
        // For every child, parent j gains j nats: 6 is the strongest.
        let gain = key.1.first().map_or(0.0, |&j| j as f64);
        cache.insert(key, score(-20.0 + gain));
    }
    let run = ExactRun::with_extra_candidates(
        7,
        k,
        settings,
        cache,
        vec![
            vec![1, 2, 3, 4, 5, 6],
            vec![],
            vec![],
            vec![],
            vec![],
            vec![],
            vec![],
        ],
    )
    .unwrap();
    let c = run.candidates();
    assert_eq!(
        c[0],
        vec![4, 5, 6],
        "P + {MAX_EXTRA_BEYOND_P}, strongest gains kept"
    );
    assert_eq!(c[1], vec![6], "no extras: P by gain");
}

/// The settings a search uses: more rows and a stronger automatic prior for an exact search
/// over a few variables, no widening for a hybrid one, a prior set by hand kept as set.
#[test]
fn a_search_gets_its_rows_prior_and_widening_for_its_size_and_method() {
    let x = ExactSettings::default();
    let q = |s: &ExactSettings| s.prior.edge_probability();
    let (rows, small) = x.for_search(3, 200, true);
    assert_eq!(
        (rows, q(&small), small.widen_saturated),
        (DEFAULT_FEW_ROWS, Some(0.05), 2)
    );
    let (rows, large) = x.for_search(10, 200, true);
    assert_eq!(
        (rows, q(&large), large.widen_saturated),
        (200, Some(0.2), 2)
    );
    let (rows, hybrid) = x.for_search(3, 200, false);
    assert_eq!(
        (rows, q(&hybrid), hybrid.widen_saturated),
        (200, Some(0.2), 0)
    );
    assert!(!matches!(small.prior, GraphPrior::Auto), "resolved");
    let by_hand = ExactSettings {
        prior: GraphPrior::Uniform,
        few_rows: None,
        ..x
    };
    let (rows, kept) = by_hand.for_search(3, 200, true);
    assert_eq!((rows, kept.prior), (200, GraphPrior::Uniform));
}

/// A variable whose best family holds all its candidates but one gains the next parent by
/// one-parent gain, up to `widen_saturated` times; the families with it are scored, and a
/// variable whose best family is small gains none.
#[test]
fn a_saturated_variable_gains_candidates_up_to_the_limit() {
    let run_with = |widen: usize| {
        let settings = ExactSettings {
            max_parents: 2,
            candidates: 2,
            prior: GraphPrior::Uniform,
            widen_saturated: widen,
            ..ExactSettings::default()
        };
        let k = Knowledge::none(5);
        // Variable 0: parent j adds j nats, so its best family is always the two strongest
        // of its candidates. Every other variable loses 1 nat per parent.
        let value = |key: &FamilyKey| {
            if key.0 == 0 {
                -20.0 + key.1.iter().map(|&j| j as f64).sum::<f64>()
            } else {
                -20.0 - key.1.len() as f64
            }
        };
        let mut run = ExactRun::new(
            5,
            k,
            settings,
            ScoreCache::new(CacheKey::new("w", settings.family, 0)),
        )
        .unwrap();
        let mut fitted = Vec::new();
        while run.stage() != ExactStage::Scored {
            for key in run.todo().to_vec() {
                run.cache_mut().insert(key.clone(), score(value(&key)));
                fitted.push(key);
            }
            run.advance().unwrap();
        }
        (run.outcome().unwrap().candidates, fitted)
    };
    let (plain, plain_fits) = run_with(0);
    assert_eq!(plain[0], vec![3, 4]);
    let (wide, wide_fits) = run_with(2);
    // {3, 4} saturates the first two candidates, then the first three: 2 and 1 join.
    assert_eq!(wide[0], vec![1, 2, 3, 4]);
    assert_eq!(
        wide[1..],
        plain[1..],
        "best families of no parent saturate nothing"
    );
    for pair in [[1, 2], [1, 3], [1, 4], [2, 3], [2, 4]] {
        assert!(wide_fits.contains(&(0, pair.to_vec())), "{pair:?}");
    }
    assert_eq!(wide_fits.len(), plain_fits.len() + 5);
    // At most P + widen_saturated, even when every round saturates again.
    let (one, _) = run_with(1);
    assert_eq!(one[0], vec![2, 3, 4]);
}

#[test]
fn extra_candidates_join_the_plan_when_screening_is_already_cached() {
    // Every screening family is cached, so screening ends inside the constructor: the extra
    // candidates must already be in place then (a hybrid rerun once failed here).
    let settings = ExactSettings {
        candidates: 1,
        ..ExactSettings::default()
    };
    let mut cache = ScoreCache::new(CacheKey::new("t", settings.family, 0));
    let k = Knowledge::none(4);
    for key in first_stage_families(&k) {
        // Variable 0's best single parent is 1; 3 gains least.
        let gain = match key.1.first() {
            None => 0.0,
            Some(&j) => 4.0 - j as f64,
        };
        cache.insert(key, score(-10.0 + gain));
    }
    let run = ExactRun::with_extra_candidates(
        4,
        k,
        settings,
        cache,
        vec![vec![3], vec![], vec![], vec![]],
    )
    .unwrap();
    assert_ne!(run.stage(), ExactStage::Screening);
    let plan = run.plan.as_ref().expect("screening is over");
    let keys = plan.keys();
    assert!(keys.contains(&(0, vec![3])));
    assert!(
        !keys.contains(&(0, vec![1])),
        "P = 1 leaves room for the extra parent only"
    );
}

/// With warm-started family fits the run hands out one family size at a time, smallest
/// first, while its progress counts every planned family; independent fits hand out all,
/// largest first.
#[test]
fn warm_started_fits_are_handed_out_a_size_at_a_time() {
    use crate::discovery::family::{ColdFits, FamilyFitScheme};
    let d = 5;
    let k = Knowledge::none(d);
    let mut settings = ExactSettings {
        candidates: 3,
        max_parents: 3,
        ..ExactSettings::default()
    };
    settings.family.scheme = FamilyFitScheme::Warm {
        cold: ColdFits::Off,
    };
    let screened = |settings: &ExactSettings| {
        let mut cache = ScoreCache::new(CacheKey::new("w", settings.family, 0));
        for key in first_stage_families(&k) {
            let gain = key.1.first().map_or(0.0, |&j| 1.0 + j as f64);
            cache.insert(key, score(-10.0 + gain));
        }
        ExactRun::new(d, k.clone(), *settings, cache).unwrap()
    };
    let mut run = screened(&settings);
    assert_eq!(run.stage(), ExactStage::Families);
    // 3 candidates per variable: C(3,2) = 3 pairs and 1 triple each.
    assert_eq!(run.stage_progress(), (0, 4 * d));
    for size in [2, 3] {
        let ready = run.todo().to_vec();
        assert_eq!(ready.len(), if size == 2 { 3 * d } else { d });
        assert!(ready.iter().all(|f| f.1.len() == size), "{ready:?}");
        for key in ready {
            run.cache_mut().insert(key, score(-5.0));
        }
        run.advance().unwrap();
    }
    assert_eq!(run.stage(), ExactStage::Scored);
    assert_eq!(run.stage_progress(), (4 * d, 4 * d));

    settings.family.scheme = FamilyFitScheme::Independent;
    let run = screened(&settings);
    assert_eq!(run.todo().len(), 4 * d);
    assert_eq!(run.todo()[0].1.len(), 3, "largest first");
}

/// The downward repair: a superset's best fit with one parent switched off is a point of the
/// subset's model, so the table raises the subset to it (and the raise to the best subset
/// then carries it up again).
#[test]
fn a_subset_is_raised_to_its_supersets_fit_with_the_parent_switched_off() {
    let k4 = || Knowledge::none(4);
    let settings = ExactSettings::default();
    let mut cache = ScoreCache::new(CacheKey::new("repair", settings.family, 0));
    let with_off = |value: f64, off: Vec<(u32, f64)>| {
        score(value).map(|s| FamilyScore {
            switched_off: off,
            ..s
        })
    };
    cache.insert((2, vec![]), score(-10.0));
    cache.insert((2, vec![0]), score(-4.0));
    cache.insert((2, vec![1]), score(-8.0));
    // {0, 1} at −3; with 0 off (position 1 kept) it is a point of {1} at −2.5, with 1 off
    // (position 0 kept) a point of {0} at −3.2 (above {0}'s own −4); with both off, of ∅
    // at −11 (below ∅'s own −10).
    cache.insert(
        (2, vec![0, 1]),
        with_off(-3.0, vec![(0b10, -2.5), (0b01, -3.2), (0b00, -11.0)]),
    );
    let k = Knowledge::none(3);
    let plan = FamilyPlan::new(vec![vec![], vec![], vec![0, 1]], 2, &k).unwrap();
    let table = plan.table(&cache, &plan.admitted(&cache, None));
    assert_eq!(
        table[2],
        vec![(0b000, -10.0), (0b001, -3.2), (0b010, -2.5), (0b011, -2.5)]
    );
    // Two levels down: {0, 1, 2} of child 3 with 1 and 2 off is a point of {0}.
    for (parents, v) in [
        (vec![], -10.0),
        (vec![0], -6.0),
        (vec![1], -7.0),
        (vec![2], -7.0),
    ] {
        cache.insert((3, parents), score(v));
    }
    for parents in [vec![0, 1], vec![0, 2], vec![1, 2]] {
        cache.insert((3, parents), score(-5.5));
    }
    cache.insert((3, vec![0, 1, 2]), with_off(-2.0, vec![(0b001, -4.0)]));
    let plan3 = FamilyPlan::new(vec![vec![], vec![], vec![], vec![0, 1, 2]], 3, &k4()).unwrap();
    let table = plan3.table(&cache, &plan3.admitted(&cache, None));
    let of = |m: Mask| table[3].iter().find(|e| e.0 == m).unwrap().1;
    assert_eq!(of(0b001), -4.0);
    assert_eq!(of(0b011), -4.0, "raised to the repaired {{0}}");
    assert_eq!(of(0b110), -5.5);
    // A repair lower than the subset's own value changes nothing.
    cache.insert((2, vec![0, 1]), with_off(-3.0, vec![(0b01, -9.0)]));
    let table = plan.table(&cache, &plan.admitted(&cache, None));
    assert_eq!(
        table[2],
        vec![(0b000, -10.0), (0b001, -4.0), (0b010, -8.0), (0b011, -3.0)]
    );
}
