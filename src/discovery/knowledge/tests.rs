use super::*;

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
