// What the kernel's forward pass (kernel_cross.wgsl) and its adjoint (kernel_backward.wgsl) share:
// the problem's sizes, the points and parameters (the shapes κ_c with their derivatives are
// kernel_shapes.wgsl's, which comes before this file).
// K(A, B) for Occam's kernel (MODEL.md §2.2), float32:
//   K[p, q] = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²),  r_c² = Σ_j (θ̃^c_j a_pj − θ̃^c_j b_qj)²,
// with the masks already applied on the host (θ̃ = E ∘ θ) and dimensions with θ̃ = 0 skipped, so a
// masked input never enters.
// The host's f64 reference is `Kernel::cross`.

// Every pass runs over a batch of slots (the dispatch's last dimension used): slot k's A, B,
// parameters, K and outputs sit k strides into their buffers (strides in words; one slot: any).

struct Dims {
    n: u32,             // rows of A
    m: u32,             // rows of B
    d: u32,             // input dimensions
    parts: u32,         // stationary parts
    chunk: u32,         // columns of B per invocation of the adjoint's row pass (kernel_backward.wgsl)
    stride_a: u32,
    stride_b: u32,
    stride_params: u32,
    stride_k: u32,      // K (kernel_cross.wgsl) and dK (kernel_backward.wgsl)
    stride_rows: u32,   // the adjoint's row pass's output
    stride_cols: u32,   // the adjoint's column pass's output
    at_a: u32,          // where slot 0's A starts in `a` (Z after the points in [U; Z])
}

@group(0) @binding(0) var<uniform> dims: Dims;
// n × d and m × d, row-major.
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
// Per slot: θ̃^lin (d entries, zeros without a linear part), then per part s^c and its d
// precisions θ̃^c, then the rational quadratic's a (1, unused, without one). The layout of
// held_gradients.wgsl's DERIVED, whose first words these are on a device that derives them.
@group(0) @binding(3) var<storage, read> params: array<f32>;
// Per part: 0 squared exponential, 1 Matérn-1/2, 2 Matérn-3/2, 3 rational quadratic.
@group(0) @binding(4) var<storage, read> kinds: array<u32>;

// The slot's first word of its parameters (set by each entry point before anything reads them).
var<private> params_at: u32;

// θ̃^lin_j of the slot.
fn linear(j: u32) -> f32 {
    return params[params_at + j];
}

// Word i of the slot's parts (part c's s^c at c·(d + 1), θ̃^c_j after it).
fn part(i: u32) -> f32 {
    return params[params_at + dims.d + i];
}

// The rational quadratic's a.
fn shape_alpha() -> f32 {
    return params[params_at + dims.d + dims.parts * (dims.d + 1u)];
}

// r_c² between a_p and b_q (their first words in `a` and `b`) for the part at `base`.
fn sq_dist(base: u32, ap: u32, bq: u32) -> f32 {
    var r2 = 0.0;
    for (var j = 0u; j < dims.d; j++) {
        let t = part(base + 1u + j);
        if (t != 0.0) {
            let diff = t * a[ap + j] - t * b[bq + j];
            r2 += diff * diff;
        }
    }
    return r2;
}

