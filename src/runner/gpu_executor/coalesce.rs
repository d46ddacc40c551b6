//! [`CoalescedPsi2`]: the GPU as the [`Psi2Device`] of many fits running at once on the host's
//! threads, their Ψ2 requests gathered into shared submissions (natively: a fit blocks until its
//! sums are back).
//!
//! A fit's L-BFGS step waits for its last evaluation, so one fit's evaluations cannot share a
//! submission; the fits of a batch (the exact search's families, a unit's refits) are
//! independent, so theirs can. Each fit registers from the thread it runs on while it runs
//! ([`CoalescedPsi2::enter`]); a request waits until every running fit has one waiting (or
//! [`GATHER_SECONDS`] have passed, so a fit in a long stretch of host work holds nobody up), and
//! the thread that finds the batch complete submits it for all of them. What a request receives
//! does not depend on which others shared its submission: the device computes each request's
//! sums on its own. A fit that has run past a patience ([`CoalescedPsi2::set_patience`]) gives
//! the device up for all of them: requests not yet submitted are refused ([`ABANDONED`]) and
//! each refused fit knows it ([`Running::was_refused`]), so its caller computes it again on the
//! host. A submission that panics still answers every request of its batch (with an error)
//! before the panic goes on, so no fit is left waiting.

use std::collections::HashMap;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

use nalgebra::DMatrix;

use crate::gp::collapsed::{Psi2Device, Psi2Wanted};
use crate::gp::device::DeviceError;
use crate::runner::gpu::{Gpu, GpuError, Psi2Factors, Psi2Request, Psi2Sums};

/// The longest a request waits for the other running fits' requests before it is submitted
/// with those already waiting.
pub const GATHER_SECONDS: f64 = 0.002;

/// A running fit's clock: when it began, and whether it was refused the device.
#[derive(Clone, Copy)]
struct FitClock {
    began: Instant,
    refused: bool,
}

#[derive(Default)]
struct Gather {
    /// Fits registered and not yet left, by the thread each runs on (a fit asks from its own
    /// thread, and a thread blocked in a request runs nothing else).
    running: HashMap<ThreadId, FitClock>,
    /// Requests not yet submitted, with their tickets.
    waiting: Vec<(u64, Psi2Wanted)>,
    /// Answers not yet collected, by ticket.
    answers: HashMap<u64, Result<Psi2Sums, DeviceError>>,
    /// Whether a thread is submitting a batch now.
    submitting: bool,
    next_ticket: u64,
    requests: usize,
    submissions: usize,
}

/// The GPU shared by concurrent fits (see the module's comment). The first device error is kept
/// whole ([`CoalescedPsi2::failure`]); the fits see its text as a failed evaluation.
pub struct CoalescedPsi2<'g> {
    gpu: &'g Gpu,
    /// How long a request waits for the others ([`GATHER_SECONDS`]).
    gather_for: Duration,
    gather: Mutex<Gather>,
    changed: Condvar,
    failure: Mutex<Option<GpuError>>,
    /// Whether the device was given up for these fits ([`CoalescedPsi2::abandon`]), and when.
    abandoned: AtomicBool,
    abandoned_at: Mutex<Option<Instant>>,
    /// How long a fit may run on the device before its next request gives the device up
    /// ([`CoalescedPsi2::set_patience`]).
    patience: Mutex<Option<Duration>>,
}

/// What a request gets once the device was given up for these fits.
pub const ABANDONED: DeviceError = DeviceError::Abandoned;

/// A running fit's registration; leaving (on drop) lets the others' requests go without it.
pub struct Running<'c, 'g> {
    coalescer: &'c CoalescedPsi2<'g>,
    thread: ThreadId,
}

impl Running<'_, '_> {
    /// Whether this fit was refused the device ([`ABANDONED`]): its outcome must be computed
    /// again on the host.
    pub fn was_refused(&self) -> bool {
        self.coalescer
            .lock()
            .running
            .get(&self.thread)
            .is_some_and(|clock| clock.refused)
    }
}

impl Drop for Running<'_, '_> {
    fn drop(&mut self) {
        let mut gather = self.coalescer.lock();
        gather.running.remove(&self.thread);
        drop(gather);
        self.coalescer.changed.notify_all();
    }
}

impl<'g> CoalescedPsi2<'g> {
    pub fn new(gpu: &'g Gpu) -> Self {
        Self::with_gather(gpu, Duration::from_secs_f64(GATHER_SECONDS))
    }

    /// The same with requests waiting up to `gather_for` for the other running fits' (the
    /// tests make it long, so that a batch's submission does not depend on the scheduler).
    pub fn with_gather(gpu: &'g Gpu, gather_for: Duration) -> Self {
        Self {
            gpu,
            gather_for,
            gather: Mutex::new(Gather::default()),
            changed: Condvar::new(),
            failure: Mutex::new(None),
            abandoned: AtomicBool::new(false),
            abandoned_at: Mutex::new(None),
            patience: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gather> {
        self.gather.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a fit that will ask for sums from the calling thread until the returned guard
    /// is dropped (its clock starts now).
    pub fn enter(&self) -> Running<'_, 'g> {
        let thread = std::thread::current().id();
        let clock = FitClock {
            began: Instant::now(),
            refused: false,
        };
        self.lock().running.insert(thread, clock);
        Running {
            coalescer: self,
            thread,
        }
    }

    /// (requests answered, submissions made) so far.
    pub fn counts(&self) -> (usize, usize) {
        let gather = self.lock();
        (gather.requests, gather.submissions)
    }

    /// Gives the device up for these fits: every request from now on (and every one waiting)
    /// fails with [`ABANDONED`], so the fits end soon and their caller computes them again on
    /// the host.
    pub fn abandon(&self) {
        self.abandoned_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_or_insert_with(Instant::now);
        self.abandoned.store(true, Ordering::SeqCst);
        let _gather = self.lock();
        self.changed.notify_all();
    }

    /// Gives the device up ([`CoalescedPsi2::abandon`]) at the first request of a fit that has
    /// run longer than `patience` since it entered.
    pub fn set_patience(&self, patience: Duration) {
        *self.patience.lock().unwrap_or_else(PoisonError::into_inner) = Some(patience);
    }

    /// When [`CoalescedPsi2::abandon`] was first called, if it was.
    pub fn abandoned_at(&self) -> Option<Instant> {
        *self
            .abandoned_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether [`CoalescedPsi2::abandon`] was called.
    pub fn was_abandoned(&self) -> bool {
        self.abandoned.load(Ordering::SeqCst)
    }

    /// The first device error, if a submission failed.
    pub fn failure(self) -> Option<GpuError> {
        self.failure
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Submits `wanted` with the other running fits' requests and waits for its sums.
    fn ask(&self, wanted: Psi2Wanted) -> Result<Psi2Sums, DeviceError> {
        let asked = Instant::now();
        let thread = std::thread::current().id();
        let patience = *self.patience.lock().unwrap_or_else(PoisonError::into_inner);
        let began = self.lock().running.get(&thread).map(|clock| clock.began);
        if let (Some(patience), Some(began)) = (patience, began) {
            if asked.duration_since(began) >= patience {
                self.abandon();
            }
        }
        let gather_for = self.gather_for;
        let mut gather = self.lock();
        let ticket = gather.next_ticket;
        gather.next_ticket += 1;
        gather.waiting.push((ticket, wanted));
        self.changed.notify_all();
        loop {
            if let Some(answer) = gather.answers.remove(&ticket) {
                return answer;
            }
            if self.was_abandoned() && gather.waiting.iter().any(|(t, _)| *t == ticket) {
                // Not submitted yet: refused (a request already in flight gets its answer).
                gather.waiting.retain(|(t, _)| *t != ticket);
                if let Some(clock) = gather.running.get_mut(&thread) {
                    clock.refused = true;
                }
                return Err(ABANDONED);
            }
            let mine_waits = gather.waiting.iter().any(|(t, _)| *t == ticket);
            let complete = gather.waiting.len() >= gather.running.len().max(1);
            if mine_waits && !gather.submitting && (complete || asked.elapsed() >= gather_for) {
                gather.submitting = true;
                let batch = std::mem::take(&mut gather.waiting);
                drop(gather);
                // Every ticket of the batch gets an answer and the flag is cleared even if the
                // submission panics, so the other fits are never left waiting; the panic then
                // goes on in this fit.
                let submitted = catch_unwind(AssertUnwindSafe(|| self.submit(&batch)));
                gather = self.lock();
                gather.submitting = false;
                gather.submissions += 1;
                gather.requests += batch.len();
                let (mut answers, panic) = match submitted {
                    Ok(answers) => (answers, None),
                    Err(panic) => (Vec::new(), Some(panic)),
                };
                answers.resize_with(batch.len(), || Err(DeviceError::NoAnswer));
                for ((t, _), answer) in batch.iter().zip(answers) {
                    gather.answers.insert(*t, answer);
                }
                self.changed.notify_all();
                if let Some(panic) = panic {
                    drop(gather);
                    resume_unwind(panic);
                }
                continue;
            }
            let left = gather_for.saturating_sub(asked.elapsed());
            let wait = if mine_waits && !left.is_zero() {
                left
            } else {
                // Submitted by another thread (or due now but another is submitting): woken
                // when its answers are in.
                gather_for
            };
            gather = self
                .changed
                .wait_timeout(gather, wait)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// One submission for `batch`: each request's sums, or the device's error for each.
    fn submit(&self, batch: &[(u64, Psi2Wanted)]) -> Vec<Result<Psi2Sums, DeviceError>> {
        let requests: Vec<Psi2Request<'_>> = batch.iter().map(|(_, w)| w.into()).collect();
        match self.gpu.psi2_batch(&requests) {
            Ok(sums) => sums.into_iter().map(Ok).collect(),
            Err(error) => {
                let why = DeviceError::from(&error);
                self.failure
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(error);
                batch.iter().map(|_| Err(why.clone())).collect()
            }
        }
    }
}

impl Psi2Device for CoalescedPsi2<'_> {
    fn pair_sums(&self, factors: &Psi2Factors) -> Result<Psi2Sums, DeviceError> {
        self.ask(Psi2Wanted::Pairs(factors.clone()))
    }

    fn row_sums(&self, factors: &Psi2Factors, w: &DMatrix<f64>) -> Result<Psi2Sums, DeviceError> {
        self.ask(Psi2Wanted::Rows(factors.clone(), w.clone()))
    }
}
