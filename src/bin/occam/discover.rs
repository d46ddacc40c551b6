//! `occam discover DATA.csv --out DIR`: learn a causal DAG by continuous Bayesian model selection
//! (CGP-CDE, `--method cgp`), by exact model selection over DAGs (`--method exact`) or both
//! (`--method hybrid`), with a progress line, and write DIR/adjacency.csv, DIR/edges.csv,
//! DIR/graph.dot and DIR/result.json (and, from the exact search, DIR/edge_probabilities.csv and
//! the family-score cache DIR/score_cache.json, which a later run with the same data, seed and fit
//! settings reads instead of refitting). Ctrl-C stops the run and writes the best result so far.

use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use clap::Args;
use occam::backend::gpu_executor::{GpuBackend, PSI2_MIN_WORK};
use occam::backend::{CpuBackend, Pool};
use occam::data::{parse_csv, CsvOptions, Dataset, MAX_CSV_BYTES};
use occam::discovery::cgp::{BoundKind, Method, Preset};
use occam::discovery::exact::ScoreCache;
use occam::discovery::knowledge::Knowledge;
use occam::engine::output::output_files;
use occam::engine::{now_seconds, Session, SessionError, Snapshot, Status};
use occam::names;

use crate::overrides::Overrides;
use crate::{
    check_writable, ensure_dir, read_file_limited, terminal_safe, write_file_atomic, CliError,
};

#[derive(Debug, Args)]
pub struct DiscoverArgs {
    /// The CSV file (header row required; one column per variable).
    pub data: PathBuf,
    /// Output folder (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Settings preset: `interactive` (fast, convergence-tested phases), `thorough` (more rows,
    /// inducing points and restarts; minutes) or `paper` (the paper's schedule; hours).
    /// [default: interactive]
    #[arg(long)]
    pub preset: Option<String>,
    /// Seed of every random choice. [default: 0]
    #[arg(long)]
    pub seed: Option<u64>,
    /// Save the whole run to FILE every few seconds and at its end, so `--resume FILE` can go on
    /// from there after a stop, a crash or a reboot.
    #[arg(long, value_name = "FILE")]
    pub checkpoint: Option<PathBuf>,
    /// Go on with the run saved in FILE by `--checkpoint` (on the same data); it ends with the
    /// graph the run would have found uninterrupted. Settings, seed and knowledge come from the
    /// checkpoint (only --threads and --backend may be given). Add `--checkpoint FILE` to keep saving.
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,
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
    /// Where the numeric work runs: `cpu` (f64 on every core) or `gpu` (the uncollapsed bound's
    /// kernel matrices and products on the first GPU wgpu finds through Vulkan, Metal, DX12 or
    /// GL, float32, and large collapsed evaluations' Ψ2 sums in double-float; the rest on the
    /// CPU; a GPU that fails mid-run hands over to the CPU).
    /// [default: cpu]
    #[arg(long, value_name = "cpu|gpu")]
    pub backend: Option<String>,
}

/// Where `occam discover --backend` sends the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
#[strum(serialize_all = "lowercase")]
enum BackendChoice {
    Cpu,
    Gpu,
}

impl BackendChoice {
    fn parse(name: Option<&str>) -> Result<Self, CliError> {
        let given = name.unwrap_or("cpu");
        names::parse(given).ok_or_else(|| {
            CliError(format!(
                "--backend {given}: choose {}",
                names::choices::<Self>()
            ))
        })
    }
}

/// Puts `session` on the GPU when asked (its CPU part on `threads` threads, 0 = all cores).
fn choose_backend(
    session: &mut Session,
    choice: BackendChoice,
    threads: usize,
) -> Result<(), CliError> {
    if choice == BackendChoice::Gpu {
        let settings = session.settings();
        if settings.method == Method::Exact {
            errln!(
                "note: --backend gpu: the exact search's first family fits are timed with their \
                 Ψ2 sums on the GPU and on the CPU, and the rest compute where that was faster \
                 (result.json's device_choices gives the figures)"
            );
        } else if settings.bound != BoundKind::Uncollapsed {
            errln!(
                "note: --backend gpu: this run's bound is collapsed; its first iterations are \
                 timed with their Ψ2 sums on the GPU and on the CPU (from rows × inducing \
                 points² ≥ {PSI2_MIN_WORK:e}), and the rest, refits included, compute where that \
                 was faster; starts compute on the CPU (result.json's device_choices gives the \
                 figures). The uncollapsed bound (--preset paper) computes on the GPU"
            );
        }
        let pool = Pool::new(threads).map_err(|e| CliError(e.to_string()))?;
        let backend = GpuBackend::open(CpuBackend::new(pool))
            .map_err(|e| CliError(format!("--backend gpu: {e}")))?;
        session.set_backend(Arc::new(backend));
    }
    Ok(())
}

pub fn run(args: &DiscoverArgs) -> Result<(), CliError> {
    let backend = BackendChoice::parse(args.backend.as_deref())?;
    let preset =
        Preset::parse(args.preset.as_deref().unwrap_or("interactive")).map_err(CliError)?;
    let options = CsvOptions {
        drop_rows_with_missing: args.drop_missing,
        max_bytes: MAX_CSV_BYTES,
    };
    let shown = args.data.display();
    let bytes = read_file_limited(&args.data, options.max_bytes)?;
    let parsed = parse_csv(&bytes, &options).map_err(|e| CliError(format!("{shown}: {e}")))?;
    let dataset = parsed.dataset;
    for p in &parsed.problems {
        errln!("note: {} ({})", terminal_safe(&p.message()), p.action());
    }
    if let Some(path) = &args.resume {
        refuse_settings_with_resume(args)?;
        let bytes = read_file_limited(path, MAX_CHECKPOINT_BYTES)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            CliError(format!(
                "{}: not a checkpoint (not UTF-8 text)",
                path.display()
            ))
        })?;
        let threads = args.overrides.threads.unwrap_or(0);
        let mut session = Session::resume(&text, threads, Some(dataset.fingerprint()))
            .map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        choose_backend(&mut session, backend, threads)?;
        if !args.quiet {
            errln!(
                "resuming {} ({:.1} s of work done)",
                path.display(),
                session.snapshot().elapsed_seconds
            );
        }
        return drive(args, session, &dataset, true);
    }
    let tiers_text =
        match &args.tiers {
            Some(path) => {
                let bytes = read_file_limited(path, MAX_TIERS_BYTES)?;
                Some(String::from_utf8(bytes).map_err(|_| {
                    CliError(format!("tiers file {}: not UTF-8 text", path.display()))
                })?)
            }
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
    // The method that wins is the default (issue 33): auto (exact up to 12 variables, hybrid
    // above), unless a settings file or --method names one. The paper's preset keeps the paper's
    // continuous search.
    if preset != Preset::Paper {
        settings.method = Method::Auto;
    }
    args.overrides.apply(&mut settings)?;
    let threads = settings.threads;
    let mut session = settings
        .check()
        .map_err(SessionError::Settings)
        .and_then(|settings| {
            Session::new(
                &dataset,
                knowledge,
                settings,
                args.seed.unwrap_or(0),
                Some(preset),
            )
        })
        .map_err(|e| CliError(format!("{shown}: {e}")))?;
    choose_backend(&mut session, backend, threads)?;
    drive(args, session, &dataset, false)
}

/// A checkpoint holds the data, every restart's parameters and the exact search's scores: far
/// below this for any run the engine accepts (its models are capped well under it).
const MAX_CHECKPOINT_BYTES: usize = 8 << 30;
/// Seconds between checkpoints.
const CHECKPOINT_SECONDS: f64 = 5.0;

/// `--resume` takes everything but the thread count from the checkpoint: a flag that would set
/// something else is refused rather than silently ignored.
fn refuse_settings_with_resume(args: &DiscoverArgs) -> Result<(), CliError> {
    let o = &args.overrides;
    let given = [
        ("--preset", args.preset.is_some()),
        ("--seed", args.seed.is_some()),
        ("--max-iterations", o.max_iterations.is_some()),
        ("--method", o.method.is_some()),
        ("--settings", o.settings.is_some()),
        ("--forbid", !args.forbid.is_empty()),
        ("--require", !args.require.is_empty()),
        ("--tiers", args.tiers.is_some()),
    ];
    let mut named: Vec<String> = given
        .iter()
        .filter(|g| g.1)
        .map(|g| g.0.to_string())
        .collect();
    named.extend(o.fields.flags_given());
    if named.is_empty() {
        return Ok(());
    }
    Err(CliError(format!(
        "--resume continues a run with the settings, seed and knowledge it was saved with; drop {} \
         (only --threads and --backend may change)",
        named.join(", ")
    )))
}

/// Runs `session` to its end (or a stop), saving checkpoints and the exact search's cache on the
/// way, and writes the result files.
fn drive(
    args: &DiscoverArgs,
    mut session: Session,
    dataset: &Dataset,
    resumed: bool,
) -> Result<(), CliError> {
    ensure_dir(&args.out)?;
    check_writable(&args.out)?;
    let cache_path = args.out.join(SCORE_CACHE_FILE);
    let method = session.settings().method;
    if method.runs_exact() && !resumed {
        announce_exact(&mut session, &cache_path, dataset, args.quiet);
    }
    if let Some(path) = &args.checkpoint {
        // Before any work, so a bad path fails now rather than minutes in.
        write_file_atomic(path, &session.checkpoint())?;
    }
    let mut cache_saved_at = now_seconds();
    let mut checkpoint_saved_at = now_seconds();
    let mut backend_name = session.backend().name();
    if !args.quiet {
        errln!("computing on {}", terminal_safe(&backend_name));
    }

    {
        let flag = session.stop_flag();
        // Ctrl-C, SIGTERM and SIGHUP (the "termination" feature) all stop the run and write the
        // best result so far. The flag is answered inside the unit of work being done (within one
        // bound evaluation), so even a fit at M = 1000 stops within about a second.
        let _ = ctrlc::set_handler(move || flag.raise());
    }
    let stop_flag = session.stop_flag();
    while !session.is_finished() {
        let snapshot = session.step(0.25);
        if !args.quiet {
            progress_line(&snapshot);
        }
        // A GPU that fails hands the run to the CPU; say so once, on a line of its own.
        let now_on = session.backend().name();
        if now_on != backend_name {
            if !args.quiet {
                errln!();
                errln!("switched: now computing on {}", terminal_safe(&now_on));
            }
            backend_name = now_on;
        }
        // Keep the fitted families on disk as the run goes, so even a killed run loses little.
        if method.runs_exact() && now_seconds() - cache_saved_at > CACHE_SAVE_SECONDS {
            save_cache(&session, &cache_path)?;
            cache_saved_at = now_seconds();
        }
        // Only a session that was not stopped is worth resuming: a stop ends the run for good,
        // so the checkpoint keeps the state before it (at most CHECKPOINT_SECONDS old).
        if let Some(path) = &args.checkpoint {
            if !stop_flag.is_raised()
                && (session.is_finished()
                    || now_seconds() - checkpoint_saved_at > CHECKPOINT_SECONDS)
            {
                write_file_atomic(path, &session.checkpoint())?;
                checkpoint_saved_at = now_seconds();
            }
        }
    }
    if method.runs_exact() {
        save_cache(&session, &cache_path)?;
    }
    if !args.quiet {
        errln!();
        if stop_flag.is_raised() {
            errln!("interrupted: writing the best result so far");
        }
    }
    let result = session.result();
    // Each file is written whole and renamed into place, result.json last: the folder holds a
    // complete old result or a complete new one, and a file an older run left that this one
    // does not write is removed before result.json commits the new result.
    let files = output_files(&result);
    for (name, contents) in &files {
        if *name == "result.json" {
            for stale in OPTIONAL_OUTPUTS {
                if !files.iter().any(|(n, _)| n == &stale) {
                    let _ = std::fs::remove_file(args.out.join(stale));
                }
            }
        }
        write_file_atomic(&args.out.join(name), contents)?;
    }
    let names = session.names();
    outln!(
        "status: {:?}, {} edges, {:.1} s, written to {}",
        result.status,
        result.edges.len(),
        result.seconds,
        args.out.display()
    );
    for &(a, b) in &result.edges {
        outln!(
            "  {} -> {}",
            terminal_safe(&names[a]),
            terminal_safe(&names[b])
        );
    }
    if let Some(reason) = &result.method_reason {
        outln!("method: {} ({reason})", result.method.name());
    }
    if let Some(x) = &result.exact {
        outln!("family fits: {}", x.fit_work.describe());
    }
    for choice in &result.device_choices {
        outln!(
            "{} on the {}: {}",
            choice.work,
            choice.chosen,
            terminal_safe(&choice.reason)
        );
    }
    for f in &result.failures {
        errln!("warning: {}", terminal_safe(f));
    }
    if result.status == Status::Failed {
        return Err(CliError(
            "no graph was found (every restart failed, or the exact search could not run); see \
             result.json for the messages"
                .into(),
        ));
    }
    Ok(())
}

/// The family-score cache's file name in the output folder.
pub const SCORE_CACHE_FILE: &str = "score_cache.json";
/// Seconds between saves of the score cache during an exact run.
const CACHE_SAVE_SECONDS: f64 = 30.0;

/// Reads DIR/score_cache.json when it was made for this data, seed and fit settings, and prints
/// how many fits the exact search plans before the work starts.
fn announce_exact(session: &mut Session, cache_path: &Path, dataset: &Dataset, quiet: bool) {
    let mut cached = 0;
    let mut cached_on_gpu = 0;
    // A cache holds one score per family: 1 GiB is far beyond any the exact search writes.
    if let Ok(bytes) = read_file_limited(cache_path, 1 << 30) {
        let text = String::from_utf8_lossy(&bytes);
        match ScoreCache::from_json_for(&text, session.score_cache_key()) {
            Some(cache) => {
                cached = cache.len();
                cached_on_gpu = cache.work().families_on_gpu;
                session.use_score_cache(cache);
            }
            None => errln!(
                "note: {} was made for other data, settings or seed; it is not used and will be \
                 replaced",
                cache_path.display()
            ),
        }
    }
    if quiet {
        return;
    }
    let s = &session.settings().exact;
    let d = dataset.cols();
    let (screening, families) = session.planned_exact_fits();
    // Scores from a GPU carry float32 Ψ2 sums: said, so a CPU run reusing them knows.
    let from_gpu = if cached_on_gpu > 0 {
        format!(", {cached_on_gpu} of them computed on a GPU")
    } else {
        String::new()
    };
    errln!(
        "exact search over {d} variables: at most {} parents from {} candidates each; {screening} \
         screening fits, then about {families} family fits ({} families already in {}{from_gpu})",
        s.max_parents,
        s.candidates.min(d - 1),
        cached,
        cache_path.display()
    );
}

/// A tiers file names each variable once; anything larger than this is not one.
const MAX_TIERS_BYTES: usize = 16 * 1024 * 1024;

/// Output files only some runs write (so a rerun must not leave an older run's copy beside a new
/// result).
const OPTIONAL_OUTPUTS: [&str; 1] = ["edge_probabilities.csv"];

fn save_cache(session: &Session, path: &Path) -> Result<(), CliError> {
    write_file_atomic(path, &session.score_cache().to_json())
}

fn progress_line(s: &Snapshot) {
    if let Some(x) = &s.exact {
        let width = 24;
        let filled = ((s.progress * width as f64).round() as usize).min(width);
        let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
        err!(
            "\r[{bar}] exact {:?} families {:>5} / {:<5} fitted {:>5}  cached {:>5}  {:.0} s, {}   ",
            x.stage,
            x.done,
            x.total,
            x.families_fitted,
            x.cache_hits,
            s.elapsed_seconds,
            time_left(s.remaining_seconds)
        );
        let _ = std::io::stderr().flush();
        return;
    }
    let width = 24;
    let filled = ((s.progress * width as f64).round() as usize).min(width);
    let bar: String = "#".repeat(filled) + &"-".repeat(width - filled);
    let terms = s
        .terms
        .map(|t| format!("bound {:.1}  h {:.3}  γ {:.0}", t.elbo, t.h, t.gamma))
        .unwrap_or_default();
    err!(
        "\r[{bar}] restart {} {:<13} it {:>5}  {terms}  {:.0} s, {}   ",
        s.restart + 1,
        format!("{:?}", s.phase),
        s.iteration,
        s.elapsed_seconds,
        time_left(s.remaining_seconds)
    );
    let _ = std::io::stderr().flush();
}

/// "≤ 12 s left", or "time left not known yet" before anything has been timed.
fn time_left(seconds: Option<f64>) -> String {
    match seconds {
        Some(s) if s.is_finite() => format!("≤ {s:.0} s left"),
        _ => "time left not known yet".into(),
    }
}
