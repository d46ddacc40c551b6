//! [`Dataset`]: named numeric columns, validated and ready for the model.

use serde::{Deserialize, Serialize};

/// A table of `rows × columns` finite numbers with a name per column.
///
/// Stored column-major (`columns[j][n]` is row n of column j) because every consumer works a
/// variable at a time: standardisation, the per-variable GP, summaries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Dataset {
    names: Vec<String>,
    columns: Vec<Vec<f64>>,
}

/// Summary statistics of one column (population standard deviation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ColumnSummary {
    pub name: String,
    pub mean: f64,
    pub sd: f64,
    pub min: f64,
    pub max: f64,
    /// Number of distinct values (a column with few is likely discrete).
    pub distinct: usize,
}

/// What a user needs to see about a loaded table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetSummary {
    pub rows: usize,
    pub columns: usize,
    pub names: Vec<String>,
    pub column_summaries: Vec<ColumnSummary>,
}

impl Dataset {
    /// Builds a dataset from named columns. Panics if the shapes disagree: callers (the CSV reader,
    /// the generators) construct consistent columns, and user input never reaches here unchecked.
    pub fn new(names: Vec<String>, columns: Vec<Vec<f64>>) -> Self {
        assert_eq!(names.len(), columns.len(), "one name per column");
        if let Some(first) = columns.first() {
            assert!(
                columns.iter().all(|c| c.len() == first.len()),
                "all columns must have the same length"
            );
        }
        Self { names, columns }
    }

    /// Number of rows N.
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, Vec::len)
    }

    /// Number of columns D.
    pub fn cols(&self) -> usize {
        self.columns.len()
    }

    /// Column names, in order.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Column `j`.
    pub fn column(&self, j: usize) -> &[f64] {
        &self.columns[j]
    }

    /// All columns.
    pub fn columns(&self) -> &[Vec<f64>] {
        &self.columns
    }

    /// Row `n` as a vector.
    pub fn row(&self, n: usize) -> Vec<f64> {
        self.columns.iter().map(|c| c[n]).collect()
    }

    /// The data as an N × D nalgebra matrix (column-major, like the storage).
    pub fn to_matrix(&self) -> nalgebra::DMatrix<f64> {
        nalgebra::DMatrix::from_fn(self.rows(), self.cols(), |n, j| self.columns[j][n])
    }

    /// A copy with every column standardised: x ↦ (x − mean) / sd, with the population standard
    /// deviation sd = sqrt(Σ (x − mean)² / N) (ddof = 0, as scikit-learn's StandardScaler).
    /// A constant column (sd = 0) is left centred at 0; the CSV reader refuses such columns.
    pub fn standardised(&self) -> Self {
        Self {
            names: self.names.clone(),
            columns: self.columns.iter().map(|c| standardise(c)).collect(),
        }
    }

    /// Per-column statistics.
    pub fn summary(&self) -> DatasetSummary {
        DatasetSummary {
            rows: self.rows(),
            columns: self.cols(),
            names: self.names.clone(),
            column_summaries: self
                .names
                .iter()
                .zip(&self.columns)
                .map(|(name, c)| summarise(name, c))
                .collect(),
        }
    }

    /// The dataset as CSV text: a header of names (quoted where needed), then one line per row with
    /// every value in Rust's shortest round-trip decimal form, so reading it back is lossless.
    pub fn to_csv(&self) -> String {
        let mut writer = csv::Writer::from_writer(Vec::new());
        // Writing to a Vec cannot fail, and every record has the header's length.
        writer
            .write_record(&self.names)
            .expect("in-memory CSV write");
        for n in 0..self.rows() {
            writer
                .write_record(self.columns.iter().map(|c| c[n].to_string()))
                .expect("in-memory CSV write");
        }
        let bytes = writer.into_inner().expect("in-memory CSV flush");
        String::from_utf8(bytes).expect("CSV of UTF-8 names and numbers is UTF-8")
    }

    /// A 64-bit FNV-1a fingerprint of names and values (bit patterns), to tie a result to its data.
    pub fn fingerprint(&self) -> u64 {
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                h ^= u64::from(b);
                h = h.wrapping_mul(PRIME);
            }
        };
        for name in &self.names {
            eat(name.as_bytes());
            eat(&[0]);
        }
        for c in &self.columns {
            for v in c {
                eat(&v.to_bits().to_le_bytes());
            }
        }
        h
    }
}

/// Mean and population standard deviation, computed in two passes for accuracy.
pub(crate) fn mean_sd(x: &[f64]) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// z-scores of `x` with the population standard deviation; a constant input maps to zeros.
pub fn standardise(x: &[f64]) -> Vec<f64> {
    let (mean, sd) = mean_sd(x);
    if sd > 0.0 {
        x.iter().map(|v| (v - mean) / sd).collect()
    } else {
        vec![0.0; x.len()]
    }
}

fn summarise(name: &str, x: &[f64]) -> ColumnSummary {
    let (mean, sd) = mean_sd(x);
    let mut sorted: Vec<f64> = x.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    ColumnSummary {
        name: name.to_string(),
        mean,
        sd,
        min: x.iter().copied().fold(f64::INFINITY, f64::min),
        max: x.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        distinct: sorted.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standardised_columns_have_mean_zero_and_population_sd_one() {
        let d = Dataset::new(
            vec!["a".into(), "b".into()],
            vec![vec![1.0, 2.0, 3.0, 4.0], vec![10.0, -5.0, 2.5, 7.0]],
        );
        let s = d.standardised();
        for c in s.columns() {
            let (m, sd) = mean_sd(c);
            assert!(m.abs() < 1e-15);
            assert!((sd - 1.0).abs() < 1e-15);
        }
        // Population sd of 1,2,3,4 is sqrt(1.25): the first value maps to -1.5/sqrt(1.25).
        assert!((s.column(0)[0] + 1.5 / 1.25f64.sqrt()).abs() < 1e-15);
        assert_eq!(s.names(), d.names());
    }

    #[test]
    fn summary_reports_shape_and_stats() {
        let d = Dataset::new(vec!["x".into()], vec![vec![2.0, 4.0, 4.0, 6.0]]);
        let s = d.summary();
        assert_eq!((s.rows, s.columns), (4, 1));
        let c = &s.column_summaries[0];
        assert_eq!((c.min, c.max, c.distinct), (2.0, 6.0, 3));
        assert!((c.mean - 4.0).abs() < 1e-15);
        assert!((c.sd - 2.0f64.sqrt()).abs() < 1e-15);
    }

    #[test]
    fn csv_output_reads_back_losslessly() {
        let d = Dataset::new(
            vec!["x, quoted".into(), "y".into()],
            vec![
                (0..12).map(|n| (n as f64).sin() * 1e-7).collect(),
                (0..12).map(|n| 1.0 / (n as f64 + 3.0)).collect(),
            ],
        );
        let parsed =
            crate::data::parse_csv(d.to_csv().as_bytes(), &crate::data::CsvOptions::default())
                .unwrap();
        assert_eq!(parsed.dataset, d);
    }

    #[test]
    fn fingerprint_changes_with_any_value_or_name() {
        let a = Dataset::new(vec!["x".into()], vec![vec![1.0, 2.0]]);
        let b = Dataset::new(vec!["x".into()], vec![vec![1.0, 2.000001]]);
        let c = Dataset::new(vec!["y".into()], vec![vec![1.0, 2.0]]);
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
    }
}
