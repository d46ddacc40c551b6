// The last passes of a resident evaluation (resident.rs, issue 34 item 1): the gradients the
// optimiser needs, finished on the device, so that what is read back grows neither with M·W (the
// kernel adjoint's per-row sums) nor with S·b (the draws). double_float.wgsl is prepended.
//
// `kernel_sums`      the kernel adjoint's per-row sums (finish.wgsl's df value for each inducing
//                    row and each of the W values) added over the M rows: one workgroup per
//                    value, each invocation a strided df sum, then a tree over the workgroup, so
//                    the order is fixed and the result does not depend on timing.
// `input_gradients`  ∂Z (M × D, row-major) = the rows' first D values + the Z columns of the
//                    column pass (K̄_ZZ's share); q(w)'s sums over the draws
//                        Σ_s ∂w_sn  and  Σ_s ∂w_sn ε_sn / (2√Σ_n),
//                    where ∂w_sn is the latent column of ∂U plus k_tt's share 2 θ̃^lin_slot w_sn
//                    g_var (`diag`), and w_sn = μ_n + √Σ_n ε_sn as points.wgsl forms it; and the
//                    misfit (df) copied.
//
// `out` = [misfit (df) | kernel sums (W df) | ∂Z (M·D) | Σ_s ∂w (b) | Σ_s ∂w ε/(2√Σ) (b)].
// Both entry points bind the same five buffers and touch all of them (one bind-group layout).

struct Dims {
    m: u32,          // inducing points M
    width: u32,      // values per inducing row W (kernel.rs's `backward_width`)
    t: u32,          // evaluation points T = S·b (the column pass has T + M rows)
    d: u32,          // inputs per point
    samples: u32,    // S
    slot: u32,       // the latent input's column
    diag: f32,       // 2 θ̃^lin_slot g_var: k_tt's adjoint per unit of w (0 without a linear part)
    one: f32,        // 1.0, unknown to the compiler (double_float.wgsl)
}

@group(0) @binding(0) var<uniform> dims: Dims;
// finish.wgsl's `out`: [misfit (head, tail) | row sums' heads (M·W) | their tails (M·W) | …].
@group(0) @binding(1) var<storage, read> finished: array<f32>;
// ∂ of each point of [U; Z] ((T + M) × D, row-major).
@group(0) @binding(2) var<storage, read> cols: array<f32>;
// [ε (T, draw s of row n at n·S + s) | (μ_n, √Σ_n) for each row n].
@group(0) @binding(3) var<storage, read> latent: array<f32>;
@group(0) @binding(4) var<storage, read_write> out: array<f32>;

fn one() -> f32 {
    return dims.one;
}

fn touch() {
    _ = finished[0];
    _ = cols[0];
    _ = latent[0];
    _ = out[0];
}

const GROUP: u32 = 64u;
var<workgroup> partial: array<vec2<f32>, 64>;

@compute @workgroup_size(64)
fn kernel_sums(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) k: u32,
) {
    touch();
    let w = group.x;
    let mw = dims.m * dims.width;
    var sum = vec2<f32>(0.0, 0.0);
    // `w` is the same for the whole workgroup, so every invocation reaches the barriers.
    if (w < dims.width) {
        for (var i = k; i < dims.m; i += GROUP) {
            let at = i * dims.width + w;
            sum = df_add(sum, vec2<f32>(finished[2u + at], finished[2u + mw + at]));
        }
    }
    partial[k] = sum;
    workgroupBarrier();
    for (var half = GROUP / 2u; half > 0u; half /= 2u) {
        if (k < half) {
            partial[k] = df_add(partial[k], partial[k + half]);
        }
        workgroupBarrier();
    }
    if (k == 0u && w < dims.width) {
        out[2u + 2u * w] = partial[0].x;
        out[2u + 2u * w + 1u] = partial[0].y;
    }
}

@compute @workgroup_size(64)
fn input_gradients(@builtin(global_invocation_id) id: vec3<u32>) {
    touch();
    let e = id.x;
    let mw = dims.m * dims.width;
    let z_at = 2u + 2u * dims.width;
    let b = dims.t / max(dims.samples, 1u);
    let latent_at = z_at + dims.m * dims.d;
    if (e < 2u) {
        out[e] = finished[e];
    }
    if (e < dims.m * dims.d) {
        let i = e / dims.d;
        let at = i * dims.width + e % dims.d;
        out[z_at + e] = (finished[2u + at] + finished[2u + mw + at])
            + cols[(dims.t + i) * dims.d + e % dims.d];
    }
    if (e < b) {
        let mu = latent[dims.t + 2u * e];
        let root = latent[dims.t + 2u * e + 1u];
        var d_mu = 0.0;
        var d_eps = 0.0;
        for (var s = 0u; s < dims.samples; s++) {
            let p = e * dims.samples + s;
            let eps = latent[p];
            let dw = cols[p * dims.d + dims.slot] + dims.diag * (mu + root * eps);
            d_mu += dw;
            d_eps += dw * eps;
        }
        out[latent_at + e] = d_mu;
        out[latent_at + b + e] = d_eps / (2.0 * root);
    }
}
