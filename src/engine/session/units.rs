//! Stepping a session: units of work begun, their jobs listed, computed (here or by a driver) and
//! finished, abandoned at a stop.

use super::*;
use crate::discovery::error::{DiscoveryError, NotRun};

impl Session {
    /// Works for about `budget_seconds` (at least one unit of work, unless a stop was requested),
    /// running each unit's jobs on the session's backend, then returns a snapshot.
    pub fn step(&mut self, budget_seconds: f64) -> Snapshot {
        self.step_units(budget_seconds, false)
    }

    /// [`Session::step`] that returns before beginning a unit that may run long
    /// ([`Session::next_unit_may_be_long`]; none is begun when the first may), for a driver that
    /// sends such units to another thread.
    pub fn step_short_units(&mut self, budget_seconds: f64) -> Snapshot {
        self.step_units(budget_seconds, true)
    }

    pub(super) fn step_units(&mut self, budget_seconds: f64, short_only: bool) -> Snapshot {
        let start = now_seconds();
        let _watch = heartbeat::watch(Some(self.stop_flag.clone()));
        loop {
            if self.stop_flag.is_raised() {
                self.stop();
            }
            if short_only && self.pending.is_none() && self.next_unit_may_be_long() {
                break;
            }
            if self.is_finished() || !self.begin_unit(self.backend.width()) {
                break;
            }
            let jobs = self.unit_jobs();
            let before = self.backend.device_traffic();
            let outcomes = self.backend.run(&self.problem.data, &jobs);
            drop(jobs);
            if let (Some(before), Some(after), false) = (
                before,
                self.backend.device_traffic(),
                heartbeat::interrupted(),
            ) {
                // Counted only when the GPU computed the whole unit (a failure midway leaves
                // `device_traffic` None).
                self.count_device_traffic(after - before);
            }
            if heartbeat::interrupted() {
                // A unit cut short is dropped whole: no restart sees half an iteration as
                // faults, no family a fit stopped half-way as its score.
                self.abandon_unit();
            } else {
                self.finish_unit(outcomes);
            }
            if now_seconds() - start >= budget_seconds {
                break;
            }
        }
        self.report()
    }

    /// Counts `traffic`, what crossed to and from a GPU while it computed the whole of the unit
    /// begun (before [`Session::finish_unit`]), into the result's `gpu.steady_state` when the
    /// unit is an iteration that used the device (at least one submission): every such iteration
    /// after the first since the session was made or resumed (the warm-up creates the device's
    /// resident buffers and bind groups). An iteration the host computed alone (a collapsed
    /// bound below the Ψ2 threshold) is not a GPU iteration.
    pub fn count_device_traffic(&mut self, traffic: DeviceTraffic) {
        if traffic.submissions == 0
            || !matches!(
                self.pending.as_ref().map(|p| &p.unit),
                Some(Unit::Iteration(_))
            )
        {
            return;
        }
        let evaluations = self.unit_job_count();
        let counts = &mut self.gpu_traffic;
        if counts.warmed_up {
            counts
                .steady
                .get_or_insert_with(SteadyState::default)
                .add_iteration(evaluations, traffic);
        }
        counts.warmed_up = true;
    }

    /// The snapshot now, with the objective terms of the iterations since the last report.
    pub fn report(&mut self) -> Snapshot {
        let mut snapshot = self.snapshot();
        snapshot.trace = thin(std::mem::take(&mut self.trace), MAX_TRACE_POINTS);
        snapshot
    }

    /// The data every job of this session reads (the rows used, N × D, standardised).
    pub fn data(&self) -> &DMatrix<f64> {
        &self.problem.data
    }

    /// Whether the next unit of work may run long (over about a quarter of a second) on one
    /// thread: anything but an iteration of the continuous search (starting fits, pruning refits,
    /// final bounds, family fits), or iterations measured to take that long, or, before any was
    /// timed, estimated to (rows × M² × variables ≥ [`LONG_ITERATION_WORK`]). A driver that must
    /// answer a stop or a pause at once (the page's worker) sends such a unit to another thread.
    pub fn next_unit_may_be_long(&self) -> bool {
        if self.stopped || self.is_finished() {
            return false;
        }
        if self.rescoring()
            || self.exact_due()
            || self.exact.as_ref().is_some_and(|x| !x.finished())
        {
            return true;
        }
        if self
            .restarts
            .iter()
            .any(|r| !r.finished() && !r.wants_evaluation())
        {
            return true;
        }
        match self.iteration_seconds {
            Some(seconds) => seconds >= LONG_UNIT_SECONDS,
            None => {
                let d = self.names.len();
                let s = &self.problem.settings;
                let m = s
                    .inducing_for(d.saturating_sub(1))
                    .min(self.problem.data.nrows()) as f64;
                let iterating = self
                    .restarts
                    .iter()
                    .filter(|r| r.wants_evaluation())
                    .count();
                self.problem.data.nrows() as f64 * m * m * (d * iterating) as f64
                    >= LONG_ITERATION_WORK
            }
        }
    }

    /// Prepares the next unit of work for a backend that runs `width` jobs at once, and says
    /// whether there is one (false once the run is finished or stopped). A unit is the families
    /// of the restarts' DAGs still to fit, a batch of the exact search, every restart's pending
    /// work between iterations, or one iteration of every iterating restart. Work that needs no
    /// numerics (planning the exact search, thresholding) is done here. A unit already begun
    /// stays the one handed out.
    pub fn begin_unit(&mut self, width: usize) -> bool {
        if self.pending.is_some() {
            return true;
        }
        let width = width.max(1);
        self.width = width;
        let mut undo = Vec::new();
        loop {
            if self.stopped || self.is_finished() {
                return false;
            }
            let unit = if self.rescoring() {
                Unit::Rescore(self.pending_families().into_iter().take(width).collect())
            } else if self.exact_due() {
                self.start_exact();
                continue;
            } else if let Some(x) = self.exact.as_ref().filter(|x| !x.finished()) {
                Unit::Exact(x.next_batch(width))
            } else if self
                .restarts
                .iter()
                .any(|r| !r.finished() && !r.wants_evaluation())
            {
                // Each restart has its own random stream, so doing their chores together
                // changes no result.
                let problem = &self.problem;
                Unit::Chores(
                    self.restarts
                        .iter_mut()
                        .enumerate()
                        .filter(|(_, r)| !r.finished() && !r.wants_evaluation())
                        .map(|(k, r)| (k, r.chore(problem)))
                        .collect(),
                )
            } else {
                let mut iterating = Vec::new();
                let problem = &self.problem;
                for (k, r) in self.restarts.iter_mut().enumerate() {
                    if r.wants_evaluation() {
                        undo.push((k, r.iteration_undo()));
                        r.begin_iteration(problem);
                        iterating.push(k);
                    }
                }
                Unit::Iteration(iterating)
            };
            self.pending = Some(PendingUnit {
                unit,
                started: now_seconds(),
                undo,
            });
            return true;
        }
    }

    /// The jobs of the unit begun, in the order their outcomes are expected (none when no unit is
    /// begun or the unit needs no numeric work).
    pub fn unit_jobs(&self) -> Vec<Job<'_>> {
        let Some(pending) = &self.pending else {
            return Vec::new();
        };
        match &pending.unit {
            Unit::Rescore(keys) => keys
                .iter()
                .map(|(child, parents)| Job::Family {
                    child: *child,
                    parents: std::borrow::Cow::Borrowed(parents),
                    settings: self.rescore_settings(parents.len()),
                    seed: self.seed,
                    warm: None,
                })
                .collect(),
            Unit::Exact(keys) => self
                .exact
                .as_ref()
                .map_or_else(Vec::new, |x| x.family_jobs(keys)),
            Unit::Chores(chores) => chores
                .iter()
                .flat_map(|(_, jobs)| jobs.iter().cloned())
                .collect(),
            Unit::Iteration(positions) => positions
                .iter()
                .flat_map(|&k| self.restarts[k].evaluation_jobs())
                .collect(),
        }
    }

    pub(super) fn unit_job_count(&self) -> usize {
        match self.pending.as_ref().map(|p| &p.unit) {
            None => 0,
            Some(Unit::Rescore(keys) | Unit::Exact(keys)) => keys.len(),
            Some(Unit::Chores(chores)) => chores.iter().map(|(_, jobs)| jobs.len()).sum(),
            Some(Unit::Iteration(positions)) => positions
                .iter()
                .map(|&k| self.restarts[k].components().len())
                .sum(),
        }
    }

    /// Completes the unit begun with its jobs' outcomes, in the order of
    /// [`Session::unit_jobs`]. A job without an outcome (a backend that lost it) counts as a
    /// failed one, which a restart handles as any numerical failure; a family is fitted again
    /// ([`ExactSearch::apply`]).
    pub fn finish_unit(&mut self, mut outcomes: Vec<Outcome>) {
        let expected = self.unit_job_count();
        let Some(PendingUnit { unit, started, .. }) = self.pending.take() else {
            return;
        };
        outcomes.truncate(expected);
        while outcomes.len() < expected {
            outcomes.push(Outcome::Value(Err(DiscoveryError::NotRun(
                NotRun::NoOutcome,
            ))));
        }
        let seconds = now_seconds() - started;
        self.elapsed += seconds;
        match unit {
            Unit::Rescore(keys) => {
                let fitted = keys.len();
                for (key, outcome) in keys.into_iter().zip(outcomes) {
                    self.families.insert(key, outcome.into_value());
                }
                // Thread-seconds per family, so the time left divides by the width again.
                let per_family = seconds * self.width.min(fitted) as f64 / fitted.max(1) as f64;
                self.family_seconds = Some(
                    self.family_seconds
                        .map_or(per_family, |s| 0.8 * s + 0.2 * per_family),
                );
                self.record_graph_evidence();
            }
            Unit::Exact(keys) => {
                let width = self.width;
                if let Some(x) = self.exact.as_mut() {
                    x.apply(keys, outcomes, seconds, width);
                }
            }
            Unit::Chores(chores) => {
                let mut outcomes = outcomes.into_iter();
                for (k, jobs) in chores {
                    let mine: Vec<Outcome> = outcomes.by_ref().take(jobs.len()).collect();
                    self.restarts[k].apply_chore(mine, &self.problem);
                }
            }
            Unit::Iteration(positions) => {
                let mut outcomes = outcomes.into_iter();
                for k in positions {
                    let r = &mut self.restarts[k];
                    let evals: Vec<Result<Evaluation, EvaluationError>> = outcomes
                        .by_ref()
                        .take(r.components().len())
                        .map(|o| match o {
                            Outcome::Evaluation(e) => e,
                            other => Err(EvaluationError::Mismatch(format!(
                                "an evaluation came back as {}",
                                other.kind()
                            ))),
                        })
                        .collect();
                    r.finish_iteration(evals, &self.problem);
                    if let Some(terms) = r.last_terms() {
                        self.trace.push(TracePoint {
                            restart: r.index(),
                            iteration: r.iterations(),
                            phase: r.phase(),
                            terms,
                        });
                    }
                }
                self.iteration_seconds = Some(match self.iteration_seconds {
                    Some(s) => 0.9 * s + 0.1 * seconds,
                    None => seconds,
                });
                self.iteration_time.add(seconds);
            }
        }
    }

    /// Drops the unit begun (its jobs were cut short by a stop, or their worker died): nothing
    /// it computed is kept, what beginning it changed is put back (an iteration's seeds and
    /// penalty), and the next unit plans the same work again, so a checkpoint taken now resumes
    /// to the uninterrupted run's result.
    pub fn abandon_unit(&mut self) {
        if let Some(p) = self.pending.take() {
            self.elapsed += now_seconds() - p.started;
            for (k, undo) in p.undo {
                self.restarts[k].undo_iteration(undo);
            }
        }
    }

    /// Takes the family scores of `cache` this run does not hold (a score cache file written as
    /// an earlier run of the same data, settings and seed fitted them, or this run after its
    /// checkpoint): the exact search skips them. Returns how many were taken (0 for a cache of
    /// another key).
    pub fn merge_score_cache(&mut self, cache: &ScoreCache) -> usize {
        match self.exact.as_mut() {
            Some(x) => x.absorb(cache),
            None => self.score_cache.merge(cache),
        }
    }

    /// Every restart's numerical faults, restart by restart.
    pub fn faults(&self) -> Vec<FaultEvent> {
        self.restarts
            .iter()
            .flat_map(|r| r.faults().iter().cloned())
            .collect()
    }

    /// Stops the run; [`Session::result`] then reports the best graph so far.
    pub fn stop(&mut self) {
        if !self.stopped {
            self.stopped_at = Some(crate::base::clock::utc_now());
        }
        self.stopped = true;
        if let Some(x) = &mut self.exact {
            x.stop();
        }
    }
}
