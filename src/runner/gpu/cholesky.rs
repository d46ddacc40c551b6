//! Batched Cholesky factorisations on the device with the jitter ladder inside the shader, the
//! factors' inverses, and q(v)'s natural-gradient step built on them, in double-float
//! (`cholesky.wgsl`): the M × M algebra's building blocks for K_ZZ and for the natural step's
//! P = I + Λ (MODEL.md §11.3). The references are the CPU's f64
//! [`cholesky_jittered`](crate::gp::linalg::cholesky_jittered), which walks the same ladder, and
//! [`InducingPosterior::natural_step`](crate::gp::natgrad::InducingPosterior::natural_step). The
//! engine runs these kernels inside its resident evaluations (`resident.rs`), natively and in
//! the page; the batched entry points here serve the native tests and benches.

use nalgebra::DMatrix;
#[cfg(not(target_arch = "wasm32"))]
use nalgebra::DVector;

#[cfg(not(target_arch = "wasm32"))]
use super::GpuError;
use super::{uniform_words, Gpu};
use crate::gp::linalg::{CholeskyError, JitterPolicy};
// The batched entry points below are the native tests' and benches' way in; the engine reaches
// these kernels through `resident.rs`, in the page too.
#[cfg(not(target_arch = "wasm32"))]
use crate::gp::natgrad::InducingPosterior;
#[cfg(not(target_arch = "wasm32"))]
use crate::gp::svgp::NatGradStats;

/// The compiled entry points of `cholesky.wgsl`.
pub(super) struct CholeskyPipelines {
    begin: wgpu::ComputePipeline,
    fill: wgpu::ComputePipeline,
    diagonal: wgpu::ComputePipeline,
    panel: wgpu::ComputePipeline,
    trailing: wgpu::ComputePipeline,
    ladder: wgpu::ComputePipeline,
    invert: wgpu::ComputePipeline,
    covariance: wgpu::ComputePipeline,
    step_mean: wgpu::ComputePipeline,
}

impl CholeskyPipelines {
    pub(super) fn new(device: &wgpu::Device) -> Self {
        let source = [super::DOUBLE_FLOAT, include_str!("cholesky.wgsl")].concat();
        let compile = |entry| super::compute_pipeline(device, "cholesky.wgsl", &source, entry);
        CholeskyPipelines {
            begin: compile("factor_begin"),
            fill: compile("fill"),
            diagonal: compile("factor_diagonal"),
            panel: compile("factor_panel"),
            trailing: compile("factor_trailing"),
            ladder: compile("factor_ladder"),
            invert: compile("invert"),
            covariance: compile("covariance"),
            step_mean: compile("step_mean"),
        }
    }
}

/// Which of `cholesky.wgsl`'s two jobs a batch does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FactorJob {
    /// L Lᵀ = A + εI with the jitter ladder, and L⁻¹.
    Factor,
    /// q(v)'s natural step: P, its factor and inverse, S and m.
    NaturalStep,
}

/// Columns of L⁻¹ per workgroup (`cholesky.wgsl`'s `COLUMNS`).
const INVERSE_COLUMNS: u32 = 32;

/// Columns per block of the blocked factorisation (`cholesky.wgsl`'s `BLOCK`).
pub(super) const FACTOR_BLOCK: u32 = 32;

/// Entries per side of `cholesky.wgsl`'s trailing-update and `covariance` tiles.
const TILE: u32 = 16;

/// Invocations per workgroup of `cholesky.wgsl`'s passes.
const THREADS: u32 = 256;

/// The passes of `job` on a batch of `slots` matrices of size M = `m`, in order, each with its
/// workgroups (all bound to the same [dims, inputs, ladder, outputs]), every one over all
/// matrices of the batch at once:
/// - the first rung and status (a workgroup per matrix), the matrix copied or P assembled (an
///   invocation per entry);
/// - for each block k of [`FACTOR_BLOCK`] columns (k₀ = 32k, k₁ = min(k₀ + 32, M)): the diagonal
///   block L₁₁L₁₁ᵀ = A₁₁ (a workgroup per matrix), the panel L₂₁ = A₂₁L₁₁⁻ᵀ (an invocation per
///   row below), the trailing update A₂₂ ← A₂₂ − L₂₁L₂₁ᵀ (a workgroup per 16 × 16 tile of its
///   lower triangle);
/// - the ladder's later rungs where the first failed (a workgroup per matrix, idle otherwise);
/// - L⁻¹ by blocks of columns, and for the natural step S = XᵀX by 16 × 16 tiles and m = Sη₁ by
///   blocks of rows.
///
/// At M = 400 and D = 10 the factorisation's sequential part is 13 diagonal blocks of 32 (each
/// 32³/3 operations in one workgroup) and its first trailing update runs on 276·D workgroups, where
/// the unblocked factorisation ran (1/3)·400³ operations in D workgroups.
pub(super) fn factor_passes(
    pipelines: &CholeskyPipelines,
    job: FactorJob,
    m: usize,
    slots: usize,
) -> Vec<(&wgpu::ComputePipeline, (u32, u32, u32))> {
    let (m, slots) = (m as u32, slots as u32);
    let each = (slots, 1, 1);
    let entries = ((m * m).div_ceil(THREADS), slots, 1);
    let mut passes = vec![(&pipelines.begin, each), (&pipelines.fill, entries)];
    for block in 0..m.div_ceil(FACTOR_BLOCK) {
        passes.push((&pipelines.diagonal, each));
        let rest = m - ((block + 1) * FACTOR_BLOCK).min(m);
        if rest > 0 {
            let tiles = rest.div_ceil(TILE);
            passes.push((&pipelines.panel, (rest.div_ceil(THREADS), slots, 1)));
            passes.push((&pipelines.trailing, (tiles, tiles, slots)));
        }
    }
    passes.push((&pipelines.ladder, each));
    passes.push((&pipelines.invert, (m.div_ceil(INVERSE_COLUMNS), slots, 1)));
    if job == FactorJob::NaturalStep {
        let tiles = m.div_ceil(TILE);
        passes.extend([
            (&pipelines.covariance, (tiles, tiles, slots)),
            (&pipelines.step_mean, (m.div_ceil(THREADS), slots, 1)),
        ]);
    }
    passes
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
pub(super) fn two_words(v: f64) -> [f32; 2] {
    let head = v as f32;
    [head, (v - f64::from(head)) as f32]
}

/// Words per matrix in the factorisation's output: L, L⁻¹ (2 words per entry each) and 4 status
/// pairs (`factor_stride` in the shader).
pub(super) fn output_words(m: usize) -> usize {
    2 * (2 * m * m + 4)
}

/// Words per slot in the natural step's output: L, L⁻¹, the status, P, S, m and η₁
/// (`step_stride` in the shader).
pub(super) fn step_words(m: usize) -> usize {
    2 * (4 * m * m + 2 * m + 4)
}

/// The shader's `Dims` for `job`, with the natural step's γ and the factorisation's relative
/// jitter floor (the ladder starts at max(ε₀, floor · mean diag A); 0 leaves it at ε₀).
pub(super) fn dims_bytes(
    m: usize,
    slots: usize,
    job: FactorJob,
    gamma: f64,
    floor: f64,
) -> Vec<u8> {
    let [head, tail] = two_words(gamma);
    uniform_words(&[
        m as u32,
        slots as u32,
        1.0f32.to_bits(),
        u32::from(job == FactorJob::NaturalStep),
        head.to_bits(),
        tail.to_bits(),
        (floor as f32).to_bits(),
        0,
    ])
}

/// Little-endian double-float words of `values`.
pub(super) fn two_word_bytes(values: impl IntoIterator<Item = f64>) -> Vec<u8> {
    values
        .into_iter()
        .flat_map(two_words)
        .flat_map(f32::to_le_bytes)
        .collect()
}

/// Row-major values of a square matrix (the shader's layout).
#[cfg(not(target_arch = "wasm32"))]
fn row_major(a: &DMatrix<f64>) -> impl Iterator<Item = f64> + '_ {
    let m = a.nrows();
    (0..m * m).map(move |k| a[(k / m, k % m)])
}

/// The ladder's words for `slots` slots (each the same).
pub(super) fn ladder_bytes(policy: JitterPolicy, slots: usize) -> Vec<u8> {
    let [head, tail] = two_words(policy.initial);
    (0..slots)
        .flat_map(|_| [head, tail, policy.factor as f32, policy.max_attempts as f32])
        .flat_map(f32::to_le_bytes)
        .collect()
}

impl Gpu {
    /// For each A of `matrices` (all M × M, only the lower triangle read): L with
    /// L Lᵀ = A + ε I for the first rung ε of `policy` (ε₀, ε₀·factor, … as the CPU's
    /// [`cholesky_jittered`](crate::gp::linalg::cholesky_jittered)) whose pivots all stay > 0,
    /// and X = L⁻¹ by forward substitution (L X[:, c] = e_c), in double-float (about 2⁻⁴⁸ per
    /// operation), blocked (`factor_passes`), in one submission. The outer error is the device's;
    /// an inner one names the pivot that failed at the last rung, or a non-finite entry (found
    /// here, before anything is sent).
    ///
    /// Panics if the matrices differ in shape or are not square.
    #[cfg(not(target_arch = "wasm32"))]
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
        let passes = factor_passes(&self.pipelines.cholesky, FactorJob::Factor, m, slots);
        for (_, groups) in &passes {
            self.check_groups("the factorisations' dispatch", *groups)?;
        }
        // Row-major double-float words of each lower triangle (the upper one is not read).
        let matrices_bytes = two_word_bytes(sent.iter().flat_map(|a| {
            (0..m * m).map(move |k| {
                let (i, j) = (k / m, k % m);
                if j <= i {
                    a[(i, j)]
                } else {
                    0.0
                }
            })
        }));
        let storage = wgpu::BufferUsages::STORAGE;
        let inputs = [
            self.upload(
                "cholesky dims",
                &dims_bytes(m, slots, FactorJob::Factor, 0.0, 0.0),
                wgpu::BufferUsages::UNIFORM,
            ),
            self.upload("cholesky matrices", &matrices_bytes, storage),
            self.upload("cholesky ladder", &ladder_bytes(policy, slots), storage),
        ];
        let values = self.run_and_read("cholesky", &passes, &inputs, out_bytes)?;
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

impl Gpu {
    /// q(v)'s natural-gradient step for each (posterior, statistics) pair, all in one submission
    /// (`factor_passes`), in double-float — what [`InducingPosterior::natural_step`] computes in
    /// f64: P ← (1 − γ) P + γ (I + Λ) (both symmetrised), η₁ ← (1 − γ) η₁ + γ r, then
    /// S = P⁻¹ = L⁻ᵀ L⁻¹ from P's Cholesky factor (no jitter: P is a convex combination of
    /// positive definite matrices) and m = S η₁. The outer error is the device's; an inner one is
    /// a P that does not factorise (the posterior is then left as it was, as on the CPU).
    ///
    /// Panics if the pairs differ in size or the two lists in length.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn natural_steps(
        &self,
        posteriors: &[&InducingPosterior],
        stats: &[&NatGradStats],
        gamma: f64,
    ) -> Result<Vec<Result<InducingPosterior, CholeskyError>>, GpuError> {
        assert_eq!(
            posteriors.len(),
            stats.len(),
            "one set of statistics per posterior"
        );
        let Some(first) = posteriors.first() else {
            return Ok(Vec::new());
        };
        let m = first.len();
        assert!(
            posteriors.iter().all(|q| q.len() == m)
                && stats
                    .iter()
                    .all(|s| s.lambda.shape() == (m, m) && s.r.len() == m),
            "posteriors and statistics of one size"
        );
        let slots = posteriors.len();
        if m == 0 {
            return Ok(posteriors.iter().map(|q| Ok((*q).clone())).collect());
        }
        let out_bytes = (slots * step_words(m) * 4) as u64;
        self.check_binding("the natural steps' results", out_bytes)?;
        self.check_binding(
            "the natural steps' inputs",
            (slots * (2 * m * m + 2 * m) * 8) as u64,
        )?;
        let passes = factor_passes(&self.pipelines.cholesky, FactorJob::NaturalStep, m, slots);
        for (_, groups) in &passes {
            self.check_groups("the natural steps' dispatch", *groups)?;
        }
        // Non-finite statistics fail as on the CPU, with its error (no factorisation repairs them).
        let refused: Vec<Option<CholeskyError>> = posteriors
            .iter()
            .zip(stats)
            .map(|(q, st)| {
                let finite = [&q.precision, &st.lambda]
                    .iter()
                    .all(|x| x.iter().all(|v| v.is_finite()))
                    && [&q.eta1, &st.r]
                        .iter()
                        .all(|x| x.iter().all(|v| v.is_finite()));
                if finite {
                    None
                } else {
                    (*q).clone().natural_step(st, gamma).err()
                }
            })
            .collect();
        let inputs_bytes = two_word_bytes(posteriors.iter().zip(stats).flat_map(|(q, st)| {
            row_major(&q.precision)
                .chain(row_major(&st.lambda))
                .chain(q.eta1.iter().copied())
                .chain(st.r.iter().copied())
        }));
        let storage = wgpu::BufferUsages::STORAGE;
        let inputs = [
            self.upload(
                "natural step dims",
                &dims_bytes(m, slots, FactorJob::NaturalStep, gamma, 0.0),
                wgpu::BufferUsages::UNIFORM,
            ),
            self.upload("natural step inputs", &inputs_bytes, storage),
            self.upload(
                "natural step ladder",
                &ladder_bytes(JitterPolicy::exactly(0.0), slots),
                storage,
            ),
        ];
        let values = self.run_and_read("natural step", &passes, &inputs, out_bytes)?;
        if values.len() < slots * step_words(m) {
            return Err(GpuError::Readback(format!(
                "{} words read back for {slots} natural steps",
                values.len()
            )));
        }
        Ok(values
            .chunks_exact(step_words(m))
            .take(slots)
            .zip(refused)
            .map(|(words, refused)| {
                if let Some(error) = refused {
                    return Err(error);
                }
                decode(m, words, JitterPolicy::exactly(0.0))?;
                let value = |k: usize| f64::from(words[2 * k]) + f64::from(words[2 * k + 1]);
                let p = 2 * m * m + 4;
                let s = p + m * m;
                let mean = s + m * m;
                let eta = mean + m;
                let matrix =
                    |offset: usize| DMatrix::from_fn(m, m, |i, j| value(offset + i * m + j));
                Ok(InducingPosterior {
                    eta1: DVector::from_fn(m, |i, _| value(eta + i)),
                    precision: matrix(p),
                    mean: DVector::from_fn(m, |i, _| value(mean + i)),
                    cov: matrix(s),
                })
            })
            .collect())
    }
}

/// One matrix's factor, inverse and status from its output words (the first
/// [`output_words`] of them).
pub(super) fn decode(
    m: usize,
    words: &[f32],
    policy: JitterPolicy,
) -> Result<DeviceFactor, CholeskyError> {
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
#[cfg(not(target_arch = "wasm32"))]
fn first_non_finite(a: &DMatrix<f64>) -> Option<(usize, usize)> {
    let n = a.nrows();
    (0..n)
        .flat_map(|col| (col..n).map(move |row| (row, col)))
        .find(|&(row, col)| !a[(row, col)].is_finite())
}
