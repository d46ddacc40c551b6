//! Posterior edge probabilities for up to 20 variables by dynamic programming over orders
//! (Koivisto & Sood 2004; Koivisto 2006), under the order-modular prior: a uniform prior over
//! orders of the variables and, given an order, each variable's parents any admissible family of
//! its predecessors. A DAG's prior weight is then proportional to its number of linear extensions
//! (its topological orders), not uniform over DAGs: the output says so.
//!
//! With β_i(S) = exp F(i | S) on admissible families and α_i(U) = Σ_{S ⊆ U} β_i(S):
//!
//!   L(U) = Σ_{i ∈ U} L(U∖i) α_i(U∖i),          L(∅) = 1   (orders of U placed first),
//!   R(T) = Σ_{i ∈ T} α_i(V∖T) R(T∖i),          R(∅) = 1   (orders of T placed last),
//!   P(pred(v) = U | X) = L(U) α_v(U) R(V∖U∖v) / L(V),
//!   P(u → v | X) = Σ_{U ∌ v} P(pred(v) = U | X) (1 − α_v(U∖u) / α_v(U)),
//!
//! the last because the families within U that avoid u are exactly the families within U∖u. All
//! sums run in log space: family evidences differ by thousands of nats.

use super::dp::{compress, over_subsets, per_variable, LocalFamilies, Mask};
use super::DpError;

/// log(e^a + e^b) without overflow; −∞ is the identity.
fn log_add(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let (hi, lo) = if a > b { (a, b) } else { (b, a) };
    hi + (lo - hi).exp().ln_1p()
}

/// log α_i over subsets of one variable's candidate parents (the subset-sum, or zeta, transform of
/// β_i in log space).
struct LogAlpha {
    candidates: Vec<usize>,
    values: Vec<f64>,
}

impl LogAlpha {
    fn new(child: usize, families: &[(Mask, f64)]) -> Result<Self, DpError> {
        let LocalFamilies {
            candidates,
            best: mut values,
            ..
        } = LocalFamilies::new(child, families)?;
        over_subsets(candidates.len(), |c, without| {
            values[c] = log_add(values[c], values[without]);
        });
        Ok(Self { candidates, values })
    }

    fn at(&self, allowed: Mask) -> f64 {
        self.values[compress(allowed, &self.candidates)]
    }
}

/// The order-modular posterior edge probabilities P(i → j | X) at [i][j], from `families[i]`, the
/// admissible parent sets of variable i with their scores F(i | S).
pub fn order_edge_probabilities(families: &[Vec<(Mask, f64)>]) -> Result<Vec<Vec<f64>>, DpError> {
    let d = families.len();
    let alpha = per_variable(families, LogAlpha::new)?;
    let full: usize = (1 << d) - 1;
    let mut log_l = vec![f64::NEG_INFINITY; full + 1];
    let mut log_r = vec![f64::NEG_INFINITY; full + 1];
    log_l[0] = 0.0;
    log_r[0] = 0.0;
    for set in 1..=full {
        let mut bits = set;
        let (mut l, mut r) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let rest = set & !(1 << i);
            l = log_add(l, log_l[rest] + alpha[i].at(rest as Mask));
            r = log_add(r, alpha[i].at((full & !set) as Mask) + log_r[rest]);
        }
        log_l[set] = l;
        log_r[set] = r;
    }
    let log_z = log_l[full];
    if !log_z.is_finite() {
        return Err(DpError::NoDag);
    }
    let mut edges = vec![vec![0.0; d]; d];
    for (v, a) in alpha.iter().enumerate() {
        let others = full & !(1 << v);
        // Every subset U of the other variables, by enumerating sub-masks of `others`.
        let mut u = others;
        loop {
            let log_a = a.at(u as Mask);
            let log_w = log_l[u] + log_a + log_r[others & !u] - log_z;
            if log_w > -745.0 {
                let w = log_w.exp();
                for &p in &a.candidates {
                    if u & (1 << p) != 0 {
                        let without = a.at((u & !(1 << p)) as Mask);
                        edges[p][v] += w * -(without - log_a).exp_m1();
                    }
                }
            }
            if u == 0 {
                break;
            }
            u = (u - 1) & others;
        }
    }
    Ok(edges)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_add_is_stable() {
        assert!((log_add(0.0, 0.0) - 2f64.ln()).abs() < 1e-15);
        assert_eq!(log_add(f64::NEG_INFINITY, -3.0), -3.0);
        assert!((log_add(-1000.0, -1000.0) - (-1000.0 + 2f64.ln())).abs() < 1e-12);
        assert_eq!(log_add(5000.0, 0.0), 5000.0);
    }

    #[test]
    fn two_variables_by_hand() {
        // Orders (0,1) and (1,0), each with prior ½. Given 0 first: 1's parents ∅ or {0}.
        let (a0, a01, b0, b10) = (-10.0f64, -9.0f64, -10.0f64, -8.0f64);
        let families = vec![vec![(0, a0), (0b10, a01)], vec![(0, b0), (0b01, b10)]];
        let p = order_edge_probabilities(&families).unwrap();
        // Order (0,1): 0 → 1 has weight e^(a0 + b10), empty e^(a0 + b0); order (1,0): 1 → 0
        // e^(b0 + a01), empty e^(a0 + b0) again: the empty graph has two linear extensions.
        let (e, f, g) = ((a0 + b0).exp() * 2.0, (a0 + b10).exp(), (b0 + a01).exp());
        let z = e + f + g;
        assert!((p[0][1] - f / z).abs() < 1e-12);
        assert!((p[1][0] - g / z).abs() < 1e-12);
    }
}
