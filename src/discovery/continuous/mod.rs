//! The continuous search (CGP-CDE, MODEL.md §5): one restart's state machine over the phases
//! warm-up → acyclic → threshold → cool-down, which hands the runner its units of work
//! ([`crate::discovery::jobs`]) and folds their outcomes back in.

pub mod restart;

pub use restart::{
    FaultEvent, IterationUndo, Phase, PhaseEnd, PhaseRecord, Problem, Restart, RestartOutcome,
    Terms,
};
