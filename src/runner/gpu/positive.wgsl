// The positive transform of gp/params.rs (value = softplus(raw) + floor) and its derivative,
// shared by the shaders that step constrained parameters (encoder.wgsl's Σ, held_gradients.wgsl's
// kernel hyperparameters and φ²), and log(1 + x) for the kernel shapes (kernel_shapes.wgsl).

// log(1 + x) for x ≥ 0: below 0.05 by its series to x⁶ (truncation below 2·10⁻⁹ relative),
// because 1 + x rounds there and WebGPU's log is only held to an absolute error near 1.
fn log_one_plus(x: f32) -> f32 {
    if (x < 0.05) {
        return x * (1.0 + x * (-0.5 + x * (1.0 / 3.0 + x * (-0.25 + x * (0.2 - x / 6.0)))));
    }
    return log(1.0 + x);
}

// softplus(r) = max(r, 0) + log(1 + e^−|r|).
fn softplus(r: f32) -> f32 {
    return max(r, 0.0) + log_one_plus(exp(-abs(r)));
}

// softplus'(r) = σ(r), written so that neither branch overflows.
fn sigmoid(r: f32) -> f32 {
    if (r >= 0.0) {
        return 1.0 / (1.0 + exp(-r));
    }
    let e = exp(r);
    return e / (1.0 + e);
}
