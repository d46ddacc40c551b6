//! Causal discovery on top of the GP-CDE model: the two-variable direction test ([`bivariate`]),
//! the CGP-CDE continuous search ([`cgp`]) with its acyclicity penalty ([`spectral`]) and prior
//! knowledge ([`knowledge`]), and the evidence of one family F(i | S) ([`family`]), the local score
//! of the DGP-CDE, used to compare the search's restarts and as the local score of the exact search over DAGs
//! ([`exact`]), and the evidence behind each edge of a result ([`explain`]). The numeric work of all of them is described as independent, serialisable
//! [`jobs`], so a driver chooses where it runs.
//!
//! Owns: turning fitted model evidence into causal decisions.

pub mod bivariate;
pub mod cgp;
pub mod exact;
pub mod explain;
pub mod family;
pub mod jobs;
pub mod knowledge;
pub mod spectral;
