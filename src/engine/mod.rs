//! The engine the drivers share (DESIGN.md §2): a [`Session`] holds the settings, the data and the
//! search's state machine; `step(budget)` does a bounded amount of work and returns a
//! [`Snapshot`]; `result()` gives the [`RunResult`] that `result.json` records.

pub mod exact_search;
mod explain;
pub mod output;
pub mod session;

pub use crate::base::clock::now_seconds;
pub use exact_search::{fit_families, run_exact};
pub use explain::explain_edges;
pub use session::{
    CheckpointError, DeterminedColumn, IterationTime, RestartProgress, RunResult, Session,
    SessionError, Snapshot, Status, StopRecord, TracePoint, CHECKPOINT_FORMAT, MAX_TRACE_POINTS,
};
