//! Explanations asked of a finished run: an edge's evidence, a family's fitted conditional and the
//! two directions of a pair compared, each fitted on at most [`EXPLAIN_MAX_ROWS`] rows.

use super::*;
use crate::worker::protocol::ExplainAbout;

impl Driver {
    /// What an explanation fits on: the loaded data (standardised, at most [`EXPLAIN_MAX_ROWS`]
    /// rows drawn from `seed`) and the graph `edges` over them; or why there is nothing to
    /// explain now (no data, a run in progress, a graph that is not a DAG of the data's columns).
    pub(super) fn explanation_inputs(
        &self,
        edges: &[(usize, usize)],
        seed: u64,
    ) -> Result<(DMatrix<f64>, Dag), String> {
        let dataset = self.dataset.as_ref().ok_or("load data first")?;
        if self.is_running() {
            return Err("wait for the run to end: an explanation refits variables".into());
        }
        let data = explain_rows(&dataset.standardised().to_matrix(), seed);
        let dag = Dag::from_edges(data.ncols(), edges)
            .map_err(|e| format!("the graph cannot be explained: {e}"))?;
        Ok((data, dag))
    }

    /// The answer to the request `about`: `fit` on its inputs ([`Driver::explanation_inputs`]),
    /// given to `reply` with the request's id, or `ExplainFailed` with the reason.
    fn answer<T>(
        &self,
        about: &ExplainAbout,
        fit: impl FnOnce(&DMatrix<f64>, &Dag) -> Result<T, String>,
        reply: impl FnOnce(u64, T) -> FromWorker,
    ) -> FromWorker {
        let answered = self
            .explanation_inputs(&about.edges, about.seed)
            .and_then(|(data, dag)| fit(&data, &dag));
        explanation_reply(about.request_id, answered, |value| {
            reply(about.request_id, value)
        })
    }

    /// The evidence of `edge` in the graph `about.edges` on the loaded data (standardised, at
    /// most [`EXPLAIN_MAX_ROWS`] rows, a subset drawn from `about.seed`): the families its
    /// removal and reversal change, fitted as the exact search fits them (`discovery::explain`).
    /// Runs here, one family after another; the page asks only while no run is in progress.
    pub fn explain_edge(&self, about: &ExplainAbout, edge: (usize, usize)) -> FromWorker {
        self.answer(
            about,
            |data, dag| edge_evidence(data, dag, edge, about.seed),
            |request_id, evidence| FromWorker::EdgeExplained {
                request_id,
                evidence: Box::new(evidence),
            },
        )
    }

    /// Variable `child`'s fitted conditional given its parents in the graph `about.edges`,
    /// along parent `shown_parent`, on the loaded data (as [`Driver::explain_edge`] reads them).
    pub fn fit_conditional(
        &self,
        about: &ExplainAbout,
        child: usize,
        shown_parent: usize,
    ) -> FromWorker {
        self.answer(
            about,
            |data, dag| {
                if child >= dag.n() {
                    return Err(format!("there is no variable {child}"));
                }
                conditional(data, child, &dag.parents(child), shown_parent, about.seed)
            },
            |request_id, curve| FromWorker::ConditionalFitted {
                request_id,
                curve: Box::new(curve),
            },
        )
    }

    /// Edge `edge` = j → i of the graph `about.edges` and its reversal side by side: the
    /// edge's evidence ([`Driver::explain_edge`]), i's fitted conditional given pa(i) along j,
    /// and j's given pa(j) ∪ {i} along i (the family the reversal would give j). Their scores
    /// are the evidence's F(i | pa(i)) and F(j | pa(j) ∪ {i}).
    pub fn compare_directions(&self, about: &ExplainAbout, edge: (usize, usize)) -> FromWorker {
        let seed = about.seed;
        self.answer(
            about,
            |data, dag| {
                let evidence = edge_evidence(data, dag, edge, seed)?;
                let (cause, effect) = edge;
                let forward = conditional(data, effect, &dag.parents(effect), cause, seed)?;
                let mut reversed_parents = dag.parents(cause);
                reversed_parents.push(effect);
                let backward = conditional(data, cause, &reversed_parents, effect, seed)?;
                Ok(DirectionComparison {
                    evidence,
                    forward,
                    backward,
                })
            },
            |request_id, comparison| FromWorker::DirectionsCompared {
                request_id,
                comparison: Box::new(comparison),
            },
        )
    }
}

/// Most rows an edge's explanation fits on: each family fit is O(N M²), and a few hundred rows
/// give the evidence of a clear edge many nats to spare.
pub const EXPLAIN_MAX_ROWS: usize = 500;
/// Inducing points of an explanation's family fits (the exact search's default size).
pub const EXPLAIN_INDUCING: usize = 20;

/// The evidence of `edge` in `dag` on `data`: the families its removal and reversal change,
/// fitted as the exact search fits them (`discovery::explain`), one after another.
pub(super) fn edge_evidence(
    data: &DMatrix<f64>,
    dag: &Dag,
    edge: (usize, usize),
    seed: u64,
) -> Result<EdgeEvidence, String> {
    let settings = FamilyScoreSettings::with_inducing(EXPLAIN_INDUCING);
    let plan =
        EdgeEvidencePlan::for_edges(dag, &[edge], settings, seed).map_err(|e| e.to_string())?;
    let outcomes: Vec<Outcome> = plan.jobs().iter().map(|job| job.run(data)).collect();
    plan.assemble(&outcomes)
        .map_err(|e| e.to_string())?
        .pop()
        .ok_or_else(|| "the edge is not in the graph".to_string())
}

/// One family's fitted conditional along `shown_parent`, fitted as the explanations fit families.
pub(super) fn conditional(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    shown_parent: usize,
    seed: u64,
) -> Result<ConditionalCurve, String> {
    let settings = FamilyScoreSettings::with_inducing(EXPLAIN_INDUCING);
    fitted_conditional(
        data,
        child,
        parents,
        shown_parent,
        &settings,
        seed,
        &CurveSettings::default(),
    )
    .map_err(|e| e.to_string())
}

/// At most [`EXPLAIN_MAX_ROWS`] rows of `data`: all of them when there are no more, else a subset
/// drawn from `seed` (in their original order).
pub(super) fn explain_rows(data: &DMatrix<f64>, seed: u64) -> DMatrix<f64> {
    if data.nrows() <= EXPLAIN_MAX_ROWS {
        return data.clone();
    }
    let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(seed);
    take_rows(
        data,
        &subsample_rows(data.nrows(), EXPLAIN_MAX_ROWS, &mut rng),
    )
}

/// The reply to explanation request `request_id`: `reply(value)` when it was answered,
/// `ExplainFailed` with the reason when not.
pub(super) fn explanation_reply<T>(
    request_id: u64,
    answered: Result<T, String>,
    reply: impl FnOnce(T) -> FromWorker,
) -> FromWorker {
    answered.map_or_else(
        |message| FromWorker::ExplainFailed {
            request_id,
            message,
        },
        reply,
    )
}
