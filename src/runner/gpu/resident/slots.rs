//! The slots that hold variables' states on the device between evaluations: which state each
//! holds, when it is read back (the sync budget), and holding a variable there.

use super::*;

/// How long the host's copy of a held state may lag the device's at least: a slot's state is
/// read back with its evaluation when this long has passed since the last read and the reads
/// stay within [`SYNC_BUDGET_BYTES`] per evaluation, and at the next evaluation again when the
/// copy read never reached the variable (its step was not applied). A host-run final bound reads
/// the current state itself ([`Gpu::held_state`]); a checkpoint or a given-up device continues
/// from the copy.
pub const SYNC_SECONDS: f64 = 2.0;

/// Bytes per evaluation that the state reads may average over a slot's evaluations (issue 34
/// item 6: at most 4 KiB read back per variable per iteration in all; an evaluation itself reads
/// 4·(30 + 2W) bytes). A state of q(v) at M = 400 (5.1 MB) or the paper's encoder with its
/// moments (0.8 MB) is then read every 2 500 or 400 evaluations (or 2 s, when longer).
pub const SYNC_BUDGET_BYTES: usize = 2048;

/// Whether a slot's state of `state_bytes` is due to be read back with this evaluation: `elapsed`
/// seconds and `unsynced` evaluations (this one counted) since the last read, at least `sync`
/// seconds and enough evaluations to pay for it at `budget` bytes each.
pub(super) fn sync_due(
    elapsed: f64,
    sync: f64,
    unsynced: usize,
    budget: usize,
    state_bytes: usize,
) -> bool {
    elapsed >= sync && unsynced.saturating_mul(budget) >= state_bytes
}

/// Batches a slot may go unused before it is freed for another variable's q(v) (a finished
/// restart's; a variable that comes back after that starts from its own copy).
pub(super) const IDLE_BATCHES: u64 = 4096;

/// Which resident slot holds each variable's q(v) and at which versions (natural-step counts):
/// the device's side of [`crate::gp::gp_cde::PosteriorHolding`].
#[derive(Debug, Default)]
pub(in crate::runner::gpu) struct PosteriorSlots {
    by_key: std::collections::HashMap<u64, SlotRecord>,
    free: Vec<usize>,
    next_slot: usize,
    /// Keys are `key_base + n`, the base random per device (a key carried over from another
    /// process by a resumed run is then unknown here, never another variable's).
    key_base: u64,
    next_key: u64,
    batches: u64,
    /// [`SYNC_SECONDS`] and [`SYNC_BUDGET_BYTES`] unless a test set others ([`Gpu::set_sync`]).
    sync: Option<(f64, usize)>,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct SlotRecord {
    pub(super) slot: usize,
    /// What it holds (q(v) is M × M, Z M × D, the encoder's P weights).
    pub(super) shape: StateShape,
    /// The versions of the current state, of the stepped one waiting to be committed, and of the
    /// one before the current.
    pub(super) current: usize,
    pub(super) next: Option<usize>,
    pub(super) previous: Option<usize>,
    pub(super) last_batch: u64,
    /// When the current state was last read back (seconds, `crate::base::clock`), and its version.
    pub(super) synced_at: f64,
    pub(super) synced_version: usize,
    /// Evaluations since then.
    pub(super) unsynced: usize,
    /// The host's [`crate::gp::gp_cde::GpCdeModel::parameter_edits`] when the device last
    /// took its hyperparameters.
    pub(super) parameter_edits: u64,
}

impl SlotRecord {
    /// The change that makes `version` current, if this slot holds it.
    pub(super) fn change_to(&self, version: usize) -> Option<StateChange> {
        if self.current == version {
            Some(StateChange::Keep)
        } else if self.next == Some(version) {
            Some(StateChange::Commit)
        } else if self.previous == Some(version) {
            Some(StateChange::Restore)
        } else {
            None
        }
    }

    /// The record after `change` made `version` current.
    pub(super) fn changed(mut self, version: usize, change: StateChange) -> Self {
        match change {
            StateChange::Keep => {}
            StateChange::Commit => {
                self.previous = Some(self.current);
                self.current = version;
                self.next = None;
            }
            StateChange::Restore => {
                self.current = version;
                self.next = None;
            }
        }
        self
    }
}

/// Where an evaluation of a held q(v) and Z runs ([`Gpu::hold_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldSlot {
    /// The variable's key (new when it had none or one this device does not know).
    pub key: u64,
    /// The resident slot of its q(v) ([`ResidentRequest::slot`]).
    pub slot: usize,
    /// What becomes of its states first ([`ResidentRequest::before`]).
    pub before: StateChange,
    /// Read the state back with the evaluation ([`ResidentRequest::read_current`]).
    pub read_current: bool,
    /// Write the host's hyperparameters over the slot's first ([`ParameterStep::upload`]): the
    /// host changed them since the device last took them.
    pub upload_parameters: bool,
}

impl Gpu {
    /// Starts a batch of held evaluations: frees the slots no evaluation used for
    /// [`IDLE_BATCHES`] batches.
    pub fn begin_held_batch(&self) {
        let mut slots = self.posterior_slots();
        slots.batches += 1;
        let now = slots.batches;
        let idle: Vec<u64> = slots
            .by_key
            .iter()
            .filter(|(_, r)| now - r.last_batch > IDLE_BATCHES)
            .map(|(&k, _)| k)
            .collect();
        for key in idle {
            if let Some(r) = slots.by_key.remove(&key) {
                slots.free.push(r.slot);
            }
        }
    }

    /// The slot for evaluating the q(v) and Z of a variable at version `version` (its natural
    /// steps) that this device holds under `key` (as its current, stepped or previous state), or
    /// is given now from `host` (the variable's own copy, uploaded when the device does not hold
    /// that version: a new variable, a key from another process, a slot freed while idle).
    /// `host_synced` is the version of that copy: when it is older than the last one read back,
    /// that read never reached the variable and is done again. The records change here, before
    /// the submission: a batch that then fails gives the device up for good, records and all.
    /// The error is `host`'s P failing to factorise on upload.
    pub fn hold_state(
        &self,
        key: Option<u64>,
        version: usize,
        host: ResidentView,
        host_synced: usize,
        parameter_edits: u64,
    ) -> Result<HeldSlot, CholeskyError> {
        let mut slots = self.posterior_slots();
        let batch = slots.batches;
        let now = crate::base::clock::now_seconds();
        let (m, d) = host.z.shape();
        let shape = StateShape {
            m,
            d,
            encoder: host.encoder.map_or(0, Encoder::param_count),
            parameters: host.parameters.values.len(),
        };
        let known = key
            .and_then(|k| slots.by_key.get(&k).copied().map(|r| (k, r)))
            .filter(|(_, r)| r.shape == shape)
            .and_then(|(k, r)| Some((k, r, r.change_to(version)?)));
        let (key, mut record, before) = match known {
            Some((k, r, change)) => (k, r.changed(version, change), change),
            None => {
                let key = match key {
                    Some(k) if slots.by_key.contains_key(&k) => k,
                    _ => {
                        if slots.key_base == 0 {
                            // A key only names a cache entry (no result depends on it), so the
                            // standard library's per-process random hash seed serves.
                            use std::hash::{BuildHasher, Hasher};
                            let seed = std::collections::hash_map::RandomState::new()
                                .build_hasher()
                                .finish();
                            slots.key_base = seed | 1;
                        }
                        slots.next_key += 1;
                        slots.key_base.wrapping_add(slots.next_key)
                    }
                };
                let slot = match slots.by_key.get(&key) {
                    Some(r) => r.slot,
                    None => slots.free.pop().unwrap_or_else(|| {
                        slots.next_slot += 1;
                        slots.next_slot - 1
                    }),
                };
                self.upload_state(slot, host)?;
                let record = SlotRecord {
                    slot,
                    shape,
                    current: version,
                    next: None,
                    previous: None,
                    last_batch: batch,
                    synced_at: now,
                    synced_version: version,
                    unsynced: 0,
                    parameter_edits,
                };
                (key, record, StateChange::Keep)
            }
        };
        let (sync, budget) = slots.sync.unwrap_or((SYNC_SECONDS, SYNC_BUDGET_BYTES));
        record.unsynced += 1;
        let state_bytes = (state_words(shape.m) + held_words(shape)) * 4;
        let due = sync_due(
            now - record.synced_at,
            sync,
            record.unsynced,
            budget,
            state_bytes,
        );
        let read_current =
            due || (host_synced < record.synced_version && record.synced_version <= version);
        if read_current {
            record.synced_at = now;
            record.synced_version = version;
            record.unsynced = 0;
        }
        record.last_batch = batch;
        let upload_parameters = record.parameter_edits != parameter_edits;
        record.parameter_edits = parameter_edits;
        slots.by_key.insert(key, record);
        Ok(HeldSlot {
            key,
            slot: record.slot,
            before,
            read_current,
            upload_parameters,
        })
    }

    /// Test hook: when the host's copy of a held state is refreshed ([`SYNC_SECONDS`] and
    /// [`SYNC_BUDGET_BYTES`] unless set), so that a test can have a copy that lags for certain
    /// (infinite seconds: read back only when a read never reached the variable) or one read
    /// with every evaluation (0 seconds, an unbounded budget), whatever the machine's speed.
    pub fn set_sync(&self, seconds: f64, budget_bytes: usize) {
        self.posterior_slots().sync = Some((seconds, budget_bytes));
    }

    /// Records the outcome of `key`'s evaluation at `version`: its stepped state (version + 1)
    /// waits to be committed when `stepped`, else nothing waits.
    pub fn held_stepped(&self, key: u64, version: usize, stepped: bool) {
        if let Some(r) = self.posterior_slots().by_key.get_mut(&key) {
            if r.current == version {
                r.next = stepped.then_some(version + 1);
            }
        }
    }

    /// The q(v), Z and Z's moments this device holds for `key` at `version` (made current first
    /// when it is the stepped or the previous state), read back: for the host's work on a
    /// variable whose own copy lags (a final bound). None when the device does not hold that
    /// version (the caller then uses the variable's copy).
    pub async fn held_state(
        &self,
        key: u64,
        version: usize,
    ) -> Result<Option<ResidentState>, GpuError> {
        let (record, change) = {
            let mut slots = self.posterior_slots();
            let Some(r) = slots.by_key.get_mut(&key) else {
                return Ok(None);
            };
            let Some(change) = r.change_to(version) else {
                return Ok(None);
            };
            *r = r.changed(version, change);
            (*r, change)
        };
        self.read_resident(record.slot, record.shape, change)
            .await
            .map(Some)
    }

    pub(super) fn posterior_slots(&self) -> std::sync::MutexGuard<'_, PosteriorSlots> {
        self.posteriors
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
