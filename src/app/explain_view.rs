//! Why the result has each edge, and what independence alone could say about it:
//! - [`EdgeExplanation`] (`data-testid="edge-explanation"`): the evidence of the edge the user
//!   asked about (the change in the graph's score when it is removed and when it is reversed, the
//!   families concerned refitted in the worker), in nats and as a Bayes factor in words;
//! - [`EquivalenceClass`] (`data-testid="cpdag-toggle"`, `"cpdag-view"`): the result's Markov
//!   equivalence class (CPDAG) drawn beside it, with the edges that conditional independence
//!   alone could not orient drawn undirected and listed.

use super::charts::draw_conditional;
use super::dag_view::{node_box, route_path};
use super::{result_graph, AppState, Explanation};
use crate::discovery::explain::{ConditionalCurve, EdgeEvidence, Reversal};
use crate::graph::{cpdag, layered_layout, Dag, LayoutOptions};
use crate::ui::format_number;
use leptos::prelude::*;

/// The explanation of one edge, or what is happening to it.
#[component]
pub fn EdgeExplanation() -> impl IntoView {
    let state = expect_context::<AppState>();
    move || {
        let names = state.result.with(|r| r.as_ref().map(|r| r.names.clone()))?;
        let body = match state.explanation.get() {
            Explanation::None => return None,
            Explanation::Working { subject } => view! {
                <p data-state="working">
                    "Refitting what " {subject} " concerns (a few seconds)…"
                </p>
            }
            .into_any(),
            Explanation::Failed { subject, message } => view! {
                <p data-state="failed" class="error-text">
                    {subject} " could not be explained: " {message}
                </p>
            }
            .into_any(),
            Explanation::Edge(evidence) => evidence_view(&evidence, &names).into_any(),
            Explanation::Curve(curve) => curve_view(*curve, &names).into_any(),
        };
        Some(view! {
            <div class="edge-explanation" data-testid="edge-explanation">
                <h3>"Why?"</h3>
                {body}
            </div>
        })
    }
}

/// A variable's fitted conditional drawn along its strongest parent, with the data.
fn curve_view(curve: ConditionalCurve, names: &[String]) -> impl IntoView {
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
    let (child, parent) = (name(curve.child), name(curve.shown_parent));
    let held: Vec<String> = curve
        .held_at
        .iter()
        // A standardised column's mean is 0 up to rounding: say 0, not -1.8e-17.
        .map(|&(p, v)| {
            format!(
                "{} at {}",
                name(p),
                format_number(if v.abs() < 1e-9 { 0.0 } else { v })
            )
        })
        .collect();
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    let drawn = RwSignal::new(None::<String>);
    let (x_name, y_name) = (parent.clone(), child.clone());
    let to_draw = curve.clone();
    Effect::new(move |_| {
        if let Some(canvas) = canvas.get() {
            if let Err(e) = draw_conditional(&canvas, &to_draw, &x_name, &y_name) {
                drawn.set(Some(e));
            }
        }
    });
    view! {
        <p data-state="ready" data-variable=child.clone() data-parent=parent.clone()>
            "The fitted conditional of " <strong>{child.clone()}</strong> " given its parents, along "
            <strong>{parent.clone()}</strong>
            {(!held.is_empty()).then(|| format!(" (the other parents held at their means: {})", held.join(", ")))}
            ": the line is E[" {child.clone()} " | " {parent.clone()} "], the band holds "
            {format!("{:.0} %", 100.0 * (curve.upper_quantile - curve.lower_quantile))}
            " of the predictive (the latent input w integrated out, so the spread need not be Gaussian). Family score: "
            {format_number(curve.score.value)} " nats."
        </p>
        <canvas class="conditional" data-testid="conditional-curve" node_ref=canvas
            width="560" height="300" aria-label=format!("{child} against {parent}: data and fitted conditional")></canvas>
        {move || drawn.get().map(|e| view! { <p class="error-text">{e}</p> })}
    }
}

fn evidence_view(evidence: &EdgeEvidence, names: &[String]) -> impl IntoView {
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
    let (from, to) = (name(evidence.from), name(evidence.to));
    let reversal = match &evidence.reversed {
        Reversal::Scored {
            delta,
            parent_family,
            parent_family_reversed,
        } => format!(
            "Reversing it ({to} → {from}) changes the score by {} nats ({}'s family: {} → {} nats; {to}'s: {} → {} nats). {}.",
            signed(*delta),
            from,
            format_number(*parent_family),
            format_number(*parent_family_reversed),
            format_number(evidence.child_family),
            format_number(evidence.child_family_without),
            capitalised(&evidence.reversal_words(names)),
        ),
        Reversal::CreatesCycle { .. } => format!("{}.", capitalised(&evidence.reversal_words(names))),
    };
    view! {
        <p data-state="ready" data-edge=format!("{}->{}", evidence.from, evidence.to)
            data-removed=format!("{:.3}", evidence.removed)
            data-reversed=evidence.reversed_delta().map(|d| format!("{d:.3}")).unwrap_or_default()>
            "Removing " <strong>{from.clone()} " → " {to.clone()}</strong> " changes the graph's score by "
            <strong data-testid="removal-nats">{signed(evidence.removed)} " nats"</strong>
            " (" {to.clone()} "'s family: " {format_number(evidence.child_family)} " → "
            {format_number(evidence.child_family_without)} " nats). "
            {capitalised(&evidence.removal_words(names))} "."
        </p>
        <p data-testid="reversal-words">{reversal}</p>
        <p class="hint">
            "The scores are bounds on each variable's log evidence given its parents (a GP-CDE fitted per family, as the exact search fits them), on at most 500 rows. A difference of Δ nats is a Bayes factor of e^Δ."
        </p>
    }
}

/// `value` with its sign, to 4 significant figures.
fn signed(value: f64) -> String {
    if value > 0.0 {
        format!("+{}", format_number(value))
    } else {
        format_number(value)
    }
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The result's equivalence class beside it, on demand.
#[component]
pub fn EquivalenceClass() -> impl IntoView {
    let state = expect_context::<AppState>();
    let shown = RwSignal::new(false);
    let view_class = move || {
        if !shown.get() {
            return None;
        }
        let (names, graph) = state.result.with(|r| {
            let r = r.as_ref()?;
            Some((r.names.clone(), result_graph(r)?))
        })?;
        let dag = Dag::try_from(graph).ok()?;
        let class = cpdag(&dag);
        let directed = class.directed_edges();
        let undirected = class.undirected_edges();
        let mut all = directed.clone();
        all.extend(undirected.iter().copied());
        let layout = layered_layout(&names, &all, &LayoutOptions::default());
        let (w, h) = (layout.width.max(120.0), layout.height.max(60.0));
        let edges = layout
            .edges
            .iter()
            .map(|route| {
                let oriented = directed.contains(&(route.from, route.to));
                let d = route_path(&route.points);
                let label = if oriented {
                    format!(
                        "{} → {}: oriented by independence (a v-structure or Meek's rules)",
                        names[route.from], names[route.to]
                    )
                } else {
                    format!(
                        "{} — {}: independence alone cannot orient it",
                        names[route.from], names[route.to]
                    )
                };
                view! {
                    <path d=d fill="none" stroke=if oriented { "#1d2430" } else { "#c2410c" }
                        stroke-width="2" stroke-dasharray=(!oriented).then_some("6 4")
                        marker-end=oriented.then_some("url(#cpdag-arrow)")
                        data-oriented=if oriented { "yes" } else { "no" }>
                        <title>{label}</title>
                    </path>
                }
            })
            .collect_view();
        let nodes = layout
            .nodes
            .iter()
            .zip(&names)
            .map(|(node, name)| {
                view! { <g>{node_box(node, name)}</g> }
            })
            .collect_view();
        let pair = |&(a, b): &(usize, usize)| format!("{} — {}", names[a], names[b]);
        let summary = if undirected.is_empty() {
            "Every edge of this graph is oriented by conditional independence alone (v-structures and Meek's rules): any method that only tests independence could find these directions too.".to_string()
        } else {
            format!(
                "Independence alone could not orient {} of the {} edges ({}): every DAG in this class fits the same independences. Occam chose their directions by the evidence of the fitted models.",
                undirected.len(),
                all.len(),
                undirected.iter().map(pair).collect::<Vec<_>>().join(", ")
            )
        };
        Some(view! {
            <div class="cpdag" data-testid="cpdag-view" data-undirected=undirected.len().to_string()>
                <svg xmlns="http://www.w3.org/2000/svg" width=format!("{w:.0}") height=format!("{h:.0}")
                    viewBox=format!("0 0 {w:.1} {h:.1}") role="img" aria-label="The result's Markov equivalence class">
                    <defs>
                        <marker id="cpdag-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7"
                            markerUnits="userSpaceOnUse" orient="auto-start-reverse">
                            <path d="M 0 0 L 10 5 L 0 10 z" fill="#1d2430" />
                        </marker>
                    </defs>
                    {edges}
                    {nodes}
                </svg>
                <p data-testid="cpdag-summary">{summary}</p>
                <p class="hint">"Solid arrows: oriented by independence. Dashed orange lines: not orientable by independence."</p>
            </div>
        })
    };
    view! {
        <label class="cpdag-toggle">
            <input type="checkbox" data-testid="cpdag-toggle" prop:checked=move || shown.get()
                on:change=move |ev| shown.set(event_target_checked(&ev)) />
            " Show the Markov equivalence class (CPDAG): what independence tests alone could tell"
        </label>
        {view_class}
    }
}
