//! One restart of the continuous search as a state machine (MODEL.md §5.4 and §9): initialise →
//! warm-up → acyclic → threshold to a DAG → cool-down → score. Work comes in small units so a
//! driver can interleave restarts, batch their numeric work and stop at any time. The numeric
//! work leaves as [`Job`]s and comes back as [`Outcome`]s, so the driver decides where it runs:
//! [`Restart::chore`] gives the jobs of one unit between iterations (a variable's start, a
//! pruning refit, the bounds after pruning, the final bounds; thresholding needs none and is done
//! at once) and [`Restart::apply_chore`] takes their outcomes; an iteration is
//! [`Restart::components`] (evaluated by the caller, possibly with other restarts') and
//! [`Restart::finish_iteration`]. A unit whose outcomes never come back (a stop) leaves the
//! restart as it was.
//!
//! Numerical faults (a factorisation that fails at the current jitter, a non-finite bound) undo
//! the step that led to them: the parameters return to the last evaluated point, the learning
//! rate halves and the jitter grows ten-fold; each event is recorded.

use super::record::{FaultEvent, Phase, PhaseEnd, PhaseRecord, RestartOutcome, Terms};

use nalgebra::DMatrix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use std::borrow::Cow;

use crate::discovery::cgp::component::PRIOR_RATE;
use crate::discovery::cgp::conditional::{
    BoundKind, Checkpoint, Conditional, Evaluation, EvaluationError,
};
use crate::discovery::error::DiscoveryError;
use crate::discovery::jobs::ConditionalStart;
use crate::discovery::jobs::{Job, Outcome};
use crate::discovery::knowledge::Knowledge;
use crate::discovery::settings::{CheckedSettings, DagRule};
use crate::discovery::spectral::{two_cycle_penalty, PowerIteration};
use crate::gp::linalg::JitterPolicy;
use crate::graph::Digraph;
use rand::Rng;

/// ∂/∂θ_ij of log p(θ) − γ(h + h₂) for each candidate edge j → i of `c` (its parents in order):
/// −10 − γ G[j][i], the penalty's share only when γ > 0.
fn edge_gradient(c: &Conditional, penalty: &Penalty, gamma: f64) -> Vec<f64> {
    c.parents()
        .iter()
        .map(|&j| {
            let pushed = if gamma > 0.0 {
                gamma * penalty.gradient[(j, c.child())]
            } else {
                0.0
            };
            -PRIOR_RATE - pushed
        })
        .collect()
}

/// The data and rules shared by all restarts of one search.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Problem {
    /// The rows used (standardised), N × D.
    pub data: DMatrix<f64>,
    /// Rows in the whole data set (the bound is scaled to stand for them).
    pub total_rows: usize,
    /// φ²'s floor per variable.
    pub noise_floors: Vec<f64>,
    pub knowledge: Knowledge,
    pub settings: CheckedSettings,
}

impl Problem {
    /// D.
    pub fn dim(&self) -> usize {
        self.data.ncols()
    }

    /// Iterations per epoch, after each of which γ grows by ρ: ⌈N/b⌉ on minibatches (MODEL.md
    /// §5.4), `collapsed.gamma_interval` for the full-batch collapsed bound.
    pub fn epoch_iterations(&self) -> usize {
        match self.settings.bound {
            BoundKind::Uncollapsed => self
                .data
                .nrows()
                .div_ceil(self.settings.uncollapsed.batch_size.max(1))
                .max(1),
            BoundKind::Collapsed => self.settings.collapsed.gamma_interval,
        }
    }
}

/// The pruning phase's position: the variable being pruned, its objective after refitting (once
/// refitted), and the parents still to test (popped from the end, weakest first).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct PruneState {
    variable: usize,
    objective: Option<f64>,
    queue: Vec<usize>,
    /// Edges (cause, effect) removed so far.
    removed: Vec<(usize, usize)>,
    /// Refits done (the phase's length).
    refits: usize,
    /// Every variable is pruned: the bounds are evaluated once more before the restart finishes.
    rescoring: bool,
}

/// A restart whose last phase has ended, waiting for its final bounds: the terms at the end and
/// one seed per variable for the final bound's draws.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Finishing {
    terms: Terms,
    seeds: Vec<u64>,
}

/// The jitter a restart starts at and raises on each fault: 1e-6 ×10 up to 1e-1, then it gives up.
const RESTART_JITTER: JitterPolicy = JitterPolicy {
    initial: 1e-6,
    factor: 10.0,
    max_attempts: 6,
};
/// The most faults one restart may absorb.
const MAX_FAULTS: usize = 30;

/// One restart's state.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Restart {
    index: usize,
    rng: ChaCha8Rng,
    phase: Phase,
    components: Vec<Conditional>,
    /// Seeds of this iteration's minibatch and Monte Carlo draws, one per variable.
    seeds: Vec<u64>,
    power: PowerIteration,
    gamma: f64,
    phase_iterations: usize,
    iterations: usize,
    history: Vec<f64>,
    checkpoints: Option<Vec<Checkpoint>>,
    /// Each variable's bound at the last evaluation.
    last_values: Vec<f64>,
    jitter: f64,
    faults: Vec<FaultEvent>,
    last: Option<Terms>,
    /// Where the pruning phase is.
    pruning: Option<PruneState>,
    phases: Vec<PhaseRecord>,
    outcome: Option<RestartOutcome>,
    failure: Option<String>,
    finishing: Option<Finishing>,
    /// The penalty at this iteration's point, taken when its seeds were drawn
    /// ([`Restart::begin_iteration`]).
    #[serde(default)]
    penalty: Option<Penalty>,
}

/// What [`Restart::begin_iteration`] changes that a run resumed after an abandoned iteration
/// must find as it was: the random stream (the seeds drawn) and the power iteration's warm start.
#[derive(Debug, Clone)]
pub struct IterationUndo {
    rng: ChaCha8Rng,
    power: PowerIteration,
}

/// The acyclicity penalty at one point: h(A), h₂ and their gradient G (cause × effect) with
/// respect to A (the 2-cycle term's included when the settings add it).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Penalty {
    h: f64,
    h_pairs: f64,
    gradient: DMatrix<f64>,
}

impl Restart {
    /// A restart whose random choices all come from `seed`.
    pub fn new(index: usize, seed: u64, d: usize) -> Self {
        Self {
            index,
            rng: ChaCha8Rng::seed_from_u64(seed),
            phase: Phase::Initialising,
            components: Vec::with_capacity(d),
            seeds: Vec::new(),
            power: PowerIteration::new(d),
            gamma: 0.0,
            phase_iterations: 0,
            iterations: 0,
            history: Vec::new(),
            checkpoints: None,
            last_values: Vec::new(),
            jitter: RESTART_JITTER.initial,
            faults: Vec::new(),
            last: None,
            pruning: None,
            phases: Vec::new(),
            outcome: None,
            failure: None,
            finishing: None,
            penalty: None,
        }
    }

    pub fn index(&self) -> usize {
        self.index
    }
    pub fn phase(&self) -> Phase {
        self.phase
    }
    pub fn iterations(&self) -> usize {
        self.iterations
    }
    pub fn phase_iterations(&self) -> usize {
        self.phase_iterations
    }
    pub fn gamma(&self) -> f64 {
        self.gamma
    }
    pub fn last_terms(&self) -> Option<Terms> {
        self.last
    }
    pub fn faults(&self) -> &[FaultEvent] {
        &self.faults
    }
    pub fn outcome(&self) -> Option<&RestartOutcome> {
        self.outcome.as_ref()
    }

    /// Records the evidence of this restart's DAG (after it finished).
    pub fn set_graph_evidence(&mut self, value: f64) {
        if let Some(o) = self.outcome.as_mut() {
            o.graph_evidence = Some(value);
        }
    }
    pub fn failure(&self) -> Option<&str> {
        self.failure.as_deref()
    }
    /// Whether the next unit of work is an iteration (bound evaluations of every variable).
    pub fn wants_evaluation(&self) -> bool {
        self.finishing.is_none()
            && matches!(self.phase, Phase::WarmUp | Phase::Acyclic | Phase::CoolDown)
    }
    /// Whether nothing is left to do.
    pub fn finished(&self) -> bool {
        matches!(self.phase, Phase::Done | Phase::Failed)
    }
    /// The variables, to be evaluated at [`Restart::jitter`] with [`Restart::seeds`].
    pub fn components(&self) -> &[Conditional] {
        &self.components
    }

    /// Begins an iteration: draws its seeds ([`Restart::draw_seeds`]) and takes the penalty at
    /// the current point, whose gradient (with the graph prior's) each variable is given now,
    /// before its evaluation, so that a device stepping the hyperparameters can add it.
    pub fn begin_iteration(&mut self, problem: &Problem) {
        self.draw_seeds();
        let penalty = self.penalty_at(problem);
        let gamma = self.gamma;
        for c in &mut self.components {
            let d_theta = edge_gradient(c, &penalty, gamma);
            c.prepare_step(&d_theta);
        }
        self.penalty = Some(penalty);
    }

    /// The state [`Restart::begin_iteration`] is about to change, for [`Restart::undo_iteration`].
    pub fn iteration_undo(&self) -> IterationUndo {
        IterationUndo {
            rng: self.rng.clone(),
            power: self.power.clone(),
        }
    }

    /// Puts back what [`Restart::begin_iteration`] changed, for an iteration abandoned before it
    /// finished (a stop inside it): the next one draws the same seeds and takes the same penalty,
    /// so a run resumed from here ends as the uninterrupted one.
    pub fn undo_iteration(&mut self, undo: IterationUndo) {
        self.rng = undo.rng;
        self.power = undo.power;
        self.penalty = None;
    }

    /// Draws this iteration's seeds (one per variable) from the restart's generator; call once
    /// before evaluating ([`Restart::begin_iteration`] does).
    pub fn draw_seeds(&mut self) {
        let rng = &mut self.rng;
        self.seeds = (0..self.components.len()).map(|_| rng.random()).collect();
    }

    /// The seeds drawn by [`Restart::draw_seeds`].
    pub fn seeds(&self) -> &[u64] {
        &self.seeds
    }

    /// This iteration's jobs: every variable's bound and gradient at [`Restart::jitter`] with
    /// [`Restart::seeds`] (drawn first), borrowing the variables.
    pub fn evaluation_jobs(&self) -> Vec<Job<'_>> {
        self.components
            .iter()
            .zip(&self.seeds)
            .map(|(c, &seed)| Job::Evaluate {
                variable: Cow::Borrowed(c),
                jitter: self.jitter,
                seed,
            })
            .collect()
    }
    pub fn jitter(&self) -> f64 {
        self.jitter
    }

    /// W[cause][effect] = A_effect,cause = θ^lin + θ^se of every candidate edge.
    pub fn weights(&self, d: usize) -> DMatrix<f64> {
        let mut w = DMatrix::zeros(d, d);
        for c in &self.components {
            for (j, a) in c.dependence() {
                w[(j, c.child())] = a;
            }
        }
        w
    }

    /// Prepares this restart's next unit of work that is not an iteration and returns its jobs,
    /// to be run in order and given back to [`Restart::apply_chore`]: the next variable's start,
    /// one pruning refit, the bounds after pruning, or the final bounds. Thresholding needs no
    /// numeric work: it is done here, and no job is returned.
    pub fn chore(&mut self, problem: &Problem) -> Vec<Job<'static>> {
        if let Some(f) = &self.finishing {
            return self
                .components
                .iter()
                .zip(&self.last_values)
                .zip(&f.seeds)
                .map(|((c, &evaluated), &seed)| Job::FinalBound {
                    variable: Cow::Owned(c.clone()),
                    evaluated,
                    seed,
                })
                .collect();
        }
        match self.phase {
            Phase::Initialising => {
                let i = self.components.len();
                let start = ConditionalStart {
                    child: i,
                    parents: (0..problem.dim())
                        .filter(|&j| problem.knowledge.allowed(j, i))
                        .collect(),
                    noise_floor: problem.noise_floors[i],
                    total_rows: problem.total_rows,
                    settings: problem.settings.clone(),
                };
                vec![Job::Start {
                    start: Box::new(start),
                    rng: Box::new(self.rng.clone()),
                }]
            }
            Phase::Thresholding => {
                self.threshold(problem);
                Vec::new()
            }
            Phase::Pruning => self.prune_jobs(problem),
            _ => Vec::new(),
        }
    }

    /// One unit of work that is not an iteration, its jobs run on the calling thread (tests and
    /// drivers of a single restart; a session sends them through its backend).
    pub fn advance(&mut self, problem: &Problem) {
        let jobs = self.chore(problem);
        let outcomes = jobs.iter().map(|job| job.run(&problem.data)).collect();
        self.apply_chore(outcomes, problem);
    }

    /// Takes the outcomes of the jobs [`Restart::chore`] gave (in their order).
    pub fn apply_chore(&mut self, outcomes: Vec<Outcome>, problem: &Problem) {
        if outcomes.is_empty() {
            return;
        }
        if self.finishing.is_some() {
            return self.apply_final_bounds(outcomes, problem);
        }
        match self.phase {
            Phase::Initialising => self.apply_start(outcomes, problem),
            Phase::Pruning => self.apply_prune(outcomes, problem),
            _ => {}
        }
    }

    fn apply_start(&mut self, outcomes: Vec<Outcome>, problem: &Problem) {
        let i = self.components.len();
        let Some(Outcome::Started { variable, rng }) = outcomes.into_iter().next() else {
            return self.fail(format!("variable {i}'s start came back as something else"));
        };
        self.rng = *rng;
        match variable {
            Ok(c) => self.components.push(c),
            Err(e) => return self.fail(format!("variable {i} could not be initialised: {e}")),
        }
        if self.components.len() == problem.dim() {
            self.enter(Phase::WarmUp);
        }
    }

    /// The jobs of one unit of the pruning phase: refit the current variable on all its
    /// parents, or test removing its next parent (a refit without it); once every variable is
    /// pruned, evaluate every bound once more. Each variable's parent set is pruned on its own:
    /// removing edges from a DAG keeps it a DAG.
    fn prune_jobs(&mut self, problem: &Problem) -> Vec<Job<'static>> {
        let state = self.pruning.get_or_insert_with(|| PruneState {
            rescoring: true,
            ..PruneState::default()
        });
        let k = state.variable;
        let refit = match (state.rescoring, self.components.get(k)) {
            (false, Some(Conditional::Collapsed(component))) => match state.objective {
                None => Some((component, None)),
                Some(_) => state.queue.last().map(|&j| (component, Some(j))),
            },
            _ => None,
        };
        if let Some((component, without)) = refit {
            return vec![Job::Refine {
                component: Cow::Owned(component.as_ref().clone()),
                without,
                jitter: self.jitter,
                iterations: problem.settings.collapsed.prune_iterations,
            }];
        }
        state.rescoring = true;
        self.components
            .iter()
            .map(|c| Job::Evaluate {
                variable: Cow::Owned(c.clone()),
                jitter: self.jitter,
                seed: 0,
            })
            .collect()
    }

    fn apply_prune(&mut self, outcomes: Vec<Outcome>, problem: &Problem) {
        let Some(mut state) = self.pruning.take() else {
            return;
        };
        if state.rescoring {
            return self.finish_after_pruning(outcomes, problem, state);
        }
        let k = state.variable;
        let Some(Outcome::Refined {
            component: fitted,
            objective,
        }) = outcomes.into_iter().next()
        else {
            return self.fail(format!("variable {k}'s refit came back as something else"));
        };
        state.refits += 1;
        let variable_done = match state.objective {
            None => match objective {
                Ok(value) => {
                    let mut by_weight = fitted.dependence();
                    by_weight.sort_by(|a, b| a.1.total_cmp(&b.1));
                    // Popped from the end: weakest first.
                    state.queue = by_weight
                        .into_iter()
                        .map(|(j, _)| j)
                        .filter(|&j| !problem.knowledge.is_required(j, k))
                        .rev()
                        .collect();
                    state.objective = Some(value);
                    self.components[k] = Conditional::Collapsed(fitted);
                    state.queue.is_empty()
                }
                // A variable that cannot be refitted keeps its parents.
                Err(_) => true,
            },
            Some(with) => {
                if let Some(j) = state.queue.pop() {
                    // The prior's density at θ = 0 for the dropped edge's two kinds (log 10
                    // each), which `Component::objective` counts only for candidate parents.
                    let absent_prior = 2.0 * PRIOR_RATE.ln();
                    if let Ok(without) = objective {
                        let without = without + absent_prior;
                        if without + problem.settings.collapsed.prune_margin >= with {
                            self.components[k] = Conditional::Collapsed(fitted);
                            state.objective = Some(without);
                            state.removed.push((j, k));
                        }
                    }
                }
                state.queue.is_empty()
            }
        };
        if variable_done {
            if k + 1 >= self.components.len() {
                state.rescoring = true;
            } else {
                state.variable = k + 1;
                state.objective = None;
                state.queue.clear();
            }
        }
        self.pruning = Some(state);
    }

    /// Takes every variable's bound after pruning, records the phase and moves on to the final
    /// bounds.
    fn finish_after_pruning(
        &mut self,
        outcomes: Vec<Outcome>,
        problem: &Problem,
        state: PruneState,
    ) {
        let values: Result<Vec<f64>, DiscoveryError> =
            outcomes.into_iter().map(Outcome::into_value).collect();
        let values = match values {
            Ok(v) if v.len() == self.components.len() => v,
            Ok(v) => {
                return self.fail(format!(
                    "{} bounds came back after pruning for {} variables",
                    v.len(),
                    self.components.len()
                ))
            }
            Err(e) => return self.fail(format!("the bound after pruning failed: {e}")),
        };
        let elbo: f64 = values.iter().sum();
        self.last_values = values;
        let penalty = self.penalty_at(problem);
        let terms = self.terms(elbo, &penalty, problem);
        self.phase_iterations = state.refits;
        self.record_phase(PhaseEnd::Done, &terms, self.surviving_edges(problem));
        if let Some(record) = self.phases.last_mut() {
            record.removed = state.removed;
        }
        self.begin_finish(terms);
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.phase_iterations = 0;
        self.history.clear();
    }

    fn fail(&mut self, message: String) {
        self.failure = Some(message);
        self.phase = Phase::Failed;
    }

    /// §5.4 acyclic thresholding, then the re-initialisation of the surviving edges.
    fn threshold(&mut self, problem: &Problem) {
        let d = problem.dim();
        let w = self.weights(d);
        // The prefix rule (the paper's) sees every edge still switched on; the greedy rule only
        // those passing the final thresholds: every kept edge is re-initialised, which would
        // revive edges the warm-up had already switched off.
        let active = match problem.settings.dag_rule {
            DagRule::Prefix => w.map(|v| if v > 0.0 { 1.0 } else { 0.0 }),
            DagRule::Greedy => {
                let mut active = DMatrix::zeros(d, d);
                for (j, i) in self.surviving_edges(problem) {
                    active[(j, i)] = 1.0;
                }
                active
            }
        };
        let dag = problem
            .settings
            .dag_rule
            .apply(&w, &active, &problem.knowledge);
        let dag = match dag {
            Ok(dag) => dag,
            Err(e) => return self.fail(format!("thresholding failed: {e}")),
        };
        for c in &mut self.components {
            let keep = dag.parents(c.child());
            c.restrict_parents(&keep);
        }
        if let Some(terms) = self.last {
            let kept = dag.edges();
            self.record_phase(PhaseEnd::Done, &terms, kept);
        }
        self.gamma = 0.0;
        self.checkpoints = None;
        self.enter(Phase::CoolDown);
    }

    /// The penalty at the current point: h(A) = |λ_max(A)| by power iteration (warm-started, so
    /// taken once per iteration), h₂ when the settings add it, and their gradient.
    fn penalty_at(&mut self, problem: &Problem) -> Penalty {
        let w = self.weights(problem.dim());
        let estimate = self.power.estimate(&w, problem.settings.power_iterations);
        let mut gradient = estimate.gradient;
        let h_pairs = if problem.settings.two_cycle_penalty {
            let (value, g) = two_cycle_penalty(&w, problem.settings.tau);
            gradient += g;
            value
        } else {
            0.0
        };
        Penalty {
            h: estimate.value,
            h_pairs,
            gradient,
        }
    }

    /// Terms of the objective at the evaluated point, whose penalty is `penalty`.
    fn terms(&self, elbo: f64, penalty: &Penalty, problem: &Problem) -> Terms {
        let d = problem.dim();
        let candidates: usize = self.components.iter().map(|c| c.parents().len()).sum();
        let absent = (d * d.saturating_sub(1)).saturating_sub(candidates);
        let kinds = self.components.first().map_or(2, |v| v.kinds()) as f64;
        let log_prior = self.components.iter().map(|c| c.log_prior()).sum::<f64>()
            + kinds * absent as f64 * PRIOR_RATE.ln();
        let gamma = self.gamma;
        Terms {
            elbo,
            log_prior,
            h: penalty.h,
            h_pairs: penalty.h_pairs,
            gamma,
            objective: elbo + log_prior - gamma * (penalty.h + penalty.h_pairs),
        }
    }

    /// Completes an iteration from the bound evaluations of [`Restart::components`] (in order).
    pub fn finish_iteration(
        &mut self,
        evaluations: Vec<Result<Evaluation, EvaluationError>>,
        problem: &Problem,
    ) {
        if !self.wants_evaluation() {
            return;
        }
        // The penalty taken when the iteration began (at this same point); computed here for a
        // caller that only drew the seeds.
        let penalty = match self.penalty.take() {
            Some(p) => p,
            None => self.penalty_at(problem),
        };
        if let Some((variable, err)) = evaluations
            .iter()
            .enumerate()
            .find_map(|(k, r)| r.as_ref().err().map(|e| (k, e.to_string())))
        {
            return self.handle_fault(variable, err);
        }
        let evaluations: Vec<Evaluation> = evaluations.into_iter().flatten().collect();
        let elbo: f64 = evaluations.iter().map(Evaluation::value).sum();
        self.last_values = evaluations.iter().map(Evaluation::value).collect();
        let terms = self.terms(elbo, &penalty, problem);
        if !terms.objective.is_finite() {
            return self.handle_fault(
                0,
                format!("the objective is not finite ({})", terms.objective),
            );
        }
        self.last = Some(terms);
        self.history.push(terms.objective);
        self.iterations += 1;
        self.phase_iterations += 1;

        if let Some(ended_by) = self.phase_should_end(&terms, problem) {
            self.record_phase(ended_by, &terms, self.surviving_edges(problem));
            match self.phase {
                Phase::WarmUp => self.enter(Phase::Acyclic),
                Phase::Acyclic => {
                    self.enter(Phase::Thresholding);
                    return;
                }
                Phase::CoolDown => {
                    if problem.settings.collapsed.prune_iterations > 0
                        && matches!(self.components.first(), Some(Conditional::Collapsed(_)))
                    {
                        self.pruning = Some(PruneState::default());
                        self.enter(Phase::Pruning);
                    } else {
                        self.begin_finish(terms);
                    }
                    return;
                }
                _ => {}
            }
        }

        self.checkpoints = Some(self.components.iter().map(|c| c.checkpoint()).collect());
        let mut step_error = None;
        for (k, (c, evaluation)) in self.components.iter_mut().zip(evaluations).enumerate() {
            let d_theta = edge_gradient(c, &penalty, terms.gamma);
            if let Err(e) = c.ascend(evaluation, &d_theta) {
                step_error.get_or_insert((k, e));
            }
        }
        if let Some((k, e)) = step_error {
            return self.handle_fault(k, e.to_string());
        }
        if self.phase == Phase::Acyclic
            && self.phase_iterations > 0
            && self
                .phase_iterations
                .is_multiple_of(problem.epoch_iterations())
        {
            self.gamma += problem.settings.rho_for(problem.dim());
        }
    }

    /// Why the current phase ends after this iteration, if it does.
    fn phase_should_end(&self, terms: &Terms, problem: &Problem) -> Option<PhaseEnd> {
        let s = &problem.settings;
        let n = problem.total_rows as f64;
        match self.phase {
            Phase::WarmUp => self.converged(&s.warmup, n),
            Phase::Acyclic => {
                if terms.h < s.tau {
                    Some(PhaseEnd::HBelowTau)
                } else if self.surviving_edges_are_acyclic(problem) {
                    Some(PhaseEnd::SurvivingEdgesAcyclic)
                } else if self.phase_iterations >= s.acyclic_max {
                    Some(PhaseEnd::Cap)
                } else {
                    None
                }
            }
            Phase::CoolDown => self.converged(&s.cooldown, n),
            _ => None,
        }
    }

    /// Appends the record of the phase that is ending.
    fn record_phase(&mut self, ended_by: PhaseEnd, terms: &Terms, edges: Vec<(usize, usize)>) {
        let two_cycles = edges
            .iter()
            .filter(|&&(a, b)| a < b && edges.contains(&(b, a)))
            .count();
        self.phases.push(PhaseRecord {
            phase: self.phase,
            iterations: self.phase_iterations,
            ended_by,
            h: terms.h,
            gamma: terms.gamma,
            edges,
            two_cycles,
            removed: Vec::new(),
        });
    }

    /// The phases recorded so far.
    pub fn phase_records(&self) -> &[PhaseRecord] {
        &self.phases
    }

    /// Whether the edges that would survive the final thresholds already form a DAG. Why this
    /// second stopping rule next to h < τ: the power iteration runs on A + 1e-6, and for a DAG with
    /// strong edges h stays near (1e-6 · Π weights)^(1/length) (0.09 for a 3-chain of weights 68 and
    /// 11), above τ = 0.005, although no cycle is left to break.
    fn surviving_edges_are_acyclic(&self, problem: &Problem) -> bool {
        Digraph::from_edges(problem.dim(), &self.surviving_edges(problem))
            .is_ok_and(|g| g.is_acyclic())
    }

    /// The edges (cause, effect) whose hyperparameters pass the final thresholds now: θ^lin ≥
    /// `linear_threshold` or a stationary kernel's θ ≥ `stationary_threshold`. This is the graph
    /// the run would report if it ended here (before breaking any cycles), which the page draws live.
    pub fn surviving_edges(&self, problem: &Problem) -> Vec<(usize, usize)> {
        let s = &problem.settings;
        self.components
            .iter()
            .flat_map(|c| {
                c.edge_hyperparameters()
                    .into_iter()
                    .filter(|(_, lin, st)| s.edge_passes_thresholds(*lin, st))
                    .map(move |(j, _, _)| (j, c.child()))
            })
            .collect()
    }

    fn converged(
        &self,
        length: &crate::discovery::settings::PhaseLength,
        rows: f64,
    ) -> Option<PhaseEnd> {
        let k = self.phase_iterations;
        if k >= length.max {
            return Some(PhaseEnd::Cap);
        }
        if k < length.min || length.window == 0 || self.history.len() < 2 * length.window {
            return None;
        }
        let w = length.window;
        let h = &self.history;
        let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
        let gain = mean(&h[h.len() - w..]) - mean(&h[h.len() - 2 * w..h.len() - w]);
        (gain < length.tolerance * rows).then_some(PhaseEnd::Converged)
    }

    fn handle_fault(&mut self, variable: usize, message: String) {
        let next_jitter = RESTART_JITTER.next_after(self.jitter);
        let Some(next_jitter) = next_jitter.filter(|_| self.faults.len() < MAX_FAULTS) else {
            let msg = format!(
                "gave up after {} numerical faults (jitter {:.0e}); last, in variable {variable}: {message}",
                self.faults.len() + 1,
                self.jitter
            );
            return self.fail(msg);
        };
        let action = match self.checkpoints.take() {
            Some(saved) => {
                for (c, cp) in self.components.iter_mut().zip(saved) {
                    c.restore(cp);
                    c.scale_learning_rate(0.5);
                }
                format!(
                    "undid the last step, halved the learning rate to {:.2e} and raised the jitter to {next_jitter:.0e}",
                    self.components.first().map_or(0.0, |c| c.learning_rate())
                )
            }
            None => format!("raised the jitter to {next_jitter:.0e}"),
        };
        self.jitter = next_jitter;
        self.faults.push(FaultEvent {
            restart: self.index,
            iteration: self.iterations,
            phase: self.phase,
            variable,
            message,
            action,
        });
    }

    /// Ends the last phase at `terms`: draws one seed per variable for the final bounds, which
    /// the next chore computes.
    fn begin_finish(&mut self, terms: Terms) {
        let rng = &mut self.rng;
        let seeds = (0..self.components.len()).map(|_| rng.random()).collect();
        self.finishing = Some(Finishing { terms, seeds });
    }

    /// The final thresholds (§5.4): edge j → i stays if θ^lin ≥ the linear threshold or θ^se ≥
    /// the stationary one, or if it is required. The score is Σ_i of the final bounds
    /// ([`Job::FinalBound`]: the collapsed bound is exact as evaluated; the uncollapsed one is
    /// re-estimated on every row with 100 samples per row) + log p(θ).
    fn apply_final_bounds(&mut self, outcomes: Vec<Outcome>, problem: &Problem) {
        let Some(Finishing { terms, .. }) = self.finishing.take() else {
            return;
        };
        let d = problem.dim();
        let s = &problem.settings;
        let mut edges = Vec::new();
        let mut weights = vec![vec![0.0; d]; d];
        for c in &self.components {
            for (j, lin, st) in c.edge_hyperparameters() {
                let keep = s.edge_passes_thresholds(lin, &st)
                    || problem.knowledge.is_required(j, c.child());
                if keep {
                    edges.push((j, c.child()));
                    weights[j][c.child()] = lin + st.iter().sum::<f64>();
                }
            }
        }
        edges.sort_unstable();
        if outcomes.len() != self.components.len() {
            return self.fail(format!(
                "{} final bounds came back for {} variables",
                outcomes.len(),
                self.components.len()
            ));
        }
        let mut elbo = 0.0;
        for (c, outcome) in self.components.iter().zip(outcomes) {
            match outcome.into_value() {
                Ok(v) => elbo += v,
                Err(e) => {
                    return self.fail(format!(
                        "the final bound of variable {} could not be computed: {e}",
                        c.child()
                    ))
                }
            }
        }
        self.outcome = Some(RestartOutcome {
            index: self.index,
            score: elbo + terms.log_prior,
            elbo,
            log_prior: terms.log_prior,
            edges,
            weights,
            iterations: self.iterations,
            phases: self.phases.clone(),
            latents: self
                .components
                .iter()
                .filter_map(|v| v.latent_record())
                .collect(),
            graph_evidence: None,
        });
        self.phase = Phase::Done;
    }
}
