// The minibatch gathered on the device from the data it holds (issue 34 item 1: the host uploads
// the minibatch's row indices, not its rows).
//
// `gather`   data = N × D, row-major; rows = each slot's minibatch row indices (b); out = each
//            slot's rows x (b × D, row-major) when `whole` is 1, else their column that is the
//            slot's latent input (b: the targets y, the variable's own column). One pass over a
//            batch of slots (the dispatch's y), slot k's indices and output k strides (in words)
//            into their buffers. The host's reference is `GpCdeModel::prepare`'s x and y.

struct Dims {
    rows: u32,           // b
    d: u32,              // columns of the data
    whole: u32,          // 1: whole rows; 0: the slot's own column only
    stride_rows: u32,
    stride_out: u32,
    pad0: u32,
    pad1: u32,
    pad2: u32,
}

@group(0) @binding(0) var<uniform> dims: Dims;
@group(0) @binding(1) var<storage, read> data: array<f32>;
@group(0) @binding(2) var<storage, read> rows: array<u32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
// Per slot: (a word the held passes read, the latent input's column, another for them, 0).
@group(0) @binding(4) var<storage, read> slots: array<vec4<u32>>;

@compute @workgroup_size(64)
fn gather(@builtin(global_invocation_id) id: vec3<u32>) {
    let e = id.x;
    let slot = id.y;
    let indices = slot * dims.stride_rows;
    let at = slot * dims.stride_out;
    if (dims.whole == 1u) {
        if (e < dims.rows * dims.d) {
            out[at + e] = data[rows[indices + e / dims.d] * dims.d + e % dims.d];
        }
    } else if (e < dims.rows) {
        out[at + e] = data[rows[indices + e] * dims.d + slots[slot].y];
    }
}
