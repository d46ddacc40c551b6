// K(A, B) for Occam's kernel (MODEL.md §2.2), float32, one invocation per entry:
//   K[p, q] = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²),  r_c² = Σ_j (θ̃^c_j a_pj − θ̃^c_j b_qj)²,
// with the masks already applied on the host (θ̃ = E ∘ θ) and dimensions with θ̃ = 0 skipped, so a
// masked input never enters. κ = 1 at r² ≤ 0 (the coincident-point branch of MODEL.md §2.2).
// The host's f64 reference is `Kernel::cross`.

struct Dims {
    n: u32,       // rows of A
    m: u32,       // rows of B
    d: u32,       // input dimensions
    parts: u32,   // stationary parts
    alpha: f32,   // the rational quadratic's a
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
// n × d and m × d, row-major.
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
// θ̃^lin (d entries, zeros without a linear part).
@group(0) @binding(3) var<storage, read> linear: array<f32>;
// Per part: s^c, then its d precisions θ̃^c.
@group(0) @binding(4) var<storage, read> parts: array<f32>;
// Per part: 0 squared exponential, 1 Matérn-1/2, 2 Matérn-3/2, 3 rational quadratic.
@group(0) @binding(5) var<storage, read> kinds: array<u32>;
// n × m, column-major (nalgebra's layout): K[p, q] at p + q·n.
@group(0) @binding(6) var<storage, read_write> k: array<f32>;

// The unit-variance shape at r² > 0.
fn shape(kind: u32, r2: f32, alpha: f32) -> f32 {
    switch kind {
        case 0u: {
            return exp(-0.5 * r2);
        }
        case 1u: {
            return exp(-sqrt(r2));
        }
        case 2u: {
            let sr = sqrt(3.0 * r2);
            return (1.0 + sr) * exp(-sr);
        }
        default: {
            return exp(-alpha * log(1.0 + r2 / (2.0 * alpha)));
        }
    }
}

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
        var r2 = 0.0;
        for (var j = 0u; j < dims.d; j++) {
            let t = parts[base + 1u + j];
            if (t != 0.0) {
                let diff = t * a[ap + j] - t * b[bq + j];
                r2 += diff * diff;
            }
        }
        var kappa = 1.0;
        if (r2 > 0.0) {
            kappa = shape(kinds[c], r2, dims.alpha);
        }
        value += parts[base] * kappa;
    }
    k[p + q * dims.n] = value;
}
