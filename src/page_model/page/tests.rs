use super::*;
use crate::discovery::knowledge::Knowledge;
use crate::discovery::settings::Preset;
use crate::page_model::truth::Truth;
use crate::worker::driver::Driver;
use crate::worker::protocol::ExplainAbout;

/// A page wired to the native worker logic: every effect is carried out as the shell would,
/// every reply handed back, and a run stepped to its end on request.
struct Wired {
    page: PageModel,
    driver: Driver,
    /// The current file's bytes (the shell keeps them; the model only their name and size).
    source: Vec<u8>,
    now: f64,
    /// Requests the page sent, in order.
    sent: Vec<ToWorker>,
    /// Knowledge resets asked for (their column counts).
    resets: Vec<usize>,
    /// The step the driver asked for, if any.
    step: Option<u64>,
    /// Workers ended by the page.
    ended: usize,
}

impl Wired {
    fn new() -> Self {
        let mut w = Self {
            page: PageModel::new(0.0),
            driver: Driver::new(),
            source: Vec::new(),
            now: 0.0,
            sent: Vec::new(),
            resets: Vec::new(),
            step: None,
            ended: 0,
        };
        w.reply(FromWorker::Ready);
        w
    }

    fn reply(&mut self, reply: FromWorker) {
        self.now += 10.0;
        let effects = self.page.on_reply(reply, self.now);
        self.carry_out(effects);
    }

    fn carry_out(&mut self, effects: Vec<PageEffect>) {
        for effect in effects {
            match effect {
                PageEffect::Send(request) => self.send(request),
                PageEffect::ReadSource { load_id } => self.read(load_id),
                PageEffect::LoadText { file_name, csv } => self.drop_file(&file_name, &csv),
                PageEffect::ResetKnowledge { columns } => self.resets.push(columns),
                PageEffect::EndWorker => self.ended += 1,
            }
        }
    }

    fn send(&mut self, request: ToWorker) {
        self.sent.push(request.clone());
        let reaction = match request {
            ToWorker::Ping => {
                let pong = self.driver.backend_message(false);
                return self.reply(pong);
            }
            ToWorker::Start(request) => self.driver.start(*request),
            ToWorker::Pause => self.driver.pause(),
            ToWorker::Resume => self.driver.resume(),
            ToWorker::Stop => self.driver.stop(),
            ToWorker::Continue { run_id, session } => self.driver.continue_run(run_id, &session),
            ToWorker::Simulate { spec } => {
                return self.reply(FromWorker::from_simulation(&spec));
            }
            // Explanations and test hooks are answered by the tests themselves.
            _ => return,
        };
        self.react(reaction);
    }

    fn react(&mut self, mut reaction: crate::worker::driver::Reaction) {
        let dispatch = reaction.dispatch.take();
        if reaction.step.is_some() {
            self.step = reaction.step;
        }
        for message in reaction.messages {
            self.reply(message);
        }
        // A unit sent to a compute worker: its outcomes come straight back.
        if let Some(d) = dispatch {
            let outcomes = {
                let (_, data) = self.driver.data().expect("a run holds its data");
                d.jobs.iter().map(|job| job.run(data)).collect()
            };
            let next = self.driver.outcomes(d.batch, outcomes);
            self.react(next);
        }
    }

    /// The user drops a file.
    fn drop_file(&mut self, name: &str, csv: &str) {
        self.source = csv.as_bytes().to_vec();
        let load_id = self.page.begin_load(name.into(), csv.len(), self.now);
        self.read(load_id);
    }

    /// The shell read the source and sends it as load `load_id`.
    fn read(&mut self, load_id: u64) {
        let (name, bytes) = (self.file_name(), self.source.clone());
        let reaction = self
            .driver
            .load(load_id, &name, &bytes, &Default::default(), &mut |_| ());
        self.react(reaction);
    }

    fn file_name(&self) -> String {
        self.page
            .load
            .source
            .as_ref()
            .map(|(n, _)| n.clone())
            .unwrap_or_default()
    }

    /// Steps the worker until the run ends or `max_steps` steps have been taken.
    fn run_steps(&mut self, max_steps: usize) {
        for _ in 0..max_steps {
            let Some(generation) = self.step.take() else {
                return;
            };
            // 5 ms slices: a run must still be running after a few steps however fast the
            // engine is (at 50 ms, 200 iterations ended within two steps in release).
            let reaction = self.driver.tick(generation, 0.005);
            self.react(reaction);
        }
    }

    fn start(&mut self) {
        let columns = self.page.load.data.names().map_or(0, |n| n.len());
        let request = RunRequest {
            run_id: 0,
            preset: Preset::Interactive,
            settings: short_settings(),
            seed: 3,
            knowledge: Knowledge::none(columns),
        };
        let start = self.page.start_run(request, self.now);
        self.send(start);
    }
}

/// A run of a few seconds: one restart, small models, short phases.
fn short_settings() -> crate::discovery::settings::SearchSettings {
    let mut settings = Preset::Interactive.settings();
    settings.restarts = 1;
    settings.inducing_points = 6;
    settings.start_iterations = 10;
    settings.threads = 1;
    // Long enough to be caught running after a few 5 ms steps.
    settings.cap_iterations(200);
    settings
}

/// A run on `csv` saved whole after a few steps, as the worker sends it
/// ([`FromWorker::Saved`]).
fn saved_run(csv: &str) -> String {
    let parsed = crate::data::parse_csv(csv.as_bytes(), &Default::default()).unwrap();
    let settings = short_settings().check().unwrap();
    let mut session = crate::engine::Session::new(
        &parsed.dataset,
        Knowledge::none(3),
        settings,
        3,
        Some(Preset::Interactive),
    )
    .unwrap();
    session.step(0.05);
    session.checkpoint()
}

/// The result of a short run on `csv` (a → b on it, for asking about).
fn result_of(csv: &str) -> RunResult {
    let mut w = Wired::new();
    w.drop_file("chain.csv", csv);
    w.start();
    w.run_steps(10_000);
    let mut result = w.page.run.result.expect("a finished run");
    result.edges = vec![(0, 1)];
    result
}

/// A small non-linear chain a → b → c.
fn chain_csv(rows: usize) -> String {
    let mut csv = String::from("a,b,c\n");
    for n in 0..rows {
        let a = ((n * 37) % 61) as f64 / 61.0 * 4.0 - 2.0;
        let b = (1.5 * a).sin() + 0.1 * ((n * 13 % 7) as f64 - 3.0);
        let c = b * b + 0.1 * ((n * 5 % 11) as f64 - 5.0);
        csv.push_str(&format!("{a},{b},{c}\n"));
    }
    csv
}

/// Dropping a file, running, pausing, resuming and finishing move the page through its
/// states as the status line names them, and the curves follow the snapshots.
#[test]
fn a_run_goes_from_ready_to_done_through_pause() {
    let mut w = Wired::new();
    assert!(matches!(w.page.worker.backend, BackendState::Known { .. }));
    assert_eq!(w.page.status_code(), "idle");
    w.drop_file("chain.csv", &chain_csv(60));
    assert_eq!(w.page.status_code(), "ready");
    assert_eq!(w.resets, vec![3], "a grid for the three columns");
    assert_eq!(w.page.busy_with(), None);
    w.start();
    assert_eq!(w.page.status_code(), "running");
    assert_eq!(w.page.busy_with(), Some("a run is in progress"));
    assert_eq!(w.page.run.runs_started, 1);
    w.run_steps(2);
    assert!(w.page.run.snapshots_seen >= 1 && w.page.run.snapshot.is_some());
    let pause = w.page.toggle_pause().unwrap();
    assert!(w.page.run.pause_pending);
    w.send(pause);
    assert_eq!(
        (w.page.status_code(), w.page.run.pause_pending),
        ("paused", false)
    );
    let resume = w.page.toggle_pause().unwrap();
    w.send(resume);
    assert_eq!(w.page.status_code(), "running");
    w.run_steps(10_000);
    assert_eq!(w.page.status_code(), "done");
    let result = w.page.run.result.clone().expect("a result");
    assert_eq!(result.names, ["a", "b", "c"]);
    assert_eq!(w.page.names(), Some(result.names.clone()));
    assert!(!w.page.run.history.points(0).is_empty());
    assert_eq!(w.page.toggle_pause(), None, "nothing to pause");
}

/// Replies about an older file or an older run change nothing.
#[test]
fn replies_about_older_files_and_runs_are_ignored() {
    let mut w = Wired::new();
    w.drop_file("chain.csv", &chain_csv(40));
    w.start();
    w.run_steps(1);
    let before = w.page.clone();
    let FromWorker::Progress { snapshot, .. } = w.driver.pause().messages.remove(0) else {
        panic!("a paused snapshot")
    };
    for stale in [
        FromWorker::Progress {
            run_id: 0,
            snapshot: snapshot.clone(),
            paused: true,
        },
        FromWorker::RunRefused {
            run_id: 0,
            message: "old".into(),
        },
        FromWorker::Compute {
            run_id: 0,
            workers: 7,
        },
        FromWorker::LoadProgress {
            load_id: 0,
            file_name: "old.csv".into(),
            bytes_read: 1,
            total_bytes: 2,
        },
    ] {
        w.page.on_reply(stale, before.worker.last_message_ms);
        assert_eq!(w.page, before);
    }
    // The same snapshot for the current run is taken.
    let run_id = w.page.run.seq;
    w.reply(FromWorker::Progress {
        run_id,
        snapshot,
        paused: true,
    });
    assert_eq!(w.page.status_code(), "paused");
}

/// A worker that dies mid-run is reported with everything kept; a restarted one is given the
/// file again without clearing the screen, and a saved run goes on from its save.
#[test]
fn a_dead_worker_is_reported_and_a_saved_run_goes_on() {
    let mut w = Wired::new();
    w.drop_file("chain.csv", &chain_csv(40));
    w.start();
    w.run_steps(1);
    assert_eq!(w.page.status_code(), "running");
    let run_id = w.page.run.seq;
    w.reply(FromWorker::Saved {
        run_id,
        session: saved_run(&chain_csv(40)),
    });
    let shown = w.page.run.snapshot.clone();
    w.page.run.result = Some(result_of(&chain_csv(40)));
    assert!(w.page.ask_about_edge((0, 1), false).is_some());
    w.reply(FromWorker::Crashed {
        message: "the Web Worker stopped".into(),
    });
    assert!(w.page.worker.dead);
    assert_eq!(w.ended, 1, "a worker that reports its death is ended");
    assert_eq!(w.page.worker.backend, BackendState::Unavailable);
    assert_eq!(w.page.status_code(), "ready");
    assert!(w
        .page
        .error
        .as_deref()
        .unwrap()
        .contains("restart the worker"));
    assert_eq!(w.page.run.snapshot, shown, "the last snapshot stays");
    assert!(matches!(
        w.page.explain.explanation,
        Explanation::Failed { .. }
    ));
    // Going on: a fresh worker, the data again, then the saved run.
    assert!(w.page.continue_saved_run(w.now));
    w.driver = Driver::new();
    w.sent.clear();
    w.reply(FromWorker::Ready);
    assert!(matches!(
        w.sent[..],
        [ToWorker::Ping, ToWorker::Continue { .. }]
    ));
    assert_eq!(w.resets, vec![3], "the same columns keep their grid");
    assert!(!w.page.worker.dead && w.page.error.is_none());
    assert_eq!(
        w.page.explain.explanation,
        Explanation::None,
        "it can be asked again"
    );
    w.run_steps(10_000);
    assert_eq!(w.page.status_code(), "done");
    assert_eq!(w.page.run.saved_run, None, "an ended run is not continued");
}

/// A stop the worker does not answer in time ends it: the last checkpoint is the stopped
/// result, and anything the old worker still sends is ignored.
#[test]
fn an_unanswered_stop_shows_the_last_checkpoint() {
    let mut w = Wired::new();
    w.drop_file("chain.csv", &chain_csv(40));
    w.start();
    w.run_steps(2);
    let run_id = w.page.stop_requested();
    let checkpoint = w.driver.stop();
    let FromWorker::Finished {
        result, snapshot, ..
    } = checkpoint.messages[0].clone()
    else {
        panic!("a result")
    };
    w.reply(FromWorker::Checkpoint {
        run_id,
        result: result.clone(),
    });
    assert!(w.page.stop_unanswered(run_id));
    w.page.end_unanswered_stop(w.now);
    assert_eq!(w.page.status_code(), "stopped");
    assert_eq!(w.page.run.result.as_ref(), Some(&*result));
    assert!(w
        .page
        .error
        .as_deref()
        .unwrap()
        .contains("last completed step"));
    assert!(!w.page.stop_unanswered(run_id));
    let stopped = w.page.clone();
    w.reply(FromWorker::Finished {
        run_id,
        snapshot,
        result,
    });
    assert_eq!(
        w.page.run.result, stopped.run.result,
        "the old worker's result is stale"
    );
}

/// Simulated data load as a dropped file with the drawn graph as the truth; the page is busy
/// while they are made, and a failure or a dead worker says so.
#[test]
fn simulated_data_load_with_their_truth() {
    use crate::generate::Mechanism;
    let mut w = Wired::new();
    let spec = SimulationSpec {
        names: vec!["x".into(), "y".into()],
        edges: vec![(0, 1)],
        hidden: vec![],
        mechanism: Mechanism::Linear,
        samples: 50,
        seed: 1,
    };
    let request = w.page.simulate(spec.clone());
    assert_eq!(w.page.busy_with(), Some("data are being simulated"));
    w.send(request);
    assert_eq!(w.page.load.simulation, SimulationState::Idle);
    assert_eq!(w.page.status_code(), "ready");
    assert_eq!(w.page.load.data.names(), Some(vec!["x".into(), "y".into()]));
    let truth = w.page.load.truth.clone().expect("the drawn graph as truth");
    let names = vec!["x".to_string(), "y".to_string()];
    let drawn = crate::page_model::parse_truth(&truth.text, &names).unwrap();
    assert_eq!(drawn.edges(), vec![(0, 1)], "{}", truth.text);
    // A worker that dies while simulating.
    let _ = w.page.simulate(spec);
    w.reply(FromWorker::Crashed {
        message: "gone".into(),
    });
    assert!(matches!(w.page.load.simulation, SimulationState::Failed(_)));
    assert_eq!(w.page.busy_with(), None);
}

/// Only the latest explanation asked for is shown; a variable is explained along its
/// strongest parent.
#[test]
fn only_the_latest_explanation_is_shown() {
    let mut w = Wired::new();
    assert_eq!(w.page.ask_about_edge((0, 1), false), None, "no result yet");
    w.drop_file("chain.csv", &chain_csv(40));
    w.start();
    w.run_steps(10_000);
    let mut result = w.page.run.result.clone().unwrap();
    result.edges = vec![(0, 2), (1, 2)];
    result.adjacency = vec![vec![0.0, 0.0, 0.2], vec![0.0, 0.0, 0.9], vec![0.0; 3]];
    w.page.run.result = Some(result);
    let Some(ToWorker::ExplainEdge {
        about: ExplainAbout {
            request_id: first, ..
        },
        ..
    }) = w.page.ask_about_edge((0, 2), false)
    else {
        panic!("an edge explanation")
    };
    assert_eq!(
        w.page.explain.explanation,
        Explanation::Working {
            subject: "a → c".into()
        }
    );
    let Some(ToWorker::FitConditional {
        about: ExplainAbout {
            request_id: second, ..
        },
        shown_parent,
        ..
    }) = w.page.ask_about_variable(2)
    else {
        panic!("a conditional")
    };
    assert_eq!(shown_parent, 1, "b weighs 0.9 against a's 0.2");
    assert_eq!(w.page.ask_about_variable(0), None, "a has no parent");
    w.reply(FromWorker::ExplainFailed {
        request_id: first,
        message: "old".into(),
    });
    assert_eq!(
        w.page.explain.explanation,
        Explanation::Working {
            subject: "c".into()
        }
    );
    w.reply(FromWorker::ExplainFailed {
        request_id: second,
        message: "no".into(),
    });
    assert_eq!(
        w.page.explain.explanation,
        Explanation::Failed {
            subject: "c".into(),
            message: "no".into()
        }
    );
}

/// A pair clicked in the graph or the heatmap: an edge of the result either way is explained
/// as its button explains it; a pair the graph leaves out is scored as if added, in the
/// direction that keeps the graph acyclic.
#[test]
fn a_clicked_pair_is_explained_as_an_edge_or_as_one_added() {
    let mut w = Wired::new();
    assert_eq!(w.page.ask_about_pair((0, 1)), None, "no result yet");
    w.drop_file("chain.csv", &chain_csv(40));
    w.start();
    w.run_steps(10_000);
    let mut result = w.page.run.result.clone().unwrap();
    // a → b → c.
    result.edges = vec![(0, 1), (1, 2)];
    w.page.run.result = Some(result);
    let edge_of = |m: Option<ToWorker>| match m {
        Some(ToWorker::ExplainEdge {
            about: ExplainAbout { edges, .. },
            edge,
        }) => (edges, edge),
        other => panic!("an edge explanation, not {other:?}"),
    };
    // Either direction of a drawn edge asks about the edge as drawn.
    assert_eq!(
        edge_of(w.page.ask_about_pair((1, 0))),
        (vec![(0, 1), (1, 2)], (0, 1))
    );
    assert_eq!(
        edge_of(w.page.ask_about_pair((0, 1))),
        (vec![(0, 1), (1, 2)], (0, 1))
    );
    // c → a would close a cycle: a → c is scored instead, in the graph with it added.
    let (edges, edge) = edge_of(w.page.ask_about_pair((2, 0)));
    assert_eq!(edge, (0, 2));
    assert_eq!(edges, vec![(0, 1), (1, 2), (0, 2)]);
    assert_eq!(
        w.page.explain.explanation,
        Explanation::Working {
            subject: "a → c, which the graph leaves out (scored as if added)".into()
        }
    );
    assert_eq!(
        w.page.ask_about_pair((1, 1)),
        None,
        "a variable with itself"
    );
    assert_eq!(w.page.ask_about_pair((0, 3)), None, "no such variable");
}

/// The watchdog calls a worker stuck only when it should be answering and has been silent
/// longer than the limit; a rejected file is shown with its reason.
#[test]
fn the_watchdog_and_a_rejected_file() {
    let mut w = Wired::new();
    let t = w.now;
    assert_eq!(
        w.page.silent_too_long(t + 60_000.0, 30.0),
        None,
        "nothing asked"
    );
    w.drop_file("bad.csv", "a,b\n1,x\n");
    assert_eq!(w.page.status_code(), "idle");
    assert!(matches!(w.page.load.data, DataState::Rejected { .. }));
    assert!(w
        .page
        .error
        .as_deref()
        .unwrap()
        .starts_with("bad.csv was not loaded"));
    // A file being read waits for answers.
    let load_id = w.page.begin_load("slow.csv".into(), 10, t);
    assert_eq!(w.page.status_code(), "loading");
    assert_eq!(w.page.silent_too_long(t + 20_000.0, 30.0), None);
    assert_eq!(w.page.silent_too_long(t + 31_000.0, 30.0), Some(31.0));
    w.page.load_failed(load_id - 1, "older".into());
    assert_eq!(
        w.page.status_code(),
        "loading",
        "an older load's failure is ignored"
    );
    w.page.load_failed(load_id, "unreadable".into());
    assert_eq!(
        (w.page.status_code(), w.page.error.as_deref()),
        ("idle", Some("unreadable"))
    );
}

/// What the graph view draws (`page_model::drawing`): a result's edges plain, then classed against
/// a truth (a reversed edge and a missing one), only the variables shown, nothing before a result
/// or snapshot, and a truth that does not read named by its file.
#[test]
fn the_drawing_classes_a_results_edges_against_the_truth() {
    use crate::graph::EdgeKind;
    use crate::page_model::drawing::{drawing, truth_report};
    let result = result_of(&chain_csv(60));
    let names = result.names.clone();
    let kinds = |d: &crate::page_model::drawing::Drawing| -> Vec<(usize, usize, Option<EdgeKind>)> {
        d.edges.iter().map(|&(i, j, _, k)| (i, j, k)).collect()
    };

    let plain = drawing(names.clone(), Some(&result), None, None);
    assert!(plain.of_result);
    assert_eq!(kinds(&plain), vec![(0, 1, None)]);
    assert!(plain.edges[0].2 >= 0.0);

    let truth = Truth {
        file_name: "truth.csv".into(),
        text: "From,To\nb,a\nb,c\n".into(),
    };
    let report = truth_report(&truth, &result).unwrap().unwrap();
    let classed = kinds(&drawing(names.clone(), Some(&result), Some(&report), None));
    assert_eq!(
        classed
            .iter()
            .filter(|(_, _, k)| *k == Some(EdgeKind::Reversed))
            .count(),
        1,
        "{classed:?}"
    );
    assert!(
        classed.contains(&(1, 2, Some(EdgeKind::Missing))),
        "{classed:?}"
    );
    assert!(classed.iter().all(|(_, _, k)| k.is_some()));

    // Only the variables shown: the missing edge b → c leaves with c.
    let two = kinds(&drawing(
        names[..2].to_vec(),
        Some(&result),
        Some(&report),
        None,
    ));
    assert!(two.iter().all(|&(i, j, _)| i < 2 && j < 2), "{two:?}");

    let nothing = drawing(names.clone(), None, None, None);
    assert!(!nothing.of_result && nothing.edges.is_empty());

    let unreadable = Truth {
        file_name: "odd.csv".into(),
        text: "From,To\nx,y\n".into(),
    };
    let err = truth_report(&unreadable, &result).unwrap().unwrap_err();
    assert!(err.starts_with("odd.csv: "), "{err}");
}
