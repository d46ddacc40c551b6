//! The GPU's device side: one [`Gpu`] (a wgpu adapter, device and queue) and the WGSL compute
//! kernels that run on it, each tested against the CPU f64 reference. It knows the model layer
//! (`gp`: kernels, the bound's prediction requests, Ψ2 factors) and nothing of the jobs that use
//! it; `super::gpu_executor` turns a batch of jobs into its submissions. Natively wgpu finds
//! Vulkan (Mesa's lavapipe where there is no GPU, which is how the tests run it) or GL; in the
//! browser it is the page's WebGPU, opened and read back asynchronously ([`Gpu::open_async`],
//! [`SubmittedPredictions::finish`]) because a Web Worker must not block.
//!
//! Owns: acquiring a device ([`Gpu::open`]), the typed [`GpuError`], the kernels — the kernel
//! matrix K(A, B) and its adjoint ([`Gpu::cross`], [`Gpu::cross_backward`]; WGSL in
//! `kernel_shapes.wgsl` (the shapes κ_c, the twin of `gp::kernel::scalar`), `kernel_common.wgsl`,
//! `kernel_cross.wgsl`, `kernel_backward.wgsl`), batched tiled products in
//! float32 or compensated ([`Gpu::gemm`], [`Gpu::syrk`], `gemm.wgsl`), the uncollapsed bound's
//! predictions ([`Gpu::svgp_predictions`], [`Gpu::bounds_and_gradients`], `predictions.wgsl`),
//! the same evaluation with q(v), Z, q(w)'s encoder (with their Adam moments) and the M × M
//! algebra held on the device, which is what the engine runs ([`Gpu::submit_resident`],
//! [`Gpu::hold_state`]; `inducing.wgsl`, `cholesky.wgsl`'s double-float factorisations and
//! natural step, `encoder.wgsl`'s forward and backward passes, `held_gradients.wgsl`'s finished
//! gradients and the Adam step of Z and the encoder), Ψ2's sums
//! ([`Gpu::submit_psi2`], `psi.wgsl`), and the traffic counters ([`Gpu::traffic`]). Everything on the GPU is float32
//! (or two float32 words); the host converts from and to the engine's f64 at the boundary and
//! finishes sums over many terms in f64. A lost device or a driver error is recorded, never a
//! panic ([`Gpu::failure`]).

mod cholesky;
mod counters;
mod gemm;
mod held_data;
mod held_encoder;
mod kernel;
mod predictions;
mod psi;
mod resident;
mod submission;

#[cfg(not(target_arch = "wasm32"))]
pub use cholesky::DeviceFactor;
pub use counters::{DeviceTraffic, GpuReport, SteadyState};
pub use gemm::{Accumulation, Batched, Op, Spacing};
pub use predictions::SubmittedPredictions;
#[cfg(not(target_arch = "wasm32"))]
pub use psi::Psi2OnGpu;
pub use psi::{Psi2Factors, Psi2Request, Psi2Sums, SubmittedPsi2};
pub use resident::{
    HeldSlot, ParameterStep, ResidentEvaluation, ResidentRequest, StateChange, StateShape,
    SubmittedResident, SYNC_BUDGET_BYTES, SYNC_SECONDS,
};

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::gp::device::DeviceError;
use futures_channel::oneshot;

/// The bindings `inducing.wgsl`'s and `held_gradients.wgsl`'s passes share.
const FIVE_BUFFERS: &str = include_str!("five_buffers.wgsl");

/// softplus and its derivative (`positive.wgsl`), for the shaders that step constrained values.
const POSITIVE: &str = include_str!("positive.wgsl");

/// Why a GPU step could not run. Every variant carries what a user needs to act on it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GpuError {
    /// No adapter at all: no Vulkan or GL driver (natively, installing Mesa's
    /// `mesa-vulkan-drivers` gives a software one).
    #[error("no GPU adapter found (natively, install a Vulkan driver such as Mesa's lavapipe, package mesa-vulkan-drivers): {0}")]
    NoAdapter(String),
    /// The adapter refused to give a device.
    #[error("the GPU adapter {adapter} refused a device: {reason}")]
    NoDevice { adapter: String, reason: String },
    /// A problem too large for one dispatch or buffer of this device.
    #[error("{what} needs {needed}, more than this GPU allows ({limit})")]
    TooLarge {
        what: &'static str,
        needed: u64,
        limit: u64,
    },
    /// Reading a result back failed (a lost device, a failed mapping).
    #[error("reading the result back from the GPU failed: {0}")]
    Readback(String),
    /// The device is gone (a driver reset, a removed card, [`Gpu::lose_device`]) or reported an
    /// error it cannot continue from; nothing more runs on it.
    #[error("the GPU device was lost: {0}")]
    Lost(String),
}

/// The model layer sees a device's failure as its message ([`DeviceError::Failed`]): it cannot
/// name this layer's type.
impl From<&GpuError> for DeviceError {
    fn from(e: &GpuError) -> Self {
        DeviceError::Failed(e.to_string())
    }
}

/// A GPU device ready for Occam's kernels.
pub struct Gpu {
    /// The device and queue, every costly call counted ([`Gpu::traffic`]).
    device: counters::CountedDevice,
    adapter: String,
    pipelines: Pipelines,
    /// Buffers kept on the device between calls, by (role, job slot): a call of the same shape
    /// writes into them instead of allocating.
    resident: Mutex<HashMap<(&'static str, usize), wgpu::Buffer>>,
    /// Bind groups kept between calls, by (dispatch, step, job slot), with the pipeline and
    /// buffers they bind: a call that binds the same resident buffers creates nothing.
    bound: Mutex<HashMap<BindKey, BoundGroup>>,
    /// What each constant resident buffer ([`Gpu::resident_written`] with [`Upload::OnChange`])
    /// was last given, with the buffer it went to: written again only when either changes.
    constants: Mutex<HashMap<(&'static str, usize), WrittenConstant>>,
    /// Which data the device holds for the resident evaluations' minibatches
    /// ([`Gpu::hold_data`]).
    held_data: Mutex<Option<held_data::DataFingerprint>>,
    /// Which resident slot holds each held q(v).
    posteriors: Mutex<resident::PosteriorSlots>,
    /// Why the device stopped, once it has: set by wgpu's device-lost callback and by errors no
    /// error scope caught (which would otherwise panic).
    failure: Arc<Mutex<Option<String>>>,
}

/// When [`Gpu::resident_written`] uploads a buffer's contents (named apart from `std::io::Write`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upload {
    /// Every call: contents that change from call to call.
    EveryCall,
    /// Only when they differ from the last ones written there (a pass's shape).
    OnChange,
}

/// `usage` with the queue's writes allowed.
fn writable(usage: wgpu::BufferUsages) -> wgpu::BufferUsages {
    usage | wgpu::BufferUsages::COPY_DST
}

/// A constant resident buffer and the contents last written to it.
type WrittenConstant = (wgpu::Buffer, Vec<u8>);

/// The compiled kernels, one pipeline per WGSL entry point.
struct Pipelines {
    kernel: kernel::KernelPipelines,
    gemm: wgpu::ComputePipeline,
    gemm_wide: wgpu::ComputePipeline,
    gemm_compensated: wgpu::ComputePipeline,
    split_sum: wgpu::ComputePipeline,
    split_sum_single: wgpu::ComputePipeline,
    column_pass: wgpu::ComputePipeline,
    finish_sums: wgpu::ComputePipeline,
    evaluation_points: wgpu::ComputePipeline,
    psi_pairs: wgpu::ComputePipeline,
    psi_rows: wgpu::ComputePipeline,
    /// `cholesky.wgsl`'s passes (the factorisations and the natural step).
    cholesky: cholesky::CholeskyPipelines,
    /// `inducing.wgsl`'s passes, in `resident::Glue`'s order.
    inducing: Vec<wgpu::ComputePipeline>,
    /// `held_gradients.wgsl`'s `kernel_sums` and `input_gradients`.
    held_gradients: Vec<wgpu::ComputePipeline>,
    /// `encoder.wgsl`'s passes, in `held_encoder::EncoderPass`'s order.
    encoder: Vec<wgpu::ComputePipeline>,
    /// `gather.wgsl`: the minibatch from the held data.
    gather: wgpu::ComputePipeline,
}

impl fmt::Debug for Gpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gpu")
            .field("adapter", &self.adapter)
            .finish()
    }
}

impl Gpu {
    /// Opens the first adapter wgpu offers natively (the backends WGPU_BACKEND names, else Vulkan,
    /// then GL), with the default limits, and builds the kernels' pipelines. Blocks until the
    /// device is ready.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open() -> Result<Self, GpuError> {
        pollster::block_on(Self::open_async())
    }

    /// Opens the first adapter wgpu offers (natively as [`Gpu::open`]; in the browser, the
    /// page's WebGPU adapter), with the default limits, and builds the kernels' pipelines.
    pub async fn open_async() -> Result<Self, GpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        let descriptor = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        #[cfg(target_arch = "wasm32")]
        let descriptor = wgpu::InstanceDescriptor::new_without_display_handle();
        let instance = wgpu::Instance::new(descriptor);
        let adapter = instance
            .request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        // Browsers hide the adapter's name from wgpu (the page describes it from JavaScript).
        let name = if info.name.is_empty() {
            format!("{:?}", info.backend)
        } else {
            format!("{} ({:?})", info.name, info.backend)
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("occam"),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::NoDevice {
                adapter: name.clone(),
                reason: e.to_string(),
            })?;
        let failure = Arc::new(Mutex::new(None::<String>));
        let record = |failure: &Arc<Mutex<Option<String>>>, why: String| {
            if let Ok(mut slot) = failure.lock() {
                slot.get_or_insert(why);
            }
        };
        {
            let failure = failure.clone();
            device.set_device_lost_callback(move |reason, message| {
                record(&failure, format!("{reason:?}: {message}"));
            });
        }
        {
            let failure = failure.clone();
            device.on_uncaptured_error(Arc::new(move |error: wgpu::Error| {
                record(&failure, error.to_string());
            }));
        }
        let [gemm, gemm_wide, gemm_compensated, split_sum, split_sum_single] =
            gemm::pipelines(&device);
        let [psi_pairs, psi_rows] = psi::pipelines(&device);
        let cholesky = cholesky::CholeskyPipelines::new(&device);
        let pipelines = Pipelines {
            kernel: kernel::KernelPipelines::new(&device),
            gemm,
            gemm_wide,
            gemm_compensated,
            split_sum,
            split_sum_single,
            column_pass: predictions::pipeline(&device),
            finish_sums: predictions::finish_pipeline(&device),
            evaluation_points: predictions::points_pipeline(&device),
            psi_pairs,
            psi_rows,
            cholesky,
            inducing: resident::pipelines(&device),
            held_gradients: resident::gradient_pipelines(&device),
            encoder: held_encoder::pipelines(&device),
            gather: held_data::pipeline(&device),
        };
        Ok(Gpu {
            device: counters::CountedDevice::new(device, queue),
            adapter: name,
            pipelines,
            resident: Mutex::new(HashMap::new()),
            bound: Mutex::new(HashMap::new()),
            constants: Mutex::new(HashMap::new()),
            held_data: Mutex::new(None),
            posteriors: Mutex::new(resident::PosteriorSlots::default()),
            failure,
        })
    }

    /// What has crossed between host and device since it opened (read twice and subtract for
    /// a span of work).
    pub fn traffic(&self) -> DeviceTraffic {
        self.device.traffic()
    }

    /// Why the device can no longer be used, if it cannot.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    /// Test hook: destroys the device as a driver reset would, so that every later step fails
    /// with [`GpuError::Lost`] (how the CPU fallback is tested without pulling a card).
    pub fn lose_device(&self) {
        self.device.destroy();
        if let Ok(mut slot) = self.failure.lock() {
            slot.get_or_insert_with(|| "destroyed by Gpu::lose_device".into());
        }
    }

    /// An error if the device is gone.
    fn check_alive(&self) -> Result<(), GpuError> {
        match self.failure() {
            Some(why) => Err(GpuError::Lost(why)),
            None => Ok(()),
        }
    }

    /// The resident buffer for `role` of job `slot`, at least `bytes` long (and 4), created or
    /// grown as needed.
    fn resident(
        &self,
        role: &'static str,
        slot: usize,
        bytes: usize,
        usage: wgpu::BufferUsages,
    ) -> wgpu::Buffer {
        let size = (bytes.max(4) as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let mut buffers = self
            .resident
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match buffers.get(&(role, slot)) {
            Some(b) if b.size() >= size && b.usage() == usage => b.clone(),
            _ => {
                let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(role),
                    size,
                    usage,
                    mapped_at_creation: false,
                });
                buffers.insert((role, slot), buffer.clone());
                buffer
            }
        }
    }

    /// A resident buffer for `role` of `slot` holding `contents`, written through the queue as
    /// `upload` says: every call, or, for contents that rarely change (a pass's shape), only when
    /// they differ from the last ones written to that buffer, so that a steady run uploads
    /// nothing for them.
    fn resident_written(
        &self,
        upload: Upload,
        role: &'static str,
        slot: usize,
        contents: &[u8],
        usage: wgpu::BufferUsages,
    ) -> wgpu::Buffer {
        let buffer = self.resident(role, slot, contents.len(), writable(usage));
        if contents.is_empty() {
            return buffer;
        }
        match upload {
            Upload::EveryCall => self.device.write_buffer(&buffer, 0, contents),
            Upload::OnChange => {
                let mut constants = self
                    .constants
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let same = constants
                    .get(&(role, slot))
                    .is_some_and(|(b, c)| *b == buffer && c.as_slice() == contents);
                if !same {
                    self.device.write_buffer(&buffer, 0, contents);
                    constants.insert((role, slot), (buffer.clone(), contents.to_vec()));
                }
            }
        }
        buffer
    }

    /// A bind group of `buffers` at bindings 0, 1, … of `pipeline`'s group 0.
    fn bind(&self, pipeline: &wgpu::ComputePipeline, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
        let entries: Vec<wgpu::BindGroupEntry> = buffers
            .iter()
            .enumerate()
            .map(|(i, buffer)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: buffer.as_entire_binding(),
            })
            .collect();
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: None,
            layout: &pipeline.get_bind_group_layout(0),
            entries: &entries,
        })
    }

    /// The bind group of `buffers` for `pipeline`, kept under `key`: made again only when the
    /// pipeline or a buffer differs from the last call with that key (a resident buffer grown
    /// for a larger shape is a new buffer).
    fn bind_kept(
        &self,
        key: BindKey,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
    ) -> wgpu::BindGroup {
        let mut kept = self
            .bound
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(group) = kept.get(&key) {
            let same = group.pipeline == *pipeline
                && group.buffers.len() == buffers.len()
                && group.buffers.iter().zip(buffers).all(|(a, &b)| a == b);
            if same {
                return group.bind_group.clone();
            }
        }
        let bind_group = self.bind(pipeline, buffers);
        kept.insert(
            key,
            BoundGroup {
                pipeline: pipeline.clone(),
                buffers: buffers.iter().map(|&b| b.clone()).collect(),
                bind_group: bind_group.clone(),
            },
        );
        bind_group
    }

    /// A storage buffer of `bytes` for a kernel's output, and the mappable buffer it is copied to
    /// for reading.
    fn output_and_readback(&self, label: &str, bytes: u64) -> (wgpu::Buffer, wgpu::Buffer) {
        let buffer = |usage| {
            self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size: bytes,
                usage,
                mapped_at_creation: false,
            })
        };
        (
            buffer(wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC),
            buffer(wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST),
        )
    }

    /// Records one dispatch of `pipeline` over `groups` workgroups with `buffers` bound at
    /// 0, 1, … of group 0.
    fn record_pass(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        label: &str,
        pipeline: &wgpu::ComputePipeline,
        buffers: &[&wgpu::Buffer],
        (x, y, z): (u32, u32, u32),
    ) {
        let bind_group = self.bind(pipeline, buffers);
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(label),
            timestamp_writes: None,
        });
        pass.set_pipeline(pipeline);
        pass.set_bind_group(0, &bind_group, &[]);
        pass.dispatch_workgroups(x, y, z);
        self.device.note_dispatches(1);
    }

    /// Opens the error scopes of one submission (invalid use, out of memory); close them right
    /// after submitting, so that no later work lands in them.
    fn open_scopes(&self) -> OpenScopes {
        OpenScopes {
            invalid: self
                .device
                .setup()
                .push_error_scope(wgpu::ErrorFilter::Validation),
            oom: self
                .device
                .setup()
                .push_error_scope(wgpu::ErrorFilter::OutOfMemory),
        }
    }

    /// The adapter's name and API, e.g. "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)".
    pub fn adapter(&self) -> &str {
        &self.adapter
    }

    /// A buffer holding `contents` (one zero word when empty: WGSL arrays cannot be empty),
    /// written through the queue: unlike a buffer mapped at creation, this cannot panic when the
    /// device has gone (the failure surfaces at the next check instead).
    fn upload(&self, label: &str, contents: &[u8], usage: wgpu::BufferUsages) -> wgpu::Buffer {
        let contents = if contents.is_empty() {
            &[0u8; 4][..]
        } else {
            contents
        };
        let size = (contents.len() as u64).next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        let buffer = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: usage | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut padded = contents.to_vec();
        padded.resize(size as usize, 0);
        self.device.write_buffer(&buffer, 0, &padded);
        buffer
    }

    /// Refuses an output larger than one storage binding of this device.
    fn check_binding(&self, what: &'static str, bytes: u64) -> Result<(), GpuError> {
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(GpuError::TooLarge {
                what,
                needed: bytes,
                limit,
            });
        }
        Ok(())
    }

    /// Refuses a dispatch with more workgroups along a side than this device allows.
    fn check_groups(&self, what: &'static str, (x, y, z): (u32, u32, u32)) -> Result<(), GpuError> {
        let limit = self
            .device
            .setup()
            .limits()
            .max_compute_workgroups_per_dimension;
        let needed = x.max(y).max(z);
        if needed > limit {
            return Err(GpuError::TooLarge {
                what,
                needed: u64::from(needed),
                limit: u64::from(limit),
            });
        }
        Ok(())
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// Runs `passes` (each a pipeline over its workgroups) in order with `inputs` bound at 0, 1, …
    /// of group 0 and a fresh output buffer of `out_bytes` after them, and reads the output back
    /// as f32 values.
    fn run_and_read(
        &self,
        label: &str,
        passes: &[(&wgpu::ComputePipeline, (u32, u32, u32))],
        inputs: &[wgpu::Buffer],
        out_bytes: u64,
    ) -> Result<Vec<f32>, GpuError> {
        self.check_alive()?;
        let (output, readback) = self.output_and_readback(label, out_bytes);
        let mut buffers: Vec<&wgpu::Buffer> = inputs.iter().collect();
        buffers.push(&output);
        let mut encoder = self.device.create_command_encoder(label);
        for (pipeline, groups) in passes {
            self.record_pass(&mut encoder, label, pipeline, &buffers, *groups);
        }
        self.device
            .copy(&mut encoder, (&output, 0), (&readback, 0), out_bytes);
        let submission = self.device.submit(encoder);
        self.read_back(&readback, submission)
    }

    #[cfg(not(target_arch = "wasm32"))]
    /// Waits for `submission` and reads the f32 values of `buffer` (mappable for reading).
    fn read_back(
        &self,
        buffer: &wgpu::Buffer,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<f32>, GpuError> {
        let bytes = buffer.size() as usize;
        let mut all = self.read_back_all(&[(buffer, bytes)], submission)?;
        Ok(all.pop().unwrap_or_default())
    }

    /// Waits for `submission` (at most [`READBACK_TIMEOUT`]) and reads the first `bytes` of each
    /// buffer (mappable for reading) as f32 values: one wait for all of them.
    #[cfg(not(target_arch = "wasm32"))]
    fn read_back_all(
        &self,
        buffers: &[(&wgpu::Buffer, usize)],
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<Vec<f32>>, GpuError> {
        let mapping = self.request_mapping(buffers);
        self.wait(submission)?;
        pollster::block_on(self.read_mapping(mapping))
    }

    /// Blocks until `submission` has finished (at most [`READBACK_TIMEOUT`]).
    #[cfg(not(target_arch = "wasm32"))]
    fn wait(&self, submission: wgpu::SubmissionIndex) -> Result<(), GpuError> {
        self.device
            .wait(submission, READBACK_TIMEOUT)
            .map_err(|e| self.lost_or(GpuError::Readback(e.to_string())))
    }

    /// [`GpuError::Lost`] when the device has gone, else `other`.
    fn lost_or(&self, other: GpuError) -> GpuError {
        match self.failure() {
            Some(why) => GpuError::Lost(why),
            None => other,
        }
    }

    /// Asks for the first `bytes` of each buffer to be mapped for reading once the work submitted
    /// before has finished; [`Gpu::read_mapping`] reads them.
    fn request_mapping<'a>(&self, buffers: &[(&'a wgpu::Buffer, usize)]) -> Mapping<'a> {
        let waits = buffers
            .iter()
            .map(|&(buffer, bytes)| {
                let (sender, receiver) = oneshot::channel();
                if bytes > 0 {
                    self.device.note_mapping();
                    buffer
                        .slice(..bytes as u64)
                        .map_async(wgpu::MapMode::Read, move |result| {
                            // If the reader has gone there is nobody to tell.
                            let _ = sender.send(result);
                        });
                } else {
                    let _ = sender.send(Ok(()));
                }
                receiver
            })
            .collect();
        Mapping {
            buffers: buffers.to_vec(),
            waits,
        }
    }

    /// The f32 values of a mapping, once each buffer is mapped (natively after [`Gpu::wait`];
    /// in the browser the mapping resolves by itself).
    async fn read_mapping(&self, mapping: Mapping<'_>) -> Result<Vec<Vec<f32>>, GpuError> {
        let lost = |e: String| self.lost_or(GpuError::Readback(e));
        let mut out = Vec::with_capacity(mapping.buffers.len());
        for ((buffer, bytes), wait) in mapping.buffers.into_iter().zip(mapping.waits) {
            wait.await
                .map_err(|_| lost("the mapping was cancelled".into()))?
                .map_err(|e| lost(e.to_string()))?;
            if bytes == 0 {
                out.push(Vec::new());
                continue;
            }
            let slice = buffer.slice(..bytes as u64);
            let values = {
                let view = slice.get_mapped_range().map_err(|e| lost(e.to_string()))?;
                self.device.note_read(bytes);
                view.chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect()
            };
            buffer.unmap();
            out.push(values);
        }
        self.check_alive()?;
        Ok(out)
    }
}

/// Which kept bind group: (dispatch, step within it, job slot).
type BindKey = (&'static str, usize, usize);

/// A kept bind group with what it binds ([`Gpu::bind_kept`]).
struct BoundGroup {
    pipeline: wgpu::ComputePipeline,
    buffers: Vec<wgpu::Buffer>,
    bind_group: wgpu::BindGroup,
}

/// The error scopes around one submission ([`Gpu::open_scopes`]).
struct OpenScopes {
    invalid: wgpu::ErrorScopeGuard,
    oom: wgpu::ErrorScopeGuard,
}

/// What an error scope caught, once the device has checked its work.
type ScopeVerdict = std::pin::Pin<Box<dyn std::future::Future<Output = Option<wgpu::Error>>>>;

/// The closed scopes' verdicts, to be awaited once the submission has been checked.
struct ScopeVerdicts(Vec<(&'static str, ScopeVerdict)>);

impl OpenScopes {
    /// Pops both scopes (innermost first, as wgpu requires) without waiting for their verdicts.
    fn close(self) -> ScopeVerdicts {
        ScopeVerdicts(vec![
            ("out of memory", Box::pin(self.oom.pop())),
            ("invalid use", Box::pin(self.invalid.pop())),
        ])
    }
}

impl ScopeVerdicts {
    /// [`GpuError::Lost`] with the device's message when a scope caught an error.
    async fn check(self) -> Result<(), GpuError> {
        for (what, verdict) in self.0 {
            if let Some(error) = verdict.await {
                return Err(GpuError::Lost(format!("{what}: {error}")));
            }
        }
        Ok(())
    }
}

/// Buffers asked to be mapped for reading, with the signal of each mapping.
struct Mapping<'a> {
    buffers: Vec<(&'a wgpu::Buffer, usize)>,
    waits: Vec<oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>>,
}

/// The longest wait for one submission's results before the device counts as hung: far beyond
/// any batch of the paper's sizes on a software rasteriser.
#[cfg(not(target_arch = "wasm32"))]
const READBACK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(300);

/// Double-float arithmetic in WGSL, prepended to the shaders that use it (each defines `one()`).
const DOUBLE_FLOAT: &str = include_str!("double_float.wgsl");

/// A compute pipeline for `entry` of the WGSL `source`, its bind group layout taken from the shader.
fn compute_pipeline(
    device: &wgpu::Device,
    label: &str,
    source: &str,
    entry: &str,
) -> wgpu::ComputePipeline {
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some(label),
        layout: None,
        module: &module,
        entry_point: Some(entry),
        compilation_options: Default::default(),
        cache: None,
    })
}

/// Little-endian bytes of f64 values rounded to f32 (what WGSL's `array<f32>` reads).
fn f32_bytes(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values
        .into_iter()
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect()
}

/// Little-endian bytes of a uniform block of u32 words, padded to a multiple of 16 bytes.
fn uniform_words(words: &[u32]) -> Vec<u8> {
    let mut bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    bytes.resize(bytes.len().next_multiple_of(16), 0);
    bytes
}
