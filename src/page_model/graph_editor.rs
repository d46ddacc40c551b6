//! The graph a user draws in the page's editor ([`DrawnGraph`]): variables with names and
//! positions, edges that always form a DAG (an edge that would close a cycle is refused with the
//! cycle named), hidden variables, and what it becomes — a [`SimulationSpec`] to generate data
//! from, and the ground truth among the observed variables. Plain Rust, tested natively; the
//! editor component only binds pointer events to these operations.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::generate::{Mechanism, SimulationSpec};
use crate::graph::Digraph;

/// The drawing area, in SVG user units (the editor scales it to its width).
pub const CANVAS_WIDTH: f64 = 600.0;
pub const CANVAS_HEIGHT: f64 = 340.0;
/// Half a variable's height, in the same units (a variable is drawn as a pill around its name).
pub const NODE_HALF_HEIGHT: f64 = 20.0;
/// Font size of the names, in the same units.
pub const NODE_FONT_SIZE: f64 = 15.0;

/// Half the width of the pill drawn around `name`: room for the name at [`NODE_FONT_SIZE`] (an
/// average glyph is about 0.6 em wide), and never narrower than a circle.
pub fn node_half_width(name: &str) -> f64 {
    (0.3 * NODE_FONT_SIZE * name.chars().count() as f64 + 12.0).max(NODE_HALF_HEIGHT)
}

/// Where the ray from a variable's centre towards (dx, dy) leaves its pill (approximated by its
/// bounding rectangle): the offset from the centre.
pub fn pill_exit(name: &str, dx: f64, dy: f64) -> (f64, f64) {
    let length = dx.hypot(dy);
    if length == 0.0 {
        return (0.0, 0.0);
    }
    let (ux, uy) = (dx / length, dy / length);
    let t =
        (node_half_width(name) / ux.abs().max(1e-12)).min(NODE_HALF_HEIGHT / uy.abs().max(1e-12));
    (ux * t, uy * t)
}
/// Most variables a drawing may have: more would not fit the canvas readably.
pub const MAX_DRAWN_VARIABLES: usize = 20;

/// One drawn variable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrawnNode {
    pub name: String,
    pub x: f64,
    pub y: f64,
    /// Generated but left out of the simulated data (a hidden confounder).
    #[serde(default)]
    pub hidden: bool,
}

/// Why an edit was refused, in words for the page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("an edge needs two different variables")]
    SelfLoop,
    #[error("{from} → {to} is already drawn")]
    Duplicate { from: String, to: String },
    #[error("{from} → {to} would close the cycle {}: a causal graph here must be acyclic", .cycle.join(" → "))]
    Cycle {
        from: String,
        to: String,
        /// The cycle the edge would close, first variable repeated at the end.
        cycle: Vec<String>,
    },
    #[error("a variable needs a name")]
    EmptyName,
    #[error("a name may have at most 40 characters")]
    LongName,
    #[error("another variable is already called {0}")]
    NameTaken(String),
    #[error("a drawing may have at most {MAX_DRAWN_VARIABLES} variables")]
    TooMany,
    #[error("there is no such variable or edge (it was deleted)")]
    Missing,
}

/// A drawn causal graph: variables and acyclic edges between them.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct DrawnGraph {
    nodes: Vec<DrawnNode>,
    /// (cause, effect) indices into `nodes`.
    edges: Vec<(usize, usize)>,
}

impl DrawnGraph {
    /// An empty drawing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A drawing of `names` laid out on a circle with `edges` (refused like any edit when they
    /// are not a DAG or the names clash).
    pub fn from_parts(names: &[&str], edges: &[(usize, usize)]) -> Result<Self, EditError> {
        let mut graph = Self::new();
        let count = names.len().max(1) as f64;
        for (k, name) in names.iter().enumerate() {
            // Start at the top and go clockwise, so three variables make a triangle with a flat base.
            let angle = std::f64::consts::TAU * k as f64 / count - std::f64::consts::FRAC_PI_2;
            let i = graph.add_node(
                CANVAS_WIDTH / 2.0 + 0.32 * CANVAS_WIDTH * angle.cos(),
                CANVAS_HEIGHT / 2.0 + 0.34 * CANVAS_HEIGHT * angle.sin(),
            )?;
            graph.rename(i, name)?;
        }
        for &(a, b) in edges {
            graph.add_edge(a, b)?;
        }
        Ok(graph)
    }

    pub fn nodes(&self) -> &[DrawnNode] {
        &self.nodes
    }

    /// The edges, (cause, effect).
    pub fn edges(&self) -> &[(usize, usize)] {
        &self.edges
    }

    /// The index of the variable called `name`.
    pub fn find(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Adds a variable at (x, y) (kept inside the canvas) named X1, X2, … (the first name free);
    /// returns its index.
    pub fn add_node(&mut self, x: f64, y: f64) -> Result<usize, EditError> {
        if self.nodes.len() >= MAX_DRAWN_VARIABLES {
            return Err(EditError::TooMany);
        }
        let name = (1..)
            .map(|k| format!("X{k}"))
            .find(|name| self.find(name).is_none())
            .expect("some name is free");
        let (x, y) = inside_canvas(&name, x, y);
        self.nodes.push(DrawnNode {
            name,
            x,
            y,
            hidden: false,
        });
        Ok(self.nodes.len() - 1)
    }

    /// Renames variable `i` to `name` (trimmed): non-empty, at most 40 characters, unique.
    pub fn rename(&mut self, i: usize, name: &str) -> Result<(), EditError> {
        let name = name.trim();
        if i >= self.nodes.len() {
            return Err(EditError::Missing);
        }
        if name.is_empty() {
            return Err(EditError::EmptyName);
        }
        if name.chars().count() > 40 {
            return Err(EditError::LongName);
        }
        if self.find(name).is_some_and(|j| j != i) {
            return Err(EditError::NameTaken(name.to_string()));
        }
        let node = &mut self.nodes[i];
        node.name = name.to_string();
        // A longer name makes a wider pill: keep it inside.
        (node.x, node.y) = inside_canvas(&node.name, node.x, node.y);
        Ok(())
    }

    /// Moves variable `i` to (x, y), kept inside the canvas.
    pub fn move_node(&mut self, i: usize, x: f64, y: f64) {
        if let Some(node) = self.nodes.get_mut(i) {
            (node.x, node.y) = inside_canvas(&node.name, x, y);
        }
    }

    /// Marks variable `i` hidden (generated, left out of the data) or observed.
    pub fn set_hidden(&mut self, i: usize, hidden: bool) {
        if let Some(node) = self.nodes.get_mut(i) {
            node.hidden = hidden;
        }
    }

    /// Deletes variable `i` and its edges; later variables move down one index.
    pub fn delete_node(&mut self, i: usize) {
        if i >= self.nodes.len() {
            return;
        }
        self.nodes.remove(i);
        let shift = |k: usize| if k > i { k - 1 } else { k };
        self.edges = self
            .edges
            .iter()
            .filter(|&&(a, b)| a != i && b != i)
            .map(|&(a, b)| (shift(a), shift(b)))
            .collect();
    }

    /// Draws `from → to`, refused when it is a self-loop, already drawn, or would close a cycle
    /// (named in the error).
    pub fn add_edge(&mut self, from: usize, to: usize) -> Result<(), EditError> {
        let n = self.nodes.len();
        if from >= n || to >= n {
            return Err(EditError::Missing);
        }
        if from == to {
            return Err(EditError::SelfLoop);
        }
        if self.edges.contains(&(from, to)) {
            return Err(EditError::Duplicate {
                from: self.nodes[from].name.clone(),
                to: self.nodes[to].name.clone(),
            });
        }
        if let Some(path) = self.path(to, from) {
            let mut cycle: Vec<String> = vec![self.nodes[from].name.clone()];
            cycle.extend(path.iter().map(|&k| self.nodes[k].name.clone()));
            return Err(EditError::Cycle {
                from: self.nodes[from].name.clone(),
                to: self.nodes[to].name.clone(),
                cycle,
            });
        }
        self.edges.push((from, to));
        Ok(())
    }

    /// Deletes the edge `from → to` (nothing if it is not drawn).
    pub fn delete_edge(&mut self, from: usize, to: usize) {
        self.edges.retain(|&e| e != (from, to));
    }

    /// Turns `from → to` into `to → from`, refused (and left as it was) when that closes a cycle.
    pub fn reverse_edge(&mut self, from: usize, to: usize) -> Result<(), EditError> {
        let Some(k) = self.edges.iter().position(|&e| e == (from, to)) else {
            return Err(EditError::Missing);
        };
        self.edges.remove(k);
        match self.add_edge(to, from) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.edges.insert(k, (from, to));
                Err(e)
            }
        }
    }

    /// A directed path start ⇝ end (both included) along the drawn edges, shortest first.
    fn path(&self, start: usize, end: usize) -> Option<Vec<usize>> {
        let mut came_from = vec![None; self.nodes.len()];
        let mut queue = VecDeque::from([start]);
        let mut seen = vec![false; self.nodes.len()];
        seen[start] = true;
        while let Some(k) = queue.pop_front() {
            if k == end {
                let mut path = vec![end];
                let mut at = end;
                while let Some(prev) = came_from[at] {
                    path.push(prev);
                    at = prev;
                }
                path.reverse();
                return Some(path);
            }
            for &(a, b) in &self.edges {
                if a == k && !seen[b] {
                    seen[b] = true;
                    came_from[b] = Some(k);
                    queue.push_back(b);
                }
            }
        }
        None
    }

    /// The drawing as a [`SimulationSpec`] with `mechanism`, `samples` rows and `seed`.
    pub fn spec(&self, mechanism: Mechanism, samples: usize, seed: u64) -> SimulationSpec {
        SimulationSpec {
            names: self.nodes.iter().map(|n| n.name.clone()).collect(),
            edges: self.edges.clone(),
            hidden: (0..self.nodes.len())
                .filter(|&i| self.nodes[i].hidden)
                .collect(),
            mechanism,
            samples,
            seed,
        }
    }

    /// The whole drawing (hidden variables included) as a graph over every variable's name.
    pub fn digraph(&self) -> (Digraph, Vec<String>) {
        let names = self.nodes.iter().map(|n| n.name.clone()).collect();
        let graph = Digraph::from_edges(self.nodes.len(), &self.edges)
            .expect("edges are checked when drawn");
        (graph, names)
    }
}

/// (x, y) moved inside the canvas so the whole pill around `name` fits.
fn inside_canvas(name: &str, x: f64, y: f64) -> (f64, f64) {
    let clamp = |v: f64, half: f64, max: f64| {
        if v.is_finite() {
            v.clamp(half, (max - half).max(half))
        } else {
            max / 2.0
        }
    };
    (
        clamp(x, node_half_width(name), CANVAS_WIDTH),
        clamp(y, NODE_HALF_HEIGHT, CANVAS_HEIGHT),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::simulate;

    fn collider() -> DrawnGraph {
        DrawnGraph::from_parts(&["A", "B", "C"], &[(0, 2), (1, 2)]).unwrap()
    }

    #[test]
    fn variables_get_free_names_stay_inside_and_rename_uniquely() {
        let mut g = DrawnGraph::new();
        let a = g.add_node(-50.0, 1e9).unwrap();
        let b = g.add_node(f64::NAN, 10.0).unwrap();
        assert_eq!(g.nodes()[a].name, "X1");
        assert_eq!(g.nodes()[b].name, "X2");
        let half = node_half_width("X1");
        assert_eq!(
            (g.nodes()[a].x, g.nodes()[a].y),
            (half, CANVAS_HEIGHT - NODE_HALF_HEIGHT)
        );
        assert_eq!(g.nodes()[b].x, CANVAS_WIDTH / 2.0);
        assert_eq!(g.rename(b, "X1"), Err(EditError::NameTaken("X1".into())));
        assert_eq!(g.rename(b, "  "), Err(EditError::EmptyName));
        assert_eq!(g.rename(b, &"y".repeat(41)), Err(EditError::LongName));
        g.rename(a, " rain ").unwrap();
        assert_eq!(g.nodes()[a].name, "rain");
        // A longer name widens the pill, which is kept inside the canvas.
        g.rename(a, "precipitation (mm)").unwrap();
        assert_eq!(g.nodes()[a].x, node_half_width("precipitation (mm)"));
        g.rename(a, "rain").unwrap();
        // The first free name is reused.
        let c = g.add_node(0.0, 0.0).unwrap();
        assert_eq!(g.nodes()[c].name, "X1");
        while g.nodes().len() < MAX_DRAWN_VARIABLES {
            g.add_node(0.0, 0.0).unwrap();
        }
        assert_eq!(g.add_node(0.0, 0.0), Err(EditError::TooMany));
    }

    #[test]
    fn edges_that_would_close_a_cycle_are_refused_with_the_cycle() {
        let mut g = DrawnGraph::from_parts(&["A", "B", "C"], &[(0, 1), (1, 2)]).unwrap();
        let err = g.add_edge(2, 0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "C → A would close the cycle C → A → B → C: a causal graph here must be acyclic"
        );
        assert_eq!(g.add_edge(1, 1), Err(EditError::SelfLoop));
        assert!(matches!(g.add_edge(0, 1), Err(EditError::Duplicate { .. })));
        // Reversing B → C gives C → B, which closes nothing.
        g.reverse_edge(1, 2).unwrap();
        assert_eq!(g.edges(), &[(0, 1), (2, 1)]);
        // A refused reversal keeps the edge where it was.
        let mut chain =
            DrawnGraph::from_parts(&["A", "B", "C"], &[(0, 1), (1, 2), (0, 2)]).unwrap();
        assert!(matches!(
            chain.reverse_edge(0, 2),
            Err(EditError::Cycle { .. })
        ));
        assert_eq!(chain.edges(), &[(0, 1), (1, 2), (0, 2)]);
        assert_eq!(chain.reverse_edge(2, 0), Err(EditError::Missing));
    }

    #[test]
    fn edges_leave_a_pill_at_its_border() {
        let half = node_half_width("sprinkler");
        assert!(half > NODE_HALF_HEIGHT);
        assert_eq!(pill_exit("sprinkler", 10.0, 0.0), (half, 0.0));
        assert_eq!(pill_exit("sprinkler", 0.0, -3.0), (0.0, -NODE_HALF_HEIGHT));
        let (x, y) = pill_exit("sprinkler", 1.0, 1.0);
        assert!((x - NODE_HALF_HEIGHT).abs() < 1e-9 && (y - NODE_HALF_HEIGHT).abs() < 1e-9);
        assert_eq!(pill_exit("a", 0.0, 0.0), (0.0, 0.0));
    }

    #[test]
    fn deleting_a_variable_removes_its_edges_and_renumbers() {
        let mut g =
            DrawnGraph::from_parts(&["A", "B", "C", "D"], &[(0, 1), (1, 2), (2, 3), (0, 3)])
                .unwrap();
        g.delete_node(1);
        assert_eq!(
            g.nodes()
                .iter()
                .map(|n| n.name.as_str())
                .collect::<Vec<_>>(),
            ["A", "C", "D"]
        );
        assert_eq!(g.edges(), &[(1, 2), (0, 2)]);
        g.delete_edge(0, 2);
        assert_eq!(g.edges(), &[(1, 2)]);
        g.delete_node(7);
        assert_eq!(g.nodes().len(), 3);
    }

    #[test]
    fn a_drawing_simulates_with_its_truth_over_the_observed_variables() {
        let mut g = collider();
        let spec = g.spec(Mechanism::Gp, 100, 4);
        assert_eq!(spec.names, ["A", "B", "C"]);
        assert_eq!(spec.edges, vec![(0, 2), (1, 2)]);
        let simulated = simulate(&spec).unwrap();
        assert_eq!(simulated.truth.edges(), vec![(0, 2), (1, 2)]);
        // A hidden common cause: the spec names it hidden, and its edges leave the truth.
        let mut confounded = DrawnGraph::from_parts(&["Z", "X", "Y"], &[(0, 1), (0, 2)]).unwrap();
        confounded.set_hidden(0, true);
        let spec = confounded.spec(Mechanism::Linear, 50, 0);
        assert_eq!(spec.hidden, vec![0]);
        let truth = simulate(&spec).unwrap().truth;
        assert_eq!(truth.n(), 2);
        assert_eq!(truth.edge_count(), 0, "no edge between X and Y");
        g.set_hidden(2, true);
        assert_eq!(g.spec(Mechanism::Linear, 50, 0).hidden, vec![2]);
    }
}
