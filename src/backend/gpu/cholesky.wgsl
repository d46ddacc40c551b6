// Batched Cholesky factorisation with the jitter ladder inside the shader, the inverse of the
// factor, and the natural-gradient step of q(v) built on them, in double-float (double_float.wgsl,
// prepended). The factorisation takes one workgroup per matrix of the batch; what follows it is
// shared out over many (cholesky.rs's `factor_passes` records them in order, each skipping a
// matrix whose factorisation failed), so a batch of D matrices fills more of a large GPU than D
// workgroups:
//
// `cholesky`:        L Lᵀ = A + ε I, ε = ε₀ · factor^k for the first k = 0, 1, … < attempts
//                    that factorises (one workgroup per matrix).
// `natural_step`:    q(v)'s step (MODEL.md §3.5, the CPU's `InducingPosterior::natural_step`):
//                    P ← (1 − γ) P + γ (I + Λ) (symmetrised), η₁ ← (1 − γ) η₁ + γ r, L Lᵀ = P
//                    (one workgroup per matrix);
// `invert_factor`,   X = L⁻¹ (lower triangular), a workgroup per block of COLUMNS columns of
// `invert_step`:     each matrix (the columns of an inverse are independent), after `cholesky`
//                    and after `natural_step` (their outputs are laid out apart);
// `covariance`:      S = Xᵀ X, a workgroup per 16 × 16 tile of its lower triangle;
// `step_mean`:       m = S η₁, an invocation per row.
//
// Why double-float: the natural step factorises P = I + Λ, whose condition number reaches 10⁹
// when φ² nears its floor (MODEL.md §11.3), beyond float32's 2⁻²⁴; measured, float32 loses L⁻¹ to
// 10⁻² at cond 4·10⁶ and fails at 4·10⁸, double-float keeps it to 3·10⁻⁸ (BENCHMARKS.md, "Issue 34:
// the precision of the device's factorisations").
//
// The factorisation is right-looking: for each pivot j, √ of the diagonal (one invocation), the
// column below it divided by the pivot, then the trailing lower triangle updated by the column's
// outer product, with a barrier between the steps. A pivot that is not > 0 (or NaN) fails the
// attempt: A + ε I is copied again with the next rung of the ladder. The inverse is forward
// elimination on every column of I at once, row by row, parallel over the entries each row
// touches. (A first version gave each invocation one column of the inverse to solve alone, with
// no barrier; on lavapipe its columns of more than 238 rows came back wrong at M = 300, so every
// loop here is short and parallel, with the work shared out between barriers.)

struct Dims {
    m: u32,        // matrix size
    slots: u32,
    one: f32,      // 1.0, unknown to the compiler
    pad: u32,
    gamma: vec2<f32>,  // `natural_step`: the step size γ (head, tail)
    floor: f32,        // `cholesky`: the relative jitter floor (0: none; see `factor`)
    pad2: f32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
// `cholesky`: the matrices, slot-major, each M × M row-major (only the lower triangle is read).
// `natural_step`: per slot, P (M × M row-major), Λ (the same), η₁ (M), r (M).
@group(0) @binding(1) var<storage, read> a: array<vec2<f32>>;
// Per slot: the first jitter ε₀ (head, tail), the factor, and the number of attempts.
@group(0) @binding(2) var<storage, read> ladder: array<vec4<f32>>;
// Per slot, [L | X = L⁻¹ | status (4) | (`natural_step` only) P | S | m | η₁]: L and X M × M
// row-major with zeros above the diagonal (X not written when every attempt failed); the status
// ε, (escalations, failed 0/1), the failing pivot's (index, 0) and its value (zeros when it did
// not fail); P and S M × M, m and η₁ M long.
@group(0) @binding(3) var<storage, read_write> out: array<vec2<f32>>;

fn one() -> f32 {
    return dims.one;
}

const THREADS: u32 = 256u;

// Set by invocation 0 when the attempt's pivot failed (or, in the passes after the factorisation,
// when the matrix did not factorise); read by all through workgroupUniformLoad, so the loops'
// exits are uniform across the workgroup.
var<workgroup> failed: u32;
// The current pivot's √ (or, after a failure, the failing value) and where it failed.
var<workgroup> pivot: vec2<f32>;
var<workgroup> failed_at: u32;

fn barrier() {
    storageBarrier();
    workgroupBarrier();
}

// Words per slot of `out` for `cholesky` (L, X, status) and for `natural_step` (and P, S, m, η₁).
fn factor_stride(m: u32) -> u32 {
    return 2u * m * m + 4u;
}

fn step_stride(m: u32) -> u32 {
    return 4u * m * m + 2u * m + 4u;
}

// Factorises the M × M matrix at `source` (in `a` when `from_a`, else in `out`; lower triangle
// read) into L at out[base], walking the slot's ladder; writes the status after X (at
// base + 2M²) and returns whether it succeeded (uniform across the workgroup).
fn factor(t: u32, slot: u32, source: u32, from_a: bool, base: u32) -> bool {
    let m = dims.m;
    let rung = ladder[slot];
    let attempts = max(u32(rung.w), 1u);
    var jitter = rung.xy;
    // The ladder starts at max(ε₀, floor · mean diag(A)), as the CPU's `kzz_half`: the floor
    // depends on A, which the device computed (resident.rs), so it is applied here. Every
    // invocation sums the diagonal itself (M reads): the result is uniform with no barrier.
    if (from_a && dims.floor > 0.0) {
        var trace = vec2<f32>(0.0, 0.0);
        for (var i = 0u; i < m; i++) {
            trace = df_add(trace, a[source + i * m + i]);
        }
        let floor = df_mul(df_div(trace, vec2<f32>(f32(m), 0.0)), vec2<f32>(dims.floor, 0.0));
        if (floor.x > jitter.x) {
            jitter = floor;
        }
    }
    var escalations = 0u;
    var ok = false;
    for (var attempt = 0u; attempt < attempts; attempt++) {
        // Every invocation has read the last attempt's `failed` before it is cleared.
        workgroupBarrier();
        // L ← lower(A) + ε I.
        for (var k = t; k < m * m; k += THREADS) {
            let i = k / m;
            let j = k % m;
            var v = vec2<f32>(0.0, 0.0);
            if (j <= i) {
                if (from_a) {
                    v = a[source + k];
                } else {
                    v = out[source + k];
                }
                if (i == j) {
                    v = df_add(v, jitter);
                }
            }
            out[base + k] = v;
        }
        if (t == 0u) {
            failed = 0u;
        }
        barrier();
        for (var j = 0u; j < m; j++) {
            if (t == 0u) {
                let d = out[base + j * m + j];
                if (d.x > 0.0) {
                    let s = df_sqrt(d);
                    pivot = s;
                    out[base + j * m + j] = s;
                } else {
                    failed = 1u;
                    failed_at = j;
                    pivot = d;
                }
            }
            storageBarrier();
            if (workgroupUniformLoad(&failed) != 0u) {
                break;
            }
            let p = pivot;
            for (var i = j + 1u + t; i < m; i += THREADS) {
                out[base + i * m + j] = df_div(out[base + i * m + j], p);
            }
            barrier();
            // Trailing lower triangle: L[i, k] −= L[i, j] L[k, j] for j < k ≤ i.
            let n = m - j - 1u;
            for (var k = t; k < n * n; k += THREADS) {
                let i = j + 1u + k / n;
                let c = j + 1u + k % n;
                if (c <= i) {
                    let update = df_mul(out[base + i * m + j], out[base + c * m + j]);
                    out[base + i * m + c] = df_add(out[base + i * m + c], -update);
                }
            }
            barrier();
        }
        if (workgroupUniformLoad(&failed) == 0u) {
            ok = true;
            break;
        }
        if (attempt + 1u < attempts) {
            escalations += 1u;
            jitter = df_mul(jitter, vec2<f32>(rung.z, 0.0));
        }
    }
    if (t == 0u) {
        let status = base + 2u * m * m;
        out[status] = jitter;
        out[status + 1u] = vec2<f32>(f32(escalations), select(1.0, 0.0, ok));
        out[status + 2u] = vec2<f32>(select(f32(failed_at), 0.0, ok), 0.0);
        out[status + 3u] = select(pivot, vec2<f32>(0.0, 0.0), ok);
    }
    return ok;
}

// Static uses of the bindings an entry point does not otherwise read, so that every entry point
// has the one layout.
fn touch() {
    _ = a[0];
    _ = ladder[0];
}

// Whether the factorisation whose status is at out[base + 2M²] failed (every attempt).
fn factor_failed(base: u32) -> bool {
    return out[base + 2u * dims.m * dims.m + 1u].y != 0.0;
}

// Columns of X per workgroup of the inverse.
const COLUMNS: u32 = 32u;

// Columns [c0, c1) of X = L⁻¹ at out[base + M²] from L at out[base], by forward elimination on
// those columns at once, row j by row j: X ← I, then for each j ≥ c0
//   X[j, c] ← X[j, c] / L[j, j]                 (c ≤ j),
//   X[i, c] ← X[i, c] − L[i, j] X[j, c]         (i > j, c ≤ j).
// Each entry sees the same operations in the same order as when all columns go at once (the rows
// before c0 only add zeros to these columns), so the result does not depend on the blocks.
fn invert_columns(t: u32, base: u32, c0: u32) {
    let m = dims.m;
    let c1 = min(c0 + COLUMNS, m);
    let width = c1 - c0;
    let inv = base + m * m;
    for (var k = t; k < m * width; k += THREADS) {
        let i = k / width;
        let c = c0 + k % width;
        out[inv + i * m + c] = select(vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), i == c);
    }
    barrier();
    for (var j = c0; j < m; j++) {
        let d = out[base + j * m + j];
        let cols = min(c1, j + 1u) - c0;
        for (var c = c0 + t; c < c0 + cols; c += THREADS) {
            out[inv + j * m + c] = df_div(out[inv + j * m + c], d);
        }
        barrier();
        let rows = m - j - 1u;
        for (var k = t; k < rows * cols; k += THREADS) {
            let i = j + 1u + k / cols;
            let c = c0 + k % cols;
            let update = df_mul(out[base + i * m + j], out[inv + j * m + c]);
            out[inv + i * m + c] = df_add(out[inv + i * m + c], -update);
        }
        barrier();
    }
}

// The inverse's block `group.x` of matrix `group.y` whose factor starts at `base`, unless the
// matrix did not factorise (then X is not written).
fn invert_block(t: u32, block: u32, base: u32) {
    if (t == 0u) {
        failed = select(0u, 1u, factor_failed(base));
    }
    if (workgroupUniformLoad(&failed) != 0u) {
        return;
    }
    invert_columns(t, base, block * COLUMNS);
}

@compute @workgroup_size(256)
fn cholesky(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let slot = group.x;
    let m = dims.m;
    _ = factor(t, slot, slot * m * m, true, slot * factor_stride(m));
}

@compute @workgroup_size(256)
fn invert_factor(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    invert_block(t, group.x, group.y * factor_stride(dims.m));
}

@compute @workgroup_size(256)
fn natural_step(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let slot = group.x;
    let m = dims.m;
    let input = slot * (2u * m * m + 2u * m);
    let base = slot * step_stride(m);
    let p_new = base + 2u * m * m + 4u;
    let eta = p_new + 2u * m * m + m;
    let gamma = dims.gamma;
    let keep = df_add(vec2<f32>(1.0, 0.0), -gamma);
    // P ← (1 − γ) sym(P) + γ (I + sym(Λ)), sym(X) = (X + Xᵀ)/2; η₁ ← (1 − γ) η₁ + γ r.
    for (var k = t; k < m * m; k += THREADS) {
        let i = k / m;
        let j = k % m;
        let p_old = df_mul(df_add(a[input + k], a[input + j * m + i]), vec2<f32>(0.5, 0.0));
        let lam = input + m * m;
        var goal = df_mul(df_add(a[lam + k], a[lam + j * m + i]), vec2<f32>(0.5, 0.0));
        if (i == j) {
            goal = df_add(goal, vec2<f32>(1.0, 0.0));
        }
        out[p_new + k] = df_add(df_mul(keep, p_old), df_mul(gamma, goal));
    }
    for (var i = t; i < m; i += THREADS) {
        let e = a[input + 2u * m * m + i];
        let r = a[input + 2u * m * m + m + i];
        out[eta + i] = df_add(df_mul(keep, e), df_mul(gamma, r));
    }
    barrier();
    _ = factor(t, slot, p_new, false, base);
}

@compute @workgroup_size(256)
fn invert_step(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    invert_block(t, group.x, group.y * step_stride(dims.m));
}

// Entries per side of `covariance`'s tiles (TILE² = THREADS).
const TILE: u32 = 16u;

// S = Xᵀ X: S[i, j] = Σ_{k ≥ max(i, j)} X[k, i] X[k, j], both triangles written; workgroup
// (group.x, group.y) takes the TILE × TILE tile of columns group.x and rows group.y of matrix
// group.z when it touches the lower triangle, an invocation per entry (i, j ≤ i).
@compute @workgroup_size(256)
fn covariance(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    let m = dims.m;
    let base = group.z * step_stride(m);
    let i = group.y * TILE + t / TILE;
    let j = group.x * TILE + t % TILE;
    if (i >= m || j > i || factor_failed(base)) {
        return;
    }
    let inv = base + m * m;
    let s = base + 2u * m * m + 4u + m * m;
    var sum = vec2<f32>(0.0, 0.0);
    for (var l = i; l < m; l++) {
        sum = df_add(sum, df_mul(out[inv + l * m + i], out[inv + l * m + j]));
    }
    out[s + i * m + j] = sum;
    out[s + j * m + i] = sum;
}

// m = S η₁: invocation group.x · THREADS + t takes row i of matrix group.y.
@compute @workgroup_size(256)
fn step_mean(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    let m = dims.m;
    let base = group.y * step_stride(m);
    let i = group.x * THREADS + t;
    if (i >= m || factor_failed(base)) {
        return;
    }
    let s = base + 2u * m * m + 4u + m * m;
    let mean = s + m * m;
    let eta = mean + m;
    var sum = vec2<f32>(0.0, 0.0);
    for (var j = 0u; j < m; j++) {
        sum = df_add(sum, df_mul(out[s + i * m + j], out[eta + j]));
    }
    out[mean + i] = sum;
}
