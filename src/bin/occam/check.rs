//! `occam check FILE`: validate a CSV and summarise it.

use crate::{read_file_limited, terminal_safe, CliError};
use clap::Args;
use occam::data::{parse_csv, CsvOptions, MAX_CSV_BYTES};
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The CSV file (header row required; comma, semicolon or tab separated).
    pub file: PathBuf,
    /// Drop rows that have a missing value instead of refusing the file.
    #[arg(long)]
    pub drop_missing: bool,
    /// Print the summary as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &CheckArgs) -> Result<(), CliError> {
    let options = CsvOptions {
        drop_rows_with_missing: args.drop_missing,
        max_bytes: MAX_CSV_BYTES,
    };
    let bytes = read_file_limited(&args.file, options.max_bytes)?;
    let shown = args.file.display();
    let parsed = parse_csv(&bytes, &options).map_err(|e| CliError(format!("{shown}: {e}")))?;
    let summary = parsed.dataset.summary();
    let problems: Vec<serde_json::Value> = parsed
        .problems
        .iter()
        .map(|p| serde_json::json!({ "message": p.message(), "action": p.action() }))
        .collect();

    if args.json {
        let out = serde_json::json!({
            "file": shown.to_string(),
            "rows": summary.rows,
            "columns": summary.columns,
            "names": summary.names,
            "delimiter": parsed.delimiter.to_string(),
            "column_summaries": summary.column_summaries,
            "problems": problems,
        });
        outln!("{out}");
        return Ok(());
    }

    let delimiter = match parsed.delimiter {
        '\t' => "tab".to_string(),
        c => format!("'{c}'"),
    };
    outln!("file:      {shown}");
    outln!("rows:      {}", summary.rows);
    outln!("columns:   {} (delimiter {delimiter})", summary.columns);
    // Names are shown with control characters escaped (no raw escape sequence reaches the
    // terminal) and, in the table, cut to a width the formatter can pad (a 64 KiB name once
    // overflowed its width argument and panicked).
    let shown: Vec<String> = summary.names.iter().map(|n| terminal_safe(n)).collect();
    outln!("names:     {}", shown.join(", "));
    let cells: Vec<String> = shown.iter().map(|n| cut(n, MAX_NAME_WIDTH)).collect();
    let width = cells
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(6);
    outln!(
        "  {:<width$}  {:>12}  {:>12}  {:>12}  {:>12}  {:>8}",
        "column",
        "mean",
        "sd",
        "min",
        "max",
        "distinct"
    );
    for (c, name) in summary.column_summaries.iter().zip(&cells) {
        outln!(
            "  {:<width$}  {:>12.5e}  {:>12.5e}  {:>12.5e}  {:>12.5e}  {:>8}",
            name,
            c.mean,
            c.sd,
            c.min,
            c.max,
            c.distinct
        );
    }
    if parsed.problems.is_empty() {
        outln!("problems:  none");
    } else {
        outln!("problems:");
        for p in &parsed.problems {
            outln!("  - {}; {}", terminal_safe(&p.message()), p.action());
        }
    }
    Ok(())
}

/// The widest name column of the statistics table, in characters.
const MAX_NAME_WIDTH: usize = 40;

/// `text` cut to `max` characters, the last one an ellipsis when anything was cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}
