//! Explanations of the result on screen: what is asked of the worker about an edge, a pair or a
//! variable, and the answer shown.

use crate::engine::RunResult;
use crate::page_model::drawing::edge_weight;
use crate::worker::protocol::{ExplainAbout, ToWorker};

/// The explanation of one edge or variable of the result on screen.
#[derive(Debug, Clone, PartialEq)]
pub enum Explanation {
    None,
    /// Asked of the worker (`subject`: "a → b" or a variable's name); it is refitting.
    Working {
        subject: String,
    },
    Edge(Box<crate::discovery::explain::EdgeEvidence>),
    Curve(Box<crate::discovery::explain::ConditionalCurve>),
    /// An edge and its reversal side by side.
    Directions(Box<crate::discovery::explain::DirectionComparison>),
    Failed {
        subject: String,
        message: String,
    },
}

/// The explanation shown and the id of the latest asked for.
#[derive(Debug, Clone, PartialEq)]
pub struct ExplainModel {
    pub explanation: Explanation,
    /// Id of the latest explanation asked for; answers to older ones are ignored.
    seq: u64,
}

impl ExplainModel {
    pub(super) fn new() -> Self {
        Self {
            explanation: Explanation::None,
            seq: 0,
        }
    }

    /// No explanation is shown (or awaited) any more.
    pub(super) fn clear(&mut self) {
        self.explanation = Explanation::None;
    }

    /// Asks for the evidence of `edge` of `result`, or (`both_directions`) for the edge and its
    /// reversal drawn side by side.
    pub(super) fn about_edge(
        &mut self,
        result: &RunResult,
        edge: (usize, usize),
        both_directions: bool,
    ) -> ToWorker {
        let name = |i: usize| result.names.get(i).cloned().unwrap_or_default();
        let (cause, effect) = (name(edge.0), name(edge.1));
        let subject = if both_directions {
            format!("{cause} → {effect} against {effect} → {cause}")
        } else {
            format!("{cause} → {effect}")
        };
        let about = self.next(subject, result.edges.clone(), result.seed);
        if both_directions {
            ToWorker::CompareDirections { about, edge }
        } else {
            ToWorker::ExplainEdge { about, edge }
        }
    }

    /// Asks about the pair `(cause, effect)` of `result` (see `PageModel::ask_about_pair`).
    pub(super) fn about_pair(
        &mut self,
        result: &RunResult,
        pair: (usize, usize),
    ) -> Option<ToWorker> {
        let r = result;
        let (a, b) = pair;
        let d = r.names.len();
        if a == b || a >= d || b >= d {
            return None;
        }
        if r.edges.contains(&(a, b)) {
            return Some(self.about_edge(r, (a, b), false));
        }
        if r.edges.contains(&(b, a)) {
            return Some(self.about_edge(r, (b, a), false));
        }
        let with = |edge: (usize, usize)| {
            let mut edges = r.edges.clone();
            edges.push(edge);
            crate::graph::Dag::from_edges(d, &edges)
                .ok()
                .map(|_| (edge, edges))
        };
        // One of the two directions keeps the graph acyclic: cycles both ways would need paths
        // b ⇝ a and a ⇝ b in the DAG itself.
        let (edge, edges) = with((a, b)).or_else(|| with((b, a)))?;
        let subject = format!(
            "{} → {}, which the graph leaves out (scored as if added)",
            r.names[edge.0], r.names[edge.1]
        );
        let about = self.next(subject, edges, r.seed);
        Some(ToWorker::ExplainEdge { about, edge })
    }

    /// Asks for variable `child`'s fitted conditional along its strongest parent in `result`.
    /// `None` without a parent.
    pub(super) fn about_variable(&mut self, result: &RunResult, child: usize) -> Option<ToWorker> {
        let r = result;
        let strongest = r
            .edges
            .iter()
            .filter(|&&(_, j)| j == child)
            .map(|&(i, _)| i)
            .max_by(|&a, &b| {
                edge_weight(&r.adjacency, a, child).total_cmp(&edge_weight(&r.adjacency, b, child))
            })?;
        let name = r.names.get(child)?.clone();
        Some(ToWorker::FitConditional {
            about: self.next(name, r.edges.clone(), r.seed),
            child,
            shown_parent: strongest,
        })
    }

    /// Marks a new explanation of `subject` as asked for; returns what its request carries
    /// (its id, and the graph `edges` and `seed` it asks about).
    fn next(&mut self, subject: String, edges: Vec<(usize, usize)>, seed: u64) -> ExplainAbout {
        self.seq += 1;
        self.explanation = Explanation::Working { subject };
        ExplainAbout {
            request_id: self.seq,
            edges,
            seed,
        }
    }

    /// Shows the answer to explanation request `request_id` if it is the latest asked for.
    pub(super) fn answered(&mut self, request_id: u64, explanation: Explanation) {
        if request_id == self.seq {
            self.explanation = explanation;
        }
    }

    /// The worker could not answer request `request_id`, and why.
    pub(super) fn failed(&mut self, request_id: u64, message: String) {
        let subject = match &self.explanation {
            Explanation::Working { subject } => subject.clone(),
            _ => String::new(),
        };
        self.answered(request_id, Explanation::Failed { subject, message });
    }

    /// The worker died: an explanation it was working on will not come.
    pub(super) fn worker_died(&mut self) {
        if let Explanation::Working { subject } = &self.explanation {
            self.explanation = Explanation::Failed {
                subject: subject.clone(),
                message: "the worker stopped before it was done: restart it and ask again".into(),
            };
        }
    }
}
