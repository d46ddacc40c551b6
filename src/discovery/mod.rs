//! Causal discovery on top of the GP-CDE model, its parts bottom to top:
//! - [`limits`], [`knowledge`] (prior knowledge), [`thresholding`] (the weighted graph cut to a
//!   DAG) and [`spectral`] (the acyclicity penalty): what the searches share and that knows no model;
//! - [`family`]: the evidence of one family F(i | S), the local score of the DGP-CDE, the building
//!   block of the searches; [`bivariate`]: the two-variable direction test built of it;
//! - [`exact`]: the exact search over DAGs by family scores;
//! - [`cgp`]: the CGP-CDE model's parts (one variable's collapsed model, the interface over both
//!   bounds);
//! - [`settings`]: the settings of a whole run (method, schedule, sizes, presets), declared once
//!   for the page and the CLI;
//! - [`jobs`]: the numeric work of all of them as independent, serialisable units, so a driver
//!   chooses where it runs;
//! - [`continuous`]: one restart of the continuous search as a state machine;
//! - [`explain`]: the evidence behind each edge of a result.
//!
//! Owns: turning fitted model evidence into causal decisions.

pub mod bivariate;
pub mod cgp;
pub mod continuous;
pub mod error;
pub mod exact;
pub mod explain;
pub mod family;
pub mod jobs;
pub mod knowledge;
pub mod limits;
pub mod settings;
pub mod spectral;
pub mod thresholding;
