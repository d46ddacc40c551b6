//! The run record at the end (or at a stop): the chosen graph, every restart's evidence, the exact
//! search's share and the notes a reader needs.

use super::*;

impl Session {
    /// The result: the finished restart with the highest score, or, when none has finished (after a
    /// stop), the running restart with the highest current objective, thresholded to a DAG the way
    /// the search would (weakest edges out until acyclic, then the final thresholds).
    pub fn result(&self) -> RunResult {
        let d = self.names.len();
        let s = &self.problem.settings;
        let mut notes = Vec::new();
        // Whether a graph exists, to tell a stopped run's best-so-far from "no graph yet".
        let mut has_graph = true;
        let (edges, adjacency, chosen) = if let Some(best) = self.best_finished() {
            let o = best.outcome().expect("finished");
            (o.edges.clone(), o.weights.clone(), Some(best.index()))
        } else if let Some(r) = self
            .restarts
            .iter()
            .filter(|r| r.last_terms().is_some() && !r.finished())
            .max_by(|a, b| {
                let o = |r: &Restart| r.last_terms().map_or(f64::NEG_INFINITY, |t| t.objective);
                o(a).total_cmp(&o(b))
            })
        {
            let w = r.weights(d);
            let mut kept = DMatrix::zeros(d, d);
            for c in r.components() {
                for (j, lin, se) in c.edge_hyperparameters() {
                    if s.edge_passes_thresholds(lin, &se) {
                        kept[(j, c.child())] = 1.0;
                    }
                }
            }
            // The same rule a finished restart uses, so a stop never changes how cycles break.
            match s.dag_rule.apply(&w, &kept, &self.problem.knowledge) {
                Ok(dag) => {
                    let edges = dag.edges();
                    let mut adj = vec![vec![0.0; d]; d];
                    for &(a, b) in &edges {
                        adj[a][b] = w[(a, b)];
                    }
                    (edges, adj, Some(r.index()))
                }
                Err(e) => {
                    notes.push(format!(
                        "the best unfinished restart could not be thresholded to a DAG: {e}"
                    ));
                    has_graph = false;
                    (Vec::new(), vec![vec![0.0; d]; d], None)
                }
            }
        } else {
            if !self.restarts.iter().all(Restart::finished) {
                notes.push(
                    "stopped before any restart had begun iterating, so there is no graph yet"
                        .into(),
                );
            }
            has_graph = false;
            (Vec::new(), vec![vec![0.0; d]; d], None)
        };
        if s.restart_selection == RestartSelection::GraphEvidence
            && self.restarts.iter().all(Restart::finished)
        {
            if self.rescoring() || (self.stopped && !self.pending_families().is_empty()) {
                notes.push(
                    "stopped while comparing the restarts' graphs by their evidence, so the \
                     restart with the highest final objective was chosen"
                        .into(),
                );
            }
            for o in self.restarts.iter().filter_map(Restart::outcome) {
                if let Some(Err(e)) = self.families.graph_evidence(d, &o.edges) {
                    notes.push(format!(
                        "restart {}: the evidence of its graph could not be computed ({e}), so the \
                         restarts were compared by their final objectives",
                        o.index
                    ));
                }
            }
        }
        if let Some(note) = chosen
            .and_then(|k| self.restarts.get(k))
            .and_then(Restart::outcome)
            .and_then(|o| unconverged_acyclic_note(o, s))
        {
            notes.push(note);
        }
        let mut failures: Vec<String> = self
            .restarts
            .iter()
            .filter_map(|r| r.failure().map(|f| format!("restart {}: {f}", r.index())))
            .collect();
        failures.extend(notes);
        // The exact search's graph replaces the continuous one when it has one.
        let (mut edges, mut adjacency, mut chosen) = (edges, adjacency, chosen);
        let mut exact_parts = ExactParts::default();
        if s.method.runs_exact() {
            if let Some(f) = &self.exact_failure {
                failures.push(f.clone());
            }
            match self.exact.as_ref().and_then(ExactSearch::outcome) {
                Some(Ok(o)) => {
                    has_graph = true;
                    edges = o.best.dag.edges();
                    adjacency = vec![vec![0.0; d]; d];
                    for &(a, b) in &edges {
                        adjacency[a][b] = o.edge_probabilities[a][b];
                    }
                    chosen = None;
                    if !o.complete {
                        failures.push(format!(
                            "stopped before every planned family was scored: the graph is the \
                             best over the {} families scored so far",
                            self.score_cache().len()
                        ));
                    }
                    if o.families_failed > 0 {
                        failures.push(format!(
                            "{} families could not be fitted: each stands at its best subset's \
                             value (or is left out when it has none)",
                            o.families_failed
                        ));
                    }
                    let work = self.score_cache().work();
                    if work.families_on_floor_after_failures > 0 {
                        failures.push(format!(
                            "{} families had every fit fail and stand at their closed-form floor \
                             (the noise model or Bayesian linear regression)",
                            work.families_on_floor_after_failures
                        ));
                    }
                    exact_parts = ExactParts {
                        fitted: o.families_fitted,
                        hits: o.cache_hits,
                        posterior: o.posterior.clone(),
                        edge_probabilities: Some(o.edge_probabilities.clone()),
                        summary: Some(ExactSummary {
                            log_score: o.best.score,
                            prior: s.exact.prior.describe(),
                            edge_probability_prior: o.edge_probability_prior.clone(),
                            candidates: o.candidates.clone(),
                            families_failed: o.families_failed,
                            complete: o.complete,
                            fit_work: self.score_cache().work(),
                        }),
                    };
                }
                Some(Err(e)) => {
                    let fallback = if s.method == Method::Hybrid && chosen.is_some() {
                        ", so the graph is the continuous search's"
                    } else {
                        ""
                    };
                    failures.push(format!("the exact search found no graph: {e}{fallback}"));
                    if s.method == Method::Exact {
                        edges = Vec::new();
                        adjacency = vec![vec![0.0; d]; d];
                        has_graph = false;
                    }
                }
                None => {
                    if s.method == Method::Hybrid && chosen.is_some() {
                        failures.push(
                            "stopped before the exact search began, so the graph is the \
                             continuous search's"
                                .into(),
                        );
                    } else if s.method == Method::Exact {
                        failures.push("stopped before any family was scored".into());
                        has_graph = false;
                    } else if chosen.is_none() {
                        has_graph = false;
                    }
                }
            }
        }
        let edges_on_determined: Vec<(usize, usize)> = edges
            .iter()
            .copied()
            .filter(|&(a, b)| {
                self.determined
                    .iter()
                    .any(|d| (a == d.column || b == d.column) && !(a == d.by || b == d.by))
            })
            .collect();
        let status = self.status();
        let stopped = (status == Status::Stopped).then(|| StopRecord {
            elapsed_seconds: self.elapsed,
            phase: self.stop_phase(),
            has_graph,
            at: self.stopped_at.clone(),
        });
        let orientation = if exact_parts.summary.is_some() {
            "adjacency[i][j] is the posterior probability of the chosen edge names[i] -> names[j] \
             (row = cause, column = effect)"
        } else {
            "adjacency[i][j] is the weight of the edge names[i] -> names[j] (row = cause, column = effect)"
        };
        RunResult {
            names: self.names.clone(),
            orientation: orientation.into(),
            edges,
            adjacency,
            chosen_restart: chosen,
            restarts: self
                .restarts
                .iter()
                .filter_map(|r| r.outcome().cloned())
                .collect(),
            failures,
            faults: self.faults(),
            complete: self.restarts.iter().all(Restart::finished),
            status,
            seed: self.seed,
            preset: self.preset,
            settings: s.clone().into_inner(),
            knowledge: self.problem.knowledge.clone(),
            rows: self.problem.total_rows,
            rows_used: self.problem.data.nrows(),
            dataset_fingerprint: format!("{:016x}", self.fingerprint),
            seconds: self.elapsed,
            backend: self.backend.name(),
            iteration_time: Some(self.iteration_time.time).filter(|t| t.iterations > 0),
            gpu: self
                .gpu_traffic
                .steady
                .map(|steady_state| GpuReport { steady_state }),
            device_choices: self.backend.device_choices(),
            version: env!("CARGO_PKG_VERSION").into(),
            method: s.method,
            method_reason: self.method_reason.clone(),
            families_fitted: exact_parts.fitted + self.families.len(),
            cache_hits: exact_parts.hits,
            posterior: exact_parts.posterior,
            edge_probabilities: exact_parts.edge_probabilities,
            exact: exact_parts.summary,
            stopped,
            determined: self
                .determined
                .iter()
                .map(|d| DeterminedColumn {
                    column: self.names[d.column].clone(),
                    by: self.names[d.by].clone(),
                    residual_fraction: d.residual_fraction,
                })
                .collect(),
            edges_on_determined,
        }
    }

    /// Where the run is, in words, for a stopped run's record: the exact search's stage while it
    /// scores families, else the first unfinished restart's phase and iteration.
    pub(super) fn stop_phase(&self) -> String {
        if let Some(x) = self.exact.as_ref() {
            let complete = x
                .outcome()
                .is_some_and(|o| o.as_ref().is_ok_and(|o| o.complete));
            if !complete {
                let p = x.progress();
                let stage = match p.stage {
                    crate::discovery::exact::ExactStage::Screening => {
                        "screening one-parent families"
                    }
                    crate::discovery::exact::ExactStage::Families => "scoring families",
                    crate::discovery::exact::ExactStage::Scored => "every family scored",
                };
                return format!(
                    "the exact search, {stage} ({} of {} scored)",
                    p.done, p.total
                );
            }
        }
        let n = self.restarts.len();
        match self.restarts.iter().find(|r| !r.finished()) {
            Some(r) => format!(
                "the {} phase of restart {} of {n} (iteration {})",
                phase_name(r.phase()),
                r.index() + 1,
                r.iterations()
            ),
            None if self.rescoring() || !self.pending_families().is_empty() => {
                "comparing the restarts' graphs by their evidence".into()
            }
            None if self.problem.settings.method.runs_exact() => {
                "before the exact search began".into()
            }
            None => "after every restart finished".into(),
        }
    }
}

/// A phase's name in a sentence ("the warm-up phase").
pub(super) fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Initialising => "initialising",
        Phase::WarmUp => "warm-up",
        Phase::Acyclic => "acyclic",
        Phase::Thresholding => "thresholding",
        Phase::CoolDown => "cool-down",
        Phase::Pruning => "pruning",
        Phase::Families => "family-scoring",
        Phase::Done => "finished",
        Phase::Failed => "failed",
    }
}

/// The exact search's share of a result.
#[derive(Default)]
pub(super) struct ExactParts {
    fitted: usize,
    hits: usize,
    posterior: Option<GraphPosterior>,
    edge_probabilities: Option<Vec<Vec<f64>>>,
    summary: Option<ExactSummary>,
}

pub(super) fn to_rows(m: &DMatrix<f64>) -> Vec<Vec<f64>> {
    (0..m.nrows())
        .map(|i| m.row(i).iter().copied().collect())
        .collect()
}

/// Keeps at most `max` of `points`, evenly spread, always keeping the last.
pub(super) fn thin<T>(points: Vec<T>, max: usize) -> Vec<T> {
    let n = points.len();
    if n <= max || max == 0 {
        return points;
    }
    // Keep index k·n/max for k < max − 1, then the last.
    let mut keep = vec![false; n];
    for k in 0..max - 1 {
        keep[k * n / max] = true;
    }
    keep[n - 1] = true;
    points
        .into_iter()
        .zip(keep)
        .filter_map(|(p, k)| k.then_some(p))
        .collect()
}

/// A plain note when the chosen restart's acyclic phase ran to its cap without h(A) < τ, so the
/// DAG reported is the one the thresholding rule cut from a graph that still had cycles.
pub(super) fn unconverged_acyclic_note(o: &RestartOutcome, s: &SearchSettings) -> Option<String> {
    let acyclic = o.phases.iter().find(|p| p.phase == Phase::Acyclic)?;
    if acyclic.ended_by != PhaseEnd::Cap {
        return None;
    }
    let rule = match s.dag_rule {
        DagRule::Prefix => "dropping the lightest edges until the rest was acyclic",
        DagRule::Greedy => {
            "keeping edges from the heaviest down and skipping each that closed a cycle"
        }
    };
    Some(format!(
        "restart {}: the acyclic phase did not converge: it ended at its cap of {} iterations \
         with h(A) = {:.3} ≥ τ = {} and {} edges ({} 2-cycles) still passing the thresholds; \
         the reported DAG was cut from that graph by {rule}",
        o.index,
        acyclic.iterations,
        acyclic.h,
        s.tau,
        acyclic.edges.len(),
        acyclic.two_cycles
    ))
}
