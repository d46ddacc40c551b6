//! The four stationary shapes as scalar functions of the squared scaled distance r², with unit
//! variance. Everything else (dense matrices here, the SVGP fast path elsewhere) is built on these,
//! so each kind's closed form lives in exactly one place.

use serde::{Deserialize, Serialize};

/// The guard of GPflow: r = √max(r², 1e-36), so 1/r stays finite for Matérn-1/2. Written as a
/// comparison rather than `f64::max`, which would turn a NaN into 1e-18 and hide it.
fn guarded_r(r2: f64) -> f64 {
    if r2 < 1e-36 {
        1e-18
    } else {
        r2.sqrt()
    }
}

/// A stationary kernel kind of MODEL.md §2.2 (form P1, ARD joint distance). With r the scaled
/// distance and a the RQ shape, the unit-variance shapes κ(r) are:
/// - squared exponential: κ = e^{−r²/2}
/// - Matérn-1/2: κ = e^{−r}
/// - Matérn-3/2: κ = (1 + √3 r) e^{−√3 r}
/// - rational quadratic: κ = (1 + r²/(2a))^{−a}
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, strum::IntoStaticStr)]
#[serde(rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum StationaryKind {
    SquaredExponential,
    Matern12,
    Matern32,
    RationalQuadratic,
}

impl StationaryKind {
    /// The kinds in the order the CGP-CDE kernel uses them (MODEL.md §2.2: se, m12, m32, rq).
    pub const ALL: [StationaryKind; 4] = [
        StationaryKind::SquaredExponential,
        StationaryKind::Matern12,
        StationaryKind::Matern32,
        StationaryKind::RationalQuadratic,
    ];
}

/// The unit-variance value and its derivative with respect to r², `(κ, ∂κ/∂r²)`, sharing one
/// exponential:
/// - SE: κ = e^{−r²/2}, ∂κ/∂r² = −κ/2
/// - M12: κ = e^{−r}, ∂κ/∂r² = −e^{−r}/(2r)
/// - M32: κ = (1 + √3 r) e^{−√3 r}, ∂κ/∂r² = −(3/2) e^{−√3 r}
/// - RQ: κ = (1 + r²/(2a))^{−a}, ∂κ/∂r² = −(1/2)(1 + r²/(2a))^{−a−1}
///
/// with r = √max(r², 1e-36). Where `r2 <= 0` (coincident points; a negative value can only be
/// round-off of an expanded |u|² + |u'|² − 2u·u' form) the result is exactly `(1, 0)`: every
/// gradient through r² carries a factor Δ = 0 there, and the branch makes that an exact 0 instead
/// of 0 × (huge) for M12. The caller owns the Δ factors (∂r²/∂θ_j = 2θ_j Δ_j², ∂r²/∂u_j =
/// 2θ_j² Δ_j). A NaN `r2` propagates.
pub fn unit_value_and_dr2(kind: StationaryKind, r2: f64, alpha: f64) -> (f64, f64) {
    if r2 <= 0.0 {
        return (1.0, 0.0);
    }
    match kind {
        StationaryKind::SquaredExponential => {
            let k = (-0.5 * r2).exp();
            (k, -0.5 * k)
        }
        StationaryKind::Matern12 => {
            let r = guarded_r(r2);
            let e = (-r).exp();
            (e, -0.5 * e / r)
        }
        StationaryKind::Matern32 => {
            let sr = 3f64.sqrt() * guarded_r(r2);
            let e = (-sr).exp();
            ((1.0 + sr) * e, -1.5 * e)
        }
        StationaryKind::RationalQuadratic => {
            // ln_1p keeps (1 + x)^{−a} accurate for large a, where it tends to the SE shape.
            let x = r2 / (2.0 * alpha);
            let k = (-alpha * x.ln_1p()).exp();
            (k, -0.5 * k / (1.0 + x))
        }
    }
}

/// The unit-variance kernel κ(r²) (the kernel with s = 1); see [`unit_value_and_dr2`] for the four
/// closed forms. Exactly 1 at `r2 <= 0`.
pub fn unit_value(kind: StationaryKind, r2: f64, alpha: f64) -> f64 {
    unit_value_and_dr2(kind, r2, alpha).0
}

/// ∂κ/∂r² of the unit-variance kernel: SE −κ/2, M12 −e^{−r}/(2r), M32 −(3/2)e^{−√3 r},
/// RQ −(1/2)(1 + r²/(2a))^{−a−1}. Exactly 0 at `r2 <= 0` for every kind (branch convention of
/// MODEL.md §2.2): the caller multiplies by the Δ factors of ∂r²/∂θ and ∂r²/∂u, which vanish there.
pub fn unit_dvalue_dr2(kind: StationaryKind, r2: f64, alpha: f64) -> f64 {
    unit_value_and_dr2(kind, r2, alpha).1
}

/// ∂κ_rq/∂a of the unit-variance rational quadratic κ = (1 + r²/(2a))^{−a}:
/// κ · [r²/(2a + r²) − ln(1 + r²/(2a))]. Exactly 0 at `r2 <= 0`.
pub fn unit_dvalue_dalpha(r2: f64, alpha: f64) -> f64 {
    if r2 <= 0.0 {
        return 0.0;
    }
    let l = (r2 / (2.0 * alpha)).ln_1p();
    (-alpha * l).exp() * (r2 / (2.0 * alpha + r2) - l)
}

/// The same ∂κ_rq/∂a = κ · [r²/(2a + r²) − ln(1 + r²/(2a))] from the value κ the caller already
/// holds: one logarithm instead of a logarithm and an exponential (the backward passes have κ at
/// hand, and the exponentials dominate their cost). Exactly 0 at `r2 <= 0`.
pub fn unit_dvalue_dalpha_from_value(r2: f64, alpha: f64, value: f64) -> f64 {
    if r2 <= 0.0 {
        return 0.0;
    }
    value * (r2 / (2.0 * alpha + r2) - (r2 / (2.0 * alpha)).ln_1p())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The α-derivative from a known value equals the self-contained one, and both equal a
    /// central finite difference of κ in α.
    #[test]
    fn the_alpha_derivative_from_the_value_matches_the_direct_one_and_finite_differences() {
        let kind = StationaryKind::RationalQuadratic;
        for &alpha in &[0.05, 0.5, 1.0, 3.0, 40.0] {
            for &r2 in &[0.0, 1e-12, 1e-3, 0.3, 2.0, 25.0, 400.0] {
                let direct = unit_dvalue_dalpha(r2, alpha);
                let value = unit_value(kind, r2, alpha);
                let from_value = unit_dvalue_dalpha_from_value(r2, alpha, value);
                assert!(
                    (direct - from_value).abs() <= 1e-14 * (1.0 + direct.abs()),
                    "r² {r2}, α {alpha}: {direct} vs {from_value}"
                );
                let h = 1e-6 * alpha;
                let fd =
                    (unit_value(kind, r2, alpha + h) - unit_value(kind, r2, alpha - h)) / (2.0 * h);
                assert!(
                    (fd - from_value).abs() <= 1e-6 * (1.0 + fd.abs()),
                    "r² {r2}, α {alpha}: finite difference {fd} vs {from_value}"
                );
            }
        }
        assert_eq!(unit_dvalue_dalpha_from_value(0.0, 1.0, 1.0), 0.0);
    }
}
