//! [`GpuBackend`]: the native [`Backend`] that runs each batch by the executor's plan
//! ([`super::run_batch`]) on one [`Gpu`] and the CPU pool it wraps, blocking on the device; and
//! the plan's blocking steps, which only a native thread may take: refits (L-BFGS on a collapsed
//! variable, the cool-down's and pruning's) and the exact search's family fits with their
//! evaluations' Ψ2 sums on the device, the fits running at once sharing submissions
//! ([`refits_on_device`], [`families_on_device`], the latter placed by a measured probe), and a
//! restart's final bound (every row, 100 draws each) chunk by chunk of rows
//! ([`final_bound_on_device`]).
//!
//! A failed GPU step (a lost device, an error the driver reports, a readback that times out)
//! switches this backend to the CPU for good: the jobs of the batch in hand without an outcome
//! are computed again there from the same jobs, so nothing is lost, and [`Backend::name`] says
//! what happened from then on.

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nalgebra::DMatrix;

use super::{
    collapsed_probe, family_units, run_batch, CoalescedPsi2, DeviceUse, Placement,
    COLLAPSED_ITERATIONS,
};
use crate::base::clock::now_seconds;
use crate::discovery::error::{DiscoveryError, NotRun};
use crate::gp::collapsed::Psi2Device;
use crate::gp::device::DeviceError;
use crate::gp::gp_cde::StepError;
use crate::gp::svgp::FLOAT32_RELATIVE_JITTER;
use crate::runner::cost_model::{
    DeviceChoice, PlacementProbe, Side, PROBE_JOBS_PER_SIDE, PROBE_PATIENCE,
};
use crate::runner::gpu::{DeviceTraffic, Gpu, GpuError};
use crate::runner::{Backend, CpuBackend, Job, Outcome, Pool};

/// What the family fits' probe is about (its report's `work`).
const FAMILY_FITS: &str = "family fits";

/// The GPU for the uncollapsed bound's predictions, large collapsed Ψ2 sums and (where measured
/// faster) the family fits' Ψ2 sums, the CPU for the rest and after a failure.
pub struct GpuBackend {
    gpu: Arc<Gpu>,
    cpu: CpuBackend,
    /// Why the GPU was given up, once it has been.
    failed: Mutex<Option<String>>,
    /// N·M² from which collapsed evaluations' and refits' Ψ2 sums may go to the device.
    psi2_min_work: f64,
    /// Where the continuous search's collapsed evaluations and refits compute: measured, unless
    /// forced.
    collapsed: PlacementProbe,
    /// Where the exact search's family fits compute: measured, unless forced.
    families: PlacementProbe,
    /// Family fits on the device in lockstep on the calling thread, the host's at this width
    /// (the browser's plan), instead of blocking on the pool's threads.
    lockstep_families: Option<usize>,
}

impl fmt::Debug for GpuBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuBackend")
            .field("gpu", &self.gpu)
            .field("failed", &self.failure())
            .finish()
    }
}

impl GpuBackend {
    /// A backend computing on `gpu`, with `cpu` for what stays on the CPU.
    pub fn new(gpu: Arc<Gpu>, cpu: CpuBackend) -> Self {
        Self {
            gpu,
            cpu,
            failed: Mutex::new(None),
            psi2_min_work: DeviceUse::default().psi2_min_work,
            collapsed: collapsed_probe(),
            families: PlacementProbe::measured(FAMILY_FITS),
            lockstep_families: None,
        }
    }

    /// The same backend running the family fits as the browser's worker does: those on the
    /// device in lockstep on the calling thread, awaiting each round's submission, the host's
    /// timed as if `host_width` ran at once (the tests', so the page's plan runs on lavapipe).
    pub fn with_lockstep_families(self, host_width: usize) -> Self {
        Self {
            lockstep_families: Some(host_width),
            ..self
        }
    }

    /// The same backend considering collapsed evaluations' Ψ2 sums for the GPU from `work` = N·M²
    /// on (0: all of them; the tests' setting).
    pub fn with_psi2_min_work(self, work: f64) -> Self {
        Self {
            psi2_min_work: work,
            ..self
        }
    }

    /// The same backend with the exact search's family fits always on `side` (the tests', and
    /// `--family-fits`), instead of where the probe measures them cheaper.
    pub fn with_family_fits_on(self, side: Side) -> Self {
        Self {
            families: PlacementProbe::forced(FAMILY_FITS, side),
            ..self
        }
    }

    /// The same backend with the collapsed search's evaluations and refits always on `side` (the
    /// tests'), instead of where the probe measures them cheaper.
    pub fn with_collapsed_on(self, side: Side) -> Self {
        Self {
            collapsed: PlacementProbe::forced(COLLAPSED_ITERATIONS, side),
            ..self
        }
    }

    fn usage(&self) -> DeviceUse<'_> {
        DeviceUse {
            psi2_min_work: self.psi2_min_work,
            collapsed: Some(&self.collapsed),
            families: Some(&self.families),
            lockstep_families: self.lockstep_families.is_some(),
            host_width: self.lockstep_families.unwrap_or(1),
        }
    }

    /// Opens the first GPU ([`Gpu::open`]) beside `cpu`.
    pub fn open(cpu: CpuBackend) -> Result<Self, GpuError> {
        Ok(Self::new(Arc::new(Gpu::open()?), cpu))
    }

    /// The device (for tests that lose it on purpose).
    pub fn gpu(&self) -> &Gpu {
        &self.gpu
    }

    /// Why this backend switched to the CPU, if it has.
    pub fn failure(&self) -> Option<String> {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn give_up(&self, error: &GpuError) {
        self.failed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(|| error.to_string());
    }
}

/// A restart's final bound (job `job`, a [`Job::FinalBound`]) with each chunk's predictions on
/// `gpu` (one submission per chunk of rows); `Err` when a GPU step failed.
pub(super) fn final_bound_on_device(
    gpu: &Gpu,
    data: &DMatrix<f64>,
    job: &Job<'_>,
) -> Result<Outcome, GpuError> {
    let Job::FinalBound {
        variable,
        evaluated,
        seed,
    } = job
    else {
        return Ok(Outcome::Value(Err(DiscoveryError::NotRun(
            NotRun::NotAFinalBound,
        ))));
    };
    // The bound needs the current q(v) and Z: read them from the device when the variable's copy
    // lags.
    let current = match variable.lagging_posterior() {
        Some((key, version)) => pollster::block_on(gpu.held_state(key, version))?
            .map(|state| variable.with_resident(state)),
        None => None,
    };
    let variable = current.as_ref().unwrap_or(variable);
    let mut failure = None;
    let value = variable.final_bound_with(data, *evaluated, *seed, &mut |input| match gpu
        .bounds_and_gradients(&[*input], FLOAT32_RELATIVE_JITTER)
    {
        Ok(mut outputs) => match outputs.pop() {
            Some(output) => output.map_err(StepError::from),
            None => Err(StepError::Device(DeviceError::Unanswered)),
        },
        Err(e) => {
            let why = DeviceError::from(&e);
            failure = Some(e);
            Err(StepError::Device(why))
        }
    });
    match failure {
        Some(e) => Err(e),
        None => Ok(Outcome::Value(value.map_err(DiscoveryError::from))),
    }
}

/// The refits of `jobs` at `indices` on `host`, each L-BFGS evaluation's Ψ2 sums on `gpu`, in
/// that order. A fit's L-BFGS step waits for its last gradient, so one fit's evaluations cannot
/// share a submission; the refits running at once share theirs ([`CoalescedPsi2`]). `Err` when
/// a GPU step failed.
pub(super) fn refits_on_device(
    gpu: &Gpu,
    host: &Pool,
    data: &DMatrix<f64>,
    jobs: &[Job<'_>],
    indices: &[usize],
) -> Result<Vec<Outcome>, GpuError> {
    let device = CoalescedPsi2::new(gpu);
    let results = host.map(indices, |&k| {
        let _running = device.enter();
        jobs[k].run_on(data, Some(&device))
    });
    match device.failure() {
        Some(error) => Err(error),
        None => Ok(results),
    }
}

/// The family fits of `jobs` at `indices` on `host`, in that order, each timed for `probe`:
/// those placed on the device ([`Placement::FamilyFit`] `on_device`) with their fits' Ψ2 sums
/// in submissions shared with the other fits running at once ([`CoalescedPsi2`]), the others
/// wholly on the host. `Err` when a GPU step failed.
pub(super) fn families_on_device(
    gpu: &Gpu,
    host: &Pool,
    data: &DMatrix<f64>,
    jobs: &[Job<'_>],
    indices: &[usize],
    places: &[Placement],
    probe: &PlacementProbe,
) -> Result<Vec<Outcome>, GpuError> {
    let device = CoalescedPsi2::new(gpu);
    // While probing, a device much slower than the host is given up before its probe families
    // end: once the host has finished its first probe families, a device family may run
    // PROBE_PATIENCE times the longest host family so far (from its own start); past that its
    // next request is refused and it is computed again on the host. The host's probe families
    // go first, so that the limit is known before the device's start.
    let probing = probe.probing();
    let on_device = |k: usize| places[k] == (Placement::FamilyFit { on_device: true });
    let mut order: Vec<usize> = indices.to_vec();
    if probing {
        let first_host: Vec<usize> = indices
            .iter()
            .copied()
            .filter(|&k| !on_device(k))
            .take(PROBE_JOBS_PER_SIDE)
            .collect();
        order = first_host.clone();
        order.extend(indices.iter().filter(|k| !first_host.contains(k)));
    }
    let host_jobs = indices.iter().filter(|&&k| !on_device(k)).count();
    let limit_after = host_jobs.min(PROBE_JOBS_PER_SIDE);
    let host_finished = Mutex::new((0usize, 0.0f64));
    let results = host.map(&order, |&k| {
        let mut side = if on_device(k) {
            Side::Device
        } else {
            Side::Host
        };
        let started = now_seconds();
        let mut outcome = if side == Side::Device {
            let running = device.enter();
            let outcome = jobs[k].run_on(data, Some(&device as &dyn Psi2Device));
            if running.was_refused() {
                side = Side::Host;
            }
            outcome
        } else {
            jobs[k].run(data)
        };
        let mut seconds = now_seconds() - started;
        if side == Side::Host && on_device(k) {
            // Refused the device part-way: its fits are computed again, wholly on the host.
            let again = now_seconds();
            outcome = jobs[k].run(data);
            seconds = now_seconds() - again;
        }
        if side == Side::Host && probing {
            let mut finished = host_finished.lock().unwrap_or_else(PoisonError::into_inner);
            finished.0 += 1;
            finished.1 = finished.1.max(seconds);
            if finished.0 >= limit_after {
                device.set_patience(Duration::from_secs_f64(PROBE_PATIENCE * finished.1));
            }
        }
        if let Some(units) = family_units(&jobs[k], &outcome, data.nrows()) {
            probe.record(side, seconds, units);
        }
        (k, outcome)
    });
    if device.was_abandoned() {
        let longest = host_finished
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .1;
        probe.abandon_device(longest);
    }
    // Back in the order of `indices`.
    let mut by_job: std::collections::HashMap<usize, Outcome> = results.into_iter().collect();
    let results = indices
        .iter()
        .map(|k| {
            by_job
                .remove(k)
                .unwrap_or(Outcome::Value(Err(DiscoveryError::NotRun(NotRun::Family))))
        })
        .collect();
    match device.failure() {
        Some(error) => Err(error),
        None => Ok(results),
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> String {
        match self.failure() {
            None => format!("GPU (f32, {}) with {}", self.gpu.adapter(), self.cpu.name()),
            Some(why) => format!("{} (the GPU failed and was left: {why})", self.cpu.name()),
        }
    }

    fn width(&self) -> usize {
        self.cpu.width()
    }

    fn device_traffic(&self) -> Option<DeviceTraffic> {
        self.failure().is_none().then(|| self.gpu.traffic())
    }

    fn device_choices(&self) -> Vec<DeviceChoice> {
        let failed = self.failure();
        [&self.collapsed, &self.families]
            .into_iter()
            .filter_map(PlacementProbe::choice)
            .map(|mut choice| {
                if let Some(why) = &failed {
                    // Whatever the probe chose, everything after the failure ran on the CPU.
                    choice.reason +=
                        &format!("; then the GPU failed ({why}) and the CPU computed the rest");
                }
                choice
            })
            .collect()
    }

    fn run(&self, data: &DMatrix<f64>, jobs: &[Job<'_>]) -> Vec<Outcome> {
        if self.failure().is_some() {
            return self.cpu.run(data, jobs);
        }
        let host = self.cpu.pool();
        match pollster::block_on(run_batch(&self.gpu, host, data, jobs, self.usage(), &|| {})) {
            Ok(outcomes) => outcomes,
            Err(failure) => {
                // The jobs are values: computing the unfinished ones again on the CPU loses
                // nothing.
                self.give_up(&failure.error);
                failure.complete_on(host, data, jobs)
            }
        }
    }
}
