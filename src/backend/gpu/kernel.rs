//! The kernel matrix K(A, B) on the GPU (`kernel.wgsl`, one invocation per entry), against the
//! CPU reference [`Kernel::cross`]: K_pq = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²(a_p, b_q)).

use nalgebra::DMatrix;
use wgpu::util::DeviceExt;

use super::{Gpu, GpuError};
use crate::gp::kernel::{Kernel, StationaryKind};

/// Invocations per workgroup side (`@workgroup_size(8, 8)` in the shader).
const WORKGROUP_SIDE: u32 = 8;

/// The compiled kernels.
pub(super) struct Pipelines {
    cross: wgpu::ComputePipeline,
}

impl Pipelines {
    pub(super) fn new(device: &wgpu::Device) -> Self {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("kernel.wgsl"),
            source: wgpu::ShaderSource::Wgsl(include_str!("kernel.wgsl").into()),
        });
        let cross = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("kernel cross"),
            layout: None,
            module: &module,
            entry_point: Some("cross"),
            compilation_options: Default::default(),
            cache: None,
        });
        Pipelines { cross }
    }
}

/// The shader's code for each stationary kind.
fn kind_code(kind: StationaryKind) -> u32 {
    match kind {
        StationaryKind::SquaredExponential => 0,
        StationaryKind::Matern12 => 1,
        StationaryKind::Matern32 => 2,
        StationaryKind::RationalQuadratic => 3,
    }
}

/// Little-endian bytes of f32 values (what WGSL's `array<f32>` reads).
fn f32_bytes(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values
        .into_iter()
        .flat_map(|v| (v as f32).to_le_bytes())
        .collect()
}

/// A matrix's rows, row-major, as f32 bytes (the shader reads point p at p·D).
fn rows_bytes(points: &DMatrix<f64>) -> Vec<u8> {
    f32_bytes((0..points.nrows()).flat_map(|p| points.row(p).iter().copied().collect::<Vec<_>>()))
}

impl Gpu {
    /// K(A, B) (`a` n × D, `b` m × D) computed in float32 on the GPU, returned as f64: the same
    /// matrix as [`Kernel::cross`], to within float32 rounding.
    ///
    /// Panics unless both point sets have the kernel's D columns (as [`Kernel::cross`] does).
    pub fn cross(
        &self,
        kernel: &Kernel,
        a: &DMatrix<f64>,
        b: &DMatrix<f64>,
    ) -> Result<DMatrix<f64>, GpuError> {
        let d = kernel.dim();
        assert_eq!(
            a.ncols(),
            d,
            "points must have one column per kernel dimension"
        );
        assert_eq!(
            b.ncols(),
            d,
            "points must have one column per kernel dimension"
        );
        let (n, m) = (a.nrows(), b.nrows());
        if n == 0 || m == 0 {
            return Ok(DMatrix::zeros(n, m));
        }
        let out_bytes = (n * m * 4) as u64;
        let limits = self.device.limits();
        let max_binding = limits.max_storage_buffer_binding_size;
        if out_bytes > max_binding {
            return Err(GpuError::TooLarge {
                what: "the kernel matrix",
                needed: out_bytes,
                limit: max_binding,
            });
        }
        let groups = |rows: usize| (rows as u32).div_ceil(WORKGROUP_SIDE);
        let max_groups = limits.max_compute_workgroups_per_dimension;
        if groups(n) > max_groups || groups(m) > max_groups {
            return Err(GpuError::TooLarge {
                what: "the kernel matrix's dispatch",
                needed: u64::from(groups(n).max(groups(m))),
                limit: u64::from(max_groups),
            });
        }

        // The masks applied here (θ̃ = E ∘ θ), so the shader needs no mask.
        let masked = |theta: &[f64]| -> Vec<f64> {
            theta.iter().zip(&kernel.mask).map(|(t, e)| t * e).collect()
        };
        let linear = kernel
            .linear
            .as_deref()
            .map_or_else(|| vec![0.0; d], &masked);
        let parts: Vec<f64> = kernel
            .stationary
            .iter()
            .flat_map(|part| std::iter::once(part.variance).chain(masked(&part.precision)))
            .collect();
        let kinds: Vec<u8> = kernel
            .stationary
            .iter()
            .flat_map(|part| kind_code(part.kind).to_le_bytes())
            .collect();
        let mut dims = Vec::with_capacity(32);
        for v in [n as u32, m as u32, d as u32, kernel.stationary.len() as u32] {
            dims.extend(v.to_le_bytes());
        }
        dims.extend((kernel.rq_alpha as f32).to_le_bytes());
        dims.extend([0u8; 12]);

        let device = &self.device;
        let init = |label: &str, contents: &[u8], usage: wgpu::BufferUsages| {
            // WGSL arrays cannot be empty: bind at least one element.
            let padded;
            let contents = if contents.is_empty() {
                padded = [0u8; 4];
                &padded[..]
            } else {
                contents
            };
            device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents,
                usage,
            })
        };
        let storage = wgpu::BufferUsages::STORAGE;
        let dims_buf = init("dims", &dims, wgpu::BufferUsages::UNIFORM);
        let a_buf = init("a", &rows_bytes(a), storage);
        let b_buf = init("b", &rows_bytes(b), storage);
        let linear_buf = init("linear", &f32_bytes(linear), storage);
        let parts_buf = init("parts", &f32_bytes(parts), storage);
        let kinds_buf = init("kinds", &kinds, storage);
        let k_buf = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("k"),
            size: out_bytes,
            usage: storage | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let readback = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("k readback"),
            size: out_bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let pipeline = &self.kernels.cross;
        let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("kernel cross"),
            layout: &pipeline.get_bind_group_layout(0),
            entries: &[
                &dims_buf,
                &a_buf,
                &b_buf,
                &linear_buf,
                &parts_buf,
                &kinds_buf,
                &k_buf,
            ]
            .iter()
            .enumerate()
            .map(|(i, buf)| wgpu::BindGroupEntry {
                binding: i as u32,
                resource: buf.as_entire_binding(),
            })
            .collect::<Vec<_>>(),
        });
        let mut encoder = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("kernel cross"),
        });
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("kernel cross"),
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, &bind_group, &[]);
            pass.dispatch_workgroups(groups(n), groups(m), 1);
        }
        encoder.copy_buffer_to_buffer(&k_buf, 0, &readback, 0, out_bytes);
        let submission = self.queue.submit([encoder.finish()]);
        let values = self.read_back(&readback, submission)?;
        Ok(DMatrix::from_iterator(
            n,
            m,
            values.into_iter().map(f64::from),
        ))
    }

    /// Waits for `submission` and reads the f32 values of `buffer` (mappable for reading).
    fn read_back(
        &self,
        buffer: &wgpu::Buffer,
        submission: wgpu::SubmissionIndex,
    ) -> Result<Vec<f32>, GpuError> {
        let slice = buffer.slice(..);
        let (sender, receiver) = std::sync::mpsc::channel();
        slice.map_async(wgpu::MapMode::Read, move |result| {
            // The receiver waits below; if it is gone there is nobody to tell.
            let _ = sender.send(result);
        });
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: None,
            })
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        receiver
            .recv()
            .map_err(|e| GpuError::Readback(e.to_string()))?
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        let values = {
            let view = slice
                .get_mapped_range()
                .map_err(|e| GpuError::Readback(e.to_string()))?;
            view.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        };
        buffer.unmap();
        Ok(values)
    }
}
