// The last step of a split-K compensated product (gemm.wgsl's `gemm_compensated` with splits > 1):
// each output's partial sums, one (head, tail) pair per split, added in split order in double-float
// (double_float.wgsl, prepended) — a fixed order, so the result does not depend on which split
// finished first. Partials: planes [heads of split 0, …, heads of split S−1, tails of split 0, …],
// each `values` long; out: each product's heads `stride` words after the last's (packed when the
// stride is m · n) and its tails `plane` words after its heads (all heads, then all tails, when
// the plane is batch · stride; each product's [heads | tails] when it is m · n).

struct Dims {
    values: u32,  // outputs per plane (batch · m · n)
    splits: u32,
    one: f32,     // 1.0, unknown to the compiler
    block: u32,   // outputs per product (m · n)
    stride: u32,  // words from one product's output to the next's in `out` (block when packed)
    plane: u32,   // words from a head to its tail in `out`
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> partials: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

fn one() -> f32 {
    return dims.one;
}

// Where output k (of the packed planes) goes in `out`: its product's place at the stride.
fn out_at(k: u32) -> u32 {
    return (k / dims.block) * dims.stride + k % dims.block;
}

@compute @workgroup_size(64)
fn split_sum(@builtin(global_invocation_id) id: vec3<u32>) {
    let k = id.x + id.y * 65535u * 64u;
    if (k >= dims.values) {
        return;
    }
    var acc = vec2<f32>(0.0, 0.0);
    for (var s = 0u; s < dims.splits; s++) {
        let head = partials[s * dims.values + k];
        let tail = partials[(dims.splits + s) * dims.values + k];
        acc = df_add(acc, df_add(vec2<f32>(head, 0.0), vec2<f32>(tail, 0.0)));
    }
    out[out_at(k)] = acc.x;
    out[dims.plane + out_at(k)] = acc.y;
}

// A split float32 product's planes (`gemm` with splits > 1: partials [split 0, …, split S−1],
// each `values` long) added in split order into out[k]: a fixed order, so the result does not
// depend on which split finished first.
@compute @workgroup_size(64)
fn split_sum_single(@builtin(global_invocation_id) id: vec3<u32>) {
    let k = id.x + id.y * 65535u * 64u;
    if (k >= dims.values) {
        return;
    }
    var acc = 0.0;
    for (var s = 0u; s < dims.splits; s++) {
        acc += partials[s * dims.values + k];
    }
    out[out_at(k)] = acc;
}
