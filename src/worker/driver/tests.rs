use super::*;
use crate::discovery::knowledge::Knowledge;
use crate::discovery::settings::{Method, Preset};
use crate::engine::{RunResult, Status};
use crate::runner::cost_model::PROBE_JOBS_PER_SIDE;
use crate::worker::protocol::ExplainAbout;

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
    load_chain(&mut driver, 1);
    driver
}

/// Loads the 80-row chain as load `load_id`, which must be accepted.
fn load_chain(driver: &mut Driver, load_id: u64) {
    let reaction = driver.load(
        load_id,
        "chain.csv",
        chain_csv(80).as_bytes(),
        &CsvOptions::default(),
        &mut |_| {},
    );
    assert!(matches!(
        reaction.messages[..],
        [FromWorker::DataLoaded { .. }]
    ));
}

/// Plays the shell of one compute worker for tests that step a run by hand: every unit a
/// reaction sends away is computed at once and its outcomes given back (their messages after
/// the reaction's own), until the driver asks for a tick or ends.
#[derive(Default)]
struct OneWorker {
    compute: Option<ComputeWorker>,
    loaded: u64,
    units: usize,
}

impl OneWorker {
    fn serve(&mut self, driver: &mut Driver, mut reaction: Reaction) -> Reaction {
        while let Some(d) = reaction.dispatch.take() {
            let compute = self.compute.get_or_insert_with(ComputeWorker::new);
            let (id, data) = driver.data().expect("a run holds its data");
            if self.loaded != id {
                assert!(compute.handle(&data_message(id, data)).is_none());
                self.loaded = id;
            }
            let reply = compute
                .handle(&jobs_message(&d, 0..d.jobs.len()))
                .expect("a reply");
            let (batch, _, outcomes) = read_reply(&reply).expect("a readable reply");
            self.units += 1;
            let mut next = driver.outcomes(batch, outcomes);
            let mut messages = std::mem::take(&mut reaction.messages);
            messages.append(&mut next.messages);
            next.messages = messages;
            reaction = next;
        }
        reaction
    }

    fn tick(&mut self, driver: &mut Driver, generation: u64, budget: f64) -> Reaction {
        let reaction = driver.tick(generation, budget);
        self.serve(driver, reaction)
    }
}

/// Ticks until the run ends, units sent away computed by one compute worker; returns the
/// number of ticks and the final message.
fn run_to_end(driver: &mut Driver, mut generation: u64) -> (usize, FromWorker) {
    let mut shell = OneWorker::default();
    for ticks in 1..10_000 {
        let mut reaction = shell.tick(driver, generation, 0.01);
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
        [
            FromWorker::Pong {
                backend: ComputeBackend::Cpu,
                adapter: None,
                note: None,
                switched: false
            },
            FromWorker::Compute { workers: 1, .. },
            FromWorker::Progress { paused: false, .. }
        ]
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
    let mut shell = OneWorker::default();
    let g0 = driver.start(request(40)).step.unwrap();
    let g0 = shell.tick(&mut driver, g0, 0.01).step.unwrap();
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
    // The next report (a unit sent away reports only when one is due).
    let mut g = g1;
    for _ in 0..1000 {
        let next = shell.tick(&mut driver, g, 0.01);
        match next.messages.last() {
            Some(FromWorker::Progress { snapshot, .. }) => {
                assert!(snapshot.iteration >= iteration);
                return;
            }
            Some(FromWorker::Finished { .. }) => return,
            Some(other) => panic!("unexpected {other:?}"),
            None => g = next.step.expect("the run goes on"),
        }
    }
    panic!("no report after resuming");
}

/// Issue 35, item 6: with one worker, a unit that may run long (here the first starting fit)
/// goes to a compute worker, so this worker stays free: a pause and a stop land at once, the
/// stop ending the compute worker's job (its outcome, arriving late, is dropped).
#[test]
fn with_one_worker_a_long_unit_goes_away_and_pause_and_stop_land_at_once() {
    let mut driver = loaded();
    let start = driver.start(request(400));
    let first = driver.tick(start.step.unwrap(), 0.01);
    let d = first
        .dispatch
        .expect("the starting fit is sent to a compute worker");
    assert!(first.step.is_none(), "the worker waits for its outcome");
    let paused = driver.pause();
    assert!(
        matches!(
            paused.messages[..],
            [FromWorker::Progress { paused: true, .. }]
        ),
        "{:?}",
        paused.messages
    );
    let _ = driver.resume();
    // The compute worker's outcome, which will arrive after the stop.
    let (_, data) = driver.data().expect("a run holds its data");
    let outcomes: Vec<Outcome> = d.jobs.iter().map(|job| job.run(data)).collect();
    let stopped = driver.stop();
    assert!(stopped.reset_pool, "the compute worker's job is ended");
    match &stopped.messages[..] {
        [FromWorker::Finished { result, .. }] => {
            assert_eq!(result.status, Status::Stopped);
            assert!(!result.has_graph(), "stopped inside the first starting fit");
        }
        other => panic!("unexpected {other:?}"),
    }
    // The fit's outcome, arriving after the stop, changes nothing.
    let late = driver.outcomes(d.batch, outcomes);
    assert!(late.messages.is_empty() && late.step.is_none() && late.dispatch.is_none());
}

#[test]
fn stop_mid_run_reports_the_best_graph_so_far() {
    let mut driver = loaded();
    let mut shell = OneWorker::default();
    let mut g = driver.start(request(400)).step.unwrap();
    for _ in 0..5 {
        g = shell.tick(&mut driver, g, 0.01).step.unwrap();
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
    let mut shell = OneWorker::default();
    let mut g = driver.start(request(400)).step.unwrap();
    for _ in 0..5 {
        g = shell.tick(&mut driver, g, 0.01).step.unwrap();
    }
    let session = driver.session.as_ref().unwrap();
    let backend = driver.result_backend();
    let FromWorker::Checkpoint { run_id, result } = checkpoint(driver.run_id, session, backend)
    else {
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
        r.iteration_time = None;
        if let Some(stop) = r.stopped.as_mut() {
            stop.at = None;
            stop.elapsed_seconds = 0.0;
        }
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
    let mut shell = OneWorker::default();
    let mut g = first.start(request(200)).step.unwrap();
    for _ in 0..20 {
        g = shell.tick(&mut first, g, 0.0).step.unwrap();
    }
    let saved = first.session.as_ref().unwrap().checkpoint();
    let mut second = loaded();
    let go_on = second.continue_run(7, &saved);
    assert!(matches!(
        go_on.messages[..],
        [
            FromWorker::Pong { .. },
            FromWorker::Compute { run_id: 7, .. },
            FromWorker::Progress { run_id: 7, .. }
        ]
    ));
    let (_, last) = run_to_end(&mut second, go_on.step.unwrap());
    let FromWorker::Finished { run_id, result, .. } = last else {
        panic!("a result")
    };
    assert_eq!(run_id, 7);
    // The thread count, and the backend named by it, are recorded as used (they never change
    // the result).
    let strip = |mut r: RunResult| {
        r.seconds = 0.0;
        r.iteration_time = None;
        r.settings.threads = 0;
        r.backend.clear();
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

/// Plays the shell of a pool of `workers` compute workers: every job of every dispatch goes
/// to a [`ComputeWorker`] as JSON and comes back as JSON, round-robin. Returns the final
/// message and the number of batches.
fn run_on_pool(driver: &mut Driver, mut reaction: Reaction, workers: usize) -> (FromWorker, usize) {
    let mut computes: Vec<ComputeWorker> = (0..workers).map(|_| ComputeWorker::new()).collect();
    let mut loaded = vec![0u64; workers];
    let mut batches = 0;
    for _ in 0..200_000 {
        if let Some(d) = reaction.dispatch.take() {
            batches += 1;
            let (id, data) = driver.data().expect("a run holds its data");
            assert_eq!(id, d.data_id);
            let data_bytes = data_message(id, data);
            let mut outcomes: Vec<Option<Outcome>> = vec![None; d.jobs.len()];
            let per = jobs_per_message(d.jobs.len(), workers);
            for (m, start) in (0..d.jobs.len()).step_by(per).enumerate() {
                let range = start..(start + per).min(d.jobs.len());
                let w = (m + batches) % workers;
                if loaded[w] != d.data_id {
                    assert!(computes[w].handle(&data_bytes).is_none());
                    loaded[w] = d.data_id;
                }
                let reply = computes[w]
                    .handle(&jobs_message(&d, range.clone()))
                    .expect("a reply");
                let (batch, first, got) = read_reply(&reply).expect("a readable reply");
                assert_eq!(
                    (batch, first, got.len()),
                    (d.batch, range.start, range.len())
                );
                for (k, o) in got.into_iter().enumerate() {
                    outcomes[first + k] = Some(o);
                }
            }
            let outcomes = outcomes.into_iter().map(|o| o.unwrap()).collect();
            reaction = driver.outcomes(d.batch, outcomes);
        } else if let Some(g) = reaction.step {
            reaction = driver.tick(g, 0.01);
        } else {
            return (reaction.messages.pop().expect("a final message"), batches);
        }
    }
    panic!("the run did not end");
}

#[test]
fn a_pool_of_compute_workers_gives_the_graph_the_worker_alone_gives() {
    for method in [Method::Cgp, Method::Exact] {
        let mut results = Vec::new();
        for threads in [1, 3] {
            let mut driver = loaded();
            let mut req = request(40);
            req.settings.restarts = 2;
            req.settings.method = method;
            req.settings.threads = threads;
            let start = driver.start(req);
            assert!(
                matches!(start.messages[1], FromWorker::Compute { workers, .. } if workers == threads),
                "{:?}",
                start.messages[1]
            );
            // Units that may run long (family fits, starting fits) go to a compute worker
            // even on one.
            let (last, batches) = run_on_pool(&mut driver, start, threads);
            assert!(threads == 1 || batches >= 2, "{batches} batches");
            let FromWorker::Finished { result, .. } = last else {
                panic!("a result, got {last:?}")
            };
            assert_eq!(result.status, Status::Done);
            assert!(!driver.is_running());
            results.push(result);
        }
        let (one, pool) = (&results[0], &results[1]);
        assert_eq!(one.edges, pool.edges, "{method:?}");
        assert_eq!(one.adjacency, pool.adjacency, "{method:?}");
        let scores = |r: &RunResult| r.restarts.iter().map(|o| o.score).collect::<Vec<_>>();
        assert_eq!(scores(one), scores(pool), "{method:?}");
        assert_eq!(one.families_fitted, pool.families_fitted, "{method:?}");
    }
}

/// The exact search's family fits go out to a compute worker even when one is asked for (so
/// the coordinating worker can act on a stop inside a long fit), and a stopped exact run
/// started again goes on from the families it scored: none is fitted twice, and the graph is
/// the uninterrupted run's.
#[test]
fn exact_fits_go_to_a_compute_worker_and_a_stopped_run_goes_on_from_its_scores() {
    let exact = || {
        let mut req = request(40);
        req.settings.method = Method::Exact;
        req.settings.threads = 1;
        req
    };
    let mut whole = loaded();
    let start = whole.start(exact());
    let (last, batches) = run_on_pool(&mut whole, start, 1);
    let FromWorker::Finished { result: full, .. } = last else {
        panic!("a result, got {last:?}")
    };
    assert!(batches > 5, "{batches} batches");
    assert_eq!(full.status, Status::Done);

    // The same run stopped after 10 units of one family each: the 9 of screening (3 empty
    // families, 6 of one parent) and one of two parents.
    let mut driver = loaded();
    let mut reaction = driver.start(exact());
    let mut compute = ComputeWorker::new();
    let mut units = 0;
    while units < 10 {
        if let Some(d) = reaction.dispatch.take() {
            let (id, data) = driver.data().expect("a run holds its data");
            assert!(compute.handle(&data_message(id, data)).is_none());
            let reply = compute
                .handle(&jobs_message(&d, 0..d.jobs.len()))
                .expect("a reply");
            let (batch, _, outcomes) = read_reply(&reply).expect("a readable reply");
            reaction = driver.outcomes(batch, outcomes);
            units += 1;
        } else {
            let g = reaction.step.expect("a step or a dispatch");
            reaction = driver.tick(g, 0.01);
        }
    }
    let stopped = driver.stop();
    let Some(FromWorker::Finished { result: part, .. }) = stopped.messages.last() else {
        panic!("a stopped result")
    };
    assert_eq!(part.status, Status::Stopped);
    assert_eq!(part.families_fitted, 10);
    assert!(!part.edges.is_empty() || part.failures.is_empty());
    // Started again: the 10 come from the cache and the rest are fitted.
    let again = driver.start(exact());
    let (last, _) = run_on_pool(&mut driver, again, 1);
    let FromWorker::Finished { result: rest, .. } = last else {
        panic!("a result, got {last:?}")
    };
    assert_eq!(rest.status, Status::Done);
    assert_eq!(rest.families_fitted + 10, full.families_fitted);
    assert!(rest.cache_hits >= 10, "{} from the cache", rest.cache_hits);
    assert_eq!(rest.edges, full.edges);
    assert_eq!(rest.adjacency, full.adjacency);
    // New data forget the scores.
    load_chain(&mut driver, 2);
    let fresh = driver.start(exact());
    let (last, _) = run_on_pool(&mut driver, fresh, 1);
    let FromWorker::Finished { result: fresh, .. } = last else {
        panic!("a result, got {last:?}")
    };
    assert_eq!(fresh.cache_hits, 0);
    assert_eq!(fresh.families_fitted, full.families_fitted);
}

/// A short run with the uncollapsed bound (the paper preset's bound) on one worker.
fn uncollapsed_request() -> RunRequest {
    let mut settings = Preset::Paper.settings();
    settings.restarts = 1;
    settings.max_rows = 60;
    settings.inducing_points = 6;
    settings.uncollapsed.batch_size = 20;
    settings.uncollapsed.samples = 2;
    settings.start_iterations = 20;
    settings.threads = 1;
    settings.cap_iterations(30);
    RunRequest {
        run_id: 2,
        preset: Preset::Paper,
        settings,
        seed: 5,
        knowledge: Knowledge::none(3),
    }
}

/// Plays the shell with a GPU: every dispatch is computed here (as the shell computes it, to
/// within float32) and handed back; after `lose_after` dispatches the GPU is reported lost
/// and the batch in hand is still delivered. Returns the final message, the dispatches and
/// the backend messages seen.
fn run_with_gpu(
    driver: &mut Driver,
    mut reaction: Reaction,
    lose_after: usize,
) -> (FromWorker, usize, Vec<FromWorker>) {
    let mut dispatches = 0;
    let mut backends = Vec::new();
    for _ in 0..200_000 {
        backends.extend(
            reaction
                .messages
                .iter()
                .filter(|m| matches!(m, FromWorker::Pong { .. }))
                .cloned(),
        );
        if let Some(d) = reaction.dispatch.take() {
            dispatches += 1;
            let (_, data) = driver.data().expect("a run holds its data");
            let outcomes = d.jobs.iter().map(|job| job.run(data)).collect();
            if dispatches == lose_after {
                let lost = driver.gpu_lost("destroyed by a test");
                backends.extend(lost.messages);
                assert!(lost.step.is_none() && lost.dispatch.is_none());
            }
            reaction = driver.outcomes(d.batch, outcomes);
        } else if let Some(g) = reaction.step {
            reaction = driver.tick(g, 0.01);
        } else {
            let last = reaction.messages.pop().expect("a final message");
            return (last, dispatches, backends);
        }
    }
    panic!("the run did not end");
}

#[test]
fn a_gpu_run_is_dispatched_on_one_worker_and_goes_on_on_the_cpu_when_the_gpu_is_lost() {
    let result = |last: FromWorker| match last {
        FromWorker::Finished { result, .. } => *result,
        other => panic!("a result, got {other:?}"),
    };
    // Without a GPU the run computes in the worker itself but for the units that may run
    // long (the starting fits and the final bounds), which go to a compute worker.
    let mut plain = loaded();
    let start = plain.start(uncollapsed_request());
    let (last, dispatches, backends) = run_with_gpu(&mut plain, start, usize::MAX);
    assert!(dispatches > 0);
    assert!(matches!(
        backends[..],
        [FromWorker::Pong {
            backend: ComputeBackend::Cpu,
            adapter: None,
            switched: false,
            ..
        }]
    ));
    let alone = result(last);

    // With one, every unit is dispatched; losing it midway switches the run to the CPU
    // without changing its outcome.
    let mut driver = loaded();
    driver.set_gpu(Some("test adapter".into()), Ok(()));
    let start = driver.start(uncollapsed_request());
    assert!(start.step.is_some());
    let (last, dispatches, backends) = run_with_gpu(&mut driver, start, 3);
    assert!(dispatches >= 3, "{dispatches} dispatches");
    match &backends[..] {
        [FromWorker::Pong {
            backend: ComputeBackend::WebGpu,
            adapter: Some(a),
            note: None,
            switched: false,
        }, FromWorker::Pong {
            backend: ComputeBackend::Cpu,
            note: Some(note),
            switched: true,
            ..
        }] => {
            assert_eq!(a, "test adapter");
            assert!(note.contains("destroyed by a test"), "{note}");
        }
        other => panic!("backend messages {other:?}"),
    }
    assert!(!driver.run_uses_gpu());
    let switched = result(last);
    assert_eq!(switched.edges, alone.edges);
    assert_eq!(switched.adjacency, alone.adjacency);

    // A collapsed run whose Ψ2 is too small to time on the GPU says so, and computes in the
    // worker.
    let mut collapsed = loaded();
    collapsed.set_gpu(Some("test adapter".into()), Ok(()));
    collapsed.set_psi2_min_work(f64::INFINITY);
    let start = collapsed.start(request(40));
    match &start.messages[0] {
        FromWorker::Pong {
            backend: ComputeBackend::Cpu,
            adapter: Some(_),
            note: Some(note),
            switched: false,
        } => assert!(note.contains("is below the inf"), "{note}"),
        other => panic!("{other:?}"),
    }
    assert!(collapsed.collapsed_probe().is_none());
    assert!(!collapsed.run_uses_gpu());
    // From the floor on, the collapsed run is timed on both sides first: the badge says CPU
    // while it measures, and its units are dispatched (the shell runs them, either side).
    let mut collapsed = loaded();
    collapsed.set_gpu(Some("test adapter".into()), Ok(()));
    collapsed.set_psi2_min_work(0.0);
    let start = collapsed.start(request(40));
    match &start.messages[0] {
        FromWorker::Pong {
            backend: ComputeBackend::Cpu,
            note: Some(note),
            ..
        } => assert!(
            note.contains("timed with their Ψ2 sums on WebGPU"),
            "{note}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(collapsed.collapsed_probe().is_some_and(|p| p.probing()));
    assert!(collapsed.tick(start.step.unwrap(), 0.01).dispatch.is_some());
    // Forced to the GPU (the test hook) the same run computes there, unmeasured.
    let mut collapsed = loaded();
    collapsed.set_gpu(Some("test adapter".into()), Ok(()));
    collapsed.set_psi2_min_work(0.0);
    collapsed.set_collapsed_side(Side::Device);
    let start = collapsed.start(request(40));
    assert!(matches!(
        &start.messages[0],
        FromWorker::Pong {
            backend: ComputeBackend::WebGpu,
            note: None,
            ..
        }
    ));
    assert!(collapsed.tick(start.step.unwrap(), 0.01).dispatch.is_some());
    // The exact search measures where its family fits compute: the badge says CPU while
    // the first fits are timed on both sides, and the shell gets the run's probe.
    let mut exact = loaded();
    exact.set_gpu(Some("test adapter".into()), Ok(()));
    let mut req = request(40);
    req.settings.method = Method::Exact;
    let start = exact.start(req.clone());
    match &start.messages[0] {
        FromWorker::Pong {
            backend: ComputeBackend::Cpu,
            note: Some(note),
            ..
        } => assert!(note.contains("timed on WebGPU"), "{note}"),
        other => panic!("{other:?}"),
    }
    let probe = exact
        .family_probe()
        .expect("an exact run with a GPU has a probe");
    assert!(probe.probing());
    // Once the probe places the fits on the GPU, the next unit's outcomes tell the page so
    // (once), units grow to feed the device's lockstep rounds, and the result says why.
    for _ in 0..PROBE_JOBS_PER_SIDE {
        probe.record(Side::Host, 1.0, 1.0);
        probe.record(Side::Device, 0.1, 1.0);
    }
    let dispatch = exact
        .tick(start.step.unwrap(), 0.01)
        .dispatch
        .expect("a unit");
    let jobs = dispatch.jobs.len();
    assert!(jobs > exact.workers(), "{jobs} families in a GPU unit");
    let data = exact.data().unwrap().1.clone();
    let outcomes: Vec<Outcome> = dispatch.jobs.iter().map(|j| j.run(&data)).collect();
    let reaction = exact.outcomes(dispatch.batch, outcomes);
    let told = |r: &Reaction| {
        r.messages
            .iter()
            .filter(|m| {
                matches!(
                    m,
                    FromWorker::Pong {
                        backend: ComputeBackend::WebGpu,
                        ..
                    }
                )
            })
            .count()
    };
    assert_eq!(told(&reaction), 1);
    let (last, _) = run_on_pool(&mut exact, reaction, 1);
    let choices = result(last).device_choices;
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0].chosen, "GPU");
    assert!(
        choices[0].reason.starts_with("measured"),
        "{:?}",
        choices[0]
    );
    // A test hook forces the side: the badge says WebGPU from the start.
    let mut forced = loaded();
    forced.set_gpu(Some("test adapter".into()), Ok(()));
    forced.set_family_side(Side::Device);
    let start = forced.start(req);
    assert!(matches!(
        &start.messages[0],
        FromWorker::Pong {
            backend: ComputeBackend::WebGpu,
            ..
        }
    ));
    // A device that failed to open is named, and the run computes on the CPU.
    let mut refused = loaded();
    refused.set_gpu(Some("test adapter".into()), Err("no device".into()));
    let start = refused.start(uncollapsed_request());
    assert!(matches!(
        &start.messages[0],
        FromWorker::Pong { backend: ComputeBackend::Cpu, note: Some(n), .. } if n == "no device"
    ));
}

/// An explanation request `request_id` about the graph `edges` with `seed`.
fn about(request_id: u64, edges: &[(usize, usize)], seed: u64) -> ExplainAbout {
    ExplainAbout {
        request_id,
        edges: edges.to_vec(),
        seed,
    }
}

/// An edge of the loaded chain is explained by its evidence on the loaded data; a request
/// that cannot be answered says why.
#[test]
fn an_edge_is_explained_by_its_evidence() {
    let driver = loaded();
    match driver.explain_edge(&about(4, &[(0, 1), (1, 2)], 0), (1, 2)) {
        FromWorker::EdgeExplained {
            request_id,
            evidence,
        } => {
            assert_eq!(request_id, 4);
            assert_eq!((evidence.from, evidence.to), (1, 2));
            // c = b² + small noise: dropping b leaves c nearly unexplained.
            assert!(evidence.removed < -10.0, "{}", evidence.removed);
            assert!(evidence.reversed_delta().is_some());
        }
        other => panic!("{other:?}"),
    }
    let refused = |reply: FromWorker, needle: &str| match reply {
        FromWorker::ExplainFailed { message, .. } => {
            assert!(message.contains(needle), "{message}")
        }
        other => panic!("{other:?}"),
    };
    refused(
        driver.explain_edge(&about(5, &[(0, 1)], 0), (1, 2)),
        "not an edge",
    );
    refused(
        driver.explain_edge(&about(6, &[(0, 1), (1, 0)], 0), (0, 1)),
        "cannot be explained",
    );
    refused(
        Driver::new().explain_edge(&about(7, &[(0, 1)], 0), (0, 1)),
        "load data first",
    );
    // A variable's fitted conditional: c = b² along b, a parabola.
    match driver.fit_conditional(&about(8, &[(0, 1), (1, 2)], 0), 2, 1) {
        FromWorker::ConditionalFitted { request_id, curve } => {
            assert_eq!((request_id, curve.child, curve.shown_parent), (8, 2, 1));
            let g = curve.grid.len();
            let middle = curve.mean[g / 2];
            assert!(curve.mean[0] > middle && curve.mean[g - 1] > middle);
            assert_eq!(curve.points.len(), 80);
        }
        other => panic!("{other:?}"),
    }
    // b → c and its reversal side by side: each curve is the family the evidence scored.
    match driver.compare_directions(&about(11, &[(0, 1), (1, 2)], 0), (1, 2)) {
        FromWorker::DirectionsCompared {
            request_id,
            comparison,
        } => {
            let (evidence, forward, backward) = (
                &comparison.evidence,
                &comparison.forward,
                &comparison.backward,
            );
            assert_eq!(request_id, 11);
            assert_eq!((forward.child, forward.shown_parent), (2, 1));
            assert_eq!((backward.child, backward.shown_parent), (1, 2));
            assert_eq!(backward.parents, vec![0, 2], "b's parent a, and c");
            assert_eq!(forward.score.value, evidence.child_family);
            match evidence.reversed {
                crate::discovery::explain::Reversal::Scored {
                    parent_family_reversed,
                    ..
                } => assert_eq!(backward.score.value, parent_family_reversed),
                ref other => panic!("{other:?}"),
            }
        }
        other => panic!("{other:?}"),
    }
    refused(
        driver.compare_directions(&about(12, &[(0, 1)], 0), (1, 2)),
        "not an edge",
    );
    // c has no parent in this graph, so b is not one to draw it along.
    refused(
        driver.fit_conditional(&about(9, &[(0, 1)], 0), 2, 1),
        "1 is not one of the parents []",
    );
    refused(
        driver.fit_conditional(&about(10, &[(0, 1)], 0), 7, 0),
        "there is no variable 7",
    );
}

#[test]
fn stale_or_lost_batches_are_dropped_and_planned_again() {
    let mut driver = loaded();
    let mut req = request(40);
    req.settings.threads = 2;
    let start = driver.start(req);
    let first = driver.tick(start.step.unwrap(), 0.01);
    let d = first.dispatch.expect("jobs for the pool");
    // Outcomes of another batch change nothing.
    assert!(driver.outcomes(d.batch + 1, Vec::new()).step.is_none());
    // The worker running the batch dies: the unit is planned again on fresh workers.
    let lost = driver.compute_lost(d.batch, "test");
    assert!(lost.reset_pool);
    let again = driver.tick(lost.step.unwrap(), 0.01);
    let d2 = again.dispatch.expect("the same work again");
    assert_eq!(d2.jobs.len(), d.jobs.len());
    // A stop while a batch is out ends the run and the pool's work; late outcomes are dropped.
    let stopped = driver.stop();
    assert!(stopped.reset_pool);
    assert!(matches!(
        stopped.messages[..],
        [FromWorker::Finished { .. }]
    ));
    assert!(driver.outcomes(d2.batch, Vec::new()).messages.is_empty());
    // Three losses in one run: the worker computes alone.
    let mut driver = loaded();
    let mut req = request(40);
    req.settings.threads = 2;
    let mut reaction = driver.start(req);
    for _ in 0..MAX_POOL_LOSSES {
        let r = driver.tick(reaction.step.unwrap(), 0.01);
        let d = r.dispatch.expect("jobs");
        reaction = driver.compute_lost(d.batch, "test");
    }
    assert!(matches!(
        reaction.messages[..],
        [FromWorker::Compute { workers: 1, .. }]
    ));
    assert_eq!(driver.workers(), 1);
    let (_, last) = run_to_end(&mut driver, reaction.step.unwrap());
    assert!(matches!(last, FromWorker::Finished { .. }));
}

#[test]
fn a_compute_worker_refuses_jobs_on_data_it_does_not_hold() {
    let mut worker = ComputeWorker::new();
    let data = DMatrix::from_fn(12, 2, |r, c| (r * 2 + c) as f64 / 7.0);
    let dispatch = Dispatch {
        batch: 4,
        data_id: 9,
        jobs: vec![Job::Family {
            child: 1,
            parents: std::borrow::Cow::Owned(vec![0]),
            settings: crate::discovery::family::FamilyScoreSettings::with_inducing(4),
            seed: 1,
            warm: None,
        }],
    };
    let reply = worker.handle(&jobs_message(&dispatch, 0..1)).unwrap();
    assert!(read_reply(&reply).unwrap_err().contains("no data 9"));
    assert!(worker.handle(&data_message(9, &data)).is_none());
    let reply = worker.handle(&jobs_message(&dispatch, 0..1)).unwrap();
    let direct = dispatch.jobs[0].run(&data).into_value().unwrap();
    let (_, _, mut outcomes) = read_reply(&reply).unwrap();
    assert_eq!(outcomes.pop().unwrap().into_value().unwrap(), direct);
    let garbage = worker.handle(b"\xc1 not a message").unwrap();
    assert!(read_reply(&garbage)
        .unwrap_err()
        .contains("could not be read"));
    assert!(read_reply(b"\xc1").is_err());
    // Numbers that JSON cannot hold travel bit for bit.
    let odd = Outcome::Value(Ok(f64::NEG_INFINITY));
    let back: Outcome = decode_compute(&encode_compute(&odd)).unwrap();
    assert_eq!(back.into_value().unwrap(), f64::NEG_INFINITY);
    assert_eq!(jobs_per_message(22, 3), 4);
    assert_eq!(jobs_per_message(1, 8), 1);
    assert_eq!(jobs_per_message(0, 0), 1);
    assert_eq!(compute_workers(0, 4), 3);
    assert_eq!(compute_workers(0, 1), 1);
    assert_eq!(compute_workers(0, 64), 8);
    assert_eq!(compute_workers(3, 1), 3);
}
