//! Settings of the continuous search (MODEL.md §5.4 schedule, sizes, thresholds) and the two presets
//! of DESIGN.md §4.

use nalgebra::DMatrix;
use serde::{Deserialize, Serialize};

pub mod fields;

use crate::base::names::{named_choices, Choice};
use crate::data::MIN_ROWS;
use crate::discovery::exact::{ExactSettings, ExactSettingsError};
use crate::discovery::knowledge::{Knowledge, KnowledgeError};
use crate::discovery::thresholding::AcyclicCut;
use crate::graph::Dag;

pub use crate::discovery::cgp::{BoundKind, RowWeight, SubsetScaling};
pub use crate::discovery::limits::{
    MAX_BATCH_SIZE, MAX_INDUCING_POINTS, MAX_PHASE_ITERATIONS, MAX_POWER_ITERATIONS, MAX_RESTARTS,
    MAX_SAMPLES, MAX_THREADS,
};
pub use crate::gp::collapsed::LatentStart;
pub use fields::{
    setting_field, setting_keys, SettingField, BOUND_SECTIONS, NOT_FIELDS, SETTING_FIELDS,
};

/// How long a phase runs: at least `min` and at most `max` iterations; in between it ends when the
/// objective stops improving: the mean over the last `window` iterations exceeds the mean over
/// the `window` before by less than `tolerance` nats per row of the data set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PhaseLength {
    pub min: usize,
    pub max: usize,
    pub window: usize,
    pub tolerance: f64,
}

impl PhaseLength {
    /// Exactly `n` iterations (no convergence test), as the paper's schedule.
    pub fn fixed(n: usize) -> Self {
        Self {
            min: n,
            max: n,
            window: 0,
            tolerance: 0.0,
        }
    }
}

/// Everything that decides the search, apart from the data, the seed and the prior knowledge.
/// The engine takes it only once checked ([`SearchSettings::check`] → [`CheckedSettings`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchSettings {
    /// Which bound each variable uses.
    pub bound: BoundKind,
    /// The collapsed bound's own settings (used when `bound` is collapsed).
    pub collapsed: CollapsedSettings,
    /// The uncollapsed bound's own settings (used when `bound` is uncollapsed).
    pub uncollapsed: UncollapsedSettings,
    /// Rows used for fitting: a seeded random subset when the data set has more (the bound is
    /// scaled by N/rows so the prior and penalty still weigh against the whole data set).
    pub max_rows: usize,
    /// Inducing points M per variable (capped at the rows used); see also `inducing_per_input`.
    pub inducing_points: usize,
    /// Extra inducing points per kernel input: a variable with k candidate parents (k + 1 inputs
    /// with w) gets M = `inducing_points` + `inducing_per_input`·(k + 1), so M grows with D.
    #[serde(default)]
    pub inducing_per_input: usize,
    /// Adam's learning rate.
    pub learning_rate: f64,
    /// Warm-up: γ = 0.
    pub warmup: PhaseLength,
    /// The most acyclic-phase iterations (T_a); the phase also ends when h < τ.
    pub acyclic_max: usize,
    /// γ grows by ρ every epoch; `None` means ρ = 5D (MODEL.md §5.4). An epoch is ⌈N/b⌉
    /// iterations on minibatches and `collapsed.gamma_interval` iterations for the full-batch
    /// collapsed bound.
    pub rho: Option<f64>,
    /// τ: the acyclic phase ends when h(A) < τ.
    pub tau: f64,
    /// Cool-down after thresholding, with the graph fixed.
    pub cooldown: PhaseLength,
    /// Power iterations per step (50 in the paper).
    pub power_iterations: usize,
    /// Final thresholds: θ^lin below this is zero (1e-4).
    pub linear_threshold: f64,
    /// Final thresholds: a stationary precision below this is zero (0.05).
    pub stationary_threshold: f64,
    /// Independent restarts; the one with the highest final bound + log prior wins.
    pub restarts: usize,
    /// L-BFGS iterations of each variable's GP-regression start.
    pub start_iterations: usize,
    /// Worker threads natively (0 = all cores); in the browser, compute workers (0 = one per core
    /// but one, at most 8: `protocol::compute_workers`).
    pub threads: usize,
    /// How the graph left by the acyclic phase is cut to a DAG.
    #[serde(default)]
    pub dag_rule: DagRule,
    /// Whether the acyclic phase also penalises every 2-cycle (γ·h₂, `spectral::two_cycle_penalty`).
    #[serde(default)]
    pub two_cycle_penalty: bool,
    /// How the winning restart is chosen.
    #[serde(default)]
    pub restart_selection: RestartSelection,
    /// Which search turns the data into a DAG.
    #[serde(default)]
    pub method: Method,
    /// The exact search's limits, family fits and graph prior (`exact` and `hybrid` only).
    #[serde(default)]
    pub exact: ExactSettings,
}

/// The settings only the collapsed bound reads (MODEL.md §4: full batch on the rows used, free
/// q(w), evidence pruning after the cool-down).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollapsedSettings {
    /// Iterations per epoch: γ grows by ρ every `gamma_interval` full-batch iterations.
    pub gamma_interval: usize,
    /// How the bound of a row subset stands for the whole data set.
    #[serde(default)]
    pub subset_scaling: SubsetScaling,
    /// Whether the initial precisions U(0.01, 1) are scaled by `precision_scale(inputs)` so the
    /// expected scaled squared distance between rows is about 1 whatever D is.
    #[serde(default)]
    pub scale_start_precisions: bool,
    /// What the latent w starts as after each variable's regression start.
    #[serde(default)]
    pub latent_start: LatentStart,
    /// After the cool-down, test every edge by evidence: refit its child with and without it (at
    /// most this many L-BFGS iterations each) and drop it unless the objective is higher with it.
    /// 0 = no pruning (the paper's schedule).
    #[serde(default)]
    pub prune_iterations: usize,
    /// Pruning keeps an edge only if the objective with it exceeds the objective without it by
    /// more than this many nats (0: any gain keeps it). A margin of m asks for a Bayes factor
    /// above e^m in the edge's favour, as the scores are bounds on the log evidence.
    #[serde(default)]
    pub prune_margin: f64,
}

/// The settings only the uncollapsed bound reads (MODEL.md §3: minibatches and Monte Carlo).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UncollapsedSettings {
    /// Minibatch size b.
    pub batch_size: usize,
    /// Monte Carlo samples S of w per row.
    pub samples: usize,
}

/// Search settings that passed every rule of [`SearchSettings::validate`]: the only form the
/// engine takes (`Problem`, `ConditionalStart`, `Session`), so no run starts on numbers nobody
/// checked. It reads like the settings it holds (`Deref`); it is made by
/// [`SearchSettings::check`], or read from JSON and checked on the way in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "SearchSettings", into = "SearchSettings")]
pub struct CheckedSettings(SearchSettings);

impl TryFrom<SearchSettings> for CheckedSettings {
    type Error = SettingsError;

    fn try_from(settings: SearchSettings) -> Result<Self, SettingsError> {
        settings.validate()?;
        Ok(Self(settings))
    }
}

impl From<CheckedSettings> for SearchSettings {
    fn from(checked: CheckedSettings) -> Self {
        checked.0
    }
}

impl std::ops::Deref for CheckedSettings {
    type Target = SearchSettings;

    fn deref(&self) -> &SearchSettings {
        &self.0
    }
}

impl CheckedSettings {
    /// The settings, to change and check again.
    pub fn into_inner(self) -> SearchSettings {
        self.0
    }

    /// These settings with `change` made to them, checked again.
    pub fn with(self, change: impl FnOnce(&mut SearchSettings)) -> Result<Self, SettingsError> {
        let mut settings = self.0;
        change(&mut settings);
        settings.check()
    }
}

named_choices! {
    /// Which search a run uses.
    #[derive(Default)]
    pub enum Method in "snake_case" {
        /// The continuous search (CGP-CDE, MODEL.md §5): restarts, phases, thresholding.
        #[default]
        Cgp,
        /// Exact Bayesian model selection over DAGs (DGP-CDE, MODEL.md §6): every admissible
        /// family scored once, the best DAG by dynamic programming, the posterior over graphs.
        Exact,
        /// The continuous search first; the edges its chosen graph keeps join each variable's
        /// candidate parents for the exact search.
        Hybrid,
        /// Chosen when the run starts, by the number of variables ([`Method::resolve`]): exact up
        /// to [`AUTO_EXACT_MAX_VARIABLES`], hybrid above. The choice and its reason are in the
        /// result.
        Auto,
    }
}

/// The most variables `auto` gives the exact search; above, it runs hybrid. The public sets
/// (BENCHMARKS.md, issues 11 and 33) show the exact search beating every peer on the 10-node
/// groups and hybrid on the 20-node ones (its continuous phase adds candidates that one-parent
/// screening misses among 19 possible parents); no set between 10 and 20 variables was measured,
/// so 12 is a choice within that gap, not a measured crossover.
pub const AUTO_EXACT_MAX_VARIABLES: usize = 12;

impl Choice for Method {
    const WHAT: &'static str = "method";
}

impl Method {
    /// Every method, in the order listed to users.
    pub const ALL: &'static [Method] = <Self as strum::VariantArray>::VARIANTS;

    /// The method a run over `d` variables uses, and why: `auto` becomes exact or hybrid by
    /// [`AUTO_EXACT_MAX_VARIABLES`]; any other method is itself (no reason given).
    pub fn resolve(self, d: usize) -> (Method, Option<String>) {
        if self != Self::Auto {
            return (self, None);
        }
        if d <= AUTO_EXACT_MAX_VARIABLES {
            (
                Self::Exact,
                Some(format!(
                    "auto: {d} variables (at most {AUTO_EXACT_MAX_VARIABLES}), so every DAG is \
                     compared exactly over each variable's candidate parents"
                )),
            )
        } else {
            (
                Self::Hybrid,
                Some(format!(
                    "auto: {d} variables (more than {AUTO_EXACT_MAX_VARIABLES}), so the \
                     continuous search runs first and its edges join the exact search's \
                     candidate parents"
                )),
            )
        }
    }

    /// Whether the continuous search's restarts run (for `auto`: whether they may).
    pub fn runs_cgp(self) -> bool {
        self != Self::Exact
    }

    /// Whether the exact search runs (for `auto`: it always does).
    pub fn runs_exact(self) -> bool {
        self != Self::Cgp
    }
}

/// How the restarts' graphs are compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RestartSelection {
    /// By each restart's final objective (bound + log prior at γ = 0), as the paper.
    #[default]
    Objective,
    /// By the evidence of each restart's final DAG: Σ_i F(i | pa(i)), every family refitted from
    /// the same start with a family-derived seed (`discovery::family`), each family once.
    GraphEvidence,
}

/// How the weighted graph at the end of the acyclic phase becomes a DAG.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DagRule {
    /// The paper's rule (MODEL.md §5.4): drop the lightest edges until the rest is a DAG.
    #[default]
    Prefix,
    /// Keep edges from the heaviest down, skipping each that would close a cycle.
    Greedy,
}

impl DagRule {
    /// The DAG this rule keeps from `weights` (cause × effect) among the `active` edges, with
    /// the required edges always in ([`AcyclicCut::prefix`] or [`AcyclicCut::greedy`]).
    pub fn apply(
        self,
        weights: &DMatrix<f64>,
        active: &DMatrix<f64>,
        knowledge: &Knowledge,
    ) -> Result<Dag, KnowledgeError> {
        let cut = AcyclicCut::new(weights, active, knowledge)?;
        match self {
            DagRule::Prefix => cut.prefix(),
            DagRule::Greedy => cut.greedy(),
        }
    }
}

named_choices! {
    /// A named preset.
    pub enum Preset in "snake_case" {
        /// Few rows and inducing points, phases that end on convergence (DESIGN.md §4).
        Interactive,
        /// The interactive model with more rows, inducing points that grow with D, more
        /// restarts, longer phases, and restarts compared by the evidence of their graphs: minutes
        /// per data set (BENCHMARKS.md).
        Thorough,
        /// The paper's bound, schedule lengths and sizes (MODEL.md §5.4–5.5): the uncollapsed
        /// GP-CDE with an encoder, M = 400, b = 256, S = 50, 25k / ≤ 50k / 25k iterations.
        Paper,
    }
}

impl Choice for Preset {
    const WHAT: &'static str = "preset";
}

impl Preset {
    /// Every preset, fastest first.
    pub const ALL: &'static [Preset] = <Self as strum::VariantArray>::VARIANTS;

    /// The preset's settings, checked (every preset passes its own rules: a test checks it).
    pub fn checked(self) -> CheckedSettings {
        self.settings()
            .check()
            .expect("every preset passes the settings' rules")
    }

    /// The preset's settings.
    pub fn settings(self) -> SearchSettings {
        match self {
            Self::Interactive => SearchSettings {
                bound: BoundKind::Collapsed,
                collapsed: CollapsedSettings {
                    gamma_interval: 4,
                    // Measured in BENCHMARKS.md (issue 10): neither helped at this budget; the
                    // shared latent start reaches far higher evidence but worse graphs on dense
                    // sets.
                    scale_start_precisions: false,
                    latent_start: LatentStart::Residual,
                    prune_iterations: 100,
                    // A Bayes factor above e³ ≈ 20 keeps an edge: 14.83 / 0.585 against 15.42 /
                    // 0.581 with 0 on the 12 ten-node sets (BENCHMARKS.md, issue 10).
                    prune_margin: 3.0,
                    // Counting the rows r times gave 22.33 / 0.475 against 15.42 / 0.581
                    // (BENCHMARKS.md).
                    subset_scaling: SubsetScaling::ScaleBound,
                },
                uncollapsed: UncollapsedSettings {
                    batch_size: 256,
                    samples: 10,
                },
                // Chosen by accuracy per second on the 10-node sets (BENCHMARKS.md): 200 rows and
                // M = 20 reach a DAG in about 25 s; 300 rows and M = 30 are more accurate but take
                // 2.5 times as long.
                max_rows: 200,
                inducing_points: 20,
                inducing_per_input: 0,
                learning_rate: 0.05,
                warmup: PhaseLength {
                    min: 100,
                    max: 600,
                    window: 25,
                    tolerance: 1e-3,
                },
                acyclic_max: 1500,
                rho: None,
                tau: 0.005,
                cooldown: PhaseLength {
                    min: 50,
                    max: 400,
                    window: 25,
                    tolerance: 1e-3,
                },
                power_iterations: 50,
                linear_threshold: 1e-4,
                stationary_threshold: 0.05,
                restarts: 2,
                start_iterations: 100,
                threads: 0,
                dag_rule: DagRule::Greedy,
                two_cycle_penalty: true,
                restart_selection: RestartSelection::Objective,
                method: Method::Cgp,
                exact: ExactSettings::default(),
            },
            Self::Thorough => {
                let fast = Self::Interactive.settings();
                SearchSettings {
                    max_rows: 400,
                    inducing_points: 20,
                    inducing_per_input: 1,
                    warmup: PhaseLength {
                        max: 1000,
                        ..fast.warmup
                    },
                    acyclic_max: 2500,
                    cooldown: PhaseLength {
                        max: 600,
                        ..fast.cooldown
                    },
                    restarts: 4,
                    start_iterations: 200,
                    collapsed: CollapsedSettings {
                        prune_iterations: 200,
                        ..fast.collapsed.clone()
                    },
                    // With 4 restarts the final objective rarely picks the best graph; the graphs'
                    // evidence picked the best in 3 of 4 sets (BENCHMARKS.md, issue 10).
                    restart_selection: RestartSelection::GraphEvidence,
                    ..fast
                }
            }
            Self::Paper => SearchSettings {
                bound: BoundKind::Uncollapsed,
                // Not read by the uncollapsed bound; the paper's schedule has no pruning.
                collapsed: CollapsedSettings {
                    gamma_interval: 4,
                    subset_scaling: SubsetScaling::ScaleBound,
                    scale_start_precisions: false,
                    latent_start: LatentStart::Residual,
                    prune_iterations: 0,
                    prune_margin: 0.0,
                },
                uncollapsed: UncollapsedSettings {
                    batch_size: 256,
                    samples: 50,
                },
                max_rows: usize::MAX,
                inducing_points: 400,
                inducing_per_input: 0,
                learning_rate: 0.05,
                warmup: PhaseLength::fixed(25_000),
                acyclic_max: 50_000,
                rho: None,
                tau: 0.005,
                cooldown: PhaseLength::fixed(25_000),
                power_iterations: 50,
                linear_threshold: 1e-4,
                stationary_threshold: 0.05,
                restarts: 2,
                start_iterations: 1000,
                threads: 0,
                dag_rule: DagRule::Prefix,
                two_cycle_penalty: false,
                restart_selection: RestartSelection::Objective,
                method: Method::Cgp,
                exact: ExactSettings::default(),
            },
        }
    }
}

/// Why search settings cannot be used: one variant per rule, each naming the setting it is
/// about ([`SettingsError::setting`], the key of the settings' JSON and of
/// [`SETTING_FIELDS`](super::SETTING_FIELDS) where it is a field).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    #[error("rows used must be at least {MIN_ROWS}, got {0}")]
    TooFewRows(usize),
    /// A count that must be at least 1: (key, what it counts).
    #[error("{1} must be at least 1")]
    Zero(&'static str, &'static str),
    #[error("{name} must be a positive number, got {value}")]
    NotPositive {
        key: &'static str,
        name: &'static str,
        value: f64,
    },
    #[error(
        "the {} minimum ({min}) exceeds its maximum ({max})",
        phase_name(phase)
    )]
    PhaseOrder {
        phase: &'static str,
        min: usize,
        max: usize,
    },
    #[error("the {} tolerance must be ≥ 0", phase_name(phase))]
    PhaseTolerance { phase: &'static str },
    #[error("{name} must be at most {limit}, got {value}")]
    TooLarge {
        key: &'static str,
        name: &'static str,
        value: usize,
        limit: usize,
    },
    #[error("the pruning margin must be a finite number of nats ≥ 0, got {0}")]
    PruneMargin(f64),
    /// A final threshold below 0 (its key).
    #[error("final thresholds must be ≥ 0")]
    NegativeThreshold(&'static str),
    /// The exact search's settings (`exact`: limits, family fits, graph prior).
    #[error(transparent)]
    Exact(#[from] ExactSettingsError),
    /// The exact search cannot run with these settings on this data and knowledge (e.g. a
    /// variable's required parents exceed the parent limit). Text, because the message names the
    /// data's variables, which only the session knows.
    #[error("{0}")]
    ExactOnData(String),
}

/// How a message names the phase of `key`.
fn phase_name(key: &str) -> &'static str {
    if key == "warmup" {
        "warm-up"
    } else {
        "cool-down"
    }
}

impl SettingsError {
    /// The key of the setting at fault (`max_rows`, `tau`, `warmup`, `exact`, …).
    pub fn setting(&self) -> &'static str {
        match self {
            SettingsError::TooFewRows(_) => "max_rows",
            SettingsError::Zero(key, _)
            | SettingsError::NotPositive { key, .. }
            | SettingsError::TooLarge { key, .. }
            | SettingsError::NegativeThreshold(key) => key,
            SettingsError::PhaseOrder { phase, .. } | SettingsError::PhaseTolerance { phase } => {
                phase
            }
            SettingsError::PruneMargin(_) => "prune_margin",
            SettingsError::Exact(_) | SettingsError::ExactOnData(_) => "exact",
        }
    }
}

impl SearchSettings {
    /// The final thresholds (§5.4), the one rule for whether edge j → i is in the graph: its
    /// linear weight θ^lin ≥ `linear_threshold`, or some stationary kernel's precision θ ≥
    /// `stationary_threshold` (`stationary` holds one θ per stationary kernel on input j).
    pub fn edge_passes_thresholds(&self, linear: f64, stationary: &[f64]) -> bool {
        linear >= self.linear_threshold
            || stationary.iter().any(|&t| t >= self.stationary_threshold)
    }

    /// These settings, checked: the form the engine takes.
    pub fn check(self) -> Result<CheckedSettings, SettingsError> {
        CheckedSettings::try_from(self)
    }

    /// Checks every field, naming the first one that is unusable.
    pub fn validate(&self) -> Result<(), SettingsError> {
        let positive = |key: &'static str, name: &'static str, value: f64| {
            if value > 0.0 && value.is_finite() {
                Ok(())
            } else {
                Err(SettingsError::NotPositive { key, name, value })
            }
        };
        if self.max_rows < MIN_ROWS {
            return Err(SettingsError::TooFewRows(self.max_rows));
        }
        if self.uncollapsed.batch_size == 0 {
            return Err(SettingsError::Zero("batch_size", "the batch size"));
        }
        if self.uncollapsed.samples == 0 {
            return Err(SettingsError::Zero("samples", "the Monte Carlo samples"));
        }
        if self.inducing_points == 0 {
            return Err(SettingsError::Zero("inducing_points", "inducing points"));
        }
        positive("learning_rate", "the learning rate", self.learning_rate)?;
        positive("tau", "τ", self.tau)?;
        if let Some(rho) = self.rho {
            positive("rho", "ρ", rho)?;
        }
        for (phase, p) in [("warmup", self.warmup), ("cooldown", self.cooldown)] {
            if p.min > p.max {
                return Err(SettingsError::PhaseOrder {
                    phase,
                    min: p.min,
                    max: p.max,
                });
            }
            if p.tolerance < 0.0 || !p.tolerance.is_finite() {
                return Err(SettingsError::PhaseTolerance { phase });
            }
        }
        if self.collapsed.gamma_interval == 0 {
            return Err(SettingsError::Zero(
                "gamma_interval",
                "the iterations between rises of γ",
            ));
        }
        if self.restarts == 0 {
            return Err(SettingsError::Zero("restarts", "restarts"));
        }
        // Sizes no machine could hold or finish are refused up front, naming the limit.
        for (key, name, value, limit) in [
            ("restarts", "restarts", self.restarts, MAX_RESTARTS),
            (
                "inducing_points",
                "inducing points",
                self.inducing_points,
                MAX_INDUCING_POINTS,
            ),
            (
                "inducing_per_input",
                "inducing points per input",
                self.inducing_per_input,
                MAX_INDUCING_POINTS,
            ),
            (
                "batch_size",
                "the batch size",
                self.uncollapsed.batch_size,
                MAX_BATCH_SIZE,
            ),
            (
                "samples",
                "Monte Carlo samples",
                self.uncollapsed.samples,
                MAX_SAMPLES,
            ),
            (
                "power_iterations",
                "power iterations",
                self.power_iterations,
                MAX_POWER_ITERATIONS,
            ),
            (
                "start_iterations",
                "GP-regression start iterations",
                self.start_iterations,
                MAX_PHASE_ITERATIONS,
            ),
            (
                "prune_iterations",
                "pruning refit iterations",
                self.collapsed.prune_iterations,
                MAX_PHASE_ITERATIONS,
            ),
            (
                "acyclic_max",
                "acyclic-phase iterations",
                self.acyclic_max,
                MAX_PHASE_ITERATIONS,
            ),
            (
                "warmup_max",
                "warm-up iterations",
                self.warmup.max,
                MAX_PHASE_ITERATIONS,
            ),
            (
                "cooldown_max",
                "cool-down iterations",
                self.cooldown.max,
                MAX_PHASE_ITERATIONS,
            ),
            ("threads", "threads", self.threads, MAX_THREADS),
        ] {
            if value > limit {
                return Err(SettingsError::TooLarge {
                    key,
                    name,
                    value,
                    limit,
                });
            }
        }
        if self.power_iterations == 0 {
            return Err(SettingsError::Zero(
                "power_iterations",
                "power iterations per step",
            ));
        }
        let margin = self.collapsed.prune_margin;
        if !(margin >= 0.0 && margin.is_finite()) {
            return Err(SettingsError::PruneMargin(margin));
        }
        if self.linear_threshold < 0.0 {
            return Err(SettingsError::NegativeThreshold("linear_threshold"));
        }
        if self.stationary_threshold < 0.0 {
            return Err(SettingsError::NegativeThreshold("stationary_threshold"));
        }
        if self.method.runs_exact() {
            self.exact.validate().map_err(SettingsError::Exact)?;
        }
        Ok(())
    }

    /// Caps the warm-up, acyclic and cool-down phases at `cap` iterations each (their minimums
    /// too, so the settings stay valid).
    pub fn cap_iterations(&mut self, cap: usize) {
        for p in [&mut self.warmup, &mut self.cooldown] {
            p.max = p.max.min(cap);
            p.min = p.min.min(p.max);
        }
        self.acyclic_max = self.acyclic_max.min(cap);
    }

    /// M for a variable whose kernel has `inputs` inputs (candidate parents + w).
    pub fn inducing_for(&self, inputs: usize) -> usize {
        self.inducing_points + self.inducing_per_input * inputs
    }

    /// ρ for D variables (5D unless set).
    pub fn rho_for(&self, d: usize) -> f64 {
        self.rho.unwrap_or(5.0 * d as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_exact_for_few_variables_and_hybrid_above_with_a_reason() {
        let (m, why) = Method::Auto.resolve(AUTO_EXACT_MAX_VARIABLES);
        assert_eq!(m, Method::Exact);
        assert!(why.unwrap().contains("auto"));
        let (m, why) = Method::Auto.resolve(AUTO_EXACT_MAX_VARIABLES + 1);
        assert_eq!(m, Method::Hybrid);
        assert!(why.is_some());
        for m in [Method::Cgp, Method::Exact, Method::Hybrid] {
            assert_eq!(m.resolve(30), (m, None));
        }
        assert_eq!(Method::parse("auto"), Ok(Method::Auto));
    }

    /// A change that breaks one rule, and the key the refusal must name.
    type Breaks = (fn(&mut SearchSettings), &'static str);

    /// Each broken rule is its own error, naming a key of the settings' JSON.
    #[test]
    fn every_refusal_names_its_setting() {
        let keys = super::fields::setting_keys(
            &serde_json::to_value(Preset::Interactive.settings()).unwrap(),
        );
        let cases: [Breaks; 9] = [
            (|s| s.max_rows = 3, "max_rows"),
            (|s| s.uncollapsed.samples = 0, "samples"),
            (|s| s.tau = f64::NAN, "tau"),
            (|s| s.rho = Some(-1.0), "rho"),
            (|s| s.warmup.min = s.warmup.max + 1, "warmup"),
            (|s| s.restarts = MAX_RESTARTS + 1, "restarts"),
            (|s| s.collapsed.prune_margin = -1.0, "prune_margin"),
            (|s| s.stationary_threshold = -0.1, "stationary_threshold"),
            (
                |s| {
                    s.method = Method::Exact;
                    s.exact.max_parents = 0;
                },
                "exact",
            ),
        ];
        for (breaks, key) in cases {
            let mut s = Preset::Interactive.settings();
            breaks(&mut s);
            let err = s.validate().unwrap_err();
            assert_eq!(err.setting(), key, "{err}");
            assert!(keys.contains(&key.to_string()), "{key} is not a setting");
        }
        let mut s = Preset::Interactive.settings();
        s.warmup.min = 700;
        s.warmup.max = 600;
        assert_eq!(
            s.validate().unwrap_err().to_string(),
            "the warm-up minimum (700) exceeds its maximum (600)"
        );
        assert!(Preset::ALL.iter().all(|p| p.settings().validate().is_ok()));
    }

    /// Checked settings are only made from settings that pass, by `check` or from JSON, and a
    /// change to them is checked again.
    #[test]
    fn checked_settings_hold_only_valid_settings() {
        let mut bad = Preset::Interactive.settings();
        bad.tau = 0.0;
        assert_eq!(bad.clone().check().unwrap_err().setting(), "tau");
        let json = serde_json::to_string(&bad).unwrap();
        let err = serde_json::from_str::<CheckedSettings>(&json).unwrap_err();
        assert!(
            err.to_string().contains("τ must be a positive number"),
            "{err}"
        );
        let good = Preset::Thorough.checked();
        let back: CheckedSettings =
            serde_json::from_str(&serde_json::to_string(&good).unwrap()).unwrap();
        assert_eq!(back, good);
        let err = good.clone().with(|s| s.restarts = 0).unwrap_err();
        assert_eq!(err.setting(), "restarts");
        let more = good.with(|s| s.restarts = 7).unwrap();
        assert_eq!(more.restarts, 7);
    }

    /// Each bound's own settings sit under its name in the JSON form, not at the top.
    #[test]
    fn bound_settings_live_with_their_bound() {
        let json = serde_json::to_value(Preset::Paper.settings()).unwrap();
        assert_eq!(json["uncollapsed"]["samples"], 50);
        assert_eq!(json["collapsed"]["gamma_interval"], 4);
        for key in ["batch_size", "samples", "gamma_interval", "prune_margin"] {
            assert!(json.get(key).is_none(), "{key} is at the top level");
        }
    }
}
