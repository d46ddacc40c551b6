// Batched C_z = op(A_z) op(B_z), float32, column-major matrices (nalgebra's layout), where op is the
// identity or the transpose. Both entry points compute 64 × 64 blocks of C with 4 × 4 register
// tiles per invocation (below). The batch index is the dispatch's z. With `lower` set,
// C = A Aᵀ-like symmetric products skip the blocks above the diagonal (a SYRK: about half the
// work). `gemm_compensated` also splits the inner dimension (split-K) when its blocks alone would
// leave a large GPU's multiprocessors idle: each split writes its partial sums, and
// `split_sum.wgsl` adds them in split order (a fixed order: results do not depend on timing).
// The host's f64 reference is nalgebra's product.

struct Dims {
    m: u32,        // rows of C (and of op(A))
    n: u32,        // columns of C (and of op(B))
    k: u32,        // the inner dimension
    trans_a: u32,  // 1: op(A) = Aᵀ, A stored k × m; 0: A stored m × k
    trans_b: u32,  // 1: op(B) = Bᵀ, B stored n × k; 0: B stored k × n
    lower: u32,    // 1: C is symmetric and only tiles on or below the diagonal are computed (SYRK)
    batch: u32,    // products in the batch (where `gemm_compensated` puts its second plane)
    one: f32,      // 1.0, unknown to the shader compiler (see `gemm_compensated`)
    splits: u32,   // `gemm_compensated`: parts of the inner dimension, one per dispatch z-slice
    stride_a: u32, // words from one product's A to the next's (m·k when packed)
    stride_b: u32, // the same for B (k·n when packed)
    stride_c: u32, // the same for C as written by an unsplit float32 product (m·n when packed;
                   // split and compensated products write packed partial planes, and
                   // split_sum.wgsl places their sums at this stride)
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;


// Where entry (r, c) of op(X), a `rows` × `cols` matrix, lies in X as stored column-major:
// X is `cols` × `rows` when `trans` (op(X) = Xᵀ), else `rows` × `cols`.
fn stored(r: u32, c: u32, rows: u32, cols: u32, trans: u32) -> u32 {
    if (trans == 1u) {
        return c + r * cols;
    }
    return r + c * rows;
}

// op(A)[i, l] of batch z (0 outside the matrix).
fn op_a(z: u32, i: u32, l: u32) -> f32 {
    if (i >= dims.m || l >= dims.k) {
        return 0.0;
    }
    return a[z * dims.stride_a + stored(i, l, dims.m, dims.k, dims.trans_a)];
}

// op(B)[l, j] of batch z (0 outside the matrix).
fn op_b(z: u32, l: u32, j: u32) -> f32 {
    if (l >= dims.k || j >= dims.n) {
        return 0.0;
    }
    return b[z * dims.stride_b + stored(l, j, dims.k, dims.n, dims.trans_b)];
}

// The (row or column of the block, inner index) that element e of a staged `edge` × `depth` slice
// of an operand loads, in the order neighbouring invocations should read it: along the block's
// rows (or columns) when those are adjacent in the operand as stored (`along_edge`), else along
// the inner index. op(A) is along its rows unless A is transposed; op(B) along its columns only
// when B is transposed.
fn staged(e: u32, edge: u32, depth: u32, along_edge: bool) -> vec2<u32> {
    if (along_edge) {
        return vec2<u32>(e % edge, e / edge);
    }
    return vec2<u32>(e / depth, e % depth);
}

// `gemm`: register tiles. A workgroup of 16 × 16 invocations computes a BLOCK × BLOCK = 64 × 64
// block of C, each invocation a 4 × 4 set of entries: rows 4·local.x + r and columns
// 4·local.y + c (r, c < 4), adjacent so that each inner index's four values of op(A) and four of
// op(B) are one vec4 each in workgroup memory: per inner index an invocation makes two 16-byte
// loads for 16 multiply-adds (one vec4 × vec4 product per column), where scalar tiles took eight
// 4-byte loads. In a warp the 16 values of local.x read 256 consecutive bytes of `tile_a` (no
// bank conflict at 16-byte width) and local.y takes two values, so `tile_b` is a broadcast.
// Per step of DEPTH = 16 along the inner dimension the workgroup stages a 64 × 16 slice of op(A)
// and a 16 × 64 slice of op(B), four values per invocation each, in the order that makes
// neighbouring invocations read neighbouring words of A and B as stored (coalesced): along the
// rows of op(A) when A is stored as is (column-major), along its inner index when A is
// transposed; along the inner index of op(B) when B is stored as is, along its columns when
// transposed. The tiles' rows are padded to 17 vec4s: a staging store along the inner index
// (op(B) as stored, op(A) transposed) would otherwise put 16 invocations in one bank (a row of 64
// words); with 68 it is 2 to a bank. Reads along a row are unaffected.

const BLOCK: u32 = 64u;
const DEPTH: u32 = 16u;

// An invocation's place in its 16 × 16 workgroup (every entry point's). The workgroup's id is a
// parameter of its own: WGSL's uniformity analysis takes a structure with a per-invocation member
// as non-uniform, and the early return on the workgroup's block must stay uniform (barriers
// follow).
struct Local {
    @builtin(local_invocation_id) local: vec3<u32>,
    // local.y · 16 + local.x: the order in which the invocations stage values.
    @builtin(local_invocation_index) id: u32,
}

// What a workgroup computes: product z's `size` × `size` block of C from row row0 and column
// col0, over split `part` of the inner dimension's `splits` (the dispatch's z is
// z · splits + part). `above`: the block lies wholly above the diagonal of a symmetric product,
// so it is its mirror's transpose and the host fills it (the whole workgroup leaves together,
// before any barrier). Uniform across the workgroup.
struct Block {
    z: u32,
    part: u32,
    splits: u32,
    row0: u32,
    col0: u32,
    above: bool,
}

fn block_of(group: vec3<u32>, size: u32, splits: u32) -> Block {
    return Block(
        group.z / splits,
        group.z % splits,
        splits,
        group.x * size,
        group.y * size,
        dims.lower == 1u && group.x < group.y,
    );
}

// Element e of the `edge` × `depth` slices of op(A) and op(B) that block `wg` stages at inner
// indices from l0: where each goes in its tile ((row, inner) of op(A) and (column, inner) of
// op(B), in `staged`'s coalesced orders) and its value (0 from an inner index ≥ `end`).
struct Staged {
    a: vec2<u32>,
    b: vec2<u32>,
    va: f32,
    vb: f32,
}

fn stage(wg: Block, e: u32, edge: u32, depth: u32, l0: u32, end: u32) -> Staged {
    let ia = staged(e, edge, depth, dims.trans_a == 0u);
    let ib = staged(e, edge, depth, dims.trans_b == 1u);
    var va = 0.0;
    var vb = 0.0;
    if (l0 + ia.y < end) {
        va = op_a(wg.z, wg.row0 + ia.x, l0 + ia.y);
    }
    if (l0 + ib.y < end) {
        vb = op_b(wg.z, l0 + ib.y, wg.col0 + ib.x);
    }
    return Staged(ia, ib, va, vb);
}

var<workgroup> tile_a: array<array<vec4<f32>, 17>, 16>;  // [inner][rows 4q..4q+3], padded
var<workgroup> tile_b: array<array<vec4<f32>, 17>, 16>;  // [inner][columns 4q..4q+3], padded

@compute @workgroup_size(16, 16)
fn gemm(@builtin(workgroup_id) group: vec3<u32>, inv: Local) {
    // Split-K as `gemm_compensated`'s: split s sums its share of the DEPTH steps into plane s
    // (`split_sum_single` adds the planes in split order).
    let wg = block_of(group, BLOCK, max(dims.splits, 1u));
    if (wg.above) {
        return;
    }
    var acc: array<vec4<f32>, 4>;  // acc[c][r]: row 4·local.x + r, column 4·local.y + c
    for (var cj = 0u; cj < 4u; cj++) {
        acc[cj] = vec4<f32>(0.0);
    }
    let steps = (dims.k + DEPTH - 1u) / DEPTH;
    let per_split = (steps + wg.splits - 1u) / wg.splits;
    let first = wg.part * per_split;
    let last = min(steps, first + per_split);
    for (var s = first; s < last; s++) {
        let l0 = s * DEPTH;
        for (var q = 0u; q < 4u; q++) {
            let st = stage(wg, inv.id + 256u * q, BLOCK, DEPTH, l0, dims.k);
            tile_a[st.a.y][st.a.x / 4u][st.a.x % 4u] = st.va;
            tile_b[st.b.y][st.b.x / 4u][st.b.x % 4u] = st.vb;
        }
        workgroupBarrier();
        for (var l = 0u; l < DEPTH; l++) {
            let av = tile_a[l][inv.local.x];
            let bv = tile_b[l][inv.local.y];
            acc[0] += av * bv.x;
            acc[1] += av * bv.y;
            acc[2] += av * bv.z;
            acc[3] += av * bv.w;
        }
        workgroupBarrier();
    }
    // Unsplit, C itself at its stride; split, this split's packed plane.
    var place = wg.z * dims.stride_c;
    if (wg.splits > 1u) {
        place = wg.part * dims.batch * dims.m * dims.n + wg.z * dims.m * dims.n;
    }
    for (var cj = 0u; cj < 4u; cj++) {
        let j = wg.col0 + 4u * inv.local.y + cj;
        for (var ri = 0u; ri < 4u; ri++) {
            let i = wg.row0 + 4u * inv.local.x + ri;
            if (i < dims.m && j < dims.n) {
                c[place + i + j * dims.m] = acc[cj][ri];
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// `gemm_wide`: `gemm` for large products, where enough 128 × 128 blocks exist to fill a large
// GPU: each invocation of 16 × 16 computes an 8 × 8 set of entries, rows 4·local.x + r and
// 64 + 4·local.x + r, columns 4·local.y + c and 64 + 4·local.y + c (two vec4s each way, each
// read as `gemm` reads its one), so that per inner index four 16-byte loads feed 64
// multiply-adds: twice `gemm`'s arithmetic per load, and a quarter of its blocks (each block's
// staging is shared by 4× the outputs). Staged DEPTH_W = 8 inner indices at a time (two 128 × 8
// slices, 8.4 KiB of workgroup memory, within WebGPU's guaranteed 16 KiB), rows padded to 33
// vec4s for the reason `gemm` pads to 17.

const WIDE: u32 = 128u;
const DEPTH_W: u32 = 8u;

var<workgroup> wide_a: array<array<vec4<f32>, 33>, 8>;  // [inner][rows 4q..4q+3], padded
var<workgroup> wide_b: array<array<vec4<f32>, 33>, 8>;  // [inner][columns 4q..4q+3], padded

@compute @workgroup_size(16, 16)
fn gemm_wide(@builtin(workgroup_id) group: vec3<u32>, inv: Local) {
    let wg = block_of(group, WIDE, 1u);
    if (wg.above) {
        return;
    }
    // acc[2h + g][c]: row 64g + 4·local.x + r (component r), column 64h + 4·local.y + c.
    var acc: array<array<vec4<f32>, 4>, 4>;
    for (var p = 0u; p < 4u; p++) {
        for (var cj = 0u; cj < 4u; cj++) {
            acc[p][cj] = vec4<f32>(0.0);
        }
    }
    let steps = (dims.k + DEPTH_W - 1u) / DEPTH_W;
    for (var s = 0u; s < steps; s++) {
        let l0 = s * DEPTH_W;
        for (var q = 0u; q < 4u; q++) {
            let st = stage(wg, inv.id + 256u * q, WIDE, DEPTH_W, l0, dims.k);
            wide_a[st.a.y][st.a.x / 4u][st.a.x % 4u] = st.va;
            wide_b[st.b.y][st.b.x / 4u][st.b.x % 4u] = st.vb;
        }
        workgroupBarrier();
        for (var l = 0u; l < DEPTH_W; l++) {
            let a0 = wide_a[l][inv.local.x];
            let a1 = wide_a[l][16u + inv.local.x];
            let b0 = wide_b[l][inv.local.y];
            let b1 = wide_b[l][16u + inv.local.y];
            acc[0][0] += a0 * b0.x;
            acc[0][1] += a0 * b0.y;
            acc[0][2] += a0 * b0.z;
            acc[0][3] += a0 * b0.w;
            acc[1][0] += a1 * b0.x;
            acc[1][1] += a1 * b0.y;
            acc[1][2] += a1 * b0.z;
            acc[1][3] += a1 * b0.w;
            acc[2][0] += a0 * b1.x;
            acc[2][1] += a0 * b1.y;
            acc[2][2] += a0 * b1.z;
            acc[2][3] += a0 * b1.w;
            acc[3][0] += a1 * b1.x;
            acc[3][1] += a1 * b1.y;
            acc[3][2] += a1 * b1.z;
            acc[3][3] += a1 * b1.w;
        }
        workgroupBarrier();
    }
    for (var p = 0u; p < 4u; p++) {
        let g = p % 2u;
        let h = p / 2u;
        for (var cj = 0u; cj < 4u; cj++) {
            let j = wg.col0 + 64u * h + 4u * inv.local.y + cj;
            for (var ri = 0u; ri < 4u; ri++) {
                let i = wg.row0 + 64u * g + 4u * inv.local.x + ri;
                if (i < dims.m && j < dims.n) {
                    c[wg.z * dims.stride_c + i + j * dims.m] = acc[p][cj][ri];
                }
            }
        }
    }
}


// ---------------------------------------------------------------------------------------------
// `gemm_compensated`: the same product with a double-float result, for the sums whose float32
// rounding the bound cannot afford (the natural-gradient statistics Λ ∝ Ã Ãᵀ and r ∝ Ã y, where
// c/φ² reaches 1e4 and an error of u·‖Λ‖ makes I + Λ indefinite; MODEL.md §11.3).
// Every factor is split into a head with 12 significant bits and a tail with the other 12, so
// each of the four partial products is exact in float32. The head × head products, which carry
// all but 2⁻¹² of the sum, are accumulated with Knuth's two-sum (the rounding error of each
// addition kept exactly in a second word); the three small cross terms in plain float32, whose
// rounding is 2⁻¹² below the sum's. Uses only +, −, × and bit masks, never a fused multiply-add,
// whose fusing WGSL does not promise.
//
// Register tiles as `gemm`'s (64 × 64 blocks, 4 adjacent rows by 4 adjacent columns per
// invocation, three accumulators each, a vec4 per column), staged DEPTH_C = 8 inner indices at a
// time as split heads and tails in separate tiles (8.5 KiB of workgroup memory, about half
// WebGPU's guaranteed 16 KiB), so that per inner index an invocation reads four vec4s (its rows'
// heads and tails, its columns' heads and tails). The dispatch's z is z_batch · splits +
// split: split s sums the inner indices [s·span, (s + 1)·span) and writes its result as two
// planes, head then tail, at c[(plane · splits + s) · batch·m·n + z·m·n + i + j·m]; with one split
// that is C = c[i] + c[batch·m·n + i], accurate to about 2⁻⁴⁰ of Σ|a_il b_lj| (the host adds the
// planes in f64), and with several `split_sum` adds the splits first.

const DEPTH_C: u32 = 8u;

// [inner][rows (columns) 4q..4q+3 of the block], rows padded as `gemm`'s.
var<workgroup> heads_a: array<array<vec4<f32>, 17>, 8>;
var<workgroup> tails_a: array<array<vec4<f32>, 17>, 8>;
var<workgroup> heads_b: array<array<vec4<f32>, 17>, 8>;
var<workgroup> tails_b: array<array<vec4<f32>, 17>, 8>;

// (head, tail) with head = x with its 12 lowest mantissa bits cleared, tail = x − head (exact).
fn split(x: f32) -> vec2<f32> {
    let head = bitcast<f32>(bitcast<u32>(x) & 0xFFFFF000u);
    return vec2<f32>(head, x - head);
}

@compute @workgroup_size(16, 16)
fn gemm_compensated(@builtin(workgroup_id) group: vec3<u32>, inv: Local) {
    let wg = block_of(group, BLOCK, max(dims.splits, 1u));
    if (wg.above) {
        return;
    }
    // This split's inner indices, a whole number of DEPTH_C steps each.
    let steps_all = (dims.k + DEPTH_C - 1u) / DEPTH_C;
    let span = ((steps_all + wg.splits - 1u) / wg.splits) * DEPTH_C;
    let begin = wg.part * span;
    let end = min(dims.k, begin + span);
    // [c][r]: row 4·local.x + r, column 4·local.y + c.
    var sum: array<vec4<f32>, 4>;    // the head products' running sums
    var err: array<vec4<f32>, 4>;    // the exact rounding errors of their additions
    var small: array<vec4<f32>, 4>;  // the cross and tail products
    for (var cj = 0u; cj < 4u; cj++) {
        sum[cj] = vec4<f32>(0.0);
        err[cj] = vec4<f32>(0.0);
        small[cj] = vec4<f32>(0.0);
    }
    for (var l0 = begin; l0 < end; l0 += DEPTH_C) {
        for (var q = 0u; q < 2u; q++) {
            let st = stage(wg, inv.id + 256u * q, BLOCK, DEPTH_C, l0, end);
            let ia = st.a;
            let ib = st.b;
            let sa = split(st.va);
            let sb = split(st.vb);
            heads_a[ia.y][ia.x / 4u][ia.x % 4u] = sa.x;
            tails_a[ia.y][ia.x / 4u][ia.x % 4u] = sa.y;
            heads_b[ib.y][ib.x / 4u][ib.x % 4u] = sb.x;
            tails_b[ib.y][ib.x / 4u][ib.x % 4u] = sb.y;
        }
        workgroupBarrier();
        for (var l = 0u; l < DEPTH_C; l++) {
            let ah = heads_a[l][inv.local.x];
            let at = tails_a[l][inv.local.x];
            let bh = heads_b[l][inv.local.y];
            let bt = tails_b[l][inv.local.y];
            for (var cj = 0u; cj < 4u; cj++) {
                let p = ah * bh[cj];
                let s0 = sum[cj];
                // Two-sum of s0 + p (four rows at once): t, and its rounding error exactly.
                // Shader compilers may rearrange float expressions as if they were exact: Mesa's
                // lavapipe evaluated the error term so that it vanished whenever |p| > |sum|
                // (measured: 2⁻²⁶ lost where 2⁻³⁶ was due). A product by `dims.one`, a 1 the
                // compiler cannot see, around every step keeps each expression as written;
                // tests/gpu_bound.rs holds the result to the compensated bound.
                let t = (s0 + p) * dims.one;
                let v = (t - s0) * dims.one;
                let w = (t - v) * dims.one;
                err[cj] += (s0 - w) * dims.one + (p - v) * dims.one;
                sum[cj] = t;
                small[cj] += ah * bt[cj] + at * bh[cj] + at * bt[cj];
            }
        }
        workgroupBarrier();
    }
    let plane = dims.batch * dims.m * dims.n;
    for (var cj = 0u; cj < 4u; cj++) {
        let j = wg.col0 + 4u * inv.local.y + cj;
        for (var ri = 0u; ri < 4u; ri++) {
            let i = wg.row0 + 4u * inv.local.x + ri;
            if (i < dims.m && j < dims.n) {
                let at = wg.z * dims.m * dims.n + i + j * dims.m;
                c[wg.part * plane + at] = sum[cj][ri];
                c[(wg.splits + wg.part) * plane + at] = err[cj][ri] + small[cj][ri];
            }
        }
    }
}
