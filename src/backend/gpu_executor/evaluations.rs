//! An uncollapsed evaluation job in three parts, so a batch's device work is one submission: its
//! first half on the CPU in f64 ([`begin_evaluation`]: the minibatch, K_ZZ's factor, L⁻¹, S),
//! the predictions of the whole batch on the device ([`prediction_requests`] →
//! [`crate::backend::gpu::Gpu::submit_predictions`]), then its second half on the CPU
//! ([`finish_evaluation`]: the bound and every gradient). The executor's plan
//! ([`super::run_batch`]) runs the halves on the host pool; the outcome is the one `Job::run`
//! would give, to within float32 rounding of the predictions.

use nalgebra::DMatrix;

use crate::discovery::cgp::{EvaluationError, PendingEvaluation};
use crate::discovery::jobs::{Job, Outcome};
use crate::gp::svgp::{PredictionRequest, Predictions, FLOAT32_RELATIVE_JITTER};

/// The first half of evaluation `job` on `data`, with K_ZZ's jitter at least
/// [`FLOAT32_RELATIVE_JITTER`] · mean diag(K_ZZ). A job that cannot be begun or asked of the
/// device (a failed factorisation, not an uncollapsed evaluation) keeps its own error, and stays
/// out of the device's batch.
pub fn begin_evaluation(
    data: &DMatrix<f64>,
    job: &Job<'_>,
) -> Result<PendingEvaluation, EvaluationError> {
    let Job::Evaluate { variable, seed, .. } = job else {
        return Err(mismatch("only evaluations are computed on the GPU"));
    };
    let pending = variable
        .begin_evaluation(data, *seed, FLOAT32_RELATIVE_JITTER)
        .unwrap_or_else(|| Err(mismatch("not an uncollapsed variable")))?;
    pending.request(variable)?;
    Ok(pending)
}

/// The device requests of the evaluations of `jobs` whose first half succeeded (`begun`, in the
/// same order), in that order.
pub fn prediction_requests<'a>(
    jobs: &[&'a Job<'_>],
    begun: &'a [Result<PendingEvaluation, EvaluationError>],
) -> Vec<PredictionRequest<'a>> {
    jobs.iter()
        .zip(begun)
        .filter_map(|(job, pending)| {
            let Job::Evaluate { variable, .. } = job else {
                return None;
            };
            pending.as_ref().ok()?.request(variable).ok()
        })
        .collect()
}

/// The outcome of evaluation `job` from its first half and the device's `predictions` for it
/// (`None` when the device gave fewer results than it was asked for).
pub fn finish_evaluation(
    job: &Job<'_>,
    begun: Result<PendingEvaluation, EvaluationError>,
    predictions: Option<Predictions>,
) -> Outcome {
    let Job::Evaluate { variable, .. } = job else {
        return Outcome::Evaluation(Err(mismatch("only evaluations are computed on the GPU")));
    };
    Outcome::Evaluation(match (begun, predictions) {
        (Ok(pending), Some(predictions)) => pending.finish(variable, predictions),
        (Ok(_), None) => Err(EvaluationError::Device(
            "the GPU returned fewer results than requests".into(),
        )),
        (Err(e), _) => Err(e),
    })
}

fn mismatch(why: &str) -> EvaluationError {
    EvaluationError::Mismatch(why.into())
}
