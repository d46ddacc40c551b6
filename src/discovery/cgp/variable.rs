//! A variable of the continuous search, on either bound: the collapsed [`Component`] (SE + linear,
//! full batch of the rows used, Adam) or the paper's uncollapsed GP-CDE ([`GpCdeVariable`]: the
//! five-kind kernel, an encoder for q(w), minibatches of b rows, S Monte Carlo samples, natural
//! gradients for q(u) and Adam for the rest, MODEL.md §3).
//!
//! Owns: the uniform interface the restart state machine uses (dependence, prior, one evaluation,
//! one ascent step with the graph gradient added, the re-initialisation after thresholding,
//! checkpoints, the final score), so the schedule is written once for both.

use nalgebra::DMatrix;
use rand::seq::index::sample;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::component::{Component, PRIOR_RATE};
use crate::gp::collapsed::Psi2Device;
use crate::gp::svgp::{
    bound_and_gradient, InducingStep, PredictionRequest, Predictions, SvgpInput, SvgpOutput,
};
use crate::gp::variable::{GpCdeVariable, Prepared, StepError};

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
    variable: GpCdeVariable,
    initial_kernel_raw: Vec<f64>,
    batch: usize,
}

/// One evaluation, ready to be applied by [`Variable::ascend`]; it serialises, so it can come back
/// from another thread or worker.
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
}

impl Evaluation {
    /// The (estimated) bound of the variable, scaled to all rows.
    pub fn value(&self) -> f64 {
        match self {
            Evaluation::Collapsed { value, .. } | Evaluation::Uncollapsed { value, .. } => *value,
        }
    }
}

/// A saved state to undo a step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Checkpoint {
    Collapsed(Vec<f64>, crate::gp::adam::Adam),
    Uncollapsed(Box<GpCdeVariable>),
}

/// A variable of the search on one of the two bounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Variable {
    Collapsed(Box<Component>),
    Uncollapsed(Box<UncollapsedComponent>),
}

/// An uncollapsed evaluation half done ([`Variable::begin_evaluation`]): the minibatch and the
/// inducing step, waiting for the predictions at its evaluation points.
#[derive(Debug, Clone)]
pub struct PendingEvaluation {
    prepared: Box<Prepared>,
    step: InducingStep,
}

impl PendingEvaluation {
    /// What a device needs to compute the predictions, for the `variable` this was begun from.
    pub fn request<'a>(&'a self, variable: &'a Variable) -> Result<PredictionRequest<'a>, String> {
        let Variable::Uncollapsed(u) = variable else {
            return Err("a pending evaluation belongs to an uncollapsed variable".into());
        };
        self.step
            .request(&u.variable.input(&self.prepared))
            .ok_or_else(|| "the uncollapsed bound has a latent input".into())
    }

    /// The evaluation, from the predictions at the minibatch's evaluation points.
    pub fn finish(
        self,
        variable: &Variable,
        predictions: Predictions,
    ) -> Result<Evaluation, String> {
        let Variable::Uncollapsed(u) = variable else {
            return Err("a pending evaluation belongs to an uncollapsed variable".into());
        };
        let output = self
            .step
            .finish(&u.variable.input(&self.prepared), predictions);
        uncollapsed_evaluation(*self.prepared, output)
    }
}

/// An uncollapsed evaluation, refused when its bound is not finite.
fn uncollapsed_evaluation(prepared: Prepared, output: SvgpOutput) -> Result<Evaluation, String> {
    let value = output.terms.elbo;
    if !value.is_finite() {
        return Err(format!("the bound is not finite ({value})"));
    }
    Ok(Evaluation::Uncollapsed {
        value,
        prepared: Box::new(prepared),
        output: Box::new(output),
    })
}

impl UncollapsedComponent {
    /// The minibatch of an evaluation with `seed`: b rows drawn without replacement, then the
    /// Monte Carlo draws, from one stream.
    fn minibatch(&self, data: &DMatrix<f64>, seed: u64) -> Prepared {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = data.nrows();
        let rows = sample(&mut rng, n, self.batch.min(n)).into_vec();
        self.variable.prepare(data, &rows, &mut rng)
    }

    /// Wraps a freshly initialised variable for column `child`, trained on minibatches of
    /// `batch` rows.
    pub fn new(child: usize, variable: GpCdeVariable, batch: usize) -> Self {
        let initial_kernel_raw = variable.kernel_raw().to_vec();
        Self {
            child,
            variable,
            initial_kernel_raw,
            batch: batch.max(1),
        }
    }
}

impl Variable {
    /// The modelled column.
    pub fn child(&self) -> usize {
        match self {
            Variable::Collapsed(c) => c.child(),
            Variable::Uncollapsed(u) => u.child,
        }
    }

    /// The candidate parents still switched on.
    pub fn parents(&self) -> Vec<usize> {
        match self {
            Variable::Collapsed(c) => c.parents().to_vec(),
            Variable::Uncollapsed(u) => {
                let mask = &u.variable.kernel().mask;
                (0..mask.len())
                    .filter(|&j| j != u.child && mask[j] != 0.0)
                    .collect()
            }
        }
    }

    /// Graph hyperparameters per edge: 2 (θ^lin, θ^se) collapsed, 5 (θ^lin and four stationary
    /// kinds) uncollapsed.
    pub fn kinds(&self) -> usize {
        match self {
            Variable::Collapsed(_) => 2,
            Variable::Uncollapsed(u) => u.variable.input_indices(0).len(),
        }
    }

    /// What the latent w does in this variable's model (collapsed bound only: the uncollapsed
    /// bound's q(w) comes from an encoder and is not stored per row).
    pub fn latent_record(&self) -> Option<super::component::LatentRecord> {
        match self {
            Variable::Collapsed(c) => Some(c.latent_record()),
            Variable::Uncollapsed(_) => None,
        }
    }

    /// (j, θ^lin_ij, the stationary θ^c_ij) for every candidate parent j.
    pub fn edge_hyperparameters(&self) -> Vec<(usize, f64, Vec<f64>)> {
        match self {
            Variable::Collapsed(c) => c
                .edge_hyperparameters()
                .into_iter()
                .map(|(j, lin, se)| (j, lin, vec![se]))
                .collect(),
            Variable::Uncollapsed(u) => {
                let k = u.variable.kernel();
                self.parents()
                    .into_iter()
                    .map(|j| {
                        let lin = k.linear.as_ref().map_or(0.0, |l| l[j]);
                        let st = k.stationary.iter().map(|p| p.precision[j]).collect();
                        (j, lin, st)
                    })
                    .collect()
            }
        }
    }

    /// (j, A_ij) with A_ij = θ^lin_ij + Σ_c θ^c_ij for every candidate parent j.
    pub fn dependence(&self) -> Vec<(usize, f64)> {
        self.edge_hyperparameters()
            .into_iter()
            .map(|(j, lin, st)| (j, lin + st.iter().sum::<f64>()))
            .collect()
    }

    /// Σ over candidate parents and kinds of log 10 − 10 θ.
    pub fn log_prior(&self) -> f64 {
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
    pub fn evaluate(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
        seed: u64,
    ) -> Result<Evaluation, String> {
        match self {
            Variable::Collapsed(_) => self
                .evaluate_collapsed_on(data, jitter, None)
                .unwrap_or_else(|| Err("not a collapsed variable".into())),
            Variable::Uncollapsed(u) => {
                let prepared = u.minibatch(data, seed);
                let output =
                    bound_and_gradient(&u.variable.input(&prepared)).map_err(|e| e.to_string())?;
                uncollapsed_evaluation(prepared, output)
            }
        }
    }

    /// A collapsed variable's [`Variable::evaluate`] with Ψ2's O(N M²) sums on `device` when one
    /// is given (the GPU backend): `Err(CollapsedError::Device)`'s text when the device failed.
    /// `None` for an uncollapsed variable.
    pub fn evaluate_collapsed_on(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
        device: Option<&dyn Psi2Device>,
    ) -> Option<Result<Evaluation, String>> {
        let Variable::Collapsed(c) = self else {
            return None;
        };
        Some(
            c.evaluate_with(data, jitter, device)
                .map(|(value, gradient)| Evaluation::Collapsed { value, gradient })
                .map_err(|e| e.to_string()),
        )
    }

    /// The first half of an uncollapsed variable's [`Variable::evaluate`]: its minibatch from
    /// `seed` and the inducing-point algebra in f64, waiting for predictions a device computes
    /// (the GPU backend), with K_ZZ's jitter at least `relative_jitter` · mean diag(K_ZZ)
    /// (`svgp::FLOAT32_RELATIVE_JITTER` for a float32 device). `None` for a collapsed variable.
    pub fn begin_evaluation(
        &self,
        data: &DMatrix<f64>,
        seed: u64,
        relative_jitter: f64,
    ) -> Option<Result<PendingEvaluation, String>> {
        let Variable::Uncollapsed(u) = self else {
            return None;
        };
        let prepared = Box::new(u.minibatch(data, seed));
        Some(
            InducingStep::new(&u.variable.input(&prepared), relative_jitter)
                .map(|step| PendingEvaluation { prepared, step })
                .map_err(|e| e.to_string()),
        )
    }

    /// One ascent step from `evaluation`, with ∂/∂θ_ij = `d_theta[k]` added for the k-th parent
    /// of [`Variable::parents`] on every kind.
    pub fn ascend(&mut self, evaluation: Evaluation, d_theta: &[f64]) -> Result<(), String> {
        let parents = self.parents();
        match (self, evaluation) {
            (Variable::Collapsed(c), Evaluation::Collapsed { mut gradient, .. }) => {
                c.add_edge_gradient(&mut gradient, d_theta);
                c.ascend(&gradient);
                Ok(())
            }
            (
                Variable::Uncollapsed(u),
                Evaluation::Uncollapsed {
                    prepared, output, ..
                },
            ) => {
                let mut extra = vec![0.0; u.variable.kernel_raw().len()];
                for (k, &j) in parents.iter().enumerate() {
                    for idx in u.variable.input_indices(j) {
                        extra[idx] += d_theta[k];
                    }
                }
                u.variable
                    .apply(&prepared, &output, Some(&extra))
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            }
            _ => Err("an evaluation was applied to a variable of the other bound".into()),
        }
    }

    /// Keeps only the parents in `keep` and resets their edge hyperparameters to this restart's
    /// starting values (MODEL.md §5.4).
    pub fn restrict_parents(&mut self, keep: &[usize]) {
        let parents = self.parents();
        match self {
            Variable::Collapsed(c) => c.restrict_parents(keep),
            Variable::Uncollapsed(u) => {
                let mut reset = Vec::new();
                for j in parents {
                    if keep.contains(&j) {
                        reset.extend(u.variable.input_indices(j));
                    } else {
                        u.variable.set_mask(j, false);
                    }
                }
                let initial = u.initial_kernel_raw.clone();
                u.variable.reset_kernel_entries(&reset, &initial);
            }
        }
    }

    pub fn checkpoint(&self) -> Checkpoint {
        match self {
            Variable::Collapsed(c) => {
                let (raw, adam) = c.checkpoint();
                Checkpoint::Collapsed(raw, adam)
            }
            Variable::Uncollapsed(u) => Checkpoint::Uncollapsed(Box::new(u.variable.clone())),
        }
    }

    /// Restores a checkpoint, keeping the current learning rate.
    pub fn restore(&mut self, checkpoint: Checkpoint) {
        match (self, checkpoint) {
            (Variable::Collapsed(c), Checkpoint::Collapsed(raw, adam)) => c.restore((raw, adam)),
            (Variable::Uncollapsed(u), Checkpoint::Uncollapsed(v)) => {
                let lr = u.variable.learning_rate();
                u.variable = *v;
                let now = u.variable.learning_rate();
                u.variable.scale_learning_rate(lr / now);
            }
            _ => {}
        }
    }

    pub fn scale_learning_rate(&mut self, factor: f64) {
        match self {
            Variable::Collapsed(c) => c.scale_learning_rate(factor),
            Variable::Uncollapsed(u) => u.variable.scale_learning_rate(factor),
        }
    }

    pub fn learning_rate(&self) -> f64 {
        match self {
            Variable::Collapsed(c) => c.learning_rate(),
            Variable::Uncollapsed(u) => u.variable.learning_rate(),
        }
    }

    /// The final bound for comparing restarts: the collapsed bound itself, or the uncollapsed
    /// bound on all rows with 100 Monte Carlo samples (MODEL.md §5.4, [B]'s final evaluation).
    pub fn final_bound(
        &self,
        data: &DMatrix<f64>,
        evaluated: f64,
        seed: u64,
    ) -> Result<f64, String> {
        self.final_bound_with(data, evaluated, seed, |input| {
            bound_and_gradient(input).map_err(StepError::from)
        })
    }

    /// [`Variable::final_bound`] with each chunk's bound computed by `evaluate` (the CPU's
    /// `bound_and_gradient`, or the GPU backend's path); the same chunks and draws.
    pub fn final_bound_with(
        &self,
        data: &DMatrix<f64>,
        evaluated: f64,
        seed: u64,
        evaluate: impl FnMut(&SvgpInput) -> Result<SvgpOutput, StepError>,
    ) -> Result<f64, String> {
        match self {
            Variable::Collapsed(_) => Ok(evaluated),
            Variable::Uncollapsed(u) => {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                u.variable
                    .full_bound_with(data, 100, 500, &mut rng, evaluate)
                    .map_err(|e| e.to_string())
            }
        }
    }
}
