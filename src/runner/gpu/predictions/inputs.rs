//! The inputs of one request's predictions ([`PointInputs`]): the host's values, and which of
//! them a device that holds them supplies itself.

use nalgebra::{DMatrix, DVector};

use crate::gp::kernel::Kernel;
use crate::gp::svgp::{LatentBatch, PredictionRequest};
use crate::runner::gpu::f32_bytes;

/// The inputs of one request's predictions that do not depend on where L⁻¹ and q(v) come from.
#[derive(Debug, Clone, Copy)]
pub(in crate::runner::gpu) struct PointInputs<'a> {
    pub kernel: &'a Kernel,
    pub z: &'a DMatrix<f64>,
    pub x: &'a DMatrix<f64>,
    pub y: &'a DVector<f64>,
    /// q(w)'s (μ_n, Σ_n) and the noise ε_sn of the draws w_sn = μ_n + √Σ_n ε_sn.
    pub latent: &'a LatentBatch,
    /// Write Z (its shape is `z`'s) from `z`; else the caller copies it into
    /// [`PredictionPlan::z`](super::PredictionPlan::z) (a device that holds Z).
    pub upload_z: bool,
    /// Upload only the noise ε of the latent input: the caller's passes write q(w)'s moments
    /// into [`PredictionPlan::latent`](super::PredictionPlan::latent) before the evaluation
    /// points (a device that runs the encoder).
    pub latent_on_device: bool,
    /// Upload neither x nor y: the caller's passes write them into
    /// [`PredictionPlan::x`](super::PredictionPlan::x) and
    /// [`PredictionPlan::y`](super::PredictionPlan::y) before the evaluation points (a device
    /// that holds the data).
    pub rows_on_device: bool,
    /// Upload neither the kernel's parameters nor anything formed from φ²: the caller's pass
    /// derives them from the hyperparameters the device holds into
    /// [`PredictionPlan::params`](super::PredictionPlan::params) before the evaluation points (a
    /// device that steps the hyperparameters); `kernel` then gives the shapes only.
    pub parameters_on_device: bool,
    /// φ².
    pub noise: f64,
    /// c = N/(bS), the weight of each draw's term ([`PredictionRequest::c`]).
    pub c: f64,
}

impl<'a> PointInputs<'a> {
    /// A request's inputs with everything uploaded from the host (Z, the rows, q(w)'s moments,
    /// the kernel's parameters), `noise` = φ² and `c` = N/(bS); a device that holds some of them
    /// sets their flags on this.
    pub(in crate::runner::gpu) fn uploaded(
        kernel: &'a Kernel,
        z: &'a DMatrix<f64>,
        x: &'a DMatrix<f64>,
        y: &'a DVector<f64>,
        latent: &'a LatentBatch,
        noise: f64,
        c: f64,
    ) -> Self {
        PointInputs {
            kernel,
            z,
            x,
            y,
            latent,
            upload_z: true,
            latent_on_device: false,
            rows_on_device: false,
            parameters_on_device: false,
            noise,
            c,
        }
    }

    /// [`PointInputs::uploaded`] for a request whose predictions the host sends whole.
    pub(in crate::runner::gpu) fn of_request(r: &PredictionRequest<'a>) -> Self {
        let input = r.input;
        Self::uploaded(
            input.kernel,
            input.z,
            input.x,
            input.y,
            r.latent,
            input.noise,
            r.c,
        )
    }
}

/// The latent input as `points.wgsl` reads it: ε (S × b, column-major: draw s of row n at
/// n·S + s), then (μ_n, √Σ_n) for each row n, as float32.
pub(super) fn latent_bytes(latent: &LatentBatch) -> Vec<u8> {
    let rows = latent
        .mu
        .iter()
        .zip(latent.var.iter())
        .flat_map(|(&mu, &var)| [mu, var.sqrt()]);
    f32_bytes(latent.eps.iter().copied().chain(rows))
}
