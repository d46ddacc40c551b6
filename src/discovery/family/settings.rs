//! How family fits are set up: the restarts and warm starts, the optimisers' caps, the stall
//! rule, and each family's seed.

use super::*;

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
    pub(super) fn restarts(self) -> &'static [usize] {
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

    /// The warm scheme ([`FamilyFitScheme::Warm`]) with the `cold` fits beside each warm one,
    /// otherwise [`FamilyScoreSettings::with_inducing`].
    pub fn warm(inducing: usize, cold: ColdFits) -> Self {
        Self {
            scheme: FamilyFitScheme::Warm { cold },
            ..Self::with_inducing(inducing)
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
    pub fn validate(self) -> Result<Self, FamilySettingsError> {
        use crate::discovery::limits::{MAX_INDUCING_POINTS, MAX_PHASE_ITERATIONS, MAX_RESTARTS};
        if self.inducing == 0 || self.restarts == 0 {
            return Err(FamilySettingsError::Empty {
                inducing: self.inducing,
                restarts: self.restarts,
            });
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
                return Err(FamilySettingsError::TooLarge { name, value, limit });
            }
        }
        if let Some(rule) = self.convergence {
            if rule.window == 0 || !(rule.gain >= 0.0 && rule.gain.is_finite()) {
                return Err(FamilySettingsError::Convergence {
                    window: rule.window,
                    gain: rule.gain,
                });
            }
        }
        Ok(self)
    }
}

/// Why family-fit settings cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FamilySettingsError {
    #[error(
        "family fits need at least 1 inducing point and 1 restart (got M = {inducing}, \
         {restarts} restarts)"
    )]
    Empty { inducing: usize, restarts: usize },
    #[error("{name} must be at most {limit}, got {value}")]
    TooLarge {
        name: &'static str,
        value: usize,
        limit: usize,
    },
    #[error(
        "the family fits' convergence rule needs a window of at least 1 iteration and a finite \
         gain ≥ 0 nats (got {window} iterations, {gain} nats)"
    )]
    Convergence { window: usize, gain: f64 },
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
