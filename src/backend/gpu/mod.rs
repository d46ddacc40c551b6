//! The GPU backend's device side: one [`Gpu`] (a wgpu adapter, device and queue) and the WGSL
//! compute kernels that run on it, each tested against the CPU f64 reference. Natively wgpu finds
//! Vulkan (Mesa's lavapipe where there is no GPU, which is how the tests run it) or GL.
//!
//! Owns: acquiring a device ([`Gpu::open`]), the typed [`GpuError`], and the kernels (so far the
//! kernel matrix K(A, B), [`Gpu::cross`]). Everything on the GPU is float32; the host converts
//! from and to the engine's f64 at the boundary. Not yet a [`super::Backend`]: that comes when the
//! bounds run here too (issue 14).

mod kernel;

use std::fmt;

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
}

/// A GPU device ready for Occam's kernels.
pub struct Gpu {
    device: wgpu::Device,
    queue: wgpu::Queue,
    adapter: String,
    kernels: kernel::Pipelines,
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
    pub fn open() -> Result<Self, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = pollster::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        }))
        .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let info = adapter.get_info();
        let name = format!("{} ({:?})", info.name, info.backend);
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("occam"),
            ..Default::default()
        }))
        .map_err(|e| GpuError::NoDevice {
            adapter: name.clone(),
            reason: e.to_string(),
        })?;
        let kernels = kernel::Pipelines::new(&device);
        Ok(Gpu {
            device,
            queue,
            adapter: name,
            kernels,
        })
    }

    /// The adapter's name and API, e.g. "llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)".
    pub fn adapter(&self) -> &str {
        &self.adapter
    }
}
