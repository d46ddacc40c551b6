//! The GPU executor: how a batch of [`Job`]s runs when a [`Gpu`] is present — one plan for both
//! targets. [`run_batch`] places each job ([`placement`]): an uncollapsed evaluation goes to the
//! device with the batch's others in one submission, the device holding each variable's q(v)
//! and its M × M algebra between iterations (`held.rs`: the minibatch and the encoder on the
//! host pool, in f64); a collapsed evaluation with a large Ψ2 sends its sums to the device
//! pass by pass with the batch's others ([`CollapsedBatch`]); natively, a refit with such a Ψ2
//! and a restart's final bound call the device from inside the fit, which blocks (a browser
//! worker must not block, so there they run on the host); every other job runs on the host pool
//! while the device works. Natively [`GpuBackend`] blocks on the plan (a submission's `finish`
//! waits for the device); in the browser the coordinating worker (`worker::gpu_dispatch`) awaits
//! it, so pause, stop and the page's pings are handled meanwhile.
//!
//! A failed device step ends the plan's device work ([`BatchFailure`]): the caller gives the GPU
//! up and computes the jobs left without an outcome on the CPU from the same jobs, so nothing is
//! lost, and what the host finished meanwhile is kept.
//!
//! Owns: the placement of jobs, the plan, and the native [`GpuBackend`]. The device and its
//! kernels (`super::gpu`) know nothing of jobs.

#[cfg(not(target_arch = "wasm32"))]
mod coalesce;
mod held;
mod lockstep;
#[cfg(not(target_arch = "wasm32"))]
mod native;
mod psi_replay;

use nalgebra::DMatrix;

#[cfg(not(target_arch = "wasm32"))]
pub use coalesce::{CoalescedPsi2, ABANDONED, GATHER_SECONDS};
pub use lockstep::{families_in_lockstep, Lockstep, LockstepPsi2};
#[cfg(not(target_arch = "wasm32"))]
pub use native::GpuBackend;
pub use psi_replay::{CollapsedBatch, PSI2_MIN_WORK, PSI2_PASSES};

use super::cost_model::{PlacementProbe, Side};
use super::gpu::{Gpu, GpuError};
use super::Pool;
use crate::discovery::cgp::Conditional;
use crate::discovery::error::{DiscoveryError, NotRun};
use crate::discovery::jobs::{Job, Outcome};

/// What the collapsed search's probe is about (its report's `work`).
pub const COLLAPSED_ITERATIONS: &str = "collapsed search iterations";

/// The collapsed search's probe (natively and in the page): whole batches alternate sides, the
/// first on each untimed (the device's pays for its pipelines and buffers).
pub fn collapsed_probe() -> PlacementProbe {
    PlacementProbe::measured(COLLAPSED_ITERATIONS).with_warm_up(1)
}

/// How a batch uses the device.
#[derive(Debug, Clone, Copy)]
pub struct DeviceUse<'p> {
    /// N·M² from which a collapsed evaluation's (or refit's) Ψ2 sums may go to the device
    /// ([`PSI2_MIN_WORK`]; the tests lower it to 0).
    pub psi2_min_work: f64,
    /// Where the continuous search's collapsed evaluations and refits compute, measured
    /// ([`PlacementProbe`], whole batches alternating sides while it measures; refits go to the
    /// device only once it is chosen). None: every one from [`DeviceUse::psi2_min_work`] on goes
    /// to the device.
    pub collapsed: Option<&'p PlacementProbe>,
    /// Where the exact search's family fits compute, measured ([`PlacementProbe`]). None: on
    /// the host.
    pub families: Option<&'p PlacementProbe>,
    /// Whether the family fits on the device run in lockstep on this thread, awaiting the
    /// device (`lockstep`; always so in a browser worker, which must not block), rather than
    /// on the host's threads blocking on it ([`CoalescedPsi2`], natively).
    pub lockstep_families: bool,
    /// How many family fits the host side runs at once when the device is not used (the page's
    /// compute workers): in lockstep the probe compares throughputs, the host's per-job time
    /// divided by this.
    pub host_width: usize,
}

impl Default for DeviceUse<'_> {
    fn default() -> Self {
        Self {
            psi2_min_work: PSI2_MIN_WORK,
            collapsed: None,
            families: None,
            lockstep_families: !MAY_BLOCK,
            host_width: 1,
        }
    }
}

/// Where a job of a batch runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// An uncollapsed evaluation: its minibatch's rows and noise drawn on the host, the rest on
    /// the device (which holds the variable's q(v), Z and encoder) in the batch's one
    /// submission.
    HeldEvaluation,
    /// A collapsed evaluation whose Ψ2 sums the device computes with the batch's others.
    Psi2Evaluation,
    /// A refit whose L-BFGS evaluations each send their Ψ2 sums to the device (natively only:
    /// the fit blocks on the device).
    Psi2Refit,
    /// A restart's final bound, its predictions on the device chunk by chunk of rows (natively
    /// only: the bound blocks on the device).
    FinalBound,
    /// A family fit of the exact search, timed for the placement probe: its fits' Ψ2 sums on
    /// the device (shared submissions with the batch's other fits: blocking on the host's
    /// threads natively, in lockstep where nothing may block), or all of it on the host.
    FamilyFit { on_device: bool },
    /// The host, as without a GPU.
    Host,
}

/// Whether this target may block on the device from inside a job (natively yes; a browser
/// worker must not).
const MAY_BLOCK: bool = cfg!(not(target_arch = "wasm32"));

/// Where `job` (on data of `rows` rows) runs when `gpu` is present (see [`Placement`]).
pub fn placement(job: &Job<'_>, rows: usize, gpu: &Gpu, usage: DeviceUse<'_>) -> Placement {
    let psi2_fits =
        |n: usize, m: usize| (n * m * m) as f64 >= usage.psi2_min_work && gpu.psi2_fits(n, m);
    // While the probe measures, a batch's collapsed evaluations all go to the side it names
    // (both calls for one batch, here and in `takes`, see the same side: it moves only when a
    // batch is recorded); refits wait for its choice.
    let evaluation_side = usage
        .collapsed
        .map_or(Side::Device, PlacementProbe::next_side);
    let refit_side = usage
        .collapsed
        .map_or(Some(Side::Device), PlacementProbe::placed);
    match job {
        Job::Evaluate { variable, .. } => match &**variable {
            Conditional::Uncollapsed(_) => Placement::HeldEvaluation,
            Conditional::Collapsed(c) => {
                let (n, m) = c.psi2_shape();
                if psi2_fits(n, m) && evaluation_side == Side::Device {
                    Placement::Psi2Evaluation
                } else {
                    Placement::Host
                }
            }
        },
        Job::Refine { component, .. } if MAY_BLOCK => {
            let (n, m) = component.psi2_shape();
            if psi2_fits(n, m) && refit_side == Some(Side::Device) {
                Placement::Psi2Refit
            } else {
                Placement::Host
            }
        }
        Job::FinalBound { variable, .. }
            if MAY_BLOCK && matches!(**variable, Conditional::Uncollapsed(_)) =>
        {
            Placement::FinalBound
        }
        Job::Family { child, parents, .. } => {
            match (usage.families, job.family_psi2_shape(rows)) {
                (Some(probe), Some((n, m))) if gpu.psi2_fits(n, m) => {
                    // While probing, the family's columns pick its side: the same family always
                    // goes to the same side, and a batch's families are spread over both.
                    let parity = (child + parents.iter().sum::<usize>() + parents.len()) % 2 == 0;
                    Placement::FamilyFit {
                        on_device: probe.side(parity) == Side::Device,
                    }
                }
                _ => Placement::Host,
            }
        }
        _ => Placement::Host,
    }
}

/// Whether `job` (on data of `rows` rows) has work for `gpu`: [`placement`] puts some of it on
/// the device (a family fit only when the probe sends it there), or it is a final bound whose
/// variable's copy of q(v) lags the one the device holds (read from the device first, so the
/// job belongs with it).
pub fn has_device_work(job: &Job<'_>, rows: usize, gpu: &Gpu, usage: DeviceUse<'_>) -> bool {
    let on_device = match placement(job, rows, gpu, usage) {
        Placement::Host => false,
        Placement::FamilyFit { on_device } => on_device,
        _ => true,
    };
    on_device
        || matches!(job, Job::FinalBound { variable, .. } if variable.lagging_posterior().is_some())
}

/// A batch whose device work failed: the device's error, and the outcomes finished before it
/// (by the host, or by the device before the failing step), in the jobs' order.
#[derive(Debug)]
pub struct BatchFailure {
    pub error: GpuError,
    pub done: Vec<Option<Outcome>>,
}

impl BatchFailure {
    /// Every job's outcome: the ones finished before the failure, the others computed on `host`
    /// from `jobs` (the same jobs the plan was given).
    pub fn complete_on(self, host: &Pool, data: &DMatrix<f64>, jobs: &[Job<'_>]) -> Vec<Outcome> {
        let missing: Vec<usize> = (0..jobs.len())
            .filter(|&k| self.done.get(k).is_none_or(Option::is_none))
            .collect();
        let computed = host.map(&missing, |&k| jobs[k].run(data));
        let mut done = self.done;
        done.resize(jobs.len(), None);
        for (k, outcome) in missing.into_iter().zip(computed) {
            done[k] = Some(outcome);
        }
        done.into_iter()
            .map(|o| o.unwrap_or_else(not_run))
            .collect()
    }
}

/// Runs every job of `jobs` on `data` with `gpu` for the device's share ([`placement`]) and
/// `host` for the rest, in the jobs' order: the outcome `Job::run` would give each, to within
/// float32 rounding of what the device computes. `awaiting` is called before each await of the
/// device, once the host's share before it is done (the browser restarts its device watch
/// there).
pub async fn run_batch(
    gpu: &Gpu,
    host: &Pool,
    data: &DMatrix<f64>,
    jobs: &[Job<'_>],
    usage: DeviceUse<'_>,
    awaiting: &dyn Fn(),
) -> Result<Vec<Outcome>, BatchFailure> {
    let mut places: Vec<Placement> = jobs
        .iter()
        .map(|j| placement(j, data.nrows(), gpu, usage))
        .collect();
    if let Some(probe) = usage.families {
        // While probing, only the jobs the probe still lacks go to the device.
        let mut allowed = probe.device_jobs_allowed();
        for place in places.iter_mut() {
            if *place == (Placement::FamilyFit { on_device: true }) {
                if allowed == 0 {
                    *place = Placement::FamilyFit { on_device: false };
                }
                allowed = allowed.saturating_sub(1);
            }
        }
    }
    let mut done: Vec<Option<Outcome>> = vec![None; jobs.len()];
    let batch = Batch {
        gpu,
        host,
        data,
        jobs,
        awaiting,
    };
    let steps = device_and_host(batch, &places, usage, &mut done);
    match steps.await {
        Ok(()) => Ok(done
            .into_iter()
            .map(|o| o.unwrap_or_else(not_run))
            .collect()),
        Err(error) => Err(BatchFailure { error, done }),
    }
}

/// What every step of one batch works with: the two executors, the data, the batch's jobs, and
/// the call made before each await of the device.
#[derive(Clone, Copy)]
pub(super) struct Batch<'a, 'j> {
    pub(super) gpu: &'a Gpu,
    pub(super) host: &'a Pool,
    pub(super) data: &'a DMatrix<f64>,
    pub(super) jobs: &'a [Job<'j>],
    pub(super) awaiting: &'a dyn Fn(),
}

/// The plan's steps, each outcome written into `done` as it is finished: the predictions
/// submitted first, so the device works while the host runs its jobs, then the collapsed passes,
/// the blocking refits and final bounds, and last the evaluations' second halves.
async fn device_and_host(
    batch: Batch<'_, '_>,
    places: &[Placement],
    usage: DeviceUse<'_>,
    done: &mut [Option<Outcome>],
) -> Result<(), GpuError> {
    // `awaiting` is used by the steps below, which take the whole batch.
    let Batch {
        gpu,
        host,
        data,
        jobs,
        awaiting: _,
    } = batch;
    let at = |place: Placement| -> Vec<usize> {
        (0..jobs.len()).filter(|&k| places[k] == place).collect()
    };
    // The device holds each uncollapsed variable's q(v) and its M × M algebra: the batch's
    // evaluations in one submission, the host's own jobs while it works. A job the host runs
    // for a variable whose copy of q(v) lags the device's (a final bound, in the browser) gets
    // the device's current one first.
    let held = at(Placement::HeldEvaluation);
    let here = at(Placement::Host);
    let current = with_current_posteriors(gpu, jobs, &here).await?;
    let host_job = |k: usize| current.get(&k).unwrap_or(&jobs[k]);
    let mut host_done = Vec::new();
    let mut run_host = || host_done = host.map(&here, |&k| host_job(k).run(data));
    // The collapsed probe's timings: a batch whose collapsed evaluations it placed on the host,
    // timed whole (as if `host_width` workers ran it), or on the device (below).
    let probing = usage.collapsed.filter(|p| p.probing());
    let host_units = collapsed_units(jobs, &here, gpu, usage);
    if held.is_empty() {
        let started = crate::base::clock::now_seconds();
        run_host();
        if let (Some(probe), true) = (probing, host_units > 0.0) {
            let width = usage.host_width.clamp(1, here.len().max(1)) as f64;
            let seconds = (crate::base::clock::now_seconds() - started) / width;
            probe.record(Side::Host, seconds, host_units);
        }
    } else {
        let outcomes = held::held_evaluations(batch, &held, run_host).await?;
        for (&k, outcome) in held.iter().zip(outcomes) {
            done[k] = Some(outcome);
        }
    }
    for (&k, outcome) in here.iter().zip(host_done) {
        done[k] = Some(outcome);
    }
    let collapsed = at(Placement::Psi2Evaluation);
    if !collapsed.is_empty() {
        let started = crate::base::clock::now_seconds();
        let outcomes = collapsed_passes(batch, &collapsed).await?;
        if let Some(probe) = probing {
            let seconds = crate::base::clock::now_seconds() - started;
            probe.record(
                Side::Device,
                seconds,
                collapsed_units(jobs, &collapsed, gpu, usage),
            );
        }
        for (&k, outcome) in collapsed.iter().zip(outcomes) {
            done[k] = Some(outcome);
        }
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let refits = at(Placement::Psi2Refit);
        if !refits.is_empty() {
            let outcomes = native::refits_on_device(gpu, host, data, jobs, &refits)?;
            for (&k, outcome) in refits.iter().zip(outcomes) {
                done[k] = Some(outcome);
            }
        }
        for k in at(Placement::FinalBound) {
            done[k] = Some(native::final_bound_on_device(gpu, data, &jobs[k])?);
        }
    }
    let families: Vec<usize> = (0..jobs.len())
        .filter(|&k| matches!(places[k], Placement::FamilyFit { .. }))
        .collect();
    if let (false, Some(probe)) = (families.is_empty(), usage.families) {
        let outcomes = match () {
            #[cfg(not(target_arch = "wasm32"))]
            () if !usage.lockstep_families => {
                native::families_on_device(gpu, host, data, jobs, &families, places, probe)?
            }
            () => {
                let plan = lockstep::FamilyPlan {
                    indices: &families,
                    places,
                    probe,
                    host_width: usage.host_width,
                };
                lockstep::families_awaited(batch, plan).await?
            }
        };
        for (&k, outcome) in families.iter().zip(outcomes) {
            done[k] = Some(outcome);
        }
    }
    Ok(())
}

/// The work of family job `job`'s `outcome` on data of `rows` rows, in the probe's unit: 10⁶ Ψ2
/// terms. Each evaluation with the latent input (Adam's and L-BFGS's; not the start's GP
/// regression, which has none) has N·M² per model input (the parents and w), so families of
/// every size are compared on one scale. None for another job or a failed family.
pub(super) fn family_units(job: &Job<'_>, outcome: &Outcome, rows: usize) -> Option<f64> {
    let (Outcome::Family(Ok(score)), Some((n, m)), Job::Family { parents, .. }) =
        (outcome, job.family_psi2_shape(rows), job)
    else {
        return None;
    };
    let inputs = parents.len() + 1;
    let evaluations: usize = score.fits.iter().map(|f| f.latent_evaluations()).sum();
    Some((evaluations * inputs) as f64 * (n * m * m) as f64 / 1e6)
}

/// The collapsed probe's work in the jobs at `indices`: 10⁶ Ψ2 terms (N·M²) per collapsed
/// evaluation the device could take (its sums fit the device's limits, its N·M² at least
/// [`DeviceUse::psi2_min_work`]); 0 when there is none.
fn collapsed_units(jobs: &[Job<'_>], indices: &[usize], gpu: &Gpu, usage: DeviceUse<'_>) -> f64 {
    indices
        .iter()
        .filter_map(|&k| match &jobs[k] {
            Job::Evaluate { variable, .. } => match &**variable {
                Conditional::Collapsed(c) => Some(c.psi2_shape()),
                Conditional::Uncollapsed(_) => None,
            },
            _ => None,
        })
        .filter(|&(n, m)| (n * m * m) as f64 >= usage.psi2_min_work && gpu.psi2_fits(n, m))
        .map(|(n, m)| (n * m * m) as f64 / 1e6)
        .sum()
}

/// Owned copies of the jobs at `indices` whose variable's q(v) lags the one the device holds,
/// with the device's current q(v), by index: the host computes those from the current state.
async fn with_current_posteriors(
    gpu: &Gpu,
    jobs: &[Job<'_>],
    indices: &[usize],
) -> Result<std::collections::HashMap<usize, Job<'static>>, GpuError> {
    let mut current = std::collections::HashMap::new();
    for &k in indices {
        let Job::FinalBound {
            variable,
            evaluated,
            seed,
        } = &jobs[k]
        else {
            continue;
        };
        let Some((key, version)) = variable.lagging_posterior() else {
            continue;
        };
        if let Some(state) = gpu.held_state(key, version).await? {
            current.insert(
                k,
                Job::FinalBound {
                    variable: std::borrow::Cow::Owned(variable.with_resident(state)),
                    evaluated: *evaluated,
                    seed: *seed,
                },
            );
        }
    }
    Ok(current)
}

/// The collapsed evaluations of the batch's jobs at `indices`, in that order: each pass runs the
/// evaluations still waiting on the host, then sends the Ψ2 sums they asked for to the device in
/// one submission ([`CollapsedBatch`]).
async fn collapsed_passes(
    batch: Batch<'_, '_>,
    indices: &[usize],
) -> Result<Vec<Outcome>, GpuError> {
    let mut evaluations = CollapsedBatch::new(indices.iter().map(|&k| &batch.jobs[k]).collect());
    for _pass in 0..PSI2_PASSES {
        let waiting = evaluations.waiting();
        if waiting.is_empty() {
            break;
        }
        let results = batch
            .host
            .map(&waiting, |&i| evaluations.evaluate(batch.data, i));
        for (i, result) in waiting.into_iter().zip(results) {
            evaluations.settle(i, result);
        }
        let requests = evaluations.requests();
        if requests.is_empty() {
            break;
        }
        let submitted = batch.gpu.submit_psi2(&requests)?;
        drop(requests);
        (batch.awaiting)();
        let answers = submitted.finish(batch.gpu).await?;
        evaluations.answer(answers);
    }
    Ok(evaluations.outcomes())
}

/// The outcome of a job nothing ran (which the engine treats as a failed job).
fn not_run() -> Outcome {
    Outcome::Value(Err(DiscoveryError::NotRun(NotRun::Job)))
}
