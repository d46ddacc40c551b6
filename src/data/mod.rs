//! Data in: reading and validating CSV files and the [`Dataset`] every other layer consumes
//! (synthetic data with known ground truth is [`crate::generate`]'s).
//!
//! Owns: the CSV dialect Occam accepts and every way a file can be refused ([`DataError`]), the
//! problems that are repaired rather than refused ([`DataWarning`]), and standardisation.

mod csv_input;
mod dataset;
mod dequantise;
pub mod determined;
pub mod subsample;

pub use csv_input::{
    parse_csv, parse_csv_with_progress, CsvOptions, DataError, DataWarning, Parsed, MAX_CSV_BYTES,
    MIN_ROWS, PROGRESS_STEP_BYTES,
};
pub(crate) use dataset::mean_sd;
pub use dataset::{standardise, ColumnSummary, Dataset, DatasetSummary};
pub use dequantise::dequantise;
