// A probe of kernel_shapes.wgsl for the parity test (after positive.wgsl and kernel_shapes.wgsl):
// per probe i, `probes` holds (kind as a float, r², a) and `values` gets (κ, ∂κ/∂r², ∂κ/∂a).

@group(0) @binding(0) var<storage, read> probes: array<f32>;
@group(0) @binding(1) var<storage, read_write> values: array<f32>;

@compute @workgroup_size(64)
fn probe_shapes(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&probes) / 3u) {
        return;
    }
    let v = shape(u32(probes[3u * i]), probes[3u * i + 1u], probes[3u * i + 2u]);
    values[3u * i] = v.x;
    values[3u * i + 1u] = v.y;
    values[3u * i + 2u] = v.z;
}
