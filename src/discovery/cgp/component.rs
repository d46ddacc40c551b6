//! One variable of the continuous search: the collapsed GP-CDE of x_i given its candidate parents
//! (MODEL.md §4 with the CGP-CDE's graph parameters of §5.1), trained by Adam.
//!
//! Owns: the variable's unconstrained parameter vector (laid out as the collapsed fit's), its Adam
//! state and the values its edge hyperparameters started from (for the re-initialisation of §5.4).
//! It holds no copy of the data: every evaluation reads its column and its candidate parents'
//! columns from the data matrix it is given, so a variable travels to another thread or worker as
//! its parameters alone.
//!
//! The dependence of x_i on parent j is A_ij = θ^lin_ij + θ^se_ij (the collapsed bound's kernel is
//! SE + linear, so these are the two kinds that switch input j on).

use nalgebra::{DMatrix, DVector};
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::gp::adam::{Adam, AdamSettings};
use crate::gp::collapsed::fit::CollapsedLayout;
use crate::gp::collapsed::{
    collapsed_bound_with_grad_on, CollapsedError, CollapsedModel, CollapsedParams, FitError,
    FitSettings, Psi2Device,
};
use crate::gp::device::DeviceError;
use crate::gp::kernel::Kernel;
use crate::gp::lbfgs::{minimize, LbfgsSettings};

/// How the collapsed bound of the rows used stands for all N rows when only a subset is fitted
/// (r = N / rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubsetScaling {
    /// r·F: the whole bound, complexity term included, multiplied by r (minibatch-style).
    #[default]
    ScaleBound,
    /// The bound of r copies of every row (`collapsed_bound_with_grad_on`): the data-fit
    /// terms grow r-fold, the complexity term only like log r.
    CountRows,
}

/// What the bound of a row subset is multiplied or counted by: `factor` = r = N / rows.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RowWeight {
    pub factor: f64,
    pub scaling: SubsetScaling,
}

impl RowWeight {
    /// Every row counted once (the rows used are the whole data set).
    pub const ONE: RowWeight = RowWeight {
        factor: 1.0,
        scaling: SubsetScaling::ScaleBound,
    };
}

/// The Gamma(1, 10) prior's rate: log p(θ) = log 10 − 10 θ per graph hyperparameter (§5.2).
pub const PRIOR_RATE: f64 = 10.0;

/// What the latent input w of one variable's model does, for the record: where q(w_n) stays at the
/// prior N(0, 1) (posterior variance ≈ 1, mean square ≈ 0) w explains nothing and the model is
/// the additive-noise one; the further the mean posterior variance falls below 1, the more of each
/// row's value w accounts for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LatentRecord {
    /// The modelled column i.
    pub child: usize,
    /// φ².
    pub noise_variance: f64,
    /// The linear kernel's variance on w.
    pub latent_linear: f64,
    /// The SE kernel's precision on w.
    pub latent_precision: f64,
    /// The SE kernel's variance (shared by all inputs).
    pub se_variance: f64,
    /// (1/N) Σ_n s_n: the mean variance of q(w_n) (1 = the prior).
    pub posterior_variance: f64,
    /// (1/N) Σ_n μ_n².
    pub posterior_mean_square: f64,
}

/// One modelled variable x_i with its candidate parents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Component {
    child: usize,
    parents: Vec<usize>,
    /// Rows of the data it is fitted to (q(w) has one entry per row).
    rows_used: usize,
    noise_floor: f64,
    m: usize,
    raw: Vec<f64>,
    adam: Adam,
    /// (θ^lin, θ^se) of each parent when this restart began.
    initial_theta: Vec<(f64, f64)>,
    /// r = N_total / N_rows and how the bound of the rows used stands for the whole data set, so
    /// the prior and the penalty weigh against the evidence of all rows (§5.4).
    rows: RowWeight,
}

impl Component {
    /// Initialises x_`child` given `parents` (columns of `data`, rows = the rows used) as the
    /// collapsed fit does (`init`, normally with the GP-regression start), with φ² ≥ `noise_floor`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        data: &DMatrix<f64>,
        child: usize,
        parents: &[usize],
        init: &FitSettings,
        noise_floor: f64,
        rows: RowWeight,
        adam: AdamSettings,
        rng: &mut impl Rng,
    ) -> Result<Self, FitError> {
        let n = data.nrows();
        let x = DMatrix::from_fn(n, parents.len(), |r, k| data[(r, parents[k])]);
        let y = data.column(child).into_owned();
        let model = CollapsedModel::with_noise_floor(x, y, noise_floor)?;
        let params = model.initial_params(init, rng);
        let m = params.z.nrows();
        let layout = CollapsedLayout::for_shape(&params.kernel, noise_floor, m, n);
        let raw = layout.pack(&params);
        let lin = params.kernel.linear.as_ref().expect("SE + linear");
        let se = &params.kernel.stationary[0].precision;
        let initial_theta = (0..parents.len()).map(|k| (lin[k], se[k])).collect();
        Ok(Self {
            child,
            parents: parents.to_vec(),
            rows_used: n,
            noise_floor,
            m,
            adam: Adam::new(raw.len(), adam),
            raw,
            initial_theta,
            rows,
        })
    }

    /// The modelled column i.
    pub fn child(&self) -> usize {
        self.child
    }

    /// The candidate parents still in the model.
    pub fn parents(&self) -> &[usize] {
        &self.parents
    }

    fn layout(&self) -> CollapsedLayout {
        let d = self.parents.len() + 1;
        let template = Kernel::se_plus_linear(vec![0.0; d], 0.0, vec![0.0; d]);
        CollapsedLayout::for_shape(&template, self.noise_floor, self.m, self.rows_used)
    }

    /// For each candidate parent k, the flat indices of θ^lin and θ^se (the entries of input k
    /// in the layout's per-input blocks) and their values.
    fn thetas(&self) -> Vec<[(usize, f64); 2]> {
        let layout = self.layout();
        let store = layout.store();
        let entry = |i: usize| (i, store.transform_at(i).value(self.raw[i]));
        (0..self.parents.len())
            .map(|k| match store.input_indices(k)[..] {
                [linear, se] => [entry(linear), entry(se)],
                ref other => unreachable!(
                    "an SE + linear kernel switches an input by 2 entries, not {other:?}"
                ),
            })
            .collect()
    }

    /// The current parameters in constrained form.
    pub fn params(&self) -> CollapsedParams {
        self.layout().unpack(&self.raw)
    }

    /// (j, A_ij = θ^lin_ij + θ^se_ij) for every candidate parent j.
    pub fn dependence(&self) -> Vec<(usize, f64)> {
        self.parents
            .iter()
            .zip(self.thetas())
            .map(|(&j, [(_, linear), (_, se)])| (j, linear + se))
            .collect()
    }

    /// (j, θ^lin_ij, θ^se_ij) for every candidate parent j.
    pub fn edge_hyperparameters(&self) -> Vec<(usize, f64, f64)> {
        self.parents
            .iter()
            .zip(self.thetas())
            .map(|(&j, [(_, linear), (_, se)])| (j, linear, se))
            .collect()
    }

    /// Σ over candidate parents of log p(θ^lin) + log p(θ^se) = Σ (2 log 10 − 10 (θ^lin + θ^se)).
    pub fn log_prior(&self) -> f64 {
        self.dependence()
            .iter()
            .map(|(_, a)| 2.0 * PRIOR_RATE.ln() - PRIOR_RATE * a)
            .sum()
    }

    /// Its inputs (the candidate parents' columns, N × |pa|) and target (its own column) in
    /// `data`, which must have the rows it was fitted to.
    fn columns(&self, data: &DMatrix<f64>) -> Result<(DMatrix<f64>, DVector<f64>), CollapsedError> {
        let fits = data.nrows() == self.rows_used
            && self.child < data.ncols()
            && self.parents.iter().all(|&j| j < data.ncols());
        if !fits {
            return Err(CollapsedError::Shape(format!(
                "variable {} was fitted to {} rows, the data given has {} × {}",
                self.child,
                self.rows_used,
                data.nrows(),
                data.ncols()
            )));
        }
        let x = DMatrix::from_fn(self.rows_used, self.parents.len(), |r, k| {
            data[(r, self.parents[k])]
        });
        Ok((x, data.column(self.child).into_owned()))
    }

    /// The bound standing for all rows and its gradient with respect to the flat unconstrained
    /// parameters, at jitter ε, on the rows of `data`: r·F (`ScaleBound`) or the bound of r copies
    /// of each row (`CountRows`), r = N_total / N_rows.
    pub fn evaluate(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
    ) -> Result<(f64, Vec<f64>), CollapsedError> {
        self.evaluate_with(data, jitter, None)
    }

    /// (N, M) of its Ψ2 (rows used, inducing points): N·M² is the work a device would take over.
    pub fn psi2_shape(&self) -> (usize, usize) {
        (self.rows_used, self.m)
    }

    /// [`Self::evaluate`] with Ψ2's O(N M²) sums on `device` when one is given.
    pub fn evaluate_with(
        &self,
        data: &DMatrix<f64>,
        jitter: f64,
        device: Option<&dyn Psi2Device>,
    ) -> Result<(f64, Vec<f64>), CollapsedError> {
        let (x, y) = self.columns(data)?;
        self.evaluate_on(&x, &y, jitter, device)
    }

    fn evaluate_on(
        &self,
        x: &DMatrix<f64>,
        y: &DVector<f64>,
        jitter: f64,
        device: Option<&dyn Psi2Device>,
    ) -> Result<(f64, Vec<f64>), CollapsedError> {
        let layout = self.layout();
        let params = layout.unpack(&self.raw);
        let (copies, multiplier) = match self.rows.scaling {
            SubsetScaling::ScaleBound => (1.0, self.rows.factor),
            SubsetScaling::CountRows => (self.rows.factor, 1.0),
        };
        let (f, g) = collapsed_bound_with_grad_on(x, y, &params, jitter, copies, device)?;
        if !f.is_finite() {
            return Err(CollapsedError::NonFinite { value: f });
        }
        let mut grad = layout.raw_gradient(&self.raw, &g);
        grad.iter_mut().for_each(|v| *v *= multiplier);
        Ok((f * multiplier, grad))
    }

    /// Adds ∂/∂θ_ij = `d_theta[k]` for the k-th parent, to both kinds, into the flat gradient
    /// `grad` (chain rule through each entry's transform).
    pub fn add_edge_gradient(&self, grad: &mut [f64], d_theta: &[f64]) {
        let layout = self.layout();
        let store = layout.store();
        for (k, &d) in d_theta.iter().enumerate() {
            for i in store.input_indices(k) {
                grad[i] += d * store.transform_at(i).derivative(self.raw[i]);
            }
        }
    }

    /// One Adam step uphill on the objective whose gradient is `grad`.
    pub fn ascend(&mut self, grad: &[f64]) {
        let descent: Vec<f64> = grad.iter().map(|g| -g).collect();
        self.adam.step(&mut self.raw, &descent);
    }

    /// Multiplies the Adam learning rate by `factor`.
    pub fn scale_learning_rate(&mut self, factor: f64) {
        self.adam.settings.learning_rate *= factor;
    }

    /// The Adam learning rate now.
    pub fn learning_rate(&self) -> f64 {
        self.adam.settings.learning_rate
    }

    /// Keeps only the parents in `keep` (a subset of the candidates), resets their θ^lin and θ^se
    /// to the values this restart started from (§5.4 re-initialisation), keeps every other
    /// parameter (latent precision and variance, s, φ², Z's remaining columns, q(w)), and starts
    /// Adam afresh (the parameter vector changes shape, so old moments no longer line up).
    pub fn restrict_parents(&mut self, keep: &[usize]) {
        self.keep_parents(keep, true);
    }

    /// A copy of this variable without parent `j`, every other parameter at its current value
    /// (for testing the edge j → i by evidence).
    pub fn without_parent(&self, j: usize) -> Self {
        let keep: Vec<usize> = self.parents.iter().copied().filter(|&p| p != j).collect();
        let mut copy = self.clone();
        copy.keep_parents(&keep, false);
        copy
    }

    /// This variable's own part of the objective: the bound standing for all rows + Σ over its candidate parents of
    /// log p(θ^lin) + log p(θ^se).
    pub fn objective(&self, data: &DMatrix<f64>, jitter: f64) -> Result<f64, CollapsedError> {
        Ok(self.evaluate(data, jitter)?.0 + self.log_prior())
    }

    /// Maximises [`Component::objective`] over every parameter of this variable by L-BFGS from the
    /// current point (at most `iterations` steps; a failed evaluation counts as a step too long)
    /// and keeps the result; returns the objective reached.
    pub fn refine(
        &mut self,
        data: &DMatrix<f64>,
        jitter: f64,
        iterations: usize,
    ) -> Result<f64, CollapsedError> {
        self.refine_on(data, jitter, iterations, None)
    }

    /// [`Component::refine`] with Ψ2's O(N M²) sums on `device` when one is given. A device
    /// failure ends the fit with [`CollapsedError::Device`] and leaves this variable as it was
    /// (so the caller can fit it again without the device).
    pub fn refine_on(
        &mut self,
        data: &DMatrix<f64>,
        jitter: f64,
        iterations: usize,
        device: Option<&dyn Psi2Device>,
    ) -> Result<f64, CollapsedError> {
        let (x, y) = self.columns(data)?;
        let device_failure = std::cell::RefCell::new(None::<DeviceError>);
        let negated = |raw: &[f64]| -> Result<(f64, Vec<f64>), std::convert::Infallible> {
            let mut probe = self.clone();
            probe.raw.copy_from_slice(raw);
            match probe.evaluate_on(&x, &y, jitter, device) {
                Ok((f, mut g)) => {
                    let d_theta = vec![-PRIOR_RATE; probe.parents.len()];
                    probe.add_edge_gradient(&mut g, &d_theta);
                    let value = f + probe.log_prior();
                    Ok((-value, g.into_iter().map(|v| -v).collect()))
                }
                Err(CollapsedError::Device(why)) => {
                    device_failure.borrow_mut().get_or_insert(why);
                    Ok((f64::NAN, vec![f64::NAN; raw.len()]))
                }
                Err(_) => Ok((f64::NAN, vec![f64::NAN; raw.len()])),
            }
        };
        let settings = LbfgsSettings {
            max_iterations: iterations,
            ..LbfgsSettings::default()
        };
        let report = minimize(negated, &self.raw, &settings);
        if let Some(why) = device_failure.into_inner() {
            return Err(CollapsedError::Device(why));
        }
        match report {
            Ok(report) if report.value.is_finite() => {
                self.raw = report.x;
                Ok(-report.value)
            }
            Ok(report) => Err(CollapsedError::NonFinite {
                value: -report.value,
            }),
            Err(_) => self.objective(data, jitter),
        }
    }

    /// Keeps only the parents in `keep`; with `reset` their θ^lin and θ^se return to this
    /// restart's starting values, otherwise they keep their current values.
    fn keep_parents(&mut self, keep: &[usize], reset: bool) {
        let old = self.params();
        let kept: Vec<usize> = (0..self.parents.len())
            .filter(|&k| keep.contains(&self.parents[k]))
            .collect();
        let d_old = self.parents.len() + 1;
        let mut columns: Vec<usize> = kept.clone();
        columns.push(d_old - 1);
        let lin_old = old.kernel.linear.as_ref().expect("SE + linear");
        let se_old = &old.kernel.stationary[0];
        let lin: Vec<f64> = columns
            .iter()
            .map(|&c| {
                if c + 1 == d_old || !reset {
                    lin_old[c]
                } else {
                    self.initial_theta[c].0
                }
            })
            .collect();
        let prec: Vec<f64> = columns
            .iter()
            .map(|&c| {
                if c + 1 == d_old || !reset {
                    se_old.precision[c]
                } else {
                    self.initial_theta[c].1
                }
            })
            .collect();
        let z = DMatrix::from_fn(old.z.nrows(), columns.len(), |r, k| old.z[(r, columns[k])]);
        let params = CollapsedParams {
            kernel: Kernel::se_plus_linear(lin, se_old.variance, prec),
            noise_variance: old.noise_variance,
            z,
            latent: old.latent,
        };
        self.initial_theta = kept.iter().map(|&k| self.initial_theta[k]).collect();
        self.parents = kept.iter().map(|&k| self.parents[k]).collect();
        self.raw = self.layout().pack(&params);
        self.adam = Adam::new(self.raw.len(), self.adam.settings);
    }

    /// What the latent input w does in this variable's model now (see [`LatentRecord`]).
    pub fn latent_record(&self) -> LatentRecord {
        let p = self.params();
        let d = self.parents.len();
        let lin = p.kernel.linear.as_ref().expect("SE + linear");
        let se = &p.kernel.stationary[0];
        let (mean_var, mean_sq) = p.latent.as_ref().map_or((1.0, 0.0), |q| {
            let n = q.mean.len().max(1) as f64;
            (q.variance.sum() / n, q.mean.norm_squared() / n)
        });
        LatentRecord {
            child: self.child,
            noise_variance: p.noise_variance,
            latent_linear: lin[d],
            latent_precision: se.precision[d],
            se_variance: se.variance,
            posterior_variance: mean_var,
            posterior_mean_square: mean_sq,
        }
    }

    /// The flat unconstrained parameters.
    pub fn raw(&self) -> &[f64] {
        &self.raw
    }

    /// Replaces the flat unconstrained parameters (same length; for checks by finite differences).
    pub fn set_raw(&mut self, raw: &[f64]) {
        assert_eq!(raw.len(), self.raw.len(), "parameter vector length");
        self.raw.copy_from_slice(raw);
    }

    /// The flat parameters and Adam state, to undo a step.
    pub fn checkpoint(&self) -> (Vec<f64>, Adam) {
        (self.raw.clone(), self.adam.clone())
    }

    /// Restores a [`Component::checkpoint`] (keeping the current learning rate).
    pub fn restore(&mut self, (raw, adam): (Vec<f64>, Adam)) {
        let lr = self.adam.settings.learning_rate;
        self.raw = raw;
        self.adam = adam;
        self.adam.settings.learning_rate = lr;
    }
}
