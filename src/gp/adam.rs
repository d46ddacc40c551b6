//! Adam with the TensorFlow/Keras defaults (MODEL.md §3.6): β₁ = 0.9, β₂ = 0.999, ε = 1e-7.

use serde::{Deserialize, Serialize};

/// Adam's hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamSettings {
    pub learning_rate: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
}

impl Default for AdamSettings {
    /// lr 0.05 as the paper uses for the GP hyperparameters; TF constants otherwise.
    fn default() -> Self {
        Self {
            learning_rate: 0.05,
            beta1: 0.9,
            beta2: 0.999,
            epsilon: 1e-7,
        }
    }
}

/// Adam state for a flat parameter vector, minimising a loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adam {
    pub settings: AdamSettings,
    m: Vec<f64>,
    v: Vec<f64>,
    t: u64,
}

impl Adam {
    /// Fresh state (zero moments) for `len` parameters.
    pub fn new(len: usize, settings: AdamSettings) -> Self {
        Self {
            settings,
            m: vec![0.0; len],
            v: vec![0.0; len],
            t: 0,
        }
    }

    /// Steps taken so far.
    pub fn steps(&self) -> u64 {
        self.t
    }

    /// One step on `params` against the loss gradient `grad`:
    ///   m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,
    ///   α = lr·√(1−β₂ᵗ)/(1−β₁ᵗ),  θ ← θ − α·m/(√v + ε)   (Keras form: ε outside the bias correction).
    pub fn step(&mut self, params: &mut [f64], grad: &[f64]) {
        assert_eq!(
            params.len(),
            self.m.len(),
            "Adam state and parameters differ in length"
        );
        assert_eq!(
            grad.len(),
            self.m.len(),
            "gradient and parameters differ in length"
        );
        self.t += 1;
        let s = self.settings;
        let t = self.t as i32;
        let alpha = s.learning_rate * (1.0 - s.beta2.powi(t)).sqrt() / (1.0 - s.beta1.powi(t));
        for k in 0..params.len() {
            let g = grad[k];
            self.m[k] = s.beta1 * self.m[k] + (1.0 - s.beta1) * g;
            self.v[k] = s.beta2 * self.v[k] + (1.0 - s.beta2) * g * g;
            params[k] -= alpha * self.m[k] / (self.v[k].sqrt() + s.epsilon);
        }
    }

    /// Zeroes the moments of the given parameters (used when parameters are re-initialised).
    pub fn reset(&mut self, indices: impl IntoIterator<Item = usize>) {
        for k in indices {
            self.m[k] = 0.0;
            self.v[k] = 0.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_step_moves_each_parameter_by_about_the_learning_rate() {
        // With bias correction, step 1 moves θ by exactly lr·sign(g)/(1 + ε/(|g|·√(1−β₂))).
        let mut adam = Adam::new(3, AdamSettings::default());
        let mut p = vec![1.0, -2.0, 0.5];
        adam.step(&mut p, &[3.0, -0.001, 0.0]);
        let moved = |g: f64| 0.05 / (1.0 + 1e-7 / (g * (1.0f64 - 0.999).sqrt()));
        assert!((p[0] - (1.0 - moved(3.0))).abs() < 1e-12);
        assert!((p[1] - (-2.0 + moved(0.001))).abs() < 1e-12);
        assert_eq!(p[2], 0.5);
    }

    #[test]
    fn matches_a_hand_computed_second_step() {
        let s = AdamSettings::default();
        let mut adam = Adam::new(1, s);
        let mut p = vec![0.0];
        adam.step(&mut p, &[1.0]);
        adam.step(&mut p, &[2.0]);
        // m₂ = 0.9·0.1 + 0.1·2 = 0.29; v₂ = 0.999·0.001 + 0.001·4 = 0.004999;
        // α₂ = 0.05·√(1−0.999²)/(1−0.9²); step 1 moved exactly −α₁·0.1/(√0.001 + ε).
        let a1 = 0.05 * (1.0f64 - 0.999).sqrt() / (1.0 - 0.9);
        let a2 = 0.05 * (1.0f64 - 0.999 * 0.999).sqrt() / (1.0 - 0.81);
        let expected =
            -a1 * 0.1 / (0.001f64.sqrt() + 1e-7) - a2 * 0.29 / (0.004999f64.sqrt() + 1e-7);
        assert!((p[0] - expected).abs() < 1e-14, "{} vs {expected}", p[0]);
    }

    #[test]
    fn minimises_a_quadratic_and_reset_clears_moments() {
        let mut adam = Adam::new(
            2,
            AdamSettings {
                learning_rate: 0.1,
                ..AdamSettings::default()
            },
        );
        let mut p = vec![3.0, -4.0];
        for _ in 0..2000 {
            let g = [2.0 * (p[0] - 1.0), 20.0 * (p[1] + 0.5)];
            adam.step(&mut p, &g);
        }
        assert!(
            (p[0] - 1.0).abs() < 1e-3 && (p[1] + 0.5).abs() < 1e-3,
            "{p:?}"
        );
        adam.reset([1]);
        assert_eq!((adam.m[1], adam.v[1]), (0.0, 0.0));
        assert_ne!(adam.v[0], 0.0);
    }
}
