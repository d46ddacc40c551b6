//! q(w)'s encoder run on the device inside a resident evaluation (issue 34 items 1 and 3): the
//! passes of `encoder.wgsl`, each one dispatch over all requests of a batch with the same encoder
//! and minibatch shapes, forward before the evaluation points (q(w)'s moments written
//! where `points.wgsl` reads them) and backward after the draws' gradient (each layer's weight
//! gradient written beside ∂Z, so that `held_gradients.wgsl`'s `adam_held` steps Z and the encoder
//! in one pass). The host's reference is `gp::encoder::Encoder::forward` and `backward` with
//! `svgp`'s KL(q(w)) gradient.

use super::Upload;
use crate::gp::encoder::Encoder;

use super::submission::Step;
use super::{Gpu, GpuError};

/// Invocations per workgroup of `encoder.wgsl`'s passes.
const GROUP: u32 = 64;

/// Uniform blocks kept per scratch slot: room for 85 layers.
pub(super) const DISPATCHES: usize = 256;

/// The compiled entry points of `encoder.wgsl`, in [`EncoderPass`]'s order.
pub(super) fn pipelines(device: &wgpu::Device) -> Vec<wgpu::ComputePipeline> {
    let source = [
        super::DOUBLE_FLOAT,
        super::FIVE_BUFFERS,
        super::POSITIVE,
        include_str!("encoder.wgsl"),
    ]
    .concat();
    EncoderPass::ALL
        .iter()
        .map(|pass| super::compute_pipeline(device, "encoder.wgsl", &source, pass.entry()))
        .collect()
}

/// The passes of `encoder.wgsl`.
#[derive(Debug, Clone, Copy)]
enum EncoderPass {
    Forward,
    LatentMoments,
    HeadAdjoint,
    WeightGrads,
    BackDelta,
}

impl EncoderPass {
    const ALL: [EncoderPass; 5] = [
        EncoderPass::Forward,
        EncoderPass::LatentMoments,
        EncoderPass::HeadAdjoint,
        EncoderPass::WeightGrads,
        EncoderPass::BackDelta,
    ];

    fn entry(self) -> &'static str {
        match self {
            EncoderPass::Forward => "forward",
            EncoderPass::LatentMoments => "latent_moments",
            EncoderPass::HeadAdjoint => "head_adjoint",
            EncoderPass::WeightGrads => "weight_grads",
            EncoderPass::BackDelta => "back_delta",
        }
    }
}

/// The buffers the encoder passes of a batch read and write, each holding the batch's slots one
/// after another, `*_stride` words apart.
pub(super) struct EncoderBuffers<'a> {
    /// The slots' held states [Z | encoder | …]: the weights start at `weights_at`.
    pub held: &'a wgpu::Buffer,
    pub held_stride: usize,
    pub weights_at: usize,
    /// The minibatch's rows (b × D, row-major): layer 0's input.
    pub x: &'a wgpu::Buffer,
    pub x_stride: usize,
    /// `points.wgsl`'s latent input [ε (T) | (μ_n, √Σ_n)].
    pub latent: &'a wgpu::Buffer,
    pub latent_stride: usize,
    /// `held_gradients.wgsl`'s gradients: q(w)'s sums at `latent_at`, the encoder's gradient
    /// to be written at `gradient_at`.
    pub gradients: &'a wgpu::Buffer,
    pub gradients_stride: usize,
    pub latent_at: usize,
    pub gradient_at: usize,
}

/// The (fan-out, fan-in) of each of `encoder`'s layers: all its passes need of it.
pub(super) fn encoder_shapes(encoder: &Encoder) -> Vec<(usize, usize)> {
    encoder.layers.iter().map(|dense| dense.w.shape()).collect()
}

/// A batch's encoder passes: `forward` before the evaluation points, `backward` after the
/// draws' gradient and before `held_gradients.wgsl`'s sums and Adam step.
pub(super) struct EncoderPlan<'g> {
    pub forward: Vec<Step<'g>>,
    pub backward: Vec<Step<'g>>,
}

/// One layer: fan-in, fan-out and where its weights start in the encoder's parameters.
#[derive(Debug, Clone, Copy)]
struct Layer {
    fan_in: usize,
    fan_out: usize,
    params_at: usize,
    /// Where its output starts in the tape.
    output_at: usize,
}

/// `encoder.wgsl`'s `Dims` for one dispatch.
#[derive(Debug, Clone, Copy, Default)]
struct PassDims {
    rows: usize,
    fan_in: usize,
    fan_out: usize,
    weights: usize,
    input: usize,
    output: usize,
    relu: bool,
    first: bool,
    delta_in: usize,
    delta_out: usize,
    grads: usize,
    latent_t: usize,
    scale: f64,
    /// Words per slot of src_a, src_b, src_c and dst.
    strides: [usize; 4],
}

impl PassDims {
    fn bytes(&self) -> Vec<u8> {
        let u = |v: usize| v as u32;
        super::uniform_words(&[
            u(self.rows),
            u(self.fan_in),
            u(self.fan_out),
            u(self.weights),
            u(self.input),
            u(self.output),
            u32::from(self.relu),
            u32::from(self.first),
            u(self.delta_in),
            u(self.delta_out),
            u(self.grads),
            u(self.latent_t),
            (self.scale as f32).to_bits(),
            1.0f32.to_bits(),
            0,
            0,
            u(self.strides[0]),
            u(self.strides[1]),
            u(self.strides[2]),
            u(self.strides[3]),
        ])
    }
}

/// The layers of an encoder of `shapes` ((fan-out, fan-in) each) with their offsets, and the
/// tape's length for `rows` rows.
fn layers(shapes: &[(usize, usize)], rows: usize) -> (Vec<Layer>, usize) {
    let mut params_at = 0;
    let mut output_at = 0;
    let layers = shapes
        .iter()
        .map(|&(fan_out, fan_in)| {
            let layer = Layer {
                fan_in,
                fan_out,
                params_at,
                output_at,
            };
            params_at += fan_in * fan_out + fan_out;
            output_at += rows * fan_out;
            layer
        })
        .collect();
    (layers, output_at)
}

impl Gpu {
    /// Plans the encoder's passes over `slots` slots in scratch slot `scratch` (its buffers and
    /// uniform blocks kept there), for `rows` minibatch rows, T = `t` draws and KL(q(w))'s weight
    /// `scale` = N/b, each pass one dispatch over all slots (the dispatch's y). `shapes` are the
    /// layers' (fan-out, fan-in): the weights are each slot's held ones.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan_encoder(
        &self,
        scratch: usize,
        shapes: &[(usize, usize)],
        rows: usize,
        t: usize,
        scale: f64,
        buffers: &EncoderBuffers,
        slots: usize,
    ) -> Result<EncoderPlan<'_>, GpuError> {
        let storage = wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_SRC
            | wgpu::BufferUsages::COPY_DST;
        let (layers, tape_len) = layers(shapes, rows);
        // Each dispatch's uniform block has a key of its own among the scratch slot's
        // DISPATCHES: one per layer forward, q(w)'s moments, the head's adjoint, and two per
        // layer backward (one fewer for layer 0).
        let dispatches = 3 * layers.len() + 1;
        if layers.is_empty() || dispatches > DISPATCHES {
            return Err(GpuError::TooLarge {
                what: "the encoder's layers",
                needed: layers.len() as u64,
                limit: ((DISPATCHES - 1) / 3) as u64,
            });
        }
        let widest = layers
            .iter()
            .map(|l| l.fan_out.max(l.fan_in))
            .max()
            .unwrap_or(1);
        let half = rows * widest;
        let delta_len = 2 * half;
        self.check_binding("the encoder's activations", (slots * tape_len * 4) as u64)?;
        self.check_binding(
            "the encoder's backward pass",
            (slots * delta_len * 4) as u64,
        )?;
        let tape = self.resident("encoder tape", scratch, slots * tape_len * 4, storage);
        let delta = self.resident("encoder delta", scratch, slots * delta_len * 4, storage);
        let spare = self.resident("encoder spare", scratch, 4, storage);
        let groups = |n: usize| -> Result<(u32, u32, u32), GpuError> {
            let groups = ((n.max(1) as u32).div_ceil(GROUP), slots as u32, 1);
            self.check_groups("the encoder's passes", groups)?;
            Ok(groups)
        };
        // Each dispatch's uniform block, kept under its own key within the scratch slot.
        let mut dispatch = 0usize;
        let mut step = |pass: EncoderPass,
                        dims: PassDims,
                        bound: [&wgpu::Buffer; 4],
                        invocations: usize|
         -> Result<Step<'_>, GpuError> {
            let dims = self.resident_written(
                Upload::OnChange,
                "encoder dims",
                scratch * DISPATCHES + dispatch,
                &dims.bytes(),
                wgpu::BufferUsages::UNIFORM,
            );
            dispatch += 1;
            Ok((
                &self.pipelines.encoder[pass as usize],
                std::iter::once(&dims).chain(bound).cloned().collect(),
                groups(invocations)?,
            ))
        };
        let last = layers.len() - 1;
        // What layer k's passes, forward and backward, all know of it: its shape, weights and input.
        let layer_dims = |k: usize| PassDims {
            rows,
            fan_in: layers[k].fan_in,
            fan_out: layers[k].fan_out,
            weights: buffers.weights_at + layers[k].params_at,
            input: if k == 0 { 0 } else { layers[k - 1].output_at },
            first: k == 0,
            ..PassDims::default()
        };
        let mut forward = Vec::with_capacity(layers.len() + 1);
        for (k, layer) in layers.iter().enumerate() {
            let dims = PassDims {
                output: layer.output_at,
                relu: k < last,
                strides: [buffers.held_stride, buffers.x_stride, 0, tape_len],
                ..layer_dims(k)
            };
            forward.push(step(
                EncoderPass::Forward,
                dims,
                [buffers.held, buffers.x, &spare, &tape],
                rows * layer.fan_out,
            )?);
        }
        let head = layers[last];
        let moments = PassDims {
            rows,
            output: head.output_at,
            latent_t: t,
            strides: [tape_len, 0, 0, buffers.latent_stride],
            ..PassDims::default()
        };
        forward.push(step(
            EncoderPass::LatentMoments,
            moments,
            [&tape, &spare, &spare, buffers.latent],
            rows,
        )?);

        // δ of layer k's output sits in one half of the δ buffer, its input's in the other.
        let delta_at = |k: usize| ((last - k) % 2) * half;
        let mut backward = Vec::with_capacity(2 * layers.len() + 1);
        backward.push(step(
            EncoderPass::HeadAdjoint,
            PassDims {
                rows,
                output: head.output_at,
                delta_in: delta_at(last),
                grads: buffers.latent_at,
                scale,
                strides: [tape_len, buffers.gradients_stride, 0, delta_len],
                ..PassDims::default()
            },
            [&tape, buffers.gradients, &spare, &delta],
            rows,
        )?);
        for k in (0..layers.len()).rev() {
            let layer = layers[k];
            let dims = PassDims {
                delta_in: delta_at(k),
                delta_out: if k > 0 { delta_at(k - 1) } else { 0 },
                grads: buffers.gradient_at + layer.params_at,
                strides: [
                    tape_len,
                    buffers.x_stride,
                    delta_len,
                    buffers.gradients_stride,
                ],
                ..layer_dims(k)
            };
            backward.push(step(
                EncoderPass::WeightGrads,
                dims,
                [&tape, buffers.x, &delta, buffers.gradients],
                layer.fan_in * layer.fan_out + layer.fan_out,
            )?);
            if k > 0 {
                backward.push(step(
                    EncoderPass::BackDelta,
                    PassDims {
                        strides: [buffers.held_stride, tape_len, 0, delta_len],
                        ..dims
                    },
                    [buffers.held, &tape, &spare, &delta],
                    rows * layer.fan_in,
                )?);
            }
        }
        Ok(EncoderPlan { forward, backward })
    }
}
