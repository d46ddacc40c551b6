//! The Gaussian-process conditional density estimator (GP-CDE) of MODEL.md: kernels with
//! hand-derived adjoints, the uncollapsed (SVGP) bound with a latent input, the collapsed bound
//! with psi-statistics, the q(w) encoder, parameter transforms, Cholesky with jitter, and the
//! optimisers (natural gradients for q(u), Adam, L-BFGS).
//!
//! Conventions: matrices are nalgebra `DMatrix<f64>`; a set of points is an `n × D` matrix (one
//! point per row) in the slot layout of MODEL.md §2.1 (column i of variable i's inputs is its
//! latent w). Kernel hyperparameters here are constrained values (variances and precisions ≥ 0);
//! the softplus transform to unconstrained optimiser variables lives in [`transform`].

/// The floor of every likelihood variance φ² (GPflow's Gaussian-likelihood default, MODEL.md
/// §2.3), raised per column to Δ²/12 for data recorded at resolution Δ ([`resolution`]).
pub const NOISE_VARIANCE_FLOOR: f64 = 1e-6;

pub mod adam;
pub mod collapsed;
pub mod device;
pub mod encoder;
pub mod gp_cde;
pub mod kernel;
pub(crate) mod lane_math;
pub mod lbfgs;
pub mod linalg;
pub mod natgrad;
pub mod params;
pub mod ready;
pub mod resolution;
pub mod svgp;
pub mod transform;
