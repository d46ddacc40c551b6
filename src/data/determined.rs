//! Columns that are (almost) a function of one other column, such as F = X1² or sin(2·X1): the
//! GP model gives such a column a noise variance at its floor, so its evidence is dominated by
//! that near-exact fit and any other input that helps it slightly gets a confident edge. Exact
//! copies are refused when the file is read; these are reported, and the edges that rest on them
//! are named in the result.
//!
//! The test is model-free: for each column x the rows are sorted by x and the noise variance of
//! y given x alone is estimated from local pseudo-residuals (Gasser, Sroka & Jennen-Steinmetz,
//! 1986): y_k against the straight line through its two neighbours in x,
//!   e_k = a_k y_{k−1} + b_k y_{k+1} − y_k,  a_k = (x_{k+1} − x_k)/(x_{k+1} − x_{k−1}),  b_k = 1 − a_k,
//!   σ̂² = Σ_k e_k² / (a_k² + b_k² + 1) / (n − 2),
//! which is unbiased for the noise of y = f(x) + ε up to the curvature of f over neighbouring
//! rows (second order in their spacing). y is reported as determined by x when σ̂² is below
//! [`DETERMINED_FRACTION`] of its variance.

use serde::{Deserialize, Serialize};

/// A column whose noise variance given one other column alone is below this fraction of its own
/// variance is called almost a function of it (R² above 0.999 for a flexible fit).
pub const DETERMINED_FRACTION: f64 = 1e-3;

/// At most this many rows (evenly spaced) are used: the estimate needs density, not all rows.
const MAX_ROWS: usize = 5000;
/// At most this many (column pair, row) terms: D² pairs must stay cheap when a file is read
/// (about a second in the browser), so wide files use fewer rows.
const MAX_WORK: usize = 200_000_000;
/// Below this many rows the estimate is too coarse to call a column determined: the test is
/// skipped (files so wide that the work bound leaves fewer).
const MIN_ROWS: usize = 30;

/// Column `column` is almost a function of column `by`: the estimated noise variance of the
/// former given the latter alone is `residual_fraction` of its variance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Determined {
    pub column: usize,
    pub by: usize,
    pub residual_fraction: f64,
}

/// σ̂²(y | x) / var(y) by the pseudo-residuals above; `order` sorts the rows by x. None when y
/// has no spread or there are fewer than 3 rows.
///
/// Ties in x (x_{k−1} = x_{k+1}) take a = b = ½.
pub fn residual_fraction(x: &[f64], y: &[f64], order: &[usize]) -> Option<f64> {
    let n = order.len();
    if n < 3 {
        return None;
    }
    let mean = order.iter().map(|&r| y[r]).sum::<f64>() / n as f64;
    let var = order.iter().map(|&r| (y[r] - mean).powi(2)).sum::<f64>() / n as f64;
    if !(var > 0.0 && var.is_finite()) {
        return None;
    }
    let mut sum = 0.0;
    for w in order.windows(3) {
        let (p, k, q) = (w[0], w[1], w[2]);
        let span = x[q] - x[p];
        let a = if span > 0.0 {
            (x[q] - x[k]) / span
        } else {
            0.5
        };
        let b = 1.0 - a;
        let e = a * y[p] + b * y[q] - y[k];
        sum += e * e / (a * a + b * b + 1.0);
    }
    Some(sum / (n - 2) as f64 / var)
}

/// Every column almost a function of one other (the other with the smallest residual fraction,
/// when several are), in column order. `columns` are the data's columns (all of one length).
/// Nothing is reported for fewer than 30 rows, or for a file so wide that the work bound leaves
/// fewer (over about 2,500 columns).
pub fn nearly_determined(columns: &[Vec<f64>]) -> Vec<Determined> {
    let n = columns.first().map_or(0, Vec::len);
    let d = columns.len();
    let budget = MAX_ROWS.min(MAX_WORK / (d * d).max(1));
    if budget < MIN_ROWS || n < MIN_ROWS {
        return Vec::new();
    }
    let step = n.div_ceil(budget).max(1);
    let rows: Vec<usize> = (0..n).step_by(step).collect();
    let orders: Vec<Vec<usize>> = columns
        .iter()
        .map(|x| {
            let mut order = rows.clone();
            order.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
            order
        })
        .collect();
    let mut found = Vec::new();
    for (column, y) in columns.iter().enumerate() {
        let best = columns
            .iter()
            .enumerate()
            .filter(|&(by, _)| by != column)
            .filter_map(|(by, x)| residual_fraction(x, y, &orders[by]).map(|f| (by, f)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((by, residual_fraction)) = best.filter(|b| b.1 < DETERMINED_FRACTION) {
            found.push(Determined {
                column,
                by,
                residual_fraction,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn uniform(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| rng.random_range(-2.0..2.0)).collect()
    }

    fn order_of(x: &[f64]) -> Vec<usize> {
        let mut o: Vec<usize> = (0..x.len()).collect();
        o.sort_by(|&a, &b| x[a].total_cmp(&x[b]));
        o
    }

    /// The estimate against the noise it was given: y = sin(2x) + σε at several σ, each within
    /// 15 % of σ²/var(y) on 4000 rows (its sampling error is about 2/√n ≈ 3 %, plus curvature).
    #[test]
    fn the_estimate_recovers_the_noise_variance_it_was_given() {
        let n = 4000;
        let x = uniform(n, 1);
        let eps = uniform(n, 2); // var 4/3
        for sigma in [0.3, 0.1, 0.03] {
            let y: Vec<f64> = x
                .iter()
                .zip(&eps)
                .map(|(x, e)| (2.0 * x).sin() + sigma * e)
                .collect();
            let mean = y.iter().sum::<f64>() / n as f64;
            let var = y.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
            let want = sigma * sigma * 4.0 / 3.0 / var;
            let got = residual_fraction(&x, &y, &order_of(&x)).unwrap();
            assert!(
                (got / want - 1.0).abs() < 0.15,
                "σ = {sigma}: {got:e} against {want:e}"
            );
        }
    }

    /// F = X1² and G = sin(2·X1) on 80 rows are found (determined by X1), X1 is not (two
    /// branches of F), and neither is a noisy effect or an unrelated column.
    #[test]
    fn noiseless_functions_are_found_and_noisy_ones_are_not() {
        let n = 80;
        let x1 = uniform(n, 3);
        let other = uniform(n, 4);
        let noise = uniform(n, 5);
        let f: Vec<f64> = x1.iter().map(|v| v * v).collect();
        let g: Vec<f64> = x1.iter().map(|v| (2.0 * v).sin()).collect();
        let noisy: Vec<f64> = x1
            .iter()
            .zip(&noise)
            .map(|(v, e)| v.tanh() + 0.2 * e)
            .collect();
        let found = nearly_determined(&[x1, f, g, noisy, other]);
        let pairs: Vec<(usize, usize)> = found.iter().map(|d| (d.column, d.by)).collect();
        // G is a function of X1; F of X1 (or of G, through X1: whichever fits closer).
        assert!(pairs.contains(&(2, 0)), "{found:?}");
        assert!(pairs.iter().any(|&(c, _)| c == 1), "{found:?}");
        assert!(
            !pairs.iter().any(|&(c, _)| c == 0 || c == 3 || c == 4),
            "{found:?}"
        );
    }
}
