//! Command-line overrides of a preset's settings, shared by `discover` and `bench`.

use std::path::{Path, PathBuf};

use clap::Args;
use occam::discovery::cgp::{Method, SearchSettings};
use occam::discovery::exact::GraphPrior;

use crate::{read_file_limited, CliError};

#[derive(Debug, Args)]
pub struct Overrides {
    /// Independent restarts (default: the preset's).
    #[arg(long)]
    pub restarts: Option<usize>,
    /// Rows used for fitting (default: the preset's; a seeded random subset when there are more).
    #[arg(long)]
    pub max_rows: Option<usize>,
    /// Inducing points per variable (default: the preset's).
    #[arg(long)]
    pub inducing: Option<usize>,
    /// Worker threads (0 = all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Caps every phase (warm-up, acyclic, cool-down) at this many iterations.
    #[arg(long)]
    pub max_iterations: Option<usize>,
    /// The search: `cgp` (the continuous search), `exact` (every family scored, the best DAG by
    /// dynamic programming, the posterior) or `hybrid` (cgp, then exact with cgp's edges added to
    /// the candidate parents). Default: the preset's (cgp).
    #[arg(long, value_name = "cgp|exact|hybrid")]
    pub method: Option<String>,
    /// Exact search: the most parents a variable may have (K).
    #[arg(long, value_name = "K")]
    pub max_parents: Option<usize>,
    /// Exact search: candidate parents per variable, chosen by one-parent evidence gain (P).
    #[arg(long, value_name = "P")]
    pub candidates: Option<usize>,
    /// Exact search: the graph prior, `uniform` or an edge probability q in (0, 1) (each pair of
    /// variables joined independently with probability q).
    #[arg(long, value_name = "uniform|q")]
    pub edge_prior: Option<String>,
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
        if let Some(r) = self.restarts {
            settings.restarts = r;
        }
        if let Some(m) = self.max_rows {
            settings.max_rows = m;
        }
        if let Some(m) = self.inducing {
            settings.inducing_points = m;
        }
        if let Some(t) = self.threads {
            settings.threads = t;
        }
        if let Some(cap) = self.max_iterations {
            settings.cap_iterations(cap);
        }
        if let Some(m) = &self.method {
            settings.method = Method::parse(m).map_err(CliError)?;
        }
        if let Some(k) = self.max_parents {
            settings.exact.max_parents = k;
        }
        if let Some(p) = self.candidates {
            settings.exact.candidates = p;
        }
        if let Some(prior) = &self.edge_prior {
            settings.exact.prior =
                GraphPrior::parse(prior).map_err(|e| CliError(format!("--edge-prior: {e}")))?;
        }
        Ok(())
    }
}

/// `base` with every key of the JSON object in `path` replacing its own; an unknown key or a value
/// of the wrong type is an error that names it.
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
    for (key, value) in given {
        if !fields.contains_key(&key) {
            let known: Vec<&str> = fields.keys().map(String::as_str).collect();
            return Err(CliError(format!(
                "{shown}: unknown setting '{key}' (known: {})",
                known.join(", ")
            )));
        }
        fields.insert(key, value);
    }
    serde_json::from_value(merged).map_err(|e| CliError(format!("{shown}: {e}")))
}
