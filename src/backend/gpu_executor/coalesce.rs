//! [`CoalescedPsi2`]: the GPU as the [`Psi2Device`] of many fits running at once on the host's
//! threads, their Ψ2 requests gathered into shared submissions (natively: a fit blocks until its
//! sums are back).
//!
//! A fit's L-BFGS step waits for its last evaluation, so one fit's evaluations cannot share a
//! submission; the fits of a batch (the exact search's families, a unit's refits) are
//! independent, so theirs can. Each fit registers while it runs ([`CoalescedPsi2::enter`]); a
//! request waits until every running fit has one waiting (or [`GATHER_SECONDS`] have passed, so a
//! fit in a long stretch of host work holds nobody up), and the thread that finds the batch
//! complete submits it for all of them. What a request receives does not depend on which others
//! shared its submission: the device computes each request's sums on its own.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nalgebra::DMatrix;

use super::psi_replay::Psi2Wanted;
use crate::backend::gpu::{Gpu, GpuError, Psi2Factors, Psi2Sums};
use crate::gp::collapsed::Psi2Device;

/// The longest a request waits for the other running fits' requests before it is submitted
/// with those already waiting.
pub const GATHER_SECONDS: f64 = 0.002;

#[derive(Default)]
struct Gather {
    /// Fits registered and not yet left.
    running: usize,
    /// Requests not yet submitted, with their tickets.
    waiting: Vec<(u64, Psi2Wanted)>,
    /// Answers not yet collected, by ticket.
    answers: HashMap<u64, Result<Psi2Sums, String>>,
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
    /// Whether the device was given up for these fits ([`CoalescedPsi2::abandon`]).
    abandoned: AtomicBool,
    /// When a request gives the device up by itself ([`CoalescedPsi2::give_up_at`]).
    deadline: Mutex<Option<Instant>>,
}

/// What a request gets once the device was given up for these fits.
pub const ABANDONED: &str = "the GPU was given up for these fits (slower than the CPU)";

/// A running fit's registration; leaving (on drop) lets the others' requests go without it.
pub struct Running<'c, 'g>(&'c CoalescedPsi2<'g>);

impl Drop for Running<'_, '_> {
    fn drop(&mut self) {
        let mut gather = self.0.lock();
        gather.running = gather.running.saturating_sub(1);
        drop(gather);
        self.0.changed.notify_all();
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
            deadline: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Gather> {
        self.gather.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a fit that will ask for sums until the returned guard is dropped.
    pub fn enter(&self) -> Running<'_, 'g> {
        self.lock().running += 1;
        Running(self)
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
        self.abandoned.store(true, Ordering::SeqCst);
        let _gather = self.lock();
        self.changed.notify_all();
    }

    /// Gives the device up ([`CoalescedPsi2::abandon`]) at the first request after `at`.
    pub fn give_up_at(&self, at: Instant) {
        *self.deadline.lock().unwrap_or_else(PoisonError::into_inner) = Some(at);
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
    fn ask(&self, wanted: Psi2Wanted) -> Result<Psi2Sums, String> {
        let asked = Instant::now();
        let deadline = *self.deadline.lock().unwrap_or_else(PoisonError::into_inner);
        if deadline.is_some_and(|at| asked > at) {
            self.abandon();
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
            if self.was_abandoned() {
                gather.waiting.retain(|(t, _)| *t != ticket);
                return Err(ABANDONED.into());
            }
            let mine_waits = gather.waiting.iter().any(|(t, _)| *t == ticket);
            let complete = gather.waiting.len() >= gather.running.max(1);
            if mine_waits && !gather.submitting && (complete || asked.elapsed() >= gather_for) {
                gather.submitting = true;
                let batch = std::mem::take(&mut gather.waiting);
                drop(gather);
                let answers = self.submit(&batch);
                gather = self.lock();
                gather.submitting = false;
                gather.submissions += 1;
                gather.requests += batch.len();
                for ((t, _), answer) in batch.iter().zip(answers) {
                    gather.answers.insert(*t, answer);
                }
                self.changed.notify_all();
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
    fn submit(&self, batch: &[(u64, Psi2Wanted)]) -> Vec<Result<Psi2Sums, String>> {
        let requests: Vec<_> = batch.iter().map(|(_, w)| w.request()).collect();
        match self.gpu.psi2_batch(&requests) {
            Ok(sums) => sums.into_iter().map(Ok).collect(),
            Err(error) => {
                let why = error.to_string();
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
    fn pair_sums(&self, factors: &Psi2Factors) -> Result<Psi2Sums, String> {
        self.ask(Psi2Wanted::Pairs(factors.clone()))
    }

    fn row_sums(&self, factors: &Psi2Factors, w: &DMatrix<f64>) -> Result<Psi2Sums, String> {
        self.ask(Psi2Wanted::Rows(factors.clone(), w.clone()))
    }
}
