//! `occam score`: compare a predicted graph with the truth.

use crate::{read_file_limited, CliError};
use clap::Args;
use occam::graph::{compare, read_adjacency};
use std::path::{Path, PathBuf};

/// Adjacency files are small; anything larger than this is not one.
const MAX_ADJACENCY_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// True adjacency matrix: D lines of D integers, A[i][j] = 1 means i → j.
    #[arg(long)]
    pub truth: PathBuf,
    /// Predicted adjacency matrix, same format (the labelled format `occam discover` writes is
    /// also accepted).
    #[arg(long)]
    pub pred: PathBuf,
}

fn read_graph(path: &Path) -> Result<occam::graph::Digraph, CliError> {
    let bytes = read_file_limited(path, MAX_ADJACENCY_BYTES)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| CliError(format!("{}: not UTF-8 text", path.display())))?;
    read_adjacency(&text, None).map_err(|e| CliError(format!("{}: {e}", path.display())))
}

pub fn run(args: &ScoreArgs) -> Result<(), CliError> {
    let truth = read_graph(&args.truth)?;
    let pred = read_graph(&args.pred)?;
    if truth.n() != pred.n() {
        return Err(CliError(format!(
            "the truth has {} variables but the prediction has {}",
            truth.n(),
            pred.n()
        )));
    }
    if !truth.is_acyclic() || !pred.is_acyclic() {
        eprintln!("note: SID is defined only for DAGs; a graph has a cycle, so sid is null");
    }
    let comparison = compare(&truth, &pred);
    let json = serde_json::to_string(&comparison)
        .map_err(|e| CliError(format!("cannot encode the result: {e}")))?;
    println!("{json}");
    Ok(())
}
