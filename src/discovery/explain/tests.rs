use super::*;
use crate::gp::collapsed::FitError;

#[test]
fn gauss_hermite_integrates_normal_moments() {
    let (w, o) = gauss_hermite(10);
    let moment = |p: i32| -> f64 { w.iter().zip(&o).map(|(x, a)| a * x.powi(p)).sum() };
    assert!((moment(0) - 1.0).abs() < 1e-13);
    assert!(moment(1).abs() < 1e-13);
    assert!((moment(2) - 1.0).abs() < 1e-12);
    assert!((moment(4) - 3.0).abs() < 1e-11);
    assert!((moment(18) - 34_459_425.0).abs() < 1e-5 * 34_459_425.0);
    let (w1, o1) = gauss_hermite(1);
    assert_eq!((w1[0], o1[0]), (0.0, 1.0));
}

#[test]
fn normal_cdf_matches_tabulated_values() {
    for (x, p) in [
        (0.0, 0.5),
        (1.0, 0.841_344_746_068_542_9),
        (-1.281_551_565_544_6, 0.1),
        (1.959_963_984_540_054, 0.975),
        (-4.0, 3.167_124_183_311_998e-5),
        (5.0, 0.999_999_713_348_428),
        (-8.0, 6.220_960_574_271_785e-16),
    ] {
        let got = normal_cdf(x);
        assert!(
            (got - p).abs() < 1e-14 || (got - p).abs() < 1e-12 * p,
            "Φ({x}) = {got}, expected {p}"
        );
    }
}

#[test]
fn words_cover_every_band_and_both_signs() {
    assert_eq!(
        bayes_factor_words(-4.2),
        "the data favour the graph as it is: strong evidence (Bayes factor ≈ e^4.2 ≈ 67)"
    );
    assert_eq!(
        favour_words(-4.2, "keeping X → Y", "removing X → Y"),
        "the data favour keeping X → Y: strong evidence (Bayes factor ≈ e^4.2 ≈ 67)"
    );
    assert_eq!(
        bayes_factor_words(0.4),
        "the data favour the change: not worth more than a bare mention \
         (Bayes factor ≈ e^0.4 ≈ 1.5)"
    );
    assert_eq!(
        bayes_factor_words(2.0),
        "the data favour the change: positive evidence (Bayes factor ≈ e^2.0 ≈ 7.4)"
    );
    assert_eq!(
        bayes_factor_words(-1.0),
        "the data favour the graph as it is: positive evidence (Bayes factor ≈ e^1.0 ≈ 2.7)"
    );
    assert_eq!(
        bayes_factor_words(5.0),
        "the data favour the change: strong evidence (Bayes factor ≈ e^5.0 ≈ 148)"
    );
    assert_eq!(
        bayes_factor_words(-5.01),
        "the data favour the graph as it is: very strong evidence \
         (Bayes factor ≈ e^5.0 ≈ 150)"
    );
    assert_eq!(
        bayes_factor_words(-52.3),
        "the data favour the graph as it is: very strong evidence \
         (Bayes factor ≈ e^52.3 ≈ 5.2 × 10^22)"
    );
    assert_eq!(
        bayes_factor_words(812.34),
        "the data favour the change: very strong evidence \
         (Bayes factor ≈ e^812.3, more than 10^304)"
    );
    assert!(bayes_factor_words(0.01).starts_with("the data favour neither"));
    assert!(bayes_factor_words(f64::NAN).contains("not a number"));
    assert_eq!(
        EvidenceStrength::from_nats(-0.99),
        EvidenceStrength::BareMention
    );
    assert_eq!(
        EvidenceStrength::from_nats(2.99),
        EvidenceStrength::Positive
    );
    assert_eq!(EvidenceStrength::from_nats(-3.0), EvidenceStrength::Strong);
    assert_eq!(
        EvidenceStrength::from_nats(1e9),
        EvidenceStrength::VeryStrong
    );
}

fn settings() -> FamilyScoreSettings {
    FamilyScoreSettings::with_inducing(10)
}

/// A made-up family score of `value` nats.
fn scored(value: f64) -> Outcome {
    Outcome::Family(Ok(FamilyScore::made_up(value, value - 1.0)))
}

/// On 0 → 1 → 2 plus 0 → 2, reversing 0 → 2 would close 2 → 0 → 1 → 2: it is not scored and
/// its reversal's families are not fitted; the other reversals are, and shared families are
/// planned once.
#[test]
fn a_reversal_that_closes_a_cycle_is_found_and_not_planned() {
    let dag = Dag::from_edges(3, &[(0, 1), (1, 2), (0, 2)]).unwrap();
    let plan = EdgeEvidencePlan::new(&dag, settings(), 7).unwrap();
    let edge = |f: usize, t: usize| plan.edges.iter().find(|e| (e.from, e.to) == (f, t));
    assert_eq!(edge(0, 2).unwrap().cycle_path, Some(vec![0, 1, 2]));
    assert_eq!(edge(0, 1).unwrap().cycle_path, None);
    assert_eq!(edge(1, 2).unwrap().cycle_path, None);
    let mut families = plan.families.clone();
    families.sort();
    let mut unique = families.clone();
    unique.dedup();
    assert_eq!(families, unique, "every family once");
    // Edges 0 → 1 and 1 → 2 reverse; 0 → 2 does not, so F(0 | {2}) is never needed.
    let expected: Vec<FamilyKey> = vec![
        (0, vec![]),
        (0, vec![1]),
        (1, vec![]),
        (1, vec![0]),
        (1, vec![0, 2]),
        (2, vec![0]),
        (2, vec![0, 1]),
        (2, vec![1]),
    ];
    assert_eq!(families, expected);
    assert_eq!(plan.jobs().len(), plan.families.len());
    // A longer detour is found too, as a shortest path.
    let long = Dag::from_edges(5, &[(0, 1), (1, 2), (2, 3), (0, 3), (0, 4), (4, 3)]).unwrap();
    assert_eq!(other_path(&long, 0, 3), Some(vec![0, 4, 3]));
    assert_eq!(other_path(&long, 2, 3), None);
    assert!(matches!(
        EdgeEvidencePlan::for_edges(&dag, &[(2, 0)], settings(), 7),
        Err(ExplainError::Graph(_))
    ));
}

/// The assembled numbers are the formulas' differences of the families' values, read by
/// family whatever the job order.
#[test]
fn assembly_applies_the_formulas_to_the_family_values() {
    let dag = Dag::from_edges(3, &[(0, 2), (1, 2)]).unwrap();
    let plan = EdgeEvidencePlan::new(&dag, settings(), 1).unwrap();
    let value = |key: &FamilyKey| -> f64 {
        match (key.0, key.1.as_slice()) {
            (2, [0, 1]) => -100.0,
            (2, [1]) => -130.0,
            (2, [0]) => -120.0,
            (0, []) => -50.0,
            (0, [2]) => -45.0,
            (1, []) => -60.0,
            (1, [2]) => -58.0,
            other => panic!("unplanned family {other:?}"),
        }
    };
    let outcomes: Vec<Outcome> = plan.families.iter().map(|k| scored(value(k))).collect();
    let evidence = plan.assemble(&outcomes).unwrap();
    assert_eq!(evidence.len(), 2);
    let e0 = evidence.iter().find(|e| e.from == 0).unwrap();
    assert_eq!(e0.removed, -130.0 - (-100.0));
    assert_eq!(
        e0.reversed_delta(),
        Some((-130.0 + -45.0) - (-100.0 + -50.0))
    );
    let e1 = evidence.iter().find(|e| e.from == 1).unwrap();
    assert_eq!(e1.removed, -20.0);
    assert_eq!(
        e1.reversed_delta(),
        Some((-120.0 + -58.0) - (-100.0 + -60.0))
    );
    assert_eq!(strongest_parent(&evidence, 2), Some(0));
    assert_eq!(strongest_parent(&evidence, 0), None);
    let names = column_names(&["A", "B", "C"]);
    assert_words(&[
        (
            e0.removal_words(&names),
            "the data favour keeping A → C: very strong evidence (Bayes factor ≈ e^30.0 ≈ 1.1 × 10^13)",
        ),
        // Read as an edge added to a graph without it: removing gains nothing here, so the data
        // favour adding it.
        (
            e0.addition_words(&names),
            "the data favour adding A → C: very strong evidence (Bayes factor ≈ e^30.0 ≈ 1.1 × 10^13)",
        ),
    ]);
    let left_out = EdgeEvidence {
        removed: 3.0,
        ..e0.clone()
    };
    assert!(
        left_out
            .addition_words(&names)
            .starts_with("the data favour leaving A → C out: "),
        "{}",
        left_out.addition_words(&names)
    );
    assert_eq!(
        e1.reversal_words(&names),
        "the data favour B → C over C → B: very strong evidence (Bayes factor ≈ e^18.0 ≈ 6.6 × 10^7)"
    );
    // Outcomes travel as JSON and so does the evidence.
    let json = serde_json::to_string(&evidence).unwrap();
    let back: Vec<EdgeEvidence> = serde_json::from_str(&json).unwrap();
    assert_eq!(back, evidence);
    let plan_back: EdgeEvidencePlan =
        serde_json::from_str(&serde_json::to_string(&plan).unwrap()).unwrap();
    assert_eq!(plan_back, plan);

    // Wrong outcomes, or a plan that lost a variable on its travels, are named errors.
    let mut broken = plan.clone();
    broken.parents.pop();
    assert!(matches!(
        broken.assemble(&outcomes),
        Err(ExplainError::Graph(_))
    ));
    assert!(matches!(
        plan.assemble(&outcomes[1..]),
        Err(ExplainError::Outcomes(_))
    ));
    let mut failed = outcomes.clone();
    failed[0] = Outcome::Family(Err(FitError::InvalidData("no rows".into()).into()));
    assert!(matches!(
        plan.assemble(&failed),
        Err(ExplainError::Family { .. })
    ));
    let mut wrong = outcomes;
    wrong[1] = Outcome::Value(Ok(1.0));
    assert!(matches!(
        plan.assemble(&wrong),
        Err(ExplainError::Outcomes(_))
    ));
}

#[test]
fn a_cycle_reads_as_a_reason_in_words() {
    let e = EdgeEvidence {
        from: 0,
        to: 2,
        child_family: -10.0,
        child_family_without: -12.0,
        removed: -2.0,
        reversed: Reversal::CreatesCycle {
            path: vec![0, 1, 2],
        },
    };
    assert_eq!(e.reversed_delta(), None);
    let names = column_names(&["A", "B"]);
    assert_words(&[
        (
            e.reversal_words(&names),
            "X3 → A is not scored: it would close the cycle X3 → A → B → X3",
        ),
        (
            e.removal_words(&names),
            "the data favour keeping A → X3: positive evidence (Bayes factor ≈ e^2.0 ≈ 7.4)",
        ),
    ]);
}

/// The column names `names`, owned, as the data hold them.
fn column_names(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

/// Each sentence said equals the one wanted.
#[track_caller]
fn assert_words(cases: &[(String, &str)]) {
    for (case, (said, wanted)) in cases.iter().enumerate() {
        assert_eq!(said, wanted, "sentence {case} of the list");
    }
}

/// The Gauss–Hermite mixture over w against brute-force Monte Carlo over w ~ N(0, 1) (200 000
/// draws) for a model in which w matters (θ_w = 1.5, v_w = 0.4): mean, sd and the 10 % and 90 %
/// quantiles agree to Monte Carlo accuracy.
#[test]
fn the_quadrature_over_w_matches_monte_carlo() {
    use crate::gp::collapsed::{CollapsedParams, LatentPosterior};
    use crate::gp::kernel::Kernel;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use rand_distr::StandardNormal;

    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let n = 40;
    let x: DMatrix<f64> = DMatrix::from_fn(n, 1, |_, _| rng.random_range(-2.0..2.0));
    let mu: DVector<f64> = DVector::from_fn(n, |_, _| rng.sample(StandardNormal));
    let y = DVector::from_fn(n, |r, _| x[(r, 0)].sin() * (1.0 + 0.8 * mu[r]));
    let z = DMatrix::from_fn(12, 2, |_, _| rng.random_range(-2.0..2.0));
    let params = CollapsedParams {
        kernel: Kernel::se_plus_linear(vec![0.2, 0.4], 1.0, vec![1.1, 1.5]),
        noise_variance: 0.02,
        z,
        latent: Some(LatentPosterior {
            mean: mu,
            variance: DVector::from_element(n, 0.05),
        }),
    };
    let predictor = CollapsedPredictor::new(&x, &y, &params, 1e-6).unwrap();
    let mixture = PredictiveMixture::new(&predictor, 48);
    let at = DVector::from_element(1, 0.9);
    let quad = mixture.at(&at).unwrap();

    let draws = 200_000;
    let inputs = DMatrix::from_fn(draws, 2, |_, c| {
        if c == 0 {
            0.9
        } else {
            rng.sample(StandardNormal)
        }
    });
    let f = predictor.predict_f(&inputs).unwrap();
    let noise = predictor.noise_variance();
    let mc_mean = f.mean.mean();
    let mc_second = f
        .mean
        .iter()
        .zip(f.variance.iter())
        .map(|(m, v)| m * m + v + noise)
        .sum::<f64>()
        / draws as f64;
    let mc_sd = (mc_second - mc_mean * mc_mean).sqrt();
    // The predictive sd is far from degenerate: w changes the mean a lot.
    assert!(quad.sd > 0.3, "sd {}", quad.sd);
    let se = quad.sd / (draws as f64).sqrt();
    assert!(
        (quad.mean - mc_mean).abs() < 5.0 * se,
        "mean {} vs {mc_mean}",
        quad.mean
    );
    assert!(
        (quad.sd - mc_sd).abs() < 0.01 * quad.sd,
        "sd {} vs {mc_sd}",
        quad.sd
    );
    // P(y ≤ q) estimated by sampling y from the draws' Gaussians.
    for level in [0.1, 0.9] {
        let q = quad.quantile(level);
        let below = (0..draws)
            .filter(|&k| {
                let e: f64 = rng.sample(StandardNormal);
                f.mean[k] + (f.variance[k] + noise).sqrt() * e <= q
            })
            .count() as f64
            / draws as f64;
        assert!((below - level).abs() < 0.005, "P(y ≤ q_{level}) = {below}");
        assert!((quad.cdf(q) - level).abs() < 1e-8);
    }
}
