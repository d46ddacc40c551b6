//! The Web Worker's logic without the browser: it holds the loaded data set and the run, and turns
//! each request of [`crate::protocol`] into the messages to post back.
//!
//! Why a separate, native module: the worker itself (wasm only) is a thin shell of timers and
//! `postMessage`; everything that decides what happens on start, pause, resume and stop lives here
//! and is tested natively. The shell calls [`Driver::tick`] from a zero-delay timer, so between two
//! steps of at most [`STEP_SECONDS`] the worker's event loop runs and pause or stop requests are
//! seen at once.

use crate::data::{CsvOptions, Dataset};
use crate::engine::{now_seconds, Session};
use crate::protocol::{load_csv, FromWorker, RunRequest};

/// Seconds of work per step: short enough that pause and stop act within a tenth of a second and
/// snapshots reach the page about ten times a second, long enough that the timer between steps
/// costs little.
pub const STEP_SECONDS: f64 = 0.08;

/// What the shell must do after a request or a step.
#[derive(Debug, Default)]
pub struct Reaction {
    /// Messages to post to the page, in order.
    pub messages: Vec<FromWorker>,
    /// Schedule [`Driver::tick`] with this generation.
    pub step: Option<u64>,
}

impl Reaction {
    fn message(message: FromWorker) -> Self {
        Self {
            messages: vec![message],
            step: None,
        }
    }
}

/// The worker's state.
#[derive(Default)]
pub struct Driver {
    dataset: Option<Dataset>,
    session: Option<Session>,
    paused: bool,
    /// The page's id of the current run, echoed in its messages.
    run_id: u64,
    /// Raised whenever a scheduled step must no longer run (pause, stop, a new run, new data):
    /// a tick carrying an older generation does nothing.
    generation: u64,
    /// When the run was last sent to the page whole ([`FromWorker::Saved`]).
    saved_at: f64,
}

impl Driver {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a run is in progress (running or paused).
    pub fn is_running(&self) -> bool {
        self.session.is_some()
    }

    /// Parses a CSV file and keeps its data set when it is accepted (none when it is refused). A
    /// new file ends any run.
    pub fn load(
        &mut self,
        load_id: u64,
        file_name: &str,
        bytes: &[u8],
        options: &CsvOptions,
        progress: &mut dyn FnMut(FromWorker),
    ) -> Reaction {
        self.session = None;
        self.generation += 1;
        let (reply, parsed) = load_csv(load_id, file_name, bytes, options, progress);
        // A refused file leaves no data behind, so the worker holds what the page shows.
        self.dataset = parsed.map(|p| p.dataset);
        Reaction::message(reply)
    }

    /// Starts a run on the loaded data, replacing any run in progress.
    pub fn start(&mut self, request: RunRequest) -> Reaction {
        self.generation += 1;
        self.session = None;
        self.run_id = request.run_id;
        let run_id = self.run_id;
        let Some(dataset) = &self.dataset else {
            return Reaction::message(FromWorker::RunRefused {
                run_id,
                message: "load a data set before starting a run".into(),
            });
        };
        match Session::new(
            dataset,
            request.knowledge,
            request.settings,
            request.seed,
            Some(request.preset),
        ) {
            Ok(session) => self.begin(session),
            Err(e) => Reaction::message(FromWorker::RunRefused {
                run_id,
                message: format!("the run could not start: {e}"),
            }),
        }
    }

    /// Goes on with a run saved by an earlier worker ([`FromWorker::Saved`]) on the loaded data.
    pub fn continue_run(&mut self, run_id: u64, saved: &str) -> Reaction {
        self.generation += 1;
        self.session = None;
        self.run_id = run_id;
        let Some(dataset) = &self.dataset else {
            return Reaction::message(FromWorker::RunRefused {
                run_id,
                message: "load the run's data set before going on with it".into(),
            });
        };
        match Session::resume(saved, 1, Some(dataset.fingerprint())) {
            Ok(session) => self.begin(session),
            Err(e) => Reaction::message(FromWorker::RunRefused {
                run_id,
                message: format!("the saved run could not go on: {e}"),
            }),
        }
    }

    /// Makes `session` the running run and schedules its first step.
    fn begin(&mut self, session: Session) -> Reaction {
        let snapshot = session.snapshot();
        self.session = Some(session);
        self.paused = false;
        self.saved_at = now_seconds();
        Reaction {
            messages: vec![FromWorker::Progress {
                run_id: self.run_id,
                snapshot,
                paused: false,
            }],
            step: Some(self.generation),
        }
    }

    /// Pauses a running run (no-op otherwise), reporting the paused state.
    pub fn pause(&mut self) -> Reaction {
        match &self.session {
            Some(session) if !self.paused => {
                self.paused = true;
                self.generation += 1;
                Reaction::message(FromWorker::Progress {
                    run_id: self.run_id,
                    snapshot: session.snapshot(),
                    paused: true,
                })
            }
            _ => Reaction::default(),
        }
    }

    /// Resumes a paused run (no-op otherwise).
    pub fn resume(&mut self) -> Reaction {
        match &self.session {
            Some(session) if self.paused => {
                self.paused = false;
                self.generation += 1;
                Reaction {
                    messages: vec![FromWorker::Progress {
                        run_id: self.run_id,
                        snapshot: session.snapshot(),
                        paused: false,
                    }],
                    step: Some(self.generation),
                }
            }
            _ => Reaction::default(),
        }
    }

    /// Stops the run (running or paused) and reports its result: the best graph so far.
    pub fn stop(&mut self) -> Reaction {
        self.generation += 1;
        match self.session.take() {
            Some(mut session) => {
                session.stop();
                Reaction::message(finished(self.run_id, &session))
            }
            None => Reaction::default(),
        }
    }

    /// One step of about `budget_seconds` when `generation` is current and the run is not paused;
    /// reports progress, or the result once the run has ended.
    pub fn tick(&mut self, generation: u64, budget_seconds: f64) -> Reaction {
        if generation != self.generation || self.paused {
            return Reaction::default();
        }
        let Some(session) = self.session.as_mut() else {
            return Reaction::default();
        };
        let started = now_seconds();
        let snapshot = session.step(budget_seconds);
        if session.is_finished() {
            let message = finished(self.run_id, session);
            self.session = None;
            return Reaction::message(message);
        }
        let mut messages = vec![FromWorker::Progress {
            run_id: self.run_id,
            snapshot,
            paused: false,
        }];
        if unit_was_long(now_seconds() - started, budget_seconds) {
            messages.push(checkpoint(self.run_id, session));
        }
        if now_seconds() - self.saved_at >= SAVE_SECONDS {
            self.saved_at = now_seconds();
            messages.push(FromWorker::Saved {
                run_id: self.run_id,
                session: session.checkpoint(),
            });
        }
        Reaction {
            messages,
            step: Some(generation),
        }
    }
}

/// Seconds between two [`FromWorker::Saved`] copies of a run sent to the page.
pub const SAVE_SECONDS: f64 = 5.0;

/// Seconds a step may overrun its budget before its units count as long: the page can then no
/// longer rely on a stop request being read between steps, and needs a checkpoint.
pub const LONG_UNIT_SECONDS: f64 = 0.5;

/// Whether a step that took `step_seconds` for a budget of `budget_seconds` did a long unit.
fn unit_was_long(step_seconds: f64, budget_seconds: f64) -> bool {
    step_seconds - budget_seconds > LONG_UNIT_SECONDS
}

/// The result the run would give if it were stopped now, without stopping it: what the page shows
/// if it must end a worker that is inside a long unit of work and cannot read the stop request
/// (a single-threaded worker reads messages only between units).
fn checkpoint(run_id: u64, session: &Session) -> FromWorker {
    let mut stopped = session.clone();
    stopped.stop();
    FromWorker::Checkpoint {
        run_id,
        result: Box::new(stopped.result()),
    }
}

fn finished(run_id: u64, session: &Session) -> FromWorker {
    FromWorker::Finished {
        run_id,
        snapshot: session.snapshot(),
        result: Box::new(session.result()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::cgp::Preset;
    use crate::discovery::knowledge::Knowledge;
    use crate::engine::{RunResult, Status};

    /// A 3-variable chain a → b → c with nonlinear mechanisms, as CSV text.
    fn chain_csv(rows: usize) -> String {
        let mut text = String::from("a,b,c\n");
        for n in 0..rows {
            let a = (n as f64 * 0.7).sin() * 2.0;
            let b = a.tanh() + 0.1 * (n as f64 * 1.3).cos();
            let c = b * b + 0.05 * (n as f64 * 2.1).sin();
            text.push_str(&format!("{a:.6},{b:.6},{c:.6}\n"));
        }
        text
    }

    fn request(max_iterations: usize) -> RunRequest {
        let mut settings = Preset::Interactive.settings();
        settings.restarts = 1;
        settings.max_rows = 60;
        settings.inducing_points = 8;
        settings.cap_iterations(max_iterations);
        RunRequest {
            run_id: 1,
            preset: Preset::Interactive,
            settings,
            seed: 3,
            knowledge: Knowledge::none(3),
        }
    }

    fn loaded() -> Driver {
        let mut driver = Driver::new();
        let reaction = driver.load(
            1,
            "chain.csv",
            chain_csv(80).as_bytes(),
            &CsvOptions::default(),
            &mut |_| {},
        );
        assert!(matches!(
            reaction.messages[..],
            [FromWorker::DataLoaded { .. }]
        ));
        driver
    }

    /// Ticks until the run ends; returns the number of ticks and the final message.
    fn run_to_end(driver: &mut Driver, mut generation: u64) -> (usize, FromWorker) {
        for ticks in 1..10_000 {
            let mut reaction = driver.tick(generation, 0.01);
            match reaction.step {
                Some(g) => generation = g,
                None => return (ticks, reaction.messages.pop().expect("a final message")),
            }
        }
        panic!("the run did not end");
    }

    #[test]
    fn a_run_starts_steps_and_finishes_with_a_result() {
        let mut driver = loaded();
        let start = driver.start(request(40));
        assert!(matches!(
            start.messages[..],
            [FromWorker::Progress { paused: false, .. }]
        ));
        let (ticks, last) = run_to_end(&mut driver, start.step.expect("a step is scheduled"));
        assert!(ticks > 1);
        match last {
            FromWorker::Finished {
                snapshot, result, ..
            } => {
                assert_eq!(snapshot.status, Status::Done);
                assert_eq!(result.status, Status::Done);
                assert_eq!(result.names, ["a", "b", "c"]);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(!driver.is_running());
    }

    #[test]
    fn pause_holds_the_run_and_resume_continues_it() {
        let mut driver = loaded();
        let g0 = driver.start(request(40)).step.unwrap();
        let g0 = driver.tick(g0, 0.01).step.unwrap();
        let paused = driver.pause();
        let iteration = match &paused.messages[..] {
            [FromWorker::Progress {
                paused: true,
                snapshot,
                run_id: 1,
            }] => snapshot.iteration,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(paused.step, None);
        // The step scheduled before the pause does nothing, and so does a second pause.
        let stale = driver.tick(g0, 0.01);
        assert!(stale.messages.is_empty() && stale.step.is_none());
        assert!(driver.pause().messages.is_empty());
        let resumed = driver.resume();
        let g1 = resumed.step.expect("resume schedules a step");
        assert_ne!(g1, g0);
        // After resuming, only the new generation steps.
        assert!(driver.tick(g0, 0.01).messages.is_empty());
        let next = driver.tick(g1, 0.01);
        match &next.messages[..] {
            [FromWorker::Progress { snapshot, .. }] => assert!(snapshot.iteration >= iteration),
            [FromWorker::Finished { .. }] => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn stop_mid_run_reports_the_best_graph_so_far() {
        let mut driver = loaded();
        let mut g = driver.start(request(400)).step.unwrap();
        for _ in 0..5 {
            g = driver.tick(g, 0.01).step.unwrap();
        }
        let stopped = driver.stop();
        match &stopped.messages[..] {
            [FromWorker::Finished {
                result, snapshot, ..
            }] => {
                assert_eq!(result.status, Status::Stopped);
                assert_eq!(snapshot.status, Status::Stopped);
                assert!(!result.complete);
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(!driver.is_running());
        assert!(driver.tick(g, 0.01).messages.is_empty());
        assert!(driver.stop().messages.is_empty());
    }

    /// A checkpoint is the result a stop at that moment gives, and the run goes on after it.
    #[test]
    fn a_checkpoint_is_the_result_a_stop_would_give_and_the_run_goes_on() {
        assert!(unit_was_long(0.08 + LONG_UNIT_SECONDS + 0.01, 0.08));
        assert!(!unit_was_long(0.08 + LONG_UNIT_SECONDS - 0.01, 0.08));
        let mut driver = loaded();
        let mut g = driver.start(request(400)).step.unwrap();
        for _ in 0..5 {
            g = driver.tick(g, 0.01).step.unwrap();
        }
        let session = driver.session.as_ref().unwrap();
        let FromWorker::Checkpoint { run_id, result } = checkpoint(driver.run_id, session) else {
            panic!("a checkpoint")
        };
        assert_eq!(run_id, 1);
        assert!(
            driver.is_running(),
            "taking a checkpoint does not stop the run"
        );
        assert_eq!(result.status, Status::Stopped);
        let FromWorker::Finished {
            result: stopped, ..
        } = driver.stop().messages.remove(0)
        else {
            panic!("a result")
        };
        let strip = |mut r: RunResult| {
            r.seconds = 0.0;
            r
        };
        assert_eq!(strip(*result), strip(*stopped));
        // A stopped run gives no checkpoint (nothing is running).
        assert!(driver.tick(g, 0.01).messages.is_empty());
    }

    /// A run saved by one worker goes on in another (a fresh driver holding the same data) and
    /// ends with the result the first would have given.
    #[test]
    fn a_saved_run_goes_on_in_a_fresh_worker_to_the_same_result() {
        let mut whole = loaded();
        let g = whole.start(request(200)).step.unwrap();
        let (_, last) = run_to_end(&mut whole, g);
        let FromWorker::Finished {
            result: expected, ..
        } = last
        else {
            panic!("a result")
        };
        let mut first = loaded();
        let mut g = first.start(request(200)).step.unwrap();
        for _ in 0..20 {
            g = first.tick(g, 0.0).step.unwrap();
        }
        let saved = first.session.as_ref().unwrap().checkpoint();
        let mut second = loaded();
        let go_on = second.continue_run(7, &saved);
        assert!(matches!(
            go_on.messages[..],
            [FromWorker::Progress { run_id: 7, .. }]
        ));
        let (_, last) = run_to_end(&mut second, go_on.step.unwrap());
        let FromWorker::Finished { run_id, result, .. } = last else {
            panic!("a result")
        };
        assert_eq!(run_id, 7);
        // The thread count is recorded as used (it never changes the result).
        let strip = |mut r: RunResult| {
            r.seconds = 0.0;
            r.settings.threads = 0;
            r
        };
        assert_eq!(strip(*result), strip(*expected));
        // Without data, or with a broken save, it is refused with a reason.
        let refused = Driver::new().continue_run(8, &saved);
        assert!(
            matches!(&refused.messages[..], [FromWorker::RunRefused { message, .. }] if message.contains("load the run's data"))
        );
        let refused = loaded().continue_run(9, "{}");
        assert!(
            matches!(&refused.messages[..], [FromWorker::RunRefused { message, .. }] if message.contains("could not go on"))
        );
    }

    #[test]
    fn a_run_without_data_or_with_bad_settings_is_refused_with_a_reason() {
        let mut driver = Driver::new();
        match &driver.start(request(10)).messages[..] {
            [FromWorker::RunRefused { message, .. }] => {
                assert!(message.contains("load a data set"))
            }
            other => panic!("unexpected {other:?}"),
        }
        let mut driver = loaded();
        let mut bad = request(10);
        bad.settings.restarts = 0;
        match &driver.start(bad).messages[..] {
            [FromWorker::RunRefused { message, .. }] => assert!(message.contains("restart")),
            other => panic!("unexpected {other:?}"),
        }
        let mut wrong_size = request(10);
        wrong_size.knowledge = Knowledge::none(4);
        match &driver.start(wrong_size).messages[..] {
            [FromWorker::RunRefused { message, .. }] => assert!(message.contains("4 variables")),
            other => panic!("unexpected {other:?}"),
        }
        assert!(!driver.is_running());
    }

    #[test]
    fn new_data_ends_the_run_and_a_refused_file_leaves_no_data() {
        let mut driver = loaded();
        let g = driver.start(request(40)).step.unwrap();
        let refused = driver.load(
            2,
            "bad.csv",
            b"a,b\n1,x\n",
            &CsvOptions::default(),
            &mut |_| {},
        );
        assert!(matches!(
            refused.messages[..],
            [FromWorker::DataRejected { .. }]
        ));
        assert!(!driver.is_running());
        assert!(driver.tick(g, 0.01).messages.is_empty());
        assert!(matches!(
            driver.start(request(10)).messages[..],
            [FromWorker::RunRefused { .. }]
        ));
    }
}
