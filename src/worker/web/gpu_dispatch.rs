//! The coordinating worker's own computing (wasm only): a dispatched unit that the compute pool
//! does not take ([`takes`]) runs here, by the same plan as the native GPU backend
//! ([`run_batch`]: uncollapsed evaluations on the WebGPU device in one submission, q(v) and its
//! M × M algebra held there between iterations,
//! large collapsed Ψ2 sums on it pass by pass, everything else on this worker's CPU while the
//! device works). Every readback is awaited, so the worker's event loop (pause, stop, the page's
//! pings) runs meanwhile. What crossed to and from the device goes to the driver with the
//! outcomes, so the page's result counts it as the CLI's does (`gpu.steady_state`).
//!
//! A failed GPU step (a lost device, an error the device reports, a failed mapping) gives the GPU
//! up for good: the jobs of the unit in hand without an outcome are computed on the CPU from the
//! same jobs, so the run loses nothing, and the driver is told ([`PoolEvent::GpuLost`]) before
//! the outcomes arrive.
//! A device that does not finish a unit in [`DEVICE_TIMEOUT_SECONDS`] counts as failed the same way.
//! One unit is on the device at a time (its buffers are reused); a unit dispatched meanwhile waits.
//! While a unit is on the device this worker beats to the page, as a long CPU job does.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use nalgebra::DMatrix;
use wasm_bindgen::prelude::*;

use super::compute_pool::{emit, PoolEvent};
use crate::discovery::cgp::Conditional;
use crate::discovery::jobs::{Job, Outcome};
use crate::runner::cost_model::PlacementProbe;
use crate::runner::gpu::{DeviceTraffic, Gpu};
use crate::runner::gpu_executor::{has_device_work, run_batch, DeviceUse, PSI2_MIN_WORK};
use crate::runner::Pool;
use crate::worker::driver::Dispatch;

#[derive(Default)]
struct State {
    /// The device, while it works.
    gpu: Option<Rc<Gpu>>,
    /// Whether a unit is being computed here.
    busy: bool,
    /// Identifies the unit being computed (raised when it completes).
    unit: u64,
    /// The unit dispatched while another was busy (only the newest is wanted).
    queued: Option<(Dispatch, Rc<DMatrix<f64>>, Placements)>,
    /// N·M² from which collapsed evaluations send Ψ2 to the device, when a test set it.
    psi2_min_work: Option<f64>,
}

thread_local! {
    static STATE: RefCell<State> = RefCell::new(State::default());
}

/// Opens a device on the browser's WebGPU adapter (once; later calls report the first result).
pub async fn open() -> Result<(), String> {
    if STATE.with(|s| s.borrow().gpu.is_some()) {
        return Ok(());
    }
    let gpu = Gpu::open_async().await.map_err(|e| e.to_string())?;
    STATE.with(|s| s.borrow_mut().gpu = Some(Rc::new(gpu)));
    Ok(())
}

/// The device, while it works.
fn gpu() -> Option<Rc<Gpu>> {
    STATE.with(|s| s.borrow().gpu.clone())
}

/// Test hook: destroys the device as a driver reset would; the next unit on it fails and the run
/// goes on on the CPU.
pub fn lose() {
    if let Some(gpu) = gpu() {
        gpu.lose_device();
    }
}

/// Test hook: collapsed evaluations with N·M² ≥ `work` send Ψ2 to the device from now on.
pub fn set_psi2_min_work(work: f64) {
    STATE.with(|s| s.borrow_mut().psi2_min_work = Some(work));
}

/// How the driver wants work placed while a run lasts: its probes (the exact search's family
/// fits, the collapsed search's iterations), and how many compute workers the host side has.
#[derive(Clone)]
pub struct Placements {
    pub families: Option<Arc<PlacementProbe>>,
    pub collapsed: Option<Arc<PlacementProbe>>,
    pub workers: usize,
}

impl Placements {
    /// Whether the probe of the work `dispatch` holds is still timing both sides: then its unit
    /// runs here whichever side it takes, so that both are timed alike.
    fn probing(&self, dispatch: &Dispatch) -> bool {
        let probing =
            |probe: &Option<Arc<PlacementProbe>>| probe.as_ref().is_some_and(|p| p.probing());
        dispatch.jobs.iter().any(|job| match job {
            Job::Family { .. } => probing(&self.families),
            Job::Evaluate { variable, .. } => {
                matches!(**variable, Conditional::Collapsed(_)) && probing(&self.collapsed)
            }
            _ => false,
        })
    }
}

/// How units use the device here: family fits (when the run has a probe for them) in lockstep,
/// since a browser worker cannot block inside a fit; the host side timed as if the compute
/// workers ran it.
fn usage(placements: &Placements) -> DeviceUse<'_> {
    DeviceUse {
        psi2_min_work: STATE.with(|s| s.borrow().psi2_min_work.unwrap_or(PSI2_MIN_WORK)),
        collapsed: placements.collapsed.as_deref(),
        families: placements.families.as_deref(),
        lockstep_families: true,
        host_width: placements.workers,
    }
}

/// Whether this worker computes `dispatch` (on data of `rows` rows) itself: it has work for a
/// working device (evaluations, or family fits or collapsed iterations a probe places there or
/// is still timing on both sides); on the device it runs here in lockstep, awaiting each round,
/// so this worker stays free meanwhile. Everything else goes to a compute worker even when only
/// one is asked for: the driver dispatches a unit without a device only when it may run long
/// (starting fits, refits, final bounds, family fits, long iterations), so that this worker stays
/// free to act on a pause or a stop at once inside it. (A unit with device work runs its other
/// jobs here too; in a continuous search, units are all evaluations or none.)
pub fn takes(dispatch: &Dispatch, _workers: usize, rows: usize, placements: &Placements) -> bool {
    // While a probe measures, its units run here whichever side they take, so that both sides
    // are timed.
    let probing = placements.probing(dispatch);
    gpu().is_some_and(|gpu| {
        let usage = usage(placements);
        probing
            || dispatch
                .jobs
                .iter()
                .any(|job| has_device_work(job, rows, &gpu, usage))
    })
}

/// Computes `dispatch` on `data` here (see the module's comment), placed by `placements`; its
/// outcomes, and any switch to the CPU, go to the coordinator through the
/// compute pool's sink.
pub fn dispatch(dispatch: Dispatch, data: Rc<DMatrix<f64>>, placements: Placements) {
    let start = STATE.with(|s| {
        let mut state = s.borrow_mut();
        if state.busy {
            state.queued = Some((dispatch, data, placements));
            None
        } else {
            state.busy = true;
            Some((Rc::new(dispatch), data, state.unit, placements))
        }
    });
    if let Some((dispatch, data, unit, placements)) = start {
        wasm_bindgen_futures::spawn_local(run(dispatch, data, unit, placements));
    }
}

/// Whether `unit` is still the one being computed (not finished, not given up by its watch).
fn current(unit: u64) -> bool {
    STATE.with(|s| {
        let state = s.borrow();
        state.busy && state.unit == unit
    })
}

async fn run(dispatch: Rc<Dispatch>, data: Rc<DMatrix<f64>>, unit: u64, placements: Placements) {
    let Some(gpu) = gpu() else {
        complete(unit, dispatch.batch, on_cpu(&dispatch.jobs, &data), None);
        return;
    };
    let watch = Watch::start(unit, dispatch.clone(), data.clone());
    let before = gpu.traffic();
    let result = run_batch(
        &gpu,
        &Pool::serial(),
        &data,
        &dispatch.jobs,
        usage(&placements),
        &|| {
            if let Some(w) = &watch {
                w.restart();
            }
        },
    )
    .await;
    drop(watch);
    if !current(unit) {
        // The watch gave the device up while it was computing; the unit went on without it.
        return;
    }
    match result {
        Ok(outcomes) => complete(unit, dispatch.batch, outcomes, Some(gpu.traffic() - before)),
        Err(failure) => {
            give_gpu_up(&failure.error.to_string());
            let outcomes = failure.complete_on(&Pool::serial(), &data, &dispatch.jobs);
            complete(unit, dispatch.batch, outcomes, None);
        }
    }
}

/// Gives the GPU up for good and tells the driver (before the unit's outcomes, which come from
/// the CPU from now on).
fn give_gpu_up(why: &str) {
    STATE.with(|s| s.borrow_mut().gpu = None);
    emit(PoolEvent::GpuLost { why: why.into() });
}

/// Gives the GPU up for good and computes unit `unit` again on the CPU: the jobs are values, so
/// nothing is lost.
fn give_up(unit: u64, why: &str, dispatch: &Dispatch, data: &DMatrix<f64>) {
    give_gpu_up(why);
    complete(unit, dispatch.batch, on_cpu(&dispatch.jobs, data), None);
}

/// Hands the outcomes of unit `unit` (batch `batch`) over, with what crossed to and from the
/// device while the GPU computed all of it (`traffic`), and starts the unit that waited.
fn complete(unit: u64, batch: u64, outcomes: Vec<Outcome>, traffic: Option<DeviceTraffic>) {
    if !current(unit) {
        return;
    }
    emit(PoolEvent::Done {
        batch,
        outcomes,
        traffic,
    });
    let next = STATE.with(|s| {
        let mut state = s.borrow_mut();
        state.busy = false;
        state.unit += 1;
        state.queued.take()
    });
    if let Some((dispatch, data, placements)) = next {
        self::dispatch(dispatch, data, placements);
    }
}

/// The longest a unit may stay on the device before the device counts as hung: far beyond any
/// unit at the paper's sizes on a software adapter.
const DEVICE_TIMEOUT_SECONDS: f64 = 300.0;
/// How often a unit on the device tells the page that this worker is alive.
const BEAT_MILLISECONDS: i32 = 1000;

/// While a unit is on the device: a beat to the page every [`BEAT_MILLISECONDS`] (this worker is
/// idle, awaiting, and would otherwise be silent), and after [`DEVICE_TIMEOUT_SECONDS`] the
/// device is given up and the unit computed on the CPU. Dropping it stops the timer.
struct Watch {
    interval: i32,
    /// When the device was last given work (ms since the epoch).
    started: Rc<Cell<f64>>,
    _tick: Closure<dyn FnMut()>,
}

impl Watch {
    fn start(unit: u64, dispatch: Rc<Dispatch>, data: Rc<DMatrix<f64>>) -> Option<Self> {
        let started = Rc::new(Cell::new(js_sys::Date::now()));
        let since = started.clone();
        let tick = Closure::<dyn FnMut()>::new(move || {
            if !current(unit) {
                return;
            }
            if (js_sys::Date::now() - since.get()) / 1000.0 > DEVICE_TIMEOUT_SECONDS {
                give_up(
                    unit,
                    &format!("the device did not finish a unit in {DEVICE_TIMEOUT_SECONDS:.0} s"),
                    &dispatch,
                    &data,
                );
            } else {
                emit(PoolEvent::Alive);
            }
        });
        let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        let interval = scope
            .set_interval_with_callback_and_timeout_and_arguments_0(
                tick.as_ref().unchecked_ref(),
                BEAT_MILLISECONDS,
            )
            .ok()?;
        Some(Self {
            interval,
            started,
            _tick: tick,
        })
    }

    /// Counts the device's time from now (the host's work before the await is not the device's).
    fn restart(&self) {
        self.started.set(js_sys::Date::now());
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let scope: web_sys::WorkerGlobalScope = js_sys::global().unchecked_into();
        scope.clear_interval_with_handle(self.interval);
    }
}

/// Every job on this worker's CPU, in order.
fn on_cpu(jobs: &[Job<'static>], data: &DMatrix<f64>) -> Vec<Outcome> {
    jobs.iter().map(|job| job.run(data)).collect()
}
