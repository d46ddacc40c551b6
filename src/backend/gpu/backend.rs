//! [`GpuBackend`]: the [`Backend`] that sends the uncollapsed bound's heavy half of every
//! evaluation in a batch to one [`Gpu`] submission, and everything else to the CPU it wraps.
//!
//! Per batch: the minibatches and the M × M algebra of each evaluation on the CPU pool in f64
//! ([`Variable::begin_evaluation`]), the predictions of all of them in one GPU submission
//! ([`Gpu::svgp_predictions`]), then each evaluation's gradient algebra on the pool again. A
//! restart's final bound (every row, 100 draws each) goes the same way chunk by chunk of rows
//! ([`Variable::final_bound_with`]). A collapsed evaluation with a latent input whose Ψ2 is large
//! enough ([`PSI2_MIN_WORK`]) runs on the pool with Ψ2's O(N M²) sums on the GPU: every such
//! evaluation of the batch asks for its pair sums, the batch's go in one submission, then the
//! same for the reverse mode's row sums ([`CollapsedBatch`]). A refit (L-BFGS on a collapsed
//! variable, the cool-down's and pruning's) of the same size runs on the pool with each of its
//! evaluations' Ψ2 sums on the GPU, one submission per evaluation. Jobs of other kinds (smaller
//! collapsed evaluations and refits, starts, family scores, pairs) run on the CPU as they would
//! without a GPU; README says why.
//!
//! A failed GPU step (a lost device, an error the driver reports, a readback that times out)
//! switches this backend to the CPU for good: the batch in hand is computed again there from the
//! same jobs, so nothing is lost, and [`Backend::name`] says what happened from then on.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use nalgebra::DMatrix;

use super::evaluations::{self, begin_evaluation, finish_evaluation, prediction_requests};
use super::psi_replay::{psi2_on_device, CollapsedBatch, PSI2_MIN_WORK, PSI2_PASSES};
use super::{Gpu, GpuError, Psi2Factors, Psi2Sums};
use crate::backend::{Backend, CpuBackend, Job, Outcome};
use crate::discovery::cgp::{EvaluationError, PendingEvaluation, Variable};
use crate::discovery::jobs;
use crate::gp::collapsed::Psi2Device;
use crate::gp::svgp::FLOAT32_RELATIVE_JITTER;
use crate::gp::variable::StepError;

/// The GPU for the uncollapsed bound's predictions and large collapsed Ψ2 sums, the CPU for the
/// rest and after a failure.
pub struct GpuBackend {
    gpu: Arc<Gpu>,
    cpu: CpuBackend,
    /// Why the GPU was given up, once it has been.
    failed: Mutex<Option<String>>,
    /// N·M² from which collapsed evaluations use the GPU ([`PSI2_MIN_WORK`]).
    psi2_min_work: f64,
}

impl fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBackend")
            .field("gpu", &self.gpu)
            .field("failed", &self.failure())
            .finish()
    }
}

impl GpuBackend {
    /// A backend computing on `gpu`, with `cpu` for what stays on the CPU.
    pub fn new(gpu: Arc<Gpu>, cpu: CpuBackend) -> Self {
        Self {
            gpu,
            cpu,
            failed: Mutex::new(None),
            psi2_min_work: PSI2_MIN_WORK,
        }
    }

    /// The same backend sending collapsed evaluations' Ψ2 sums to the GPU from `work` = N·M² on
    /// (0: all of them; the tests' setting).
    pub fn with_psi2_min_work(self, work: f64) -> Self {
        Self {
            psi2_min_work: work,
            ..self
        }
    }

    /// Opens the first GPU ([`Gpu::open`]) beside `cpu`.
    pub fn open(cpu: CpuBackend) -> Result<Self, GpuError> {
        Ok(Self::new(Arc::new(Gpu::open()?), cpu))
    }

    /// The device (for tests that lose it on purpose).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Why this backend switched to the CPU, if it has.
    pub fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn give_up(&self, error: &GpuError) {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| error.to_string());
    }

    /// The GPU's jobs of `jobs` (at `indices`): the evaluations in one batch, then each final
    /// bound; `Err` when a GPU step failed (nothing of the batch is kept then).
    fn run_on_gpu(
        &self,
        data: &DMatrix<f64>,
        jobs: &[Job<'_>],
        indices: &[usize],
    ) -> Result<Vec<(usize, Outcome)>, GpuError> {
        let (refits, indices): (Vec<usize>, Vec<usize>) = indices
            .iter()
            .partition(|&&k| matches!(jobs[k], Job::Refine { .. }));
        let (collapsed, indices): (Vec<usize>, Vec<usize>) = indices
            .iter()
            .partition(|&&k| collapsed_evaluation(&jobs[k]));
        let (evaluations, finals): (Vec<usize>, Vec<usize>) = indices
            .iter()
            .partition(|&&k| matches!(jobs[k], Job::Evaluate { .. }));
        let mut out = Vec::with_capacity(indices.len() + collapsed.len());
        if !collapsed.is_empty() {
            let results = self.collapsed_on_gpu(data, jobs, &collapsed)?;
            out.extend(collapsed.iter().copied().zip(results));
        }
        if !refits.is_empty() {
            let results = self.refits_on_gpu(data, jobs, &refits)?;
            out.extend(refits.iter().copied().zip(results));
        }
        if !evaluations.is_empty() {
            let results = self.evaluate_on_gpu(data, jobs, &evaluations)?;
            out.extend(evaluations.iter().copied().zip(results));
        }
        for k in finals {
            if let Job::FinalBound {
                variable,
                evaluated,
                seed,
            } = &jobs[k]
            {
                out.push((
                    k,
                    self.final_bound_on_gpu(data, variable, *evaluated, *seed)?,
                ));
            }
        }
        Ok(out)
    }

    /// A restart's final bound with each chunk's predictions on the GPU (one submission per
    /// chunk of rows); `Err` when a GPU step failed.
    fn final_bound_on_gpu(
        &self,
        data: &DMatrix<f64>,
        variable: &Variable,
        evaluated: f64,
        seed: u64,
    ) -> Result<Outcome, GpuError> {
        let mut failure = None;
        let value = variable.final_bound_with(data, evaluated, seed, &mut |input| match self
            .gpu
            .bounds_and_gradients(&[*input], FLOAT32_RELATIVE_JITTER)
        {
            Ok(mut outputs) => match outputs.pop() {
                Some(output) => output.map_err(StepError::from),
                None => Err(StepError::Device("the GPU returned no result".into())),
            },
            Err(e) => {
                let why = e.to_string();
                failure = Some(e);
                Err(StepError::Device(why))
            }
        });
        match failure {
            Some(e) => Err(e),
            None => Ok(Outcome::Value(value.map_err(|e| e.to_string()))),
        }
    }

    /// The collapsed evaluations of `jobs` at `indices` on the pool with their Ψ2 sums on the
    /// GPU, in that order: each pass runs the evaluations still waiting on the pool, then sends
    /// the sums they asked for to the GPU in one submission ([`Psi2Replay`]). `Err` when a GPU
    /// step failed (nothing of the batch is kept then).
    fn collapsed_on_gpu(
        &self,
        data: &DMatrix<f64>,
        jobs: &[Job<'_>],
        indices: &[usize],
    ) -> Result<Vec<Outcome>, GpuError> {
        let mut batch = CollapsedBatch::new(indices.iter().map(|&k| &jobs[k]).collect());
        for _pass in 0..PSI2_PASSES {
            let waiting = batch.waiting();
            if waiting.is_empty() {
                break;
            }
            let results = self.cpu.pool().map(&waiting, |&i| batch.evaluate(data, i));
            for (i, result) in waiting.into_iter().zip(results) {
                batch.settle(i, result);
            }
            let requests = batch.requests();
            if requests.is_empty() {
                break;
            }
            let answers = self.gpu.psi2_batch(&requests)?;
            drop(requests);
            batch.answer(answers);
        }
        Ok(batch.outcomes())
    }

    /// The refits of `jobs` at `indices` on the pool, each L-BFGS evaluation's Ψ2 sums on the
    /// GPU (one submission per evaluation: an L-BFGS step waits for the last one's gradient, so
    /// a fit's evaluations cannot be batched), in that order. `Err` when a GPU step failed
    /// (nothing of the batch is kept then).
    fn refits_on_gpu(
        &self,
        data: &DMatrix<f64>,
        jobs: &[Job<'_>],
        indices: &[usize],
    ) -> Result<Vec<Outcome>, GpuError> {
        let device = RecordingPsi2 {
            gpu: &self.gpu,
            failure: Mutex::new(None),
        };
        let results = self.cpu.pool().map(indices, |&k| {
            let Job::Refine {
                component,
                without,
                jitter,
                iterations,
            } = &jobs[k]
            else {
                unreachable!("only refits are sent here")
            };
            let (fitted, objective) = jobs::refine(
                data,
                component,
                *without,
                *jitter,
                *iterations,
                Some(&device),
            );
            Outcome::Refined {
                component: Box::new(fitted),
                objective: objective.map_err(|e| e.to_string()),
            }
        });
        match device
            .failure
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
        {
            Some(error) => Err(error),
            None => Ok(results),
        }
    }

    /// Whether `job` runs on the GPU here: an uncollapsed evaluation or final bound, or a
    /// collapsed evaluation whose Ψ2 is at least `psi2_min_work`.
    fn runs_on_gpu(&self, job: &Job<'_>) -> bool {
        match job {
            Job::Evaluate { variable, .. } if matches!(**variable, Variable::Collapsed(_)) => {
                psi2_on_device(job, self.psi2_min_work, |n, m| self.gpu.psi2_fits(n, m))
            }
            Job::Refine { component, .. } => {
                let (n, m) = component.psi2_shape();
                (n * m * m) as f64 >= self.psi2_min_work && self.gpu.psi2_fits(n, m)
            }
            _ => runs_on_gpu(job),
        }
    }

    /// The evaluations of `jobs` at `indices` through the GPU, in that order; `Err` when the GPU
    /// step failed (nothing of the batch is kept then).
    fn evaluate_on_gpu(
        &self,
        data: &DMatrix<f64>,
        jobs: &[Job<'_>],
        indices: &[usize],
    ) -> Result<Vec<Outcome>, GpuError> {
        let jobs: Vec<&Job<'_>> = indices.iter().map(|&k| &jobs[k]).collect();
        // First half, f64 on the pool.
        let begun: Vec<Result<PendingEvaluation, EvaluationError>> = self
            .cpu
            .pool()
            .map(&jobs, |job| begin_evaluation(data, job));
        // The predictions of every evaluation whose first half succeeded, in one submission.
        let requests = prediction_requests(&jobs, &begun);
        let mut predictions = self.gpu.svgp_predictions(&requests)?.into_iter();
        drop(requests);
        // Second half, f64 on the pool.
        // (Each item is taken out of its cell once: the pool hands out shared references.)
        let finishing: Vec<_> = jobs
            .iter()
            .zip(begun)
            .map(|(job, pending)| {
                let predictions = if pending.is_ok() {
                    predictions.next()
                } else {
                    None
                };
                (*job, Mutex::new(Some((pending, predictions))))
            })
            .collect();
        Ok(self.cpu.pool().map(&finishing, |(job, cell)| {
            match cell.lock().unwrap_or_else(PoisonError::into_inner).take() {
                Some((pending, predictions)) => finish_evaluation(job, pending, predictions),
                None => Outcome::Evaluation(Err(EvaluationError::Mismatch(
                    "an evaluation was finished twice".into(),
                ))),
            }
        }))
    }
}

/// The GPU as the [`Psi2Device`] of concurrent fits, one submission per call, keeping the first
/// device error whole (a fit sees only its text, as a failed evaluation).
struct RecordingPsi2<'a> {
    gpu: &'a Gpu,
    failure: Mutex<Option<GpuError>>,
}

impl RecordingPsi2<'_> {
    fn record<T>(&self, result: Result<T, GpuError>) -> Result<T, String> {
        result.map_err(|error| {
            let why = error.to_string();
            self.failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get_or_insert(error);
            why
        })
    }
}

impl Psi2Device for RecordingPsi2<'_> {
    fn pair_sums(&self, factors: &Psi2Factors) -> Result<Psi2Sums, String> {
        self.record(self.gpu.psi2_pair_sums(factors))
    }

    fn row_sums(&self, factors: &Psi2Factors, w: &DMatrix<f64>) -> Result<Psi2Sums, String> {
        self.record(self.gpu.psi2_row_sums(factors, w))
    }
}

/// Whether `job` evaluates a collapsed variable.
fn collapsed_evaluation(job: &Job<'_>) -> bool {
    matches!(job, Job::Evaluate { variable, .. } if matches!(**variable, Variable::Collapsed(_)))
}

/// Whether `job` is an uncollapsed evaluation or final bound (what the GPU computes).
fn runs_on_gpu(job: &Job<'_>) -> bool {
    match job {
        Job::FinalBound { variable, .. } => matches!(**variable, Variable::Uncollapsed(_)),
        _ => evaluations::runs_on_gpu(job),
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> String {
        match self.failure() {
            None => format!("GPU (f32, {}) with {}", self.gpu.adapter(), self.cpu.name()),
            Some(why) => format!("{} (the GPU failed and was left: {why})", self.cpu.name()),
        }
    }

    fn width(&self) -> usize {
        self.cpu.width()
    }

    fn device_traffic(&self) -> Option<super::DeviceTraffic> {
        self.failure().is_none().then(|| self.gpu.traffic())
    }

    fn run(&self, data: &DMatrix<f64>, jobs: &[Job<'_>]) -> Vec<Outcome> {
        let (gpu_jobs, cpu_jobs): (Vec<usize>, Vec<usize>) =
            (0..jobs.len()).partition(|&k| self.failure().is_none() && self.runs_on_gpu(&jobs[k]));
        let mut outcomes: Vec<Option<Outcome>> = vec![None; jobs.len()];
        let mut on_cpu = cpu_jobs;
        if !gpu_jobs.is_empty() {
            match self.run_on_gpu(data, jobs, &gpu_jobs) {
                Ok(results) => {
                    for (k, outcome) in results {
                        outcomes[k] = Some(outcome);
                    }
                }
                Err(error) => {
                    // The jobs are values: computing them again on the CPU loses nothing.
                    self.give_up(&error);
                    on_cpu.extend(gpu_jobs);
                }
            }
        }
        if !on_cpu.is_empty() {
            let batch: Vec<Job<'_>> = on_cpu.iter().map(|&k| jobs[k].clone()).collect();
            for (k, outcome) in on_cpu.iter().zip(self.cpu.run(data, &batch)) {
                outcomes[*k] = Some(outcome);
            }
        }
        outcomes
            .into_iter()
            .map(|o| o.unwrap_or_else(|| Outcome::Value(Err("a job was not run".into()))))
            .collect()
    }
}
