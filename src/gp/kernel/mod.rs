//! The GP-CDE kernel of MODEL.md §2.2 (form P1, "ARD / joint scaled distance") with hand-derived
//! adjoints, GPy-style (DESIGN.md §7): a backward pass receives dL/dK and returns the gradients of
//! every hyperparameter and of both input sets.
//!
//! With the edge mask E_j ∈ {0, 1} and θ̃_j = E_j θ_j,
//!
//! ```text
//! k(u, u')   = k_lin + Σ_c s^c κ_c(r_c²)
//! k_lin      = Σ_j θ̃^lin_j u_j u'_j
//! r_c²       = Σ_j (θ̃^c_j)² (u_j − u'_j)²
//! k(u, u)    = Σ_j θ̃^lin_j u_j² + Σ_c s^c          (exactly)
//! ```
//!
//! and κ_c one of the unit shapes of [`StationaryKind`]. All values are constrained (variances and
//! precisions ≥ 0, a > 0); gradients are with respect to the unmasked θ, so a masked dimension gets
//! an exact 0 and its inputs never enter a value or a gradient.
//!
//! Layout: `scalar` holds the per-kind closed forms, `dense` the forward matrices, `backward`
//! their adjoints; this file holds the types, constructors and the flat parameter order.

mod backward;
mod dense;
mod latent;
pub use latent::{LatentBlock, LatentBlockGrad, LatentObserved, ROWS_PER_BLOCK};
mod scalar;
mod shapes;

pub use scalar::{
    unit_dvalue_dalpha, unit_dvalue_dalpha_from_value, unit_dvalue_dr2, unit_value,
    unit_value_and_dr2, StationaryKind,
};

use serde::{Deserialize, Serialize};

use super::params::{ParamBlock, ParamStore, Transform};

/// One stationary summand s · κ(r²) with its own ARD precisions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationaryPart {
    pub kind: StationaryKind,
    /// The kernel variance s^c.
    pub variance: f64,
    /// The precisions θ^c_j (inverse lengthscales), one per input dimension.
    pub precision: Vec<f64>,
    /// The shape a of a rational-quadratic part (`Some` exactly for that kind): a parameter of
    /// its kind, declared with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

impl StationaryPart {
    /// A part of `kind`; `alpha` is kept only for the rational-quadratic kind, which needs it.
    pub fn new(kind: StationaryKind, variance: f64, precision: Vec<f64>, alpha: f64) -> Self {
        Self {
            kind,
            variance,
            precision,
            alpha: (kind == StationaryKind::RationalQuadratic).then_some(alpha),
        }
    }

    /// The shape handed to the unit shapes of [`StationaryKind`]: a for a rational-quadratic
    /// part, 1 (unused) for the others.
    pub fn shape(&self) -> f64 {
        self.alpha.unwrap_or(1.0)
    }
}

/// The kernel k = k_lin + Σ stationary parts, on D-dimensional inputs (slot layout, MODEL.md §2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kernel {
    /// θ^lin_j, per-dimension variances of the linear part; `None` for no linear part.
    pub linear: Option<Vec<f64>>,
    pub stationary: Vec<StationaryPart>,
    /// E_j ∈ {0, 1}: multiplies θ^lin_j and every θ^c_j.
    pub mask: Vec<f64>,
}

/// dL/d(hyperparameters) of a [`Kernel`], shaped like it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelGrad {
    pub linear: Option<Vec<f64>>,
    pub stationary: Vec<StationaryPartGrad>,
}

/// dL/d(s^c) and dL/d(θ^c_j) of one stationary part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StationaryPartGrad {
    pub variance: f64,
    pub precision: Vec<f64>,
    /// dL/da of a rational-quadratic part (`Some` exactly where the part has a).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
}

/// The handles of a kernel's hyperparameters in a model's [`ParamStore`]
/// ([`Kernel::declare_params`]). The models read the kernel as one block (`all`); the per-part
/// handles name each hyperparameter's own entries, for code that reads one of them (the tests
/// hold each handle to its parameter).
#[derive(Debug, Clone, PartialEq)]
pub struct KernelBlocks {
    /// Every hyperparameter, in the order of [`Kernel::params_to_vec`].
    pub all: ParamBlock,
    /// θ^lin, when the kernel has a linear part.
    pub linear: Option<ParamBlock>,
    /// Each stationary part's blocks, in the kernel's order.
    pub parts: Vec<StationaryBlocks>,
}

/// The handles of one stationary part's hyperparameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StationaryBlocks {
    /// s^c.
    pub variance: ParamBlock,
    /// θ^c, one entry per input.
    pub precision: ParamBlock,
    /// a, for a rational-quadratic part.
    pub alpha: Option<ParamBlock>,
}

impl Kernel {
    /// The CGP-CDE kernel of MODEL.md §2.2: k = k_lin + k_se + k_m12 + k_m32 + k_rq on `dim`
    /// inputs, with θ^lin_j = `linear` for every j, s^c = `variance` for every part, θ^c =
    /// `precisions[c]` in the order of [`StationaryKind::ALL`] (se, m12, m32, rq), the RQ part's
    /// shape `rq_alpha`, and every mask entry 1. The §2.4 initialisation is `linear = 0.25`,
    /// `variance = 1`, θ^c_j ~ U(0.01, 1), a ~ U(0.1, 10), drawn by the caller.
    ///
    /// Panics if a precision vector does not have length `dim`.
    pub fn cgp_cde(
        dim: usize,
        linear: f64,
        variance: f64,
        precisions: [Vec<f64>; 4],
        rq_alpha: f64,
    ) -> Kernel {
        let stationary = StationaryKind::ALL
            .into_iter()
            .zip(precisions)
            .map(|(kind, precision)| {
                assert_eq!(
                    precision.len(),
                    dim,
                    "{kind:?} precisions must have length {dim}"
                );
                StationaryPart::new(kind, variance, precision, rq_alpha)
            })
            .collect();
        Kernel {
            linear: Some(vec![linear; dim]),
            stationary,
            mask: vec![1.0; dim],
        }
    }

    /// The SE-ARD + linear kernel of the collapsed bound (MODEL.md §4.1):
    /// k = Σ_j v_j u_j u'_j + s e^{−r²/2}, r² = Σ_j θ_j² (u_j − u'_j)², with `linear` = v (pass
    /// `vec![v; D]` for the bivariate code's single shared variance), `variance` = s,
    /// `precision` = θ, mask all 1.
    ///
    /// Panics if `linear` and `precision` differ in length.
    pub fn se_plus_linear(linear: Vec<f64>, variance: f64, precision: Vec<f64>) -> Kernel {
        assert_eq!(
            linear.len(),
            precision.len(),
            "linear and SE precisions differ in length"
        );
        let dim = precision.len();
        Kernel {
            linear: Some(linear),
            stationary: vec![StationaryPart::new(
                StationaryKind::SquaredExponential,
                variance,
                precision,
                1.0,
            )],
            mask: vec![1.0; dim],
        }
    }

    /// D, the input dimension (the length of the mask).
    pub fn dim(&self) -> usize {
        self.mask.len()
    }

    /// Whether any stationary part is rational quadratic (so a is a parameter).
    pub fn has_rq(&self) -> bool {
        self.stationary.iter().any(|p| p.alpha.is_some())
    }

    /// The kernel with `alpha` as the shape of its rational-quadratic part(s).
    pub fn with_rq_alpha(mut self, alpha: f64) -> Kernel {
        for a in self.stationary.iter_mut().filter_map(|p| p.alpha.as_mut()) {
            *a = alpha;
        }
        self
    }

    /// The shape a of the rational-quadratic part, if there is one (the GPU's kernel takes one).
    pub fn rq_alpha(&self) -> Option<f64> {
        self.stationary.iter().find_map(|p| p.alpha)
    }

    /// A gradient of this kernel's shape with every entry 0 (the start of an accumulation).
    pub fn new_zeroed_grad(&self) -> KernelGrad {
        let d = self.dim();
        KernelGrad {
            linear: self.linear.as_ref().map(|_| vec![0.0; d]),
            stationary: self
                .stationary
                .iter()
                .map(|part| StationaryPartGrad {
                    variance: 0.0,
                    precision: vec![0.0; d],
                    alpha: part.alpha.map(|_| 0.0),
                })
                .collect(),
        }
    }

    /// The number of flat parameters: D (if linear) + (1 + D) per stationary part + 1 per RQ part.
    pub fn param_count(&self) -> usize {
        let d = self.dim();
        self.linear.as_ref().map_or(0, |_| d)
            + self
                .stationary
                .iter()
                .map(|p| 1 + d + usize::from(p.alpha.is_some()))
                .sum::<usize>()
    }

    /// The hyperparameters flattened in the one order used everywhere (optimisers, finite
    /// differences, [`KernelGrad::to_vec`]): θ^lin[0..D] (if a linear part), then for each
    /// stationary part in order its s^c, θ^c[0..D] and, for a rational-quadratic part, a. With
    /// the RQ part last (the CGP-CDE kernel) a is the last entry. The mask is not a parameter.
    pub fn params_to_vec(&self) -> Vec<f64> {
        flatten(
            self.linear.as_deref(),
            self.stationary
                .iter()
                .map(|p| (p.variance, p.precision.as_slice(), p.alpha)),
        )
    }

    /// Declares the hyperparameters as blocks of `store`, named `prefix` + `linear`,
    /// `<kind>.variance`, `<kind>.precision` (e.g. `squared_exponential.precision`) and
    /// `rational_quadratic.alpha`, in the order of [`Kernel::params_to_vec`]; all positive with
    /// no floor; `linear` and every precision block per input (entry j switches input j on).
    /// Returns the blocks' handles.
    pub fn declare_params(&self, store: &mut ParamStore, prefix: &str) -> KernelBlocks {
        let d = self.dim();
        let start = store.len();
        let linear = self
            .linear
            .is_some()
            .then(|| store.add_per_input(format!("{prefix}linear"), d, Transform::POSITIVE));
        let parts = self
            .stationary
            .iter()
            .map(|part| {
                let kind: &str = part.kind.into();
                StationaryBlocks {
                    variance: store.add(format!("{prefix}{kind}.variance"), 1, Transform::POSITIVE),
                    precision: store.add_per_input(
                        format!("{prefix}{kind}.precision"),
                        d,
                        Transform::POSITIVE,
                    ),
                    alpha: part.alpha.is_some().then(|| {
                        store.add(format!("{prefix}{kind}.alpha"), 1, Transform::POSITIVE)
                    }),
                }
            })
            .collect();
        KernelBlocks {
            all: store.declared_since(start),
            linear,
            parts,
        }
    }

    /// Sets the hyperparameters from a flat slice in the order of [`Kernel::params_to_vec`].
    ///
    /// Panics if `p.len() != self.param_count()`.
    pub fn set_params_from_slice(&mut self, p: &[f64]) {
        assert_eq!(p.len(), self.param_count(), "flat kernel parameter length");
        let d = self.dim();
        let mut rest = p;
        let mut take = |n: usize| {
            let (head, tail) = rest.split_at(n);
            rest = tail;
            head
        };
        if let Some(lin) = &mut self.linear {
            lin.copy_from_slice(take(d));
        }
        for part in &mut self.stationary {
            part.variance = take(1)[0];
            part.precision.copy_from_slice(take(d));
            if let Some(alpha) = &mut part.alpha {
                *alpha = take(1)[0];
            }
        }
    }

    /// θ̃ = E ∘ θ, the precisions or linear variances as they act on the inputs.
    fn masked(&self, theta: &[f64]) -> Vec<f64> {
        assert_eq!(
            theta.len(),
            self.dim(),
            "kernel parameter length differs from the mask's"
        );
        theta.iter().zip(&self.mask).map(|(t, e)| t * e).collect()
    }
}

/// The flat order shared by the parameters and their gradient: the linear weights, then per
/// stationary part its variance, precisions and (a rational-quadratic part's) shape.
fn flatten<'a>(
    linear: Option<&[f64]>,
    parts: impl Iterator<Item = (f64, &'a [f64], Option<f64>)>,
) -> Vec<f64> {
    let mut v = linear.map(<[f64]>::to_vec).unwrap_or_default();
    for (variance, precision, alpha) in parts {
        v.push(variance);
        v.extend_from_slice(precision);
        v.extend(alpha);
    }
    v
}

impl KernelGrad {
    /// The gradient flattened in the order of [`Kernel::params_to_vec`].
    pub fn to_vec(&self) -> Vec<f64> {
        flatten(
            self.linear.as_deref(),
            self.stationary
                .iter()
                .map(|p| (p.variance, p.precision.as_slice(), p.alpha)),
        )
    }

    /// self += other (summing the gradients of several kernel matrices of one kernel, e.g. K_ZZ,
    /// K_Zt and diag K_tt). Panics if the shapes differ.
    pub fn add_assign(&mut self, other: &KernelGrad) {
        fn add(a: &mut [f64], b: &[f64]) {
            assert_eq!(a.len(), b.len(), "kernel gradient shapes differ");
            a.iter_mut().zip(b).for_each(|(x, y)| *x += y);
        }
        match (&mut self.linear, &other.linear) {
            (Some(a), Some(b)) => add(a, b),
            (None, None) => {}
            _ => panic!("kernel gradient shapes differ (linear part)"),
        }
        assert_eq!(
            self.stationary.len(),
            other.stationary.len(),
            "kernel gradient shapes differ"
        );
        for (a, b) in self.stationary.iter_mut().zip(&other.stationary) {
            a.variance += b.variance;
            add(&mut a.precision, &b.precision);
            match (&mut a.alpha, b.alpha) {
                (Some(x), Some(y)) => *x += y,
                (None, None) => {}
                _ => panic!("kernel gradient shapes differ (rational-quadratic shape)"),
            }
        }
    }
}
