//! Uncollapsed evaluations whose q(v), Z, q(w)'s encoder, kernel hyperparameters and φ² the
//! device holds (issue 34, items 1–2): the host draws each minibatch (its row indices and the
//! draws' noise; q(w)'s moments too for free per-row latents) and gives the graph prior's and the
//! penalty's gradient of the step; the device holds the data and computes the rest of the
//! evaluation — the hyperparameters as the passes read them, the minibatch's rows, the
//! encoder's forward pass, the draws, K_ZZ's factor, the predictions, the M × M adjoint, q(v)'s
//! natural step, the gradients finished, the encoder's backward pass and the Adam step of Z, the
//! encoder, the hyperparameters and φ² — for the whole batch in one submission
//! ([`Gpu::submit_resident`]); the host finishes the bound's scalars and takes the stepped
//! hyperparameters (O(K) values back, O(K + b) with free latents) for the restart's decisions.
//! q(v), Z and the encoder never cross to the host except when a variable's copy is refreshed
//! (with an evaluation, at most every [`SYNC_SECONDS`](crate::runner::gpu::SYNC_SECONDS) and
//! within [`SYNC_BUDGET_BYTES`](crate::runner::gpu::SYNC_BUDGET_BYTES) per evaluation; or for a
//! final bound), and a step the restart does not apply (a fault, a phase's end) is never
//! committed: the device keeps each slot's current and stepped states and the variable's
//! natural-step count says which it is at ([`Gpu::hold_state`]); hyperparameters the host
//! changed itself (an edge re-initialised or switched off) go to the device with the next
//! request.

use nalgebra::DMatrix;

use super::Batch;
use crate::discovery::cgp::{held_evaluation, Conditional, EvaluationError, HeldStep};
use crate::discovery::jobs::{Job, Outcome};
use crate::gp::device::DeviceError;
use crate::gp::gp_cde::{GpCdeModel, HeldWeights, Prepared};
use crate::gp::svgp::{finish_held, HeldPredictions, FLOAT32_RELATIVE_JITTER};
use crate::runner::gpu::{
    Gpu, GpuError, HeldSlot, ParameterStep, ResidentEvaluation, ResidentRequest,
};

/// One evaluation's host half, before the device: its minibatch and the draws' noise ε (the
/// device forms q(w)'s moments with the encoder, and w = μ + √Σ ε), the graph gradient of its
/// step, and the host's hyperparameters (sent when the host changed them).
struct Begun<'j> {
    variable: &'j GpCdeModel,
    prepared: Prepared,
    extra: Vec<f64>,
    parameters: HeldWeights,
}

/// The held evaluations of the batch's jobs at `indices`, in that order, in one submission; the
/// batch's `awaiting` is called before the device is awaited, and `meanwhile` runs on the host
/// while it works.
/// `Err` when the device failed (the caller computes them again on the CPU).
pub(super) async fn held_evaluations(
    batch: Batch<'_, '_>,
    indices: &[usize],
    meanwhile: impl FnOnce(),
) -> Result<Vec<Outcome>, GpuError> {
    batch.gpu.begin_held_batch();
    // The minibatches are gathered from the data on the device (uploaded once).
    let data_held = batch.gpu.hold_data(batch.data)?;
    let picked: Vec<&Job<'_>> = indices.iter().map(|&k| &batch.jobs[k]).collect();
    let begun: Vec<Option<Begun>> = batch.host.map(&picked, |job| begin(batch.data, job));
    // Each variable's slot, in order (a key met twice in one batch, which no driver sends, is
    // given a slot of its own from the variable's copy).
    let mut seen = std::collections::HashSet::new();
    let slots: Vec<Option<Result<HeldSlot, EvaluationError>>> = begun
        .iter()
        .map(|b| {
            let b = b.as_ref()?;
            let key = b
                .variable
                .holding()
                .map(|h| h.key)
                .filter(|k| seen.insert(*k));
            let version = b.variable.natural_steps();
            let synced = b.variable.holding().map_or(version, |h| h.synced_steps);
            let slot = batch
                .gpu
                .hold_state(
                    key,
                    version,
                    b.variable.resident_view(),
                    synced,
                    b.variable.parameter_edits(),
                )
                .map_err(EvaluationError::from);
            if let Ok(s) = &slot {
                seen.insert(s.key);
            }
            Some(slot)
        })
        .collect();
    let requests: Vec<ResidentRequest> = begun
        .iter()
        .zip(&slots)
        .filter_map(|(b, slot)| {
            let (b, slot) = (b.as_ref()?, slot.as_ref()?.as_ref().ok()?);
            Some(request(b, slot, data_held))
        })
        .collect();
    let submitted = if requests.is_empty() {
        None
    } else {
        Some(batch.gpu.submit_resident(&requests)?)
    };
    meanwhile();
    let mut results = match submitted {
        Some(submitted) => {
            (batch.awaiting)();
            submitted.finish(batch.gpu, &requests).await?
        }
        None => Vec::new(),
    }
    .into_iter();
    drop(requests);
    let mut outcomes = Vec::with_capacity(indices.len());
    for (b, slot) in begun.into_iter().zip(slots) {
        let outcome = match (b, slot) {
            (Some(b), Some(Ok(slot))) => match results.next() {
                Some(result) => finish(batch.gpu, b, slot, result),
                None => Err(EvaluationError::Device(DeviceError::Unanswered)),
            },
            (Some(_), Some(Err(e))) => Err(e),
            _ => Err(EvaluationError::Mismatch(
                "only uncollapsed evaluations are held on the GPU".into(),
            )),
        };
        outcomes.push(Outcome::Evaluation(outcome));
    }
    Ok(outcomes)
}

/// The host half of evaluation `job`: its minibatch (rows, encoder, the draws' noise).
fn begin<'j>(data: &DMatrix<f64>, job: &&'j Job<'_>) -> Option<Begun<'j>> {
    let Job::Evaluate { variable, seed, .. } = job else {
        return None;
    };
    let variable: &'j Conditional = variable;
    let begun = variable.begin_held(data, *seed)?;
    begun.variable.input(&begun.prepared).latent?;
    Some(Begun {
        parameters: begun.variable.held_parameters(),
        variable: begun.variable,
        prepared: begun.prepared,
        extra: begun.extra,
    })
}

/// The device request of a begun evaluation in `slot` (its minibatch gathered from the data the
/// device holds when `data_held`).
fn request<'a>(b: &'a Begun<'_>, slot: &HeldSlot, data_held: bool) -> ResidentRequest<'a> {
    let input = b.variable.input(&b.prepared);
    let latent = input
        .latent
        .expect("an uncollapsed evaluation has a latent input");
    let (samples, rows) = latent.eps.shape();
    ResidentRequest {
        slot: slot.slot,
        kernel: b.variable.kernel(),
        z: b.variable.z(),
        encoder: b
            .variable
            .encoder()
            .filter(|_| b.prepared.latent_on_device()),
        x: input.x,
        y: input.y,
        rows: data_held.then(|| b.prepared.rows()),
        latent,
        noise: input.noise,
        c: input.total_rows as f64 / (rows * samples) as f64,
        jitter: b.variable.jitter_policy(),
        relative_jitter: FLOAT32_RELATIVE_JITTER,
        gamma: b.variable.next_step_size(),
        adam: b.variable.held_adam_step(),
        parameters: ParameterStep {
            extra: &b.extra,
            noise_floor: b.variable.noise_floor(),
            upload: slot.upload_parameters.then_some(&b.parameters),
        },
        before: slot.before,
        read_current: slot.read_current,
    }
}

/// The evaluation from the device's `result`, with the slot's waiting step recorded.
fn finish(
    gpu: &Gpu,
    b: Begun<'_>,
    slot: HeldSlot,
    result: ResidentEvaluation,
) -> Result<crate::discovery::cgp::Evaluation, EvaluationError> {
    let version = b.variable.natural_steps();
    let jitter = match result.jitter {
        Ok(j) => j,
        Err(e) => {
            gpu.held_stepped(slot.key, version, false);
            return Err(e.into());
        }
    };
    gpu.held_stepped(slot.key, version, result.stepped.is_ok());
    let output = finish_held(
        &b.variable.input(&b.prepared),
        HeldPredictions {
            misfit: result.misfit,
            held_norm: result.held_norm,
            latent: result.latent,
            jitter,
            kl_inducing: result.kl_inducing,
        },
    );
    held_evaluation(
        b.prepared,
        output,
        HeldStep {
            key: slot.key,
            stepped: result.stepped,
            parameters: result.parameters,
            synced: result.state,
        },
    )
}
