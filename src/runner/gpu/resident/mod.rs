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
//!    r = (c/φ²)Ãy, into the slot's next state (`cholesky.wgsl`'s `fill` entry through its
//!    `natural_entry`, and its blocked factorisation), and the KL terms of the current state.
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

mod decode;
mod encode;
mod layout;
mod plan;
mod slots;

use decode::*;
pub use layout::StateShape;
use layout::*;
pub(super) use slots::PosteriorSlots;
pub use slots::{HeldSlot, SYNC_BUDGET_BYTES, SYNC_SECONDS};

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
use super::{Gpu, GpuError, Upload};
use super::{FIVE_BUFFERS, POSITIVE};
use crate::gp::adam::HeldAdamStep;
use crate::gp::encoder::Encoder;
use crate::gp::gp_cde::{HeldWeights, ResidentState, ResidentView};
use crate::gp::kernel::Kernel;
use crate::gp::linalg::{cholesky_jittered, lower_inverse, CholeskyError, JitterPolicy};
use crate::gp::natgrad::InducingPosterior;
use crate::gp::svgp::{HeldLatent, LatentBatch};

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
        include_str!("../held_gradients.wgsl"),
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
        include_str!("../inducing.wgsl"),
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
        self.resident_written(
            Upload::EveryCall,
            "q current",
            state_slot,
            &bytes,
            storage(),
        );
        self.resident_written(
            Upload::EveryCall,
            "held current",
            state_slot,
            &held_bytes,
            storage(),
        );
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
}

#[cfg(test)]
mod tests;
