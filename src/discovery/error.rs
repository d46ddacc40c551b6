//! Why a unit of discovery work gave no number: the discovery layer's one error, carried in a
//! job's [`crate::discovery::jobs::Outcome`] (across the worker boundary, as MessagePack) and kept
//! in score caches and checkpoints (as JSON), so it serialises and reads back equal.

use serde::{Deserialize, Serialize};

use crate::discovery::cgp::EvaluationError;
use crate::gp::collapsed::{CollapsedError, FitError};
use crate::gp::gp_cde::StepError;

/// Why a job (a family's score, a variable's bound, a pair's evidence, a started variable) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum DiscoveryError {
    /// A family's model could not be built from the data or every fit failed.
    #[error(transparent)]
    Fit(#[from] FitError),
    /// A collapsed bound (a refit's objective) could not be evaluated.
    #[error(transparent)]
    Collapsed(#[from] CollapsedError),
    /// A continuous-search variable's bound could not be evaluated.
    #[error(transparent)]
    Evaluation(#[from] EvaluationError),
    /// An uncollapsed fit's step or bound failed.
    #[error(transparent)]
    Step(#[from] StepError),
    /// A family names a column the data does not have, or its child among its parents.
    #[error("family {child} | {parents:?} does not fit data with {columns} columns")]
    FamilyOutsideData {
        child: usize,
        parents: Vec<usize>,
        columns: usize,
    },
    /// A variable's candidate parents name a column the data does not have, or itself.
    #[error("variable {child} with parents {parents:?} does not fit data with {columns} columns")]
    VariableOutsideData {
        child: usize,
        parents: Vec<usize>,
        columns: usize,
    },
    /// A pair's columns differ in length or have fewer than 2 rows.
    #[error("a pair needs two columns of the same length, at least 2 (got {x} and {y})")]
    PairShape { x: usize, y: usize },
    /// A pair test with neither bound to score with.
    #[error("the pair test names no bound to score with")]
    PairTestEmpty,
    /// A family's fits all failed (its model was built, none of its fits gave a bound).
    #[error("all {fits} fits failed")]
    AllFitsFailed { fits: usize },
    /// A family's outcome came back as something else too many times; the search goes on without
    /// it.
    #[error("the fit's outcome was lost {times} times (last came back as {got})")]
    OutcomeLost { times: usize, got: String },
    /// A job's outcome is of another kind than the one asked for.
    #[error("expected {expected}, got {got}")]
    OutcomeKind { expected: String, got: String },
    /// A job the runner did not run: a runner's mistake or a lost answer, reported rather than
    /// panicked on.
    #[error("{0}")]
    NotRun(NotRun),
    /// A reason read from a score cache or journal written before reasons were typed (a plain
    /// string there): kept as written so that the file's scores stay usable.
    #[serde(untagged)]
    #[error("{0}")]
    Recorded(String),
}

/// Why the runner gave no outcome for a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
pub enum NotRun {
    #[error("a job was not run")]
    Job,
    #[error("a family was not run")]
    Family,
    #[error("not a family job")]
    NotAFamily,
    #[error("only final bounds are computed here")]
    NotAFinalBound,
    #[error("the backend gave no outcome for this job")]
    NoOutcome,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::collapsed::CollapsedError;
    use crate::gp::device::DeviceError;

    /// Each kind of reason goes through JSON (a checkpoint, a score cache) and MessagePack (the
    /// worker boundary) and reads back equal, a NaN inside included; a plain string, as score
    /// caches written before typed reasons hold, reads as [`DiscoveryError::Recorded`] with the
    /// same text.
    #[test]
    fn reasons_read_back_equal_and_old_strings_still_read() {
        let reasons = [
            DiscoveryError::Fit(FitError::JitterExhausted {
                jitter: 1e-2,
                attempts: 5,
                source: CollapsedError::NonFinite { value: f64::NAN },
            }),
            DiscoveryError::Collapsed(CollapsedError::Device(DeviceError::Abandoned)),
            DiscoveryError::FamilyOutsideData {
                child: 3,
                parents: vec![0, 7],
                columns: 4,
            },
            DiscoveryError::NotRun(NotRun::Family),
            DiscoveryError::Recorded("an old reason".into()),
        ];
        for reason in reasons {
            let text = reason.to_string();
            let json: DiscoveryError =
                serde_json::from_str(&serde_json::to_string(&reason).unwrap()).unwrap();
            let packed: DiscoveryError =
                rmp_serde::from_slice(&rmp_serde::to_vec(&reason).unwrap()).unwrap();
            // NaN ≠ NaN, so the texts are compared (they print every field).
            assert_eq!(json.to_string(), text);
            assert_eq!(packed.to_string(), text);
            assert_eq!(
                std::mem::discriminant(&json),
                std::mem::discriminant(&reason)
            );
        }
        let old: Result<f64, DiscoveryError> =
            serde_json::from_str(r#"{"Err":"the fit failed at every jitter"}"#).unwrap();
        assert_eq!(
            old,
            Err(DiscoveryError::Recorded(
                "the fit failed at every jitter".into()
            ))
        );
        assert!(
            DiscoveryError::Fit(FitError::Interrupted)
                .to_string()
                .contains("stopped on request"),
            "a wrapped reason prints as its own"
        );
    }
}
