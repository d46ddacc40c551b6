//! [`Digraph`] and [`Dag`]: dense adjacency storage with the `A[i][j] = 1 ⇔ i → j` convention.

use serde::{Deserialize, Serialize};

/// Errors raised when building or converting graphs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// The graph has a directed cycle; `cycle` lists its nodes in order (the last points back to the first).
    #[error("the graph has a directed cycle: {}", format_cycle(cycle))]
    Cycle { cycle: Vec<usize> },
    /// A self-loop i → i was given.
    #[error("self-loop on node {node} is not allowed")]
    SelfLoop { node: usize },
    /// A node index outside `0..n`.
    #[error("node index {index} is out of range for a graph with {n} nodes")]
    NodeOutOfRange { index: usize, n: usize },
    /// An adjacency matrix that is not square or whose entries are not 0/1.
    #[error("invalid adjacency matrix: {reason}")]
    InvalidMatrix { reason: String },
}

fn format_cycle(cycle: &[usize]) -> String {
    let mut parts: Vec<String> = cycle.iter().map(|c| c.to_string()).collect();
    if let Some(first) = cycle.first() {
        parts.push(first.to_string());
    }
    parts.join(" → ")
}

/// A directed graph on nodes `0..n`, stored as a dense row-major adjacency matrix:
/// `adj[i * n + j]` is true iff there is an edge i → j. Self-loops are never stored.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Digraph {
    n: usize,
    adj: Vec<bool>,
}

impl Digraph {
    /// The graph with `n` nodes and no edges.
    pub fn empty(n: usize) -> Self {
        Self {
            n,
            adj: vec![false; n * n],
        }
    }

    /// Builds a graph from a list of edges `(from, to)`.
    pub fn from_edges(n: usize, edges: &[(usize, usize)]) -> Result<Self, GraphError> {
        let mut g = Self::empty(n);
        for &(from, to) in edges {
            g.add_edge(from, to)?;
        }
        Ok(g)
    }

    /// Builds a graph from a square 0/1 matrix given as rows, `rows[i][j] != 0 ⇔ i → j`.
    /// A non-zero diagonal entry is an error (self-loops have no meaning here).
    pub fn from_matrix<T: Copy + Into<f64>>(rows: &[Vec<T>]) -> Result<Self, GraphError> {
        let n = rows.len();
        let mut g = Self::empty(n);
        for (i, row) in rows.iter().enumerate() {
            if row.len() != n {
                return Err(GraphError::InvalidMatrix {
                    reason: format!(
                        "row {} has {} entries but the matrix has {} rows",
                        i + 1,
                        row.len(),
                        n
                    ),
                });
            }
            for (j, &v) in row.iter().enumerate() {
                let v: f64 = v.into();
                if v == 0.0 {
                    continue;
                }
                if v != 1.0 {
                    return Err(GraphError::InvalidMatrix {
                        reason: format!(
                            "entry ({}, {}) is {v}; only 0 and 1 are allowed",
                            i + 1,
                            j + 1
                        ),
                    });
                }
                if i == j {
                    return Err(GraphError::SelfLoop { node: i });
                }
                g.adj[i * n + j] = true;
            }
        }
        Ok(g)
    }

    /// Number of nodes.
    pub fn n(&self) -> usize {
        self.n
    }

    fn check(&self, i: usize) -> Result<(), GraphError> {
        if i < self.n {
            Ok(())
        } else {
            Err(GraphError::NodeOutOfRange {
                index: i,
                n: self.n,
            })
        }
    }

    /// Adds the edge `from → to` (idempotent).
    pub fn add_edge(&mut self, from: usize, to: usize) -> Result<(), GraphError> {
        self.check(from)?;
        self.check(to)?;
        if from == to {
            return Err(GraphError::SelfLoop { node: from });
        }
        self.adj[from * self.n + to] = true;
        Ok(())
    }

    /// Removes the edge `from → to` if present.
    pub fn remove_edge(&mut self, from: usize, to: usize) {
        if from < self.n && to < self.n {
            self.adj[from * self.n + to] = false;
        }
    }

    /// True iff `from → to` is an edge. Out-of-range indices have no edges.
    pub fn has_edge(&self, from: usize, to: usize) -> bool {
        from < self.n && to < self.n && self.adj[from * self.n + to]
    }

    /// True iff `a` and `b` are joined by an edge in either direction.
    pub fn adjacent(&self, a: usize, b: usize) -> bool {
        self.has_edge(a, b) || self.has_edge(b, a)
    }

    /// Parents of `j`, ascending.
    pub fn parents(&self, j: usize) -> Vec<usize> {
        (0..self.n).filter(|&i| self.has_edge(i, j)).collect()
    }

    /// Children of `i`, ascending.
    pub fn children(&self, i: usize) -> Vec<usize> {
        (0..self.n).filter(|&j| self.has_edge(i, j)).collect()
    }

    /// All edges `(from, to)` in row-major order.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        let n = self.n;
        (0..n * n)
            .filter(|&k| self.adj[k])
            .map(|k| (k / n, k % n))
            .collect()
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.adj.iter().filter(|&&e| e).count()
    }

    /// The adjacency matrix as rows of 0/1, `A[i][j] = 1 ⇔ i → j`.
    pub fn to_matrix(&self) -> Vec<Vec<u8>> {
        (0..self.n)
            .map(|i| (0..self.n).map(|j| u8::from(self.has_edge(i, j))).collect())
            .collect()
    }

    /// A topological order (every edge goes from an earlier to a later node), or the cycle that
    /// prevents one. Kahn's algorithm, taking the smallest available index first so the order is
    /// deterministic.
    pub fn topological_order(&self) -> Result<Vec<usize>, GraphError> {
        let n = self.n;
        let mut indegree: Vec<usize> = (0..n).map(|j| self.parents(j).len()).collect();
        let mut ready: std::collections::BTreeSet<usize> =
            (0..n).filter(|&j| indegree[j] == 0).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(&i) = ready.iter().next() {
            ready.remove(&i);
            order.push(i);
            for j in self.children(i) {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    ready.insert(j);
                }
            }
        }
        if order.len() == n {
            Ok(order)
        } else {
            Err(GraphError::Cycle {
                cycle: self.find_cycle().unwrap_or_default(),
            })
        }
    }

    /// True iff the graph has no directed cycle.
    pub fn is_acyclic(&self) -> bool {
        self.find_cycle().is_none()
    }

    /// One directed cycle, if any: depth-first search with colours; the cycle is read off the DFS
    /// stack when a grey node is reached again.
    pub fn find_cycle(&self) -> Option<Vec<usize>> {
        #[derive(Clone, Copy, PartialEq)]
        enum Colour {
            White,
            Grey,
            Black,
        }
        let n = self.n;
        let mut colour = vec![Colour::White; n];
        for root in 0..n {
            if colour[root] != Colour::White {
                continue;
            }
            // Stack of (node, next child index to try).
            let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
            colour[root] = Colour::Grey;
            while let Some(&mut (node, ref mut next)) = stack.last_mut() {
                if let Some(child) = (*next..n).find(|&c| self.has_edge(node, c)) {
                    *next = child + 1;
                    match colour[child] {
                        Colour::White => {
                            colour[child] = Colour::Grey;
                            stack.push((child, 0));
                        }
                        Colour::Grey => {
                            let start = stack.iter().position(|&(v, _)| v == child)?;
                            return Some(stack[start..].iter().map(|&(v, _)| v).collect());
                        }
                        Colour::Black => {}
                    }
                } else {
                    colour[node] = Colour::Black;
                    stack.pop();
                }
            }
        }
        None
    }

    /// Descendants of `i` (nodes reachable by a directed path of length ≥ 1), as a membership mask.
    pub fn descendants(&self, i: usize) -> Vec<bool> {
        let mut seen = vec![false; self.n];
        let mut stack = self.children(i);
        while let Some(v) = stack.pop() {
            if !seen[v] {
                seen[v] = true;
                stack.extend(self.children(v).into_iter().filter(|&c| !seen[c]));
            }
        }
        seen
    }
}

/// A directed acyclic graph. Construction checks acyclicity, so every `Dag` is one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "Digraph", into = "Digraph")]
pub struct Dag(Digraph);

impl TryFrom<Digraph> for Dag {
    type Error = GraphError;

    fn try_from(g: Digraph) -> Result<Self, GraphError> {
        match g.find_cycle() {
            Some(cycle) => Err(GraphError::Cycle { cycle }),
            None => Ok(Dag(g)),
        }
    }
}

impl From<Dag> for Digraph {
    fn from(d: Dag) -> Digraph {
        d.0
    }
}

impl std::ops::Deref for Dag {
    type Target = Digraph;

    fn deref(&self) -> &Digraph {
        &self.0
    }
}

impl Dag {
    /// The DAG with `n` nodes and no edges.
    pub fn empty(n: usize) -> Self {
        Dag(Digraph::empty(n))
    }

    /// Builds a DAG from edges, failing with the cycle if they contain one.
    pub fn from_edges(n: usize, edges: &[(usize, usize)]) -> Result<Self, GraphError> {
        Digraph::from_edges(n, edges)?.try_into()
    }

    /// The underlying digraph.
    pub fn as_digraph(&self) -> &Digraph {
        &self.0
    }

    /// A topological order; infallible for a DAG.
    pub fn order(&self) -> Vec<usize> {
        self.0
            .topological_order()
            .expect("a Dag is acyclic by construction")
    }

    /// Adds `from → to` if it keeps the graph acyclic; otherwise returns the cycle it would close.
    pub fn try_add_edge(&mut self, from: usize, to: usize) -> Result<(), GraphError> {
        let mut g = self.0.clone();
        g.add_edge(from, to)?;
        *self = g.try_into()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orientation_is_row_to_column() {
        let g = Digraph::from_matrix(&[vec![0u8, 1], vec![0, 0]]).unwrap();
        assert!(g.has_edge(0, 1));
        assert!(!g.has_edge(1, 0));
        assert_eq!(g.parents(1), vec![0]);
        assert_eq!(g.children(0), vec![1]);
        assert_eq!(g.to_matrix(), vec![vec![0, 1], vec![0, 0]]);
    }

    #[test]
    fn topological_order_respects_every_edge() {
        let g = Digraph::from_edges(5, &[(3, 1), (1, 0), (4, 0), (3, 2)]).unwrap();
        let order = g.topological_order().unwrap();
        let pos = |v: usize| order.iter().position(|&x| x == v).unwrap();
        for (a, b) in g.edges() {
            assert!(pos(a) < pos(b), "{a} → {b} violated by {order:?}");
        }
    }

    #[test]
    fn cycle_is_found_and_reported_in_order() {
        let g = Digraph::from_edges(4, &[(0, 1), (1, 2), (2, 3), (3, 1)]).unwrap();
        let cycle = g.find_cycle().unwrap();
        assert_eq!(cycle.len(), 3);
        for k in 0..cycle.len() {
            assert!(g.has_edge(cycle[k], cycle[(k + 1) % cycle.len()]));
        }
        let err = Dag::try_from(g).unwrap_err();
        assert!(matches!(err, GraphError::Cycle { .. }));
        assert!(err.to_string().contains("→"));
    }

    #[test]
    fn self_loops_and_bad_matrices_are_rejected() {
        assert_eq!(
            Digraph::from_edges(2, &[(1, 1)]),
            Err(GraphError::SelfLoop { node: 1 })
        );
        assert!(Digraph::from_matrix(&[vec![0u8, 2], vec![0, 0]]).is_err());
        assert!(Digraph::from_matrix(&[vec![0u8, 1]]).is_err());
        assert!(Digraph::from_edges(2, &[(0, 5)]).is_err());
    }

    #[test]
    fn dag_refuses_an_edge_that_closes_a_cycle() {
        let mut d = Dag::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
        assert!(d.try_add_edge(2, 0).is_err());
        assert_eq!(d.edge_count(), 2);
        d.try_add_edge(0, 2).unwrap();
        assert_eq!(d.edge_count(), 3);
    }

    #[test]
    fn descendants_follow_paths() {
        let g = Digraph::from_edges(5, &[(0, 1), (1, 2), (3, 4)]).unwrap();
        assert_eq!(g.descendants(0), vec![false, true, true, false, false]);
        assert_eq!(g.descendants(2), vec![false; 5]);
    }

    #[test]
    fn dag_serde_rejects_cycles() {
        let g = Digraph::from_edges(2, &[(0, 1), (1, 0)]).unwrap();
        let json = serde_json::to_string(&g).unwrap();
        assert!(serde_json::from_str::<Dag>(&json).is_err());
    }
}
