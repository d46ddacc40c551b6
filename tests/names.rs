//! How the engine's choices are spelled: one spelling per value in serde and strum alike (the enums
//! live in the layers above `base::names`, so this is checked from outside).

use occam::base::names::{choices, name, parse, parse_or_explain, Named};
use occam::discovery::settings::{Method, Preset};
use occam::generate::{GraphKind, Mechanism};
use serde::Serialize;

/// serde (JSON, saved records) and strum (command line, page) spell every value alike, and
/// every name reads back as its value.
fn agree<T: Named + Serialize + std::fmt::Debug>() {
    for &v in T::VARIANTS {
        let json = serde_json::to_value(v).unwrap();
        assert_eq!(json.as_str(), Some(name(v)), "{v:?}");
        assert_eq!(parse::<T>(name(v)), Some(v));
        assert_eq!(
            parse::<T>(&format!(" {} ", name(v).to_uppercase())),
            Some(v)
        );
    }
}

#[test]
fn every_choice_has_one_spelling() {
    agree::<Method>();
    agree::<Preset>();
    agree::<GraphKind>();
    agree::<Mechanism>();
}

#[test]
fn an_unknown_name_lists_every_choice() {
    assert_eq!(
        parse_or_explain::<Method>("method", "greedy")
            .unwrap_err()
            .to_string(),
        "unknown method 'greedy': choose 'cgp', 'exact', 'hybrid' or 'auto'"
    );
    assert_eq!(choices::<GraphKind>(), "'er' or 'sf'");
    assert_eq!(
        parse_or_explain::<Preset>("preset", "Paper"),
        Ok(Preset::Paper)
    );
}
