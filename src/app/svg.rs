//! SVG pieces the graph views share: an edge route as a path, a variable's box and name.

use crate::page_model::graph_layout::NodeBox;
use leptos::prelude::*;

/// An edge route's points as an SVG path (`M x y L x y …`).
pub fn route_path(points: &[(f64, f64)]) -> String {
    points
        .iter()
        .enumerate()
        .map(|(k, (x, y))| format!("{} {x:.1} {y:.1}", if k == 0 { "M" } else { "L" }))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A laid-out variable: its box and its name (the caller wraps it in its own group).
pub fn node_box(node: &NodeBox, name: &str) -> impl IntoView {
    view! {
        <rect x=format!("{:.1}", node.x - node.width / 2.0) y=format!("{:.1}", node.y - node.height / 2.0)
            width=format!("{:.1}", node.width) height=format!("{:.1}", node.height)
            rx="6" fill="#ffffff" stroke="#1d2430" stroke-width="1.2" />
        <text x=format!("{:.1}", node.x) y=format!("{:.1}", node.y + 4.5) text-anchor="middle"
            font-family="sans-serif" font-size="13" fill="#1d2430">{name.to_string()}</text>
    }
}
