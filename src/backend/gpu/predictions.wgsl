// The per-column algebra of the uncollapsed bound's predictions (MODEL.md §3.1–3.4), float32, one
// invocation per evaluation point t, over K = K_Zt (M × T) and QK = Q K_Zt, both column-major:
//   mean_t = k_tᵀα,  var_t = max(k_tt + k_tᵀ(QK)_t, 0),  misfit_t = (y_t − mean_t)² + var_t,
//   g_mean_t = c (y_t − mean_t)/φ²,  then (QK)_t is overwritten by K̄_t = α g_mean_t + 2 g_var (QK)_t.
// The clamp: var_t ≥ 0 holds exactly, but k_tt + k_tᵀQk_t cancels (k_tᵀQk_t ≈ −k_tt where the
// inducing points pin the function down) and float32 rounding can leave it slightly negative. It
// changes only the bound's value, never the gradient (g_var is a constant). The host's f64
// reference is `column_pass` in src/gp/svgp.rs.

struct Dims {
    m: u32,              // inducing points
    t: u32,              // evaluation points
    c_over_noise: f32,   // c/φ²
    g_var: f32,          // −c/(2φ²)
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read_write> qk: array<f32>;
@group(0) @binding(3) var<storage, read> alpha: array<f32>;
@group(0) @binding(4) var<storage, read> ktt: array<f32>;
// T × 2, column-major: g_mean is written into the first column, y_T is read from the second.
@group(0) @binding(5) var<storage, read_write> gy: array<f32>;
@group(0) @binding(6) var<storage, read_write> misfit: array<f32>;

@compute @workgroup_size(64)
fn column_pass(@builtin(global_invocation_id) id: vec3<u32>) {
    let t = id.x;
    if (t >= dims.t) {
        return;
    }
    let base = t * dims.m;
    var mean = 0.0;
    var quad = 0.0;
    for (var i = 0u; i < dims.m; i++) {
        let kv = k[base + i];
        mean += kv * alpha[i];
        quad += kv * qk[base + i];
    }
    let residual = gy[dims.t + t] - mean;
    misfit[t] = residual * residual + max(ktt[t] + quad, 0.0);
    let g_mean = residual * dims.c_over_noise;
    gy[t] = g_mean;
    for (var i = 0u; i < dims.m; i++) {
        qk[base + i] = alpha[i] * g_mean + 2.0 * dims.g_var * qk[base + i];
    }
}
