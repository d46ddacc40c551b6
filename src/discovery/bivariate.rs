//! The two-variable direction test (MODEL.md §7): the evidence for X → Y is the bound of the
//! marginal model of X plus that of the conditional model of Y given X; the same for Y → X; the
//! larger total wins. Each of the four components is fitted with restarts and its best bound kept
//! (each component is its own model, so the best per component is a valid choice, §7.2).
//!
//! With the collapsed bound the test is the D = 2 case of the exact search (MODEL.md §6): the
//! evidence of X → Y is F(X | ∅) + F(Y | {X}), each term computed by [`family_score`], the one
//! implementation of "the evidence of a family" that the exact search and the continuous search's
//! graph evidence use too.

use super::error::DiscoveryError;
use super::family::{family_score, FamilyScore, FamilyScoreSettings};
pub use crate::data::subsample::subsample_rows;
use crate::gp::gp_cde::{GpCdeModel, GpCdeSettings, LatentKind, StepError};
use nalgebra::DMatrix;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Settings of the uncollapsed fit of one component.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UncollapsedFit {
    pub variable: GpCdeSettings,
    /// Minibatch size b (full batch when N ≤ b).
    pub batch: usize,
    /// Most optimisation steps.
    pub max_steps: usize,
    /// Stop when the mean bound of the last `window` steps improves on the window before by less
    /// than `tolerance` nats per row.
    pub window: usize,
    pub tolerance: f64,
    /// Monte Carlo samples of the final full-data score.
    pub eval_samples: usize,
}

impl Default for UncollapsedFit {
    fn default() -> Self {
        Self {
            variable: GpCdeSettings {
                inducing: 100,
                samples: 10,
                latent: LatentKind::Free,
                ..GpCdeSettings::default()
            },
            batch: 500,
            max_steps: 3000,
            window: 100,
            tolerance: 1e-4,
            eval_samples: 100,
        }
    }
}

/// The best bound of one component over restarts, with how the restarts went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComponentFit {
    /// Best bound over restarts, nats (None when every restart failed).
    pub bound: Option<f64>,
    pub restarts_failed: usize,
}

/// Evidence for both directions of a pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionEvidence {
    pub marginal_x: ComponentFit,
    pub conditional_y_given_x: ComponentFit,
    pub marginal_y: ComponentFit,
    pub conditional_x_given_y: ComponentFit,
}

/// What a direction test concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    XToY,
    YToX,
    /// The evidence gap is within the tie band: the test cannot decide (MODEL.md §7.1).
    Tie,
}

impl DirectionEvidence {
    /// log-evidence(X → Y) − log-evidence(Y → X) in nats, if all four components were fitted.
    pub fn difference(&self) -> Option<f64> {
        let forward = self.marginal_x.bound? + self.conditional_y_given_x.bound?;
        let backward = self.marginal_y.bound? + self.conditional_x_given_y.bound?;
        Some(forward - backward)
    }

    /// The decision: X → Y when the difference exceeds `tie_nats`, Y → X when it is below
    /// −`tie_nats`, a tie in between (None when a component failed in every restart).
    ///
    /// Why a band and not the sign: two fits that both end at the same baseline (the Gaussian noise
    /// model, Bayesian linear regression) give the same bound in both directions up to optimiser
    /// noise, and a gap of 0.001 nats is not evidence of direction.
    pub fn decide(&self, tie_nats: f64) -> Option<Direction> {
        let d = self.difference()?;
        Some(if d > tie_nats {
            Direction::XToY
        } else if d < -tie_nats {
            Direction::YToX
        } else {
            Direction::Tie
        })
    }

    /// The better of two estimates, component by component: each component is its own model, so
    /// the highest of its bounds from different fitting procedures is a valid (tighter) bound on
    /// its evidence (MODEL.md §7.2, and [B]'s combination of two procedures, §7.5).
    pub fn best_with(&self, other: &DirectionEvidence) -> DirectionEvidence {
        let best = |a: &ComponentFit, b: &ComponentFit| ComponentFit {
            bound: match (a.bound, b.bound) {
                (Some(x), Some(y)) => Some(x.max(y)),
                (x, y) => x.or(y),
            },
            restarts_failed: a.restarts_failed + b.restarts_failed,
        };
        DirectionEvidence {
            marginal_x: best(&self.marginal_x, &other.marginal_x),
            conditional_y_given_x: best(&self.conditional_y_given_x, &other.conditional_y_given_x),
            marginal_y: best(&self.marginal_y, &other.marginal_y),
            conditional_x_given_y: best(&self.conditional_x_given_y, &other.conditional_x_given_y),
        }
    }
}

/// Fits one component with the uncollapsed bound: `data` is N × D with the modelled variable in
/// column `slot` (D = 1 for a marginal, 2 for a conditional). Returns the full-data bound.
pub fn fit_uncollapsed(
    data: &DMatrix<f64>,
    slot: usize,
    fit: &UncollapsedFit,
    rng: &mut ChaCha8Rng,
) -> Result<f64, StepError> {
    let n = data.nrows();
    let mask = vec![1.0; data.ncols()];
    let mut variable = GpCdeModel::new(data, slot, &mask, &fit.variable, rng);
    let batch = fit.batch.clamp(1, n);
    let mut order: Vec<usize> = (0..n).collect();
    let mut history: Vec<f64> = Vec::with_capacity(fit.max_steps);
    let mut cursor = n; // forces a shuffle on the first step
    for _ in 0..fit.max_steps {
        if cursor + batch > n {
            order.shuffle(rng);
            cursor = 0;
        }
        let rows = &order[cursor..cursor + batch];
        cursor += batch;
        let report = variable.step(data, rows, rng)?;
        history.push(report.terms.elbo / n as f64);
        if converged(&history, fit.window, fit.tolerance) {
            break;
        }
    }
    variable.full_bound(data, fit.eval_samples, 1000, rng)
}

/// True when the mean of the last `window` values exceeds the mean of the window before it by less
/// than `tolerance`.
fn converged(history: &[f64], window: usize, tolerance: f64) -> bool {
    if window == 0 || history.len() < 2 * window {
        return false;
    }
    let mean = |s: &[f64]| s.iter().sum::<f64>() / s.len() as f64;
    let k = history.len();
    mean(&history[k - window..]) - mean(&history[k - 2 * window..k - window]) < tolerance
}

/// Best bound over `restarts` fits of one component; restart r is seeded with `seed + r` so every
/// component's restarts are reproducible on their own.
pub fn best_of<E>(
    restarts: usize,
    seed: u64,
    mut fit_once: impl FnMut(&mut ChaCha8Rng) -> Result<f64, E>,
) -> ComponentFit {
    let mut best: Option<f64> = None;
    let mut failed = 0;
    for r in 0..restarts.max(1) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_add(r as u64));
        match fit_once(&mut rng) {
            Ok(b) if b.is_finite() => best = Some(best.map_or(b, |cur: f64| cur.max(b))),
            _ => failed += 1,
        }
    }
    ComponentFit {
        bound: best,
        restarts_failed: failed,
    }
}

/// The four component fits of a pair (x, y), both standardised, with `fit_component(data, slot,
/// rng)` fitting the variable in column `slot` of `data`. Components get independent seeds derived
/// from `seed`.
pub fn direction_evidence(
    x: &[f64],
    y: &[f64],
    restarts: usize,
    seed: u64,
    fit_component: impl Fn(&DMatrix<f64>, usize, &mut ChaCha8Rng) -> Result<f64, StepError>,
) -> DirectionEvidence {
    let n = x.len();
    let column = |v: &[f64]| DMatrix::from_column_slice(n, 1, v);
    let pair =
        |a: &[f64], b: &[f64]| DMatrix::from_fn(n, 2, |r, c| if c == 0 { a[r] } else { b[r] });
    // Distinct seed streams per component (multiples of a large odd stride).
    let stream = |k: u64| {
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(k * 1_000_003)
    };
    let (mx, my) = (column(x), column(y));
    let (xy, yx) = (pair(x, y), pair(y, x));
    DirectionEvidence {
        marginal_x: best_of(restarts, stream(1), |rng| fit_component(&mx, 0, rng)),
        conditional_y_given_x: best_of(restarts, stream(2), |rng| fit_component(&xy, 1, rng)),
        marginal_y: best_of(restarts, stream(3), |rng| fit_component(&my, 0, rng)),
        conditional_x_given_y: best_of(restarts, stream(4), |rng| fit_component(&yx, 1, rng)),
    }
}

/// The four components as local scores of the exact search: with the pair as the 2-column data
/// set [x, y], marginal X = F(0 | ∅), Y given X = F(1 | {0}), marginal Y = F(1 | ∅) and X given Y
/// = F(0 | {1}), each [`family_score`] (best of `settings.restarts` collapsed GP-CDE fits from the
/// standard start, floored by the noise-model or Bayesian-linear evidence, family-derived seeds).
/// So log-evidence(X → Y) − log-evidence(Y → X) = F(0|∅) + F(1|{0}) − F(1|∅) − F(0|{1}), exactly
/// the score difference of the two one-edge DAGs in `occam discover --method exact` on the pair.
pub fn direction_evidence_by_family(
    x: &[f64],
    y: &[f64],
    settings: &FamilyScoreSettings,
    seed: u64,
) -> DirectionEvidence {
    let n = x.len();
    let data = DMatrix::from_fn(n, 2, |r, c| if c == 0 { x[r] } else { y[r] });
    let component = |child: usize, parents: &[usize]| -> ComponentFit {
        match family_score(&data, child, parents, settings, seed, None) {
            Ok(FamilyScore {
                value, fits_failed, ..
            }) => ComponentFit {
                bound: Some(value),
                restarts_failed: fits_failed,
            },
            Err(_) => ComponentFit {
                bound: None,
                restarts_failed: settings.restarts,
            },
        }
    };
    DirectionEvidence {
        marginal_x: component(0, &[]),
        conditional_y_given_x: component(1, &[0]),
        marginal_y: component(1, &[]),
        conditional_x_given_y: component(0, &[1]),
    }
}

/// How the direction test of one pair is scored: the collapsed family scores, the uncollapsed
/// fits (`restarts` each), or both, each component keeping the better of its two bounds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairTest {
    pub collapsed: Option<FamilyScoreSettings>,
    pub uncollapsed: Option<UncollapsedFit>,
    pub restarts: usize,
}

/// The evidence of x → y against y → x (both standardised, the same length) by `test`, with
/// seeds derived from `seed`.
pub fn pair_evidence(
    x: &[f64],
    y: &[f64],
    test: &PairTest,
    seed: u64,
) -> Result<DirectionEvidence, DiscoveryError> {
    if x.len() != y.len() || x.len() < 2 {
        return Err(DiscoveryError::PairShape {
            x: x.len(),
            y: y.len(),
        });
    }
    let collapsed = test
        .collapsed
        .map(|family| direction_evidence_by_family(x, y, &family, seed));
    let uncollapsed = test.uncollapsed.map(|fit| {
        direction_evidence(x, y, test.restarts, seed, |data, slot, rng| {
            fit_uncollapsed(data, slot, &fit, rng)
        })
    });
    match (collapsed, uncollapsed) {
        (Some(c), Some(u)) => Ok(c.best_with(&u)),
        (Some(e), None) | (None, Some(e)) => Ok(e),
        (None, None) => Err(DiscoveryError::PairTestEmpty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::standardise;
    use rand::Rng;
    use rand_distr::StandardNormal;

    #[test]
    fn convergence_needs_two_full_windows_and_a_plateau() {
        let rising: Vec<f64> = (0..40).map(|k| k as f64).collect();
        assert!(!converged(&rising, 10, 1e-3));
        assert!(!converged(&rising[..15], 10, 1e-3));
        let flat = vec![1.0; 40];
        assert!(converged(&flat, 10, 1e-3));
    }

    #[test]
    fn best_of_keeps_the_maximum_and_counts_failures() {
        let mut calls = 0;
        let fit = best_of(4, 9, |_| {
            calls += 1;
            match calls {
                1 => Ok(-5.0),
                2 => Err(()),
                3 => Ok(f64::NAN),
                _ => Ok(-2.0),
            }
        });
        assert_eq!(fit.bound, Some(-2.0));
        assert_eq!(fit.restarts_failed, 2);
    }

    fn evidence(bounds: [Option<f64>; 4]) -> DirectionEvidence {
        let fit = |bound| ComponentFit {
            bound,
            restarts_failed: usize::from(bound.is_none()),
        };
        DirectionEvidence {
            marginal_x: fit(bounds[0]),
            conditional_y_given_x: fit(bounds[1]),
            marginal_y: fit(bounds[2]),
            conditional_x_given_y: fit(bounds[3]),
        }
    }

    #[test]
    fn gaps_within_the_band_are_ties() {
        let e = evidence([Some(-10.0), Some(-5.0), Some(-9.0), Some(-6.3)]);
        // forward −15, backward −15.3: +0.3 nats.
        assert!((e.difference().unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(e.decide(0.0), Some(Direction::XToY));
        assert_eq!(e.decide(0.5), Some(Direction::Tie));
        let r = evidence([Some(-10.0), Some(-6.0), Some(-9.0), Some(-6.3)]);
        assert_eq!(r.decide(0.5), Some(Direction::YToX));
        assert_eq!(
            evidence([None, Some(-1.0), Some(-1.0), Some(-1.0)]).decide(0.5),
            None
        );
    }

    #[test]
    fn combining_two_procedures_keeps_each_components_best_bound() {
        let a = evidence([Some(-10.0), None, Some(-9.0), Some(-6.3)]);
        let b = evidence([Some(-11.0), Some(-4.0), Some(-8.0), None]);
        let c = a.best_with(&b);
        assert_eq!(c.marginal_x.bound, Some(-10.0));
        assert_eq!(c.conditional_y_given_x.bound, Some(-4.0));
        assert_eq!(c.marginal_y.bound, Some(-8.0));
        assert_eq!(c.conditional_x_given_y.bound, Some(-6.3));
        assert_eq!(c.conditional_y_given_x.restarts_failed, 1);
        assert_eq!(c.difference(), Some(-14.0 + 14.3));
    }

    /// A clearly non-linear, heteroscedastic pair: y = x³-ish with noise growing in |x|, x uniform.
    /// The uncollapsed evidence must prefer x → y.
    #[test]
    fn uncollapsed_evidence_prefers_the_true_direction_on_a_clear_pair() {
        let mut rng = ChaCha8Rng::seed_from_u64(12);
        let n = 150;
        let x: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
        let y: Vec<f64> = x
            .iter()
            .map(|&v| {
                (1.5 * v).tanh() * 2.0 + v * v * 0.3 + 0.2 * rng.sample::<f64, _>(StandardNormal)
            })
            .collect();
        let (x, y) = (standardise(&x), standardise(&y));
        let fit = UncollapsedFit {
            variable: GpCdeSettings {
                inducing: 20,
                samples: 5,
                latent: LatentKind::Free,
                ..GpCdeSettings::default()
            },
            batch: 150,
            max_steps: 600,
            window: 50,
            tolerance: 1e-4,
            eval_samples: 20,
        };
        let evidence = direction_evidence(&x, &y, 1, 3, |d, slot, rng| {
            fit_uncollapsed(d, slot, &fit, rng)
        });
        let diff = evidence.difference().unwrap();
        assert!(diff > 0.0, "evidence difference {diff} nats, {evidence:?}");
    }
}
