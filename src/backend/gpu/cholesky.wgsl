// Batched Cholesky factorisation with the jitter ladder inside the shader, and the inverse of the
// factor, in double-float (double_float.wgsl, prepended): one workgroup per matrix of the batch.
//   L Lᵀ = A + ε I,   ε = ε₀ · factor^k for the first k = 0, 1, … < attempts that factorises,
//   X = L⁻¹ (lower triangular), by forward elimination on every column of I at once.
// Why double-float: the M × M algebra of the natural-gradient step factorises P = I + Λ, whose
// condition number reaches 10⁹ when φ² nears its floor (MODEL.md §11.3), beyond float32's 2⁻²⁴;
// a float32 factor of K_ZZ at the paper's sizes loses up to cond · 6·10⁻⁸ of L⁻¹ (BENCHMARKS.md,
// "Issue 34: the precision of the device's factorisations").
//
// The factorisation is right-looking: for each pivot j, √ of the diagonal (one invocation), the
// column below it divided by the pivot, then the trailing lower triangle updated by the column's
// outer product, with a barrier between the steps. A pivot that is not > 0 (or NaN) fails the
// attempt: A + ε I is copied again with the next rung of the ladder.

struct Dims {
    m: u32,    // matrix size
    slots: u32,
    one: f32,  // 1.0, unknown to the compiler
    pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
// The matrices, slot-major, each M × M row-major (only the lower triangle is read).
@group(0) @binding(1) var<storage, read> a: array<vec2<f32>>;
// Per slot: the first jitter ε₀ (head, tail), the factor, and the number of attempts.
@group(0) @binding(2) var<storage, read> ladder: array<vec4<f32>>;
// Per slot, 2 M² + 4 entries: L (M × M row-major, zeros above the diagonal), L⁻¹ (the same; not
// written when every attempt failed), then the status: ε, (escalations, failed 0/1), the failing
// pivot's (index, 0) and its value (zeros when it did not fail).
@group(0) @binding(3) var<storage, read_write> out: array<vec2<f32>>;

fn one() -> f32 {
    return dims.one;
}

const THREADS: u32 = 256u;

// Set by invocation 0 when the attempt's pivot failed; read by all through workgroupUniformLoad,
// so the loops' exits are uniform across the workgroup.
var<workgroup> failed: u32;
// The current pivot's √ (or, after a failure, the failing value) and where it failed.
var<workgroup> pivot: vec2<f32>;
var<workgroup> failed_at: u32;

@compute @workgroup_size(256)
fn cholesky(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_index) t: u32,
) {
    let slot = group.x;
    let m = dims.m;
    let input = slot * m * m;
    let base = slot * (2u * m * m + 4u);
    let inv = base + m * m;
    let rung = ladder[slot];
    let attempts = max(u32(rung.w), 1u);
    var jitter = rung.xy;
    var escalations = 0u;
    var ok = false;
    for (var attempt = 0u; attempt < attempts; attempt++) {
        // L ← lower(A) + ε I.
        for (var k = t; k < m * m; k += THREADS) {
            let i = k / m;
            let j = k % m;
            var v = vec2<f32>(0.0, 0.0);
            if (j <= i) {
                v = a[input + k];
                if (i == j) {
                    v = df_add(v, jitter);
                }
            }
            out[base + k] = v;
        }
        // Every invocation has read the last attempt's `failed` before it is cleared.
        workgroupBarrier();
        if (t == 0u) {
            failed = 0u;
        }
        storageBarrier();
        workgroupBarrier();
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
            storageBarrier();
            workgroupBarrier();
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
            storageBarrier();
            workgroupBarrier();
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
        let status = inv + m * m;
        out[status] = jitter;
        out[status + 1u] = vec2<f32>(f32(escalations), select(1.0, 0.0, ok));
        out[status + 2u] = vec2<f32>(select(f32(failed_at), 0.0, ok), 0.0);
        out[status + 3u] = select(pivot, vec2<f32>(0.0, 0.0), ok);
    }
    if (!ok) {
        return;
    }
    // X = L⁻¹ by forward elimination on all columns at once, row j by row j (parallel over the
    // entries each step touches, a barrier between steps): X ← I, then for each j
    //   X[j, c] ← X[j, c] / L[j, j]                 (c ≤ j),
    //   X[i, c] ← X[i, c] − L[i, j] X[j, c]         (i > j, c ≤ j).
    for (var k = t; k < m * m; k += THREADS) {
        out[inv + k] = select(vec2<f32>(0.0, 0.0), vec2<f32>(1.0, 0.0), k / m == k % m);
    }
    storageBarrier();
    workgroupBarrier();
    for (var j = 0u; j < m; j++) {
        let d = out[base + j * m + j];
        for (var c = t; c <= j; c += THREADS) {
            out[inv + j * m + c] = df_div(out[inv + j * m + c], d);
        }
        storageBarrier();
        workgroupBarrier();
        let rows = m - j - 1u;
        let cols = j + 1u;
        for (var k = t; k < rows * cols; k += THREADS) {
            let i = j + 1u + k / cols;
            let c = k % cols;
            let update = df_mul(out[base + i * m + j], out[inv + j * m + c]);
            out[inv + i * m + c] = df_add(out[inv + i * m + c], -update);
        }
        storageBarrier();
        workgroupBarrier();
    }
}
