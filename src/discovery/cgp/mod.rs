//! CGP-CDE structure learning (MODEL.md §5): every variable is a GP-CDE of all the others, the
//! dependence hyperparameters form a weighted adjacency A, and Adam maximises
//! Σ_i F_i + log p(θ) − γ h(A) through the phases warm-up → acyclic → threshold → cool-down, over
//! several restarts.
//!
//! Each variable's evidence is the collapsed bound of MODEL.md §4 on (a seeded subset of) the rows,
//! with free q(w) and the SE + linear kernel, so A_ij = θ^lin_ij + θ^se_ij. This is a documented
//! deviation from the paper, which trains the uncollapsed bound with an encoder and four
//! stationary kinds: the collapsed bound needs no Monte Carlo and no q(u), so far fewer iterations
//! reach a usable graph on a CPU (README and BENCHMARKS.md record what it measures).
//!
//! - [`settings`]: schedule, sizes, thresholds and the presets;
//! - [`component`]: one variable's model and optimiser state;
//! - [`restart`]: one restart's state machine.

pub mod component;
pub mod restart;
pub mod settings;

pub use restart::{FaultEvent, Phase, Problem, Restart, RestartOutcome, Terms};
pub use settings::{PhaseLength, Preset, SearchSettings};
