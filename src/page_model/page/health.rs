//! The worker's health as the page sees it: the backend it reported, whether it died, and when it
//! last said anything (for the watchdog).

use crate::worker::protocol::ComputeBackend;

/// What the page knows about the worker's compute backend.
#[derive(Debug, Clone, PartialEq)]
pub enum BackendState {
    /// The worker has not answered the ping yet.
    Probing,
    Known {
        backend: ComputeBackend,
        /// The WebGPU adapter the browser granted (described), whether or not it computes.
        adapter: Option<String>,
        /// Why the adapter is not computing, when there is one and it is not.
        note: Option<String>,
        /// The run left the GPU (it failed) and goes on on the CPU.
        switched: bool,
    },
    /// The worker failed to start or died.
    Unavailable,
}

/// The worker's health: its backend, whether it died, and the watchdog's clock.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerHealth {
    pub backend: BackendState,
    /// Whether the worker died and must be restarted.
    pub dead: bool,
    /// When the worker last sent anything (ms since the epoch), for the watchdog.
    pub(super) last_message_ms: f64,
}

impl WorkerHealth {
    /// A worker starting at `now_ms`.
    pub(super) fn new(now_ms: f64) -> Self {
        Self {
            backend: BackendState::Probing,
            dead: false,
            last_message_ms: now_ms,
        }
    }

    /// Restarts the watchdog's clock: the worker spoke, or a request that expects answers was
    /// sent, at `now_ms`.
    pub(super) fn mark_alive(&mut self, now_ms: f64) {
        self.last_message_ms = now_ms;
    }

    /// Seconds the worker has been silent at `now_ms` when it is `waiting` for answers and that
    /// is longer than `limit_seconds`; `None` when all is well.
    pub(super) fn silent_too_long(
        &self,
        now_ms: f64,
        limit_seconds: f64,
        waiting: bool,
    ) -> Option<f64> {
        let silent = (now_ms - self.last_message_ms) / 1000.0;
        (waiting && !self.dead && silent > limit_seconds).then_some(silent)
    }

    /// The worker answered the ping with where it computes.
    pub(super) fn pong(
        &mut self,
        backend: ComputeBackend,
        adapter: Option<String>,
        note: Option<String>,
        switched: bool,
    ) {
        self.backend = BackendState::Known {
            backend,
            adapter,
            note,
            switched,
        };
    }

    /// A fresh worker starts at `now_ms`.
    pub(super) fn restarted(&mut self, now_ms: f64) {
        self.dead = false;
        self.backend = BackendState::Probing;
        self.mark_alive(now_ms);
    }

    /// The worker died or was ended.
    pub(super) fn died(&mut self) {
        self.dead = true;
        self.backend = BackendState::Unavailable;
    }
}
