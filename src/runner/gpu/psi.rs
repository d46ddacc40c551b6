//! The collapsed bound's O(N M²) Ψ2 work on the GPU (`psi.wgsl`): the pair sums Σ_n p and
//! Σ_n h_n p of its squared-exponential part with a latent input, and the row sums
//! Σ_j W_ij p(n, i, j) and Σ_j W_ij p Δ²_ij its reverse mode needs, with
//! p(n, i, j) = pref_n exp(B_ni + B_nj − h_n (z_iw − z_jw)²). The host computes the factors
//! ([`Psi2Factors`], O(N M D), f64); the device works in double-float (two float32 words, about
//! 48 bits: a float32 Ψ2 was not accurate enough, `psi.wgsl` says why), and the host adds each
//! result's two words in f64.

use nalgebra::DMatrix;

use super::submission::{Readback, Submitted};
use super::GpuError;
use super::{uniform_words, Gpu};
#[cfg(not(target_arch = "wasm32"))]
use crate::gp::collapsed::Psi2Device;
use crate::gp::collapsed::Psi2Wanted;
pub use crate::gp::collapsed::{Psi2Factors, Psi2Sums};
#[cfg(not(target_arch = "wasm32"))]
use crate::gp::device::DeviceError;

/// The compiled entry points of `psi.wgsl`: [pair sums, row sums].
pub(super) fn pipelines(device: &wgpu::Device) -> [wgpu::ComputePipeline; 2] {
    let source = [super::DOUBLE_FLOAT, include_str!("psi.wgsl")].concat();
    ["pair_sums", "row_sums"]
        .map(|entry| super::compute_pipeline(device, "psi.wgsl", &source, entry))
}

/// Invocations per workgroup side of `pair_sums` (`@workgroup_size(8, 8)`).
const PAIR_SIDE: u32 = 8;
/// Invocations per workgroup of `row_sums` (`@workgroup_size(64)`).
const ROW_GROUP: u32 = 64;
/// Workgroups along x before `row_sums` wraps into y (the shader's 65535).
const ROW_WRAP: u32 = 65535;

/// The uniform block: N, M and the compiler-opaque 1.0.
fn dims(n: usize, m: usize) -> Vec<u8> {
    uniform_words(&[n as u32, m as u32, 1.0f32.to_bits(), 0])
}

/// Little-endian bytes of each f64 value as a double-float: its nearest float32 (head), then the
/// float32 nearest to the rest (tail).
fn double_float_bytes(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values
        .into_iter()
        .flat_map(|v| {
            let head = v as f32;
            let tail = (v - f64::from(head)) as f32;
            [head.to_le_bytes(), tail.to_le_bytes()]
        })
        .flatten()
        .collect()
}

/// One Ψ2 computation for a device: the pair sums of some factors, or their row sums against a
/// symmetric W.
#[derive(Debug, Clone, Copy)]
pub enum Psi2Request<'a> {
    Pairs(&'a Psi2Factors),
    Rows(&'a Psi2Factors, &'a DMatrix<f64>),
}

impl<'a> From<&'a Psi2Wanted> for Psi2Request<'a> {
    fn from(wanted: &'a Psi2Wanted) -> Self {
        match wanted {
            Psi2Wanted::Pairs(f) => Psi2Request::Pairs(f),
            Psi2Wanted::Rows(f, w) => Psi2Request::Rows(f, w),
        }
    }
}

/// What a submitted request's read-back holds: M × M pair sums or N × M row sums.
#[derive(Debug, Clone, Copy)]
enum Psi2Shape {
    Pairs { m: usize },
    Rows { n: usize, m: usize },
}

impl Psi2Shape {
    fn of(request: &Psi2Request<'_>) -> Self {
        match request {
            Psi2Request::Pairs(f) => Self::Pairs { m: f.b.ncols() },
            Psi2Request::Rows(f, _) => {
                let (n, m) = f.b.shape();
                Self::Rows { n, m }
            }
        }
    }

    /// The request's two result matrices from its read-back values.
    fn decode(self, values: &[f32]) -> Psi2Sums {
        match self {
            Self::Pairs { m } => {
                let mut sums = DMatrix::zeros(m, m);
                let mut weighted = DMatrix::zeros(m, m);
                for (k, (p, hp)) in two_sums(values).take(m * m).enumerate() {
                    let (i, j) = (k / m, k % m);
                    if j <= i {
                        sums[(i, j)] = p;
                        sums[(j, i)] = p;
                        weighted[(i, j)] = hp;
                        weighted[(j, i)] = hp;
                    }
                }
                (sums, weighted)
            }
            Self::Rows { n, m } => {
                let mut wp = DMatrix::zeros(n, m);
                let mut wpd = DMatrix::zeros(n, m);
                for (k, (a, b)) in two_sums(values).take(n * m).enumerate() {
                    wp[(k / m, k % m)] = a;
                    wpd[(k / m, k % m)] = b;
                }
                (wp, wpd)
            }
        }
    }
}

/// Ψ2 requests submitted to the device and not yet read ([`Gpu::submit_psi2`]).
#[must_use = "the sums are read by `finish`"]
pub struct SubmittedPsi2(Submitted<PendingPsi2>);

/// One encoded request: its shape (to decode) and the buffer its sums are read from.
struct PendingPsi2 {
    shape: Psi2Shape,
    readback: wgpu::Buffer,
}

impl Readback for PendingPsi2 {
    fn readback(&self) -> (&wgpu::Buffer, usize, usize) {
        (&self.readback, 0, self.readback.size() as usize)
    }
}

impl SubmittedPsi2 {
    /// Every submitted request's sums, in order, once the device has finished them. Natively
    /// this blocks until the submission has finished; in the browser the mapping resolves by
    /// itself.
    pub async fn finish(self, gpu: &Gpu) -> Result<Vec<Psi2Sums>, GpuError> {
        Ok(self
            .0
            .read(gpu)
            .await?
            .into_iter()
            .map(|(pending, v)| pending.shape.decode(&v))
            .collect())
    }
}

/// Each output's two sums (four words: head and tail of each), finished in f64.
fn two_sums(values: &[f32]) -> impl Iterator<Item = (f64, f64)> + '_ {
    values.chunks_exact(4).map(|c| {
        (
            f64::from(c[0]) + f64::from(c[1]),
            f64::from(c[2]) + f64::from(c[3]),
        )
    })
}

#[cfg(not(target_arch = "wasm32"))]
/// The GPU as a [`Psi2Device`], one submission per call (the backend batches instead; this is for
/// tests and benchmarks of single evaluations).
pub struct Psi2OnGpu<'a>(pub &'a Gpu);

#[cfg(not(target_arch = "wasm32"))]
impl Psi2Device for Psi2OnGpu<'_> {
    fn pair_sums(&self, factors: &Psi2Factors) -> Result<Psi2Sums, DeviceError> {
        self.0
            .psi2_pair_sums(factors)
            .map_err(|e| DeviceError::from(&e))
    }

    fn row_sums(&self, factors: &Psi2Factors, w: &DMatrix<f64>) -> Result<Psi2Sums, DeviceError> {
        self.0
            .psi2_row_sums(factors, w)
            .map_err(|e| DeviceError::from(&e))
    }
}

impl Gpu {
    /// Whether Ψ2's sums for N rows and M inducing points fit this device's storage bindings
    /// (a problem that does not is computed on the CPU; the device is not at fault).
    pub fn psi2_fits(&self, n: usize, m: usize) -> bool {
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        [n * m * 16, m * m * 16].iter().all(|&b| b as u64 <= limit)
    }

    /// Over the pairs of inducing points: (Σ_n p(n, i, j), Σ_n h_n p(n, i, j)), both M × M and
    /// symmetric (computed for j ≤ i, mirrored).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn psi2_pair_sums(
        &self,
        factors: &Psi2Factors,
    ) -> Result<(DMatrix<f64>, DMatrix<f64>), GpuError> {
        let mut out = self.psi2_batch(&[Psi2Request::Pairs(factors)])?;
        Ok(out.pop().expect("one result per request"))
    }

    /// Over rows and inducing points, for a symmetric W (M × M):
    /// (Σ_j W_ij p(n, i, j), Σ_j W_ij p(n, i, j) Δ²_ij), both N × M.
    ///
    /// Panics if W is not M × M.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn psi2_row_sums(
        &self,
        factors: &Psi2Factors,
        w: &DMatrix<f64>,
    ) -> Result<(DMatrix<f64>, DMatrix<f64>), GpuError> {
        let mut out = self.psi2_batch(&[Psi2Request::Rows(factors, w)])?;
        Ok(out.pop().expect("one result per request"))
    }

    /// Every request's sums ([`Gpu::psi2_pair_sums`] or [`Gpu::psi2_row_sums`]) in one
    /// submission and one wait, in order. Blocks until the device has finished.
    ///
    /// Panics if a request's W is not M × M.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn psi2_batch(&self, requests: &[Psi2Request<'_>]) -> Result<Vec<Psi2Sums>, GpuError> {
        let submitted = self.submit_psi2(requests)?;
        pollster::block_on(submitted.finish(self))
    }

    /// Encodes and submits every request in one submission and asks for the results to be
    /// mapped; [`SubmittedPsi2::finish`] reads them once the device is done (awaited in the
    /// browser, so the worker's event loop runs meanwhile).
    ///
    /// Panics if a request's W is not M × M.
    pub fn submit_psi2(&self, requests: &[Psi2Request<'_>]) -> Result<SubmittedPsi2, GpuError> {
        self.submit_each("psi2 sums", requests, |encoder, _, request| {
            Ok(PendingPsi2 {
                shape: Psi2Shape::of(request),
                readback: self.encode_psi2(encoder, request)?,
            })
        })
        .map(SubmittedPsi2)
    }

    /// Uploads one request's inputs and records its pass and read-back copy into `encoder`;
    /// returns the buffer to read.
    fn encode_psi2(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        request: &Psi2Request<'_>,
    ) -> Result<wgpu::Buffer, GpuError> {
        let (factors, w) = match request {
            Psi2Request::Pairs(f) => (*f, None),
            Psi2Request::Rows(f, w) => (*f, Some(*w)),
        };
        let (n, m) = factors.b.shape();
        if let Some(w) = w {
            assert_eq!(w.shape(), (m, m), "W is M × M");
        }
        let (label, pipeline, outputs, groups) = match w {
            None => {
                let side = (m as u32).div_ceil(PAIR_SIDE);
                (
                    "psi2 pair sums",
                    &self.pipelines.psi_pairs,
                    m * m,
                    (side, side, 1),
                )
            }
            Some(_) => {
                let needed = ((n * m) as u32).div_ceil(ROW_GROUP);
                let groups = (needed.min(ROW_WRAP), needed.div_ceil(ROW_WRAP), 1);
                ("psi2 row sums", &self.pipelines.psi_rows, n * m, groups)
            }
        };
        let out_bytes = (outputs.max(1) * 16) as u64;
        self.check_binding("the Ψ2 sums", out_bytes)?;
        self.check_groups("the Ψ2 sums' dispatch", groups)?;
        let mut buffers = self.psi_inputs(factors, w)?;
        let (output, readback) = self.output_and_readback(label, out_bytes);
        buffers.push(output.clone());
        if outputs > 0 {
            let refs: Vec<&wgpu::Buffer> = buffers.iter().collect();
            self.record_pass(encoder, label, pipeline, &refs, groups);
        }
        self.device
            .copy(encoder, (&output, 0), (&readback, 0), out_bytes);
        Ok(readback)
    }

    /// The buffers both entry points bind before their output: dims, B (row-major), (h, pref)
    /// per row, z_w, and W (row-major; one zero value when absent).
    fn psi_inputs(
        &self,
        factors: &Psi2Factors,
        w: Option<&DMatrix<f64>>,
    ) -> Result<Vec<wgpu::Buffer>, GpuError> {
        self.check_alive()?;
        let (n, m) = factors.b.shape();
        assert_eq!(
            (factors.h.len(), factors.pref.len(), factors.zw.len()),
            (n, n, m),
            "one h and pref per row, one z_w per inducing point"
        );
        for (what, bytes) in [
            ("the Ψ2 factors", n * m * 8),
            ("the Ψ2 pairs' Δ² and W", m * m * 8),
        ] {
            self.check_binding(what, bytes as u64)?;
        }
        let storage = wgpu::BufferUsages::STORAGE;
        // Row-major head/tail pairs of an f64 matrix.
        let row_major = |x: &DMatrix<f64>| double_float_bytes(x.transpose().iter().copied());
        // Exponents far below e^−87 give 0 on the device either way; clamping keeps B inside
        // float32's range (a head of −inf would make the double-float sums NaN).
        let b = factors.b.map(|v| v.max(-1e4));
        let rows = double_float_bytes(
            factors
                .h
                .iter()
                .zip(factors.pref.iter())
                .flat_map(|(&h, &p)| [h, p]),
        );
        let zw = &factors.zw;
        let dz2 = DMatrix::from_fn(m, m, |i, j| (zw[i] - zw[j]).powi(2));
        Ok(vec![
            self.upload("psi2 dims", &dims(n, m), wgpu::BufferUsages::UNIFORM),
            self.upload("psi2 b", &row_major(&b), storage),
            self.upload("psi2 rows", &rows, storage),
            self.upload("psi2 dz2", &row_major(&dz2), storage),
            // Absent, W is one zero double-float (a binding of vec2 needs 8 bytes).
            self.upload(
                "psi2 w",
                &w.map(row_major).unwrap_or_else(|| vec![0; 8]),
                storage,
            ),
        ])
    }
}
