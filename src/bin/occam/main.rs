//! `occam`: the native command-line driver of the Occam engine.
//!
//! Every subcommand returns a [`CliError`] instead of panicking; `main` prints it and exits with a
//! non-zero status (1 for bad input or a failed run; clap uses 2 for a malformed command line;
//! 128 + n for a run signal n stopped, [`signals`]).

/// Writes to stdout or stderr without ever panicking: a closed pipe (`occam check … | head`)
/// ends the output, not the run, whose files are still written. `println!` would panic there.
macro_rules! outln {
    () => { $crate::emit(&mut std::io::stdout(), format_args!(""), true) };
    ($($arg:tt)*) => { $crate::emit(&mut std::io::stdout(), format_args!($($arg)*), true) };
}
/// [`outln!`] on stderr.
macro_rules! errln {
    () => { $crate::emit(&mut std::io::stderr(), format_args!(""), true) };
    ($($arg:tt)*) => { $crate::emit(&mut std::io::stderr(), format_args!($($arg)*), true) };
}
/// [`errln!`] without the newline (progress lines that rewrite themselves).
macro_rules! err {
    ($($arg:tt)*) => { $crate::emit(&mut std::io::stderr(), format_args!($($arg)*), false) };
}

mod bench;
mod check;
mod discover;
mod generate;
mod overrides;
mod pairs;
mod score;
mod score_cache_file;
mod signals;

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Bayesian causal discovery with Gaussian-process conditional density estimators.
#[derive(Debug, Parser)]
#[command(name = "occam", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read and validate a CSV file; print its shape, column names, statistics and any problems.
    Check(check::CheckArgs),
    /// Write a synthetic data set with a known causal graph (DIR/data.csv and DIR/truth.csv).
    Generate(generate::GenerateArgs),
    /// Compare a predicted adjacency matrix with the true one (prints one JSON object).
    Score(score::ScoreArgs),
    /// Run discovery on the shared benchmark sets and write the scores into BENCHMARKS.md.
    Bench(bench::BenchArgs),
    /// Learn a causal DAG from a CSV file (CGP-CDE) and write the graph and a run record.
    Discover(discover::DiscoverArgs),
    /// Decide the causal direction of every pair in a folder by comparing model evidence.
    Pairs(pairs::PairsArgs),
}

/// A failure to report to the user: one message, already phrased for them.
#[derive(Debug)]
pub struct CliError(pub String);

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Reads a whole file, refusing one larger than `limit` bytes before reading it.
pub fn read_file_limited(path: &Path, limit: usize) -> Result<Vec<u8>, CliError> {
    let shown = path.display();
    let meta =
        std::fs::metadata(path).map_err(|e| CliError(format!("cannot open {shown}: {e}")))?;
    if meta.is_dir() {
        return Err(CliError(format!("{shown} is a directory, not a file")));
    }
    if meta.len() > limit as u64 {
        // Let the data layer phrase the refusal, so the CLI and the app say the same thing.
        let err = occam::data::DataError::TooLarge {
            bytes: usize::try_from(meta.len()).unwrap_or(usize::MAX),
            limit,
        };
        return Err(CliError(format!("{shown}: {err}")));
    }
    // The size in the metadata is not enough: /dev/zero, a pipe or a file still growing report
    // 0 or less than they hold, so the read itself stops one byte past the limit.
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| CliError(format!("cannot open {shown}: {e}")))?;
    let mut bytes = Vec::new();
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| CliError(format!("cannot read {shown}: {e}")))?;
    if bytes.len() > limit {
        let err = occam::data::DataError::TooLarge {
            bytes: bytes.len(),
            limit,
        };
        return Err(CliError(format!(
            "{shown}: {err} (it holds more than the limit; it was not read to its end)"
        )));
    }
    Ok(bytes)
}

/// Writes formatted text and optionally a newline, ignoring errors: output is best effort once the
/// reader has gone (a closed pipe), and the run's results go to files, not to this stream.
pub fn emit(out: &mut impl std::io::Write, args: std::fmt::Arguments<'_>, newline: bool) {
    let _ = out.write_fmt(args);
    if newline {
        let _ = out.write_all(b"\n");
    }
}

/// `text` with every control character (NUL, ESC, CR, LF, tab, DEL, C1) written as a Rust-style
/// escape such as `\u{1b}`, so a name or cell from a file cannot move the cursor, recolour or
/// clear the user's terminal.
pub fn terminal_safe(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// Creates `dir` (and parents) for output.
pub fn ensure_dir(dir: &PathBuf) -> Result<(), CliError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError(format!("cannot create directory {}: {e}", dir.display())))
}

/// Writes `contents` to a hidden temporary file beside `path`, then renames it over `path`, so a
/// reader (or a run killed half-way) never sees a half-written file.
pub fn write_file_atomic(path: &Path, contents: &str) -> Result<(), CliError> {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    write_file(&tmp, contents)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        CliError(format!("cannot write {}: {e}", path.display()))
    })
}

/// Checks that files can be created in `dir` (by creating and removing a probe), so a run does
/// not spend minutes only to fail at the end.
pub fn check_writable(dir: &Path) -> Result<(), CliError> {
    let probe = dir.join(format!(".occam-write-check.{}", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|()| std::fs::remove_file(&probe))
        .map_err(|e| {
            CliError(format!(
                "cannot write into {}: {e}; nothing was run",
                dir.display()
            ))
        })
}

/// Writes `contents` to `path`, naming the path on failure.
pub fn write_file(path: &Path, contents: &str) -> Result<(), CliError> {
    std::fs::write(path, contents)
        .map_err(|e| CliError(format!("cannot write {}: {e}", path.display())))
}

fn main() -> ExitCode {
    occam::base::heap::reuse_freed_memory();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Bench(args) => bench::run(&args),
        Command::Check(args) => check::run(&args),
        Command::Discover(args) => discover::run(&args),
        Command::Generate(args) => generate::run(&args),
        Command::Score(args) => score::run(&args),
        Command::Pairs(args) => pairs::run(&args),
    };
    match result {
        // A command a signal stopped wrote what it had; its status says it did not finish.
        Ok(()) => match signals::received() {
            Some(signal) => ExitCode::from(signals::exit_status(signal)),
            None => ExitCode::SUCCESS,
        },
        Err(e) => {
            // Messages quote names and cells from the user's files.
            errln!("error: {}", terminal_safe(&e.0));
            signals::received().map_or(ExitCode::FAILURE, |signal| {
                ExitCode::from(signals::exit_status(signal))
            })
        }
    }
}
