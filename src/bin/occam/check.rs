//! `occam check FILE`: validate a CSV and summarise it.

use crate::{read_file_limited, CliError};
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
        println!("{out}");
        return Ok(());
    }

    let delimiter = match parsed.delimiter {
        '\t' => "tab".to_string(),
        c => format!("'{c}'"),
    };
    println!("file:      {shown}");
    println!("rows:      {}", summary.rows);
    println!("columns:   {} (delimiter {delimiter})", summary.columns);
    println!("names:     {}", summary.names.join(", "));
    let width = summary
        .names
        .iter()
        .map(|n| n.chars().count())
        .max()
        .unwrap_or(4)
        .max(6);
    println!(
        "  {:<width$}  {:>12}  {:>12}  {:>12}  {:>12}  {:>8}",
        "column", "mean", "sd", "min", "max", "distinct"
    );
    for c in &summary.column_summaries {
        println!(
            "  {:<width$}  {:>12.5e}  {:>12.5e}  {:>12.5e}  {:>12.5e}  {:>8}",
            c.name, c.mean, c.sd, c.min, c.max, c.distinct
        );
    }
    if parsed.problems.is_empty() {
        println!("problems:  none");
    } else {
        println!("problems:");
        for p in &parsed.problems {
            println!("  - {}; {}", p.message(), p.action());
        }
    }
    Ok(())
}
