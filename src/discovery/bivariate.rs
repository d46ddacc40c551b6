//! The two-variable direction test (MODEL.md §7): the evidence for X → Y is the bound of the
//! marginal model of X plus that of the conditional model of Y given X; the same for Y → X; the
//! larger total wins. Each of the four components is fitted with restarts and its best bound kept
//! (each component is its own model, so the best per component is a valid choice, §7.2).

use crate::gp::collapsed::{CollapsedModel, FitSettings, NOISE_VARIANCE_FLOOR};
use crate::gp::resolution::resolution_noise_floor;
use crate::gp::variable::{GpCdeVariable, LatentKind, VariableSettings};
use nalgebra::DMatrix;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// Settings of the uncollapsed fit of one component.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UncollapsedFit {
    pub variable: VariableSettings,
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
            variable: VariableSettings {
                inducing: 100,
                samples: 10,
                latent: LatentKind::Free,
                ..VariableSettings::default()
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

impl DirectionEvidence {
    /// log-evidence(X → Y) − log-evidence(Y → X) in nats, if all four components were fitted.
    pub fn difference(&self) -> Option<f64> {
        let forward = self.marginal_x.bound? + self.conditional_y_given_x.bound?;
        let backward = self.marginal_y.bound? + self.conditional_x_given_y.bound?;
        Some(forward - backward)
    }
}

/// Fits one component with the uncollapsed bound: `data` is N × D with the modelled variable in
/// column `slot` (D = 1 for a marginal, 2 for a conditional). Returns the full-data bound.
pub fn fit_uncollapsed(
    data: &DMatrix<f64>,
    slot: usize,
    fit: &UncollapsedFit,
    rng: &mut ChaCha8Rng,
) -> Result<f64, String> {
    let n = data.nrows();
    let mask = vec![1.0; data.ncols()];
    let mut variable = GpCdeVariable::new(data, slot, &mask, &fit.variable, rng);
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
        let report = variable.step(data, rows, rng).map_err(|e| e.to_string())?;
        history.push(report.terms.elbo / n as f64);
        if converged(&history, fit.window, fit.tolerance) {
            break;
        }
    }
    variable
        .full_bound(data, fit.eval_samples, 1000, rng)
        .map_err(|e| e.to_string())
}

/// Fits one component with the collapsed bound (psi-statistics, free q(w), Adam then L-BFGS):
/// the modelled variable is column `slot` of `data`, its parents the other columns (none for a
/// marginal). Returns the fitted bound.
pub fn fit_collapsed(
    data: &DMatrix<f64>,
    slot: usize,
    settings: &FitSettings,
    rng: &mut ChaCha8Rng,
) -> Result<f64, String> {
    let n = data.nrows();
    let others: Vec<usize> = (0..data.ncols()).filter(|&c| c != slot).collect();
    let parents = DMatrix::from_fn(n, others.len(), |r, k| data[(r, others[k])]);
    let y = data.column(slot).into_owned();
    let floor = resolution_noise_floor(y.as_slice(), NOISE_VARIANCE_FLOOR);
    let model = CollapsedModel::with_noise_floor(parents, y, floor).map_err(|e| e.to_string())?;
    model
        .fit(settings, rng)
        .map(|f| f.bound)
        .map_err(|e| e.to_string())
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
pub fn best_of(
    restarts: usize,
    seed: u64,
    mut fit_once: impl FnMut(&mut ChaCha8Rng) -> Result<f64, String>,
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
    fit_component: impl Fn(&DMatrix<f64>, usize, &mut ChaCha8Rng) -> Result<f64, String>,
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

/// Picks `max_rows` of `n` rows without replacement (all rows, in order, when n ≤ max_rows); the
/// same indices are used for both variables so pairs stay paired.
pub fn subsample_rows(n: usize, max_rows: usize, rng: &mut impl Rng) -> Vec<usize> {
    if n <= max_rows {
        return (0..n).collect();
    }
    let mut rows = rand::seq::index::sample(rng, n, max_rows).into_vec();
    rows.sort_unstable();
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::standardise;
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
                2 => Err("no".into()),
                3 => Ok(f64::NAN),
                _ => Ok(-2.0),
            }
        });
        assert_eq!(fit.bound, Some(-2.0));
        assert_eq!(fit.restarts_failed, 2);
    }

    #[test]
    fn subsampling_keeps_pairs_and_is_seeded() {
        let mut a = ChaCha8Rng::seed_from_u64(1);
        let mut b = ChaCha8Rng::seed_from_u64(1);
        let rows = subsample_rows(100, 10, &mut a);
        assert_eq!(rows, subsample_rows(100, 10, &mut b));
        assert_eq!(rows.len(), 10);
        assert!(rows.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(subsample_rows(5, 10, &mut a), vec![0, 1, 2, 3, 4]);
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
            variable: VariableSettings {
                inducing: 20,
                samples: 5,
                latent: LatentKind::Free,
                ..VariableSettings::default()
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
