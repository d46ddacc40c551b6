//! Markov equivalence: [`Pdag`] (a partially directed graph), the CPDAG of a DAG by v-structures and
//! Meek's rules, and the skeleton-plus-v-structures test of equivalence.
//!
//! Two DAGs are Markov equivalent (they imply the same conditional independences) iff they have the
//! same skeleton and the same v-structures (Verma & Pearl 1990). The CPDAG (completed partially
//! directed acyclic graph) of a DAG keeps an edge directed iff every DAG of its equivalence class
//! orients it the same way. It is built by orienting the v-structures and then closing under Meek's
//! rules R1–R4 (Meek 1995, "Causal inference and causal explanation with background knowledge").

use super::{Dag, Digraph, GraphError};

/// A partially directed graph on nodes `0..n`: each adjacent pair is joined either by one directed
/// edge or by one undirected edge. Used for CPDAGs; nothing here forces the directed part to be
/// acyclic (callers that build one by hand are responsible for that).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pdag {
    n: usize,
    /// `directed[i * n + j]` ⇔ i → j.
    directed: Vec<bool>,
    /// Symmetric: `undirected[i * n + j] == undirected[j * n + i]` ⇔ i — j.
    undirected: Vec<bool>,
}

impl Pdag {
    /// The graph with `n` nodes and no edges.
    pub fn empty(n: usize) -> Self {
        Self {
            n,
            directed: vec![false; n * n],
            undirected: vec![false; n * n],
        }
    }

    /// The skeleton of `g`: every edge of `g`, in either direction, as an undirected edge.
    pub fn skeleton(g: &Digraph) -> Self {
        let mut p = Self::empty(g.n());
        for (a, b) in g.edges() {
            p.set_undirected(a, b);
        }
        p
    }

    /// Reads the GraN-DAG `cpdag.csv` convention: `rows[i][j] = 1` and `rows[j][i] = 0` is i → j;
    /// 1 in both directions is the undirected edge i — j.
    pub fn from_matrix<T: Copy + Into<f64>>(rows: &[Vec<T>]) -> Result<Self, GraphError> {
        let g = Digraph::from_matrix(rows)?;
        let mut p = Self::empty(g.n());
        for (a, b) in g.edges() {
            if g.has_edge(b, a) {
                p.set_undirected(a, b);
            } else {
                p.set_directed(a, b);
            }
        }
        Ok(p)
    }

    /// Number of nodes.
    pub fn n(&self) -> usize {
        self.n
    }

    fn check(&self, a: usize, b: usize) -> Result<(), GraphError> {
        for index in [a, b] {
            if index >= self.n {
                return Err(GraphError::NodeOutOfRange { index, n: self.n });
            }
        }
        if a == b {
            return Err(GraphError::SelfLoop { node: a });
        }
        Ok(())
    }

    /// Sets the edge between `from` and `to` to `from → to`, replacing whatever joined them.
    pub fn add_directed(&mut self, from: usize, to: usize) -> Result<(), GraphError> {
        self.check(from, to)?;
        self.set_directed(from, to);
        Ok(())
    }

    /// Sets the edge between `a` and `b` to the undirected `a — b`, replacing whatever joined them.
    pub fn add_undirected(&mut self, a: usize, b: usize) -> Result<(), GraphError> {
        self.check(a, b)?;
        self.set_undirected(a, b);
        Ok(())
    }

    /// Removes any edge between `a` and `b`.
    pub fn remove_edge(&mut self, a: usize, b: usize) {
        if a < self.n && b < self.n {
            let n = self.n;
            self.directed[a * n + b] = false;
            self.directed[b * n + a] = false;
            self.undirected[a * n + b] = false;
            self.undirected[b * n + a] = false;
        }
    }

    fn set_directed(&mut self, from: usize, to: usize) {
        self.remove_edge(from, to);
        self.directed[from * self.n + to] = true;
    }

    fn set_undirected(&mut self, a: usize, b: usize) {
        self.remove_edge(a, b);
        self.undirected[a * self.n + b] = true;
        self.undirected[b * self.n + a] = true;
    }

    /// True iff `from → to` is a directed edge.
    pub fn has_directed(&self, from: usize, to: usize) -> bool {
        from < self.n && to < self.n && self.directed[from * self.n + to]
    }

    /// True iff `a — b` is an undirected edge.
    pub fn has_undirected(&self, a: usize, b: usize) -> bool {
        a < self.n && b < self.n && self.undirected[a * self.n + b]
    }

    /// True iff `a` and `b` are joined by any edge.
    pub fn adjacent(&self, a: usize, b: usize) -> bool {
        self.has_directed(a, b) || self.has_directed(b, a) || self.has_undirected(a, b)
    }

    /// Directed edges `(from, to)` in row-major order.
    pub fn directed_edges(&self) -> Vec<(usize, usize)> {
        let n = self.n;
        (0..n * n)
            .filter(|&k| self.directed[k])
            .map(|k| (k / n, k % n))
            .collect()
    }

    /// Undirected edges as `(a, b)` with `a < b`, in row-major order.
    pub fn undirected_edges(&self) -> Vec<(usize, usize)> {
        let n = self.n;
        (0..n)
            .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
            .filter(|&(a, b)| self.undirected[a * n + b])
            .collect()
    }

    /// The matrix in the GraN-DAG `cpdag.csv` convention: `M[i][j] = 1` iff i → j or i — j, so an
    /// undirected edge is 1 in both directions.
    pub fn to_matrix(&self) -> Vec<Vec<u8>> {
        (0..self.n)
            .map(|i| {
                (0..self.n)
                    .map(|j| u8::from(self.has_directed(i, j) || self.has_undirected(i, j)))
                    .collect()
            })
            .collect()
    }

    /// Orients undirected edges by Meek's rules until none applies; returns how many edges were
    /// oriented. For an undirected a — b, a → b is forced when
    /// - R1: some c → a with c, b non-adjacent (else c → a ← b would be a new v-structure);
    /// - R2: a → c → b for some c (else b → a would close a cycle);
    /// - R3: a — c, a — d, c → b, d → b with c, d non-adjacent;
    /// - R4: a — c, c → d, d → b, with c, b non-adjacent and a, d adjacent.
    ///
    /// Every rule only orients (never adds or removes adjacencies), so the loop ends after at most
    /// as many passes as there are undirected edges.
    pub fn apply_meek_rules(&mut self) -> usize {
        let mut oriented = 0;
        loop {
            let mut changed = false;
            for (x, y) in self.undirected_edges() {
                for (a, b) in [(x, y), (y, x)] {
                    if self.has_undirected(a, b) && self.meek_forces(a, b) {
                        self.set_directed(a, b);
                        oriented += 1;
                        changed = true;
                    }
                }
            }
            if !changed {
                return oriented;
            }
        }
    }

    /// Whether one of R1–R4 forces the undirected edge a — b to become a → b.
    fn meek_forces(&self, a: usize, b: usize) -> bool {
        let n = self.n;
        let nodes = 0..n;
        // R1
        if nodes
            .clone()
            .any(|c| c != b && self.has_directed(c, a) && !self.adjacent(c, b))
        {
            return true;
        }
        // R2
        if nodes
            .clone()
            .any(|c| self.has_directed(a, c) && self.has_directed(c, b))
        {
            return true;
        }
        let undirected_neighbours: Vec<usize> = nodes
            .clone()
            .filter(|&c| c != b && self.has_undirected(a, c))
            .collect();
        // R3
        let into_b: Vec<usize> = undirected_neighbours
            .iter()
            .copied()
            .filter(|&c| self.has_directed(c, b))
            .collect();
        for (k, &c) in into_b.iter().enumerate() {
            if into_b[k + 1..].iter().any(|&d| !self.adjacent(c, d)) {
                return true;
            }
        }
        // R4
        undirected_neighbours.iter().any(|&c| {
            !self.adjacent(c, b)
                && nodes.clone().any(|d| {
                    self.has_directed(c, d) && self.has_directed(d, b) && self.adjacent(a, d)
                })
        })
    }
}

/// The v-structures (unshielded colliders) of `g`: triples `(a, c, b)` with a → c ← b, `a < b`,
/// and a, b non-adjacent; sorted.
pub fn v_structures(g: &Digraph) -> Vec<(usize, usize, usize)> {
    let mut found = Vec::new();
    for c in 0..g.n() {
        let parents = g.parents(c);
        for (k, &a) in parents.iter().enumerate() {
            for &b in &parents[k + 1..] {
                if !g.adjacent(a, b) {
                    found.push((a, c, b));
                }
            }
        }
    }
    found.sort_unstable();
    found
}

/// The CPDAG (essential graph) of `dag`: its skeleton with the v-structures a → c ← b oriented, then
/// closed under Meek's rules R1–R4 ([`Pdag::apply_meek_rules`]). An edge is directed in the result
/// iff all DAGs Markov equivalent to `dag` orient it that way (Meek 1995, Theorem 2).
pub fn cpdag(dag: &Dag) -> Pdag {
    let mut p = Pdag::skeleton(dag.as_digraph());
    for (a, c, b) in v_structures(dag.as_digraph()) {
        p.set_directed(a, c);
        p.set_directed(b, c);
    }
    p.apply_meek_rules();
    p
}

/// True iff `a` and `b` are Markov equivalent: same number of nodes, same skeleton (adjacent pairs)
/// and same v-structures (Verma & Pearl 1990).
pub fn markov_equivalent(a: &Dag, b: &Dag) -> bool {
    let n = a.n();
    if b.n() != n {
        return false;
    }
    let same_skeleton = (0..n).all(|i| (i + 1..n).all(|j| a.adjacent(i, j) == b.adjacent(i, j)));
    same_skeleton && v_structures(a.as_digraph()) == v_structures(b.as_digraph())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dag(n: usize, edges: &[(usize, usize)]) -> Dag {
        Dag::from_edges(n, edges).unwrap()
    }

    fn pdag(n: usize, directed: &[(usize, usize)], undirected: &[(usize, usize)]) -> Pdag {
        let mut p = Pdag::empty(n);
        for &(a, b) in directed {
            p.add_directed(a, b).unwrap();
        }
        for &(a, b) in undirected {
            p.add_undirected(a, b).unwrap();
        }
        p
    }

    #[test]
    fn chain_and_fork_are_fully_undirected() {
        // 0 → 1 → 2 and 0 ← 1 → 2 have no v-structure: every edge is reversible.
        let expected = pdag(3, &[], &[(0, 1), (1, 2)]);
        assert_eq!(cpdag(&dag(3, &[(0, 1), (1, 2)])), expected);
        assert_eq!(cpdag(&dag(3, &[(1, 0), (1, 2)])), expected);
        assert_eq!(cpdag(&dag(3, &[(2, 1), (1, 0)])), expected);
    }

    #[test]
    fn collider_stays_directed() {
        let c = cpdag(&dag(3, &[(0, 1), (2, 1)]));
        assert_eq!(c, pdag(3, &[(0, 1), (2, 1)], &[]));
        assert_eq!(
            c.to_matrix(),
            vec![vec![0, 1, 0], vec![0, 0, 0], vec![0, 1, 0]]
        );
    }

    #[test]
    fn r1_propagates_below_a_collider() {
        // 0 → 1 ← 2 is a v-structure; 1 — 3 with 0, 3 non-adjacent: R1 gives 1 → 3.
        let c = cpdag(&dag(4, &[(0, 1), (2, 1), (1, 3)]));
        assert_eq!(c, pdag(4, &[(0, 1), (2, 1), (1, 3)], &[]));
    }

    #[test]
    fn r2_orients_the_shortcut_of_a_directed_path() {
        // DAG 0 → 2 ← 1, 2 → 3, 0 → 3. V-structure 0 → 2 ← 1 (0, 1 non-adjacent); 0 → 3 ← 2 is
        // shielded. R1 on 1 → 2 — 3 (1, 3 non-adjacent) gives 2 → 3; then R2 on 0 → 2 → 3 with
        // 0 — 3 gives 0 → 3. Everything is compelled.
        let c = cpdag(&dag(4, &[(0, 2), (1, 2), (2, 3), (0, 3)]));
        assert_eq!(c, pdag(4, &[(0, 2), (1, 2), (2, 3), (0, 3)], &[]));
    }

    #[test]
    fn r3_orients_the_edge_into_a_shielded_collider() {
        // DAG a=0 → c=1, 0 → d=2, 1 → b=3, 2 → 3, 0 → 3. Only v-structure 1 → 3 ← 2. R1 and R2 do
        // not apply; R3 on 0 — 3 (0 — 1, 0 — 2, 1 → 3, 2 → 3, 1, 2 non-adjacent) gives 0 → 3.
        // 0 — 1 and 0 — 2 stay undirected (1 → 0 → 2 is in the class, so is 2 → 0 → 1).
        let c = cpdag(&dag(4, &[(0, 1), (0, 2), (1, 3), (2, 3), (0, 3)]));
        assert_eq!(c, pdag(4, &[(1, 3), (2, 3), (0, 3)], &[(0, 1), (0, 2)]));
    }

    #[test]
    fn r4_orients_when_only_it_applies() {
        // Hand-built PDAG (background knowledge): i=0, j=1, k=2, l=3 with 0 — 1, 0 — 2, 2 → 3,
        // 3 → 1, 0 — 3, and 2, 1 non-adjacent. R1: 2 → 3 has undirected neighbour 0 of 3, but 0 and 2
        // are adjacent; 3 → 1 has undirected neighbour 0 of 1, adjacent to 3. R2: no a → c → b
        // with a — b. R3: 1 has one directed parent, 3 has one. R4 on 0 — 1 (0 — 2 → 3 → 1,
        // 2 and 1 non-adjacent, 0 and 3 adjacent) gives 0 → 1, and nothing else follows.
        let mut p = pdag(4, &[(2, 3), (3, 1)], &[(0, 1), (0, 2), (0, 3)]);
        assert_eq!(p.apply_meek_rules(), 1);
        assert_eq!(p, pdag(4, &[(2, 3), (3, 1), (0, 1)], &[(0, 2), (0, 3)]));
    }

    #[test]
    fn sprinkler_network() {
        // Pearl's sprinkler: cloudy=0 → sprinkler=1, 0 → rain=2, 1 → wet=3, 2 → 3, 3 → slippery=4.
        // 1 → 3 ← 2 is the only v-structure; R1 orients 3 → 4; cloudy's two edges stay undirected.
        let c = cpdag(&dag(5, &[(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)]));
        assert_eq!(c, pdag(5, &[(1, 3), (2, 3), (3, 4)], &[(0, 1), (0, 2)]));
    }

    #[test]
    fn student_network() {
        // Koller & Friedman's student network: difficulty=0 → grade=2 ← intelligence=1,
        // 1 → sat=3, 2 → letter=4. V-structure 0 → 2 ← 1; R1 orients 2 → 4; 1 — 3 is reversible.
        let c = cpdag(&dag(5, &[(0, 2), (1, 2), (1, 3), (2, 4)]));
        assert_eq!(c, pdag(5, &[(0, 2), (1, 2), (2, 4)], &[(1, 3)]));
    }

    #[test]
    fn asia_network() {
        // Lauritzen & Spiegelhalter's chest clinic: asia=0 → tub=1, smoke=2 → lung=3,
        // 2 → bronc=4, 1 → either=5, 3 → 5, 5 → xray=6, 5 → dysp=7, 4 → 7.
        // V-structures 1 → 5 ← 3 and 5 → 7 ← 4; R1 orients 5 → 6; asia — tub, smoke — lung and
        // smoke — bronc are reversible (3 undirected, 5 directed edges).
        let c = cpdag(&dag(
            8,
            &[
                (0, 1),
                (2, 3),
                (2, 4),
                (1, 5),
                (3, 5),
                (5, 6),
                (5, 7),
                (4, 7),
            ],
        ));
        assert_eq!(
            c,
            pdag(
                8,
                &[(1, 5), (3, 5), (5, 6), (5, 7), (4, 7)],
                &[(0, 1), (2, 3), (2, 4)]
            )
        );
    }

    #[test]
    fn matrix_round_trip_and_accessors() {
        let p = pdag(3, &[(0, 2)], &[(0, 1)]);
        let m = p.to_matrix();
        assert_eq!(m, vec![vec![0, 1, 1], vec![1, 0, 0], vec![0, 0, 0]]);
        assert_eq!(Pdag::from_matrix(&m).unwrap(), p);
        assert_eq!(p.directed_edges(), vec![(0, 2)]);
        assert_eq!(p.undirected_edges(), vec![(0, 1)]);
        assert!(p.adjacent(2, 0) && p.adjacent(1, 0) && !p.adjacent(1, 2));
        let mut q = p.clone();
        q.remove_edge(2, 0);
        assert!(!q.adjacent(0, 2));
        assert!(Pdag::empty(2).add_directed(0, 2).is_err());
        assert!(Pdag::empty(2).add_undirected(1, 1).is_err());
    }

    #[test]
    fn v_structures_and_equivalence() {
        let collider = dag(3, &[(0, 1), (2, 1)]);
        assert_eq!(v_structures(collider.as_digraph()), vec![(0, 1, 2)]);
        let chain = dag(3, &[(0, 1), (1, 2)]);
        let reversed_chain = dag(3, &[(2, 1), (1, 0)]);
        assert!(markov_equivalent(&chain, &reversed_chain));
        assert!(!markov_equivalent(&chain, &collider));
        assert!(!markov_equivalent(&chain, &dag(3, &[(0, 1)])));
        assert!(!markov_equivalent(&chain, &dag(4, &[(0, 1), (1, 2)])));
        // Shielded collider: complete graph, no v-structure.
        assert!(v_structures(dag(3, &[(0, 1), (2, 1), (0, 2)]).as_digraph()).is_empty());
    }
}
