//! The data held on the device (issue 34 item 1): uploaded once per data set, so that each
//! iteration's resident evaluations upload their minibatch's row indices (b words) instead of
//! its rows and targets (b·(D + 1) words), and `gather.wgsl` forms x and y there.

use super::Upload;
use nalgebra::DMatrix;

use super::submission::Step;
use super::{Gpu, GpuError};

/// Invocations per workgroup of `gather.wgsl`.
const GROUP: u32 = 64;

/// Which data the device holds: its shape and a hash of every value's bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct DataFingerprint {
    rows: usize,
    columns: usize,
    hash: u64,
}

impl DataFingerprint {
    fn of(data: &DMatrix<f64>) -> Self {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for v in data.iter() {
            v.to_bits().hash(&mut hasher);
        }
        Self {
            rows: data.nrows(),
            columns: data.ncols(),
            hash: hasher.finish(),
        }
    }
}

fn storage() -> wgpu::BufferUsages {
    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST
}

/// `gather.wgsl`'s compiled entry point.
pub(super) fn pipeline(device: &wgpu::Device) -> wgpu::ComputePipeline {
    super::compute_pipeline(device, "gather.wgsl", include_str!("gather.wgsl"), "gather")
}

impl Gpu {
    /// Holds `data` (N × D) on the device in float32, row-major, for the resident evaluations'
    /// minibatches ([`super::ResidentRequest::rows`]): uploaded when it is not the data held
    /// already (its values are hashed each call: O(N·D), small beside an iteration). False when
    /// the data does not fit one storage binding (the requests then upload their rows).
    pub fn hold_data(&self, data: &DMatrix<f64>) -> Result<bool, GpuError> {
        self.check_alive()?;
        let bytes = (data.len() * 4) as u64;
        let limit = self.device.setup().limits().max_storage_buffer_binding_size;
        if bytes > limit || data.nrows() > u32::MAX as usize {
            return Ok(false);
        }
        let fingerprint = DataFingerprint::of(data);
        let mut held = self
            .held_data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *held != Some(fingerprint) {
            let (n, d) = data.shape();
            let row_major = (0..n * d).map(|k| data[(k / d, k % d)]);
            self.resident_written(
                Upload::EveryCall,
                "held data",
                0,
                &super::f32_bytes(row_major),
                storage(),
            );
            *held = Some(fingerprint);
        }
        Ok(true)
    }

    /// The passes that gather each slot's minibatch: slot k's rows `rows[k]` of the held data
    /// into `x` (b × D per slot) and their column that is its latent input (`slot_words`' second
    /// word: the variable's own) into `y` (b per slot), one dispatch over all slots each; the
    /// indices are uploaded here (in scratch slot `scratch`). Panics if no data is held, a row
    /// is outside it or the slots' minibatches differ in size.
    pub(super) fn plan_gather(
        &self,
        scratch: usize,
        rows: &[&[usize]],
        [x, y, slot_words]: [&wgpu::Buffer; 3],
    ) -> Result<Vec<Step<'_>>, GpuError> {
        let fingerprint = self
            .held_data
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .expect("the device holds the data (Gpu::hold_data)");
        let (n, d) = (fingerprint.rows, fingerprint.columns);
        let b = rows.first().map_or(0, |r| r.len());
        assert!(rows.iter().all(|r| r.len() == b), "one minibatch size");
        assert!(
            rows.iter().flat_map(|r| r.iter()).all(|&r| r < n),
            "a row outside the held data"
        );
        let data = self.resident("held data", 0, n * d * 4, storage());
        let indices: Vec<u8> = rows
            .iter()
            .flat_map(|r| r.iter())
            .flat_map(|&r| (r as u32).to_le_bytes())
            .collect();
        let indices = self.resident_written(
            Upload::EveryCall,
            "row indices",
            scratch,
            &indices,
            storage(),
        );
        let slots = rows.len() as u32;
        let pass = |role: &'static str, whole: bool, out: &wgpu::Buffer, per_slot: usize| {
            let words = [b, d, usize::from(whole), b, per_slot, 0, 0, 0].map(|w| w as u32);
            let dims = self.resident_written(
                Upload::OnChange,
                role,
                scratch,
                &super::uniform_words(&words),
                wgpu::BufferUsages::UNIFORM,
            );
            let groups = ((per_slot.max(1) as u32).div_ceil(GROUP), slots, 1);
            self.check_groups("gathering the minibatch", groups)?;
            Ok((
                &self.pipelines.gather,
                vec![
                    dims,
                    data.clone(),
                    indices.clone(),
                    out.clone(),
                    slot_words.clone(),
                ],
                groups,
            ))
        };
        Ok(vec![
            pass("gather dims: rows", true, x, b * d)?,
            pass("gather dims: targets", false, y, b)?,
        ])
    }
}
