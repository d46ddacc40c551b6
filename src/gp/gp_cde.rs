//! One variable's trainable GP-CDE model ([`GpCdeModel`]): its parameters, their initialisation
//! (MODEL.md §2.4–2.6) and one optimisation step (natural gradient on q(v), then Adam on everything
//! else, §3.5–3.6).
//!
//! A step is split in three so a [`Backend`](crate::runner::Backend) can evaluate many variables
//! (and restarts) in one batch: [`GpCdeModel::prepare`] draws the minibatch noise and q(w)
//! moments, the backend evaluates the bound, [`GpCdeModel::apply`] updates the parameters.

use super::adam::{Adam, AdamSettings, HeldAdamStep};
use super::device::DeviceError;
use super::encoder::{Encoder, EncoderTape, FreeLatents};
use super::kernel::Kernel;
use super::kernel::KernelGrad;
use super::linalg::JitterPolicy;
use super::natgrad::{step_size, InducingPosterior};
use super::params::{ParamBlock, ParamStore, Transform};
use super::resolution::resolution_noise_floor;
use super::svgp::{bound_and_gradient, HeldOutput, LatentBatch, SvgpInput, SvgpOutput, SvgpTerms};
use super::transform::{softplus, softplus_inverse};
use nalgebra::{DMatrix, DVector};
use rand::seq::index::sample;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// How q(w) is represented.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatentKind {
    /// The paper's amortised encoder (CGP-CDE).
    Encoder,
    /// Free per-row (μ_n, Σ_n), as the reference bivariate code.
    Free,
}

/// Sizes and optimiser settings of a variable.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GpCdeSettings {
    /// Inducing points M (capped at the number of rows).
    pub inducing: usize,
    /// Monte Carlo samples S of w per row.
    pub samples: usize,
    pub latent: LatentKind,
    /// Encoder hidden width and depth (the paper: 128 and 5).
    pub encoder_width: usize,
    pub encoder_depth: usize,
    pub adam: AdamSettings,
    pub jitter: JitterPolicy,
}

impl Default for GpCdeSettings {
    /// The paper's sizes (M = 400, S = 50, encoder 5 × 128, Adam lr 0.05).
    fn default() -> Self {
        Self {
            inducing: 400,
            samples: 50,
            latent: LatentKind::Encoder,
            encoder_width: 128,
            encoder_depth: 5,
            adam: AdamSettings::default(),
            jitter: JitterPolicy::default(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Latent {
    Encoder(Encoder),
    Free(FreeLatents),
}

/// The variable's parameter store with the handle of each block ([`GpCdeModel::layout`]).
struct GpCdeLayout {
    store: ParamStore,
    /// Every kernel hyperparameter; first, so its indices are the kernel's own.
    kernel: ParamBlock,
    z: ParamBlock,
    /// φ².
    noise: ParamBlock,
    latent: LatentBlocks,
}

/// q(w)'s blocks: the encoder's weights, or each row's free mean and variance.
#[derive(Clone, Copy)]
enum LatentBlocks {
    Encoder(ParamBlock),
    Free {
        mean: ParamBlock,
        variance: ParamBlock,
    },
}

/// Where q(v)'s latest natural steps are when a device holds it (issue 34: the GPU keeps q(v) and
/// takes its natural step there, so that its M × M statistics never cross to the host).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PosteriorHolding {
    /// The device's name for this variable's q(v) (opaque here).
    pub key: u64,
    /// The natural steps of the q(v) kept here (the copy last read from the device, or the one
    /// the device was given): it is current when this equals the variable's own count.
    pub synced_steps: usize,
}

/// What a device holding a variable keeps of it between iterations (issue 34): q(v), Z and Adam's
/// moments for Z (M × D each), and q(w)'s encoder with its moments when the variable has one,
/// read back to refresh the variable's copy ([`GpCdeModel::with_resident`],
/// [`GpCdeModel::apply_held`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResidentState {
    pub posterior: InducingPosterior,
    pub z: DMatrix<f64>,
    /// Adam's first and second moments of Z.
    pub z_first: DMatrix<f64>,
    pub z_second: DMatrix<f64>,
    /// The encoder's weights ([`Encoder::params_to_vec`]'s order) and Adam's moments of them;
    /// empty for free per-row latents (the host holds those).
    #[serde(default)]
    pub encoder: HeldWeights,
    /// The kernel's raw hyperparameters ([`Kernel::params_to_vec`]'s order) and φ²'s raw number
    /// (last), with Adam's moments of them.
    #[serde(default)]
    pub parameters: HeldWeights,
}

/// A block of weights a device steps with Adam, and Adam's moments of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HeldWeights {
    pub values: Vec<f64>,
    pub first: Vec<f64>,
    pub second: Vec<f64>,
}

/// The variable's own copy of what a device holds ([`ResidentState`]), for the device to take.
#[derive(Debug, Clone)]
pub struct ResidentView<'a> {
    pub posterior: &'a InducingPosterior,
    pub z: &'a DMatrix<f64>,
    /// Adam's moments of Z in Z's (column-major) order.
    pub z_first: &'a [f64],
    pub z_second: &'a [f64],
    /// q(w)'s encoder and Adam's moments of its weights (in [`Encoder::params_to_vec`]'s order),
    /// when q(w) has one.
    pub encoder: Option<&'a Encoder>,
    pub encoder_first: &'a [f64],
    pub encoder_second: &'a [f64],
    /// The raw hyperparameters and φ² with their moments ([`ResidentState::parameters`]).
    pub parameters: HeldWeights,
}

/// A GP-CDE for column `slot` of a data matrix: x_slot = f(x with column `slot` replaced by w) + noise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpCdeModel {
    slot: usize,
    /// Kernel structure and mask; its parameter values are softplus(`kernel_raw`).
    kernel: Kernel,
    kernel_raw: Vec<f64>,
    z: DMatrix<f64>,
    q: InducingPosterior,
    noise_raw: f64,
    /// φ²'s floor: 1e-6, or Δ²/12 for a column recorded at resolution Δ
    /// ([`resolution_noise_floor`]).
    noise_floor: f64,
    latent: Latent,
    adam: Adam,
    samples: usize,
    jitter: JitterPolicy,
    natural_steps: usize,
    /// Set while a device holds q(v) ([`GpCdeModel::apply_held`]); `q` is then the last copy
    /// read from it.
    #[serde(default)]
    holding: Option<PosteriorHolding>,
    /// [`GpCdeModel::parameter_edits`].
    #[serde(default)]
    parameter_edits: u64,
}

/// What [`GpCdeModel::prepare`] drew for one step.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Prepared {
    rows: Vec<usize>,
    x: DMatrix<f64>,
    y: DVector<f64>,
    latent: LatentBatch,
    tape: Option<EncoderTape>,
    total_rows: usize,
    /// q(w)'s moments were not formed here: the device holding the encoder forms them (and
    /// steps the encoder), so `latent`'s μ and Σ are zeros and only its noise is drawn.
    #[serde(default)]
    latent_on_device: bool,
}

/// The bound's gradient with respect to every parameter Adam steps (q(v) has its own step).
struct Gradient<'a> {
    kernel: &'a KernelGrad,
    z: ZGradient<'a>,
    noise: f64,
    latent_mu: &'a DVector<f64>,
    latent_var: &'a DVector<f64>,
}

/// Z's gradient: here for the host's Adam step, or stepped already by the device holding Z, which
/// sent its squared norm (finite exactly when every entry is).
enum ZGradient<'a> {
    Here(&'a DMatrix<f64>),
    Held { norm: f64 },
}

impl Gradient<'_> {
    /// Refuses a step whose bound or gradient is not finite (nothing then changes).
    fn check(&self, bound: f64) -> Result<(), StepError> {
        let z_finite = match self.z {
            ZGradient::Here(z) => z.iter().all(|v| v.is_finite()),
            ZGradient::Held { norm } => norm.is_finite(),
        };
        let finite = bound.is_finite()
            && self.noise.is_finite()
            && self.kernel.to_vec().iter().all(|v| v.is_finite())
            && z_finite
            && self
                .latent_mu
                .iter()
                .chain(self.latent_var.iter())
                .all(|v| v.is_finite());
        if finite {
            Ok(())
        } else {
            Err(StepError::NonFinite(bound))
        }
    }
}

/// The outcome of one step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepReport {
    pub terms: SvgpTerms,
}

/// Why a step was not applied.
#[derive(Debug, Clone, PartialEq, thiserror::Error, serde::Serialize, serde::Deserialize)]
pub enum StepError {
    #[error("the bound could not be evaluated: {0}")]
    Cholesky(#[from] super::linalg::CholeskyError),
    #[error("the bound or its gradient is not finite (bound {0})")]
    NonFinite(#[serde(with = "crate::base::float_text")] f64),
    /// The device computing the bound's heavy half (the GPU) failed.
    #[error("the device computing the bound failed: {0}")]
    Device(DeviceError),
}

impl Prepared {
    /// The minibatch's rows of the data.
    pub fn rows(&self) -> &[usize] {
        &self.rows
    }

    /// Whether q(w)'s moments are left to a device that runs the encoder
    /// ([`GpCdeModel::prepare_held`]).
    pub fn latent_on_device(&self) -> bool {
        self.latent_on_device
    }
}

impl GpCdeModel {
    /// Initialises the variable for column `slot` of `data` (N × D, standardised), MODEL.md §2.4–2.6:
    /// θ^c_j ~ U(0.01, 1) for every stationary kind, θ^lin_j = 0.25, s^c = 1, a ~ U(0.1, 10),
    /// φ² = 1/κ² with κ ~ U(50, 100); Z = M random data rows with the latent column ~ N(0, 1);
    /// q(v) = N(0, I); the encoder or free q(w) as configured. `mask` switches inputs off (1 = on);
    /// the latent slot is always on.
    pub fn new(
        data: &DMatrix<f64>,
        slot: usize,
        mask: &[f64],
        settings: &GpCdeSettings,
        rng: &mut impl Rng,
    ) -> Self {
        let (n, d) = data.shape();
        assert!(
            slot < d && mask.len() == d,
            "slot and mask must fit the data"
        );
        let mut uniform_precisions = || {
            (0..d)
                .map(|_| rng.random_range(0.01..1.0))
                .collect::<Vec<f64>>()
        };
        // One precision vector per kind, in the order of `StationaryKind::ALL`, then a.
        let precisions = std::array::from_fn(|_| uniform_precisions());
        let mut kernel = Kernel::cgp_cde(d, 0.25, 1.0, precisions, rng.random_range(0.1..10.0));
        kernel.mask.copy_from_slice(mask);
        kernel.mask[slot] = 1.0;
        let mut kernel_store = ParamStore::new();
        kernel.declare_params(&mut kernel_store, "kernel.");
        let kernel_raw = kernel_store.pack(&kernel.params_to_vec());

        let m = settings.inducing.min(n);
        let chosen = sample(rng, n, m).into_vec();
        let mut z = DMatrix::from_fn(m, d, |r, c| data[(chosen[r], c)]);
        for r in 0..m {
            z[(r, slot)] = rng.sample(StandardNormal);
        }

        let kappa: f64 = rng.random_range(50.0..100.0);
        let column: Vec<f64> = data.column(slot).iter().copied().collect();
        let noise_floor = resolution_noise_floor(&column, super::NOISE_VARIANCE_FLOOR);
        let noise_raw = softplus_inverse(1.0 / (kappa * kappa));
        let latent = match settings.latent {
            LatentKind::Encoder => Latent::Encoder(Encoder::new(
                d,
                settings.encoder_width,
                settings.encoder_depth,
                rng,
            )),
            LatentKind::Free => Latent::Free(FreeLatents::new(&column, 0.01, rng)),
        };
        let mut variable = Self {
            slot,
            kernel,
            kernel_raw,
            z,
            q: InducingPosterior::prior(m),
            noise_raw,
            noise_floor,
            latent,
            adam: Adam::new(0, settings.adam),
            samples: settings.samples.max(1),
            jitter: settings.jitter,
            natural_steps: 0,
            holding: None,
            parameter_edits: 0,
        };
        variable.adam = Adam::new(variable.layout().store.len(), settings.adam);
        variable
    }

    /// The flat vector Adam steps, declared once: `kernel.*` (positive, in
    /// `Kernel::params_to_vec` order, first, so a kernel index is also a flat index), `z`
    /// (identity), `noise` (φ² above its floor), then q(w): `encoder` (the network's weights,
    /// identity) or `latent.mean` (identity) and `latent.variance` (above
    /// [`LATENT_VARIANCE_FLOOR`](super::encoder::LATENT_VARIANCE_FLOOR)).
    fn layout(&self) -> GpCdeLayout {
        let mut store = ParamStore::new();
        let kernel = self.kernel.declare_params(&mut store, "kernel.").all;
        debug_assert_eq!(kernel.first(), 0, "kernel indices are flat indices");
        let z = store.add("z", self.z.len(), Transform::Identity);
        let noise = store.add(
            "noise",
            1,
            Transform::Positive {
                floor: self.noise_floor,
            },
        );
        let latent = match &self.latent {
            Latent::Encoder(e) => {
                LatentBlocks::Encoder(store.add("encoder", e.param_count(), Transform::Identity))
            }
            Latent::Free(f) => LatentBlocks::Free {
                mean: store.add("latent.mean", f.mu.len(), Transform::Identity),
                variance: store.add(
                    "latent.variance",
                    f.raw_var.len(),
                    Transform::Positive {
                        floor: super::encoder::LATENT_VARIANCE_FLOOR,
                    },
                ),
            },
        };
        GpCdeLayout {
            store,
            kernel,
            z,
            noise,
            latent,
        }
    }

    /// The kernel with its current (constrained) values.
    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    /// The kernel's unconstrained parameters (flat order of [`Kernel::params_to_vec`]).
    pub fn kernel_raw(&self) -> &[f64] {
        &self.kernel_raw
    }

    /// Flat kernel indices of the hyperparameters that switch input `j` on: θ^lin_j and θ^c_j of
    /// every stationary part (the kernel's per-input blocks).
    pub fn input_indices(&self, j: usize) -> Vec<usize> {
        self.layout().store.input_indices(j)
    }

    /// Sets the kernel's unconstrained entries `indices` to `raw[k]` (same flat order) and clears
    /// their Adam moments (the re-initialisation of MODEL.md §5.4).
    pub fn reset_kernel_entries(&mut self, indices: &[usize], raw: &[f64]) {
        for &k in indices {
            self.kernel_raw[k] = raw[k];
        }
        let layout = self.layout();
        let values = layout.store.unpack_block(layout.kernel, &self.kernel_raw);
        self.kernel.set_params_from_slice(&values);
        // The kernel entries come first in Adam's flat vector.
        self.adam.reset(indices.iter().copied());
        self.parameter_edits += 1;
    }

    /// Multiplies Adam's learning rate by `factor`.
    pub fn scale_learning_rate(&mut self, factor: f64) {
        self.adam.settings.learning_rate *= factor;
    }

    /// Adam's learning rate.
    pub fn learning_rate(&self) -> f64 {
        self.adam.settings.learning_rate
    }

    /// φ² = softplus(raw) + floor (floor 1e-6, or Δ²/12 for data recorded at resolution Δ).
    pub fn noise(&self) -> f64 {
        softplus(self.noise_raw) + self.noise_floor
    }

    /// Inducing inputs Z (M × D).
    pub fn z(&self) -> &DMatrix<f64> {
        &self.z
    }

    /// K_ZZ's jitter ladder.
    pub fn jitter_policy(&self) -> JitterPolicy {
        self.jitter
    }

    /// q(v) as kept here: current unless a device holds newer steps
    /// ([`GpCdeModel::posterior_is_current`]).
    pub fn posterior(&self) -> &InducingPosterior {
        &self.q
    }

    /// Natural steps taken so far (q(v)'s version: a device holding q(v) names its states by it).
    pub fn natural_steps(&self) -> usize {
        self.natural_steps
    }

    /// The step size γ of the next natural step (the paper's ramp, [`step_size`]).
    pub fn next_step_size(&self) -> f64 {
        step_size(self.natural_steps)
    }

    /// Whether a device holds q(v), and since when the copy here was read from it.
    pub fn holding(&self) -> Option<PosteriorHolding> {
        self.holding
    }

    /// Whether the q(v) kept here is the variable's current one.
    pub fn posterior_is_current(&self) -> bool {
        self.holding
            .is_none_or(|h| h.synced_steps == self.natural_steps)
    }

    /// The q(v), Z, q(w)'s encoder and their Adam moments kept here, for a device to hold.
    pub fn resident_view(&self) -> ResidentView<'_> {
        let layout = self.layout();
        let (z_first, z_second) = self.adam.moments(layout.z.range());
        let (encoder, (encoder_first, encoder_second)) = match (&self.latent, &layout.latent) {
            (Latent::Encoder(e), LatentBlocks::Encoder(block)) => {
                (Some(e), self.adam.moments(block.range()))
            }
            _ => (None, (&[][..], &[][..])),
        };
        ResidentView {
            posterior: &self.q,
            z: &self.z,
            z_first,
            z_second,
            encoder,
            encoder_first,
            encoder_second,
            parameters: self.held_parameters(),
        }
    }

    /// The raw numbers a device steps beside Z: the kernel's hyperparameters
    /// ([`Kernel::params_to_vec`]'s order), then φ², with Adam's moments of them.
    pub fn held_parameters(&self) -> HeldWeights {
        let layout = self.layout();
        let (kernel_first, kernel_second) = self.adam.moments(layout.kernel.range());
        let (noise_first, noise_second) = self.adam.moments(layout.noise.range());
        HeldWeights {
            values: self
                .kernel_raw
                .iter()
                .copied()
                .chain([self.noise_raw])
                .collect(),
            first: kernel_first.iter().chain(noise_first).copied().collect(),
            second: kernel_second.iter().chain(noise_second).copied().collect(),
        }
    }

    /// Takes the raw hyperparameters and φ² with their moments from a device that stepped them
    /// (`held`: [`GpCdeModel::held_parameters`]'s layout). Nothing changes, and false comes
    /// back, when their count is not this variable's.
    fn take_parameters(&mut self, held: &HeldWeights) -> bool {
        let k = self.kernel_raw.len();
        if [held.values.len(), held.first.len(), held.second.len()] != [k + 1; 3] {
            return false;
        }
        let layout = self.layout();
        self.kernel_raw.copy_from_slice(&held.values[..k]);
        self.noise_raw = held.values[k];
        let values = layout.store.unpack_block(layout.kernel, &self.kernel_raw);
        self.kernel.set_params_from_slice(&values);
        self.adam
            .set_moments(layout.kernel.range(), &held.first[..k], &held.second[..k]);
        self.adam
            .set_moments(layout.noise.range(), &held.first[k..], &held.second[k..]);
        true
    }

    /// φ²'s floor.
    pub fn noise_floor(&self) -> f64 {
        self.noise_floor
    }

    /// How many times the host has changed the hyperparameters of this variable itself (an edge
    /// re-initialised or switched off): a device holding them takes the host's copy when this
    /// moves.
    pub fn parameter_edits(&self) -> u64 {
        self.parameter_edits
    }

    /// q(w)'s encoder, when q(w) is amortised by one.
    pub fn encoder(&self) -> Option<&Encoder> {
        match &self.latent {
            Latent::Encoder(e) => Some(e),
            Latent::Free(_) => None,
        }
    }

    /// The next Adam step's constants, for a device stepping Z and the encoder itself.
    pub fn held_adam_step(&self) -> HeldAdamStep {
        self.adam.held_step()
    }

    /// This variable with `state` (read from the device holding it) as its current q(v), Z, its
    /// encoder (when `state` has one) and their Adam moments.
    pub fn with_resident(&self, state: ResidentState) -> Self {
        let mut v = self.clone();
        v.take_resident(state);
        v
    }

    /// Takes `state`, read from the device at this variable's natural-step count.
    fn take_resident(&mut self, state: ResidentState) {
        // A device keeps each variable's state under its own key, so the shapes agree; a state
        // that did not would not be this variable's, and the copy here is kept.
        let encoder_len = self.encoder().map_or(0, Encoder::param_count);
        if state.z.shape() != self.z.shape()
            || state.posterior.len() != self.q.len()
            || ![0, encoder_len].contains(&state.encoder.values.len())
        {
            return;
        }
        let layout = self.layout();
        self.adam.set_moments(
            layout.z.range(),
            state.z_first.as_slice(),
            state.z_second.as_slice(),
        );
        if let (Latent::Encoder(e), LatentBlocks::Encoder(block), true) = (
            &mut self.latent,
            layout.latent,
            !state.encoder.values.is_empty(),
        ) {
            let held = state.encoder;
            e.set_params_from_slice(&held.values);
            self.adam
                .set_moments(block.range(), &held.first, &held.second);
        }
        // A state saved before the device held the hyperparameters has none: the copy here is
        // then the current one.
        self.take_parameters(&state.parameters);
        self.z = state.z;
        self.q = state.posterior;
        if let Some(h) = self.holding.as_mut() {
            h.synced_steps = self.natural_steps;
        }
    }

    /// The modelled column.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Switches input `j` on (1) or off (0); the latent slot cannot be switched off.
    pub fn set_mask(&mut self, j: usize, on: bool) {
        if j != self.slot {
            self.kernel.mask[j] = if on { 1.0 } else { 0.0 };
            self.parameter_edits += 1;
        }
    }

    /// The raw numbers in the store's order.
    fn flat_params(&self, layout: &GpCdeLayout) -> Vec<f64> {
        let mut p = vec![0.0; layout.store.len()];
        p[layout.kernel.range()].copy_from_slice(&self.kernel_raw);
        p[layout.z.range()].copy_from_slice(self.z.as_slice());
        p[layout.noise.first()] = self.noise_raw;
        match (&self.latent, layout.latent) {
            (Latent::Encoder(e), LatentBlocks::Encoder(block)) => {
                p[block.range()].copy_from_slice(&e.params_to_vec())
            }
            (Latent::Free(f), LatentBlocks::Free { mean, variance }) => {
                p[mean.range()].copy_from_slice(&f.mu);
                p[variance.range()].copy_from_slice(&f.raw_var);
            }
            _ => unreachable!("the layout is declared from this q(w)"),
        }
        p
    }

    /// Sets the raw numbers from `p` (the store's order) and the kernel's values from them.
    fn set_flat_params(&mut self, layout: &GpCdeLayout, p: &[f64]) {
        let kernel_raw = &p[layout.kernel.range()];
        self.kernel_raw.copy_from_slice(kernel_raw);
        let values = layout.store.unpack_block(layout.kernel, kernel_raw);
        self.kernel.set_params_from_slice(&values);
        self.z.as_mut_slice().copy_from_slice(&p[layout.z.range()]);
        self.noise_raw = p[layout.noise.first()];
        match (&mut self.latent, layout.latent) {
            (Latent::Encoder(e), LatentBlocks::Encoder(block)) => {
                e.set_params_from_slice(&p[block.range()])
            }
            (Latent::Free(f), LatentBlocks::Free { mean, variance }) => {
                f.mu.copy_from_slice(&p[mean.range()]);
                f.raw_var.copy_from_slice(&p[variance.range()]);
            }
            _ => unreachable!("the layout is declared from this q(w)"),
        }
    }

    /// Draws what one step on minibatch `rows` of `data` needs: q(w) moments of those rows and
    /// S × b standard-normal draws.
    pub fn prepare(&self, data: &DMatrix<f64>, rows: &[usize], rng: &mut impl Rng) -> Prepared {
        let d = data.ncols();
        let x = DMatrix::from_fn(rows.len(), d, |r, c| data[(rows[r], c)]);
        let y = DVector::from_fn(rows.len(), |r, _| data[(rows[r], self.slot)]);
        let (mu, var, tape) = match &self.latent {
            Latent::Encoder(e) => {
                let (mu, var, tape) = e.forward(&x);
                (mu, var, Some(tape))
            }
            Latent::Free(f) => {
                let (mu, var) = f.posterior(rows);
                (mu, var, None)
            }
        };
        let eps = DMatrix::from_fn(self.samples, rows.len(), |_, _| rng.sample(StandardNormal));
        Prepared {
            rows: rows.to_vec(),
            x,
            y,
            latent: LatentBatch {
                slot: self.slot,
                mu,
                var,
                eps,
            },
            tape,
            total_rows: data.nrows(),
            latent_on_device: false,
        }
    }

    /// What one step on minibatch `rows` needs when a device holding this variable runs its
    /// encoder: as [`GpCdeModel::prepare`] (the same draws from `rng`), but q(w)'s moments are
    /// left to the device (zeros here) and the encoder is not run on the host. For free per-row
    /// latents it is [`GpCdeModel::prepare`].
    pub fn prepare_held(
        &self,
        data: &DMatrix<f64>,
        rows: &[usize],
        rng: &mut impl Rng,
    ) -> Prepared {
        if self.encoder().is_none() {
            return self.prepare(data, rows, rng);
        }
        let d = data.ncols();
        let b = rows.len();
        let x = DMatrix::from_fn(b, d, |r, c| data[(rows[r], c)]);
        let y = DVector::from_fn(b, |r, _| data[(rows[r], self.slot)]);
        let eps = DMatrix::from_fn(self.samples, b, |_, _| rng.sample(StandardNormal));
        Prepared {
            rows: rows.to_vec(),
            x,
            y,
            latent: LatentBatch {
                slot: self.slot,
                mu: DVector::zeros(b),
                var: DVector::zeros(b),
                eps,
            },
            tape: None,
            total_rows: data.nrows(),
            latent_on_device: true,
        }
    }

    /// The bound evaluation request for a prepared step.
    pub fn input<'a>(&'a self, prepared: &'a Prepared) -> SvgpInput<'a> {
        SvgpInput {
            kernel: &self.kernel,
            z: &self.z,
            q_mean: &self.q.mean,
            q_cov: &self.q.cov,
            noise: self.noise(),
            x: &prepared.x,
            y: &prepared.y,
            latent: Some(&prepared.latent),
            total_rows: prepared.total_rows,
            jitter: self.jitter,
        }
    }

    /// Applies a step: the natural-gradient update of q(v) with γ from the paper's ramp, then one
    /// Adam step on all other parameters using the gradient at the pre-update q (MODEL.md §9
    /// allows either; this saves a second evaluation). Extra gradient on the kernel parameters
    /// (the graph prior and the acyclicity penalty, in constrained space) is added through
    /// `kernel_extra`. Nothing changes when the bound or its gradient is not finite.
    pub fn apply(
        &mut self,
        prepared: &Prepared,
        output: &SvgpOutput,
        kernel_extra: Option<&[f64]>,
    ) -> Result<StepReport, StepError> {
        let g = &output.grad;
        let gradient = Gradient {
            kernel: &g.kernel,
            z: ZGradient::Here(&g.z),
            noise: g.noise,
            latent_mu: &g.latent_mu,
            latent_var: &g.latent_var,
        };
        gradient.check(output.terms.elbo)?;
        // A device that held q(v) and was given up (lost) took its newest natural steps with it:
        // the step continues from the copy read from it last (`SYNC_SECONDS` old or more).
        let mut q = self.q.clone();
        q.natural_step(&output.natgrad, step_size(self.natural_steps))?;
        self.adam_step(prepared, &gradient, kernel_extra);
        self.q = q;
        self.holding = None;
        self.natural_steps += 1;
        Ok(StepReport {
            terms: output.terms,
        })
    }

    /// Applies a step whose natural step and Adam steps of Z, of the kernel's hyperparameters
    /// and φ² (`stepped`, read back with the evaluation), and of the encoder when the device ran
    /// it (`prepared` says), a device holding them under `key` has taken (they wait there to be
    /// committed by the next evaluation): one Adam step on everything else, as
    /// [`GpCdeModel::apply`], with the same step count. `synced` is the state the device
    /// evaluated, when it was read back with this evaluation (it becomes the copy kept here).
    /// The graph prior's and the penalty's gradient went to the device with the request.
    pub fn apply_held(
        &mut self,
        prepared: &Prepared,
        output: &HeldOutput,
        stepped: &HeldWeights,
        key: u64,
        synced: Option<ResidentState>,
    ) -> Result<StepReport, StepError> {
        // The kernel's step is the device's (`stepped`): nothing of its gradient is used here.
        let unused = self.kernel.new_zeroed_grad();
        let gradient = Gradient {
            kernel: &unused,
            z: ZGradient::Held {
                norm: output.held_norm,
            },
            noise: output.noise,
            latent_mu: &output.latent_mu,
            latent_var: &output.latent_var,
        };
        gradient.check(output.terms.elbo)?;
        let finite = |v: &[f64]| v.iter().all(|x| x.is_finite());
        if !(finite(&stepped.values) && finite(&stepped.first) && finite(&stepped.second)) {
            return Err(StepError::NonFinite(output.terms.elbo));
        }
        let count = self.kernel_raw.len() + 1;
        if [
            stepped.values.len(),
            stepped.first.len(),
            stepped.second.len(),
        ] != [count; 3]
        {
            return Err(StepError::Device(DeviceError::StepCount {
                stepped: stepped.values.len(),
                held: count,
            }));
        }
        // The state evaluated first (it holds the hyperparameters before the step), then the
        // step.
        if let Some(state) = synced {
            self.take_resident(state);
        }
        self.adam_step(prepared, &gradient, None);
        self.take_parameters(stepped);
        let holding = self
            .holding
            .filter(|h| h.key == key)
            .unwrap_or(PosteriorHolding {
                key,
                synced_steps: self.natural_steps,
            });
        self.holding = Some(holding);
        self.natural_steps += 1;
        Ok(StepReport {
            terms: output.terms,
        })
    }

    /// One Adam step on every parameter but q(v) from the bound's `gradient` (negated: Adam
    /// descends the loss −L̂), with the graph prior's and the penalty's `kernel_extra`.
    fn adam_step(
        &mut self,
        prepared: &Prepared,
        gradient: &Gradient,
        kernel_extra: Option<&[f64]>,
    ) {
        let kernel_grad = gradient.kernel.to_vec();
        // Loss = −bound: the negated gradient with respect to each block's values, then the
        // store's chain rule to raw numbers (the encoder's backward pass gives raw weights'
        // gradients already: an identity block).
        let layout = self.layout();
        let mut minus = vec![0.0; layout.store.len()];
        for ((out, &gk), k) in minus[layout.kernel.range()]
            .iter_mut()
            .zip(&kernel_grad)
            .zip(0..)
        {
            *out = -(gk + kernel_extra.map_or(0.0, |e| e[k]));
        }
        if let ZGradient::Here(z) = gradient.z {
            for (out, v) in minus[layout.z.range()].iter_mut().zip(z.iter()) {
                *out = -v;
            }
        }
        minus[layout.noise.first()] = -gradient.noise;
        match (&self.latent, layout.latent) {
            // The device that ran the encoder steps it beside Z.
            (Latent::Encoder(_), _) if prepared.latent_on_device => {}
            (Latent::Encoder(e), LatentBlocks::Encoder(block)) => {
                let tape = prepared
                    .tape
                    .as_ref()
                    .expect("an encoder step keeps its tape");
                let d = e.backward(tape, &(-gradient.latent_mu), &(-gradient.latent_var));
                minus[block.range()].copy_from_slice(&d);
            }
            (Latent::Free(_), LatentBlocks::Free { mean, variance }) => {
                for (k, &row) in prepared.rows.iter().enumerate() {
                    minus[mean.first() + row] -= gradient.latent_mu[k];
                    minus[variance.first() + row] -= gradient.latent_var[k];
                }
            }
            _ => unreachable!("the layout is declared from this q(w)"),
        }
        let mut params = self.flat_params(&layout);
        let grad = layout.store.chain(&params, &minus);
        match gradient.z {
            ZGradient::Here(_) => self.adam.step(&mut params, &grad),
            ZGradient::Held { .. } => {
                // The device steps Z, the hyperparameters and φ² (and the encoder when it ran it).
                let mut held = vec![
                    layout.z.range(),
                    layout.kernel.range(),
                    layout.noise.range(),
                ];
                if let (true, LatentBlocks::Encoder(block)) =
                    (prepared.latent_on_device, layout.latent)
                {
                    held.push(block.range());
                }
                self.adam.step_except(&mut params, &grad, &held);
            }
        }
        self.set_flat_params(&layout, &params);
    }

    /// One complete step on the CPU (prepare, evaluate, apply).
    pub fn step(
        &mut self,
        data: &DMatrix<f64>,
        rows: &[usize],
        rng: &mut impl Rng,
    ) -> Result<StepReport, StepError> {
        let prepared = self.prepare(data, rows, rng);
        let output = bound_and_gradient(&self.input(&prepared))?;
        self.apply(&prepared, &output, None)
    }

    /// The bound on the full data with `samples` Monte Carlo draws and no minibatch scaling,
    /// accumulated over chunks of `chunk` rows: Σ_n [(1/S) Σ_s ELL − KLw_n] − KLu.
    pub fn full_bound(
        &self,
        data: &DMatrix<f64>,
        samples: usize,
        chunk: usize,
        rng: &mut impl Rng,
    ) -> Result<f64, StepError> {
        self.full_bound_with(data, samples, chunk, rng, |input| {
            bound_and_gradient(input).map_err(StepError::from)
        })
    }

    /// [`GpCdeModel::full_bound`] with each chunk's bound computed by `evaluate` (the CPU's
    /// [`bound_and_gradient`], or a device's path). The chunks and their draws are the same.
    pub fn full_bound_with(
        &self,
        data: &DMatrix<f64>,
        samples: usize,
        chunk: usize,
        rng: &mut impl Rng,
        mut evaluate: impl FnMut(&SvgpInput) -> Result<SvgpOutput, StepError>,
    ) -> Result<f64, StepError> {
        let n = data.nrows();
        let mut eval = self.clone();
        eval.samples = samples.max(1);
        let mut total = 0.0;
        let mut kl_inducing = 0.0;
        for start in (0..n).step_by(chunk.max(1)) {
            let rows: Vec<usize> = (start..(start + chunk).min(n)).collect();
            let mut prepared = eval.prepare(data, &rows, rng);
            // Scale N/b = 1 per chunk: every chunk contributes its own rows exactly once.
            prepared.total_rows = rows.len();
            let out = evaluate(&eval.input(&prepared))?;
            total += out.terms.expected_log_lik - out.terms.kl_latent;
            kl_inducing = out.terms.kl_inducing;
        }
        let bound = total - kl_inducing;
        if bound.is_finite() {
            Ok(bound)
        } else {
            Err(StepError::NonFinite(bound))
        }
    }
}

#[cfg(test)]
mod tests;
