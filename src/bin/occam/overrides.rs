//! Command-line overrides of a preset's settings, shared by `discover` and `bench`.

use clap::Args;
use occam::discovery::cgp::SearchSettings;

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
}

impl Overrides {
    /// Applies every override that was given.
    pub fn apply(&self, settings: &mut SearchSettings) {
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
    }
}
