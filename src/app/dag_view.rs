//! The graph as SVG: a layered layout (causes above effects), edge width by weight, and, when a
//! ground truth is known, edges coloured as correct, reversed, missing (dashed) or extra.
//!
//! Styling is written as SVG presentation attributes, not CSS classes, so the SVG and PNG exports
//! (serialised from this element) look the same outside the page. Names are text nodes, never
//! markup.

use super::svg::{node_box, route_path};
use super::AppState;
use crate::graph::EdgeKind;
use crate::page_model::drawing::{
    drawing as page_drawing, truth_report as page_truth_report, Drawing,
};
use crate::page_model::graph_layout::{layered_layout, LayoutOptions};
use crate::page_model::TruthReport;

/// The comparison of the result on screen with the truth, when both exist. Tracked.
pub fn truth_report(state: AppState) -> Option<Result<TruthReport, String>> {
    let truth = state.page.truth.get()?;
    state.page.result.with(|r| {
        r.as_ref()
            .and_then(|result| page_truth_report(&truth, result))
    })
}
use leptos::prelude::*;

/// Colour and dash pattern of each edge kind (none = no truth known).
fn edge_style(kind: Option<EdgeKind>) -> (&'static str, &'static str, &'static str) {
    // (stroke colour, dash array, marker id)
    match kind {
        None => ("#2f5d9a", "", "arrow-plain"),
        Some(EdgeKind::Correct) => ("#2e7d32", "", "arrow-correct"),
        Some(EdgeKind::Reversed) => ("#c77700", "", "arrow-reversed"),
        Some(EdgeKind::Missing) => ("#8a94a3", "6 4", "arrow-missing"),
        Some(EdgeKind::Extra) => ("#a4262c", "", "arrow-extra"),
    }
}

fn kind_code(kind: Option<EdgeKind>) -> &'static str {
    match kind {
        None => "edge",
        Some(EdgeKind::Correct) => "correct",
        Some(EdgeKind::Reversed) => "reversed",
        Some(EdgeKind::Missing) => "missing",
        Some(EdgeKind::Extra) => "extra",
    }
}

/// Stroke width for an edge weight: 1.2 px for the weakest to 5 px for the strongest, on the
/// scale w / (w + s) with s the median weight of the edges drawn.
fn stroke_width(w: f64, scale: f64) -> f64 {
    let t = if w.is_finite() && w > 0.0 && scale > 0.0 {
        w / (w + scale)
    } else {
        0.0
    };
    1.2 + 3.8 * t
}

/// The graph on screen: the result's (edges classed against the truth when one is known), else
/// the running restart's, over the variables shown. Tracked.
pub fn drawing(state: AppState) -> Option<Drawing> {
    let names = state.names()?;
    let report = truth_report(state).and_then(Result::ok);
    let snapshot = state.page.snapshot.get();
    Some(
        state.page.result.with(|result| {
            page_drawing(names, result.as_ref(), report.as_ref(), snapshot.as_ref())
        }),
    )
}

/// The graph `drawing` as SVG (a note in its place while there is none).
#[component]
pub fn DagView(
    #[prop(into)] drawing: Signal<Option<Drawing>>,
    /// Called with (cause, effect) when an edge is clicked: every edge drawn is clickable then,
    /// through a wide transparent stroke laid over it.
    #[prop(optional)]
    on_edge: Option<Callback<(usize, usize)>>,
) -> impl IntoView {
    move || {
        let Some(Drawing {
            names,
            edges,
            of_result,
        }) = drawing.get()
        else {
            return view! {
                <svg data-testid="dag-svg" xmlns="http://www.w3.org/2000/svg" width="320" height="60" viewBox="0 0 320 60" role="img" aria-label="No graph yet">
                    <text x="12" y="34" font-family="sans-serif" font-size="13" fill="#5b6676">"The graph appears here once data are loaded."</text>
                </svg>
            }
            .into_any();
        };
        let pairs: Vec<(usize, usize)> = edges.iter().map(|&(i, j, _, _)| (i, j)).collect();
        let layout = layered_layout(&names, &pairs, &LayoutOptions::default());
        let mut weights: Vec<f64> = edges
            .iter()
            .map(|e| e.2)
            .filter(|w| w.is_finite() && *w > 0.0)
            .collect();
        weights.sort_by(f64::total_cmp);
        let scale = weights.get(weights.len() / 2).copied().unwrap_or(1.0);
        let (w, h) = (layout.width.max(120.0), layout.height.max(60.0));
        let markers = [
            None,
            Some(EdgeKind::Correct),
            Some(EdgeKind::Reversed),
            Some(EdgeKind::Missing),
            Some(EdgeKind::Extra),
        ]
        .into_iter()
        .map(|kind| {
            let (colour, _, id) = edge_style(kind);
            view! {
                <marker id=id viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7"
                    markerUnits="userSpaceOnUse" orient="auto-start-reverse">
                    <path d="M 0 0 L 10 5 L 0 10 z" fill=colour />
                </marker>
            }
        })
        .collect_view();
        let edge_views = layout
            .edges
            .iter()
            .map(|route| {
                let (_, _, weight, kind) = edges
                    .iter()
                    .copied()
                    .find(|&(i, j, _, _)| i == route.from && j == route.to)
                    .unwrap_or((route.from, route.to, 0.0, None));
                let (colour, dash, marker) = edge_style(kind);
                let d = route_path(&route.points);
                let width = if kind == Some(EdgeKind::Missing) {
                    1.5
                } else {
                    stroke_width(weight, scale)
                };
                let label = format!(
                    "{} → {} ({}, weight {:.3})",
                    names[route.from],
                    names[route.to],
                    kind_code(kind),
                    weight
                );
                let pair = (route.from, route.to);
                // A thin line is hard to hit: a wide transparent stroke over it takes the clicks.
                let hit = on_edge.filter(|_| of_result).map(|callback| {
                    view! {
                        <path d=d.clone() fill="none" stroke="transparent" stroke-width="14"
                            pointer-events="stroke" class="edge-hit" data-edge-hit=format!("{}->{}", pair.0, pair.1)
                            on:click=move |_| callback.run(pair)>
                            <title>{format!("{label}: click to see why")}</title>
                        </path>
                    }
                });
                view! {
                    <path d=d fill="none" stroke=colour stroke-width=format!("{width:.2}")
                        stroke-dasharray=(!dash.is_empty()).then_some(dash)
                        marker-end=format!("url(#{marker})")
                        data-edge=format!("{}->{}", route.from, route.to) data-kind=kind_code(kind)>
                        <title>{label.clone()}</title>
                    </path>
                    {hit}
                }
            })
            .collect_view();
        let node_views = layout
            .nodes
            .iter()
            .zip(&names)
            .map(|(node, name)| {
                view! { <g class="node" data-node=name.clone()>{node_box(node, name)}</g> }
            })
            .collect_view();
        view! {
            <svg data-testid="dag-svg" xmlns="http://www.w3.org/2000/svg" width=format!("{w:.0}") height=format!("{h:.0}")
                viewBox=format!("0 0 {w:.1} {h:.1}") role="img" aria-label="The causal graph">
                <defs>{markers}</defs>
                <rect x="0" y="0" width=format!("{w:.1}") height=format!("{h:.1}") fill="#ffffff" />
                <g class="edges">{edge_views}</g>
                <g class="nodes">{node_views}</g>
            </svg>
        }
        .into_any()
    }
}
