//! The structural mechanisms: one raw (not yet standardised) column for one node from its parents'
//! standardised columns, plus a record of the parameters drawn.
//!
//! The caller (`generate`) visits nodes in topological order and standardises each column before
//! its children read it.

use nalgebra::DMatrix;
use rand::Rng;
use rand_distr::{Distribution, Gamma, StandardNormal};
use serde::{Deserialize, Serialize};

use super::gp_draw::{draw_exact, gram, NotPositiveDefinite};
use super::kernels::{linear, scaled_distance, StationaryKernel};
use super::mlp::{Mlp, HIDDEN};
use super::Mechanism;

/// The parameters drawn for one node's mechanism. Vectors indexed by input follow the node's
/// parents in ascending column order; for [`NodeMechanism::GpCde`] the latent input w comes last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NodeMechanism {
    /// Pure noise X_i = ε_i, ε_i ~ N(0, 1): the roots of the linear and additive-GP mechanisms.
    Noise,
    /// X_i = f_i([X_pa(i), ε_i]) with f_i a PyTorch-initialised ReLU network
    /// `inputs → hidden → ReLU → hidden → ReLU → 1`; `inputs` = parents + 1 (the noise input).
    Mlp {
        /// Network inputs: the parents, then ε_i.
        inputs: usize,
        /// Width of each of the two hidden layers.
        hidden: usize,
    },
    /// X_i = Σ_p w_ip X_p + ε_i.
    Linear {
        /// w_ip ~ ±U(0.5, 2), one per parent.
        weights: Vec<f64>,
    },
    /// Additive-noise GP: X_i = f_i(X_pa(i)) + σ_i ε_i, f_i ~ GP(0, exp(−½ Σ_p (Δ_p/ℓ_p)²)).
    Gp {
        /// ℓ_p ~ U(0.5, 2), one per parent.
        lengthscales: Vec<f64>,
        /// σ_i ~ U(0.3, 0.7).
        noise_sd: f64,
        /// Absolute jitter added to K's diagonal to factorise it.
        jitter: f64,
    },
    /// GP-CDE sample (the paper's appendix F): X_i = f_i(u) + √φ_i ε_i with u = [X_pa(i), w_i], w_i ~ N(0, 1),
    /// f_i ~ GP(0, σ_lin u·u′ + σ_c κ(r)), r² = Σ_j θ_j² (u_j − u′_j)².
    GpCde {
        /// The stationary shape κ, uniform over Matérn-1/2, 3/2, 5/2, SE and RQ (α ~ U(0.1, 10)).
        kernel: StationaryKernel,
        /// σ_lin ~ U(1, 100).
        linear_variance: f64,
        /// σ_c ~ U(1, 100).
        kernel_variance: f64,
        /// θ_j ~ Gamma(shape 1.5, scale 1), one per input (parents, then w).
        precisions: Vec<f64>,
        /// φ_i ~ U(0.01, 1), the noise variance (MODEL.md §10 item 17).
        noise_variance: f64,
        /// Absolute jitter added to K's diagonal to factorise it.
        jitter: f64,
    },
}

/// Samples one node's raw column of length `n` from its parents' (standardised) columns.
pub(crate) fn sample_node<R: Rng + ?Sized>(
    mechanism: Mechanism,
    parents: &[&[f64]],
    n: usize,
    rng: &mut R,
) -> Result<(Vec<f64>, NodeMechanism), NotPositiveDefinite> {
    match mechanism {
        Mechanism::Mlp => Ok(mlp_node(parents, n, rng)),
        Mechanism::Linear => Ok(linear_node(parents, n, rng)),
        Mechanism::Gp => gp_node(parents, n, rng),
        Mechanism::GpCde => gp_cde_node(parents, n, rng),
    }
}

fn normals<R: Rng + ?Sized>(n: usize, rng: &mut R) -> Vec<f64> {
    (0..n).map(|_| rng.sample(StandardNormal)).collect()
}

fn mlp_node<R: Rng + ?Sized>(
    parents: &[&[f64]],
    n: usize,
    rng: &mut R,
) -> (Vec<f64>, NodeMechanism) {
    let inputs = parents.len() + 1;
    let net = Mlp::mechanism(inputs, rng);
    let eps = normals(n, rng);
    let x = DMatrix::from_fn(n, inputs, |row, j| {
        if j < parents.len() {
            parents[j][row]
        } else {
            eps[row]
        }
    });
    let out = net.forward(&x);
    (
        out.column(0).iter().copied().collect(),
        NodeMechanism::Mlp {
            inputs,
            hidden: HIDDEN,
        },
    )
}

fn linear_node<R: Rng + ?Sized>(
    parents: &[&[f64]],
    n: usize,
    rng: &mut R,
) -> (Vec<f64>, NodeMechanism) {
    let mut x = normals(n, rng);
    if parents.is_empty() {
        return (x, NodeMechanism::Noise);
    }
    let weights: Vec<f64> = parents
        .iter()
        .map(|_| {
            let magnitude = rng.random_range(0.5..2.0);
            if rng.random_bool(0.5) {
                magnitude
            } else {
                -magnitude
            }
        })
        .collect();
    for (column, w) in parents.iter().zip(&weights) {
        for (xi, p) in x.iter_mut().zip(column.iter()) {
            *xi += w * p;
        }
    }
    (x, NodeMechanism::Linear { weights })
}

/// Row-major n × (parents + extra.len()) input matrix: the parents' values, then `extra` columns.
fn inputs_row_major(parents: &[&[f64]], extra: &[&[f64]], n: usize) -> Vec<f64> {
    let mut u = Vec::with_capacity(n * (parents.len() + extra.len()));
    for row in 0..n {
        u.extend(parents.iter().chain(extra).map(|c| c[row]));
    }
    u
}

/// x_n = f_n + σ ε_n with ε_n ~ N(0, 1), drawn in row order.
fn with_noise<R: Rng + ?Sized>(f: &[f64], sigma: f64, rng: &mut R) -> Vec<f64> {
    f.iter()
        .map(|fv| fv + sigma * rng.sample::<f64, _>(StandardNormal))
        .collect()
}

fn gp_node<R: Rng + ?Sized>(
    parents: &[&[f64]],
    n: usize,
    rng: &mut R,
) -> Result<(Vec<f64>, NodeMechanism), NotPositiveDefinite> {
    if parents.is_empty() {
        return Ok((normals(n, rng), NodeMechanism::Noise));
    }
    let d = parents.len();
    let lengthscales: Vec<f64> = (0..d).map(|_| rng.random_range(0.5..2.0)).collect();
    let noise_sd = rng.random_range(0.3..0.7);
    let scales: Vec<f64> = lengthscales.iter().map(|l| 1.0 / l).collect();
    let u = inputs_row_major(parents, &[], n);
    let se = StationaryKernel::SquaredExponential;
    let k = gram(n, |a, b| {
        se.value(
            1.0,
            scaled_distance(&u[a * d..(a + 1) * d], &u[b * d..(b + 1) * d], &scales),
        )
    });
    let f = draw_exact(&k, rng)?;
    let x = with_noise(&f.values, noise_sd, rng);
    Ok((
        x,
        NodeMechanism::Gp {
            lengthscales,
            noise_sd,
            jitter: f.jitter,
        },
    ))
}

fn gp_cde_node<R: Rng + ?Sized>(
    parents: &[&[f64]],
    n: usize,
    rng: &mut R,
) -> Result<(Vec<f64>, NodeMechanism), NotPositiveDefinite> {
    let kernel = match rng.random_range(0..5u32) {
        0 => StationaryKernel::Matern12,
        1 => StationaryKernel::Matern32,
        2 => StationaryKernel::Matern52,
        3 => StationaryKernel::SquaredExponential,
        _ => StationaryKernel::RationalQuadratic {
            alpha: rng.random_range(0.1..10.0),
        },
    };
    let linear_variance = rng.random_range(1.0..100.0);
    let kernel_variance = rng.random_range(1.0..100.0);
    let d = parents.len() + 1;
    let gamma = Gamma::new(1.5, 1.0).expect("shape and scale are positive");
    let precisions: Vec<f64> = (0..d).map(|_| gamma.sample(rng)).collect();
    let noise_variance: f64 = rng.random_range(0.01..1.0);
    let w = normals(n, rng);
    let u = inputs_row_major(parents, &[&w], n);
    let k = gram(n, |a, b| {
        let (ua, ub) = (&u[a * d..(a + 1) * d], &u[b * d..(b + 1) * d]);
        linear(linear_variance, ua, ub)
            + kernel.value(kernel_variance, scaled_distance(ua, ub, &precisions))
    });
    let f = draw_exact(&k, rng)?;
    let x = with_noise(&f.values, noise_variance.sqrt(), rng);
    Ok((
        x,
        NodeMechanism::GpCde {
            kernel,
            linear_variance,
            kernel_variance,
            precisions,
            noise_variance,
            jitter: f.jitter,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn linear_child_is_the_weighted_sum_plus_unit_noise() {
        // Regress the child on its two parents: the coefficients are the recorded weights and the
        // residual variance is about 1.
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let n = 4000;
        let p1 = normals(n, &mut rng);
        let p2 = normals(n, &mut rng);
        let (x, meta) = sample_node(Mechanism::Linear, &[&p1, &p2], n, &mut rng).unwrap();
        let NodeMechanism::Linear { weights } = meta else {
            panic!("{meta:?}")
        };
        assert!(weights.iter().all(|w| (0.5..2.0).contains(&w.abs())));
        let design = DMatrix::from_fn(n, 2, |r, j| if j == 0 { p1[r] } else { p2[r] });
        let y = nalgebra::DVector::from_vec(x);
        let beta = (design.transpose() * &design)
            .cholesky()
            .unwrap()
            .solve(&(design.transpose() * &y));
        for j in 0..2 {
            // The OLS standard error is about 1/√n ≈ 0.016.
            assert!((beta[j] - weights[j]).abs() < 0.08, "{beta} vs {weights:?}");
        }
        let resid = &y - &design * &beta;
        assert!((resid.norm_squared() / n as f64 - 1.0).abs() < 0.1);
    }

    #[test]
    fn roots_and_recorded_parameters_follow_the_recipes() {
        let mut rng = ChaCha8Rng::seed_from_u64(22);
        let n = 50;
        for mech in [Mechanism::Linear, Mechanism::Gp] {
            let (_, meta) = sample_node(mech, &[], n, &mut rng).unwrap();
            assert_eq!(meta, NodeMechanism::Noise);
        }
        let (_, meta) = sample_node(Mechanism::Mlp, &[], n, &mut rng).unwrap();
        assert_eq!(
            meta,
            NodeMechanism::Mlp {
                inputs: 1,
                hidden: 128
            }
        );
        let parent = normals(n, &mut rng);
        let (_, meta) = sample_node(Mechanism::Gp, &[&parent], n, &mut rng).unwrap();
        let NodeMechanism::Gp {
            lengthscales,
            noise_sd,
            jitter,
        } = meta
        else {
            panic!("{meta:?}")
        };
        assert_eq!(lengthscales.len(), 1);
        assert!((0.5..2.0).contains(&lengthscales[0]));
        assert!((0.3..0.7).contains(&noise_sd));
        assert!(jitter > 0.0 && jitter <= 1e-4);
        for _ in 0..10 {
            let (x, meta) = sample_node(Mechanism::GpCde, &[&parent], n, &mut rng).unwrap();
            assert!(x.iter().all(|v| v.is_finite()));
            let NodeMechanism::GpCde {
                kernel,
                linear_variance,
                kernel_variance,
                precisions,
                noise_variance,
                ..
            } = meta
            else {
                panic!("{meta:?}")
            };
            assert_eq!(precisions.len(), 2, "one per parent plus w");
            assert!(precisions.iter().all(|t| *t > 0.0));
            assert!((1.0..100.0).contains(&linear_variance));
            assert!((1.0..100.0).contains(&kernel_variance));
            assert!((0.01..1.0).contains(&noise_variance));
            if let StationaryKernel::RationalQuadratic { alpha } = kernel {
                assert!((0.1..10.0).contains(&alpha));
            }
        }
    }

    #[test]
    fn gp_cde_draws_every_kernel_kind() {
        let mut rng = ChaCha8Rng::seed_from_u64(23);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..60 {
            let (_, meta) = sample_node(Mechanism::GpCde, &[], 5, &mut rng).unwrap();
            if let NodeMechanism::GpCde { kernel, .. } = meta {
                seen.insert(match kernel {
                    StationaryKernel::Matern12 => 0,
                    StationaryKernel::Matern32 => 1,
                    StationaryKernel::Matern52 => 2,
                    StationaryKernel::SquaredExponential => 3,
                    StationaryKernel::RationalQuadratic { .. } => 4,
                });
            }
        }
        // Missing one of five kinds in 60 uniform draws has probability about 5·(4/5)^60 ≈ 8e-6.
        assert_eq!(seen.len(), 5);
    }
}
