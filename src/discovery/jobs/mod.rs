//! The units of numeric work of a search, as values: every [`Job`] is independent of the others,
//! reads only the data set it is run on, and serialises (with its [`Outcome`]), so the same job
//! runs on the calling thread, on a pool thread or in another Web Worker and gives the same
//! outcome. Drivers collect a unit's jobs, hand them to a `backend::Backend` as one batch, and
//! give the outcomes back in the jobs' order.
//!
//! A job borrows what it reads where it can ([`Cow`]), so running it on this machine copies
//! nothing; a job sent elsewhere is serialised whole.

pub mod start;

use std::borrow::Cow;

use nalgebra::DMatrix;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::bivariate::{pair_evidence, DirectionEvidence, PairTest};
use super::cgp::component::Component;
use super::cgp::{Conditional, Evaluation, EvaluationError};
use super::error::DiscoveryError;
use super::family::{
    family_fit_awaiting, family_fit_on, FamilyRequest, FamilyScore, FamilyScoreSettings, WarmStart,
};
use crate::gp::collapsed::{AwaitedPsi2, CollapsedError, Psi2Device};
pub use start::ConditionalStart;

/// A [`Job::Refine`]'s work, with Ψ2's sums on `device` when one is given: `component` (without
/// parent `without`, when one is named) refitted by L-BFGS on `data`, and the objective reached.
pub fn refine(
    data: &DMatrix<f64>,
    component: &Component,
    without: Option<usize>,
    jitter: f64,
    iterations: usize,
    device: Option<&dyn Psi2Device>,
) -> (Component, Result<f64, CollapsedError>) {
    let mut fitted = match without {
        Some(j) => component.without_parent(j),
        None => component.clone(),
    };
    let objective = fitted.refine_on(data, jitter, iterations, device);
    (fitted, objective)
}

/// One independent piece of numeric work on a data set (the rows used, N × D, standardised).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Job<'a> {
    /// One variable's bound and its gradient at its current parameters: F_i(θ_i) and ∇F_i at
    /// jitter ε, the minibatch and Monte Carlo draws (uncollapsed bound) from `seed`.
    Evaluate {
        variable: Cow<'a, Conditional>,
        jitter: f64,
        seed: u64,
    },
    /// A variable's start (its L-BFGS start fit for the collapsed bound), drawing from `rng`.
    Start {
        start: Box<ConditionalStart>,
        rng: Box<ChaCha8Rng>,
    },
    /// L-BFGS on a collapsed variable's objective F_i + log p(θ_i) from its current point, for
    /// at most `iterations` steps; `without` names a parent to drop first (pruning tests the
    /// edge j → i by evidence).
    Refine {
        component: Cow<'a, Component>,
        without: Option<usize>,
        jitter: f64,
        iterations: usize,
    },
    /// The bound a restart is compared by: the collapsed bound as `evaluated`, or the
    /// uncollapsed bound on every row with 100 Monte Carlo samples per row drawn from `seed`.
    FinalBound {
        variable: Cow<'a, Conditional>,
        evaluated: f64,
        seed: u64,
    },
    /// The local score F(i | S) of one family: the best of several collapsed GP-CDE fits of
    /// column `child` given columns `parents`, floored by the closed form (MODEL.md §6), one of
    /// them from `warm` (its best subset's fit) when the settings' scheme takes warm starts.
    Family {
        child: usize,
        parents: Cow<'a, [usize]>,
        settings: FamilyScoreSettings,
        seed: u64,
        #[serde(default)]
        warm: Option<Cow<'a, WarmStart>>,
    },
    /// The two-variable direction test on its own columns x and y (a pair carries its data, so
    /// pairs of different data sets share one batch; the batch's data are not read).
    Pair {
        x: Cow<'a, [f64]>,
        y: Cow<'a, [f64]>,
        test: PairTest,
        seed: u64,
    },
}

/// What a [`Job`] gives back, of the same kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Outcome {
    Evaluation(Result<Evaluation, EvaluationError>),
    /// The started variable and the random stream after it (a restart draws on from there).
    Started {
        variable: Result<Conditional, DiscoveryError>,
        rng: Box<ChaCha8Rng>,
    },
    /// The refitted variable and its objective (the variable as given when the fit failed).
    Refined {
        component: Box<Component>,
        objective: Result<f64, DiscoveryError>,
    },
    Value(Result<f64, DiscoveryError>),
    Family(Result<FamilyScore, DiscoveryError>),
    /// A pair's evidence, with the seconds its fits took (for the record, never for a decision).
    Pair {
        evidence: Result<DirectionEvidence, DiscoveryError>,
        seconds: f64,
    },
}

impl Job<'_> {
    /// Does the work on `data`. Never panics on bad input: a job that does not fit the data
    /// answers with an error in its outcome.
    pub fn run(&self, data: &DMatrix<f64>) -> Outcome {
        self.run_on(data, None)
    }

    /// [`Job::run`] with the Ψ2 sums of a refit's or a family's fits on `device` when one is
    /// given (the other jobs have none to move).
    pub fn run_on(&self, data: &DMatrix<f64>, device: Option<&dyn Psi2Device>) -> Outcome {
        match self {
            Job::Evaluate {
                variable,
                jitter,
                seed,
            } => Outcome::Evaluation(variable.evaluate(data, *jitter, *seed)),
            Job::Start { start, rng } => {
                let mut rng = rng.clone();
                let variable = start.build(data, rng.as_mut());
                Outcome::Started { variable, rng }
            }
            Job::Refine {
                component,
                without,
                jitter,
                iterations,
            } => {
                let (fitted, objective) =
                    refine(data, component, *without, *jitter, *iterations, device);
                Outcome::Refined {
                    component: Box::new(fitted),
                    objective: objective.map_err(DiscoveryError::from),
                }
            }
            Job::FinalBound {
                variable,
                evaluated,
                seed,
            } => Outcome::Value(
                variable
                    .final_bound(data, *evaluated, *seed)
                    .map_err(DiscoveryError::from),
            ),
            Job::Family { .. } => {
                let request = self.family_request(data).expect("a family job");
                Outcome::Family(request.and_then(|request| {
                    family_fit_on(request, device)
                        .map(|fit| fit.score)
                        .map_err(DiscoveryError::from)
                }))
            }
            Job::Pair { x, y, test, seed } => {
                let started = crate::base::clock::now_seconds();
                let evidence = pair_evidence(x, y, test, *seed);
                Outcome::Pair {
                    evidence,
                    seconds: crate::base::clock::now_seconds() - started,
                }
            }
        }
    }

    /// The outcome of family job `self` with every fit's Ψ2 sums from `device`, which is awaited
    /// (a browser worker's WebGPU, shared with the other families' fits); `None` for another
    /// job. The same outcome as [`Job::run`] to within the device's rounding.
    pub async fn run_family_awaiting(
        &self,
        data: &DMatrix<f64>,
        device: &dyn AwaitedPsi2,
    ) -> Option<Outcome> {
        let score = match self.family_request(data)? {
            Ok(request) => family_fit_awaiting(request, device)
                .await
                .map(|fit| fit.score)
                .map_err(DiscoveryError::from),
            Err(e) => Err(e),
        };
        Some(Outcome::Family(score))
    }

    /// What family job `self` asks of the fits on `data`, or why it cannot be run there (a
    /// family that does not name distinct columns of `data`); `None` for another job.
    fn family_request<'s>(
        &'s self,
        data: &'s DMatrix<f64>,
    ) -> Option<Result<FamilyRequest<'s>, DiscoveryError>> {
        let Job::Family {
            child,
            parents,
            settings,
            seed,
            warm,
        } = self
        else {
            return None;
        };
        let request = FamilyRequest {
            data,
            child: *child,
            parents,
            settings,
            seed: *seed,
            warm: warm.as_deref(),
        };
        Some(check_family(data, *child, parents).map(|()| request))
    }

    /// (N, M) of a family's fits on data of `rows` rows (every fit has a latent input, so each
    /// evaluation has N·M² Ψ2 work), or `None` for another job.
    pub fn family_psi2_shape(&self, rows: usize) -> Option<(usize, usize)> {
        match self {
            Job::Family { settings, .. } => Some((rows, settings.inducing.clamp(1, rows.max(1)))),
            _ => None,
        }
    }

    /// The job owning everything it reads (to keep or send it beyond what it borrows).
    pub fn into_owned(self) -> Job<'static> {
        match self {
            Job::Evaluate {
                variable,
                jitter,
                seed,
            } => Job::Evaluate {
                variable: Cow::Owned(variable.into_owned()),
                jitter,
                seed,
            },
            Job::Start { start, rng } => Job::Start { start, rng },
            Job::Refine {
                component,
                without,
                jitter,
                iterations,
            } => Job::Refine {
                component: Cow::Owned(component.into_owned()),
                without,
                jitter,
                iterations,
            },
            Job::FinalBound {
                variable,
                evaluated,
                seed,
            } => Job::FinalBound {
                variable: Cow::Owned(variable.into_owned()),
                evaluated,
                seed,
            },
            Job::Family {
                child,
                parents,
                settings,
                seed,
                warm,
            } => Job::Family {
                child,
                parents: Cow::Owned(parents.into_owned()),
                settings,
                seed,
                warm: warm.map(|w| Cow::Owned(w.into_owned())),
            },
            Job::Pair { x, y, test, seed } => Job::Pair {
                x: Cow::Owned(x.into_owned()),
                y: Cow::Owned(y.into_owned()),
                test,
                seed,
            },
        }
    }
}

impl Outcome {
    /// The value of a [`Outcome::Value`] or an evaluation's bound; an error for any other kind.
    pub fn into_value(self) -> Result<f64, DiscoveryError> {
        match self {
            Outcome::Value(v) => v,
            Outcome::Evaluation(e) => e.map(|e| e.value()).map_err(DiscoveryError::from),
            Outcome::Family(f) => f.map(|f| f.value),
            other => Err(DiscoveryError::OutcomeKind {
                expected: "a value".into(),
                got: other.kind().into(),
            }),
        }
    }

    /// The kind, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Evaluation(_) => "an evaluation",
            Outcome::Started { .. } => "a started variable",
            Outcome::Refined { .. } => "a refitted variable",
            Outcome::Value(_) => "a value",
            Outcome::Family(_) => "a family score",
            Outcome::Pair { .. } => "a pair's evidence",
        }
    }
}

/// Whether family `child | parents` names distinct columns of `data`.
fn check_family(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
) -> Result<(), DiscoveryError> {
    let valid = child < data.ncols() && parents.iter().all(|&j| j < data.ncols() && j != child);
    if valid {
        Ok(())
    } else {
        Err(DiscoveryError::FamilyOutsideData {
            child,
            parents: parents.to_vec(),
            columns: data.ncols(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::family::{family_score, ColdFits};
    use crate::discovery::settings::{CheckedSettings, Preset};
    use rand::SeedableRng;

    /// A nonlinear chain a → b → c, standardised enough for the fits.
    fn data(n: usize) -> DMatrix<f64> {
        DMatrix::from_fn(n, 3, |r, c| {
            let a = (r as f64 * 0.37).sin() * 1.5;
            let b = a.tanh() + 0.2 * (r as f64 * 1.7).cos();
            match c {
                0 => a,
                1 => b,
                _ => b * b - 0.5 + 0.1 * (r as f64 * 2.3).sin(),
            }
        })
    }

    fn settings() -> CheckedSettings {
        let mut s = Preset::Interactive.settings();
        s.inducing_points = 6;
        s.start_iterations = 10;
        s.check().unwrap()
    }

    /// Starting variable `child` given `parents` on `rows` rows, drawing from seed `seed`.
    fn start_job(child: usize, parents: Vec<usize>, rows: usize, seed: u64) -> Job<'static> {
        Job::Start {
            start: Box::new(ConditionalStart {
                child,
                parents,
                noise_floor: 1e-6,
                total_rows: rows,
                settings: settings(),
            }),
            rng: Box::new(ChaCha8Rng::seed_from_u64(seed)),
        }
    }

    /// The JSON of a value: equal JSON is an equal outcome, to the last bit of every number.
    fn json<T: Serialize>(value: &T) -> String {
        serde_json::to_string(value).unwrap()
    }

    /// Every kind of job gives the same outcome run here and run after travelling as JSON (as it
    /// does to another worker), and its outcome reads back as itself.
    #[test]
    fn every_job_gives_the_same_outcome_after_a_round_trip() {
        let data = data(40);
        let started = start_job(2, vec![0, 1], 40, 5).run(&data);
        let Outcome::Started {
            variable: Ok(variable),
            ..
        } = started.clone()
        else {
            panic!("the start failed: {started:?}")
        };
        let Conditional::Collapsed(component) = &variable else {
            panic!("the interactive preset is collapsed")
        };
        // A warm-started family carries its subset's fitted parameters.
        let warm_settings = FamilyScoreSettings {
            adam_steps: 20,
            lbfgs_iterations: 20,
            ..FamilyScoreSettings::warm(5, ColdFits::Off)
        };
        let subset = family_score(&data, 2, &[1], &warm_settings, 2, None).unwrap();
        let warm = WarmStart {
            parents: vec![1],
            params: subset
                .best_params
                .expect("the warm scheme keeps the best fit"),
        };
        let jobs = vec![
            start_job(0, vec![1], 40, 6),
            Job::Evaluate {
                variable: Cow::Borrowed(&variable),
                jitter: 1e-6,
                seed: 3,
            },
            Job::Refine {
                component: Cow::Borrowed(component.as_ref()),
                without: Some(0),
                jitter: 1e-6,
                iterations: 5,
            },
            Job::FinalBound {
                variable: Cow::Borrowed(&variable),
                evaluated: -12.5,
                seed: 1,
            },
            Job::Family {
                child: 1,
                parents: Cow::Owned(vec![0]),
                settings: FamilyScoreSettings::with_inducing(5),
                seed: 2,
                warm: None,
            },
            Job::Family {
                child: 2,
                parents: Cow::Owned(vec![0, 1]),
                settings: warm_settings,
                seed: 2,
                warm: Some(Cow::Owned(warm)),
            },
            Job::Pair {
                x: Cow::Owned(data.column(0).iter().copied().collect()),
                y: Cow::Owned(data.column(1).iter().copied().collect()),
                test: PairTest {
                    collapsed: Some(FamilyScoreSettings::with_inducing(5)),
                    uncollapsed: None,
                    restarts: 1,
                },
                seed: 4,
            },
        ];
        for job in &jobs {
            let here = job.run(&data);
            let sent: Job<'static> = serde_json::from_str(&json(job)).unwrap();
            let there = sent.run(&data);
            let back: Outcome = serde_json::from_str(&json(&there)).unwrap();
            let strip = |o: &Outcome| match o {
                // The seconds a pair took are a measurement, not part of the outcome.
                Outcome::Pair { evidence, .. } => json(evidence),
                other => json(other),
            };
            assert_eq!(strip(&here), strip(&back), "{}", here.kind());
            assert!(
                !matches!(&here, Outcome::Evaluation(Err(_)) | Outcome::Family(Err(_))),
                "{here:?}"
            );
        }
        // A refit without parent 0 has only parent 1 left.
        let Outcome::Refined { component, .. } = jobs[2].run(&data) else {
            panic!("a refit")
        };
        assert_eq!(component.parents(), &[1]);
    }

    #[test]
    fn jobs_that_do_not_fit_the_data_fail_with_a_reason() {
        let data = data(30);
        let family = Job::Family {
            child: 5,
            parents: Cow::Owned(vec![0]),
            settings: FamilyScoreSettings::with_inducing(5),
            seed: 0,
            warm: None,
        };
        assert!(family
            .run(&data)
            .into_value()
            .unwrap_err()
            .to_string()
            .contains("3 columns"));
        let pair = Job::Pair {
            x: Cow::Owned(vec![0.0, 1.0, 2.0]),
            y: Cow::Owned(vec![1.0, 0.0]),
            test: PairTest {
                collapsed: Some(FamilyScoreSettings::with_inducing(5)),
                uncollapsed: None,
                restarts: 1,
            },
            seed: 0,
        };
        let Outcome::Pair { evidence, .. } = pair.run(&data) else {
            panic!("a pair outcome")
        };
        assert!(evidence.unwrap_err().to_string().contains("same length"));
        let Outcome::Started { variable, .. } = start_job(1, vec![1], 30, 0).run(&data) else {
            panic!("a started outcome")
        };
        assert!(variable.unwrap_err().to_string().contains("does not fit"));
        // A variable fitted to other rows refuses to be evaluated on these.
        let other = self::data(20);
        let fitted = start_job(1, vec![0], 20, 0).run(&other);
        let Outcome::Started {
            variable: Ok(variable),
            ..
        } = fitted
        else {
            panic!("a start on 20 rows")
        };
        let evaluated = Job::Evaluate {
            variable: Cow::Owned(variable),
            jitter: 1e-6,
            seed: 0,
        }
        .run(&data);
        assert!(evaluated
            .into_value()
            .unwrap_err()
            .to_string()
            .contains("20 rows"));
    }
}
