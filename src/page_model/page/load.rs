//! The data side of the page: the current file and how far its loading got, the ground truth
//! a result is compared with, and data simulated from a drawn graph.

use crate::data::DatasetSummary;
use crate::generate::SimulationSpec;
use crate::page_model::truth::Truth;
use crate::worker::protocol::{ErrorReport, ProblemReport, ToWorker};

/// What the page shows about the current file.
#[derive(Debug, Clone, PartialEq)]
pub enum DataState {
    Empty,
    Reading {
        file_name: String,
        bytes_read: usize,
        total_bytes: usize,
    },
    Loaded {
        file_name: String,
        summary: DatasetSummary,
        delimiter: char,
        problems: Vec<ProblemReport>,
        preview: Vec<Vec<f64>>,
    },
    Rejected {
        file_name: String,
        error: ErrorReport,
    },
}

impl DataState {
    /// The loaded data's column names.
    pub fn names(&self) -> Option<Vec<String>> {
        match self {
            DataState::Loaded { summary, .. } => Some(summary.names.clone()),
            _ => None,
        }
    }

    /// The loaded file's name without its extension, for export file names.
    pub fn stem(&self) -> Option<String> {
        match self {
            DataState::Loaded { file_name, .. } => Some(
                file_name
                    .rsplit_once('.')
                    .map_or(file_name.as_str(), |(s, _)| s)
                    .to_string(),
            ),
            _ => None,
        }
    }
}

/// Where a simulation from the drawn graph is.
#[derive(Debug, Clone, PartialEq)]
pub enum SimulationState {
    Idle,
    /// Sent to the worker; its data have not come back yet.
    Running,
    /// The worker could not simulate the drawing, and why.
    Failed(String),
}

/// The data the page holds and is loading.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadModel {
    pub data: DataState,
    pub truth: Option<Truth>,
    /// A simulation from the drawn graph in progress or failed.
    pub simulation: SimulationState,
    /// Id of the latest file sent to the worker; replies about older files are ignored.
    seq: u64,
    /// The column names the knowledge grid was made for (kept when the same file is read again).
    knowledge_names: Vec<String>,
    /// The current file's name and size (its bytes stay with the shell), kept so a restarted
    /// worker can be given it again.
    pub(super) source: Option<(String, usize)>,
}

impl LoadModel {
    pub(super) fn new() -> Self {
        Self {
            data: DataState::Empty,
            truth: None,
            simulation: SimulationState::Idle,
            seq: 0,
            knowledge_names: Vec::new(),
            source: None,
        }
    }

    /// Whether a file is being read.
    pub(super) fn reading_now(&self) -> bool {
        matches!(self.data, DataState::Reading { .. })
    }

    /// A new file `file_name` of `bytes` bytes is to be read; returns the load's id.
    pub(super) fn begin(&mut self, file_name: String, bytes: usize) -> u64 {
        self.source = Some((file_name.clone(), bytes));
        self.reading(file_name, bytes)
    }

    /// Marks the current file as being read again (load id returned).
    fn reading(&mut self, file_name: String, total_bytes: usize) -> u64 {
        self.seq += 1;
        self.data = DataState::Reading {
            file_name,
            bytes_read: 0,
            total_bytes,
        };
        self.seq
    }

    /// The current file read again for a fresh worker (its load id), unless there is none or the
    /// worker rejected it.
    pub(super) fn read_again(&mut self) -> Option<u64> {
        let (name, bytes) = self.source.clone()?;
        if matches!(self.data, DataState::Rejected { .. }) {
            return None;
        }
        Some(self.reading(name, bytes))
    }

    /// Whether `load_id` is still the file wanted (a newer one may have been chosen meanwhile).
    pub(super) fn is_current(&self, load_id: u64) -> bool {
        load_id == self.seq
    }

    /// The file of load `load_id` could not be read or sent: true when it was the current one.
    pub(super) fn failed(&mut self, load_id: u64) -> bool {
        let current = self.is_current(load_id);
        if current {
            self.data = DataState::Empty;
        }
        current
    }

    /// The worker's progress on load `load_id`.
    pub(super) fn progress(
        &mut self,
        load_id: u64,
        file_name: String,
        bytes_read: usize,
        total_bytes: usize,
    ) {
        if self.is_current(load_id) {
            self.data = DataState::Reading {
                file_name,
                bytes_read,
                total_bytes,
            };
        }
    }

    /// The data of load `load_id` are loaded (`data`: [`DataState::Loaded`]). `None` when the
    /// load is stale; else whether the knowledge grid must be remade, for how many columns.
    pub(super) fn loaded(&mut self, load_id: u64, data: DataState) -> Option<Option<usize>> {
        if !self.is_current(load_id) {
            return None;
        }
        let mut reset = None;
        if let DataState::Loaded { summary, .. } = &data {
            // The grid survives reading the same columns again (a restarted worker).
            if self.knowledge_names != summary.names {
                self.knowledge_names = summary.names.clone();
                reset = Some(summary.columns);
            }
        }
        self.data = data;
        Some(reset)
    }

    /// The worker rejected load `load_id`: the banner's message, `None` when the load is stale.
    pub(super) fn rejected(
        &mut self,
        load_id: u64,
        file_name: String,
        error: ErrorReport,
    ) -> Option<String> {
        if !self.is_current(load_id) {
            return None;
        }
        let message = format!("{file_name} was not loaded: {}", error.message);
        self.data = DataState::Rejected { file_name, error };
        Some(message)
    }

    /// Asks for data simulated from a drawn graph.
    pub(super) fn simulate(&mut self, spec: SimulationSpec) -> ToWorker {
        self.simulation = SimulationState::Running;
        ToWorker::Simulate { spec }
    }

    /// The simulated data arrived; the drawn graph (`truth_csv`) becomes the ground truth.
    pub(super) fn simulated(&mut self, truth_csv: String) {
        self.simulation = SimulationState::Idle;
        self.truth = Some(Truth {
            file_name: "the simulated graph".into(),
            text: truth_csv,
        });
    }

    /// The worker reported a failure: a file being read or a simulation will get no answer.
    pub(super) fn worker_failed(&mut self) {
        if self.simulation == SimulationState::Running {
            self.simulation = SimulationState::Idle;
        }
        self.stop_reading();
    }

    /// The worker died: what waited for it is told.
    pub(super) fn worker_died(&mut self) {
        if self.simulation == SimulationState::Running {
            self.simulation = SimulationState::Failed(
                "the worker stopped before the simulation was done: restart it and simulate again"
                    .into(),
            );
        }
        self.stop_reading();
    }

    fn stop_reading(&mut self) {
        if self.reading_now() {
            self.data = DataState::Empty;
        }
    }
}
