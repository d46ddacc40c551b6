//! What a family fit reports: its score, each optimiser run's record, and the work of many fits
//! summed for a run's summary.

use super::*;

/// L-BFGS iterations at which a fit record keeps the bound (and always the last one): enough to
/// see, offline, what a fit with a lower cap or an earlier convergence stop would have scored.
pub const TRACE_CHECKPOINT_EVERY: usize = 10;

/// What one optimiser run of a family fit was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FitRole {
    /// A whole fit: start, Adam, L-BFGS to convergence or the caps.
    Full,
    /// One latent start's first iterations in a race (its L-BFGS cap is the probe length).
    Probe,
    /// The race's leader continued from where its probe ended.
    Continued,
    /// L-BFGS from the best subset's fit ([`FamilyFitScheme::Warm`]); no latent start of its own.
    Warm,
}

/// How one fit of a family went (issue 33: the work a score costs, and whether caps decided it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitRecord {
    pub role: FitRole,
    /// Which start this fit used (None for a warm start, which continues its subset's fit).
    pub latent_start: Option<LatentStart>,
    /// The bound reached, or why the fit failed.
    pub bound: Result<f64, FitError>,
    /// The GP-regression start's L-BFGS run (a conditional's), when it ran.
    pub start: Option<StageStats>,
    /// Adam steps taken (Adam stops as soon as F beats the noise model).
    pub adam_steps: usize,
    /// The main L-BFGS run.
    pub lbfgs: Option<StageStats>,
    /// F at Adam's start, and at L-BFGS's start.
    pub start_bound: Option<f64>,
    pub adam_bound: Option<f64>,
    /// (L-BFGS iteration, F) every [`TRACE_CHECKPOINT_EVERY`] iterations and at the last one.
    pub checkpoints: Vec<(usize, f64)>,
    /// Attempts the jitter ladder needed (1 unless a factorisation failed).
    pub attempts: usize,
}

impl FitRecord {
    pub(super) fn of(
        role: FitRole,
        latent_start: Option<LatentStart>,
        fit: &Result<CollapsedFit, FitError>,
    ) -> Self {
        match fit {
            Ok(f) => {
                let last = f.lbfgs_trace.len().saturating_sub(1);
                let checkpoints = f
                    .lbfgs_trace
                    .iter()
                    .enumerate()
                    .filter(|&(k, _)| k % TRACE_CHECKPOINT_EVERY == 0 || k == last)
                    .map(|(k, &v)| (k, v))
                    .collect();
                Self {
                    role,
                    latent_start,
                    bound: Ok(f.bound),
                    start: f.start,
                    adam_steps: f.adam_steps,
                    lbfgs: Some(StageStats {
                        iterations: f.lbfgs_iterations,
                        evaluations: f.lbfgs_evaluations,
                        stop: f.stop,
                    }),
                    start_bound: Some(f.start_bound),
                    adam_bound: Some(f.adam_bound),
                    checkpoints,
                    attempts: f.attempts,
                }
            }
            Err(e) => Self {
                role,
                latent_start,
                bound: Err(e.clone()),
                start: None,
                adam_steps: 0,
                lbfgs: None,
                start_bound: None,
                adam_bound: None,
                checkpoints: Vec::new(),
                attempts: 0,
            },
        }
    }

    /// Whether a stage of this fit ended on its cap (iterations or evaluations) rather than on
    /// convergence: the start's L-BFGS, Adam (all its steps without beating the noise model) or
    /// the main L-BFGS.
    pub fn hit_cap(&self, adam_cap: usize) -> bool {
        self.start.is_some_and(|s| s.stop.hit_cap())
            || (self.role != FitRole::Probe && self.lbfgs.is_some_and(|s| s.stop.hit_cap()))
            || (adam_cap > 0 && self.adam_steps >= adam_cap)
    }

    /// Bound evaluations (with gradient) this fit made: the start's, Adam's and L-BFGS's.
    pub fn evaluations(&self) -> usize {
        self.start.map_or(0, |s| s.evaluations) + self.latent_evaluations()
    }

    /// The evaluations of the model with its latent input (Adam's and L-BFGS's; the start's GP
    /// regression has none), the ones whose Ψ2 sums a device can compute.
    pub fn latent_evaluations(&self) -> usize {
        self.adam_steps + self.lbfgs.map_or(0, |s| s.evaluations)
    }
}

/// The work behind scores, summed: what result.json reports and the benches compare.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FitWork {
    /// Families and fits counted.
    pub families: usize,
    pub fits: usize,
    /// Fits that failed, and families whose every fit failed (they took their closed-form floor).
    pub fits_failed: usize,
    pub families_on_floor_after_failures: usize,
    /// Fits with a stage that ended on its cap, and per stage.
    pub fits_hit_cap: usize,
    pub start_capped: usize,
    pub adam_capped: usize,
    pub lbfgs_capped: usize,
    /// Iterations per stage, summed over fits.
    pub start_iterations: usize,
    pub adam_steps: usize,
    pub lbfgs_iterations: usize,
    /// Bound evaluations (with gradient), all stages.
    pub evaluations: usize,
    /// How the main L-BFGS runs ended (probes that reached their length are not counted).
    pub lbfgs_stops: StopCounts,
    /// Families whose fits computed their Ψ2 sums on a GPU ([`ComputedOn::Gpu`]) and on the CPU;
    /// the rest were scored before where was recorded.
    #[serde(default)]
    pub families_on_gpu: usize,
    #[serde(default)]
    pub families_on_cpu: usize,
}

/// How many L-BFGS runs ended for each reason ([`StopReason`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopCounts {
    pub gradient: usize,
    pub relative_reduction: usize,
    pub stalled: usize,
    pub line_search_failed: usize,
    /// Iteration or evaluation cap.
    pub cap: usize,
}

impl FitWork {
    /// Adds one family's score, fitted with `adam_cap` Adam steps at most.
    pub fn add(&mut self, score: &FamilyScore, adam_cap: usize) {
        self.families += 1;
        match score.computed_on {
            Some(ComputedOn::Gpu) => self.families_on_gpu += 1,
            Some(ComputedOn::Cpu) => self.families_on_cpu += 1,
            None => {}
        }
        if !score.fits.is_empty() && score.fits.iter().all(|f| f.bound.is_err()) {
            self.families_on_floor_after_failures += 1;
        }
        for f in &score.fits {
            self.fits += 1;
            self.fits_failed += usize::from(f.bound.is_err());
            self.fits_hit_cap += usize::from(f.hit_cap(adam_cap));
            self.start_capped += usize::from(f.start.is_some_and(|s| s.stop.hit_cap()));
            self.adam_capped += usize::from(adam_cap > 0 && f.adam_steps >= adam_cap);
            self.lbfgs_capped +=
                usize::from(f.role != FitRole::Probe && f.lbfgs.is_some_and(|s| s.stop.hit_cap()));
            self.start_iterations += f.start.map_or(0, |s| s.iterations);
            self.adam_steps += f.adam_steps;
            self.lbfgs_iterations += f.lbfgs.map_or(0, |s| s.iterations);
            self.evaluations += f.evaluations();
            if let Some(s) = f
                .lbfgs
                .filter(|s| f.role != FitRole::Probe || !s.stop.hit_cap())
            {
                let c = &mut self.lbfgs_stops;
                *match s.stop {
                    StopReason::GradientTolerance => &mut c.gradient,
                    StopReason::RelativeReduction => &mut c.relative_reduction,
                    StopReason::Stalled => &mut c.stalled,
                    StopReason::LineSearchFailed => &mut c.line_search_failed,
                    StopReason::MaxIterations | StopReason::MaxEvaluations => &mut c.cap,
                } += 1;
            }
        }
    }

    /// One line for people: fits, how many hit a cap, iterations per stage, evaluations.
    pub fn describe(&self) -> String {
        format!(
            "{} families, {} fits ({} failed, {} families on their floor after every fit failed); \
             {} fits hit a cap (start {}, Adam {}, L-BFGS {}); iterations: start {}, Adam {}, \
             L-BFGS {}; {} bound evaluations; Ψ2 sums on the GPU for {} families, on the CPU for {}",
            self.families,
            self.fits,
            self.fits_failed,
            self.families_on_floor_after_failures,
            self.fits_hit_cap,
            self.start_capped,
            self.adam_capped,
            self.lbfgs_capped,
            self.start_iterations,
            self.adam_steps,
            self.lbfgs_iterations,
            self.evaluations,
            self.families_on_gpu,
            self.families_on_cpu
        )
    }
}

/// Where a family's fits computed their Ψ2 sums: recorded with each score (and so in the score
/// cache), because a GPU's sums are float32 and a CPU's f64, and the two scores of one family
/// agree only to the device's rounding; a reader of the cache, or of a resumed run, can tell which
/// scores came from where.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputedOn {
    /// Every sum in f64 on the host.
    Cpu,
    /// The Ψ2 sums on a GPU in float32 (natively, or WebGPU in the page), the rest on the host.
    Gpu,
}

/// One family's score and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyScore {
    /// F(i | S) = max(best fitted bound, floor), nats.
    pub value: f64,
    /// The best collapsed bound over the fits (None when every fit failed).
    pub best_bound: Option<f64>,
    /// The closed-form floor (MODEL.md §6): the Gaussian noise model for S = ∅, the
    /// Bayesian-linear-regression evidence on x_S otherwise; both are limits of the GP-CDE (SE
    /// variance → 0, w off), so the floor is a bound on the same evidence.
    pub floor: f64,
    pub fits_failed: usize,
    /// Each fit, in the order run.
    #[serde(default)]
    pub fits: Vec<FitRecord>,
    /// The parameters of the fit that reached `best_bound`, kept by the
    /// [`FamilyFitScheme::Warm`] scheme for the families that start from this one (also when
    /// they are fitted by a later run from the score cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best_params: Option<CollapsedParams>,
    /// The downward repair's values: (kept, F) with `kept` a bit mask of parent positions, F the
    /// bound of the subset family of the parents kept at the best fit with every other parent
    /// switched off ([`CollapsedModel::bound_with_parents`]). A point of the subset's model, so
    /// a lower bound on its evidence bound, which the exact search's table takes when it beats
    /// the subset's own fits. Every proper subset for families of at most
    /// [`SWITCH_OFF_ALL_SUBSETS_UP_TO`] parents, the one-parent-fewer subsets above; kept by the
    /// [`FamilyFitScheme::Warm`] scheme, where a superset continues its subset's optimisation and
    /// would otherwise be credited with what that continuation found for the parents they share.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switched_off: Vec<(u32, f64)>,
    /// Where the fits computed (None in scores written before this was recorded, and in scores
    /// made up by tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computed_on: Option<ComputedOn>,
}

#[cfg(test)]
impl FamilyScore {
    /// A made-up score of `value` nats, as if one fit reached it above `floor`: no fit records,
    /// parameters or switched-off values (for tests of what reads scores).
    pub(crate) fn made_up(value: f64, floor: f64) -> Self {
        FamilyScore {
            value,
            best_bound: Some(value),
            floor,
            fits_failed: 0,
            fits: Vec::new(),
            best_params: None,
            switched_off: Vec::new(),
            computed_on: None,
        }
    }
}
