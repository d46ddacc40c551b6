//! The settings form: which fields it has, their values for a preset, and reading them back into
//! [`SearchSettings`] and a seed. A value that cannot be used is explained by naming its field;
//! nothing is silently clamped or fixed.

use std::sync::LazyLock;

use crate::discovery::settings::{
    setting_field, Preset, SearchSettings, SettingField, SETTING_FIELDS,
};
use crate::worker::protocol::MAX_COMPUTE_WORKERS;

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

/// The form's fields, in display order: the search settings of
/// [`SETTING_FIELDS`](crate::discovery::settings::SETTING_FIELDS) (their one declaration), with the
/// seed and the number of compute workers, which only the page sets this way, after the first.
pub static FIELDS: LazyLock<Vec<FieldSpec>> = LazyLock::new(|| {
    let from = |f: &SettingField| FieldSpec {
        key: f.key,
        label: f.label,
        help: f.help,
        advanced: f.advanced,
    };
    let mut fields: Vec<FieldSpec> = SETTING_FIELDS.iter().map(from).collect();
    let page_only = [
        FieldSpec {
            key: "seed",
            label: "Seed",
            help: "Every random choice (row subset, starts, Monte Carlo draws) follows from this number.",
            advanced: false,
        },
        FieldSpec {
            key: "workers",
            label: "Compute workers",
            help: "Web Workers that compute in parallel: \"auto\" is one per core but one (at most 8). The graph does not depend on it.",
            advanced: false,
        },
    ];
    fields.splice(1..1, page_only);
    fields
});

/// The form's values (in [`FIELDS`] order) for `preset` and `seed`.
pub fn preset_values(preset: Preset, seed: u64) -> Vec<String> {
    let s = preset.settings();
    FIELDS
        .iter()
        .map(|f| match f.key {
            "seed" => seed.to_string(),
            "workers" => "auto".to_string(),
            key => setting_field(key).map_or_else(String::new, |field| (field.get)(&s)),
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
        match f.key {
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
            key => {
                let field =
                    setting_field(key).ok_or_else(|| format!("unknown settings field {key}"))?;
                (field.set)(&mut s, v).map_err(|e| format!("{}: {e}", f.label))?;
            }
        }
    }
    // In the browser, `threads` is the number of compute workers (0: the default for the
    // browser's cores, `protocol::compute_workers`).
    s.validate().map_err(|e| e.to_string())?;
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
        assert_eq!(
            (
                s.uncollapsed.batch_size,
                s.uncollapsed.samples,
                s.learning_rate
            ),
            (64, 7, 0.02)
        );
        assert_eq!((s.warmup.min, s.warmup.max, s.acyclic_max), (10, 20, 30));
        assert_eq!((s.cooldown.min, s.cooldown.max), (5, 6));
        assert_eq!(
            (s.rho, s.collapsed.gamma_interval, s.tau),
            (Some(2.5), 3, 0.01)
        );
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
            ("restarts", "0", "restarts must be at least 1"),
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
