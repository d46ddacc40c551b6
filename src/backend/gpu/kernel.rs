//! The kernel matrix K(A, B) on the GPU (`kernel.wgsl`, one invocation per entry), against the
//! CPU reference [`Kernel::cross`]: K_pq = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²(a_p, b_q)).

use super::{f32_bytes, Gpu, GpuError};
use crate::gp::kernel::{Kernel, StationaryKind};
use nalgebra::DMatrix;

/// Invocations per workgroup side (`@workgroup_size(8, 8)` in the shader).
const WORKGROUP_SIDE: u32 = 8;

/// The compiled `cross` entry point of `kernel.wgsl`.
pub(super) fn pipeline(device: &wgpu::Device) -> wgpu::ComputePipeline {
    super::compute_pipeline(device, "kernel.wgsl", include_str!("kernel.wgsl"), "cross")
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
        self.check_binding("the kernel matrix", out_bytes)?;
        let groups = (
            (n as u32).div_ceil(WORKGROUP_SIDE),
            (m as u32).div_ceil(WORKGROUP_SIDE),
            1,
        );
        self.check_groups("the kernel matrix's dispatch", groups)?;

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

        let storage = wgpu::BufferUsages::STORAGE;
        let inputs = [
            self.upload("dims", &dims, wgpu::BufferUsages::UNIFORM),
            self.upload("a", &rows_bytes(a), storage),
            self.upload("b", &rows_bytes(b), storage),
            self.upload("linear", &f32_bytes(linear), storage),
            self.upload("parts", &f32_bytes(parts), storage),
            self.upload("kinds", &kinds, storage),
        ];
        let values = self.run_and_read(
            "kernel cross",
            &self.pipelines.cross,
            &inputs,
            groups,
            out_bytes,
        )?;
        Ok(DMatrix::from_iterator(
            n,
            m,
            values.into_iter().map(f64::from),
        ))
    }
}
