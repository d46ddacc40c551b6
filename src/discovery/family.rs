//! The evidence of one family, F(i | S): the collapsed GP-CDE bound of x_i given its parents x_S
//! (SE + linear kernel on [x_S, w], free q(w); MODEL.md §4 and §6), fitted from the standard start
//! with a fixed, family-derived seed. A DAG's evidence is Σ_i F(i | pa(i)) (the DGP-CDE score), so
//! two graphs that share a family share its term, and the same family always gets the same value
//! whichever search asks for it.
//!
//! Used to compare the continuous search's restarts: their final objectives are end points of a
//! relaxation and say as much about how well each run optimised as about its graph (BENCHMARKS.md,
//! issue 10); refitting each final DAG's families from the same start compares the graphs.

use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use crate::gp::collapsed::{
    AwaitedPsi2, CollapsedFit, CollapsedModel, CollapsedParams, FitSettings, GpInitialisation,
    LatentStart, Psi2Device, StageStats, MIN_START_SE_VARIANCE,
};
use crate::gp::lbfgs::{LbfgsSettings, StallRule, StopReason};
use crate::gp::ready::ready;
use crate::gp::resolution::resolution_noise_floor;
use crate::gp::NOISE_VARIANCE_FLOOR;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Cold fits per family of at most one parent (and of larger ones without a subset fit to start
/// from), each from its own GP-regression start, alternating the residual and the w-off latent
/// starts (see [`family_fit_settings`]).
pub const FAMILY_RESTARTS: usize = 2;
/// Up to this many variables the default warm scheme also runs both cold fits of every larger
/// family ([`FamilyScoreSettings::for_variables`]): on the 18 public 3-variable sets the warm fit
/// alone got 15 graphs exactly right, with the cold fits beside it 16 as before (BENCHMARKS.md,
/// issue 33), and such plans are small.
pub const WARM_WITH_COLD_FITS_UP_TO: usize = 5;
/// How families are fitted by default: a family of two or more parents by one L-BFGS fit from
/// its best subset's fit, the smaller ones by [`FAMILY_RESTARTS`] cold fits, every best fit also
/// evaluated with its parents' subsets switched off (the table's downward repair). Measured on
/// the 12 public 10-node sets with seeds 0, 1 and 2 against two cold fits per family
/// (BENCHMARKS.md, issue 33): 2.3× fewer bound evaluations, summed SHD 408 against 419 over the
/// 36 runs (12 set-seeds better, 11 worse, 13 the same; the seeds alone move the 12-set sum
/// between 124 and 157).
pub const DEFAULT_FAMILY_FIT_SCHEME: FamilyFitScheme = FamilyFitScheme::Warm {
    cold: ColdFits::Neither,
};
/// Adam steps at most before L-BFGS in a family fit. Adam stops as soon as F beats the noise
/// model, which the GP-regression start usually does at once.
pub const FAMILY_ADAM_STEPS: usize = 300;
/// L-BFGS iterations at most in a family fit (and in its GP-regression start).
pub const FAMILY_LBFGS_ITERATIONS: usize = 300;
/// A fit has converged once this many L-BFGS iterations gained less than
/// [`FAMILY_STALL_GAIN`] nats in all. Chosen by replaying the rule on the fit records of the 12
/// public 10-node sets (scripts/score_cache_policies.py, BENCHMARKS.md issue 33): 64 % of the
/// L-BFGS iterations, every MAP DAG unchanged; 10 iterations / 0.01 nats kept 42 % but changed 2.
pub const FAMILY_STALL_WINDOW: usize = 10;
/// Nats: far below the prior's 1.4 nats per edge.
pub const FAMILY_STALL_GAIN: f64 = 1e-3;

/// (child, sorted parents).
pub type FamilyKey = (usize, Vec<usize>);

/// How the starts of a family fit share their work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FamilyFitScheme {
    /// `restarts` independent fits, each with its own GP-regression start, alternating the
    /// residual and the w-off latent starts, each run to the caps (the scheme before issue 33).
    Independent,
    /// `restarts` GP-regression starts; from each, the residual and the w-off latent starts run
    /// `probe` L-BFGS iterations and only the better continues. Half the fits, but measured worse
    /// (issue 33: on the 12 public 10-node sets the lane behind after 20 or 30 iterations often
    /// ends ahead, up to 68 nats; replayed, the summed SHD rose from 122 to 131), so not the
    /// default.
    Race { probe: usize },
    /// Families of one parent or none as `Independent`; from two parents on, the `cold` fit(s)
    /// and one more fit warm-started from the best fit of the family's best subset with one
    /// parent fewer ([`CollapsedModel::warm_start`], then L-BFGS only), so a family is fitted
    /// once its subsets are: the exact search scores a size at a time. The warm fit starts where
    /// the subset ended, so what the subset's fits found (w used or not) carries up the lattice
    /// for a few dozen L-BFGS iterations instead of a second GP-regression start, Adam and L-BFGS.
    /// A family whose subsets have no fit to start from gets both cold fits.
    Warm { cold: ColdFits },
}

/// The cold fits of a [`FamilyFitScheme::Warm`] family of two or more parents beside its warm
/// fit: the fits of restart 0 (residual latent start), of restart 1 (w-off start), both (each
/// exactly as the `Independent` scheme runs it), or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColdFits {
    Residual,
    Off,
    Both,
    Neither,
}

impl ColdFits {
    /// The restart indices run cold.
    fn restarts(self) -> &'static [usize] {
        match self {
            ColdFits::Residual => &[0],
            ColdFits::Off => &[1],
            ColdFits::Both => &[0, 1],
            ColdFits::Neither => &[],
        }
    }
}

impl FamilyFitScheme {
    /// Whether larger families start from their subsets' fits (so they wait for them).
    pub fn warm_starts(self) -> bool {
        matches!(self, FamilyFitScheme::Warm { .. })
    }
}

/// Where a warm-started family fit begins: the best fit of a subset family with one parent fewer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarmStart {
    /// The subset's parents (sorted), one fewer than the family's.
    pub parents: Vec<usize>,
    /// Its best fit's parameters.
    pub params: CollapsedParams,
}

impl WarmStart {
    /// The best-fitted subset of `key` (one parent fewer) in `scores` that kept its parameters:
    /// the highest best bound, ties to the first subset in parent order. None for families of
    /// fewer than two parents and when no subset has a kept fit.
    pub fn best_subset<'a>(
        key: &FamilyKey,
        score_of: impl Fn(&FamilyKey) -> Option<&'a FamilyScore>,
    ) -> Option<WarmStart> {
        let (child, parents) = key;
        if parents.len() < 2 {
            return None;
        }
        let mut best: Option<(f64, WarmStart)> = None;
        for drop in 0..parents.len() {
            let mut subset = parents.clone();
            subset.remove(drop);
            let Some(score) = score_of(&(*child, subset.clone())) else {
                continue;
            };
            let (Some(bound), Some(params)) = (score.best_bound, score.best_params.as_ref()) else {
                continue;
            };
            if best.as_ref().is_none_or(|(b, _)| bound > *b) {
                best = Some((
                    bound,
                    WarmStart {
                        parents: subset,
                        params: params.clone(),
                    },
                ));
            }
        }
        best.map(|(_, w)| w)
    }
}

/// How a family is fitted. Part of a score cache's key: scores from other settings are not reused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FamilyScoreSettings {
    /// Inducing points M (capped at the rows).
    pub inducing: usize,
    /// Regression starts (fits from independent draws); the best bound is kept.
    pub restarts: usize,
    pub adam_steps: usize,
    pub lbfgs_iterations: usize,
    /// How the starts share work.
    pub scheme: FamilyFitScheme,
    /// The convergence stop of every L-BFGS run in the fit (None: SciPy's tolerances and the caps).
    pub convergence: Option<StallRule>,
}

impl FamilyScoreSettings {
    /// The measured defaults ([`DEFAULT_FAMILY_FIT_SCHEME`]: [`FAMILY_RESTARTS`] cold fits for
    /// families of at most one parent, one warm fit from the best subset's fit for the larger
    /// ones; each fit at most [`FAMILY_ADAM_STEPS`] Adam steps and [`FAMILY_LBFGS_ITERATIONS`]
    /// L-BFGS iterations, each L-BFGS run stopped on a stall of [`FAMILY_STALL_GAIN`] nats over
    /// [`FAMILY_STALL_WINDOW`] iterations) with M = `inducing`.
    pub fn with_inducing(inducing: usize) -> Self {
        Self {
            scheme: DEFAULT_FAMILY_FIT_SCHEME,
            ..Self::independent(inducing)
        }
    }

    /// The settings a search over `d` variables uses: the default warm scheme without cold fits
    /// becomes the warm scheme with both cold fits when `d` ≤ [`WARM_WITH_COLD_FITS_UP_TO`],
    /// where the plan is small (at most 55 families of two or more parents) and the extra fits
    /// cost seconds; anything else is kept as given.
    pub fn for_variables(self, d: usize) -> Self {
        match self.scheme {
            FamilyFitScheme::Warm {
                cold: ColdFits::Neither,
            } if d <= WARM_WITH_COLD_FITS_UP_TO => Self {
                scheme: FamilyFitScheme::Warm {
                    cold: ColdFits::Both,
                },
                ..self
            },
            _ => self,
        }
    }

    /// The fits before the warm starts (issue 33): [`FAMILY_RESTARTS`] cold fits for every
    /// family, each stopped as the defaults stop, kept so the two can be compared on the same
    /// data.
    pub fn independent(inducing: usize) -> Self {
        Self {
            inducing,
            restarts: FAMILY_RESTARTS,
            adam_steps: FAMILY_ADAM_STEPS,
            lbfgs_iterations: FAMILY_LBFGS_ITERATIONS,
            scheme: FamilyFitScheme::Independent,
            convergence: Some(StallRule {
                window: FAMILY_STALL_WINDOW,
                gain: FAMILY_STALL_GAIN,
            }),
        }
    }

    /// The fits before issue 33: two cold fits per family, every L-BFGS run to SciPy's
    /// tolerances or the caps (no stall rule), kept so the two can be compared on the same data.
    pub fn without_stall_rule(inducing: usize) -> Self {
        Self {
            convergence: None,
            ..Self::independent(inducing)
        }
    }

    /// The raced scheme ([`FamilyFitScheme::Race`]) with `probe` iterations per latent start.
    pub fn raced(inducing: usize, probe: usize) -> Self {
        Self {
            restarts: 1,
            scheme: FamilyFitScheme::Race { probe },
            ..Self::with_inducing(inducing)
        }
    }

    /// Every count must be at least 1 (L-BFGS iterations may be 0: Adam only) and within the
    /// limits of [`SearchSettings`](crate::discovery::settings::SearchSettings) (named when exceeded).
    pub fn validate(self) -> Result<Self, String> {
        use crate::discovery::settings::{MAX_INDUCING_POINTS, MAX_PHASE_ITERATIONS, MAX_RESTARTS};
        if self.inducing == 0 || self.restarts == 0 {
            return Err(format!(
                "family fits need at least 1 inducing point and 1 restart (got M = {}, {} restarts)",
                self.inducing, self.restarts
            ));
        }
        for (name, value, limit) in [
            (
                "family-fit inducing points",
                self.inducing,
                MAX_INDUCING_POINTS,
            ),
            ("family-fit restarts", self.restarts, MAX_RESTARTS),
            (
                "family-fit Adam steps",
                self.adam_steps,
                MAX_PHASE_ITERATIONS,
            ),
            (
                "family-fit L-BFGS iterations",
                self.lbfgs_iterations,
                MAX_PHASE_ITERATIONS,
            ),
        ] {
            if value > limit {
                return Err(format!("{name} must be at most {limit}, got {value}"));
            }
        }
        if let Some(rule) = self.convergence {
            if rule.window == 0 || !(rule.gain >= 0.0 && rule.gain.is_finite()) {
                return Err(format!(
                    "the family fits' convergence rule needs a window of at least 1 iteration and \
                     a finite gain ≥ 0 nats (got {} iterations, {} nats)",
                    rule.window, rule.gain
                ));
            }
        }
        Ok(self)
    }
}

/// The fit settings of restart `restart` of a family fit: the standard start (GP-regression
/// initialisation, SE precisions U(0.01, 1), SE variance kept ≥ [`MIN_START_SE_VARIANCE`]), then
/// Adam and L-BFGS, the main L-BFGS run stopped by the settings' convergence rule. Even restarts start
/// with w explaining the regression residual ([`LatentStart::Residual`]), odd ones with w switched
/// off ([`LatentStart::Off`]): the two starts end in different optima, and which is higher depends
/// on the family (BENCHMARKS.md, issue 11). (The race scheme starts every restart as `Residual`
/// and derives the `Off` start from the same regression fit.)
pub fn family_fit_settings(s: &FamilyScoreSettings, restart: usize) -> FitSettings {
    let start = LbfgsSettings {
        max_iterations: s.lbfgs_iterations,
        ..LbfgsSettings::default()
    };
    FitSettings {
        inducing_points: s.inducing,
        adam_steps: s.adam_steps,
        lbfgs: LbfgsSettings {
            stall: s.convergence,
            ..start
        },
        // The regression start stops on SciPy's rules (it seldom reaches its cap): the stall
        // rule was measured on the main fit only.
        start_lbfgs: Some(start),
        gp_initialisation: GpInitialisation::Always,
        initial_precision: (0.01, 1.0),
        min_start_se_variance: MIN_START_SE_VARIANCE,
        latent_start: match s.scheme {
            FamilyFitScheme::Race { .. } => LatentStart::Residual,
            FamilyFitScheme::Independent | FamilyFitScheme::Warm { .. }
                if restart.is_multiple_of(2) =>
            {
                LatentStart::Residual
            }
            FamilyFitScheme::Independent | FamilyFitScheme::Warm { .. } => LatentStart::Off,
        },
        ..FitSettings::default()
    }
}

/// A seed for the family (`child`, `parents`) from the run's `seed`, so a family's value depends on
/// nothing else (FNV-1a over the indices, then a SplitMix64 finaliser).
pub fn family_seed(seed: u64, child: usize, parents: &[usize]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed;
    for v in std::iter::once(child).chain(parents.iter().copied()) {
        h ^= v as u64 + 1;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

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
    pub bound: Result<f64, String>,
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
    fn of(
        role: FitRole,
        latent_start: Option<LatentStart>,
        fit: &Result<CollapsedFit, String>,
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

/// Families of up to this many parents evaluate their best fit with every proper subset of their
/// parents switched off ([`FamilyScore::switched_off`]): 2^k − 1 bound evaluations without a
/// gradient: counted for P = 6 candidates, 665 per variable (6,650 for a 10-node set) against
/// about 165,000 evaluations with gradient for the fits of such a set (not timed separately).
pub const SWITCH_OFF_ALL_SUBSETS_UP_TO: usize = 6;

/// [`FamilyScore::switched_off`] of the best fit `fit` of `model` (k parents).
fn switched_off_values(model: &CollapsedModel, fit: &CollapsedFit) -> Vec<(u32, f64)> {
    let k = model.parents();
    let full: u32 = (1u32 << k) - 1;
    let masks: Vec<u32> = if k <= SWITCH_OFF_ALL_SUBSETS_UP_TO {
        (0..full).collect()
    } else {
        (0..k).map(|j| full & !(1 << j)).collect()
    };
    masks
        .into_iter()
        .filter_map(|kept| {
            let positions: Vec<usize> = (0..k).filter(|&j| kept & (1 << j) != 0).collect();
            model
                .bound_with_parents(&fit.params, &positions, fit.jitter)
                .ok()
                .map(|v| (kept, v))
        })
        .collect()
}

/// A family's score together with the fitted model that reached its best bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyFit {
    pub score: FamilyScore,
    /// The fit with the highest bound (the first of equal ones); None when every fit failed.
    pub best: Option<CollapsedFit>,
}

/// F(i | S) = max(max_r F_r, F_floor) on the rows of `data` (N × D, standardised): F_r the
/// collapsed GP-CDE bound of column `child` given columns `parents` (SE + linear on [x_S, w], free
/// q(w); MODEL.md §4 and §6) reached by fit r (by `settings.scheme`: the residual and w-off latent
/// starts of [`family_fit_settings`] alternating over `settings.restarts`, raced, or cold fits
/// and a fit from `warm`, the best subset's fit), F_floor the closed-form value, with a
/// family-derived seed so the same family (and subset fit) always gets the same score. Every
/// fit's record is kept ([`FitRecord`]). Fails only when the model cannot be built from the data.
pub fn family_score(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    settings: &FamilyScoreSettings,
    seed: u64,
    warm: Option<&WarmStart>,
) -> Result<FamilyScore, String> {
    family_fit(data, child, parents, settings, seed, warm).map(|f| f.score)
}

/// [`family_score`] with every fit's Ψ2 sums on `device` ([`family_fit_on`]).
pub fn family_score_on(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    settings: &FamilyScoreSettings,
    seed: u64,
    warm: Option<&WarmStart>,
    device: Option<&dyn Psi2Device>,
) -> Result<FamilyScore, String> {
    family_fit_on(data, child, parents, settings, seed, warm, device).map(|f| f.score)
}

/// [`family_score`] and the best fit itself (its parameters, for predictions from the model that
/// was scored): the same fits from the same seeds, so `score` is [`family_score`]'s value bit for
/// bit. The model's inputs are the columns `parents` in the order given (sorted, for a warm
/// start: its subset's parents are sorted).
pub fn family_fit(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    settings: &FamilyScoreSettings,
    seed: u64,
    warm: Option<&WarmStart>,
) -> Result<FamilyFit, String> {
    family_fit_on(data, child, parents, settings, seed, warm, None)
}

/// [`family_fit`] with every fit's Ψ2 sums on `device` when one is given (the same fits from the
/// same seeds, to within the device's rounding).
pub fn family_fit_on(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    settings: &FamilyScoreSettings,
    seed: u64,
    warm: Option<&WarmStart>,
    device: Option<&dyn Psi2Device>,
) -> Result<FamilyFit, String> {
    let family = Family {
        data,
        child,
        parents,
        settings,
        seed,
        warm,
    };
    ready(family_fit_with(family, device, None))
}

/// [`family_fit`] with every fit's Ψ2 sums from `device`, which is awaited (a browser worker's
/// WebGPU, shared with other families' fits): the same fits from the same seeds, to within the
/// device's rounding.
pub async fn family_fit_awaiting(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    settings: &FamilyScoreSettings,
    seed: u64,
    warm: Option<&WarmStart>,
    device: &dyn AwaitedPsi2,
) -> Result<FamilyFit, String> {
    let family = Family {
        data,
        child,
        parents,
        settings,
        seed,
        warm,
    };
    family_fit_with(family, None, Some(device)).await
}

/// What a family's fits are asked for.
#[derive(Clone, Copy)]
struct Family<'a> {
    data: &'a DMatrix<f64>,
    child: usize,
    parents: &'a [usize],
    settings: &'a FamilyScoreSettings,
    seed: u64,
    warm: Option<&'a WarmStart>,
}

/// The fits of [`family_fit`], with Ψ2's sums on a blocking `device` or an `awaited` one when
/// either is given.
async fn family_fit_with(
    family: Family<'_>,
    device: Option<&dyn Psi2Device>,
    awaited: Option<&dyn AwaitedPsi2>,
) -> Result<FamilyFit, String> {
    let Family {
        data,
        child,
        parents,
        settings,
        seed,
        warm,
    } = family;
    let n = data.nrows();
    let x = DMatrix::from_fn(n, parents.len(), |r, k| data[(r, parents[k])]);
    let y = DVector::from_fn(n, |r, _| data[(r, child)]);
    let floor = resolution_noise_floor(y.as_slice(), NOISE_VARIANCE_FLOOR);
    let model = CollapsedModel::with_noise_floor(x, y, floor).map_err(|e| e.to_string())?;
    let computed_on = if device.is_some() || awaited.is_some() {
        ComputedOn::Gpu
    } else {
        ComputedOn::Cpu
    };
    let model = match device {
        Some(device) => model.on_device(device),
        None => model,
    };
    let family_seed = family_seed(seed, child, parents);
    // The warm start, when the scheme takes one and `warm` is a subset with one parent fewer.
    let warm_params = match settings.scheme {
        FamilyFitScheme::Warm { .. } if parents.len() >= 2 => warm.and_then(|w| {
            let added: Vec<usize> = (0..parents.len())
                .filter(|&k| !w.parents.contains(&parents[k]))
                .collect();
            let nested = w.parents.len() + 1 == parents.len()
                && w.parents.iter().all(|j| parents.contains(j));
            match added.as_slice() {
                [k] if nested => model.warm_start(&w.params, *k),
                _ => None,
            }
        }),
        _ => None,
    };
    let cold: Vec<usize> = match (settings.scheme, &warm_params) {
        (FamilyFitScheme::Warm { cold }, Some(_)) => cold.restarts().to_vec(),
        _ => (0..settings.restarts.max(1)).collect(),
    };
    let usable = |f: &Result<CollapsedFit, String>| matches!(f, Ok(f) if f.bound.is_finite());
    let mut records = Vec::new();
    let mut outcomes: Vec<Result<CollapsedFit, String>> = Vec::with_capacity(cold.len() + 1);
    for &restart in &cold {
        let fitted = cold_fit(
            &model,
            settings,
            family_seed,
            restart,
            awaited,
            &mut records,
        );
        outcomes.push(fitted.await);
    }
    if let Some(params) = warm_params {
        let fitted = model
            .fit_from_awaiting(params, &family_fit_settings(settings, 0), awaited)
            .await
            .map_err(|e| e.to_string());
        records.push(FitRecord::of(FitRole::Warm, None, &fitted));
        outcomes.push(fitted);
        // A warm fit that failed with no cold fit beside it would leave the family at its
        // floor: the cold fits run after all.
        if !outcomes.iter().any(usable) {
            for restart in 0..settings.restarts.max(1) {
                let fitted = cold_fit(
                    &model,
                    settings,
                    family_seed,
                    restart,
                    awaited,
                    &mut records,
                );
                outcomes.push(fitted.await);
            }
        }
    }
    let failed = outcomes.iter().filter(|f| !usable(f)).count();
    // The highest bound; the first of equal ones.
    let best = outcomes
        .into_iter()
        .filter_map(|f| f.ok().filter(|f| f.bound.is_finite()))
        .reduce(|a, b| if b.bound > a.bound { b } else { a });
    let best_bound = best.as_ref().map(|b| b.bound);
    let floor_value = model.noise_value();
    let (best_params, switched_off) = match (&best, settings.scheme.warm_starts()) {
        (Some(b), true) => (Some(b.params.clone()), switched_off_values(&model, b)),
        _ => (None, Vec::new()),
    };
    Ok(FamilyFit {
        score: FamilyScore {
            value: best_bound.map_or(floor_value, |b| b.max(floor_value)),
            best_bound,
            floor: floor_value,
            fits_failed: failed,
            fits: records,
            best_params,
            switched_off,
            computed_on: Some(computed_on),
        },
        best,
    })
}

/// Cold fit `restart` of a family (its own GP-regression start drawn from the family's seed +
/// `restart`, the latent start of [`family_fit_settings`]; raced under the race scheme), recorded
/// in `records`.
async fn cold_fit(
    model: &CollapsedModel<'_>,
    settings: &FamilyScoreSettings,
    family_seed: u64,
    restart: usize,
    awaited: Option<&dyn AwaitedPsi2>,
    records: &mut Vec<FitRecord>,
) -> Result<CollapsedFit, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(family_seed.wrapping_add(restart as u64));
    let fit_settings = family_fit_settings(settings, restart);
    match settings.scheme {
        FamilyFitScheme::Independent | FamilyFitScheme::Warm { .. } => {
            let fitted = model
                .fit_awaiting(&fit_settings, &mut rng, awaited)
                .await
                .map_err(|e| e.to_string());
            records.push(FitRecord::of(
                FitRole::Full,
                Some(fit_settings.latent_start),
                &fitted,
            ));
            fitted
        }
        FamilyFitScheme::Race { probe } => {
            raced_fit(model, &fit_settings, probe, &mut rng, awaited, records).await
        }
    }
}

/// One raced start: the GP-regression start, then its residual and w-off latent starts
/// ([`CollapsedModel::with_latent_off`]) each run `probe` L-BFGS iterations, and the one with the
/// higher bound continues to convergence or the caps. A root has one start (the normal scores of
/// y), so it runs once. Every run is recorded in `records`.
async fn raced_fit(
    model: &CollapsedModel<'_>,
    settings: &FitSettings,
    probe: usize,
    rng: &mut ChaCha8Rng,
    awaited: Option<&dyn AwaitedPsi2>,
    records: &mut Vec<FitRecord>,
) -> Result<CollapsedFit, String> {
    let start = model.start(settings, rng);
    let off = (model.parents() > 0 && start.gp_initialised && probe > 0)
        .then(|| model.with_latent_off(&start.params));
    let Some(off) = off else {
        let mut fitted = model
            .fit_from_awaiting(start.params, settings, awaited)
            .await
            .map_err(|e| e.to_string());
        if let Ok(f) = fitted.as_mut() {
            f.start = start.stats;
            f.gp_initialised = start.gp_initialised;
        }
        records.push(FitRecord::of(
            FitRole::Full,
            Some(LatentStart::Residual),
            &fitted,
        ));
        return fitted;
    };
    let probing = FitSettings {
        lbfgs: LbfgsSettings {
            max_iterations: probe.min(settings.lbfgs.max_iterations),
            ..settings.lbfgs
        },
        ..*settings
    };
    let mut lanes = Vec::with_capacity(2);
    for (latent, params) in [
        (LatentStart::Residual, start.params),
        (LatentStart::Off, off),
    ] {
        let mut fitted = model
            .fit_from_awaiting(params, &probing, awaited)
            .await
            .map_err(|e| e.to_string());
        if let Ok(f) = fitted.as_mut() {
            f.gp_initialised = true;
            if latent == LatentStart::Residual {
                f.start = start.stats;
            }
        }
        records.push(FitRecord::of(FitRole::Probe, Some(latent), &fitted));
        lanes.push((latent, fitted));
    }
    // The better lane continues (a failed lane never wins); ties go to the residual start.
    let (latent, leader) = lanes
        .into_iter()
        .reduce(|a, b| match (&a.1, &b.1) {
            (Ok(x), Ok(y)) if y.bound > x.bound => b,
            (Err(_), Ok(_)) => b,
            _ => a,
        })
        .expect("two lanes");
    let leader = leader?;
    if !leader.stop.hit_cap() || leader.lbfgs_iterations >= settings.lbfgs.max_iterations {
        return Ok(leader);
    }
    let rest = FitSettings {
        lbfgs: LbfgsSettings {
            max_iterations: settings.lbfgs.max_iterations - leader.lbfgs_iterations,
            ..settings.lbfgs
        },
        ..*settings
    };
    let continued = model
        .fit_from_awaiting(leader.params.clone(), &rest, awaited)
        .await
        .map_err(|e| e.to_string());
    records.push(FitRecord::of(FitRole::Continued, Some(latent), &continued));
    // A continuation that fails or ends lower leaves the probe's fit standing.
    Ok(match continued {
        Ok(c) if c.bound >= leader.bound => c,
        _ => leader,
    })
}

/// F(i | S) as [`family_score`]'s value, with the default settings and M = `inducing`.
pub fn family_evidence(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    inducing: usize,
    seed: u64,
) -> Result<f64, String> {
    family_score(
        data,
        child,
        parents,
        &FamilyScoreSettings::with_inducing(inducing),
        seed,
        None,
    )
    .map(|s| s.value)
}

/// The families of a DAG given by its `edges` (cause, effect) over `d` variables.
pub fn families(d: usize, edges: &[(usize, usize)]) -> Vec<FamilyKey> {
    (0..d)
        .map(|i| {
            let mut parents: Vec<usize> = edges
                .iter()
                .filter(|&&(_, e)| e == i)
                .map(|&(c, _)| c)
                .collect();
            parents.sort_unstable();
            parents.dedup();
            (i, parents)
        })
        .collect()
}

/// Family evidences computed so far, each once.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FamilyCache {
    /// Written as a list of (family, value) pairs: JSON map keys must be strings.
    #[serde(with = "family_pairs")]
    values: BTreeMap<FamilyKey, Result<f64, String>>,
}

/// A map keyed by families, (de)serialised as a list of pairs.
mod family_pairs {
    use super::FamilyKey;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    type Map = BTreeMap<FamilyKey, Result<f64, String>>;

    pub fn serialize<S: Serializer>(map: &Map, s: S) -> Result<S::Ok, S::Error> {
        map.iter().collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        Ok(Vec::<(FamilyKey, Result<f64, String>)>::deserialize(d)?
            .into_iter()
            .collect())
    }
}

impl FamilyCache {
    /// The stored value of a family, if computed.
    pub fn get(&self, key: &FamilyKey) -> Option<&Result<f64, String>> {
        self.values.get(key)
    }

    /// Stores a family's value.
    pub fn insert(&mut self, key: FamilyKey, value: Result<f64, String>) {
        self.values.insert(key, value);
    }

    /// How many families are stored.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Σ_i F(i | pa(i)) of the DAG with `edges`, or `None` while a family is missing; an error names
    /// the first family that could not be fitted.
    pub fn graph_evidence(
        &self,
        d: usize,
        edges: &[(usize, usize)],
    ) -> Option<Result<f64, String>> {
        let mut total = 0.0;
        for key in families(d, edges) {
            match self.values.get(&key)? {
                Ok(v) => total += v,
                Err(e) => return Some(Err(e.clone())),
            }
        }
        Some(Ok(total))
    }
}

#[cfg(test)]
mod tests;
