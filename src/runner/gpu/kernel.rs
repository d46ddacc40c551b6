//! The kernel matrix K(A, B) on the GPU (`kernel_cross.wgsl`, one invocation per entry; the
//! shapes κ_c in `kernel_shapes.wgsl`), against the CPU reference [`Kernel::cross`]:
//! K_pq = Σ_j θ̃^lin_j a_pj b_qj + Σ_c s^c κ_c(r_c²(a_p, b_q)).

#[cfg(not(target_arch = "wasm32"))]
use super::GpuError;
use super::{f32_bytes, Gpu};
use crate::gp::kernel::{Kernel, KernelGrad, StationaryKind};
use nalgebra::DMatrix;

/// Invocations per workgroup side (`@workgroup_size(8, 8)` in the shader).
#[cfg(not(target_arch = "wasm32"))]
const WORKGROUP_SIDE: u32 = 8;

/// The shapes κ_c(r²) with their derivatives (`kernel_shapes.wgsl`, after the `log_one_plus` it
/// calls) and the shared declarations every kernel shader starts with.
const COMMON: [&str; 3] = [
    super::POSITIVE,
    include_str!("kernel_shapes.wgsl"),
    include_str!("kernel_common.wgsl"),
];

/// The compiled entry points: the forward pass and the adjoint's two passes.
pub(super) struct KernelPipelines {
    pub(super) cross: wgpu::ComputePipeline,
    pub(super) backward_rows: wgpu::ComputePipeline,
    pub(super) backward_cols: wgpu::ComputePipeline,
}

impl KernelPipelines {
    pub(super) fn new(device: &wgpu::Device) -> Self {
        let cross = COMMON.concat() + include_str!("kernel_cross.wgsl");
        let backward = COMMON.concat() + include_str!("kernel_backward.wgsl");
        KernelPipelines {
            cross: super::compute_pipeline(device, "kernel_cross.wgsl", &cross, "cross"),
            backward_rows: super::compute_pipeline(
                device,
                "kernel_backward.wgsl",
                &backward,
                "backward_rows",
            ),
            backward_cols: super::compute_pipeline(
                device,
                "kernel_backward.wgsl",
                &backward,
                "backward_cols",
            ),
        }
    }
}

/// Invocations per workgroup of the adjoint's passes (`@workgroup_size(64)`).
#[cfg(not(target_arch = "wasm32"))]
const BACKWARD_GROUP: u32 = 64;

/// The shader's code for each stationary kind.
fn kind_code(kind: StationaryKind) -> u32 {
    match kind {
        StationaryKind::SquaredExponential => 0,
        StationaryKind::Matern12 => 1,
        StationaryKind::Matern32 => 2,
        StationaryKind::RationalQuadratic => 3,
    }
}

/// D, after checking that both point sets have the kernel's D columns (panics otherwise, as
/// [`Kernel::cross`] does).
#[cfg(not(target_arch = "wasm32"))]
fn check_points(kernel: &Kernel, a: &DMatrix<f64>, b: &DMatrix<f64>) -> usize {
    let d = kernel.dim();
    for points in [a, b] {
        assert_eq!(
            points.ncols(),
            d,
            "points must have one column per kernel dimension"
        );
    }
    d
}

/// A matrix's rows, row-major, as f32 bytes (the shader reads point p at p·D).
pub(super) fn rows_bytes(points: &DMatrix<f64>) -> Vec<u8> {
    f32_bytes((0..points.nrows()).flat_map(|p| points.row(p).iter().copied().collect::<Vec<_>>()))
}

impl Gpu {
    /// The shapes of `kernel_shapes.wgsl` at each `(kind, r², a)`: `(κ, ∂κ/∂r², ∂κ/∂a)` in
    /// float32, returned as f64, for holding them equal to the CPU's `gp::kernel::scalar` (the
    /// test `gpu_parity::the_shapes_equal_the_cpus`). Inputs are rounded to float32 first.
    /// Compiles its own small shader on every call: a test's tool, not a hot path.
    #[doc(hidden)]
    #[cfg(not(target_arch = "wasm32"))]
    pub fn probe_shapes(
        &self,
        probes: &[(StationaryKind, f64, f64)],
    ) -> Result<Vec<[f64; 3]>, GpuError> {
        if probes.is_empty() {
            return Ok(Vec::new());
        }
        let source = [
            super::POSITIVE,
            include_str!("kernel_shapes.wgsl"),
            include_str!("shape_probe.wgsl"),
        ]
        .concat();
        let pipeline = super::compute_pipeline(
            self.device.setup(),
            "shape_probe.wgsl",
            &source,
            "probe_shapes",
        );
        let words = probes
            .iter()
            .flat_map(|&(kind, r2, alpha)| [f64::from(kind_code(kind)), r2, alpha]);
        let input = self.upload(
            "shape probes",
            &f32_bytes(words),
            wgpu::BufferUsages::STORAGE,
        );
        let groups = ((probes.len() as u32).div_ceil(BACKWARD_GROUP), 1, 1);
        let values = self.run_and_read(
            "shape probes",
            &[(&pipeline, groups)],
            &[input],
            (probes.len() * 3 * 4) as u64,
        )?;
        Ok(values
            .chunks_exact(3)
            .map(|v| [f64::from(v[0]), f64::from(v[1]), f64::from(v[2])])
            .collect())
    }

    /// K(A, B) (`a` n × D, `b` m × D) computed in float32 on the GPU, returned as f64: the same
    /// matrix as [`Kernel::cross`], to within float32 rounding.
    ///
    /// Panics unless both point sets have the kernel's D columns (as [`Kernel::cross`] does).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn cross(
        &self,
        kernel: &Kernel,
        a: &DMatrix<f64>,
        b: &DMatrix<f64>,
    ) -> Result<DMatrix<f64>, GpuError> {
        check_points(kernel, a, b);
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

        let inputs = self.kernel_inputs(kernel, a, b, 0);
        let values = self.run_and_read(
            "kernel cross",
            &[(&self.pipelines.kernel.cross, groups)],
            &inputs,
            out_bytes,
        )?;
        Ok(DMatrix::from_iterator(
            n,
            m,
            values.into_iter().map(f64::from),
        ))
    }

    /// The adjoint of [`Gpu::cross`]: given dK = ∂L/∂K(A, B) (n × m), the kernel gradient,
    /// ∂L/∂A (n × D) and ∂L/∂B (m × D), in float32 on the GPU with the sums over rows finished in
    /// f64 here; the same as [`Kernel::cross_backward`] to within float32 rounding.
    ///
    /// Panics unless the point sets have the kernel's D columns and dK is n × m.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn cross_backward(
        &self,
        kernel: &Kernel,
        a: &DMatrix<f64>,
        b: &DMatrix<f64>,
        dk: &DMatrix<f64>,
    ) -> Result<(KernelGrad, DMatrix<f64>, DMatrix<f64>), GpuError> {
        let d = check_points(kernel, a, b);
        let (n, m) = (a.nrows(), b.nrows());
        assert_eq!(dk.shape(), (n, m), "dL/dK must be n × m");
        if n == 0 || m == 0 || d == 0 {
            let (da, db) = (DMatrix::zeros(n, d), DMatrix::zeros(m, d));
            return Ok((kernel.new_zeroed_grad(), da, db));
        }
        let width = backward_width(kernel);
        let chunk = backward_chunk(m);
        let chunks = m.div_ceil(chunk);
        let rows_bytes_out = (chunks * n * width * 4) as u64;
        let cols_bytes_out = (m * d * 4) as u64;
        self.check_binding("the kernel adjoint's row sums", rows_bytes_out)?;
        self.check_binding("the kernel adjoint's columns", cols_bytes_out)?;
        self.check_binding("dL/dK", (n * m * 4) as u64)?;
        let rows_groups = ((n as u32).div_ceil(BACKWARD_GROUP), chunks as u32, 1);
        let cols_groups = ((m as u32).div_ceil(BACKWARD_GROUP), 1, 1);
        self.check_groups("the kernel adjoint's dispatch", rows_groups)?;
        self.check_groups("the kernel adjoint's dispatch", cols_groups)?;

        let mut inputs = self.kernel_inputs(kernel, a, b, chunk).to_vec();
        inputs.push(self.upload(
            "dk",
            &f32_bytes(dk.iter().copied()),
            wgpu::BufferUsages::STORAGE,
        ));
        let pipelines = &self.pipelines.kernel;
        let rows = self.run_and_read(
            "kernel backward rows",
            &[(&pipelines.backward_rows, rows_groups)],
            &inputs,
            rows_bytes_out,
        )?;
        let cols = self.run_and_read(
            "kernel backward cols",
            &[(&pipelines.backward_cols, cols_groups)],
            &inputs,
            cols_bytes_out,
        )?;
        let rows: Vec<f64> = rows.iter().map(|&v| f64::from(v)).collect();
        let (grad, da) = decode_rows(kernel, &rows, n);
        let mut db = DMatrix::zeros(m, d);
        for (q, row) in cols.chunks_exact(d).enumerate() {
            for j in 0..d {
                db[(q, j)] = f64::from(row[j]);
            }
        }
        Ok((grad, da, db))
    }

    /// The buffers every kernel shader binds at 0–4 (kernel_common.wgsl): sizes, the points
    /// row-major, and the parameters with the masks applied (θ̃ = E ∘ θ), so no shader needs a mask.
    #[cfg(not(target_arch = "wasm32"))]
    fn kernel_inputs(
        &self,
        kernel: &Kernel,
        a: &DMatrix<f64>,
        b: &DMatrix<f64>,
        chunk: usize,
    ) -> [wgpu::Buffer; 5] {
        let shape = (a.nrows(), b.nrows());
        let dims = kernel_dims(kernel, shape, chunk, KernelStrides::default());
        let storage = wgpu::BufferUsages::STORAGE;
        [
            self.upload("dims", &dims, wgpu::BufferUsages::UNIFORM),
            self.upload("a", &rows_bytes(a), storage),
            self.upload("b", &rows_bytes(b), storage),
            self.upload("parameters", &host_parameters(kernel, None), storage),
            self.upload("kinds", &kind_bytes(kernel), storage),
        ]
    }
}

/// Words of a slot's kernel parameters as the kernel shaders read them (kernel_common.wgsl) and
/// `held_gradients.wgsl` derives them (its DERIVED): θ̃^lin (D), per part s^c and θ̃^c (D), the
/// rational quadratic's a, c/φ², g_var, diag, g_var and c/φ² in double-float.
pub(super) fn parameter_words(kernel: &Kernel) -> usize {
    alpha_at(kernel) + 8
}

/// The word of a slot's parameters that holds the rational quadratic's a: θ̃^lin and the parts
/// come before it, c/φ² and g_var right after it.
pub(super) fn alpha_at(kernel: &Kernel) -> usize {
    let d = kernel.dim();
    d + kernel.stationary.len() * (d + 1)
}

/// A slot's parameters ([`parameter_words`] of them) from the host: θ̃ = E ∘ θ (the masks
/// applied, so no shader needs one), the shape a (1, unused, without a rational quadratic), then
/// c/φ² and g_var = −c/(2φ²) when `noise` gives (c, φ²); zeros after.
pub(super) fn host_parameters(kernel: &Kernel, noise: Option<(f64, f64)>) -> Vec<u8> {
    let d = kernel.dim();
    let masked = |theta: &[f64]| -> Vec<f64> {
        theta.iter().zip(&kernel.mask).map(|(t, e)| t * e).collect()
    };
    let linear = kernel
        .linear
        .as_deref()
        .map_or_else(|| vec![0.0; d], &masked);
    // The shaders take one shape a: that of the kernel's rational-quadratic part (the CGP-CDE
    // kernel has one).
    debug_assert!(
        kernel
            .stationary
            .iter()
            .filter(|p| p.alpha.is_some())
            .count()
            <= 1,
        "the GPU kernel takes one rational-quadratic part"
    );
    let mut values = linear;
    for part in &kernel.stationary {
        values.push(part.variance);
        values.extend(masked(&part.precision));
    }
    values.push(kernel.rq_alpha().unwrap_or(1.0));
    if let Some((c, noise)) = noise {
        values.extend([c / noise, -c / (2.0 * noise)]);
    }
    values.resize(parameter_words(kernel), 0.0);
    f32_bytes(values)
}

/// The parts' kinds as the kernel shaders read them (0 squared exponential, 1 Matérn-1/2,
/// 2 Matérn-3/2, 3 rational quadratic).
pub(super) fn kind_bytes(kernel: &Kernel) -> Vec<u8> {
    kernel
        .stationary
        .iter()
        .flat_map(|part| kind_code(part.kind).to_le_bytes())
        .collect()
}

/// Words from one slot to the next in each buffer the kernel shaders read or write, and where
/// slot 0's A starts in its buffer.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct KernelStrides {
    pub a_at: usize,
    pub a: usize,
    pub b: usize,
    pub params: usize,
    pub k: usize,
    pub rows: usize,
    pub cols: usize,
}

/// The kernel shaders' `dims` (kernel_common.wgsl) for A with `n` rows, B with `m`, the adjoint's
/// row pass taking `chunk` columns of B per invocation, the slots `strides` apart.
pub(super) fn kernel_dims(
    kernel: &Kernel,
    (n, m): (usize, usize),
    chunk: usize,
    strides: KernelStrides,
) -> Vec<u8> {
    let KernelStrides {
        a_at,
        a,
        b,
        params,
        k,
        rows,
        cols,
    } = strides;
    super::uniform_words(&[
        n as u32,
        m as u32,
        kernel.dim() as u32,
        kernel.stationary.len() as u32,
        chunk as u32,
        a as u32,
        b as u32,
        params as u32,
        k as u32,
        rows as u32,
        cols as u32,
        a_at as u32,
    ])
}

/// Values per row of the adjoint's row pass: ∂a_p (D), per part Σ dK κ and Σ G Δ² (D),
/// Σ s dK ∂κ/∂a, Σ dK a b (D) (kernel_backward.wgsl).
pub(super) fn backward_width(kernel: &Kernel) -> usize {
    let d = kernel.dim();
    2 * d + kernel.stationary.len() * (d + 1) + 1
}

/// Columns of B per invocation of the adjoint's row pass for B with `m` rows: enough chunks that
/// a few rows of A still fill a GPU (M = 400 and T = 12 800 give 50 chunks, 20 000 invocations),
/// few enough that the partial sums read back stay small.
pub(super) fn backward_chunk(m: usize) -> usize {
    256.min(m.max(1))
}

/// The kernel gradient and ∂A (n × D) from the row pass's output (chunks × n rows of
/// [`backward_width`] values), every sum over chunks and rows finished in f64. The gradients are
/// with respect to the unmasked θ.
pub(super) fn decode_rows(kernel: &Kernel, rows: &[f64], n: usize) -> (KernelGrad, DMatrix<f64>) {
    let d = kernel.dim();
    let width = backward_width(kernel);
    let mut sums = vec![0.0f64; width];
    let mut da = DMatrix::zeros(n, d);
    for (r, row) in rows.chunks_exact(width).enumerate() {
        for (s, &v) in sums.iter_mut().zip(row) {
            *s += v;
        }
        let p = r % n.max(1);
        for j in 0..d {
            da[(p, j)] += row[j];
        }
    }
    (grad_from_sums(kernel, &sums), da)
}

/// The kernel gradient (with respect to the unmasked θ) from the row pass's [`backward_width`]
/// values summed over every row and chunk: per stationary part c, ∂s^c = Σ dK κ and
/// ∂θ^c_j = m_j · 2θ̃^c_j · Σ G Δ²_j (θ̃ = m ⊙ θ); the rational-quadratic shape's sum; and
/// ∂θ^lin_j = m_j · Σ (its share). The first D values (∂ of the points) are not used.
pub(super) fn grad_from_sums(kernel: &Kernel, sums: &[f64]) -> KernelGrad {
    let d = kernel.dim();
    let parts = kernel.stationary.len();
    assert_eq!(sums.len(), backward_width(kernel), "one sum per row value");
    let mut grad = kernel.new_zeroed_grad();
    for (c, (part, pgrad)) in kernel
        .stationary
        .iter()
        .zip(&mut grad.stationary)
        .enumerate()
    {
        let at = d + c * (d + 1);
        pgrad.variance = sums[at];
        for j in 0..d {
            let theta = part.precision[j] * kernel.mask[j];
            pgrad.precision[j] = kernel.mask[j] * 2.0 * theta * sums[at + 1 + j];
        }
    }
    let alpha_at = d + parts * (d + 1);
    for alpha in grad.stationary.iter_mut().filter_map(|p| p.alpha.as_mut()) {
        *alpha = sums[alpha_at];
    }
    if let Some(glin) = grad.linear.as_mut() {
        for (j, g) in glin.iter_mut().enumerate() {
            *g = kernel.mask[j] * sums[alpha_at + 1 + j];
        }
    }
    grad
}
