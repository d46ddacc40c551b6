//! Randomly initialised ReLU multilayer perceptrons, the mechanism f_i of the paper's 20/50-variable
//! experiments: in → 128 → ReLU → 128 → ReLU → 1 (the choice of MODEL.md §8), initialised as PyTorch's
//! `nn.Linear` does by default.

use nalgebra::{DMatrix, DVector};
use rand::Rng;

/// Width of both hidden layers.
pub(crate) const HIDDEN: usize = 128;

/// One affine layer y = W x + b, with W stored out × in as in PyTorch.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Dense {
    pub weight: DMatrix<f64>,
    pub bias: DVector<f64>,
}

impl Dense {
    /// PyTorch's default `nn.Linear` initialisation: every weight and bias ~ U(−1/√fan_in,
    /// 1/√fan_in). (Kaiming-uniform with a = √5 reduces to this bound for the weights.)
    fn pytorch_default<R: Rng + ?Sized>(fan_in: usize, fan_out: usize, rng: &mut R) -> Self {
        let bound = 1.0 / (fan_in as f64).sqrt();
        let weight = DMatrix::from_fn(fan_out, fan_in, |_, _| rng.random_range(-bound..bound));
        let bias = DVector::from_fn(fan_out, |_, _| rng.random_range(-bound..bound));
        Self { weight, bias }
    }
}

/// A ReLU network: affine layers with a ReLU after every layer except the last.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Mlp {
    layers: Vec<Dense>,
}

impl Mlp {
    /// A freshly initialised network with layer widths `sizes` (input first, output last), each
    /// layer initialised by [`Dense::pytorch_default`]. Needs at least two sizes.
    pub fn pytorch_default<R: Rng + ?Sized>(sizes: &[usize], rng: &mut R) -> Self {
        assert!(sizes.len() >= 2, "an MLP needs an input and an output size");
        let layers = sizes
            .windows(2)
            .map(|w| Dense::pytorch_default(w[0], w[1], rng))
            .collect();
        Self { layers }
    }

    /// The paper's mechanism network for `inputs` inputs: inputs → 128 → ReLU → 128 → ReLU → 1.
    pub fn mechanism<R: Rng + ?Sized>(inputs: usize, rng: &mut R) -> Self {
        Self::pytorch_default(&[inputs, HIDDEN, HIDDEN, 1], rng)
    }

    /// The layers, input side first (for tests of the initialisation).
    #[cfg(test)]
    pub fn layers(&self) -> &[Dense] {
        &self.layers
    }

    /// Applies the network to every row of `input` (N × inputs); returns the N × outputs matrix.
    pub fn forward(&self, input: &DMatrix<f64>) -> DMatrix<f64> {
        let last = self.layers.len() - 1;
        let mut h = input.clone();
        for (index, layer) in self.layers.iter().enumerate() {
            // Rows are samples, so the layer acts as H Wᵀ + 1 bᵀ.
            h = &h * layer.weight.transpose();
            for (mut column, b) in h.column_iter_mut().zip(layer.bias.iter()) {
                for v in column.iter_mut() {
                    *v += b;
                    if index < last {
                        *v = v.max(0.0);
                    }
                }
            }
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn mechanism_network_has_the_paper_shape() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mlp = Mlp::mechanism(4, &mut rng);
        let shapes: Vec<(usize, usize, usize)> = mlp
            .layers()
            .iter()
            .map(|l| (l.weight.nrows(), l.weight.ncols(), l.bias.len()))
            .collect();
        assert_eq!(shapes, vec![(128, 4, 128), (128, 128, 128), (1, 128, 1)]);
    }

    #[test]
    fn weights_and_biases_respect_and_fill_the_pytorch_bound() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mlp = Mlp::mechanism(3, &mut rng);
        for layer in mlp.layers() {
            // fan_in is the number of the layer's inputs, the columns of W (out × in).
            let bound = 1.0 / (layer.weight.ncols() as f64).sqrt();
            let params: Vec<f64> = layer
                .weight
                .iter()
                .chain(layer.bias.iter())
                .copied()
                .collect();
            assert!(params.iter().all(|w| w.abs() <= bound), "bound {bound}");
            // U(−b, b) has variance b²/3; with thousands of draws the sample agrees within a few
            // percent, which a narrower or wider distribution would not.
            if params.len() > 1000 {
                let n = params.len() as f64;
                let mean = params.iter().sum::<f64>() / n;
                let var = params.iter().map(|w| w * w).sum::<f64>() / n;
                assert!(mean.abs() < 0.05 * bound);
                assert!((var / (bound * bound / 3.0) - 1.0).abs() < 0.06);
                let max = params.iter().fold(0.0f64, |m, w| m.max(w.abs()));
                assert!(max > 0.99 * bound);
            }
        }
    }

    #[test]
    fn forward_matches_a_hand_computed_network() {
        // 2 → 2 → 1: h = relu(W1 x + b1), y = W2 h + b2.
        let mlp = Mlp {
            layers: vec![
                Dense {
                    weight: DMatrix::from_row_slice(2, 2, &[1.0, -1.0, 0.5, 2.0]),
                    bias: DVector::from_vec(vec![0.0, -1.0]),
                },
                Dense {
                    weight: DMatrix::from_row_slice(1, 2, &[3.0, -2.0]),
                    bias: DVector::from_vec(vec![0.25]),
                },
            ],
        };
        // x = (1, 2): W1 x + b1 = (−1, 3.5) → relu (0, 3.5) → y = −7 + 0.25.
        // x = (2, 0): W1 x + b1 = (2, 0) → y = 6 + 0.25.
        let x = DMatrix::from_row_slice(2, 2, &[1.0, 2.0, 2.0, 0.0]);
        let y = mlp.forward(&x);
        assert_eq!(y.shape(), (2, 1));
        assert_eq!(y[(0, 0)], -6.75);
        assert_eq!(y[(1, 0)], 6.25);
    }
}
