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
        let mut h = crate::base::checksum::Fnv1a::new();
        for name in &self.names {
            h.eat(name.as_bytes());
            h.eat(&[0]);
        }
        for c in &self.columns {
            for v in c {
                h.eat(&v.to_bits().to_le_bytes());
            }
        }
        h.value()
    }
}

/// `v · 2^k`, in steps that neither overflow nor underflow on the way: exact whenever the result
/// is a normal number (a power of two only moves the exponent).
fn times_pow2(v: f64, k: i32) -> f64 {
    let mut out = v;
    let mut left = k;
    while left != 0 {
        let step = left.clamp(-1000, 1000);
        out *= 2f64.powi(step);
        left -= step;
    }
    out
}

/// The k for which the largest |x| times 2^k lies in [1, 2) (0 for an all-zero or empty input).
/// Working in those units keeps every square and sum far from overflow (values near 1e308) and
/// underflow (values near 1e-320), and the power of two makes the change of units exact.
fn unit_exponent(x: &[f64]) -> i32 {
    let largest = x.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    if largest > 0.0 && largest.is_finite() {
        -(largest.log2().floor() as i32)
    } else {
        0
    }
}

/// Mean and population standard deviation sd = sqrt(Σ (x − mean)² / N), computed in two passes
/// in units where the largest |x| is about 1 (so neither 1e300 nor 1e-300 is lost), then given
/// back in the data's units. Both are at most max |x|, so both are representable.
pub(crate) fn mean_sd(x: &[f64]) -> (f64, f64) {
    if x.is_empty() {
        return (0.0, 0.0);
    }
    let k = unit_exponent(x);
    let (mean, sd) = scaled_mean_sd(x, k);
    (times_pow2(mean, -k), times_pow2(sd, -k))
}

/// Mean and population sd of x · 2^k (two passes).
fn scaled_mean_sd(x: &[f64], k: i32) -> (f64, f64) {
    let y: Vec<f64> = if k == 0 {
        x.to_vec()
    } else {
        x.iter().map(|&v| times_pow2(v, k)).collect()
    };
    let n = y.len() as f64;
    let mean = y.iter().sum::<f64>() / n;
    let var = y.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// z-scores of `x` with the population standard deviation, (x − mean) / sd, computed in the units
/// of [`mean_sd`], so data multiplied by any power of two gives bit-identical z-scores and data
/// at 1e300 or 1e-300 the same z-scores as at 1; a constant input maps to zeros.
pub fn standardise(x: &[f64]) -> Vec<f64> {
    if x.is_empty() {
        return Vec::new();
    }
    let k = unit_exponent(x);
    let y: Vec<f64> = x.iter().map(|&v| times_pow2(v, k)).collect();
    let (mean, sd) = scaled_mean_sd(&y, 0);
    if sd > 0.0 {
        y.iter().map(|v| (v - mean) / sd).collect()
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

    /// Issue 12: standardisation is blind to scale. Before, squares overflowed at about 1e154
    /// and underflowed below about 1e-162, and the column was silently zeroed.
    #[test]
    fn standardisation_is_the_same_at_any_scale() {
        let x: Vec<f64> = (0..50)
            .map(|k| (k as f64 * 0.37).sin() * 3.0 + 1.5)
            .collect();
        let z = standardise(&x);
        let (m, sd) = mean_sd(&x);
        for k in [-1070, -600, -1, 1, 600, 1000] {
            let scaled: Vec<f64> = x.iter().map(|&v| times_pow2(v, k)).collect();
            if k > -1000 {
                // A power of two (results normal) changes nothing, bit for bit.
                assert_eq!(standardise(&scaled), z, "2^{k}");
                let (ms, sds) = mean_sd(&scaled);
                assert_eq!((times_pow2(ms, -k), times_pow2(sds, -k)), (m, sd), "2^{k}");
            }
        }
        for factor in [1e160, 1e-170, 1e300, 1e-300, -1e200] {
            let scaled: Vec<f64> = x.iter().map(|&v| v * factor).collect();
            let zs = standardise(&scaled);
            let sign = factor.signum();
            for (a, b) in zs.iter().zip(&z) {
                assert!((a - sign * b).abs() < 1e-12, "×{factor}: {a} against {b}");
            }
            let (ms, sds) = mean_sd(&scaled);
            assert!(sds.is_finite() && sds > 0.0, "×{factor}: sd {sds}");
            assert!(((sds / factor.abs()) / sd - 1.0).abs() < 1e-12, "×{factor}");
            assert!(((ms / factor) / m - 1.0).abs() < 1e-12, "×{factor}");
        }
        // Values at the top of the range: the spread of ±1.5e308 is finite.
        let (_, sd) = mean_sd(&[1.5e308, -1.5e308]);
        assert_eq!(sd, 1.5e308);
        assert_eq!(standardise(&[1.5e308, -1.5e308]), vec![1.0, -1.0]);
        assert_eq!(standardise(&[0.0, 0.0]), vec![0.0, 0.0]);
        assert!(standardise(&[]).is_empty());
    }

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
    fn fingerprint_changes_with_any_value_or_name() {
        let a = Dataset::new(vec!["x".into()], vec![vec![1.0, 2.0]]);
        let b = Dataset::new(vec!["x".into()], vec![vec![1.0, 2.000001]]);
        let c = Dataset::new(vec!["y".into()], vec![vec![1.0, 2.0]]);
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
    }
}
