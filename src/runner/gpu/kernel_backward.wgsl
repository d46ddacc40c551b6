// The adjoint of K(A, B) (after kernel_common.wgsl; the host's f64 reference is
// `Kernel::cross_backward`).
// Given dK = ∂L/∂K (n × m, column-major, bound as `dk`), with G_c = dK ∘ s^c κ_c′(r_c²) and
// Δ_j = a_pj − b_qj:
//   ∂s^c = Σ dK κ_c,  ∂a = s Σ dK ∂κ/∂a (RQ),  ∂θ^c_j ∝ Σ G_c Δ_j²,  ∂θ^lin_j ∝ Σ dK a_pj b_qj,
//   ∂a_pj = Σ_q [Σ_c 2 (θ̃^c_j)² G_c Δ_j + θ̃^lin_j dK b_qj],  ∂b_qj = Σ_p [−Σ_c 2 (θ̃^c_j)² G_c Δ_j + θ̃^lin_j dK a_pj].
// `backward_rows` runs one invocation per row p of A and chunk of `dims.chunk` columns of B (the
// dispatch's y; the slot is its z) and writes the chunk's share of ∂a_p and of the parameter sums;
// `backward_cols` one per row q of B (the slot is the dispatch's y) for ∂b_q. The sums over
// chunks are finished by finish.wgsl on the device or by the host in f64.

@group(0) @binding(5) var<storage, read> dk: array<f32>;
@group(0) @binding(6) var<storage, read_write> out: array<f32>;

// Per chunk y and row p, `out` holds at (y·n + p)·W the W = 2D + parts·(D + 1) + 1 values:
//   ∂a_p (D) | per part: Σ dK κ, then Σ G Δ_j² (D) | Σ s dK ∂κ/∂a | Σ dK a_pj b_qj (D),
// each summed over the chunk's columns q.
@compute @workgroup_size(64)
fn backward_rows(@builtin(global_invocation_id) id: vec3<u32>) {
    let p = id.x;
    let slot = id.z;
    if (p >= dims.n) {
        return;
    }
    params_at = slot * dims.stride_params;
    let alpha = shape_alpha();
    let d = dims.d;
    let stride = d + 1u;
    let width = 2u * d + dims.parts * stride + 1u;
    let row = slot * dims.stride_rows + (id.y * dims.n + p) * width;
    let q_start = id.y * dims.chunk;
    let q_end = min(dims.m, q_start + dims.chunk);
    for (var w = 0u; w < width; w++) {
        out[row + w] = 0.0;
    }
    let ap = dims.at_a + slot * dims.stride_a + p * d;
    let dk_at = slot * dims.stride_k;
    let alpha_at = row + d + dims.parts * stride;
    let linear_at = alpha_at + 1u;
    for (var q = q_start; q < q_end; q++) {
        let bq = slot * dims.stride_b + q * d;
        let g_in = dk[dk_at + p + q * dims.n];
        for (var j = 0u; j < d; j++) {
            let t = linear(j);
            if (t != 0.0) {
                out[linear_at + j] += g_in * a[ap + j] * b[bq + j];
                out[row + j] += t * g_in * b[bq + j];
            }
        }
        for (var c = 0u; c < dims.parts; c++) {
            let base = c * stride;
            let r2 = sq_dist(base, ap, bq);
            let v = shape(kinds[c], r2, alpha);
            let s = part(base);
            let part_at = row + d + c * stride;
            out[part_at] += g_in * v.x;
            out[alpha_at] += s * g_in * v.z;
            let g = g_in * s * v.y;
            for (var j = 0u; j < d; j++) {
                let t = part(base + 1u + j);
                if (t != 0.0) {
                    let delta = a[ap + j] - b[bq + j];
                    out[part_at + 1u + j] += g * delta * delta;
                    out[row + j] += 2.0 * t * t * g * delta;
                }
            }
        }
    }
}

// Per row q of B, `out` holds ∂b_q (D values).
@compute @workgroup_size(64)
fn backward_cols(@builtin(global_invocation_id) id: vec3<u32>) {
    let q = id.x;
    let slot = id.y;
    if (q >= dims.m) {
        return;
    }
    params_at = slot * dims.stride_params;
    let alpha = shape_alpha();
    let d = dims.d;
    let stride = d + 1u;
    let bq = slot * dims.stride_b + q * d;
    let at = slot * dims.stride_cols + q * d;
    let dk_at = slot * dims.stride_k;
    for (var j = 0u; j < d; j++) {
        out[at + j] = 0.0;
    }
    for (var p = 0u; p < dims.n; p++) {
        let ap = dims.at_a + slot * dims.stride_a + p * d;
        let g_in = dk[dk_at + p + q * dims.n];
        for (var j = 0u; j < d; j++) {
            let t = linear(j);
            if (t != 0.0) {
                out[at + j] += t * g_in * a[ap + j];
            }
        }
        for (var c = 0u; c < dims.parts; c++) {
            let base = c * stride;
            let r2 = sq_dist(base, ap, bq);
            // κ′ = 0 at r² ≤ 0 (kernel_shapes.wgsl), so coincident points add nothing.
            let g = g_in * part(base) * shape(kinds[c], r2, alpha).y;
            for (var j = 0u; j < d; j++) {
                let t = part(base + 1u + j);
                if (t != 0.0) {
                    out[at + j] -= 2.0 * t * t * g * (a[ap + j] - b[bq + j]);
                }
            }
        }
    }
}
