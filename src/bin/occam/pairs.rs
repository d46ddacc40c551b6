//! `occam pairs DIR`: the two-variable direction test on every pair of a folder laid out like the
//! Tübingen cause-effect pairs (pairNNNN.csv with columns x,y, and truth.csv with
//! pair,direction,weight,...).
//!
//! With the collapsed bound (the default) each pair is scored as the exact search scores a
//! two-variable data set: evidence(X → Y) = F(X | ∅) + F(Y | {X}) with the family score of
//! `discovery::family`, so `occam pairs` and `occam discover --method exact` on the pair agree.
//!
//! Each decision is printed as it is made (one JSON line per pair on stdout, a progress line on
//! stderr); a stop ends the fits in flight, drops them, and prints the summary of the pairs
//! decided so far.

use crate::{read_file_limited, signals, terminal_safe, CliError};
use clap::{Args, ValueEnum};
use nalgebra::DMatrix;
use occam::base::heartbeat::{self, StopFlag};
use occam::data::{dequantise, parse_csv, standardise, CsvOptions, MAX_CSV_BYTES};
use occam::discovery::bivariate::{
    subsample_rows, Direction, DirectionEvidence, PairTest, UncollapsedFit,
};
use occam::discovery::family::FamilyScoreSettings;
use occam::discovery::settings::{
    MAX_INDUCING_POINTS, MAX_PHASE_ITERATIONS, MAX_RESTARTS, MAX_THREADS,
};
use occam::gp::gp_cde::{GpCdeSettings, LatentKind};
use occam::runner::{available_threads, Job, Outcome as JobOutcome, Pool};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

use std::time::Instant;

/// clap (`ValueEnum`) and the summary (`IntoStaticStr`) spell its values alike: lowercase.
#[derive(Debug, Clone, Copy, ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum BoundArg {
    /// Collapsed bound with psi-statistics (Adam then L-BFGS).
    Collapsed,
    /// Uncollapsed SVGP bound (natural gradients and Adam).
    Uncollapsed,
    /// Both, keeping each component's higher bound (each component is its own model, so the best
    /// of two procedures is a valid bound on its evidence).
    Both,
}

/// clap (`ValueEnum`) and the summary (`IntoStaticStr`) spell its values alike: lowercase.
#[derive(Debug, Clone, Copy, ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum RepeatsArg {
    /// Spread each repeated value uniformly over its cell (data::dequantise), so binary columns,
    /// whole numbers and point masses are scored as binned data, not as spikes.
    Dequantise,
    /// Use the values as recorded (repeats only raise the noise floor to Δ²/12).
    Keep,
}

/// The defaults of restarts, rows, M, the fits' steps and the tie were chosen by accuracy per
/// second on the Tübingen pairs (BENCHMARKS.md, issue 10): a typical pair is decided in seconds.
#[derive(Debug, Args)]
#[command(after_help = crate::signals::STOP_HELP)]
pub struct PairsArgs {
    /// Folder with pairNNNN.csv files and truth.csv.
    pub dir: PathBuf,
    /// Restarts per model component; the best bound of each component is kept.
    #[arg(long, default_value_t = 3)]
    pub restarts: usize,
    /// Use at most this many rows of a pair (a seeded random subset, the same for x and y).
    #[arg(long, default_value_t = 400)]
    pub max_rows: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Which evidence bound scores each model.
    #[arg(long, value_enum, default_value_t = BoundArg::Collapsed)]
    pub bound: BoundArg,
    /// Inducing points M of each model (capped at the rows used).
    #[arg(long, default_value_t = 40)]
    pub inducing: usize,
    /// Collapsed bound: most Adam steps before L-BFGS (Adam stops early once the bound beats the
    /// noise model).
    #[arg(long, default_value_t = 300)]
    pub adam_steps: usize,
    /// Collapsed bound: most L-BFGS iterations.
    #[arg(long, default_value_t = 300)]
    pub lbfgs_iterations: usize,
    /// Uncollapsed bound: most optimisation steps (natural gradients on q(u), Adam on the rest;
    /// fewer when the bound plateaus).
    #[arg(long, default_value_t = 1500)]
    pub svgp_steps: usize,
    /// How repeated values are treated.
    #[arg(long, value_enum, default_value_t = RepeatsArg::Dequantise)]
    pub repeats: RepeatsArg,
    /// An evidence gap of at most this many nats is a tie ("cannot decide"), counted apart.
    #[arg(long, default_value_t = 0.5)]
    pub tie_nats: f64,
    /// Pairs run in parallel (default: one per core).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Only run pairs whose name contains this text (e.g. pair001).
    #[arg(long)]
    pub only: Option<String>,
}

/// One row of truth.csv.
#[derive(Debug, Clone)]
struct PairTruth {
    name: String,
    forward: bool,
    weight: f64,
}

fn read_truth(dir: &Path) -> Result<Vec<PairTruth>, CliError> {
    let path = dir.join("truth.csv");
    let bytes = read_file_limited(&path, 16 * 1024 * 1024)?;
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(&bytes[..]);
    let headers = reader
        .headers()
        .map_err(|e| CliError(format!("{}: {e}", path.display())))?
        .clone();
    let column = |name: &str| {
        headers.iter().position(|h| h == name).ok_or_else(|| {
            CliError(format!(
                "{}: no column '{name}' in the header",
                path.display()
            ))
        })
    };
    let (c_pair, c_dir, c_weight) = (column("pair")?, column("direction")?, column("weight")?);
    let mut truth = Vec::new();
    for record in reader.records() {
        let record = record.map_err(|e| CliError(format!("{}: {e}", path.display())))?;
        let line = record.position().map_or(0, |p| p.line());
        let field = |k: usize| record.get(k).unwrap_or("");
        let forward = match field(c_dir) {
            "x->y" => true,
            "y->x" => false,
            other => {
                return Err(CliError(format!(
                    "{} line {line}: direction '{other}' is neither x->y nor y->x",
                    path.display()
                )))
            }
        };
        let weight: f64 = field(c_weight)
            .parse()
            .ok()
            .filter(|w: &f64| w.is_finite() && *w >= 0.0)
            .ok_or_else(|| {
                CliError(format!(
                    "{} line {line}: weight '{}' is not a finite number ≥ 0",
                    path.display(),
                    terminal_safe(field(c_weight))
                ))
            })?;
        let name = field(c_pair);
        // A pair is a file inside this folder: no separators, no `..`, nothing absolute.
        let inside = !name.is_empty()
            && name != "."
            && name != ".."
            && !name.contains(['/', '\\', '\0'])
            && !Path::new(name).is_absolute();
        if !inside {
            return Err(CliError(format!(
                "{} line {line}: pair name '{}' is not a file name inside the folder",
                path.display(),
                terminal_safe(name)
            )));
        }
        truth.push(PairTruth {
            name: name.to_string(),
            forward,
            weight,
        });
    }
    Ok(truth)
}

/// Reads a pair's two columns through the data layer, subsamples rows, treats repeated values as
/// asked, standardises.
fn read_pair(
    dir: &Path,
    name: &str,
    args: &PairsArgs,
    seed: u64,
) -> Result<(Vec<f64>, Vec<f64>, usize), CliError> {
    let path = dir.join(format!("{name}.csv"));
    let bytes = read_file_limited(&path, MAX_CSV_BYTES)?;
    let parsed = parse_csv(&bytes, &CsvOptions::default())
        .map_err(|e| CliError(format!("{}: {e}", path.display())))?;
    let d = parsed.dataset;
    if d.cols() != 2 {
        return Err(CliError(format!(
            "{}: expected 2 columns, found {}",
            path.display(),
            d.cols()
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let rows = subsample_rows(d.rows(), args.max_rows, &mut rng);
    let mut pick = |c: usize| -> Vec<f64> {
        let values: Vec<f64> = rows.iter().map(|&r| d.column(c)[r]).collect();
        match args.repeats {
            // Standardised first, so the gaps between values cannot overflow at any scale
            // (dequantising commutes with the affine map); then again, to unit spread.
            RepeatsArg::Dequantise => standardise(&dequantise(&standardise(&values), &mut rng)),
            RepeatsArg::Keep => standardise(&values),
        }
    };
    let x = pick(0);
    let y = pick(1);
    Ok((x, y, d.rows()))
}

struct Outcome {
    truth: PairTruth,
    rows_used: usize,
    rows_total: usize,
    evidence: Result<DirectionEvidence, String>,
    seconds: f64,
}

/// How each pair is scored, from the command's flags.
fn pair_test(args: &PairsArgs) -> PairTest {
    // The collapsed test is the exact search's D = 2 case: each component is a family score
    // F(i | S) (discovery::family), floors included.
    let family = FamilyScoreSettings {
        restarts: args.restarts,
        adam_steps: args.adam_steps,
        lbfgs_iterations: args.lbfgs_iterations,
        ..FamilyScoreSettings::with_inducing(args.inducing)
    };
    let uncollapsed = UncollapsedFit {
        variable: GpCdeSettings {
            inducing: args.inducing,
            samples: 10,
            latent: LatentKind::Free,
            ..GpCdeSettings::default()
        },
        max_steps: args.svgp_steps,
        ..UncollapsedFit::default()
    };
    PairTest {
        collapsed: matches!(args.bound, BoundArg::Collapsed | BoundArg::Both).then_some(family),
        uncollapsed: matches!(args.bound, BoundArg::Uncollapsed | BoundArg::Both)
            .then_some(uncollapsed),
        restarts: args.restarts,
    }
}

/// Each pair's own seed, so results do not depend on how the pairs are batched.
fn pair_seed(args: &PairsArgs, index: usize) -> u64 {
    args.seed.wrapping_add(1_000 * index as u64)
}

/// Notes the pair files of `dir` (pairNNNN.csv) that truth.csv does not list: they are not run.
fn note_unlisted_pair_files(dir: &Path, truth: &[PairTruth]) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let listed: std::collections::HashSet<&str> = truth.iter().map(|t| t.name.as_str()).collect();
    let mut unlisted: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pair") && n.ends_with(".csv"))
        .filter(|n| !listed.contains(n.trim_end_matches(".csv")))
        .collect();
    if unlisted.is_empty() {
        return;
    }
    unlisted.sort();
    let shown: Vec<String> = unlisted.iter().take(10).map(|n| terminal_safe(n)).collect();
    errln!(
        "note: {} pair file{} in {} {} not listed in truth.csv and {} not run: {}{}",
        unlisted.len(),
        if unlisted.len() == 1 { "" } else { "s" },
        dir.display(),
        if unlisted.len() == 1 { "is" } else { "are" },
        if unlisted.len() == 1 { "is" } else { "are" },
        shown.join(", "),
        if unlisted.len() > 10 { ", …" } else { "" }
    );
}

/// Reads pair `k` and decides its direction on the calling thread (a pool's thread: the fit's
/// own parallel pieces spread over the pool).
fn evaluate_one(args: &PairsArgs, k: usize, truth: &PairTruth) -> Outcome {
    let seed = pair_seed(args, k);
    let (rows_used, rows_total, evidence, seconds) =
        match read_pair(&args.dir, &truth.name, args, seed) {
            Ok((x, y, total)) => {
                let job = Job::Pair {
                    x: Cow::Borrowed(&x),
                    y: Cow::Borrowed(&y),
                    test: pair_test(args),
                    seed,
                };
                match job.run(&DMatrix::zeros(0, 0)) {
                    JobOutcome::Pair { evidence, seconds } => {
                        (x.len(), total, evidence.map_err(|e| e.to_string()), seconds)
                    }
                    other => (
                        x.len(),
                        total,
                        Err(format!("the pair's fit came back as {}", other.kind())),
                        0.0,
                    ),
                }
            }
            Err(e) => (0, 0, Err(e.0), 0.0),
        };
    Outcome {
        truth: truth.clone(),
        rows_used,
        rows_total,
        evidence,
        seconds,
    }
}

impl Outcome {
    /// The true direction as written: "x->y" or "y->x".
    fn truth_words(&self) -> &'static str {
        if self.truth.forward {
            "x->y"
        } else {
            "y->x"
        }
    }

    /// evidence(x→y) − evidence(y→x), when both are known.
    fn difference(&self) -> Option<f64> {
        self.evidence
            .as_ref()
            .ok()
            .and_then(DirectionEvidence::difference)
    }

    /// The decision, None when the pair could not be read or a component failed throughout.
    fn decision(&self, tie_nats: f64) -> Option<Direction> {
        self.evidence.as_ref().ok()?.decide(tie_nats)
    }
}

/// The decision's words: (decided, mark) as "x->y"/"y->x"/"tie" and "correct"/"wrong"/"tie".
fn decision_words(o: &Outcome, decision: Direction) -> (&'static str, &'static str) {
    match decision {
        Direction::Tie => ("tie", "tie"),
        Direction::XToY => ("x->y", if o.truth.forward { "correct" } else { "wrong" }),
        Direction::YToX => ("y->x", if o.truth.forward { "wrong" } else { "correct" }),
    }
}

/// One pair's JSON line on stdout: `pair`, `truth`, `decided` ("x->y", "y->x", "tie" or null),
/// `outcome` ("correct", "wrong", "tie", "undecided" or "error"), `difference_nats`
/// (evidence(x→y) − evidence(y→x), or null), `rows_used`, `rows_total`, `seconds`, and `error`
/// when the pair could not be read or fitted.
fn report_json(o: &Outcome, tie_nats: f64) -> String {
    let (truth, diff) = (o.truth_words(), o.difference());
    let (decided, outcome, error) = match (&o.evidence, o.decision(tie_nats)) {
        (Err(e), _) => (None, "error", Some(e.clone())),
        (Ok(_), Some(d)) => {
            let (decided, mark) = decision_words(o, d);
            (Some(decided), mark, None)
        }
        (Ok(_), None) => (
            None,
            "undecided",
            Some("a model component failed in every restart".to_string()),
        ),
    };
    let line = PairLine {
        pair: &o.truth.name,
        truth,
        decided,
        outcome,
        difference_nats: diff,
        rows_used: o.rows_used,
        rows_total: o.rows_total,
        seconds: o.seconds,
        error,
    };
    serde_json::to_string(&line).expect("a pair's line serialises")
}

/// [`report_json`]'s fields, in the order they are printed.
#[derive(serde::Serialize)]
struct PairLine<'a> {
    pair: &'a str,
    truth: &'static str,
    decided: Option<&'static str>,
    outcome: &'static str,
    difference_nats: Option<f64>,
    rows_used: usize,
    rows_total: usize,
    seconds: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// One pair's progress line on stderr, for a person watching.
fn report_line(o: &Outcome, tie_nats: f64, done: usize, total: usize) -> String {
    let (truth, diff) = (o.truth_words(), o.difference());
    let head = format!("[{done}/{total}] {}  truth {truth}", o.truth.name);
    match (&o.evidence, o.decision(tie_nats), diff) {
        (Err(e), _, _) => format!("{head}  error: {e}"),
        (Ok(_), Some(decision), Some(diff)) => {
            let (decided, mark) = decision_words(o, decision);
            format!(
                "{head}  decided {decided}  {mark:<7}  evidence(x->y) - evidence(y->x) = {diff:+.2} nats  rows {}/{}  {:.1} s",
                o.rows_used, o.rows_total, o.seconds
            )
        }
        (Ok(_), _, _) => format!(
            "{head}  undecided: a model component failed in every restart  {:.1} s",
            o.seconds
        ),
    }
}

/// Accuracy over the pairs decided, and with each tie scored ½ (a coin flip), plain and weighted.
#[derive(Debug, Default, PartialEq)]
struct Tally {
    pairs: usize,
    decided: usize,
    correct: usize,
    ties: usize,
    failed: usize,
    weight_decided: f64,
    weight_correct: f64,
    weight_ties: f64,
    weight_all: f64,
}

impl Tally {
    fn add(&mut self, decision: Option<Direction>, forward: bool, weight: f64) {
        self.pairs += 1;
        self.weight_all += weight;
        match decision {
            None => self.failed += 1,
            Some(Direction::Tie) => {
                self.ties += 1;
                self.weight_ties += weight;
            }
            Some(d) => {
                self.decided += 1;
                self.weight_decided += weight;
                if (d == Direction::XToY) == forward {
                    self.correct += 1;
                    self.weight_correct += weight;
                }
            }
        }
    }

    fn summary(&self, seconds: f64) -> serde_json::Value {
        let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
        // A pair whose models failed counts as decided wrongly in the "ties as ½" figures.
        serde_json::json!({
            "pairs": self.pairs,
            "accuracy": ratio(self.correct as f64, (self.decided + self.failed) as f64),
            "weighted_accuracy": ratio(self.weight_correct, self.weight_all - self.weight_ties),
            "ties": self.ties,
            "accuracy_ties_half": ratio(self.correct as f64 + 0.5 * self.ties as f64, self.pairs as f64),
            "weighted_accuracy_ties_half": ratio(self.weight_correct + 0.5 * self.weight_ties, self.weight_all),
            "seconds": seconds,
        })
    }
}

pub fn run(args: &PairsArgs) -> Result<(), CliError> {
    let started = Instant::now();
    if !(args.tie_nats.is_finite() && args.tie_nats >= 0.0) {
        return Err(CliError(format!(
            "--tie-nats must be a number of nats ≥ 0, not {}",
            args.tie_nats
        )));
    }
    if args.restarts == 0 || args.inducing == 0 {
        return Err(CliError(format!(
            "--restarts and --inducing must be at least 1 (got {} and {})",
            args.restarts, args.inducing
        )));
    }
    if args.max_rows < occam::data::MIN_ROWS {
        return Err(CliError(format!(
            "--max-rows must be at least {}, got {}",
            occam::data::MIN_ROWS,
            args.max_rows
        )));
    }
    // The same limits as discover's settings, named when exceeded.
    for (flag, value, limit) in [
        ("--restarts", args.restarts, MAX_RESTARTS),
        ("--inducing", args.inducing, MAX_INDUCING_POINTS),
        ("--adam-steps", args.adam_steps, MAX_PHASE_ITERATIONS),
        (
            "--lbfgs-iterations",
            args.lbfgs_iterations,
            MAX_PHASE_ITERATIONS,
        ),
        ("--svgp-steps", args.svgp_steps, MAX_PHASE_ITERATIONS),
        ("--threads", args.threads.unwrap_or(1), MAX_THREADS),
    ] {
        if value > limit {
            return Err(CliError(format!(
                "{flag} must be at most {limit}, got {value}"
            )));
        }
    }
    if args.threads == Some(0) {
        return Err(CliError("--threads must be at least 1".into()));
    }
    let mut truth = read_truth(&args.dir)?;
    let truth_path = args.dir.join("truth.csv");
    if truth.is_empty() {
        return Err(CliError(format!(
            "{} lists no pairs (only its header): add one line per pair (pair,direction,weight)",
            truth_path.display()
        )));
    }
    note_unlisted_pair_files(&args.dir, &truth);
    if let Some(filter) = &args.only {
        truth.retain(|t| t.name.contains(filter.as_str()));
        if truth.is_empty() {
            return Err(CliError(format!(
                "no pair in {} has a name containing --only '{}'",
                truth_path.display(),
                terminal_safe(filter)
            )));
        }
    }
    let threads = args
        .threads
        .unwrap_or_else(available_threads)
        .clamp(1, truth.len());
    let pool = Pool::new(threads).map_err(|e| CliError(e.to_string()))?;
    // Each decision is printed as soon as it is made; a stop (Ctrl-C, SIGTERM, SIGHUP) ends the
    // fits in flight within a bound evaluation, drops them, and keeps every decision made.
    let stop = StopFlag::new();
    signals::stop_on_signals(stop.clone());
    let indexed: Vec<(usize, &PairTruth)> = truth.iter().enumerate().collect();
    let (sender, decisions) = std::sync::mpsc::channel::<Outcome>();
    let mut outcomes = Vec::with_capacity(indexed.len());
    std::thread::scope(|scope| {
        let (pool, stop, indexed) = (&pool, &stop, &indexed);
        scope.spawn(move || {
            let _watch = heartbeat::watch(Some(stop.clone()));
            pool.map(indexed, |&(k, t)| {
                if stop.is_raised() {
                    return;
                }
                let outcome = evaluate_one(args, k, t);
                // A fit the stop cut short is no decision.
                if !stop.is_raised() {
                    let _ = sender.send(outcome);
                }
            });
            drop(sender);
        });
        for outcome in decisions {
            outcomes.push(outcome);
            let o = outcomes.last().expect("just pushed");
            outln!("{}", report_json(o, args.tie_nats));
            errln!(
                "{}",
                terminal_safe(&report_line(
                    o,
                    args.tie_nats,
                    outcomes.len(),
                    indexed.len()
                ))
            );
        }
    });

    let mut tally = Tally::default();
    for o in &outcomes {
        tally.add(o.decision(args.tie_nats), o.truth.forward, o.truth.weight);
    }
    let settings = serde_json::json!({
        "bound": <&str>::from(args.bound),
        "repeats": <&str>::from(args.repeats),
        "tie_nats": args.tie_nats,
        "svgp_steps": args.svgp_steps,
        "restarts": args.restarts,
        "max_rows": args.max_rows,
        "inducing": args.inducing,
        "adam_steps": args.adam_steps,
        "lbfgs_iterations": args.lbfgs_iterations,
        "seed": args.seed,
        "threads": threads,
    });
    outln!("{}", serde_json::json!({ "settings": settings }));
    let mut summary = tally.summary(started.elapsed().as_secs_f64());
    if let Some(signal) = signals::received() {
        // The summary of the pairs decided before the stop, said to be that.
        summary["stopped"] = serde_json::Value::Bool(true);
        summary["pairs_planned"] = serde_json::json!(truth.len());
        errln!(
            "stopped by {}: {} of {} pairs decided; the summary counts those only",
            signals::name(signal),
            outcomes.len(),
            truth.len()
        );
    }
    outln!("{summary}");
    // A pair that could not be read or fitted is an error of the run, not a quiet gap in it.
    let failed: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.decision(args.tie_nats).is_none())
        .map(|o| o.truth.name.as_str())
        .collect();
    if !failed.is_empty() {
        let shown: Vec<String> = failed.iter().take(10).map(|n| terminal_safe(n)).collect();
        return Err(CliError(format!(
            "{} of {} pairs could not be read or fitted ({}{}); the summary counts them as \
             failed",
            failed.len(),
            outcomes.len(),
            shown.join(", "),
            if failed.len() > 10 { ", …" } else { "" }
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ties_count_apart_and_as_half_a_pair() {
        let mut t = Tally::default();
        t.add(Some(Direction::XToY), true, 1.0); // correct
        t.add(Some(Direction::XToY), false, 0.5); // wrong
        t.add(Some(Direction::Tie), true, 0.25); // tie
        t.add(None, true, 0.25); // failed: not correct
        let s = t.summary(1.0);
        assert_eq!(s["ties"], 1);
        assert_eq!(s["pairs"], 4);
        assert!((s["accuracy"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12);
        assert!((s["weighted_accuracy"].as_f64().unwrap() - 1.0 / 1.75).abs() < 1e-12);
        assert!((s["accuracy_ties_half"].as_f64().unwrap() - 1.5 / 4.0).abs() < 1e-12);
        assert!((s["weighted_accuracy_ties_half"].as_f64().unwrap() - 1.125 / 2.0).abs() < 1e-12);
    }
}
