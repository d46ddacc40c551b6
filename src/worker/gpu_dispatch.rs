//! The coordinating worker's own computing (wasm only): a dispatched unit that the compute pool
//! does not take ([`takes`]) runs here. Its uncollapsed evaluations go to the WebGPU device in one
//! submission ([`crate::backend::gpu`]: first halves in f64 here, predictions on the device, second
//! halves here), its other jobs run on this worker's CPU while the device works, and the readback is
//! awaited, so the worker's event loop (pause, stop, the page's pings) runs meanwhile.
//!
//! A failed GPU step (a lost device, an error the device reports, a failed mapping) gives the GPU
//! up for good: the unit in hand is computed again on the CPU from the same jobs, so the run loses
//! nothing, and the driver is told ([`PoolEvent::GpuLost`]) before the outcomes arrive.
//! One unit is on the device at a time (its buffers are reused); a unit dispatched meanwhile waits.

use std::cell::RefCell;
use std::rc::Rc;

use nalgebra::DMatrix;

use super::compute_pool::{emit, PoolEvent};
use crate::backend::gpu::{
    begin_evaluation, finish_evaluation, prediction_requests, runs_on_gpu, Gpu, GpuError,
};
use crate::discovery::jobs::{Job, Outcome};
use crate::driver::Dispatch;

#[derive(Default)]
struct State {
    /// The device, while it works.
    gpu: Option<Rc<Gpu>>,
    /// Whether a unit is being computed here.
    busy: bool,
    /// The unit dispatched while another was busy (only the newest is wanted).
    queued: Option<(Dispatch, Rc<DMatrix<f64>>)>,
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

/// Whether this worker computes `dispatch` itself: it has evaluations for a working device, or
/// there is no pool to send it to (`workers` is 1).
pub fn takes(dispatch: &Dispatch, workers: usize) -> bool {
    workers <= 1 || (gpu().is_some() && dispatch.jobs.iter().any(runs_on_gpu))
}

/// Computes `dispatch` on `data` here (see the module's comment); its outcomes, and any switch
/// to the CPU, go to the coordinator through the compute pool's sink.
pub fn dispatch(dispatch: Dispatch, data: Rc<DMatrix<f64>>) {
    let start = STATE.with(|s| {
        let mut state = s.borrow_mut();
        if state.busy {
            state.queued = Some((dispatch, data));
            None
        } else {
            state.busy = true;
            Some((dispatch, data))
        }
    });
    if let Some((dispatch, data)) = start {
        wasm_bindgen_futures::spawn_local(run(dispatch, data));
    }
}

async fn run(dispatch: Dispatch, data: Rc<DMatrix<f64>>) {
    let batch = dispatch.batch;
    let outcomes = match gpu() {
        Some(gpu) => match compute(&gpu, &dispatch.jobs, &data).await {
            Ok(outcomes) => outcomes,
            Err(error) => {
                // Given up for good; the jobs are values, so computing them again loses nothing.
                STATE.with(|s| s.borrow_mut().gpu = None);
                emit(PoolEvent::GpuLost {
                    why: error.to_string(),
                });
                on_cpu(&dispatch.jobs, &data)
            }
        },
        None => on_cpu(&dispatch.jobs, &data),
    };
    emit(PoolEvent::Done { batch, outcomes });
    let next = STATE.with(|s| {
        let mut state = s.borrow_mut();
        state.busy = false;
        state.queued.take()
    });
    if let Some((dispatch, data)) = next {
        self::dispatch(dispatch, data);
    }
}

/// Every job on this worker's CPU, in order.
fn on_cpu(jobs: &[Job<'static>], data: &DMatrix<f64>) -> Vec<Outcome> {
    jobs.iter().map(|job| job.run(data)).collect()
}

/// The outcomes of `jobs`: the evaluations through the device, the rest on the CPU while it
/// works. `Err` when a GPU step failed (nothing of the unit is kept then).
async fn compute(
    gpu: &Gpu,
    jobs: &[Job<'static>],
    data: &DMatrix<f64>,
) -> Result<Vec<Outcome>, GpuError> {
    let (on_device, here): (Vec<usize>, Vec<usize>) =
        (0..jobs.len()).partition(|&k| runs_on_gpu(&jobs[k]));
    let device_jobs: Vec<&Job<'static>> = on_device.iter().map(|&k| &jobs[k]).collect();
    let begun: Vec<_> = device_jobs
        .iter()
        .map(|job| begin_evaluation(data, job))
        .collect();
    let requests = prediction_requests(&device_jobs, &begun);
    let submitted = gpu.submit_predictions(&requests)?;
    let mut outcomes: Vec<Option<Outcome>> = vec![None; jobs.len()];
    for &k in &here {
        outcomes[k] = Some(jobs[k].run(data));
    }
    let mut predictions = submitted.finish(gpu, &requests).await?.into_iter();
    drop(requests);
    for ((&k, job), pending) in on_device.iter().zip(&device_jobs).zip(begun) {
        let predictions = if pending.is_ok() {
            predictions.next()
        } else {
            None
        };
        outcomes[k] = Some(finish_evaluation(job, pending, predictions));
    }
    Ok(outcomes
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Outcome::Value(Err("a job was not run".into()))))
        .collect())
}
