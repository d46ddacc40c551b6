//! `occam score`: compare a predicted graph with the truth.

use crate::{read_file_limited, CliError};
use clap::Args;
use occam::graph::{
    adjacency_labels, compare, read_adjacency, stopped_note, Digraph, GraphIoError,
};
use std::path::{Path, PathBuf};

/// Adjacency files are small; anything larger than this is not one.
const MAX_ADJACENCY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// True adjacency matrix: D lines of D integers, A[i][j] = 1 means i → j.
    #[arg(long)]
    pub truth: PathBuf,
    /// Predicted adjacency matrix, same format (the labelled format `occam discover` writes is
    /// also accepted). When both files are labelled, variables are matched by name.
    #[arg(long)]
    pub pred: PathBuf,
    /// Score a graph from a run that was stopped before its end (its first line says so), which
    /// is otherwise refused: it is the best graph so far, not a result.
    #[arg(long)]
    pub allow_stopped: bool,
}

/// Refuses (or, with `--allow-stopped`, flags on stderr) a file a stopped run wrote.
fn check_not_stopped(path: &Path, text: &str, allow: bool) -> Result<(), CliError> {
    let Some(note) = stopped_note(text) else {
        return Ok(());
    };
    if allow {
        errln!(
            "note: {} is from a run stopped before its end ({}); scored as asked",
            path.display(),
            crate::terminal_safe(note)
        );
        return Ok(());
    }
    Err(CliError(format!(
        "{} is from a run stopped before its end ({}); score it anyway with --allow-stopped",
        path.display(),
        crate::terminal_safe(note)
    )))
}

fn read_text(path: &Path) -> Result<String, CliError> {
    let bytes = read_file_limited(path, MAX_ADJACENCY_BYTES)?;
    String::from_utf8(bytes).map_err(|_| CliError(format!("{}: not UTF-8 text", path.display())))
}

/// Reads both graphs in one node order: when either file is labelled, both are read against its
/// names, so a labelled pair is matched by name (another order scores the same; other names are
/// refused, listing them) and a plain matrix is taken in the labelled file's order. Returns
/// whether the match was by position only.
fn read_pair(args: &ScoreArgs) -> Result<(Digraph, Digraph, bool), CliError> {
    let truth_text = read_text(&args.truth)?;
    let pred_text = read_text(&args.pred)?;
    check_not_stopped(&args.truth, &truth_text, args.allow_stopped)?;
    check_not_stopped(&args.pred, &pred_text, args.allow_stopped)?;
    let labels = |path: &Path, text: &str| {
        adjacency_labels(text).map_err(|e| CliError(format!("{}: {e}", path.display())))
    };
    let truth_names = labels(&args.truth, &truth_text)?;
    let pred_names = labels(&args.pred, &pred_text)?;
    let by_position = truth_names.is_none() || pred_names.is_none();
    // The labelled file whose names both are read against.
    let named_by = if truth_names.is_some() {
        &args.truth
    } else {
        &args.pred
    };
    let names = truth_names.or(pred_names);
    let read = |path: &Path, text: &str| {
        read_adjacency(text, names.as_deref()).map_err(|e| match (e, names.as_deref()) {
            // Read against the other file's names, not against data.
            (GraphIoError::NameCount { found, .. }, Some(names)) => CliError(format!(
                "{} has {found} variables but {} names {} ({}): both graphs must be over the \
                 same variables",
                path.display(),
                named_by.display(),
                names.len(),
                crate::terminal_safe(&names.join(", "))
            )),
            (e, _) => CliError(format!("{}: {e}", path.display())),
        })
    };
    let truth = read(&args.truth, &truth_text)?;
    let pred = read(&args.pred, &pred_text)?;
    Ok((truth, pred, by_position))
}

pub fn run(args: &ScoreArgs) -> Result<(), CliError> {
    let (truth, pred, by_position) = read_pair(args)?;
    if truth.n() != pred.n() {
        return Err(CliError(format!(
            "the truth has {} variables but the prediction has {}",
            truth.n(),
            pred.n()
        )));
    }
    if by_position {
        errln!(
            "note: at least one file has no names, so variables are matched by position (row k of \
             one file is row k of the other)"
        );
    }
    if !truth.is_acyclic() || !pred.is_acyclic() {
        errln!("note: SID is defined only for DAGs; a graph has a cycle, so sid is null");
    }
    let comparison = compare(&truth, &pred);
    let json = serde_json::to_string(&comparison)
        .map_err(|e| CliError(format!("cannot encode the result: {e}")))?;
    outln!("{json}");
    Ok(())
}
