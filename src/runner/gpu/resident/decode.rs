//! Reading a submission's values back into evaluations, states, held weights and posteriors.

use super::*;

/// A request's [`ResidentEvaluation`] from its read-back values.
pub(super) fn decode(
    request: &ResidentRequest,
    pending: &Pending,
    values: &[f32],
) -> ResidentEvaluation {
    let m = pending.layout.m;
    let shape = StateShape::of(request.z, request.encoder, request.kernel);
    let rows = request.latent.eps.ncols();
    let [gradient_count, _, _, _, parameter_count, ..] =
        readback_words(shape, rows, request.read_current);
    let (gradients, rest) = values.split_at(gradient_count);
    let (kzz_status, rest) = rest.split_at(8);
    let (step_status, rest) = rest.split_at(8);
    let (kl_words, rest) = rest.split_at(6);
    let (parameter_words, state_values) = rest.split_at(parameter_count);
    let state = request
        .read_current
        .then(|| state_from(shape, state_values));
    let k = shape.parameters;
    let third = |n: usize| -> Vec<f64> {
        parameter_words[n * k..(n + 1) * k]
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    let parameters = HeldWeights {
        values: third(0),
        first: third(1),
        second: third(2),
    };
    let df = |words: &[f32], k: usize| f64::from(words[2 * k]) + f64::from(words[2 * k + 1]);
    let misfit = df(gradients, 0);
    let (held_norm, latent_kl) = (df(gradients, 1), df(gradients, 2));
    let latent = &gradients[HEADER_WORDS..];
    let widen = |v: &[f32]| DVector::from_iterator(v.len(), v.iter().map(|&x| f64::from(x)));
    let latent = if request.encoder.is_some() {
        HeldLatent::Encoded { kl: latent_kl }
    } else {
        let (d_mu, d_var) = latent.split_at(rows);
        HeldLatent::Sums {
            d_mu: widen(d_mu),
            d_var: widen(d_var),
        }
    };
    let status = |words: &[f32], policy: JitterPolicy| -> Result<f64, CholeskyError> {
        // `decode_factor` reads the status after an M = 0 factor: the words are the status alone.
        decode_factor(0, words, policy).map(|f| f.jitter)
    };
    let with_size = |e: CholeskyError| match e {
        CholeskyError::NotPositiveDefinite {
            pivot,
            value,
            jitter,
            ..
        } => CholeskyError::NotPositiveDefinite {
            size: m,
            pivot,
            value,
            jitter,
        },
        other => other,
    };
    let (trace, norm, logdet) = (df(kl_words, 0), df(kl_words, 1), df(kl_words, 2));
    ResidentEvaluation {
        misfit,
        held_norm,
        latent,
        jitter: status(kzz_status, request.jitter).map_err(with_size),
        kl_inducing: 0.5 * (trace + norm - m as f64 - logdet),
        stepped: status(step_status, JitterPolicy::exactly(0.0))
            .map(|_| ())
            .map_err(with_size),
        parameters,
        state,
    }
}

/// A slot's state from its words: q(v) (f64 from double-float) then the held block's (float32:
/// [Z row-major | encoder | hyperparameters] for each of p, m, v).
pub(super) fn state_from(shape: StateShape, values: &[f32]) -> ResidentState {
    let StateShape { m, d, encoder, .. } = shape;
    let (q, held) = values.split_at(state_words(m));
    let n = shape.held();
    let block = |k: usize| DMatrix::from_fn(m, d, |i, j| f64::from(held[k * n + i * d + j]));
    let at = shape.parameters_at();
    ResidentState {
        posterior: posterior_from(m, q),
        z: block(0),
        z_first: block(1),
        z_second: block(2),
        encoder: if encoder > 0 {
            held_weights(held, n, m * d..at)
        } else {
            HeldWeights::default()
        },
        parameters: held_weights(held, n, at..n),
    }
}

/// The values in `range` of each third (p, m, v) of a held state with `n` values per third.
pub(super) fn held_weights(held: &[f32], n: usize, range: std::ops::Range<usize>) -> HeldWeights {
    let third = |k: usize| -> Vec<f64> {
        held[k * n + range.start..k * n + range.end]
            .iter()
            .map(|&v| f64::from(v))
            .collect()
    };
    HeldWeights {
        values: third(0),
        first: third(1),
        second: third(2),
    }
}

/// q(v) (f64 from double-float) from a slot's state words.
pub(super) fn posterior_from(m: usize, values: &[f32]) -> InducingPosterior {
    let value = |k: usize| f64::from(values[2 * k]) + f64::from(values[2 * k + 1]);
    let at = state_offsets(m);
    let matrix = |offset: usize| DMatrix::from_fn(m, m, |i, j| value(offset + i * m + j));
    InducingPosterior {
        eta1: DVector::from_fn(m, |i, _| value(at.eta + i)),
        precision: matrix(at.p),
        mean: DVector::from_fn(m, |i, _| value(at.mean + i)),
        cov: matrix(at.s),
    }
}
