//! A variable's start as a self-contained piece of work: [`ConditionalStart`] names the column, its
//! candidate parents and the search's settings, and [`ConditionalStart::build`] makes the variable
//! on the data (for the collapsed bound: the GP-regression start fitted by L-BFGS, MODEL.md §4.3;
//! for the uncollapsed one: MODEL.md §2.4–2.6). It holds no data, so it can travel to another
//! thread or worker.

use nalgebra::DMatrix;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::discovery::cgp::component::Component;
use crate::discovery::cgp::conditional::{BoundKind, Conditional, UncollapsedComponent};
use crate::discovery::cgp::RowWeight;
use crate::discovery::error::DiscoveryError;
use crate::discovery::settings::CheckedSettings;
use crate::gp::adam::AdamSettings;
use crate::gp::collapsed::{precision_scale, FitSettings, GpInitialisation, MIN_START_SE_VARIANCE};
use crate::gp::gp_cde::{GpCdeModel, GpCdeSettings, LatentKind};
use crate::gp::lbfgs::LbfgsSettings;

/// What starting variable i of a restart needs besides the data and the random stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConditionalStart {
    /// The modelled column i.
    pub child: usize,
    /// Its candidate parents (every column the background knowledge allows).
    pub parents: Vec<usize>,
    /// φ²'s floor for column i.
    pub noise_floor: f64,
    /// Rows of the whole data set (the bound of the rows used stands for them).
    pub total_rows: usize,
    pub settings: CheckedSettings,
}

impl ConditionalStart {
    /// Builds variable `child` on `data` (the rows used, N × D, standardised), drawing its random
    /// choices from `rng`.
    pub fn build(
        &self,
        data: &DMatrix<f64>,
        rng: &mut impl Rng,
    ) -> Result<Conditional, DiscoveryError> {
        let d = data.ncols();
        let (i, parents, s) = (self.child, &self.parents, &self.settings);
        if i >= d || parents.iter().any(|&j| j >= d || j == i) {
            return Err(DiscoveryError::VariableOutsideData {
                child: i,
                parents: parents.clone(),
                columns: d,
            });
        }
        // The kernel's inputs: the candidate parents and w.
        let start_scale = if s.collapsed.scale_start_precisions {
            precision_scale(parents.len() + 1)
        } else {
            1.0
        };
        let init = FitSettings {
            inducing_points: s.inducing_for(parents.len() + 1),
            gp_initialisation: GpInitialisation::Always,
            initial_precision: (0.01 * start_scale, start_scale),
            latent_start: s.collapsed.latent_start,
            min_start_se_variance: MIN_START_SE_VARIANCE,
            lbfgs: LbfgsSettings {
                max_iterations: s.start_iterations,
                ..FitSettings::default().lbfgs
            },
            ..FitSettings::default()
        };
        let rows = RowWeight {
            factor: self.total_rows as f64 / data.nrows() as f64,
            scaling: s.collapsed.subset_scaling,
        };
        let adam = AdamSettings {
            learning_rate: s.learning_rate,
            ..AdamSettings::default()
        };
        match s.bound {
            BoundKind::Collapsed => {
                Component::new(data, i, parents, &init, self.noise_floor, rows, adam, rng)
                    .map(|c| Conditional::Collapsed(Box::new(c)))
                    .map_err(DiscoveryError::from)
            }
            BoundKind::Uncollapsed => {
                let mask: Vec<f64> = (0..d)
                    .map(|j| {
                        if j == i || parents.contains(&j) {
                            1.0
                        } else {
                            0.0
                        }
                    })
                    .collect();
                let settings = GpCdeSettings {
                    inducing: s.inducing_for(parents.len() + 1),
                    samples: s.uncollapsed.samples,
                    latent: LatentKind::Encoder,
                    adam,
                    ..GpCdeSettings::default()
                };
                let v = GpCdeModel::new(data, i, &mask, &settings, rng);
                Ok(Conditional::Uncollapsed(Box::new(
                    UncollapsedComponent::new(i, v, s.uncollapsed.batch_size),
                )))
            }
        }
    }
}
