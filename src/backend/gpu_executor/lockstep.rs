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
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use nalgebra::DMatrix;

use crate::backend::gpu::{Gpu, GpuError, Psi2Request};
use crate::discovery::jobs::{Job, Outcome};
use crate::gp::collapsed::{AwaitedPsi2, Psi2Answer, Psi2Sums, Psi2Wanted};

/// Where an answer is left for the fit that asked.
type AnswerCell = Rc<RefCell<Option<Result<Psi2Sums, String>>>>;

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
                    .unwrap_or_else(|| Outcome::Value(Err("not a family job".into())))
            }) as Fit<'_, Outcome>
        })
        .collect();
    run_in_lockstep(gpu, &device, fits, awaiting, give_up).await
}
