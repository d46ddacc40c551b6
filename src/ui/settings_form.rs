//! The settings form: which fields it has, their values for a preset, and reading them back into
//! [`SearchSettings`] and a seed. A value that cannot be used is explained by naming its field;
//! nothing is silently clamped or fixed.

use crate::discovery::cgp::{Preset, SearchSettings};
use crate::discovery::exact::GraphPrior;
use crate::protocol::MAX_COMPUTE_WORKERS;

/// One field of the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldSpec {
    /// Stable key (also the input's `name` and `data-field` attribute).
    pub key: &'static str,
    pub label: &'static str,
    /// One sentence shown as the field's hint.
    pub help: &'static str,
    /// Shown in the collapsed "advanced" section.
    pub advanced: bool,
}

const fn field(
    key: &'static str,
    label: &'static str,
    help: &'static str,
    advanced: bool,
) -> FieldSpec {
    FieldSpec {
        key,
        label,
        help,
        advanced,
    }
}

/// The form's fields, in display order.
pub const FIELDS: [FieldSpec; 23] = [
    field(
        "restarts",
        "Restarts",
        "Independent runs from different random starts; the one with the highest evidence wins.",
        false,
    ),
    field(
        "seed",
        "Seed",
        "Every random choice (row subset, starts, Monte Carlo draws) follows from this number.",
        false,
    ),
    field(
        "workers",
        "Compute workers",
        "Web Workers that compute in parallel: \"auto\" is one per core but one (at most 8). The graph does not depend on it.",
        false,
    ),
    field(
        "max_rows",
        "Rows used",
        "A seeded random subset of rows is fitted when the data have more (\"all\" for every row).",
        true,
    ),
    field(
        "inducing_points",
        "Inducing points M",
        "Per variable; more is more accurate and slower (capped at the rows used).",
        true,
    ),
    field(
        "inducing_per_input",
        "Extra M per input",
        "Inducing points added per kernel input (candidate parents + w), so M grows with the number of variables.",
        true,
    ),
    field(
        "batch_size",
        "Batch size b",
        "Rows per minibatch (paper preset's uncollapsed bound only).",
        true,
    ),
    field(
        "samples",
        "Monte Carlo samples S",
        "Draws of the latent input per row (uncollapsed bound only).",
        true,
    ),
    field("learning_rate", "Learning rate", "Adam's step size.", true),
    field(
        "warmup_min",
        "Warm-up: min iterations",
        "The warm-up (no acyclicity pressure) runs at least this long.",
        true,
    ),
    field(
        "warmup_max",
        "Warm-up: max iterations",
        "…and at most this long; in between it ends when the objective stops improving.",
        true,
    ),
    field(
        "acyclic_max",
        "Acyclic phase: max iterations",
        "The penalty phase ends earlier once h(A) < τ or the graph is already a DAG.",
        true,
    ),
    field(
        "cooldown_min",
        "Cool-down: min iterations",
        "Refitting with the graph fixed runs at least this long.",
        true,
    ),
    field(
        "cooldown_max",
        "Cool-down: max iterations",
        "…and at most this long.",
        true,
    ),
    field(
        "rho",
        "ρ (γ growth per epoch)",
        "γ rises by ρ every epoch of the acyclic phase; leave empty for 5·D.",
        true,
    ),
    field(
        "gamma_interval",
        "Iterations per epoch (full batch)",
        "How often γ rises when every row is used in each iteration.",
        true,
    ),
    field(
        "tau",
        "τ (acyclicity tolerance)",
        "The acyclic phase ends when h(A) = |λ_max(A)| falls below τ.",
        true,
    ),
    field(
        "linear_threshold",
        "Final threshold: linear θ",
        "A linear-kernel weight below this counts as no edge.",
        true,
    ),
    field(
        "stationary_threshold",
        "Final threshold: stationary θ",
        "A stationary-kernel precision below this counts as no edge.",
        true,
    ),
    field(
        "start_iterations",
        "Start: L-BFGS iterations",
        "Iterations of each variable's GP-regression starting fit.",
        true,
    ),
    field(
        "max_parents",
        "Exact: most parents K",
        "Exact and hybrid searches: no variable gets more parents than this.",
        false,
    ),
    field(
        "candidates",
        "Exact: candidate parents P",
        "Exact and hybrid searches: each variable's parents come from the P variables that explain it best on their own.",
        false,
    ),
    field(
        "edge_prior",
        "Exact: graph prior",
        "\"uniform\" (every DAG equally likely), or q: each pair of variables joined with probability q.",
        false,
    ),
];

/// The form's values (in [`FIELDS`] order) for `preset` and `seed`.
pub fn preset_values(preset: Preset, seed: u64) -> Vec<String> {
    let s = preset.settings();
    let rows = if s.max_rows == usize::MAX {
        "all".to_string()
    } else {
        s.max_rows.to_string()
    };
    let rho = s.rho.map_or(String::new(), |r| r.to_string());
    FIELDS
        .iter()
        .map(|f| match f.key {
            "restarts" => s.restarts.to_string(),
            "seed" => seed.to_string(),
            "workers" => "auto".to_string(),
            "max_rows" => rows.clone(),
            "inducing_points" => s.inducing_points.to_string(),
            "inducing_per_input" => s.inducing_per_input.to_string(),
            "batch_size" => s.batch_size.to_string(),
            "samples" => s.samples.to_string(),
            "learning_rate" => s.learning_rate.to_string(),
            "warmup_min" => s.warmup.min.to_string(),
            "warmup_max" => s.warmup.max.to_string(),
            "acyclic_max" => s.acyclic_max.to_string(),
            "cooldown_min" => s.cooldown.min.to_string(),
            "cooldown_max" => s.cooldown.max.to_string(),
            "rho" => rho.clone(),
            "gamma_interval" => s.gamma_interval.to_string(),
            "tau" => s.tau.to_string(),
            "linear_threshold" => s.linear_threshold.to_string(),
            "stationary_threshold" => s.stationary_threshold.to_string(),
            "start_iterations" => s.start_iterations.to_string(),
            "max_parents" => s.exact.max_parents.to_string(),
            "candidates" => s.exact.candidates.to_string(),
            "edge_prior" => s.exact.prior.as_text(),
            other => unreachable!("field {other} has no preset value"),
        })
        .collect()
}

/// The form's values after choosing `preset`: its values, with the seed the user had typed kept
/// (0 when it is not a number).
pub fn values_for_preset(preset: Preset, values: &[String]) -> Vec<String> {
    let seed = FIELDS
        .iter()
        .position(|f| f.key == "seed")
        .and_then(|k| values.get(k))
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    preset_values(preset, seed)
}

/// Sets field `key` of the form's values to `text`, or says there is no such field.
pub fn set_field(values: &mut [String], key: &str, text: &str) -> Result<(), String> {
    let k = FIELDS
        .iter()
        .position(|f| f.key == key)
        .ok_or_else(|| format!("the settings have no field {key}"))?;
    let slot = values
        .get_mut(k)
        .ok_or_else(|| format!("the form has no value for {key}"))?;
    *slot = text.to_string();
    Ok(())
}

/// Reads the form (values in [`FIELDS`] order) into settings based on `preset` (which fixes
/// what the form does not show: the bound, phase-convergence windows and tolerances) and a seed.
/// The first unusable value is explained, naming its field.
pub fn parse_settings(preset: Preset, values: &[String]) -> Result<(SearchSettings, u64), String> {
    if values.len() != FIELDS.len() {
        return Err(format!(
            "the settings form has {} values, expected {}",
            values.len(),
            FIELDS.len()
        ));
    }
    let mut s = preset.settings();
    let mut seed = 0u64;
    for (f, raw) in FIELDS.iter().zip(values) {
        let v = raw.trim();
        let whole = || -> Result<usize, String> {
            v.parse::<usize>()
                .map_err(|_| format!("{}: '{v}' is not a whole number ≥ 0", f.label))
        };
        let real = || -> Result<f64, String> {
            match v.parse::<f64>() {
                Ok(x) if x.is_finite() => Ok(x),
                _ => Err(format!("{}: '{v}' is not a finite number", f.label)),
            }
        };
        match f.key {
            "restarts" => s.restarts = whole()?,
            "seed" => {
                seed = v.parse::<u64>().map_err(|_| {
                    format!(
                        "{}: '{v}' is not a whole number from 0 to 2^64 − 1",
                        f.label
                    )
                })?
            }
            "workers" => {
                s.threads = if v.eq_ignore_ascii_case("auto") {
                    0
                } else {
                    match v.parse::<usize>() {
                        Ok(n) if (1..=MAX_COMPUTE_WORKERS).contains(&n) => n,
                        _ => {
                            return Err(format!(
                                "{}: '{v}' is not \"auto\" or a whole number from 1 to {MAX_COMPUTE_WORKERS}",
                                f.label
                            ))
                        }
                    }
                }
            }
            "max_rows" => {
                s.max_rows = if v.eq_ignore_ascii_case("all") {
                    usize::MAX
                } else {
                    whole()?
                }
            }
            "inducing_points" => s.inducing_points = whole()?,
            "inducing_per_input" => s.inducing_per_input = whole()?,
            "batch_size" => s.batch_size = whole()?,
            "samples" => s.samples = whole()?,
            "learning_rate" => s.learning_rate = real()?,
            "warmup_min" => s.warmup.min = whole()?,
            "warmup_max" => s.warmup.max = whole()?,
            "acyclic_max" => s.acyclic_max = whole()?,
            "cooldown_min" => s.cooldown.min = whole()?,
            "cooldown_max" => s.cooldown.max = whole()?,
            "rho" => s.rho = if v.is_empty() { None } else { Some(real()?) },
            "gamma_interval" => s.gamma_interval = whole()?,
            "tau" => s.tau = real()?,
            "linear_threshold" => s.linear_threshold = real()?,
            "stationary_threshold" => s.stationary_threshold = real()?,
            "start_iterations" => s.start_iterations = whole()?,
            "max_parents" => s.exact.max_parents = whole()?,
            "candidates" => s.exact.candidates = whole()?,
            "edge_prior" => {
                s.exact.prior = GraphPrior::parse(v).map_err(|e| format!("{}: {e}", f.label))?
            }
            other => return Err(format!("unknown settings field {other}")),
        }
    }
    // In the browser, `threads` is the number of compute workers (0: the default for the
    // browser's cores, `protocol::compute_workers`).
    s.validate()?;
    Ok((s, seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(values: &mut [String], key: &str, value: &str) {
        let k = FIELDS.iter().position(|f| f.key == key).unwrap();
        values[k] = value.to_string();
    }

    #[test]
    fn a_preset_reads_back_as_itself() {
        for &preset in Preset::ALL {
            let (settings, seed) = parse_settings(preset, &preset_values(preset, 42)).unwrap();
            let mut expected = preset.settings();
            expected.threads = 0;
            assert_eq!(settings, expected, "{preset:?}");
            assert_eq!(seed, 42);
        }
        assert_eq!(
            preset_values(Preset::Paper, 0)
                [FIELDS.iter().position(|f| f.key == "max_rows").unwrap()],
            "all"
        );
    }

    #[test]
    fn every_field_is_read_into_its_setting() {
        let mut v = preset_values(Preset::Interactive, 0);
        for (key, value) in [
            ("restarts", "3"),
            ("seed", "18446744073709551615"),
            ("max_rows", "150"),
            ("inducing_points", "12"),
            ("batch_size", "64"),
            ("samples", "7"),
            ("learning_rate", "0.02"),
            ("warmup_min", "10"),
            ("warmup_max", "20"),
            ("acyclic_max", "30"),
            ("cooldown_min", "5"),
            ("cooldown_max", "6"),
            ("rho", "2.5"),
            ("gamma_interval", "3"),
            ("tau", "0.01"),
            ("linear_threshold", "0.001"),
            ("stationary_threshold", "0.1"),
            ("start_iterations", "9"),
        ] {
            set(&mut v, key, value);
        }
        let (s, seed) = parse_settings(Preset::Interactive, &v).unwrap();
        assert_eq!(seed, u64::MAX);
        assert_eq!((s.restarts, s.max_rows, s.inducing_points), (3, 150, 12));
        assert_eq!((s.batch_size, s.samples, s.learning_rate), (64, 7, 0.02));
        assert_eq!((s.warmup.min, s.warmup.max, s.acyclic_max), (10, 20, 30));
        assert_eq!((s.cooldown.min, s.cooldown.max), (5, 6));
        assert_eq!((s.rho, s.gamma_interval, s.tau), (Some(2.5), 3, 0.01));
        assert_eq!((s.linear_threshold, s.stationary_threshold), (0.001, 0.1));
        assert_eq!(s.start_iterations, 9);
    }

    #[test]
    fn unusable_values_are_explained_by_field_not_fixed() {
        let cases = [
            (
                "inducing_points",
                "abc",
                "Inducing points M: 'abc' is not a whole number",
            ),
            ("restarts", "-1", "Restarts: '-1' is not a whole number"),
            ("restarts", "0", "at least one restart"),
            (
                "tau",
                "inf",
                "τ (acyclicity tolerance): 'inf' is not a finite number",
            ),
            ("tau", "0", "τ must be a positive number"),
            ("seed", "1.5", "Seed: '1.5' is not a whole number"),
            (
                "warmup_min",
                "700",
                "the warm-up minimum (700) exceeds its maximum (600)",
            ),
            ("max_rows", "5", "rows used must be at least 10"),
            ("rho", "-2", "ρ must be a positive number"),
        ];
        for (key, value, expected) in cases {
            let mut v = preset_values(Preset::Interactive, 0);
            set(&mut v, key, value);
            let err = parse_settings(Preset::Interactive, &v).unwrap_err();
            assert!(err.contains(expected), "{key}={value}: {err}");
        }
    }

    #[test]
    fn a_preset_keeps_the_seed_and_a_field_is_set_by_its_key() {
        let seed_at = FIELDS.iter().position(|f| f.key == "seed").unwrap();
        let restarts_at = FIELDS.iter().position(|f| f.key == "restarts").unwrap();
        let mut values = preset_values(Preset::Interactive, 7);
        values[restarts_at] = "9".into();
        let thorough = values_for_preset(Preset::Thorough, &values);
        assert_eq!(thorough, preset_values(Preset::Thorough, 7));
        values[seed_at] = "not a number".into();
        assert_eq!(
            values_for_preset(Preset::Interactive, &values)[seed_at],
            "0"
        );
        let mut values = preset_values(Preset::Interactive, 0);
        set_field(&mut values, "restarts", "1").unwrap();
        assert_eq!(values[restarts_at], "1");
        assert!(parse_settings(Preset::Interactive, &values).is_ok());
        assert!(set_field(&mut values, "colour", "red")
            .unwrap_err()
            .contains("no field colour"));
    }
}
