//! Causal discovery on top of the GP-CDE model: the two-variable direction test ([`bivariate`]),
//! the CGP-CDE continuous search ([`cgp`]) with its acyclicity penalty ([`spectral`]) and prior
//! knowledge ([`knowledge`]). The exact DGP-CDE enumeration arrives with its issue.
//!
//! Owns: turning fitted model evidence into causal decisions.

pub mod bivariate;
pub mod cgp;
pub mod knowledge;
pub mod spectral;
