//! Adam with the TensorFlow/Keras defaults (MODEL.md §3.6): β₁ = 0.9, β₂ = 0.999, ε = 1e-7.

use serde::{Deserialize, Serialize};
use std::ops::Range;

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

/// One Adam step as a device holding some parameters takes it ([`Adam::held_step`]):
///   m ← β₁m + (1−β₁)g,  v ← β₂v + (1−β₂)g²,  θ ← θ − rate·m/(√v + ε).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeldAdamStep {
    /// α_t = lr·√(1−β₂ᵗ)/(1−β₁ᵗ) of the step.
    pub rate: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub epsilon: f64,
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
        let s = self.settings;
        let alpha = self.rate();
        self.t += 1;
        for k in 0..params.len() {
            let g = grad[k];
            self.m[k] = s.beta1 * self.m[k] + (1.0 - s.beta1) * g;
            self.v[k] = s.beta2 * self.v[k] + (1.0 - s.beta2) * g * g;
            params[k] -= alpha * self.m[k] / (self.v[k].sqrt() + s.epsilon);
        }
    }

    /// One step as [`Adam::step`] on every parameter but those in the `held` ranges (whose step
    /// a device holding them takes with [`Adam::rate`] and the same `t`): the step count still
    /// advances.
    pub fn step_except(&mut self, params: &mut [f64], grad: &[f64], held: &[Range<usize>]) {
        let kept: Vec<(Vec<f64>, Vec<f64>, Vec<f64>)> = held
            .iter()
            .map(|r| {
                (
                    params[r.clone()].to_vec(),
                    self.m[r.clone()].to_vec(),
                    self.v[r.clone()].to_vec(),
                )
            })
            .collect();
        self.step(params, grad);
        for (r, (p, m, v)) in held.iter().zip(kept) {
            params[r.clone()].copy_from_slice(&p);
            self.m[r.clone()].copy_from_slice(&m);
            self.v[r.clone()].copy_from_slice(&v);
        }
    }

    /// The step size α_t = lr·√(1−β₂ᵗ)/(1−β₁ᵗ) of the next step (t = steps + 1).
    pub fn rate(&self) -> f64 {
        let s = self.settings;
        let t = (self.t + 1) as i32;
        s.learning_rate * (1.0 - s.beta2.powi(t)).sqrt() / (1.0 - s.beta1.powi(t))
    }

    /// The next step's constants, for a device that steps some parameters itself.
    pub fn held_step(&self) -> HeldAdamStep {
        HeldAdamStep {
            rate: self.rate(),
            beta1: self.settings.beta1,
            beta2: self.settings.beta2,
            epsilon: self.settings.epsilon,
        }
    }

    /// The first and second moments of the parameters in `range`.
    pub fn moments(&self, range: Range<usize>) -> (&[f64], &[f64]) {
        (&self.m[range.clone()], &self.v[range])
    }

    /// Sets the moments of the parameters in `range` (read from a device that stepped them).
    pub fn set_moments(&mut self, range: Range<usize>, first: &[f64], second: &[f64]) {
        self.m[range.clone()].copy_from_slice(first);
        self.v[range].copy_from_slice(second);
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
    fn a_held_range_is_left_to_its_holder_with_the_same_rate() {
        let mut all = Adam::new(4, AdamSettings::default());
        let mut held = all.clone();
        let (mut p, mut q) = (vec![1.0, 2.0, 3.0, 4.0], vec![1.0, 2.0, 3.0, 4.0]);
        let grad = [0.5, -1.0, 2.0, 0.25];
        all.step(&mut p, &grad);
        let rate = held.rate();
        // Two held ranges (Z and the encoder), apart.
        held.step_except(&mut q, &grad, &[1..2, 3..4]);
        assert_eq!((q[0], q[1], q[2], q[3]), (p[0], 2.0, p[2], 4.0));
        assert_eq!(held.steps(), 1);
        assert_eq!(held.moments(1..2), (&[0.0][..], &[0.0][..]));
        assert_eq!(held.moments(3..4), (&[0.0][..], &[0.0][..]));
        // The holder's step with the rate given before the step equals the plain step.
        // g = −1: m = (1 − β₁)g, v = (1 − β₂)g².
        let (m, v): (f64, f64) = (-(1.0 - 0.9), 1.0 - 0.999);
        let stepped = 2.0 - rate * m / (f64::sqrt(v) + 1e-7);
        assert!((stepped - p[1]).abs() < 1e-15, "{stepped} vs {}", p[1]);
        held.set_moments(1..2, &[m], &[v]);
        assert_eq!(held.moments(1..2), all.moments(1..2));
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
