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
//! This module holds the model's parts, which know nothing of the run around them:
//! - [`component`]: one variable's collapsed model and optimiser state;
//! - [`conditional`]: the interface over both bounds ([`Conditional`]).
//!
//! The run's settings are [`crate::discovery::settings`]'s, the units of work the runner computes
//! [`crate::discovery::jobs`]'s and one restart's state machine [`crate::discovery::continuous`]'s.

pub mod component;
pub mod conditional;

pub use component::{RowWeight, SubsetScaling};
pub use conditional::{
    held_evaluation, BoundKind, Conditional, ConditionalModel, Evaluation, EvaluationError,
    HeldBegun, HeldStep,
};
