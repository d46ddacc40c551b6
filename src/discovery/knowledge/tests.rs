use super::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The greedy rule keeps edges that lie on no cycle, where the prefix cut loses every edge
/// lighter than a strong 2-cycle.
#[test]
fn greedy_dag_keeps_light_edges_that_close_no_cycle() {
    // a ↔ b strongly (0.9 / 0.8), and a light chain c → d → e (0.1).
    let mut w = DMatrix::zeros(5, 5);
    w[(0, 1)] = 0.9;
    w[(1, 0)] = 0.8;
    w[(2, 3)] = 0.1;
    w[(3, 4)] = 0.1;
    let active = w.map(|v: f64| if v > 0.0 { 1.0 } else { 0.0 });
    let k = Knowledge::none(5);
    let prefix = threshold_to_dag(&w, &active, &k).unwrap();
    assert_eq!(prefix.edges(), vec![(0, 1)]);
    let greedy = greedy_dag(&w, &active, &k).unwrap();
    assert_eq!(greedy.edges(), vec![(0, 1), (2, 3), (3, 4)]);
}

/// On random weights and knowledge: the greedy result is a DAG with every required edge, no
/// forbidden or inactive one, and maximal (each candidate left out would close a cycle).
#[test]
fn greedy_dag_is_a_maximal_dag_that_respects_knowledge() {
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let names: Vec<String> = (0..6).map(|i| format!("v{i}")).collect();
    for _ in 0..200 {
        let d = 6;
        let w = DMatrix::from_fn(d, d, |i, j| {
            if i == j {
                0.0
            } else {
                rng.random_range(0.0..1.0)
            }
        });
        let active = DMatrix::from_fn(d, d, |i, j| {
            if i != j && rng.random_bool(0.7) {
                1.0
            } else {
                0.0
            }
        });
        let forbid = vec![format!("v{}->v{}", 0, rng.random_range(1..d))];
        let require = vec![format!("v{}->v{}", 2, rng.random_range(3..d))];
        let k = Knowledge::new(&names, &forbid, &require, None).unwrap();
        let dag = greedy_dag(&w, &active, &k).unwrap();
        let g = dag.as_digraph();
        for &(i, j) in k.required() {
            assert!(g.has_edge(i, j));
        }
        for i in 0..d {
            for j in 0..d {
                if i == j || g.has_edge(i, j) {
                    continue;
                }
                let candidate = active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0;
                if candidate {
                    assert!(
                        g.descendants(j)[i],
                        "{i}->{j} was dropped but closes no cycle"
                    );
                }
            }
        }
        for (i, j) in dag.edges() {
            assert!(k.allowed(i, j));
            assert!(k.is_required(i, j) || active[(i, j)] == 1.0);
        }
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn strs(list: &[&str]) -> Vec<String> {
    names(list)
}

fn abc() -> Vec<String> {
    names(&["a", "b", "c"])
}

// ---- parsing ----

#[test]
fn edges_parse_with_and_without_spaces() {
    let k = Knowledge::new(
        &abc(),
        &strs(&["a->b", " b -> c ", "c->a"]),
        &strs(&["b  ->a"]),
        None,
    )
    .unwrap();
    assert_eq!(k.d(), 3);
    assert_eq!(k.forbidden(), &[(0, 1), (1, 2), (2, 0)]);
    assert_eq!(k.required(), &[(1, 0)]);
    assert!(k.tiers().is_none());
    assert!(k.is_required(1, 0));
    assert!(!k.is_required(0, 1));
}

#[test]
fn duplicate_edges_are_merged() {
    let k = Knowledge::new(&abc(), &strs(&["a->b", "a -> b"]), &[], None).unwrap();
    assert_eq!(k.forbidden(), &[(0, 1)]);
}

#[test]
fn names_with_spaces_and_dashes_parse() {
    let cols = names(&["x-1", "body mass", "y"]);
    let k = Knowledge::new(
        &cols,
        &strs(&["x-1->body mass", "body mass -> y"]),
        &[],
        None,
    )
    .unwrap();
    assert_eq!(k.forbidden(), &[(0, 1), (1, 2)]);
}

#[test]
fn malformed_edges_are_rejected_with_the_expected_form() {
    for bad in [
        "a b", "a-b", "a->", "->b", "", "  ", "a->b->c", "a<-b", "a=>b",
    ] {
        let err = Knowledge::new(&abc(), &strs(&[bad]), &[], None).unwrap_err();
        assert!(
            matches!(&err, KnowledgeError::MalformedEdge { text, location }
                if text == bad && location == "the forbidden edges"),
            "{bad:?}: {err:?}"
        );
        assert!(err.to_string().contains("`A->B`"), "{err}");
    }
    let err = Knowledge::new(&abc(), &[], &strs(&["a"]), None).unwrap_err();
    assert!(err.to_string().contains("the required edges"), "{err}");
}

#[test]
fn unknown_names_list_valid_names() {
    let err = Knowledge::new(&abc(), &strs(&["a->q"]), &[], None).unwrap_err();
    match &err {
        KnowledgeError::UnknownName {
            name,
            suggestion,
            known,
            known_total,
            ..
        } => {
            assert_eq!(name, "q");
            assert_eq!(suggestion, &None);
            assert_eq!(known, &abc());
            assert_eq!(*known_total, 3);
        }
        other => panic!("{other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("`q`") && msg.contains("`a->q`"), "{msg}");
    assert!(msg.contains("`a`, `b`, `c`"), "{msg}");

    let many: Vec<String> = (0..9).map(|i| format!("v{i}")).collect();
    let msg = Knowledge::new(&many, &[], &strs(&["zz->v1"]), None)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("`v4`") && !msg.contains("`v5`"), "{msg}");
    assert!(msg.contains("9 columns in all"), "{msg}");
}

#[test]
fn names_are_case_sensitive_with_a_suggestion() {
    let cols = names(&["Age", "Income"]);
    let err = Knowledge::new(&cols, &strs(&["age->Income"]), &[], None).unwrap_err();
    assert!(
        matches!(&err, KnowledgeError::UnknownName { suggestion: Some(s), .. } if s == "Age"),
        "{err:?}"
    );
    assert!(err.to_string().contains("did you mean `Age`?"));
}

#[test]
fn duplicate_column_names_are_rejected() {
    let err = Knowledge::new(&names(&["a", "b", "a"]), &[], &[], None).unwrap_err();
    assert_eq!(
        err,
        KnowledgeError::DuplicateColumn {
            name: "a".to_string()
        }
    );
}

#[test]
fn self_loops_are_rejected() {
    let err = Knowledge::new(&abc(), &[], &strs(&["b -> b"]), None).unwrap_err();
    assert_eq!(
        err,
        KnowledgeError::SelfLoop {
            variable: "b".to_string(),
            location: REQUIRED_LIST.to_string()
        }
    );
    assert!(err.to_string().contains("`b->b`"));
    let err = Knowledge::from_indices(3, vec![(2, 2)], vec![], None).unwrap_err();
    assert!(err.to_string().contains("variable 2"), "{err}");
}

// ---- tiers ----

#[test]
fn tiers_parse_and_forbid_backward_edges() {
    let cols = names(&["a", "b", "c", "d", "e"]);
    let text = "# exposures first\n\n a, b \n  # then\nc,\n\nd\n";
    let k = Knowledge::new(&cols, &[], &[], Some(text)).unwrap();
    assert_eq!(
        k.tiers(),
        Some(&[Some(0), Some(0), Some(1), Some(2), None][..])
    );
    assert_eq!(k.tier(2), Some(1));
    assert_eq!(k.tier(4), None);
    // Within a tier and forward: allowed.
    assert!(k.allowed(0, 1) && k.allowed(1, 0));
    assert!(k.allowed(0, 2) && k.allowed(2, 3) && k.allowed(0, 3));
    // Backward: forbidden.
    assert!(!k.allowed(2, 0) && !k.allowed(3, 2) && !k.allowed(3, 1));
    // The unlisted variable is unconstrained.
    for v in 0..4 {
        assert!(k.allowed(4, v) && k.allowed(v, 4));
    }
    assert!(k.forbidden().is_empty());
}

#[test]
fn empty_tiers_text_means_no_tiers() {
    let k = Knowledge::new(&abc(), &[], &[], Some("\n# nothing\n  \n")).unwrap();
    assert!(k.tiers().is_none());
    assert!(k.is_unconstrained());
    assert_eq!(k, Knowledge::none(3));
}

#[test]
fn tiers_reject_unknown_and_repeated_variables() {
    let err = Knowledge::new(&abc(), &[], &[], Some("a\n\nb, x")).unwrap_err();
    match &err {
        KnowledgeError::UnknownName { name, location, .. } => {
            assert_eq!(name, "x");
            assert_eq!(location, "tier 2 (line 3 of the tiers)");
        }
        other => panic!("{other:?}"),
    }
    let err = Knowledge::new(&abc(), &[], &[], Some("a, b\nc, a")).unwrap_err();
    assert_eq!(
        err,
        KnowledgeError::DuplicateInTiers {
            variable: "a".to_string(),
            first_tier: 1,
            second_tier: 2
        }
    );
    assert!(
        err.to_string().contains("tier 1 and again in tier 2"),
        "{err}"
    );
    let err = Knowledge::new(&abc(), &[], &[], Some("b, a, b")).unwrap_err();
    assert!(err.to_string().contains("twice in tier 1"), "{err}");
}

#[test]
fn tiers_length_must_match() {
    let err = Knowledge::from_indices(3, vec![], vec![], Some(vec![Some(0)])).unwrap_err();
    assert_eq!(err, KnowledgeError::TiersLength { len: 1, d: 3 });
}

// ---- contradictions ----

#[test]
fn required_and_forbidden_is_a_contradiction() {
    let err = Knowledge::new(&abc(), &strs(&["a->c"]), &strs(&["a -> c"]), None).unwrap_err();
    assert_eq!(
        err,
        KnowledgeError::RequiredAndForbidden {
            from: "a".to_string(),
            to: "c".to_string()
        }
    );
    assert!(err.to_string().contains("a -> c"));
    // The reverse direction is no contradiction.
    assert!(Knowledge::new(&abc(), &strs(&["c->a"]), &strs(&["a->c"]), None).is_ok());
}

#[test]
fn required_edge_against_tiers_names_both_tiers() {
    let err = Knowledge::new(&abc(), &[], &strs(&["c->a"]), Some("a\nb\nc")).unwrap_err();
    assert_eq!(
        err,
        KnowledgeError::RequiredAgainstTiers {
            from: "c".to_string(),
            to: "a".to_string(),
            from_tier: 3,
            to_tier: 1
        }
    );
    let msg = err.to_string();
    assert!(msg.contains("tier 3") && msg.contains("tier 1"), "{msg}");
    // Forward and within-tier requirements are fine.
    let k = Knowledge::new(&abc(), &[], &strs(&["a->c", "b->c"]), Some("a\nb, c")).unwrap();
    assert_eq!(k.required(), &[(0, 2), (1, 2)]);
    assert!(Knowledge::new(&abc(), &[], &strs(&["c->b"]), Some("a\nb, c")).is_ok());
}

#[test]
fn required_cycle_is_named() {
    let err = Knowledge::new(&abc(), &[], &strs(&["a->b", "b->c", "c->a"]), None).unwrap_err();
    match &err {
        KnowledgeError::RequiredCycle { cycle } => {
            assert_eq!(cycle.len(), 3);
            // Rotate so that it starts at `a`, then check the order.
            let start = cycle.iter().position(|v| v == "a").unwrap();
            let rotated: Vec<&str> = (0..3).map(|k| cycle[(start + k) % 3].as_str()).collect();
            assert_eq!(rotated, vec!["a", "b", "c"]);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .contains("required edges form a cycle: a -> b -> c -> a"),
        "{err}"
    );
    let err = Knowledge::from_indices(2, vec![], vec![(0, 1), (1, 0)], None).unwrap_err();
    assert!(
        err.to_string()
            .contains("variable 0 -> variable 1 -> variable 0"),
        "{err}"
    );
    // An acyclic set of required edges is accepted.
    assert!(Knowledge::new(&abc(), &[], &strs(&["a->b", "b->c", "a->c"]), None).is_ok());
}

#[test]
fn indices_out_of_range_are_rejected() {
    let err = Knowledge::from_indices(3, vec![(0, 3)], vec![], None).unwrap_err();
    assert_eq!(
        err,
        KnowledgeError::IndexOutOfRange {
            index: 3,
            d: 3,
            location: FORBIDDEN_LIST.to_string()
        }
    );
    assert!(err.to_string().contains("0 to 2"), "{err}");
    let err = Knowledge::from_indices(2, vec![], vec![(7, 0)], None).unwrap_err();
    assert!(matches!(
        err,
        KnowledgeError::IndexOutOfRange { index: 7, .. }
    ));
}

#[test]
fn named_indices_use_column_names_in_errors() {
    let err = Knowledge::from_indices_named(&abc(), vec![(1, 2)], vec![(1, 2)], None).unwrap_err();
    assert!(err.to_string().contains("b -> c"), "{err}");
}

#[test]
fn serde_round_trips_and_revalidates() {
    let k = Knowledge::new(&abc(), &strs(&["c->a"]), &strs(&["a->b"]), Some("a\nb\n")).unwrap();
    let json = serde_json::to_string(&k).unwrap();
    let back: Knowledge = serde_json::from_str(&json).unwrap();
    assert_eq!(back, k);
    let cyclic = r#"{"d":2,"forbidden":[],"required":[[0,1],[1,0]],"tiers":null}"#;
    let err = serde_json::from_str::<Knowledge>(cyclic).unwrap_err();
    assert!(err.to_string().contains("cycle"), "{err}");
}

// ---- masks ----

#[test]
fn allowed_matrix_is_cause_by_effect() {
    // Tiers: b first, then {c, a}. Forbidden: b→a, which the tiers alone would allow.
    let k = Knowledge::new(&abc(), &strs(&["b->a"]), &strs(&["b->c"]), Some("b\nc, a")).unwrap();
    let m = k.allowed_matrix();
    #[rustfmt::skip]
    let expected = DMatrix::from_row_slice(3, 3, &[
        // a→a  a→b  a→c   (a→b backward from tier 2 to tier 1)
        0.0, 0.0, 1.0,
        // b→a  b→b  b→c   (b→a forbidden)
        0.0, 0.0, 1.0,
        // c→a  c→b  c→c   (c→b backward)
        1.0, 0.0, 0.0,
    ]);
    assert_eq!(m, expected);
    for i in 0..3 {
        for j in 0..3 {
            assert_eq!(m[(i, j)] == 1.0, k.allowed(i, j));
        }
    }
    assert!(k.allowed(1, 2) && k.is_required(1, 2));
    assert!(!k.allowed(0, 7) && !k.allowed(7, 0));
    let none = Knowledge::none(3).allowed_matrix();
    assert_eq!(
        none,
        DMatrix::from_fn(3, 3, |i, j| f64::from(u8::from(i != j)))
    );
}

// ---- thresholding ----

fn ones(d: usize) -> DMatrix<f64> {
    DMatrix::from_element(d, d, 1.0)
}

fn weights(d: usize, edges: &[(usize, usize, f64)]) -> DMatrix<f64> {
    let mut w = DMatrix::zeros(d, d);
    for &(i, j, v) in edges {
        w[(i, j)] = v;
    }
    w
}

#[test]
fn three_cycle_loses_exactly_its_lightest_edge() {
    let w = weights(3, &[(0, 1, 0.9), (1, 2, 0.5), (2, 0, 0.7)]);
    let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1), (2, 0)]);
}

#[test]
fn acyclic_input_is_kept_whole() {
    let w = weights(4, &[(0, 1, 0.1), (1, 2, 0.2), (0, 3, 0.01), (3, 2, 5.0)]);
    let dag = threshold_to_dag(&w, &ones(4), &Knowledge::none(4)).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1), (0, 3), (1, 2), (3, 2)]);
}

#[test]
fn ties_are_broken_by_edge_order() {
    let w = weights(2, &[(0, 1, 0.5), (1, 0, 0.5)]);
    let dag = threshold_to_dag(&w, &ones(2), &Knowledge::none(2)).unwrap();
    assert_eq!(dag.edges(), vec![(1, 0)]);
}

#[test]
fn required_edge_with_zero_weight_is_kept_and_a_heavier_edge_goes() {
    // Required 0 → 1 with weight 0 (and even inactive in the mask); 1 → 2 (0.9) and
    // 2 → 0 (0.8) close the cycle 0 → 1 → 2 → 0 with it. The lightest non-required edge,
    // 2 → 0, goes although it is far heavier than the required edge.
    let k = Knowledge::from_indices(3, vec![], vec![(0, 1)], None).unwrap();
    let w = weights(3, &[(1, 2, 0.9), (2, 0, 0.8)]);
    let mut active = ones(3);
    active[(0, 1)] = 0.0;
    let dag = threshold_to_dag(&w, &active, &k).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1), (1, 2)]);
    // Without the requirement the zero-weight edge is absent and nothing needs removing.
    let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
    assert_eq!(dag.edges(), vec![(1, 2), (2, 0)]);
    // A 2-cycle against a light required edge: the heavy reverse edge goes.
    let w = weights(2, &[(0, 1, 0.1), (1, 0, 0.9)]);
    let k = Knowledge::from_indices(2, vec![], vec![(0, 1)], None).unwrap();
    let dag = threshold_to_dag(&w, &ones(2), &k).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1)]);
}

#[test]
fn lightest_edges_go_first_even_off_the_remaining_cycle() {
    // The paper's rule, not a minimum feedback arc set: with required 0 → 1, the cycles
    // 0 → 1 → 0 and 0 → 1 → 2 → 0 are broken by dropping 2 → 0 (0.6), then 1 → 2 (0.8), then
    // 1 → 0 (0.9); only the last removal was needed for 0 → 1 → 0, but 1 → 2 was lighter.
    let k = Knowledge::from_indices(3, vec![], vec![(0, 1)], None).unwrap();
    let w = weights(3, &[(1, 0, 0.9), (1, 2, 0.8), (2, 0, 0.6)]);
    let dag = threshold_to_dag(&w, &ones(3), &k).unwrap();
    assert_eq!(dag.edges(), vec![(0, 1)]);
}

#[test]
fn forbidden_inactive_and_tier_violating_edges_never_appear() {
    let cols = names(&["a", "b", "c"]);
    let k = Knowledge::new(&cols, &strs(&["a->b"]), &[], Some("a\nb\nc")).unwrap();
    let w = weights(
        3,
        &[
            (0, 1, 100.0),
            (2, 0, 50.0),
            (1, 2, 0.1),
            (0, 2, 0.2),
            (2, 1, 70.0),
        ],
    );
    let mut active = ones(3);
    active[(0, 2)] = 0.0;
    let dag = threshold_to_dag(&w, &active, &k).unwrap();
    // a→b forbidden, c→a and c→b backward in the tiers, a→c inactive: only b→c is left.
    assert_eq!(dag.edges(), vec![(1, 2)]);
}

#[test]
fn zero_weights_mean_no_edge() {
    let w = weights(3, &[(0, 1, 0.0), (1, 2, 1e-300)]);
    let dag = threshold_to_dag(&w, &ones(3), &Knowledge::none(3)).unwrap();
    assert_eq!(dag.edges(), vec![(1, 2)]);
}

#[test]
fn bad_matrices_are_errors_not_panics() {
    let k = Knowledge::none(3);
    let err = threshold_to_dag(&DMatrix::zeros(2, 3), &ones(3), &k).unwrap_err();
    assert!(
        matches!(err, KnowledgeError::InvalidMatrix { .. }),
        "{err:?}"
    );
    let err = threshold_to_dag(&DMatrix::zeros(3, 3), &ones(4), &k).unwrap_err();
    assert!(err.to_string().contains("active mask"), "{err}");
    for bad in [f64::NAN, f64::INFINITY, -0.5] {
        let w = weights(3, &[(0, 2, bad)]);
        let err = threshold_to_dag(&w, &ones(3), &k).unwrap_err();
        assert!(err.to_string().contains("weight (0, 2)"), "{bad}: {err}");
    }
    let mut active = ones(3);
    active[(1, 0)] = 0.5;
    let err = threshold_to_dag(&DMatrix::zeros(3, 3), &active, &k).unwrap_err();
    assert!(err.to_string().contains("(1, 0)"), "{err}");
    // Diagonals are ignored, whatever they hold.
    let mut w = DMatrix::zeros(3, 3);
    w[(1, 1)] = f64::NAN;
    let mut active = ones(3);
    active[(2, 2)] = 0.3;
    assert!(threshold_to_dag(&w, &active, &k).is_ok());
}

/// The paper's rule taken literally: while the graph has a cycle, drop the lightest remaining
/// non-required edge (ties: smallest (i, j)), re-checking acyclicity by DFS each time.
fn brute_force(w: &DMatrix<f64>, active: &DMatrix<f64>, k: &Knowledge) -> Digraph {
    let d = k.d();
    let mut g = Digraph::empty(d);
    for i in 0..d {
        for j in 0..d {
            let candidate = i != j && active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0;
            if candidate || k.is_required(i, j) {
                g.add_edge(i, j).unwrap();
            }
        }
    }
    while !g.is_acyclic() {
        let mut lightest: Option<(f64, usize, usize)> = None;
        for (i, j) in g.edges() {
            if k.is_required(i, j) {
                continue;
            }
            let v = w[(i, j)];
            if lightest.is_none_or(|(lv, li, lj)| v < lv || (v == lv && (i, j) < (li, lj))) {
                lightest = Some((v, i, j));
            }
        }
        let (_, i, j) = lightest.expect("a cycle with only required edges");
        g.remove_edge(i, j);
    }
    g
}

fn random_knowledge(rng: &mut ChaCha8Rng, d: usize) -> Knowledge {
    let tiers = rng.random_bool(0.5).then(|| {
        (0..d)
            .map(|_| rng.random_bool(0.7).then(|| rng.random_range(0..3)))
            .collect::<Vec<_>>()
    });
    let mut order: Vec<usize> = (0..d).collect();
    order.shuffle(rng);
    let pos = |v: usize| order.iter().position(|&x| x == v).unwrap();
    let mut required = Vec::new();
    let mut forbidden = Vec::new();
    for i in 0..d {
        for j in 0..d {
            if i == j {
                continue;
            }
            let tier_ok = !tiers_forbid(tiers.as_deref(), i, j);
            if pos(i) < pos(j) && tier_ok && rng.random_bool(0.15) {
                required.push((i, j));
            } else if rng.random_bool(0.1) {
                forbidden.push((i, j));
            }
        }
    }
    Knowledge::from_indices(d, forbidden, required, tiers).unwrap()
}

#[test]
fn matches_brute_force_on_random_graphs() {
    let mut rng = ChaCha8Rng::seed_from_u64(20_240_517);
    let mut removed_total = 0usize;
    for case in 0..200 {
        let d = rng.random_range(2..8);
        let k = if rng.random_bool(0.3) {
            Knowledge::none(d)
        } else {
            random_knowledge(&mut rng, d)
        };
        // Half the cases draw from a few levels, so ties and zeros are common.
        let coarse = rng.random_bool(0.5);
        let w = DMatrix::from_fn(d, d, |_, _| {
            if coarse {
                f64::from(rng.random_range(0..4u8)) / 4.0
            } else if rng.random_bool(0.1) {
                0.0
            } else {
                rng.random::<f64>()
            }
        });
        let active = DMatrix::from_fn(d, d, |_, _| f64::from(u8::from(rng.random_bool(0.85))));

        let dag = threshold_to_dag(&w, &active, &k).unwrap();
        let reference = brute_force(&w, &active, &k);
        assert_eq!(dag.edges(), reference.edges(), "case {case}, d = {d}");
        assert!(dag.topological_order().is_ok() && dag.find_cycle().is_none());
        for &(i, j) in k.required() {
            assert!(dag.has_edge(i, j), "case {case}: required {i} → {j} lost");
        }
        for (i, j) in dag.edges() {
            assert!(k.allowed(i, j), "case {case}: {i} → {j} not allowed");
            assert!(
                k.is_required(i, j) || (active[(i, j)] == 1.0 && w[(i, j)] > 0.0),
                "case {case}: {i} → {j} was not a candidate"
            );
        }
        let candidates = (0..d)
            .flat_map(|i| (0..d).map(move |j| (i, j)))
            .filter(|&(i, j)| {
                k.is_required(i, j)
                    || (i != j && active[(i, j)] == 1.0 && k.allowed(i, j) && w[(i, j)] > 0.0)
            })
            .count();
        removed_total += candidates - dag.edge_count();
    }
    // The random cases must actually exercise the removal, not only pass acyclic inputs.
    assert!(removed_total > 100, "only {removed_total} edges removed");
}
