//! `occam discover DATA.csv --out DIR`: learn a causal DAG by continuous Bayesian model selection
//! (CGP-CDE), with a progress line, and write DIR/adjacency.csv, DIR/edges.csv, DIR/graph.dot and
//! DIR/result.json. Ctrl-C stops the run and writes the best result so far.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::Args;
use occam::data::{parse_csv, CsvOptions, MAX_CSV_BYTES};
use occam::discovery::cgp::Preset;
use occam::discovery::knowledge::Knowledge;
use occam::engine::output::output_files;
use occam::engine::{Session, Snapshot, Status};

use crate::overrides::Overrides;
use crate::{ensure_dir, read_file_limited, write_file, CliError};

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// The CSV file (header row required; one column per variable).
    pub data: PathBuf,
    /// Output folder (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Settings preset: `interactive` (fast, convergence-tested phases), `thorough` (more rows,
    /// inducing points and restarts; minutes) or `paper` (the paper's schedule; hours).
    #[arg(long, default_value = "interactive")]
    pub preset: String,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[command(flatten)]
    pub overrides: Overrides,
    /// Forbid an edge, e.g. `--forbid "A->B"` (repeatable).
    #[arg(long = "forbid", value_name = "A->B")]
    pub forbid: Vec<String>,
    /// Require an edge, e.g. `--require "A->B"` (repeatable).
    #[arg(long = "require", value_name = "A->B")]
    pub require: Vec<String>,
    /// Tiers file: one tier per line, earliest first, names separated by commas; no edge may point
    /// from a later tier to an earlier one.
    #[arg(long)]
    pub tiers: Option<PathBuf>,
    /// Drop rows that have a missing value instead of refusing the file.
    #[arg(long)]
    pub drop_missing: bool,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

pub fn run(args: &DiscoverArgs) -> Result<(), CliError> {
    let preset = Preset::parse(&args.preset).map_err(CliError)?;
    let options = CsvOptions {
        drop_rows_with_missing: args.drop_missing,
        max_bytes: MAX_CSV_BYTES,
    };
    let shown = args.data.display();
    let bytes = read_file_limited(&args.data, options.max_bytes)?;
    let parsed = parse_csv(&bytes, &options).map_err(|e| CliError(format!("{shown}: {e}")))?;
    let dataset = parsed.dataset;
    for p in &parsed.problems {
        eprintln!("note: {} ({})", p.message(), p.action());
    }
    let tiers_text = match &args.tiers {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| CliError(format!("cannot read tiers file {}: {e}", path.display())))?,
        ),
        None => None,
    };
    let knowledge = Knowledge::new(
        dataset.names(),
        &args.forbid,
        &args.require,
        tiers_text.as_deref(),
    )
    .map_err(|e| CliError(format!("prior knowledge: {e}")))?;

    let mut settings = preset.settings();
    args.overrides.apply(&mut settings)?;
    let mut session = Session::new(&dataset, knowledge, settings, args.seed, Some(preset))
        .map_err(|e| CliError(format!("{shown}: {e}")))?;
    ensure_dir(&args.out)?;

    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let flag = interrupted.clone();
        // A second Ctrl-C while the handler is installed is ignored; the loop exits within a step.
        let _ = ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst));
    }
    while !session.is_finished() {
        if interrupted.load(Ordering::SeqCst) {
            session.stop();
            if !args.quiet {
                eprintln!("\ninterrupted: writing the best result so far");
            }
            break;
        }
        let snapshot = session.step(0.25);
        if !args.quiet {
            progress_line(&snapshot);
        }
    }
    if !args.quiet {
        eprintln!();
    }
    let result = session.result();
    for (name, contents) in output_files(&result) {
        write_file(&args.out.join(name), &contents)?;
    }
    let names = session.names();
    println!(
        "status: {:?}, {} edges, {:.1} s, written to {}",
        result.status,
        result.edges.len(),
        result.seconds,
        args.out.display()
    );
    for &(a, b) in &result.edges {
        println!("  {} -> {}", names[a], names[b]);
    }
    for f in &result.failures {
        eprintln!("warning: {f}");
    }
    if result.status == Status::Failed {
        return Err(CliError(
            "every restart failed; see result.json for the messages".into(),
        ));
    }
    Ok(())
}

fn progress_line(s: &Snapshot) {
    let width = 24;
    let filled = ((s.progress * width as f64).round() as usize).min(width);
    let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
    let terms = s
        .terms
        .map(|t| format!("bound {:.1}  h {:.3}  γ {:.0}", t.elbo, t.h, t.gamma))
        .unwrap_or_default();
    eprint!(
        "\r[{bar}] restart {} {:<13} it {:>5}  {terms}  {:.0} s, ≤ {:.0} s left   ",
        s.restart + 1,
        format!("{:?}", s.phase),
        s.iteration,
        s.elapsed_seconds,
        s.remaining_seconds
    );
    let _ = std::io::stderr().flush();
}
