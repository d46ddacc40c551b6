//! Batched matrix products on the GPU (`gemm.wgsl`: 64 × 64 blocks with 4 × 4 register tiles per
//! invocation in float32, 16 × 16 tiles for the compensated sums, the batch along the dispatch's
//! z): C_z = op(A_z) op(B_z), op the identity or the transpose, the
//! shapes of the uncollapsed bound's Q K_Zt and K_Zt K_Ztᵀ. The reference is nalgebra's f64 product.

use nalgebra::DMatrix;

#[cfg(not(target_arch = "wasm32"))]
use super::{f32_bytes, GpuError};
use super::{uniform_words, Gpu};

/// Rows and columns of C per workgroup of the float32 product (`BLOCK` in the shader).
const BLOCK: u32 = 64;
/// Rows and columns of C per workgroup of the compensated product (`TILE` in the shader).
const TILE: u32 = 16;

/// The compiled entry points of `gemm.wgsl`: the float32 product and the compensated one.
pub(super) fn pipelines(device: &wgpu::Device) -> [wgpu::ComputePipeline; 2] {
    let source = include_str!("gemm.wgsl");
    [
        super::compute_pipeline(device, "gemm.wgsl", source, "gemm"),
        super::compute_pipeline(device, "gemm.wgsl", source, "gemm_compensated"),
    ]
}

/// How a product's sums are accumulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accumulation {
    /// float32 throughout: C to about (k + 2)·2⁻²⁴ of Σ|a b| (each entry).
    Single,
    /// Exact partial products and a two-word sum (`gemm_compensated`): C to about 2⁻⁴⁰ of
    /// Σ|a b|, for sums whose float32 rounding the algebra after them cannot absorb.
    Compensated,
}

/// Whether a factor enters as stored or transposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    AsIs,
    Transposed,
}

impl Op {
    /// The (rows, columns) of op(X) for X of `shape`.
    #[cfg(not(target_arch = "wasm32"))]
    fn shape(self, (rows, cols): (usize, usize)) -> (usize, usize) {
        match self {
            Op::AsIs => (rows, cols),
            Op::Transposed => (cols, rows),
        }
    }
}

/// The shader's `Dims` for C (m × n) = op_a(A) op_b(B) with inner dimension k; `lower` computes
/// only the tiles on or below the diagonal of a symmetric C.
pub(super) fn dims_bytes(
    (m, n, k): (usize, usize, usize),
    op_a: Op,
    op_b: Op,
    lower: bool,
    batch: usize,
) -> Vec<u8> {
    uniform_words(&[
        m as u32,
        n as u32,
        k as u32,
        u32::from(op_a == Op::Transposed),
        u32::from(op_b == Op::Transposed),
        u32::from(lower),
        batch as u32,
        1.0f32.to_bits(),
    ])
}

/// The f64 values of a product's output: one plane, or the compensated product's head and tail
/// planes added (`planes` values each).
pub(super) fn combine(values: &[f32], planes: usize, accumulation: Accumulation) -> Vec<f64> {
    match accumulation {
        Accumulation::Single => values[..planes].iter().map(|&v| f64::from(v)).collect(),
        Accumulation::Compensated => values[..planes]
            .iter()
            .zip(&values[planes..2 * planes])
            .map(|(&h, &t)| f64::from(h) + f64::from(t))
            .collect(),
    }
}

/// Workgroups for an m × n product of `batch` matrices accumulated as `accumulation`.
pub(super) fn groups(
    (m, n): (usize, usize),
    batch: usize,
    accumulation: Accumulation,
) -> (u32, u32, u32) {
    let side = match accumulation {
        Accumulation::Single => BLOCK,
        Accumulation::Compensated => TILE,
    };
    (
        (m as u32).div_ceil(side),
        (n as u32).div_ceil(side),
        batch as u32,
    )
}

/// Fills the upper triangle of a square column-major matrix from its lower one (a product
/// computed with `lower` set leaves whole tiles above the diagonal unwritten).
pub(super) fn mirror_lower(c: &mut DMatrix<f64>) {
    let n = c.nrows();
    for j in 1..n {
        for i in 0..j {
            c[(i, j)] = c[(j, i)];
        }
    }
}

impl Gpu {
    /// A Aᵀ (A m × k) in float32 on the GPU, computing only the tiles on or below the diagonal
    /// (a SYRK: about half the products of [`Gpu::gemm`]) and mirroring the rest; returned as f64,
    /// exactly symmetric.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn syrk(
        &self,
        a: &DMatrix<f64>,
        accumulation: Accumulation,
    ) -> Result<DMatrix<f64>, GpuError> {
        let (m, k) = a.shape();
        if m == 0 {
            return Ok(DMatrix::zeros(0, 0));
        }
        let out_bytes = (m * m * 4 * accumulation.planes()) as u64;
        self.check_binding("the symmetric product", out_bytes)?;
        self.check_binding("the symmetric product's factor", (a.len() * 4) as u64)?;
        let groups = groups((m, m), 1, accumulation);
        self.check_groups("the symmetric product's dispatch", groups)?;
        let storage = wgpu::BufferUsages::STORAGE;
        let factor = f32_bytes(a.iter().copied());
        let inputs = [
            self.upload(
                "syrk dims",
                &dims_bytes((m, m, k), Op::AsIs, Op::Transposed, true, 1),
                wgpu::BufferUsages::UNIFORM,
            ),
            self.upload("syrk a", &factor, storage),
            self.upload("syrk a", &factor, storage),
        ];
        let pipeline = self.pipelines.gemm_for(accumulation);
        let values = self.run_and_read("syrk", pipeline, &inputs, groups, out_bytes)?;
        let mut c = DMatrix::from_vec(m, m, combine(&values, m * m, accumulation));
        mirror_lower(&mut c);
        Ok(c)
    }

    /// C_z = op_a(A_z) op_b(B_z) for every z, in float32 on the GPU, returned as f64. All A_z share
    /// one shape, as do all B_z.
    ///
    /// Panics if the batches differ in length or shape, or if the inner dimensions differ.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gemm(
        &self,
        a: &[DMatrix<f64>],
        op_a: Op,
        b: &[DMatrix<f64>],
        op_b: Op,
        accumulation: Accumulation,
    ) -> Result<Vec<DMatrix<f64>>, GpuError> {
        assert_eq!(a.len(), b.len(), "one B per A");
        let Some((a0, b0)) = a.first().zip(b.first()) else {
            return Ok(Vec::new());
        };
        assert!(
            a.iter().all(|x| x.shape() == a0.shape()) && b.iter().all(|x| x.shape() == b0.shape()),
            "every A has one shape, every B another"
        );
        let (m, k) = op_a.shape(a0.shape());
        let (k_b, n) = op_b.shape(b0.shape());
        assert_eq!(k, k_b, "op(A) is m × k and op(B) k × n");
        let batch = a.len();
        if m == 0 || n == 0 {
            return Ok(vec![DMatrix::zeros(m, n); batch]);
        }
        let out_bytes = (batch * m * n * 4 * accumulation.planes()) as u64;
        self.check_binding("the batched product", out_bytes)?;
        for (what, factors) in [
            ("the batched left factors", a),
            ("the batched right factors", b),
        ] {
            let bytes = factors.iter().map(|x| x.len() * 4).sum::<usize>() as u64;
            self.check_binding(what, bytes)?;
        }
        let groups = groups((m, n), batch, accumulation);
        self.check_groups("the batched product's dispatch", groups)?;

        let dims = dims_bytes((m, n, k), op_a, op_b, false, batch);
        // Column-major storage, batch after batch, exactly as nalgebra holds each matrix.
        let stacked = |xs: &[DMatrix<f64>]| f32_bytes(xs.iter().flat_map(|x| x.iter().copied()));
        let storage = wgpu::BufferUsages::STORAGE;
        let inputs = [
            self.upload("gemm dims", &dims, wgpu::BufferUsages::UNIFORM),
            self.upload("gemm a", &stacked(a), storage),
            self.upload("gemm b", &stacked(b), storage),
        ];
        let pipeline = self.pipelines.gemm_for(accumulation);
        let values = self.run_and_read("gemm", pipeline, &inputs, groups, out_bytes)?;
        let all = combine(&values, batch * m * n, accumulation);
        Ok(all
            .chunks_exact(m * n)
            .map(|c| DMatrix::from_column_slice(m, n, c))
            .collect())
    }
}

impl Accumulation {
    /// Output planes per product.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn planes(self) -> usize {
        match self {
            Accumulation::Single => 1,
            Accumulation::Compensated => 2,
        }
    }
}
