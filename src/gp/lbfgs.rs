//! Limited-memory BFGS (Nocedal & Wright, *Numerical Optimization*, 2nd ed., Alg. 7.4/7.5) with a
//! line search that enforces the strong Wolfe conditions (Alg. 3.5 bracketing, Alg. 3.6 zoom with
//! safeguarded cubic interpolation), for the full-batch collapsed bound (MODEL.md §6, where the
//! reference code runs SciPy's L-BFGS-B without bounds).
//!
//! Stopping follows SciPy's L-BFGS-B defaults: max |gᵢ| ≤ `gradient_tolerance` (pgtol 1e-5), or a
//! relative reduction (f_k − f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) ≤ `relative_tolerance` (factr·ε =
//! 1e7 · 2.22e-16), or, when [`LbfgsSettings::stall`] is set, a window of iterations that gained
//! less than a stated absolute amount (the bound's own scale: nats), or the iteration / evaluation
//! caps. Every report carries the objective after each accepted step, so callers can see how the
//! value evolved (issue 33: the fit statistics). A non-finite value or gradient at a trial
//! point is treated as a step that went too far: the line search shrinks towards the last finite
//! point and never steps beyond it again.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Settings of [`minimize`]; `Default` gives SciPy's L-BFGS-B defaults.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LbfgsSettings {
    /// Correction pairs (s, y) kept (SciPy's `maxcor`, 10).
    pub memory: usize,
    /// Iterations (accepted steps) allowed (SciPy's `maxiter`, 15000).
    pub max_iterations: usize,
    /// Objective evaluations allowed, line-search trials included (SciPy's `maxfun`, 15000).
    pub max_evaluations: usize,
    /// Stop when max |gᵢ| ≤ this (SciPy's `pgtol`, 1e-5).
    pub gradient_tolerance: f64,
    /// Stop when (f_k − f_{k+1}) / max(|f_k|, |f_{k+1}|, 1) ≤ this (SciPy's factr·ε ≈ 2.22e-9).
    pub relative_tolerance: f64,
    /// Sufficient decrease: f(x + αd) ≤ f(x) + c₁ α gᵀd.
    pub wolfe_c1: f64,
    /// Strong curvature: |g(x + αd)ᵀd| ≤ c₂ |gᵀd|.
    pub wolfe_c2: f64,
    /// Objective evaluations allowed per line search (SciPy's `maxls`, 20).
    pub max_line_search_evaluations: usize,
    /// Stop once the last `window` iterations lowered f by less than `gain` in all (None: off,
    /// SciPy has no such rule). Relative tolerances on a bound of hundreds of nats let the
    /// iteration caps decide; an absolute gain in the objective's own units does not.
    #[serde(default)]
    pub stall: Option<StallRule>,
}

/// Convergence on the objective: f_{k−window} − f_k < `gain` after iteration k ≥ `window`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct StallRule {
    pub window: usize,
    pub gain: f64,
}

impl StallRule {
    /// Whether `trace` (f after each iteration, the start first) has stalled at its end.
    pub fn stalled(&self, trace: &[f64]) -> bool {
        let k = trace.len().saturating_sub(1);
        self.window > 0 && k >= self.window && trace[k - self.window] - trace[k] < self.gain
    }
}

impl Default for LbfgsSettings {
    fn default() -> Self {
        Self {
            memory: 10,
            max_iterations: 15_000,
            max_evaluations: 15_000,
            gradient_tolerance: 1e-5,
            relative_tolerance: 1e7 * f64::EPSILON,
            wolfe_c1: 1e-4,
            wolfe_c2: 0.9,
            max_line_search_evaluations: 20,
            stall: None,
        }
    }
}

/// Why [`minimize`] stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// max |gᵢ| ≤ `gradient_tolerance`.
    GradientTolerance,
    /// The last step reduced f by a relative amount ≤ `relative_tolerance`.
    RelativeReduction,
    /// `max_iterations` steps taken.
    MaxIterations,
    /// `max_evaluations` objective evaluations used.
    MaxEvaluations,
    /// No step along steepest descent lowered f (after the memory was discarded once): the
    /// point is as good as this method can make it in floating point.
    LineSearchFailed,
    /// The last `window` iterations gained less than the [`StallRule`]'s `gain`.
    Stalled,
}

impl StopReason {
    /// Whether the search ran out of its allowance rather than converging.
    pub fn hit_cap(self) -> bool {
        matches!(self, StopReason::MaxIterations | StopReason::MaxEvaluations)
    }
}

/// The result of [`minimize`]: the best point found and how the search ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LbfgsReport {
    pub x: Vec<f64>,
    /// f(x), always finite.
    pub value: f64,
    pub gradient: Vec<f64>,
    /// Accepted steps.
    pub iterations: usize,
    /// Objective evaluations, the initial one included.
    pub evaluations: usize,
    pub stop: StopReason,
    /// f at the start and after each accepted step (`iterations + 1` values, non-increasing).
    pub trace: Vec<f64>,
}

/// Why [`minimize`] returned no point.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LbfgsError<E> {
    /// The objective returned an error; the search was abandoned.
    #[error("the objective failed: {0}")]
    Objective(E),
    /// f or ∇f is not finite at the starting point, so there is nowhere to shrink back to.
    #[error("the objective is not finite at the starting point (value {value})")]
    NonFiniteStart { value: f64 },
    /// The objective returned a gradient of the wrong length.
    #[error("the objective returned a gradient of length {got} for {expected} parameters")]
    GradientLength { expected: usize, got: usize },
}

/// One evaluated point on the search line: α, φ(α) = f(x + αd), its gradient and φ'(α) = gᵀd.
/// A non-finite evaluation is stored with φ = +∞ and no gradient.
#[derive(Debug, Clone)]
struct Trial {
    alpha: f64,
    value: f64,
    slope: f64,
    gradient: Option<Vec<f64>>,
}

impl Trial {
    fn finite(&self) -> bool {
        self.gradient.is_some()
    }
}

/// Minimises f from `x0` by L-BFGS. `objective(x)` returns (f(x), ∇f(x)) or an error, which
/// aborts the search and is returned as [`LbfgsError::Objective`].
///
/// Direction d = −H g by the two-loop recursion over the last m pairs (sᵢ = x_{i+1} − xᵢ,
/// yᵢ = g_{i+1} − gᵢ) with H₀ = (sᵀy / yᵀy) I; a pair is stored only when sᵀy > ε·yᵀy, which keeps
/// H positive definite. The first step (and any step after the memory is reset) tries
/// α = min(1, 1/‖g‖₂), later steps α = 1.
pub fn minimize<E, F>(
    mut objective: F,
    x0: &[f64],
    settings: &LbfgsSettings,
) -> Result<LbfgsReport, LbfgsError<E>>
where
    F: FnMut(&[f64]) -> Result<(f64, Vec<f64>), E>,
{
    // The objective never awaits, so the search finishes in one poll.
    super::ready::ready(minimize_awaiting(
        async |x: &[f64]| objective(x),
        x0,
        settings,
    ))
}

/// [`minimize`] with an objective that may await its evaluations (a device's answer in a browser
/// worker, which must not block): the same iterates, line search and stopping rules.
pub async fn minimize_awaiting<E, F>(
    mut objective: F,
    x0: &[f64],
    settings: &LbfgsSettings,
) -> Result<LbfgsReport, LbfgsError<E>>
where
    F: AsyncFnMut(&[f64]) -> Result<(f64, Vec<f64>), E>,
{
    let mut evaluations = 0usize;
    let mut x = x0.to_vec();
    let (mut f, mut g) = evaluate(&mut objective, &x, &mut evaluations).await?;
    if !f.is_finite() || g.iter().any(|v| !v.is_finite()) {
        return Err(LbfgsError::NonFiniteStart { value: f });
    }
    let mut pairs: VecDeque<(Vec<f64>, Vec<f64>, f64)> = VecDeque::new();
    let mut iterations = 0usize;
    let mut trace = vec![f];
    // Every way the search ends breaks out of the loop with its reason; the report is made once.
    let stop = if inf_norm(&g) <= settings.gradient_tolerance {
        StopReason::GradientTolerance
    } else {
        loop {
            if iterations >= settings.max_iterations {
                break StopReason::MaxIterations;
            }
            if evaluations >= settings.max_evaluations {
                break StopReason::MaxEvaluations;
            }
            let mut d = two_loop_direction(&g, &pairs);
            let mut slope = dot(&d, &g);
            if slope >= 0.0 || !slope.is_finite() {
                // Not a descent direction (only possible through round-off): start afresh.
                pairs.clear();
                d = g.iter().map(|v| -v).collect();
                slope = -dot(&g, &g);
            }
            let alpha0 = if pairs.is_empty() {
                (1.0 / norm2(&d)).min(1.0)
            } else {
                1.0
            };
            let budget = settings
                .max_line_search_evaluations
                .min(settings.max_evaluations - evaluations)
                .max(1);
            let step = LineSearch {
                objective: &mut objective,
                x: &x,
                f0: f,
                d: &d,
                slope0: slope,
                settings,
                evaluations: &mut evaluations,
            }
            .search(alpha0, budget)
            .await?;
            let Some(trial) = step else {
                if pairs.is_empty() {
                    break StopReason::LineSearchFailed;
                }
                // SciPy does the same: forget the curvature pairs and try steepest descent once.
                pairs.clear();
                continue;
            };
            let g_new = trial.gradient.expect("an accepted trial is finite");
            let s: Vec<f64> = d.iter().map(|v| trial.alpha * v).collect();
            let y: Vec<f64> = g_new.iter().zip(&g).map(|(a, b)| a - b).collect();
            let sy = dot(&s, &y);
            let yy = dot(&y, &y);
            if sy > f64::EPSILON * yy && sy.is_finite() {
                if pairs.len() == settings.memory.max(1) {
                    pairs.pop_front();
                }
                pairs.push_back((s.clone(), y, 1.0 / sy));
            }
            x.iter_mut().zip(&s).for_each(|(xi, si)| *xi += si);
            let f_old = f;
            f = trial.value;
            g = g_new;
            iterations += 1;
            trace.push(f);
            if inf_norm(&g) <= settings.gradient_tolerance {
                break StopReason::GradientTolerance;
            }
            let scale = f_old.abs().max(f.abs()).max(1.0);
            if f_old - f <= settings.relative_tolerance * scale {
                break StopReason::RelativeReduction;
            }
            if settings.stall.is_some_and(|rule| rule.stalled(&trace)) {
                break StopReason::Stalled;
            }
        }
    };
    Ok(LbfgsReport {
        x,
        value: f,
        gradient: g,
        iterations,
        evaluations,
        stop,
        trace,
    })
}

/// Calls the objective once, counting it and checking the gradient's length.
async fn evaluate<E, F>(
    objective: &mut F,
    x: &[f64],
    evaluations: &mut usize,
) -> Result<(f64, Vec<f64>), LbfgsError<E>>
where
    F: AsyncFnMut(&[f64]) -> Result<(f64, Vec<f64>), E>,
{
    *evaluations += 1;
    let (f, g) = objective(x).await.map_err(LbfgsError::Objective)?;
    if g.len() != x.len() {
        return Err(LbfgsError::GradientLength {
            expected: x.len(),
            got: g.len(),
        });
    }
    Ok((f, g))
}

/// d = −H g by the L-BFGS two-loop recursion (N&W Alg. 7.4), with H₀ = γI, γ = sᵀy/yᵀy of the
/// newest pair (γ = 1 without pairs).
fn two_loop_direction(g: &[f64], pairs: &VecDeque<(Vec<f64>, Vec<f64>, f64)>) -> Vec<f64> {
    let mut q = g.to_vec();
    let mut alphas = Vec::with_capacity(pairs.len());
    for (s, y, rho) in pairs.iter().rev() {
        let a = rho * dot(s, &q);
        axpy(-a, y, &mut q);
        alphas.push(a);
    }
    if let Some((s, y, _)) = pairs.back() {
        let gamma = dot(s, y) / dot(y, y);
        q.iter_mut().for_each(|v| *v *= gamma);
    }
    for ((s, y, rho), a) in pairs.iter().zip(alphas.iter().rev()) {
        let b = rho * dot(y, &q);
        axpy(a - b, s, &mut q);
    }
    q.iter_mut().for_each(|v| *v = -*v);
    q
}

/// One line search's fixed part: φ(α) = f(x + αd) from φ(0) = `f0` with slope φ'(0) =
/// `slope0` < 0, the Wolfe constants of `settings`, and the objective with its evaluation count.
struct LineSearch<'a, F> {
    objective: &'a mut F,
    x: &'a [f64],
    f0: f64,
    d: &'a [f64],
    slope0: f64,
    settings: &'a LbfgsSettings,
    evaluations: &'a mut usize,
}

impl<F> LineSearch<'_, F> {
    /// Strong-Wolfe line search (N&W Alg. 3.5) from α = `alpha0`: extrapolate (α ← 2α) until a
    /// trial brackets a point satisfying both conditions, then [`LineSearch::zoom`]. Non-finite
    /// trials cap the step (α_max ← α) and halve the distance to the last finite trial. Returns
    /// the accepted trial, or, when the `budget` of evaluations runs out, the lowest trial that
    /// met the sufficient-decrease condition, or `None` if there was none.
    async fn search<E>(
        &mut self,
        alpha0: f64,
        budget: usize,
    ) -> Result<Option<Trial>, LbfgsError<E>>
    where
        F: AsyncFnMut(&[f64]) -> Result<(f64, Vec<f64>), E>,
    {
        let mut used = 0usize;
        let mut best: Option<Trial> = None;
        let origin = Trial {
            alpha: 0.0,
            value: self.f0,
            slope: self.slope0,
            gradient: None,
        };
        let mut prev = origin.clone();
        let mut alpha = alpha0;
        let mut alpha_max = f64::INFINITY;
        while used < budget {
            used += 1;
            let t = self.trial(alpha).await?;
            if !t.finite() {
                alpha_max = alpha;
                alpha = prev.alpha + 0.5 * (alpha - prev.alpha);
                continue;
            }
            // A bracket (lo, hi) to zoom into: past a point of sufficient decrease (lo = prev), or
            // at a rising slope (lo = t); otherwise extrapolate.
            let (lo, hi) = if self.lacks_decrease(&t) || (prev.alpha > 0.0 && t.value >= prev.value)
            {
                (prev, t)
            } else {
                keep_best(&mut best, &t);
                if self.meets_curvature(&t) {
                    return Ok(Some(t));
                }
                if t.slope >= 0.0 {
                    (t, prev)
                } else {
                    prev = t;
                    alpha = if alpha_max.is_finite() {
                        (2.0 * prev.alpha).min(0.5 * (prev.alpha + alpha_max))
                    } else {
                        2.0 * prev.alpha
                    };
                    continue;
                }
            };
            return self.zoom(lo, hi, best, budget - used).await;
        }
        Ok(best)
    }

    /// N&W Alg. 3.6: shrink the bracket [lo, hi] (lo satisfies sufficient decrease and has the
    /// lower value; the sign of φ'(lo)(hi − lo) is negative) until a trial meets the strong Wolfe
    /// conditions, within `budget` evaluations. The trial point is the minimiser of the cubic
    /// through (α, φ, φ') at both ends, replaced by the midpoint when it falls outside the central
    /// 80% of the bracket, is not finite, or `hi` has no finite value.
    async fn zoom<E>(
        &mut self,
        mut lo: Trial,
        mut hi: Trial,
        mut best: Option<Trial>,
        budget: usize,
    ) -> Result<Option<Trial>, LbfgsError<E>>
    where
        F: AsyncFnMut(&[f64]) -> Result<(f64, Vec<f64>), E>,
    {
        for _ in 0..budget {
            let (a, b) = (lo.alpha.min(hi.alpha), lo.alpha.max(hi.alpha));
            let width = b - a;
            if width <= f64::EPSILON * b {
                break;
            }
            let mid = 0.5 * (a + b);
            let alpha = match cubic_minimizer(&lo, &hi) {
                Some(c) if c >= a + 0.1 * width && c <= b - 0.1 * width => c,
                _ => mid,
            };
            let t = self.trial(alpha).await?;
            if !t.finite() || self.lacks_decrease(&t) || t.value >= lo.value {
                hi = t;
                continue;
            }
            keep_best(&mut best, &t);
            if self.meets_curvature(&t) {
                return Ok(Some(t));
            }
            if t.slope * (hi.alpha - lo.alpha) >= 0.0 {
                hi = lo;
            }
            lo = t;
        }
        Ok(best)
    }

    /// Whether `t` fails the sufficient-decrease (Armijo) condition: φ(α) > φ(0) + c₁ α φ'(0).
    fn lacks_decrease(&self, t: &Trial) -> bool {
        t.value > self.f0 + self.settings.wolfe_c1 * t.alpha * self.slope0
    }

    /// The strong curvature condition |φ'(α)| ≤ −c₂ φ'(0).
    fn meets_curvature(&self, t: &Trial) -> bool {
        t.slope.abs() <= -self.settings.wolfe_c2 * self.slope0
    }

    /// Evaluates φ(α) = f(x + αd); a non-finite value or gradient gives a trial with φ = +∞.
    async fn trial<E>(&mut self, alpha: f64) -> Result<Trial, LbfgsError<E>>
    where
        F: AsyncFnMut(&[f64]) -> Result<(f64, Vec<f64>), E>,
    {
        let xt: Vec<f64> = self
            .x
            .iter()
            .zip(self.d)
            .map(|(xi, di)| xi + alpha * di)
            .collect();
        let (value, gradient) = evaluate(self.objective, &xt, self.evaluations).await?;
        if value.is_finite() && gradient.iter().all(|v| v.is_finite()) {
            Ok(Trial {
                alpha,
                value,
                slope: dot(&gradient, self.d),
                gradient: Some(gradient),
            })
        } else {
            Ok(Trial {
                alpha,
                value: f64::INFINITY,
                slope: f64::NAN,
                gradient: None,
            })
        }
    }
}

/// The minimiser of the cubic interpolating φ and φ' at two trials (N&W eq. 3.59):
/// d₁ = φ'_a + φ'_b − 3(φ_a − φ_b)/(α_a − α_b), d₂ = sign(α_b − α_a) √(d₁² − φ'_a φ'_b),
/// α = α_b − (α_b − α_a)(φ'_b + d₂ − d₁)/(φ'_b − φ'_a + 2d₂). `None` if either end is not
/// finite or the cubic has no minimiser.
fn cubic_minimizer(p: &Trial, q: &Trial) -> Option<f64> {
    if !p.value.is_finite() || !q.value.is_finite() || !p.slope.is_finite() || !q.slope.is_finite()
    {
        return None;
    }
    let d1 = p.slope + q.slope - 3.0 * (p.value - q.value) / (p.alpha - q.alpha);
    let disc = d1 * d1 - p.slope * q.slope;
    if disc < 0.0 {
        return None;
    }
    let d2 = (q.alpha - p.alpha).signum() * disc.sqrt();
    let alpha =
        q.alpha - (q.alpha - p.alpha) * (q.slope + d2 - d1) / (q.slope - p.slope + 2.0 * d2);
    alpha.is_finite().then_some(alpha)
}

/// Keeps the lowest finite trial that met the sufficient-decrease condition (the fallback when a
/// line search runs out of evaluations).
fn keep_best(best: &mut Option<Trial>, t: &Trial) {
    if best.as_ref().is_none_or(|b| t.value < b.value) {
        *best = Some(t.clone());
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn axpy(a: f64, x: &[f64], y: &mut [f64]) {
    y.iter_mut().zip(x).for_each(|(yi, xi)| *yi += a * xi);
}

fn norm2(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

fn inf_norm(a: &[f64]) -> f64 {
    a.iter().fold(0.0, |m, v| m.max(v.abs()))
}
