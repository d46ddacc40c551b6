//! The exact search's family scores on disk: `score_cache.json` (the whole cache, written at the
//! end of a run) and beside it `score_cache.json.journal`, to which each family's score is
//! appended as soon as it is fitted (one JSON line each; the first line holds the cache's key),
//! so that a run killed with `kill -9` loses at most the fits in flight. Reading takes both; the
//! journal is folded into the cache file at the end of a run and removed.
//!
//! A line is appended with one write of the whole line, so a kill leaves at most a last line cut
//! short, which is dropped with a note when the journal is read.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use occam::discovery::error::DiscoveryError;
use occam::discovery::exact::{CacheKey, ScoreCache};
use occam::discovery::family::{FamilyKey, FamilyScore};
use serde::{Deserialize, Serialize};

use crate::{read_file_limited, CliError};

/// A cache holds one score per family: 1 GiB is far beyond any the exact search writes.
const MAX_CACHE_BYTES: usize = 1 << 30;

/// The journal's path beside the cache file `cache`.
pub fn journal_path(cache: &Path) -> PathBuf {
    let name = cache.file_name().map_or_else(
        || "score_cache.json".into(),
        |n| n.to_string_lossy().into_owned(),
    );
    cache.with_file_name(format!("{name}.journal"))
}

/// The journal's first line.
#[derive(Serialize, Deserialize)]
struct JournalHead {
    journal_of: CacheKey,
}

/// One family's line.
#[derive(Serialize, Deserialize)]
struct JournalLine {
    family: FamilyKey,
    score: Result<FamilyScore, DiscoveryError>,
}

/// What was read: the scores for this key (cache file and journal together, or None when there
/// were none usable) and a note for each part that was not used, or used in part.
pub struct CacheRead {
    pub cache: Option<ScoreCache>,
    pub notes: Vec<String>,
}

/// Reads the cache file at `path` and its journal for `key`: each part of another key, or
/// unreadable, is left out with a note saying which file and why.
pub fn read(path: &Path, key: &CacheKey) -> CacheRead {
    let mut notes = Vec::new();
    let mut cache: Option<ScoreCache> = None;
    if path.exists() {
        match read_text(path) {
            Ok(text) => match ScoreCache::parse_for(&text, key) {
                Ok(c) => cache = Some(c),
                Err(why) => notes.push(format!(
                    "{} is not used and will be replaced: {why}",
                    path.display()
                )),
            },
            Err(e) => notes.push(format!("{} is not used: {}", path.display(), e.0)),
        }
    }
    let journal = journal_path(path);
    if journal.exists() {
        match read_text(&journal) {
            Ok(text) => {
                let (scores, note) = parse_journal(&text, key);
                if let Some(note) = note {
                    notes.push(format!("{}: {note}", journal.display()));
                }
                if !scores.is_empty() {
                    let c = cache.get_or_insert_with(|| ScoreCache::new(key.clone()));
                    for (family, score) in scores {
                        if c.get(&family).is_none() {
                            c.insert(family, score);
                        }
                    }
                }
            }
            Err(e) => notes.push(format!("{} is not used: {}", journal.display(), e.0)),
        }
    }
    CacheRead { cache, notes }
}

fn read_text(path: &Path) -> Result<String, CliError> {
    let bytes = read_file_limited(path, MAX_CACHE_BYTES)?;
    String::from_utf8(bytes).map_err(|_| CliError("not UTF-8 text".into()))
}

/// A family with its score, as a journal line holds them.
type Scored = (FamilyKey, Result<FamilyScore, DiscoveryError>);

/// The scores of a journal's text for `key`, and a note when some were not used.
fn parse_journal(text: &str, key: &CacheKey) -> (Vec<Scored>, Option<String>) {
    let mut lines = text.split_inclusive('\n');
    let Some(head) = lines.next() else {
        return (Vec::new(), None);
    };
    match serde_json::from_str::<JournalHead>(head.trim_end()) {
        Ok(h) => {
            if let Some(what) = key.differs_from(&h.journal_of) {
                return (
                    Vec::new(),
                    Some(format!("not used: it was made for {what}")),
                );
            }
        }
        Err(e) => {
            return (
                Vec::new(),
                Some(format!("not used: its first line is not a journal's ({e})")),
            )
        }
    }
    let mut scores = Vec::new();
    for (k, line) in lines.enumerate() {
        let complete = line.ends_with('\n');
        match serde_json::from_str::<JournalLine>(line.trim_end()) {
            Ok(l) if complete => scores.push((l.family, l.score)),
            // The last line without its newline was cut short by a kill while it was written.
            _ if !complete => {
                return (
                    scores,
                    Some(
                        "its last line was cut short (a run killed while writing it); the \
                         families before it are used"
                            .into(),
                    ),
                )
            }
            Ok(_) => unreachable!("complete lines are handled above"),
            Err(e) => {
                return (
                    scores,
                    Some(format!(
                        "line {} is not a family's score ({e}); the lines before it are used",
                        k + 2
                    )),
                )
            }
        }
    }
    (scores, None)
}

/// The journal of a running exact search: appends the families it has not written yet.
pub struct Journal {
    path: PathBuf,
    key: CacheKey,
    file: Option<std::fs::File>,
    written: HashSet<FamilyKey>,
}

impl Journal {
    /// The journal beside `cache_path` for scores of `key`, `held` being every score the run
    /// starts with (the cache file's and an old journal's, read by [`read`]). An old journal is
    /// folded into the cache file first, so the new one holds only what this run fits.
    pub fn start(cache_path: &Path, key: CacheKey, held: &ScoreCache) -> Result<Self, CliError> {
        let path = journal_path(cache_path);
        if path.exists() {
            crate::write_file_atomic(cache_path, &held.to_json())?;
            std::fs::remove_file(&path)
                .map_err(|e| CliError(format!("cannot remove {}: {e}", path.display())))?;
        }
        Ok(Self {
            path,
            key,
            file: None,
            written: held.entries().map(|(k, _)| k.clone()).collect(),
        })
    }

    /// Appends every family of `cache` not written yet, as one write (the first append creates
    /// the file with its key line).
    pub fn append_new(&mut self, cache: &ScoreCache) -> Result<(), CliError> {
        let mut text = String::new();
        let mut added = Vec::new();
        for (family, score) in cache.entries() {
            if self.written.contains(family) {
                continue;
            }
            let line = JournalLine {
                family: family.clone(),
                score: score.clone(),
            };
            text += &serde_json::to_string(&line).expect("a family score serialises");
            text.push('\n');
            added.push(family.clone());
        }
        if added.is_empty() {
            return Ok(());
        }
        let failed =
            |e: std::io::Error| CliError(format!("cannot append to {}: {e}", self.path.display()));
        if self.file.is_none() {
            let head = JournalHead {
                journal_of: self.key.clone(),
            };
            let head = serde_json::to_string(&head).expect("a key serialises") + "\n";
            crate::write_file_atomic(&self.path, &head)?;
            let file = std::fs::OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(failed)?;
            self.file = Some(file);
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(text.as_bytes()).map_err(failed)?;
        file.flush().map_err(failed)?;
        self.written.extend(added);
        Ok(())
    }

    /// Writes the whole cache to `cache_path` and removes the journal, whose families it holds.
    pub fn fold_into(self, cache_path: &Path, cache: &ScoreCache) -> Result<(), CliError> {
        crate::write_file_atomic(cache_path, &cache.to_json())?;
        drop(self.file);
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CliError(format!(
                "cannot remove {} (its families are in {}): {e}",
                self.path.display(),
                cache_path.display()
            ))),
            _ => Ok(()),
        }
    }
}
