//! Ψ2's sums from a device that is awaited rather than waited for (a browser worker must not
//! block on WebGPU): [`AwaitedPsi2`], and the collapsed bound computed against one
//! ([`bound_with_grad_awaited`]).
//!
//! A collapsed evaluation asks for its Ψ2 sums in the middle of its forward pass (pair sums) and
//! of its reverse pass (row sums), so its host work cannot be cut into halves around the device.
//! Instead it runs against a [`Psi2Replay`]: it runs until it asks for sums the replay does not
//! hold yet, the replay records the request and fails the evaluation there; the sums are fetched
//! and the evaluation runs again from the start. An evaluation is a pure function of its inputs,
//! so it asks for the same sums every time: [`PSI2_PASSES`] runs at most (pair sums, row sums,
//! then done), the cost being the host's forward work run up to three times.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};

use nalgebra::{DMatrix, DVector};

use super::bound::{collapsed_bound_with_grad_on, CollapsedGrad, CollapsedParams};
use super::psi::{Psi2Device, Psi2Factors};
use super::CollapsedError;
use crate::gp::device::DeviceError;

/// A request's two result matrices: (Σ p, Σ h p), M × M, or (Σ W p, Σ W p Δ²), N × M.
pub type Psi2Sums = (DMatrix<f64>, DMatrix<f64>);

/// What an evaluation asks a device for: the pair sums of some factors, or their row sums
/// against a symmetric W ([`Psi2Device`]'s two questions, owned).
#[derive(Debug, Clone)]
pub enum Psi2Wanted {
    Pairs(Psi2Factors),
    Rows(Psi2Factors, DMatrix<f64>),
}

/// The future of an awaited device's answer.
pub type Psi2Answer<'a> = Pin<Box<dyn Future<Output = Result<Psi2Sums, DeviceError>> + 'a>>;

/// A device whose Ψ2 sums are awaited: the answer comes when the device (and whatever batches
/// requests for it) gets to it. The sums are those [`Psi2Device`] defines.
pub trait AwaitedPsi2 {
    fn sums(&self, wanted: Psi2Wanted) -> Psi2Answer<'_>;
}

/// The most runs an evaluation against a replay may need (pair sums, row sums, then done).
pub const PSI2_PASSES: usize = 3;

/// A [`Psi2Device`] that answers from sums fetched for an earlier run of the same evaluation,
/// and records what it was asked for and does not hold yet.
#[derive(Default)]
pub struct Psi2Replay {
    pairs: Option<Psi2Sums>,
    rows: Option<Psi2Sums>,
    wanted: Mutex<Option<Psi2Wanted>>,
}

impl Psi2Replay {
    fn want(&self, wanted: Psi2Wanted) -> Result<Psi2Sums, DeviceError> {
        *self.wanted.lock().unwrap_or_else(PoisonError::into_inner) = Some(wanted);
        Err(DeviceError::Pending)
    }

    /// What the last run asked for and did not get (None: it ran to its end).
    pub fn take_wanted(&self) -> Option<Psi2Wanted> {
        self.wanted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Holds the device's `sums` for `wanted`, for the next run.
    pub fn hold(&mut self, wanted: &Psi2Wanted, sums: Psi2Sums) {
        match wanted {
            Psi2Wanted::Pairs(_) => self.pairs = Some(sums),
            Psi2Wanted::Rows(..) => self.rows = Some(sums),
        }
    }
}

impl Psi2Device for Psi2Replay {
    fn pair_sums(&self, factors: &Psi2Factors) -> Result<Psi2Sums, DeviceError> {
        match &self.pairs {
            Some(sums) => Ok(sums.clone()),
            None => self.want(Psi2Wanted::Pairs(factors.clone())),
        }
    }

    fn row_sums(&self, factors: &Psi2Factors, w: &DMatrix<f64>) -> Result<Psi2Sums, DeviceError> {
        match &self.rows {
            Some(sums) => Ok(sums.clone()),
            None => self.want(Psi2Wanted::Rows(factors.clone(), w.clone())),
        }
    }
}

/// [`collapsed_bound_with_grad_on`] (one row copy) with Ψ2's sums from `device`: the bound
/// F(params) and ∂F/∂params, run against a [`Psi2Replay`] and rerun after each answer. The same
/// value and gradient as with a blocking device that returns the same sums.
pub async fn bound_with_grad_awaited(
    x: &DMatrix<f64>,
    y: &DVector<f64>,
    params: &CollapsedParams,
    jitter: f64,
    device: &dyn AwaitedPsi2,
) -> Result<(f64, CollapsedGrad), CollapsedError> {
    let mut replay = Psi2Replay::default();
    for _ in 0..PSI2_PASSES {
        let result = collapsed_bound_with_grad_on(x, y, params, jitter, 1.0, Some(&replay));
        let Some(wanted) = replay.take_wanted() else {
            return result;
        };
        let sums = device
            .sums(wanted.clone())
            .await
            .map_err(CollapsedError::Device)?;
        replay.hold(&wanted, sums);
    }
    Err(CollapsedError::Device(DeviceError::TooManyPasses(
        PSI2_PASSES,
    )))
}
