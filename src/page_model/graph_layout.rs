//! Layered (Sugiyama-style) drawing of a directed graph, top to bottom: causes above effects.
//!
//! Owns the geometry the page needs to draw a graph as SVG: a box per node and a polyline per edge,
//! computed in pure Rust so the drawing is deterministic and testable natively. The steps are the
//! classic ones (Sugiyama, Tagawa & Toda 1981):
//! 1. clean the edge list (self-loops, duplicates and out-of-range indices are dropped);
//! 2. break cycles by reversing the back edges of a depth-first search in index order (predicted
//!    graphs and prior knowledge may be cyclic, and 2-cycles are common in edge-strength views);
//! 3. layer by longest path from the sources, so every edge of the acyclic version points down;
//! 4. split edges spanning several layers with one dummy vertex per intermediate layer;
//! 5. reduce crossings by barycentre and median sweeps with adjacent transpositions, keeping the
//!    ordering with the fewest crossings (ties broken by vertex index);
//! 6. place x coordinates: each layer packed and centred, then pulled towards the barycentres of
//!    its neighbours by weighted isotonic regression with minimum separations (no overlaps);
//! 7. route each edge from the border of its source box through its dummies to the border of its
//!    target box, spreading the attachment points along each box side so that parallel edges
//!    (the two edges of a 2-cycle) stay distinguishable.

use std::collections::HashSet;

/// Barycentre/median sweeps (alternating down and up) per heuristic.
const ORDER_SWEEPS: usize = 12;
/// Upper bound on the passes of adjacent transpositions after each sweep.
const TRANSPOSE_PASSES: usize = 8;
/// Down/up relaxation rounds of the x placement.
const PLACE_ROUNDS: usize = 12;
/// How strongly a dummy vertex (a bend of a long edge) wants to sit over its neighbour: long edges
/// drawn straight matter more than a real node sitting exactly between its parents.
const DUMMY_WEIGHT: f64 = 4.0;
/// Weight of a vertex with no neighbour on the side considered: it keeps its place unless pushed.
const FREE_WEIGHT: f64 = 0.01;
/// Largest distance (pixels) between neighbouring edge attachment points on one box side.
const PORT_SPACING: f64 = 8.0;

/// Sizes the layout works with (pixels).
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutOptions {
    /// Height of every node box.
    pub node_height: f64,
    /// Vertical space between the bottom of one layer's boxes and the top of the next layer's.
    pub layer_gap: f64,
    /// Minimum horizontal space between two node boxes of one layer (half of it next to a bend).
    pub node_gap: f64,
    /// Empty border around the drawing.
    pub margin: f64,
    /// Width of one label character; a box is `char_width × characters` wide.
    pub char_width: f64,
    /// Minimum box width.
    pub min_node_width: f64,
}

impl Default for LayoutOptions {
    /// Sizes suited to a 12–13 px sans-serif label font.
    fn default() -> Self {
        LayoutOptions {
            node_height: 30.0,
            layer_gap: 70.0,
            node_gap: 24.0,
            margin: 16.0,
            char_width: 7.5,
            min_node_width: 44.0,
        }
    }
}

/// A node's box: centre (x, y), width, height, layer index (0 = top).
#[derive(Debug, Clone, PartialEq)]
pub struct NodeBox {
    /// Horizontal centre.
    pub x: f64,
    /// Vertical centre.
    pub y: f64,
    /// Box width: `max(min_node_width, char_width × label characters)`.
    pub width: f64,
    /// Box height (`node_height`).
    pub height: f64,
    /// Layer index; 0 is the top layer.
    pub layer: usize,
}

/// One edge's route: the polyline from the border of `from`'s box to the border of `to`'s box,
/// passing through the dummy positions of intermediate layers. `reversed` is true when the edge was
/// turned around to break a cycle for layering (it still points from `from` to `to` in `points`):
/// a reversed edge leaves the top of `from`'s box and enters the bottom of `to`'s box.
#[derive(Debug, Clone, PartialEq)]
pub struct EdgeRoute {
    /// Source node (the cause).
    pub from: usize,
    /// Target node (the effect).
    pub to: usize,
    /// Polyline from `from`'s box border to `to`'s box border (draw the arrowhead at the end).
    pub points: Vec<(f64, f64)>,
    /// Whether the edge points upwards because it was reversed to break a cycle.
    pub reversed: bool,
}

/// A complete drawing: node boxes (indexed like the labels), one route per distinct edge (in the
/// order of first appearance in the input), and the size of the canvas enclosing both.
#[derive(Debug, Clone, PartialEq)]
pub struct Layout {
    /// One box per node, in node index order.
    pub nodes: Vec<NodeBox>,
    /// One route per distinct, valid, non-loop edge, in input order.
    pub edges: Vec<EdgeRoute>,
    /// Canvas width, margin included.
    pub width: f64,
    /// Canvas height, margin included.
    pub height: f64,
}

/// Lays out `n` nodes with labels `labels` (label widths come from `char_width * chars`, at least
/// `min_node_width`) and directed `edges` (i, j) meaning i → j.
///
/// Computes the layering, ordering, coordinates and edge routes described in the module doc. Any
/// digraph is accepted: self-loops are ignored, duplicate edges drawn once, edges naming a node
/// outside `0..labels.len()` skipped, and cycles broken by reversing DFS back edges (marked
/// `reversed`). The result depends only on the inputs.
pub fn layered_layout(
    labels: &[String],
    edges: &[(usize, usize)],
    options: &LayoutOptions,
) -> Layout {
    let n = labels.len();
    let edges = clean_edges(n, edges);
    let reversed = back_edges(n, &edges);
    let dag: Vec<(usize, usize)> = edges
        .iter()
        .zip(&reversed)
        .map(|(&(a, b), &r)| if r { (b, a) } else { (a, b) })
        .collect();
    let rank = longest_path_layers(n, &dag);
    let widths: Vec<f64> = labels
        .iter()
        .map(|l| (options.char_width * l.chars().count() as f64).max(options.min_node_width))
        .collect();
    let mut g = Layered::build(&rank, &dag, widths);
    g.reduce_crossings();
    let mut x = g.place(options);

    // Shift so the leftmost box edge is at the margin; layer centres from the top margin.
    let left = (0..x.len()).map(|v| x[v] - g.width[v] / 2.0);
    let shift = options.margin - left.fold(f64::INFINITY, f64::min);
    x.iter_mut().for_each(|xv| *xv += shift);
    let right = (0..x.len()).map(|v| x[v] + g.width[v] / 2.0);
    let width = right.fold(options.margin, f64::max) + options.margin;
    let step = options.node_height + options.layer_gap;
    let y_of = |l: usize| options.margin + options.node_height / 2.0 + l as f64 * step;
    let height = 2.0 * options.margin + (g.layers.len() as f64 * step - options.layer_gap).max(0.0);
    let nodes = (0..n)
        .map(|v| NodeBox {
            x: x[v],
            y: y_of(g.layer[v]),
            width: g.width[v],
            height: options.node_height,
            layer: g.layer[v],
        })
        .collect();

    // Attachment points: on each real node's bottom (edges leaving downwards) and top (edges
    // arriving from above), sorted by the x of the vertex at the other end of the first segment.
    let mut bottom: Vec<Vec<(f64, usize)>> = vec![Vec::new(); n];
    let mut top: Vec<Vec<(f64, usize)>> = vec![Vec::new(); n];
    for (k, chain) in g.chains.iter().enumerate() {
        let last = chain.len() - 1;
        bottom[chain[0]].push((x[chain[1]], k));
        top[chain[last]].push((x[chain[last - 1]], k));
    }
    let mut upper_port = vec![0.0; edges.len()];
    let mut lower_port = vec![0.0; edges.len()];
    for v in 0..n {
        spread_ports(&mut bottom[v], x[v], g.width[v], &mut upper_port);
        spread_ports(&mut top[v], x[v], g.width[v], &mut lower_port);
    }
    let half = options.node_height / 2.0;
    let mut routes = Vec::with_capacity(edges.len());
    for (k, (&(from, to), &reversed)) in edges.iter().zip(&reversed).enumerate() {
        let chain = &g.chains[k];
        let mut points: Vec<(f64, f64)> = chain.iter().map(|&d| (x[d], y_of(g.layer[d]))).collect();
        let last = points.len() - 1;
        points[0] = (upper_port[k], points[0].1 + half);
        points[last] = (lower_port[k], points[last].1 - half);
        if reversed {
            points.reverse();
        }
        routes.push(EdgeRoute {
            from,
            to,
            points,
            reversed,
        });
    }
    Layout {
        nodes,
        edges: routes,
        width,
        height,
    }
}

/// Drops self-loops, out-of-range indices and repeated edges, keeping first appearances in order.
fn clean_edges(n: usize, edges: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut seen = HashSet::new();
    edges
        .iter()
        .copied()
        .filter(|&(a, b)| a < n && b < n && a != b && seen.insert((a, b)))
        .collect()
}

/// Marks the back edges of an iterative depth-first search that starts from nodes in index order
/// and follows out-edges in target order. Reversing exactly these edges leaves a DAG.
fn back_edges(n: usize, edges: &[(usize, usize)]) -> Vec<bool> {
    let mut out: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, &(a, _)) in edges.iter().enumerate() {
        out[a].push(k);
    }
    for list in &mut out {
        list.sort_by_key(|&k| (edges[k].1, k));
    }
    // 0 = unvisited, 1 = on the stack, 2 = finished.
    let mut state = vec![0u8; n];
    let mut back = vec![false; edges.len()];
    for root in 0..n {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        let mut stack = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&k) = out[v].get(*next) {
                *next += 1;
                let w = edges[k].1;
                match state[w] {
                    0 => {
                        state[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => back[k] = true,
                    _ => {}
                }
            } else {
                state[v] = 2;
                stack.pop();
            }
        }
    }
    back
}

/// Longest-path layering of a DAG: sources in layer 0, every other node one below its lowest
/// parent (relaxing all edges until nothing changes: at most n rounds on a DAG).
fn longest_path_layers(n: usize, dag: &[(usize, usize)]) -> Vec<usize> {
    let mut layer = vec![0usize; n];
    for _ in 0..n {
        let mut changed = false;
        for &(a, b) in dag {
            if layer[b] <= layer[a] {
                layer[b] = layer[a] + 1;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    layer
}

/// Assigns attachment x positions on one box side, centred on `centre`, in the order of `ports`
/// (sorted here by the other end's x, then edge index, so the two edges of a 2-cycle run parallel).
fn spread_ports(ports: &mut [(f64, usize)], centre: f64, width: f64, out: &mut [f64]) {
    ports.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let count = ports.len();
    let spacing = if count > 1 {
        PORT_SPACING.min(0.6 * width / (count - 1) as f64)
    } else {
        0.0
    };
    for (i, &(_, k)) in ports.iter().enumerate() {
        out[k] = centre + (i as f64 - (count as f64 - 1.0) / 2.0) * spacing;
    }
}

/// The proper layered graph: real nodes `0..n`, dummies after them, every edge between adjacent
/// layers.
struct Layered {
    /// Number of real nodes.
    n: usize,
    /// Layer of every vertex.
    layer: Vec<usize>,
    /// Width of every vertex (0 for dummies).
    width: Vec<f64>,
    /// Neighbours in the layer above / below (with multiplicity).
    up: Vec<Vec<usize>>,
    down: Vec<Vec<usize>>,
    /// Per edge, its vertices from the upper end to the lower end.
    chains: Vec<Vec<usize>>,
    /// The current left-to-right order of every layer.
    layers: Vec<Vec<usize>>,
}

impl Layered {
    fn build(rank: &[usize], dag: &[(usize, usize)], widths: Vec<f64>) -> Self {
        let n = rank.len();
        let mut g = Layered {
            n,
            layer: rank.to_vec(),
            width: widths,
            up: vec![Vec::new(); n],
            down: vec![Vec::new(); n],
            chains: Vec::with_capacity(dag.len()),
            layers: Vec::new(),
        };
        for &(a, b) in dag {
            let mut chain = vec![a];
            for l in rank[a] + 1..rank[b] {
                g.layer.push(l);
                g.width.push(0.0);
                g.up.push(Vec::new());
                g.down.push(Vec::new());
                chain.push(g.layer.len() - 1);
            }
            chain.push(b);
            for pair in chain.windows(2) {
                g.down[pair[0]].push(pair[1]);
                g.up[pair[1]].push(pair[0]);
            }
            g.chains.push(chain);
        }
        let depth = g.layer.iter().map(|&l| l + 1).max().unwrap_or(0);
        g.layers = vec![Vec::new(); depth];
        for v in 0..g.layer.len() {
            g.layers[g.layer[v]].push(v);
        }
        g
    }

    /// Position of every vertex within its layer.
    fn positions(&self) -> Vec<usize> {
        let mut pos = vec![0; self.layer.len()];
        for layer in &self.layers {
            for (i, &v) in layer.iter().enumerate() {
                pos[v] = i;
            }
        }
        pos
    }

    /// Total number of segment crossings between consecutive layers (inversions counted with a
    /// Fenwick tree).
    fn crossings(&self, pos: &[usize]) -> usize {
        let mut total = 0;
        for l in 0..self.layers.len().saturating_sub(1) {
            let mut segs: Vec<(usize, usize)> = self.layers[l]
                .iter()
                .flat_map(|&a| self.down[a].iter().map(move |&b| (pos[a], pos[b])))
                .collect();
            segs.sort_unstable();
            let m = self.layers[l + 1].len();
            let mut tree = vec![0usize; m + 1];
            for (i, &(_, b)) in segs.iter().enumerate() {
                let (mut k, mut at_most) = (b + 1, 0);
                while k > 0 {
                    at_most += tree[k];
                    k &= k - 1;
                }
                total += i - at_most;
                let mut k = b + 1;
                while k <= m {
                    tree[k] += 1;
                    k += k & k.wrapping_neg();
                }
            }
        }
        total
    }

    /// Barycentre then median sweeps from the initial (index) order, each sweep followed by
    /// transpositions; the ordering with the fewest crossings wins (the earliest among equals).
    fn reduce_crossings(&mut self) {
        let initial = self.layers.clone();
        let mut best = initial.clone();
        let mut best_count = self.crossings(&self.positions());
        for use_median in [false, true] {
            self.layers = initial.clone();
            for sweep in 0..ORDER_SWEEPS {
                if best_count == 0 {
                    break;
                }
                let downward = sweep % 2 == 0;
                let mut pos = self.positions();
                let order: Vec<usize> = if downward {
                    (1..self.layers.len()).collect()
                } else {
                    (0..self.layers.len().saturating_sub(1)).rev().collect()
                };
                for l in order {
                    self.sort_layer(l, downward, use_median, &mut pos);
                }
                self.transpose(&mut pos);
                let count = self.crossings(&pos);
                if count < best_count {
                    best_count = count;
                    best = self.layers.clone();
                }
            }
        }
        self.layers = best;
    }

    /// Reorders layer `l` by the barycentre (or median) of its neighbours' positions in the layer
    /// above (`downward`) or below. Vertices without such neighbours keep their slots; ties go to
    /// the smaller vertex index.
    fn sort_layer(&mut self, l: usize, downward: bool, use_median: bool, pos: &mut [usize]) {
        let nbrs = if downward { &self.up } else { &self.down };
        let layer = &mut self.layers[l];
        let mut movable: Vec<(f64, usize)> = Vec::new();
        for &v in layer.iter() {
            let mut p: Vec<usize> = nbrs[v].iter().map(|&u| pos[u]).collect();
            if p.is_empty() {
                continue;
            }
            let key = if use_median {
                p.sort_unstable();
                let m = p.len();
                (p[(m - 1) / 2] + p[m / 2]) as f64 / 2.0
            } else {
                p.iter().sum::<usize>() as f64 / p.len() as f64
            };
            movable.push((key, v));
        }
        movable.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut next = movable.into_iter();
        for slot in layer.iter_mut() {
            if !nbrs[*slot].is_empty() {
                *slot = next.next().map(|(_, v)| v).unwrap_or(*slot);
            }
        }
        for (i, &v) in layer.iter().enumerate() {
            pos[v] = i;
        }
    }

    /// Crossings among the edges of `left` and `right` (in that order) with both adjacent layers.
    fn pair_crossings(&self, left: usize, right: usize, pos: &[usize]) -> usize {
        [&self.up, &self.down]
            .iter()
            .map(|nbrs| {
                let right_nbrs = &nbrs[right];
                nbrs[left]
                    .iter()
                    .map(|&a| right_nbrs.iter().filter(|&&b| pos[a] > pos[b]).count())
                    .sum::<usize>()
            })
            .sum()
    }

    /// Swaps adjacent vertices while that strictly lowers the crossings around them.
    fn transpose(&mut self, pos: &mut [usize]) {
        for _ in 0..TRANSPOSE_PASSES {
            let mut improved = false;
            for l in 0..self.layers.len() {
                for i in 0..self.layers[l].len().saturating_sub(1) {
                    let (u, v) = (self.layers[l][i], self.layers[l][i + 1]);
                    if self.pair_crossings(v, u, pos) < self.pair_crossings(u, v, pos) {
                        self.layers[l].swap(i, i + 1);
                        pos[u] = i + 1;
                        pos[v] = i;
                        improved = true;
                    }
                }
            }
            if !improved {
                break;
            }
        }
    }

    /// Minimum distance between the centres of neighbours `a`, `b` in one layer.
    fn separation(&self, a: usize, b: usize, options: &LayoutOptions) -> f64 {
        let both_real = a < self.n && b < self.n;
        let gap = if both_real {
            options.node_gap
        } else {
            options.node_gap / 2.0
        };
        (self.width[a] + self.width[b]) / 2.0 + gap
    }

    /// x centres: every layer packed and centred on 0, then relaxed towards the neighbours above
    /// (down sweeps), below (up sweeps) and finally both.
    fn place(&self, options: &LayoutOptions) -> Vec<f64> {
        let mut x = vec![0.0; self.layer.len()];
        for layer in &self.layers {
            let mut at = 0.0;
            for (i, &v) in layer.iter().enumerate() {
                if i > 0 {
                    at += self.separation(layer[i - 1], v, options);
                }
                x[v] = at;
            }
            let first = layer.first().map_or(0.0, |&v| x[v]);
            let mid = (first + at) / 2.0;
            layer.iter().for_each(|&v| x[v] -= mid);
        }
        let depth = self.layers.len();
        for _ in 0..PLACE_ROUNDS {
            for l in 1..depth {
                self.relax(l, &[&self.up], &mut x, options);
            }
            for l in (0..depth.saturating_sub(1)).rev() {
                self.relax(l, &[&self.down], &mut x, options);
            }
        }
        for l in 0..depth {
            self.relax(l, &[&self.up, &self.down], &mut x, options);
        }
        x
    }

    /// Moves layer `l` as close as possible (weighted least squares) to the mean x of each
    /// vertex's neighbours in `sides`, keeping the order and the minimum separations.
    fn relax(&self, l: usize, sides: &[&Vec<Vec<usize>>], x: &mut [f64], options: &LayoutOptions) {
        let layer = &self.layers[l];
        let mut targets = Vec::with_capacity(layer.len());
        let mut weights = Vec::with_capacity(layer.len());
        for &v in layer {
            let (sum, count) = sides
                .iter()
                .flat_map(|side| side[v].iter())
                .fold((0.0, 0usize), |(s, c), &u| (s + x[u], c + 1));
            if count == 0 {
                targets.push(x[v]);
                weights.push(FREE_WEIGHT);
            } else {
                targets.push(sum / count as f64);
                weights.push(if v >= self.n { DUMMY_WEIGHT } else { 1.0 });
            }
        }
        let gaps: Vec<f64> = layer
            .windows(2)
            .map(|p| self.separation(p[0], p[1], options))
            .collect();
        for (&v, xv) in layer.iter().zip(separated_fit(&targets, &weights, &gaps)) {
            x[v] = xv;
        }
    }
}

/// Minimises Σ wᵢ(xᵢ − tᵢ)² subject to xᵢ₊₁ − xᵢ ≥ gᵢ: with yᵢ = xᵢ − Σ_{k<i} g_k the constraint is
/// y non-decreasing, solved exactly by pool-adjacent-violators. Weights must be positive.
fn separated_fit(targets: &[f64], weights: &[f64], gaps: &[f64]) -> Vec<f64> {
    let mut offsets = Vec::with_capacity(targets.len());
    let mut acc = 0.0;
    for i in 0..targets.len() {
        if i > 0 {
            acc += gaps[i - 1];
        }
        offsets.push(acc);
    }
    // Blocks of pooled entries: (total weight, weighted sum, count).
    let mut blocks: Vec<(f64, f64, usize)> = Vec::new();
    for i in 0..targets.len() {
        blocks.push((weights[i], weights[i] * (targets[i] - offsets[i]), 1));
        while blocks.len() >= 2 {
            let (w2, s2, c2) = blocks[blocks.len() - 1];
            let (w1, s1, c1) = blocks[blocks.len() - 2];
            if s1 / w1 <= s2 / w2 {
                break;
            }
            blocks.pop();
            *blocks.last_mut().expect("two blocks") = (w1 + w2, s1 + s2, c1 + c2);
        }
    }
    let mut out = Vec::with_capacity(targets.len());
    for (w, s, c) in blocks {
        for _ in 0..c {
            out.push(s / w + offsets[out.len()]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPS: f64 = 1e-9;

    /// A 64-bit linear congruential generator (Knuth's MMIX constants) for seeded test graphs.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: usize) -> usize {
            self.0 = self.0.wrapping_mul(6364136223846793005);
            self.0 = self.0.wrapping_add(1442695040888963407);
            ((self.0 >> 33) % n as u64) as usize
        }
    }

    fn names(n: usize, rng: &mut Lcg) -> Vec<String> {
        (0..n)
            .map(|i| format!("v{i}{}", "x".repeat(rng.below(12))))
            .collect()
    }

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    /// A random DAG on 2–15 nodes: edges i → j for i < j in a random permutation of the nodes.
    fn random_dag(rng: &mut Lcg) -> (Vec<String>, Vec<(usize, usize)>) {
        let n = 2 + rng.below(14);
        let mut perm: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            perm.swap(i, rng.below(i + 1));
        }
        let mut edges = Vec::new();
        for i in 0..n {
            for j in i + 1..n {
                if rng.below(100) < 30 {
                    edges.push((perm[i], perm[j]));
                }
            }
        }
        (names(n, rng), edges)
    }

    fn on_border(p: (f64, f64), b: &NodeBox) -> bool {
        let (top, bottom) = (b.y - b.height / 2.0, b.y + b.height / 2.0);
        let on_side = (p.1 - top).abs() < EPS || (p.1 - bottom).abs() < EPS;
        on_side && (p.0 - b.x).abs() <= b.width / 2.0 + EPS
    }

    /// Checks every layout must pass: boxes inside the canvas and apart, routes from border to
    /// border with one bend per intermediate layer, strictly between the end layers, beside boxes.
    fn check_geometry(layout: &Layout, options: &LayoutOptions) {
        for (i, a) in layout.nodes.iter().enumerate() {
            assert!(a.x - a.width / 2.0 >= -EPS && a.x + a.width / 2.0 <= layout.width + EPS);
            assert!(a.y - a.height / 2.0 >= -EPS && a.y + a.height / 2.0 <= layout.height + EPS);
            for b in layout.nodes[i + 1..].iter().filter(|b| b.layer == a.layer) {
                let need = (a.width + b.width) / 2.0 + options.node_gap;
                assert!((a.x - b.x).abs() >= need - EPS, "overlap: {a:?} {b:?}");
            }
        }
        for r in &layout.edges {
            let (f, t) = (&layout.nodes[r.from], &layout.nodes[r.to]);
            assert!(on_border(r.points[0], f), "{r:?} does not start on {f:?}");
            assert!(
                on_border(r.points[r.points.len() - 1], t),
                "{r:?} does not end on {t:?}"
            );
            assert_eq!(r.points.len(), f.layer.abs_diff(t.layer) + 1);
            let (lo, hi) = (f.y.min(t.y), f.y.max(t.y));
            for &(px, py) in &r.points[1..r.points.len() - 1] {
                assert!(lo < py && py < hi, "bend {py} not strictly in ({lo}, {hi})");
                assert!((0.0..=layout.width).contains(&px));
                for b in layout.nodes.iter().filter(|b| (b.y - py).abs() < EPS) {
                    assert!((px - b.x).abs() > b.width / 2.0, "bend {px} inside {b:?}");
                }
            }
        }
    }

    #[test]
    fn random_dags_layer_downwards_without_overlaps() {
        let options = LayoutOptions::default();
        let mut rng = Lcg(20240611);
        for _ in 0..30 {
            let (labels, edges) = random_dag(&mut rng);
            let layout = layered_layout(&labels, &edges, &options);
            assert_eq!(layout.nodes.len(), labels.len());
            assert_eq!(layout.edges.len(), edges.len());
            for (r, &(a, b)) in layout.edges.iter().zip(&edges) {
                assert_eq!((r.from, r.to, r.reversed), (a, b, false));
                assert!(
                    layout.nodes[a].layer < layout.nodes[b].layer,
                    "{a}→{b} not down"
                );
            }
            check_geometry(&layout, &options);
        }
    }

    #[test]
    fn random_digraphs_reverse_exactly_the_upward_edges() {
        let options = LayoutOptions::default();
        let mut rng = Lcg(7);
        for _ in 0..30 {
            let n = 2 + rng.below(14);
            let edges: Vec<(usize, usize)> = (0..rng.below(3 * n))
                .map(|_| (rng.below(n), rng.below(n)))
                .collect();
            let layout = layered_layout(&names(n, &mut rng), &edges, &options);
            let distinct: HashSet<_> = edges.iter().filter(|(a, b)| a != b).collect();
            assert_eq!(layout.edges.len(), distinct.len());
            for r in &layout.edges {
                let (lf, lt) = (layout.nodes[r.from].layer, layout.nodes[r.to].layer);
                assert!(lf != lt && r.reversed == (lf > lt), "{r:?}");
            }
            check_geometry(&layout, &options);
        }
    }

    #[test]
    fn cycles_are_broken_and_both_routes_of_a_two_cycle_drawn() {
        let options = LayoutOptions::default();
        // 3-cycle 0 → 1 → 2 → 0, 2-cycle 3 ⇄ 4, and a link 2 → 3.
        let edges = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 3), (2, 3)];
        let layout = layered_layout(&strings(&["a", "b", "c", "d", "e"]), &edges, &options);
        assert_eq!(layout.edges.len(), edges.len());
        let reversed: Vec<_> = layout.edges.iter().filter(|r| r.reversed).collect();
        // The DFS from node 0 closes the 3-cycle with 2 → 0 and the 2-cycle with 4 → 3.
        let pairs: Vec<_> = reversed.iter().map(|r| (r.from, r.to)).collect();
        assert_eq!(pairs, vec![(2, 0), (4, 3)]);
        for r in &layout.edges {
            let (lf, lt) = (layout.nodes[r.from].layer, layout.nodes[r.to].layer);
            assert_eq!(r.reversed, lf > lt);
        }
        let mut backward = layout.edges[4].points.clone();
        assert_ne!(layout.edges[3].points, backward);
        backward.reverse();
        assert_ne!(
            layout.edges[3].points, backward,
            "the 2-cycle's routes coincide"
        );
        check_geometry(&layout, &options);
    }

    #[test]
    fn loops_duplicates_and_out_of_range_edges_are_dropped() {
        let edges = [(0, 0), (0, 1), (0, 1), (5, 1), (1, 9)];
        let layout = layered_layout(&strings(&["a", "b"]), &edges, &LayoutOptions::default());
        assert_eq!(layout.edges.len(), 1);
        assert_eq!((layout.edges[0].from, layout.edges[0].to), (0, 1));
    }

    #[test]
    fn layout_is_deterministic() {
        let options = LayoutOptions::default();
        let mut rng = Lcg(99);
        for _ in 0..5 {
            let (labels, mut edges) = random_dag(&mut rng);
            edges.push((edges.first().map_or(1, |e| e.1), 0));
            let first = layered_layout(&labels, &edges, &options);
            assert_eq!(first, layered_layout(&labels, &edges, &options));
        }
    }

    #[test]
    fn barycentre_ordering_removes_bipartite_crossings() {
        let labels: Vec<String> = (0..6).map(|i| format!("n{i}")).collect();
        // In index order every pair of these edges crosses.
        let edges = [(0, 5), (1, 4), (2, 3)];
        let layout = layered_layout(&labels, &edges, &LayoutOptions::default());
        assert!(layout
            .nodes
            .iter()
            .enumerate()
            .all(|(i, b)| b.layer == i / 3));
        let mut crossings = 0;
        for (i, a) in layout.edges.iter().enumerate() {
            for b in &layout.edges[i + 1..] {
                let top = a.points[0].0 - b.points[0].0;
                let bottom = a.points[1].0 - b.points[1].0;
                crossings += usize::from(top * bottom < 0.0);
            }
        }
        assert_eq!(crossings, 0);
    }

    #[test]
    fn chain_is_three_aligned_layers_and_long_edges_bend_around_boxes() {
        let options = LayoutOptions::default();
        let labels = strings(&["a", "a much longer label", "c"]);
        let layout = layered_layout(&labels, &[(0, 1), (1, 2)], &options);
        let layers: Vec<usize> = layout.nodes.iter().map(|b| b.layer).collect();
        assert_eq!(layers, vec![0, 1, 2]);
        assert!((layout.nodes[0].x - layout.nodes[1].x).abs() < 1e-9);
        assert!((layout.nodes[1].x - layout.nodes[2].x).abs() < 1e-9);
        assert!(layout.nodes[0].y < layout.nodes[1].y && layout.nodes[1].y < layout.nodes[2].y);
        // Adding a → c: its bend sits beside b, not through it.
        let layout = layered_layout(&labels, &[(0, 1), (1, 2), (0, 2)], &options);
        assert_eq!(layout.edges[2].points.len(), 3);
        check_geometry(&layout, &options);
    }

    #[test]
    fn empty_and_isolated_graphs() {
        let options = LayoutOptions::default();
        let (m, h, w) = (options.margin, options.node_height, options.min_node_width);
        let empty = layered_layout(&[], &[], &options);
        assert!(empty.nodes.is_empty() && empty.edges.is_empty());
        assert_eq!((empty.width, empty.height), (2.0 * m, 2.0 * m));

        let one = layered_layout(&strings(&["x"]), &[(0, 0)], &options);
        let b = &one.nodes[0];
        assert!(one.edges.is_empty());
        assert_eq!((b.layer, b.width, b.height), (0, w, h));
        assert!((b.x - w / 2.0 - m).abs() < EPS && (b.y - h / 2.0 - m).abs() < EPS);
        assert!((one.width - w - 2.0 * m).abs() < EPS && (one.height - h - 2.0 * m).abs() < EPS);

        let layout = layered_layout(&strings(&["p", "q", "lonely"]), &[(0, 1)], &options);
        assert_eq!(layout.nodes[2].layer, 0);
        check_geometry(&layout, &options);
    }
}
