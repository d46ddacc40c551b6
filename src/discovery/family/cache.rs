//! The families of a graph and the cache of their scores a run keeps.

use super::*;

/// The families of a DAG given by its `edges` (cause, effect) over `d` variables.
pub fn families(d: usize, edges: &[(usize, usize)]) -> Vec<FamilyKey> {
    (0..d)
        .map(|i| {
            let mut parents: Vec<usize> = edges
                .iter()
                .filter(|&&(_, e)| e == i)
                .map(|&(c, _)| c)
                .collect();
            parents.sort_unstable();
            parents.dedup();
            (i, parents)
        })
        .collect()
}

/// Family evidences computed so far, each once.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FamilyCache {
    /// Written as a list of (family, value) pairs: JSON map keys must be strings.
    #[serde(with = "family_pairs")]
    pub(super) values: BTreeMap<FamilyKey, Result<f64, DiscoveryError>>,
}

/// A map keyed by families, (de)serialised as a list of pairs.
mod family_pairs {
    use super::{DiscoveryError, FamilyKey};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    type Map = BTreeMap<FamilyKey, Result<f64, DiscoveryError>>;

    pub fn serialize<S: Serializer>(map: &Map, s: S) -> Result<S::Ok, S::Error> {
        map.iter().collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Map, D::Error> {
        Ok(
            Vec::<(FamilyKey, Result<f64, DiscoveryError>)>::deserialize(d)?
                .into_iter()
                .collect(),
        )
    }
}

impl FamilyCache {
    /// The stored value of a family, if computed.
    pub fn get(&self, key: &FamilyKey) -> Option<&Result<f64, DiscoveryError>> {
        self.values.get(key)
    }

    /// Stores a family's value.
    pub fn insert(&mut self, key: FamilyKey, value: Result<f64, DiscoveryError>) {
        self.values.insert(key, value);
    }

    /// How many families are stored.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Σ_i F(i | pa(i)) of the DAG with `edges`, or `None` while a family is missing; an error names
    /// the first family that could not be fitted.
    pub fn graph_evidence(
        &self,
        d: usize,
        edges: &[(usize, usize)],
    ) -> Option<Result<f64, DiscoveryError>> {
        let mut total = 0.0;
        for key in families(d, edges) {
            match self.values.get(&key)? {
                Ok(v) => total += v,
                Err(e) => return Some(Err(e.clone())),
            }
        }
        Some(Ok(total))
    }
}
