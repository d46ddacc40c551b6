//! The messages between the page and the Web Worker.
//!
//! Owns the wire format: every message is one of these serde enums serialised as a JSON string
//! (field `json` of the posted object); a large byte payload such as a CSV file travels beside it
//! as a transferable `ArrayBuffer` (field `bytes`), so it is moved, not copied or re-encoded. The
//! types are plain Rust so they are tested natively.

use crate::data::{parse_csv_with_progress, CsvOptions, DataError, DatasetSummary, Parsed};
use crate::discovery::explain::{ConditionalCurve, DirectionComparison, EdgeEvidence};
use crate::discovery::knowledge::Knowledge;
use crate::discovery::settings::{Preset, SearchSettings};
use crate::engine::{RunResult, Snapshot};
use crate::generate::{simulate, SimulationSpec};
use serde::{Deserialize, Serialize};

/// Rows of the file shown in the page's preview table.
pub const PREVIEW_ROWS: usize = 8;

/// A request from the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToWorker {
    /// Asks which backend the worker computes on; answered by [`FromWorker::Pong`].
    Ping,
    /// Parse and validate a CSV file whose bytes are attached to the message.
    LoadCsv {
        /// Echoed in the replies, so the page can ignore those of a file it has replaced.
        load_id: u64,
        file_name: String,
        options: CsvOptions,
    },
    /// Start a discovery run on the loaded data (replacing any run in progress).
    Start(Box<RunRequest>),
    /// Stop working until `Resume`; the state is kept.
    Pause,
    Resume,
    /// End the run now; the worker answers with `Finished` holding the best graph so far.
    Stop,
    /// Go on with a run saved by [`FromWorker::Saved`] (after the worker that ran it died), on
    /// the data loaded now, under a new run id. It ends as the run would have uninterrupted.
    Continue {
        run_id: u64,
        session: String,
    },
    /// Fault injection for the end-to-end tests: the worker panics on purpose, so the page's
    /// recovery path (report, restart the worker) can be exercised. Sent only by a button that the
    /// page shows when its address ends in `#test-hooks`.
    Panic,
    /// Fault injection for the end-to-end tests: the worker stops answering (it loops until it is
    /// ended), so the page's watchdog can be exercised. Sent only from the `#test-hooks` page.
    Hang,
    /// Fault injection for the end-to-end tests: the worker destroys its WebGPU device as a driver
    /// reset would, so the run's switch to the CPU can be exercised. Sent only from the
    /// `#test-hooks` page.
    LoseGpu,
    /// Simulate data from a drawn graph (`generate::simulate`); answered by
    /// [`FromWorker::Simulated`] (the page then loads it as a dropped file) or
    /// [`FromWorker::SimulationFailed`].
    Simulate {
        spec: SimulationSpec,
    },
    /// Explain edge `edge` of the graph `edges` (a result's) on the loaded data by its evidence:
    /// the change in the graph's score when it is removed and when it is reversed, refitting the
    /// families concerned (`discovery::explain`). Answered by [`FromWorker::EdgeExplained`] or
    /// [`FromWorker::ExplainFailed`].
    ExplainEdge {
        #[serde(flatten)]
        about: ExplainAbout,
        edge: (usize, usize),
    },
    /// Fit variable `child`'s conditional given its parents in the graph `edges` on the loaded
    /// data, and compute its predictive along parent `shown_parent` (`discovery::explain::
    /// fitted_conditional`). Answered by [`FromWorker::ConditionalFitted`] or
    /// [`FromWorker::ExplainFailed`].
    FitConditional {
        #[serde(flatten)]
        about: ExplainAbout,
        child: usize,
        shown_parent: usize,
    },
    /// Edge `edge` = j → i of the graph `edges` and its reversal side by side: the edge's
    /// evidence and both directions' fitted conditionals (i given pa(i) along j; j given
    /// pa(j) ∪ {i} along i). Answered by [`FromWorker::DirectionsCompared`] or
    /// [`FromWorker::ExplainFailed`].
    CompareDirections {
        #[serde(flatten)]
        about: ExplainAbout,
        edge: (usize, usize),
    },
    /// Test hook: every later collapsed continuous run computes its Ψ2 sums on the WebGPU device
    /// (`gpu` true, at every size) or on the CPU, unmeasured, instead of where the probe
    /// measures them faster (with a working device only), so the browser's collapsed GPU path can
    /// be exercised on the small built-in examples. Sent only from the `#test-hooks` page.
    CollapsedOn {
        gpu: bool,
    },
    /// Test hook: every later run's family fits compute on the WebGPU device (`gpu` true) or the
    /// CPU, unmeasured, instead of where the probe measures them faster (with a working device
    /// only). Sent only from the `#test-hooks` page.
    FamilyFitsOn {
        gpu: bool,
    },
}

/// What every explanation request carries besides its question: its id and the result it asks
/// about. Flattened into the request, so on the wire its fields stand beside the question's
/// (`{"type": "explain_edge", "request_id": …, "edges": …, "seed": …, "edge": …}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExplainAbout {
    /// Echoed in the answer, so the page shows only the latest asked for.
    pub request_id: u64,
    /// The result's graph, as (cause, effect) pairs.
    pub edges: Vec<(usize, usize)>,
    /// The result's seed: the rows an explanation fits on and its fits start from it.
    pub seed: u64,
}

/// Everything a run needs besides the data (which the worker already holds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// Echoed in every message about this run, so the page can ignore those of an older run.
    pub run_id: u64,
    pub preset: Preset,
    pub settings: SearchSettings,
    pub seed: u64,
    pub knowledge: Knowledge,
}

/// Where the worker does its numerical work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ComputeBackend {
    /// WebGPU compute shaders: the uncollapsed bound's predictions, with the rest on the CPU.
    WebGpu,
    /// The CPU: WebAssembly in the browser, native code in the CLI.
    Cpu,
}

/// A refusal as the page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorReport {
    /// Stable code, e.g. `non_numeric`.
    pub kind: String,
    /// The full sentence for the user.
    pub message: String,
    pub line: Option<usize>,
    pub column: Option<String>,
}

impl From<&DataError> for ErrorReport {
    fn from(e: &DataError) -> Self {
        Self {
            kind: e.kind().to_string(),
            message: e.to_string(),
            line: e.line(),
            column: e.column().map(str::to_string),
        }
    }
}

/// An accepted oddity as the page shows it: what was found and what is done about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProblemReport {
    pub message: String,
    pub action: String,
}

/// A reply or notification from the worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FromWorker {
    /// The worker's module has loaded and its message handler is installed.
    Ready,
    /// Sent at most once a second from inside a long unit of work (a fit, a training step), so
    /// the page's watchdog can tell a busy worker from a stuck one.
    Busy,
    /// Where the engine computes: the answer to [`ToWorker::Ping`] (WebGPU when the worker could
    /// open a device on the adapter the browser granted), then again when a run begins (that
    /// run's backend: the CPU for a bound without a GPU path) and when a run leaves the GPU.
    Pong {
        backend: ComputeBackend,
        /// The WebGPU adapter the browser granted, described, whether or not it computes.
        adapter: Option<String>,
        /// Why the work is not on the adapter, when there is one and it is not.
        #[serde(default)]
        note: Option<String>,
        /// The run left the GPU (it failed or was lost) and goes on on the CPU.
        #[serde(default)]
        switched: bool,
    },
    /// The file was read and validated.
    DataLoaded {
        load_id: u64,
        file_name: String,
        summary: DatasetSummary,
        delimiter: char,
        problems: Vec<ProblemReport>,
        /// The first rows, as read (not standardised).
        preview: Vec<Vec<f64>>,
    },
    /// The file was refused.
    DataRejected {
        load_id: u64,
        file_name: String,
        error: ErrorReport,
    },
    /// How far parsing of a large file has got.
    LoadProgress {
        load_id: u64,
        file_name: String,
        bytes_read: usize,
        total_bytes: usize,
    },
    /// A run could not start (no data, invalid settings or knowledge): nothing is running.
    RunRefused { run_id: u64, message: String },
    /// A run's state after a step (several times a second while running, and once on pause).
    Progress {
        run_id: u64,
        snapshot: Snapshot,
        paused: bool,
    },
    /// The result the run would give if stopped now, sent after a step whose unit of work ran long
    /// ([`crate::worker::driver::LONG_UNIT_SECONDS`] over its budget): while the next such unit runs, the
    /// worker cannot read a stop request, so the page ends it and shows this instead.
    Checkpoint { run_id: u64, result: Box<RunResult> },
    /// The whole run ([`crate::engine::Session::checkpoint`]), sent every
    /// [`crate::worker::driver::SAVE_SECONDS`] of a run: if this worker dies, a fresh one can go on from
    /// here ([`ToWorker::Continue`]).
    ///
    /// The session travels beside the JSON (the message object's `session` field, set by the
    /// worker and read back by the page's client), so the page never parses megabytes of JSON on
    /// its main thread.
    Saved {
        run_id: u64,
        #[serde(skip)]
        session: String,
    },
    /// How many compute workers run the run's jobs (1: the worker itself), sent when a run
    /// begins and whenever the number changes (a pool that keeps losing workers falls back to 1).
    Compute { run_id: u64, workers: usize },
    /// The run has ended (done, stopped or failed): its last snapshot and its result.
    Finished {
        run_id: u64,
        snapshot: Snapshot,
        result: Box<RunResult>,
    },
    /// Data simulated from a drawn graph ([`ToWorker::Simulate`]), as CSV text under a file name
    /// that says how it was made, with the drawing's truth among the observed variables (an
    /// adjacency CSV: hidden variables and their edges left out).
    Simulated {
        file_name: String,
        csv: String,
        truth_csv: String,
    },
    /// The drawn graph could not be simulated, and why.
    SimulationFailed { message: String },
    /// The evidence of one edge ([`ToWorker::ExplainEdge`]).
    EdgeExplained {
        request_id: u64,
        evidence: Box<EdgeEvidence>,
    },
    /// A variable's fitted conditional along one parent ([`ToWorker::FitConditional`]).
    ConditionalFitted {
        request_id: u64,
        curve: Box<ConditionalCurve>,
    },
    /// An edge and its reversal side by side ([`ToWorker::CompareDirections`]).
    DirectionsCompared {
        request_id: u64,
        comparison: Box<DirectionComparison>,
    },
    /// An edge or a variable could not be explained, and why.
    ExplainFailed { request_id: u64, message: String },
    /// Something went wrong inside the worker (a bug, reported rather than hidden).
    Failed { message: String },
    /// The worker panicked: it cannot go on and must be restarted.
    Crashed { message: String },
}

impl FromWorker {
    /// The reply to [`ToWorker::Simulate`]: the simulated data as CSV, named after the mechanism,
    /// the rows and the seed, or why not.
    pub fn from_simulation(spec: &SimulationSpec) -> Self {
        match simulate(spec) {
            Ok(simulated) => FromWorker::Simulated {
                file_name: format!(
                    "drawn_{}_{}rows_seed{}.csv",
                    spec.mechanism.as_str(),
                    spec.samples,
                    spec.seed
                ),
                csv: simulated.dataset.to_csv(),
                truth_csv: crate::graph::to_adjacency_csv(
                    simulated.truth.as_digraph(),
                    simulated.dataset.names(),
                ),
            },
            Err(e) => FromWorker::SimulationFailed {
                message: e.to_string(),
            },
        }
    }

    /// The reply to a parsed (or refused) file.
    pub fn from_parse(load_id: u64, file_name: &str, result: &Result<Parsed, DataError>) -> Self {
        match result {
            Ok(parsed) => {
                let d = &parsed.dataset;
                let preview = (0..d.rows().min(PREVIEW_ROWS)).map(|n| d.row(n)).collect();
                FromWorker::DataLoaded {
                    load_id,
                    file_name: file_name.to_string(),
                    summary: d.summary(),
                    delimiter: parsed.delimiter,
                    problems: parsed
                        .problems
                        .iter()
                        .map(|p| ProblemReport {
                            message: p.message(),
                            action: p.action(),
                        })
                        .collect(),
                    preview,
                }
            }
            Err(e) => FromWorker::DataRejected {
                load_id,
                file_name: file_name.to_string(),
                error: ErrorReport::from(e),
            },
        }
    }
}

/// Handles a `LoadCsv` request: parse, validate, and describe the outcome; `progress` receives
/// [`FromWorker::LoadProgress`] messages while a large file is read.
pub fn load_csv(
    load_id: u64,
    file_name: &str,
    bytes: &[u8],
    options: &CsvOptions,
    progress: &mut dyn FnMut(FromWorker),
) -> (FromWorker, Option<Parsed>) {
    let total_bytes = bytes.len();
    let mut report = |bytes_read: usize| {
        progress(FromWorker::LoadProgress {
            load_id,
            file_name: file_name.to_string(),
            bytes_read,
            total_bytes,
        })
    };
    let parsed = parse_csv_with_progress(bytes, options, &mut report);
    let reply = FromWorker::from_parse(load_id, file_name, &parsed);
    (reply, parsed.ok())
}

/// Serialises a message for `postMessage`. Our enums contain only strings, numbers and vectors,
/// which serde_json always encodes.
pub fn encode<T: Serialize>(message: &T) -> String {
    serde_json::to_string(message).expect("protocol messages are always serialisable")
}

/// Parses a message received from the other side.
pub fn decode<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T, String> {
    serde_json::from_str(json).map_err(|e| format!("malformed message {json:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A saved run is not in the JSON (it travels beside it): the JSON stays small, and what
    /// comes back from it is the run id alone.
    #[test]
    fn a_saved_run_travels_beside_the_json() {
        let big = "s".repeat(10_000);
        let json = encode(&FromWorker::Saved {
            run_id: 3,
            session: big.clone(),
        });
        assert!(json.len() < 100 && !json.contains(&big), "{json}");
        match decode::<FromWorker>(&json).unwrap() {
            FromWorker::Saved { run_id, session } => assert_eq!((run_id, session.len()), (3, 0)),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn messages_round_trip_through_json() {
        let requests = [
            ToWorker::Ping,
            ToWorker::LoadCsv {
                load_id: 3,
                file_name: "a.csv".into(),
                options: CsvOptions::default(),
            },
        ];
        for r in requests {
            assert_eq!(decode::<ToWorker>(&encode(&r)).unwrap(), r);
        }
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let start = ToWorker::Start(Box::new(RunRequest {
            run_id: 9,
            preset: Preset::Interactive,
            settings: Preset::Interactive.settings(),
            seed: u64::MAX,
            knowledge: Knowledge::from_indices_named(&names, vec![(0, 1)], vec![(2, 1)], None)
                .unwrap(),
        }));
        assert_eq!(decode::<ToWorker>(&encode(&start)).unwrap(), start);
        for r in [
            ToWorker::Pause,
            ToWorker::Resume,
            ToWorker::Stop,
            ToWorker::Panic,
            ToWorker::LoseGpu,
            ToWorker::CollapsedOn { gpu: true },
            ToWorker::FamilyFitsOn { gpu: true },
        ] {
            assert_eq!(decode::<ToWorker>(&encode(&r)).unwrap(), r);
        }
        let pong = FromWorker::Pong {
            backend: ComputeBackend::Cpu,
            adapter: Some("swiftshader".into()),
            note: Some("the GPU was lost".into()),
            switched: true,
        };
        assert_eq!(decode::<FromWorker>(&encode(&pong)).unwrap(), pong);
        // An answer without the optional fields reads as "nothing to note, not switched".
        let plain = decode::<FromWorker>(r#"{"type":"pong","backend":"web_gpu","adapter":null}"#);
        assert_eq!(
            plain.unwrap(),
            FromWorker::Pong {
                backend: ComputeBackend::WebGpu,
                adapter: None,
                note: None,
                switched: false
            }
        );
    }

    /// The explanation requests keep their wire form with their shared fields in one
    /// [`ExplainAbout`]: the flat JSON objects written before it read back, and each request is
    /// written as that same object.
    #[test]
    fn explanation_requests_keep_their_flat_wire_form() {
        let about = ExplainAbout {
            request_id: 4,
            edges: vec![(0, 1), (1, 2)],
            seed: u64::MAX,
        };
        let cases = [
            (
                r#"{"type":"explain_edge","request_id":4,"edges":[[0,1],[1,2]],"edge":[1,2],"seed":18446744073709551615}"#,
                ToWorker::ExplainEdge {
                    about: about.clone(),
                    edge: (1, 2),
                },
            ),
            (
                r#"{"type":"fit_conditional","request_id":4,"edges":[[0,1],[1,2]],"child":2,"shown_parent":1,"seed":18446744073709551615}"#,
                ToWorker::FitConditional {
                    about: about.clone(),
                    child: 2,
                    shown_parent: 1,
                },
            ),
            (
                r#"{"type":"compare_directions","request_id":4,"edges":[[0,1],[1,2]],"edge":[1,2],"seed":18446744073709551615}"#,
                ToWorker::CompareDirections {
                    about: about.clone(),
                    edge: (1, 2),
                },
            ),
        ];
        for (json, request) in cases {
            assert_eq!(decode::<ToWorker>(json).unwrap(), request);
            let written: serde_json::Value = serde_json::from_str(&encode(&request)).unwrap();
            let flat: serde_json::Value = serde_json::from_str(json).unwrap();
            assert_eq!(written, flat);
        }
    }

    /// A drawn graph's simulation comes back as CSV that parses to its observed variables, named
    /// after how it was made; a drawing that cannot be simulated says why.
    #[test]
    fn a_simulation_replies_with_csv_or_the_reason() {
        use crate::generate::Mechanism;
        let spec = SimulationSpec {
            names: ["rain", "sprinkler", "wet"].map(String::from).to_vec(),
            edges: vec![(0, 2), (1, 2)],
            hidden: vec![],
            mechanism: Mechanism::Mlp,
            samples: 40,
            seed: 2,
        };
        let request = ToWorker::Simulate { spec: spec.clone() };
        assert_eq!(decode::<ToWorker>(&encode(&request)).unwrap(), request);
        match FromWorker::from_simulation(&spec) {
            FromWorker::Simulated {
                file_name,
                csv,
                truth_csv,
            } => {
                assert_eq!(file_name, "drawn_mlp_40rows_seed2.csv");
                let parsed =
                    crate::data::parse_csv(csv.as_bytes(), &CsvOptions::default()).unwrap();
                assert_eq!(parsed.dataset.names(), spec.names.as_slice());
                assert_eq!(parsed.dataset.rows(), 40);
                let truth =
                    crate::graph::read_adjacency(&truth_csv, Some(parsed.dataset.names())).unwrap();
                assert_eq!(truth.edges(), vec![(0, 2), (1, 2)]);
            }
            other => panic!("{other:?}"),
        }
        // A hidden common cause leaves the truth with its children unconnected.
        let hidden = SimulationSpec {
            hidden: vec![2],
            edges: vec![(2, 0), (2, 1)],
            ..spec.clone()
        };
        match FromWorker::from_simulation(&hidden) {
            FromWorker::Simulated { truth_csv, .. } => {
                let names = ["rain".to_string(), "sprinkler".to_string()];
                let truth = crate::graph::read_adjacency(&truth_csv, Some(&names)).unwrap();
                assert_eq!((truth.n(), truth.edge_count()), (2, 0));
            }
            other => panic!("{other:?}"),
        }
        let cyclic = SimulationSpec {
            edges: vec![(0, 1), (1, 0)],
            ..spec
        };
        assert!(matches!(
            FromWorker::from_simulation(&cyclic),
            FromWorker::SimulationFailed { message } if message.contains("cycle")
        ));
    }

    #[test]
    fn load_csv_reports_summary_preview_and_problems() {
        let mut text = String::from("x,flag\n");
        for n in 0..20 {
            text.push_str(&format!("{n},{}\n", n % 2));
        }
        match load_csv(
            1,
            "t.csv",
            text.as_bytes(),
            &CsvOptions::default(),
            &mut |_| {},
        )
        .0
        {
            FromWorker::DataLoaded {
                summary,
                preview,
                problems,
                delimiter,
                ..
            } => {
                assert_eq!((summary.rows, summary.columns), (20, 2));
                assert_eq!(preview.len(), PREVIEW_ROWS);
                assert_eq!(preview[3], vec![3.0, 1.0]);
                assert_eq!(problems.len(), 1);
                assert!(problems[0].message.contains("flag"));
                assert_eq!(delimiter, ',');
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn load_csv_reports_refusals_with_line_and_column() {
        let mut text = String::from("x,y\n");
        for n in 0..20 {
            text.push_str(&format!("{n},{}\n", n * n));
        }
        let text = text.replace("\n5,25\n", "\n5,abc\n");
        match load_csv(
            1,
            "bad.csv",
            text.as_bytes(),
            &CsvOptions::default(),
            &mut |_| {},
        )
        .0
        {
            FromWorker::DataRejected {
                error, file_name, ..
            } => {
                assert_eq!(file_name, "bad.csv");
                assert_eq!(error.kind, "non_numeric");
                assert_eq!(error.line, Some(7));
                assert_eq!(error.column.as_deref(), Some("y"));
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn load_csv_reports_progress_and_hands_back_the_dataset() {
        let mut text = String::from("x,y\n");
        let mut n = 0;
        while text.len() < 2 * crate::data::PROGRESS_STEP_BYTES {
            text.push_str(&format!("{n},{}\n", (n * 31) % 977));
            n += 1;
        }
        let mut seen = Vec::new();
        let (reply, parsed) = load_csv(
            5,
            "big.csv",
            text.as_bytes(),
            &CsvOptions::default(),
            &mut |m| seen.push(m),
        );
        assert!(matches!(reply, FromWorker::DataLoaded { .. }));
        assert_eq!(parsed.unwrap().dataset.rows(), n);
        assert!(seen.len() >= 2);
        match seen.last().unwrap() {
            FromWorker::LoadProgress {
                load_id,
                bytes_read,
                total_bytes,
                file_name,
            } => {
                assert_eq!(*load_id, 5);
                assert_eq!((*bytes_read, *total_bytes), (text.len(), text.len()));
                assert_eq!(file_name, "big.csv");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn a_knowledge_that_contradicts_itself_is_refused_when_decoded() {
        // The worker must not trust the page: Knowledge re-validates when deserialised.
        let json =
            r#"{"type":"start","run_id":1,"preset":"interactive","settings":SETTINGS,"seed":1,
            "knowledge":{"d":2,"forbidden":[[0,1]],"required":[[0,1]],"tiers":null}}"#
                .replace("SETTINGS", &encode(&Preset::Interactive.settings()));
        let err = decode::<ToWorker>(&json).unwrap_err();
        assert!(err.contains("required"), "{err}");
    }

    #[test]
    fn malformed_messages_are_errors_not_panics() {
        assert!(decode::<ToWorker>("{\"type\":\"nonsense\"}").is_err());
        assert!(decode::<ToWorker>("not json").is_err());
    }
}

/// Whether this build carries the fault-injection test hooks (the page's `#test-hooks` buttons and
/// the worker's `Panic` / `Hang` handling): only when built with the environment variable
/// `OCCAM_TEST_HOOKS` set, as the test command does for the browser tests. A release build made by
/// scripts/serve.sh has none.
pub const TEST_HOOKS_BUILT: bool = option_env!("OCCAM_TEST_HOOKS").is_some();

/// Whether the page shows its test hooks: built with them, and opened at `…#test-hooks`.
pub fn test_hooks_shown(built: bool, location_hash: &str) -> bool {
    built && location_hash == "#test-hooks"
}

#[cfg(test)]
mod test_hook_tests {
    use super::test_hooks_shown;

    #[test]
    fn test_hooks_need_both_the_build_and_the_address() {
        assert!(test_hooks_shown(true, "#test-hooks"));
        assert!(
            !test_hooks_shown(false, "#test-hooks"),
            "a plain release build has none"
        );
        assert!(!test_hooks_shown(true, ""));
        assert!(!test_hooks_shown(true, "#test-hooks-x"));
    }
}

/// The most compute workers a run may use in the browser.
pub const MAX_COMPUTE_WORKERS: usize = 8;

/// The compute workers for a run that asked for `requested` (0 = the default) on a browser
/// reporting `cores` logical cores: one per core but one (the coordinating worker's), at least 1
/// and at most [`MAX_COMPUTE_WORKERS`].
pub fn compute_workers(requested: usize, cores: usize) -> usize {
    let wanted = if requested == 0 {
        cores.saturating_sub(1)
    } else {
        requested
    };
    wanted.clamp(1, MAX_COMPUTE_WORKERS)
}

/// A message from the coordinating worker to one of its compute workers (the message object's
/// `compute` field, as MessagePack bytes: [`encode_compute`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ToCompute<'a> {
    /// The data every later job reads (the rows used, N × D, standardised, column-major), under
    /// an id the jobs name.
    Data {
        data_id: u64,
        rows: usize,
        cols: usize,
        values: std::borrow::Cow<'a, [f64]>,
    },
    /// Run jobs `first`, `first + 1`, … of batch `batch` on data `data_id`.
    Jobs {
        batch: u64,
        first: usize,
        data_id: u64,
        jobs: Vec<crate::discovery::jobs::Job<'a>>,
    },
}

/// A compute worker's answer (the message object's `computed` field, as MessagePack bytes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FromCompute {
    /// The outcomes of jobs `first`, `first + 1`, … of batch `batch`, in order.
    Done {
        batch: u64,
        first: usize,
        outcomes: Vec<crate::discovery::jobs::Outcome>,
    },
    /// The jobs could not be run at all (no data under their id, a message it could not read).
    Refused {
        batch: u64,
        first: usize,
        count: usize,
        message: String,
    },
}

/// A message between workers as MessagePack (binary f64, so every number, ±∞ and NaN included,
/// arrives bit for bit; with field names, so every serde type of the engine travels).
pub fn encode_compute<T: Serialize>(message: &T) -> Vec<u8> {
    // Encoding into memory fails only for types serde cannot describe, which these are not.
    rmp_serde::to_vec_named(message).unwrap_or_default()
}

/// Reads a message made by [`encode_compute`].
pub fn decode_compute<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    rmp_serde::from_slice(bytes)
        .map_err(|e| format!("a message between workers could not be read: {e}"))
}
