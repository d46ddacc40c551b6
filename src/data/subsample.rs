//! Seeded row subsets: a run, a pair test and an explanation that use fewer rows than the data
//! has all draw them this one way, so the same seed picks the same rows everywhere.

use nalgebra::DMatrix;
use rand::Rng;

/// Picks `max_rows` of `n` rows without replacement, returned in increasing order (all rows,
/// in order, when n ≤ max_rows); one index set serves every column, so rows stay whole.
pub fn subsample_rows(n: usize, max_rows: usize, rng: &mut impl Rng) -> Vec<usize> {
    if n <= max_rows {
        return (0..n).collect();
    }
    let mut rows = rand::seq::index::sample(rng, n, max_rows).into_vec();
    rows.sort_unstable();
    rows
}

/// The rows `rows` of `data`, in that order: X[rows, :].
pub fn take_rows(data: &DMatrix<f64>, rows: &[usize]) -> DMatrix<f64> {
    DMatrix::from_fn(rows.len(), data.ncols(), |r, c| data[(rows[r], c)])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn a_subset_is_seeded_sorted_and_whole_when_small() {
        let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(3), ChaCha8Rng::seed_from_u64(3));
        let rows = subsample_rows(100, 10, &mut a);
        assert_eq!(rows, subsample_rows(100, 10, &mut b));
        assert_eq!(rows.len(), 10);
        assert!(rows.windows(2).all(|w| w[0] < w[1]) && rows[9] < 100);
        assert_eq!(subsample_rows(5, 10, &mut a), vec![0, 1, 2, 3, 4]);
        let x = DMatrix::from_fn(4, 2, |r, c| (10 * r + c) as f64);
        assert_eq!(
            take_rows(&x, &[3, 1]),
            DMatrix::from_row_slice(2, 2, &[30.0, 31.0, 10.0, 11.0])
        );
    }
}
