//! Family fits in lockstep on an awaited device: the way the exact search's fits reach the GPU
//! where nothing may block (a browser worker; issue 34, item 4).
//!
//! Each family fit is an `async` computation ([`Job::run_family_awaiting`]) whose only waits are
//! for Ψ2 sums from a [`LockstepPsi2`]. [`run_in_lockstep`] polls every unfinished fit until it
//! waits (its host work: the bound's forward pass up to the sums it lacks), sends every request
//! of that round to the device in one submission, hands the answers over, and polls again. One
//! fit's L-BFGS step waits for its last gradient, so one fit cannot fill a submission; many
//! families' fits, each at its own step, can: a round's submission holds one request per
//! unfinished fit, and the host's share runs while nothing else waits on it.
//!
//! Owns: the rounds. The fits know nothing of it beyond [`AwaitedPsi2`].

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use nalgebra::DMatrix;

use super::{family_units, Batch, Placement};
use crate::base::clock::now_seconds;
use crate::discovery::error::{DiscoveryError, NotRun};
use crate::discovery::jobs::{Job, Outcome};
use crate::gp::collapsed::{AwaitedPsi2, Psi2Answer, Psi2Sums, Psi2Wanted};
use crate::gp::device::DeviceError;
use crate::runner::cost_model::{PlacementProbe, Side, PROBE_PATIENCE};
use crate::runner::gpu::{Gpu, GpuError, Psi2Request};

/// Where an answer is left for the fit that asked.
type AnswerCell = Rc<RefCell<Option<Result<Psi2Sums, DeviceError>>>>;

/// The requests of a round, gathered from the fits as they ask, answered all at once.
#[derive(Default)]
pub struct LockstepPsi2 {
    asked: RefCell<Vec<(Psi2Wanted, AnswerCell)>>,
}

impl LockstepPsi2 {
    /// The round's requests, taken.
    fn take_asked(&self) -> Vec<(Psi2Wanted, AnswerCell)> {
        std::mem::take(&mut *self.asked.borrow_mut())
    }
}

impl AwaitedPsi2 for LockstepPsi2 {
    fn sums(&self, wanted: Psi2Wanted) -> Psi2Answer<'_> {
        let answer: AnswerCell = Rc::default();
        self.asked.borrow_mut().push((wanted, answer.clone()));
        Box::pin(std::future::poll_fn(move |_| {
            match answer.borrow_mut().take() {
                Some(result) => Poll::Ready(result),
                None => Poll::Pending,
            }
        }))
    }
}

/// A fit in flight.
type Fit<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// How a lockstep run went: each fit's output (None for one given up: still waiting when
/// `give_up` said so, or waiting on nothing), and the rounds it took.
pub struct Lockstep<T> {
    pub outputs: Vec<Option<T>>,
    pub rounds: usize,
}

/// Runs `fits`, whose only waits are on `device`, round by round (see the module's comment): one
/// submission to `gpu` per round. `awaiting` is called before each await of the device;
/// `give_up` is asked after each round and ends the run there when it says so (the fits not
/// finished are dropped). `Err` when the device failed.
pub async fn run_in_lockstep<'a, T>(
    gpu: &Gpu,
    device: &LockstepPsi2,
    fits: Vec<Fit<'a, T>>,
    awaiting: &dyn Fn(),
    give_up: &dyn Fn() -> bool,
) -> Result<Lockstep<T>, GpuError> {
    let mut running: Vec<Option<Fit<'a, T>>> = fits.into_iter().map(Some).collect();
    let mut outputs: Vec<Option<T>> = running.iter().map(|_| None).collect();
    let mut context = Context::from_waker(Waker::noop());
    let mut rounds = 0;
    loop {
        for (slot, output) in running.iter_mut().zip(outputs.iter_mut()) {
            if let Some(fit) = slot {
                if let Poll::Ready(value) = fit.as_mut().poll(&mut context) {
                    *output = Some(value);
                    *slot = None;
                }
            }
        }
        let asked = device.take_asked();
        if asked.is_empty() || give_up() {
            // Done, or fits that wait on nothing (which no fit does) or are given up: dropped.
            break;
        }
        rounds += 1;
        let requests: Vec<Psi2Request<'_>> = asked.iter().map(|(w, _)| w.into()).collect();
        let submitted = gpu.submit_psi2(&requests)?;
        drop(requests);
        awaiting();
        let answers = submitted.finish(gpu).await?;
        for ((_, cell), sums) in asked.iter().zip(answers) {
            *cell.borrow_mut() = Some(Ok(sums));
        }
    }
    Ok(Lockstep { outputs, rounds })
}

/// The family jobs `jobs` on `data`, every fit's Ψ2 sums on `gpu`, in lockstep: their outcomes
/// in order (None for one given up), and the rounds (= submissions) it took. `Err` when the
/// device failed.
pub async fn families_in_lockstep(
    gpu: &Gpu,
    data: &DMatrix<f64>,
    jobs: &[&Job<'_>],
    awaiting: &dyn Fn(),
    give_up: &dyn Fn() -> bool,
) -> Result<Lockstep<Outcome>, GpuError> {
    let device = LockstepPsi2::default();
    let fits: Vec<Fit<'_, Outcome>> = jobs
        .iter()
        .map(|job| {
            let device = &device;
            Box::pin(async move {
                job.run_family_awaiting(data, device)
                    .await
                    .unwrap_or(Outcome::Value(Err(DiscoveryError::NotRun(
                        NotRun::NotAFamily,
                    ))))
            }) as Fit<'_, Outcome>
        })
        .collect();
    run_in_lockstep(gpu, &device, fits, awaiting, give_up).await
}

/// Which of a batch's jobs are family fits, where each goes, and how the probe weighs the host.
pub(super) struct FamilyPlan<'p> {
    /// The family fits, by index into the batch's jobs.
    pub indices: &'p [usize],
    pub places: &'p [Placement],
    pub probe: &'p PlacementProbe,
    /// How many fits the host side runs at once when the device is not used.
    pub host_width: usize,
}

/// The family fits of the batch's jobs named by `plan`, in its order, each side timed for the
/// probe: those placed on the host run on the batch's host pool, first (so that while probing
/// the device's patience is known before it starts), then those placed on the device in
/// lockstep on the batch's GPU. The probe
/// compares throughputs: the host's per-job seconds divided by `host_width`, the device's
/// round-by-round batch apportioned over its fits by their work. While probing, a device batch
/// that runs past [`PROBE_PATIENCE`] times the host's longest fit is given up, the device is
/// given up for family fits, and its fits are computed on the host. `Err` when
/// the device failed.
pub(super) async fn families_awaited(
    batch: Batch<'_, '_>,
    plan: FamilyPlan<'_>,
) -> Result<Vec<Outcome>, GpuError> {
    let Batch {
        host, data, jobs, ..
    } = batch;
    let FamilyPlan {
        indices,
        places,
        probe,
        host_width,
    } = plan;
    let rows = data.nrows();
    let probing = probe.probing();
    let on_device = |k: usize| places[k] == (Placement::FamilyFit { on_device: true });
    let (device_side, host_side): (Vec<usize>, Vec<usize>) =
        indices.iter().partition(|&&k| on_device(k));
    let mut done: HashMap<usize, Outcome> = HashMap::new();
    // Each host fit timed, recorded, and kept; the longest time returned.
    let on_host = |indices: &[usize], done: &mut HashMap<usize, Outcome>| -> f64 {
        let timed = host.map(indices, |&k| {
            let started = now_seconds();
            let outcome = jobs[k].run(data);
            (k, outcome, now_seconds() - started)
        });
        let mut longest = 0.0f64;
        for (k, outcome, seconds) in timed {
            longest = longest.max(seconds);
            if let Some(units) = family_units(&jobs[k], &outcome, rows) {
                probe.record(Side::Host, seconds / host_width.max(1) as f64, units);
            }
            done.insert(k, outcome);
        }
        longest
    };
    let longest = on_host(&host_side, &mut done);
    if !device_side.is_empty() {
        // The device's fits run at once: the batch is held to what one host fit may take.
        let patience = (probing && longest > 0.0).then_some(PROBE_PATIENCE * longest);
        let started = now_seconds();
        let give_up = || patience.is_some_and(|limit| now_seconds() - started > limit);
        let device_jobs: Vec<&Job<'_>> = device_side.iter().map(|&k| &jobs[k]).collect();
        let run =
            families_in_lockstep(batch.gpu, data, &device_jobs, batch.awaiting, &give_up).await?;
        let seconds = now_seconds() - started;
        if run.outputs.iter().any(Option::is_none) {
            // Given up: the device is left for family fits, its fits computed here.
            probe.abandon_device(longest);
            on_host(&device_side, &mut done);
        } else {
            let outcomes: Vec<Outcome> = run.outputs.into_iter().flatten().collect();
            let units: Vec<Option<f64>> = device_side
                .iter()
                .zip(&outcomes)
                .map(|(&k, o)| family_units(&jobs[k], o, rows))
                .collect();
            let total: f64 = units.iter().flatten().sum();
            for unit in units.into_iter().flatten() {
                probe.record(Side::Device, seconds * unit / total, unit);
            }
            done.extend(device_side.iter().copied().zip(outcomes));
        }
    }
    Ok(indices
        .iter()
        .map(|k| {
            done.remove(k)
                .unwrap_or(Outcome::Value(Err(DiscoveryError::NotRun(NotRun::Family))))
        })
        .collect())
}
