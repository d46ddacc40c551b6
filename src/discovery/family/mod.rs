//! The evidence of one family, F(i | S): the collapsed GP-CDE bound of x_i given its parents x_S
//! (SE + linear kernel on [x_S, w], free q(w); MODEL.md §4 and §6), fitted from the standard start
//! with a fixed, family-derived seed. A DAG's evidence is Σ_i F(i | pa(i)) (the DGP-CDE score), so
//! two graphs that share a family share its term, and the same family always gets the same value
//! whichever search asks for it.
//!
//! Used to compare the continuous search's restarts: their final objectives are end points of a
//! relaxation and say as much about how well each run optimised as about its graph (BENCHMARKS.md,
//! issue 10); refitting each final DAG's families from the same start compares the graphs.

mod cache;
mod record;
mod settings;

pub use cache::{families, FamilyCache};
pub use record::{
    ComputedOn, FamilyScore, FitRecord, FitRole, FitWork, StopCounts, TRACE_CHECKPOINT_EVERY,
};
pub use settings::{
    family_fit_settings, family_seed, ColdFits, FamilyFitScheme, FamilyKey, FamilyScoreSettings,
    FamilySettingsError, WarmStart, DEFAULT_FAMILY_FIT_SCHEME, FAMILY_ADAM_STEPS,
    FAMILY_LBFGS_ITERATIONS, FAMILY_RESTARTS, FAMILY_STALL_GAIN, FAMILY_STALL_WINDOW,
    WARM_WITH_COLD_FITS_UP_TO,
};

use std::collections::BTreeMap;

use nalgebra::{DMatrix, DVector};
use serde::{Deserialize, Serialize};

use crate::discovery::error::DiscoveryError;
use crate::gp::collapsed::{
    AwaitedPsi2, CollapsedFit, CollapsedModel, CollapsedParams, FitError, FitSettings,
    GpInitialisation, LatentStart, Psi2Device, StageStats, MIN_START_SE_VARIANCE,
};
use crate::gp::lbfgs::{LbfgsSettings, StallRule, StopReason};
use crate::gp::ready::ready;
use crate::gp::resolution::resolution_noise_floor;
use crate::gp::NOISE_VARIANCE_FLOOR;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Families of up to this many parents evaluate their best fit with every proper subset of their
/// parents switched off ([`FamilyScore::switched_off`]): 2^k − 1 bound evaluations without a
/// gradient: counted for P = 6 candidates, 665 per variable (6,650 for a 10-node set) against
/// about 165,000 evaluations with gradient for the fits of such a set (not timed separately).
pub const SWITCH_OFF_ALL_SUBSETS_UP_TO: usize = 6;

/// [`FamilyScore::switched_off`] of the best fit `fit` of `model` (k parents).
fn switched_off_values(model: &CollapsedModel, fit: &CollapsedFit) -> Vec<(u32, f64)> {
    let k = model.parents();
    let full: u32 = (1u32 << k) - 1;
    let masks: Vec<u32> = if k <= SWITCH_OFF_ALL_SUBSETS_UP_TO {
        (0..full).collect()
    } else {
        (0..k).map(|j| full & !(1 << j)).collect()
    };
    masks
        .into_iter()
        .filter_map(|kept| {
            let positions: Vec<usize> = (0..k).filter(|&j| kept & (1 << j) != 0).collect();
            model
                .bound_with_parents(&fit.params, &positions, fit.jitter)
                .ok()
                .map(|v| (kept, v))
        })
        .collect()
}

/// A family's score together with the fitted model that reached its best bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FamilyFit {
    pub score: FamilyScore,
    /// The fit with the highest bound (the first of equal ones); None when every fit failed.
    pub best: Option<CollapsedFit>,
}

/// F(i | S) = max(max_r F_r, F_floor) on the rows of `data` (N × D, standardised): F_r the
/// collapsed GP-CDE bound of column `child` given columns `parents` (SE + linear on [x_S, w], free
/// q(w); MODEL.md §4 and §6) reached by fit r (by `settings.scheme`: the residual and w-off latent
/// starts of [`family_fit_settings`] alternating over `settings.restarts`, raced, or cold fits
/// and a fit from `warm`, the best subset's fit), F_floor the closed-form value, with a
/// family-derived seed so the same family (and subset fit) always gets the same score. Every
/// fit's record is kept ([`FitRecord`]). Fails only when the model cannot be built from the data.
pub fn family_score(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    settings: &FamilyScoreSettings,
    seed: u64,
    warm: Option<&WarmStart>,
) -> Result<FamilyScore, FitError> {
    let request = FamilyRequest {
        data,
        child,
        parents,
        settings,
        seed,
        warm,
    };
    family_fit_on(request, None).map(|f| f.score)
}

/// What a family's fits are asked for: F(`child` | `parents`) on the rows of `data` (N × D,
/// standardised) by `settings`, from run seed `seed`, with `warm` the best subset's fit when the
/// scheme takes warm starts (the arguments of [`family_score`]).
#[derive(Clone, Copy)]
pub struct FamilyRequest<'a> {
    /// The data, N × D, standardised.
    pub data: &'a DMatrix<f64>,
    /// The column being explained.
    pub child: usize,
    /// The columns explaining it, in the model's input order.
    pub parents: &'a [usize],
    /// How the family is fitted (restarts, caps, warm-start scheme).
    pub settings: &'a FamilyScoreSettings,
    /// The run's seed; each family derives its own from it.
    pub seed: u64,
    /// The best fit of a subset with one parent fewer, when the scheme takes warm starts.
    pub warm: Option<&'a WarmStart>,
}

/// [`family_score`] and the best fit itself (its parameters, for predictions from the model that
/// was scored): the same fits from the same seeds, so `score` is [`family_score`]'s value bit for
/// bit. The model's inputs are the columns `parents` in the order given (sorted, for a warm
/// start: its subset's parents are sorted).
pub fn family_fit(request: FamilyRequest<'_>) -> Result<FamilyFit, FitError> {
    family_fit_on(request, None)
}

/// [`family_fit`] with every fit's Ψ2 sums on `device` when one is given (the same fits from the
/// same seeds, to within the device's rounding).
pub fn family_fit_on(
    request: FamilyRequest<'_>,
    device: Option<&dyn Psi2Device>,
) -> Result<FamilyFit, FitError> {
    ready(family_fit_with(request, device, None))
}

/// [`family_fit`] with every fit's Ψ2 sums from `device`, which is awaited (a browser worker's
/// WebGPU, shared with other families' fits): the same fits from the same seeds, to within the
/// device's rounding.
pub async fn family_fit_awaiting(
    request: FamilyRequest<'_>,
    device: &dyn AwaitedPsi2,
) -> Result<FamilyFit, FitError> {
    family_fit_with(request, None, Some(device)).await
}

/// The fits of [`family_fit`], with Ψ2's sums on a blocking `device` or an `awaited` one when
/// either is given.
async fn family_fit_with(
    request: FamilyRequest<'_>,
    device: Option<&dyn Psi2Device>,
    awaited: Option<&dyn AwaitedPsi2>,
) -> Result<FamilyFit, FitError> {
    let FamilyRequest {
        data,
        child,
        parents,
        settings,
        ..
    } = request;
    let n = data.nrows();
    let x = DMatrix::from_fn(n, parents.len(), |r, k| data[(r, parents[k])]);
    let y = DVector::from_fn(n, |r, _| data[(r, child)]);
    let floor = resolution_noise_floor(y.as_slice(), NOISE_VARIANCE_FLOOR);
    let model = CollapsedModel::with_noise_floor(x, y, floor)?;
    let computed_on = if device.is_some() || awaited.is_some() {
        ComputedOn::Gpu
    } else {
        ComputedOn::Cpu
    };
    let model = match device {
        Some(device) => model.on_device(device),
        None => model,
    };
    let family_seed = family_seed(request.seed, child, parents);
    // The warm start, when the scheme takes one and `warm` is a subset with one parent fewer.
    let warm_params = match settings.scheme {
        FamilyFitScheme::Warm { .. } if parents.len() >= 2 => request.warm.and_then(|w| {
            let added: Vec<usize> = (0..parents.len())
                .filter(|&k| !w.parents.contains(&parents[k]))
                .collect();
            let nested = w.parents.len() + 1 == parents.len()
                && w.parents.iter().all(|j| parents.contains(j));
            match added.as_slice() {
                [k] if nested => model.warm_start(&w.params, *k),
                _ => None,
            }
        }),
        _ => None,
    };
    let cold: Vec<usize> = match (settings.scheme, &warm_params) {
        (FamilyFitScheme::Warm { cold }, Some(_)) => cold.restarts().to_vec(),
        _ => (0..settings.restarts.max(1)).collect(),
    };
    let usable = |f: &Result<CollapsedFit, FitError>| matches!(f, Ok(f) if f.bound.is_finite());
    let mut records = Vec::new();
    let mut outcomes: Vec<Result<CollapsedFit, FitError>> = Vec::with_capacity(cold.len() + 1);
    let fits = ColdFitter {
        model: &model,
        settings,
        family_seed,
        awaited,
    };
    fits.run(cold, &mut records, &mut outcomes).await;
    if let Some(params) = warm_params {
        let fitted = model
            .fit_from_awaiting(params, &family_fit_settings(settings, 0), awaited)
            .await;
        records.push(FitRecord::of(FitRole::Warm, None, &fitted));
        outcomes.push(fitted);
        // A warm fit that failed with no cold fit beside it would leave the family at its
        // floor: the cold fits run after all.
        if !outcomes.iter().any(usable) {
            let all = 0..settings.restarts.max(1);
            fits.run(all, &mut records, &mut outcomes).await;
        }
    }
    let failed = outcomes.iter().filter(|f| !usable(f)).count();
    // The highest bound; the first of equal ones.
    let best = outcomes
        .into_iter()
        .filter_map(|f| f.ok().filter(|f| f.bound.is_finite()))
        .reduce(|a, b| if b.bound > a.bound { b } else { a });
    let best_bound = best.as_ref().map(|b| b.bound);
    let floor_value = model.noise_value();
    let (best_params, switched_off) = match (&best, settings.scheme.warm_starts()) {
        (Some(b), true) => (Some(b.params.clone()), switched_off_values(&model, b)),
        _ => (None, Vec::new()),
    };
    Ok(FamilyFit {
        score: FamilyScore {
            value: best_bound.map_or(floor_value, |b| b.max(floor_value)),
            best_bound,
            floor: floor_value,
            fits_failed: failed,
            fits: records,
            best_params,
            switched_off,
            computed_on: Some(computed_on),
        },
        best,
    })
}

/// What a family's cold fits share: its model, settings, seed and device.
struct ColdFitter<'a, 'm> {
    model: &'a CollapsedModel<'m>,
    settings: &'a FamilyScoreSettings,
    family_seed: u64,
    awaited: Option<&'a dyn AwaitedPsi2>,
}

impl ColdFitter<'_, '_> {
    /// Cold fits `restarts`, one after another ([`cold_fit`]), their outcomes appended to
    /// `outcomes` and their records to `records`.
    async fn run(
        &self,
        restarts: impl IntoIterator<Item = usize>,
        records: &mut Vec<FitRecord>,
        outcomes: &mut Vec<Result<CollapsedFit, FitError>>,
    ) {
        for restart in restarts {
            let fitted = cold_fit(
                self.model,
                self.settings,
                self.family_seed,
                restart,
                self.awaited,
                records,
            );
            outcomes.push(fitted.await);
        }
    }
}

/// Cold fit `restart` of a family (its own GP-regression start drawn from the family's seed +
/// `restart`, the latent start of [`family_fit_settings`]; raced under the race scheme), recorded
/// in `records`.
async fn cold_fit(
    model: &CollapsedModel<'_>,
    settings: &FamilyScoreSettings,
    family_seed: u64,
    restart: usize,
    awaited: Option<&dyn AwaitedPsi2>,
    records: &mut Vec<FitRecord>,
) -> Result<CollapsedFit, FitError> {
    let mut rng = ChaCha8Rng::seed_from_u64(family_seed.wrapping_add(restart as u64));
    let fit_settings = family_fit_settings(settings, restart);
    match settings.scheme {
        FamilyFitScheme::Independent | FamilyFitScheme::Warm { .. } => {
            let fitted = model.fit_awaiting(&fit_settings, &mut rng, awaited).await;
            records.push(FitRecord::of(
                FitRole::Full,
                Some(fit_settings.latent_start),
                &fitted,
            ));
            fitted
        }
        FamilyFitScheme::Race { probe } => {
            raced_fit(model, &fit_settings, probe, &mut rng, awaited, records).await
        }
    }
}

/// One raced start: the GP-regression start, then its residual and w-off latent starts
/// ([`CollapsedModel::with_latent_off`]) each run `probe` L-BFGS iterations, and the one with the
/// higher bound continues to convergence or the caps. A root has one start (the normal scores of
/// y), so it runs once. Every run is recorded in `records`.
async fn raced_fit(
    model: &CollapsedModel<'_>,
    settings: &FitSettings,
    probe: usize,
    rng: &mut ChaCha8Rng,
    awaited: Option<&dyn AwaitedPsi2>,
    records: &mut Vec<FitRecord>,
) -> Result<CollapsedFit, FitError> {
    let start = model.start(settings, rng);
    let off = (model.parents() > 0 && start.gp_initialised && probe > 0)
        .then(|| model.with_latent_off(&start.params));
    let Some(off) = off else {
        let mut fitted = model
            .fit_from_awaiting(start.params, settings, awaited)
            .await;
        if let Ok(f) = fitted.as_mut() {
            f.start = start.stats;
            f.gp_initialised = start.gp_initialised;
        }
        records.push(FitRecord::of(
            FitRole::Full,
            Some(LatentStart::Residual),
            &fitted,
        ));
        return fitted;
    };
    let probing = FitSettings {
        lbfgs: LbfgsSettings {
            max_iterations: probe.min(settings.lbfgs.max_iterations),
            ..settings.lbfgs
        },
        ..*settings
    };
    let mut lanes = Vec::with_capacity(2);
    for (latent, params) in [
        (LatentStart::Residual, start.params),
        (LatentStart::Off, off),
    ] {
        let mut fitted = model.fit_from_awaiting(params, &probing, awaited).await;
        if let Ok(f) = fitted.as_mut() {
            f.gp_initialised = true;
            if latent == LatentStart::Residual {
                f.start = start.stats;
            }
        }
        records.push(FitRecord::of(FitRole::Probe, Some(latent), &fitted));
        lanes.push((latent, fitted));
    }
    // The better lane continues (a failed lane never wins); ties go to the residual start.
    let (latent, leader) = lanes
        .into_iter()
        .reduce(|a, b| match (&a.1, &b.1) {
            (Ok(x), Ok(y)) if y.bound > x.bound => b,
            (Err(_), Ok(_)) => b,
            _ => a,
        })
        .expect("two lanes");
    let leader = leader?;
    if !leader.stop.hit_cap() || leader.lbfgs_iterations >= settings.lbfgs.max_iterations {
        return Ok(leader);
    }
    let rest = FitSettings {
        lbfgs: LbfgsSettings {
            max_iterations: settings.lbfgs.max_iterations - leader.lbfgs_iterations,
            ..settings.lbfgs
        },
        ..*settings
    };
    let continued = model
        .fit_from_awaiting(leader.params.clone(), &rest, awaited)
        .await;
    records.push(FitRecord::of(FitRole::Continued, Some(latent), &continued));
    // A continuation that fails or ends lower leaves the probe's fit standing.
    Ok(match continued {
        Ok(c) if c.bound >= leader.bound => c,
        _ => leader,
    })
}

/// F(i | S) as [`family_score`]'s value, with the default settings and M = `inducing`.
pub fn family_evidence(
    data: &DMatrix<f64>,
    child: usize,
    parents: &[usize],
    inducing: usize,
    seed: u64,
) -> Result<f64, FitError> {
    family_score(
        data,
        child,
        parents,
        &FamilyScoreSettings::with_inducing(inducing),
        seed,
        None,
    )
    .map(|s| s.value)
}

#[cfg(test)]
mod tests;
