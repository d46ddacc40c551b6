// The uncollapsed bound's evaluation points and what the column pass reads of them, built on the
// device from what the host uploads each iteration: the minibatch's rows x (b × D, row-major), its
// targets y (b) and the latent input's noise ε (S × b, column-major, so draw s of row n is at
// n·S + s) with each row's (μ_n, √Σ_n). Point p = n·S + s is row n of x with the latent slot set
// to w_sn = μ_n + √Σ_n ε_sn (as `svgp::evaluation_points` orders them). Writes u (T × D,
// row-major, T = S·b), k_tt = k(u_p, u_p) (T) and the targets' column of gy (y_T at T + p). The
// host sends b·(D + 3) + T values instead of T·(D + 3).
// k(u, u) = Σ_j θ̃^lin_j u_j² + Σ_c s^c: every stationary shape is 1 at r = 0 (kernel_shapes.wgsl;
// kernel_common.wgsl has the parameters' layout; the host's f64 reference is `Kernel::diag`).
// One pass over a batch of slots (the dispatch's y): slot k's buffers sit k strides (in words)
// into each binding, its latent column in `slots`.

struct Dims {
    t: u32,        // points
    d: u32,        // inputs per point
    samples: u32,  // S
    parts: u32,    // stationary parts of the kernel
    stride_x: u32,
    stride_latent: u32,
    stride_y: u32,
    stride_params: u32,
    stride_u: u32,
    stride_ktt: u32,
    stride_gy: u32,
    pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
// [ε (T) | (μ_n, √Σ_n) for each row n].
@group(0) @binding(2) var<storage, read> latent: array<f32>;
@group(0) @binding(3) var<storage, read> y: array<f32>;
// θ̃^lin (d entries), then per part s^c and its d precisions (kernel_common.wgsl's layout).
@group(0) @binding(4) var<storage, read> params: array<f32>;
@group(0) @binding(5) var<storage, read_write> u: array<f32>;
@group(0) @binding(6) var<storage, read_write> ktt: array<f32>;
@group(0) @binding(7) var<storage, read_write> gy: array<f32>;
// Per slot: (a word the held passes read, the latent input's column, another for them, 0).
@group(0) @binding(8) var<storage, read> slots: array<vec4<u32>>;

// Input j of point p of `slot`, whose latent input is column `column`.
fn value(slot: u32, column: u32, p: u32, j: u32) -> f32 {
    if (j == column) {
        let n = p / dims.samples;
        let at = slot * dims.stride_latent;
        return latent[at + dims.t + 2u * n] + latent[at + dims.t + 2u * n + 1u] * latent[at + p];
    }
    return x[slot * dims.stride_x + (p / dims.samples) * dims.d + j];
}

@compute @workgroup_size(64)
fn evaluation_points(@builtin(global_invocation_id) id: vec3<u32>) {
    let e = id.x;
    let slot = id.y;
    let column = slots[slot].y;
    if (e < dims.t * dims.d) {
        u[slot * dims.stride_u + e] = value(slot, column, e / dims.d, e % dims.d);
    }
    if (e < dims.t) {
        let params_at = slot * dims.stride_params;
        var diag = 0.0;
        for (var c = 0u; c < dims.parts; c++) {
            diag += params[params_at + dims.d + c * (dims.d + 1u)];
        }
        for (var j = 0u; j < dims.d; j++) {
            let v = value(slot, column, e, j);
            diag += params[params_at + j] * v * v;
        }
        ktt[slot * dims.stride_ktt + e] = diag;
        gy[slot * dims.stride_gy + dims.t + e] = y[slot * dims.stride_y + e / dims.samples];
    }
}
