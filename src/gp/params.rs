//! One parameter store per model, in the manner of GPflow's `Parameter` with its transform.
//!
//! A model declares its parameters once, as named blocks of one flat vector, each block with the
//! transform from the unconstrained number an optimiser steps (raw) to the value the model uses:
//!
//! ```text
//! Identity:          value = raw
//! Positive(floor):   value = softplus(raw) + floor,   raw = softplus⁻¹(value − floor)
//! ```
//!
//! The store then gives pack (values → raw), unpack (raw → values), the chain rule
//! (∂f/∂raw_k = ∂f/∂value_k · dvalue_k/draw_k) and the entries that belong to model input j (a
//! block declared per input holds one entry per input, e.g. an ARD precision), so adding a
//! parameter is one more block and nothing else counts offsets.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::transform::{softplus, softplus_derivative, softplus_inverse};

/// How a block's raw numbers map to its values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Transform {
    /// value = raw (inducing inputs, means, network weights).
    Identity,
    /// value = softplus(raw) + floor (variances, precisions, the noise).
    Positive { floor: f64 },
}

impl Transform {
    /// A positive value with no floor.
    pub const POSITIVE: Transform = Transform::Positive { floor: 0.0 };

    /// The value of `raw`.
    pub fn value(self, raw: f64) -> f64 {
        match self {
            Transform::Identity => raw,
            Transform::Positive { floor } => softplus(raw) + floor,
        }
    }

    /// The raw number whose value is `value` (for `Positive`, `value` must exceed the floor).
    pub fn raw(self, value: f64) -> f64 {
        match self {
            Transform::Identity => value,
            Transform::Positive { floor } => softplus_inverse(value - floor),
        }
    }

    /// dvalue/draw at `raw`.
    pub fn derivative(self, raw: f64) -> f64 {
        match self {
            Transform::Identity => 1.0,
            Transform::Positive { .. } => softplus_derivative(raw),
        }
    }
}

/// A contiguous run of a model's flat parameter vector with one transform.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Block {
    pub name: String,
    pub offset: usize,
    pub len: usize,
    pub transform: Transform,
    /// Entry j belongs to model input j (the block has one entry per input).
    pub per_input: bool,
}

impl Block {
    /// The block's indices in the flat vector.
    pub fn range(&self) -> Range<usize> {
        self.offset..self.offset + self.len
    }
}

/// The declared blocks of one model, in flat order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ParamStore {
    blocks: Vec<Block>,
    len: usize,
}

impl ParamStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a block of `len` entries called `name`.
    pub fn add(&mut self, name: impl Into<String>, len: usize, transform: Transform) {
        self.push(name.into(), len, transform, false);
    }

    /// Appends a block with one entry per model input (`inputs` of them): entry j is input j's.
    pub fn add_per_input(&mut self, name: impl Into<String>, inputs: usize, transform: Transform) {
        self.push(name.into(), inputs, transform, true);
    }

    fn push(&mut self, name: String, len: usize, transform: Transform, per_input: bool) {
        debug_assert!(
            self.block(&name).is_none(),
            "parameter block {name} declared twice"
        );
        self.blocks.push(Block {
            name,
            offset: self.len,
            len,
            transform,
            per_input,
        });
        self.len += len;
    }

    /// The number of flat entries.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn blocks(&self) -> &[Block] {
        &self.blocks
    }

    /// The block called `name`.
    pub fn block(&self, name: &str) -> Option<&Block> {
        self.blocks.iter().find(|b| b.name == name)
    }

    /// The indices of the block called `name`.
    ///
    /// Panics if there is none: block names are the model's own declarations, not user input.
    pub fn range(&self, name: &str) -> Range<usize> {
        self.block(name)
            .unwrap_or_else(|| panic!("no parameter block {name}"))
            .range()
    }

    /// The indices of every block whose name starts with `prefix` (declared one after another,
    /// as a kernel's blocks are), or an empty range when there is none.
    pub fn span(&self, prefix: &str) -> Range<usize> {
        let mut matching = self.blocks.iter().filter(|b| b.name.starts_with(prefix));
        let Some(first) = matching.next() else {
            return 0..0;
        };
        let end = matching
            .next_back()
            .map_or(first.range().end, |b| b.range().end);
        debug_assert_eq!(
            self.blocks
                .iter()
                .filter(|b| b.name.starts_with(prefix))
                .map(|b| b.len)
                .sum::<usize>(),
            end - first.offset,
            "the blocks named {prefix}… are not contiguous"
        );
        first.offset..end
    }

    /// Each entry's block transform, in flat order.
    fn transforms(&self) -> impl Iterator<Item = Transform> + '_ {
        self.blocks
            .iter()
            .flat_map(|b| std::iter::repeat_n(b.transform, b.len))
    }

    /// raw_k = T_k⁻¹(value_k) for every entry. Panics if `values` is not [`Self::len`] long.
    pub fn pack(&self, values: &[f64]) -> Vec<f64> {
        assert_eq!(values.len(), self.len, "flat parameter length");
        self.transforms()
            .zip(values)
            .map(|(t, &v)| t.raw(v))
            .collect()
    }

    /// value_k = T_k(raw_k) for every entry. Panics if `raw` is not [`Self::len`] long.
    pub fn unpack(&self, raw: &[f64]) -> Vec<f64> {
        assert_eq!(raw.len(), self.len, "flat parameter length");
        self.transforms()
            .zip(raw)
            .map(|(t, &r)| t.value(r))
            .collect()
    }

    /// The values of the block called `name`.
    pub fn unpack_block(&self, name: &str, raw: &[f64]) -> Vec<f64> {
        let block = self
            .block(name)
            .unwrap_or_else(|| panic!("no parameter block {name}"));
        raw[block.range()]
            .iter()
            .map(|&r| block.transform.value(r))
            .collect()
    }

    /// The values of the blocks whose names start with `prefix` ([`Self::span`]).
    pub fn unpack_block_span(&self, prefix: &str, raw: &[f64]) -> Vec<f64> {
        self.span(prefix)
            .map(|k| self.transform_at(k).value(raw[k]))
            .collect()
    }

    /// The chain rule: ∂f/∂raw_k = ∂f/∂value_k · T_k'(raw_k), for every entry.
    pub fn chain(&self, raw: &[f64], value_gradient: &[f64]) -> Vec<f64> {
        assert_eq!(raw.len(), self.len, "flat parameter length");
        assert_eq!(value_gradient.len(), self.len, "flat gradient length");
        self.transforms()
            .zip(raw.iter().zip(value_gradient))
            .map(|(t, (&r, &g))| g * t.derivative(r))
            .collect()
    }

    /// The transform of flat entry `k`.
    pub fn transform_at(&self, k: usize) -> Transform {
        self.blocks
            .iter()
            .find(|b| b.range().contains(&k))
            .unwrap_or_else(|| panic!("flat index {k} is past the {} parameters", self.len))
            .transform
    }

    /// The flat indices of input j's entry in every per-input block, in block order: for a kernel
    /// these are the hyperparameters that switch input j on.
    pub fn input_indices(&self, j: usize) -> Vec<usize> {
        self.blocks
            .iter()
            .filter(|b| b.per_input && j < b.len)
            .map(|b| b.offset + j)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> ParamStore {
        let mut s = ParamStore::new();
        s.add_per_input("linear", 3, Transform::POSITIVE);
        s.add("variance", 1, Transform::POSITIVE);
        s.add_per_input("precision", 3, Transform::POSITIVE);
        s.add("noise", 1, Transform::Positive { floor: 1e-6 });
        s.add("z", 4, Transform::Identity);
        s
    }

    #[test]
    fn blocks_are_laid_out_in_declaration_order() {
        let s = store();
        assert_eq!(s.len(), 12);
        assert_eq!(s.range("precision"), 4..7);
        assert_eq!(s.range("z"), 8..12);
        assert_eq!(s.input_indices(1), vec![1, 5]);
        assert_eq!(s.input_indices(3), Vec::<usize>::new());
        assert_eq!(s.span("noise"), 7..8);
        assert_eq!(s.span("absent"), 0..0);
        assert_eq!(s.transform_at(7), Transform::Positive { floor: 1e-6 });
        assert_eq!(s.transform_at(11), Transform::Identity);
    }

    #[test]
    fn pack_and_unpack_invert_each_other_above_the_floors() {
        let s = store();
        let values = [
            0.3, 2.0, 1e-3, 1.5, 0.01, 0.7, 40.0, 2e-6, -1.0, 0.0, 3.5, -7.25,
        ];
        let raw = s.pack(&values);
        // Identity entries are copied as they are.
        assert_eq!(&raw[8..], &values[8..]);
        for (v, back) in values.iter().zip(s.unpack(&raw)) {
            assert!(
                (v - back).abs() <= 1e-12 * v.abs().max(1e-6),
                "{v} → {back}"
            );
        }
        assert_eq!(s.unpack_block("noise", &raw).len(), 1);
        assert!((s.unpack_block("noise", &raw)[0] - 2e-6).abs() < 1e-15);
    }

    /// The chain rule against central differences of f(raw) = Σ_k c_k · value_k(raw)².
    #[test]
    fn the_chain_rule_matches_finite_differences() {
        let s = store();
        let raw: Vec<f64> = (0..s.len()).map(|k| 0.37 * k as f64 - 2.0).collect();
        let c: Vec<f64> = (0..s.len()).map(|k| 1.0 + 0.1 * k as f64).collect();
        let f =
            |raw: &[f64]| -> f64 { s.unpack(raw).iter().zip(&c).map(|(v, ck)| ck * v * v).sum() };
        let value_gradient: Vec<f64> = s
            .unpack(&raw)
            .iter()
            .zip(&c)
            .map(|(v, ck)| 2.0 * ck * v)
            .collect();
        let analytic = s.chain(&raw, &value_gradient);
        let h = 1e-6;
        for k in 0..s.len() {
            let (mut up, mut down) = (raw.clone(), raw.clone());
            up[k] += h;
            down[k] -= h;
            let fd = (f(&up) - f(&down)) / (2.0 * h);
            assert!(
                (fd - analytic[k]).abs() <= 1e-6 * fd.abs().max(1.0),
                "entry {k}: fd {fd}, analytic {}",
                analytic[k]
            );
        }
    }
}
