// The O(N M²) core of the collapsed bound's Ψ2 with a latent input (MODEL.md §4.2), float32 with
// compensated sums, in the factored form of the CPU's `psi2_se_unit` (src/gp/collapsed/psi.rs):
//   p(n, i, j) = pref_n · exp(B_ni + B_nj − h_n Δ²_ij),   Δ²_ij = (z_iw − z_jw)²,
// where every exponent is ≤ 0 (B ≤ 0, h ≥ 0), so nothing overflows and what underflows is 0.
// The host computes B (N × M), h and pref (O(N M D)) in f64 and finishes every sum in f64.
//
// `pair_sums`:  per pair j ≤ i, Σ_n p and Σ_n h_n p (Ψ2's SE part, and the adjoint of h);
// `row_sums`:   per (n, i), Σ_j W_ij p and Σ_j W_ij p Δ²_ij for a symmetric W (the adjoints of B,
//               log pref and h).
// Sums are two-sums (a head and a tail word): with thousands of positive terms a plain float32
// sum loses digits the bound's log-determinant needs. Each step is multiplied by `one` (1.0 from
// a uniform) so the shader compiler cannot rearrange the compensation away, as lavapipe's did.

struct Dims {
    n: u32,    // rows
    m: u32,    // inducing points
    one: f32,  // 1.0, unknown to the compiler
    pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
// B, N × M row-major: b[n * M + i].
@group(0) @binding(1) var<storage, read> b: array<f32>;
// Per row: h_n, pref_n.
@group(0) @binding(2) var<storage, read> rows: array<vec2<f32>>;
// z_w, M.
@group(0) @binding(3) var<storage, read> zw: array<f32>;
// W, M × M (row_sums only; pair_sums binds a one-word placeholder).
@group(0) @binding(4) var<storage, read> w: array<f32>;
// pair_sums: per pair (i, j), i * M + j, four words: Σ p (head, tail), Σ h p (head, tail).
// row_sums: per (n, i), n * M + i, four words: Σ W p (head, tail), Σ W p Δ² (head, tail).
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;

// (head, tail) + x, compensated (Knuth's two-sum).
fn add(acc: vec2<f32>, x: f32) -> vec2<f32> {
    let s = (acc.x + x) * dims.one;
    let bb = (s - acc.x) * dims.one;
    let err = ((acc.x - (s - bb) * dims.one) * dims.one + (x - bb)) * dims.one;
    return vec2<f32>(s, acc.y + err);
}

@compute @workgroup_size(8, 8)
fn pair_sums(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    let j = id.y;
    let m = dims.m;
    if (i >= m || j > i) {
        return;
    }
    // W is bound for both entry points (one layout); this one does not read it.
    _ = arrayLength(&w);
    let dz = zw[i] - zw[j];
    let dz2 = dz * dz;
    var sum_p = vec2<f32>(0.0, 0.0);
    var sum_hp = vec2<f32>(0.0, 0.0);
    for (var n = 0u; n < dims.n; n++) {
        let r = rows[n];
        let e = b[n * m + i] + b[n * m + j] - r.x * dz2;
        let p = r.y * exp(e);
        sum_p = add(sum_p, p);
        sum_hp = add(sum_hp, r.x * p);
    }
    out[i * m + j] = vec4<f32>(sum_p, sum_hp);
}

@compute @workgroup_size(64)
fn row_sums(@builtin(global_invocation_id) id: vec3<u32>) {
    let m = dims.m;
    let k = id.x + id.y * 65535u * 64u;
    if (k >= dims.n * m) {
        return;
    }
    let n = k / m;
    let i = k % m;
    let r = rows[n];
    let bi = b[n * m + i];
    var sum_wp = vec2<f32>(0.0, 0.0);
    var sum_wpd = vec2<f32>(0.0, 0.0);
    for (var j = 0u; j < m; j++) {
        let dz = zw[i] - zw[j];
        let dz2 = dz * dz;
        let q = w[i * m + j] * r.y * exp(bi + b[n * m + j] - r.x * dz2);
        sum_wp = add(sum_wp, q);
        sum_wpd = add(sum_wpd, q * dz2);
    }
    out[k] = vec4<f32>(sum_wp, sum_wpd);
}
