//! The units of numeric work of a search, as values: every [`Job`] is independent of the others,
//! reads only the data set it is run on, and serialises (with its [`Outcome`]), so the same job
//! runs on the calling thread, on a pool thread or in another Web Worker and gives the same
//! outcome. Drivers collect a unit's jobs, hand them to a `backend::Backend` as one batch, and
//! give the outcomes back in the jobs' order.
//!
//! A job borrows what it reads where it can ([`Cow`]), so running it on this machine copies
//! nothing; a job sent elsewhere is serialised whole.

use std::borrow::Cow;

use nalgebra::DMatrix;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::cgp::component::Component;
use super::cgp::start::VariableStart;
use super::cgp::{Evaluation, Variable};
use super::family::{family_score, FamilyScore, FamilyScoreSettings};

/// One independent piece of numeric work on a data set (the rows used, N × D, standardised).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Job<'a> {
    /// One variable's bound and its gradient at its current parameters: F_i(θ_i) and ∇F_i at
    /// jitter ε, the minibatch and Monte Carlo draws (uncollapsed bound) from `seed`.
    Evaluate {
        variable: Cow<'a, Variable>,
        jitter: f64,
        seed: u64,
    },
    /// A variable's start (its L-BFGS start fit for the collapsed bound), drawing from `rng`.
    Start {
        start: Box<VariableStart>,
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
        variable: Cow<'a, Variable>,
        evaluated: f64,
        seed: u64,
    },
    /// The local score F(i | S) of one family: the best of several collapsed GP-CDE fits of
    /// column `child` given columns `parents`, floored by the closed form (MODEL.md §6).
    Family {
        child: usize,
        parents: Cow<'a, [usize]>,
        settings: FamilyScoreSettings,
        seed: u64,
    },
}

/// What a [`Job`] gives back, of the same kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Outcome {
    Evaluation(Result<Evaluation, String>),
    /// The started variable and the random stream after it (a restart draws on from there).
    Started {
        variable: Result<Variable, String>,
        rng: Box<ChaCha8Rng>,
    },
    /// The refitted variable and its objective (the variable as given when the fit failed).
    Refined {
        component: Box<Component>,
        objective: Result<f64, String>,
    },
    Value(Result<f64, String>),
    Family(Result<FamilyScore, String>),
}

impl Job<'_> {
    /// Does the work on `data`. Never panics on bad input: a job that does not fit the data
    /// answers with an error in its outcome.
    pub fn run(&self, data: &DMatrix<f64>) -> Outcome {
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
                let mut fitted = match without {
                    Some(j) => component.without_parent(*j),
                    None => component.as_ref().clone(),
                };
                let objective = fitted
                    .refine(data, *jitter, *iterations)
                    .map_err(|e| e.to_string());
                Outcome::Refined {
                    component: Box::new(fitted),
                    objective,
                }
            }
            Job::FinalBound {
                variable,
                evaluated,
                seed,
            } => Outcome::Value(variable.final_bound(data, *evaluated, *seed)),
            Job::Family {
                child,
                parents,
                settings,
                seed,
            } => {
                let valid = *child < data.ncols()
                    && parents.iter().all(|&j| j < data.ncols() && j != *child);
                Outcome::Family(if valid {
                    family_score(data, *child, parents, settings, *seed)
                } else {
                    Err(format!(
                        "family {child} | {parents:?} does not fit data with {} columns",
                        data.ncols()
                    ))
                })
            }
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
            } => Job::Family {
                child,
                parents: Cow::Owned(parents.into_owned()),
                settings,
                seed,
            },
        }
    }
}

impl Outcome {
    /// The value of a [`Outcome::Value`] or an evaluation's bound; an error for any other kind.
    pub fn into_value(self) -> Result<f64, String> {
        match self {
            Outcome::Value(v) => v,
            Outcome::Evaluation(e) => e.map(|e| e.value()),
            Outcome::Family(f) => f.map(|f| f.value),
            other => Err(format!("expected a value, got {}", other.kind())),
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
        }
    }
}
