//! The sizes and offsets of a slot's state on the device: its shape, where each part starts,
//! the words a read-back takes, the parameter tables the passes read.

use super::*;

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
    pub(super) fn held(&self) -> usize {
        self.m * self.d + self.encoder + self.parameters
    }

    /// Where the hyperparameters start in each third of the held state.
    pub(super) fn parameters_at(&self) -> usize {
        self.m * self.d + self.encoder
    }
}

/// Words of a slot's held state [p | m | v] (p = [Z (M × D, row-major) | the encoder's weights],
/// m and v Adam's moments of p; f32).
pub(super) fn held_words(shape: StateShape) -> usize {
    3 * shape.held()
}

/// Words of a slot's q(v) state (`cholesky.wgsl`'s natural-step output): L_P, X_P, the status,
/// P, S, m, η₁, each value two words.
pub(super) fn state_words(m: usize) -> usize {
    step_words(m)
}

/// Where each part of q(v)'s state starts, in double-float values.
pub(super) struct StateOffsets {
    pub(super) status: usize,
    pub(super) p: usize,
    pub(super) s: usize,
    pub(super) mean: usize,
    pub(super) eta: usize,
}

pub(super) fn state_offsets(m: usize) -> StateOffsets {
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
pub(super) fn storage() -> wgpu::BufferUsages {
    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
}

/// `held_gradients.wgsl`'s parameter table for `kernel`: its mask (D), then (kind, input, part)
/// of each hyperparameter in [`Kernel::params_to_vec`]'s order (kind 0 θ^lin_j, 1 s^c, 2 θ^c_j,
/// 3 the rational-quadratic shape), as 32-bit words.
pub(super) fn parameter_table(kernel: &Kernel) -> Vec<u8> {
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
    let mut bytes = super::super::f32_bytes(kernel.mask.iter().copied());
    for word in records.iter().flatten() {
        bytes.extend(word.to_le_bytes());
    }
    bytes
}

/// Words of `held_gradients.wgsl`'s DERIVED for `kernel`: the kernel shaders' parameters
/// ([`parameter_words`]: θ̃^lin (D), the parts (P(D + 1)), a, c/φ², g_var, diag, g_var and c/φ²
/// in double-float), which the predictions read where the held passes write them.
pub(super) fn derived_words(kernel: &Kernel) -> usize {
    parameter_words(kernel)
}

/// The byte of DERIVED where g_var and c/φ² in double-float start (the four words
/// `inducing.wgsl` reads as a slot's noise constants).
pub(super) fn derived_noise_at(kernel: &Kernel) -> u64 {
    ((alpha_at(kernel) + 4) * 4) as u64
}

/// Values at the head of `held_gradients.wgsl`'s output: the misfit, the squared gradient of Z
/// and the encoder, Σ_n KL(q(w_n)) (df each).
pub(super) const HEADER_WORDS: usize = 6;

/// Values of `held_gradients.wgsl`'s output for b rows: the header, q(w)'s sums (2b), the kernel
/// adjoint's W sums and the points' D column sums of squares (df each), then the held block's
/// gradient (∂Z, ∂encoder, ∂ of the raw hyperparameters): all but the header and q(w)'s sums
/// stay on the device.
pub(super) fn gradient_room(layout: &ReadbackLayout, rows: usize, shape: StateShape) -> usize {
    HEADER_WORDS + 2 * rows + 2 * layout.width + 2 * shape.d + shape.held()
}

/// Values of it read back: the header, and q(w)'s sums when the host holds q(w).
pub(super) fn gradient_words(rows: usize, shape: StateShape) -> usize {
    HEADER_WORDS + if shape.encoder > 0 { 0 } else { 2 * rows }
}

/// Values read back per request: the finished gradients ([`gradient_words`]), K_ZZ's status and
/// the step's (8 each), the KL terms (6), the stepped hyperparameters with their Adam moments
/// (3K), and q(v)'s and the held block's current states when asked for.
pub(super) fn readback_words(shape: StateShape, rows: usize, read_current: bool) -> [usize; 7] {
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
pub(super) fn readback_room(request: &ResidentRequest, read_current: bool) -> usize {
    let shape = StateShape::of(request.z, request.encoder, request.kernel);
    readback_words(shape, request.latent.eps.ncols(), read_current)
        .iter()
        .sum()
}
