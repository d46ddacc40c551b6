//! Every DAG on a few labelled nodes, for exact posteriors and the lessons on small graphs.
//!
//! Each unordered pair {i, j} is in one of three states (no edge, i → j, j → i), so there are
//! 3^(n(n−1)/2) candidate graphs: 59,049 for n = 5, of which 29,281 are acyclic. Beyond five nodes
//! the count explodes (3,781,503 DAGs on six nodes), so enumeration refuses and says why.

use super::Dag;

/// The largest number of nodes [`all_dags`] accepts.
pub const MAX_ENUMERATION_NODES: usize = 5;

/// Why [`all_dags`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnumerateError {
    /// More nodes than [`MAX_ENUMERATION_NODES`]; `count` is the number of DAGs that would have to
    /// be listed (`None` when it does not fit in a `u128`).
    #[error(
        "listing every DAG is limited to {max} nodes; {n} nodes have {} DAGs, far too many to list",
        describe_count(*count)
    )]
    TooManyNodes {
        n: usize,
        max: usize,
        count: Option<u128>,
    },
}

fn describe_count(count: Option<u128>) -> String {
    match count {
        Some(c) => with_thousands_separators(c),
        None => "more than 10^38".to_string(),
    }
}

fn with_thousands_separators(value: u128) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (k, ch) in digits.chars().enumerate() {
        if k > 0 && (digits.len() - k).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Number of labelled DAGs on `n` nodes by Robinson's recurrence
/// a(n) = Σ_{k=1..n} (−1)^{k+1} C(n, k) 2^{k(n−k)} a(n−k), a(0) = 1
/// (OEIS A003024: 1, 1, 3, 25, 543, 29281, 3781503, ...). `None` when a term overflows `i128`
/// (n ≥ 15).
pub fn dag_count(n: usize) -> Option<u128> {
    let mut counts: Vec<i128> = vec![1];
    for m in 1..=n {
        let mut total: i128 = 0;
        let mut binom: i128 = 1; // C(m, k), updated incrementally
        for k in 1..=m {
            binom = binom.checked_mul((m - k + 1) as i128)? / k as i128;
            let shift = u32::try_from(k * (m - k)).ok()?;
            let power = 1i128.checked_shl(shift).filter(|p| *p > 0)?;
            let term = binom.checked_mul(power)?.checked_mul(counts[m - k])?;
            total = if k % 2 == 1 {
                total.checked_add(term)?
            } else {
                total.checked_sub(term)?
            };
        }
        counts.push(total);
    }
    u128::try_from(counts[n]).ok()
}

/// Every DAG on nodes `0..n`, each exactly once, for `n ≤` [`MAX_ENUMERATION_NODES`]
/// (n = 0 gives the one empty graph). The order is deterministic: the state of pair (i, j), i < j,
/// in row-major pair order is the base-3 digit (0: none, 1: i → j, 2: j → i) of a counter, least
/// significant digit first.
pub fn all_dags(n: usize) -> Result<Vec<Dag>, EnumerateError> {
    if n > MAX_ENUMERATION_NODES {
        return Err(EnumerateError::TooManyNodes {
            n,
            max: MAX_ENUMERATION_NODES,
            count: dag_count(n),
        });
    }
    let pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect();
    let total = 3usize.pow(pairs.len() as u32);
    let mut dags = Vec::with_capacity(dag_count(n).map_or(0, |c| c as usize));
    // Children as bit masks keep the acyclicity test cheap over the 3^10 candidates for n = 5.
    let mut children = vec![0u32; n];
    for code in 0..total {
        children.iter_mut().for_each(|c| *c = 0);
        let mut rest = code;
        for &(i, j) in &pairs {
            match rest % 3 {
                1 => children[i] |= 1 << j,
                2 => children[j] |= 1 << i,
                _ => {}
            }
            rest /= 3;
        }
        if masks_are_acyclic(&children) {
            let edges: Vec<(usize, usize)> = (0..n)
                .flat_map(|i| {
                    let mask = children[i];
                    (0..n)
                        .filter(move |&j| mask & (1 << j) != 0)
                        .map(move |j| (i, j))
                })
                .collect();
            dags.push(Dag::from_edges(n, &edges).expect("the masks were checked acyclic"));
        }
    }
    Ok(dags)
}

/// Kahn's algorithm on bit masks: repeatedly remove nodes without remaining parents.
fn masks_are_acyclic(children: &[u32]) -> bool {
    let n = children.len();
    let mut remaining: u32 = if n == 0 { 0 } else { u32::MAX >> (32 - n) };
    while remaining != 0 {
        let has_parent = (0..n)
            .filter(|&i| remaining & (1 << i) != 0)
            .fold(0u32, |acc, i| acc | children[i]);
        let sources = remaining & !has_parent;
        if sources == 0 {
            return false;
        }
        remaining &= !sources;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn counts_match_the_known_sequence_and_graphs_are_distinct_dags() {
        for (n, expected) in [
            (0usize, 1usize),
            (1, 1),
            (2, 3),
            (3, 25),
            (4, 543),
            (5, 29281),
        ] {
            let dags = all_dags(n).unwrap();
            assert_eq!(dags.len(), expected, "n = {n}");
            assert!(dags.iter().all(|d| d.n() == n && d.is_acyclic()));
            let distinct: HashSet<&Dag> = dags.iter().collect();
            assert_eq!(distinct.len(), expected, "duplicates for n = {n}");
        }
    }

    #[test]
    fn three_nodes_contain_every_shape() {
        let dags = all_dags(3).unwrap();
        let edge_counts: Vec<usize> = (0..=3)
            .map(|e| dags.iter().filter(|d| d.edge_count() == e).count())
            .collect();
        // 1 empty; 6 single edges; 12 two-edge graphs (3 pairs of pairs × 4 orientations);
        // 6 complete DAGs (one per topological order).
        assert_eq!(edge_counts, vec![1, 6, 12, 6]);
    }

    #[test]
    fn robinson_recurrence_matches_oeis() {
        let known: [u128; 11] = [
            1,
            1,
            3,
            25,
            543,
            29_281,
            3_781_503,
            1_138_779_265,
            783_702_329_343,
            1_213_442_454_842_881,
            4_175_098_976_430_598_143,
        ];
        for (n, &count) in known.iter().enumerate() {
            assert_eq!(dag_count(n), Some(count), "n = {n}");
        }
        assert!(dag_count(14).is_some());
        assert_eq!(dag_count(15), None);
        assert_eq!(dag_count(60), None);
    }

    #[test]
    fn six_nodes_are_refused_with_the_count() {
        let err = all_dags(6).unwrap_err();
        assert_eq!(
            err,
            EnumerateError::TooManyNodes {
                n: 6,
                max: 5,
                count: Some(3_781_503)
            }
        );
        let message = err.to_string();
        assert!(message.contains("3,781,503"), "{message}");
        assert!(message.contains("limited to 5 nodes"), "{message}");
        assert!(all_dags(40).unwrap_err().to_string().contains("10^38"));
    }

    #[test]
    fn cycle_masks_are_detected() {
        assert!(masks_are_acyclic(&[]));
        assert!(masks_are_acyclic(&[0b010, 0b100, 0]));
        assert!(!masks_are_acyclic(&[0b010, 0b100, 0b001]));
        assert!(!masks_are_acyclic(&[0b10, 0b01]));
    }
}
