//! Saving a session whole and reading it back: the checkpoint's format, its checksum over the
//! session's text, and why a file is refused.

use super::*;

/// The format number written in every checkpoint; raised whenever the session's layout changes
/// (3: a rational-quadratic part carries its own shape a, the kernel no `rq_alpha`; 4: each
/// bound's own settings under `collapsed` and `uncollapsed`, checked when read; 5: a checksum
/// over the session's text).
pub const CHECKPOINT_FORMAT: u32 = 5;

/// The first fields of a checkpoint file, read before the rest so that a checkpoint of another
/// format is refused for its format, not for the first field that moved.
#[derive(Deserialize)]
pub(super) struct CheckpointHeader {
    format: u32,
    version: String,
}

/// A checkpoint file: the format, the version that wrote it, the checksum of the session's text
/// (FNV-1a, 16 hex digits) and the session, as written.
#[derive(Serialize, Deserialize)]
pub(super) struct CheckpointFile<'a> {
    format: u32,
    version: String,
    checksum: String,
    #[serde(borrow)]
    session: &'a serde_json::value::RawValue,
}

/// The checksum written beside a session's text.
pub(super) fn session_checksum(text: &str) -> String {
    format!("{:016x}", crate::base::checksum::Fnv1a::of(text.as_bytes()))
}

/// Why a checkpoint could not be resumed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CheckpointError {
    #[error("not a readable Occam checkpoint: {0}")]
    Unreadable(String),
    #[error(
        "the checkpoint has format {found} (written by Occam {version}); this version reads \
         format {CHECKPOINT_FORMAT} only"
    )]
    Format { found: u32, version: String },
    #[error(
        "the checkpoint was made for other data (fingerprint {checkpoint}) than the file given \
         (fingerprint {data})"
    )]
    OtherData { checkpoint: String, data: String },
    #[error(
        "the checkpoint was changed after it was written: its checksum is {written} but its \
         contents give {found}; it is refused rather than resumed from numbers the run did not \
         save (use an unedited copy, or start the run again)"
    )]
    Edited { written: String, found: String },
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl Session {
    /// The whole run as JSON (format [`CHECKPOINT_FORMAT`]): data, settings, every restart's
    /// parameters and optimiser state, the random streams, the exact search and its scores.
    /// [`Session::resume`] continues it to the same result an uninterrupted run gives.
    pub fn checkpoint(&self) -> String {
        // serde_json fails only on a map whose keys are not strings, and a session has none
        // (family caches are written as lists of pairs).
        let session = serde_json::value::to_raw_value(self).expect("a session serialises");
        let file = CheckpointFile {
            format: CHECKPOINT_FORMAT,
            version: env!("CARGO_PKG_VERSION").to_string(),
            checksum: session_checksum(session.get()),
            session: &session,
        };
        serde_json::to_string(&file).expect("a checkpoint serialises")
    }

    /// A run saved by [`Session::checkpoint`], to go on with `threads` workers (0 = all cores;
    /// the thread count never changes the result). Refused: text that is not a checkpoint of
    /// this format, and a checkpoint made for other data than `fingerprint` (when given).
    pub fn resume(
        text: &str,
        threads: usize,
        fingerprint: Option<u64>,
    ) -> Result<Self, CheckpointError> {
        let unreadable = |e: serde_json::Error| CheckpointError::Unreadable(e.to_string());
        let header: CheckpointHeader = serde_json::from_str(text).map_err(unreadable)?;
        if header.format != CHECKPOINT_FORMAT {
            return Err(CheckpointError::Format {
                found: header.format,
                version: header.version,
            });
        }
        let file: CheckpointFile<'_> = serde_json::from_str(text).map_err(unreadable)?;
        let found = session_checksum(file.session.get());
        if found != file.checksum {
            return Err(CheckpointError::Edited {
                written: file.checksum,
                found,
            });
        }
        // The settings are checked as they are read (`CheckedSettings`).
        let mut session: Session = serde_json::from_str(file.session.get()).map_err(unreadable)?;
        if let Some(f) = fingerprint.filter(|&f| f != session.fingerprint) {
            return Err(CheckpointError::OtherData {
                checkpoint: format!("{:016x}", session.fingerprint),
                data: format!("{f:016x}"),
            });
        }
        // A checkpoint is a file a user hands in: its parts must agree before anything indexes
        // with them.
        let d = session.names.len();
        let p = &session.problem;
        let inconsistent = if p.data.ncols() != d || p.noise_floors.len() != d {
            Some("its data, names and noise floors disagree on the number of variables")
        } else if p.knowledge.d() != d {
            Some("its prior knowledge is for another number of variables")
        } else if session.restarts.iter().any(|r| r.components().len() > d) {
            Some("a restart has more models than there are variables")
        } else {
            None
        };
        if let Some(why) = inconsistent {
            return Err(CheckpointError::Unreadable(why.into()));
        }
        session.problem.settings = session
            .problem
            .settings
            .clone()
            .with(|s| s.threads = threads)
            .map_err(SessionError::Settings)?;
        session.set_backend(Arc::new(CpuBackend::new(
            Pool::new(threads).map_err(SessionError::from)?,
        )));
        session.stop_flag = StopFlag::new();
        // A checkpoint written at a stop goes on from where the stop left it.
        session.stopped = false;
        session.stopped_at = None;
        if let Some(x) = session.exact.as_mut() {
            x.go_on();
        }
        Ok(session)
    }
}
