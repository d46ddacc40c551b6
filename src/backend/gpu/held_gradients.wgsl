// The last passes of a resident evaluation (resident.rs, issue 34 item 1): the gradients finished
// on the device and Z's Adam step taken there, so that what is read back grows neither with M·W
// (the kernel adjoint's per-row sums) nor with M·D (Z's gradient) nor with S·b (the draws).
// double_float.wgsl and five_buffers.wgsl (the bindings: `dims`, src_a, src_b, src_c, dst) are
// prepended.
//
// `input_gradients`  src_a = finish.wgsl's output, src_b = the column pass's ∂ of each point of
//                    [U; Z] ((T + M) × D, row-major), src_c = the latent input
//                    [ε (T, draw s of row n at n·S + s) | (μ_n, √Σ_n) for each row n],
//                    dst = the gradients ([`GRADIENTS`] below). Writes the misfit (df, copied),
//                    ∂Z (M × D, row-major) = the rows' first D values + the Z columns of the column
//                    pass (K̄_ZZ's share), and q(w)'s sums over the draws
//                        Σ_s ∂w_sn  and  Σ_s ∂w_sn ε_sn / (2√Σ_n),
//                    where ∂w_sn is the latent column of ∂U plus k_tt's share 2 θ̃^lin_slot w_sn
//                    g_var (`diag`), and w_sn = μ_n + √Σ_n ε_sn as points.wgsl forms it.
// `kernel_sums`      src_a = finish.wgsl's output, src_b = the latent input, dst = the gradients.
//                    Workgroup w < W adds the kernel adjoint's per-row sums (finish.wgsl's df
//                    value for each inducing row and each of the W values) over the M rows;
//                    workgroup W adds the held block's squared gradient ‖∂Z‖² + ‖∂encoder‖²
//                    (after `input_gradients` and encoder.wgsl's passes), W + 1 the rows'
//                    Σ_n KL(q(w_n) ‖ N(0, 1)) = Σ_n ½(Σ_n + μ_n² − 1 − log Σ_n), W + 2 the draws'
//                    Σ_sn w_sn² (k_tt's adjoint for the latent column, which the host cannot form
//                    when the device ran the encoder). Each invocation takes a strided df sum,
//                    then a tree over the workgroup: the order is fixed, the result does not
//                    depend on timing.
// `adam_held`        src_a = the held block's current state [p | m | v] (p = [Z (M·D, row-major) |
//                    the encoder's P weights], m and v the same length), src_b = the gradients,
//                    dst = the next state: one Adam step on the loss −L̂, g = −∂p,
//                        m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,  p ← p − rate·m/(√v + ε),
//                    with rate = lr·√(1−β₂ᵗ)/(1−β₁ᵗ) from the host (gp/adam.rs in f64).
//
// GRADIENTS = [misfit (df) | kernel sums (W df) | ‖∂held‖² (df) | Σ KL(q(w)) (df) | Σ w² (df)
//              | Σ_s ∂w (b) | Σ_s ∂w ε/(2√Σ) (b) | ∂Z (M·D) | ∂encoder (P)]: the host reads the
//              first 8 + 2W values back, and q(w)'s sums (2b) only when it holds q(w) itself.

struct Dims {
    m: u32,          // inducing points M
    width: u32,      // values per inducing row W (kernel.rs's `backward_width`)
    t: u32,          // evaluation points T = S·b (the column pass has T + M rows)
    d: u32,          // inputs per point
    samples: u32,    // S
    slot: u32,       // the latent input's column
    diag: f32,       // 2 θ̃^lin_slot g_var: k_tt's adjoint per unit of w (0 without a linear part)
    one: f32,        // 1.0, unknown to the compiler (double_float.wgsl)
    rate: f32,       // Adam's α_t
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    rest1: f32,      // 1 − β₁ and 1 − β₂, rounded from f64 (not 1 − β in float32)
    rest2: f32,
    encoder: u32,    // the encoder's weights P held beside Z (0 when the host holds q(w))
    pad1: u32,
}

// Where each part of the gradients starts.
fn norm_at() -> u32 {
    return 2u + 2u * dims.width;
}

fn latent_at() -> u32 {
    return norm_at() + 6u;
}

// Values of the held block: Z's and the encoder's.
fn held_count() -> u32 {
    return dims.m * dims.d + dims.encoder;
}

fn z_at() -> u32 {
    return latent_at() + 2u * (dims.t / max(dims.samples, 1u));
}

@compute @workgroup_size(64)
fn input_gradients(@builtin(global_invocation_id) id: vec3<u32>) {
    touch();
    let e = id.x;
    let mw = dims.m * dims.width;
    let b = dims.t / max(dims.samples, 1u);
    if (e < 2u) {
        dst[e] = src_a[e];
    }
    if (e < dims.m * dims.d) {
        let i = e / dims.d;
        let at = i * dims.width + e % dims.d;
        dst[z_at() + e] = (src_a[2u + at] + src_a[2u + mw + at])
            + src_b[(dims.t + i) * dims.d + e % dims.d];
    }
    if (e < b) {
        let mu = src_c[dims.t + 2u * e];
        let root = src_c[dims.t + 2u * e + 1u];
        var d_mu = 0.0;
        var d_eps = 0.0;
        for (var s = 0u; s < dims.samples; s++) {
            let p = e * dims.samples + s;
            let eps = src_c[p];
            let dw = src_b[p * dims.d + dims.slot] + dims.diag * (mu + root * eps);
            d_mu += dw;
            d_eps += dw * eps;
        }
        dst[latent_at() + e] = d_mu;
        dst[latent_at() + b + e] = d_eps / (2.0 * root);
    }
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
    let b = dims.t / max(dims.samples, 1u);
    if (w < dims.width) {
        for (var i = k; i < dims.m; i += GROUP) {
            let at = i * dims.width + w;
            sum = df_add(sum, vec2<f32>(src_a[2u + at], src_a[2u + mw + at]));
        }
    } else if (w == dims.width) {
        for (var e = k; e < held_count(); e += GROUP) {
            let g = dst[z_at() + e];
            sum = df_add(sum, two_prod(g, g));
        }
    } else if (w == dims.width + 1u) {
        for (var n = k; n < b; n += GROUP) {
            let mu = src_b[dims.t + 2u * n];
            let root = src_b[dims.t + 2u * n + 1u];
            let variance = root * root;
            sum = df_add(sum, vec2<f32>(0.5 * (variance + mu * mu - 1.0 - log(variance)), 0.0));
        }
    } else {
        for (var p = k; p < dims.t; p += GROUP) {
            let n = p / max(dims.samples, 1u);
            let draw = src_b[dims.t + 2u * n] + src_b[dims.t + 2u * n + 1u] * src_b[p];
            sum = df_add(sum, two_prod(draw, draw));
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
    if (k == 0u) {
        let at = select(norm_at() + 2u * (w - dims.width), 2u + 2u * w, w < dims.width);
        dst[at] = partial[0].x;
        dst[at + 1u] = partial[0].y;
    }
}

@compute @workgroup_size(64)
fn adam_held(@builtin(global_invocation_id) id: vec3<u32>) {
    touch();
    let e = id.x;
    let n = held_count();
    if (e < n) {
        let g = -src_b[z_at() + e];
        let m = dims.beta1 * src_a[n + e] + dims.rest1 * g;
        let v = dims.beta2 * src_a[2u * n + e] + dims.rest2 * g * g;
        dst[e] = src_a[e] - dims.rate * m / (sqrt(v) + dims.epsilon);
        dst[n + e] = m;
        dst[2u * n + e] = v;
    }
}
