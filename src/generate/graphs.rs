//! Random DAGs: Erdős–Rényi and Barabási–Albert scale-free, as the shared data README describes.
//!
//! Both are built on positions 0..D in an order that is topological by construction, then mapped
//! to node labels by a uniformly random permutation, so a column's index says nothing about its
//! place in the causal order. (For ER this permutation *is* the README's "random node order".)

use rand::seq::SliceRandom;
use rand::Rng;

use super::GraphKind;
use crate::graph::Dag;

/// A random DAG on `nodes` nodes with about `edges_per_node` (k) edges per node.
///
/// - [`GraphKind::Er`]: each of the D(D−1)/2 forward pairs of a random order is an edge
///   independently with p = min(1, 2k/(D−1)), so the expected edge count is k·D while 2k ≤ D−1 (p saturates at 1,
///   the complete DAG, beyond that). D = 1 gives the empty graph.
/// - [`GraphKind::Sf`]: Barabási–Albert in the style of `igraph.Graph.Barabasi(D, k,
///   directed=True)`: node t = 0, 1, … of a random order attaches min(k, t) distinct edges t → s to
///   earlier nodes s, drawn with probability ∝ in-degree(s) + 1 without replacement (degrees are
///   updated after each node). Edges run from the newer to the older node, so hubs have many
///   parents and every node has at most k children. Edge count Σ_t min(k, t): D − 1 for k = 1.
///
/// Deterministic for a given `rng` state.
pub fn random_dag<R: Rng + ?Sized>(
    kind: GraphKind,
    nodes: usize,
    edges_per_node: usize,
    rng: &mut R,
) -> Dag {
    let positional = match kind {
        GraphKind::Er => er_edges(nodes, edges_per_node, rng),
        GraphKind::Sf => sf_edges(nodes, edges_per_node, rng),
    };
    let mut label: Vec<usize> = (0..nodes).collect();
    label.shuffle(rng);
    let edges: Vec<(usize, usize)> = positional
        .into_iter()
        .map(|(a, b)| (label[a], label[b]))
        .collect();
    Dag::from_edges(nodes, &edges)
        .expect("edges between distinct positions of one order are acyclic")
}

/// ER edges a → b over positions with a < b, each present with p = min(1, 2k/(D−1)).
fn er_edges<R: Rng + ?Sized>(nodes: usize, k: usize, rng: &mut R) -> Vec<(usize, usize)> {
    if nodes < 2 {
        return Vec::new();
    }
    let p = (2.0 * k as f64 / (nodes - 1) as f64).min(1.0);
    let mut edges = Vec::new();
    for a in 0..nodes {
        for b in a + 1..nodes {
            // random() is in [0, 1), so p = 1 always adds the edge and p = 0 never does.
            if rng.random::<f64>() < p {
                edges.push((a, b));
            }
        }
    }
    edges
}

/// Barabási–Albert edges t → s over positions with s < t; the min(k, t) distinct targets of node t
/// are drawn by [`weighted_without_replacement`] with weights in-degree(s) + 1.
fn sf_edges<R: Rng + ?Sized>(nodes: usize, k: usize, rng: &mut R) -> Vec<(usize, usize)> {
    let mut in_degree = vec![0usize; nodes];
    let mut edges = Vec::new();
    for t in 1..nodes {
        let m = k.min(t);
        if m == 0 {
            continue;
        }
        let targets: Vec<usize> = if m == t {
            (0..t).collect()
        } else {
            let weights: Vec<f64> = in_degree[..t].iter().map(|&d| (d + 1) as f64).collect();
            weighted_without_replacement(&weights, m, rng)
        };
        for s in targets {
            edges.push((t, s));
            in_degree[s] += 1;
        }
    }
    edges
}

/// `m` distinct indices of `weights` (all > 0), distributed as m successive draws each ∝ weight
/// among the indices not yet drawn. Uses Efraimidis–Spirakis keys ln(U)/w with U ~ U(0, 1] (the
/// m largest keys win): same distribution, O(n log n) instead of O(m·n).
fn weighted_without_replacement<R: Rng + ?Sized>(
    weights: &[f64],
    m: usize,
    rng: &mut R,
) -> Vec<usize> {
    let mut keyed: Vec<(f64, usize)> = weights
        .iter()
        .enumerate()
        .map(|(s, w)| {
            // 1 − U is in (0, 1], so the logarithm is finite.
            let u = 1.0 - rng.random::<f64>();
            (u.ln() / w, s)
        })
        .collect();
    keyed.sort_by(|x, y| y.0.total_cmp(&x.0));
    keyed.into_iter().take(m).map(|(_, s)| s).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn weighted_draw_without_replacement_matches_successive_draws() {
        // Weights (10, 1, 1). One draw: index 0 with probability 10/12. Two draws: index 0 is
        // missed only if 1 then 2 or 2 then 1 are drawn, probability 2 · (1/12)(1/11) = 1/66.
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let weights = [10.0, 1.0, 1.0];
        let trials = 20_000;
        let mut first_is_heavy = 0;
        let mut pair_misses_heavy = 0;
        for _ in 0..trials {
            let one = weighted_without_replacement(&weights, 1, &mut rng);
            first_is_heavy += usize::from(one == [0]);
            let two = weighted_without_replacement(&weights, 2, &mut rng);
            assert_ne!(two[0], two[1]);
            pair_misses_heavy += usize::from(!two.contains(&0));
        }
        for (count, p) in [
            (first_is_heavy, 10.0 / 12.0),
            (pair_misses_heavy, 1.0 / 66.0),
        ] {
            let freq = count as f64 / trials as f64;
            let se = (p * (1.0 - p) / trials as f64).sqrt();
            assert!((freq - p).abs() < 4.0 * se, "{freq} vs {p}");
        }
    }

    #[test]
    fn sf_edges_point_from_newer_to_older_positions_without_repeats() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let edges = sf_edges(30, 3, &mut rng);
        assert!(edges.iter().all(|&(t, s)| s < t));
        let mut sorted = edges.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), edges.len());
        assert_eq!(edges.len(), (0..30).map(|t: usize| t.min(3)).sum::<usize>());
    }

    #[test]
    fn tiny_and_degenerate_sizes() {
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for kind in [GraphKind::Er, GraphKind::Sf] {
            assert_eq!(random_dag(kind, 0, 2, &mut rng).n(), 0);
            assert_eq!(random_dag(kind, 1, 4, &mut rng).edge_count(), 0);
            assert_eq!(random_dag(kind, 6, 0, &mut rng).edge_count(), 0);
            // k ≥ D − 1 saturates to the complete DAG for both kinds.
            assert_eq!(random_dag(kind, 6, 10, &mut rng).edge_count(), 15);
        }
        // ER with D = 2, k = 1 has p = 1: exactly one edge, in either direction.
        assert_eq!(random_dag(GraphKind::Er, 2, 1, &mut rng).edge_count(), 1);
    }
}
