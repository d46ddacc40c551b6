//! The noise floor implied by the resolution a column was recorded at.

/// The smallest noise variance that a column's recorded resolution justifies:
/// max(`floor`, Δ²/12), where Δ is the smallest gap between distinct values when some value repeats
/// (and 0 when every value is distinct).
///
/// Why: a value recorded to resolution Δ carries rounding error of variance at least Δ²/12 (uniform
/// on ±Δ/2). A density model whose noise variance is free to go below that can put spikes of
/// unbounded height on repeated values, and the evidence of a discrete column (a binary one, or ages
/// in whole years) then dwarfs everything else in a direction test: on the Tübingen pairs the
/// largest evidence gaps (hundreds of nats) were all pairs with a discrete column.
pub fn resolution_noise_floor(y: &[f64], floor: f64) -> f64 {
    let mut sorted: Vec<f64> = y.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let mut has_ties = false;
    let mut gap = f64::INFINITY;
    for w in sorted.windows(2) {
        let d = w[1] - w[0];
        if d == 0.0 {
            has_ties = true;
        } else {
            gap = gap.min(d);
        }
    }
    if has_ties && gap.is_finite() {
        floor.max(gap * gap / 12.0)
    } else {
        floor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuous_columns_keep_the_given_floor() {
        let y = [0.3, -1.2, 0.7, 2.5, 0.31];
        assert_eq!(resolution_noise_floor(&y, 1e-6), 1e-6);
    }

    #[test]
    fn repeated_values_set_the_floor_from_the_smallest_gap() {
        // Whole numbers with repeats: Δ = 1, so Δ²/12.
        let y = [1.0, 2.0, 2.0, 5.0, 3.0, 1.0];
        assert!((resolution_noise_floor(&y, 1e-6) - 1.0 / 12.0).abs() < 1e-15);
        // A binary column standardised to ±1: Δ = 2.
        let b = [-1.0, 1.0, 1.0, -1.0];
        assert!((resolution_noise_floor(&b, 1e-6) - 4.0 / 12.0).abs() < 1e-15);
        // The given floor wins when it is larger.
        assert_eq!(resolution_noise_floor(&y, 0.5), 0.5);
    }

    #[test]
    fn a_constant_or_tiny_column_keeps_the_given_floor() {
        assert_eq!(resolution_noise_floor(&[2.0, 2.0, 2.0], 1e-6), 1e-6);
        assert_eq!(resolution_noise_floor(&[2.0], 1e-6), 1e-6);
        assert_eq!(resolution_noise_floor(&[], 1e-6), 1e-6);
    }
}
