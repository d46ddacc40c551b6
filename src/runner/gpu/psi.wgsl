// The O(N M²) core of the collapsed bound's Ψ2 with a latent input (MODEL.md §4.2), in the factored
// form of the CPU's `psi2_se_unit` (src/gp/collapsed/psi.rs):
//   p(n, i, j) = pref_n · exp(B_ni + B_nj − h_n Δ²_ij),   Δ²_ij = (z_iw − z_jw)²,
// where every exponent is ≤ 0 (B ≤ 0, h ≥ 0), so nothing overflows.
// The host computes B (N × M), h, pref and Δ² (O(N M D + M²)) in f64 and finishes each sum.
//
// `pair_sums`:  per pair j ≤ i, Σ_n p and Σ_n h_n p (Ψ2's SE part, and the adjoint of h);
// `row_sums`:   per (n, i), Σ_j W_ij p and Σ_j W_ij p Δ²_ij for a symmetric W (the adjoints of B,
//               log pref and h).
//
// Double-float throughout (double_float.wgsl; a value is vec2(head, tail), about 48 bits): the collapsed bound solves
// with K_ZZ, whose condition number amplifies Ψ2's rounding, and a float32 Ψ2 (relative error
// 2.5·10⁻⁷) moved a 160-row variable's bound by 0.035 nats. Inputs arrive as head/tail pairs of the
// host's f64 values; exp is evaluated in double-float (below); terms below float32's range
// (e^−87) are 0. Every step of the error-free transformations is multiplied by `one` (1.0 from a
// uniform) so the shader compiler cannot rearrange them away, as lavapipe's did.

struct Dims {
    n: u32,    // rows
    m: u32,    // inducing points
    one: f32,  // 1.0, unknown to the compiler
    pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
// B, N × M row-major: b[n * M + i].
@group(0) @binding(1) var<storage, read> b: array<vec2<f32>>;
// Per row: h_n (head, tail), pref_n (head, tail).
@group(0) @binding(2) var<storage, read> rows: array<vec4<f32>>;
// Δ², M × M row-major.
@group(0) @binding(3) var<storage, read> dz2: array<vec2<f32>>;
// W, M × M row-major (row_sums only; pair_sums binds one zero value).
@group(0) @binding(4) var<storage, read> w: array<vec2<f32>>;
// pair_sums: per pair (i, j), i * M + j: Σ p, Σ h p.
// row_sums: per (n, i), n * M + i: Σ W p, Σ W p Δ².
@group(0) @binding(5) var<storage, read_write> out: array<vec4<f32>>;

// The double-float helpers (double_float.wgsl, prepended) read 1.0 from here.
fn one() -> f32 {
    return dims.one;
}

// ln 2 = LN2_HI + LN2_LO, LN2_HI with 16 significant bits (k · LN2_HI is exact for |k| < 2⁸).
const LN2_HI: f32 = 0.693145751953125;
const LN2_LO: vec2<f32> = vec2<f32>(1.428606765330187e-06, 5.497923148104107e-14);
// 1/k! as double-floats.
const C3: vec2<f32> = vec2<f32>(0.1666666716337204, -4.967053879312289e-09);
const C4: vec2<f32> = vec2<f32>(0.0416666679084301, -1.2417634698280722e-09);
const C5: vec2<f32> = vec2<f32>(0.008333333767950535, -4.34617203337595e-10);
const C6: vec2<f32> = vec2<f32>(0.0013888889225199819, -3.3631094437103215e-11);

// e^x for x ≤ 0 in double-float: x = k ln 2 + r with |r| ≤ ln2/2, e^r from e^{r/256} (Taylor to
// degree 6, error below 10⁻²³) squared eight times in the e − 1 form, then scaled by 2^k.
fn df_exp(x: vec2<f32>) -> vec2<f32> {
    // (Written so that a NaN exponent also gives 0.)
    if (!(x.x >= -87.0)) {
        return vec2<f32>(0.0, 0.0);
    }
    let k = round(x.x * 1.4426950216293335);
    var r = df_add(x, vec2<f32>(-k * LN2_HI, 0.0));
    r = df_add(r, -df_mul(LN2_LO, vec2<f32>(k, 0.0)));
    r = r * (1.0 / 256.0);
    // u = e^r − 1 = r (1 + r/2 (…)), Horner over 1/k!.
    var u = df_add(C5, df_mul(r, C6));
    u = df_add(C4, df_mul(r, u));
    u = df_add(C3, df_mul(r, u));
    u = df_add(vec2<f32>(0.5, 0.0), df_mul(r, u));
    u = df_add(vec2<f32>(1.0, 0.0), df_mul(r, u));
    u = df_mul(r, u);
    // (1 + u)² − 1 = 2u + u².
    for (var s = 0; s < 8; s++) {
        u = df_add(u * 2.0, df_mul(u, u));
    }
    let e = df_add(vec2<f32>(1.0, 0.0), u);
    // ldexp is exact (exp2 may be off by hundreds of ulps at k = −126 and stay conforming).
    return vec2<f32>(ldexp(e.x, i32(k)), ldexp(e.y, i32(k)));
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
    let d2 = dz2[i * m + j];
    var sum_p = vec2<f32>(0.0, 0.0);
    var sum_hp = vec2<f32>(0.0, 0.0);
    for (var n = 0u; n < dims.n; n++) {
        let r = rows[n];
        let h = r.xy;
        let e = df_add(df_add(b[n * m + i], b[n * m + j]), -df_mul(h, d2));
        let p = df_mul(r.zw, df_exp(e));
        sum_p = df_add(sum_p, p);
        sum_hp = df_add(sum_hp, df_mul(h, p));
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
        let d2 = dz2[i * m + j];
        let e = df_add(df_add(bi, b[n * m + j]), -df_mul(r.xy, d2));
        let q = df_mul(w[i * m + j], df_mul(r.zw, df_exp(e)));
        sum_wp = df_add(sum_wp, q);
        sum_wpd = df_add(sum_wpd, df_mul(q, d2));
    }
    out[k] = vec4<f32>(sum_wp, sum_wpd);
}
