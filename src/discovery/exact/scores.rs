//! The table of local scores F(i | S) the exact search reads, each family fitted at most once per
//! data set and settings: a cache keyed by (variable, parent set) under a key made of the data's
//! fingerprint and the score settings, kept in memory and (natively) written next to the output,
//! so a second run with other knowledge or other limits fits only families it has not seen.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::discovery::error::DiscoveryError;
use crate::discovery::family::{FamilyKey, FamilyScore, FamilyScoreSettings, FitWork};

/// The version of the family-score code a cache was written by. Raise it whenever a change to
/// the fits (starts, optimiser, floors) changes the scores, so caches from older code are refitted
/// instead of mixed with new scores. Files without a version read as 0.
pub const FAMILY_SCORE_VERSION: u32 = 3;

/// What a cache file was computed from; a file whose key differs is not reused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheKey {
    /// The data's fingerprint (names and values as used, after row selection).
    pub data: String,
    pub settings: FamilyScoreSettings,
    /// The seed the family seeds derive from.
    pub seed: u64,
    /// [`FAMILY_SCORE_VERSION`] of the code that fitted the scores.
    #[serde(default)]
    pub version: u32,
}

impl CacheKey {
    /// The key for scores fitted now, by this version of the code.
    pub fn new(data: impl Into<String>, settings: FamilyScoreSettings, seed: u64) -> Self {
        Self {
            data: data.into(),
            settings,
            seed,
            version: FAMILY_SCORE_VERSION,
        }
    }
}

impl CacheKey {
    /// What a cache made under `other` was made for that this key is not, in words; None when
    /// the keys are equal.
    pub fn differs_from(&self, other: &CacheKey) -> Option<&'static str> {
        if self.data != other.data {
            Some("other data (or other rows of it)")
        } else if self.version != other.version {
            Some("an older version of the family fits")
        } else if self.seed != other.seed {
            Some("another seed")
        } else if self.settings != other.settings {
            Some("other family-fit settings")
        } else {
            None
        }
    }
}

/// Why a score cache's text is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheRefusal {
    /// Not a cache: cut short (a run killed while writing it), edited, or another file.
    #[error("it is not a readable score cache ({0}): cut short, edited, or another file")]
    Unreadable(String),
    /// A cache of another key.
    #[error("it was made for {0}")]
    OtherKey(&'static str),
}

/// Family scores computed so far for one [`CacheKey`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoreCache {
    pub key: CacheKey,
    /// (child, sorted parents) → score; failures are kept too so they are not retried blindly.
    entries: BTreeMap<String, (FamilyKey, Result<FamilyScore, DiscoveryError>)>,
}

fn entry_name(key: &FamilyKey) -> String {
    let parents: Vec<String> = key.1.iter().map(usize::to_string).collect();
    format!("{}|{}", key.0, parents.join(","))
}

impl ScoreCache {
    pub fn new(key: CacheKey) -> Self {
        Self {
            key,
            entries: BTreeMap::new(),
        }
    }

    /// The stored score of a family, if any.
    pub fn get(&self, family: &FamilyKey) -> Option<&Result<FamilyScore, DiscoveryError>> {
        self.entries.get(&entry_name(family)).map(|(_, v)| v)
    }

    pub fn insert(&mut self, family: FamilyKey, value: Result<FamilyScore, DiscoveryError>) {
        self.entries.insert(entry_name(&family), (family, value));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Every family held with its score, in a fixed order.
    pub fn entries(
        &self,
    ) -> impl Iterator<Item = (&FamilyKey, &Result<FamilyScore, DiscoveryError>)> {
        self.entries.values().map(|(k, v)| (k, v))
    }

    /// Takes the entries of `other` (of the same key) this cache does not hold; returns how many.
    /// Held entries are kept as they are.
    pub fn merge(&mut self, other: &ScoreCache) -> usize {
        if other.key != self.key {
            return 0;
        }
        let mut taken = 0;
        for (name, entry) in &other.entries {
            if !self.entries.contains_key(name) {
                self.entries.insert(name.clone(), entry.clone());
                taken += 1;
            }
        }
        taken
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Reads a cache written by [`ScoreCache::to_json`]; None when the text is not a cache or was
    /// computed for another key (other data, settings or seed), so nothing stale is reused.
    pub fn from_json_for(text: &str, key: &CacheKey) -> Option<Self> {
        Self::parse_for(text, key).ok()
    }

    /// [`ScoreCache::from_json_for`], saying why a text is refused.
    pub fn parse_for(text: &str, key: &CacheKey) -> Result<Self, CacheRefusal> {
        let cache: ScoreCache =
            serde_json::from_str(text).map_err(|e| CacheRefusal::Unreadable(e.to_string()))?;
        match key.differs_from(&cache.key) {
            None => Ok(cache),
            Some(what) => Err(CacheRefusal::OtherKey(what)),
        }
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a score cache serialises")
    }

    /// The work behind every score held: fits, iterations per stage, caps hit, evaluations.
    pub fn work(&self) -> FitWork {
        let mut work = FitWork::default();
        for (_, score) in self.entries.values() {
            if let Ok(score) = score {
                work.add(score, self.key.settings.adam_steps);
            }
        }
        work
    }

    /// The families of `wanted` not in the cache yet, in order, without repeats.
    pub fn missing(&self, wanted: &[FamilyKey]) -> Vec<FamilyKey> {
        let mut out: Vec<FamilyKey> = Vec::new();
        for f in wanted {
            if self.get(f).is_none() && !out.contains(f) {
                out.push(f.clone());
            }
        }
        out
    }
}
