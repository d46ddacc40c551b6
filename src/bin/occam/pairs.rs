//! `occam pairs DIR`: the two-variable direction test on every pair of a folder laid out like the
//! Tübingen cause-effect pairs (pairNNNN.csv with columns x,y, and truth.csv with
//! pair,direction,weight,...).

use crate::{read_file_limited, CliError};
use clap::{Args, ValueEnum};
use occam::data::{parse_csv, standardise, CsvOptions, MAX_CSV_BYTES};
use occam::discovery::bivariate::{direction_evidence, subsample_rows, DirectionEvidence};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum BoundArg {
    /// Collapsed bound with psi-statistics (Adam then L-BFGS).
    Collapsed,
    /// Uncollapsed SVGP bound (natural gradients and Adam).
    Uncollapsed,
}

#[derive(Debug, Args)]
pub struct PairsArgs {
    /// Folder with pairNNNN.csv files and truth.csv.
    pub dir: PathBuf,
    /// Restarts per model component; the best bound of each component is kept.
    #[arg(long, default_value_t = 3)]
    pub restarts: usize,
    /// Use at most this many rows of a pair (a seeded random subset, the same for x and y).
    #[arg(long, default_value_t = 1000)]
    pub max_rows: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Which evidence bound scores each model.
    #[arg(long, value_enum, default_value_t = BoundArg::Collapsed)]
    pub bound: BoundArg,
    /// Inducing points M of each model (capped at the rows used).
    #[arg(long, default_value_t = 200)]
    pub inducing: usize,
    /// Collapsed bound: most Adam steps before L-BFGS (Adam stops early once the bound beats the
    /// noise model). Uncollapsed bound: most optimisation steps.
    #[arg(long, default_value_t = 5000)]
    pub adam_steps: usize,
    /// Collapsed bound: most L-BFGS iterations.
    #[arg(long, default_value_t = 10_000)]
    pub lbfgs_iterations: usize,
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
        let weight: f64 = field(c_weight).parse().map_err(|_| {
            CliError(format!(
                "{} line {line}: weight '{}' is not a number",
                path.display(),
                field(c_weight)
            ))
        })?;
        truth.push(PairTruth {
            name: field(c_pair).to_string(),
            forward,
            weight,
        });
    }
    Ok(truth)
}

/// Reads a pair's two columns through the data layer, subsamples rows, standardises.
fn read_pair(
    dir: &Path,
    name: &str,
    max_rows: usize,
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
    let rows = subsample_rows(d.rows(), max_rows, &mut rng);
    let pick = |c: usize| -> Vec<f64> { rows.iter().map(|&r| d.column(c)[r]).collect() };
    Ok((standardise(&pick(0)), standardise(&pick(1)), d.rows()))
}

struct Outcome {
    truth: PairTruth,
    rows_used: usize,
    rows_total: usize,
    evidence: Result<DirectionEvidence, String>,
    seconds: f64,
}

fn evaluate(args: &PairsArgs, index: usize, truth: &PairTruth) -> Outcome {
    let start = Instant::now();
    // Each pair gets its own seed, so results do not depend on thread scheduling.
    let seed = args.seed.wrapping_add(1_000 * index as u64);
    let (rows_used, rows_total, evidence) =
        match read_pair(&args.dir, &truth.name, args.max_rows, seed) {
            Ok((x, y, total)) => {
                let evidence = match args.bound {
                    BoundArg::Uncollapsed => {
                        let fit = occam::discovery::bivariate::UncollapsedFit::default();
                        direction_evidence(&x, &y, args.restarts, seed, |data, slot, rng| {
                            occam::discovery::bivariate::fit_uncollapsed(data, slot, &fit, rng)
                        })
                    }
                    BoundArg::Collapsed => {
                        let mut settings = occam::gp::collapsed::FitSettings {
                            inducing_points: args.inducing,
                            adam_steps: args.adam_steps,
                            ..Default::default()
                        };
                        settings.lbfgs.max_iterations = args.lbfgs_iterations;
                        direction_evidence(&x, &y, args.restarts, seed, |data, slot, rng| {
                            occam::discovery::bivariate::fit_collapsed(data, slot, &settings, rng)
                        })
                    }
                };
                (x.len(), total, Ok(evidence))
            }
            Err(e) => (0, 0, Err(e.0)),
        };
    Outcome {
        truth: truth.clone(),
        rows_used,
        rows_total,
        evidence,
        seconds: start.elapsed().as_secs_f64(),
    }
}

fn report_line(o: &Outcome) -> String {
    let truth = if o.truth.forward { "x->y" } else { "y->x" };
    match &o.evidence {
        Err(e) => format!("{}  truth {truth}  error: {e}", o.truth.name),
        Ok(ev) => match ev.difference() {
            None => format!(
                "{}  truth {truth}  undecided: a model component failed in every restart  {:.1} s",
                o.truth.name, o.seconds
            ),
            Some(diff) => {
                let decided = if diff > 0.0 {
                    "x->y"
                } else if diff < 0.0 {
                    "y->x"
                } else {
                    "tie"
                };
                let mark = if decided == truth {
                    "correct"
                } else if decided == "tie" {
                    "tie"
                } else {
                    "wrong"
                };
                format!(
                    "{}  truth {truth}  decided {decided}  {mark:<7}  evidence(x->y) - evidence(y->x) = {diff:+.2} nats  rows {}/{}  {:.1} s",
                    o.truth.name, o.rows_used, o.rows_total, o.seconds
                )
            }
        },
    }
}

pub fn run(args: &PairsArgs) -> Result<(), CliError> {
    let started = Instant::now();
    let mut truth = read_truth(&args.dir)?;
    if let Some(filter) = &args.only {
        truth.retain(|t| t.name.contains(filter.as_str()));
    }
    if truth.is_empty() {
        return Err(CliError(format!(
            "no pairs to run in {}",
            args.dir.display()
        )));
    }
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, truth.len());
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<(usize, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(t) = truth.get(k) else { break };
                let outcome = evaluate(args, k, t);
                println!("{}", report_line(&outcome));
                outcomes
                    .lock()
                    .expect("no thread panics while holding the lock")
                    .push((k, outcome));
            });
        }
    });
    let mut outcomes = outcomes.into_inner().expect("threads have finished");
    outcomes.sort_by_key(|(k, _)| *k);

    // Accuracy over all pairs except exact ties ("can't decide", counted as neither right nor
    // wrong, MODEL.md §7.1); a pair whose models failed counts as not correct.
    let (mut correct, mut counted, mut w_correct, mut w_counted) = (0usize, 0usize, 0.0, 0.0);
    for (_, o) in &outcomes {
        let diff = o
            .evidence
            .as_ref()
            .ok()
            .and_then(DirectionEvidence::difference);
        if diff == Some(0.0) {
            continue;
        }
        counted += 1;
        w_counted += o.truth.weight;
        if diff.is_some_and(|d| (d > 0.0) == o.truth.forward) {
            correct += 1;
            w_correct += o.truth.weight;
        }
    }
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let settings = serde_json::json!({
        "bound": match args.bound { BoundArg::Collapsed => "collapsed", BoundArg::Uncollapsed => "uncollapsed" },
        "restarts": args.restarts,
        "max_rows": args.max_rows,
        "inducing": args.inducing,
        "adam_steps": args.adam_steps,
        "lbfgs_iterations": args.lbfgs_iterations,
        "seed": args.seed,
        "threads": threads,
        "counted_pairs": counted,
    });
    println!("settings: {settings}");
    let summary = serde_json::json!({
        "pairs": outcomes.len(),
        "accuracy": ratio(correct as f64, counted as f64),
        "weighted_accuracy": ratio(w_correct, w_counted),
        "seconds": started.elapsed().as_secs_f64(),
    });
    println!("{summary}");
    Ok(())
}
