//! Every call that costs the GPU engine time outside the kernels, counted: submissions, blocking
//! waits, buffers and bind groups created, bytes written to the device and read back. The
//! device and queue are reachable only through [`CountedDevice`], so no call can bypass the
//! count (there is no `Deref` to the raw device), and a run reports its steady state from these
//! numbers (`gpu.steady_state` in result.json) — the structure of the engine checked without a
//! GPU, on lavapipe, by a test.

use std::ops::Sub;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// What crossed between host and device, summed over some span of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceTraffic {
    /// Command buffers handed to the queue (`queue.submit` calls).
    pub submissions: u64,
    /// Times the host blocked until the device had finished (natively `device.poll(Wait)`).
    pub blocking_waits: u64,
    pub buffers_created: u64,
    pub bind_groups_created: u64,
    /// Bytes written through the queue (`queue.write_buffer`).
    pub bytes_uploaded: u64,
    /// Bytes of mapped buffers read by the host.
    pub bytes_read_back: u64,
    /// Compute dispatches recorded (kernel passes: item 3's "one kernel pass over all slots of
    /// a batch" is this count not growing with the slots).
    #[serde(default)]
    pub dispatches: u64,
    /// Buffer-to-buffer copies recorded (each a command on the device's queue, like a
    /// dispatch: what keeping a batch's values in its own buffers saves).
    #[serde(default)]
    pub copies: u64,
    /// Read-back buffers mapped for the host (each a wait on its own signal in the browser).
    #[serde(default)]
    pub mappings: u64,
}

impl DeviceTraffic {
    /// The traffic of both spans together.
    pub fn plus(self, other: Self) -> Self {
        Self {
            submissions: self.submissions + other.submissions,
            blocking_waits: self.blocking_waits + other.blocking_waits,
            buffers_created: self.buffers_created + other.buffers_created,
            bind_groups_created: self.bind_groups_created + other.bind_groups_created,
            bytes_uploaded: self.bytes_uploaded + other.bytes_uploaded,
            bytes_read_back: self.bytes_read_back + other.bytes_read_back,
            dispatches: self.dispatches + other.dispatches,
            copies: self.copies + other.copies,
            mappings: self.mappings + other.mappings,
        }
    }
}

impl Sub for DeviceTraffic {
    type Output = Self;

    /// The traffic between two readings of the same counters (`later − earlier`).
    fn sub(self, earlier: Self) -> Self {
        Self {
            submissions: self.submissions - earlier.submissions,
            blocking_waits: self.blocking_waits - earlier.blocking_waits,
            buffers_created: self.buffers_created - earlier.buffers_created,
            bind_groups_created: self.bind_groups_created - earlier.bind_groups_created,
            bytes_uploaded: self.bytes_uploaded - earlier.bytes_uploaded,
            bytes_read_back: self.bytes_read_back - earlier.bytes_read_back,
            dispatches: self.dispatches - earlier.dispatches,
            copies: self.copies - earlier.copies,
            mappings: self.mappings - earlier.mappings,
        }
    }
}

/// A run's GPU traffic over its iterations after the first (the warm-up, which creates the
/// resident buffers): result.json's `gpu.steady_state`. Only iterations that ran on the GPU
/// from start to end count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SteadyState {
    pub iterations: u64,
    /// (restart, variable) evaluations in those iterations.
    pub variable_evaluations: u64,
    #[serde(flatten)]
    pub traffic: DeviceTraffic,
}

impl SteadyState {
    /// Adds one iteration of `evaluations` evaluations that caused `traffic`.
    pub fn add_iteration(&mut self, evaluations: usize, traffic: DeviceTraffic) {
        self.iterations += 1;
        self.variable_evaluations += evaluations as u64;
        self.traffic = self.traffic.plus(traffic);
    }

    /// `count` / iterations (0 before any iteration).
    pub fn per_iteration(&self, count: u64) -> f64 {
        count as f64 / self.iterations.max(1) as f64
    }

    /// `count` / (restart, variable) evaluations (0 before any).
    pub fn per_evaluation(&self, count: u64) -> f64 {
        count as f64 / self.variable_evaluations.max(1) as f64
    }
}

/// result.json's `gpu`: how the GPU engine behaved (present when a GPU computed).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuReport {
    pub steady_state: SteadyState,
}

/// Running totals since the device was opened (atomics: the native pool's threads share one
/// device).
#[derive(Debug, Default)]
struct Counters {
    submissions: AtomicU64,
    blocking_waits: AtomicU64,
    buffers_created: AtomicU64,
    bind_groups_created: AtomicU64,
    bytes_uploaded: AtomicU64,
    bytes_read_back: AtomicU64,
    dispatches: AtomicU64,
    copies: AtomicU64,
    mappings: AtomicU64,
}

/// A wgpu device and its queue, with every costly call counted.
#[derive(Debug)]
pub(super) struct CountedDevice {
    device: wgpu::Device,
    queue: wgpu::Queue,
    counters: Counters,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

impl CountedDevice {
    pub(super) fn new(device: wgpu::Device, queue: wgpu::Queue) -> Self {
        Self {
            device,
            queue,
            counters: Counters::default(),
        }
    }

    /// The totals so far.
    pub(super) fn traffic(&self) -> DeviceTraffic {
        let c = &self.counters;
        let read = |a: &AtomicU64| a.load(Ordering::Relaxed);
        DeviceTraffic {
            submissions: read(&c.submissions),
            blocking_waits: read(&c.blocking_waits),
            buffers_created: read(&c.buffers_created),
            bind_groups_created: read(&c.bind_groups_created),
            bytes_uploaded: read(&c.bytes_uploaded),
            bytes_read_back: read(&c.bytes_read_back),
            dispatches: read(&c.dispatches),
            copies: read(&c.copies),
            mappings: read(&c.mappings),
        }
    }

    /// The device, for what is made once when it opens (shader modules, pipelines) and for the
    /// uncounted queries (limits, error scopes).
    pub(super) fn setup(&self) -> &wgpu::Device {
        &self.device
    }

    pub(super) fn create_buffer(&self, descriptor: &wgpu::BufferDescriptor) -> wgpu::Buffer {
        bump(&self.counters.buffers_created, 1);
        self.device.create_buffer(descriptor)
    }

    pub(super) fn create_bind_group(
        &self,
        descriptor: &wgpu::BindGroupDescriptor,
    ) -> wgpu::BindGroup {
        bump(&self.counters.bind_groups_created, 1);
        self.device.create_bind_group(descriptor)
    }

    pub(super) fn create_command_encoder(&self, label: &str) -> wgpu::CommandEncoder {
        self.device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) })
    }

    pub(super) fn write_buffer(&self, buffer: &wgpu::Buffer, offset: u64, bytes: &[u8]) {
        bump(&self.counters.bytes_uploaded, bytes.len() as u64);
        self.queue.write_buffer(buffer, offset, bytes);
    }

    pub(super) fn submit(&self, encoder: wgpu::CommandEncoder) -> wgpu::SubmissionIndex {
        bump(&self.counters.submissions, 1);
        self.queue.submit([encoder.finish()])
    }

    /// Blocks until `submission` has finished, at most `timeout`.
    #[cfg(not(target_arch = "wasm32"))]
    pub(super) fn wait(
        &self,
        submission: wgpu::SubmissionIndex,
        timeout: std::time::Duration,
    ) -> Result<(), wgpu::PollError> {
        bump(&self.counters.blocking_waits, 1);
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(submission),
                timeout: Some(timeout),
            })
            .map(|_| ())
    }

    /// Records `count` compute dispatches recorded into a command encoder.
    pub(super) fn note_dispatches(&self, count: usize) {
        bump(&self.counters.dispatches, count as u64);
    }

    /// Records the copy of `bytes` from `source` at byte `from` to `destination` at byte `to`
    /// into `encoder`, counted.
    pub(super) fn copy(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        (source, from): (&wgpu::Buffer, u64),
        (destination, to): (&wgpu::Buffer, u64),
        bytes: u64,
    ) {
        bump(&self.counters.copies, 1);
        encoder.copy_buffer_to_buffer(source, from, destination, to, bytes);
    }

    /// Records a read-back buffer mapped for the host.
    pub(super) fn note_mapping(&self) {
        bump(&self.counters.mappings, 1);
    }

    /// Records `bytes` read by the host from a mapped buffer.
    pub(super) fn note_read(&self, bytes: usize) {
        bump(&self.counters.bytes_read_back, bytes as u64);
    }

    /// Test hook: destroys the device as a driver reset would.
    pub(super) fn destroy(&self) {
        self.device.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn traffic_subtracts_and_adds_field_by_field() {
        let a = DeviceTraffic {
            submissions: 5,
            blocking_waits: 4,
            buffers_created: 3,
            bind_groups_created: 9,
            bytes_uploaded: 100,
            bytes_read_back: 70,
            dispatches: 12,
            copies: 8,
            mappings: 4,
        };
        let b = DeviceTraffic {
            submissions: 2,
            blocking_waits: 1,
            buffers_created: 3,
            bind_groups_created: 0,
            bytes_uploaded: 40,
            bytes_read_back: 7,
            dispatches: 5,
            copies: 2,
            mappings: 1,
        };
        let d = a - b;
        assert_eq!(
            d,
            DeviceTraffic {
                submissions: 3,
                blocking_waits: 3,
                buffers_created: 0,
                bind_groups_created: 9,
                bytes_uploaded: 60,
                bytes_read_back: 63,
                dispatches: 7,
                copies: 6,
                mappings: 3,
            }
        );
        assert_eq!(d.plus(b), a);
    }
}
