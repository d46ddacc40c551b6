// The last passes of a resident evaluation (resident.rs, issue 34 item 1): the gradients finished
// on the device and the Adam step of everything the slot holds beside q(v) taken there (Z, the
// encoder's weights, the kernel's hyperparameters and φ²), so that what is read back grows neither
// with M·W (the kernel adjoint's per-row sums) nor with M·D (Z's gradient) nor with S·b (the
// draws), and the host uploads no parameter. double_float.wgsl, five_buffers.wgsl (the bindings:
// `dims`, src_a, src_b, src_c, dst) and positive.wgsl are prepended.
//
// `derive_parameters`   src_a = the held block's current state, src_b = the parameter table
//                       (below), dst = what the evaluation's passes read of the hyperparameters
//                       and φ² ([`DERIVED`] below), before any of them runs: the kernel's masked
//                       θ̃^lin and parts (s^c, θ̃^c) as kernel_common.wgsl reads them, its
//                       rational-quadratic shape, and from φ² = softplus(r) + floor the constants
//                       c/φ², g_var = −c/(2φ²) (float32 and double-float) and k_tt's adjoint per
//                       unit of w, 2 θ̃^lin_slot g_var. The host copies them into the passes'
//                       uniform blocks in the same submission.
// `input_gradients`     src_a = finish.wgsl's output, src_b = the column pass's ∂ of each point of
//                       [U; Z] ((T + M) × D, row-major), src_c = the latent input
//                       [ε (T, draw s of row n at n·S + s) | (μ_n, √Σ_n) for each row n],
//                       dst = the gradients ([`GRADIENTS`] below). Writes the misfit (df, copied),
//                       ∂Z (M × D, row-major) = the rows' first D values + the Z columns of the
//                       column pass (K̄_ZZ's share), and q(w)'s sums over the draws
//                           Σ_s ∂w_sn  and  Σ_s ∂w_sn ε_sn / (2√Σ_n),
//                       where ∂w_sn is the latent column of ∂U plus k_tt's share 2 θ̃^lin_slot w_sn
//                       g_var (`diag`), and w_sn = μ_n + √Σ_n ε_sn as points.wgsl forms it.
// `kernel_sums`         src_a = finish.wgsl's output, src_b = the latent input, src_c = the
//                       evaluation points (T × D, row-major, first), dst = the gradients.
//                       Workgroup w < W adds the kernel adjoint's per-row sums (finish.wgsl's df
//                       value for each inducing row and each of the W values) over the M rows;
//                       workgroup W adds the squared gradient of Z and the encoder
//                       ‖∂Z‖² + ‖∂encoder‖² (after `input_gradients` and encoder.wgsl's passes),
//                       W + 1 the rows' Σ_n KL(q(w_n) ‖ N(0, 1)) = Σ_n ½(Σ_n + μ_n² − 1 − log Σ_n),
//                       W + 2 + j the points' Σ_t u_tj² (k_tt's adjoint: Σ_t ∂k(u_t, u_t)/∂θ^lin_j).
//                       Each invocation takes a strided df sum, then a tree over the workgroup:
//                       the order is fixed, the result does not depend on timing.
// `parameter_gradients` src_a = the held block's current state, src_b = the parameter table,
//                       src_c = the extra gradient of each hyperparameter (the graph prior's and
//                       the acyclicity penalty's, from the host), dst = the gradients: after
//                       `kernel_sums`, each hyperparameter's ∂L̂/∂θ from the sums as
//                       kernel.rs's `grad_from_sums` forms it, plus k_tt's share
//                       (g_var Σ_t u_tj² for θ^lin_j, g_var T for each s^c) and the extra, and
//                       ∂L̂/∂φ² = (c/φ²)(misfit/(2φ²) − T/2) in double-float; times softplus'(r),
//                       the gradient with respect to the raw number r, after ∂Z and ∂encoder.
// `adam_held`           src_a = the held block's current state [p | m | v] (p = [Z (M·D,
//                       row-major) | the encoder's P weights | the K raw hyperparameters, φ²
//                       last], m and v the same length), src_b = the gradients, dst = the next
//                       state: one Adam step on the loss −L̂, g = −∂p,
//                           m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,  p ← p − rate·m/(√v + ε),
//                       with rate = lr·√(1−β₂ᵗ)/(1−β₁ᵗ) from the host (gp/adam.rs in f64).
//
// Every pass runs over all slots of a batch at once: the dispatch's y is the slot.
//
// GRADIENTS = [misfit (df) | ‖∂Z, ∂encoder‖² (df) | Σ KL(q(w)) (df) | Σ_s ∂w (b)
//              | Σ_s ∂w ε/(2√Σ) (b) | kernel sums (W df) | Σ_t u_tj² (D df) | ∂Z (M·D)
//              | ∂encoder (P) | ∂r (K)]: the host reads the first 6 values back, and q(w)'s sums
//              (2b) only when it holds q(w) itself; the rest stays on the device.
// The parameter table = [the mask (D) | per hyperparameter k < K − 1: (kind, input j, part c) as
//              u32 words], kind 0 θ^lin_j, 1 s^c, 2 θ^c_j, 3 the rational-quadratic shape.
// DERIVED = [θ̃^lin (D) | per part (s^c, θ̃^c (D)) | a | c/φ² | g_var | 2 θ̃^lin_slot g_var
//              | g_var (df) | c/φ² (df)].

struct Dims {
    m: u32,          // inducing points M
    width: u32,      // values per inducing row W (kernel.rs's `backward_width`)
    t: u32,          // evaluation points T = S·b (the column pass has T + M rows)
    d: u32,          // inputs per point
    samples: u32,    // S
    pad5: u32,
    pad3: f32,
    one: f32,        // 1.0, unknown to the compiler (double_float.wgsl)
    pad4: f32,
    beta1: f32,
    beta2: f32,
    epsilon: f32,
    rest1: f32,      // 1 − β₁ and 1 − β₂, rounded from f64 (not 1 − β in float32)
    rest2: f32,
    encoder: u32,    // the encoder's weights P held beside Z (0 when the host holds q(w))
    params: u32,     // K: the kernel's hyperparameters and φ² (last), held after the encoder
    parts: u32,      // the kernel's stationary parts
    linear: u32,     // 1 when the kernel has a linear part
    pad_floor: u32,  // (φ²'s floor is each slot's: `steps`)
    c_hi: f32,       // c = N/(bS), double-float
    c_lo: f32,
    derived_words: u32,  // words per slot of `derived`
    pad1: u32,
    pad2: u32,
    strides: vec4<u32>,  // words per slot of src_a, src_b, src_c and dst
}

// Per slot: DERIVED (below; `derive_parameters` writes it as `dst` and binds a spare buffer
// here), and (Adam's α_t = lr·√(1−β₂ᵗ)/(1−β₁ᵗ) from the host (gp/adam.rs in f64) as f32 bits,
// the latent input's column, φ²'s floor as f32 bits, 0): a data column recorded at a coarse
// resolution has its own floor, so the floor is per slot and variables of one shape share a
// batch.
@group(0) @binding(5) var<storage, read> derived: array<f32>;
@group(0) @binding(6) var<storage, read> steps: array<vec4<u32>>;

// The slot this invocation works for (the dispatch's y: every pass runs over all slots of a
// batch, each binding holding them one after another) and where it starts in each binding.
var<private> at_slot: u32;
var<private> base: vec4<u32>;

// Every entry point's first call: all bindings in its layout (`touch`), then the slot's places.
fn enter(slot: u32) {
    touch();
    _ = derived[0];
    _ = steps[0];
    at_slot = slot;
    base = dims.strides * slot;
}

// The slot's latent input column (among the D inputs of each point).
fn latent_column() -> u32 {
    return steps[at_slot].y;
}

// k_tt's adjoint per unit of w, 2 θ̃^lin_slot g_var (DERIVED's, after the shape a and c/φ², g_var).
fn diag() -> f32 {
    return derived[at_slot * dims.derived_words + dims.d + dims.parts * (dims.d + 1u) + 3u];
}

// Where each part of the gradients starts (GRADIENTS above): what the host reads first.
const NORM_AT: u32 = 2u;
const KL_AT: u32 = 4u;
const LATENT_AT: u32 = 6u;

fn sums_at() -> u32 {
    return LATENT_AT + 2u * (dims.t / max(dims.samples, 1u));
}

fn squares_at() -> u32 {
    return sums_at() + 2u * dims.width;
}

// Values of the held block Z and the encoder (the hyperparameters follow them).
fn held_count() -> u32 {
    return dims.m * dims.d + dims.encoder;
}

fn z_at() -> u32 {
    return squares_at() + 2u * dims.d;
}

// Where the rational-quadratic shape's value sits in DERIVED (and its sum among the W).
fn alpha_at() -> u32 {
    return dims.d + dims.parts * (dims.d + 1u);
}

// Raw number k of the hyperparameters in the held state `src_a`.
fn raw_parameter(k: u32) -> f32 {
    return src_a[base.x + held_count() + k];
}

// (kind, input, part) of hyperparameter k < K − 1.
fn parameter_record(k: u32) -> vec3<u32> {
    let at = dims.d + 3u * k;
    return vec3<u32>(bitcast<u32>(src_b[base.y + at]), bitcast<u32>(src_b[base.y + at + 1u]), bitcast<u32>(src_b[base.y + at + 2u]));
}

// φ² = softplus(r) + floor, r the last hyperparameter.
fn noise_variance() -> f32 {
    return softplus(raw_parameter(dims.params - 1u)) + bitcast<f32>(steps[at_slot].z);
}

// c/φ² in double-float.
fn noise_scale(phi: f32) -> vec2<f32> {
    return df_div(vec2<f32>(dims.c_hi, dims.c_lo), vec2<f32>(phi, 0.0));
}

const GROUP: u32 = 64u;

// The passes below share out one slot's work in a workgroup: the slot is the workgroup's y, and
// each invocation strides over the work from its index in the workgroup (its `Lane`).
// `workgroup_id` stays a parameter of its own: WGSL's uniformity analysis counts a whole struct as
// varying across the workgroup when one member does, and `kernel_sums` branches on
// `workgroup_id` before its barriers.
struct Lane {
    @builtin(local_invocation_index) index: u32,
}

@compute @workgroup_size(64)
fn derive_parameters(@builtin(workgroup_id) group: vec3<u32>, lane: Lane) {
    enter(group.y);
    let d = dims.d;
    if (dims.linear == 0u) {
        for (var j = lane.index; j < d; j += GROUP) {
            dst[base.w + j] = 0.0;
        }
    }
    for (var k = lane.index; k + 1u < dims.params; k += GROUP) {
        let r = parameter_record(k);
        let value = softplus(raw_parameter(k));
        switch r.x {
            case 0u: {
                dst[base.w + r.y] = value * src_b[base.y + r.y];
            }
            case 1u: {
                dst[base.w + d + r.z * (d + 1u)] = value;
            }
            case 2u: {
                dst[base.w + d + r.z * (d + 1u) + 1u + r.y] = value * src_b[base.y + r.y];
            }
            default: {
                dst[base.w + alpha_at()] = value;
            }
        }
    }
    if (lane.index == 0u) {
        let scale = noise_scale(noise_variance());
        let g_var = -0.5 * scale;
        var linear_slot = 0.0;
        if (dims.linear == 1u) {
            linear_slot = softplus(raw_parameter(latent_column())) * src_b[base.y + latent_column()];
        }
        let at = alpha_at();
        dst[base.w + at + 1u] = scale.x + scale.y;
        dst[base.w + at + 2u] = g_var.x + g_var.y;
        dst[base.w + at + 3u] = 2.0 * linear_slot * (g_var.x + g_var.y);
        dst[base.w + at + 4u] = g_var.x;
        dst[base.w + at + 5u] = g_var.y;
        dst[base.w + at + 6u] = scale.x;
        dst[base.w + at + 7u] = scale.y;
    }
}

@compute @workgroup_size(64)
fn input_gradients(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let e = id.x;
    let mw = dims.m * dims.width;
    let b = dims.t / max(dims.samples, 1u);
    if (e < 2u) {
        dst[base.w + e] = src_a[base.x + e];
    }
    if (e < dims.m * dims.d) {
        let i = e / dims.d;
        let at = i * dims.width + e % dims.d;
        dst[base.w + z_at() + e] = (src_a[base.x + 2u + at] + src_a[base.x + 2u + mw + at])
            + src_b[base.y + (dims.t + i) * dims.d + e % dims.d];
    }
    if (e < b) {
        let mu = src_c[base.z + dims.t + 2u * e];
        let root = src_c[base.z + dims.t + 2u * e + 1u];
        var d_mu = 0.0;
        var d_eps = 0.0;
        for (var s = 0u; s < dims.samples; s++) {
            let p = e * dims.samples + s;
            let eps = src_c[base.z + p];
            let dw = src_b[base.y + p * dims.d + latent_column()] + diag() * (mu + root * eps);
            d_mu += dw;
            d_eps += dw * eps;
        }
        dst[base.w + LATENT_AT + e] = d_mu;
        dst[base.w + LATENT_AT + b + e] = d_eps / (2.0 * root);
    }
}

var<workgroup> partial: array<vec2<f32>, 64>;

@compute @workgroup_size(64)
fn kernel_sums(@builtin(workgroup_id) group: vec3<u32>, lane: Lane) {
    enter(group.y);
    let w = group.x;
    let mw = dims.m * dims.width;
    var sum = vec2<f32>(0.0, 0.0);
    // `w` is the same for the whole workgroup, so every invocation reaches the barriers.
    let b = dims.t / max(dims.samples, 1u);
    if (w < dims.width) {
        for (var i = lane.index; i < dims.m; i += GROUP) {
            let at = i * dims.width + w;
            sum = df_add(sum, vec2<f32>(src_a[base.x + 2u + at], src_a[base.x + 2u + mw + at]));
        }
    } else if (w == dims.width) {
        for (var e = lane.index; e < held_count(); e += GROUP) {
            let g = dst[base.w + z_at() + e];
            sum = df_add(sum, two_prod(g, g));
        }
    } else if (w == dims.width + 1u) {
        for (var n = lane.index; n < b; n += GROUP) {
            let mu = src_b[base.y + dims.t + 2u * n];
            let root = src_b[base.y + dims.t + 2u * n + 1u];
            let variance = root * root;
            sum = df_add(sum, vec2<f32>(0.5 * (variance + mu * mu - 1.0 - log(variance)), 0.0));
        }
    } else {
        let j = w - dims.width - 2u;
        for (var p = lane.index; p < dims.t; p += GROUP) {
            let u = src_c[base.z + p * dims.d + j];
            sum = df_add(sum, two_prod(u, u));
        }
    }
    partial[lane.index] = sum;
    workgroupBarrier();
    for (var half = GROUP / 2u; half > 0u; half /= 2u) {
        if (lane.index < half) {
            partial[lane.index] = df_add(partial[lane.index], partial[lane.index + half]);
        }
        workgroupBarrier();
    }
    if (lane.index == 0u) {
        var at = sums_at() + 2u * w;
        if (w == dims.width) {
            at = NORM_AT;
        } else if (w == dims.width + 1u) {
            at = KL_AT;
        } else if (w > dims.width + 1u) {
            at = squares_at() + 2u * (w - dims.width - 2u);
        }
        dst[base.w + at] = partial[0].x;
        dst[base.w + at + 1u] = partial[0].y;
    }
}

@compute @workgroup_size(64)
fn adam_held(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let e = id.x;
    let n = held_count() + dims.params;
    if (e < n) {
        let g = -src_b[base.y + z_at() + e];
        let m = dims.beta1 * src_a[base.x + n + e] + dims.rest1 * g;
        let v = dims.beta2 * src_a[base.x + 2u * n + e] + dims.rest2 * g * g;
        dst[base.w + e] = src_a[base.x + e] - bitcast<f32>(steps[at_slot].x) * m / (sqrt(v) + dims.epsilon);
        dst[base.w + n + e] = m;
        dst[base.w + 2u * n + e] = v;
    }
}

// The sum of the W kernel sums' value i, and the points' Σ_t u_tj², from the gradients (df).
fn kernel_sum(i: u32) -> f32 {
    let at = sums_at() + 2u * i;
    return dst[base.w + at] + dst[base.w + at + 1u];
}

fn column_squares(j: u32) -> f32 {
    let at = squares_at() + 2u * j;
    return dst[base.w + at] + dst[base.w + at + 1u];
}

@compute @workgroup_size(64)
fn parameter_gradients(@builtin(workgroup_id) group: vec3<u32>, lane: Lane) {
    enter(group.y);
    let d = dims.d;
    let phi = noise_variance();
    let scale = noise_scale(phi);
    let g_var = -0.5 * (scale.x + scale.y);
    let t = f32(dims.t);
    let alpha = alpha_at();
    for (var k = lane.index; k < dims.params; k += GROUP) {
        let raw = raw_parameter(k);
        var g = 0.0;
        if (k + 1u == dims.params) {
            let misfit = vec2<f32>(dst[base.w + 0], dst[base.w + 1]);
            let inner = df_add(df_div(misfit, vec2<f32>(2.0 * phi, 0.0)), vec2<f32>(-0.5 * t, 0.0));
            let exact = df_mul(scale, inner);
            g = exact.x + exact.y;
        } else {
            let r = parameter_record(k);
            let part = d + r.z * (d + 1u);
            switch r.x {
                case 0u: {
                    g = src_b[base.y + r.y] * (kernel_sum(alpha + 1u + r.y) + g_var * column_squares(r.y));
                }
                case 1u: {
                    g = kernel_sum(part) + g_var * t;
                }
                case 2u: {
                    let theta = softplus(raw) * src_b[base.y + r.y];
                    g = src_b[base.y + r.y] * 2.0 * theta * kernel_sum(part + 1u + r.y);
                }
                default: {
                    g = kernel_sum(alpha);
                }
            }
            g += src_c[base.z + k];
        }
        dst[base.w + z_at() + held_count() + k] = g * sigmoid(raw);
    }
}
