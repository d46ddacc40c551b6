//! The four stationary shapes as straight-line, branch-free code over slices, for the loops that
//! dominate the bounds' cost: one monomorphised loop per kind (no branch inside), exponentials and
//! logarithms from `gp::lane_math`, so the compiler vectorises them; compiled for AVX2 and
//! AVX-512 too and picked at run time (`multiversion`). The closed forms are those of
//! [`super::unit_value_and_dr2`] (the scalar reference they are tested against).

use super::StationaryKind;
use crate::gp::lane_math::{exp_with, lane_total, ln_1p_and_recip_with, vectorised, LANES};

/// The GPflow guard r = √max(r², 1e-36), as a select (see `scalar::guarded_r`).
#[inline(always)]
fn guarded_r(r2: f64) -> f64 {
    if r2 < 1e-36 {
        1e-18
    } else {
        r2.sqrt()
    }
}

/// One unit-variance stationary shape as straight-line code, so the column loops are compiled
/// once per kind with no branch inside (the same closed forms as [`super::unit_value_and_dr2`]).
pub(super) trait Shape {
    const KIND: StationaryKind;
    /// (κ, ∂κ/∂r²) for r² > 0 (the caller selects (1, 0) at r² ≤ 0); `FMA` fuses the
    /// polynomial steps where the target has the instruction.
    fn value_and_slope<const FMA: bool>(r2: f64, alpha: f64) -> (f64, f64);
    /// (κ, κ′, ∂κ/∂a) for r² > 0, sharing the work of the three: ∂κ/∂a is 0 except for the
    /// rational quadratic, the only shape with a parameter a.
    #[inline(always)]
    fn value_slope_and_dalpha<const FMA: bool>(r2: f64, alpha: f64) -> (f64, f64, f64) {
        let (v, dv) = Self::value_and_slope::<FMA>(r2, alpha);
        (v, dv, 0.0)
    }
}

/// (κ, κ′, ∂κ/∂a) at any r², with (1, 0, 0) at r² ≤ 0 (the coincident-point branch; a NaN
/// distance propagates).
#[inline(always)]
pub(super) fn cell<S: Shape, const FMA: bool>(r2: f64, alpha: f64) -> (f64, f64, f64) {
    let (v, dv, da) = S::value_slope_and_dalpha::<FMA>(r2, alpha);
    if r2 > 0.0 || r2.is_nan() {
        (v, dv, da)
    } else {
        (1.0, 0.0, 0.0)
    }
}

/// SE: κ = e^{−r²/2}, κ′ = −κ/2.
pub(super) struct Se;
/// Matérn-1/2: κ = e^{−r}, κ′ = −e^{−r}/(2r).
pub(super) struct M12;
/// Matérn-3/2: κ = (1 + √3r)e^{−√3r}, κ′ = −(3/2)e^{−√3r}.
pub(super) struct M32;
/// Rational quadratic: κ = (1 + r²/2a)^{−a}, κ′ = −(1/2)(1 + r²/2a)^{−a−1}.
pub(super) struct Rq;

impl Shape for Se {
    const KIND: StationaryKind = StationaryKind::SquaredExponential;
    #[inline(always)]
    fn value_and_slope<const FMA: bool>(r2: f64, _: f64) -> (f64, f64) {
        let e = exp_with::<FMA>(-0.5 * r2);
        (e, -0.5 * e)
    }
}

impl Shape for M12 {
    const KIND: StationaryKind = StationaryKind::Matern12;
    #[inline(always)]
    fn value_and_slope<const FMA: bool>(r2: f64, _: f64) -> (f64, f64) {
        let r = guarded_r(r2);
        let e = exp_with::<FMA>(-r);
        (e, -0.5 * e / r)
    }
}

impl Shape for M32 {
    const KIND: StationaryKind = StationaryKind::Matern32;
    #[inline(always)]
    fn value_and_slope<const FMA: bool>(r2: f64, _: f64) -> (f64, f64) {
        let sr = 3f64.sqrt() * guarded_r(r2);
        let e = exp_with::<FMA>(-sr);
        ((1.0 + sr) * e, -1.5 * e)
    }
}

impl Shape for Rq {
    const KIND: StationaryKind = StationaryKind::RationalQuadratic;
    #[inline(always)]
    fn value_and_slope<const FMA: bool>(r2: f64, alpha: f64) -> (f64, f64) {
        let (v, dv, _) = Self::value_slope_and_dalpha::<FMA>(r2, alpha);
        (v, dv)
    }
    /// With x = r²/2a and ℓ = ln(1 + x): κ = e^{−aℓ}, κ′ = −κ/(2(1 + x)) and
    /// ∂κ/∂a = κ [x/(1 + x) − ℓ], from one logarithm, one exponential and one division (0.5/a is
    /// loop-invariant, so the compiler hoists it).
    #[inline(always)]
    fn value_slope_and_dalpha<const FMA: bool>(r2: f64, alpha: f64) -> (f64, f64, f64) {
        let x = r2 * (0.5 / alpha);
        let (l, recip) = ln_1p_and_recip_with::<FMA>(x);
        let k = exp_with::<FMA>(-alpha * l);
        (k, -0.5 * k * recip, k * (x * recip - l))
    }
}

vectorised! {
/// k[i] += s·κ(r²[i]) for one part over a whole matrix of squared distances (κ = 1 at r² ≤ 0).
pub(super) fn add_values(
    kind: StationaryKind,
    variance: f64,
    alpha: f64,
    r2: &[f64],
    k: &mut [f64],
) {
    let fma = multiversion::target::target_cfg_f!(target_feature = "fma");
    match (kind, fma) {
        (StationaryKind::SquaredExponential, true) => add::<Se, true>(variance, alpha, r2, k),
        (StationaryKind::SquaredExponential, false) => add::<Se, false>(variance, alpha, r2, k),
        (StationaryKind::Matern12, true) => add::<M12, true>(variance, alpha, r2, k),
        (StationaryKind::Matern12, false) => add::<M12, false>(variance, alpha, r2, k),
        (StationaryKind::Matern32, true) => add::<M32, true>(variance, alpha, r2, k),
        (StationaryKind::Matern32, false) => add::<M32, false>(variance, alpha, r2, k),
        (StationaryKind::RationalQuadratic, true) => add::<Rq, true>(variance, alpha, r2, k),
        (StationaryKind::RationalQuadratic, false) => add::<Rq, false>(variance, alpha, r2, k),
    }
}
}

#[inline(always)]
fn add<S: Shape, const FMA: bool>(variance: f64, alpha: f64, r2: &[f64], k: &mut [f64]) {
    for (kv, &r) in k.iter_mut().zip(r2) {
        let (v, _) = S::value_and_slope::<FMA>(r, alpha);
        *kv += variance * if r > 0.0 || r.is_nan() { v } else { 1.0 };
    }
}

vectorised! {
/// The element-wise step of one part's backward pass: G[i] = K̄[i]·s·κ′(r²[i]), and the sums
/// (Σ K̄κ, Σ K̄ ∂κ/∂a) for ∂s and (RQ only, else 0) ∂a/s. κ′ = 0 and ∂κ/∂a = 0 at r² ≤ 0.
pub(super) fn backward_values(
    kind: StationaryKind,
    variance: f64,
    alpha: f64,
    r2: &[f64],
    k_bar: &[f64],
    g: &mut [f64],
) -> (f64, f64) {
    let fma = multiversion::target::target_cfg_f!(target_feature = "fma");
    let args = (variance, alpha, r2, k_bar);
    match (kind, fma) {
        (StationaryKind::SquaredExponential, true) => backward::<Se, true>(args, g),
        (StationaryKind::SquaredExponential, false) => backward::<Se, false>(args, g),
        (StationaryKind::Matern12, true) => backward::<M12, true>(args, g),
        (StationaryKind::Matern12, false) => backward::<M12, false>(args, g),
        (StationaryKind::Matern32, true) => backward::<M32, true>(args, g),
        (StationaryKind::Matern32, false) => backward::<M32, false>(args, g),
        (StationaryKind::RationalQuadratic, true) => backward::<Rq, true>(args, g),
        (StationaryKind::RationalQuadratic, false) => backward::<Rq, false>(args, g),
    }
}
}

#[inline(always)]
fn backward<S: Shape, const FMA: bool>(
    (variance, alpha, r2, k_bar): (f64, f64, &[f64], &[f64]),
    g: &mut [f64],
) -> (f64, f64) {
    let (mut acc_v, mut acc_a) = ([0.0; LANES], [0.0; LANES]);
    // Whole chunks of 8 (straight-line code the compiler vectorises), then the rest padded with
    // K̄ = 0, which adds nothing.
    let mut r_chunks = r2.chunks_exact(LANES);
    let mut w_chunks = k_bar.chunks_exact(LANES);
    let mut g_chunks = g.chunks_exact_mut(LANES);
    for ((r, w), gc) in (&mut r_chunks).zip(&mut w_chunks).zip(&mut g_chunks) {
        for l in 0..LANES {
            let (v, dv, da) = cell::<S, FMA>(r[l], alpha);
            acc_v[l] += w[l] * v;
            acc_a[l] += w[l] * da;
            gc[l] = w[l] * variance * dv;
        }
    }
    let (r, w, gc) = (
        r_chunks.remainder(),
        w_chunks.remainder(),
        g_chunks.into_remainder(),
    );
    for l in 0..gc.len() {
        let (v, dv, da) = cell::<S, FMA>(r[l], alpha);
        acc_v[l] += w[l] * v;
        acc_a[l] += w[l] * da;
        gc[l] = w[l] * variance * dv;
    }
    (lane_total(&acc_v), lane_total(&acc_a))
}

#[cfg(test)]
mod tests {
    use super::super::{unit_dvalue_dalpha, unit_value_and_dr2};
    use super::*;

    /// Each shape against the scalar libm reference: values, slopes and ∂κ/∂a, over distances
    /// from coincident (r² = 0, and below the 1e-36 guard) to far, through the slice functions.
    #[test]
    fn the_vectorised_shapes_match_the_scalar_reference() {
        let r2: Vec<f64> = [
            0.0, -1e-17, 1e-40, 1e-30, 1e-12, 1e-6, 0.01, 0.3, 1.0, 2.5, 9.0, 40.0, 700.0, 3000.0,
        ]
        .into_iter()
        .chain((0..200).map(|i| i as f64 * 0.037))
        .collect();
        let k_bar: Vec<f64> = (0..r2.len()).map(|i| 1.0 + (i % 7) as f64 * 0.25).collect();
        // A few ulp, times |ln κ|: e^y carries y's relative rounding error y-fold (RQ's a·ln(1 + x)).
        let close = |a: f64, b: f64, v: f64| {
            let conditioning = 1.0 + if v > 0.0 { v.ln().abs() } else { 0.0 };
            (a - b).abs() <= 1e-15 * conditioning * (1e-300 + a.abs().max(b.abs()))
        };
        for kind in StationaryKind::ALL {
            for alpha in [0.3, 1.7, 25.0] {
                let (s, mut k, mut g) = (1.3, vec![0.5; r2.len()], vec![0.0; r2.len()]);
                add_values(kind, s, alpha, &r2, &mut k);
                let (dvar, dalpha) = backward_values(kind, s, alpha, &r2, &k_bar, &mut g);
                let (mut want_var, mut want_alpha) = (0.0, 0.0);
                for i in 0..r2.len() {
                    let (v, dv) = unit_value_and_dr2(kind, r2[i], alpha);
                    assert!(
                        close(k[i], 0.5 + s * v, v),
                        "{kind:?} κ({}) {} vs {}",
                        r2[i],
                        k[i],
                        0.5 + s * v
                    );
                    assert!(
                        close(g[i], k_bar[i] * s * dv, v),
                        "{kind:?} κ′({}) {} vs {}",
                        r2[i],
                        g[i],
                        k_bar[i] * s * dv
                    );
                    want_var += k_bar[i] * v;
                    if kind == StationaryKind::RationalQuadratic {
                        want_alpha += k_bar[i] * unit_dvalue_dalpha(r2[i], alpha);
                    }
                }
                assert!(
                    (dvar - want_var).abs() <= 1e-13 * want_var.abs(),
                    "{kind:?} Σ K̄κ"
                );
                assert!(
                    (dalpha - want_alpha).abs() <= 1e-12 * (1.0 + want_alpha.abs()),
                    "{kind:?} Σ K̄ ∂κ/∂a"
                );
            }
        }
    }
}
