//! d-separation in DAGs by reachability along active trails ("Bayes-ball"; Koller & Friedman 2009,
//! Algorithm 3.1; Shachter 1998).
//!
//! A trail between x and y is active given Z when every collider on it is in Z or has a descendant
//! in Z, and no other node on it is in Z. X and Y are d-separated by Z when no trail between them is
//! active.

use super::{Dag, Digraph};

/// The nodes with an active trail from some node of `sources` given `conditioned` (a membership
/// mask), excluding the conditioned nodes. The sources themselves are included unless conditioned.
///
/// The search walks (node, direction) states: arriving "up" means from a child, arriving "down"
/// means from a parent. A non-conditioned node passes a ball arriving from a child to its parents
/// and children, and one arriving from a parent to its children; a node in Z or with a descendant in
/// Z (an ancestor of Z, inclusive) passes a ball arriving from a parent back up to its parents
/// (an opened collider). The graph is read as given; callers pass DAGs.
pub(crate) fn reachable(g: &Digraph, sources: &[usize], conditioned: &[bool]) -> Vec<bool> {
    let n = g.n();
    // Z together with its ancestors: the nodes at which a collider is open.
    let mut opens_collider = conditioned.to_vec();
    let mut stack: Vec<usize> = (0..n).filter(|&v| conditioned[v]).collect();
    while let Some(v) = stack.pop() {
        for p in g.parents(v) {
            if !opens_collider[p] {
                opens_collider[p] = true;
                stack.push(p);
            }
        }
    }

    const UP: usize = 0;
    const DOWN: usize = 1;
    let mut visited = vec![[false; 2]; n];
    let mut reached = vec![false; n];
    let mut queue: Vec<(usize, usize)> = sources.iter().map(|&s| (s, UP)).collect();
    while let Some((v, direction)) = queue.pop() {
        if visited[v][direction] {
            continue;
        }
        visited[v][direction] = true;
        if !conditioned[v] {
            reached[v] = true;
        }
        if direction == UP && !conditioned[v] {
            queue.extend(g.parents(v).into_iter().map(|p| (p, UP)));
            queue.extend(g.children(v).into_iter().map(|c| (c, DOWN)));
        } else if direction == DOWN {
            if !conditioned[v] {
                queue.extend(g.children(v).into_iter().map(|c| (c, DOWN)));
            }
            if opens_collider[v] {
                queue.extend(g.parents(v).into_iter().map(|p| (p, UP)));
            }
        }
    }
    reached
}

/// True iff every node of `x` is d-separated from every node of `y` given `z` in `dag`:
/// X ⊥ Y | Z holds in every distribution Markov to the DAG. Nodes of `x` or `y` that are in `z`
/// are trivially separated; out-of-range indices are ignored.
pub fn d_separated(dag: &Dag, x: &[usize], y: &[usize], z: &[usize]) -> bool {
    d_separated_in(dag.as_digraph(), x, y, z)
}

pub(crate) fn d_separated_in(g: &Digraph, x: &[usize], y: &[usize], z: &[usize]) -> bool {
    let n = g.n();
    let mut conditioned = vec![false; n];
    for &v in z.iter().filter(|&&v| v < n) {
        conditioned[v] = true;
    }
    let sources: Vec<usize> = x
        .iter()
        .copied()
        .filter(|&v| v < n && !conditioned[v])
        .collect();
    let reached = reachable(g, &sources, &conditioned);
    !y.iter().any(|&v| v < n && reached[v])
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn dag(n: usize, edges: &[(usize, usize)]) -> Dag {
        Dag::from_edges(n, edges).unwrap()
    }

    #[test]
    fn chain_fork_and_collider() {
        let chain = dag(3, &[(0, 1), (1, 2)]);
        assert!(!d_separated(&chain, &[0], &[2], &[]));
        assert!(d_separated(&chain, &[0], &[2], &[1]));
        let fork = dag(3, &[(1, 0), (1, 2)]);
        assert!(!d_separated(&fork, &[0], &[2], &[]));
        assert!(d_separated(&fork, &[0], &[2], &[1]));
        let collider = dag(4, &[(0, 1), (2, 1), (1, 3)]);
        assert!(d_separated(&collider, &[0], &[2], &[]));
        assert!(!d_separated(&collider, &[0], &[2], &[1]));
        // Conditioning on a descendant of the collider opens it too.
        assert!(!d_separated(&collider, &[0], &[2], &[3]));
    }

    #[test]
    fn sets_and_trivial_cases() {
        let g = dag(5, &[(0, 2), (1, 2), (2, 3), (3, 4)]);
        assert!(d_separated(&g, &[0, 1], &[4], &[3]));
        assert!(!d_separated(&g, &[0, 1], &[4], &[]));
        assert!(d_separated(&g, &[0], &[1], &[]));
        assert!(!d_separated(&g, &[0], &[1], &[4]));
        assert!(d_separated(&g, &[2], &[2], &[2]));
        assert!(d_separated(&g, &[], &[4], &[]));
    }

    /// d-separation by definition: enumerate every simple trail between x and y in the skeleton
    /// and test each for being active.
    fn separated_by_paths(g: &Digraph, x: usize, y: usize, z: &[bool]) -> bool {
        let n = g.n();
        let descendants_in_z: Vec<bool> = (0..n)
            .map(|v| z[v] || g.descendants(v).iter().zip(z).any(|(&d, &c)| d && c))
            .collect();
        fn walk(g: &Digraph, path: &mut Vec<usize>, y: usize, z: &[bool], open: &[bool]) -> bool {
            let last = *path.last().unwrap();
            if last == y {
                // Check every interior node of the trail.
                return path.windows(3).all(|w| {
                    let (a, v, b) = (w[0], w[1], w[2]);
                    let collider = g.has_edge(a, v) && g.has_edge(b, v);
                    if collider {
                        open[v]
                    } else {
                        !z[v]
                    }
                });
            }
            for next in 0..g.n() {
                if g.adjacent(last, next) && !path.contains(&next) {
                    path.push(next);
                    let active = walk(g, path, y, z, open);
                    path.pop();
                    if active {
                        return true;
                    }
                }
            }
            false
        }
        !walk(g, &mut vec![x], y, z, &descendants_in_z)
    }

    #[test]
    fn agrees_with_trail_enumeration_on_random_dags() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut checked = 0;
        for _ in 0..150 {
            let n = rng.random_range(2..=7);
            let order: Vec<usize> = {
                let mut o: Vec<usize> = (0..n).collect();
                for k in (1..n).rev() {
                    o.swap(k, rng.random_range(0..=k));
                }
                o
            };
            let mut edges = Vec::new();
            for a in 0..n {
                for b in a + 1..n {
                    if rng.random_bool(0.4) {
                        edges.push((order[a], order[b]));
                    }
                }
            }
            let g = dag(n, &edges);
            for x in 0..n {
                for y in 0..n {
                    if x == y {
                        continue;
                    }
                    let z: Vec<bool> = (0..n)
                        .map(|v| v != x && v != y && rng.random_bool(0.3))
                        .collect();
                    let z_list: Vec<usize> = (0..n).filter(|&v| z[v]).collect();
                    assert_eq!(
                        d_separated(&g, &[x], &[y], &z_list),
                        separated_by_paths(&g, x, y, &z),
                        "graph {:?}, x {x}, y {y}, z {z_list:?}",
                        g.edges()
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 1000);
    }
}
