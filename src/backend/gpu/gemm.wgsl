// Batched C_z = op(A_z) op(B_z), float32, column-major matrices (nalgebra's layout), where op is the
// identity or the transpose. One workgroup computes a TILE × TILE block of C, staging TILE × TILE
// tiles of op(A) and op(B) in workgroup memory; each invocation accumulates one entry. The batch
// index is the dispatch's z. With `lower` set, C = A Aᵀ-like symmetric products skip the tiles above
// the diagonal (a SYRK: about half the work). The host's f64 reference is nalgebra's product.

const TILE: u32 = 16u;

struct Dims {
    m: u32,        // rows of C (and of op(A))
    n: u32,        // columns of C (and of op(B))
    k: u32,        // the inner dimension
    trans_a: u32,  // 1: op(A) = Aᵀ, A stored k × m; 0: A stored m × k
    trans_b: u32,  // 1: op(B) = Bᵀ, B stored n × k; 0: B stored k × n
    lower: u32,    // 1: C is symmetric and only tiles on or below the diagonal are computed (SYRK)
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read> b: array<f32>;
@group(0) @binding(3) var<storage, read_write> c: array<f32>;

var<workgroup> tile_a: array<array<f32, 16>, 16>;  // [row of C][inner]
var<workgroup> tile_b: array<array<f32, 16>, 16>;  // [inner][column of C]

// op(A)[i, l] of batch z (0 outside the matrix).
fn op_a(z: u32, i: u32, l: u32) -> f32 {
    if (i >= dims.m || l >= dims.k) {
        return 0.0;
    }
    let base = z * dims.m * dims.k;
    if (dims.trans_a == 1u) {
        return a[base + l + i * dims.k];
    }
    return a[base + i + l * dims.m];
}

// op(B)[l, j] of batch z (0 outside the matrix).
fn op_b(z: u32, l: u32, j: u32) -> f32 {
    if (l >= dims.k || j >= dims.n) {
        return 0.0;
    }
    let base = z * dims.k * dims.n;
    if (dims.trans_b == 1u) {
        return b[base + j + l * dims.n];
    }
    return b[base + l + j * dims.k];
}

@compute @workgroup_size(16, 16)
fn gemm(
    @builtin(workgroup_id) group: vec3<u32>,
    @builtin(local_invocation_id) local: vec3<u32>,
) {
    let z = group.z;
    // A tile wholly above the diagonal of a symmetric product is its mirror's transpose: the host
    // fills it (the whole workgroup leaves together, before any barrier).
    if (dims.lower == 1u && group.x < group.y) {
        return;
    }
    // local.x walks rows of C (consecutive invocations read consecutive column-major entries).
    let i = group.x * TILE + local.x;
    let j = group.y * TILE + local.y;
    var acc = 0.0;
    let steps = (dims.k + TILE - 1u) / TILE;
    for (var s = 0u; s < steps; s++) {
        let l0 = s * TILE;
        tile_a[local.x][local.y] = op_a(z, i, l0 + local.y);
        tile_b[local.x][local.y] = op_b(z, l0 + local.x, j);
        workgroupBarrier();
        for (var l = 0u; l < TILE; l++) {
            acc += tile_a[local.x][l] * tile_b[l][local.y];
        }
        workgroupBarrier();
    }
    if (i < dims.m && j < dims.n) {
        c[z * dims.m * dims.n + i + j * dims.m] = acc;
    }
}
