// The minibatch gathered on the device from the data it holds (issue 34 item 1: the host uploads
// the minibatch's row indices, not its rows).
//
// `gather`   data = N × D, row-major; rows = the minibatch's row indices (b); out = the rows x
//            (b × D, row-major) when `column` ≥ D, else that column of them (b: the targets y).
//            The host's reference is `GpCdeVariable::prepare`'s x and y.

struct Dims {
    rows: u32,     // b
    d: u32,        // columns of the data
    column: u32,   // ≥ d: whole rows; else this column only
    pad: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> data: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) id: vec3<u32>) {
    let e = id.x;
    if (dims.column >= dims.d) {
        if (e < dims.rows * dims.d) {
            out[e] = data[rows[e / dims.d] * dims.d + e % dims.d];
        }
    } else if (e < dims.rows) {
        out[e] = data[rows[e] * dims.d + dims.column];
    }
}
