//! The Web Worker: owns everything heavy (parsing and training) so the page never blocks.
//!
//! A thin shell around [`crate::worker::driver::Driver`]: it announces itself with `Ready`, answers `Ping`
//! by opening a WebGPU device when the browser grants an adapter ([`gpu_dispatch`]) and naming the
//! backend, hands file bytes and run requests to the driver, posts what the driver says, runs the
//! driver's steps from zero-delay timers so pause and stop requests are handled between steps, and
//! sends each dispatched unit to the compute workers or computes it itself (on the GPU where it
//! can). A panic is reported to the page as `Crashed` rather than dying silently.
//!
//! The same module is also a compute worker: one that receives `compute` messages (from a
//! coordinating worker's [`compute_pool`]) runs the jobs in them and answers with `computed`
//! ones.

mod compute_pool;
mod gpu_dispatch;
mod gpu_probe;

use crate::runner::cost_model::Side;
use crate::worker::driver::{ComputeWorker, Driver, Reaction, STEP_SECONDS};
use crate::worker::protocol::{self, ComputeBackend, FromWorker, ToWorker};
use js_sys::{ArrayBuffer, Object, Reflect, Uint8Array};
use nalgebra::DMatrix;
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::prelude::*;
use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

thread_local! {
    /// The worker's one driver (a worker has a single thread).
    static DRIVER: RefCell<Driver> = RefCell::new(Driver::new());
    /// The data and job runner when this worker computes for a coordinating one.
    static COMPUTE: RefCell<ComputeWorker> = RefCell::new(ComputeWorker::new());
    /// The run's data as the units this worker computes itself read it, under its id.
    static RUN_DATA: RefCell<Option<(u64, Rc<DMatrix<f64>>)>> = const { RefCell::new(None) };
}

/// The current run's data under `data_id`, shared (copied from the driver once per run).
fn run_data(data_id: u64) -> Option<Rc<DMatrix<f64>>> {
    if let Some(data) = RUN_DATA.with(|d| {
        d.borrow()
            .as_ref()
            .filter(|(id, _)| *id == data_id)
            .map(|(_, data)| data.clone())
    }) {
        return Some(data);
    }
    let data = DRIVER.with(|d| {
        d.borrow()
            .data()
            .filter(|(id, _)| *id == data_id)
            .map(|(_, data)| Rc::new(data.clone()))
    })?;
    RUN_DATA.with(|d| *d.borrow_mut() = Some((data_id, data.clone())));
    Some(data)
}

fn scope() -> DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

/// Posts `message` to the page (as `{json}`).
fn post(message: &FromWorker) {
    let object = Object::new();
    // Setting a property on a fresh plain object cannot fail.
    let _ = Reflect::set(&object, &"json".into(), &protocol::encode(message).into());
    // A saved run is large: it goes beside the JSON, as a string the page keeps without parsing.
    if let FromWorker::Saved { session, .. } = message {
        let _ = Reflect::set(&object, &"session".into(), &session.into());
    }
    if let Err(e) = scope().post_message(&object) {
        web_sys::console::error_2(&"occam worker: postMessage failed".into(), &e);
    }
}

/// Entry point of the worker binary.
pub fn start() {
    std::panic::set_hook(Box::new(|info| {
        web_sys::console::error_1(&format!("occam worker panicked: {info}").into());
        post(&FromWorker::Crashed {
            message: format!("the worker stopped on an internal error: {info}"),
        });
    }));
    // Long units of work beat from inside (crate::base::heartbeat): each beat tells the page the worker
    // is alive, so its watchdog never ends a worker that is busy.
    crate::base::heartbeat::install(Some(Box::new(|| post(&FromWorker::Busy))));
    let cores = scope().navigator().hardware_concurrency();
    let cores = if cores.is_finite() && cores >= 1.0 {
        cores as usize
    } else {
        1
    };
    DRIVER.with(|d| d.borrow_mut().set_cores(cores));
    compute_pool::set_sink(on_pool_event);
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(handle_message);
    scope().set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    // The handler lives as long as the worker itself.
    on_message.forget();
    post(&FromWorker::Ready);
}

/// Posts a reaction's messages, hands its jobs to the compute workers and schedules its step.
fn react(reaction: Reaction) {
    for m in &reaction.messages {
        post(m);
    }
    if reaction.reset_pool {
        compute_pool::reset();
    }
    if let Some(dispatch) = reaction.dispatch {
        let (workers, rows, families) = DRIVER.with(|d| {
            let driver = d.borrow();
            let workers = driver.workers();
            let families = gpu_dispatch::Placements {
                families: driver.family_probe(),
                collapsed: driver.collapsed_probe(),
                workers,
            };
            (
                workers,
                driver.data().map_or(0, |(_, data)| data.nrows()),
                families,
            )
        });
        if gpu_dispatch::takes(&dispatch, workers, rows, &families) {
            match run_data(dispatch.data_id) {
                Some(data) => gpu_dispatch::dispatch(dispatch, data, families),
                None => post(&FromWorker::Failed {
                    message: "a unit of work arrived for data this worker no longer holds".into(),
                }),
            }
            if let Some(generation) = reaction.step {
                schedule_step(generation);
            }
            return;
        }
        let data = DRIVER.with(|d| {
            let driver = d.borrow();
            driver
                .data()
                .map(|(id, data)| (compute_pool::data_bytes(id, data), driver.workers()))
        });
        match data {
            Some((data, workers)) => compute_pool::dispatch(dispatch, workers, data),
            None => compute_pool::reset(),
        }
    }
    if let Some(generation) = reaction.step {
        schedule_step(generation);
    }
}

/// What the compute workers report: a finished batch or a lost worker.
fn on_pool_event(event: compute_pool::PoolEvent) {
    if let compute_pool::PoolEvent::Alive = event {
        post(&FromWorker::Busy);
        return;
    }
    let reaction = DRIVER.with(|d| {
        let mut driver = d.borrow_mut();
        match event {
            compute_pool::PoolEvent::Done {
                batch,
                outcomes,
                traffic,
            } => driver.outcomes_with_traffic(batch, outcomes, traffic),
            compute_pool::PoolEvent::Lost { batch, why } => driver.compute_lost(batch, &why),
            compute_pool::PoolEvent::GpuLost { why } => driver.gpu_lost(&why),
            compute_pool::PoolEvent::Alive => Reaction::default(),
        }
    });
    react(reaction);
}

/// Runs one driver step after the event loop has had a turn (so queued requests come first).
fn schedule_step(generation: u64) {
    let callback = Closure::once_into_js(move || {
        let reaction = DRIVER.with(|d| d.borrow_mut().tick(generation, STEP_SECONDS));
        react(reaction);
    });
    if let Err(e) =
        scope().set_timeout_with_callback_and_timeout_and_arguments_0(callback.unchecked_ref(), 0)
    {
        post(&FromWorker::Failed {
            message: format!("the worker could not schedule its next step: {e:?}"),
        });
    }
}

fn handle_message(event: MessageEvent) {
    let data = event.data();
    // A job from a coordinating worker.
    if let Some(array) = Reflect::get(&data, &"compute".into())
        .ok()
        .and_then(|v| v.dyn_into::<Uint8Array>().ok())
    {
        let bytes = array.to_vec();
        if let Some(reply) = COMPUTE.with(|c| c.borrow_mut().handle(&bytes)) {
            let array = Uint8Array::from(reply.as_slice());
            let object = Object::new();
            let _ = Reflect::set(&object, &"computed".into(), &array);
            let transfer = js_sys::Array::of1(&array.buffer());
            if let Err(e) = scope().post_message_with_transfer(&object, &transfer) {
                web_sys::console::error_2(&"occam compute worker: postMessage failed".into(), &e);
            }
        }
        return;
    }
    let json = Reflect::get(&data, &"json".into())
        .ok()
        .and_then(|v| v.as_string());
    let Some(json) = json else {
        post(&FromWorker::Failed {
            message: "the worker received a message without a `json` field".into(),
        });
        return;
    };
    let request = match protocol::decode::<ToWorker>(&json) {
        Ok(r) => r,
        Err(message) => {
            post(&FromWorker::Failed { message });
            return;
        }
    };
    match request {
        ToWorker::Ping => wasm_bindgen_futures::spawn_local(async {
            // The adapter as the browser describes it (wgpu is not told its name), then a device
            // on it for the engine's GPU path.
            let adapter = gpu_probe::probe().await;
            let device = match adapter {
                Some(_) => gpu_dispatch::open().await.map_err(|why| {
                    format!("a WebGPU device could not be opened on this adapter ({why}): runs compute on the CPU")
                }),
                None => Err("no WebGPU adapter".into()),
            };
            // During a run (a worker restarted to go on with one) the badge names that run's
            // backend; before any, the GPU if it works.
            let during_run = DRIVER.with(|d| {
                let mut driver = d.borrow_mut();
                driver.set_gpu(adapter.clone(), device.clone());
                driver.is_running().then(|| driver.backend_message(false))
            });
            post(&during_run.unwrap_or(FromWorker::Pong {
                backend: if device.is_ok() {
                    ComputeBackend::WebGpu
                } else {
                    ComputeBackend::Cpu
                },
                note: adapter.as_ref().and(device.err()),
                adapter,
                switched: false,
            }));
        }),
        ToWorker::LoadCsv {
            load_id,
            file_name,
            options,
        } => {
            let bytes = Reflect::get(&data, &"bytes".into())
                .ok()
                .and_then(|b| b.dyn_into::<ArrayBuffer>().ok());
            let reaction = match bytes {
                Some(buffer) => {
                    let bytes = Uint8Array::new(&buffer).to_vec();
                    DRIVER.with(|d| {
                        d.borrow_mut()
                            .load(load_id, &file_name, &bytes, &options, &mut |m| post(&m))
                    })
                }
                None => Reaction {
                    messages: vec![FromWorker::Failed {
                        message: format!("the file {file_name} arrived without its contents"),
                    }],
                    ..Reaction::default()
                },
            };
            react(reaction);
        }
        ToWorker::Start(request) => react(DRIVER.with(|d| d.borrow_mut().start(*request))),
        ToWorker::Simulate { spec } => post(&FromWorker::from_simulation(&spec)),
        ToWorker::ExplainEdge { about, edge } => {
            post(&DRIVER.with(|d| d.borrow().explain_edge(&about, edge)))
        }
        ToWorker::FitConditional {
            about,
            child,
            shown_parent,
        } => post(&DRIVER.with(|d| d.borrow().fit_conditional(&about, child, shown_parent))),
        ToWorker::CompareDirections { about, edge } => {
            post(&DRIVER.with(|d| d.borrow().compare_directions(&about, edge)))
        }
        ToWorker::Pause => react(DRIVER.with(|d| d.borrow_mut().pause())),
        ToWorker::Resume => react(DRIVER.with(|d| d.borrow_mut().resume())),
        ToWorker::Stop => react(DRIVER.with(|d| d.borrow_mut().stop())),
        ToWorker::Continue { run_id, session } => {
            react(DRIVER.with(|d| d.borrow_mut().continue_run(run_id, &session)))
        }
        // The fault-injection hooks exist only in builds made for the browser tests.
        ToWorker::Panic
        | ToWorker::Hang
        | ToWorker::LoseGpu
        | ToWorker::CollapsedOn { .. }
        | ToWorker::FamilyFitsOn { .. }
            if !crate::worker::protocol::TEST_HOOKS_BUILT => {}
        ToWorker::FamilyFitsOn { gpu } => DRIVER.with(|d| {
            d.borrow_mut()
                .set_family_side(if gpu { Side::Device } else { Side::Host })
        }),
        ToWorker::LoseGpu => gpu_dispatch::lose(),
        ToWorker::CollapsedOn { gpu } => {
            // On the GPU at every size: the floor below which nothing is timed goes too.
            if gpu {
                gpu_dispatch::set_psi2_min_work(0.0);
                DRIVER.with(|d| d.borrow_mut().set_psi2_min_work(0.0));
            }
            DRIVER.with(|d| {
                d.borrow_mut()
                    .set_collapsed_side(if gpu { Side::Device } else { Side::Host })
            })
        }
        ToWorker::Panic => panic!("deliberate panic requested by the page (test hook)"),
        ToWorker::Hang => {
            // Busy until the page's watchdog ends the worker (test hook).
            let start = js_sys::Date::now();
            while js_sys::Date::now() - start < 600_000.0 {}
        }
    }
}
