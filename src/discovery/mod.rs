//! Causal discovery on top of the GP-CDE model: the two-variable direction test now; the CGP-CDE
//! continuous search and the exact DGP-CDE enumeration arrive with their issues.
//!
//! Owns: turning fitted model evidence into causal decisions.

pub mod bivariate;
