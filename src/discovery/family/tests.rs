use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

#[test]
fn a_family_seed_depends_on_the_family_and_the_run_seed_only() {
    assert_eq!(family_seed(3, 1, &[0, 2]), family_seed(3, 1, &[0, 2]));
    assert_ne!(family_seed(3, 1, &[0, 2]), family_seed(3, 1, &[0]));
    assert_ne!(family_seed(3, 1, &[0, 2]), family_seed(3, 0, &[1, 2]));
    assert_ne!(family_seed(3, 1, &[0, 2]), family_seed(4, 1, &[0, 2]));
}

/// The raced fit of a conditional runs its two latent starts for the probe's iterations and
/// continues one; a root runs once. The records add up to the work summed, the value is the
/// best bound or the floor, and refitting gives the same score bit for bit.
#[test]
fn a_raced_family_fit_records_its_runs_and_is_reproducible() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let n = 80;
    let mut draw = || -> f64 { StandardNormal.sample(&mut rng) };
    let x: Vec<f64> = (0..n).map(|_| draw()).collect();
    let y: Vec<f64> = x.iter().map(|&v| (1.5 * v).tanh() + 0.3 * draw()).collect();
    let data = DMatrix::from_fn(n, 2, |r, c| if c == 0 { x[r] } else { y[r] });
    let probe = 20;
    let settings = FamilyScoreSettings {
        lbfgs_iterations: 60,
        ..FamilyScoreSettings::raced(8, probe)
    };
    let score = family_score(&data, 1, &[0], &settings, 4, None).unwrap();
    let roles: Vec<FitRole> = score.fits.iter().map(|f| f.role).collect();
    assert_eq!(&roles[..2], &[FitRole::Probe, FitRole::Probe], "{roles:?}");
    assert_eq!(
        (score.fits[0].latent_start, score.fits[1].latent_start),
        (Some(LatentStart::Residual), Some(LatentStart::Off))
    );
    // The regression start ran once, for both lanes.
    assert!(score.fits[0].start.is_some() && score.fits[1].start.is_none());
    for f in &score.fits[..2] {
        assert!(f.lbfgs.unwrap().iterations <= probe);
    }
    assert!(roles.len() == 2 || roles[2] == FitRole::Continued);
    let best = score
        .fits
        .iter()
        .filter_map(|f| f.bound.as_ref().ok().copied())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(score.best_bound, Some(best));
    assert_eq!(score.value, best.max(score.floor));
    // Checkpoints every 10 iterations and at the end, non-decreasing.
    for f in &score.fits {
        assert!(f.checkpoints.windows(2).all(|w| w[1].1 >= w[0].1));
        assert_eq!(f.checkpoints.last().unwrap().0, f.lbfgs.unwrap().iterations);
    }
    let mut work = FitWork::default();
    work.add(&score, settings.adam_steps);
    assert_eq!(work.fits, score.fits.len());
    let c = work.lbfgs_stops;
    let counted = c.gradient + c.relative_reduction + c.stalled + c.line_search_failed + c.cap;
    let probes_at_length = score
        .fits
        .iter()
        .filter(|f| f.role == FitRole::Probe && f.lbfgs.is_some_and(|s| s.stop.hit_cap()))
        .count();
    assert_eq!(counted + probes_at_length, score.fits.len());
    assert_eq!(
        work.evaluations,
        score.fits.iter().map(FitRecord::evaluations).sum::<usize>()
    );
    assert_eq!(
        family_score(&data, 1, &[0], &settings, 4, None).unwrap(),
        score
    );

    // A root has one start (normal scores), run once.
    let root = family_score(&data, 0, &[], &settings, 4, None).unwrap();
    assert_eq!(root.fits.len(), 1);
    assert_eq!(root.fits[0].role, FitRole::Full);

    // The default: two independent fits, alternating the latent starts, each stopped by the
    // stall rule or a cap; without the rule the same fits only run longer.
    let stalled = FamilyScoreSettings::with_inducing(8);
    let new = family_score(&data, 1, &[0], &stalled, 4, None).unwrap();
    let old = family_score(
        &data,
        1,
        &[0],
        &FamilyScoreSettings::without_stall_rule(8),
        4,
        None,
    )
    .unwrap();
    for s in [&new, &old] {
        assert_eq!(s.fits.len(), 2);
        assert!(s
            .fits
            .iter()
            .all(|f| f.role == FitRole::Full && f.start.is_some()));
        assert_eq!(s.fits[1].latent_start, Some(LatentStart::Off));
    }
    for (a, b) in new.fits.iter().zip(&old.fits) {
        let (a, b) = (a.lbfgs.unwrap(), b.lbfgs.unwrap());
        assert!(a.iterations <= b.iterations);
        if a.stop == StopReason::Stalled {
            assert!(a.iterations < b.iterations);
        }
    }
}

#[test]
fn families_list_each_variable_with_its_sorted_parents() {
    let f = families(3, &[(2, 0), (1, 0), (0, 2)]);
    assert_eq!(f, vec![(0, vec![1, 2]), (1, vec![]), (2, vec![0])]);
}

/// On x → y with y = sin(2x) + noise, the DAG x → y has a higher evidence than the empty
/// graph, and a spurious extra parent (an independent column) does not raise it (it may tie: ARD
/// switches it off and F has no prior on θ); the value of
/// a family is the same however often it is computed.
#[test]
fn graph_evidence_prefers_the_true_parent_and_is_reproducible() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let n = 120;
    let mut draw = || -> f64 { StandardNormal.sample(&mut rng) };
    let x: Vec<f64> = (0..n).map(|_| draw()).collect();
    let z: Vec<f64> = (0..n).map(|_| draw()).collect();
    let y: Vec<f64> = x.iter().map(|&v| (2.0 * v).sin() + 0.2 * draw()).collect();
    let standard = |v: &[f64]| -> Vec<f64> {
        let m = v.iter().sum::<f64>() / n as f64;
        let s = (v.iter().map(|a| (a - m).powi(2)).sum::<f64>() / n as f64).sqrt();
        v.iter().map(|a| (a - m) / s).collect()
    };
    let cols = [standard(&x), standard(&y), standard(&z)];
    let data = DMatrix::from_fn(n, 3, |r, c| cols[c][r]);
    let mut cache = FamilyCache::default();
    let graphs: [&[(usize, usize)]; 3] = [&[], &[(0, 1)], &[(0, 1), (2, 1)]];
    for edges in graphs {
        for key in families(3, edges) {
            if cache.get(&key).is_none() {
                let v = family_evidence(&data, key.0, &key.1, 10, 9);
                cache.insert(key, v.map_err(DiscoveryError::from));
            }
        }
    }
    let score = |e: &[(usize, usize)]| cache.graph_evidence(3, e).unwrap().unwrap();
    let (empty, truth, extra) = (score(graphs[0]), score(graphs[1]), score(graphs[2]));
    assert!(truth > empty + 20.0, "x → y {truth} vs empty {empty}");
    // ARD can switch z off, so the extra parent may tie but must not gain.
    assert!(extra < truth + 0.01, "x → y {truth} vs with z → y {extra}");
    assert_eq!(
        family_evidence(&data, 1, &[0], 10, 9).unwrap(),
        cache.get(&(1, vec![0])).unwrap().clone().unwrap()
    );
    assert!(cache.graph_evidence(3, &[(1, 2)]).is_none());
}

/// A warm-scheme family of two parents runs its cold fit and a fit from its subset's
/// parameters (kept by the subset's score), and refitting gives the same score bit for bit;
/// without a subset fit it runs both cold fits; one- and no-parent families run both cold
/// fits and keep their best parameters.
#[test]
fn a_warm_family_fit_continues_its_best_subset() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let n = 60;
    let mut draw = || -> f64 { StandardNormal.sample(&mut rng) };
    let a: Vec<f64> = (0..n).map(|_| draw()).collect();
    let b: Vec<f64> = (0..n).map(|_| draw()).collect();
    let c: Vec<f64> = (0..n)
        .map(|r| (1.2 * a[r]).sin() + 0.6 * b[r] + 0.2 * draw())
        .collect();
    let data = DMatrix::from_fn(n, 3, |r, k| [a[r], b[r], c[r]][k]);
    let settings = FamilyScoreSettings {
        adam_steps: 30,
        lbfgs_iterations: 40,
        ..FamilyScoreSettings::warm(6, ColdFits::Off)
    };
    let mut scores = BTreeMap::new();
    for parents in [vec![0], vec![1]] {
        let s = family_score(&data, 2, &parents, &settings, 7, None).unwrap();
        assert_eq!(s.fits.len(), 2);
        assert!(s.best_params.is_some());
        scores.insert((2, parents), s);
    }
    let key = (2, vec![0, 1]);
    let warm = WarmStart::best_subset(&key, |k| scores.get(k)).unwrap();
    let best_single = scores
        .values()
        .map(|s| s.best_bound.unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    assert_eq!(
        scores[&(2, warm.parents.clone())].best_bound,
        Some(best_single)
    );
    let s = family_score(&data, 2, &[0, 1], &settings, 7, Some(&warm)).unwrap();
    let roles: Vec<(FitRole, Option<LatentStart>)> =
        s.fits.iter().map(|f| (f.role, f.latent_start)).collect();
    assert_eq!(
        roles,
        vec![
            (FitRole::Full, Some(LatentStart::Off)),
            (FitRole::Warm, None)
        ]
    );
    let again = family_score(&data, 2, &[0, 1], &settings, 7, Some(&warm)).unwrap();
    assert_eq!(s, again);
    // The best fit with each proper subset of parents switched off: {1}, {0} and ∅ kept.
    let kept: Vec<u32> = s.switched_off.iter().map(|e| e.0).collect();
    assert_eq!(kept, vec![0b00, 0b01, 0b10]);
    assert!(s.switched_off.iter().all(|e| e.1.is_finite()));
    // No subset fit to start from: both cold fits.
    let cold = family_score(&data, 2, &[0, 1], &settings, 7, None).unwrap();
    assert!(cold.fits.iter().all(|f| f.role == FitRole::Full));
    assert_eq!(cold.fits.len(), 2);
    // A few variables get the cold fits beside the warm one; more get the warm fit alone.
    let default = FamilyScoreSettings::with_inducing(5);
    assert_eq!(
        default.for_variables(WARM_WITH_COLD_FITS_UP_TO).scheme,
        FamilyFitScheme::Warm {
            cold: ColdFits::Both
        }
    );
    assert_eq!(default.for_variables(10), default);
    let independent = FamilyScoreSettings::independent(5);
    assert_eq!(independent.for_variables(3), independent);
    // A warm fit that fails (here: a start with a NaN in q(w)) is not the last word: with
    // no cold fit beside it, both cold fits run after it.
    let mut broken = warm.clone();
    broken.params.latent.as_mut().unwrap().mean[0] = f64::NAN;
    let warm_only = FamilyScoreSettings {
        scheme: FamilyFitScheme::Warm {
            cold: ColdFits::Neither,
        },
        ..settings
    };
    let s = family_score(&data, 2, &[0, 1], &warm_only, 7, Some(&broken)).unwrap();
    let roles: Vec<FitRole> = s.fits.iter().map(|f| f.role).collect();
    assert_eq!(roles, vec![FitRole::Warm, FitRole::Full, FitRole::Full]);
    assert!(s.fits[0].bound.is_err());
    assert_eq!(s.fits_failed, 1);
    assert_eq!(
        s.best_bound, cold.best_bound,
        "the cold fits' best, as without a start"
    );
    // A start that is no subset of the family is not taken.
    let wrong = WarmStart {
        parents: vec![1, 2],
        ..warm.clone()
    };
    let s = family_score(&data, 2, &[0, 1], &settings, 7, Some(&wrong)).unwrap();
    assert!(s.fits.iter().all(|f| f.role == FitRole::Full));
}
