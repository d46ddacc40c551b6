//! What a session reports: its status, snapshots while it runs and the run record at the end.

use super::*;

/// Where the whole session is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Running,
    /// Every restart has finished (or failed, with at least one finished).
    Done,
    /// Stopped by the user; the result is the best graph so far.
    Stopped,
    /// Every restart failed.
    Failed,
}

/// One restart's progress, as a snapshot shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartProgress {
    pub index: usize,
    pub phase: Phase,
    pub iteration: usize,
    pub terms: Option<Terms>,
    /// The final score once finished.
    pub score: Option<f64>,
    pub failure: Option<String>,
}

/// One iteration's objective terms, as recorded for the curves.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TracePoint {
    pub restart: usize,
    pub iteration: usize,
    /// The restart's phase after this iteration.
    pub phase: Phase,
    pub terms: Terms,
}

/// Most trace points one snapshot carries: beyond this the step's points are thinned evenly, so a
/// long step cannot make a huge message.
pub const MAX_TRACE_POINTS: usize = 512;

/// What a driver shows after each step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    pub status: Status,
    /// The restart shown in detail (the first still running, else the best).
    pub restart: usize,
    pub phase: Phase,
    /// One plain sentence about the phase.
    pub phase_text: String,
    /// Iterations of the shown restart.
    pub iteration: usize,
    pub terms: Option<Terms>,
    /// W[cause][effect] of the shown restart: θ^lin + θ^se of each candidate edge.
    pub adjacency: Vec<Vec<f64>>,
    /// The shown restart's current graph (cause, effect): the edges that pass the final
    /// thresholds now (it may still have cycles before thresholding), or its final edges.
    pub edges: Vec<(usize, usize)>,
    pub restarts: Vec<RestartProgress>,
    pub faults: Vec<FaultEvent>,
    /// Seconds of work so far (time inside `step`).
    pub elapsed_seconds: f64,
    /// The terms of every iteration done in the step that made this snapshot (thinned evenly to
    /// at most [`MAX_TRACE_POINTS`]), so curves can be drawn per iteration, not per snapshot.
    /// Empty from [`Session::snapshot`].
    pub trace: Vec<TracePoint>,
    /// A rough upper estimate of the seconds left (every phase running to its maximum length);
    /// None until an iteration or a family fit has been timed, so nothing claims to be nearly done
    /// before anything is known.
    pub remaining_seconds: Option<f64>,
    /// Fraction done in [0, 1], by the same estimate.
    pub progress: f64,
    /// The exact search's progress (`exact` and `hybrid` runs, once it has begun).
    #[serde(default)]
    pub exact: Option<ExactProgress>,
}

/// A run's result: enough to reproduce it (DESIGN.md §3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    pub names: Vec<String>,
    /// "adjacency[i][j] = weight of the edge names[i] -> names[j] (row = cause, column = effect)".
    pub orientation: String,
    /// The chosen graph's edges (cause, effect).
    pub edges: Vec<(usize, usize)>,
    /// Edge weights θ^lin + θ^se of the chosen graph, cause × effect.
    pub adjacency: Vec<Vec<f64>>,
    /// The winning restart.
    pub chosen_restart: Option<usize>,
    pub restarts: Vec<RestartOutcome>,
    /// Failed restarts, and why the graph is empty when it is empty for a reason.
    pub failures: Vec<String>,
    pub faults: Vec<FaultEvent>,
    /// Whether every restart ran to the end (false after a stop).
    pub complete: bool,
    pub status: Status,
    pub seed: u64,
    pub preset: Option<Preset>,
    pub settings: SearchSettings,
    pub knowledge: Knowledge,
    /// Rows in the data set and rows used for fitting.
    pub rows: usize,
    pub rows_used: usize,
    pub dataset_fingerprint: String,
    pub seconds: f64,
    pub backend: String,
    /// How the GPU engine behaved, when a GPU computed iterations of this run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuReport>,
    /// Where a GPU backend placed each kind of work it measured (the exact search's family fits),
    /// with the timings that placed it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_choices: Vec<DeviceChoice>,
    /// Wall time of this run's iterations after the first (none for a run without any).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iteration_time: Option<IterationTime>,
    pub version: String,
    /// Which search produced the graph.
    #[serde(default)]
    pub method: Method,
    /// Why that search ran, when `auto` chose it.
    #[serde(default)]
    pub method_reason: Option<String>,
    /// Families (variable, parent set) fitted by this run: the exact search's, or the graph
    /// evidence of the restarts' DAGs (`restart_selection: graph_evidence`).
    #[serde(default)]
    pub families_fitted: usize,
    /// Families the exact search found in its score cache instead of fitting them.
    #[serde(default)]
    pub cache_hits: usize,
    /// Every DAG with its log score and posterior probability, grouped by Markov equivalence
    /// class (exact search, D ≤ 5).
    #[serde(default)]
    pub posterior: Option<GraphPosterior>,
    /// P(i → j | data) at [i][j] (row = cause, column = effect), under the prior that
    /// `exact.edge_probability_prior` states (exact search).
    #[serde(default)]
    pub edge_probabilities: Option<Vec<Vec<f64>>>,
    /// What the exact search did (exact search).
    #[serde(default)]
    pub exact: Option<ExactSummary>,
    /// Where a stopped run stood when it stopped (absent for a run that ended by itself).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<StopRecord>,
    /// Columns almost a function of one other column alone (`data::determined`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub determined: Vec<DeterminedColumn>,
    /// The chosen graph's edges that rest on such a column: every edge touching it but the one
    /// to or from the column it is a function of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges_on_determined: Vec<(usize, usize)>,
}

/// A column almost a function of another, by name (result.json's `determined`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeterminedColumn {
    pub column: String,
    pub by: String,
    /// The noise variance left by a smooth fit on `by` alone, as a fraction of its variance.
    pub residual_fraction: f64,
}

impl RunResult {
    /// Whether the result has a graph to write: not after a failure, nor after a stop that came
    /// before any graph existed (an empty graph there would read as "no edges found").
    pub fn has_graph(&self) -> bool {
        self.status != Status::Failed && self.stopped.as_ref().is_none_or(|s| s.has_graph)
    }
}

/// How a stopped run stood when it stopped (result.json's `stopped`): its graph, if it has one,
/// is the best so far, not a finished result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StopRecord {
    /// Seconds of work done when it stopped.
    pub elapsed_seconds: f64,
    /// Where the run was, in words: "the acyclic phase of restart 2 of 3 (iteration 140)",
    /// "the exact search, scoring families (120 of 400 scored)".
    pub phase: String,
    /// Whether there was a graph yet (the best so far).
    pub has_graph: bool,
    /// The wall-clock time of the stop (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
}

/// What an exact search did, for result.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExactSummary {
    /// Σ_i F(i | pa(i)) of the chosen DAG, plus the graph prior's per-family terms, nats.
    pub log_score: f64,
    /// The graph prior, in words.
    pub prior: String,
    /// The prior the edge probabilities are under, in words.
    pub edge_probability_prior: String,
    /// Each variable's candidate parents (indices).
    pub candidates: Vec<Vec<usize>>,
    /// Planned families that could not be fitted (left out of the search).
    pub families_failed: usize,
    /// False when the run stopped before every planned family was scored.
    pub complete: bool,
    /// The work behind the scores the search read (its score cache): fits, iterations per stage,
    /// how many fits hit a cap, bound evaluations.
    #[serde(default)]
    pub fit_work: FitWork,
}
