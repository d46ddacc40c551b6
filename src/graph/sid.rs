//! Structural Intervention Distance (Peters & Bühlmann 2015, "Structural intervention distance for
//! evaluating causal graphs", Neural Computation 27(3):771–799), and the adjustment criterion it
//! rests on.
//!
//! For every ordered pair (i, j), i ≠ j, the predicted DAG H suggests estimating p(x_j | do(x_i)) by
//! adjusting for i's parents in H. The SID counts the pairs where that estimate is wrong for some
//! distribution Markov to the true DAG G. Where j is a parent of i in H, H implies that intervening
//! on i leaves x_j alone, which is right iff j is not a descendant of i in G. Otherwise the estimate
//! is right iff PA_H(i) is a valid adjustment set for (i, j) in G (Shpitser, VanderWeele & Robins
//! 2010; Perković et al. 2018), checked by d-separation in the proper back-door graph.

use super::dsep::d_separated_in;
use super::{Dag, Digraph};

/// Reflexive descendant masks of every node: `masks[v][u]` ⇔ u = v or u is a descendant of v.
fn reflexive_descendants(g: &Digraph) -> Vec<Vec<bool>> {
    (0..g.n())
        .map(|v| {
            let mut mask = g.descendants(v);
            mask[v] = true;
            mask
        })
        .collect()
}

/// The adjustment check with precomputed reflexive descendant masks of `g`.
fn valid_adjustment(g: &Digraph, de: &[Vec<bool>], x: usize, y: usize, z: &[usize]) -> bool {
    let n = g.n();
    if x == y || z.contains(&x) || z.contains(&y) {
        return false;
    }
    // Nodes other than x on a directed path x ⇝ y: descendants of x that reach y (y included).
    let causal: Vec<usize> = (0..n).filter(|&w| w != x && de[x][w] && de[w][y]).collect();
    // (a) Z holds no descendant (inclusive) of a node on a causal path.
    if z.iter().any(|&v| causal.iter().any(|&w| de[w][v])) {
        return false;
    }
    // (b) Z blocks every non-causal path: d-separation after removing the first edge x → w of
    // every causal path (the proper back-door graph).
    let mut back_door = g.clone();
    for &w in &causal {
        back_door.remove_edge(x, w);
    }
    d_separated_in(&back_door, &[x], &[y], z)
}

/// True iff `z` is a valid adjustment set for the effect of `x` on `y` in `dag` (generalised
/// adjustment criterion): p(y | do(x)) = Σ_z p(y | x, z) p(z) for every distribution Markov to the
/// DAG iff (a) no node of Z is a descendant (inclusive) of a node w ≠ x on a directed path from x to
/// y, and (b) Z d-separates x and y in the DAG with the first edge of every such path removed.
/// False when `x == y` or `z` contains `x` or `y`.
pub fn is_valid_adjustment_set(dag: &Dag, x: usize, y: usize, z: &[usize]) -> bool {
    let g = dag.as_digraph();
    if x >= g.n() || y >= g.n() || z.iter().any(|&v| v >= g.n()) {
        return false;
    }
    valid_adjustment(g, &reflexive_descendants(g), x, y, z)
}

/// The ordered pairs (i, j), i ≠ j, whose intervention distribution p(x_j | do(x_i)) `pred` gets
/// wrong with respect to `truth` (see [`sid`]), in row-major order. Pair (i, j) is wrong iff
/// - j ∈ PA_pred(i) and j is a descendant of i in `truth`, or
/// - j ∉ PA_pred(i) and PA_pred(i) is not a valid adjustment set for (i, j) in `truth`
///   ([`is_valid_adjustment_set`]).
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn sid_pairs(truth: &Dag, pred: &Dag) -> Vec<(usize, usize)> {
    let n = truth.n();
    assert_eq!(
        n,
        pred.n(),
        "SID needs graphs over the same nodes ({} vs {})",
        n,
        pred.n()
    );
    let g = truth.as_digraph();
    let de = reflexive_descendants(g);
    let mut wrong = Vec::new();
    for i in 0..n {
        let parents = pred.parents(i);
        for j in (0..n).filter(|&j| j != i) {
            let correct = if parents.contains(&j) {
                !de[i][j]
            } else {
                valid_adjustment(g, &de, i, j, &parents)
            };
            if !correct {
                wrong.push((i, j));
            }
        }
    }
    wrong
}

/// Structural Intervention Distance SID(G, H) = #{(i, j), i ≠ j : the parent adjustment
/// p̂(x_j | do(x_i)) = Σ_z p(x_j | x_i, z) p(z), z = PA_H(i) (or p(x_j) when j ∈ PA_H(i)), is wrong
/// for some distribution Markov to the true DAG G}, with G = `truth` and H = `pred`; see
/// [`sid_pairs`]. 0 ≤ SID ≤ n(n − 1); SID(G, G) = 0; not symmetric.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn sid(truth: &Dag, pred: &Dag) -> usize {
    sid_pairs(truth, pred).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(n: usize, edges: &[(usize, usize)]) -> Dag {
        Dag::from_edges(n, edges).unwrap()
    }

    #[test]
    fn single_edge_cases_worked_by_hand() {
        // Truth 0 → 1.
        let truth = dag(2, &[(0, 1)]);
        // Empty prediction: (0, 1): Z = {} and the only path 0 → 1 is causal, so {} is valid:
        // correct. (1, 0): Z = {}; 0 is no descendant of 1, and 1 ← 0 is an open trail, so the
        // estimate p(x0 | x1) ≠ p(x0) = p(x0 | do(x1)): wrong. SID = 1.
        assert_eq!(sid_pairs(&truth, &dag(2, &[])), vec![(1, 0)]);
        // Reversed prediction 1 → 0: (0, 1): 1 ∈ PA_H(0) claims no effect of 0 on 1, but 1 is a
        // descendant of 0: wrong. (1, 0): Z = {} as above: wrong. SID = 2.
        assert_eq!(sid_pairs(&truth, &dag(2, &[(1, 0)])), vec![(0, 1), (1, 0)]);
        // The truth itself, and an empty truth against the edge: PA_H(1) = {0} d-separates 1
        // from 0 trivially in the empty graph, and (0, 1) has Z = {} with no trail at all.
        assert_eq!(sid(&truth, &truth), 0);
        assert_eq!(sid(&dag(2, &[]), &truth), 0);
    }

    #[test]
    fn peters_buhlmann_example() {
        // The five-node example of Peters & Bühlmann (2015), also the introductory example of the
        // gadjid README (CausalDisco/gadjid): G has 0 → 1 and both 0, 1 → 2, 3, 4.
        let g = dag(5, &[(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]);
        // H2 reverses 0 → 1. Worked by hand: i = 0 has PA_H(0) = {1}: (0, 1) wrong (1 is a
        // descendant of 0), (0, j) for j = 2, 3, 4 wrong (Z = {1} holds a node on the causal path
        // 0 → 1 → j). i = 1 has PA_H(1) = {}: (1, 0) wrong (open trail 1 ← 0), (1, j) wrong for
        // j = 2, 3, 4 (back-door path 1 ← 0 → j left open). i = 2, 3, 4 have their true parents.
        // SID = 8 while SHD = 2.
        let h2 = dag(5, &[(1, 0), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4)]);
        assert_eq!(sid(&g, &h2), 8);
        // H1 adds 2 → 3 and 2 → 4 (SHD 2): PA_H(3) = {0, 1, 2} and PA_H(4) = {0, 1, 2}. 2 is no
        // descendant of 3 or 4, and {0, 1, 2} blocks every trail between 3 and 4. SID = 0.
        let h1 = dag(
            5,
            &[
                (0, 1),
                (0, 2),
                (0, 3),
                (0, 4),
                (1, 2),
                (1, 3),
                (1, 4),
                (2, 3),
                (2, 4),
            ],
        );
        assert_eq!(sid(&g, &h1), 0);
        // Not symmetric: with H1 as the truth, G lacks 2 → 3 and 2 → 4. PA_G(0..=2) are still
        // valid in H1, but PA_G(3) = {0, 1} leaves the trail 3 ← 2 open, so the estimates of
        // p(x2 | do(x3)) (adjusting for {0, 1}, not the claimed p(x2)) and of p(x4 | do(x3))
        // (3 ← 2 → 4 open) are wrong; likewise (4, 2) and (4, 3). SID(H1, G) = 4.
        assert_eq!(sid(&h1, &g), 4);
    }

    #[test]
    fn values_computed_by_the_r_package() {
        // Graphs 10-node-DAG-10 and 10-node-DAG-11 of CausalDisco/gadjid `testgraphs/` (Matrix
        // Market, 1-based row → column edges), with the SID values listed in its
        // `SID-10-node-DAGs.csv`, which were computed with the R package SID 1.1.
        let g10: Vec<(usize, usize)> = [
            (7, 4),
            (1, 5),
            (1, 6),
            (2, 6),
            (3, 6),
            (4, 6),
            (2, 7),
            (3, 8),
            (2, 10),
            (3, 10),
            (4, 10),
        ]
        .iter()
        .map(|&(a, b)| (a - 1, b - 1))
        .collect();
        let g10 = dag(10, &g10);
        let g11: Vec<(usize, usize)> = [
            (3, 1),
            (4, 1),
            (7, 1),
            (10, 1),
            (4, 5),
            (10, 6),
            (6, 7),
            (9, 7),
            (5, 8),
            (7, 8),
            (10, 8),
            (3, 9),
        ]
        .iter()
        .map(|&(a, b)| (a - 1, b - 1))
        .collect();
        let g11 = dag(10, &g11);
        // Rows of the CSV: (G_true, G_guess, SHD, SID) = (11, 10, 23, 35) and (10, 11, 23, 31).
        assert_eq!(sid(&g11, &g10), 35);
        assert_eq!(sid(&g10, &g11), 31);
    }

    #[test]
    fn adjustment_criterion_cases() {
        // Confounder 0 → 1, 0 → 2, 1 → 2: {0} is valid for (1, 2), {} is not.
        let g = dag(3, &[(0, 1), (0, 2), (1, 2)]);
        assert!(is_valid_adjustment_set(&g, 1, 2, &[0]));
        assert!(!is_valid_adjustment_set(&g, 1, 2, &[]));
        // Mediator 0 → 1 → 2: adjusting for the mediator is invalid, nothing is valid.
        let g = dag(3, &[(0, 1), (1, 2)]);
        assert!(is_valid_adjustment_set(&g, 0, 2, &[]));
        assert!(!is_valid_adjustment_set(&g, 0, 2, &[1]));
        // Collider 0 → 2 ← 1 with no effect of 0 on 1: {} valid, {2} opens the collider.
        let g = dag(3, &[(0, 2), (1, 2)]);
        assert!(is_valid_adjustment_set(&g, 0, 1, &[]));
        assert!(!is_valid_adjustment_set(&g, 0, 1, &[2]));
        // A descendant of x off the causal path is allowed: 0 → 1, 0 → 2; Z = {2} for (0, 1).
        let g = dag(3, &[(0, 1), (0, 2)]);
        assert!(is_valid_adjustment_set(&g, 0, 1, &[2]));
        // Degenerate inputs.
        assert!(!is_valid_adjustment_set(&g, 0, 0, &[]));
        assert!(!is_valid_adjustment_set(&g, 0, 1, &[1]));
        assert!(!is_valid_adjustment_set(&g, 0, 7, &[]));
    }
}
