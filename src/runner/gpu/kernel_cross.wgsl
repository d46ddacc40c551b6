// The forward pass, one invocation per entry (after kernel_common.wgsl), slot = the dispatch's z:
// K[p, q] = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²). The host's f64 reference is `Kernel::cross`.

// n × m, column-major (nalgebra's layout): K[p, q] at p + q·n.
@group(0) @binding(5) var<storage, read_write> k: array<f32>;

@compute @workgroup_size(8, 8)
fn cross(@builtin(global_invocation_id) id: vec3<u32>) {
    let p = id.x;
    let q = id.y;
    let slot = id.z;
    if (p >= dims.n || q >= dims.m) {
        return;
    }
    params_at = slot * dims.stride_params;
    let ap = dims.at_a + slot * dims.stride_a + p * dims.d;
    let bq = slot * dims.stride_b + q * dims.d;
    var value = 0.0;
    for (var j = 0u; j < dims.d; j++) {
        let t = linear(j);
        if (t != 0.0) {
            value += t * a[ap + j] * b[bq + j];
        }
    }
    let stride = dims.d + 1u;
    let alpha = shape_alpha();
    for (var c = 0u; c < dims.parts; c++) {
        let base = c * stride;
        let r2 = sq_dist(base, ap, bq);
        value += part(base) * shape(kinds[c], r2, alpha).x;
    }
    k[slot * dims.stride_k + p + q * dims.n] = value;
}
