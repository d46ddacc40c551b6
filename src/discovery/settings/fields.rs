//! Every search setting a user sets by hand, declared once: its key, label, one-sentence help,
//! whether the page keeps it among the advanced fields, and how it is written as text and read
//! back into [`SearchSettings`]. The page's settings form (`page_model::settings_form::FIELDS`) and the
//! command line's flags (`--key-with-dashes`, `occam discover` and `occam bench`) are both built
//! from [`SETTING_FIELDS`], so a setting added here appears in both; tests on each side check
//! that none is missing.
//!
//! The search method is not a field: it is the [`Method`](super::Method) enum's names
//! (`crate::base::names`), which the page's method selector and `--method` both read. The settings no
//! form shows (the bound, convergence windows, pruning, row scaling, …) are set together from a
//! JSON object (`--settings FILE.json`); [`NOT_FIELDS`] lists them, and a test fails when a new
//! setting is neither a field nor listed there.

use super::SearchSettings;
use crate::discovery::exact::{GraphPrior, GraphPriorError};

/// One hand-set search setting.
#[derive(Debug, Clone, Copy)]
pub struct SettingField {
    /// Stable key: the page form's `data-field` and, with `_` written `-`, the command-line flag.
    pub key: &'static str,
    pub label: &'static str,
    /// One sentence, shown as the form field's hint and in `--help`.
    pub help: &'static str,
    /// Shown in the page's collapsed "advanced" section.
    pub advanced: bool,
    /// An older flag spelling the command line still accepts (`--inducing`).
    pub cli_alias: Option<&'static str>,
    /// The setting written as text (what the form shows).
    pub get: fn(&SearchSettings) -> String,
    /// Reads `text` into the setting, or says why it cannot (without naming the field: the caller
    /// names it as its user sees it, by label or by flag).
    pub set: fn(&mut SearchSettings, &str) -> Result<(), FieldTextError>,
}

impl SettingField {
    /// The command-line flag without its dashes: the key with `-` for `_`.
    pub fn flag(&self) -> String {
        self.key.replace('_', "-")
    }
}

/// Why a field's text cannot be read (without naming the field: the caller names it as its user
/// sees it, by label or by flag).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FieldTextError {
    #[error("'{0}' is not a whole number ≥ 0")]
    NotWhole(String),
    #[error("'{0}' is not a finite number")]
    NotFinite(String),
    /// The few-rows field also takes "all" and "same".
    #[error("'{0}' is not a whole number ≥ 0 (or \"all\", or \"same\")")]
    NotRowCount(String),
    #[error("expected \"off\" or a number of nats, got '{0}'")]
    NotMargin(String),
    #[error("expected a number of nats ≥ 0, got {0}")]
    NegativeMargin(f64),
    #[error(transparent)]
    Prior(#[from] GraphPriorError),
}

/// `text` as a whole number ≥ 0.
pub fn whole(text: &str) -> Result<usize, FieldTextError> {
    text.trim()
        .parse::<usize>()
        .map_err(|_| FieldTextError::NotWhole(text.trim().to_string()))
}

/// `text` as a finite number.
pub fn real(text: &str) -> Result<f64, FieldTextError> {
    match text.trim().parse::<f64>() {
        Ok(x) if x.is_finite() => Ok(x),
        _ => Err(FieldTextError::NotFinite(text.trim().to_string())),
    }
}

/// A field whose text is read by `$parse` ([`whole`] or [`real`]) into the setting at `$path`.
macro_rules! parsed_field {
    ($parse:ident, $key:literal, $label:literal, $help:literal, $advanced:expr, $($path:ident).+) => {
        SettingField {
            key: $key,
            label: $label,
            help: $help,
            advanced: $advanced,
            cli_alias: None,
            get: |s| s.$($path).+.to_string(),
            set: |s, text| {
                s.$($path).+ = $parse(text)?;
                Ok(())
            },
        }
    };
}

/// The hand-set search settings, in the page form's order.
pub const SETTING_FIELDS: &[SettingField] = &[
    parsed_field!(
        whole,
        "restarts",
        "Restarts",
        "Independent runs from different random starts; the one with the highest evidence wins.",
        false,
        restarts
    ),
    SettingField {
        key: "max_rows",
        label: "Rows used",
        help: "A seeded random subset of rows is fitted when the data have more (\"all\" for every row).",
        advanced: true,
        cli_alias: None,
        get: |s| {
            if s.max_rows == usize::MAX {
                "all".into()
            } else {
                s.max_rows.to_string()
            }
        },
        set: |s, text| {
            s.max_rows = if text.trim().eq_ignore_ascii_case("all") {
                usize::MAX
            } else {
                whole(text)?
            };
            Ok(())
        },
    },
    SettingField {
        cli_alias: Some("inducing"),
        ..parsed_field!(
        whole,
            "inducing_points",
            "Inducing points M",
            "Per variable; more is more accurate and slower (capped at the rows used).",
            true,
            inducing_points
        )
    },
    parsed_field!(
        whole,
        "inducing_per_input",
        "Extra M per input",
        "Inducing points added per kernel input (candidate parents + w), so M grows with the number of variables.",
        true,
        inducing_per_input
    ),
    parsed_field!(
        whole,
        "batch_size",
        "Batch size b",
        "Rows per minibatch (paper preset's uncollapsed bound only).",
        true,
        uncollapsed.batch_size
    ),
    parsed_field!(
        whole,
        "samples",
        "Monte Carlo samples S",
        "Draws of the latent input per row (uncollapsed bound only).",
        true,
        uncollapsed.samples
    ),
    parsed_field!(
        real,
        "learning_rate",
        "Learning rate",
        "Adam's step size.",
        true,
        learning_rate
    ),
    parsed_field!(
        whole,
        "warmup_min",
        "Warm-up: min iterations",
        "The warm-up (no acyclicity pressure) runs at least this long.",
        true,
        warmup.min
    ),
    parsed_field!(
        whole,
        "warmup_max",
        "Warm-up: max iterations",
        "…and at most this long; in between it ends when the objective stops improving.",
        true,
        warmup.max
    ),
    parsed_field!(
        whole,
        "acyclic_max",
        "Acyclic phase: max iterations",
        "The penalty phase ends earlier once h(A) < τ or the graph is already a DAG.",
        true,
        acyclic_max
    ),
    parsed_field!(
        whole,
        "cooldown_min",
        "Cool-down: min iterations",
        "Refitting with the graph fixed runs at least this long.",
        true,
        cooldown.min
    ),
    parsed_field!(
        whole,
        "cooldown_max",
        "Cool-down: max iterations",
        "…and at most this long.",
        true,
        cooldown.max
    ),
    SettingField {
        key: "rho",
        label: "ρ (γ growth per epoch)",
        help: "γ rises by ρ every epoch of the acyclic phase; leave empty for 5·D.",
        advanced: true,
        cli_alias: None,
        get: |s| s.rho.map_or(String::new(), |r| r.to_string()),
        set: |s, text| {
            s.rho = if text.trim().is_empty() {
                None
            } else {
                Some(real(text)?)
            };
            Ok(())
        },
    },
    parsed_field!(
        whole,
        "gamma_interval",
        "Iterations per epoch (full batch)",
        "How often γ rises when every row is used in each iteration.",
        true,
        collapsed.gamma_interval
    ),
    parsed_field!(
        real,
        "tau",
        "τ (acyclicity tolerance)",
        "The acyclic phase ends when h(A) = |λ_max(A)| falls below τ.",
        true,
        tau
    ),
    parsed_field!(
        real,
        "linear_threshold",
        "Final threshold: linear θ",
        "A linear-kernel weight below this counts as no edge.",
        true,
        linear_threshold
    ),
    parsed_field!(
        real,
        "stationary_threshold",
        "Final threshold: stationary θ",
        "A stationary-kernel precision below this counts as no edge.",
        true,
        stationary_threshold
    ),
    parsed_field!(
        whole,
        "start_iterations",
        "Start: L-BFGS iterations",
        "Iterations of each variable's GP-regression starting fit.",
        true,
        start_iterations
    ),
    parsed_field!(
        whole,
        "max_parents",
        "Exact: most parents K",
        "Exact and hybrid searches: no variable gets more parents than this.",
        false,
        exact.max_parents
    ),
    parsed_field!(
        whole,
        "candidates",
        "Exact: candidate parents P",
        "Exact and hybrid searches: each variable's parents come from the P variables that explain it best on their own.",
        false,
        exact.candidates
    ),
    SettingField {
        key: "edge_prior",
        label: "Exact: graph prior",
        help: "\"auto\" (q = 0.2, or 0.05 for an exact search over at most 5 variables, which fits more rows), \"uniform\" (every DAG equally likely), or q: each pair of variables joined with probability q.",
        advanced: false,
        cli_alias: None,
        get: |s| s.exact.prior.as_text(),
        set: |s, text| {
            s.exact.prior = GraphPrior::parse(text.trim())?;
            Ok(())
        },
    },
    SettingField {
        key: "exact_few_rows",
        label: "Exact, ≤ 5 variables: rows used",
        help: "An exact search over at most 5 variables fits this many rows (\"all\" for every row; \"same\" for the rows used above): its plan is small, and more rows decide more graphs (the \"auto\" graph prior holds off their spurious gains).",
        advanced: false,
        cli_alias: None,
        get: |s| match s.exact.few_rows {
            None => "same".into(),
            Some(usize::MAX) => "all".into(),
            Some(n) => n.to_string(),
        },
        set: |s, text| {
            let text = text.trim();
            s.exact.few_rows = if text.eq_ignore_ascii_case("same") {
                None
            } else if text.eq_ignore_ascii_case("all") {
                Some(usize::MAX)
            } else {
                Some(whole(text).map_err(|_| FieldTextError::NotRowCount(text.to_string()))?)
            };
            Ok(())
        },
    },
    SettingField {
        key: "prune_below",
        label: "Exact: pruning margin δ (nats)",
        help: "Exact and hybrid searches: a family with two or more parents is fitted only when each of its subsets with one parent fewer gained at least −δ nats over its own subsets; \"off\" fits every family.",
        advanced: true,
        cli_alias: None,
        get: |s| s.exact.prune_below.map_or_else(|| "off".into(), |d| d.to_string()),
        set: |s, text| {
            let text = text.trim();
            s.exact.prune_below = if text.eq_ignore_ascii_case("off") {
                None
            } else {
                let delta: f64 = text
                    .parse()
                    .map_err(|_| FieldTextError::NotMargin(text.to_string()))?;
                if !(delta >= 0.0 && delta.is_finite()) {
                    return Err(FieldTextError::NegativeMargin(delta));
                }
                Some(delta)
            };
            Ok(())
        },
    },
];

/// The keys of [`SearchSettings`]' JSON form that are not hand-set fields, and why: set from a
/// preset, with `--settings FILE.json`, or by its own control.
pub const NOT_FIELDS: &[(&str, &str)] = &[
    (
        "bound",
        "fixed by the preset (the bound and its kernel go together)",
    ),
    (
        "warmup",
        "its min and max are fields; the window and tolerance come from the preset",
    ),
    (
        "cooldown",
        "its min and max are fields; the window and tolerance come from the preset",
    ),
    (
        "exact",
        "max_parents, candidates, edge_prior and exact_few_rows are fields; the family fits come from the preset",
    ),
    ("power_iterations", "the paper's 50; --settings FILE.json"),
    (
        "threads",
        "a resource, not a search choice: --threads, or the page's compute workers",
    ),
    ("dag_rule", "a research choice: --settings FILE.json"),
    (
        "two_cycle_penalty",
        "a research choice: --settings FILE.json",
    ),
    (
        "collapsed",
        "the collapsed bound's own settings: each is a field or listed here by its key",
    ),
    (
        "uncollapsed",
        "the uncollapsed bound's own settings: each is a field or listed here by its key",
    ),
    (
        "scale_start_precisions",
        "a research choice: --settings FILE.json",
    ),
    ("latent_start", "a research choice: --settings FILE.json"),
    (
        "prune_iterations",
        "a research choice: --settings FILE.json",
    ),
    ("prune_margin", "a research choice: --settings FILE.json"),
    ("subset_scaling", "a research choice: --settings FILE.json"),
    (
        "restart_selection",
        "a research choice: --settings FILE.json",
    ),
    (
        "method",
        "the Method enum's names: --method, the page's method selector",
    ),
];

/// The objects of the settings' JSON form that hold one bound's own settings
/// ([`CollapsedSettings`](super::CollapsedSettings),
/// [`UncollapsedSettings`](super::UncollapsedSettings)). Their keys are unique across
/// the whole form, so a key names one setting wherever it sits.
pub const BOUND_SECTIONS: [&str; 2] = ["collapsed", "uncollapsed"];

/// Every key of the settings' JSON form `json` that names one setting: the top-level keys, and
/// inside each of [`BOUND_SECTIONS`] its own keys too.
pub fn setting_keys(json: &serde_json::Value) -> Vec<String> {
    let mut keys = Vec::new();
    for (key, value) in json.as_object().into_iter().flatten() {
        keys.push(key.clone());
        if BOUND_SECTIONS.contains(&key.as_str()) {
            keys.extend(
                value
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k.clone()),
            );
        }
    }
    keys
}

/// The field called `key`.
pub fn setting_field(key: &str) -> Option<&'static SettingField> {
    SETTING_FIELDS.iter().find(|f| f.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::settings::Preset;

    /// Every key of the settings' JSON form is a field or is listed as set elsewhere (a new
    /// setting must be given a place), and no field is listed twice.
    #[test]
    fn every_setting_has_a_place() {
        let json = serde_json::to_value(Preset::Interactive.settings()).unwrap();
        let keys = setting_keys(&json);
        let unique: std::collections::HashSet<&String> = keys.iter().collect();
        assert_eq!(unique.len(), keys.len(), "a key is used twice: {keys:?}");
        for key in &keys {
            let field = SETTING_FIELDS.iter().any(|f| f.key == key.as_str());
            let listed = NOT_FIELDS.iter().any(|(k, _)| k == key);
            assert!(
                field || listed,
                "setting {key} is neither a field nor in NOT_FIELDS"
            );
            assert!(
                !(field && listed),
                "setting {key} is both a field and in NOT_FIELDS"
            );
        }
        for (key, _) in NOT_FIELDS {
            assert!(
                keys.iter().any(|k| k == key),
                "NOT_FIELDS names {key}, not a setting"
            );
        }
        let mut seen = std::collections::HashSet::new();
        assert!(SETTING_FIELDS.iter().all(|f| seen.insert(f.key)));
    }

    /// Each field reads back what it writes, for every preset.
    #[test]
    fn every_field_round_trips_through_its_text() {
        for &preset in Preset::ALL {
            let settings = preset.settings();
            let mut copy = Preset::Interactive.settings();
            for f in SETTING_FIELDS {
                (f.set)(&mut copy, &(f.get)(&settings)).unwrap();
                assert_eq!((f.get)(&copy), (f.get)(&settings), "{}", f.key);
            }
        }
        let mut s = Preset::Interactive.settings();
        let field = setting_field("warmup_min").unwrap();
        assert_eq!(
            (field.set)(&mut s, "ten").unwrap_err().to_string(),
            "'ten' is not a whole number ≥ 0"
        );
        (setting_field("max_rows").unwrap().set)(&mut s, "ALL").unwrap();
        assert_eq!(s.max_rows, usize::MAX);
        (setting_field("rho").unwrap().set)(&mut s, " ").unwrap();
        assert_eq!(s.rho, None);
        assert_eq!(
            setting_field("inducing_points").unwrap().flag(),
            "inducing-points"
        );
    }
}
