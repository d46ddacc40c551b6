//! q(w): the posterior over each row's latent input, either amortised by an encoder network (the
//! paper's CGP-CDE) or held as free per-row parameters (the reference bivariate code), MODEL.md §2.6.

use super::transform::{softplus, softplus_derivative};
use nalgebra::{DMatrix, DVector};
use rand::Rng;
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

/// Floor added to every q(w) variance: softplus(raw) + 1e-6 (MODEL.md §2.3 [choice]), which keeps
/// log Σ in the KL finite.
pub const LATENT_VARIANCE_FLOOR: f64 = 1e-6;

/// One affine layer y = W x + b (W is out × in).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dense {
    pub w: DMatrix<f64>,
    pub b: DVector<f64>,
}

/// An MLP from a data row (D inputs) to (μ, raw variance): `depth` hidden Linear+ReLU layers of
/// `width` units, then a linear head with 2 outputs; Σ = softplus(raw) + 1e-6.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Encoder {
    pub layers: Vec<Dense>,
}

/// Activations kept from a forward pass for the backward pass.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct EncoderTape {
    /// Input of each layer (the batch rows for layer 0), batch × fan-in.
    inputs: Vec<DMatrix<f64>>,
    /// The head's raw variance outputs.
    raw: DVector<f64>,
}

impl Encoder {
    /// The paper's initialisation: weights from a normal with standard deviation √(2/128)
    /// truncated at ±2 standard deviations (as TensorFlow's truncated normal), biases 0.
    pub fn new(inputs: usize, width: usize, depth: usize, rng: &mut impl Rng) -> Self {
        let std = (2.0f64 / 128.0).sqrt();
        let normal = Normal::new(0.0, std).expect("a positive standard deviation");
        let mut draw = || loop {
            let v: f64 = normal.sample(rng);
            if v.abs() <= 2.0 * std {
                return v;
            }
        };
        let mut layers = Vec::with_capacity(depth + 1);
        let mut fan_in = inputs;
        for out in std::iter::repeat_n(width, depth).chain(std::iter::once(2)) {
            layers.push(Dense {
                w: DMatrix::from_fn(out, fan_in, |_, _| draw()),
                b: DVector::zeros(out),
            });
            fan_in = out;
        }
        Self { layers }
    }

    /// Number of trainable numbers.
    pub fn param_count(&self) -> usize {
        self.layers.iter().map(|l| l.w.len() + l.b.len()).sum()
    }

    /// Parameters in a fixed order: for each layer, W (column-major) then b.
    pub fn params_to_vec(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.param_count());
        for l in &self.layers {
            out.extend(l.w.iter());
            out.extend(l.b.iter());
        }
        out
    }

    /// Sets the parameters from the order of [`Encoder::params_to_vec`].
    pub fn set_params_from_slice(&mut self, src: &[f64]) {
        assert_eq!(src.len(), self.param_count(), "encoder parameter count");
        let mut k = 0;
        for l in &mut self.layers {
            for v in l.w.iter_mut().chain(l.b.iter_mut()) {
                *v = src[k];
                k += 1;
            }
        }
    }

    /// q(w_n) = N(μ_n, Σ_n) for each row of `x` (batch × D), with the tape for [`Self::backward`].
    pub fn forward(&self, x: &DMatrix<f64>) -> (DVector<f64>, DVector<f64>, EncoderTape) {
        let mut inputs = Vec::with_capacity(self.layers.len());
        let mut h = x.clone();
        let last = self.layers.len() - 1;
        for (k, layer) in self.layers.iter().enumerate() {
            let mut z = &h * layer.w.transpose();
            for mut row in z.row_iter_mut() {
                row += layer.b.transpose();
            }
            if k < last {
                z.apply(|v| *v = v.max(0.0));
            }
            inputs.push(std::mem::replace(&mut h, z));
        }
        let mu = h.column(0).into_owned();
        let raw = h.column(1).into_owned();
        let var = raw.map(|r| softplus(r) + LATENT_VARIANCE_FLOOR);
        (mu, var, EncoderTape { inputs, raw })
    }

    /// Gradient of a loss with respect to all parameters (order of [`Self::params_to_vec`]) given
    /// ∂loss/∂μ and ∂loss/∂Σ per row. ReLU's derivative at 0 is taken as 0.
    pub fn backward(
        &self,
        tape: &EncoderTape,
        d_mu: &DVector<f64>,
        d_var: &DVector<f64>,
    ) -> Vec<f64> {
        let batch = d_mu.len();
        // ∂/∂ head outputs: μ directly, raw through softplus.
        let mut delta = DMatrix::from_fn(batch, 2, |n, c| {
            if c == 0 {
                d_mu[n]
            } else {
                d_var[n] * softplus_derivative(tape.raw[n])
            }
        });
        let mut grads: Vec<(DMatrix<f64>, DVector<f64>)> = Vec::with_capacity(self.layers.len());
        for (k, layer) in self.layers.iter().enumerate().rev() {
            let input = &tape.inputs[k];
            let dw = delta.transpose() * input;
            let db = DVector::from_iterator(delta.ncols(), delta.column_iter().map(|c| c.sum()));
            grads.push((dw, db));
            if k > 0 {
                let mut d_input = &delta * &layer.w;
                // The input of layer k is the ReLU output of layer k−1: gate by its positivity.
                d_input.zip_apply(input, |d, a| {
                    if a <= 0.0 {
                        *d = 0.0
                    }
                });
                delta = d_input;
            }
        }
        grads.reverse();
        let mut out = Vec::with_capacity(self.param_count());
        for (dw, db) in grads {
            out.extend(dw.iter());
            out.extend(db.iter());
        }
        out
    }
}

/// Free per-row q(w_n) = N(μ_n, softplus(ρ_n) + 1e-6), as [B]'s GPLVM variants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FreeLatents {
    pub mu: Vec<f64>,
    pub raw_var: Vec<f64>,
}

impl FreeLatents {
    /// [B]'s initialisation: μ_n = scale·y_n (0.01 for a conditional, 0.1 for a marginal model),
    /// variance ~ U(0, 0.1) (stored through the inverse softplus; draws below the floor are lifted).
    pub fn new(y: &[f64], scale: f64, rng: &mut impl Rng) -> Self {
        let raw_var = y
            .iter()
            .map(|_| {
                let v: f64 = rng.random_range(0.0..0.1);
                super::transform::softplus_inverse(
                    v.max(2.0 * LATENT_VARIANCE_FLOOR) - LATENT_VARIANCE_FLOOR,
                )
            })
            .collect();
        Self {
            mu: y.iter().map(|v| scale * v).collect(),
            raw_var,
        }
    }

    /// μ and Σ of the given rows.
    pub fn posterior(&self, rows: &[usize]) -> (DVector<f64>, DVector<f64>) {
        let mu = DVector::from_iterator(rows.len(), rows.iter().map(|&n| self.mu[n]));
        let var = DVector::from_iterator(
            rows.len(),
            rows.iter()
                .map(|&n| softplus(self.raw_var[n]) + LATENT_VARIANCE_FLOOR),
        );
        (mu, var)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn shapes_and_initialisation_follow_the_paper() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let enc = Encoder::new(4, 128, 5, &mut rng);
        assert_eq!(enc.layers.len(), 6);
        assert_eq!(enc.layers[0].w.shape(), (128, 4));
        assert_eq!(enc.layers[5].w.shape(), (2, 128));
        let bound = 2.0 * (2.0f64 / 128.0).sqrt();
        let weights: Vec<f64> = enc
            .layers
            .iter()
            .flat_map(|l| l.w.iter().copied())
            .collect();
        assert!(weights.iter().all(|w| w.abs() <= bound));
        assert!(enc.layers.iter().all(|l| l.b.iter().all(|&b| b == 0.0)));
        // A N(0, σ²) truncated at ±2σ has variance ≈ 0.774σ².
        let var = weights.iter().map(|w| w * w).sum::<f64>() / weights.len() as f64;
        let expected = 0.774 * 2.0 / 128.0;
        assert!((var / expected - 1.0).abs() < 0.03, "{var} vs {expected}");
        assert_eq!(enc.param_count(), enc.params_to_vec().len());
    }

    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut enc = Encoder::new(3, 7, 3, &mut rng);
        // Non-zero biases so ReLU kinks are away from the evaluation point.
        let mut p = enc.params_to_vec();
        for v in &mut p {
            *v += rng.random_range(-0.2..0.2);
        }
        enc.set_params_from_slice(&p);
        let x = DMatrix::from_fn(5, 3, |_, _| rng.random_range(-2.0..2.0));
        let a = DVector::from_fn(5, |_, _| rng.random_range(-1.0..1.0));
        let c = DVector::from_fn(5, |_, _| rng.random_range(-1.0..1.0));
        // loss = Σ a∘μ + Σ c∘Σ² (non-linear in Σ to exercise the chain rule)
        let loss = |e: &Encoder| {
            let (mu, var, _) = e.forward(&x);
            a.dot(&mu) + c.dot(&var.component_mul(&var))
        };
        let (_, var, tape) = enc.forward(&x);
        let d_var = (2.0 * c.component_mul(&var)).clone_owned();
        let grad = enc.backward(&tape, &a, &d_var);
        let h = 1e-6;
        for k in 0..p.len() {
            let mut plus = p.clone();
            plus[k] += h;
            let mut minus = p.clone();
            minus[k] -= h;
            let mut e = enc.clone();
            e.set_params_from_slice(&plus);
            let fp = loss(&e);
            e.set_params_from_slice(&minus);
            let fm = loss(&e);
            let fd = (fp - fm) / (2.0 * h);
            let err = (fd - grad[k]).abs() / fd.abs().max(grad[k].abs()).max(1.0);
            assert!(err < 1e-6, "param {k}: fd {fd} vs {}", grad[k]);
        }
    }

    #[test]
    fn free_latents_initialise_as_the_reference() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let y = [1.0, -2.0, 0.5];
        let q = FreeLatents::new(&y, 0.1, &mut rng);
        let (mu, var) = q.posterior(&[2, 0]);
        assert_eq!(mu.as_slice(), &[0.05, 0.1]);
        assert!(var
            .iter()
            .all(|&v| v > LATENT_VARIANCE_FLOOR && v < 0.1 + 1e-12));
    }
}
