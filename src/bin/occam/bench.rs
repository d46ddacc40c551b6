//! `occam bench [--preset P] [--sets GLOB]`: runs discovery on the shared benchmark sets, scores
//! each result against its truth, and writes the tables into BENCHMARKS.md next to the peers'
//! figures from BASELINES_summary.csv: between the markers `<!-- bench:begin KEY -->` and
//! `<!-- bench:end KEY -->`, KEY naming the preset, the set glob, the rows used and M, so runs over
//! different sets or sizes keep their own sections and the rest of the file is left alone.

use occam::base::names::Choice;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use occam::data::{parse_csv, CsvOptions, Dataset, MAX_CSV_BYTES};
use occam::discovery::exact::ScoreCache;
use occam::discovery::knowledge::Knowledge;
use occam::discovery::settings::Preset;
use occam::engine::output::result_graph;
use occam::engine::{Session, SessionError};
use occam::graph::{compare, read_adjacency, read_edge_list, Digraph};

use crate::overrides::Overrides;
use crate::{read_file_limited, CliError};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Settings preset: `interactive`, `thorough` or `paper`.
    #[arg(long, default_value = "interactive")]
    pub preset: String,
    /// Which sets, as a glob over names such as `synthetic/ER1_d10_s0`, `synthetic/3var/chain_s0`,
    /// `syntren/syntren01`, `sachs/obs853` (`*` matches any run of characters).
    #[arg(long, default_value = "*")]
    pub sets: String,
    /// The benchmark data folder.
    #[arg(long, default_value = "../shared/data")]
    pub data: PathBuf,
    /// The Markdown file whose bench section is replaced.
    #[arg(long, default_value = "BENCHMARKS.md")]
    pub out: PathBuf,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Exact and hybrid runs: keep each set's family scores in this folder and reuse them, so a
    /// rerun with another prior, K or P fits only the families it has not seen.
    #[arg(long, value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: Overrides,
}

/// One benchmark set on disk.
struct BenchSet {
    name: String,
    /// The BASELINES group it belongs to (None: no peer figures).
    group: String,
    data: PathBuf,
    /// Keep only the first rows (Sachs: the 853 observational rows).
    first_rows: Option<usize>,
    truth: Truth,
}

enum Truth {
    Adjacency(PathBuf),
    EdgeList(PathBuf),
}

/// `*` matches any run of characters; everything else literally.
fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti, mut star, mut mark) = (0, 0, None, 0);
    while ti < t.len() {
        if pi < p.len() && p[pi] != '*' && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ti;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ti = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn discover_sets(root: &Path) -> Vec<BenchSet> {
    let mut sets = Vec::new();
    let file_name = |p: &Path| {
        p.file_name()
            .map_or(String::new(), |s| s.to_string_lossy().into())
    };
    for dir in sorted_dirs(&root.join("synthetic")) {
        let name = file_name(&dir);
        if name == "3var" {
            for sub in sorted_dirs(&dir) {
                let n = file_name(&sub);
                let shape = n
                    .rsplit_once("_s")
                    .map_or(n.clone(), |(a, _)| a.to_string());
                sets.push(BenchSet {
                    name: format!("synthetic/3var/{n}"),
                    group: format!("3var_{shape}"),
                    data: sub.join("data.csv"),
                    first_rows: None,
                    truth: Truth::Adjacency(sub.join("truth.csv")),
                });
            }
            continue;
        }
        let group = name
            .rsplit_once("_s")
            .map_or(name.clone(), |(a, _)| a.to_string());
        sets.push(BenchSet {
            name: format!("synthetic/{name}"),
            group,
            data: dir.join("data.csv"),
            first_rows: None,
            truth: Truth::Adjacency(dir.join("truth.csv")),
        });
    }
    for dir in sorted_dirs(&root.join("syntren")) {
        sets.push(BenchSet {
            name: format!("syntren/{}", file_name(&dir)),
            group: "Syntren (10 sets)".into(),
            data: dir.join("data.csv"),
            first_rows: None,
            truth: Truth::Adjacency(dir.join("truth.csv")),
        });
    }
    let sachs = root.join("sachs");
    if sachs.join("sachs.csv").exists() {
        sets.push(BenchSet {
            name: "sachs/obs853".into(),
            group: "sachs_obs853_vs_dag17".into(),
            data: sachs.join("sachs.csv"),
            first_rows: Some(853),
            truth: Truth::EdgeList(sachs.join("truth_dag17.csv")),
        });
    }
    sets
}

fn read_text(path: &Path) -> Result<String, CliError> {
    let bytes = read_file_limited(path, MAX_CSV_BYTES)?;
    String::from_utf8(bytes).map_err(|_| CliError(format!("{}: not UTF-8 text", path.display())))
}

fn load(set: &BenchSet) -> Result<(Dataset, Digraph), CliError> {
    let bytes = read_file_limited(&set.data, MAX_CSV_BYTES)?;
    let parsed = parse_csv(&bytes, &CsvOptions::default())
        .map_err(|e| CliError(format!("{}: {e}", set.data.display())))?;
    let mut dataset = parsed.dataset;
    if let Some(k) = set.first_rows {
        let columns = dataset
            .columns()
            .iter()
            .map(|c| c[..k.min(c.len())].to_vec())
            .collect();
        dataset = Dataset::new(dataset.names().to_vec(), columns);
    }
    let truth = match &set.truth {
        Truth::Adjacency(p) => read_adjacency(&read_text(p)?, None),
        Truth::EdgeList(p) => read_edge_list(&read_text(p)?, dataset.names()),
    }
    .map_err(|e| CliError(format!("{}: {e}", set.name)))?;
    Ok((dataset, truth))
}

/// One scored run.
struct Row {
    name: String,
    group: String,
    shd: usize,
    shd1: usize,
    sid: Option<usize>,
    f1: f64,
    edges: usize,
    true_edges: usize,
    seconds: f64,
    /// Families found in the score cache instead of fitted (their fits' time is not in
    /// `seconds`).
    cache_hits: usize,
    families_fitted: usize,
}

impl Row {
    /// The seconds cell: marked when every score came from the cache, whose fits it leaves out.
    fn seconds_cell(&self) -> String {
        if self.cache_hits > 0 && self.families_fitted == 0 {
            format!("{:.1} (scores from the cache)", self.seconds)
        } else {
            format!("{:.1}", self.seconds)
        }
    }
}

/// Peer figures of one (group, method): mean SHD, SHD(rev=1), SID, F1, seconds, and whether the
/// method finished every set of the group (its means are comparable only then).
type Peer = (String, f64, f64, Option<f64>, f64, f64, bool);

fn read_baselines(root: &Path) -> BTreeMap<String, Vec<Peer>> {
    let mut map: BTreeMap<String, Vec<Peer>> = BTreeMap::new();
    let Ok(text) = std::fs::read_to_string(root.join("BASELINES_summary.csv")) else {
        return map;
    };
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let Ok(headers) = reader.headers().cloned() else {
        return map;
    };
    let col = |name: &str| headers.iter().position(|h| h == name);
    let complete_col = (col("n_sets"), col("n_ok"));
    let (Some(g), Some(m), Some(s), Some(s1), Some(sid), Some(f1), Some(t)) = (
        col("group"),
        col("method"),
        col("shd_mean"),
        col("shd_rev1_mean"),
        col("sid_mean"),
        col("f1_mean"),
        col("runtime_s_mean"),
    ) else {
        return map;
    };
    for rec in reader.records().flatten() {
        let num = |k: usize| rec.get(k).and_then(|v| v.parse::<f64>().ok());
        let (Some(shd), Some(shd1), Some(f)) = (num(s), num(s1), num(f1)) else {
            continue;
        };
        let complete = match complete_col {
            (Some(a), Some(b)) => num(a) == num(b),
            _ => true,
        };
        map.entry(rec[g].to_string()).or_default().push((
            rec[m].to_string(),
            shd,
            shd1,
            num(sid),
            f,
            num(t).unwrap_or(f64::NAN),
            complete,
        ));
    }
    map
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        f64::NAN
    } else {
        s / n as f64
    }
}

fn render(rows: &[Row], peers: &BTreeMap<String, Vec<Peer>>, header: &str) -> String {
    let mut out = String::new();
    out.push_str(header);
    out.push_str("\n\n### Per set\n\n| set | SHD (rev=2) | SHD (rev=1) | SID | F1 | edges (pred / true) | seconds |\n|---|---|---|---|---|---|---|\n");
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {} / {} | {} |\n",
            r.name,
            r.shd,
            r.shd1,
            r.sid.map_or("n/a".into(), |s| s.to_string()),
            r.f1,
            r.edges,
            r.true_edges,
            r.seconds_cell()
        ));
    }
    out.push_str("\n### Per group, next to the peers (BASELINES_summary.csv means)\n\n");
    let mut groups: Vec<&str> = rows.iter().map(|r| r.group.as_str()).collect();
    groups.dedup();
    for g in groups {
        let in_group: Vec<&Row> = rows.iter().filter(|r| r.group == g).collect();
        let shd = mean(in_group.iter().map(|r| r.shd as f64));
        let shd1 = mean(in_group.iter().map(|r| r.shd1 as f64));
        let sid = mean(in_group.iter().filter_map(|r| r.sid.map(|s| s as f64)));
        let f1 = mean(in_group.iter().map(|r| r.f1));
        let secs = mean(in_group.iter().map(|r| r.seconds));
        out.push_str(&format!(
            "**{g}** ({} sets)\n\n| method | SHD (rev=2) | SHD (rev=1) | SID | F1 | seconds |\n|---|---|---|---|---|---|\n| **Occam** | **{shd:.2}** | **{shd1:.2}** | **{sid:.2}** | **{f1:.3}** | **{secs:.1}** |\n",
            in_group.len()
        ));
        let list = peers.get(g).map(Vec::as_slice).unwrap_or(&[]);
        for (m, s, s1, sid, f, t, complete) in list {
            let partial = if *complete { "" } else { " (not every set)" };
            out.push_str(&format!(
                "| {m}{partial} | {s:.2} | {s1:.2} | {} | {f:.3} | {t:.1} |\n",
                sid.map_or("n/a".into(), |v| format!("{v:.2}"))
            ));
        }
        if !list.is_empty() {
            // Peers that did not finish every set average over the easier ones: not comparable.
            let comparable = || list.iter().filter(|p| p.6);
            let best_shd = comparable()
                .filter(|p| p.0 != "Empty")
                .map(|p| p.1)
                .fold(f64::INFINITY, f64::min);
            let best_f1 = comparable().map(|p| p.4).fold(0.0, f64::max);
            let verdict = if shd < best_shd && f1 > best_f1 {
                "beats every peer that finished every set, on mean SHD and on mean F1".to_string()
            } else {
                format!(
                    "does **not** beat every peer that finished every set: best peer SHD {best_shd:.2} (Occam {shd:.2}), best peer F1 {best_f1:.3} (Occam {f1:.3})"
                )
            };
            out.push_str(&format!("\nOccam {verdict}.\n\n"));
        } else {
            out.push_str("\n(no peer figures for this group)\n\n");
        }
    }
    out
}

/// Replaces the text between the markers of `key` (or appends a marked section).
fn splice(existing: &str, key: &str, section: &str) -> String {
    let begin = format!("<!-- bench:begin {key} -->");
    let end = format!("<!-- bench:end {key} -->");
    let block = format!("{begin}\n{section}\n{end}");
    match (existing.find(&begin), existing.find(&end)) {
        (Some(a), Some(b)) if b > a => {
            format!("{}{block}{}", &existing[..a], &existing[b + end.len()..])
        }
        _ => format!("{}\n\n{block}\n", existing.trim_end()),
    }
}

/// Checks, before any set is run, that the report and the cache folder can be written: `--out`
/// not a folder and its folder writable, `--cache-dir` a folder that can be made and written.
fn check_outputs(args: &BenchArgs) -> Result<(), CliError> {
    if args.out.is_dir() {
        return Err(CliError(format!(
            "--out {} is a directory; give the Markdown file to write (nothing was run)",
            args.out.display()
        )));
    }
    let parent = match args.out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    crate::check_writable(&parent)?;
    if let Some(dir) = &args.cache_dir {
        if dir.is_file() {
            return Err(CliError(format!(
                "--cache-dir {} is a file, not a folder (nothing was run)",
                dir.display()
            )));
        }
        crate::ensure_dir(dir)?;
        crate::check_writable(dir)?;
    }
    Ok(())
}

pub fn run(args: &BenchArgs) -> Result<(), CliError> {
    let preset = Preset::parse(&args.preset).map_err(|e| CliError(e.to_string()))?;
    let sets: Vec<BenchSet> = discover_sets(&args.data)
        .into_iter()
        .filter(|s| glob_match(&args.sets, &s.name))
        .collect();
    if sets.is_empty() {
        return Err(CliError(format!(
            "no benchmark set under {} matches '{}'",
            args.data.display(),
            args.sets
        )));
    }
    let mut settings = preset.settings();
    args.overrides.apply(&mut settings)?;
    let settings = settings
        .check()
        .map_err(|e| CliError(SessionError::Settings(e).to_string()))?;
    check_outputs(args)?;
    let mut rows = Vec::new();
    for set in &sets {
        let (dataset, truth) = load(set)?;
        let knowledge = Knowledge::none(dataset.cols());
        let mut session = Session::new(
            &dataset,
            knowledge,
            settings.clone(),
            args.seed,
            Some(preset),
        )
        .map_err(|e| CliError(format!("{}: {e}", set.name)))?;
        let cache_path = args
            .cache_dir
            .as_ref()
            .filter(|_| settings.method.runs_exact())
            .map(|dir| {
                // One file per set and cache key, so runs with other rows or fit settings keep
                // their own scores.
                let key = serde_json::to_string(session.score_cache_key()).unwrap_or_default();
                let hash = occam::base::checksum::Fnv1a::of(key.as_bytes());
                dir.join(format!("{}_{hash:016x}.json", set.name.replace('/', "_")))
            });
        if let Some(path) = &cache_path {
            if let Ok(text) = std::fs::read_to_string(path) {
                if let Some(cache) = ScoreCache::from_json_for(&text, session.score_cache_key()) {
                    session.use_score_cache(cache);
                }
            }
        }
        while !session.is_finished() {
            session.step(1.0);
        }
        if let Some(path) = &cache_path {
            crate::ensure_dir(&args.cache_dir.clone().expect("a cache folder was given"))?;
            crate::write_file_atomic(path, &session.score_cache().to_json())?;
        }
        let result = session.result();
        let pred = result_graph(&result);
        let c = compare(&truth, &pred);
        let row = Row {
            name: set.name.clone(),
            group: set.group.clone(),
            shd: c.shd,
            shd1: c.shd_reversal_1,
            sid: c.sid,
            f1: c.f1,
            edges: pred.edge_count(),
            true_edges: truth.edge_count(),
            seconds: result.seconds,
            cache_hits: result.cache_hits,
            families_fitted: result.families_fitted,
        };
        outln!(
            "{:<28} shd {:>3} shd1 {:>3} sid {:>4} f1 {:.3} edges {}/{} {:.1} s{}",
            row.name,
            row.shd,
            row.shd1,
            row.sid.map_or("n/a".into(), |s| s.to_string()),
            row.f1,
            row.edges,
            row.true_edges,
            row.seconds,
            if result.method.runs_exact() {
                let all_cached = if row.families_fitted == 0 && row.cache_hits > 0 {
                    " (every score from the cache: the seconds leave out its fits)"
                } else {
                    ""
                };
                format!(
                    " families fitted {} cached {}{all_cached}",
                    result.families_fitted, result.cache_hits
                )
            } else {
                String::new()
            }
        );
        if let Some(x) = &result.exact {
            outln!("  fit work: {}", x.fit_work.describe());
        }
        for f in &result.failures {
            outln!("  note: {f}");
        }
        rows.push(row);
    }
    let peers = read_baselines(&args.data);
    let header = format!(
        "## Structure learning: `occam bench --preset {}{} --sets '{}'` (seed {}, {} restarts, {} threads, at most {} rows, M = {})\n\nSHD (rev=2) counts a reversed edge twice (the paper's convention); SHD (rev=1) once. SID after Peters & Bühlmann (n/a for a cyclic truth). F1 over directed edges. Seconds are wall-clock per set on this machine.",
        preset.name(),
        method_text(&settings),
        args.sets,
        args.seed,
        settings.restarts,
        if settings.threads == 0 { "all".to_string() } else { settings.threads.to_string() },
        rows_text(settings.max_rows),
        inducing_text(&settings)
    );
    let section = render(&rows, &peers, &header);
    let existing = std::fs::read_to_string(&args.out).unwrap_or_default();
    let key = format!(
        "{}{} {} rows {} M {}",
        preset.name(),
        method_text(&settings),
        args.sets,
        rows_text(settings.max_rows),
        inducing_text(&settings)
    );
    crate::write_file_atomic(&args.out, &splice(&existing, &key, &section))?;
    outln!("wrote {}", args.out.display());
    Ok(())
}

/// The method and its limits as flags (nothing for the default continuous search, so the sections
/// it wrote before keep their keys).
fn method_text(settings: &occam::discovery::settings::SearchSettings) -> String {
    use occam::discovery::family::{ColdFits, FamilyFitScheme};
    if !settings.method.runs_exact() {
        return String::new();
    }
    let x = &settings.exact;
    let prior = x.prior.as_text();
    let f = &x.family;
    // Only what differs from the fits before issue 33 is named, so older sections keep their keys.
    let scheme = match f.scheme {
        FamilyFitScheme::Independent => String::new(),
        FamilyFitScheme::Race { probe } => format!(", raced after {probe}"),
        FamilyFitScheme::Warm { cold } => match cold {
            ColdFits::Neither => ", larger families warm-started from subsets".to_string(),
            ColdFits::Residual => ", warm-started + residual start".to_string(),
            ColdFits::Off => ", warm-started + w-off start".to_string(),
            ColdFits::Both => ", warm-started + both cold starts".to_string(),
        },
    };
    let stall = f.convergence.map_or(String::new(), |r| {
        format!(", stalled at {} nats / {} it", r.gain, r.window)
    });
    let prune = x
        .prune_below
        .map_or(String::new(), |d| format!(" --prune-below {d}"));
    // The few-variables rows, named only when they are set (older sections keep their keys).
    let few = x.few_rows.map_or(String::new(), |rows| {
        format!(" --exact-few-rows {}", rows_text(rows))
    });
    format!(
        " --method {} --max-parents {} --candidates {} --edge-prior {prior}{few}{prune} (family fits: M = {}, {} restarts, {} Adam + {} L-BFGS{scheme}{stall})",
        settings.method.name(),
        x.max_parents,
        x.candidates,
        f.inducing,
        f.restarts,
        f.adam_steps,
        f.lbfgs_iterations
    )
}

/// A row limit as text: "all" for no limit.
fn rows_text(rows: usize) -> String {
    if rows == usize::MAX {
        "all".into()
    } else {
        rows.to_string()
    }
}

/// M as the settings give it: "20", or "20+1/input" where it grows with the number of inputs.
fn inducing_text(settings: &occam::discovery::settings::SearchSettings) -> String {
    if settings.inducing_per_input == 0 {
        settings.inducing_points.to_string()
    } else {
        format!(
            "{}+{}/input",
            settings.inducing_points, settings.inducing_per_input
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glob_matches_stars_and_literals() {
        assert!(glob_match("*", "synthetic/ER1_d10_s0"));
        assert!(glob_match("synthetic/ER*_d10_*", "synthetic/ER4_d10_s2"));
        assert!(!glob_match("synthetic/ER*_d10_*", "synthetic/ER4_d20_s2"));
        assert!(glob_match("syntren/*", "syntren/syntren01"));
        assert!(!glob_match("syntren", "syntren/syntren01"));
        assert!(glob_match("*3var*", "synthetic/3var/chain_s0"));
    }

    #[test]
    fn splice_replaces_only_the_marked_section() {
        let a = splice("# T\n\ntext", "k1", "one");
        assert!(a.starts_with("# T\n\ntext") && a.contains("one"));
        let b = splice(&format!("{a}\nafter"), "k1", "two");
        assert!(b.contains("two") && !b.contains("one") && b.ends_with("after"));
        let c = splice(&b, "k2", "three");
        assert!(c.contains("two") && c.contains("three"));
    }
}
