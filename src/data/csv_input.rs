//! Reading a user's CSV file into a [`Dataset`], refusing what cannot be modelled with a message that
//! names the line and the column, and repairing (with a report) only what the user allowed.
//!
//! Accepted dialect: one header row; comma, semicolon or tab delimiters (detected); fields may be
//! quoted; `.` is the decimal point; a UTF-8 byte-order mark is ignored; blank lines are skipped.

use super::dataset::{standardise, Dataset};
use serde::{Deserialize, Serialize};

/// Largest file accepted, in bytes (256 MiB). A CSV of 256 MiB holds ~20 million numbers, far
/// beyond what the model can train on interactively; refusing early keeps the browser tab alive.
pub const MAX_CSV_BYTES: usize = 256 * 1024 * 1024;

/// Fewest data rows accepted: fewer cannot support even a two-variable model comparison.
pub const MIN_ROWS: usize = 10;

/// Cell contents read as a missing value (compared case-insensitively after trimming).
const MISSING_TOKENS: [&str; 6] = ["", "na", "n/a", "null", "none", "?"];

/// How to read a file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CsvOptions {
    /// Drop rows with an empty (missing) cell instead of refusing the file.
    pub drop_rows_with_missing: bool,
    /// Size limit in bytes; [`MAX_CSV_BYTES`] by default.
    pub max_bytes: usize,
}

impl Default for CsvOptions {
    fn default() -> Self {
        Self {
            drop_rows_with_missing: false,
            max_bytes: MAX_CSV_BYTES,
        }
    }
}

/// Why a file was refused. Line numbers are 1-based lines of the file (the header is line 1 unless
/// blank lines precede it); columns are named as in the header.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DataError {
    #[error("the file is empty")]
    EmptyFile,
    #[error(
        "the file is {} but the limit is {}; keep fewer rows or columns",
        human_bytes(*bytes),
        human_bytes(*limit)
    )]
    TooLarge { bytes: usize, limit: usize },
    #[error(
        "line {line}: the file is not valid UTF-8 text (is it a spreadsheet rather than a CSV?)"
    )]
    NotUtf8 { line: usize },
    #[error("line {line}: {message}")]
    Malformed { line: usize, message: String },
    #[error(
        "line {line}: a header row with column names is required, but the first row is all numbers ('{first_cell}', ...)"
    )]
    MissingHeader { line: usize, first_cell: String },
    #[error("line {line}: column {position} has an empty name in the header")]
    EmptyColumnName { line: usize, position: usize },
    #[error(
        "line {line}: the column name '{name}' appears twice (columns {first} and {second}); names must be unique"
    )]
    DuplicateColumnName {
        line: usize,
        name: String,
        first: usize,
        second: usize,
    },
    #[error("the file has {found} column(s); at least 2 are needed to discover causal relations")]
    TooFewColumns { found: usize },
    #[error("line {line}: expected {expected} fields as in the header, found {found}")]
    Ragged {
        line: usize,
        expected: usize,
        found: usize,
    },
    #[error(
        "line {line}, column '{column}': '{value}' is not a number{}",
        hint_suffix(hint)
    )]
    NonNumeric {
        line: usize,
        column: String,
        value: String,
        hint: Option<String>,
    },
    #[error(
        "line {line}, column '{column}': {} (missing values are refused; the option to drop rows with missing values removes such rows)",
        describe_missing(token)
    )]
    EmptyCell {
        line: usize,
        column: String,
        token: String,
    },
    #[error("line {line}, column '{column}': '{value}' is not a finite number")]
    NonFinite {
        line: usize,
        column: String,
        value: String,
    },
    #[error(
        "only {found} data row(s){}; at least {min} are needed",
        dropped_suffix(*dropped)
    )]
    TooFewRows {
        found: usize,
        min: usize,
        dropped: usize,
    },
    #[error("column '{column}' is constant (every value is {value}); it carries no information: remove it")]
    ConstantColumn { column: String, value: f64 },
    #[error(
        "column '{column}' is a copy of column '{copy_of}' (identical after standardisation{}); remove one of them",
        if *negated { ", up to sign" } else { "" }
    )]
    DuplicateColumnData {
        column: String,
        copy_of: String,
        negated: bool,
    },
}

fn human_bytes(b: usize) -> String {
    const MIB: f64 = 1024.0 * 1024.0;
    if b as f64 >= MIB {
        format!("{:.1} MiB", b as f64 / MIB)
    } else {
        format!("{b} bytes")
    }
}

fn hint_suffix(hint: &Option<String>) -> String {
    hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default()
}

fn describe_missing(token: &str) -> String {
    if token.is_empty() {
        "the cell is empty".to_string()
    } else {
        format!("'{token}' marks a missing value")
    }
}

fn dropped_suffix(dropped: usize) -> String {
    if dropped > 0 {
        format!(" after dropping {dropped} row(s) with missing values")
    } else {
        String::new()
    }
}

impl DataError {
    /// A stable machine-readable code, e.g. `non_numeric` (the serde tag).
    pub fn kind(&self) -> &'static str {
        match self {
            DataError::EmptyFile => "empty_file",
            DataError::TooLarge { .. } => "too_large",
            DataError::NotUtf8 { .. } => "not_utf8",
            DataError::Malformed { .. } => "malformed",
            DataError::MissingHeader { .. } => "missing_header",
            DataError::EmptyColumnName { .. } => "empty_column_name",
            DataError::DuplicateColumnName { .. } => "duplicate_column_name",
            DataError::TooFewColumns { .. } => "too_few_columns",
            DataError::Ragged { .. } => "ragged",
            DataError::NonNumeric { .. } => "non_numeric",
            DataError::EmptyCell { .. } => "empty_cell",
            DataError::NonFinite { .. } => "non_finite",
            DataError::TooFewRows { .. } => "too_few_rows",
            DataError::ConstantColumn { .. } => "constant_column",
            DataError::DuplicateColumnData { .. } => "duplicate_column_data",
        }
    }

    /// The 1-based line the error refers to, where one applies.
    pub fn line(&self) -> Option<usize> {
        match self {
            DataError::NotUtf8 { line }
            | DataError::Malformed { line, .. }
            | DataError::MissingHeader { line, .. }
            | DataError::EmptyColumnName { line, .. }
            | DataError::DuplicateColumnName { line, .. }
            | DataError::Ragged { line, .. }
            | DataError::NonNumeric { line, .. }
            | DataError::EmptyCell { line, .. }
            | DataError::NonFinite { line, .. } => Some(*line),
            _ => None,
        }
    }

    /// The column the error refers to, where one applies.
    pub fn column(&self) -> Option<&str> {
        match self {
            DataError::NonNumeric { column, .. }
            | DataError::EmptyCell { column, .. }
            | DataError::NonFinite { column, .. }
            | DataError::ConstantColumn { column, .. }
            | DataError::DuplicateColumnData { column, .. } => Some(column),
            DataError::DuplicateColumnName { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// Something in the file that was accepted but that the user should know about, with what is done
/// about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DataWarning {
    /// Rows with missing values were removed (only when the user asked for it).
    RowsDropped { count: usize, first_line: usize },
    /// A column with very few distinct values: likely discrete, while the model assumes continuous
    /// data.
    FewDistinctValues { column: String, distinct: usize },
    /// A column that is almost a function of one other column alone
    /// ([`super::determined`]): its noise left after a smooth fit on that column is
    /// `residual_fraction` of its variance.
    NearlyDetermined {
        column: String,
        by: String,
        residual_fraction: f64,
    },
}

impl DataWarning {
    /// One sentence: what was found.
    pub fn message(&self) -> String {
        match self {
            DataWarning::RowsDropped { count, first_line } => {
                format!("{count} row(s) had missing values (the first on line {first_line})")
            }
            DataWarning::FewDistinctValues { column, distinct } => {
                format!("column '{column}' has only {distinct} distinct values: it looks discrete")
            }
            DataWarning::NearlyDetermined {
                column,
                by,
                residual_fraction,
            } => format!(
                "column '{column}' is almost a function of column '{by}' alone: a smooth fit on \
                 '{by}' leaves {} of its variance as noise (below {})",
                percent(*residual_fraction),
                percent(super::determined::DETERMINED_FRACTION)
            ),
        }
    }

    /// One sentence: what is done about it.
    pub fn action(&self) -> String {
        match self {
            DataWarning::RowsDropped { .. } => "those rows were dropped".to_string(),
            DataWarning::FewDistinctValues { .. } => {
                "it is modelled as continuous; results for it may be less reliable".to_string()
            }
            DataWarning::NearlyDetermined { column, by, .. } => format!(
                "both are kept; '{column}''s noise goes to its floor, so its evidence rests on \
                 that near-exact fit and other inputs can gain confident edges into it: the \
                 result names every edge that touches '{column}' besides '{by}'"
            ),
        }
    }
}

/// A fraction as a percentage with two significant digits ("0.0031 %").
fn percent(fraction: f64) -> String {
    let p = 100.0 * fraction;
    if p >= 1.0 || p == 0.0 {
        format!("{p:.1} %")
    } else {
        let digits = (1 - p.log10().floor() as i32).max(1) as usize;
        format!("{p:.digits$} %")
    }
}

/// A successfully read file.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    /// The values as read (not standardised).
    pub dataset: Dataset,
    /// The detected delimiter.
    pub delimiter: char,
    /// Accepted oddities, each with what was done about it.
    pub problems: Vec<DataWarning>,
}

/// A column with at most this many distinct values is reported as probably discrete.
const FEW_DISTINCT: usize = 5;

/// Reads and validates a CSV file held in memory. See the module doc for the dialect; every
/// refusal is a [`DataError`] naming the line and column.
pub fn parse_csv(bytes: &[u8], options: &CsvOptions) -> Result<Parsed, DataError> {
    parse_csv_with_progress(bytes, options, &mut |_| {})
}

/// Bytes read between two calls of the progress callback of [`parse_csv_with_progress`].
pub const PROGRESS_STEP_BYTES: usize = 1 << 20;

/// [`parse_csv`], calling `progress(bytes_read)` about every [`PROGRESS_STEP_BYTES`] bytes (and once
/// at the end) so a driver can show how far a large file has got.
pub fn parse_csv_with_progress(
    bytes: &[u8],
    options: &CsvOptions,
    progress: &mut dyn FnMut(usize),
) -> Result<Parsed, DataError> {
    if bytes.len() > options.max_bytes {
        return Err(DataError::TooLarge {
            bytes: bytes.len(),
            limit: options.max_bytes,
        });
    }
    let total_bytes = bytes.len();
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(DataError::EmptyFile);
    }
    let delimiter = detect_delimiter(bytes);
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(delimiter)
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(bytes);

    let mut lines = LineCounter::new(bytes);
    // Lines of spaces are blank lines (the reader trims them to one empty field).
    let mut records = reader
        .records()
        .filter(|r| !matches!(r, Ok(record) if record.len() == 1 && record[0].is_empty()));
    let (header, header_line) = match records.next() {
        Some(record) => {
            let record = record.map_err(|e| csv_error(e, &mut lines))?;
            let line = lines.line_of(&record);
            check_line_breaks(&record, line)?;
            (record, line)
        }
        None => return Err(DataError::EmptyFile),
    };
    let names = read_header(&header, header_line)?;

    let mut columns: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut dropped = 0usize;
    let mut first_dropped_line = 0usize;
    let bom = total_bytes - bytes.len();
    let mut next_report = PROGRESS_STEP_BYTES;
    for record in records {
        let record = record.map_err(|e| csv_error(e, &mut lines))?;
        let line = lines.line_of(&record);
        check_line_breaks(&record, line)?;
        let read = record.position().map_or(0, |p| p.byte() as usize) + bom;
        if read >= next_report {
            progress(read);
            next_report = read + PROGRESS_STEP_BYTES;
        }
        if record.len() != names.len() {
            return Err(DataError::Ragged {
                line,
                expected: names.len(),
                found: record.len(),
            });
        }
        match parse_row(&record, &names, line)? {
            Some(values) => {
                for (column, v) in columns.iter_mut().zip(values) {
                    column.push(v);
                }
            }
            None if options.drop_rows_with_missing => {
                if dropped == 0 {
                    first_dropped_line = line;
                }
                dropped += 1;
            }
            None => return Err(first_missing_error(&record, &names, line)),
        }
    }

    progress(total_bytes);
    let rows = columns.first().map_or(0, Vec::len);
    if rows < MIN_ROWS {
        return Err(DataError::TooFewRows {
            found: rows,
            min: MIN_ROWS,
            dropped,
        });
    }
    let dataset = Dataset::new(names, columns);
    check_columns(&dataset)?;

    let mut problems = Vec::new();
    if dropped > 0 {
        problems.push(DataWarning::RowsDropped {
            count: dropped,
            first_line: first_dropped_line,
        });
    }
    for summary in dataset.summary().column_summaries {
        if summary.distinct <= FEW_DISTINCT {
            problems.push(DataWarning::FewDistinctValues {
                column: summary.name,
                distinct: summary.distinct,
            });
        }
    }
    let names = dataset.names();
    for d in super::determined::nearly_determined(dataset.columns()) {
        problems.push(DataWarning::NearlyDetermined {
            column: names[d.column].clone(),
            by: names[d.by].clone(),
            residual_fraction: d.residual_fraction,
        });
    }
    Ok(Parsed {
        dataset,
        delimiter: char::from(delimiter),
        problems,
    })
}

/// 1-based line numbers from byte offsets, counting `\n`, `\r\n` and a lone `\r` each as one line
/// break (the csv crate's own counter is wrong for CRLF and CR-only files). Offsets are asked
/// for in increasing order, so the whole file is scanned once.
struct LineCounter<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl<'a> LineCounter<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            at: 0,
            line: 1,
        }
    }

    /// The line on which byte `offset` lies; an offset at a line break (the csv crate reports a
    /// record after CRLF as starting at its `\n`) moves on to the line that follows.
    fn line_at(&mut self, offset: usize) -> usize {
        let mut offset = offset.min(self.bytes.len());
        while offset < self.bytes.len() && matches!(self.bytes[offset], b'\r' | b'\n') {
            offset += 1;
        }
        if offset < self.at {
            // Out of order (not expected): count again from the start.
            self.at = 0;
            self.line = 1;
        }
        for k in self.at..offset {
            match self.bytes[k] {
                b'\n' => self.line += 1,
                b'\r' if self.bytes.get(k + 1) != Some(&b'\n') => self.line += 1,
                _ => {}
            }
        }
        self.at = offset;
        self.line
    }

    /// The line on which `record` starts.
    fn line_of(&mut self, record: &csv::StringRecord) -> usize {
        record
            .position()
            .map_or(0, |p| self.line_at(p.byte() as usize))
    }
}

/// Refuses a field holding a line break: in a numeric data file that is a quote left open, which
/// would otherwise swallow the following lines and be reported as a short row.
fn check_line_breaks(record: &csv::StringRecord, line: usize) -> Result<(), DataError> {
    if record.iter().any(|f| f.contains(['\n', '\r'])) {
        return Err(DataError::Malformed {
            line,
            message: "a quote opened on this line is not closed before the line ends (an \
                      unterminated quote)"
                .into(),
        });
    }
    Ok(())
}

fn csv_error(e: csv::Error, lines: &mut LineCounter) -> DataError {
    let line = e.position().map_or(0, |p| lines.line_at(p.byte() as usize));
    match e.kind() {
        csv::ErrorKind::Utf8 { .. } => DataError::NotUtf8 { line },
        _ => DataError::Malformed {
            line,
            message: e.to_string(),
        },
    }
}

/// Picks the delimiter among `,` `;` and tab that splits the first lines into the most fields,
/// consistently. The csv reader does the splitting, so delimiters inside quotes do not count.
fn detect_delimiter(bytes: &[u8]) -> u8 {
    const CANDIDATES: [u8; 3] = [b',', b';', b'\t'];
    const SAMPLE_RECORDS: usize = 50;
    let mut best = (b',', 0usize, false);
    for &delimiter in &CANDIDATES {
        let mut reader = csv::ReaderBuilder::new()
            .delimiter(delimiter)
            .has_headers(false)
            .flexible(true)
            .from_reader(bytes);
        let counts: Vec<usize> = reader
            .records()
            .take(SAMPLE_RECORDS)
            .map_while(Result::ok)
            .map(|r| r.len())
            .collect();
        let Some(&fields) = counts.first() else {
            continue;
        };
        let consistent = counts.iter().all(|&c| c == fields);
        // A consistent split beats an inconsistent one; then more fields win; ties keep the
        // earlier candidate (comma first).
        let better = match (consistent, best.2) {
            (true, false) => fields >= 2,
            (false, true) => false,
            _ => fields > best.1,
        };
        if better {
            best = (delimiter, fields, consistent);
        }
    }
    best.0
}

fn read_header(header: &csv::StringRecord, line: usize) -> Result<Vec<String>, DataError> {
    let names: Vec<String> = header.iter().map(str::to_string).collect();
    if names.len() < 2 {
        return Err(DataError::TooFewColumns { found: names.len() });
    }
    if names.iter().all(|n| n.parse::<f64>().is_ok()) {
        return Err(DataError::MissingHeader {
            line,
            first_cell: names[0].clone(),
        });
    }
    // One pass with a map from name to its first position: linear in the number of columns.
    let mut seen: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(names.len());
    for (k, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(DataError::EmptyColumnName {
                line,
                position: k + 1,
            });
        }
        if let Some(&first) = seen.get(name.as_str()) {
            return Err(DataError::DuplicateColumnName {
                line,
                name: name.clone(),
                first: first + 1,
                second: k + 1,
            });
        }
        seen.insert(name, k);
    }
    Ok(names)
}

fn is_missing(cell: &str) -> bool {
    MISSING_TOKENS.iter().any(|t| cell.eq_ignore_ascii_case(t))
}

/// Parses one row. `Ok(None)` means the row has a missing value (the caller decides whether that
/// drops the row or refuses the file); any other bad cell is an error.
fn parse_row(
    record: &csv::StringRecord,
    names: &[String],
    line: usize,
) -> Result<Option<Vec<f64>>, DataError> {
    let mut values = Vec::with_capacity(names.len());
    let mut missing = false;
    for (cell, name) in record.iter().zip(names) {
        if is_missing(cell) {
            missing = true;
            continue;
        }
        let value = parse_number(cell).ok_or_else(|| DataError::NonNumeric {
            line,
            column: name.clone(),
            value: cell.to_string(),
            hint: non_numeric_hint(cell),
        })?;
        if !value.is_finite() {
            return Err(DataError::NonFinite {
                line,
                column: name.clone(),
                value: cell.to_string(),
            });
        }
        values.push(value);
    }
    Ok(if missing { None } else { Some(values) })
}

fn first_missing_error(record: &csv::StringRecord, names: &[String], line: usize) -> DataError {
    let (cell, name) = record
        .iter()
        .zip(names)
        .find(|(cell, _)| is_missing(cell))
        .expect("called only for rows with a missing cell");
    DataError::EmptyCell {
        line,
        column: name.clone(),
        token: cell.to_string(),
    }
}

/// Rust's float grammar plus a leading `+`; it also accepts `nan`/`inf`, which are then refused as
/// non-finite with their own message.
fn parse_number(cell: &str) -> Option<f64> {
    cell.parse::<f64>().ok()
}

/// A guess at why a cell is not a number, for the error message.
fn non_numeric_hint(cell: &str) -> Option<String> {
    if cell.contains(',') && cell.replacen(',', ".", 1).parse::<f64>().is_ok() {
        return Some("decimal commas are not supported: use '.' as the decimal point".into());
    }
    let no_thousands: String = cell.chars().filter(|c| *c != ',' && *c != ' ').collect();
    if no_thousands != cell && no_thousands.parse::<f64>().is_ok() {
        return Some("remove thousands separators".into());
    }
    if cell.ends_with('%') && cell[..cell.len() - 1].trim().parse::<f64>().is_ok() {
        return Some("remove the '%' sign".into());
    }
    if cell.chars().any(|c| c.is_alphabetic()) {
        return Some(
            "categorical columns are not supported: encode them as numbers or remove them".into(),
        );
    }
    None
}

/// Refuses constant columns and columns that duplicate another one up to an affine map (identical
/// after standardisation, possibly negated): both make the GP model degenerate.
fn check_columns(dataset: &Dataset) -> Result<(), DataError> {
    let names = dataset.names();
    for (name, column) in names.iter().zip(dataset.columns()) {
        let first = column[0];
        if column.iter().all(|&v| v == first) {
            return Err(DataError::ConstantColumn {
                column: name.clone(),
                value: first,
            });
        }
    }
    if let Some((a, b, negated)) = first_duplicate_column(dataset.columns()) {
        return Err(DataError::DuplicateColumnData {
            column: names[b].clone(),
            copy_of: names[a].clone(),
            negated,
        });
    }
    Ok(())
}

/// The first pair (a < b, smallest b, then smallest a) of columns identical after
/// standardisation up to sign, within 1e-9 per value, and whether b is a's negation.
///
/// Sorting instead of comparing every pair keeps this n log n in the number of columns: each
/// column enters twice, as z and as −z, keyed by a fixed projection of its first rows; copies
/// have keys within the tolerance times the projection's weight, so only neighbours within that
/// window are compared value by value.
fn first_duplicate_column(columns: &[Vec<f64>]) -> Option<(usize, usize, bool)> {
    const TOLERANCE: f64 = 1e-9;
    let z: Vec<Vec<f64>> = columns.iter().map(|c| standardise(c)).collect();
    let rows = z.first().map_or(0, Vec::len);
    // Fixed, irregular weights over the first rows (no data-dependent choice).
    let weights: Vec<f64> = (0..rows.min(16))
        .map(|k| 1.0 + ((k as f64 + 1.0) * 0.618_033_988_75).fract())
        .collect();
    let window = TOLERANCE * weights.iter().sum::<f64>() * (1.0 + 1e-6);
    let key = |c: &[f64]| -> f64 { weights.iter().zip(c).map(|(w, v)| w * v).sum() };
    // (key, column, sign): every column as z and as −z.
    let mut entries: Vec<(f64, usize, f64)> = Vec::with_capacity(2 * z.len());
    for (j, c) in z.iter().enumerate() {
        let k = key(c);
        entries.push((k, j, 1.0));
        entries.push((-k, j, -1.0));
    }
    entries.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut best: Option<(usize, usize, bool)> = None;
    for (i, &(ki, ci, si)) in entries.iter().enumerate() {
        for &(kj, cj, sj) in &entries[i + 1..] {
            if kj - ki > window {
                break;
            }
            if ci == cj {
                continue;
            }
            let same = z[ci]
                .iter()
                .zip(&z[cj])
                .all(|(x, y)| (si * x - sj * y).abs() <= TOLERANCE);
            if same {
                let (a, b) = (ci.min(cj), ci.max(cj));
                let found = (a, b, si != sj);
                if best.is_none_or(|(ba, bb, _)| (b, a) < (bb, ba)) {
                    best = Some(found);
                }
            }
        }
    }
    best
}

#[cfg(test)]
mod tests;
