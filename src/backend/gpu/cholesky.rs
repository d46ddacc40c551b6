//! Batched Cholesky factorisations on the device with the jitter ladder inside the shader, and
//! the factors' inverses, in double-float (`cholesky.wgsl`): the M × M algebra's building block
//! for K_ZZ and for the natural-gradient step's P = I + Λ (MODEL.md §11.3). The reference is the
//! CPU's [`cholesky_jittered`](crate::gp::linalg::cholesky_jittered) in f64, which walks the same
//! ladder. Native only for now (the page does not run it yet, so it does not compile it).

use nalgebra::DMatrix;

use super::{uniform_words, Gpu, GpuError};
use crate::gp::linalg::{CholeskyError, JitterPolicy};

/// The compiled entry point of `cholesky.wgsl`.
pub(super) fn pipeline(device: &wgpu::Device) -> wgpu::ComputePipeline {
    let source = [super::DOUBLE_FLOAT, include_str!("cholesky.wgsl")].concat();
    super::compute_pipeline(device, "cholesky.wgsl", &source, "cholesky")
}

/// One matrix's factorisation on the device: L Lᵀ = A + ε I and L⁻¹, in f64 from double-float.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceFactor {
    pub l: DMatrix<f64>,
    pub l_inv: DMatrix<f64>,
    /// The jitter ε the device added (the first rung of the ladder that factorised).
    pub jitter: f64,
    /// Rungs that failed before it.
    pub escalations: usize,
}

/// An f64 value as a double-float's two words (head, tail): head + tail carries about 48 bits.
fn two_words(v: f64) -> [f32; 2] {
    let head = v as f32;
    [head, (v - f64::from(head)) as f32]
}

/// Words per matrix in the output: L, L⁻¹ (2 words per entry each) and 4 status pairs.
fn output_words(m: usize) -> usize {
    2 * (2 * m * m + 4)
}

/// The shader's `Dims`.
fn dims_bytes(m: usize, slots: usize) -> Vec<u8> {
    uniform_words(&[m as u32, slots as u32, 1.0f32.to_bits(), 0])
}

impl Gpu {
    /// For each A of `matrices` (all M × M, only the lower triangle read): L with
    /// L Lᵀ = A + ε I for the first rung ε of `policy` (ε₀, ε₀·factor, … as the CPU's
    /// [`cholesky_jittered`](crate::gp::linalg::cholesky_jittered)) whose pivots all stay > 0,
    /// and X = L⁻¹ by forward substitution (L X[:, c] = e_c), in double-float (about 2⁻⁴⁸ per
    /// operation), one workgroup per matrix, in one submission. The outer error is the device's;
    /// an inner one names the pivot that failed at the last rung, or a non-finite entry (found
    /// here, before anything is sent).
    ///
    /// Panics if the matrices differ in shape or are not square.
    pub fn cholesky_batch(
        &self,
        matrices: &[DMatrix<f64>],
        policy: JitterPolicy,
    ) -> Result<Vec<Result<DeviceFactor, CholeskyError>>, GpuError> {
        let Some(first) = matrices.first() else {
            return Ok(Vec::new());
        };
        let m = first.nrows();
        assert!(
            matrices.iter().all(|a| a.shape() == (m, m)),
            "square matrices of one size"
        );
        // A non-finite entry fails as on the CPU (no jitter repairs it); the others go on.
        let checked: Vec<Result<&DMatrix<f64>, CholeskyError>> = matrices
            .iter()
            .map(|a| match first_non_finite(a) {
                Some((row, col)) => Err(CholeskyError::NonFinite { size: m, row, col }),
                None => Ok(a),
            })
            .collect();
        let sent: Vec<&DMatrix<f64>> = checked
            .iter()
            .filter_map(|c| c.as_ref().ok())
            .copied()
            .collect();
        if m == 0 || sent.is_empty() {
            return Ok(checked
                .into_iter()
                .map(|c| {
                    c.map(|_| DeviceFactor {
                        l: DMatrix::zeros(m, m),
                        l_inv: DMatrix::zeros(m, m),
                        jitter: policy.initial,
                        escalations: 0,
                    })
                })
                .collect());
        }
        let slots = sent.len();
        let out_bytes = (slots * output_words(m) * 4) as u64;
        self.check_binding("the factors and their inverses", out_bytes)?;
        self.check_binding("the matrices to factorise", (slots * m * m * 8) as u64)?;
        self.check_groups("the factorisations' dispatch", (slots as u32, 1, 1))?;
        // Row-major double-float words of each lower triangle (the upper one is not read).
        let matrices_bytes: Vec<u8> = sent
            .iter()
            .flat_map(|a| {
                (0..m * m).map(move |k| {
                    let (i, j) = (k / m, k % m);
                    if j <= i {
                        a[(i, j)]
                    } else {
                        0.0
                    }
                })
            })
            .flat_map(two_words)
            .flat_map(f32::to_le_bytes)
            .collect();
        let ladder = two_words(policy.initial);
        let ladder_bytes: Vec<u8> = (0..slots)
            .flat_map(|_| {
                [
                    ladder[0],
                    ladder[1],
                    policy.factor as f32,
                    policy.max_attempts as f32,
                ]
            })
            .flat_map(f32::to_le_bytes)
            .collect();
        let storage = wgpu::BufferUsages::STORAGE;
        let inputs = [
            self.upload(
                "cholesky dims",
                &dims_bytes(m, slots),
                wgpu::BufferUsages::UNIFORM,
            ),
            self.upload("cholesky matrices", &matrices_bytes, storage),
            self.upload("cholesky ladder", &ladder_bytes, storage),
        ];
        let values = self.run_and_read(
            "cholesky",
            &self.pipelines.cholesky,
            &inputs,
            (slots as u32, 1, 1),
            out_bytes,
        )?;
        let decoded: Vec<_> = values
            .chunks_exact(output_words(m))
            .map(|words| decode(m, words, policy))
            .collect();
        if decoded.len() != slots {
            return Err(GpuError::Readback(format!(
                "{} factorisations read back for {slots} matrices",
                decoded.len()
            )));
        }
        let mut decoded = decoded.into_iter();
        Ok(checked
            .into_iter()
            .map(|c| c.and_then(|_| decoded.next().expect("one result per matrix sent")))
            .collect())
    }
}

/// One matrix's factor, inverse and status from its output words.
fn decode(m: usize, words: &[f32], policy: JitterPolicy) -> Result<DeviceFactor, CholeskyError> {
    let value = |k: usize| f64::from(words[2 * k]) + f64::from(words[2 * k + 1]);
    let status = 2 * m * m;
    let jitter = value(status);
    let escalations = words[2 * (status + 1)] as usize;
    if words[2 * (status + 1) + 1] != 0.0 {
        return Err(CholeskyError::NotPositiveDefinite {
            size: m,
            pivot: words[2 * (status + 2)] as usize,
            value: value(status + 3),
            jitter: jitter.max(policy.initial),
        });
    }
    // Row-major on the device, column-major here.
    let matrix = |offset: usize| DMatrix::from_fn(m, m, |i, j| value(offset + i * m + j));
    Ok(DeviceFactor {
        l: matrix(0),
        l_inv: matrix(m * m),
        jitter,
        escalations,
    })
}

/// Where `a`'s lower triangle holds a non-finite entry first (column by column), if it does.
fn first_non_finite(a: &DMatrix<f64>) -> Option<(usize, usize)> {
    let n = a.nrows();
    (0..n)
        .flat_map(|col| (col..n).map(move |row| (row, col)))
        .find(|&(row, col)| !a[(row, col)].is_finite())
}
