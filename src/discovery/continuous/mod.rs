//! The continuous search (CGP-CDE, MODEL.md §5): one restart's state machine over the phases
//! warm-up → acyclic → threshold → cool-down, which hands the runner its units of work
//! ([`crate::discovery::jobs`]) and folds their outcomes back in.

pub mod record;
pub mod restart;

pub use record::{FaultEvent, Phase, PhaseEnd, PhaseRecord, RestartOutcome, Terms};
pub use restart::{IterationUndo, Problem, Restart};
