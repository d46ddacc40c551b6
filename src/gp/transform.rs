//! Positivity by softplus, as GPflow's `positive()` (MODEL.md §2.3): the optimisers work on
//! unconstrained `raw` values, the model on `softplus(raw) + floor`.

/// softplus(x) = log(1 + eˣ), computed stably as max(x, 0) + log1p(e^{−|x|}).
pub fn softplus(x: f64) -> f64 {
    x.max(0.0) + (-x.abs()).exp().ln_1p()
}

/// The inverse of softplus for y > 0: x = y + log(−expm1(−y)) (stable for small and large y).
/// A value of 0 (softplus of a very negative x underflows to it) maps to the x of the smallest
/// normal y, about −708, not to −∞: a parameter stays finite, so it can be stepped, saved and sent
/// to another worker as a number.
pub fn softplus_inverse(y: f64) -> f64 {
    let y = if (0.0..f64::MIN_POSITIVE).contains(&y) {
        f64::MIN_POSITIVE
    } else {
        y
    };
    y + (-(-y).exp_m1()).ln()
}

/// d softplus(x)/dx = sigmoid(x) = 1/(1 + e^{−x}), computed without overflow.
pub fn softplus_derivative(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// A positive parameter: value = softplus(raw) + floor.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Positive {
    pub raw: f64,
    pub floor: f64,
}

impl Positive {
    /// The parameter whose value is `value` (> floor).
    pub fn from_value(value: f64, floor: f64) -> Self {
        Self {
            raw: softplus_inverse(value - floor),
            floor,
        }
    }

    /// softplus(raw) + floor.
    pub fn value(self) -> f64 {
        softplus(self.raw) + self.floor
    }

    /// Chain rule: ∂f/∂raw = ∂f/∂value · sigmoid(raw).
    pub fn raw_gradient(self, value_gradient: f64) -> f64 {
        value_gradient * softplus_derivative(self.raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softplus_is_stable_and_inverts() {
        // Zero (an underflowed softplus) inverts to a finite raw value that maps back near zero.
        let x0 = softplus_inverse(0.0);
        assert!(x0.is_finite() && x0 < -700.0, "{x0}");
        assert!(softplus(x0) < 1e-300);
        assert!(softplus_inverse(-1.0).is_nan());
        assert_eq!(softplus(1000.0), 1000.0);
        assert!(softplus(-1000.0) >= 0.0 && softplus(-1000.0) < 1e-300);
        assert!((softplus(0.0) - 2f64.ln()).abs() < 1e-16);
        for y in [1e-8, 1e-3, 0.25, 1.0, 7.5, 40.0, 700.0] {
            let x = softplus_inverse(y);
            assert!((softplus(x) - y).abs() <= 1e-12 * y, "y = {y}");
        }
    }

    #[test]
    fn derivative_matches_finite_differences() {
        for x in [-30.0, -3.0, -0.1, 0.0, 0.7, 5.0, 30.0] {
            let h = 1e-6;
            let fd = (softplus(x + h) - softplus(x - h)) / (2.0 * h);
            // Round-off of the difference quotient is about |x|·1e-16/h.
            assert!((fd - softplus_derivative(x)).abs() < 1e-8, "x = {x}");
        }
        assert_eq!(softplus_derivative(-1000.0), 0.0);
        assert_eq!(softplus_derivative(1000.0), 1.0);
    }

    #[test]
    fn positive_parameter_respects_its_floor() {
        let p = Positive::from_value(1e-4, 1e-6);
        assert!((p.value() - 1e-4).abs() < 1e-15);
        let tiny = Positive {
            raw: -800.0,
            floor: 1e-6,
        };
        assert_eq!(tiny.value(), 1e-6);
        assert!((p.raw_gradient(2.0) - 2.0 * softplus_derivative(p.raw)).abs() < 1e-15);
    }
}
