// Batched Cholesky factorisation with the jitter ladder inside the shader, the inverse of the
// factor, and the natural-gradient step of q(v) built on them, in double-float (double_float.wgsl,
// prepended). Every pass runs over all matrices of the batch at once, and the factorisation itself
// is blocked so that most of its work is shared out over many workgroups (cholesky.rs's
// `factor_passes` records the passes in order; each skips a matrix that has failed):
//
// `factor_begin`:     the first rung ε₀ of the ladder (for K_ZZ, max(ε₀, floor · mean diag A)) and
//                     the status cleared, a workgroup per matrix;
// `fill`:             L ← lower(A) + ε₀ I (`copy_entry`); or, for q(v)'s step (MODEL.md §3.5, the
//                     CPU's `InducingPosterior::natural_step`; `natural_entry`),
//                     P ← (1 − γ) P + γ (I + Λ) (symmetrised), η₁ ← (1 − γ) η₁ + γ r and
//                     L ← lower(P); an invocation per entry;
// `factor_diagonal`,  for each block of BLOCK columns in turn: the diagonal block factorised
// `factor_panel`,     (a workgroup per matrix), the rows below it solved against it (an
// `factor_trailing`:  invocation per row), the trailing lower triangle updated by the block's
//                     outer product (a workgroup per 16 × 16 tile);
// `factor_ladder`:    where that first rung failed, the ladder's later rungs, unblocked (a
//                     workgroup per matrix: a rare path, kept simple);
// `invert`:           X = L⁻¹ (lower triangular), a workgroup per block of COLUMNS columns of
//                     each matrix (the columns of an inverse are independent);
// `covariance`:       S = Xᵀ X, a workgroup per 16 × 16 tile of its lower triangle;
// `step_mean`:        m = S η₁, an invocation per row.
//
// Which block the factorisation is at is kept on the device (the matrix's status): each
// `factor_diagonal` takes the next block and counts it, the panel and trailing passes after it read
// which one it took. So every pass of a batch binds the same four buffers, and a matrix's
// factorisation costs about M/BLOCK sequential diagonal blocks of BLOCK³/3 operations plus the
// panel's and trailing update's share of (1/3)M³ spread over many workgroups, instead of (1/3)M³
// in one workgroup.
//
// Every entry of L gets the same double-float operations in the same order as in the unblocked
// right-looking factorisation (`factor_rungs`: for each pivot j, √ of the diagonal, the column
// below divided by it, the trailing triangle updated by the column's outer product): the blocks
// only change which workgroup applies them. A pivot that is not > 0 (or NaN) fails the attempt.
//
// Why double-float: the natural step factorises P = I + Λ, whose condition number reaches 10⁹
// when φ² nears its floor (MODEL.md §11.3), beyond float32's 2⁻²⁴; measured, float32 loses L⁻¹ to
// 10⁻² at cond 4·10⁶ and fails at 4·10⁸, double-float keeps it to 3·10⁻⁸ (BENCHMARKS.md, "Issue 34:
// the precision of the device's factorisations").
//
// (A first version of the inverse gave each invocation one column to solve alone, with no
// barrier; on lavapipe its columns of more than 238 rows came back wrong at M = 300, so every loop
// here is short and parallel, with the work shared out between barriers.)

struct Dims {
    m: u32,        // matrix size
    slots: u32,
    one: f32,      // 1.0, unknown to the compiler
    job: u32,      // 0: factorise A (`a`: the matrices); 1: q(v)'s natural step (`a`: its inputs)
    gamma: vec2<f32>,  // the natural step's step size γ (head, tail)
    floor: f32,        // job 0: the relative jitter floor (0: none; see `factor_begin`)
    pad2: f32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
// Job 0: the matrices, slot-major, each M × M row-major (only the lower triangle is read).
// Job 1: per slot, P (M × M row-major), Λ (the same), η₁ (M), r (M).
@group(0) @binding(1) var<storage, read> a: array<vec2<f32>>;
// Per slot: the first jitter ε₀ (head, tail), the factor, and the number of attempts.
@group(0) @binding(2) var<storage, read> ladder: array<vec4<f32>>;
// Per slot, [L | X = L⁻¹ | status (4) | (job 1 only) P | S | m | η₁]: L and X M × M row-major
// with zeros above the diagonal (X not written when every attempt failed); the status: ε,
// (escalations, failed 0/1), (the failing pivot's index, the next block while factorising: 0
// afterwards) and the failing pivot's value (zeros when it did not fail); P and S M × M, m and η₁
// M long.
@group(0) @binding(3) var<storage, read_write> out: array<vec2<f32>>;

fn one() -> f32 {
    return dims.one;
}

const THREADS: u32 = 256u;
// Columns per block of the factorisation (cholesky.rs's `FACTOR_BLOCK`).
const BLOCK: u32 = 32u;
// Entries per side of the trailing update's and `covariance`'s tiles (TILE² = THREADS).
const TILE: u32 = 16u;
// Row stride of the trailing update's shared rows: one more than BLOCK, so that the 16 rows an
// invocation group reads at once fall in different banks.
const PADDED: u32 = 33u;

// Set by invocation 0 when the attempt's pivot failed (or when the matrix has failed already);
// read by all through workgroupUniformLoad, so the loops' exits are uniform across the workgroup.
var<workgroup> failed: u32;
// The current pivot's √ (or, after a failure, the failing value) and where it failed.
var<workgroup> pivot: vec2<f32>;
var<workgroup> failed_at: u32;
// The block a blocked pass works on (from the matrix's status).
var<workgroup> block: u32;
// `factor_diagonal`'s and `factor_panel`'s diagonal block, BLOCK × BLOCK row-major.
var<workgroup> diagonal: array<vec2<f32>, 1024>;
// `factor_trailing`'s rows of the block's columns: a tile's TILE rows and its TILE columns' rows.
var<workgroup> left: array<vec2<f32>, 528>;
var<workgroup> right: array<vec2<f32>, 528>;

fn barrier() {
    storageBarrier();
    workgroupBarrier();
}

// Words per slot of `out` for job 0 (L, X, status) and for job 1 (and P, S, m, η₁).
fn factor_stride(m: u32) -> u32 {
    return 2u * m * m + 4u;
}

fn step_stride(m: u32) -> u32 {
    return 4u * m * m + 2u * m + 4u;
}

fn stride() -> u32 {
    if (dims.job == 0u) {
        return factor_stride(dims.m);
    }
    return step_stride(dims.m);
}

// Where job 1 assembles P (and, after it, S, m and η₁) in a slot's `out`.
fn assembled(base: u32) -> u32 {
    return base + 2u * dims.m * dims.m + 4u;
}

// Static uses of the bindings an entry point does not otherwise read, so that every entry point
// has the one layout.
fn touch() {
    _ = a[0];
    _ = ladder[0];
}

// L's entry (i, j) from the source's value v there: v + ε on the diagonal, v below it, 0 above.
fn lower_jittered(v: vec2<f32>, i: u32, j: u32, jitter: vec2<f32>) -> vec2<f32> {
    if (j > i) {
        return vec2<f32>(0.0, 0.0);
    }
    if (i == j) {
        return df_add(v, jitter);
    }
    return v;
}

// Entry k of an M × M matrix of the batch, at row i and column j (row-major).
struct Entry {
    k: u32,
    i: u32,
    j: u32,
}

// Whether the factorisation whose status is at out[base + 2M²] failed (every attempt so far).
fn factor_failed(base: u32) -> bool {
    return out[base + 2u * dims.m * dims.m + 1u].y != 0.0;
}

// Invocation 0 reads whether the matrix at `base` has failed and the block its status names
// (`next`: the next one to factorise; else the one just factorised) into the workgroup's
// `failed` and `block`; returns whether it has failed (uniform across the workgroup).
fn read_status(t: u32, base: u32, next: bool) -> bool {
    if (t == 0u) {
        let status = base + 2u * dims.m * dims.m;
        failed = select(0u, 1u, out[status + 1u].y != 0.0);
        let counted = u32(out[status + 2u].y);
        block = select(max(counted, 1u) - 1u, counted, next);
    }
    return workgroupUniformLoad(&failed) != 0u;
}

// For the panel and trailing passes: the columns [k0, k1) of the block `factor_diagonal` just
// factorised in the matrix at `base`, n = k1 − k0, and whether the matrix has failed (then the
// pass does nothing). Uniform across the workgroup.
struct Factorised {
    failed: bool,
    k0: u32,
    k1: u32,
    n: u32,
}

fn factorised_block(t: u32, base: u32) -> Factorised {
    let failed = read_status(t, base, false);
    let k0 = workgroupUniformLoad(&block) * BLOCK;
    let k1 = min(k0 + BLOCK, dims.m);
    return Factorised(failed, k0, k1, k1 - k0);
}

// The ladder's rungs from `first` on, unblocked: L ← lower(source) + ε I (the source in `a` when
// `from_a`, else in `out`) and factorised in place at out[base], ε = `jitter` and then ×factor per
// rung, until one factorises; writes the status after X (at base + 2M²) and returns whether one
// did (uniform across the workgroup).
fn factor_rungs(
    t: u32,
    slot: u32,
    source: u32,
    from_a: bool,
    base: u32,
    start: vec2<f32>,
    first: u32,
) -> bool {
    let m = dims.m;
    let rung = ladder[slot];
    let attempts = max(u32(rung.w), 1u);
    var jitter = start;
    var escalations = first;
    var ok = false;
    for (var attempt = first; attempt < attempts; attempt++) {
        // Every invocation has read the last attempt's `failed` before it is cleared.
        workgroupBarrier();
        for (var k = t; k < m * m; k += THREADS) {
            var v: vec2<f32>;
            if (from_a) {
                v = a[source + k];
            } else {
                v = out[source + k];
            }
            out[base + k] = lower_jittered(v, k / m, k % m, jitter);
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

// The first rung ε₀ and a cleared status for matrix `group.x`. For job 0 the ladder starts at
// max(ε₀, floor · mean diag(A)), as the CPU's `kzz_half`: the floor depends on A, which the device
// computed (resident.rs), so it is applied here, the diagonal summed in order by one invocation.
@compute @workgroup_size(256)
fn factor_begin(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    if (t != 0u) {
        return;
    }
    let slot = group.x;
    let m = dims.m;
    var jitter = ladder[slot].xy;
    if (dims.job == 0u && dims.floor > 0.0) {
        var trace = vec2<f32>(0.0, 0.0);
        for (var i = 0u; i < m; i++) {
            trace = df_add(trace, a[slot * m * m + i * m + i]);
        }
        let floor = df_mul(df_div(trace, vec2<f32>(f32(m), 0.0)), vec2<f32>(dims.floor, 0.0));
        if (floor.x > jitter.x) {
            jitter = floor;
        }
    }
    let status = slot * stride() + 2u * m * m;
    out[status] = jitter;
    out[status + 1u] = vec2<f32>(0.0, 0.0);
    out[status + 2u] = vec2<f32>(0.0, 0.0);
    out[status + 3u] = vec2<f32>(0.0, 0.0);
}

// Invocation group.x · THREADS + t takes entry k of matrix group.y: the job's first pass after
// `factor_begin`.
@compute @workgroup_size(256)
fn fill(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    let m = dims.m;
    let k = group.x * THREADS + t;
    if (k >= m * m) {
        return;
    }
    let e = Entry(k, k / m, k % m);
    if (dims.job == 0u) {
        copy_entry(group.y, e);
    } else {
        natural_entry(group.y, e);
    }
}

// L ← lower(A) + ε₀ I (zeros above the diagonal) at entry `e` of matrix `slot`.
fn copy_entry(slot: u32, e: Entry) {
    let m = dims.m;
    let base = slot * factor_stride(m);
    out[base + e.k] = lower_jittered(a[slot * m * m + e.k], e.i, e.j, out[base + 2u * m * m]);
}

// q(v)'s step at entry `e` (entry k) of matrix `slot`:
// P ← (1 − γ) sym(P) + γ (I + sym(Λ)), sym(X) = (X + Xᵀ)/2, and L ← lower(P) + ε₀ I; for k < M,
// η₁ ← (1 − γ) η₁ + γ r.
fn natural_entry(slot: u32, e: Entry) {
    let m = dims.m;
    let input = slot * (2u * m * m + 2u * m);
    let base = slot * step_stride(m);
    let p_new = assembled(base);
    let eta = p_new + 2u * m * m + m;
    let gamma = dims.gamma;
    let keep = df_add(vec2<f32>(1.0, 0.0), -gamma);
    let p_old = df_mul(df_add(a[input + e.k], a[input + e.j * m + e.i]), vec2<f32>(0.5, 0.0));
    let lam = input + m * m;
    var goal = df_mul(df_add(a[lam + e.k], a[lam + e.j * m + e.i]), vec2<f32>(0.5, 0.0));
    if (e.i == e.j) {
        goal = df_add(goal, vec2<f32>(1.0, 0.0));
    }
    let p = df_add(df_mul(keep, p_old), df_mul(gamma, goal));
    out[p_new + e.k] = p;
    out[base + e.k] = lower_jittered(p, e.i, e.j, out[base + 2u * m * m]);
    if (e.k < m) {
        let eta_old = a[input + 2u * m * m + e.k];
        let r = a[input + 2u * m * m + m + e.k];
        out[eta + e.k] = df_add(df_mul(keep, eta_old), df_mul(gamma, r));
    }
}

// The n × n diagonal block of the matrix at `base` starting at row and column k0 into
// `diagonal`, for every invocation.
fn load_diagonal(t: u32, base: u32, k0: u32, n: u32) {
    let m = dims.m;
    for (var k = t; k < n * n; k += THREADS) {
        let i = k / n;
        let j = k % n;
        diagonal[i * BLOCK + j] = out[base + (k0 + i) * m + k0 + j];
    }
    workgroupBarrier();
}

// The next diagonal block of matrix group.x factorised in workgroup memory, unblocked (as
// `factor_rungs` does the whole matrix), and counted in the status; a pivot that is not > 0
// fails the matrix (its index and value in the status).
@compute @workgroup_size(256)
fn factor_diagonal(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    let m = dims.m;
    let base = group.x * stride();
    if (read_status(t, base, true)) {
        return;
    }
    let counted = workgroupUniformLoad(&block);
    let k0 = counted * BLOCK;
    let n = min(BLOCK, m - k0);
    load_diagonal(t, base, k0, n);
    for (var j = 0u; j < n; j++) {
        if (t == 0u) {
            let d = diagonal[j * BLOCK + j];
            if (d.x > 0.0) {
                let s = df_sqrt(d);
                pivot = s;
                diagonal[j * BLOCK + j] = s;
            } else {
                failed = 1u;
                failed_at = k0 + j;
                pivot = d;
            }
        }
        if (workgroupUniformLoad(&failed) != 0u) {
            break;
        }
        let p = pivot;
        for (var i = j + 1u + t; i < n; i += THREADS) {
            diagonal[i * BLOCK + j] = df_div(diagonal[i * BLOCK + j], p);
        }
        workgroupBarrier();
        let r = n - j - 1u;
        for (var k = t; k < r * r; k += THREADS) {
            let i = j + 1u + k / r;
            let c = j + 1u + k % r;
            if (c <= i) {
                let update = df_mul(diagonal[i * BLOCK + j], diagonal[c * BLOCK + j]);
                diagonal[i * BLOCK + c] = df_add(diagonal[i * BLOCK + c], -update);
            }
        }
        workgroupBarrier();
    }
    let status = base + 2u * m * m;
    if (workgroupUniformLoad(&failed) != 0u) {
        if (t == 0u) {
            out[status + 1u] = vec2<f32>(0.0, 1.0);
            out[status + 2u] = vec2<f32>(f32(failed_at), 0.0);
            out[status + 3u] = pivot;
        }
        return;
    }
    for (var k = t; k < n * n; k += THREADS) {
        let i = k / n;
        let j = k % n;
        if (j <= i) {
            out[base + (k0 + i) * m + k0 + j] = diagonal[i * BLOCK + j];
        }
    }
    if (t == 0u) {
        out[status + 2u] = vec2<f32>(0.0, f32(counted + 1u));
    }
}

// The rows below the block just factorised, for matrix group.y: invocation t of workgroup
// group.x takes row i = (block's end) + group.x · THREADS + t and solves
// L[i, j] = (A[i, j] − Σ_{k0 ≤ l < j} L[i, l] L[j, l]) / L[j, j] for the block's columns j in
// order, against the diagonal block read into workgroup memory.
@compute @workgroup_size(256)
fn factor_panel(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    let m = dims.m;
    let base = group.y * stride();
    let b = factorised_block(t, base);
    if (b.failed) {
        return;
    }
    load_diagonal(t, base, b.k0, b.n);
    let i = b.k1 + group.x * THREADS + t;
    if (i >= m) {
        return;
    }
    let row = base + i * m + b.k0;
    var values: array<vec2<f32>, BLOCK>;
    for (var j = 0u; j < b.n; j++) {
        var v = out[row + j];
        for (var l = 0u; l < j; l++) {
            v = df_add(v, -df_mul(values[l], diagonal[j * BLOCK + l]));
        }
        values[j] = df_div(v, diagonal[j * BLOCK + j]);
        out[row + j] = values[j];
    }
}

// The trailing lower triangle after the block just factorised, for matrix group.z: workgroup
// (group.x, group.y) takes the TILE × TILE tile of columns group.x and rows group.y (counted from
// the block's end) when it touches the lower triangle, an invocation per entry (i, c ≤ i):
// L[i, c] −= L[i, l] L[c, l] for the block's columns l in order.
@compute @workgroup_size(256)
fn factor_trailing(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    if (group.x > group.y) {
        return;
    }
    let m = dims.m;
    let base = group.z * stride();
    let b = factorised_block(t, base);
    if (b.failed) {
        return;
    }
    let n = b.n;
    let r0 = b.k1 + group.y * TILE;
    let c0 = b.k1 + group.x * TILE;
    for (var k = t; k < TILE * n; k += THREADS) {
        let r = k / n;
        let l = k % n;
        if (r0 + r < m) {
            left[r * PADDED + l] = out[base + (r0 + r) * m + b.k0 + l];
        }
        if (c0 + r < m) {
            right[r * PADDED + l] = out[base + (c0 + r) * m + b.k0 + l];
        }
    }
    workgroupBarrier();
    // This invocation's entry: row `tr`, column `tc` of the tile.
    let tr = t / TILE;
    let tc = t % TILE;
    let i = r0 + tr;
    let c = c0 + tc;
    if (i >= m || c > i) {
        return;
    }
    let at = base + i * m + c;
    var v = out[at];
    for (var l = 0u; l < n; l++) {
        v = df_add(v, -df_mul(left[tr * PADDED + l], right[tc * PADDED + l]));
    }
    out[at] = v;
}

// Matrix group.x after its blocked attempt: if that failed and the ladder has more rungs, they are
// tried here, unblocked, from the source again; the status's block count is cleared either way.
@compute @workgroup_size(256)
fn factor_ladder(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    let slot = group.x;
    let m = dims.m;
    let base = slot * stride();
    let status = base + 2u * m * m;
    let attempts = max(u32(ladder[slot].w), 1u);
    if (!read_status(t, base, true) || attempts < 2u) {
        if (t == 0u) {
            out[status + 2u] = vec2<f32>(out[status + 2u].x, 0.0);
        }
        return;
    }
    let start = df_mul(out[status], vec2<f32>(ladder[slot].z, 0.0));
    if (dims.job == 0u) {
        _ = factor_rungs(t, slot, slot * m * m, true, base, start, 1u);
    } else {
        _ = factor_rungs(t, slot, assembled(base), false, base, start, 1u);
    }
}

// Columns per workgroup of the inverse.
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
fn invert_block(t: u32, block_index: u32, base: u32) {
    if (t == 0u) {
        failed = select(0u, 1u, factor_failed(base));
    }
    if (workgroupUniformLoad(&failed) != 0u) {
        return;
    }
    invert_columns(t, base, block_index * COLUMNS);
}

// For either job: its slot's stride places the factor.
@compute @workgroup_size(256)
fn invert(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    touch();
    invert_block(t, group.x, group.y * stride());
}

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
    let s = assembled(base) + m * m;
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
    let s = assembled(base) + m * m;
    let mean = s + m * m;
    let eta = mean + m;
    var sum = vec2<f32>(0.0, 0.0);
    for (var j = 0u; j < m; j++) {
        sum = df_add(sum, df_mul(out[s + i * m + j], out[eta + j]));
    }
    out[mean + i] = sum;
}
