//! The exact search's family fits on a GPU (on lavapipe in the test command): concurrent fits'
//! Ψ2 requests share submissions and each gets its own sums; family scores with the sums on the
//! device equal the CPU's; the measured probe times both sides and then places every family on
//! the cheaper one, and says so.

use std::borrow::Cow;
use std::sync::{Arc, Barrier};
use std::time::Duration;

use nalgebra::{DMatrix, DVector};
use occam::discovery::family::{
    family_fit_on, family_score, ComputedOn, FamilyRequest, FamilyScoreSettings,
};
use occam::gp::collapsed::Psi2Device;
use occam::runner::cost_model::{Side, PROBE_JOBS_PER_SIDE};
use occam::runner::gpu::{Gpu, Psi2Factors};
use occam::runner::gpu_executor::{families_in_lockstep, CoalescedPsi2, GpuBackend, ABANDONED};
use occam::runner::{Backend, CpuBackend, Job, Outcome, Pool};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn gpu() -> Option<Gpu> {
    crate::gpu_device::open("GPU family tests")
}

fn factors(n: usize, m: usize, seed: u64) -> Psi2Factors {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    Psi2Factors {
        b: DMatrix::from_fn(n, m, |_, _| -rng.random_range(0.0..6.0)),
        h: DVector::from_fn(n, |_, _| rng.random_range(0.0..2.0)),
        pref: DVector::from_fn(n, |_, _| rng.random_range(0.2..1.0)),
        zw: DVector::from_fn(m, |_, _| rng.random_range(-2.0..2.0)),
    }
}

/// A nonlinear chain a → b → c (standardised enough for the fits).
fn chain(n: usize) -> DMatrix<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut data = DMatrix::zeros(n, 3);
    for r in 0..n {
        let a: f64 = rng.random_range(-1.7..1.7);
        let b = (1.5 * a).sin() + 0.3 * rng.random_range(-1.0..1.0);
        let c = b * b - 0.5 + 0.3 * rng.random_range(-1.0..1.0);
        data[(r, 0)] = a;
        data[(r, 1)] = b;
        data[(r, 2)] = c;
    }
    data
}

fn family_jobs(inducing: usize) -> Vec<Job<'static>> {
    let settings = FamilyScoreSettings::with_inducing(inducing);
    [
        (0, vec![]),
        (1, vec![0]),
        (2, vec![1]),
        (0, vec![1]),
        (1, vec![]),
        (2, vec![0]),
    ]
    .into_iter()
    .map(|(child, parents)| Job::Family {
        child,
        parents: Cow::Owned(parents),
        settings,
        seed: 5,
        warm: None,
    })
    .collect()
}

fn score(outcome: &Outcome) -> (f64, usize) {
    match outcome {
        Outcome::Family(Ok(s)) => (s.value, s.fits.iter().map(|f| f.evaluations()).sum()),
        other => panic!("not a family score: {other:?}"),
    }
}

/// Where a family score says its fits computed.
fn computed_on(outcome: &Outcome) -> Option<ComputedOn> {
    match outcome {
        Outcome::Family(Ok(s)) => s.computed_on,
        other => panic!("not a family score: {other:?}"),
    }
}

/// How many of `outcomes` say their fits computed on `side`.
fn scored_on(outcomes: &[Outcome], side: ComputedOn) -> usize {
    outcomes
        .iter()
        .filter(|o| computed_on(o) == Some(side))
        .count()
}

#[test]
fn concurrent_fits_share_one_submission_and_each_gets_its_own_sums() {
    let Some(gpu) = gpu() else { return };
    let own: Vec<_> = (0..4)
        .map(|k| {
            gpu.psi2_pair_sums(&factors(50 + 10 * k, 6, k as u64))
                .unwrap()
        })
        .collect();
    // A long gather: the batch waits for every running fit, whatever the scheduler does.
    let shared = CoalescedPsi2::with_gather(&gpu, Duration::from_secs(30));
    let ready = Barrier::new(4);
    let answers: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let (shared, ready) = (&shared, &ready);
                scope.spawn(move || {
                    // Each fit registers from its own thread, then all ask at once.
                    let _running = shared.enter();
                    ready.wait();
                    shared.pair_sums(&factors(50 + 10 * k, 6, k as u64))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(shared.counts(), (4, 1), "four requests, one submission");
    for (got, want) in answers.into_iter().zip(own) {
        assert_eq!(
            got.unwrap(),
            want,
            "a request's sums do not depend on its company"
        );
    }
    // A fit that has left no longer holds the others up: one running fit submits at once.
    let alone = CoalescedPsi2::with_gather(&gpu, Duration::from_secs(30));
    let running = alone.enter();
    alone.pair_sums(&factors(20, 4, 9)).unwrap();
    assert_eq!(alone.counts(), (1, 1));
    assert!(!running.was_refused());
    // A fit that has run past the patience gives the device up: its request fails with why,
    // nothing is sent, and the fit knows it was refused.
    alone.set_patience(Duration::ZERO);
    let refused = alone.pair_sums(&factors(20, 4, 9)).unwrap_err();
    assert_eq!(refused, ABANDONED);
    assert!(alone.was_abandoned() && running.was_refused());
    assert!(alone.abandoned_at().is_some());
    assert_eq!(alone.counts(), (1, 1));
}

/// Real family fits on three threads, each evaluation's Ψ2 sums through one coalescer: the fits
/// go in step (a submission carries one request of every fit still running), so the
/// submissions are far fewer than the requests, and the scores are the CPU's.
#[test]
fn concurrent_family_fits_share_their_submissions() {
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let settings = FamilyScoreSettings::with_inducing(8);
    let families = [(1, vec![0]), (2, vec![1]), (0, vec![1])];
    let shared = CoalescedPsi2::with_gather(&gpu, Duration::from_secs(30));
    let on_gpu: Vec<f64> = std::thread::scope(|scope| {
        let handles: Vec<_> = families
            .iter()
            .map(|(child, parents)| {
                let (shared, data) = (&shared, &data);
                scope.spawn(move || {
                    let _running = shared.enter();
                    let request = FamilyRequest {
                        data,
                        child: *child,
                        parents,
                        settings: &settings,
                        seed: 5,
                        warm: None,
                    };
                    family_fit_on(request, Some(shared)).unwrap().score.value
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (requests, submissions) = shared.counts();
    eprintln!("{requests} Ψ2 requests in {submissions} submissions");
    assert!(
        4 * submissions < 3 * requests,
        "{requests} requests in {submissions} submissions"
    );
    for ((child, parents), g) in families.iter().zip(on_gpu) {
        let c = family_score(&data, *child, parents, &settings, 5, None)
            .unwrap()
            .value;
        assert!(
            (g - c).abs() <= 1e-4 * c.abs().max(1.0),
            "GPU {g} against CPU {c}"
        );
    }
}

#[test]
fn family_fits_with_their_psi2_on_the_device_score_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let jobs = family_jobs(8);
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::new(Pool::new(3).unwrap()))
        .with_family_fits_on(Side::Device);
    let before = backend.gpu().traffic();
    let on_gpu = backend.run(&data, &jobs);
    let traffic = backend.gpu().traffic() - before;
    assert!(backend.failure().is_none());
    let mut evaluations = 0;
    for (g, c) in on_gpu.iter().zip(&cpu) {
        let ((gv, ge), (cv, _)) = (score(g), score(c));
        evaluations += ge;
        // Double-float sums move L-BFGS's path by rounding only: the same optimum.
        assert!(
            (gv - cv).abs() <= 1e-4 * cv.abs().max(1.0),
            "GPU {gv} against CPU {cv}"
        );
    }
    // (How many requests share a submission is held by the test above, with exact counts.)
    eprintln!(
        "{evaluations} evaluations, {} submissions",
        traffic.submissions
    );
    assert!(traffic.submissions > 0);
    let choice = &backend.device_choices()[0];
    assert_eq!((choice.chosen.as_str(), choice.cpu_jobs), ("GPU", 0));
    assert_eq!(choice.device_jobs, jobs.len());
    // Each score says where it was computed (the score cache keeps it).
    assert_eq!(scored_on(&on_gpu, ComputedOn::Gpu), jobs.len());
    assert_eq!(scored_on(&cpu, ComputedOn::Cpu), jobs.len());
}

/// The browser's way (nothing may block): the family fits as `async` computations polled in
/// lockstep on one thread, each round's Ψ2 requests in one submission. The scores are the
/// CPU's; the submissions are the rounds, far fewer than the requests; a fit given up is
/// reported as such.
#[test]
fn family_fits_in_lockstep_share_each_round_and_score_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let jobs = family_jobs(8);
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let refs: Vec<&Job<'_>> = jobs.iter().collect();
    let before = gpu.traffic();
    let run =
        pollster::block_on(families_in_lockstep(&gpu, &data, &refs, &|| {}, &|| false)).unwrap();
    let traffic = gpu.traffic() - before;
    let mut requests = 0;
    for (g, c) in run.outputs.iter().zip(&cpu) {
        let ((gv, ge), (cv, _)) = (score(g.as_ref().expect("every fit finished")), score(c));
        // Each evaluation with a latent input asks twice (pair sums, then row sums).
        requests += 2 * ge;
        assert!(
            (gv - cv).abs() <= 1e-4 * cv.abs().max(1.0),
            "lockstep GPU {gv} against CPU {cv}"
        );
    }
    eprintln!(
        "{} rounds, {} submissions, at most {requests} Ψ2 requests",
        run.rounds, traffic.submissions
    );
    assert_eq!(
        traffic.submissions as usize, run.rounds,
        "one submission a round"
    );
    assert!(
        3 * run.rounds < requests,
        "{} rounds for at most {requests} requests",
        run.rounds
    );
    // Given up after the first round: nothing finished, nothing more sent.
    let before = gpu.traffic();
    let cut =
        pollster::block_on(families_in_lockstep(&gpu, &data, &refs, &|| {}, &|| true)).unwrap();
    assert_eq!(cut.rounds, 0);
    assert!(cut.outputs.iter().all(Option::is_none));
    assert_eq!((gpu.traffic() - before).submissions, 0);
}

#[test]
fn the_probe_times_both_sides_then_places_every_family_on_the_cheaper_one() {
    let Some(gpu) = gpu() else { return };
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::new(Pool::new(2).unwrap()));
    the_probe_places_every_family_on_the_cheaper_side(backend);
}

/// The browser worker's plan, run natively: the device's families in lockstep on one thread,
/// the host's timed as if two compute workers ran them.
#[test]
fn in_lockstep_the_probe_times_both_sides_then_places_every_family_on_the_cheaper_one() {
    let Some(gpu) = gpu() else { return };
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::serial()).with_lockstep_families(2);
    the_probe_places_every_family_on_the_cheaper_side(backend);
}

/// Forced to the device, the browser's plan gives the CPU's scores.
#[test]
fn family_fits_forced_to_the_device_in_lockstep_score_as_on_the_cpu() {
    let Some(gpu) = gpu() else { return };
    let data = chain(120);
    let jobs = family_jobs(8);
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let backend = GpuBackend::new(Arc::new(gpu), CpuBackend::serial())
        .with_family_fits_on(Side::Device)
        .with_lockstep_families(2);
    let on_gpu = backend.run(&data, &jobs);
    assert!(backend.failure().is_none());
    for (g, c) in on_gpu.iter().zip(&cpu) {
        let (gv, cv) = (score(g).0, score(c).0);
        assert!(
            (gv - cv).abs() <= 1e-4 * cv.abs().max(1.0),
            "GPU {gv} against CPU {cv}"
        );
    }
    let choice = &backend.device_choices()[0];
    assert_eq!((choice.chosen.as_str(), choice.cpu_jobs), ("GPU", 0));
    assert_eq!(choice.device_jobs, jobs.len());
    assert_eq!(scored_on(&on_gpu, ComputedOn::Gpu), jobs.len());
}

fn the_probe_places_every_family_on_the_cheaper_side(backend: GpuBackend) {
    let data = chain(80);
    let jobs = family_jobs(6);
    assert!(backend.device_choices().is_empty(), "nothing timed yet");
    let cpu = CpuBackend::serial().run(&data, &jobs);
    let first = backend.run(&data, &jobs);
    let choice = backend.device_choices()[0].clone();
    eprintln!("{choice:?}");
    if choice.reason.contains("given up") {
        // A device far slower than the host (lavapipe, most runs): its probe jobs were given up
        // and computed on the CPU (a probe job that finished before is kept).
        assert_eq!(choice.chosen, "CPU");
        assert!(choice.device_jobs < PROBE_JOBS_PER_SIDE);
        assert_eq!(choice.device_jobs + choice.cpu_jobs, jobs.len());
    } else {
        // The probe sent only what it lacked to the device and timed the rest on the CPU.
        assert_eq!(choice.device_jobs, PROBE_JOBS_PER_SIDE);
        assert_eq!(choice.cpu_jobs, jobs.len() - PROBE_JOBS_PER_SIDE);
        let (d, c) = (
            choice.device_seconds_per_unit.unwrap(),
            choice.cpu_seconds_per_unit.unwrap(),
        );
        assert_eq!(choice.chosen, if d < c { "GPU" } else { "CPU" });
        assert!(choice.reason.starts_with("measured"), "{}", choice.reason);
    }
    // The next batch goes wholly to the side chosen.
    let before = backend.gpu().traffic();
    let second = backend.run(&data, &jobs);
    let submissions = (backend.gpu().traffic() - before).submissions;
    let after = backend.device_choices()[0].clone();
    if choice.chosen == "CPU" {
        assert_eq!(
            submissions, 0,
            "a family on the device after the CPU was chosen"
        );
        assert_eq!(after.cpu_jobs, choice.cpu_jobs + jobs.len());
    } else {
        assert!(submissions > 0);
        assert_eq!(after.device_jobs, choice.device_jobs + jobs.len());
    }
    // Each score says which side computed it: the probe's counts, then the side chosen.
    assert_eq!(scored_on(&first, ComputedOn::Gpu), choice.device_jobs);
    assert_eq!(scored_on(&first, ComputedOn::Cpu), choice.cpu_jobs);
    let chosen = if choice.chosen == "GPU" {
        ComputedOn::Gpu
    } else {
        ComputedOn::Cpu
    };
    assert_eq!(scored_on(&second, chosen), jobs.len());
    for ((a, b), c) in first.iter().zip(&second).zip(&cpu) {
        let (a, b, c) = (score(a).0, score(b).0, score(c).0);
        assert!((a - c).abs() <= 1e-4 * c.abs().max(1.0), "{a} against {c}");
        assert!((b - c).abs() <= 1e-4 * c.abs().max(1.0), "{b} against {c}");
    }
}

/// `occam discover --method exact --backend gpu` says how the family fits are placed, prints the
/// probe's choice, and writes it to result.json with the figures; the graph is the CPU's.
#[test]
fn discover_exact_with_the_gpu_reports_where_the_family_fits_computed() {
    if gpu().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run = |backend: &str| {
        let (out, text) = crate::gpu_device::discover_fork(
            &dir.path().join(backend),
            &[
                "--method",
                "exact",
                "--max-rows",
                "150",
                "--threads",
                "2",
                "--backend",
                backend,
                "--quiet",
                "--seed",
                "1",
            ],
        );
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        (out, json)
    };
    let (gpu_run, on_gpu) = run("gpu");
    let (_, on_cpu) = run("cpu");
    let stderr = String::from_utf8_lossy(&gpu_run.stderr);
    assert!(
        stderr.contains("first family fits are timed with their Ψ2 sums on the GPU"),
        "{stderr}"
    );
    let choice = &on_gpu["device_choices"][0];
    assert_eq!(choice["work"], "family fits", "{on_gpu}");
    assert!(
        choice["chosen"] == "GPU" || choice["chosen"] == "CPU",
        "{choice}"
    );
    let stdout = String::from_utf8_lossy(&gpu_run.stdout);
    assert!(
        stdout.contains(&format!(
            "family fits on the {}",
            choice["chosen"].as_str().unwrap()
        )),
        "{stdout}"
    );
    assert!(on_cpu.get("device_choices").is_none(), "{on_cpu}");
    assert_eq!(on_gpu["edges"], on_cpu["edges"]);
    // Where each family was scored: counted in result.json, recorded in the score cache.
    let count = |json: &serde_json::Value, key: &str| json["exact"]["fit_work"][key].as_u64();
    let families = count(&on_gpu, "families").unwrap();
    assert!(families > 0, "{on_gpu}");
    assert_eq!(
        count(&on_gpu, "families_on_gpu").unwrap() + count(&on_gpu, "families_on_cpu").unwrap(),
        families
    );
    assert_eq!(count(&on_cpu, "families_on_gpu"), Some(0));
    let cache = std::fs::read_to_string(dir.path().join("gpu/score_cache.json")).unwrap();
    assert_eq!(
        cache.matches("\"computed_on\"").count() as u64,
        families,
        "every cached score says where it was computed"
    );
}
