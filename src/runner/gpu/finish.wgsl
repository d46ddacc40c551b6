// The last pass of the uncollapsed bound's predictions: the sums the host used to finish, done on
// the device in a fixed order so that only what the host needs is read back (issue 34):
//   - the kernel adjoint's row pass wrote one partial sum per chunk of evaluation points for each
//     of the M·W values (kernel_backward.wgsl); here they are added over the chunks, in chunk
//     order, as a double-float (head, tail);
//   - the misfit Σ_t misfit_t, in point order, as a double-float (by invocation 0);
//   - of ∂U (T × D) only the latent input's column is kept, when asked (the resident path's held
//     passes read it from ∂U): the other columns are the gradients with respect to the data,
//     which nothing uses.
// `out` = [misfit head, misfit tail | row sums' heads (M·W) | their tails (M·W) | ∂w (T)].
// The two-sums use Knuth's error-free transformation with every step multiplied by `dims.one`, a
// 1 the compiler cannot see, so that no compiler rearranges them away (see gemm.wgsl).
// One pass over a batch of slots (the dispatch's y): slot k's buffers sit k strides (in words)
// into each binding, its latent column in `slots`.

struct Dims {
    values: u32,   // M·W values per chunk
    chunks: u32,
    t: u32,        // evaluation points
    d: u32,        // inputs per point (∂U's row length)
    one: f32,
    stride_rows: u32,
    stride_cols: u32,
    stride_misfit: u32,
    stride_out: u32,
    latent_out: u32,   // 1: keep ∂U's latent column (the host-half path; the held passes read ∂U)
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> rows: array<f32>;
@group(0) @binding(2) var<storage, read> cols: array<f32>;
@group(0) @binding(3) var<storage, read> misfit: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;
// Per slot: (a word the held passes read, the latent input's column, another for them, 0).
@group(0) @binding(5) var<storage, read> slots: array<vec4<u32>>;

// (sum + x, the rounding error of that addition), exactly.
fn two_sum(sum: f32, x: f32) -> vec2<f32> {
    let t = (sum + x) * dims.one;
    let v = (t - sum) * dims.one;
    let w = (t - v) * dims.one;
    return vec2<f32>(t, (sum - w) * dims.one + (x - v) * dims.one);
}

@compute @workgroup_size(64)
fn finish_sums(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let slot = id.y;
    let out_at = slot * dims.stride_out;
    if (i == 0u) {
        let at = slot * dims.stride_misfit;
        var sum = 0.0;
        var err = 0.0;
        for (var t = 0u; t < dims.t; t++) {
            let s = two_sum(sum, misfit[at + t]);
            sum = s.x;
            err += s.y;
        }
        out[out_at] = sum;
        out[out_at + 1u] = err;
    }
    if (i < dims.values) {
        let at = slot * dims.stride_rows;
        var sum = 0.0;
        var err = 0.0;
        for (var c = 0u; c < dims.chunks; c++) {
            let s = two_sum(sum, rows[at + c * dims.values + i]);
            sum = s.x;
            err += s.y;
        }
        out[out_at + 2u + i] = sum;
        out[out_at + 2u + dims.values + i] = err;
    }
    if (i < dims.t && dims.latent_out == 1u) {
        let column = slots[slot].y;
        out[out_at + 2u + 2u * dims.values + i] = cols[slot * dims.stride_cols + i * dims.d + column];
    }
}
