//! The half every batched device call shares: record each request into one command encoder inside
//! the error scopes, submit it once, ask for every request's read-back buffer to be mapped, and
//! later (natively after the one blocking wait; in the browser when the mappings resolve by
//! themselves) check the scopes and read the values. `predictions`, `resident` and `psi` add only
//! how a request is encoded and how its values are decoded.

use futures_channel::oneshot;

use super::{Gpu, GpuError, Mapping, ScopeVerdicts};

/// A request's read-back: the mappable buffer, the byte its results start at and how many bytes
/// they take. Requests may share one buffer (each its own range): it is mapped once.
pub(super) trait Readback {
    fn readback(&self) -> (&wgpu::Buffer, usize, usize);
}

/// The distinct buffers of `pending`'s read-backs, each with the bytes up to the end of the last
/// range in it (what is mapped), in order of first appearance.
fn mapped<P: Readback>(pending: &[P]) -> Vec<(&wgpu::Buffer, usize)> {
    let mut buffers: Vec<(&wgpu::Buffer, usize)> = Vec::new();
    for p in pending {
        let (buffer, first, bytes) = p.readback();
        match buffers.iter_mut().find(|(b, _)| *b == buffer) {
            Some((_, end)) => *end = (*end).max(first + bytes),
            None => buffers.push((buffer, first + bytes)),
        }
    }
    buffers
}

/// Requests recorded into one submission whose read-backs are being mapped
/// ([`Gpu::submit_each`]); [`Submitted::read`] gives each one's values.
pub(super) struct Submitted<P> {
    pending: Vec<P>,
    /// The signal of each read-back buffer's mapping, in [`mapped`]'s order.
    waits: Vec<oneshot::Receiver<Result<(), wgpu::BufferAsyncError>>>,
    /// The verdicts of the submission's error scopes.
    scopes: ScopeVerdicts,
    #[cfg(not(target_arch = "wasm32"))]
    submission: wgpu::SubmissionIndex,
}

impl Gpu {
    /// Records request k of `requests` with `encode(encoder, k, request)` into one command
    /// encoder labelled `label` ([`Gpu::submit_all`]).
    pub(super) fn submit_each<R, P: Readback>(
        &self,
        label: &str,
        requests: &[R],
        mut encode: impl FnMut(&mut wgpu::CommandEncoder, usize, &R) -> Result<P, GpuError>,
    ) -> Result<Submitted<P>, GpuError> {
        self.submit_all(label, |encoder| {
            requests
                .iter()
                .enumerate()
                .map(|(k, request)| encode(encoder, k, request))
                .collect()
        })
    }

    /// Records a batch with `record` (which returns each request's read-back) into one command
    /// encoder labelled `label`, inside the validation and out-of-memory scopes, submits it and
    /// asks for every read-back to be mapped. Nothing is submitted when recording fails.
    pub(super) fn submit_all<P: Readback>(
        &self,
        label: &str,
        record: impl FnOnce(&mut wgpu::CommandEncoder) -> Result<Vec<P>, GpuError>,
    ) -> Result<Submitted<P>, GpuError> {
        self.check_alive()?;
        let scopes = self.open_scopes();
        let mut encoder = self.device.create_command_encoder(label);
        let pending = match record(&mut encoder) {
            Ok(pending) => pending,
            Err(e) => {
                // The scopes are popped (their verdicts unread): nothing was submitted.
                drop(scopes.close());
                return Err(e);
            }
        };
        let submission = self.device.submit(encoder);
        // The browser needs no submission index: its mappings resolve by themselves.
        #[cfg(target_arch = "wasm32")]
        let _ = submission;
        let scopes = scopes.close();
        let waits = self.request_mapping(&mapped(&pending)).waits;
        Ok(Submitted {
            pending,
            waits,
            scopes,
            #[cfg(not(target_arch = "wasm32"))]
            submission,
        })
    }
}

impl<P: Readback> Submitted<P> {
    /// Each request with its read-back values, in order, once the device has finished them
    /// (natively one blocking wait; in the browser the worker's event loop runs meanwhile). A
    /// device error caught by the scopes, or a mapping that fails, is the error.
    pub(super) async fn read(self, gpu: &Gpu) -> Result<Vec<(P, Vec<f32>)>, GpuError> {
        #[cfg(not(target_arch = "wasm32"))]
        gpu.wait(self.submission.clone())?;
        self.scopes.check().await?;
        let buffers = mapped(&self.pending);
        let values = {
            let mapping = Mapping {
                buffers: buffers.clone(),
                waits: self.waits,
            };
            gpu.read_mapping(mapping).await?
        };
        // Each request's range of its buffer's values.
        let places: Vec<(usize, std::ops::Range<usize>)> = self
            .pending
            .iter()
            .map(|p| {
                let (buffer, first, bytes) = p.readback();
                let owner = buffers
                    .iter()
                    .position(|(b, _)| *b == buffer)
                    .expect("every read-back buffer is mapped");
                (owner, first / 4..(first + bytes) / 4)
            })
            .collect();
        Ok(self
            .pending
            .into_iter()
            .zip(places)
            .map(|(p, (owner, range))| (p, values[owner][range].to_vec()))
            .collect())
    }
}

/// One dispatch: the pipeline, its buffers at bindings 0, 1, … and its workgroups.
pub(super) type Step<'a> = (
    &'a wgpu::ComputePipeline,
    Vec<wgpu::Buffer>,
    (u32, u32, u32),
);
