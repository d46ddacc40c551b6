//! Generated data sets: determinism, standardisation, the recorded truth, the signal each
//! mechanism carries from parents to children, and the validation messages.

use occam::generate::{
    generate, simulate, GenerateError, Generated, GeneratorSettings, GraphKind, Mechanism,
    NodeMechanism, SimulationSpec, MAX_EXACT_GP_SAMPLES,
};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn settings(
    graph: GraphKind,
    nodes: usize,
    k: usize,
    samples: usize,
    mechanism: Mechanism,
    seed: u64,
) -> GeneratorSettings {
    GeneratorSettings {
        graph,
        nodes,
        edges_per_node: k,
        samples,
        mechanism,
        seed,
    }
}

fn mean_sd(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Pearson correlation.
fn corr(x: &[f64], y: &[f64]) -> f64 {
    let ((mx, sx), (my, sy)) = (mean_sd(x), mean_sd(y));
    let cov = x
        .iter()
        .zip(y)
        .map(|(a, b)| (a - mx) * (b - my))
        .sum::<f64>()
        / x.len() as f64;
    cov / (sx * sy)
}

/// R² of the regression of y on the bin means of x: sort by x, cut into `bins` equal-count bins,
/// and return the between-bin share of y's variance. A nonparametric dependence statistic: for
/// independent x and y its expectation is about (bins − 1)/(N − 1).
fn binned_r2(x: &[f64], y: &[f64], bins: usize) -> f64 {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
    let (my, _) = mean_sd(y);
    let total: f64 = y.iter().map(|v| (v - my).powi(2)).sum();
    let n = x.len();
    let between: f64 = (0..bins)
        .map(|b| {
            let members = &idx[b * n / bins..(b + 1) * n / bins];
            let mean = members.iter().map(|&i| y[i]).sum::<f64>() / members.len() as f64;
            members.len() as f64 * (mean - my).powi(2)
        })
        .sum();
    between / total
}

/// (parent column, child column) of the single edge of a two-node ER graph (p = 1 there).
fn edge_pair(g: &Generated) -> (&[f64], &[f64]) {
    let edges = g.truth.edges();
    assert_eq!(edges.len(), 1);
    let (p, c) = edges[0];
    (g.dataset.column(p), g.dataset.column(c))
}

#[test]
fn same_settings_give_identical_output_and_seeds_differ() {
    for &mechanism in Mechanism::ALL {
        let s = settings(GraphKind::Er, 5, 2, 60, mechanism, 17);
        let a = generate(&s).unwrap();
        let b = generate(&s).unwrap();
        assert_eq!(a, b, "{mechanism}");
        assert_eq!(a.dataset.fingerprint(), b.dataset.fingerprint());
        let other = generate(&GeneratorSettings { seed: 18, ..s }).unwrap();
        assert_ne!(a.dataset.fingerprint(), other.dataset.fingerprint());
    }
    // Graphs differ across seeds too.
    let graphs: std::collections::HashSet<_> = (0..10)
        .map(|seed| {
            let s = settings(GraphKind::Sf, 8, 1, 10, Mechanism::Linear, seed);
            generate(&s).unwrap().truth
        })
        .collect();
    assert!(graphs.len() >= 8, "{}", graphs.len());
}

#[test]
fn the_graph_depends_only_on_the_seed_and_graph_settings() {
    let base = settings(GraphKind::Er, 12, 2, 50, Mechanism::Mlp, 5);
    let truth = generate(&base).unwrap().truth;
    for &mechanism in Mechanism::ALL {
        for samples in [20, 80] {
            let g = generate(&GeneratorSettings {
                mechanism,
                samples,
                ..base.clone()
            })
            .unwrap();
            assert_eq!(g.truth, truth, "{mechanism}, N = {samples}");
        }
    }
}

#[test]
fn every_column_is_standardised_and_the_truth_is_a_dag() {
    for &mechanism in Mechanism::ALL {
        for &graph in GraphKind::ALL {
            for seed in 0..2 {
                let s = settings(graph, 7, 2, 120, mechanism, seed);
                let g = generate(&s).unwrap();
                assert_eq!(g.dataset.cols(), 7);
                assert_eq!(g.dataset.rows(), 120);
                let names: Vec<String> = (1..=7).map(|i| format!("X{i}")).collect();
                assert_eq!(g.dataset.names(), names.as_slice());
                assert_eq!(g.truth.n(), 7);
                assert!(g.truth.is_acyclic());
                assert!(g.truth.edge_count() > 0);
                assert_eq!(g.meta.edge_count, g.truth.edge_count());
                for (j, c) in g.dataset.columns().iter().enumerate() {
                    let (m, sd) = mean_sd(c);
                    assert!(m.abs() < 1e-12, "{mechanism} {graph} X{}: mean {m}", j + 1);
                    assert!((sd - 1.0).abs() < 1e-12, "{mechanism} X{}: sd {sd}", j + 1);
                }
            }
        }
    }
}

#[test]
fn linear_children_correlate_strongly_with_their_parent() {
    // One parent, weight |w| ≥ 0.5 and unit noise: |corr| = |w|/√(w² + 1) ≥ 0.447, about 0.72 on
    // average over w ~ U(0.5, 2).
    let seeds = 30u64;
    let mut sum = 0.0;
    for seed in 0..seeds {
        let g = generate(&settings(GraphKind::Er, 2, 1, 500, Mechanism::Linear, seed)).unwrap();
        let (p, c) = edge_pair(&g);
        let r = corr(p, c).abs();
        assert!(r > 0.3, "seed {seed}: |corr| {r}");
        sum += r;
    }
    assert!(
        sum / seeds as f64 > 0.6,
        "mean |corr| {}",
        sum / seeds as f64
    );
}

#[test]
fn parents_are_standardised_before_their_children_read_them() {
    // For a linear node with one parent, corr(child, parent) = w/√(w² + 1) exactly when the parent
    // it read had sd 1. Had the parent been read raw (sd √(Σw² + 1) > 1 for a non-root parent),
    // the correlation would be larger. The sample correlation's standard error is (1 − ρ²)/√N.
    let n = 3000;
    let mut checked_with_non_root_parent = 0;
    for seed in 0..6 {
        let g = generate(&settings(GraphKind::Er, 8, 1, n, Mechanism::Linear, seed)).unwrap();
        for (j, node) in g.meta.nodes.iter().enumerate() {
            let NodeMechanism::Linear { weights } = &node.mechanism else {
                continue;
            };
            if weights.len() != 1 {
                continue;
            }
            let parent = node.parents[0];
            let w = weights[0];
            let expected = w / (w * w + 1.0).sqrt();
            let got = corr(g.dataset.column(parent), g.dataset.column(j));
            let se = (1.0 - expected * expected) / (n as f64).sqrt();
            assert!(
                (got - expected).abs() < 5.0 * se,
                "seed {seed}, {}: corr {got}, expected {expected} ± {se}",
                node.name
            );
            if !g.meta.nodes[parent].parents.is_empty() {
                checked_with_non_root_parent += 1;
            }
        }
    }
    assert!(
        checked_with_non_root_parent >= 5,
        "{checked_with_non_root_parent}"
    );
}

#[test]
fn nonlinear_children_depend_on_their_parent() {
    // Binned-means R² with 10 bins: about 9/199 = 0.045 for independent data of 200 rows. Compare
    // each mechanism's child–parent value with the same statistic after shuffling the parent
    // (which breaks the dependence but keeps both marginals).
    let (n, bins, seeds) = (200usize, 10usize, 12u64);
    for mechanism in [Mechanism::Gp, Mechanism::GpCde, Mechanism::Mlp] {
        let mut dependent = 0.0;
        let mut shuffled = 0.0;
        for seed in 0..seeds {
            let g = generate(&settings(GraphKind::Er, 2, 1, n, mechanism, seed)).unwrap();
            let (p, c) = edge_pair(&g);
            dependent += binned_r2(p, c, bins);
            let mut perm = p.to_vec();
            perm.shuffle(&mut ChaCha8Rng::seed_from_u64(1000 + seed));
            shuffled += binned_r2(&perm, c, bins);
        }
        let (dependent, shuffled) = (dependent / seeds as f64, shuffled / seeds as f64);
        // Under independence R² has sd about √(2·9)/199 ≈ 0.021, so a 12-seed mean has standard
        // error ≈ 0.006; 0.075 is 5 of them above 0.045.
        assert!(
            shuffled < 0.075,
            "{mechanism}: shuffled baseline {shuffled}"
        );
        // 0.15 is over 15 of those standard errors above the independent value, and well below
        // the dependent means seen (0.3 to 0.5 over 40 seeds; single edges can be weak).
        assert!(
            dependent > 0.15 && dependent > 4.0 * shuffled,
            "{mechanism}: R² {dependent} vs shuffled {shuffled}"
        );
    }
}

#[test]
fn validation_refuses_bad_sizes_with_clear_messages() {
    let ok = GeneratorSettings::default();
    assert!(ok.validate().is_ok());
    let cases: Vec<(GeneratorSettings, &str)> =
        vec![
        (
            GeneratorSettings { nodes: 0, ..ok.clone() },
            "nodes must be between 1 and 1000, got 0",
        ),
        (
            GeneratorSettings { nodes: 1001, ..ok.clone() },
            "nodes must be between 1 and 1000, got 1001",
        ),
        (
            GeneratorSettings { samples: 1, ..ok.clone() },
            "samples must be between 2 and 100000 (a column is standardised, which needs at least \
             two rows), got 1",
        ),
        (
            GeneratorSettings { samples: 100_001, ..ok.clone() },
            "samples must be between 2 and 100000",
        ),
        (
            GeneratorSettings { nodes: 1000, samples: 20_000, ..ok.clone() },
            "1000 nodes × 20000 samples = 20000000 values is more than the limit of 10000000",
        ),
        (
            GeneratorSettings {
                mechanism: Mechanism::GpCde,
                samples: MAX_EXACT_GP_SAMPLES + 1,
                ..ok.clone()
            },
            "the gpcde mechanism draws an exact Gaussian process (an N × N Cholesky per node), \
             limited to 4000 samples, got 4001",
        ),
    ];
    for (s, message) in cases {
        let err = s.validate().unwrap_err();
        assert!(err.to_string().starts_with(message), "{err}");
        // generate refuses the same settings before drawing anything.
        assert_eq!(generate(&s).unwrap_err(), err);
    }
    // The exact-GP cap applies only to the GP mechanisms.
    let big_mlp = GeneratorSettings {
        samples: MAX_EXACT_GP_SAMPLES + 1,
        ..ok.clone()
    };
    assert!(big_mlp.validate().is_ok());
    let gp = GeneratorSettings {
        mechanism: Mechanism::Gp,
        ..big_mlp
    };
    assert!(matches!(
        gp.validate(),
        Err(GenerateError::ExactGpTooLarge {
            mechanism: Mechanism::Gp,
            samples: 4001
        })
    ));
}

#[test]
fn a_single_node_is_a_standardised_root() {
    for &mechanism in Mechanism::ALL {
        let g = generate(&settings(GraphKind::Sf, 1, 4, 30, mechanism, 2)).unwrap();
        assert_eq!(g.truth.edge_count(), 0);
        let (m, sd) = mean_sd(g.dataset.column(0));
        assert!(m.abs() < 1e-12 && (sd - 1.0).abs() < 1e-12);
    }
}

/// A drawn graph simulates as `generate` does: given the graph `generate` drew, with its names,
/// mechanism, rows and seed, `simulate` gives the same data bit for bit.
#[test]
fn simulating_a_drawn_graph_reproduces_generate_on_that_graph() {
    for mechanism in [Mechanism::Linear, Mechanism::Mlp, Mechanism::GpCde] {
        let generated = generate(&settings(GraphKind::Er, 5, 1, 200, mechanism, 11)).unwrap();
        let spec = SimulationSpec {
            names: generated.dataset.names().to_vec(),
            edges: generated.truth.edges(),
            hidden: vec![],
            mechanism,
            samples: 200,
            seed: 11,
        };
        let simulated = simulate(&spec).unwrap();
        assert_eq!(
            simulated.dataset.fingerprint(),
            generated.dataset.fingerprint(),
            "{mechanism:?}"
        );
        assert_eq!(simulated.truth.edges(), generated.truth.edges());
        assert_eq!(simulate(&spec).unwrap(), simulated, "deterministic");
    }
}

/// A hidden variable is generated but left out: its children stay correlated in the data (it is
/// their common cause), and the truth among the observed variables has no edge between them.
#[test]
fn a_hidden_confounder_is_left_out_of_the_data_and_the_truth() {
    let spec = SimulationSpec {
        names: vec!["Z".into(), "X".into(), "Y".into()],
        edges: vec![(0, 1), (0, 2)],
        hidden: vec![0],
        mechanism: Mechanism::Linear,
        samples: 500,
        seed: 3,
    };
    let simulated = simulate(&spec).unwrap();
    assert_eq!(simulated.dataset.names(), ["X", "Y"]);
    assert_eq!(simulated.truth.edge_count(), 0);
    let columns = simulated.dataset.columns();
    assert!(corr(&columns[0], &columns[1]).abs() > 0.3);
}

/// A drawn graph that cannot be simulated is refused with what is wrong.
#[test]
fn a_cyclic_or_badly_named_drawing_is_refused() {
    let spec = |names: &[&str], edges: Vec<(usize, usize)>, hidden: Vec<usize>| SimulationSpec {
        names: names.iter().map(|s| s.to_string()).collect(),
        edges,
        hidden,
        mechanism: Mechanism::Linear,
        samples: 50,
        seed: 0,
    };
    let message = |s: SimulationSpec| simulate(&s).unwrap_err().to_string();
    assert!(message(spec(&["A", "B"], vec![(0, 1), (1, 0)], vec![])).contains("cycle"));
    assert!(message(spec(&["A", "A"], vec![], vec![])).contains("two variables are called A"));
    assert!(message(spec(&["A", " "], vec![], vec![])).contains("needs a name"));
    assert!(message(spec(&["A"], vec![], vec![0])).contains("nothing would be observed"));
    assert!(message(spec(&["A"], vec![], vec![4])).contains("does not exist"));
    let mut few = spec(&["A"], vec![], vec![]);
    few.samples = 1;
    assert!(message(few).contains("samples must be between 2"));
}
