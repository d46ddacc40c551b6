//! `occam discover DATA.csv --out DIR`: learn a causal DAG by continuous Bayesian model selection
//! (CGP-CDE, `--method cgp`), by exact model selection over DAGs (`--method exact`) or both
//! (`--method hybrid`), with a progress line, and write DIR/adjacency.csv, DIR/edges.csv,
//! DIR/graph.dot and DIR/result.json (and, from the exact search, DIR/edge_probabilities.csv and
//! the family-score cache DIR/score_cache.json, which a later run with the same data, seed and fit
//! settings reads instead of refitting; each family is appended to DIR/score_cache.json.journal
//! as soon as it is fitted). A stop (Ctrl-C, SIGTERM, SIGHUP) ends the run at its next safe point,
//! saves the checkpoint, writes the best graph so far with a first line saying it was stopped (or
//! no graph file when there is none yet) and exits with 128 + the signal's number.

use occam::base::names::Choice;
use std::io::Write;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use clap::Args;
use occam::base::names;
use occam::data::{parse_csv, CsvOptions, Dataset, MAX_CSV_BYTES};
use occam::discovery::cgp::BoundKind;
use occam::discovery::knowledge::Knowledge;
use occam::discovery::settings::{Method, Preset};
use occam::engine::output::{determined_note, output_files, stop_note, GRAPH_FILES};
use occam::engine::{now_seconds, RunResult, Session, SessionError, Snapshot, Status};
use occam::runner::gpu_executor::{GpuBackend, PSI2_MIN_WORK};
use occam::runner::{CpuBackend, Pool};

use crate::overrides::Overrides;
use crate::{
    check_writable, ensure_dir, read_file_limited, terminal_safe, write_file_atomic, CliError,
};
use crate::{score_cache_file, signals};

#[derive(Debug, Args)]
#[command(after_help = crate::signals::STOP_HELP)]
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
    /// Save the whole run to FILE before it starts, every 5 seconds, at its end and at a stop, so
    /// `--resume FILE` can go on from there after a stop, a crash or a reboot. The file carries a
    /// checksum: an edited one is refused.
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
    let preset = Preset::parse(args.preset.as_deref().unwrap_or("interactive"))
        .map_err(|e| CliError(e.to_string()))?;
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
    if let (Some(path), Some(text)) = (&args.tiers, &tiers_text) {
        if text.lines().all(|l| l.trim().is_empty()) {
            errln!(
                "note: the tiers file {} is empty: no tier order is imposed",
                path.display()
            );
        }
    }
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

/// Every file this run may write in `args.out` (the graph files, result.json and the exact
/// search's score cache and journal), and the checkpoint.
fn planned_outputs(args: &DiscoverArgs) -> Vec<PathBuf> {
    let cache = args.out.join(SCORE_CACHE_FILE);
    let mut paths: Vec<PathBuf> = GRAPH_FILES
        .iter()
        .chain(["result.json"].iter())
        .map(|name| args.out.join(name))
        .collect();
    paths.push(score_cache_file::journal_path(&cache));
    paths.push(cache);
    paths.extend(args.checkpoint.clone());
    paths
}

/// Whether `a` and `b` name the same file (an output that does not exist yet is no input).
fn same_file(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// Checks, before any work, every path the run will write: the out folder can be written, no
/// output path is a folder, and no input (the data, the tiers file, a checkpoint being resumed
/// into another file) would be overwritten by an output.
fn check_outputs(args: &DiscoverArgs) -> Result<(), CliError> {
    ensure_dir(&args.out)?;
    check_writable(&args.out)?;
    let outputs = planned_outputs(args);
    for path in &outputs {
        if path.is_dir() {
            return Err(CliError(format!(
                "{} is a directory, but this run writes a file there; remove it or choose \
                 another --out (nothing was run)",
                path.display()
            )));
        }
    }
    let mut inputs: Vec<(&str, &Path)> = vec![("the data file", args.data.as_path())];
    if let Some(t) = &args.tiers {
        inputs.push(("the tiers file", t.as_path()));
    }
    for (what, input) in inputs {
        if let Some(out) = outputs.iter().find(|o| same_file(input, o)) {
            return Err(CliError(format!(
                "{what} {} is also where this run writes {}: it would be overwritten; move it \
                 or choose another --out (nothing was run)",
                input.display(),
                out.file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
            )));
        }
    }
    if let (Some(resume), Some(checkpoint)) = (&args.resume, &args.checkpoint) {
        // Saving into the checkpoint one resumes from is the usual way; into an output is not.
        if let Some(out) = outputs
            .iter()
            .filter(|o| !same_file(o, checkpoint))
            .find(|o| same_file(resume, o))
        {
            return Err(CliError(format!(
                "the checkpoint {} is also where this run writes {}; move it or choose another \
                 --out (nothing was run)",
                resume.display(),
                out.display()
            )));
        }
    }
    Ok(())
}

/// Runs `session` to its end (or a stop), saving checkpoints and the exact search's scores on
/// the way, and writes the result files.
fn drive(
    args: &DiscoverArgs,
    mut session: Session,
    dataset: &Dataset,
    resumed: bool,
) -> Result<(), CliError> {
    check_outputs(args)?;
    let cache_path = args.out.join(SCORE_CACHE_FILE);
    let method = session.settings().method;
    let mut journal = None;
    if method.runs_exact() {
        read_score_cache(&mut session, &cache_path, dataset, args.quiet, resumed);
        journal = Some(score_cache_file::Journal::start(
            &cache_path,
            session.score_cache_key().clone(),
            session.score_cache(),
        )?);
    }
    if let Some(path) = &args.checkpoint {
        // Before any work, so a bad path fails now rather than minutes in.
        write_file_atomic(path, &session.checkpoint())?;
    }
    let mut checkpoint_saved_at = now_seconds();
    let mut backend_name = session.backend().name();
    if !args.quiet {
        errln!("computing on {}", terminal_safe(&backend_name));
    }
    // Ctrl-C, SIGTERM and SIGHUP stop the run and write what it has. The flag is answered
    // inside the unit of work being done (within one bound evaluation).
    signals::stop_on_signals(session.stop_flag());
    while !session.is_finished() {
        // While families are fitted, one unit per step, so that each unit's scores reach the
        // journal before the next begins.
        let budget = if session.fitting_families() {
            0.0
        } else {
            0.25
        };
        let snapshot = session.step(budget);
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
        // Each family's score goes to disk as soon as it is fitted: a killed run loses at most
        // the fits in flight.
        if let Some(journal) = journal.as_mut() {
            journal.append_new(session.score_cache())?;
        }
        if let Some(path) = &args.checkpoint {
            if now_seconds() - checkpoint_saved_at > CHECKPOINT_SECONDS {
                write_file_atomic(path, &session.checkpoint())?;
                checkpoint_saved_at = now_seconds();
            }
        }
    }
    // At the end, and at a stop: a stopped run's checkpoint goes on from the stop.
    if let Some(path) = &args.checkpoint {
        write_file_atomic(path, &session.checkpoint())?;
    }
    if let Some(journal) = journal {
        journal.fold_into(&cache_path, session.score_cache())?;
    }
    let stopped_by = signals::received();
    if !args.quiet {
        errln!();
    }
    let result = session.result();
    let written_to = write_result(&args.out, &result)?;
    let names = session.names();
    if let Some(stop) = &result.stopped {
        let by = stopped_by.map_or_else(String::new, |s| format!(" by {}", signals::name(s)));
        let files = if result.has_graph() {
            "the best graph so far (each graph file says so in its first line)"
        } else {
            "no graph file, as there was no graph yet; result.json says so"
        };
        errln!(
            "stopped{by} {}: wrote {files} to {}",
            terminal_safe(&stop_note(stop)),
            written_to.display()
        );
        if let Some(path) = &args.checkpoint {
            errln!(
                "the checkpoint {} holds the run as it stopped: go on with --resume {}",
                path.display(),
                path.display()
            );
        }
    }
    outln!(
        "status: {:?}, {} edges, {:.1} s, written to {}",
        result.status,
        result.edges.len(),
        result.seconds,
        written_to.display()
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
    if let Some(note) = determined_note(&result) {
        errln!("note: {}", terminal_safe(&note));
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

/// Writes the result's files into `out`, each whole and renamed into place, result.json last:
/// the folder holds a complete old result or a complete new one, and a graph file an older run
/// left that this one does not write is removed before result.json commits the new result. If
/// `out` cannot take them (a disk that filled up, a folder removed during the run), they go to a
/// fresh folder under the system's temporary folder instead. Returns the folder written.
fn write_result(out: &Path, result: &RunResult) -> Result<PathBuf, CliError> {
    let files = output_files(result);
    let write_into = |dir: &Path| -> Result<(), CliError> {
        for (name, contents) in &files {
            if *name == "result.json" {
                for stale in GRAPH_FILES {
                    if !files.iter().any(|(n, _)| n == &stale) {
                        let _ = std::fs::remove_file(dir.join(stale));
                    }
                }
            }
            write_file_atomic(&dir.join(name), contents)?;
        }
        Ok(())
    };
    match write_into(out) {
        Ok(()) => Ok(out.to_path_buf()),
        Err(first) => {
            let fallback = std::env::temp_dir().join(format!(
                "occam-result-{}-{}",
                std::process::id(),
                humantime::format_rfc3339_seconds(std::time::SystemTime::now())
                    .to_string()
                    .replace(':', "-")
            ));
            let saved = std::fs::create_dir_all(&fallback)
                .map_err(|e| CliError(format!("cannot create {}: {e}", fallback.display())))
                .and_then(|()| write_into(&fallback));
            match saved {
                Ok(()) => {
                    errln!(
                        "warning: {first}; the result was written to {} instead",
                        fallback.display()
                    );
                    Ok(fallback)
                }
                Err(second) => Err(CliError(format!(
                    "{first}; writing it to {} failed too: {second}",
                    fallback.display()
                ))),
            }
        }
    }
}

/// The family-score cache's file name in the output folder.
pub const SCORE_CACHE_FILE: &str = "score_cache.json";

/// Gives the session the scores of DIR/score_cache.json and its journal that were made for this
/// data, seed and fit settings (saying why any part is not used); then, unless `quiet`, says
/// how many a resumed run took from them, or how many fits a new run plans.
fn read_score_cache(
    session: &mut Session,
    cache_path: &Path,
    dataset: &Dataset,
    quiet: bool,
    resumed: bool,
) {
    let read = score_cache_file::read(cache_path, session.score_cache_key());
    for note in &read.notes {
        errln!("note: {}", terminal_safe(note));
    }
    let (mut cached, mut cached_on_gpu, mut taken) = (0, 0, 0);
    if let Some(cache) = read.cache {
        cached = cache.len();
        cached_on_gpu = cache.work().families_on_gpu;
        taken = session.merge_score_cache(&cache);
    }
    if quiet {
        return;
    }
    if resumed {
        if taken > 0 {
            errln!(
                "{taken} family scores the checkpoint did not hold taken from {}",
                cache_path.display()
            );
        }
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
