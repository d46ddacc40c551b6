// The one bind-group layout of the small passes around the resident evaluation (inducing.wgsl,
// held_gradients.wgsl; prepended to each after double_float.wgsl): a uniform `dims` (each
// shader's own `Dims`, with a `one` field holding 1.0), three read-only sources and one
// destination. Every entry point calls `touch()` (first thing in its shader's `enter`), so that
// all five bindings are in its layout whichever it reads, and an unused source is bound to a
// spare buffer.

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> src_a: array<f32>;
@group(0) @binding(2) var<storage, read> src_b: array<f32>;
@group(0) @binding(3) var<storage, read> src_c: array<f32>;
@group(0) @binding(4) var<storage, read_write> dst: array<f32>;

// 1.0 read from a uniform, unknown to the compiler (double_float.wgsl).
fn one() -> f32 {
    return dims.one;
}

// Static uses of every binding, so every entry point has the one layout.
fn touch() {
    _ = src_a[0];
    _ = src_b[0];
    _ = src_c[0];
    _ = dst[0];
}
