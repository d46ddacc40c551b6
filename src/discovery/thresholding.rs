//! Cutting the continuous search's weighted graph to a DAG that respects prior knowledge: keep
//! the heaviest edges that stay acyclic (by a threshold prefix or greedily), the required edges
//! always in, the forbidden ones never. Only the continuous search needs this; the exact search
//! scores DAGs directly.

use crate::discovery::knowledge::{Knowledge, KnowledgeError};
use crate::graph::{Dag, Digraph};
use nalgebra::DMatrix;

/// Acyclic thresholding (MODEL.md §5.4, step 2) under prior knowledge.
///
/// Inputs, cause × effect: `weights[(i, j)] ≥ 0` is the strength of i → j (the model's A
/// transposed) and `active[(i, j)] ∈ {0, 1}` says whether i → j is still present (the model's E
/// transposed). Diagonals are ignored.
///
/// Rule. Let R be the required edges, and C the candidate edges: i → j with i ≠ j,
/// `active[(i, j)] = 1`, [`Knowledge::allowed`]`(i, j)`, `weights[(i, j)] > 0`, and not required.
/// Sort C ascending by weight, ties by (i, j) ascending, giving c_1, …, c_m. The result is
///
/// ```text
///     G = R ∪ {c_(k+1), …, c_m},   k = min { k ∈ 0..=m : R ∪ {c_(k+1), …, c_m} is acyclic },
/// ```
///
/// i.e. the lightest non-required edges are removed one at a time until the graph is a DAG. When
/// the weights are distinct this is the smallest cutoff t such that R ∪ {c ∈ C : W_c > t} is
/// acyclic. Since removing edges never creates a cycle, acyclicity is monotone in k and k is found
/// by binary search; each test is a topological sort (not the spectral h). The set k = m is R
/// alone, which validation proved acyclic, so a DAG always exists.
///
/// Guarantees: the result is acyclic, contains every required edge (whatever its weight or mask
/// entry), and contains no forbidden, tier-violating or inactive edge. Like the paper's rule, it
/// may also remove light edges that lie on no cycle; it is not a minimum feedback arc set.
///
/// Fails if a matrix is not d×d, a weight is negative or not finite, or a mask entry is not 0 or 1
/// (off the diagonal).
pub fn threshold_to_dag(
    weights: &DMatrix<f64>,
    active: &DMatrix<f64>,
    knowledge: &Knowledge,
) -> Result<Dag, KnowledgeError> {
    AcyclicCut::new(weights, active, knowledge)?.prefix()
}

/// A graph operation that cannot fail on validated inputs, reported instead of panicking.
fn internal(e: crate::graph::GraphError) -> KnowledgeError {
    KnowledgeError::Internal {
        reason: e.to_string(),
    }
}

/// What both thresholding rules cut to a DAG: the candidate edges of [`threshold_to_dag`],
/// sorted ascending by weight (ties by (i, j)), and the knowledge whose required edges are
/// always kept.
pub struct AcyclicCut<'k> {
    knowledge: &'k Knowledge,
    /// (weight, i, j) of each candidate edge i → j.
    candidates: Vec<(f64, usize, usize)>,
}

impl<'k> AcyclicCut<'k> {
    /// The candidates of `weights` among the `active` edges under `knowledge`, after checking the
    /// matrices (the failures of [`threshold_to_dag`]).
    pub fn new(
        weights: &DMatrix<f64>,
        active: &DMatrix<f64>,
        knowledge: &'k Knowledge,
    ) -> Result<Self, KnowledgeError> {
        let d = knowledge.d();
        for (what, m) in [("weight matrix", weights), ("active mask", active)] {
            if m.nrows() != d || m.ncols() != d {
                return Err(KnowledgeError::InvalidMatrix {
                    reason: format!(
                        "the {what} is {}×{} but the knowledge covers {d} variables",
                        m.nrows(),
                        m.ncols()
                    ),
                });
            }
        }

        let mut candidates: Vec<(f64, usize, usize)> = Vec::new();
        for i in 0..d {
            for j in 0..d {
                if i == j {
                    continue;
                }
                let w = weights[(i, j)];
                if !w.is_finite() || w < 0.0 {
                    return Err(KnowledgeError::InvalidMatrix {
                        reason: format!(
                            "weight ({i}, {j}) is {w}; weights must be finite and non-negative"
                        ),
                    });
                }
                let a = active[(i, j)];
                if a != 0.0 && a != 1.0 {
                    return Err(KnowledgeError::InvalidMatrix {
                        reason: format!(
                            "active mask entry ({i}, {j}) is {a}; only 0 and 1 are allowed"
                        ),
                    });
                }
                if a == 1.0 && w > 0.0 && knowledge.allowed(i, j) && !knowledge.is_required(i, j) {
                    candidates.push((w, i, j));
                }
            }
        }
        candidates.sort_by(|x, y| x.0.total_cmp(&y.0).then((x.1, x.2).cmp(&(y.1, y.2))));
        Ok(AcyclicCut {
            knowledge,
            candidates,
        })
    }

    /// The prefix cut of [`threshold_to_dag`]: the required edges and every candidate from the
    /// (k+1)-th lightest up, for the smallest k that leaves the graph acyclic.
    pub fn prefix(&self) -> Result<Dag, KnowledgeError> {
        let graph_keeping = |k: usize| -> Result<Digraph, KnowledgeError> {
            let mut g = self.required()?;
            let kept = self.candidates[k..].iter().map(|&(_, i, j)| (i, j));
            for (i, j) in kept {
                g.add_edge(i, j).map_err(internal)?;
            }
            Ok(g)
        };
        let acyclic = |g: &Digraph| g.topological_order().is_ok();

        // Smallest k in 0..=m with graph_keeping(k) acyclic; k = m (required edges only) always is.
        let (mut lo, mut hi) = (0usize, self.candidates.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if acyclic(&graph_keeping(mid)?) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Dag::try_from(graph_keeping(lo)?).map_err(internal)
    }

    /// Greedy acyclic thresholding: the required edges first, then the candidate edges from the
    /// heaviest down (ties by (i, j) ascending), each kept unless it closes a directed cycle with
    /// the edges kept so far.
    ///
    /// Unlike the prefix cut of [`threshold_to_dag`], an edge is dropped only when a heavier path
    /// already runs the other way, so one strong 2-cycle cannot take every lighter edge with it
    /// (BENCHMARKS.md, issue 10: with the prefix cut SF4_d10_s0 kept 12 of the 19 true edges left
    /// by the acyclic phase, SF1_d10_s1 3 of 7). The result is a maximal acyclic subgraph: adding
    /// any dropped candidate back would close a cycle.
    ///
    /// Same guarantees as [`threshold_to_dag`].
    pub fn greedy(&self) -> Result<Dag, KnowledgeError> {
        let mut g = self.required()?;
        for &(_, i, j) in self.candidates.iter().rev() {
            // i → j closes a cycle exactly when j already reaches i.
            if !g.descendants(j)[i] {
                g.add_edge(i, j).map_err(internal)?;
            }
        }
        Dag::try_from(g).map_err(internal)
    }

    /// The graph of the required edges alone (acyclic: the knowledge was validated).
    fn required(&self) -> Result<Digraph, KnowledgeError> {
        let mut g = Digraph::empty(self.knowledge.d());
        for &(i, j) in self.knowledge.required() {
            g.add_edge(i, j).map_err(internal)?;
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests;
