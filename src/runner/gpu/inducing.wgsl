// The glue of the uncollapsed evaluation whose M × M algebra stays on the device (resident.rs,
// issue 34 items 2–3): small passes between the kernel matrix, the double-float factorisations of
// cholesky.wgsl and the float32 products of gemm.wgsl, so that nothing of size M × M crosses to
// the host. double_float.wgsl and five_buffers.wgsl (the bindings: `dims`, src_a, src_b, src_c,
// dst, one layout for every entry point) are prepended.
//
// Every pass runs over all slots of a batch at once: the dispatch's y is the slot, and each
// binding holds the batch's slots one after another, `dims.strides` words apart (0 for a binding
// the pass does not read), so slot s of src_a starts at word s · strides.x. The per-slot noise
// constants g_var = −c/(2φ²) and c/φ² in double-float (the device's, derived from each slot's
// φ²) are four words of `noise` (the batch's derived parameters), `noise_at` words into slot s's
// `noise_stride`.
//
// Layouts: a double-float ("df") value is two f32 words (head, tail); the factorisations' and
// q(v)'s matrices are df, row-major (cholesky.wgsl); the products' operands are f32,
// column-major (gemm.wgsl); K_ZZ is f32 column-major.
//
// `widen_gram`       K_ZZ (f32) → df row-major lower triangle.
// `narrow_matrix`    a df row-major M × M matrix at `offset` → f32 column-major (minus I when
//                    flags & 1), for the products.
// `mean_alpha`       q(v)'s m (df, in the state at `offset`) → f32 [m | α = L⁻ᵀm], with L⁻¹ the
//                    factor's inverse (df) in `src_b`.
// `mirror_p`         P = Ã Ãᵀ (the SYRK's head and tail planes, lower blocks) → f32 full P.
// `l_bar`            L̄ = tril(−α (Ã g)ᵀ − 2 g_var W), W = L⁻ᵀ(S − I)P, f32 column-major.
// `phi`              Φ(X) in place: the strict upper triangle zeroed, the diagonal halved.
// `symmetrise_into`  K̄_ZZ = (X + Xᵀ)/2, written `t` · M words into `dst`.
// `natural_inputs`   [P, Λ, η₁, r] (df, row-major) for cholesky.wgsl's natural step, with
//                    Λ = (c/φ²) Ã Ãᵀ and r = (c/φ²) Ã y from the compensated products' planes.
// `kl_terms`         tr S, mᵀm and log det S = −2 Σ log L_P,ii from q(v)'s state, as df.

struct Dims {
    m: u32,               // inducing points M
    t: u32,               // `widen_gram`, `symmetrise_into`: K_ZZ starts t · M words on
    offset: u32,          // where the source matrix starts in `src_a`, in df values
    flags: u32,           // `narrow_matrix`: 1 subtracts the identity
    strides: vec4<u32>,   // words per slot of src_a, src_b, src_c and dst
    one: f32,             // 1.0, unknown to the compiler (double_float.wgsl)
    noise_at: u32,        // where a slot's g_var (df), then c/φ² (df), start in `noise`
    noise_stride: u32,    // words per slot of `noise`
    pad: u32,
}

@group(0) @binding(5) var<storage, read> noise: array<f32>;

// The slot this invocation works for and where it starts in each binding.
var<private> slot: u32;
var<private> base: vec4<u32>;

// Every entry point's first call: all bindings in its layout (`touch`), then the slot's places.
fn enter(s: u32) {
    touch();
    _ = noise[0];
    slot = s;
    base = dims.strides * s;
}

// Entry k = id.x of slot id.y's M × M matrix, at row i and column j; `inside` is false past its
// M² entries.
struct Cell {
    k: u32,
    i: u32,
    j: u32,
    inside: bool,
}

// An element-wise pass's first call (it calls `enter`): its entry k = iM + j.
fn by_rows(id: vec3<u32>) -> Cell {
    enter(id.y);
    let m = dims.m;
    let k = id.x;
    return Cell(k, k / m, k % m, k < m * m);
}

// The same for a column-major matrix: k = i + jM.
fn by_columns(id: vec3<u32>) -> Cell {
    let c = by_rows(id);
    return Cell(c.k, c.j, c.i, c.inside);
}

fn g_var() -> f32 {
    let at = slot * dims.noise_stride + dims.noise_at;
    return noise[at] + noise[at + 1u];
}

fn scale() -> vec2<f32> {
    let at = slot * dims.noise_stride + dims.noise_at;
    return vec2<f32>(noise[at + 2u], noise[at + 3u]);
}

fn df_a(k: u32) -> vec2<f32> {
    return vec2<f32>(src_a[base.x + 2u * k], src_a[base.x + 2u * k + 1u]);
}

fn df_b(k: u32) -> vec2<f32> {
    return vec2<f32>(src_b[base.y + 2u * k], src_b[base.y + 2u * k + 1u]);
}

fn put_df(k: u32, v: vec2<f32>) {
    dst[base.w + 2u * k] = v.x;
    dst[base.w + 2u * k + 1u] = v.y;
}

// A compensated product's value at `k` from its head plane and its tail plane `plane` words on.
fn planes(buffer_b: bool, k: u32, plane: u32) -> vec2<f32> {
    if (buffer_b) {
        return two_sum(src_b[base.y + k], src_b[base.y + plane + k]);
    }
    return two_sum(src_a[base.x + k], src_a[base.x + plane + k]);
}

@compute @workgroup_size(64)
fn widen_gram(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_rows(id);
    if (!c.inside) {
        return;
    }
    let m = dims.m;
    var v = vec2<f32>(0.0, 0.0);
    if (c.j <= c.i) {
        v = vec2<f32>(src_a[base.x + m * dims.t + c.i + c.j * m], 0.0);
    }
    put_df(c.k, v);
}

@compute @workgroup_size(64)
fn narrow_matrix(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_rows(id);
    if (!c.inside) {
        return;
    }
    let m = dims.m;
    var v = df_a(dims.offset + c.k);
    if ((dims.flags & 1u) != 0u && c.i == c.j) {
        v = df_add(v, vec2<f32>(-1.0, 0.0));
    }
    dst[base.w + c.i + c.j * m] = v.x + v.y;
}

@compute @workgroup_size(64)
fn mean_alpha(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let m = dims.m;
    let i = id.x;
    if (i >= m) {
        return;
    }
    let mean = dims.offset;
    let v = df_a(mean + i);
    dst[base.w + i] = v.x + v.y;
    // α_i = Σ_k (L⁻¹)_ki m_k, L⁻¹ lower: k ≥ i.
    let inv = m * m;
    var sum = vec2<f32>(0.0, 0.0);
    for (var k = i; k < m; k++) {
        sum = df_add(sum, df_mul(df_b(inv + k * m + i), df_a(mean + k)));
    }
    dst[base.w + m + i] = sum.x + sum.y;
}

@compute @workgroup_size(64)
fn mirror_p(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_columns(id);
    if (!c.inside) {
        return;
    }
    let m = dims.m;
    // Column-major; the SYRK wrote the blocks on or below the diagonal.
    let low = select(c.j + c.i * m, c.k, c.i >= c.j);
    let v = planes(false, low, m * m);
    dst[base.w + c.k] = v.x + v.y;
}

@compute @workgroup_size(64)
fn l_bar(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_columns(id);
    if (!c.inside) {
        return;
    }
    let m = dims.m;
    if (c.j > c.i) {
        dst[base.w + c.k] = 0.0;
        return;
    }
    let alpha = src_a[base.x + m + c.i];
    // Ã g: the first column of the compensated [Ã g, Ã y] (M × 2, planes of 2M).
    let g = planes(true, c.j, 2u * m);
    dst[base.w + c.k] = -alpha * (g.x + g.y) - 2.0 * g_var() * src_c[base.z + c.k];
}

@compute @workgroup_size(64)
fn phi(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_columns(id);
    if (!c.inside) {
        return;
    }
    if (c.j > c.i) {
        dst[base.w + c.k] = 0.0;
    } else if (c.j == c.i) {
        dst[base.w + c.k] = 0.5 * dst[base.w + c.k];
    }
}

@compute @workgroup_size(64)
fn symmetrise_into(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_columns(id);
    if (!c.inside) {
        return;
    }
    let m = dims.m;
    dst[base.w + m * dims.t + c.k] = 0.5 * (src_a[base.x + c.k] + src_a[base.x + c.j + c.i * m]);
}

@compute @workgroup_size(64)
fn natural_inputs(@builtin(global_invocation_id) id: vec3<u32>) {
    let c = by_rows(id);
    let m = dims.m;
    let p = dims.offset;
    if (c.inside) {
        put_df(c.k, df_a(p + c.k));
        // Λ = (c/φ²) Ã Ãᵀ, from the SYRK's lower blocks (column-major planes of M² in src_b).
        let low = select(c.i + c.j * m, c.j + c.i * m, c.j > c.i);
        put_df(m * m + c.k, df_mul(scale(), planes(true, low, m * m)));
    }
    if (c.k < m) {
        // η₁ after q(v)'s matrices P, S and mean in the state; r from Ã y (second column of the
        // compensated [Ã g, Ã y] in src_c, planes of 2M).
        put_df(2u * m * m + c.k, df_a(p + 2u * m * m + m + c.k));
        let ky = two_sum(src_c[base.z + m + c.k], src_c[base.z + 3u * m + c.k]);
        put_df(2u * m * m + m + c.k, df_mul(scale(), ky));
    }
}

// One invocation per slot (the dispatch's y).
@compute @workgroup_size(1)
fn kl_terms(@builtin(global_invocation_id) id: vec3<u32>) {
    enter(id.y);
    let m = dims.m;
    // The state: [L_P | X_P | status (4) | P | S | m | η₁], `offset` = where L_P starts.
    let state = dims.offset;
    let s = state + 2u * m * m + 4u + m * m;
    let mean = s + m * m;
    var trace = vec2<f32>(0.0, 0.0);
    var norm = vec2<f32>(0.0, 0.0);
    var logdet = vec2<f32>(0.0, 0.0);
    for (var i = 0u; i < m; i++) {
        trace = df_add(trace, df_a(s + i * m + i));
        let mi = df_a(mean + i);
        norm = df_add(norm, df_mul(mi, mi));
        let l = df_a(state + i * m + i);
        // log(h + t) = log h + log1p(t/h) ≈ log h + t/h.
        logdet = df_add(logdet, two_sum(-2.0 * log(l.x), -2.0 * l.y / l.x));
    }
    put_df(0u, trace);
    put_df(1u, norm);
    put_df(2u, logdet);
}
