//! Batched matrix products on the GPU (`gemm.wgsl`: 64 × 64 blocks with 4 × 4 register tiles per
//! invocation, or 128 × 128 with 8 × 8 for large float32 products, in float32 or with compensated
//! sums, the batch along the dispatch's z; a product with too few blocks for a large GPU splits
//! its inner dimension, and `split_sum.wgsl` adds the splits in a fixed order): C_z = op(A_z) op(B_z), op the identity or
//! the transpose, the shapes of the uncollapsed bound's Q K_Zt, K_Zt K_Ztᵀ and [Ãg, Ãy]. The
//! reference is nalgebra's f64 product.

use nalgebra::DMatrix;

#[cfg(not(target_arch = "wasm32"))]
use super::{f32_bytes, GpuError};
use super::{uniform_words, Gpu};

/// Rows and columns of C per workgroup (`BLOCK` in the shader).
const BLOCK: u32 = 64;
/// Rows and columns of C per workgroup of `gemm_wide` (`WIDE` in the shader).
const WIDE: u32 = 128;
/// Inner indices per staged step of the float32 product (`DEPTH` in the shader).
const DEPTH: u32 = 16;
/// Inner indices per staged step of the compensated product (`DEPTH_C` in the shader).
const DEPTH_C: u32 = 8;
/// Workgroups below which a product splits its inner dimension: twice the
/// multiprocessors of the largest GPUs the issue names (132 on an H100 or H200), so that each has
/// work while another waits on memory.
const MIN_WORKGROUPS: u32 = 264;
/// The fewest staged steps a split keeps (256 inner indices): below it the partial sums' writes
/// and their reduction cost more than the parallelism gains, and small products (the tests', the
/// interactive sizes') stay in one pass.
const MIN_STEPS_PER_SPLIT: u32 = 32;
/// The same for the float32 product (128 inner indices): its steps cost a quarter of the
/// compensated one's and its partial planes half, so it splits sooner — the M × M algebra's
/// products at M = 400 (49 blocks of 25 steps) run as 3 splits, 147 workgroups.
const MIN_STEPS_PER_SPLIT_SINGLE: u32 = 8;
/// Invocations per workgroup of `split_sum.wgsl`.
const SUM_GROUP: u32 = 64;

/// The compiled entry points: `gemm.wgsl`'s float32 products (64 × 64 and 128 × 128 blocks) and
/// compensated one, and the reductions of split compensated and float32 products
/// (`split_sum.wgsl`).
pub(super) fn pipelines(device: &wgpu::Device) -> [wgpu::ComputePipeline; 5] {
    let source = include_str!("gemm.wgsl");
    let sum = [super::DOUBLE_FLOAT, include_str!("split_sum.wgsl")].concat();
    [
        super::compute_pipeline(device, "gemm.wgsl", source, "gemm"),
        super::compute_pipeline(device, "gemm.wgsl", source, "gemm_wide"),
        super::compute_pipeline(device, "gemm.wgsl", source, "gemm_compensated"),
        super::compute_pipeline(device, "split_sum.wgsl", &sum, "split_sum"),
        super::compute_pipeline(device, "split_sum.wgsl", &sum, "split_sum_single"),
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

/// How a test batch of [`Gpu::gemm_spaced`] lies in its buffers: `gaps` words after each A, B
/// and C, and, for a compensated product, each C's tail plane right after its head plane
/// (`interleaved`) rather than all heads, then all tails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spacing {
    pub gaps: [usize; 3],
    pub interleaved: bool,
}

/// A batch of products op_a(A_z) · op_b(B_z), z = 0, 1, …: one B per A, every A of one shape,
/// every B of another.
#[derive(Debug, Clone, Copy)]
pub struct Batched<'a> {
    pub a: &'a [DMatrix<f64>],
    pub op_a: Op,
    pub b: &'a [DMatrix<f64>],
    pub op_b: Op,
}

impl<'a> Batched<'a> {
    /// The products op_a(A_z) · op_b(B_z) of the batches `a` and `b`.
    pub fn new(a: &'a [DMatrix<f64>], op_a: Op, b: &'a [DMatrix<f64>], op_b: Op) -> Self {
        Self { a, op_a, b, op_b }
    }
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

/// How one product is dispatched: C (m × n) = op_a(A) op_b(B) with inner dimension k for each of
/// `batch` products, `lower` computing only the blocks on or below the diagonal of a symmetric C.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Product {
    /// The product's `Dims` uniform.
    pub dims: Vec<u8>,
    /// Its workgroups (the compensated product's z holds batch × splits).
    pub groups: (u32, u32, u32),
    /// Parts of the inner dimension (1: not split; always 1 in float32).
    pub splits: u32,
    /// Output values per plane (batch · m · n).
    pub values: usize,
    /// Words from one product of the batch to the next in A, B and C (packed: m·k, k·n, m·n).
    pub strides: [usize; 3],
    /// Values of one product's C (m · n).
    block: usize,
    /// Words from C's head plane to its tail plane (compensated; batch · C's stride unless
    /// [`Product::with_plane`] puts each product's tails right after its heads).
    plane: usize,
    pub accumulation: Accumulation,
    /// A float32 product large enough for `gemm_wide`'s 128 × 128 blocks.
    pub wide: bool,
}

impl Product {
    pub fn new(
        (m, n, k): (usize, usize, usize),
        op_a: Op,
        op_b: Op,
        lower: bool,
        batch: usize,
        accumulation: Accumulation,
    ) -> Self {
        // A float32 product whose 128 × 128 blocks alone fill a large GPU takes them: twice the
        // arithmetic per staged word, a quarter of the blocks; smaller ones keep 64 × 64 blocks,
        // so as not to leave multiprocessors idle (nor compute 128-wide edges of small matrices).
        let blocks = |edge: u32| {
            let (gx, gy) = ((m as u32).div_ceil(edge), (n as u32).div_ceil(edge));
            if lower { gx * (gx + 1) / 2 } else { gx * gy }.saturating_mul(batch as u32)
        };
        let wide = accumulation == Accumulation::Single && blocks(WIDE) >= MIN_WORKGROUPS;
        let edge = if wide { WIDE } else { BLOCK };
        let (gx, gy) = ((m as u32).div_ceil(edge), (n as u32).div_ceil(edge));
        // Splits enough to give a large GPU its workgroups, each keeping `least` staged steps of
        // `depth` inner indices.
        let split = |depth: u32, least: u32| {
            MIN_WORKGROUPS
                .div_ceil(blocks(BLOCK).max(1))
                .min((k as u32).div_ceil(depth) / least)
                .max(1)
        };
        let splits = match accumulation {
            // The wide kernel is taken only with blocks enough: it never splits.
            Accumulation::Single if wide => 1,
            Accumulation::Single => split(DEPTH, MIN_STEPS_PER_SPLIT_SINGLE),
            Accumulation::Compensated => split(DEPTH_C, MIN_STEPS_PER_SPLIT),
        };
        let dims = uniform_words(&[
            m as u32,
            n as u32,
            k as u32,
            u32::from(op_a == Op::Transposed),
            u32::from(op_b == Op::Transposed),
            u32::from(lower),
            batch as u32,
            1.0f32.to_bits(),
            splits,
            (m * k) as u32,
            (k * n) as u32,
            (m * n) as u32,
        ]);
        Self {
            dims,
            groups: (gx, gy, batch as u32 * splits),
            splits,
            values: batch * m * n,
            strides: [m * k, k * n, m * n],
            block: m * n,
            plane: batch * m * n,
            accumulation,
            wide,
        }
    }

    /// The same product with the batch's factors and results `strides` words apart in their
    /// buffers (A, B, C) instead of packed: so that a batch can read operands that are one part
    /// of each slot's larger buffer (the first T columns of K', M × (T + M)) and write into one.
    /// The reduced product's partial planes stay packed; `split_sum` spreads its sums.
    ///
    /// Panics if a stride is shorter than what it separates.
    pub fn with_strides(mut self, strides: [usize; 3]) -> Self {
        let [a, b, c] = strides;
        let packed = self.strides;
        assert!(
            a >= packed[0] && b >= packed[1] && c >= packed[2],
            "strides {strides:?} shorter than the packed {packed:?}"
        );
        for (word, value) in [(9, a), (10, b), (11, c)] {
            self.dims[4 * word..4 * word + 4].copy_from_slice(&(value as u32).to_le_bytes());
        }
        self.strides = strides;
        self.plane = self.batch() * c;
        self
    }

    /// The same compensated product with each product's tail plane `plane` words after its
    /// head plane (instead of the whole batch's heads, then its tails): with C's stride twice
    /// the block and `plane` the block, slot z's C is [heads | tails] at z · stride, the
    /// layout one product alone has.
    ///
    /// Panics if the product is float32 or the planes would overlap another product's.
    pub fn with_plane(mut self, plane: usize) -> Self {
        assert_eq!(
            self.accumulation,
            Accumulation::Compensated,
            "a float32 C has one plane"
        );
        let stride = self.strides[2];
        let apart = plane + self.block <= stride || plane >= self.batch() * stride;
        assert!(
            plane >= self.block && apart,
            "tails {plane} words after the heads overlap another product's C (stride {stride})"
        );
        self.plane = plane;
        self
    }

    /// Products in the batch.
    fn batch(&self) -> usize {
        self.values / self.block.max(1)
    }

    /// Words of C as written (with its strides and planes), at least: a product per batch
    /// entry at its stride; compensated, the tails [`Product::with_plane`]'s words after the
    /// heads.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn c_words(&self) -> usize {
        let heads = self.batch() * self.strides[2];
        match self.accumulation {
            Accumulation::Single => heads,
            Accumulation::Compensated => self.plane + heads,
        }
    }

    /// Words of the product's own output: a plane per split in float32; compensated, a head and
    /// a tail plane per split (which [`Product::sum_dims`] reduces to two).
    pub fn output_words(&self) -> usize {
        match self.accumulation {
            Accumulation::Single => self.splits as usize * self.values,
            Accumulation::Compensated => 2 * self.splits as usize * self.values,
        }
    }

    /// Whether the product's own output needs `split_sum.wgsl` after it: every compensated
    /// product (its planes are split sums even unsplit), a float32 one when split.
    pub fn reduced(&self) -> bool {
        self.accumulation == Accumulation::Compensated || self.splits > 1
    }

    /// The dispatches of this product (its `Dims` uniform `dims`, factors `a` and `b`) into
    /// `out`: one, or when [`Product::reduced`] the partial sums into `partials` (at least
    /// [`Product::output_words`] long) and their sum in split order (`sum_dims`, from
    /// [`Product::sum_dims`]).
    pub(super) fn steps<'p>(
        &self,
        pipelines: &'p super::Pipelines,
        dims: &wgpu::Buffer,
        [a, b, out]: [&wgpu::Buffer; 3],
        reduction: Option<(&wgpu::Buffer, &wgpu::Buffer)>,
    ) -> Vec<super::submission::Step<'p>> {
        let product = pipelines.for_product(self);
        match reduction.filter(|_| self.reduced()) {
            None => vec![(
                product,
                vec![dims.clone(), a.clone(), b.clone(), out.clone()],
                self.groups,
            )],
            Some((partials, sum_dims)) => vec![
                (
                    product,
                    vec![dims.clone(), a.clone(), b.clone(), partials.clone()],
                    self.groups,
                ),
                (
                    pipelines.for_sum(self),
                    vec![sum_dims.clone(), partials.clone(), out.clone()],
                    self.sum_groups(),
                ),
            ],
        }
    }

    /// `split_sum.wgsl`'s `Dims` for this (compensated or split) product.
    pub fn sum_dims(&self) -> Vec<u8> {
        uniform_words(&[
            self.values as u32,
            self.splits,
            1.0f32.to_bits(),
            self.block.max(1) as u32,
            self.strides[2].max(1) as u32,
            self.plane as u32,
            0,
            0,
        ])
    }

    /// `split_sum.wgsl`'s workgroups (the y dimension when x would pass the dispatch limit).
    pub fn sum_groups(&self) -> (u32, u32, u32) {
        let groups = (self.values.max(1) as u32).div_ceil(SUM_GROUP);
        (groups.min(65_535), groups.div_ceil(65_535), 1)
    }
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

impl super::Pipelines {
    /// The entry point that computes `product` (before any reduction of its splits).
    pub(super) fn for_product(&self, product: &Product) -> &wgpu::ComputePipeline {
        match (product.accumulation, product.wide) {
            (Accumulation::Compensated, _) => &self.gemm_compensated,
            (Accumulation::Single, true) => &self.gemm_wide,
            (Accumulation::Single, false) => &self.gemm,
        }
    }

    /// The entry point that adds `product`'s splits ([`Product::reduced`]).
    pub(super) fn for_sum(&self, product: &Product) -> &wgpu::ComputePipeline {
        match product.accumulation {
            Accumulation::Compensated => &self.split_sum,
            Accumulation::Single => &self.split_sum_single,
        }
    }
}

impl Gpu {
    /// A Aᵀ (A m × k) on the GPU, computing only the blocks on or below the diagonal (a SYRK:
    /// about half the products of [`Gpu::gemm`]) and mirroring the rest; returned as f64,
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
        self.check_binding("the symmetric product's factor", (a.len() * 4) as u64)?;
        let product = Product::new((m, m, k), Op::AsIs, Op::Transposed, true, 1, accumulation);
        let storage = wgpu::BufferUsages::STORAGE;
        let factor = f32_bytes(a.iter().copied());
        let values = self.run_product(
            "syrk",
            &product,
            self.upload("syrk a", &factor, storage),
            self.upload("syrk a", &factor, storage),
        )?;
        let mut c = DMatrix::from_vec(m, m, combine(&values, m * m, accumulation));
        mirror_lower(&mut c);
        Ok(c)
    }

    /// C_z = op_a(A_z) op_b(B_z) for every z of `products` on the GPU, returned as f64.
    ///
    /// Panics if the batches differ in length or shape, or if the inner dimensions differ.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gemm(
        &self,
        products: Batched<'_>,
        accumulation: Accumulation,
    ) -> Result<Vec<DMatrix<f64>>, GpuError> {
        self.gemm_spaced(products, accumulation, Spacing::default())
            .map(|(c, _)| c)
    }

    /// [`Gpu::gemm`] with the batch's A, B and C each `spacing.gaps` words apart in their buffers
    /// ([`Product::with_strides`]): the gaps of A and B hold NaN, so that a product reading one
    /// poisons its result; also returns the largest |value| left in C's gaps (0 unless a product
    /// wrote outside its own place). With `spacing.interleaved` (compensated only) each product's tail
    /// plane follows its head plane ([`Product::with_plane`]), inside C's stride.
    ///
    /// Panics as [`Gpu::gemm`] does, or if `interleaved` C's gap is shorter than a product.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn gemm_spaced(
        &self,
        products: Batched<'_>,
        accumulation: Accumulation,
        spacing: Spacing,
    ) -> Result<(Vec<DMatrix<f64>>, f64), GpuError> {
        let Batched { a, op_a, b, op_b } = products;
        let Spacing { gaps, interleaved } = spacing;
        assert_eq!(a.len(), b.len(), "one B per A");
        let Some((a0, b0)) = a.first().zip(b.first()) else {
            return Ok((Vec::new(), 0.0));
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
            return Ok((vec![DMatrix::zeros(m, n); batch], 0.0));
        }
        let strides = [m * k + gaps[0], k * n + gaps[1], m * n + gaps[2]];
        for (what, stride) in [
            ("the batched left factors", strides[0]),
            ("the batched right factors", strides[1]),
        ] {
            self.check_binding(what, (batch * stride * 4) as u64)?;
        }
        let mut product =
            Product::new((m, n, k), op_a, op_b, false, batch, accumulation).with_strides(strides);
        if interleaved {
            product = product.with_plane(m * n);
        }
        // Column-major storage, as nalgebra holds each matrix, then the gap (NaN).
        let spaced = |xs: &[DMatrix<f64>], gap: usize| {
            f32_bytes(
                xs.iter()
                    .flat_map(|x| x.iter().copied().chain(std::iter::repeat_n(f64::NAN, gap))),
            )
        };
        let storage = wgpu::BufferUsages::STORAGE;
        let values = self.run_product(
            "gemm",
            &product,
            self.upload("gemm a", &spaced(a, gaps[0]), storage),
            self.upload("gemm b", &spaced(b, gaps[1]), storage),
        )?;
        // Product z's place in each plane of C; every other word is a gap.
        let plane = if interleaved {
            m * n
        } else {
            batch * strides[2]
        };
        let planes = accumulation.planes();
        let place = |p: usize, z: usize, e: usize| p * plane + z * strides[2] + e;
        let mut written = vec![false; values.len()];
        let results = (0..batch)
            .map(|z| {
                DMatrix::from_fn(m, n, |i, j| {
                    (0..planes)
                        .map(|p| {
                            let at = place(p, z, i + j * m);
                            written[at] = true;
                            f64::from(values[at])
                        })
                        .sum::<f64>()
                })
            })
            .collect();
        let gap_values = values
            .iter()
            .zip(&written)
            .filter(|(_, &w)| !w)
            .map(|(v, _)| f64::from(*v).abs())
            .fold(0.0f64, f64::max);
        Ok((results, gap_values))
    }

    /// Runs `product` of the factors `a` and `b` in one submission (a compensated product's
    /// splits added by `split_sum` in the same one) and reads its planes back.
    #[cfg(not(target_arch = "wasm32"))]
    fn run_product(
        &self,
        label: &str,
        product: &Product,
        a: wgpu::Buffer,
        b: wgpu::Buffer,
    ) -> Result<Vec<f32>, GpuError> {
        let out_bytes = (product.c_words() * 4) as u64;
        self.check_binding("the product", out_bytes)?;
        self.check_binding(
            "the product's partial sums",
            (product.output_words() * 4) as u64,
        )?;
        self.check_groups("the product's dispatch", product.groups)?;
        self.check_groups("the product's reduction", product.sum_groups())?;
        self.check_alive()?;
        let dims = self.upload(
            &format!("{label} dims"),
            &product.dims,
            wgpu::BufferUsages::UNIFORM,
        );
        let (output, readback) = self.output_and_readback(label, out_bytes);
        let mut encoder = self.device.create_command_encoder(label);
        match product.accumulation {
            Accumulation::Single if !product.reduced() => self.record_pass(
                &mut encoder,
                label,
                self.pipelines.for_product(product),
                &[&dims, &a, &b, &output],
                product.groups,
            ),
            _ => {
                let (partials, _) =
                    self.output_and_readback(label, (product.output_words() * 4) as u64);
                let sum_dims = self.upload(
                    &format!("{label} split sum dims"),
                    &product.sum_dims(),
                    wgpu::BufferUsages::UNIFORM,
                );
                self.record_pass(
                    &mut encoder,
                    label,
                    self.pipelines.for_product(product),
                    &[&dims, &a, &b, &partials],
                    product.groups,
                );
                self.record_pass(
                    &mut encoder,
                    label,
                    self.pipelines.for_sum(product),
                    &[&sum_dims, &partials, &output],
                    product.sum_groups(),
                );
            }
        }
        self.device
            .copy(&mut encoder, (&output, 0), (&readback, 0), out_bytes);
        let submission = self.device.submit(encoder);
        self.read_back(&readback, submission)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Large float32 products take 128 × 128 blocks (the parity test's large cases are such),
    /// small ones and compensated ones 64 × 64; the blocks cover C either way. Few blocks with a
    /// long inner dimension split it.
    #[test]
    fn large_float32_products_take_the_wide_blocks_and_few_blocks_split() {
        let single = |shape, batch, lower| {
            Product::new(
                shape,
                Op::AsIs,
                Op::AsIs,
                lower,
                batch,
                Accumulation::Single,
            )
        };
        let wide = single((130, 4224, 24), 4, false);
        assert!(wide.wide);
        assert_eq!(wide.groups, (2, 33, 4));
        assert!(single((4224, 130, 9), 4, false).wide);
        // The paper's Q·K (M = 400, T = 12 800): 4 · 100 blocks.
        let paper = single((400, 12_800, 400), 1, false);
        assert!(paper.wide);
        assert_eq!(paper.groups, (4, 100, 1));
        // The M × M algebra's products at M = 400 stay narrow (16 wide blocks would idle a GPU).
        assert!(!single((400, 400, 400), 1, false).wide);
        assert!(!single((130, 4224, 24), 3, false).wide, "198 wide blocks");
        // A symmetric product counts its blocks on and below the diagonal only.
        assert!(!single((2816, 2816, 8), 1, true).wide, "22 · 23 / 2 = 253");
        assert!(single((2944, 2944, 8), 1, true).wide, "23 · 24 / 2 = 276");
        // With few blocks and a long inner dimension a float32 product splits it: the M × M
        // products at M = 400 into 3 (147 workgroups); a short one stays whole.
        let square = single((400, 400, 400), 1, false);
        assert_eq!((square.splits, square.groups), (3, (7, 7, 3)));
        assert!(square.reduced());
        assert_eq!(square.output_words(), 3 * 400 * 400);
        assert_eq!(single((64, 64, 2048), 1, false).splits, 16);
        assert_eq!(single((130, 200, 70), 2, false).splits, 1);
        assert!(!single((130, 200, 70), 2, false).reduced());
        let compensated = Product::new(
            (400, 12_800, 400),
            Op::AsIs,
            Op::AsIs,
            false,
            1,
            Accumulation::Compensated,
        );
        assert!(!compensated.wide);
    }
}
