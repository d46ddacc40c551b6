//! One variable's conditional model in the continuous search ([`Conditional`]), on either bound:
//! the collapsed [`Component`] (SE + linear, full batch of the rows used, Adam) or the paper's
//! uncollapsed GP-CDE ([`GpCdeModel`]: the five-kind kernel, an encoder for q(w), minibatches of
//! b rows, S Monte Carlo samples, natural gradients for q(u) and Adam for the rest, MODEL.md §3).
//!
//! Owns: the uniform interface the restart state machine uses (dependence, prior, one evaluation,
//! one ascent step with the graph gradient added, the re-initialisation after thresholding,
//! checkpoints, the final score), so the schedule is written once for both.

use nalgebra::DMatrix;
use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::component::{Component, LatentRecord, PRIOR_RATE};
use crate::gp::collapsed::{CollapsedError, Psi2Device};
use crate::gp::device::DeviceError;
use crate::gp::gp_cde::{GpCdeModel, HeldWeights, Prepared, ResidentState, StepError};
use crate::gp::linalg::CholeskyError;
use crate::gp::svgp::{bound_and_gradient, HeldOutput, SvgpInput, SvgpOutput};

/// Which bound every variable uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BoundKind {
    /// MODEL.md §4 on the rows used: SE + linear, free q(w), full batch.
    Collapsed,
    /// MODEL.md §3: the paper's CGP-CDE bound with minibatches and Monte Carlo.
    Uncollapsed,
}

/// The paper's uncollapsed variable with the values its edge hyperparameters started from.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UncollapsedComponent {
    child: usize,
    variable: GpCdeModel,
    initial_kernel_raw: Vec<f64>,
    batch: usize,
    /// The graph prior's and the penalty's gradient for the coming step, per kernel
    /// hyperparameter ([`ConditionalModel::prepare_step`]): a device that steps the
    /// hyperparameters takes it with the evaluation.
    #[serde(default)]
    step_extra: Vec<f64>,
}

/// One evaluation, ready to be applied by [`Conditional::ascend`]; it serialises, so it can come
/// back from another thread or worker.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Evaluation {
    /// (N/rows)·F and its gradient in the flat unconstrained parameters.
    Collapsed { value: f64, gradient: Vec<f64> },
    /// The minibatch estimate of the bound with what its step needs.
    Uncollapsed {
        value: f64,
        prepared: Box<Prepared>,
        output: Box<SvgpOutput>,
    },
    /// The same from a device that holds q(v) and has taken its natural step already.
    Held {
        value: f64,
        prepared: Box<Prepared>,
        output: Box<HeldOutput>,
        step: Box<HeldStep>,
    },
}

/// The device's side of a [`Evaluation::Held`]: its name for the variable's q(v) and Z, the
/// natural step and the Adam steps of Z, the hyperparameters and φ² (and the encoder) it took
/// (waiting there for the next evaluation to commit them) or why P did not factorise, the
/// stepped hyperparameters and φ² with their moments, and the state it evaluated when that was
/// read back with this evaluation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HeldStep {
    pub key: u64,
    pub stepped: Result<(), CholeskyError>,
    pub parameters: HeldWeights,
    pub synced: Option<ResidentState>,
}

impl Evaluation {
    /// The (estimated) bound of the variable, scaled to all rows.
    pub fn value(&self) -> f64 {
        match self {
            Evaluation::Collapsed { value, .. }
            | Evaluation::Uncollapsed { value, .. }
            | Evaluation::Held { value, .. } => *value,
        }
    }
}

/// A saved state to undo a step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Checkpoint {
    Collapsed(Vec<f64>, crate::gp::adam::Adam),
    Uncollapsed(Box<GpCdeModel>),
}

/// One variable's conditional model p(x_i | candidate parents, w) in the search, on one of the two
/// bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Conditional {
    Collapsed(Box<Component>),
    Uncollapsed(Box<UncollapsedComponent>),
}

/// A held evaluation ([`Evaluation::Held`]), refused when its bound is not finite.
pub fn held_evaluation(
    prepared: Prepared,
    output: HeldOutput,
    step: HeldStep,
) -> Result<Evaluation, EvaluationError> {
    let value = output.terms.elbo;
    if !value.is_finite() {
        return Err(EvaluationError::NonFinite(value));
    }
    Ok(Evaluation::Held {
        value,
        prepared: Box::new(prepared),
        output: Box::new(output),
        step: Box::new(step),
    })
}

/// An uncollapsed evaluation, refused when its bound is not finite.
fn uncollapsed_evaluation(
    prepared: Prepared,
    output: SvgpOutput,
) -> Result<Evaluation, EvaluationError> {
    let value = output.terms.elbo;
    if !value.is_finite() {
        return Err(EvaluationError::NonFinite(value));
    }
    Ok(Evaluation::Uncollapsed {
        value,
        prepared: Box::new(prepared),
        output: Box::new(output),
    })
}

impl UncollapsedComponent {
    /// ∂/∂θ per kernel hyperparameter from the graph gradient of each parent (`d_theta`, in
    /// [`ConditionalModel::parents`]' order): each parent's on every kind of its input.
    fn kernel_extra(&self, d_theta: &[f64]) -> Vec<f64> {
        let mut extra = vec![0.0; self.variable.kernel_raw().len()];
        for (k, j) in self.parents().into_iter().enumerate() {
            for idx in self.variable.input_indices(j) {
                extra[idx] += d_theta[k];
            }
        }
        extra
    }

    /// The minibatch of an evaluation with `seed`: b rows drawn without replacement, then the
    /// Monte Carlo draws, from one stream.
    fn minibatch(&self, data: &DMatrix<f64>, seed: u64) -> Prepared {
        let (rows, mut rng) = self.minibatch_rows(data, seed);
        self.variable.prepare(data, &rows, &mut rng)
    }

    /// [`Self::minibatch`] (the same rows and draws) for a device that runs the encoder itself.
    fn held_minibatch(&self, data: &DMatrix<f64>, seed: u64) -> Prepared {
        let (rows, mut rng) = self.minibatch_rows(data, seed);
        self.variable.prepare_held(data, &rows, &mut rng)
    }

    /// The minibatch's rows drawn from `seed`, and the stream its draws continue from.
    fn minibatch_rows(&self, data: &DMatrix<f64>, seed: u64) -> (Vec<usize>, ChaCha8Rng) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = data.nrows();
        let rows = sample(&mut rng, n, self.batch.min(n)).into_vec();
        (rows, rng)
    }

    /// Wraps a freshly initialised variable for column `child`, trained on minibatches of
    /// `batch` rows.
    pub fn new(child: usize, variable: GpCdeModel, batch: usize) -> Self {
        let initial_kernel_raw = variable.kernel_raw().to_vec();
        Self {
            child,
            variable,
            initial_kernel_raw,
            batch: batch.max(1),
            step_extra: Vec::new(),
        }
    }
}

/// Why a variable could not be evaluated or stepped. It serialises, so it can come back from
/// another thread or worker with the outcome it stands for.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum EvaluationError {
    /// The collapsed bound failed: a factorisation, a non-finite value, the Ψ2 device.
    #[error(transparent)]
    Collapsed(#[from] CollapsedError),
    /// The uncollapsed bound's factorisation failed.
    #[error("the bound could not be evaluated: {0}")]
    Cholesky(#[from] CholeskyError),
    /// The (estimated) bound or its gradient is not finite.
    #[error("the bound or its gradient is not finite (bound {0})")]
    NonFinite(#[serde(with = "crate::base::float_text")] f64),
    /// The device computing the bound's heavy half (the GPU) failed or could not be asked.
    #[error("the device computing the bound failed: {0}")]
    Device(DeviceError),
    /// An evaluation of one bound handed to a variable of the other, or a job of another kind
    /// where an evaluation was expected: a driver's mistake, reported rather than panicked on.
    #[error("{0}")]
    Mismatch(String),
}

impl From<StepError> for EvaluationError {
    fn from(e: StepError) -> Self {
        match e {
            StepError::Cholesky(c) => EvaluationError::Cholesky(c),
            StepError::NonFinite(v) => EvaluationError::NonFinite(v),
            StepError::Device(d) => EvaluationError::Device(d),
        }
    }
}

/// What the restart state machine asks of a search variable, whichever bound it is on: its
/// graph hyperparameters and their prior, one evaluation, one ascent step with the graph
/// gradient added, the re-initialisation after thresholding, checkpoints and the final score.
/// [`Conditional`] holds one of the two implementations and dereferences to it.
pub trait ConditionalModel {
    /// The modelled column.
    fn child(&self) -> usize;

    /// The candidate parents still switched on.
    fn parents(&self) -> Vec<usize>;

    /// Graph hyperparameters per edge: 2 (θ^lin, θ^se) collapsed, 5 (θ^lin and four stationary
    /// kinds) uncollapsed.
    fn kinds(&self) -> usize;

    /// What the latent w does in this variable's model (collapsed bound only: the uncollapsed
    /// bound's q(w) comes from an encoder and is not stored per row).
    fn latent_record(&self) -> Option<LatentRecord> {
        None
    }

    /// (j, θ^lin_ij, the stationary θ^c_ij) for every candidate parent j.
    fn edge_hyperparameters(&self) -> Vec<(usize, f64, Vec<f64>)>;

    /// (j, A_ij) with A_ij = θ^lin_ij + Σ_c θ^c_ij for every candidate parent j.
    fn dependence(&self) -> Vec<(usize, f64)> {
        self.edge_hyperparameters()
            .into_iter()
            .map(|(j, lin, st)| (j, lin + st.iter().sum::<f64>()))
            .collect()
    }

    /// Σ over candidate parents and kinds of log 10 − 10 θ.
    fn log_prior(&self) -> f64 {
        let per_edge = self.kinds() as f64 * PRIOR_RATE.ln();
        self.dependence()
            .iter()
            .map(|(_, a)| per_edge - PRIOR_RATE * a)
            .sum()
    }

    /// One evaluation at jitter ε (collapsed) with the minibatch and noise drawn from `seed`
    /// (uncollapsed: b rows drawn without replacement each iteration, a choice: MODEL.md §5.4
    /// reshuffles once per epoch, which visits every row equally often but needs state that
    /// survives across steps; both give unbiased minibatch estimates).
    fn evaluate(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
        seed: u64,
    ) -> Result<Evaluation, EvaluationError>;

    /// One ascent step from `evaluation`, with ∂/∂θ_ij = `d_theta[k]` added for the k-th parent
    /// of [`ConditionalModel::parents`] on every kind.
    fn ascend(&mut self, evaluation: Evaluation, d_theta: &[f64]) -> Result<(), EvaluationError>;

    /// Takes the graph gradient `d_theta` (as [`ConditionalModel::ascend`]'s) of the step the next
    /// evaluation leads to, before that evaluation: where a device steps the hyperparameters
    /// with the evaluation, it goes there with the request. Nothing by default.
    fn prepare_step(&mut self, _d_theta: &[f64]) {}

    /// Keeps only the parents in `keep` and resets their edge hyperparameters to this restart's
    /// starting values (MODEL.md §5.4).
    fn restrict_parents(&mut self, keep: &[usize]);

    /// A saved state to undo a step.
    fn checkpoint(&self) -> Checkpoint;

    /// Restores a checkpoint, keeping the current learning rate.
    fn restore(&mut self, checkpoint: Checkpoint);

    fn scale_learning_rate(&mut self, factor: f64);

    fn learning_rate(&self) -> f64;

    /// The final bound for comparing restarts, with each chunk's bound computed by `evaluate`
    /// (the CPU's `bound_and_gradient`, or the GPU backend's path): the collapsed bound itself
    /// (`evaluated`), or the uncollapsed bound on all rows with 100 Monte Carlo samples
    /// (MODEL.md §5.4, [B]'s final evaluation).
    fn final_bound_with(
        &self,
        data: &DMatrix<f64>,
        evaluated: f64,
        seed: u64,
        evaluate: &mut dyn FnMut(&SvgpInput) -> Result<SvgpOutput, StepError>,
    ) -> Result<f64, EvaluationError>;

    /// [`ConditionalModel::final_bound_with`] on the CPU.
    fn final_bound(
        &self,
        data: &DMatrix<f64>,
        evaluated: f64,
        seed: u64,
    ) -> Result<f64, EvaluationError> {
        self.final_bound_with(data, evaluated, seed, &mut |input| {
            bound_and_gradient(input).map_err(StepError::from)
        })
    }
}

impl ConditionalModel for Component {
    fn child(&self) -> usize {
        Component::child(self)
    }

    fn parents(&self) -> Vec<usize> {
        Component::parents(self).to_vec()
    }

    fn kinds(&self) -> usize {
        2
    }

    fn latent_record(&self) -> Option<LatentRecord> {
        Some(Component::latent_record(self))
    }

    fn edge_hyperparameters(&self) -> Vec<(usize, f64, Vec<f64>)> {
        Component::edge_hyperparameters(self)
            .into_iter()
            .map(|(j, lin, se)| (j, lin, vec![se]))
            .collect()
    }

    fn evaluate(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
        _seed: u64,
    ) -> Result<Evaluation, EvaluationError> {
        collapsed_evaluation(self, data, jitter, None)
    }

    fn ascend(&mut self, evaluation: Evaluation, d_theta: &[f64]) -> Result<(), EvaluationError> {
        let Evaluation::Collapsed { mut gradient, .. } = evaluation else {
            return Err(other_bound());
        };
        self.add_edge_gradient(&mut gradient, d_theta);
        Component::ascend(self, &gradient);
        Ok(())
    }

    fn restrict_parents(&mut self, keep: &[usize]) {
        Component::restrict_parents(self, keep)
    }

    fn checkpoint(&self) -> Checkpoint {
        let (raw, adam) = Component::checkpoint(self);
        Checkpoint::Collapsed(raw, adam)
    }

    fn restore(&mut self, checkpoint: Checkpoint) {
        if let Checkpoint::Collapsed(raw, adam) = checkpoint {
            Component::restore(self, (raw, adam));
        }
    }

    fn scale_learning_rate(&mut self, factor: f64) {
        Component::scale_learning_rate(self, factor)
    }

    fn learning_rate(&self) -> f64 {
        Component::learning_rate(self)
    }

    fn final_bound_with(
        &self,
        _data: &DMatrix<f64>,
        evaluated: f64,
        _seed: u64,
        _evaluate: &mut dyn FnMut(&SvgpInput) -> Result<SvgpOutput, StepError>,
    ) -> Result<f64, EvaluationError> {
        Ok(evaluated)
    }
}

impl ConditionalModel for UncollapsedComponent {
    fn child(&self) -> usize {
        self.child
    }

    fn parents(&self) -> Vec<usize> {
        let mask = &self.variable.kernel().mask;
        (0..mask.len())
            .filter(|&j| j != self.child && mask[j] != 0.0)
            .collect()
    }

    fn kinds(&self) -> usize {
        self.variable.input_indices(0).len()
    }

    fn edge_hyperparameters(&self) -> Vec<(usize, f64, Vec<f64>)> {
        let k = self.variable.kernel();
        self.parents()
            .into_iter()
            .map(|j| {
                let lin = k.linear.as_ref().map_or(0.0, |l| l[j]);
                let st = k.stationary.iter().map(|p| p.precision[j]).collect();
                (j, lin, st)
            })
            .collect()
    }

    fn evaluate(
        &self,
        data: &DMatrix<f64>,
        _jitter: f64,
        seed: u64,
    ) -> Result<Evaluation, EvaluationError> {
        let prepared = self.minibatch(data, seed);
        let output = bound_and_gradient(&self.variable.input(&prepared))?;
        uncollapsed_evaluation(prepared, output)
    }

    fn prepare_step(&mut self, d_theta: &[f64]) {
        self.step_extra = self.kernel_extra(d_theta);
    }

    fn ascend(&mut self, evaluation: Evaluation, d_theta: &[f64]) -> Result<(), EvaluationError> {
        let extra = self.kernel_extra(d_theta);
        match evaluation {
            Evaluation::Uncollapsed {
                prepared, output, ..
            } => {
                self.variable.apply(&prepared, &output, Some(&extra))?;
            }
            Evaluation::Held {
                prepared,
                output,
                step,
                ..
            } => {
                let HeldStep {
                    key,
                    stepped,
                    parameters,
                    synced,
                } = *step;
                // A natural step that failed on the device fails the step, as on the CPU.
                stepped?;
                // The device added the graph gradient it was given with the request.
                if extra != self.step_extra {
                    return Err(EvaluationError::Mismatch(
                        "the device stepped the hyperparameters with another graph gradient than this step's (prepare_step was not called with it)".into(),
                    ));
                }
                self.variable
                    .apply_held(&prepared, &output, &parameters, key, synced)?;
            }
            Evaluation::Collapsed { .. } => return Err(other_bound()),
        }
        Ok(())
    }

    fn restrict_parents(&mut self, keep: &[usize]) {
        let mut reset = Vec::new();
        for j in self.parents() {
            if keep.contains(&j) {
                reset.extend(self.variable.input_indices(j));
            } else {
                self.variable.set_mask(j, false);
            }
        }
        let initial = self.initial_kernel_raw.clone();
        self.variable.reset_kernel_entries(&reset, &initial);
    }

    fn checkpoint(&self) -> Checkpoint {
        Checkpoint::Uncollapsed(Box::new(self.variable.clone()))
    }

    fn restore(&mut self, checkpoint: Checkpoint) {
        if let Checkpoint::Uncollapsed(v) = checkpoint {
            let lr = self.variable.learning_rate();
            self.variable = *v;
            let now = self.variable.learning_rate();
            self.variable.scale_learning_rate(lr / now);
        }
    }

    fn scale_learning_rate(&mut self, factor: f64) {
        self.variable.scale_learning_rate(factor)
    }

    fn learning_rate(&self) -> f64 {
        self.variable.learning_rate()
    }

    fn final_bound_with(
        &self,
        data: &DMatrix<f64>,
        _evaluated: f64,
        seed: u64,
        evaluate: &mut dyn FnMut(&SvgpInput) -> Result<SvgpOutput, StepError>,
    ) -> Result<f64, EvaluationError> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        Ok(self
            .variable
            .full_bound_with(data, 100, 500, &mut rng, evaluate)?)
    }
}

/// The error of an evaluation handed to a variable of the other bound.
fn other_bound() -> EvaluationError {
    EvaluationError::Mismatch("an evaluation was applied to a variable of the other bound".into())
}

/// A collapsed variable's evaluation, with Ψ2's O(N M²) sums on `device` when one is given.
fn collapsed_evaluation(
    c: &Component,
    data: &DMatrix<f64>,
    jitter: f64,
    device: Option<&dyn Psi2Device>,
) -> Result<Evaluation, EvaluationError> {
    let (value, gradient) = c.evaluate_with(data, jitter, device)?;
    Ok(Evaluation::Collapsed { value, gradient })
}

impl std::ops::Deref for Conditional {
    type Target = dyn ConditionalModel;

    fn deref(&self) -> &Self::Target {
        match self {
            Conditional::Collapsed(c) => c.as_ref(),
            Conditional::Uncollapsed(u) => u.as_ref(),
        }
    }
}

impl std::ops::DerefMut for Conditional {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            Conditional::Collapsed(c) => c.as_mut(),
            Conditional::Uncollapsed(u) => u.as_mut(),
        }
    }
}

/// What a device holding an uncollapsed variable needs from the host for one evaluation
/// ([`Conditional::begin_held`]).
pub struct HeldBegun<'a> {
    pub prepared: Prepared,
    pub variable: &'a GpCdeModel,
    /// The graph gradient of the step per kernel hyperparameter (∂/∂θ).
    pub extra: Vec<f64>,
}

impl Conditional {
    /// An uncollapsed variable's minibatch from `seed` and its model, for a device that holds
    /// q(v), Z and the encoder and computes the rest of the evaluation (the GPU backend): q(w)'s
    /// moments are left to the device. `None` for a collapsed variable.
    pub fn begin_held(&self, data: &DMatrix<f64>, seed: u64) -> Option<HeldBegun<'_>> {
        let Conditional::Uncollapsed(u) = self else {
            return None;
        };
        // Before any prepare_step: no graph gradient yet (the prior's alone is never zero, so an
        // empty one is not taken for it: the step would be refused in `ascend`).
        let extra = if u.step_extra.is_empty() {
            vec![0.0; u.variable.kernel_raw().len()]
        } else {
            u.step_extra.clone()
        };
        Some(HeldBegun {
            prepared: u.held_minibatch(data, seed),
            variable: &u.variable,
            extra,
        })
    }

    /// (key, natural steps) of an uncollapsed variable whose current q(v) only the device holding
    /// it has (its own copy lags); None otherwise.
    pub fn lagging_posterior(&self) -> Option<(u64, usize)> {
        let Conditional::Uncollapsed(u) = self else {
            return None;
        };
        let v = &u.variable;
        if v.posterior_is_current() {
            return None;
        }
        Some((v.holding()?.key, v.natural_steps()))
    }

    /// This variable with `state` (read from the device holding it) as its current q(v), Z and
    /// Z's Adam moments; a collapsed variable as it is.
    pub fn with_resident(&self, state: ResidentState) -> Conditional {
        match self {
            Conditional::Uncollapsed(u) => {
                let mut u = u.clone();
                u.variable = u.variable.with_resident(state);
                Conditional::Uncollapsed(u)
            }
            other => other.clone(),
        }
    }

    /// A collapsed variable's evaluation with Ψ2's O(N M²) sums on `device` when one is given (the
    /// GPU backend). `None` for an uncollapsed variable.
    pub fn evaluate_collapsed_on(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
        device: Option<&dyn Psi2Device>,
    ) -> Option<Result<Evaluation, EvaluationError>> {
        let Conditional::Collapsed(c) = self else {
            return None;
        };
        Some(collapsed_evaluation(c, data, jitter, device))
    }
}
