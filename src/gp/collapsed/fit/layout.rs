//! The flat unconstrained vector the optimisers see and how it maps to the model's parameters.

use super::*;

/// The flat unconstrained vector the optimisers see, declared as a [`ParamStore`]:
/// `kernel.*` (every kernel hyperparameter, positive, in `Kernel::params_to_vec` order),
/// `noise` (φ² above its floor), `z` (Z column-major), `latent.mean` (μ) and `latent.variance`
/// (s above [`LATENT_VARIANCE_FLOOR`]).
pub(crate) struct CollapsedLayout {
    /// The kernel's shape (kinds, mask, dimension); its values come from the vector.
    kernel_template: Kernel,
    kernel_and_noise: KernelAndNoise,
    z: ParamBlock,
    latent_mean: ParamBlock,
    latent_variance: ParamBlock,
    m: usize,
    dim: usize,
    n: usize,
}

/// The store of a kernel and a noise variance above its floor, with their handles: the first
/// blocks of every collapsed model's vector, and the whole of a GP-regression start's.
pub(super) struct KernelAndNoise {
    pub(super) store: ParamStore,
    /// Every kernel hyperparameter (`kernel.*`).
    pub(super) kernel: ParamBlock,
    /// φ².
    pub(super) noise: ParamBlock,
}

impl KernelAndNoise {
    /// A new store holding `kernel`'s hyperparameters (positive), then φ² ≥ `noise_floor`.
    pub(super) fn declare(kernel: &Kernel, noise_floor: f64) -> Self {
        let mut store = ParamStore::new();
        let kernel = kernel.declare_params(&mut store, "kernel.").all;
        let noise = store.add("noise", 1, Transform::Positive { floor: noise_floor });
        Self {
            store,
            kernel,
            noise,
        }
    }

    /// The kernel (shaped as `template`) and φ² read from the constrained values `values`.
    pub(super) fn read(&self, template: &Kernel, values: &[f64]) -> (Kernel, f64) {
        let mut kernel = template.clone();
        kernel.set_params_from_slice(&values[self.kernel.range()]);
        (kernel, values[self.noise.first()])
    }
}

impl CollapsedLayout {
    /// Checks that `p` is a latent SE + linear model of this data with values inside the
    /// transforms' ranges.
    pub(super) fn new(model: &CollapsedModel, p: &CollapsedParams) -> Result<Self, FitError> {
        let bad = |msg: String| Err(FitError::InvalidInitial(msg));
        let (n, dim) = (model.rows(), model.parents.ncols() + 1);
        let k = &p.kernel;
        let se_ok =
            matches!(k.stationary.as_slice(), [s] if s.kind == StationaryKind::SquaredExponential);
        if !se_ok || k.linear.is_none() || k.dim() != dim || k.mask.iter().any(|&e| e != 1.0) {
            return bad(format!(
                "the kernel must be SE + linear on {dim} unmasked inputs (parents, then w)"
            ));
        }
        if k.params_to_vec()
            .iter()
            .any(|&v| !(v > 0.0 && v.is_finite()))
        {
            return bad("every kernel variance and precision must be positive and finite".into());
        }
        let floor = model.noise_floor;
        if !(p.noise_variance > floor && p.noise_variance.is_finite()) {
            return bad(format!("the noise variance must exceed its floor {floor}"));
        }
        if p.z.ncols() != dim || p.z.nrows() == 0 || p.z.iter().any(|v| !v.is_finite()) {
            return bad(format!("Z must be M × {dim} (M ≥ 1) and finite"));
        }
        let Some(q) = &p.latent else {
            return bad("the model needs q(w)".into());
        };
        if q.mean.len() != n || q.variance.len() != n {
            return bad(format!("q(w) must have {n} means and variances"));
        }
        if q.mean.iter().any(|v| !v.is_finite())
            || q.variance
                .iter()
                .any(|&s| !(s > LATENT_VARIANCE_FLOOR && s.is_finite()))
        {
            return bad(format!(
                "q(w) means must be finite and variances above {LATENT_VARIANCE_FLOOR}"
            ));
        }
        Ok(Self::for_shape(k, floor, p.z.nrows(), n))
    }

    /// The layout of a latent SE + linear model with `kernel`'s shape (its values are not used),
    /// φ² ≥ `noise_floor`, M inducing points and N rows. No checks: the caller vouches for them.
    pub(crate) fn for_shape(kernel: &Kernel, noise_floor: f64, m: usize, n: usize) -> Self {
        let dim = kernel.dim();
        let mut kernel_and_noise = KernelAndNoise::declare(kernel, noise_floor);
        let z = kernel_and_noise
            .store
            .add("z", m * dim, Transform::Identity);
        let latent_mean = kernel_and_noise
            .store
            .add("latent.mean", n, Transform::Identity);
        let latent_variance = kernel_and_noise.store.add(
            "latent.variance",
            n,
            Transform::Positive {
                floor: LATENT_VARIANCE_FLOOR,
            },
        );
        Self {
            kernel_template: kernel.clone(),
            kernel_and_noise,
            z,
            latent_mean,
            latent_variance,
            m,
            dim,
            n,
        }
    }

    /// The model's parameter store.
    pub(crate) fn store(&self) -> &ParamStore {
        &self.kernel_and_noise.store
    }

    pub(crate) fn pack(&self, p: &CollapsedParams) -> Vec<f64> {
        let q = p.latent.as_ref().expect("checked by CollapsedLayout::new");
        let mut values = p.kernel.params_to_vec();
        values.push(p.noise_variance);
        values.extend_from_slice(p.z.as_slice());
        values.extend(q.mean.iter());
        values.extend(q.variance.iter());
        self.store().pack(&values)
    }

    pub(crate) fn unpack(&self, raw: &[f64]) -> CollapsedParams {
        let values = self.store().unpack(raw);
        let at = |block: ParamBlock| &values[block.range()];
        let (kernel, noise_variance) = self.kernel_and_noise.read(&self.kernel_template, &values);
        CollapsedParams {
            kernel,
            noise_variance,
            z: DMatrix::from_column_slice(self.m, self.dim, at(self.z)),
            latent: Some(LatentPosterior {
                mean: DVector::from_column_slice(at(self.latent_mean)),
                variance: DVector::from_column_slice(at(self.latent_variance)),
            }),
        }
    }

    /// ∂F/∂raw: the constrained gradient through the store's chain rule.
    pub(crate) fn raw_gradient(&self, raw: &[f64], g: &CollapsedGrad) -> Vec<f64> {
        debug_assert_eq!(
            (g.latent_mean.len(), self.n),
            (self.n, g.latent_variance.len())
        );
        let mut values = g.kernel.to_vec();
        values.push(g.noise_variance);
        values.extend_from_slice(g.z.as_slice());
        values.extend(g.latent_mean.iter());
        values.extend(g.latent_variance.iter());
        self.store().chain(raw, &values)
    }
}
