//! A batch of collapsed evaluations whose Ψ2 sums a device computes together: [`CollapsedBatch`].
//!
//! A collapsed evaluation asks for its Ψ2 sums in the middle of its forward pass (pair sums) and
//! of its reverse pass (row sums), so its host work cannot be split into halves as the
//! uncollapsed bound's is. Instead each evaluation runs against a [`Psi2Replay`]: it runs until
//! it asks for sums the replay does not hold yet, the replay records the request and fails the
//! evaluation there; the batch's requests then go to the device in one submission, and the
//! evaluation runs again from the start. An evaluation is a pure function of its job, so it asks
//! for the same sums every time: three passes at most (pair sums, row sums, then done), the cost
//! being the host's forward work run up to three times. The native [`super::GpuBackend`] runs
//! each pass on its thread pool and blocks on the device; the browser's coordinating worker runs
//! them in order and awaits it.

use nalgebra::DMatrix;

use crate::discovery::cgp::{Evaluation, EvaluationError};
use crate::discovery::jobs::{Job, Outcome};
pub use crate::gp::collapsed::PSI2_PASSES;
use crate::gp::collapsed::{Psi2Replay, Psi2Sums, Psi2Wanted};
use crate::gp::device::DeviceError;
use crate::runner::gpu::Psi2Request;

/// N·M² (rows × inducing points²) below which a collapsed evaluation's Ψ2 sums never go to the
/// GPU, not even to be timed: N = 100 rows at M = 10, where a variable's sums are about 10⁵
/// multiply-adds, less than one submission's latency. From this size on the measured probe
/// decides (`DeviceUse::collapsed`); before issue 34 a fixed 2·10⁷ decided alone, which kept
/// every interactive run (about 10⁵) off a GPU however fast.
pub const PSI2_MIN_WORK: f64 = 1e4;

/// Collapsed evaluation jobs run pass by pass against the Ψ2 sums a device computes for all of
/// them at once (see the module's comment). Use: while [`CollapsedBatch::waiting`] is not
/// empty, run [`CollapsedBatch::evaluate`] for each (in any order, on any thread), hand the
/// results to [`CollapsedBatch::settle`], send [`CollapsedBatch::requests`] to the device (stop
/// when there are none) and give its answers to [`CollapsedBatch::answer`]; at most
/// [`PSI2_PASSES`] passes. Then [`CollapsedBatch::outcomes`].
pub struct CollapsedBatch<'a, 'j> {
    jobs: Vec<&'a Job<'j>>,
    replays: Vec<Psi2Replay>,
    outcomes: Vec<Option<Outcome>>,
    /// The requests of the last pass, by evaluation.
    asked: Vec<(usize, Psi2Wanted)>,
}

impl<'a, 'j> CollapsedBatch<'a, 'j> {
    /// A batch of collapsed evaluation jobs (any other job's outcome is an error).
    pub fn new(jobs: Vec<&'a Job<'j>>) -> Self {
        Self {
            replays: jobs.iter().map(|_| Psi2Replay::default()).collect(),
            outcomes: vec![None; jobs.len()],
            asked: Vec::new(),
            jobs,
        }
    }

    /// The evaluations (indices into the jobs) without an outcome yet.
    pub fn waiting(&self) -> Vec<usize> {
        (0..self.jobs.len())
            .filter(|&i| self.outcomes[i].is_none())
            .collect()
    }

    /// Runs evaluation `i` on `data` against the sums its replay holds.
    pub fn evaluate(&self, data: &DMatrix<f64>, i: usize) -> Result<Evaluation, EvaluationError> {
        let Job::Evaluate {
            variable, jitter, ..
        } = self.jobs[i]
        else {
            return Err(EvaluationError::Mismatch(
                "only collapsed evaluations are batched for Ψ2".into(),
            ));
        };
        variable
            .evaluate_collapsed_on(data, *jitter, Some(&self.replays[i]))
            .unwrap_or_else(|| Err(EvaluationError::Mismatch("not a collapsed variable".into())))
    }

    /// Takes evaluation `i`'s result: its outcome, or the sums it asked for.
    pub fn settle(&mut self, i: usize, result: Result<Evaluation, EvaluationError>) {
        match self.replays[i].take_wanted() {
            Some(wanted) => self.asked.push((i, wanted)),
            None => self.outcomes[i] = Some(Outcome::Evaluation(result)),
        }
    }

    /// What this pass's evaluations asked the device for (none: the batch is done).
    pub fn requests(&self) -> Vec<Psi2Request<'_>> {
        self.asked.iter().map(|(_, w)| w.into()).collect()
    }

    /// The device's answers to [`CollapsedBatch::requests`], in the same order.
    pub fn answer(&mut self, answers: Vec<Psi2Sums>) {
        for ((i, wanted), sums) in self.asked.drain(..).zip(answers) {
            self.replays[i].hold(&wanted, sums);
        }
    }

    /// Every evaluation's outcome, in the jobs' order (an error for one still asking after
    /// [`PSI2_PASSES`] passes).
    pub fn outcomes(self) -> Vec<Outcome> {
        self.outcomes
            .into_iter()
            .map(|o| {
                o.unwrap_or(Outcome::Evaluation(Err(EvaluationError::Device(
                    DeviceError::TooManyPasses(PSI2_PASSES),
                ))))
            })
            .collect()
    }
}
