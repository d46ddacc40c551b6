//! The uncollapsed bound's heavy half on the GPU: for each request, the predictions at the
//! T = S·b evaluation points ([`Predictions`]), in one command submission for the whole batch and
//! one read-back. Per batch of requests of one shape, each pass one dispatch over the batch
//! ([`Gpu::plan_predictions`]: a slot's values a stride after the last's), in order on the device
//! (float32):
//!
//! 0. the T evaluation points, k_tt and y_T from the minibatch's rows and targets and the latent
//!    input's noise ε with each row's (μ, √Σ) (`points.wgsl`: the host sends b·(D + 3) + T values,
//!    not T·(D + 3));
//! 1. K = K_Zt (M × T) by `kernel_cross.wgsl`;
//! 2. Ã = L⁻¹K and B = (S − I)Ã by the tiled GEMM;
//! 3. per column t (`predictions.wgsl`): mean = ã_tᵀm, var = k_tt + ã_tᵀb_t, the misfit, g_mean,
//!    and Ā = m g_meanᵀ + 2 g_var B overwriting B;
//! 4. [Ã g_mean, Ã y] by the GEMM, P = Ã Ãᵀ by the GEMM's lower-tile (SYRK) mode;
//! 5. K̄ = L⁻ᵀĀ by the GEMM (into K's buffer), then the kernel's adjoint through K̄: per row of Z
//!    its gradient and its share of the parameter sums, per evaluation point its gradient
//!    (`kernel_backward.wgsl`);
//! 6. the sums over chunks of points and the misfit's sum as double-floats, in a fixed order, and
//!    the latent input's column of ∂U (`finish.wgsl`), so that the read-back is
//!    4M + 2M² + 2MW + T + 2 values (4088 bytes at M = 10, T = 320, D = 3), not the partial sums.
//!
//! The whitened form (Ã rather than K) is the float32 choice: P = Ã Ãᵀ stays positive
//! semi-definite under any rounding, where L⁻¹(K Kᵀ)L⁻ᵀ from a float32 K Kᵀ did not (a whole run
//! on the chain set failed with q(v)'s covariance indefinite after a natural-gradient step), at
//! the price of two more M²T GEMMs. The host keeps the M × M algebra in f64: the factor of K_ZZ and
//! L⁻¹ before ([`crate::gp::svgp::InducingStep`]), k_tt's adjoint and the sums over the rows of Z
//! after. What goes up per request is O(M² + b·D + T) values, what comes back O(M² + M·W + T),
//! never the M × T matrices. The device buffers ([`Gpu::resident`]) and bind groups
//! ([`Gpu::bind_kept`]) are made once and kept between calls.

mod inputs;

use nalgebra::{DMatrix, DVector};

use super::gemm::{self, Accumulation, Op, Product};
use super::kernel::{
    alpha_at, backward_chunk, backward_width, decode_rows, host_parameters, kernel_dims,
    kind_bytes, parameter_words, rows_bytes, KernelStrides,
};
use super::submission::{Readback, Step, Submitted};
use super::{f32_bytes, uniform_words, Gpu, GpuError, Upload};
#[cfg(not(target_arch = "wasm32"))]
use crate::gp::linalg::CholeskyError;
#[cfg(not(target_arch = "wasm32"))]
use crate::gp::svgp::{bound_and_gradient, InducingStep, SvgpOutput};
use crate::gp::svgp::{PredictionRequest, Predictions, Products, SvgpInput};
use inputs::latent_bytes;
pub(super) use inputs::PointInputs;

/// Invocations per workgroup of the column pass (`@workgroup_size(64)`).
const COLUMN_GROUP: u32 = 64;
/// Invocations per workgroup of the kernel's forward pass, per side.
const CROSS_SIDE: u32 = 8;
/// Invocations per workgroup of `finish.wgsl`.
const FINISH_GROUP: u32 = 64;
/// Invocations per workgroup of the kernel adjoint's passes.
const BACKWARD_GROUP: u32 = 64;

/// The first resident slot of one-off requests ([`Gpu::bounds_and_gradients`]: a restart's final
/// bound over every row, in chunks larger than an iteration's): kept apart from the iterations'
/// slots 0, 1, …, so that those are never grown or rebound by them.
#[cfg(not(target_arch = "wasm32"))]
const ONE_OFF_SLOTS: usize = 1 << 20;

/// The compiled `column_pass` entry point of `predictions.wgsl`.
pub(super) fn pipeline(device: &wgpu::Device) -> wgpu::ComputePipeline {
    super::compute_pipeline(
        device,
        "predictions.wgsl",
        include_str!("predictions.wgsl"),
        "column_pass",
    )
}

/// The compiled `evaluation_points` entry point of `points.wgsl`.
pub(super) fn points_pipeline(device: &wgpu::Device) -> wgpu::ComputePipeline {
    super::compute_pipeline(
        device,
        "points.wgsl",
        include_str!("points.wgsl"),
        "evaluation_points",
    )
}

/// The compiled `finish_sums` entry point of `finish.wgsl`.
pub(super) fn finish_pipeline(device: &wgpu::Device) -> wgpu::ComputePipeline {
    super::compute_pipeline(
        device,
        "finish.wgsl",
        include_str!("finish.wgsl"),
        "finish_sums",
    )
}

/// Where each result lies in a request's read-back buffer, in f32 values.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadbackLayout {
    pub m: usize,
    pub t: usize,
    pub chunks: usize,
    pub width: usize,
}

impl ReadbackLayout {
    /// [Ã g_mean, Ã y] (2M, twice: head and tail) | P = Ã Ãᵀ (M², lower tiles, twice) | what
    /// `finish.wgsl` leaves: the misfit's sum (2) | the row sums (M·W, twice) | ∂w (T).
    pub fn parts(&self) -> [usize; 3] {
        let ReadbackLayout { m, t, width, .. } = *self;
        [4 * m, 2 * m * m, 2 + 2 * m * width + t]
    }

    /// The kernel adjoint's row pass's output: one partial sum per chunk.
    fn row_partials(&self) -> usize {
        self.chunks * self.m * self.width
    }

    fn total(&self) -> usize {
        self.parts().iter().sum()
    }
}

/// What the host keeps of an encoded request to finish it after the read-back.
struct Pending {
    layout: ReadbackLayout,
    /// The evaluation points (T × D), for k_tt's adjoint.
    u: DMatrix<f64>,
    readback: wgpu::Buffer,
}

/// Predictions submitted to the device and not yet read ([`Gpu::submit_predictions`]).
#[must_use = "the predictions are read by `finish`"]
pub struct SubmittedPredictions(Submitted<Pending>);

impl SubmittedPredictions {
    /// The predictions of `requests` (the ones submitted, in the same order) once the device has
    /// finished them. Natively this blocks until the submission has finished (the one blocking
    /// wait); in the browser the mapping resolves by itself and the worker's event loop runs
    /// meanwhile.
    pub async fn finish(
        self,
        gpu: &Gpu,
        requests: &[PredictionRequest<'_>],
    ) -> Result<Vec<Predictions>, GpuError> {
        Ok(requests
            .iter()
            .zip(self.0.read(gpu).await?)
            .map(|(request, (p, v))| decode(request, &p, &v))
            .collect())
    }
}

impl Readback for Pending {
    fn readback(&self) -> (&wgpu::Buffer, usize, usize) {
        (&self.readback, 0, self.layout.total() * 4)
    }
}

/// Usage of every device-side storage buffer (written by the queue or a shader, copied out).
fn storage() -> wgpu::BufferUsages {
    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
}

impl Gpu {
    /// The uncollapsed bound, its gradient and the natural-gradient statistics of every input,
    /// the predictions of all of them in one submission: per input, [`InducingStep::new`] with
    /// K_ZZ's jitter at least `relative_jitter` · mean diag(K_ZZ), the predictions here, then
    /// [`InducingStep::finish`]. An input without a latent input (a plain GP regression, which
    /// the engine never sends) is computed by the CPU's `svgp::bound_and_gradient` instead. The
    /// outer error is the device's (nothing was computed); an inner one is that input's K_ZZ or
    /// S failing to factorise.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn bounds_and_gradients(
        &self,
        inputs: &[SvgpInput],
        relative_jitter: f64,
    ) -> Result<Vec<Result<SvgpOutput, CholeskyError>>, GpuError> {
        let steps: Vec<Result<InducingStep, CholeskyError>> = inputs
            .iter()
            .map(|input| InducingStep::new(input, relative_jitter))
            .collect();
        let requests: Vec<_> = steps
            .iter()
            .zip(inputs)
            .filter_map(|(step, input)| step.as_ref().ok()?.request(input))
            .collect();
        let submitted = self.submit_predictions_from(&requests, ONE_OFF_SLOTS)?;
        let mut predictions = pollster::block_on(submitted.finish(self, &requests))?.into_iter();
        Ok(steps
            .into_iter()
            .zip(inputs)
            .map(|(step, input)| {
                let step = step?;
                if input.latent.is_none() {
                    return bound_and_gradient(input);
                }
                let pred = predictions
                    .next()
                    .expect("one set of predictions per request");
                Ok(step.finish(input, pred))
            })
            .collect())
    }

    /// The predictions of every request (the same quantities as the CPU's fused path, to within
    /// float32 rounding), computed in one submission with the sums finished in f64 here. Blocks
    /// until the device has finished.
    ///
    /// Panics if a request's shapes disagree (x b × D, y b, draws S × b, α M, Q M × M).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn svgp_predictions(
        &self,
        requests: &[PredictionRequest],
    ) -> Result<Vec<Predictions>, GpuError> {
        let submitted = self.submit_predictions(requests)?;
        pollster::block_on(submitted.finish(self, requests))
    }

    /// Encodes and submits the predictions of every request in one submission and asks for the
    /// results to be mapped; [`SubmittedPredictions::finish`] reads them once the device is done
    /// (awaited in the browser, so the worker's event loop runs meanwhile).
    ///
    /// Panics if a request's shapes disagree (x b × D, y b, draws S × b, α M, Q M × M).
    pub fn submit_predictions(
        &self,
        requests: &[PredictionRequest],
    ) -> Result<SubmittedPredictions, GpuError> {
        self.submit_predictions_from(requests, 0)
    }

    /// [`Gpu::submit_predictions`] with request k in resident slot `first_slot + k`.
    fn submit_predictions_from(
        &self,
        requests: &[PredictionRequest],
        first_slot: usize,
    ) -> Result<SubmittedPredictions, GpuError> {
        self.submit_each("svgp predictions", requests, |encoder, k, request| {
            self.encode(encoder, first_slot + k, request)
        })
        .map(SubmittedPredictions)
    }

    /// Uploads request `slot`'s inputs and records its passes and copies into `encoder`.
    fn encode(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        slot: usize,
        request: &PredictionRequest,
    ) -> Result<Pending, GpuError> {
        let PredictionRequest {
            input: SvgpInput { z, q_mean, .. },
            l_inv,
            s_minus_i,
            ..
        } = *request;
        let m = z.nrows();
        assert_eq!(
            (q_mean.len(), l_inv.shape(), s_minus_i.shape()),
            (m, (m, m), (m, m)),
            "m is M, L⁻¹ and S − I are M × M"
        );
        let matrix = |role, x: &DMatrix<f64>| {
            self.resident_written(
                Upload::EveryCall,
                role,
                slot,
                &f32_bytes(x.iter().copied()),
                storage(),
            )
        };
        // m in the 2M words a slot's mean has (`PlanStrides::operands`).
        let mean = q_mean.iter().copied().chain(std::iter::repeat_n(0.0, m));
        let operands = InducingOperands {
            l_inv: matrix("l_inv", l_inv),
            s_minus_i: matrix("s - i", s_minus_i),
            q_mean: self.resident_written(
                Upload::EveryCall,
                "q mean",
                slot,
                &f32_bytes(mean),
                storage(),
            ),
        };
        let inputs = [PointInputs::of_request(request)];
        let plan = self.plan_predictions(slot, &inputs, &[[0; 2]], &operands, false)?;
        let steps: Vec<&Step> = plan.steps().collect();
        self.record_steps(encoder, "svgp predictions", slot, &steps);
        let layout = plan.layout;
        let readback = self.resident(
            "readback",
            slot,
            layout.total() * 4,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        );
        let mut offset = 0u64;
        for (source, values) in [&plan.g_alpha_ky, &plan.p, &plan.finished]
            .into_iter()
            .zip(layout.parts())
        {
            let bytes = (values * 4) as u64;
            if bytes > 0 {
                self.device
                    .copy(encoder, (source, 0), (&readback, offset), bytes);
            }
            offset += bytes;
        }
        Ok(Pending {
            layout,
            u: plan.u.expect("the host-half path builds the points"),
            readback,
        })
    }

    /// Records `steps` into `encoder` in one compute pass, each with its bind group kept under
    /// (`label`, its index, `slot`).
    pub(super) fn record_steps(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        label: &'static str,
        slot: usize,
        steps: &[&Step],
    ) {
        let groups: Vec<_> = steps
            .iter()
            .enumerate()
            .map(|(k, (pipeline, buffers, groups))| {
                let refs: Vec<&wgpu::Buffer> = buffers.iter().collect();
                (
                    *pipeline,
                    self.bind_kept((label, k, slot), pipeline, &refs),
                    *groups,
                )
            })
            .collect();
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes: None,
        });
        for (pipeline, bind_group, (gx, gy, gz)) in &groups {
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, bind_group, &[]);
            pass.dispatch_workgroups(*gx, *gy, *gz);
        }
        self.device.note_dispatches(groups.len());
    }

    /// The prediction passes of `inputs` (a slot each, all of one shape: M, D, S, b and the
    /// kernel's parts) as one batch in resident slot `slot`, each pass one dispatch over the
    /// batch, slot k's values k strides into each buffer ([`PlanStrides`]); L⁻¹, S − I and m
    /// are read from `operands` (slot k's k · M², k · M² and k · 2M words in). `words[k]` are
    /// the two words the held passes read beside slot k's latent column
    /// ([`PredictionPlan::slot_words`]).
    /// With `gram`, Z is appended to the evaluation points (K' = K(Z, [U; Z]), M × (T + M), its
    /// last M columns K_ZZ) so that the one kernel pass and the one adjoint serve K_ZZ as well:
    /// the caller copies each slot's Z there ([`PredictionPlan::z_place`]) and writes K̄_ZZ after
    /// K̄_Zt before the adjoint runs.
    ///
    /// Panics if the inputs' shapes disagree (x b × D, y b, draws S × b, one kernel structure),
    /// or if a batch of several slots asks for the host's evaluation points (without `gram`).
    pub(super) fn plan_predictions(
        &self,
        slot: usize,
        inputs: &[PointInputs],
        words: &[[u32; 2]],
        operands: &InducingOperands,
        gram: bool,
    ) -> Result<PredictionPlan<'_>, GpuError> {
        let first = inputs[0];
        let PointInputs {
            kernel,
            z,
            upload_z,
            latent_on_device,
            rows_on_device,
            parameters_on_device,
            ..
        } = first;
        let n = inputs.len();
        assert_eq!(words.len(), n, "one held word per slot");
        let (m, d) = z.shape();
        let (samples, b) = first.latent.eps.shape();
        let t = samples * b;
        let kinds = kind_bytes(kernel);
        for input in inputs {
            assert_eq!(input.z.shape(), (m, d), "every Z is M × D");
            assert_eq!(input.x.shape(), (b, d), "x is b × D");
            assert_eq!(input.y.len(), b, "one target per row");
            assert_eq!(input.latent.eps.shape(), (samples, b), "draws S × b");
            assert!(
                kind_bytes(input.kernel) == kinds && input.kernel.dim() == d,
                "one kernel structure per batch"
            );
        }
        // The points the kernel pass and its adjoint see.
        let points = if gram { t + m } else { t };
        let chunk = backward_chunk(points);
        let layout = ReadbackLayout {
            m,
            t,
            chunks: points.div_ceil(chunk),
            width: backward_width(kernel),
        };
        let mm = m * m;
        let strides = PlanStrides {
            z: m * d,
            x: b * d,
            y: b,
            latent: t + 2 * b,
            params: parameter_words(kernel),
            points: points * d,
            k: m * points,
            p: 2 * mm,
            g_alpha_ky: 4 * m,
            finished: layout.parts()[2],
            operands: [mm, mm, 2 * m],
        };
        let row_partials = layout.row_partials();
        for (what, values) in [
            ("K_Zt", strides.k),
            ("the kernel adjoint's row sums", row_partials),
            ("the evaluation points", strides.points),
            ("the whitened K_Zt", m * t),
        ] {
            self.check_binding(what, (n * values * 4) as u64)?;
        }
        let slots = n as u32;
        let cross_groups = (
            (m as u32).div_ceil(CROSS_SIDE),
            (points as u32).div_ceil(CROSS_SIDE),
            slots,
        );
        let rows_groups = (
            (m as u32).div_ceil(BACKWARD_GROUP),
            layout.chunks as u32,
            slots,
        );
        let point_groups = ((t as u32).div_ceil(COLUMN_GROUP), slots, 1);
        let cols_groups = ((points as u32).div_ceil(COLUMN_GROUP), slots, 1);
        let build_groups = (
            ((t * d).max(t).max(1) as u32).div_ceil(COLUMN_GROUP),
            slots,
            1,
        );
        let finish_groups = (
            ((m * layout.width).max(t).max(1) as u32).div_ceil(FINISH_GROUP),
            slots,
            1,
        );
        // Ã = L⁻¹K and B = (S − I)Ã; K̄ = L⁻ᵀĀ; [Ãg, Ãy] and P = ÃÃᵀ compensated (split along T
        // when their blocks alone are too few for a large GPU), each slot's heads and tails
        // together as one product alone has them.
        let single = |op_a, strides| {
            Product::new((m, t, m), op_a, Op::AsIs, false, n, Accumulation::Single)
                .with_strides(strides)
        };
        let left = single(Op::AsIs, [mm, strides.k, m * t]);
        let second = single(Op::AsIs, [mm, m * t, m * t]);
        let back = single(Op::Transposed, [mm, m * t, strides.k]);
        let small = Product::new(
            (m, 2, t),
            Op::AsIs,
            Op::AsIs,
            false,
            n,
            Accumulation::Compensated,
        )
        .with_strides([m * t, 2 * t, 4 * m])
        .with_plane(2 * m);
        let kkt = Product::new(
            (m, m, t),
            Op::AsIs,
            Op::Transposed,
            true,
            n,
            Accumulation::Compensated,
        )
        .with_strides([m * t, m * t, 2 * mm])
        .with_plane(mm);
        for (what, values) in [
            ("[Ãg, Ãy]'s partial sums", small.output_words()),
            ("ÃÃᵀ's partial sums", kkt.output_words()),
        ] {
            self.check_binding(what, (values * 4) as u64)?;
        }
        for groups in [
            cross_groups,
            rows_groups,
            point_groups,
            cols_groups,
            left.groups,
            second.groups,
            back.groups,
            small.groups,
            kkt.groups,
            small.sum_groups(),
            kkt.sum_groups(),
            finish_groups,
            build_groups,
        ] {
            self.check_groups("the predictions' dispatch", groups)?;
        }

        // Host side, f64, for the host-half path only: the evaluation points, for k_tt's adjoint
        // after the read-back, whose draws' share needs every point (the device builds its own,
        // with k_tt and y_T, from the rows and the latent input: points.wgsl; the resident path
        // takes k_tt's adjoint from column sums, `resident::decode`). Point t = n·S + s is row n
        // of x with the latent slot set to w_sn = μ_n + √Σ_n ε_sn (a row's samples adjacent, as
        // `svgp::evaluation_points` orders them).
        assert!(
            gram || n == 1,
            "the host's evaluation points are one slot's"
        );
        let u = (!gram).then(|| {
            let (x, latent) = (first.x, first.latent);
            DMatrix::from_fn(t, d, |p, j| {
                let (s, row) = (p % samples, p / samples);
                if j == latent.slot {
                    latent.mu[row] + latent.var[row].sqrt() * latent.eps[(s, row)]
                } else {
                    x[(row, j)]
                }
            })
        });

        let uniform = wgpu::BufferUsages::UNIFORM;
        // A buffer of `per_slot` words for each slot, and the host's values written slot by slot.
        let buffer = |role, per_slot: usize| self.resident(role, slot, n * per_slot * 4, storage());
        let write =
            |buffer: &wgpu::Buffer, per_slot: usize, values: &dyn Fn(&PointInputs) -> Vec<u8>| {
                for (k, input) in inputs.iter().enumerate() {
                    let bytes = values(input);
                    if !bytes.is_empty() {
                        self.device
                            .write_buffer(buffer, (k * per_slot * 4) as u64, &bytes);
                    }
                }
            };
        let u_buf = buffer("u", strides.points);
        // Z: with `gram` each slot's last M points (the kernel's A is read there), else a buffer
        // of its own.
        let (z_buf, z_at, z_stride) = if gram {
            (u_buf.clone(), t * d, strides.points)
        } else {
            (buffer("z", strides.z), 0, strides.z)
        };
        if upload_z {
            for (k, input) in inputs.iter().enumerate() {
                let at = ((z_at + k * z_stride) * 4) as u64;
                self.device.write_buffer(&z_buf, at, &rows_bytes(input.z));
            }
        }
        // The points are built on the device from the rows and the latent input (points.wgsl).
        let x_buf = buffer("x rows", strides.x);
        let y_buf = buffer("y", strides.y);
        if !rows_on_device {
            write(&x_buf, strides.x, &|input| rows_bytes(input.x));
            write(&y_buf, strides.y, &|input| {
                f32_bytes(input.y.iter().copied())
            });
        }
        // With the encoder on the device, room for the moments its passes write after ε.
        let latent_buf = buffer("latent", strides.latent);
        if latent_on_device {
            write(&latent_buf, strides.latent, &|input| {
                f32_bytes(input.latent.eps.iter().copied())
            });
        } else {
            write(&latent_buf, strides.latent, &|input| {
                latent_bytes(input.latent)
            });
        }
        let params = buffer("kernel parameters", strides.params);
        if !parameters_on_device {
            write(&params, strides.params, &|input| {
                host_parameters(input.kernel, Some((input.c, input.noise)))
            });
        }
        let slot_words: Vec<u8> = inputs
            .iter()
            .zip(words)
            .flat_map(|(input, &[first, second])| [first, input.latent.slot as u32, second, 0])
            .flat_map(u32::to_le_bytes)
            .collect();
        let slot_words = self.resident_written(
            Upload::EveryCall,
            "slot words",
            slot,
            &slot_words,
            storage(),
        );
        let kinds = self.resident_written(Upload::OnChange, "kinds", slot, &kinds, storage());
        let kdims = kernel_dims(
            kernel,
            (m, points),
            chunk,
            KernelStrides {
                a_at: z_at,
                a: z_stride,
                b: strides.points,
                params: strides.params,
                k: strides.k,
                rows: row_partials,
                cols: strides.points,
            },
        );
        let kdims = self.resident_written(Upload::OnChange, "kernel dims", slot, &kdims, uniform);
        let words_of =
            |values: &[usize]| -> Vec<u32> { values.iter().map(|&v| v as u32).collect() };
        let points_dims = words_of(&[
            t,
            d,
            samples,
            kernel.stationary.len(),
            strides.x,
            strides.latent,
            strides.y,
            strides.params,
            strides.points,
            t,
            2 * t,
            0,
        ]);
        let points_dims = self.resident_written(
            Upload::OnChange,
            "points dims",
            slot,
            &uniform_words(&points_dims),
            uniform,
        );
        // K, then K̄ in the same buffer; Ã; B = (S − I)Ã, then Ā in the same buffer.
        let k = buffer("k", strides.k);
        let a_w = buffer("whitened k", m * t);
        let b_w = buffer("(s - i) whitened k", m * t);
        // k_tt and y_T are written by the points pass (points.wgsl).
        let ktt_buf = buffer("ktt", t);
        let gy = buffer("gy", 2 * t);
        // c/φ² and g_var are read from each slot's parameters, right after the shape a.
        let column_dims = words_of(&[
            m,
            t,
            alpha_at(kernel) + 1,
            m * t,
            strides.operands[2],
            t,
            2 * t,
            t,
            strides.params,
            0,
            0,
            0,
        ]);
        let column_dims = self.resident_written(
            Upload::OnChange,
            "column dims",
            slot,
            &uniform_words(&column_dims),
            uniform,
        );
        let misfit = buffer("misfit", t);
        let dims_of = |role, product: &Product| {
            self.resident_written(Upload::OnChange, role, slot, &product.dims, uniform)
        };
        let left_dims = dims_of("m x m times m x t dims", &left);
        let second_dims = dims_of("m x m times whitened dims", &second);
        let back_dims = dims_of("m x m' times m x t dims", &back);
        let gy_dims = dims_of("gy dims", &small);
        let kkt_dims = dims_of("kkt dims", &kkt);
        let gy_sum_dims = self.resident_written(
            Upload::OnChange,
            "gy split sums",
            slot,
            &small.sum_dims(),
            uniform,
        );
        let kkt_sum_dims = self.resident_written(
            Upload::OnChange,
            "kkt split sums",
            slot,
            &kkt.sum_dims(),
            uniform,
        );
        // The compensated products' splits (head and tail planes of each), then their sums.
        let g_alpha_ky_parts = self.resident(
            "g_alpha ky partial sums",
            slot,
            small.output_words() * 4,
            storage(),
        );
        let p_parts = self.resident("p partial sums", slot, kkt.output_words() * 4, storage());
        // The float32 products' splits, when they have several (M large against T: their blocks
        // alone too few for a large GPU); their planes, then their sums in split order.
        let single_parts = |(role, sums), product: &Product| {
            product.reduced().then(|| {
                (
                    self.resident(role, slot, product.output_words() * 4, storage()),
                    self.resident_written(
                        Upload::OnChange,
                        sums,
                        slot,
                        &product.sum_dims(),
                        uniform,
                    ),
                )
            })
        };
        let left_parts = single_parts(("left partial sums", "left split sums"), &left);
        let second_parts = single_parts(("second partial sums", "second split sums"), &second);
        let back_parts = single_parts(("back partial sums", "back split sums"), &back);
        fn parts_of(
            parts: &Option<(wgpu::Buffer, wgpu::Buffer)>,
        ) -> Option<(&wgpu::Buffer, &wgpu::Buffer)> {
            parts.as_ref().map(|(p, s)| (p, s))
        }
        let g_alpha_ky = buffer("g_alpha ky", strides.g_alpha_ky);
        let p_buf = buffer("p", strides.p);
        let rows = buffer("rows", row_partials);
        let cols = buffer("cols", strides.points);
        let finish_dims = [
            (m * layout.width) as u32,
            layout.chunks as u32,
            t as u32,
            d as u32,
            1.0f32.to_bits(),
            row_partials as u32,
            strides.points as u32,
            t as u32,
            strides.finished as u32,
            u32::from(!gram),
            0,
            0,
        ];
        let finish_dims = self.resident_written(
            Upload::OnChange,
            "finish dims",
            slot,
            &uniform_words(&finish_dims),
            uniform,
        );
        let finished = buffer("finished", strides.finished);

        let pipelines = &self.pipelines;
        let kernel_common = [&kdims, &z_buf, &u_buf, &params, &kinds];
        let with = |extra: &[&wgpu::Buffer]| -> Vec<wgpu::Buffer> {
            kernel_common
                .iter()
                .chain(extra)
                .map(|&b| b.clone())
                .collect()
        };
        let InducingOperands {
            l_inv,
            s_minus_i,
            q_mean,
        } = operands;
        let front = vec![
            (
                &pipelines.evaluation_points,
                vec![
                    points_dims,
                    x_buf.clone(),
                    latent_buf.clone(),
                    y_buf.clone(),
                    params.clone(),
                    u_buf.clone(),
                    ktt_buf.clone(),
                    gy.clone(),
                    slot_words.clone(),
                ],
                build_groups,
            ),
            (&pipelines.kernel.cross, with(&[&k]), cross_groups),
        ];
        let mut middle = left.steps(
            pipelines,
            &left_dims,
            [l_inv, &k, &a_w],
            parts_of(&left_parts),
        );
        middle.extend(second.steps(
            pipelines,
            &second_dims,
            [s_minus_i, &a_w, &b_w],
            parts_of(&second_parts),
        ));
        middle.push((
            &pipelines.column_pass,
            vec![
                column_dims,
                a_w.clone(),
                b_w.clone(),
                q_mean.clone(),
                ktt_buf,
                gy.clone(),
                misfit.clone(),
                params.clone(),
            ],
            point_groups,
        ));
        middle.extend(small.steps(
            pipelines,
            &gy_dims,
            [&a_w, &gy, &g_alpha_ky],
            Some((&g_alpha_ky_parts, &gy_sum_dims)),
        ));
        middle.extend(kkt.steps(
            pipelines,
            &kkt_dims,
            [&a_w, &a_w, &p_buf],
            Some((&p_parts, &kkt_sum_dims)),
        ));
        middle.extend(back.steps(
            pipelines,
            &back_dims,
            [l_inv, &b_w, &k],
            parts_of(&back_parts),
        ));
        let back = vec![
            (
                &pipelines.kernel.backward_rows,
                with(&[&k, &rows]),
                rows_groups,
            ),
            (
                &pipelines.kernel.backward_cols,
                with(&[&k, &cols]),
                cols_groups,
            ),
            (
                &pipelines.finish_sums,
                vec![
                    finish_dims,
                    rows,
                    cols.clone(),
                    misfit,
                    finished.clone(),
                    slot_words.clone(),
                ],
                finish_groups,
            ),
        ];
        Ok(PredictionPlan {
            front,
            middle,
            back,
            layout,
            strides,
            u,
            z: (z_buf, z_at, z_stride),
            points: u_buf,
            k,
            p: p_buf,
            g_alpha_ky,
            finished,
            cols,
            latent: latent_buf,
            x: x_buf,
            y: y_buf,
            params,
            slot_words,
        })
    }
}

/// The device buffers the predictions read the M × M quantities from: L⁻¹ and S − I (M × M,
/// column-major float32) and q(v)'s mean m (M, in 2M words per slot: [m | α] on the resident
/// path).
pub(super) struct InducingOperands {
    pub l_inv: wgpu::Buffer,
    pub s_minus_i: wgpu::Buffer,
    pub q_mean: wgpu::Buffer,
}

/// Words from one slot to the next in the buffers of a batch of predictions
/// ([`Gpu::plan_predictions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PlanStrides {
    /// Z (M × D), the rows (b × D), the targets (b), the latent input [ε | (μ, √Σ)].
    pub z: usize,
    pub x: usize,
    pub y: usize,
    pub latent: usize,
    /// The kernel's parameters ([`parameter_words`]).
    pub params: usize,
    /// The points ([U; Z] × D) and their gradient ∂U.
    pub points: usize,
    /// K' (M × (T + M), or K M × T).
    pub k: usize,
    /// P's and [Ãg, Ãy]'s heads and tails (2M², 4M).
    pub p: usize,
    pub g_alpha_ky: usize,
    /// `finish.wgsl`'s output.
    pub finished: usize,
    /// L⁻¹, S − I and m in [`InducingOperands`].
    pub operands: [usize; 3],
}

/// A batch's prediction passes ([`Gpu::plan_predictions`]) in their three groups, with the
/// buffers a caller reads or writes between them (each slot's values a stride after the last's).
pub(super) struct PredictionPlan<'g> {
    /// The evaluation points, then the kernel matrix K (or K').
    pub front: Vec<Step<'g>>,
    /// The products with L⁻¹ and q(v), the column pass, [Ãg, Ãy], P, and K̄_Zt = L⁻ᵀĀ.
    pub middle: Vec<Step<'g>>,
    /// The kernel's adjoint and the sums finished on the device.
    pub back: Vec<Step<'g>>,
    pub layout: ReadbackLayout,
    pub strides: PlanStrides,
    /// The evaluation points (T × D) in f64, for k_tt's adjoint on the host (the host-half path's
    /// plans only: None with `gram`).
    pub u: Option<DMatrix<f64>>,
    /// Z (M × D, row-major per slot): its buffer, slot 0's first word and the words per slot
    /// (with `gram` the points buffer, Z each slot's last M rows).
    z: (wgpu::Buffer, usize, usize),
    /// The points ([U; Z] with `gram`).
    pub points: wgpu::Buffer,
    /// K (M × T, or K' M × (T + M)), then K̄ in the same buffer.
    pub k: wgpu::Buffer,
    /// P = ÃÃᵀ: head and tail planes of M² (lower blocks).
    pub p: wgpu::Buffer,
    /// [Ãg, Ãy] (M × 2): head and tail planes of 2M.
    pub g_alpha_ky: wgpu::Buffer,
    /// `finish.wgsl`'s output.
    pub finished: wgpu::Buffer,
    /// ∂ of each point (rows of [U; Z] × D, row-major).
    pub cols: wgpu::Buffer,
    /// The latent input as points.wgsl reads it ([`latent_bytes`]).
    pub latent: wgpu::Buffer,
    /// The minibatch's rows (b × D, row-major) and targets (b).
    pub x: wgpu::Buffer,
    pub y: wgpu::Buffer,
    /// The kernel's parameters with c/φ² and g_var ([`parameter_words`] per slot: the layout
    /// of `held_gradients.wgsl`'s DERIVED, which a device that steps the hyperparameters
    /// writes here).
    pub params: wgpu::Buffer,
    /// Per slot four words: the caller's first (the held passes' Adam step size), the latent
    /// input's column, the caller's second (φ²'s floor), 0.
    pub slot_words: wgpu::Buffer,
}

impl<'g> PredictionPlan<'g> {
    /// Every step in order, with nothing between the groups.
    fn steps(&self) -> impl Iterator<Item = &Step<'g>> {
        self.front.iter().chain(&self.middle).chain(&self.back)
    }

    /// Where slot `k`'s Z (M × D, row-major) goes: a buffer and its byte (with `gram`, after
    /// the slot's T evaluation points, where the kernel passes read it as the last M points).
    pub fn z_place(&self, k: usize) -> (&wgpu::Buffer, u64) {
        let (buffer, first, stride) = &self.z;
        (buffer, ((first + k * stride) * 4) as u64)
    }
}

/// A request's [`Predictions`] from its read-back values, with k_tt's adjoint added on the host.
fn decode(request: &PredictionRequest, pending: &Pending, values: &[f32]) -> Predictions {
    let ReadbackLayout { m, t, width, .. } = pending.layout;
    let kernel = request.input.kernel;
    let slot = request.latent.slot;
    let (samples, b) = request.draws.shape();
    let [n_small, n_kkt, _] = pending.layout.parts();
    let (small, rest) = values.split_at(n_small);
    let (p_values, finished) = rest.split_at(n_kkt);
    let misfit = f64::from(finished[0]) + f64::from(finished[1]);
    let (heads, rest) = finished[2..].split_at(m * width);
    let (tails, latent_grad) = rest.split_at(m * width);
    let rows: Vec<f64> = heads
        .iter()
        .zip(tails)
        .map(|(&h, &l)| f64::from(h) + f64::from(l))
        .collect();

    let small = gemm::combine(small, 2 * m, Accumulation::Compensated);
    let mut p = DMatrix::from_vec(
        m,
        m,
        gemm::combine(p_values, m * m, Accumulation::Compensated),
    );
    gemm::mirror_lower(&mut p);
    let (mut kernel_grad, z_grad) = decode_rows(kernel, &rows, m);
    // k_tt's adjoint: ∂L̂/∂k_tt = g_var for every point.
    let g_var = -request.c / (2.0 * request.input.noise);
    let (g_diag, d_u_diag) = kernel.diag_backward(&pending.u, &DVector::from_element(t, g_var));
    kernel_grad.add_assign(&g_diag);
    let draws = DMatrix::from_fn(samples, b, |s, n| {
        let p = n * samples + s;
        f64::from(latent_grad[p]) + d_u_diag[(p, slot)]
    });
    Predictions {
        misfit,
        products: Products::Whitened {
            g_alpha: DVector::from_column_slice(&small[..m]),
            p,
            ky: DVector::from_column_slice(&small[m..]),
        },
        kernel: kernel_grad,
        z: z_grad,
        draws: Some(draws),
    }
}
