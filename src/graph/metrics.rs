//! Comparison of a predicted graph with a true one: SHD (both conventions), precision, recall, F1,
//! the SID summary, and a per-edge classification for colouring edges.
//!
//! Every function here takes `(truth, pred)` in that order and panics if their numbers of nodes
//! differ: callers line the graphs up by variable name first (the readers in this module's siblings
//! check names against the data).

use serde::{Deserialize, Serialize};

use super::sid::sid;
use super::{Dag, Digraph};

fn assert_same_size(truth: &Digraph, pred: &Digraph) {
    assert_eq!(
        truth.n(),
        pred.n(),
        "graphs to compare must have the same nodes ({} vs {})",
        truth.n(),
        pred.n()
    );
}

/// Structural Hamming distance as the Hamming distance of the adjacency matrices:
/// `SHD = Σ_{i ≠ j} |A_truth[i][j] − A_pred[i][j]|`. A missing or extra edge counts 1 and a reversed
/// edge counts 2 (the paper's definition). Works for any digraphs, cyclic ones included.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn shd(truth: &Digraph, pred: &Digraph) -> usize {
    assert_same_size(truth, pred);
    let n = truth.n();
    (0..n)
        .flat_map(|i| (0..n).map(move |j| (i, j)))
        .filter(|&(i, j)| i != j && truth.has_edge(i, j) != pred.has_edge(i, j))
        .count()
}

/// Structural Hamming distance with a reversal counted once:
/// SHD₁ = #{unordered pairs {i, j} : state_truth(i, j) ≠ state_pred(i, j)}, where a pair's state is
/// one of none, i → j, j → i, or both.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn shd_reversal_1(truth: &Digraph, pred: &Digraph) -> usize {
    assert_same_size(truth, pred);
    let n = truth.n();
    let state = |g: &Digraph, i: usize, j: usize| (g.has_edge(i, j), g.has_edge(j, i));
    (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .filter(|&(i, j)| state(truth, i, j) != state(pred, i, j))
        .count()
}

/// True positives: directed edges present in both graphs with the same direction, TP = |E_truth ∩ E_pred|.
fn true_positives(truth: &Digraph, pred: &Digraph) -> usize {
    pred.edges()
        .into_iter()
        .filter(|&(i, j)| truth.has_edge(i, j))
        .count()
}

/// Precision over directed edges: TP / |E_pred|, where TP counts edges of `pred` that are in
/// `truth` with the same direction; 0 when `pred` has no edges.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn precision(truth: &Digraph, pred: &Digraph) -> f64 {
    assert_same_size(truth, pred);
    match pred.edge_count() {
        0 => 0.0,
        total => true_positives(truth, pred) as f64 / total as f64,
    }
}

/// Recall over directed edges: TP / |E_truth|; 0 when `truth` has no edges.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn recall(truth: &Digraph, pred: &Digraph) -> f64 {
    assert_same_size(truth, pred);
    match truth.edge_count() {
        0 => 0.0,
        total => true_positives(truth, pred) as f64 / total as f64,
    }
}

/// F1 over directed edges: 2·p·r / (p + r) with p = [`precision`], r = [`recall`]; 0 when
/// p + r = 0.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn f1(truth: &Digraph, pred: &Digraph) -> f64 {
    let (p, r) = (precision(truth, pred), recall(truth, pred));
    if p + r == 0.0 {
        0.0
    } else {
        2.0 * p * r / (p + r)
    }
}

/// Every metric of a prediction against a truth, as stored in results and shown in the app.
/// Serialises with exactly the keys `shd`, `shd_reversal_1`, `sid`, `precision`, `recall`, `f1`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// [`shd`]: reversed edge counts 2.
    pub shd: usize,
    /// [`shd_reversal_1`]: reversed edge counts 1.
    pub shd_reversal_1: usize,
    /// [`sid`](fn@crate::graph::sid), `None` (JSON `null`) when either graph has a cycle.
    pub sid: Option<usize>,
    /// [`precision`] over directed edges.
    pub precision: f64,
    /// [`recall`] over directed edges.
    pub recall: f64,
    /// [`f1`] over directed edges.
    pub f1: f64,
}

/// All metrics of `pred` against `truth`; the SID only when both graphs are acyclic.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn compare(truth: &Digraph, pred: &Digraph) -> Comparison {
    let sid = match (Dag::try_from(truth.clone()), Dag::try_from(pred.clone())) {
        (Ok(t), Ok(p)) => Some(sid(&t, &p)),
        _ => None,
    };
    Comparison {
        shd: shd(truth, pred),
        shd_reversal_1: shd_reversal_1(truth, pred),
        sid,
        precision: precision(truth, pred),
        recall: recall(truth, pred),
        f1: f1(truth, pred),
    }
}

/// How one edge of the truth or the prediction fares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EdgeKind {
    /// In both graphs with the same direction.
    Correct,
    /// The truth has to → from where the prediction has from → to (reported in the prediction's
    /// direction), and the prediction lacks to → from.
    Reversed,
    /// In the truth; the prediction has neither it nor its reverse in place of it.
    Missing,
    /// In the prediction; neither it nor (as a reversal) its reverse is in the truth.
    Extra,
}

/// One classified edge `from → to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EdgeClass {
    /// Tail of the edge.
    pub from: usize,
    /// Head of the edge.
    pub to: usize,
    /// The classification.
    pub kind: EdgeKind,
}

/// Classifies every edge of both graphs, sorted by `(from, to)`:
/// - a truth edge a → b is `Correct` if the prediction has a → b; else `Reversed` (reported as
///   b → a) if the prediction has b → a and the truth does not; else `Missing`;
/// - a prediction edge a → b not in the truth is `Extra` unless it was reported as `Reversed`.
///
/// The classes tie out with the distances: [`shd`] = 2·#Reversed + #Missing + #Extra, and
/// [`shd_reversal_1`] = the number of unordered pairs with at least one non-`Correct` entry.
///
/// # Panics
/// If the graphs have different numbers of nodes.
pub fn classify_edges(truth: &Digraph, pred: &Digraph) -> Vec<EdgeClass> {
    assert_same_size(truth, pred);
    let reversal = |a: usize, b: usize| {
        // Truth has a → b, prediction has b → a instead.
        truth.has_edge(a, b) && !pred.has_edge(a, b) && pred.has_edge(b, a) && !truth.has_edge(b, a)
    };
    let mut classes = Vec::new();
    for (a, b) in truth.edges() {
        let (from, to, kind) = if pred.has_edge(a, b) {
            (a, b, EdgeKind::Correct)
        } else if reversal(a, b) {
            (b, a, EdgeKind::Reversed)
        } else {
            (a, b, EdgeKind::Missing)
        };
        classes.push(EdgeClass { from, to, kind });
    }
    for (a, b) in pred.edges() {
        if !truth.has_edge(a, b) && !reversal(b, a) {
            classes.push(EdgeClass {
                from: a,
                to: b,
                kind: EdgeKind::Extra,
            });
        }
    }
    classes.sort_by_key(|c| (c.from, c.to));
    classes
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn g(n: usize, edges: &[(usize, usize)]) -> Digraph {
        Digraph::from_edges(n, edges).unwrap()
    }

    #[test]
    fn shd_conventions_on_small_cases() {
        let truth = g(3, &[(0, 1), (1, 2)]);
        assert_eq!(shd(&truth, &truth), 0);
        // Reversal of 1 → 2: 2 entries differ, 1 pair differs.
        let reversed = g(3, &[(0, 1), (2, 1)]);
        assert_eq!(shd(&truth, &reversed), 2);
        assert_eq!(shd_reversal_1(&truth, &reversed), 1);
        // One missing and one extra edge.
        let other = g(3, &[(0, 1), (0, 2)]);
        assert_eq!(shd(&truth, &other), 2);
        assert_eq!(shd_reversal_1(&truth, &other), 2);
        // A 2-cycle in the prediction where the truth has one direction.
        let cyclic = g(3, &[(0, 1), (1, 0), (1, 2)]);
        assert_eq!(shd(&truth, &cyclic), 1);
        assert_eq!(shd_reversal_1(&truth, &cyclic), 1);
        assert_eq!(shd(&truth, &g(3, &[])), 2);
        assert_eq!(shd(&g(3, &[]), &truth), 2);
    }

    #[test]
    fn precision_recall_f1() {
        let truth = g(4, &[(0, 1), (1, 2), (2, 3)]);
        // Pred: 0 → 1 correct, 2 → 1 reversed (not a TP), 0 → 3 extra.
        let pred = g(4, &[(0, 1), (2, 1), (0, 3)]);
        assert_relative_eq!(precision(&truth, &pred), 1.0 / 3.0);
        assert_relative_eq!(recall(&truth, &pred), 1.0 / 3.0);
        assert_relative_eq!(f1(&truth, &pred), 1.0 / 3.0);
        let pred = g(4, &[(0, 1), (1, 2)]);
        assert_relative_eq!(precision(&truth, &pred), 1.0);
        assert_relative_eq!(recall(&truth, &pred), 2.0 / 3.0);
        assert_relative_eq!(f1(&truth, &pred), 0.8);
        // Empty prediction and empty truth.
        let empty = g(4, &[]);
        assert_eq!(precision(&truth, &empty), 0.0);
        assert_eq!(recall(&truth, &empty), 0.0);
        assert_eq!(f1(&truth, &empty), 0.0);
        assert_eq!(recall(&empty, &pred), 0.0);
        assert_eq!(precision(&empty, &pred), 0.0);
    }

    #[test]
    fn comparison_serialises_with_the_documented_keys() {
        let truth = g(2, &[(0, 1)]);
        let pred = g(2, &[(1, 0)]);
        let c = compare(&truth, &pred);
        assert_eq!(
            c,
            Comparison {
                shd: 2,
                shd_reversal_1: 1,
                sid: Some(2),
                precision: 0.0,
                recall: 0.0,
                f1: 0.0
            }
        );
        let json = serde_json::to_value(&c).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            vec!["f1", "precision", "recall", "shd", "shd_reversal_1", "sid"]
        );
        let cyclic = g(2, &[(0, 1), (1, 0)]);
        let c = compare(&truth, &cyclic);
        assert_eq!(c.sid, None);
        assert_eq!(c.precision, 0.5);
        let json = serde_json::to_string(&c).unwrap();
        assert!(json.contains("\"sid\":null"), "{json}");
        assert_eq!(serde_json::from_str::<Comparison>(&json).unwrap(), c);
    }

    #[test]
    fn classification_of_each_kind() {
        let truth = g(4, &[(0, 1), (1, 2), (2, 3)]);
        let pred = g(4, &[(0, 1), (2, 1), (0, 3)]);
        let classes = classify_edges(&truth, &pred);
        let expected = vec![
            EdgeClass {
                from: 0,
                to: 1,
                kind: EdgeKind::Correct,
            },
            EdgeClass {
                from: 0,
                to: 3,
                kind: EdgeKind::Extra,
            },
            EdgeClass {
                from: 2,
                to: 1,
                kind: EdgeKind::Reversed,
            },
            EdgeClass {
                from: 2,
                to: 3,
                kind: EdgeKind::Missing,
            },
        ];
        assert_eq!(classes, expected);
    }

    fn random_digraph(rng: &mut ChaCha8Rng, n: usize, p: f64) -> Digraph {
        let mut d = Digraph::empty(n);
        for i in 0..n {
            for j in 0..n {
                if i != j && rng.random_bool(p) {
                    d.add_edge(i, j).unwrap();
                }
            }
        }
        d
    }

    #[test]
    fn classification_ties_out_with_both_shds_on_random_digraphs() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for _ in 0..300 {
            let n = rng.random_range(1..=8);
            // Cyclic graphs and 2-cycles included on purpose.
            let truth = random_digraph(&mut rng, n, 0.3);
            let pred = random_digraph(&mut rng, n, 0.3);
            let classes = classify_edges(&truth, &pred);
            let count = |k: EdgeKind| classes.iter().filter(|c| c.kind == k).count();
            assert_eq!(
                shd(&truth, &pred),
                2 * count(EdgeKind::Reversed) + count(EdgeKind::Missing) + count(EdgeKind::Extra)
            );
            let mut wrong_pairs: Vec<(usize, usize)> = classes
                .iter()
                .filter(|c| c.kind != EdgeKind::Correct)
                .map(|c| (c.from.min(c.to), c.from.max(c.to)))
                .collect();
            wrong_pairs.sort_unstable();
            wrong_pairs.dedup();
            assert_eq!(shd_reversal_1(&truth, &pred), wrong_pairs.len());
            assert_eq!(count(EdgeKind::Correct), true_positives(&truth, &pred));
            // Every edge of either graph appears in exactly one class entry (a reversal covers
            // one edge of each).
            assert_eq!(
                truth.edge_count() + pred.edge_count(),
                2 * count(EdgeKind::Correct)
                    + 2 * count(EdgeKind::Reversed)
                    + count(EdgeKind::Missing)
                    + count(EdgeKind::Extra)
            );
        }
    }

    #[test]
    #[should_panic(expected = "same nodes")]
    fn size_mismatch_panics_with_a_message() {
        shd(&g(2, &[]), &g(3, &[]));
    }
}
