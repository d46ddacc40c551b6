//! The coordinating worker's pool of compute workers (wasm only): each is another instance of
//! this worker's module that answers `compute` messages ([`crate::worker::driver::ComputeWorker`]). A
//! dispatched unit's jobs are handed out a few at a time ([`jobs_per_message`]: about two
//! messages per worker) to whichever worker is free, so slow and fast jobs balance while few
//! messages travel; the outcomes go back to the driver in the jobs' order once all are in.
//!
//! Nothing is shared between workers (no SharedArrayBuffer, so the page needs no cross-origin
//! isolation headers): the data go to each worker once per run, jobs and outcomes as MessagePack
//! bytes whose buffers are transferred, not copied.
//! A worker that dies, or fails to start, costs the unit it was in: the pool is replaced and the
//! driver plans the unit again ([`crate::worker::driver::Driver::compute_lost`]).

use std::cell::RefCell;
use std::rc::Rc;

use js_sys::{Array, Object, Reflect, Uint8Array};
use wasm_bindgen::prelude::*;
use web_sys::{ErrorEvent, MessageEvent, Worker};

use crate::discovery::jobs::Outcome;
use crate::worker::driver::{data_message, jobs_message, jobs_per_message, read_reply, Dispatch};
use crate::worker::protocol::{self, FromWorker};

/// One compute worker.
struct Slot {
    worker: Worker,
    /// Whether its module has loaded (a message sent before that is lost).
    ready: bool,
    /// The data it holds.
    data_id: u64,
    /// The jobs of the current batch it is running.
    jobs: Option<std::ops::Range<usize>>,
    // Kept so the handlers live as long as the worker.
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(ErrorEvent)>,
}

/// The unit being computed.
struct Batch {
    dispatch: Dispatch,
    data: Rc<Vec<u8>>,
    /// Jobs per message.
    per: usize,
    next: usize,
    outcomes: Vec<Option<Outcome>>,
    left: usize,
}

/// What a pool event asks the coordinator to do next.
pub enum PoolEvent {
    /// Every outcome of `batch` is in, in the jobs' order, with what crossed to and from the GPU
    /// when the coordinating worker's device computed the whole batch.
    Done {
        batch: u64,
        outcomes: Vec<Outcome>,
        traffic: Option<crate::runner::gpu::DeviceTraffic>,
    },
    /// A worker was lost during `batch`.
    Lost { batch: u64, why: String },
    /// A compute worker beat from inside a long job: the coordinating worker passes it on, so
    /// the page's watchdog does not take a coordinator waiting on long jobs for a stuck one.
    Alive,
    /// The coordinating worker's GPU failed and was given up (`super::gpu_dispatch`); the unit in
    /// hand is computed on the CPU and its outcomes follow as usual.
    GpuLost { why: String },
}

#[derive(Default)]
pub struct ComputePool {
    slots: Vec<Slot>,
    batch: Option<Batch>,
    /// Raised whenever the pool is replaced: events of older workers are ignored.
    epoch: u64,
}

thread_local! {
    static POOL: RefCell<ComputePool> = RefCell::new(ComputePool::default());
}

/// Where events of the pool go (set once by the worker shell).
type Sink = fn(PoolEvent);

thread_local! {
    static SINK: RefCell<Option<Sink>> = const { RefCell::new(None) };
}

/// Sets the function that receives the pool's events.
pub fn set_sink(sink: Sink) {
    SINK.with(|s| *s.borrow_mut() = Some(sink));
}

/// Hands `event` to the coordinator.
pub(super) fn emit(event: PoolEvent) {
    if let Some(sink) = SINK.with(|s| *s.borrow()) {
        sink(event);
    }
}

/// This worker's script, which the compute workers run too.
fn own_url() -> Result<String, String> {
    let location =
        Reflect::get(&js_sys::global(), &"location".into()).map_err(|e| format!("{e:?}"))?;
    Reflect::get(&location, &"href".into())
        .ok()
        .and_then(|v| v.as_string())
        .ok_or_else(|| "this worker has no location".to_string())
}

/// Computes `dispatch` on `workers` compute workers (started as needed) with `data` (the run's
/// data as a compute message).
pub fn dispatch(dispatch: Dispatch, workers: usize, data: Rc<Vec<u8>>) {
    let batch = dispatch.batch;
    // Workers still busy with a batch no longer wanted (a new run began while it was out) are
    // replaced, so none of their answers can land in this batch.
    if POOL.with(|p| p.borrow().slots.iter().any(|s| s.jobs.is_some())) {
        reset();
    }
    let started = POOL.with(|p| {
        let mut pool = p.borrow_mut();
        pool.grow(workers)?;
        let n = dispatch.jobs.len();
        pool.batch = Some(Batch {
            dispatch,
            data,
            per: jobs_per_message(n, workers),
            next: 0,
            outcomes: vec![None; n],
            left: n,
        });
        pool.feed_all();
        Ok::<(), String>(())
    });
    if let Err(why) = started {
        reset();
        emit(PoolEvent::Lost { batch, why });
    }
}

/// Ends every compute worker (their work is no longer wanted); new ones start with the next
/// dispatch.
pub fn reset() {
    POOL.with(|p| {
        let mut pool = p.borrow_mut();
        for slot in pool.slots.drain(..) {
            slot.worker.terminate();
        }
        pool.batch = None;
        pool.epoch += 1;
    });
}

impl ComputePool {
    /// Starts workers until there are `workers`, ending any beyond.
    fn grow(&mut self, workers: usize) -> Result<(), String> {
        while self.slots.len() > workers {
            if let Some(slot) = self.slots.pop() {
                slot.worker.terminate();
            }
        }
        if self.slots.len() < workers {
            let url = own_url()?;
            while self.slots.len() < workers {
                let slot = spawn(&url, self.slots.len(), self.epoch)?;
                self.slots.push(slot);
            }
        }
        Ok(())
    }

    /// Hands the next jobs to every free, ready worker.
    fn feed_all(&mut self) {
        for k in 0..self.slots.len() {
            self.feed(k);
        }
    }

    fn feed(&mut self, k: usize) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        let slot = &mut self.slots[k];
        let n = batch.dispatch.jobs.len();
        if !slot.ready || slot.jobs.is_some() || batch.next >= n {
            return;
        }
        let range = batch.next..(batch.next + batch.per).min(n);
        batch.next = range.end;
        if slot.data_id != batch.dispatch.data_id {
            post(&slot.worker, &batch.data);
            slot.data_id = batch.dispatch.data_id;
        }
        post(&slot.worker, &jobs_message(&batch.dispatch, range.clone()));
        slot.jobs = Some(range);
    }

    /// Takes worker `k`'s reply; the finished batch's outcomes when it was the last, or the
    /// batch lost when the worker refused its jobs or answered something unreadable (the jobs did
    /// not run: the unit is planned again on fresh workers).
    fn reply(&mut self, k: usize, bytes: &[u8]) -> Option<PoolEvent> {
        let slot = self.slots.get_mut(k)?;
        let range = slot.jobs.take()?;
        let batch = self.batch.as_mut()?;
        let outcomes = match read_reply(bytes) {
            // An answer for another batch is not this batch's: the worker is free again.
            Ok((b, _, _)) if b != batch.dispatch.batch => {
                self.feed(k);
                return None;
            }
            Ok((_, first, outcomes)) if first == range.start && outcomes.len() == range.len() => {
                outcomes
            }
            Ok(_) => {
                return Some(PoolEvent::Lost {
                    batch: batch.dispatch.batch,
                    why: "a compute worker answered other jobs".into(),
                })
            }
            Err(why) => {
                return Some(PoolEvent::Lost {
                    batch: batch.dispatch.batch,
                    why,
                })
            }
        };
        for (index, outcome) in range.zip(outcomes) {
            if batch.outcomes[index].replace(outcome).is_none() {
                batch.left -= 1;
            }
        }
        if batch.left == 0 {
            let done = self.batch.take()?;
            return Some(PoolEvent::Done {
                batch: done.dispatch.batch,
                outcomes: done.outcomes.into_iter().flatten().collect(),
                traffic: None,
            });
        }
        self.feed(k);
        None
    }
}

/// Posts `{compute: bytes}` to a compute worker, transferring the bytes' buffer.
fn post(worker: &Worker, bytes: &[u8]) {
    let array = Uint8Array::from(bytes);
    let object = Object::new();
    let _ = Reflect::set(&object, &"compute".into(), &array);
    let transfer = Array::of1(&array.buffer());
    if let Err(e) = worker.post_message_with_transfer(&object, &transfer) {
        web_sys::console::error_2(
            &"occam: a compute worker could not be sent a job".into(),
            &e,
        );
    }
}

fn current_batch() -> Option<u64> {
    POOL.with(|p| p.borrow().batch.as_ref().map(|b| b.dispatch.batch))
}

/// Worker `k` of pool `epoch` is gone: the pool is replaced and its batch reported lost.
fn lose(epoch: u64, why: String) {
    let live = POOL.with(|p| p.borrow().epoch == epoch);
    if !live {
        return;
    }
    let batch = current_batch();
    reset();
    if let Some(batch) = batch {
        emit(PoolEvent::Lost { batch, why });
    }
}

fn spawn(url: &str, k: usize, epoch: u64) -> Result<Slot, String> {
    let worker =
        Worker::new(url).map_err(|e| format!("a compute worker could not start: {e:?}"))?;
    let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |event: MessageEvent| {
        let data = event.data();
        if let Some(array) = Reflect::get(&data, &"computed".into())
            .ok()
            .and_then(|v| v.dyn_into::<Uint8Array>().ok())
        {
            let bytes = array.to_vec();
            let event = POOL.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.epoch != epoch {
                    return None;
                }
                pool.reply(k, &bytes)
            });
            match event {
                // The pool is replaced before the driver plans the unit again.
                Some(PoolEvent::Lost { why, .. }) => lose(epoch, why),
                Some(done) => emit(done),
                None => {}
            }
            return;
        }
        // The worker's own messages: `Ready` once loaded, `Busy` beats, `Crashed` on a panic.
        let message = Reflect::get(&data, &"json".into())
            .ok()
            .and_then(|v| v.as_string())
            .and_then(|json| protocol::decode::<FromWorker>(&json).ok());
        match message {
            Some(FromWorker::Ready) => POOL.with(|p| {
                let mut pool = p.borrow_mut();
                if pool.epoch == epoch {
                    if let Some(slot) = pool.slots.get_mut(k) {
                        slot.ready = true;
                    }
                    pool.feed(k);
                }
            }),
            Some(FromWorker::Crashed { message }) => lose(epoch, message),
            Some(FromWorker::Busy) if POOL.with(|p| p.borrow().epoch == epoch) => {
                emit(PoolEvent::Alive)
            }
            _ => {}
        }
    });
    worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
    let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |event: ErrorEvent| {
        event.prevent_default();
        let detail = event.message();
        lose(
            epoch,
            if detail.is_empty() {
                "a compute worker stopped unexpectedly".into()
            } else {
                format!("a compute worker stopped: {detail}")
            },
        );
    });
    worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
    Ok(Slot {
        worker,
        ready: false,
        data_id: 0,
        jobs: None,
        _on_message: on_message,
        _on_error: on_error,
    })
}

/// The data message for the run the driver holds, made once per run.
pub fn data_bytes(data_id: u64, data: &nalgebra::DMatrix<f64>) -> Rc<Vec<u8>> {
    thread_local! {
        static CACHED: RefCell<Option<(u64, Rc<Vec<u8>>)>> = const { RefCell::new(None) };
    }
    CACHED.with(|c| {
        let mut cached = c.borrow_mut();
        match cached.as_ref() {
            Some((id, text)) if *id == data_id => text.clone(),
            _ => {
                let text = Rc::new(data_message(data_id, data));
                *cached = Some((data_id, text.clone()));
                text
            }
        }
    })
}
