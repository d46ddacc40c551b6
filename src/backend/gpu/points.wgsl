// The uncollapsed bound's evaluation points, built on the device from what the host uploads each
// iteration: the minibatch's rows x (b × D, row-major) and the latent draws w (S × b, column-major,
// so draw s of row n is at n·S + s). Point p = n·S + s is row n of x with the latent slot set to
// w_sn (as `svgp::evaluation_points` orders them); `u` is T × D, row-major, T = S·b. The host
// sends b·D + T values instead of T·D.

struct Dims {
    t: u32,        // points
    d: u32,        // inputs per point
    samples: u32,  // S
    slot: u32,     // the latent input's column
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> draws: array<f32>;
@group(0) @binding(3) var<storage, read_write> u: array<f32>;

@compute @workgroup_size(64)
fn evaluation_points(@builtin(global_invocation_id) id: vec3<u32>) {
    let e = id.x;
    if (e >= dims.t * dims.d) {
        return;
    }
    let p = e / dims.d;
    let j = e % dims.d;
    if (j == dims.slot) {
        u[e] = draws[p];
    } else {
        u[e] = x[(p / dims.samples) * dims.d + j];
    }
}
