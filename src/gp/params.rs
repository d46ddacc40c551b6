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
//!
//! Declaring a block gives back a typed [`ParamBlock`] handle, which the model keeps in its own
//! layout struct: a block is reached through the handle, never looked up by its name, so a
//! misspelt or missing block is a compile error instead of a panic at run time. The names are
//! kept for messages only.

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

/// A typed handle to declared parameters: the run of flat entries one block (or several blocks
/// declared one after another, such as a kernel's) occupies. [`ParamStore::add`] and
/// [`ParamStore::add_per_input`] hand these out; a handle is only meaningful for the store that
/// made it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParamBlock {
    offset: usize,
    len: usize,
}

impl ParamBlock {
    /// The handle's indices in the flat vector.
    pub fn range(self) -> Range<usize> {
        self.offset..self.offset + self.len
    }

    /// How many flat entries the handle covers.
    pub fn len(self) -> usize {
        self.len
    }

    /// True for a block of no entries (a kernel or latent input with nothing to learn).
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The flat index of the handle's first entry (the entry of a one-entry block such as φ²).
    pub fn first(self) -> usize {
        self.offset
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

    /// Appends a block of `len` entries called `name` and returns its handle.
    pub fn add(&mut self, name: impl Into<String>, len: usize, transform: Transform) -> ParamBlock {
        self.push(name.into(), len, transform, false)
    }

    /// Appends a block with one entry per model input (`inputs` of them): entry j is input j's.
    pub fn add_per_input(
        &mut self,
        name: impl Into<String>,
        inputs: usize,
        transform: Transform,
    ) -> ParamBlock {
        self.push(name.into(), inputs, transform, true)
    }

    fn push(
        &mut self,
        name: String,
        len: usize,
        transform: Transform,
        per_input: bool,
    ) -> ParamBlock {
        debug_assert!(
            self.blocks.iter().all(|b| b.name != name),
            "parameter block {name} declared twice"
        );
        let handle = ParamBlock {
            offset: self.len,
            len,
        };
        self.blocks.push(Block {
            name,
            offset: self.len,
            len,
            transform,
            per_input,
        });
        self.len += len;
        handle
    }

    /// The handle of every entry declared since the store had `start` entries: a model part that
    /// declares several blocks in a row (a kernel) gives this back as its one handle.
    pub fn declared_since(&self, start: usize) -> ParamBlock {
        assert!(start <= self.len, "the store never had {start} entries");
        ParamBlock {
            offset: start,
            len: self.len - start,
        }
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

    /// value_k = T_k(raw_k) for the entries of `block`, given their raw numbers `block_raw`
    /// (`block.len()` of them, in flat order).
    pub fn unpack_block(&self, block: ParamBlock, block_raw: &[f64]) -> Vec<f64> {
        assert_eq!(block_raw.len(), block.len(), "the block's raw length");
        block
            .range()
            .zip(block_raw)
            .map(|(k, &r)| self.transform_at(k).value(r))
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

    /// A store like a kernel's and a model's, with the handles of its precision, noise and Z.
    fn store() -> (ParamStore, [ParamBlock; 3]) {
        let mut s = ParamStore::new();
        s.add_per_input("linear", 3, Transform::POSITIVE);
        s.add("variance", 1, Transform::POSITIVE);
        let precision = s.add_per_input("precision", 3, Transform::POSITIVE);
        let noise = s.add("noise", 1, Transform::Positive { floor: 1e-6 });
        let z = s.add("z", 4, Transform::Identity);
        (s, [precision, noise, z])
    }

    #[test]
    fn blocks_are_laid_out_in_declaration_order() {
        let (s, [precision, noise, z]) = store();
        assert_eq!(s.len(), 12);
        assert_eq!(precision.range(), 4..7);
        assert_eq!(z.range(), 8..12);
        assert_eq!(s.input_indices(1), vec![1, 5]);
        assert_eq!(s.input_indices(3), Vec::<usize>::new());
        assert_eq!(noise.range(), 7..8);
        assert_eq!(noise.first(), 7);
        assert_eq!(s.declared_since(4).range(), 4..12);
        assert_eq!(s.declared_since(12).range(), 12..12);
        assert_eq!(s.transform_at(7), Transform::Positive { floor: 1e-6 });
        assert_eq!(s.transform_at(11), Transform::Identity);
    }

    #[test]
    fn pack_and_unpack_invert_each_other_above_the_floors() {
        let (s, [_, noise, _]) = store();
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
        assert_eq!(s.unpack_block(noise, &raw[noise.range()]).len(), 1);
        assert!((s.unpack_block(noise, &raw[noise.range()])[0] - 2e-6).abs() < 1e-15);
    }

    /// The chain rule against central differences of f(raw) = Σ_k c_k · value_k(raw)².
    #[test]
    fn the_chain_rule_matches_finite_differences() {
        let (s, _) = store();
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
