//! Command-line overrides of a preset's settings, shared by `discover` and `bench`.

use occam::base::names::Choice;
use std::path::{Path, PathBuf};

use clap::{Arg, ArgMatches, Args, Command, FromArgMatches};
use occam::discovery::settings::{
    setting_keys, Method, SearchSettings, SettingField, BOUND_SECTIONS, SETTING_FIELDS,
};

use crate::{read_file_limited, CliError};

#[derive(Debug, Args)]
pub struct Overrides {
    /// One flag per hand-set search setting (`--restarts`, `--max-rows`, `--warmup-min`, …).
    #[command(flatten)]
    pub fields: SettingFlags,
    /// Worker threads (0 = all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Caps every phase (warm-up, acyclic, cool-down) at this many iterations.
    #[arg(long)]
    pub max_iterations: Option<usize>,
    /// The search: `cgp` (the continuous search), `exact` (every family scored, the best DAG by
    /// dynamic programming, the posterior), `hybrid` (cgp, then exact with cgp's edges added to
    /// the candidate parents) or `auto` (exact up to 12 variables, hybrid above; the result says
    /// which ran and why). Default: `discover` auto (cgp with --preset paper), `bench` the
    /// preset's (cgp).
    #[arg(long, value_name = "auto|cgp|exact|hybrid")]
    pub method: Option<String>,
    /// A JSON object of search settings (the keys of result.json's `settings`) that replace the
    /// preset's, e.g. `{"subset_scaling": "count_rows"}`; applied before the flags above.
    #[arg(long, value_name = "FILE.json")]
    pub settings: Option<PathBuf>,
}

impl Overrides {
    /// Applies every override that was given: the settings file's keys first, then the flags.
    pub fn apply(&self, settings: &mut SearchSettings) -> Result<(), CliError> {
        if let Some(path) = &self.settings {
            *settings = merge_settings_file(settings, path)?;
        }
        for (field, text) in &self.fields.given {
            (field.set)(settings, text)
                .map_err(|e| CliError(format!("--{}: {e}", field.flag())))?;
        }
        if let Some(t) = self.threads {
            settings.threads = t;
        }
        if let Some(cap) = self.max_iterations {
            settings.cap_iterations(cap);
        }
        if let Some(m) = &self.method {
            settings.method = Method::parse(m).map_err(|e| CliError(e.to_string()))?;
        }
        Ok(())
    }
}

/// The flags of [`SETTING_FIELDS`], built from that one declaration: `--<key with dashes>`
/// (and the field's older spelling, if any) taking the text the page's form takes, with the
/// field's help. Those given are applied in the declaration's order.
#[derive(Debug, Clone, Default)]
pub struct SettingFlags {
    given: Vec<(&'static SettingField, String)>,
}

impl SettingFlags {
    /// The flags given, as typed (`--restarts`).
    pub fn flags_given(&self) -> Vec<String> {
        self.given
            .iter()
            .map(|(field, _)| format!("--{}", field.flag()))
            .collect()
    }
}

impl FromArgMatches for SettingFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = Self::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for field in SETTING_FIELDS {
            if let Some(text) = matches.get_one::<String>(field.key) {
                self.given.retain(|(f, _)| f.key != field.key);
                self.given.push((field, text.clone()));
            }
        }
        Ok(())
    }
}

impl Args for SettingFlags {
    fn augment_args(command: Command) -> Command {
        SETTING_FIELDS.iter().fold(command, |command, field| {
            let mut arg = Arg::new(field.key)
                .long(field.flag())
                .value_name("VALUE")
                .num_args(1)
                .help(format!(
                    "{} (default: the preset's)",
                    field.help.trim_end_matches('.')
                ));
            if let Some(alias) = field.cli_alias {
                arg = arg.visible_alias(alias);
            }
            command.arg(arg)
        })
    }

    fn augment_args_for_update(command: Command) -> Command {
        Self::augment_args(command)
    }
}

/// `base` with every key of the JSON object in `path` replacing its own; an unknown key or a value
/// of the wrong type is an error that names it. A bound's own settings may be given in its object
/// (`{"uncollapsed": {"samples": 5}}`, the keys given replacing only theirs) or at the top level
/// by their key, as their flags are (`{"samples": 5}`).
fn merge_settings_file(base: &SearchSettings, path: &Path) -> Result<SearchSettings, CliError> {
    let shown = path.display();
    let bytes = read_file_limited(path, 1 << 20)?;
    let given: serde_json::Value = serde_json::from_slice(&bytes)
        .map_err(|e| CliError(format!("{shown} is not valid JSON: {e}")))?;
    let serde_json::Value::Object(given) = given else {
        return Err(CliError(format!(
            "{shown} must hold a JSON object of settings, e.g. {{\"restarts\": 4}}"
        )));
    };
    let mut merged = serde_json::to_value(base)
        .map_err(|e| CliError(format!("cannot represent the settings as JSON: {e}")))?;
    let serde_json::Value::Object(fields) = &mut merged else {
        return Err(CliError("the settings are not a JSON object".into()));
    };
    let known = setting_keys(&serde_json::Value::Object(fields.clone())).join(", ");
    let unknown =
        |key: &str| CliError(format!("{shown}: unknown setting '{key}' (known: {known})"));
    for (key, value) in given {
        let section = BOUND_SECTIONS.into_iter().find(|&s| {
            fields
                .get(s)
                .and_then(|v| v.as_object())
                .is_some_and(|o| o.contains_key(&key))
        });
        match (fields.get_mut(&key), section) {
            (Some(slot), _) => merge_value(slot, value, &key).map_err(|e| match e {
                MergeError::Unknown(path) => unknown(&path),
                MergeError::NotObject(path) => CliError(format!(
                    "{shown}: '{path}' must be an object of its settings"
                )),
            })?,
            (None, Some(section)) => {
                if let Some(own) = fields.get_mut(section).and_then(|v| v.as_object_mut()) {
                    own.insert(key, value);
                }
            }
            (None, None) => return Err(unknown(&key)),
        }
    }
    serde_json::from_value(merged).map_err(|e| CliError(format!("{shown}: {e}")))
}

/// Why a settings object could not be merged: the dotted path of the key at fault.
enum MergeError {
    Unknown(String),
    NotObject(String),
}

/// Merges `given` into `own` at `path`: an object given for an object setting replaces only the
/// keys it names, recursively (`{"exact": {"family": {"restarts": 3}}}` keeps the other family
/// settings); an unknown key is named by its dotted path. A one-key object is an enum's variant
/// (`{"race": {"probe": 30}}`), so a different variant replaces it whole; a bound's object must
/// be given as an object.
fn merge_value(
    own: &mut serde_json::Value,
    given: serde_json::Value,
    path: &str,
) -> Result<(), MergeError> {
    use serde_json::Value;
    match (own, given) {
        (Value::Object(own), Value::Object(given)) => {
            let variant = own.len() == 1;
            for (key, value) in given {
                let inner = format!("{path}.{key}");
                match own.get_mut(&key) {
                    Some(slot) => merge_value(slot, value, &inner)?,
                    None if variant => {
                        own.clear();
                        own.insert(key, value);
                    }
                    None => return Err(MergeError::Unknown(inner)),
                }
            }
            Ok(())
        }
        (Value::Object(_), _) if BOUND_SECTIONS.contains(&path) => {
            Err(MergeError::NotObject(path.to_string()))
        }
        (own, given) => {
            *own = given;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        overrides: Overrides,
    }

    /// Every hand-set setting has its flag, and a flag sets what the page's field of the same key
    /// sets.
    #[test]
    fn every_setting_field_is_a_flag() {
        let command = <Cli as clap::CommandFactory>::command();
        for field in SETTING_FIELDS {
            let flag = field.flag();
            assert!(
                command
                    .get_arguments()
                    .any(|a| a.get_long() == Some(flag.as_str())),
                "--{flag} is missing"
            );
        }
        let cli = Cli::try_parse_from([
            "occam",
            "--restarts",
            "3",
            "--inducing",
            "12",
            "--max-rows",
            "all",
            "--warmup-min",
            "7",
            "--edge-prior",
            "0.2",
            "--rho",
            "",
        ])
        .unwrap();
        let mut settings = occam::discovery::settings::Preset::Interactive.settings();
        cli.overrides.apply(&mut settings).unwrap();
        assert_eq!(
            (
                settings.restarts,
                settings.inducing_points,
                settings.max_rows
            ),
            (3, 12, usize::MAX)
        );
        assert_eq!((settings.warmup.min, settings.rho), (7, None));
        assert_eq!(settings.exact.prior.as_text(), "0.2");
        let bad = Cli::try_parse_from(["occam", "--tau", "inf"]).unwrap();
        let err = bad.overrides.apply(&mut settings).unwrap_err();
        assert_eq!(err.0, "--tau: 'inf' is not a finite number");
    }
}
