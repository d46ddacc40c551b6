// The per-column algebra of the uncollapsed bound's predictions (MODEL.md §3.1–3.4), float32, one
// invocation per evaluation point t, in the whitened form: over Ã = L⁻¹K_Zt (M × T, bound as `k`)
// and B = (S − I)Ã (bound as `qk`), both column-major, with m the mean of q(v) (bound as `alpha`):
//   mean_t = ã_tᵀm,  var_t = max(k_tt + ã_tᵀb_t, 0),  misfit_t = (y_t − mean_t)² + var_t,
//   g_mean_t = c (y_t − mean_t)/φ²,  then b_t is overwritten by ā_t = m g_mean_t + 2 g_var b_t.
// (The same algebra as the CPU's `column_pass` in src/gp/svgp.rs over K_Zt, Q K_Zt and α, since
// k_tᵀα = ã_tᵀm and k_tᵀQk_t = ã_tᵀ(S − I)ã_t.)
// The clamp: var_t ≥ 0 holds exactly, but k_tt + ã_tᵀ(S − I)ã_t cancels (‖ã_t‖² ≈ k_tt where the
// inducing points pin the function down) and float32 rounding can leave it slightly negative. It
// changes only the bound's value, never the gradient (g_var is a constant).
// One pass over a batch of slots (the dispatch's y): slot k's buffers sit k strides (in words)
// into each binding; its c/φ² and g_var are words `noise_at` and `noise_at` + 1 of its
// parameters (held_gradients.wgsl's DERIVED layout).

struct Dims {
    m: u32,              // inducing points
    t: u32,              // evaluation points
    noise_at: u32,       // c/φ², then g_var = −c/(2φ²), in each slot's parameters
    stride_k: u32,       // Ã and B
    stride_alpha: u32,
    stride_ktt: u32,
    stride_gy: u32,
    stride_misfit: u32,
    stride_params: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read_write> qk: array<f32>;
@group(0) @binding(3) var<storage, read> alpha: array<f32>;
@group(0) @binding(4) var<storage, read> ktt: array<f32>;
// T × 2, column-major: g_mean is written into the first column, y_T is read from the second.
@group(0) @binding(5) var<storage, read_write> gy: array<f32>;
@group(0) @binding(6) var<storage, read_write> misfit: array<f32>;
@group(0) @binding(7) var<storage, read> params: array<f32>;

@compute @workgroup_size(64)
fn column_pass(@builtin(global_invocation_id) id: vec3<u32>) {
    let t = id.x;
    let slot = id.y;
    if (t >= dims.t) {
        return;
    }
    let noise = slot * dims.stride_params + dims.noise_at;
    let c_over_noise = params[noise];
    let g_var = params[noise + 1u];
    let base = slot * dims.stride_k + t * dims.m;
    let alpha_at = slot * dims.stride_alpha;
    let gy_at = slot * dims.stride_gy;
    var mean = 0.0;
    var quad = 0.0;
    for (var i = 0u; i < dims.m; i++) {
        let kv = k[base + i];
        mean += kv * alpha[alpha_at + i];
        quad += kv * qk[base + i];
    }
    let residual = gy[gy_at + dims.t + t] - mean;
    misfit[slot * dims.stride_misfit + t] = residual * residual
        + max(ktt[slot * dims.stride_ktt + t] + quad, 0.0);
    let g_mean = residual * c_over_noise;
    gy[gy_at + t] = g_mean;
    for (var i = 0u; i < dims.m; i++) {
        qk[base + i] = alpha[alpha_at + i] * g_mean + 2.0 * g_var * qk[base + i];
    }
}
