//! Fitting one collapsed GP-CDE (MODEL.md §6 and §7.3(a)): a variable y given its parents' columns
//! X_pa (possibly none), with the latent w as the last input and free q(w_n) per row.
//!
//! Initialisation ([B]'s closed-form method; the choices are ours where marked):
//! - kernel SE-ARD + linear-ARD on [x_pa, w]: sf2 = 1, every linear variance v_d = 1;
//! - precisions: λ ~ U(1, 100); the first parent gets θ = λ and the latent θ_w = 3λ (so for one
//!   parent l_w = l_x/3 exactly as [B]); further parents draw θ_d ~ U(1, 100) independently
//!   **[choice]**; a root (no parents) gets θ_w = λ;
//! - φ² = 1/κ², κ ~ U(10, 100);
//! - Z (M = min(M_max, N) rows): the parent column is linspace(min x, max x, M) for one parent, the
//!   parents' values at M distinct random rows for several **[choice]**; the latent column N(0, 1);
//! - q(w): μ = 0.1 y (root) or 0.01 y (conditional), s ~ U(0, 0.1).
//!
//! [B]'s GP initialisation of a conditional (MODEL.md §6, §7.3(a)), taken with probability ½ by
//! default ([`GpInitialisation`]): a GP regression x_pa → y with the SE + linear kernel on the
//! parents alone is fitted first (by L-BFGS, from the drawn precisions, variances 1 and φ²), and
//! then μ = y − its posterior mean at the data, θ = [θ*, 3θ*_first parent], v = [v*, v*_first
//! parent], sf2 = sf2*, φ² = φ²*. [B] fits an exact GP; here it is the collapsed (SGPR) bound on
//! the same inducing inputs' parent columns, held fixed, which costs O(N M²) instead of O(N³) and
//! is exact when M = N **[choice]**. If that fit fails the drawn values are kept.
//!
//! The random draws happen in the order listed (the coin before Z) from the caller's generator.
//! Every positive quantity is
//! optimised as softplus(raw) + floor: floor 0 for the kernel, the model's noise floor for φ²
//! (1e-6 unless the caller sets one; φ² starts at floor + 1/κ²), and
//! [`LATENT_VARIANCE_FLOOR`] for s_n; Z and μ are unconstrained.
//!
//! Optimisation: Adam (lr 0.05) on −F until F exceeds the noise-model value F_noise (at most
//! `adam_steps` steps), then L-BFGS to convergence. A factorisation failure or a non-finite bound
//! during Adam, or at L-BFGS's starting point, restarts the whole fit from the same initial values
//! with ten times the jitter, up to the ladder's last rung; during an L-BFGS line search the same failure
//! just marks the trial step as too long.

mod layout;
mod settings;

pub(crate) use layout::CollapsedLayout;
use layout::KernelAndNoise;
use settings::{check_settings, inverse_normal_cdf};
pub use settings::{
    precision_scale, FitError, FitSettings, FitSettingsError, GpInitialisation, LatentStart,
    MIN_START_SE_VARIANCE, OFF_LATENT_LINEAR, OFF_LATENT_PRECISION, SHARED_LATENT_FRACTION,
    WARM_NEW_LINEAR, WARM_NEW_PRECISION,
};

use std::cell::RefCell;

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use super::awaited::{bound_with_grad_awaited, AwaitedPsi2};
use super::bound::{
    collapsed_bound_with_grad, collapsed_bound_with_grad_on, posterior_mean_at_data, CollapsedGrad,
    CollapsedParams,
};
use super::noise::{linear_regression_evidence, root_noise_value};
use super::psi::{LatentPosterior, Psi2Device};
use super::CollapsedError;
use crate::gp::adam::{Adam, AdamSettings};
use crate::gp::encoder::{FreeLatents, LATENT_VARIANCE_FLOOR};
use crate::gp::kernel::{Kernel, StationaryKind};
use crate::gp::lbfgs::{minimize, minimize_awaiting, LbfgsError, LbfgsSettings, StopReason};
use crate::gp::linalg::JitterPolicy;
use crate::gp::params::{ParamBlock, ParamStore, Transform};
use crate::gp::ready::ready;
use crate::gp::NOISE_VARIANCE_FLOOR;

/// How one optimisation stage of a fit went: accepted steps, objective evaluations and why it
/// ended ([`StopReason::hit_cap`] says whether its allowance decided).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageStats {
    pub iterations: usize,
    pub evaluations: usize,
    pub stop: StopReason,
}

/// A fit's starting point ([`CollapsedModel::start`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FitStart {
    pub params: CollapsedParams,
    /// Whether the values came from data (a GP regression fit, or a root's normal scores).
    pub gp_initialised: bool,
    /// The GP-regression start's L-BFGS run, when it was tried.
    pub stats: Option<StageStats>,
}

/// A fitted model: the bound, the parameters and how the optimisation went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollapsedFit {
    /// F at `params` (finite).
    pub bound: f64,
    /// F_noise of [`CollapsedModel::noise_value`].
    pub noise_value: f64,
    pub params: CollapsedParams,
    /// The jitter the successful attempt used.
    pub jitter: f64,
    /// Attempts made (1 unless a failure forced more jitter).
    pub attempts: usize,
    /// Adam steps taken in the successful attempt.
    pub adam_steps: usize,
    /// Whether Adam stopped because F exceeded F_noise.
    pub adam_beat_noise: bool,
    /// Whether the initial values came from a GP regression fit (only set by
    /// [`CollapsedModel::fit`]; [`CollapsedModel::fit_from`] reports `false`).
    pub gp_initialised: bool,
    pub lbfgs_iterations: usize,
    pub lbfgs_evaluations: usize,
    pub stop: StopReason,
    /// The GP-regression start's own L-BFGS run (only set by [`CollapsedModel::fit`], when that
    /// start was tried).
    #[serde(default)]
    pub start: Option<StageStats>,
    /// F when Adam began and when L-BFGS began (the attempt that succeeded).
    #[serde(default)]
    pub start_bound: f64,
    #[serde(default)]
    pub adam_bound: f64,
    /// F after each L-BFGS iteration, the L-BFGS start first (non-decreasing).
    #[serde(default)]
    pub lbfgs_trace: Vec<f64>,
}

/// The data of one collapsed model: parents X_pa (N × |pa|, possibly no columns) and y (N), and
/// where its fits compute Ψ2's O(N M²) sums: on the calling thread, or on a device
/// ([`CollapsedModel::on_device`]; the same fits to within the device's rounding).
#[derive(Clone)]
pub struct CollapsedModel<'d> {
    parents: DMatrix<f64>,
    y: DVector<f64>,
    noise_floor: f64,
    noise_value: f64,
    device: Option<&'d dyn Psi2Device>,
}

impl std::fmt::Debug for CollapsedModel<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CollapsedModel")
            .field("parents", &self.parents.shape())
            .field("rows", &self.y.len())
            .field("noise_floor", &self.noise_floor)
            .field("noise_value", &self.noise_value)
            .field("on_device", &self.device.is_some())
            .finish()
    }
}

impl PartialEq for CollapsedModel<'_> {
    /// The same data and floor (where Ψ2 is computed does not change the model).
    fn eq(&self, other: &Self) -> bool {
        self.parents == other.parents
            && self.y == other.y
            && self.noise_floor == other.noise_floor
            && self.noise_value == other.noise_value
    }
}

impl<'d> CollapsedModel<'d> {
    /// The same model with its fits' Ψ2 sums (forward and reverse, when the model has a latent
    /// input) computed by `device`.
    pub fn on_device<'e>(self, device: &'e dyn Psi2Device) -> CollapsedModel<'e> {
        CollapsedModel {
            parents: self.parents,
            y: self.y,
            noise_floor: self.noise_floor,
            noise_value: self.noise_value,
            device: Some(device),
        }
    }
}

impl CollapsedModel<'static> {
    /// Checks the data (N ≥ 1 rows, matching lengths, finite values) and computes F_noise, with
    /// φ² ≥ [`NOISE_VARIANCE_FLOOR`].
    pub fn new(parents: DMatrix<f64>, y: DVector<f64>) -> Result<Self, FitError> {
        Self::with_noise_floor(parents, y, NOISE_VARIANCE_FLOOR)
    }

    /// As [`CollapsedModel::new`] with φ² ≥ `noise_floor` (at least [`NOISE_VARIANCE_FLOOR`]; see
    /// [`crate::gp::resolution::resolution_noise_floor`] for a floor from the data's resolution). The floor is part
    /// of the model: F_noise and every fit use it.
    pub fn with_noise_floor(
        parents: DMatrix<f64>,
        y: DVector<f64>,
        noise_floor: f64,
    ) -> Result<Self, FitError> {
        if !(noise_floor >= NOISE_VARIANCE_FLOOR && noise_floor.is_finite()) {
            return Err(FitError::InvalidData(format!(
                "the noise-variance floor must be finite and at least {NOISE_VARIANCE_FLOOR}, \
                 got {noise_floor}"
            )));
        }
        if y.is_empty() {
            return Err(FitError::InvalidData("no rows".into()));
        }
        if parents.nrows() != y.len() {
            return Err(FitError::InvalidData(format!(
                "the parents have {} rows but y has {}",
                parents.nrows(),
                y.len()
            )));
        }
        if let Some(k) = y.iter().position(|v| !v.is_finite()) {
            return Err(FitError::InvalidData(format!("y[{k}] is not finite")));
        }
        if let Some(k) = parents.iter().position(|v| !v.is_finite()) {
            let n = parents.nrows();
            return Err(FitError::InvalidData(format!(
                "parent column {} row {} is not finite",
                k / n,
                k % n
            )));
        }
        let noise_value = if parents.ncols() == 0 {
            root_noise_value(&y, noise_floor)
        } else {
            linear_regression_evidence(&parents, &y, noise_floor).value
        };
        Ok(Self {
            parents,
            y,
            noise_floor,
            noise_value,
            device: None,
        })
    }
}

impl CollapsedModel<'_> {
    /// The floor of φ² in this model.
    pub fn noise_floor(&self) -> f64 {
        self.noise_floor
    }

    /// F_noise: for a root, max log N(y | 0, σ²I) = −(N/2)(log(2π mean(y²)) + 1); for a
    /// conditional, max over (v, σ²) of the Bayesian-linear-regression evidence
    /// log N(y | 0, v X_pa X_paᵀ + σ²I).
    pub fn noise_value(&self) -> f64 {
        self.noise_value
    }

    /// |pa|, the observed inputs (0 for a root).
    pub fn parents(&self) -> usize {
        self.parents.ncols()
    }

    /// N, the number of rows.
    pub fn rows(&self) -> usize {
        self.y.len()
    }

    /// The initial parameters of the module documentation, drawn from `rng` (including the GP
    /// regression fit when the settings and the coin call for one).
    pub fn initial_params(&self, settings: &FitSettings, rng: &mut impl Rng) -> CollapsedParams {
        self.initialise(settings, rng).0
    }

    /// The drawn start of [`CollapsedModel::fit`] without the fit: the initial parameters, whether
    /// they came from data (GP regression or normal scores), and the regression's L-BFGS run.
    pub fn start(&self, settings: &FitSettings, rng: &mut impl Rng) -> FitStart {
        let (params, gp_initialised, stats) = self.initialise(settings, rng);
        FitStart {
            params,
            gp_initialised,
            stats,
        }
    }

    /// `params` with the latent input switched off as [`LatentStart::Off`] starts it: q(w_n) =
    /// N(0, 1), w's linear variance [`OFF_LATENT_LINEAR`] and SE precision
    /// [`OFF_LATENT_PRECISION`]; every other value kept. From a [`LatentStart::Residual`] start
    /// this is the `Off` start of the same regression fit, so both basins are reached from one
    /// regression instead of two.
    pub fn with_latent_off(&self, params: &CollapsedParams) -> CollapsedParams {
        let mut out = params.clone();
        let w = out.kernel.stationary[0].precision.len() - 1;
        out.kernel.stationary[0].precision[w] = OFF_LATENT_PRECISION;
        if let Some(lin) = out.kernel.linear.as_mut() {
            lin[w] = OFF_LATENT_LINEAR;
        }
        out.latent = Some(LatentPosterior {
            mean: DVector::zeros(self.y.len()),
            variance: DVector::from_element(self.y.len(), 1.0),
        });
        out
    }

    /// A start continued from the fit of a subset family with one parent fewer: `subset` the
    /// fitted parameters on the inputs [x_{S∖j}, w], `new_input` the position of the added parent
    /// x_j among this model's parent columns. The subset's model is this model with θ_j = v_j = 0;
    /// the start moves that point to θ_j = [`WARM_NEW_PRECISION`], v_j = [`WARM_NEW_LINEAR`] and
    /// gives each inducing point the x_j of the data row nearest to it in the subset's parent
    /// inputs, keeping σ², s_f², every other precision and variance, Z's other columns and q(w).
    /// None when `subset` does not have this model's shape less one parent (or is not SE +
    /// linear with a latent).
    pub fn warm_start(
        &self,
        subset: &CollapsedParams,
        new_input: usize,
    ) -> Option<CollapsedParams> {
        let (n, p) = (self.parents.nrows(), self.parents.ncols());
        let kernel = &subset.kernel;
        let [se] = kernel.stationary.as_slice() else {
            return None;
        };
        let linear = kernel.linear.as_ref()?;
        let latent = subset.latent.as_ref()?;
        let shape_ok = p >= 1
            && new_input < p
            && se.kind == StationaryKind::SquaredExponential
            && se.precision.len() == p
            && linear.len() == p
            && subset.z.ncols() == p
            && latent.mean.len() == n
            && latent.variance.len() == n;
        if !shape_ok {
            return None;
        }
        let mut theta = se.precision.clone();
        theta.insert(new_input, WARM_NEW_PRECISION);
        let mut v = linear.clone();
        v.insert(new_input, WARM_NEW_LINEAR);
        // Subset input column k is this model's column `old(k)` (the new one is skipped).
        let old = |k: usize| if k < new_input { k } else { k + 1 };
        let m = subset.z.nrows();
        let mut z = DMatrix::zeros(m, p + 1);
        for i in 0..m {
            let mut nearest = (f64::INFINITY, 0);
            for r in 0..n {
                let d2: f64 = (0..p - 1)
                    .map(|k| (subset.z[(i, k)] - self.parents[(r, old(k))]).powi(2))
                    .sum();
                if d2 < nearest.0 {
                    nearest = (d2, r);
                }
            }
            for k in 0..p - 1 {
                z[(i, old(k))] = subset.z[(i, k)];
            }
            z[(i, new_input)] = self.parents[(nearest.1, new_input)];
            z[(i, p)] = subset.z[(i, p - 1)];
        }
        Some(CollapsedParams {
            kernel: Kernel::se_plus_linear(v, se.variance, theta),
            noise_variance: subset.noise_variance.max(self.noise_floor),
            z,
            latent: Some(latent.clone()),
        })
    }

    /// F of a subset family at this model's `params` with every parent input but `kept`
    /// (positions, ascending) switched off: the collapsed bound on the parent columns `kept` at
    /// `params` restricted to them (the other inputs' SE precisions, linear variances and
    /// inducing columns dropped; q(w), σ², s_f² kept), which is the value `params` has with θ_j =
    /// v_j = 0 for the inputs dropped. A point of the subset's model, so a lower bound on that
    /// model's maximised bound.
    pub fn bound_with_parents(
        &self,
        params: &CollapsedParams,
        kept: &[usize],
        jitter: f64,
    ) -> Result<f64, CollapsedError> {
        let p = self.parents.ncols();
        let [se] = params.kernel.stationary.as_slice() else {
            return Err(CollapsedError::UnsupportedKernel(
                "switching parents off needs one SE part".into(),
            ));
        };
        let ascending = kept.windows(2).all(|w| w[0] < w[1]);
        if !ascending
            || kept.iter().any(|&k| k >= p)
            || se.precision.len() != p + 1
            || params.z.ncols() != p + 1
        {
            return Err(CollapsedError::Shape(format!(
                "parents {kept:?} of a model with {p} parents and {} kernel inputs",
                se.precision.len()
            )));
        }
        let inputs: Vec<usize> = kept.iter().copied().chain(std::iter::once(p)).collect();
        let linear = params.kernel.linear.as_ref();
        let sub = CollapsedParams {
            kernel: Kernel::se_plus_linear(
                inputs
                    .iter()
                    .map(|&c| linear.map_or(0.0, |v| v[c]))
                    .collect(),
                se.variance,
                inputs.iter().map(|&c| se.precision[c]).collect(),
            ),
            noise_variance: params.noise_variance,
            z: params.z.select_columns(&inputs),
            latent: params.latent.clone(),
        };
        let x = self.parents.select_columns(kept);
        super::bound::collapsed_bound(&x, &self.y, &sub, jitter)
    }

    /// Draws the initial parameters from `rng` and fits ([`CollapsedModel::fit_from`]).
    pub fn fit(
        &self,
        settings: &FitSettings,
        rng: &mut impl Rng,
    ) -> Result<CollapsedFit, FitError> {
        ready(self.fit_awaiting(settings, rng, None))
    }

    /// [`CollapsedModel::fit`] with Ψ2's sums from `awaited` when one is given (every
    /// evaluation's, by [`bound_with_grad_awaited`]): the same fit from the same draws, to
    /// within the device's rounding.
    pub async fn fit_awaiting(
        &self,
        settings: &FitSettings,
        rng: &mut impl Rng,
        awaited: Option<&dyn AwaitedPsi2>,
    ) -> Result<CollapsedFit, FitError> {
        let (init, gp_initialised, start) = self.initialise(settings, rng);
        let mut fit = self.fit_from_awaiting(init, settings, awaited).await?;
        fit.gp_initialised = gp_initialised;
        fit.start = start;
        Ok(fit)
    }

    /// The initial parameters, whether the GP regression initialisation was used, and how its
    /// L-BFGS run went when it was tried.
    fn initialise(
        &self,
        settings: &FitSettings,
        rng: &mut impl Rng,
    ) -> (CollapsedParams, bool, Option<StageStats>) {
        let (n, p) = (self.parents.nrows(), self.parents.ncols());
        let m = settings.inducing_points.clamp(1, n);
        let (lo, hi) = settings.initial_precision;
        let lambda = rng.random_range(lo..hi);
        let mut theta = Vec::with_capacity(p + 1);
        for d in 0..p {
            theta.push(if d == 0 {
                lambda
            } else {
                rng.random_range(lo..hi)
            });
        }
        theta.push(if p == 0 { lambda } else { 3.0 * lambda });
        let kappa: f64 = rng.random_range(10.0..100.0);
        let noise_variance = self.noise_floor + 1.0 / (kappa * kappa);
        let use_gp = p > 0
            && match settings.gp_initialisation {
                GpInitialisation::Never => false,
                GpInitialisation::Always => true,
                GpInitialisation::CoinFlip => rng.random_bool(0.5),
            };

        let mut z = DMatrix::zeros(m, p + 1);
        if p == 1 {
            let col = self.parents.column(0);
            let (lo, hi) = (col.min(), col.max());
            for i in 0..m {
                let t = if m == 1 {
                    0.0
                } else {
                    i as f64 / (m - 1) as f64
                };
                z[(i, 0)] = lo + t * (hi - lo);
            }
        } else if p > 1 {
            let rows = rand::seq::index::sample(rng, n, m);
            for (i, r) in rows.iter().enumerate() {
                for d in 0..p {
                    z[(i, d)] = self.parents[(r, d)];
                }
            }
        }
        for i in 0..m {
            z[(i, p)] = rng.sample(StandardNormal);
        }
        let scale = if p == 0 { 0.1 } else { 0.01 };
        let free = FreeLatents::new(self.y.as_slice(), scale, rng);
        let all: Vec<usize> = (0..n).collect();
        let (mean, variance) = free.posterior(&all);
        let mut params = CollapsedParams {
            kernel: Kernel::se_plus_linear(vec![1.0; p + 1], 1.0, theta),
            noise_variance,
            z,
            latent: Some(LatentPosterior { mean, variance }),
        };
        let mut start = None;
        let gp_initialised = if p == 0 {
            settings.gp_initialisation != GpInitialisation::Never
                && self.normal_score_start(&mut params)
        } else if use_gp {
            let (used, stats) = self.gp_regression_start(&mut params, settings, rng);
            start = stats;
            used
        } else {
            false
        };
        (params, gp_initialised, start)
    }

    /// The data-dependent start of a marginal (root) model, whose only input is w: q(w_n) is
    /// centred on the normal score of y_n, μ_n = Φ⁻¹((rank_n + ½)/N), with variance 0.01, and the
    /// latent precision is 1. Then y ≈ f(w) with f the smooth monotone map Q_y ∘ Φ, which the SE +
    /// linear kernel represents at unit lengthscale. (The random start, precisions 1–100 and
    /// μ = 0.1·y, ends at the Gaussian noise model in every fit we measured, and that value is the
    /// same for every standardised variable, so it cannot tell directions apart; BENCHMARKS.md.)
    fn normal_score_start(&self, params: &mut CollapsedParams) -> bool {
        let n = self.y.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| self.y[a].total_cmp(&self.y[b]));
        let mut mean = DVector::zeros(n);
        for (rank, &row) in order.iter().enumerate() {
            mean[row] = inverse_normal_cdf((rank as f64 + 0.5) / n as f64);
        }
        params.latent = Some(LatentPosterior {
            mean,
            variance: DVector::from_element(n, 0.01),
        });
        params.kernel.stationary[0].precision[0] = 1.0;
        true
    }

    /// [B]'s GP initialisation of a conditional: fits the SE + linear kernel on the parents and
    /// φ² by L-BFGS on the SGPR bound (inducing inputs = the parent columns of `params.z`, fixed),
    /// then sets μ = y − E[f(x)], θ = [θ*, 3θ*_0], v = [v*, v*_0], sf2 = sf2*, φ² = φ²*. Returns
    /// whether it succeeded (on failure `params` is left as drawn) and how its L-BFGS run went.
    fn gp_regression_start(
        &self,
        params: &mut CollapsedParams,
        settings: &FitSettings,
        rng: &mut impl Rng,
    ) -> (bool, Option<StageStats>) {
        let p = self.parents.ncols();
        let se = &params.kernel.stationary[0];
        let start = CollapsedParams {
            kernel: Kernel::se_plus_linear(vec![1.0; p], se.variance, se.precision[..p].to_vec()),
            noise_variance: params.noise_variance,
            z: params.z.columns(0, p).into_owned(),
            latent: None,
        };
        let declared = KernelAndNoise::declare(&start.kernel, self.noise_floor);
        let store = &declared.store;
        let unpack = |raw: &[f64]| -> CollapsedParams {
            let (kernel, noise_variance) = declared.read(&start.kernel, &store.unpack(raw));
            CollapsedParams {
                kernel,
                noise_variance,
                ..start.clone()
            }
        };
        let jitter = settings.jitter.initial;
        let negated = |raw: &[f64]| -> Result<(f64, Vec<f64>), std::convert::Infallible> {
            match collapsed_bound_with_grad(&self.parents, &self.y, &unpack(raw), jitter) {
                Ok((f, g)) => {
                    let mut minus: Vec<f64> = g.kernel.to_vec().iter().map(|v| -v).collect();
                    minus.push(-g.noise_variance);
                    Ok((-f, store.chain(raw, &minus)))
                }
                Err(_) => Ok((f64::NAN, vec![f64::NAN; raw.len()])),
            }
        };
        let mut values = start.kernel.params_to_vec();
        values.push(start.noise_variance);
        let raw0 = store.pack(&values);
        let Ok(report) = minimize(negated, &raw0, &settings.start_lbfgs()) else {
            return (false, None);
        };
        let stats = Some(StageStats {
            iterations: report.iterations,
            evaluations: report.evaluations,
            stop: report.stop,
        });
        let fitted = unpack(&report.x);
        let Ok(f_mean) = posterior_mean_at_data(&self.parents, &self.y, &fitted, jitter) else {
            return (false, stats);
        };
        let k = &fitted.kernel;
        let (se, lin) = (&k.stationary[0], k.linear.as_ref().expect("SE + linear"));
        let usable = |v: f64| v > 0.0 && v.is_finite();
        if !(se.precision.iter().chain(lin).all(|&v| usable(v)) && usable(se.variance))
            || f_mean.iter().any(|v| !v.is_finite())
        {
            return (false, stats);
        }
        match settings.latent_start {
            LatentStart::Residual | LatentStart::Off => {
                let mut theta = se.precision.clone();
                theta.push(3.0 * se.precision[0]);
                let mut v = lin.clone();
                v.push(lin[0]);
                let sf2 = se.variance.max(settings.min_start_se_variance);
                params.kernel = Kernel::se_plus_linear(v, sf2, theta);
                params.noise_variance = fitted.noise_variance.max(2.0 * self.noise_floor);
                if let Some(q) = params.latent.as_mut() {
                    q.mean = &self.y - f_mean;
                }
                // The w-off start is the residual start with w switched off: one definition.
                if settings.latent_start == LatentStart::Off {
                    *params = self.with_latent_off(params);
                }
            }
            LatentStart::Explained | LatentStart::Shared => {
                let residual = &self.y - f_mean;
                let n = residual.len() as f64;
                let kappa: f64 = rng.random_range(50.0..100.0);
                let spread = residual.norm_squared() / n;
                let (phi2, v_w) = if settings.latent_start == LatentStart::Shared {
                    let phi2 =
                        ((1.0 - SHARED_LATENT_FRACTION) * spread).max(2.0 * self.noise_floor);
                    (phi2, (SHARED_LATENT_FRACTION * spread).max(phi2))
                } else {
                    let phi2 = self.noise_floor + 1.0 / (kappa * kappa);
                    (phi2, spread.max(phi2))
                };
                let mut theta = se.precision.clone();
                theta.push(params.kernel.stationary[0].precision[p]);
                let mut v = lin.clone();
                v.push(v_w);
                let sf2 = se.variance.max(settings.min_start_se_variance);
                params.kernel = Kernel::se_plus_linear(v, sf2, theta);
                params.noise_variance = phi2;
                let shrink = v_w.sqrt() / (v_w + phi2);
                let variance = (phi2 / (v_w + phi2)).max(2.0 * LATENT_VARIANCE_FLOOR);
                params.latent = Some(LatentPosterior {
                    mean: residual * shrink,
                    variance: DVector::from_element(self.y.len(), variance),
                });
            }
        }
        (true, stats)
    }

    /// Fits from the given initial parameters: Adam on −F until F > F_noise (at most
    /// `adam_steps`), then L-BFGS; on a factorisation failure or a non-finite bound (during Adam or
    /// at L-BFGS's start) the fit restarts from `initial` one rung up `settings.jitter`.
    pub fn fit_from(
        &self,
        initial: CollapsedParams,
        settings: &FitSettings,
    ) -> Result<CollapsedFit, FitError> {
        ready(self.fit_from_awaiting(initial, settings, None))
    }

    /// [`CollapsedModel::fit_from`] with Ψ2's sums from `awaited` when one is given.
    pub async fn fit_from_awaiting(
        &self,
        initial: CollapsedParams,
        settings: &FitSettings,
        awaited: Option<&dyn AwaitedPsi2>,
    ) -> Result<CollapsedFit, FitError> {
        check_settings(settings)?;
        let layout = CollapsedLayout::new(self, &initial)?;
        let raw0 = layout.pack(&initial);
        let mut last = None;
        for (attempt, jitter) in settings.jitter.ladder().enumerate() {
            match self
                .attempt(&layout, &raw0, settings, jitter, awaited)
                .await
            {
                Ok(mut fit) => {
                    fit.attempts = attempt + 1;
                    return Ok(fit);
                }
                Err(
                    e @ (CollapsedError::InducingCovariance(_)
                    | CollapsedError::InnerCovariance(_)
                    | CollapsedError::NonFinite { .. }),
                ) => last = Some((jitter, attempt + 1, e)),
                Err(CollapsedError::Interrupted) => return Err(FitError::Interrupted),
                Err(e) => return Err(FitError::Bound(e)),
            }
        }
        let (jitter, attempts, source) =
            last.expect("a jitter ladder has at least one rung, and each failed");
        Err(FitError::JitterExhausted {
            jitter,
            attempts,
            source,
        })
    }

    /// One attempt at a fixed jitter (Ψ2's sums from `awaited` when one is given, else from the
    /// model's blocking device or here).
    async fn attempt(
        &self,
        layout: &CollapsedLayout,
        raw0: &[f64],
        settings: &FitSettings,
        jitter: f64,
        awaited: Option<&dyn AwaitedPsi2>,
    ) -> Result<CollapsedFit, CollapsedError> {
        let objective = async |raw: &[f64]| -> Result<(f64, Vec<f64>), CollapsedError> {
            let params = layout.unpack(raw);
            let (f, g) = match awaited {
                Some(device) => {
                    bound_with_grad_awaited(&self.parents, &self.y, &params, jitter, device).await?
                }
                None => collapsed_bound_with_grad_on(
                    &self.parents,
                    &self.y,
                    &params,
                    jitter,
                    1.0,
                    self.device,
                )?,
            };
            Ok((f, layout.raw_gradient(raw, &g)))
        };

        let mut raw = raw0.to_vec();
        let mut adam = Adam::new(
            raw.len(),
            AdamSettings {
                learning_rate: settings.adam_learning_rate,
                ..AdamSettings::default()
            },
        );
        let mut adam_steps = 0;
        let mut adam_beat_noise = false;
        let mut start_bound = f64::NAN;
        for step in 0..settings.adam_steps {
            let (f, g) = objective(&raw).await?;
            if step == 0 {
                start_bound = f;
            }
            if f > self.noise_value {
                adam_beat_noise = true;
                break;
            }
            let descent: Vec<f64> = g.iter().map(|v| -v).collect();
            adam.step(&mut raw, &descent);
            adam_steps += 1;
        }

        // L-BFGS minimises −F; a failed evaluation is a non-finite trial (the line search shrinks),
        // remembered in case it happens at the starting point.
        let last_error = RefCell::new(None);
        let negated = async |r: &[f64]| -> Result<(f64, Vec<f64>), std::convert::Infallible> {
            match objective(r).await {
                Ok((f, g)) => Ok((-f, g.into_iter().map(|v| -v).collect())),
                Err(e) => {
                    *last_error.borrow_mut() = Some(e);
                    Ok((f64::NAN, vec![f64::NAN; r.len()]))
                }
            }
        };
        let report = minimize_awaiting(negated, &raw, &settings.lbfgs).await;
        // A stop makes every later evaluation fail, which L-BFGS would read as a line search
        // that found nothing better and end "converged": what it reached is no optimum.
        if last_error.borrow().as_ref() == Some(&CollapsedError::Interrupted) {
            return Err(CollapsedError::Interrupted);
        }
        let report = match report {
            Ok(report) => report,
            Err(LbfgsError::NonFiniteStart { value }) => {
                return Err(last_error
                    .into_inner()
                    .unwrap_or(CollapsedError::NonFinite { value }))
            }
            Err(LbfgsError::GradientLength { expected, got }) => {
                return Err(CollapsedError::Shape(format!(
                    "gradient of length {got} for {expected} parameters"
                )))
            }
            Err(LbfgsError::Objective(never)) => match never {},
        };
        let bound = -report.value;
        if !bound.is_finite() {
            return Err(CollapsedError::NonFinite { value: bound });
        }
        let lbfgs_trace: Vec<f64> = report.trace.iter().map(|v| -v).collect();
        let adam_bound = lbfgs_trace[0];
        if start_bound.is_nan() {
            start_bound = adam_bound;
        }
        Ok(CollapsedFit {
            bound,
            noise_value: self.noise_value,
            params: layout.unpack(&report.x),
            jitter,
            attempts: 1,
            adam_steps,
            adam_beat_noise,
            gp_initialised: false,
            lbfgs_iterations: report.iterations,
            lbfgs_evaluations: report.evaluations,
            stop: report.stop,
            start: None,
            start_bound,
            adam_bound,
            lbfgs_trace,
        })
    }
}

#[cfg(test)]
mod tests;
