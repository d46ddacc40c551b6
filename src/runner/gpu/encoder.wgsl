// q(w)'s encoder on the device (issue 34 item 1): the MLP of gp/encoder.rs run forward on the
// minibatch's rows and backward from q(w)'s gradient, so that neither q(w)'s moments nor their
// gradients (2b values) cross to the host and the host does none of the encoder's ~6·b·P flops.
// Its weights and Adam's moments are the tail of a slot's held state [Z | encoder] (resident.rs);
// the step itself is held_gradients.wgsl's `adam_held`, over Z and the encoder together.
// double_float.wgsl and five_buffers.wgsl (the bindings: `dims`, src_a, src_b, src_c, dst) are
// prepended. One dispatch per layer over all slots of a batch: `dims` describes that layer, the
// dispatch's y is the slot.
//
// Layer k is h_out = act(W h_in + b) with W fan_out × fan_in stored column-major as the host's
// `Encoder::params_to_vec` (W[o, i] at weights + i·fan_out + o), b after it; act = ReLU for the
// hidden layers, the identity for the head (2 outputs: μ and the raw variance). Σ = softplus(raw)
// + 1e-6. Row-major activations: the tape holds each layer's output (rows × fan_out) at `output`;
// layer 0's input is the minibatch's rows x (rows × D, points.wgsl's `x`).
//
// `forward`          src_a = the held state, src_b = x, dst = the tape: one layer's outputs.
// `latent_moments`   src_a = the tape (the head's outputs at `output`), dst = the latent input
//                    [ε (T) | (μ_n, √Σ_n)] of points.wgsl: writes (μ_n, √Σ_n) at T + 2n.
// `head_adjoint`     src_a = the tape, src_b = the gradients (held_gradients.wgsl's layout: the
//                    sums Σ_s ∂w_sn, Σ_s ∂w_sn ε_sn/(2√Σ_n) at `grads`, `grads` + rows), dst = δ:
//                        ∂L̂/∂μ_n   = Σ_s ∂w_sn − (N/b) μ_n,
//                        ∂L̂/∂raw_n = [Σ_s ∂w_sn ε_sn/(2√Σ_n) − (N/b)·½(1 − 1/Σ_n)] σ(raw_n),
//                    with KL(q(w_n) ‖ N(0, 1))'s gradient as svgp.rs's `with_latent_kl`.
// `weight_grads`     src_a = the tape, src_b = x, src_c = δ of the layer's output, dst = the
//                    gradients: ∂W[o, i] = Σ_n δ_no h_in,ni and ∂b_o = Σ_n δ_no at `grads`, in the
//                    parameters' order (a fixed order over the rows: no atomics).
// `back_delta`       src_a = the held state, src_b = the tape, dst = δ: the input's δ,
//                        δ_in,ni = [h_in,ni > 0] Σ_o δ_no W[o, i]
//                    (h_in is the previous layer's ReLU output; ReLU'(0) = 0 as on the host),
//                    read at `delta_in` and written at `delta_out` of the same buffer.

struct Dims {
    rows: u32,       // b
    fan_in: u32,
    fan_out: u32,
    weights: u32,    // where W starts in the held state (b follows at weights + fan_in·fan_out)
    input: u32,      // where h_in starts in the tape (unused for layer 0: x)
    output: u32,     // where h_out starts in the tape
    relu: u32,       // 1 for a hidden layer
    first: u32,      // 1 for layer 0
    delta_in: u32,   // where δ of h_out starts in the δ buffer
    delta_out: u32,  // where δ of h_in goes
    grads: u32,      // where this layer's gradient goes in the gradients (head_adjoint: the sums)
    latent_t: u32,   // T: (μ_n, √Σ_n) go at T + 2n of the latent input
    scale: f32,      // N/b, KL(q(w))'s weight in L̂
    one: f32,
    pad0: u32,
    pad1: u32,
    strides: vec4<u32>,  // words per slot of src_a, src_b, src_c and dst
}

// Where this invocation's slot (the dispatch's y: every pass runs over all slots of a batch at
// once, each binding holding the slots one after another) starts in each binding.
var<private> base: vec4<u32>;

// Every entry point's first call: all bindings in its layout (`touch`), then the slot's places.
fn enter(slot: u32) {
    touch();
    base = dims.strides * slot;
}

// Σ's floor (gp/encoder.rs's LATENT_VARIANCE_FLOOR).
const FLOOR: f32 = 1e-6;

// Input i of row n of this layer.
fn layer_input_forward(n: u32, i: u32) -> f32 {
    if (dims.first == 1u) {
        return src_b[base.y + n * dims.fan_in + i];
    }
    return dst[base.w + dims.input + n * dims.fan_in + i];
}

@compute @workgroup_size(64)
fn forward(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let e = id.x;
    if (e >= dims.rows * dims.fan_out) {
        return;
    }
    let n = e / dims.fan_out;
    let o = e % dims.fan_out;
    var acc = src_a[base.x + dims.weights + dims.fan_in * dims.fan_out + o];
    for (var i = 0u; i < dims.fan_in; i++) {
        acc += src_a[base.x + dims.weights + i * dims.fan_out + o] * layer_input_forward(n, i);
    }
    if (dims.relu == 1u) {
        acc = max(acc, 0.0);
    }
    dst[base.w + dims.output + e] = acc;
}

@compute @workgroup_size(64)
fn latent_moments(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let n = id.x;
    if (n >= dims.rows) {
        return;
    }
    let mu = src_a[base.x + dims.output + 2u * n];
    let variance = softplus(src_a[base.x + dims.output + 2u * n + 1u]) + FLOOR;
    dst[base.w + dims.latent_t + 2u * n] = mu;
    dst[base.w + dims.latent_t + 2u * n + 1u] = sqrt(variance);
}

@compute @workgroup_size(64)
fn head_adjoint(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let n = id.x;
    if (n >= dims.rows) {
        return;
    }
    let mu = src_a[base.x + dims.output + 2u * n];
    let raw = src_a[base.x + dims.output + 2u * n + 1u];
    let variance = softplus(raw) + FLOOR;
    let d_mu = src_b[base.y + dims.grads + n] - dims.scale * mu;
    let d_var = src_b[base.y + dims.grads + dims.rows + n] - dims.scale * 0.5 * (1.0 - 1.0 / variance);
    dst[base.w + dims.delta_in + 2u * n] = d_mu;
    dst[base.w + dims.delta_in + 2u * n + 1u] = d_var * sigmoid(raw);
}

// Input i of row n of this layer, for the backward passes (the tape is src_a or src_b there).
fn layer_input_tape(n: u32, i: u32) -> f32 {
    if (dims.first == 1u) {
        return src_b[base.y + n * dims.fan_in + i];
    }
    return src_a[base.x + dims.input + n * dims.fan_in + i];
}

@compute @workgroup_size(64)
fn weight_grads(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let e = id.x;
    let weights = dims.fan_in * dims.fan_out;
    if (e >= weights + dims.fan_out) {
        return;
    }
    var acc = 0.0;
    if (e < weights) {
        let i = e / dims.fan_out;
        let o = e % dims.fan_out;
        for (var n = 0u; n < dims.rows; n++) {
            acc += src_c[base.z + dims.delta_in + n * dims.fan_out + o] * layer_input_tape(n, i);
        }
    } else {
        let o = e - weights;
        for (var n = 0u; n < dims.rows; n++) {
            acc += src_c[base.z + dims.delta_in + n * dims.fan_out + o];
        }
    }
    dst[base.w + dims.grads + e] = acc;
}

@compute @workgroup_size(64)
fn back_delta(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let e = id.x;
    if (e >= dims.rows * dims.fan_in) {
        return;
    }
    let n = e / dims.fan_in;
    let i = e % dims.fan_in;
    var acc = 0.0;
    if (src_b[base.y + dims.input + e] > 0.0) {
        for (var o = 0u; o < dims.fan_out; o++) {
            acc += dst[base.w + dims.delta_in + n * dims.fan_out + o]
                * src_a[base.x + dims.weights + i * dims.fan_out + o];
        }
    }
    dst[base.w + dims.delta_out + e] = acc;
}
