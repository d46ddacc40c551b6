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
pub type Psi2Answer<'a> = Pin<Box<dyn Future<Output = Result<Psi2Sums, String>> + 'a>>;

/// A device whose Ψ2 sums are awaited: the answer comes when the device (and whatever batches
/// requests for it) gets to it. The sums are those [`Psi2Device`] defines.
pub trait AwaitedPsi2 {
    fn sums(&self, wanted: Psi2Wanted) -> Psi2Answer<'_>;
}

/// The most runs an evaluation against a replay may need (pair sums, row sums, then done).
pub const PSI2_PASSES: usize = 3;

/// The error a replay gives for sums it does not hold yet.
const PSI2_PENDING: &str = "Ψ2 sums not computed yet";

/// A [`Psi2Device`] that answers from sums fetched for an earlier run of the same evaluation,
/// and records what it was asked for and does not hold yet.
#[derive(Default)]
pub struct Psi2Replay {
    pairs: Option<Psi2Sums>,
    rows: Option<Psi2Sums>,
    wanted: Mutex<Option<Psi2Wanted>>,
}

impl Psi2Replay {
    fn want(&self, wanted: Psi2Wanted) -> Result<Psi2Sums, String> {
        *self.wanted.lock().unwrap_or_else(PoisonError::into_inner) = Some(wanted);
        Err(PSI2_PENDING.into())
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
    fn pair_sums(&self, factors: &Psi2Factors) -> Result<Psi2Sums, String> {
        match &self.pairs {
            Some(sums) => Ok(sums.clone()),
            None => self.want(Psi2Wanted::Pairs(factors.clone())),
        }
    }

    fn row_sums(&self, factors: &Psi2Factors, w: &DMatrix<f64>) -> Result<Psi2Sums, String> {
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
    Err(CollapsedError::Device(format!(
        "an evaluation still asked for Ψ2 sums after {PSI2_PASSES} runs"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gp::collapsed::{CollapsedModel, FitSettings};
    use crate::gp::ready::ready;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::cell::Cell;

    /// Answers with the sums written out from their definition (`Psi2Device`'s), row by row,
    /// counting the questions.
    struct DefinitionAnswers {
        asked: Cell<usize>,
    }

    /// p(n, i, j) = pref_n exp(B_ni + B_nj − h_n Δ²_ij) and Δ²_ij.
    fn p(f: &Psi2Factors, n: usize, i: usize, j: usize) -> (f64, f64) {
        let d2 = (f.zw[i] - f.zw[j]).powi(2);
        let value = f.pref[n] * (f.b[(n, i)] + f.b[(n, j)] - f.h[n] * d2).exp();
        (value, d2)
    }

    impl AwaitedPsi2 for DefinitionAnswers {
        fn sums(&self, wanted: Psi2Wanted) -> Psi2Answer<'_> {
            self.asked.set(self.asked.get() + 1);
            Box::pin(async move {
                Ok(match &wanted {
                    Psi2Wanted::Pairs(f) => {
                        let (n, m) = f.b.shape();
                        let mut sums = (DMatrix::zeros(m, m), DMatrix::zeros(m, m));
                        for r in 0..n {
                            for i in 0..m {
                                for j in 0..m {
                                    let (v, _) = p(f, r, i, j);
                                    sums.0[(i, j)] += v;
                                    sums.1[(i, j)] += f.h[r] * v;
                                }
                            }
                        }
                        sums
                    }
                    Psi2Wanted::Rows(f, w) => {
                        let (n, m) = f.b.shape();
                        let mut sums = (DMatrix::zeros(n, m), DMatrix::zeros(n, m));
                        for r in 0..n {
                            for i in 0..m {
                                for j in 0..m {
                                    let (v, d2) = p(f, r, i, j);
                                    sums.0[(r, i)] += w[(i, j)] * v;
                                    sums.1[(r, i)] += w[(i, j)] * v * d2;
                                }
                            }
                        }
                        sums
                    }
                })
            })
        }
    }

    #[test]
    fn an_awaited_device_gives_the_blocking_bound_after_two_questions() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 40;
        let x = DMatrix::from_fn(n, 2, |r, c| ((r * (c + 3)) as f64 * 0.37).sin());
        let y = DVector::from_fn(n, |r, _| x[(r, 0)] * x[(r, 1)] + 0.1 * (r as f64).cos());
        let model = CollapsedModel::new(x.clone(), y.clone()).unwrap();
        let settings = FitSettings {
            inducing_points: 8,
            ..FitSettings::default()
        };
        let params = model.initial_params(&settings, &mut rng);
        let (f, g) = collapsed_bound_with_grad_on(&x, &y, &params, 1e-6, 1.0, None).unwrap();
        let device = DefinitionAnswers {
            asked: Cell::new(0),
        };
        let (fa, ga) = ready(bound_with_grad_awaited(&x, &y, &params, 1e-6, &device)).unwrap();
        assert_eq!(device.asked.get(), 2, "pair sums, then row sums");
        assert!((f - fa).abs() <= 1e-9 * f.abs(), "{f} vs {fa}");
        let (a, b) = (g.z.as_slice(), ga.z.as_slice());
        let scale = a.iter().fold(1e-12f64, |m, v| m.max(v.abs()));
        let worst = a
            .iter()
            .zip(b)
            .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
        assert!(worst <= 1e-9 * scale, "∂F/∂Z differs by {worst:e}");
    }
}
