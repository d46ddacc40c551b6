//! What a session shows while it runs: its status, progress and the graph of the restart shown.

use super::*;

impl Session {
    pub(super) fn status(&self) -> Status {
        let exact_incomplete = self.problem.settings.method.runs_exact()
            && self.exact_failure.is_none()
            && !self
                .exact
                .as_ref()
                .and_then(ExactSearch::outcome)
                .is_some_and(|o| o.as_ref().is_ok_and(|o| o.complete));
        if self.stopped && (!self.restarts.iter().all(Restart::finished) || exact_incomplete) {
            Status::Stopped
        } else if !self.is_finished() {
            Status::Running
        } else if self.problem.settings.method.runs_exact()
            && self
                .exact
                .as_ref()
                .and_then(ExactSearch::outcome)
                .is_some_and(|o| o.is_ok())
        {
            Status::Done
        } else if self.problem.settings.method == Method::Exact {
            Status::Failed
        } else if self.rescoring() {
            Status::Running
        } else if self.restarts.iter().all(Restart::finished) {
            if self.restarts.iter().any(|r| r.outcome().is_some()) {
                Status::Done
            } else {
                Status::Failed
            }
        } else {
            Status::Running
        }
    }

    pub(super) fn shown_restart(&self) -> &Restart {
        if let Some(r) = self.restarts.iter().find(|r| !r.finished()) {
            return r;
        }
        self.best_finished().unwrap_or(&self.restarts[0])
    }

    /// The finished restart with the highest graph evidence when every finished restart has one
    /// (restarts compared by `RestartSelection::GraphEvidence`), else the highest final objective.
    pub(super) fn best_finished(&self) -> Option<&Restart> {
        let finished: Vec<&Restart> = self
            .restarts
            .iter()
            .filter(|r| r.outcome().is_some())
            .collect();
        let by_evidence = finished
            .iter()
            .all(|r| r.outcome().is_some_and(|o| o.graph_evidence.is_some()));
        finished.into_iter().max_by(|a, b| {
            let s = |r: &Restart| {
                r.outcome().map_or(f64::NEG_INFINITY, |o| {
                    if by_evidence {
                        o.graph_evidence.unwrap_or(f64::NEG_INFINITY)
                    } else {
                        o.score
                    }
                })
            };
            s(a).total_cmp(&s(b))
        })
    }

    /// The iterations each restart may still need (every phase at its maximum length).
    pub(super) fn remaining_iterations(&self, r: &Restart) -> usize {
        let s = &self.problem.settings;
        let left = |max: usize| max.saturating_sub(r.phase_iterations());
        // Pruning refits one variable at a time, about (edges + D) refits of at most
        // `prune_iterations` evaluations of one variable, i.e. about 2 · prune_iterations
        // iterations of all D variables when there are about D edges.
        let pruning = 2 * s.collapsed.prune_iterations;
        match r.phase() {
            Phase::Initialising => s.warmup.max + s.acyclic_max + s.cooldown.max + pruning,
            Phase::WarmUp => left(s.warmup.max) + s.acyclic_max + s.cooldown.max + pruning,
            Phase::Acyclic => left(s.acyclic_max) + s.cooldown.max + pruning,
            Phase::Thresholding => s.cooldown.max + pruning,
            Phase::CoolDown => left(s.cooldown.max) + pruning,
            Phase::Pruning => pruning / 2,
            Phase::Families => 0,
            Phase::Done | Phase::Failed => 0,
        }
    }

    /// The snapshot of an exact search: families scored so far, the one-parent gains as the heatmap
    /// while screening (cause × effect, gains below 0 shown as 0), then the edge probabilities and
    /// the best DAG over the families scored so far, and at the end over all of them.
    pub(super) fn exact_snapshot(&self, x: &ExactSearch) -> Snapshot {
        let d = self.names.len();
        let progress = x.progress();
        let status = self.status();
        let (adjacency, edges) = match (x.outcome(), x.live()) {
            (Some(Ok(o)), _) => (o.edge_probabilities.clone(), o.best.dag.edges()),
            (None, Some(live)) => (live.edge_probabilities.clone(), live.edges.clone()),
            _ => {
                let gains = x.one_parent_gains();
                let adj = (0..d)
                    .map(|cause| {
                        (0..d)
                            .map(|effect| gains[effect][cause].unwrap_or(0.0).max(0.0))
                            .collect()
                    })
                    .collect();
                (adj, Vec::new())
            }
        };
        let remaining_seconds = x.remaining_seconds(self.width);
        let stage_text = match progress.stage {
            crate::discovery::exact::ExactStage::Screening => "screening every one-parent family",
            crate::discovery::exact::ExactStage::Families => {
                "scoring every family within the candidate parents"
            }
            crate::discovery::exact::ExactStage::Scored => "every family scored",
        };
        let view = SearchView {
            restart: 0,
            phase: if x.finished() {
                Phase::Done
            } else {
                Phase::Families
            },
            phase_text: format!(
                "Exact search: {stage_text} ({} of {} families; {} fitted, {} from the cache).{}",
                progress.done,
                progress.total,
                progress.families_fitted,
                progress.cache_hits,
                match x.live() {
                    Some(live) => format!(
                        " The best graph over the families scored so far has {} edge{} \
                         (score {:.1} nats); the heatmap shows each edge's probability so far.",
                        live.edges.len(),
                        if live.edges.len() == 1 { "" } else { "s" },
                        live.log_score
                    ),
                    None => String::new(),
                }
            ),
            iteration: progress.families_fitted,
            terms: None,
            adjacency,
            edges,
            exact: Some(progress),
        };
        self.snapshot_of(view, status, remaining_seconds)
    }

    /// The snapshot showing `view`, with the session's own part: its `status`, every restart's
    /// progress, its faults, its time so far, and the progress by `remaining_seconds`.
    fn snapshot_of(
        &self,
        view: SearchView,
        status: Status,
        remaining_seconds: Option<f64>,
    ) -> Snapshot {
        Snapshot {
            status,
            restart: view.restart,
            phase: view.phase,
            phase_text: view.phase_text,
            iteration: view.iteration,
            terms: view.terms,
            adjacency: view.adjacency,
            edges: view.edges,
            restarts: self.restart_progress(),
            faults: self.faults(),
            trace: Vec::new(),
            elapsed_seconds: self.elapsed,
            remaining_seconds,
            progress: self.fraction_done(status, remaining_seconds),
            exact: view.exact,
        }
    }

    /// Elapsed / (elapsed + remaining) while running, 1 once ended.
    pub(super) fn fraction_done(&self, status: Status, remaining_seconds: Option<f64>) -> f64 {
        if status != Status::Running {
            return 1.0;
        }
        // Not timed yet: no claim of progress at all (never 100 % before the first iteration).
        let Some(remaining_seconds) = remaining_seconds else {
            return 0.0;
        };
        let total = self.elapsed + remaining_seconds;
        if total > 0.0 {
            (self.elapsed / total).clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    pub(super) fn restart_progress(&self) -> Vec<RestartProgress> {
        self.restarts
            .iter()
            .map(|r| RestartProgress {
                index: r.index(),
                phase: r.phase(),
                iteration: r.iterations(),
                terms: r.last_terms(),
                score: r.outcome().map(|o| o.score),
                failure: r.failure().map(str::to_string),
            })
            .collect()
    }

    /// The current state, without doing any work.
    pub fn snapshot(&self) -> Snapshot {
        if let Some(x) = &self.exact {
            return self.exact_snapshot(x);
        }
        let d = self.names.len();
        if self.restarts.is_empty() {
            // An exact run before its first unit.
            return Snapshot {
                status: self.status(),
                restart: 0,
                phase: Phase::Families,
                phase_text: "Exact search: starting.".into(),
                iteration: 0,
                terms: None,
                adjacency: vec![vec![0.0; d]; d],
                edges: Vec::new(),
                restarts: Vec::new(),
                faults: Vec::new(),
                trace: Vec::new(),
                elapsed_seconds: self.elapsed,
                remaining_seconds: Some(0.0),
                progress: 0.0,
                exact: None,
            };
        }
        let shown = self.shown_restart();
        let (adjacency, edges) = match shown.outcome() {
            Some(o) if shown.finished() => (o.weights.clone(), o.edges.clone()),
            _ => (
                to_rows(&shown.weights(d)),
                shown.surviving_edges(&self.problem),
            ),
        };
        let remaining_iterations = self
            .restarts
            .iter()
            .map(|r| self.remaining_iterations(r))
            .max()
            .unwrap_or(0);
        let status = self.status();
        let remaining_seconds = if self.rescoring() {
            self.family_seconds
                .map(|per| self.pending_families().len() as f64 * per / self.width as f64)
        } else if status == Status::Running {
            self.iteration_seconds
                .map(|per| remaining_iterations as f64 * per)
        } else {
            Some(0.0)
        };
        let view = SearchView {
            restart: shown.index(),
            phase: shown.phase(),
            phase_text: if self.rescoring() {
                format!(
                    "comparing the restarts' graphs by their evidence ({} families left)",
                    self.pending_families().len()
                )
            } else {
                shown.phase().describe().to_string()
            },
            iteration: shown.iterations(),
            terms: shown.last_terms(),
            adjacency,
            edges,
            exact: None,
        };
        self.snapshot_of(view, status, remaining_seconds)
    }
}

/// What a snapshot shows of the search it follows: the [`Snapshot`] fields of the same names.
struct SearchView {
    restart: usize,
    phase: Phase,
    phase_text: String,
    iteration: usize,
    terms: Option<Terms>,
    adjacency: Vec<Vec<f64>>,
    edges: Vec<(usize, usize)>,
    exact: Option<ExactProgress>,
}
