//! The run side of the page: where the run is, what it has shown so far (snapshots, curves, the
//! result), and what is kept to stop or continue it.

use crate::engine::{RunResult, Snapshot, Status};
use crate::page_model::History;
use crate::worker::protocol::{RunRequest, ToWorker};

/// Where the run is, from the page's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    Idle,
    /// Start was sent; the first snapshot has not arrived.
    Starting,
    Running,
    Paused,
    /// The run ended (its result says how: done, stopped or failed).
    Ended(Status),
}

impl RunState {
    /// Whether a run is starting, running or paused.
    pub fn active(self) -> bool {
        matches!(
            self,
            RunState::Starting | RunState::Running | RunState::Paused
        )
    }
}

/// The run: its state, what it showed, and its ids.
#[derive(Debug, Clone, PartialEq)]
pub struct RunModel {
    pub state: RunState,
    /// Compute workers of the current or last run (1: the worker computes alone).
    pub compute_workers: Option<usize>,
    /// Runs started on this page so far (a lesson's check waits for a run after its step's change).
    pub runs_started: u64,
    pub snapshot: Option<Snapshot>,
    /// Snapshots received during the current run (the end-to-end test reads it to check the rate).
    pub snapshots_seen: u64,
    /// A pause was asked for and the worker has not confirmed it yet (it reads requests between
    /// units of work, so inside a long fit the pause waits for the fit's end).
    pub pause_pending: bool,
    pub history: History,
    pub result: Option<RunResult>,
    /// Set when the result shown was loaded from a saved run record (its file name).
    pub record_file: Option<String>,
    /// The current run saved whole (`FromWorker::Saved`): if its worker dies, a fresh one can
    /// go on from here.
    pub saved_run: Option<String>,
    /// Id of the latest run started; messages about older runs are ignored.
    pub(super) seq: u64,
    /// The current run's latest `FromWorker::Checkpoint`: shown if the worker must be ended
    /// because it is inside a long unit of work when the user stops the run.
    checkpoint: Option<RunResult>,
    /// The user chose to go on with the saved run: sent once the fresh worker holds the data.
    continue_pending: bool,
}

impl RunModel {
    pub(super) fn new() -> Self {
        Self {
            state: RunState::Idle,
            compute_workers: None,
            runs_started: 0,
            snapshot: None,
            snapshots_seen: 0,
            pause_pending: false,
            history: History::default(),
            result: None,
            record_file: None,
            saved_run: None,
            seq: 0,
            checkpoint: None,
            continue_pending: false,
        }
    }

    /// Whether a run is starting, running or paused.
    pub fn active(&self) -> bool {
        self.state.active()
    }

    /// Whether `run_id` is the latest run (messages about older runs are ignored).
    pub(super) fn is_current(&self, run_id: u64) -> bool {
        run_id == self.seq
    }

    /// A new run id (messages about older runs are ignored from now on).
    fn next_id(&mut self) -> u64 {
        self.seq += 1;
        self.pause_pending = false;
        self.checkpoint = None;
        self.seq
    }

    /// What the last run or record showed goes (other data are coming).
    pub(super) fn clear_screen(&mut self) {
        self.history = History::default();
        self.result = None;
        self.record_file = None;
        self.snapshot = None;
        self.state = RunState::Idle;
    }

    /// A saved run record `file_name` is shown in place of a run.
    pub(super) fn show_record(&mut self, file_name: String, result: RunResult) {
        self.state = RunState::Idle;
        self.snapshot = None;
        self.history = History::default();
        self.result = Some(result);
        self.record_file = Some(file_name);
    }

    /// Starts a run of `request` (its run id is filled in here): what the last run showed goes.
    pub(super) fn start(&mut self, mut request: RunRequest) -> ToWorker {
        self.saved_run = None;
        self.result = None;
        self.record_file = None;
        self.snapshot = None;
        self.snapshots_seen = 0;
        self.history = History::default();
        self.state = RunState::Starting;
        self.runs_started += 1;
        request.run_id = self.next_id();
        ToWorker::Start(Box::new(request))
    }

    /// Pause or resume, whichever the run's state calls for (`None`: no run to pause).
    pub(super) fn toggle_pause(&mut self) -> Option<ToWorker> {
        match self.state {
            RunState::Running | RunState::Starting => {
                self.pause_pending = true;
                Some(ToWorker::Pause)
            }
            RunState::Paused => Some(ToWorker::Resume),
            _ => None,
        }
    }

    /// Whether the stop sent for run `run_id` is still unanswered (that run is still going).
    pub(super) fn stop_unanswered(&self, run_id: u64) -> bool {
        self.active() && self.is_current(run_id)
    }

    /// The run ends stopped without the worker's answer: its last checkpoint becomes the result.
    /// Returns whether there was one.
    pub(super) fn stopped_unanswered(&mut self) -> bool {
        // A stopped run is over: nothing to go on with.
        self.saved_run = None;
        let checkpoint = self.checkpoint.take();
        let had_checkpoint = checkpoint.is_some();
        // A newer run id makes anything the old worker still had in flight stale.
        self.next_id();
        self.result = checkpoint;
        self.record_file = None;
        self.state = RunState::Ended(Status::Stopped);
        had_checkpoint
    }

    /// The worker is gone (failed, died or replaced): an active run waits no more.
    pub(super) fn interrupted(&mut self) {
        if self.active() {
            self.state = RunState::Idle;
        }
    }

    /// The saved run is to go on in a fresh worker once it holds the data again. False when no
    /// run is saved.
    pub(super) fn continue_saved(&mut self) -> bool {
        if self.saved_run.is_none() {
            return false;
        }
        self.continue_pending = true;
        self.state = RunState::Starting;
        true
    }

    /// The fresh worker holds the data: the request that goes on with the saved run, if the
    /// user asked for it.
    pub(super) fn continue_request(&mut self) -> Option<ToWorker> {
        if !std::mem::take(&mut self.continue_pending) {
            return None;
        }
        let session = self.saved_run.clone()?;
        let run_id = self.next_id();
        self.result = None;
        self.record_file = None;
        self.state = RunState::Starting;
        Some(ToWorker::Continue { run_id, session })
    }

    /// Run `run_id`'s latest checkpoint.
    pub(super) fn checkpoint(&mut self, run_id: u64, result: RunResult) {
        if self.is_current(run_id) {
            self.checkpoint = Some(result);
        }
    }

    /// How many compute workers run `run_id` uses.
    pub(super) fn compute(&mut self, run_id: u64, workers: usize) {
        if self.is_current(run_id) {
            self.compute_workers = Some(workers);
        }
    }

    /// Run `run_id` saved whole.
    pub(super) fn saved(&mut self, run_id: u64, session: String) {
        if self.is_current(run_id) {
            self.saved_run = Some(session);
        }
    }

    /// The worker refused to start run `run_id`: true when it is the current one.
    pub(super) fn refused(&mut self, run_id: u64) -> bool {
        let current = self.is_current(run_id);
        if current {
            self.state = RunState::Idle;
        }
        current
    }

    /// A snapshot of run `run_id`, `paused` or not.
    pub(super) fn progress(&mut self, run_id: u64, snapshot: Snapshot, paused: bool) {
        // A late snapshot after the run ended (or after the worker moved on) is ignored.
        if !self.is_current(run_id) || !self.active() {
            return;
        }
        self.record(snapshot);
        if paused {
            self.pause_pending = false;
        }
        self.state = if paused {
            RunState::Paused
        } else {
            RunState::Running
        };
    }

    /// Run `run_id` ended with `result` after its last `snapshot`.
    pub(super) fn finished(&mut self, run_id: u64, snapshot: Snapshot, result: RunResult) {
        if !self.is_current(run_id) || !self.active() {
            return;
        }
        self.record(snapshot);
        self.state = RunState::Ended(result.status);
        self.pause_pending = false;
        // An ended run is not continued.
        self.saved_run = None;
        self.record_file = None;
        self.result = Some(result);
    }

    fn record(&mut self, snapshot: Snapshot) {
        self.history.record(&snapshot);
        self.snapshots_seen += 1;
        self.snapshot = Some(snapshot);
    }
}
