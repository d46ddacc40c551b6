//! Dequantisation: repeated values spread uniformly over the cell they were recorded in, so that a
//! continuous density is scored on the data as binned rather than on spikes at repeated values.

use rand::Rng;

/// Each value v that occurs k ≥ 2 times is replaced, row by row, by v + u with
/// u ~ U(−g₋/2, g₊/2), where g₋ and g₊ are the gaps from v to the neighbouring distinct values
/// (at either end the one gap there is used on both sides). Values that occur once, and
/// non-finite values, are left as they are; a column with one distinct value is returned as is.
///
/// Why: a continuous density with a free noise variance can put a spike of unbounded height on a
/// value that repeats: a binary column, whole numbers, or a point mass such as a censored zero
/// (pair0087: 57 % of y at 0). In a direction test those spikes decide by hundreds of nats. With
/// c_n the cell of row n and x̃_n = v_n + u_n, Jensen gives, for any density p,
///   E_u[Σ log p(x̃_n)] + Σ log |c_n| ≤ Σ log P(x ∈ c_n),
/// so the evidence of dequantised data bounds that of the recorded (binned) data (Theis, van den
/// Oord & Bethge 2016). Both directions of a pair see the same dequantised columns, so the
/// Σ log |c_n| term cancels when they are compared.
pub fn dequantise(x: &[f64], rng: &mut impl Rng) -> Vec<f64> {
    let mut distinct: Vec<f64> = x.iter().copied().filter(|v| v.is_finite()).collect();
    distinct.sort_by(f64::total_cmp);
    let mut counts: Vec<(f64, usize)> = Vec::new();
    for v in distinct {
        match counts.last_mut() {
            Some((last, k)) if *last == v => *k += 1,
            _ => counts.push((v, 1)),
        }
    }
    if counts.len() < 2 {
        return x.to_vec();
    }
    // (value, lower half-width, upper half-width) of every repeated value.
    let cell = |i: usize| -> (f64, f64) {
        let below = (i > 0).then(|| counts[i].0 - counts[i - 1].0);
        let above = counts.get(i + 1).map(|&(next, _)| next - counts[i].0);
        let (lo, hi) = match (below, above) {
            (Some(b), Some(a)) => (b, a),
            (Some(b), None) => (b, b),
            (None, Some(a)) => (a, a),
            (None, None) => unreachable!("at least two distinct values"),
        };
        (lo / 2.0, hi / 2.0)
    };
    x.iter()
        .map(|&v| {
            if !v.is_finite() {
                return v;
            }
            let i = counts
                .binary_search_by(|(c, _)| c.total_cmp(&v))
                .expect("every finite value was counted");
            if counts[i].1 < 2 {
                return v;
            }
            let (lo, hi) = cell(i);
            v - lo + rng.random::<f64>() * (lo + hi)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn values_that_occur_once_are_kept() {
        let x = [0.3, -1.2, 0.7, 2.5];
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        assert_eq!(dequantise(&x, &mut rng), x.to_vec());
        // And in a column with repeats, the unique values stay.
        let y = [1.0, 1.0, 2.5, 4.0, 4.0];
        let d = dequantise(&y, &mut rng);
        assert_eq!(d[2], 2.5);
    }

    #[test]
    fn repeated_values_spread_within_their_cell_and_no_ties_remain() {
        // Whole numbers: cells of width 1; at the ends the inner gap is mirrored.
        let x = [0.0, 0.0, 1.0, 1.0, 1.0, 3.0, 3.0];
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let d = dequantise(&x, &mut rng);
        for (&v, &t) in x.iter().zip(&d) {
            let (lo, hi) = match v {
                0.0 => (-0.5, 0.5),
                1.0 => (0.5, 2.0),
                _ => (2.0, 4.0),
            };
            assert!(t >= lo && t <= hi, "{v} became {t}");
        }
        let mut sorted = d.clone();
        sorted.sort_by(f64::total_cmp);
        assert!(sorted.windows(2).all(|w| w[0] < w[1]), "{sorted:?}");
    }

    #[test]
    fn a_point_mass_becomes_uniform_on_its_cell() {
        // 57 % of the rows at 0 between continuous neighbours at −0.2 and 0.4.
        let mut x = vec![0.0; 5_700];
        x.extend((0..4_300).map(|k| {
            if k % 2 == 0 {
                -0.2 - k as f64
            } else {
                0.4 + (k - 1) as f64
            }
        }));
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let d = dequantise(&x, &mut rng);
        let spread: Vec<f64> = d[..5_700].to_vec();
        let n = spread.len() as f64;
        let mean = spread.iter().sum::<f64>() / n;
        let var = spread.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        // U(−0.1, 0.2): mean 0.05, variance 0.3²/12 = 0.0075.
        assert!((mean - 0.05).abs() < 0.005, "mean {mean}");
        assert!((var - 0.0075).abs() < 0.0005, "variance {var}");
        assert!(spread.iter().all(|&v| (-0.1..=0.2).contains(&v)));
        assert_eq!(&d[5_700..], &x[5_700..]);
    }

    #[test]
    fn the_same_seed_gives_the_same_columns_and_constants_stay() {
        let x = [2.0, 2.0, 5.0, 5.0, 5.0, 7.0];
        let a = dequantise(&x, &mut ChaCha8Rng::seed_from_u64(3));
        let b = dequantise(&x, &mut ChaCha8Rng::seed_from_u64(3));
        let c = dequantise(&x, &mut ChaCha8Rng::seed_from_u64(4));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let constant = [1.5; 4];
        assert_eq!(
            dequantise(&constant, &mut ChaCha8Rng::seed_from_u64(0)),
            constant.to_vec()
        );
        let with_nan = [1.0, f64::NAN, 1.0, 2.0];
        let d = dequantise(&with_nan, &mut ChaCha8Rng::seed_from_u64(0));
        assert!(d[1].is_nan());
    }
}
