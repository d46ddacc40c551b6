// The forward pass, one invocation per entry (after kernel_common.wgsl):
// K[p, q] = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²). The host's f64 reference is `Kernel::cross`.

// n × m, column-major (nalgebra's layout): K[p, q] at p + q·n.
@group(0) @binding(6) var<storage, read_write> k: array<f32>;

@compute @workgroup_size(8, 8)
fn cross(@builtin(global_invocation_id) id: vec3<u32>) {
    let p = id.x;
    let q = id.y;
    if (p >= dims.n || q >= dims.m) {
        return;
    }
    let ap = p * dims.d;
    let bq = q * dims.d;
    var value = 0.0;
    for (var j = 0u; j < dims.d; j++) {
        let t = linear[j];
        if (t != 0.0) {
            value += t * a[ap + j] * b[bq + j];
        }
    }
    let stride = dims.d + 1u;
    for (var c = 0u; c < dims.parts; c++) {
        let base = c * stride;
        let r2 = sq_dist(base, ap, bq);
        var kappa = 1.0;
        if (r2 > 0.0) {
            kappa = shape_slopes(kinds[c], r2, dims.alpha).x;
        }
        value += parts[base] * kappa;
    }
    k[p + q * dims.n] = value;
}

