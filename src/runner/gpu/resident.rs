//! The uncollapsed evaluation with q(v), Z, q(w)'s encoder, the kernel's hyperparameters, φ² and
//! their Adam moments resident on the device and its M × M algebra there (issue 34, items 1–2):
//! for each request, in one submission for the whole batch and with nothing of size M × M, M × D,
//! S × b or b crossing to the host, in order on the device:
//!
//! 0. the hyperparameters as the passes read them, derived from the slot's raw numbers
//!    (`held_gradients.wgsl`'s `derive_parameters`: the kernel's masked θ̃, its shape a, and from
//!    φ² the constants c/φ², g_var and k_tt's adjoint per unit of w) where the predictions read
//!    them (one buffer per batch in DERIVED's layout), so the host uploads none of them;
//! 1. Z from the slot's current state; q(w)'s moments (μ_n, Σ_n) from the encoder's forward
//!    pass on the minibatch's rows (`encoder.wgsl`, when the request has an encoder; else the
//!    host's); the draws w = μ + √Σ ε, the evaluation points and K' = K(Z, [U; Z])
//!    (M × (T + M)) in one kernel pass, so K_ZZ is its last M columns;
//! 2. K_ZZ + εI = L Lᵀ with the jitter ladder in the shader, starting at
//!    max(ε₀, floor · mean diag K_ZZ), and L⁻¹, in double-float (`cholesky.wgsl`);
//! 3. L, L⁻¹, S − I, m and α = L⁻ᵀm narrowed to float32 for the products (`inducing.wgsl`), q(v)
//!    read from its resident state;
//! 4. the predictions of [`super::predictions`] (Ã = L⁻¹K_Zt, the column pass, [Ãg, Ãy],
//!    P = ÃÃᵀ, K̄_Zt = L⁻ᵀĀ);
//! 5. back to K_ZZ: L̄ = tril(−α (Ãg)ᵀ − 2 g_var L⁻ᵀ(S − I)P), then the Cholesky adjoint
//!    K̄_ZZ = sym(L⁻ᵀ Φ(Lᵀ L̄) L⁻¹) by four products, written after K̄_Zt so that the one kernel
//!    adjoint gives the gradients through K_Zt and K_ZZ together;
//! 6. the gradients finished (`held_gradients.wgsl`): ∂Z assembled from its two shares, q(w)'s
//!    two sums over the draws, then (with an encoder) the encoder's backward pass from them and
//!    KL(q(w))'s gradient into its weights' gradient beside ∂Z; the kernel adjoint's row sums
//!    added over the M rows, ‖∂Z‖² + ‖∂encoder‖², Σ_n KL(q(w_n)) and the points' column sums of
//!    squares (a fixed-order df tree each); the gradient of each raw hyperparameter and of φ²'s
//!    (the kernel's as kernel.rs's `grad_from_sums` forms it with k_tt's share, plus the graph
//!    prior's and the penalty's from the request, `ParameterStep::extra`), and the Adam step of
//!    Z, the encoder, the hyperparameters and φ² into the slot's next state;
//! 7. q(v)'s natural step P ← (1 − γ)P + γ(I + Λ), η₁ ← (1 − γ)η₁ + γr with Λ = (c/φ²)P_w and
//!    r = (c/φ²)Ãy, into the slot's next state (`cholesky.wgsl`'s `natural_assemble` and its
//!    blocked factorisation), and the KL terms of the current state.
//!
//! The two factorisations (steps 2 and 7) of all the submission's requests of one M (and one
//! jitter floor, or one γ) run as one batch ([`Gpu::record_batched`]: the factorisation blocked
//! by 32 columns, its panels and trailing updates, the inverse, S and m each one pass over every
//! matrix of the batch, `cholesky::factor_passes`), so a batch of D variables waits for one
//! factorisation's critical path, not D. Every other pass runs once per batch of requests of one
//! shape ([`Gpu::encode_batches`]), on buffers that hold the batch's slots one after another:
//! the minibatch's gather, the predictions' passes (the points, K', the five products, the column
//! pass, the kernel's adjoint and its sums: [`Gpu::plan_predictions`]), the rest of the M × M
//! algebra (steps 2–3, 5 and 7's glue: K_ZZ widened from K', the operands narrowed where the
//! predictions read them, L̄ and the Cholesky adjoint with its four products, K̄_ZZ written
//! after K̄_Zt, the natural step's inputs, the KL terms: [`Gpu::plan_algebra`], `inducing.wgsl`
//! taking the slot from the dispatch and the products a batch of the GEMM) and the held passes
//! (steps 0, 1's encoder and 6: `held_gradients.wgsl` and `encoder.wgsl`, [`Gpu::plan_held`]),
//! each slot's rows, latent column, Adam step size and graph gradient its own; only each
//! request's q(v) and held states are copied in and its next ones out. [`Gpu::record_phases`]
//! records them phase by phase.
//!
//! What comes back per request is 6 values and 22 words of status (the misfit, the squared
//! gradient of Z and the encoder, Σ KL(q(w)), K_ZZ's jitter and status, the KL terms, the step's
//! status) and the K stepped raw hyperparameters with their two Adam moments, so that the host's
//! copy is the device's (364 bytes at (M, b, S, D) = (10, 64, 5, 3), 784 at the paper's
//! (400, 256, 50, 10)); 2b values more (q(w)'s sums) when the host holds q(w) (free per-row
//! latents); and the state itself only when a request asks for it. All requests of a submission
//! copy their values into one read-back buffer, packed, which is mapped once. The stepped state
//! stays on the device: a later request with [`StateChange::Commit`] (or
//! [`Gpu::commit_states`]) makes it the slot's current one, so a host that rejects the step (a
//! phase that ends) leaves the slot as it was, and one that undoes a committed step (a fault)
//! gets the previous state back with [`StateChange::Restore`]. The host's reference is the CPU's `svgp::bound_and_gradient`
//! (with `Encoder::forward` and `backward` around it) followed by
//! `InducingPosterior::natural_step` and `Adam::step`.

use nalgebra::{DMatrix, DVector};

use super::cholesky::{
    decode as decode_factor, dims_bytes, factor_passes, ladder_bytes, output_words, step_words,
    two_word_bytes, FactorJob,
};
use super::held_encoder::{encoder_shapes, EncoderBuffers};
use super::kernel::{alpha_at, backward_chunk, backward_width, kind_bytes, parameter_words};
use super::predictions::{InducingOperands, PointInputs, PredictionPlan, ReadbackLayout};
use super::submission::Step;
use super::submission::{Readback, Submitted};
use super::{Gpu, GpuError};
use super::{FIVE_BUFFERS, POSITIVE};
use crate::gp::adam::HeldAdamStep;
use crate::gp::encoder::Encoder;
use crate::gp::kernel::Kernel;
use crate::gp::linalg::{cholesky_jittered, lower_inverse, CholeskyError, JitterPolicy};
use crate::gp::natgrad::InducingPosterior;
use crate::gp::svgp::{HeldLatent, LatentBatch};
use crate::gp::variable::{HeldWeights, ResidentState, ResidentView};

/// The first resident slot of the q(v) states: apart from the host-side path's slots, so that
/// neither grows or rebinds the other's buffers.
const RESIDENT_SLOTS: usize = 1 << 20;
/// The first resident slot of the evaluations' scratch buffers, one set per place in a
/// submission (shared by whichever q(v) is evaluated there: the M × T buffers are the large
/// ones, the states are M² each).
const RESIDENT_SCRATCH: usize = 2 << 20;
/// The first resident slot of the batched factorisations' buffers, one set per dispatch of a
/// submission ([`Gpu::record_batched`]).
const RESIDENT_BATCH: usize = 3 << 20;
/// The first resident slot of the M × M algebra's buffers, one set per group of requests of one M
/// in a submission ([`Gpu::plan_algebra`]).
const RESIDENT_GROUP: usize = 4 << 20;
/// The first resident slot of the held passes' buffers, one set per group of requests of one
/// shape in a submission ([`Gpu::plan_held`]).
const RESIDENT_HELD: usize = 5 << 20;
/// One past the last resident slot any range reaches (each holds up to 2²⁰ slots).
const RESIDENT_END: usize = 6 << 20;

// The held passes' dims keys are `scratch * DISPATCHES + dispatch`: they must fit a 32-bit usize
// (wasm32) for every scratch slot the resident ranges hand out.
const _: () = assert!(RESIDENT_END
    .checked_mul(super::held_encoder::DISPATCHES)
    .is_some());

/// Invocations per workgroup of `inducing.wgsl`'s element-wise passes and of
/// `held_gradients.wgsl`'s.
const GROUP: u32 = 64;

/// The compiled entry points of `held_gradients.wgsl`, in [`HeldPass`]'s order.
pub(super) fn gradient_pipelines(device: &wgpu::Device) -> Vec<wgpu::ComputePipeline> {
    let source = [
        super::DOUBLE_FLOAT,
        FIVE_BUFFERS,
        POSITIVE,
        include_str!("held_gradients.wgsl"),
    ]
    .concat();
    [
        "input_gradients",
        "kernel_sums",
        "adam_held",
        "derive_parameters",
        "parameter_gradients",
    ]
    .iter()
    .map(|entry| super::compute_pipeline(device, "held_gradients.wgsl", &source, entry))
    .collect()
}

/// The compiled entry points of `inducing.wgsl`, in [`Glue`]'s order.
pub(super) fn pipelines(device: &wgpu::Device) -> Vec<wgpu::ComputePipeline> {
    let source = [
        super::DOUBLE_FLOAT,
        FIVE_BUFFERS,
        include_str!("inducing.wgsl"),
    ]
    .concat();
    Glue::ALL
        .iter()
        .map(|glue| super::compute_pipeline(device, "inducing.wgsl", &source, glue.entry()))
        .collect()
}

/// The passes of `held_gradients.wgsl`.
#[derive(Debug, Clone, Copy)]
enum HeldPass {
    InputGradients,
    KernelSums,
    AdamHeld,
    DeriveParameters,
    ParameterGradients,
}

/// The passes of `inducing.wgsl`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Glue {
    WidenGram,
    NarrowMatrix,
    MeanAlpha,
    MirrorP,
    LBar,
    Phi,
    SymmetriseInto,
    NaturalInputs,
    KlTerms,
}

impl Glue {
    const ALL: [Glue; 9] = [
        Glue::WidenGram,
        Glue::NarrowMatrix,
        Glue::MeanAlpha,
        Glue::MirrorP,
        Glue::LBar,
        Glue::Phi,
        Glue::SymmetriseInto,
        Glue::NaturalInputs,
        Glue::KlTerms,
    ];

    fn entry(self) -> &'static str {
        match self {
            Glue::WidenGram => "widen_gram",
            Glue::NarrowMatrix => "narrow_matrix",
            Glue::MeanAlpha => "mean_alpha",
            Glue::MirrorP => "mirror_p",
            Glue::LBar => "l_bar",
            Glue::Phi => "phi",
            Glue::SymmetriseInto => "symmetrise_into",
            Glue::NaturalInputs => "natural_inputs",
            Glue::KlTerms => "kl_terms",
        }
    }
}

/// How a slot's q(v) states change before an evaluation. A slot keeps three: the current one,
/// the stepped one its last evaluation made (waiting to be committed), and the one before the
/// current (so that a restart undoing a step after a fault finds the state it returns to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateChange {
    /// Evaluate the current q(v) as it is.
    Keep,
    /// The stepped q(v) becomes current, the current one previous.
    Commit,
    /// The previous q(v) becomes current again.
    Restore,
}

/// One evaluation whose q(v) and Z are resident in slot `slot` ([`Gpu::upload_state`]).
#[derive(Debug, Clone, Copy)]
pub struct ResidentRequest<'a> {
    pub slot: usize,
    pub kernel: &'a Kernel,
    /// Z's shape (M × D): its values are the slot's.
    pub z: &'a DMatrix<f64>,
    /// q(w)'s encoder, when the device runs it (its shapes; the weights are the slot's, held
    /// beside Z and stepped with it): `latent`'s μ and Σ are then not read, the device forms
    /// them from the minibatch's rows.
    pub encoder: Option<&'a Encoder>,
    /// The minibatch (b × D) and its targets.
    pub x: &'a DMatrix<f64>,
    pub y: &'a DVector<f64>,
    /// The minibatch's row indices in the data the device holds ([`Gpu::hold_data`]), when it
    /// does: x and y are then gathered there, not uploaded (`x` and `y` still give the shapes
    /// and the host's share of k_tt's adjoint).
    pub rows: Option<&'a [usize]>,
    /// q(w)'s (μ_n, Σ_n) and the noise ε_sn (S × b) of the draws w_sn = μ_n + √Σ_n ε_sn, which
    /// the device forms.
    pub latent: &'a LatentBatch,
    pub noise: f64,
    /// c = N/(bS).
    pub c: f64,
    /// K_ZZ's jitter ladder, and the floor relative to mean diag K_ZZ its first rung is raised to.
    pub jitter: JitterPolicy,
    pub relative_jitter: f64,
    /// The natural step's size γ.
    pub gamma: f64,
    /// The Adam step of Z, the encoder and the hyperparameters (the variable's next,
    /// [`crate::gp::adam::Adam::held_step`]).
    pub adam: HeldAdamStep,
    /// What the device needs besides the slot's state to step the hyperparameters.
    pub parameters: ParameterStep<'a>,
    /// What becomes of the slot's states before evaluating: the last stepped q(v) made current,
    /// or the one before it restored.
    pub before: StateChange,
    /// Read the state evaluated back with the results ([`ResidentEvaluation::state`]).
    pub read_current: bool,
}

/// What a resident evaluation needs to step the kernel's hyperparameters and φ², which the slot
/// holds (their raw numbers and Adam moments, φ² last).
#[derive(Debug, Clone, Copy)]
pub struct ParameterStep<'a> {
    /// The gradient of the graph prior and the acyclicity penalty at this point with respect to
    /// each hyperparameter's value (∂/∂θ, in [`Kernel::params_to_vec`]'s order), added to the
    /// bound's.
    pub extra: &'a [f64],
    /// φ²'s floor (φ² = softplus(r) + floor).
    pub noise_floor: f64,
    /// The host's raw numbers and moments, written into the slot's current state before the
    /// evaluation: when the host changed them (an edge re-initialised or switched off).
    pub upload: Option<&'a HeldWeights>,
}

/// What one resident evaluation gives the host.
#[derive(Debug, Clone, PartialEq)]
pub struct ResidentEvaluation {
    /// Σ_t [(y_t − mean_t)² + var_t].
    pub misfit: f64,
    /// ‖∂L̂/∂Z‖² (+ ‖∂L̂/∂encoder‖² when it runs the encoder): those gradients stay on the
    /// device, which takes their Adam step.
    pub held_norm: f64,
    /// Without an encoder on the device, Σ_s ∂L̂/∂w_sn and Σ_s ∂L̂/∂w_sn ε_sn/(2√Σ_n) (b each),
    /// the draws' gradient ∂L̂/∂w_sn through the predictions and k_tt: q(w)'s gradients before
    /// KL(q(w)); with one, Σ_n KL(q(w_n) ‖ N(0, 1)) of the moments it formed.
    pub latent: HeldLatent,
    /// K_ZZ's factorisation: the jitter it took, or why it failed (then nothing else holds).
    pub jitter: Result<f64, CholeskyError>,
    /// KL(q(v) ‖ N(0, I)) = ½(tr S + mᵀm − M − log det S) of the q(v) evaluated.
    pub kl_inducing: f64,
    /// The natural step: its q(v) (and Z after its Adam step) waits in the slot until committed,
    /// or why P did not factorise.
    pub stepped: Result<(), CholeskyError>,
    /// The raw hyperparameters and φ² after the device's Adam step, with their moments (waiting
    /// in the slot with the stepped q(v)).
    pub parameters: HeldWeights,
    /// The q(v), Z and Z's moments evaluated, when the request asked for them.
    pub state: Option<ResidentState>,
}

/// The shapes of what a resident slot holds: q(v) of M inducing points, Z (M × D), q(w)'s encoder
/// of P weights when the device runs it, and the K raw numbers of the kernel's hyperparameters
/// and φ² (φ² last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateShape {
    pub m: usize,
    pub d: usize,
    pub encoder: usize,
    pub parameters: usize,
}

impl StateShape {
    /// The shape of a variable with Z (M × D), `encoder` held beside it, and `kernel`: K =
    /// `kernel.param_count()` + 1 (φ²).
    pub fn of(z: &DMatrix<f64>, encoder: Option<&Encoder>, kernel: &Kernel) -> Self {
        StateShape {
            m: z.nrows(),
            d: z.ncols(),
            encoder: encoder.map_or(0, Encoder::param_count),
            parameters: kernel.param_count() + 1,
        }
    }

    /// The values Adam steps on the device: Z's M·D, the encoder's P, the K hyperparameters.
    fn held(&self) -> usize {
        self.m * self.d + self.encoder + self.parameters
    }

    /// Where the hyperparameters start in each third of the held state.
    fn parameters_at(&self) -> usize {
        self.m * self.d + self.encoder
    }
}

/// Words of a slot's held state [p | m | v] (p = [Z (M × D, row-major) | the encoder's weights],
/// m and v Adam's moments of p; f32).
fn held_words(shape: StateShape) -> usize {
    3 * shape.held()
}

/// Words of a slot's q(v) state (`cholesky.wgsl`'s natural-step output): L_P, X_P, the status,
/// P, S, m, η₁, each value two words.
fn state_words(m: usize) -> usize {
    step_words(m)
}

/// Where each part of q(v)'s state starts, in double-float values.
struct StateOffsets {
    status: usize,
    p: usize,
    s: usize,
    mean: usize,
    eta: usize,
}

fn state_offsets(m: usize) -> StateOffsets {
    let status = 2 * m * m;
    let p = status + 4;
    let s = p + m * m;
    let mean = s + m * m;
    StateOffsets {
        status,
        p,
        s,
        mean,
        eta: mean + m,
    }
}

/// Usage of the device-side buffers of this module.
fn storage() -> wgpu::BufferUsages {
    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
}

/// `held_gradients.wgsl`'s parameter table for `kernel`: its mask (D), then (kind, input, part)
/// of each hyperparameter in [`Kernel::params_to_vec`]'s order (kind 0 θ^lin_j, 1 s^c, 2 θ^c_j,
/// 3 the rational-quadratic shape), as 32-bit words.
fn parameter_table(kernel: &Kernel) -> Vec<u8> {
    let d = kernel.dim();
    let mut records: Vec<[u32; 3]> = Vec::with_capacity(kernel.param_count());
    if kernel.linear.is_some() {
        records.extend((0..d).map(|j| [0, j as u32, 0]));
    }
    for (c, part) in kernel.stationary.iter().enumerate() {
        records.push([1, 0, c as u32]);
        records.extend((0..d).map(|j| [2, j as u32, c as u32]));
        if part.alpha.is_some() {
            records.push([3, 0, c as u32]);
        }
    }
    debug_assert_eq!(records.len(), kernel.param_count());
    let mut bytes = super::f32_bytes(kernel.mask.iter().copied());
    for word in records.iter().flatten() {
        bytes.extend(word.to_le_bytes());
    }
    bytes
}

/// Words of `held_gradients.wgsl`'s DERIVED for `kernel`: the kernel shaders' parameters
/// ([`parameter_words`]: θ̃^lin (D), the parts (P(D + 1)), a, c/φ², g_var, diag, g_var and c/φ²
/// in double-float), which the predictions read where the held passes write them.
fn derived_words(kernel: &Kernel) -> usize {
    parameter_words(kernel)
}

/// The byte of DERIVED where g_var and c/φ² in double-float start (the four words
/// `inducing.wgsl` reads as a slot's noise constants).
fn derived_noise_at(kernel: &Kernel) -> u64 {
    ((alpha_at(kernel) + 4) * 4) as u64
}

/// Values at the head of `held_gradients.wgsl`'s output: the misfit, the squared gradient of Z
/// and the encoder, Σ_n KL(q(w_n)) (df each).
const HEADER_WORDS: usize = 6;

/// Values of `held_gradients.wgsl`'s output for b rows: the header, q(w)'s sums (2b), the kernel
/// adjoint's W sums and the points' D column sums of squares (df each), then the held block's
/// gradient (∂Z, ∂encoder, ∂ of the raw hyperparameters): all but the header and q(w)'s sums
/// stay on the device.
fn gradient_room(layout: &ReadbackLayout, rows: usize, shape: StateShape) -> usize {
    HEADER_WORDS + 2 * rows + 2 * layout.width + 2 * shape.d + shape.held()
}

/// Values of it read back: the header, and q(w)'s sums when the host holds q(w).
fn gradient_words(rows: usize, shape: StateShape) -> usize {
    HEADER_WORDS + if shape.encoder > 0 { 0 } else { 2 * rows }
}

/// Values read back per request: the finished gradients ([`gradient_words`]), K_ZZ's status and
/// the step's (8 each), the KL terms (6), the stepped hyperparameters with their Adam moments
/// (3K), and q(v)'s and the held block's current states when asked for.
fn readback_words(shape: StateShape, rows: usize, read_current: bool) -> [usize; 7] {
    let (q, held) = if read_current {
        (state_words(shape.m), held_words(shape))
    } else {
        (0, 0)
    };
    [
        gradient_words(rows, shape),
        8,
        8,
        6,
        3 * shape.parameters,
        q,
        held,
    ]
}

/// Words a request reads back ([`readback_words`]), with its states when `read_current`.
fn readback_room(request: &ResidentRequest, read_current: bool) -> usize {
    let shape = StateShape::of(request.z, request.encoder, request.kernel);
    readback_words(shape, request.latent.eps.ncols(), read_current)
        .iter()
        .sum()
}

/// A factorisation of `cholesky.wgsl` one request needs, batched with the others' of its shape by
/// [`Gpu::record_batched`]: K_ZZ's (`constant` the relative jitter floor) or the natural step's
/// (`constant` γ), from `input` at byte `input_at` (the request's operand, as one slot of the
/// shader's input) into `output` at byte `output_at` (the request's factor or next state),
/// walking `ladder` (one slot's rungs).
#[derive(Clone)]
struct BatchedFactor {
    m: usize,
    constant: f64,
    ladder: Vec<u8>,
    input: wgpu::Buffer,
    input_at: u64,
    output: wgpu::Buffer,
    output_at: u64,
}

/// What one request's M × M algebra reads from and writes to its own buffers, for the passes that
/// run over all requests of its M at once ([`Gpu::plan_algebra`]).
struct SlotAlgebra {
    m: usize,
    /// q(v)'s current state (the slot's: P, S, m, η₁, L_P).
    current: wgpu::Buffer,
    /// K_ZZ's jitter: the floor relative to its mean diagonal and the ladder's rungs.
    relative_jitter: f64,
    ladder: Vec<u8>,
    /// The natural step's γ and where it goes (the slot's next q(v)).
    gamma: f64,
    next: wgpu::Buffer,
    /// The request's read-back buffer, and its bytes that take K_ZZ's status and the KL terms.
    readback: wgpu::Buffer,
    status_at: u64,
    kl_at: u64,
}

/// The buffers of a batch's predictions that its M × M algebra reads and writes in place
/// ([`Gpu::plan_algebra`]), each slot a stride after the last.
struct BatchShares {
    /// Evaluation points: K' (M × (T + M), column-major, `k_stride` words per slot) holds K_ZZ,
    /// then K̄_ZZ, after its first T · M words.
    t: usize,
    k: wgpu::Buffer,
    k_stride: usize,
    /// P = ÃÃᵀ's and [Ãg, Ãy]'s compensated planes (each slot's heads, then tails: 2M², 4M).
    p: wgpu::Buffer,
    g_alpha_ky: wgpu::Buffer,
    /// The derived parameters, g_var and c/φ² (double-float) `noise_at` words into each slot's
    /// `params_stride`.
    params: wgpu::Buffer,
    params_stride: usize,
    noise_at: usize,
    /// L⁻¹, S − I and [m | α] as the predictions read them (M², M², 2M per slot).
    operands: InducingOperands,
}

/// The sizes, in words per slot, of what a request's held passes read and write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeldSizes {
    /// Z, the encoder and the hyperparameters (a third of the held state [p | m | v]).
    held: usize,
    rows: usize,
    /// The minibatch's rows, the latent input [ε (T) | (μ_n, √Σ_n)], the gradients.
    x: usize,
    latent: usize,
    gradients: usize,
    /// finish.wgsl's output, the column pass's ∂U and the points ((T + M) × D each).
    finished: usize,
    points: usize,
    derived: usize,
    /// Where the encoder's weights start in p (and how many), the kernel adjoint's W.
    weights_at: usize,
    encoder: usize,
    width: usize,
    /// Where q(w)'s sums and the encoder's gradient sit in the gradients.
    latent_at: usize,
    gradient_at: usize,
}

/// What one request's held passes (`held_gradients.wgsl`, `encoder.wgsl`) read from and write to
/// its own buffers, for the passes that run over all requests of its shapes at once
/// ([`Gpu::plan_held`]).
struct SlotHeld {
    /// `held_gradients.wgsl`'s Dims words but the strides: the same for every member of a group.
    dims: [u32; 24],
    /// The encoder's layers ((fan-out, fan-in)) and KL(q(w))'s weight, when the device runs it.
    encoder: Option<(Vec<(usize, usize)>, f64)>,
    /// The parameter table, the hyperparameters' extra gradient and Adam's α_t (the request's;
    /// its latent column is in the predictions' slot words).
    table: Vec<u8>,
    extra: Vec<u8>,
    rate: f32,
    sizes: HeldSizes,
    /// The kernel's parts' kinds, and whether the minibatch is gathered from the held data:
    /// what else a batch's predictions need the same.
    kinds: Vec<u8>,
    gathered: bool,
    /// The slot's current and next held states.
    current: wgpu::Buffer,
    next: wgpu::Buffer,
    /// The read-back buffer, where the gradients' head goes in it, and its bytes.
    readback: (wgpu::Buffer, u64, u64),
}

impl SlotHeld {
    /// Whether this request's passes and `other`'s can run as one batch: the same Dims,
    /// encoder, KL weight, sizes, table length, kernel parts and source of the minibatch.
    fn groups_with(&self, other: &SlotHeld) -> bool {
        let encoder = |h: &SlotHeld| {
            h.encoder
                .as_ref()
                .map(|(shapes, scale)| (shapes.clone(), scale.to_bits()))
        };
        self.dims == other.dims
            && encoder(self) == encoder(other)
            && self.sizes == other.sizes
            && self.table.len() == other.table.len()
            && self.kinds == other.kinds
            && self.gathered == other.gathered
    }
}

/// The held passes over a batch ([`Gpu::plan_held`]) on its predictions' buffers, with the
/// copies between the requests' held states and the batch's.
struct GroupHeld<'g> {
    /// The held states in; the hyperparameters derived (where the predictions read them).
    derive_in: Vec<BufferCopy>,
    derive: Vec<Step<'g>>,
    /// The encoder's forward passes (q(w)'s moments where the points pass reads them).
    forward: Vec<Step<'g>>,
    /// The gradients, the encoder's backward passes, the sums and the Adam step; the next held
    /// states and the gradients' head out.
    finishing: Vec<Step<'g>>,
    finishing_out: Vec<BufferCopy>,
}

/// One request's own buffers and read-back ([`Gpu::prepare_resident`]), before its batch is
/// planned.
struct Prepared {
    pending: Pending,
    shape: StateShape,
    /// K' has T + M columns; K_ZZ starts after T · M words.
    t: usize,
    current: wgpu::Buffer,
    next: wgpu::Buffer,
    z_current: wgpu::Buffer,
    held: SlotHeld,
    /// The request's bytes of its read-back buffer that take K_ZZ's status and the KL terms.
    status_at: u64,
    kl_at: u64,
    /// (source, its first byte, where in the read-back buffer, bytes).
    copies: Vec<(wgpu::Buffer, u64, u64, u64)>,
}

/// One request planned ([`Gpu::encode_batches`]) and not yet recorded.
struct Encoded {
    pending: Pending,
    /// What the batched M × M algebra needs of this request.
    algebra: SlotAlgebra,
    /// (source, its first byte, where in the read-back buffer, bytes).
    copies: Vec<(wgpu::Buffer, u64, u64, u64)>,
}

/// The requests whose predictions and held passes run as one ([`SlotHeld::groups_with`]), each
/// pass one dispatch over the batch: in the phases [`Gpu::record_phases`] records them in.
struct Batch<'g> {
    /// The batch's scratch slot (the key of its buffers and bind groups).
    slot: usize,
    /// The minibatches gathered from the held data.
    gather: Vec<Step<'g>>,
    /// The evaluation points and K', the predictions (between the M × M algebra's first half
    /// and its second), the kernel's adjoint and the finished sums.
    front: Vec<Step<'g>>,
    middle: Vec<Step<'g>>,
    adjoint: Vec<Step<'g>>,
    /// The held passes on the batch's buffers.
    held: GroupHeld<'g>,
    /// Its requests (their places in the submission) and what its M × M algebra shares.
    members: Vec<usize>,
    shares: BatchShares,
}

/// The M × M algebra over a batch ([`Gpu::plan_algebra`]), in the order its passes run around
/// the predictions', with the copies between the requests' states and the group's.
struct GroupAlgebra<'g> {
    /// The group's scratch slot (the key of its buffers and bind groups).
    slot: usize,
    /// Before anything: q(v)'s current states into the group's.
    copies_in: Vec<BufferCopy>,
    /// K_ZZ widened for its factorisations.
    widen: Vec<Step<'g>>,
    /// K_ZZ's factorisations (one per member, batched by [`Gpu::record_batched`]).
    factors: Vec<BatchedFactor>,
    /// L, L⁻¹, S − I and [m | α] narrowed (the last three where the predictions read them).
    before: Vec<Step<'g>>,
    /// After the predictions: L̄, the Cholesky adjoint and K̄_ZZ, written after each slot's
    /// K̄_Zt.
    after: Vec<Step<'g>>,
    /// The natural steps' inputs, the steps (batched), the KL terms of the current states.
    natural_inputs: Vec<Step<'g>>,
    naturals: Vec<BatchedFactor>,
    kl_terms: Vec<Step<'g>>,
    /// K_ZZ's status and the KL terms into the members' read-back buffers.
    readback: Vec<BufferCopy>,
}

/// (source, its first byte, destination, its first byte, bytes).
type BufferCopy = (wgpu::Buffer, u64, wgpu::Buffer, u64, u64);

/// What the host keeps of an encoded request to decode it.
#[derive(Clone)]
struct Pending {
    layout: ReadbackLayout,
    /// The submission's read-back buffer (shared by its requests), the byte this request's
    /// values start at and how many words they take.
    readback: wgpu::Buffer,
    first: usize,
    words: usize,
}

/// Resident evaluations submitted and not yet read ([`Gpu::submit_resident`]).
#[must_use = "the evaluations are read by `finish`"]
pub struct SubmittedResident(Submitted<Pending>);

impl Readback for Pending {
    fn readback(&self) -> (&wgpu::Buffer, usize, usize) {
        (&self.readback, self.first, self.words * 4)
    }
}

impl SubmittedResident {
    /// The evaluations of `requests` (those submitted, in order) once the device has finished
    /// them (natively one blocking wait; in the browser the mapping resolves by itself).
    pub async fn finish(
        self,
        gpu: &Gpu,
        requests: &[ResidentRequest<'_>],
    ) -> Result<Vec<ResidentEvaluation>, GpuError> {
        Ok(requests
            .iter()
            .zip(self.0.read(gpu).await?)
            .map(|(request, (p, v))| decode(request, &p, &v))
            .collect())
    }
}

impl Gpu {
    /// Makes `host` the current state of resident slot `slot`: q(v) (its factor of P computed here
    /// in f64, for log det S), Z and Z's Adam moments, and the encoder's weights and moments when
    /// `host` has an encoder. The error is P failing to factorise (nothing is written).
    pub fn upload_state(&self, slot: usize, host: ResidentView) -> Result<(), CholeskyError> {
        let posterior = host.posterior;
        let m = posterior.len();
        let factor = cholesky_jittered(&posterior.precision, JitterPolicy::exactly(0.0))?;
        let l_inv = lower_inverse(&factor.l);
        let row_major = |a: &DMatrix<f64>| -> Vec<f64> {
            (0..m * m).map(|k| a[(k / m, k % m)]).collect::<Vec<f64>>()
        };
        let values = row_major(&factor.l)
            .into_iter()
            .chain(row_major(&l_inv))
            .chain([0.0; 4])
            .chain(row_major(&posterior.precision))
            .chain(row_major(&posterior.cov))
            .chain(posterior.mean.iter().copied())
            .chain(posterior.eta1.iter().copied());
        let bytes = two_word_bytes(values);
        debug_assert_eq!(bytes.len(), state_words(m) * 4);
        let d = host.z.ncols();
        assert_eq!(host.z.nrows(), m, "Z has M rows");
        assert_eq!(host.z_first.len(), m * d, "Z's first moments");
        assert_eq!(host.z_second.len(), m * d, "Z's second moments");
        let parameters = &host.parameters;
        assert!(
            parameters.first.len() == parameters.values.len()
                && parameters.second.len() == parameters.values.len(),
            "the hyperparameters' moments"
        );
        let weights = host.encoder.map(Encoder::params_to_vec).unwrap_or_default();
        assert_eq!(
            host.encoder_first.len(),
            weights.len(),
            "the encoder's moments"
        );
        assert_eq!(
            host.encoder_second.len(),
            weights.len(),
            "the encoder's moments"
        );
        // Z's order (column-major) → row-major, then the encoder's weights, then the raw
        // hyperparameters and φ², for each of p, m, v.
        let held_bytes = super::f32_bytes(
            [
                (host.z.as_slice(), &weights[..], &parameters.values[..]),
                (host.z_first, host.encoder_first, &parameters.first[..]),
                (host.z_second, host.encoder_second, &parameters.second[..]),
            ]
            .into_iter()
            .flat_map(|(z, e, p)| {
                (0..m * d)
                    .map(move |k| z[(k % d) * m + k / d])
                    .chain(e.iter().copied())
                    .chain(p.iter().copied())
            }),
        );
        let state_slot = RESIDENT_SLOTS + slot;
        self.resident_with("q current", state_slot, &bytes, storage());
        self.resident_with("held current", state_slot, &held_bytes, storage());
        Ok(())
    }

    /// The current state of resident slot `slot` (of `shape`), read back (blocking): q(v) in f64
    /// from double-float, Z, the encoder and their moments from float32.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_state(&self, slot: usize, shape: StateShape) -> Result<ResidentState, GpuError> {
        pollster::block_on(self.read_resident(slot, shape, StateChange::Keep))
    }

    /// The current state of resident slot `slot` after `change`, read back in one submission
    /// (natively one blocking wait; in the browser the mapping resolves by itself).
    async fn read_resident(
        &self,
        slot: usize,
        shape: StateShape,
        change: StateChange,
    ) -> Result<ResidentState, GpuError> {
        self.check_alive()?;
        let (q_words, z_words) = (state_words(shape.m), held_words(shape));
        let words = q_words + z_words;
        let slot = RESIDENT_SLOTS + slot;
        let mut encoder = self.device.create_command_encoder("state readback");
        self.record_change(&mut encoder, slot, shape, change);
        let current = self.resident("q current", slot, q_words * 4, storage());
        let z_current = self.resident("held current", slot, z_words * 4, storage());
        let readback = self.resident(
            "state readback",
            slot,
            words * 4,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        self.device.copy(
            &mut encoder,
            (&current, 0),
            (&readback, 0),
            (q_words * 4) as u64,
        );
        if z_words > 0 {
            self.device.copy(
                &mut encoder,
                (&z_current, 0),
                (&readback, (q_words * 4) as u64),
                (z_words * 4) as u64,
            );
        }
        let submission = self.device.submit(encoder);
        let mapping = self.request_mapping(&[(&readback, words * 4)]);
        #[cfg(not(target_arch = "wasm32"))]
        self.wait(submission)?;
        #[cfg(target_arch = "wasm32")]
        let _ = submission;
        let values = self.read_mapping(mapping).await?.pop().unwrap_or_default();
        if values.len() < words {
            return Err(GpuError::Readback(format!(
                "{} words of a resident state read back, {words} expected",
                values.len()
            )));
        }
        Ok(state_from(shape, &values))
    }

    /// Makes the last stepped state of each of `slots` (all of `shape`) its current one, in one
    /// submission that nothing waits for.
    pub fn commit_states(&self, slots: &[usize], shape: StateShape) -> Result<(), GpuError> {
        self.check_alive()?;
        let mut encoder = self.device.create_command_encoder("state commit");
        for &slot in slots {
            self.record_change(
                &mut encoder,
                RESIDENT_SLOTS + slot,
                shape,
                StateChange::Commit,
            );
        }
        let _ = self.device.submit(encoder);
        Ok(())
    }

    /// Records `change` of slot `slot`'s states (of `shape`) into `encoder`.
    fn record_change(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        slot: usize,
        shape: StateShape,
        change: StateChange,
    ) {
        for ((current, next, previous), bytes) in [
            (
                ("q current", "q next", "q previous"),
                state_words(shape.m) * 4,
            ),
            (
                ("held current", "held next", "held previous"),
                held_words(shape) * 4,
            ),
        ] {
            if bytes == 0 {
                continue;
            }
            let state = |role| self.resident(role, slot, bytes, storage());
            let (current, next, previous) = (state(current), state(next), state(previous));
            match change {
                StateChange::Keep => {}
                StateChange::Commit => {
                    self.device
                        .copy(encoder, (&current, 0), (&previous, 0), bytes as u64);
                    self.device
                        .copy(encoder, (&next, 0), (&current, 0), bytes as u64);
                }
                StateChange::Restore => {
                    self.device
                        .copy(encoder, (&previous, 0), (&current, 0), bytes as u64);
                }
            }
        }
    }

    /// Records `copies` into `encoder` (none of 0 bytes).
    fn record_copies(&self, encoder: &mut wgpu::CommandEncoder, copies: &[BufferCopy]) {
        for (source, first, destination, at, bytes) in copies {
            if *bytes > 0 {
                self.device
                    .copy(encoder, (source, *first), (destination, *at), *bytes);
            }
        }
    }

    /// The resident evaluations of `requests` in one submission, blocking until they are read.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn resident_evaluations(
        &self,
        requests: &[ResidentRequest],
    ) -> Result<Vec<ResidentEvaluation>, GpuError> {
        let submitted = self.submit_resident(requests)?;
        pollster::block_on(submitted.finish(self, requests))
    }

    /// Encodes and submits every request's evaluation and natural step in one submission and
    /// asks for the results to be mapped ([`SubmittedResident::finish`] reads them).
    ///
    /// Panics if a request's shapes disagree (x b × D, y b, draws S × b) or two requests name
    /// one slot.
    pub fn submit_resident(
        &self,
        requests: &[ResidentRequest],
    ) -> Result<SubmittedResident, GpuError> {
        let mut slots: Vec<usize> = requests.iter().map(|r| r.slot).collect();
        slots.sort_unstable();
        slots.dedup();
        assert_eq!(slots.len(), requests.len(), "one request per resident slot");
        self.submit_all("resident evaluations", |encoder| {
            let (encoded, batches) = self.encode_batches(encoder, requests)?;
            self.record_phases(encoder, &encoded, &batches)?;
            Ok(encoded.into_iter().map(|e| e.pending).collect())
        })
        .map(SubmittedResident)
    }

    /// Records the batches' and groups' passes phase by phase: each batch's hyperparameters
    /// derived, minibatch gathered, encoder and head (the points, K'); then, over all requests
    /// of one M at once ([`Gpu::plan_algebra`]), K_ZZ widened, factorised
    /// ([`Gpu::record_batched`]) and narrowed with q(v)'s operands; each batch's predictions;
    /// the M × M adjoint over each group; each batch's way back (the kernel's adjoint, the
    /// gradients, the Adam step); the natural steps' inputs, the steps and the KL terms over
    /// each group; then the read-back copies.
    fn record_phases(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        encoded: &[Encoded],
        batches: &[Batch],
    ) -> Result<(), GpuError> {
        let record = |encoder: &mut wgpu::CommandEncoder, label, slot, steps: &[Step]| {
            self.record_steps(encoder, label, slot, &steps.iter().collect::<Vec<_>>());
        };
        // A group's passes between the copies that bring its members' buffers in and out.
        let staged = |encoder: &mut wgpu::CommandEncoder,
                      label,
                      slot,
                      copies_in: &[BufferCopy],
                      steps: &[Step],
                      copies_out: &[BufferCopy]| {
            self.record_copies(encoder, copies_in);
            record(encoder, label, slot, steps);
            self.record_copies(encoder, copies_out);
        };
        let groups = self.plan_algebra(encoded, batches)?;
        for b in batches {
            let h = &b.held;
            staged(
                encoder,
                "derived parameters",
                b.slot,
                &h.derive_in,
                &h.derive,
                &[],
            );
            record(encoder, "gather", b.slot, &b.gather);
            record(encoder, "encoder forward", b.slot, &h.forward);
            record(encoder, "resident front", b.slot, &b.front);
        }
        for g in &groups {
            staged(encoder, "widen", g.slot, &g.copies_in, &g.widen, &[]);
        }
        let factors: Vec<BatchedFactor> = groups.iter().flat_map(|g| g.factors.clone()).collect();
        self.record_batched(encoder, "kzz", &factors)?;
        for g in &groups {
            record(encoder, "narrowed", g.slot, &g.before);
        }
        for b in batches {
            record(encoder, "predictions", b.slot, &b.middle);
        }
        for g in &groups {
            record(encoder, "m x m adjoint", g.slot, &g.after);
        }
        for b in batches {
            record(encoder, "resident adjoint", b.slot, &b.adjoint);
            let h = &b.held;
            staged(
                encoder,
                "held gradients",
                b.slot,
                &[],
                &h.finishing,
                &h.finishing_out,
            );
        }
        for g in &groups {
            record(encoder, "natural inputs", g.slot, &g.natural_inputs);
        }
        let steps: Vec<BatchedFactor> = groups.iter().flat_map(|g| g.naturals.clone()).collect();
        self.record_batched(encoder, "natural step", &steps)?;
        for g in &groups {
            record(encoder, "kl terms", g.slot, &g.kl_terms);
            self.record_copies(encoder, &g.readback);
        }
        for e in encoded {
            for (source, first, offset, bytes) in &e.copies {
                self.device.copy(
                    encoder,
                    (source, *first),
                    (&e.pending.readback, *offset),
                    *bytes,
                );
            }
        }
        Ok(())
    }

    /// The held passes of a batch (`members`, all of one [`SlotHeld::groups_with`] another) in
    /// its scratch slot `slot`: `held_gradients.wgsl`'s and `encoder.wgsl`'s passes each one
    /// dispatch over the batch, on the batch's prediction buffers (`plan`: the rows, the latent
    /// input, the finished sums, ∂U, the points, the derived parameters and the slots' words)
    /// and the group's held states, with each request's held state copied in and its next held
    /// state and gradients' head copied out.
    fn plan_held<'g>(
        &'g self,
        slot: usize,
        members: &[&SlotHeld],
        plan: &PredictionPlan<'g>,
    ) -> Result<GroupHeld<'g>, GpuError> {
        let first = members[0];
        let z = first.sizes;
        let n = members.len();
        let strides = plan.strides;
        debug_assert_eq!(
            [z.x, z.latent, z.finished, z.points, z.derived],
            [
                strides.x,
                strides.latent,
                strides.finished,
                strides.points,
                strides.params
            ],
            "the held passes read the predictions' buffers at their strides"
        );
        let buffer = |role, per_slot: usize| {
            self.check_binding("the held passes' buffers", (n * per_slot * 4) as u64)?;
            Ok::<_, GpuError>(self.resident(role, slot, (n * per_slot).max(1) * 4, storage()))
        };
        let current = buffer("held group current", 3 * z.held)?;
        let next = buffer("held group next", 3 * z.held)?;
        let gradients = buffer("held group gradients", z.gradients)?;
        let (x, latent, finished) = (&plan.x, &plan.latent, &plan.finished);
        let (cols, points, derived, steps) =
            (&plan.cols, &plan.points, &plan.params, &plan.slot_words);
        let spare = self.resident("held group spare", slot, 4, storage());
        let concat = |part: fn(&SlotHeld) -> &[u8]| -> Vec<u8> {
            members.iter().flat_map(|h| part(h).to_vec()).collect()
        };
        let table =
            self.resident_constant("held group table", slot, &concat(|h| &h.table), storage());
        let extra =
            self.resident_constant("held group extra", slot, &concat(|h| &h.extra), storage());
        let (table_w, extra_w) = (first.table.len() / 4, first.extra.len() / 4);
        let dims = |role: &'static str, strides: [usize; 4]| {
            let mut words = first.dims.to_vec();
            words.extend(strides.map(|w| w as u32));
            self.resident_constant(
                role,
                slot,
                &super::uniform_words(&words),
                wgpu::BufferUsages::UNIFORM,
            )
        };
        let pass = |pass: HeldPass,
                    dims: wgpu::Buffer,
                    buffers: [&wgpu::Buffer; 5],
                    groups: (u32, u32, u32)|
         -> Result<Step<'g>, GpuError> {
            self.check_groups("the held passes", groups)?;
            Ok((
                &self.pipelines.held_gradients[pass as usize],
                std::iter::once(&dims)
                    .chain(buffers)
                    .chain([steps])
                    .cloned()
                    .collect(),
                groups,
            ))
        };
        let slots = n as u32;
        let one = (1, slots, 1);
        let d = first.dims[3] as usize;
        let m = first.dims[0] as usize;
        let inputs_groups = (
            ((m * d).max(z.rows).max(2) as u32).div_ceil(GROUP),
            slots,
            1,
        );
        let held_groups = ((z.held.max(1) as u32).div_ceil(GROUP), slots, 1);
        // The W kernel sums, the squared gradient of Z and the encoder, Σ KL(q(w)) and the
        // points' D column sums of squares.
        let sums_groups = ((z.width + 2 + d) as u32, slots, 1);
        let derive = vec![pass(
            HeldPass::DeriveParameters,
            dims("held dims: derive", [3 * z.held, table_w, 0, z.derived]),
            [&current, &table, &spare, derived, &spare],
            one,
        )?];
        let encoder = match &first.encoder {
            Some((shapes, scale)) => Some(self.plan_encoder(
                slot,
                shapes,
                z.rows,
                first.dims[2] as usize,
                *scale,
                &EncoderBuffers {
                    held: &current,
                    held_stride: 3 * z.held,
                    weights_at: z.weights_at,
                    x,
                    x_stride: z.x,
                    latent,
                    latent_stride: z.latent,
                    gradients: &gradients,
                    gradients_stride: z.gradients,
                    latent_at: z.latent_at,
                    gradient_at: z.gradient_at,
                },
                n,
            )?),
            None => None,
        };
        let (forward, backward) = match encoder {
            Some(plan) => (plan.forward, plan.backward),
            None => (Vec::new(), Vec::new()),
        };
        let finishing: Vec<Step> = std::iter::once(pass(
            HeldPass::InputGradients,
            dims(
                "held dims: inputs",
                [z.finished, z.points, z.latent, z.gradients],
            ),
            [finished, cols, latent, &gradients, derived],
            inputs_groups,
        )?)
        .chain(backward)
        .chain([
            pass(
                HeldPass::KernelSums,
                dims(
                    "held dims: sums",
                    [z.finished, z.latent, z.points, z.gradients],
                ),
                [finished, latent, points, &gradients, derived],
                sums_groups,
            )?,
            pass(
                HeldPass::ParameterGradients,
                dims(
                    "held dims: parameters",
                    [3 * z.held, table_w, extra_w, z.gradients],
                ),
                [&current, &table, &extra, &gradients, derived],
                one,
            )?,
            pass(
                HeldPass::AdamHeld,
                dims("held dims: adam", [3 * z.held, z.gradients, 0, 3 * z.held]),
                [&current, &gradients, &spare, &next, derived],
                held_groups,
            )?,
        ])
        .collect();
        let bytes = |words: usize| (words * 4) as u64;
        let mut group = GroupHeld {
            derive_in: Vec::new(),
            derive,
            forward,
            finishing,
            finishing_out: Vec::new(),
        };
        for (k, h) in members.iter().enumerate() {
            let at = |per_slot: usize| bytes(k * per_slot);
            group.derive_in.push((
                h.current.clone(),
                0,
                current.clone(),
                at(3 * z.held),
                bytes(3 * z.held),
            ));
            let (readback, offset, length) = &h.readback;
            group.finishing_out.extend([
                (
                    next.clone(),
                    at(3 * z.held),
                    h.next.clone(),
                    0,
                    bytes(3 * z.held),
                ),
                (
                    gradients.clone(),
                    at(z.gradients),
                    readback.clone(),
                    *offset,
                    *length,
                ),
            ]);
        }
        Ok(group)
    }

    /// Plans the M × M algebra of each batch (`inducing.wgsl`: each pass one dispatch over the
    /// batch's slots, the dispatch's y the slot; the products a batch of the GEMM), reading K_ZZ,
    /// P, [Ãg, Ãy] and the noise constants from the batch's buffers and writing the operands and
    /// K̄_ZZ into them; q(v)'s states copied into the group's buffers.
    fn plan_algebra<'g>(
        &'g self,
        encoded: &[Encoded],
        batches: &[Batch],
    ) -> Result<Vec<GroupAlgebra<'g>>, GpuError> {
        batches
            .iter()
            .enumerate()
            .map(|(g, batch)| {
                let members: Vec<&SlotAlgebra> =
                    batch.members.iter().map(|&k| &encoded[k].algebra).collect();
                let m = members[0].m;
                self.plan_group(RESIDENT_GROUP + g, m, &members, &batch.shares)
            })
            .collect()
    }

    /// One batch's M × M buffers, passes and copies ([`GroupAlgebra`]) for `members` (all of
    /// size M = `m`), in group scratch slot `slot`, on the batch's `shares`.
    fn plan_group<'g>(
        &'g self,
        slot: usize,
        m: usize,
        members: &[&SlotAlgebra],
        shares: &BatchShares,
    ) -> Result<GroupAlgebra<'g>, GpuError> {
        let n = members.len();
        let mm = m * m;
        let at = state_offsets(m);
        let words = |per_slot: usize| n * per_slot;
        for (what, values) in [
            ("q(v)'s states", words(state_words(m))),
            ("K_ZZ's factors", words(output_words(m))),
            ("the natural steps' inputs", words(2 * (2 * mm + 2 * m))),
        ] {
            self.check_binding(what, (values * 4) as u64)?;
        }
        let square_groups = ((mm.max(1) as u32).div_ceil(GROUP), n as u32, 1);
        let vector_groups = ((m.max(1) as u32).div_ceil(GROUP), n as u32, 1);
        self.check_groups("the M × M passes", square_groups)?;
        let buffer =
            |role, per_slot: usize| self.resident(role, slot, words(per_slot) * 4, storage());
        let state = buffer("group q(v)", state_words(m));
        let gram_in = buffer("group kzz (df)", 2 * mm);
        let kzz = buffer("group kzz factor", output_words(m));
        let l_f = buffer("group l (f32)", mm);
        // The batch's: K', the operands, the products' planes and the derived parameters.
        let BatchShares {
            t,
            k,
            k_stride,
            p,
            g_alpha_ky,
            params: noise,
            params_stride,
            noise_at,
            operands:
                InducingOperands {
                    l_inv,
                    s_minus_i,
                    q_mean,
                },
        } = shares;
        let (t, k_stride) = (*t, *k_stride);
        let (w_a, w_b, p_full) = (
            buffer("group w a", mm),
            buffer("group w b", mm),
            buffer("group p full", mm),
        );
        let natural_in = buffer("group natural step inputs", 2 * (2 * mm + 2 * m));
        let kl = buffer("group kl terms", 6);
        let spare = self.resident("group spare", slot, 4, storage());

        // inducing.wgsl's Dims: M, K_ZZ's column offset, the source's offset, the flags, and
        // each binding's words per slot.
        let dims =
            |role: &'static str, t: usize, offset: usize, flags: u32, strides: [usize; 4]| {
                let [a, b, c, d] = strides.map(|w| w as u32);
                self.resident_constant(
                    role,
                    slot,
                    &super::uniform_words(&[
                        m as u32,
                        t as u32,
                        offset as u32,
                        flags,
                        a,
                        b,
                        c,
                        d,
                        1.0f32.to_bits(),
                        *noise_at as u32,
                        *params_stride as u32,
                        0,
                    ]),
                    wgpu::BufferUsages::UNIFORM,
                )
            };
        let glue = |which: Glue, dims: wgpu::Buffer, buffers: [&wgpu::Buffer; 4], groups| {
            let bound: Vec<wgpu::Buffer> = std::iter::once(dims)
                .chain(buffers.iter().map(|&b| b.clone()))
                .chain([noise.clone()])
                .collect();
            (&self.pipelines.inducing[which as usize], bound, groups)
        };
        let (state_w, factor_w) = (state_words(m), output_words(m));
        let widen = vec![glue(
            Glue::WidenGram,
            dims("glue: widen", t, 0, 0, [k_stride, 0, 0, 2 * mm]),
            [k, &spare, &spare, &gram_in],
            square_groups,
        )];
        let before = vec![
            glue(
                Glue::NarrowMatrix,
                dims("glue: l", 0, 0, 0, [factor_w, 0, 0, mm]),
                [&kzz, &spare, &spare, &l_f],
                square_groups,
            ),
            glue(
                Glue::NarrowMatrix,
                dims("glue: l_inv", 0, mm, 0, [factor_w, 0, 0, mm]),
                [&kzz, &spare, &spare, l_inv],
                square_groups,
            ),
            glue(
                Glue::NarrowMatrix,
                dims("glue: s - i", 0, at.s, 1, [state_w, 0, 0, mm]),
                [&state, &spare, &spare, s_minus_i],
                square_groups,
            ),
            glue(
                Glue::MeanAlpha,
                dims("glue: m", 0, at.mean, 0, [state_w, factor_w, 0, 2 * m]),
                [&state, &kzz, &spare, q_mean],
                vector_groups,
            ),
        ];
        // L̄, the Cholesky adjoint, K̄_ZZ (products a batch of the group's M × M matrices).
        let product = |(op_a, op_b): (super::Op, super::Op)| {
            super::gemm::Product::new((m, m, m), op_a, op_b, false, n, super::Accumulation::Single)
        };
        use super::Op::{AsIs, Transposed};
        let as_is = product((AsIs, AsIs));
        let t_as_is = product((Transposed, AsIs));
        for groups in [as_is.groups, as_is.sum_groups()] {
            self.check_groups("the M × M products", groups)?;
        }
        let uniform = wgpu::BufferUsages::UNIFORM;
        let as_is_dims = self.resident_constant("m x m dims", slot, &as_is.dims, uniform);
        let t_as_is_dims = self.resident_constant("m' x m dims", slot, &t_as_is.dims, uniform);
        // At large M the products' 64 × 64 blocks are too few for a large GPU: split along the
        // inner dimension (one buffer of partial planes for all five, used in turn).
        let square_parts = as_is.reduced().then(|| {
            (
                self.resident(
                    "m x m partial sums",
                    slot,
                    as_is.output_words() * 4,
                    storage(),
                ),
                self.resident_constant("m x m split sums", slot, &as_is.sum_dims(), uniform),
            )
        });
        let gemm = |dims: &wgpu::Buffer, a: &wgpu::Buffer, b: &wgpu::Buffer, c: &wgpu::Buffer| {
            as_is.steps(
                &self.pipelines,
                dims,
                [a, b, c],
                square_parts.as_ref().map(|(p, s)| (p, s)),
            )
        };
        let after: Vec<Step> = [
            vec![glue(
                Glue::MirrorP,
                dims("glue: p", 0, 0, 0, [2 * mm, 0, 0, mm]),
                [p, &spare, &spare, &p_full],
                square_groups,
            )],
            gemm(&as_is_dims, s_minus_i, &p_full, &w_a),
            gemm(&t_as_is_dims, l_inv, &w_a, &w_b),
            vec![glue(
                Glue::LBar,
                dims("glue: l bar", 0, 0, 0, [2 * m, 4 * m, mm, mm]),
                [q_mean, g_alpha_ky, &w_b, &w_a],
                square_groups,
            )],
            gemm(&t_as_is_dims, &l_f, &w_a, &w_b),
            vec![glue(
                Glue::Phi,
                dims("glue: phi", 0, 0, 0, [0, 0, 0, mm]),
                [&spare, &spare, &spare, &w_b],
                square_groups,
            )],
            gemm(&as_is_dims, &w_b, l_inv, &w_a),
            gemm(&t_as_is_dims, l_inv, &w_a, &w_b),
            vec![glue(
                Glue::SymmetriseInto,
                dims("glue: k bar", t, 0, 0, [mm, 0, 0, k_stride]),
                [&w_b, &spare, &spare, k],
                square_groups,
            )],
        ]
        .into_iter()
        .flatten()
        .collect();
        let natural_inputs = vec![glue(
            Glue::NaturalInputs,
            dims(
                "glue: natural inputs",
                0,
                at.p,
                0,
                [state_w, 2 * mm, 4 * m, 2 * (2 * mm + 2 * m)],
            ),
            [&state, p, g_alpha_ky, &natural_in],
            square_groups,
        )];
        let kl_terms = vec![glue(
            Glue::KlTerms,
            dims("glue: kl", 0, 0, 0, [state_w, 0, 0, 6]),
            [&state, &spare, &spare, &kl],
            (1, n as u32, 1),
        )];

        // Each member's share of the group's buffers, at its place z.
        let bytes = |words: usize| (words * 4) as u64;
        let share = |z: usize, per_slot: usize| bytes(z * per_slot);
        let mut group = GroupAlgebra {
            slot,
            copies_in: Vec::new(),
            widen,
            factors: Vec::new(),
            before,
            after,
            natural_inputs,
            naturals: Vec::new(),
            kl_terms,
            readback: Vec::new(),
        };
        for (z, a) in members.iter().enumerate() {
            group.copies_in.push((
                a.current.clone(),
                0,
                state.clone(),
                share(z, state_w),
                bytes(state_w),
            ));
            group.factors.push(BatchedFactor {
                m,
                constant: a.relative_jitter,
                ladder: a.ladder.clone(),
                input: gram_in.clone(),
                input_at: share(z, 2 * mm),
                output: kzz.clone(),
                output_at: share(z, factor_w),
            });
            group.naturals.push(BatchedFactor {
                m,
                constant: a.gamma,
                ladder: ladder_bytes(JitterPolicy::exactly(0.0), 1),
                input: natural_in.clone(),
                input_at: share(z, 2 * (2 * mm + 2 * m)),
                output: a.next.clone(),
                output_at: 0,
            });
            group.readback.extend([
                (
                    kzz.clone(),
                    share(z, factor_w) + bytes(4 * mm),
                    a.readback.clone(),
                    a.status_at,
                    bytes(8),
                ),
                (
                    kl.clone(),
                    share(z, 6),
                    a.readback.clone(),
                    a.kl_at,
                    bytes(6),
                ),
            ]);
        }
        Ok(group)
    }

    /// Records `jobs` (all of one kind: `what` is "kzz" for K_ZZ's factorisation, else the
    /// natural step) as few batches of `cholesky.wgsl`'s passes as their shapes allow: the jobs
    /// with the same M and the same uniform constant (the jitter floor, or γ) go in one batch
    /// (`cholesky::factor_passes`: every pass over all of the batch's matrices, the
    /// factorisation blocked), their inputs copied into the batch's buffer and their outputs copied back, in as
    /// many pieces as the storage binding's limit needs.
    fn record_batched(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        what: &'static str,
        jobs: &[BatchedFactor],
    ) -> Result<(), GpuError> {
        let natural = what != "kzz";
        let job = if natural {
            FactorJob::NaturalStep
        } else {
            FactorJob::Factor
        };
        let mut groups: Vec<(usize, u64, Vec<usize>)> = Vec::new();
        for (k, job) in jobs.iter().enumerate() {
            let key = (job.m, job.constant.to_bits());
            match groups.iter_mut().find(|(m, c, _)| (*m, *c) == key) {
                Some(group) => group.2.push(k),
                None => groups.push((key.0, key.1, vec![k])),
            }
        }
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        let mut batch = 0;
        for (m, constant, members) in groups {
            let (in_bytes, out_bytes) = if natural {
                (2 * (2 * m * m + 2 * m) * 4, step_words(m) * 4)
            } else {
                (2 * m * m * 4, output_words(m) * 4)
            };
            let per_dispatch = (limit / out_bytes.max(1) as u64).clamp(1, 65_535) as usize;
            for piece in members.chunks(per_dispatch) {
                let slot = RESIDENT_BATCH + batch;
                batch += 1;
                let n = piece.len();
                let (label_in, label_out, label_dims, label_ladder) = if natural {
                    (
                        "natural batch in",
                        "natural batch out",
                        "natural batch dims",
                        "natural batch ladder",
                    )
                } else {
                    (
                        "kzz batch in",
                        "kzz batch out",
                        "kzz batch dims",
                        "kzz batch ladder",
                    )
                };
                // Jobs that already lie one after another from the start of one buffer (a
                // group's K_ZZ and its factors, its natural steps' inputs) are bound there;
                // others are copied into the batch's own buffers and out of them.
                let in_place = |place: fn(&BatchedFactor) -> (&wgpu::Buffer, u64), bytes: usize| {
                    let (first, _) = place(&jobs[piece[0]]);
                    piece.iter().enumerate().all(|(i, &k)| {
                        let (buffer, at) = place(&jobs[k]);
                        buffer == first && at == (i * bytes) as u64
                    })
                };
                let input_in_place = in_place(|j| (&j.input, j.input_at), in_bytes);
                let output_in_place = in_place(|j| (&j.output, j.output_at), out_bytes);
                let input = if input_in_place {
                    jobs[piece[0]].input.clone()
                } else {
                    self.resident(label_in, slot, n * in_bytes, storage())
                };
                let output = if output_in_place {
                    jobs[piece[0]].output.clone()
                } else {
                    self.resident(label_out, slot, n * out_bytes, storage())
                };
                self.check_binding("a batch of factorisations", (n * out_bytes) as u64)?;
                let constant = f64::from_bits(constant);
                let (gamma, floor) = if natural {
                    (constant, 0.0)
                } else {
                    (0.0, constant)
                };
                let dims = self.resident_constant(
                    label_dims,
                    slot,
                    &dims_bytes(m, n, job, gamma, floor),
                    wgpu::BufferUsages::UNIFORM,
                );
                let ladder: Vec<u8> = piece.iter().flat_map(|&k| jobs[k].ladder.clone()).collect();
                let ladder = self.resident_constant(label_ladder, slot, &ladder, storage());
                for (i, &k) in piece.iter().enumerate().filter(|_| !input_in_place) {
                    let bytes = in_bytes as u64;
                    if bytes > 0 {
                        self.device.copy(
                            encoder,
                            (&jobs[k].input, jobs[k].input_at),
                            (&input, i as u64 * bytes),
                            bytes,
                        );
                    }
                }
                let bound = vec![dims, input, ladder, output.clone()];
                let passes = factor_passes(&self.pipelines.cholesky, job, m, n);
                for (_, groups) in &passes {
                    self.check_groups("a batch of factorisations", *groups)?;
                }
                let steps: Vec<Step> = passes
                    .into_iter()
                    .map(|(pipeline, groups)| (pipeline, bound.clone(), groups))
                    .collect();
                self.record_steps(encoder, what, slot, &steps.iter().collect::<Vec<_>>());
                for (i, &k) in piece.iter().enumerate().filter(|_| !output_in_place) {
                    let bytes = out_bytes as u64;
                    if bytes > 0 {
                        self.device.copy(
                            encoder,
                            (&output, i as u64 * bytes),
                            (&jobs[k].output, jobs[k].output_at),
                            bytes,
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// Prepares every request ([`Gpu::prepare_resident`]), puts those whose passes can run as
    /// one in batches ([`SlotHeld::groups_with`]; as many per batch as the storage binding's
    /// limit allows) and plans each batch's predictions ([`Gpu::plan_predictions`]), gather and
    /// held passes ([`Gpu::plan_held`]) over its slots, with Z copied from each request's held
    /// state into the batch's buffers.
    fn encode_batches<'g>(
        &'g self,
        encoder: &mut wgpu::CommandEncoder,
        requests: &[ResidentRequest],
    ) -> Result<(Vec<Encoded>, Vec<Batch<'g>>), GpuError> {
        // One read-back buffer for the submission, the requests' values one after another (so
        // that one mapping reads them all, and no more), made with room for every request's
        // states whether or not they are read this time (so that it is made once).
        let room: usize = requests.iter().map(|r| readback_room(r, true)).sum();
        let readback = self.resident(
            "resident readback",
            RESIDENT_SCRATCH,
            room * 4,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut first = 0;
        let mut prepared = Vec::with_capacity(requests.len());
        for (position, request) in requests.iter().enumerate() {
            prepared.push(self.prepare_resident(encoder, position, request, (&readback, first))?);
            first += readback_room(request, request.read_current) * 4;
        }
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        // Each batch's first member, in order of appearance; then its members.
        let mut leaders: Vec<usize> = Vec::new();
        for (k, p) in prepared.iter().enumerate() {
            if !leaders
                .iter()
                .any(|&l| prepared[l].held.groups_with(&p.held))
            {
                leaders.push(k);
            }
        }
        let mut pieces: Vec<Vec<usize>> = Vec::new();
        for leader in leaders {
            let members: Vec<usize> = (0..prepared.len())
                .filter(|&k| prepared[leader].held.groups_with(&prepared[k].held))
                .collect();
            let first = &prepared[leader];
            let (z, m, t) = (first.held.sizes, first.shape.m, first.t);
            let layout = first.pending.layout;
            // The largest of a slot's shares of the batch's buffers and of its M × M group's.
            let largest = [
                3 * z.held,
                z.gradients,
                z.finished,
                z.points,
                m * (t + m),
                layout.chunks * m * layout.width,
                state_words(m),
                output_words(m),
                2 * (2 * m * m + 2 * m),
            ]
            .into_iter()
            .max()
            .unwrap_or(1);
            let capacity = (limit / (largest.max(1) * 4) as u64).max(1) as usize;
            pieces.extend(members.chunks(capacity).map(<[usize]>::to_vec));
        }
        let mut encoded: Vec<Option<Encoded>> = (0..requests.len()).map(|_| None).collect();
        let mut batches = Vec::with_capacity(pieces.len());
        for (g, members) in pieces.iter().enumerate() {
            let slot = RESIDENT_HELD + g;
            let first = &requests[members[0]];
            let m = first.z.nrows();
            let n = members.len();
            let square = |role| self.resident(role, slot, (n * m * m).max(1) * 4, storage());
            // The predictions' operands, narrowed into them by the batch's M × M passes
            // (`plan_group`).
            let operands = InducingOperands {
                l_inv: square("l_inv (f32)"),
                s_minus_i: square("s - i (f32)"),
                q_mean: self.resident("m and alpha (f32)", slot, (2 * n * m).max(1) * 4, storage()),
            };
            let inputs: Vec<PointInputs> = members
                .iter()
                .map(|&k| {
                    let request = &requests[k];
                    PointInputs {
                        kernel: request.kernel,
                        z: request.z,
                        x: request.x,
                        y: request.y,
                        latent: request.latent,
                        upload_z: false,
                        latent_on_device: request.encoder.is_some(),
                        rows_on_device: request.rows.is_some(),
                        parameters_on_device: true,
                        noise: request.noise,
                        c: request.c,
                    }
                })
                .collect();
            // The held passes read Adam's step size and φ²'s floor beside each slot's latent
            // column.
            let rates: Vec<[u32; 2]> = members
                .iter()
                .map(|&k| {
                    let floor = requests[k].parameters.noise_floor as f32;
                    [prepared[k].held.rate.to_bits(), floor.to_bits()]
                })
                .collect();
            let plan = self.plan_predictions(slot, &inputs, &rates, &operands, true)?;
            let strides = plan.strides;
            let gather = match members
                .iter()
                .map(|&k| requests[k].rows)
                .collect::<Option<Vec<&[usize]>>>()
            {
                Some(rows) => {
                    self.plan_gather(slot, &rows, [&plan.x, &plan.y, &plan.slot_words])?
                }
                None => Vec::new(),
            };
            let bytes = |words: usize| (words * 4) as u64;
            for (place, &k) in members.iter().enumerate() {
                let p = &prepared[k];
                let request = &requests[k];
                debug_assert_eq!(
                    derived_noise_at(request.kernel),
                    derived_noise_at(first.kernel),
                    "one kernel structure per batch"
                );
                // Z comes from the slot's current held state, not from the host: into the
                // points after the slot's T (the kernel reads the last M points as Z).
                let z_words = strides.z;
                if z_words > 0 {
                    let (points, at) = plan.z_place(place);
                    self.device
                        .copy(encoder, (&p.z_current, 0), (points, at), bytes(z_words));
                }
                encoded[k] = Some(Encoded {
                    pending: p.pending.clone(),
                    algebra: SlotAlgebra {
                        m,
                        current: p.current.clone(),
                        relative_jitter: request.relative_jitter,
                        ladder: ladder_bytes(request.jitter, 1),
                        gamma: request.gamma,
                        next: p.next.clone(),
                        readback: p.pending.readback.clone(),
                        status_at: p.status_at,
                        kl_at: p.kl_at,
                    },
                    copies: p.copies.clone(),
                });
            }
            let held: Vec<&SlotHeld> = members.iter().map(|&k| &prepared[k].held).collect();
            let held = self.plan_held(slot, &held, &plan)?;
            debug_assert_eq!(
                strides.operands,
                [m * m, m * m, 2 * m],
                "the M × M passes read the operands"
            );
            debug_assert_eq!(
                [strides.p, strides.g_alpha_ky],
                [2 * m * m, 4 * m],
                "and the products' planes at these strides"
            );
            let shares = BatchShares {
                t: first.latent.eps.len(),
                k: plan.k.clone(),
                k_stride: strides.k,
                p: plan.p.clone(),
                g_alpha_ky: plan.g_alpha_ky.clone(),
                params: plan.params.clone(),
                params_stride: strides.params,
                noise_at: derived_noise_at(first.kernel) as usize / 4,
                operands,
            };
            batches.push(Batch {
                slot,
                gather,
                front: plan.front,
                middle: plan.middle,
                adjoint: plan.back,
                held,
                members: members.clone(),
                shares,
            });
        }
        let encoded = encoded
            .into_iter()
            .map(|e| e.expect("every request is in a batch"))
            .collect();
        Ok((encoded, batches))
    }

    /// Records one request's state change and the host's hyperparameters (when it changed
    /// them) into `encoder`, and lays out its read-back ([`Prepared`]).
    fn prepare_resident(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        position: usize,
        request: &ResidentRequest,
        (readback, first): (&wgpu::Buffer, usize),
    ) -> Result<Prepared, GpuError> {
        let state_slot = RESIDENT_SLOTS + request.slot;
        let slot = RESIDENT_SCRATCH + position;
        let (m, d) = request.z.shape();
        let shape = StateShape::of(request.z, request.encoder, request.kernel);
        assert_eq!(
            request.parameters.extra.len() + 1,
            shape.parameters,
            "one graph gradient per kernel hyperparameter"
        );
        let (samples, rows) = request.latent.eps.shape();
        let t = samples * rows;
        let mm = m * m;
        for (what, values) in [
            ("q(v)'s state", state_words(m)),
            ("K_ZZ's factor", output_words(m)),
            ("the natural step's inputs", 2 * (2 * mm + 2 * m)),
        ] {
            self.check_binding(what, (values * 4) as u64)?;
        }
        let square_groups = ((mm.max(1) as u32).div_ceil(GROUP), 1, 1);
        self.check_groups("the M × M passes", square_groups)?;
        self.record_change(encoder, state_slot, shape, request.before);
        let words = state_words(m) * 4;
        let current = self.resident("q current", state_slot, words, storage());
        let next = self.resident("q next", state_slot, words, storage());
        let z_words = held_words(shape) * 4;
        self.check_binding("the held state", z_words as u64)?;
        let z_current = self.resident("held current", state_slot, z_words, storage());
        let z_next = self.resident("held next", state_slot, z_words, storage());
        // The host's hyperparameters, when it changed them, over the current ones (after the
        // state change, so that a commit does not bring the device's back). The buffer is made
        // with the first request, so that a later upload creates nothing.
        let k = shape.parameters;
        let upload = self.resident("parameters upload", slot, 3 * k * 4, storage());
        if let Some(host) = request.parameters.upload {
            assert!(
                [host.values.len(), host.first.len(), host.second.len()] == [k; 3],
                "the host's hyperparameters and moments"
            );
            let values = host.values.iter().chain(&host.first).chain(&host.second);
            self.device
                .write_buffer(&upload, 0, &super::f32_bytes(values.copied()));
            for third in 0..3 {
                self.device.copy(
                    encoder,
                    (&upload, (third * k * 4) as u64),
                    (
                        &z_current,
                        ((third * shape.held() + shape.parameters_at()) * 4) as u64,
                    ),
                    (k * 4) as u64,
                );
            }
        }

        // The predictions' shapes (their passes run over the request's batch: `encode_batches`).
        let kernel = request.kernel;
        let points = t + m;
        let chunk = backward_chunk(points);
        let layout = ReadbackLayout {
            m,
            t,
            chunks: points.div_ceil(chunk),
            width: backward_width(kernel),
        };
        let [c_hi, c_lo] = super::cholesky::two_words(request.c);
        let room = gradient_room(&layout, rows, shape);
        // `held_gradients.wgsl`'s Dims but for its strides (each pass's own, `plan_held`).
        let dims_words = [
            m as u32,
            layout.width as u32,
            t as u32,
            d as u32,
            samples as u32,
            // The latent column is the slot's own (the predictions' slot words), so requests of
            // one shape share these words.
            0,
            0,
            1.0f32.to_bits(),
            0,
            (request.adam.beta1 as f32).to_bits(),
            (request.adam.beta2 as f32).to_bits(),
            (request.adam.epsilon as f32).to_bits(),
            ((1.0 - request.adam.beta1) as f32).to_bits(),
            ((1.0 - request.adam.beta2) as f32).to_bits(),
            shape.encoder as u32,
            shape.parameters as u32,
            kernel.stationary.len() as u32,
            u32::from(kernel.linear.is_some()),
            // φ²'s floor is the slot's own (the predictions' slot words).
            0,
            c_hi.to_bits(),
            c_lo.to_bits(),
            derived_words(kernel) as u32,
            0,
            0,
        ];

        let parts = readback_words(shape, rows, request.read_current);
        let total: usize = parts.iter().sum();
        // (source, its first word, words) of each piece, in the parts' order: the gradients'
        // head, K_ZZ's status and the KL terms come from the groups' buffers (`plan_held`,
        // `plan_group`); the stepped hyperparameters are a piece of each third of the next held
        // state.
        let at = state_offsets(m);
        let mut pieces: Vec<(Option<(&wgpu::Buffer, usize)>, usize)> = vec![
            (None, parts[0]),
            (None, parts[1]),
            (Some((&next, 2 * at.status)), parts[2]),
            (None, parts[3]),
        ];
        pieces.extend((0..3).map(|third| {
            let first = third * shape.held() + shape.parameters_at();
            (Some((&z_next, first)), k)
        }));
        pieces.extend([
            (Some((&current, 0)), parts[5]),
            (Some((&z_current, 0)), parts[6]),
        ]);
        let mut offset = first as u64;
        let mut copies = Vec::new();
        let mut group_pieces = Vec::new();
        for (piece, words) in pieces {
            let bytes = (words * 4) as u64;
            match piece {
                Some((source, first)) if bytes > 0 => {
                    copies.push((source.clone(), (first * 4) as u64, offset, bytes))
                }
                Some(_) => {}
                None => group_pieces.push(offset),
            }
            offset += bytes;
        }
        let held = SlotHeld {
            dims: dims_words,
            encoder: request
                .encoder
                .map(|e| (encoder_shapes(e), request.c * samples as f64)),
            table: parameter_table(kernel),
            extra: super::f32_bytes(request.parameters.extra.iter().copied()),
            rate: request.adam.rate as f32,
            sizes: HeldSizes {
                held: shape.held(),
                rows,
                x: rows * d,
                latent: t + 2 * rows,
                gradients: room,
                finished: layout.parts()[2],
                points: points * d,
                derived: derived_words(kernel),
                weights_at: m * d,
                encoder: shape.encoder,
                width: layout.width,
                latent_at: HEADER_WORDS,
                gradient_at: room - shape.held() + m * d,
            },
            kinds: kind_bytes(kernel),
            gathered: request.rows.is_some(),
            current: z_current.clone(),
            next: z_next,
            readback: (readback.clone(), group_pieces[0], (parts[0] * 4) as u64),
        };
        Ok(Prepared {
            pending: Pending {
                layout,
                readback: readback.clone(),
                first,
                words: total,
            },
            shape,
            t,
            current,
            next,
            z_current,
            held,
            status_at: group_pieces[1],
            kl_at: group_pieces[2],
            copies,
        })
    }
}

/// A request's [`ResidentEvaluation`] from its read-back values.
fn decode(request: &ResidentRequest, pending: &Pending, values: &[f32]) -> ResidentEvaluation {
    let m = pending.layout.m;
    let shape = StateShape::of(request.z, request.encoder, request.kernel);
    let rows = request.latent.eps.ncols();
    let [gradient_count, _, _, _, parameter_count, ..] =
        readback_words(shape, rows, request.read_current);
    let (gradients, rest) = values.split_at(gradient_count);
    let (kzz_status, rest) = rest.split_at(8);
    let (step_status, rest) = rest.split_at(8);
    let (kl_words, rest) = rest.split_at(6);
    let (parameter_words, state_values) = rest.split_at(parameter_count);
    let state = request
        .read_current
        .then(|| state_from(shape, state_values));
    let k = shape.parameters;
    let third = |n: usize| -> Vec<f64> {
        parameter_words[n * k..(n + 1) * k]
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    let parameters = HeldWeights {
        values: third(0),
        first: third(1),
        second: third(2),
    };
    let df = |words: &[f32], k: usize| f64::from(words[2 * k]) + f64::from(words[2 * k + 1]);
    let misfit = df(gradients, 0);
    let (held_norm, latent_kl) = (df(gradients, 1), df(gradients, 2));
    let latent = &gradients[HEADER_WORDS..];
    let widen = |v: &[f32]| DVector::from_iterator(v.len(), v.iter().map(|&x| f64::from(x)));
    let latent = if request.encoder.is_some() {
        HeldLatent::Encoded { kl: latent_kl }
    } else {
        let (d_mu, d_var) = latent.split_at(rows);
        HeldLatent::Sums {
            d_mu: widen(d_mu),
            d_var: widen(d_var),
        }
    };
    let status = |words: &[f32], policy: JitterPolicy| -> Result<f64, CholeskyError> {
        // `decode_factor` reads the status after an M = 0 factor: the words are the status alone.
        decode_factor(0, words, policy).map(|f| f.jitter)
    };
    let with_size = |e: CholeskyError| match e {
        CholeskyError::NotPositiveDefinite {
            pivot,
            value,
            jitter,
            ..
        } => CholeskyError::NotPositiveDefinite {
            size: m,
            pivot,
            value,
            jitter,
        },
        other => other,
    };
    let (trace, norm, logdet) = (df(kl_words, 0), df(kl_words, 1), df(kl_words, 2));
    ResidentEvaluation {
        misfit,
        held_norm,
        latent,
        jitter: status(kzz_status, request.jitter).map_err(with_size),
        kl_inducing: 0.5 * (trace + norm - m as f64 - logdet),
        stepped: status(step_status, JitterPolicy::exactly(0.0))
            .map(|_| ())
            .map_err(with_size),
        parameters,
        state,
    }
}

/// A slot's state from its words: q(v) (f64 from double-float) then the held block's (float32:
/// [Z row-major | encoder | hyperparameters] for each of p, m, v).
fn state_from(shape: StateShape, values: &[f32]) -> ResidentState {
    let StateShape { m, d, encoder, .. } = shape;
    let (q, held) = values.split_at(state_words(m));
    let n = shape.held();
    let block = |k: usize| DMatrix::from_fn(m, d, |i, j| f64::from(held[k * n + i * d + j]));
    let at = shape.parameters_at();
    ResidentState {
        posterior: posterior_from(m, q),
        z: block(0),
        z_first: block(1),
        z_second: block(2),
        encoder: if encoder > 0 {
            held_weights(held, n, m * d..at)
        } else {
            HeldWeights::default()
        },
        parameters: held_weights(held, n, at..n),
    }
}

/// The values in `range` of each third (p, m, v) of a held state with `n` values per third.
fn held_weights(held: &[f32], n: usize, range: std::ops::Range<usize>) -> HeldWeights {
    let third = |k: usize| -> Vec<f64> {
        held[k * n + range.start..k * n + range.end]
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    HeldWeights {
        values: third(0),
        first: third(1),
        second: third(2),
    }
}

/// q(v) (f64 from double-float) from a slot's state words.
fn posterior_from(m: usize, values: &[f32]) -> InducingPosterior {
    let value = |k: usize| f64::from(values[2 * k]) + f64::from(values[2 * k + 1]);
    let at = state_offsets(m);
    let matrix = |offset: usize| DMatrix::from_fn(m, m, |i, j| value(offset + i * m + j));
    InducingPosterior {
        eta1: DVector::from_fn(m, |i, _| value(at.eta + i)),
        precision: matrix(at.p),
        mean: DVector::from_fn(m, |i, _| value(at.mean + i)),
        cov: matrix(at.s),
    }
}

/// How long the host's copy of a held state may lag the device's at least: a slot's state is
/// read back with its evaluation when this long has passed since the last read and the reads
/// stay within [`SYNC_BUDGET_BYTES`] per evaluation, and at the next evaluation again when the
/// copy read never reached the variable (its step was not applied). A host-run final bound reads
/// the current state itself ([`Gpu::held_state`]); a checkpoint or a given-up device continues
/// from the copy.
pub const SYNC_SECONDS: f64 = 2.0;

/// Bytes per evaluation that the state reads may average over a slot's evaluations (issue 34
/// item 6: at most 4 KiB read back per variable per iteration in all; an evaluation itself reads
/// 4·(30 + 2W) bytes). A state of q(v) at M = 400 (5.1 MB) or the paper's encoder with its
/// moments (0.8 MB) is then read every 2 500 or 400 evaluations (or 2 s, when longer).
pub const SYNC_BUDGET_BYTES: usize = 2048;

/// Whether a slot's state of `state_bytes` is due to be read back with this evaluation: `elapsed`
/// seconds and `unsynced` evaluations (this one counted) since the last read, at least `sync`
/// seconds and enough evaluations to pay for it at `budget` bytes each.
fn sync_due(elapsed: f64, sync: f64, unsynced: usize, budget: usize, state_bytes: usize) -> bool {
    elapsed >= sync && unsynced.saturating_mul(budget) >= state_bytes
}

/// Batches a slot may go unused before it is freed for another variable's q(v) (a finished
/// restart's; a variable that comes back after that starts from its own copy).
const IDLE_BATCHES: u64 = 4096;

/// Which resident slot holds each variable's q(v) and at which versions (natural-step counts):
/// the device's side of [`crate::gp::variable::PosteriorHolding`].
#[derive(Debug, Default)]
pub(super) struct PosteriorSlots {
    by_key: std::collections::HashMap<u64, SlotRecord>,
    free: Vec<usize>,
    next_slot: usize,
    /// Keys are `key_base + n`, the base random per device (a key carried over from another
    /// process by a resumed run is then unknown here, never another variable's).
    key_base: u64,
    next_key: u64,
    batches: u64,
    /// [`SYNC_SECONDS`] and [`SYNC_BUDGET_BYTES`] unless a test set others ([`Gpu::set_sync`]).
    sync: Option<(f64, usize)>,
}

#[derive(Debug, Clone, Copy)]
struct SlotRecord {
    slot: usize,
    /// What it holds (q(v) is M × M, Z M × D, the encoder's P weights).
    shape: StateShape,
    /// The versions of the current state, of the stepped one waiting to be committed, and of the
    /// one before the current.
    current: usize,
    next: Option<usize>,
    previous: Option<usize>,
    last_batch: u64,
    /// When the current state was last read back (seconds, `crate::base::clock`), and its version.
    synced_at: f64,
    synced_version: usize,
    /// Evaluations since then.
    unsynced: usize,
    /// The host's [`crate::gp::variable::GpCdeVariable::parameter_edits`] when the device last
    /// took its hyperparameters.
    parameter_edits: u64,
}

impl SlotRecord {
    /// The change that makes `version` current, if this slot holds it.
    fn change_to(&self, version: usize) -> Option<StateChange> {
        if self.current == version {
            Some(StateChange::Keep)
        } else if self.next == Some(version) {
            Some(StateChange::Commit)
        } else if self.previous == Some(version) {
            Some(StateChange::Restore)
        } else {
            None
        }
    }

    /// The record after `change` made `version` current.
    fn changed(mut self, version: usize, change: StateChange) -> Self {
        match change {
            StateChange::Keep => {}
            StateChange::Commit => {
                self.previous = Some(self.current);
                self.current = version;
                self.next = None;
            }
            StateChange::Restore => {
                self.current = version;
                self.next = None;
            }
        }
        self
    }
}

/// Where an evaluation of a held q(v) and Z runs ([`Gpu::hold_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldSlot {
    /// The variable's key (new when it had none or one this device does not know).
    pub key: u64,
    /// The resident slot of its q(v) ([`ResidentRequest::slot`]).
    pub slot: usize,
    /// What becomes of its states first ([`ResidentRequest::before`]).
    pub before: StateChange,
    /// Read the state back with the evaluation ([`ResidentRequest::read_current`]).
    pub read_current: bool,
    /// Write the host's hyperparameters over the slot's first ([`ParameterStep::upload`]): the
    /// host changed them since the device last took them.
    pub upload_parameters: bool,
}

impl Gpu {
    /// Starts a batch of held evaluations: frees the slots no evaluation used for
    /// [`IDLE_BATCHES`] batches.
    pub fn begin_held_batch(&self) {
        let mut slots = self.posterior_slots();
        slots.batches += 1;
        let now = slots.batches;
        let idle: Vec<u64> = slots
            .by_key
            .iter()
            .filter(|(_, r)| now - r.last_batch > IDLE_BATCHES)
            .map(|(&k, _)| k)
            .collect();
        for key in idle {
            if let Some(r) = slots.by_key.remove(&key) {
                slots.free.push(r.slot);
            }
        }
    }

    /// The slot for evaluating the q(v) and Z of a variable at version `version` (its natural
    /// steps) that this device holds under `key` (as its current, stepped or previous state), or
    /// is given now from `host` (the variable's own copy, uploaded when the device does not hold
    /// that version: a new variable, a key from another process, a slot freed while idle).
    /// `host_synced` is the version of that copy: when it is older than the last one read back,
    /// that read never reached the variable and is done again. The records change here, before
    /// the submission: a batch that then fails gives the device up for good, records and all.
    /// The error is `host`'s P failing to factorise on upload.
    pub fn hold_state(
        &self,
        key: Option<u64>,
        version: usize,
        host: ResidentView,
        host_synced: usize,
        parameter_edits: u64,
    ) -> Result<HeldSlot, CholeskyError> {
        let mut slots = self.posterior_slots();
        let batch = slots.batches;
        let now = crate::base::clock::now_seconds();
        let (m, d) = host.z.shape();
        let shape = StateShape {
            m,
            d,
            encoder: host.encoder.map_or(0, Encoder::param_count),
            parameters: host.parameters.values.len(),
        };
        let known = key
            .and_then(|k| slots.by_key.get(&k).copied().map(|r| (k, r)))
            .filter(|(_, r)| r.shape == shape)
            .and_then(|(k, r)| Some((k, r, r.change_to(version)?)));
        let (key, mut record, before) = match known {
            Some((k, r, change)) => (k, r.changed(version, change), change),
            None => {
                let key = match key {
                    Some(k) if slots.by_key.contains_key(&k) => k,
                    _ => {
                        if slots.key_base == 0 {
                            // A key only names a cache entry (no result depends on it), so the
                            // standard library's per-process random hash seed serves.
                            use std::hash::{BuildHasher, Hasher};
                            let seed = std::collections::hash_map::RandomState::new()
                                .build_hasher()
                                .finish();
                            slots.key_base = seed | 1;
                        }
                        slots.next_key += 1;
                        slots.key_base.wrapping_add(slots.next_key)
                    }
                };
                let slot = match slots.by_key.get(&key) {
                    Some(r) => r.slot,
                    None => slots.free.pop().unwrap_or_else(|| {
                        slots.next_slot += 1;
                        slots.next_slot - 1
                    }),
                };
                self.upload_state(slot, host)?;
                let record = SlotRecord {
                    slot,
                    shape,
                    current: version,
                    next: None,
                    previous: None,
                    last_batch: batch,
                    synced_at: now,
                    synced_version: version,
                    unsynced: 0,
                    parameter_edits,
                };
                (key, record, StateChange::Keep)
            }
        };
        let (sync, budget) = slots.sync.unwrap_or((SYNC_SECONDS, SYNC_BUDGET_BYTES));
        record.unsynced += 1;
        let state_bytes = (state_words(shape.m) + held_words(shape)) * 4;
        let due = sync_due(
            now - record.synced_at,
            sync,
            record.unsynced,
            budget,
            state_bytes,
        );
        let read_current =
            due || (host_synced < record.synced_version && record.synced_version <= version);
        if read_current {
            record.synced_at = now;
            record.synced_version = version;
            record.unsynced = 0;
        }
        record.last_batch = batch;
        let upload_parameters = record.parameter_edits != parameter_edits;
        record.parameter_edits = parameter_edits;
        slots.by_key.insert(key, record);
        Ok(HeldSlot {
            key,
            slot: record.slot,
            before,
            read_current,
            upload_parameters,
        })
    }

    /// Test hook: when the host's copy of a held state is refreshed ([`SYNC_SECONDS`] and
    /// [`SYNC_BUDGET_BYTES`] unless set), so that a test can have a copy that lags for certain
    /// (infinite seconds: read back only when a read never reached the variable) or one read
    /// with every evaluation (0 seconds, an unbounded budget), whatever the machine's speed.
    pub fn set_sync(&self, seconds: f64, budget_bytes: usize) {
        self.posterior_slots().sync = Some((seconds, budget_bytes));
    }

    /// Records the outcome of `key`'s evaluation at `version`: its stepped state (version + 1)
    /// waits to be committed when `stepped`, else nothing waits.
    pub fn held_stepped(&self, key: u64, version: usize, stepped: bool) {
        if let Some(r) = self.posterior_slots().by_key.get_mut(&key) {
            if r.current == version {
                r.next = stepped.then_some(version + 1);
            }
        }
    }

    /// The q(v), Z and Z's moments this device holds for `key` at `version` (made current first
    /// when it is the stepped or the previous state), read back: for the host's work on a
    /// variable whose own copy lags (a final bound). None when the device does not hold that
    /// version (the caller then uses the variable's copy).
    pub async fn held_state(
        &self,
        key: u64,
        version: usize,
    ) -> Result<Option<ResidentState>, GpuError> {
        let (record, change) = {
            let mut slots = self.posterior_slots();
            let Some(r) = slots.by_key.get_mut(&key) else {
                return Ok(None);
            };
            let Some(change) = r.change_to(version) else {
                return Ok(None);
            };
            *r = r.changed(version, change);
            (*r, change)
        };
        self.read_resident(record.slot, record.shape, change)
            .await
            .map(Some)
    }

    fn posterior_slots(&self) -> std::sync::MutexGuard<'_, PosteriorSlots> {
        self.posteriors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests;
