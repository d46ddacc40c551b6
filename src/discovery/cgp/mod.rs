//! CGP-CDE structure learning (MODEL.md §5): every variable is a GP-CDE of all the others, the
//! dependence hyperparameters form a weighted adjacency A, and Adam maximises
//! Σ_i F_i + log p(θ) − γ h(A) through the phases warm-up → acyclic → threshold → cool-down, over
//! several restarts.
//!
//! Each variable's evidence is either the paper's uncollapsed bound (MODEL.md §3: five kernel
//! kinds, an encoder for q(w), minibatches, Monte Carlo, natural gradients; the `paper` preset) or
//! the collapsed bound of MODEL.md §4 on (a seeded subset of) the rows, with free q(w) and the
//! SE + linear kernel, so A_ij = θ^lin_ij + θ^se_ij (the `interactive` preset). The collapsed
//! bound needs no Monte Carlo and no q(u), so far fewer iterations reach a usable graph on a CPU
//! (BENCHMARKS.md records what it measures). A full-batch iteration counts as a quarter epoch for
//! γ's schedule (γ += ρ every `collapsed.gamma_interval` = 4 iterations, as N = 1000, b = 256 gives).
//!
//! - [`settings`]: schedule, sizes, thresholds and the presets;
//! - [`fields`]: the settings a user sets by hand, declared once for the page and the CLI;
//! - [`component`]: one variable's model and optimiser state;
//! - [`variable`]: the interface over both bounds;
//! - [`restart`]: one restart's state machine.

pub mod component;
pub mod fields;
pub mod restart;
pub mod settings;
pub mod start;
pub mod variable;

pub use fields::{
    setting_field, setting_keys, SettingField, BOUND_SECTIONS, NOT_FIELDS, SETTING_FIELDS,
};
pub use restart::{
    FaultEvent, IterationUndo, Phase, PhaseEnd, PhaseRecord, Problem, Restart, RestartOutcome,
    Terms,
};
pub use settings::{
    CheckedSettings, CollapsedSettings, DagRule, Method, PhaseLength, Preset, RestartSelection,
    RowWeight, SearchSettings, SettingsError, SubsetScaling, UncollapsedSettings, MAX_BATCH_SIZE,
    MAX_INDUCING_POINTS, MAX_PHASE_ITERATIONS, MAX_POWER_ITERATIONS, MAX_RESTARTS, MAX_SAMPLES,
    MAX_THREADS,
};
pub use variable::{
    held_evaluation, BoundKind, Evaluation, EvaluationError, HeldBegun, HeldStep, SearchVariable,
    Variable,
};
