//! Why the result has each edge, and what independence alone could say about it:
//! - [`EdgeExplanation`] (`data-testid="edge-explanation"`): the evidence of the edge the user
//!   asked about (the change in the graph's score when it is removed and when it is reversed, the
//!   families concerned refitted in the worker), in nats and as a Bayes factor in words;
//! - [`EquivalenceClass`] (`data-testid="cpdag-toggle"`, `"cpdag-view"`): the result's Markov
//!   equivalence class (CPDAG) drawn beside it, with the edges that conditional independence
//!   alone could not orient drawn undirected and listed.

use super::charts::draw_conditional;
use super::svg::{node_box, route_path};
use super::{result_graph, AppState, Explanation};
use crate::discovery::explain::{ConditionalCurve, DirectionComparison, EdgeEvidence, Reversal};
use crate::engine::RunResult;
use crate::graph::{cpdag, Dag};
use crate::page_model::graph_layout::{layered_layout, LayoutOptions};
use crate::page_model::{format_bayes_factor, format_number};
use leptos::prelude::*;

/// The explanation of one edge, or what is happening to it.
#[component]
pub fn EdgeExplanation(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    move || {
        let names = state
            .page
            .result
            .with(|r| r.as_ref().map(|r| r.names.clone()))?;
        let body = match state.page.explanation.get() {
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
            Explanation::Edge(evidence) => evidence_view(state, &evidence, &names).into_any(),
            Explanation::Curve(curve) => curve_view(*curve, &names).into_any(),
            Explanation::Directions(comparison) => directions_view(*comparison, &names).into_any(),
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
        {conditional_canvas(curve, &parent, &child, "conditional-curve", 560)}
    }
}

/// A fitted conditional drawn with its data on a canvas `width` px wide (plotters); a drawing
/// failure is written under it.
fn conditional_canvas(
    curve: ConditionalCurve,
    x_name: &str,
    y_name: &str,
    test_id: &'static str,
    width: u32,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    let failed = RwSignal::new(None::<String>);
    let label = format!("{y_name} against {x_name}: data and fitted conditional");
    let (x_name, y_name) = (x_name.to_string(), y_name.to_string());
    Effect::new(move |_| {
        if let Some(canvas) = canvas.get() {
            if let Err(e) = draw_conditional(&canvas, &curve, &x_name, &y_name) {
                failed.set(Some(e));
            }
        }
    });
    view! {
        <canvas class="conditional" data-testid=test_id node_ref=canvas
            width=width.to_string() height="300" aria-label=label></canvas>
        {move || failed.get().map(|e| view! { <p class="error-text">{e}</p> })}
    }
}

/// An edge j → i and its reversal side by side: i's fitted conditional along j, j's along i, and
/// the Bayes factor between the two directions in words.
fn directions_view(comparison: DirectionComparison, names: &[String]) -> impl IntoView {
    let name = |i: usize| names.get(i).cloned().unwrap_or_else(|| format!("#{i}"));
    let evidence = &comparison.evidence;
    let (cause, effect) = (name(evidence.from), name(evidence.to));
    let verdict = match evidence.reversed_delta() {
        Some(delta) => format!(
            "Reversing the edge changes the graph's score by {} nats: a Bayes factor of {} for {cause} → {effect} against {effect} → {cause}. {}.",
            signed(delta),
            format_bayes_factor(-delta),
            capitalised(&evidence.reversal_words(names)),
        ),
        None => format!("{}.", capitalised(&evidence.reversal_words(names))),
    };
    // Each direction's score is the sum of the two families the edge concerns: the cause's given
    // its other parents and the effect's given its parents (every other family is the same).
    let totals = match evidence.reversed {
        Reversal::Scored {
            parent_family,
            parent_family_reversed,
            ..
        } => Some((
            (parent_family, evidence.child_family),
            (evidence.child_family_without, parent_family_reversed),
        )),
        Reversal::CreatesCycle { .. } => None,
    };
    // "F(b)" or "F(b | a, c)": a family by names.
    let family = |child: usize, parents: &[usize]| {
        if parents.is_empty() {
            format!("F({})", name(child))
        } else {
            let given: Vec<String> = parents.iter().map(|&p| name(p)).collect();
            format!("F({} | {})", name(child), given.join(", "))
        }
    };
    let without = |parents: &[usize], left_out: usize| -> Vec<usize> {
        parents.iter().copied().filter(|&p| p != left_out).collect()
    };
    let forward_terms = (
        family(
            evidence.from,
            &without(&comparison.backward.parents, evidence.to),
        ),
        family(evidence.to, &comparison.forward.parents),
    );
    let backward_terms = (
        family(
            evidence.to,
            &without(&comparison.forward.parents, evidence.from),
        ),
        family(evidence.from, &comparison.backward.parents),
    );
    let panel = |curve: ConditionalCurve,
                 direction: &'static str,
                 x: String,
                 y: String,
                 terms: (String, String),
                 families: Option<(f64, f64)>| {
        let held = if curve.parents.len() > 1 {
            " (other parents held at their means)"
        } else {
            ""
        };
        let score_attribute = format!("{:.3}", curve.score.value);
        let sum = families.map(|(first, conditional)| {
            format!(
                "Score of this direction: {} + {} = {} + {} = {} nats",
                terms.0,
                terms.1,
                format_number(first),
                format_number(conditional),
                format_number(first + conditional)
            )
        });
        view! {
            <figure class="direction" data-direction=direction data-score=score_attribute>
                <figcaption>
                    <strong>{format!("{x} → {y}")}</strong> ": " {y.clone()} " given " {x.clone()} {held}
                    {sum.map(|s| view! { <br /><span data-testid="direction-score">{s}</span> })}
                </figcaption>
                {conditional_canvas(curve, &x, &y, "direction-curve", 380)}
            </figure>
        }
    };
    view! {
        <div data-state="ready" data-testid="directions" data-edge=format!("{}->{}", evidence.from, evidence.to)
            data-reversed=evidence.reversed_delta().map(|d| format!("{d:.3}")).unwrap_or_default()>
            <p data-testid="directions-verdict">{verdict}</p>
            <div class="directions">
                {panel(comparison.forward, "forward", cause.clone(), effect.clone(), forward_terms, totals.map(|t| t.0))}
                {panel(comparison.backward, "backward", effect, cause, backward_terms, totals.map(|t| t.1))}
            </div>
            <p class="hint">
                "Each panel is one direction's conditional model: the line is the fitted mean, the band holds 80 % of the predictive, the dots are the data (at most 500 rows). A direction's score also counts the cause's own family (given its other parents; none in a graph of two variables): that sum is what the two directions compare, and the family shown can favour one direction while the sum favours the other."
            </p>
        </div>
    }
}

fn evidence_view(state: AppState, evidence: &EdgeEvidence, names: &[String]) -> impl IntoView {
    let edge = (evidence.from, evidence.to);
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
    // An edge the result leaves out was scored in the graph with it added (a clicked pair).
    let added = state
        .page
        .result
        .with(|r| r.as_ref().is_some_and(|r| !r.edges.contains(&edge)));
    let summary = if added {
        view! {
            "Adding " <strong>{from.clone()} " → " {to.clone()}</strong> ", which the graph leaves out, changes its score by "
            <strong data-testid="removal-nats">{signed(-evidence.removed)} " nats"</strong>
            " (" {to.clone()} "'s family: " {format_number(evidence.child_family_without)} " → "
            {format_number(evidence.child_family)} " nats). "
            {capitalised(&evidence.addition_words(names))} "."
        }
        .into_any()
    } else {
        view! {
            "Removing " <strong>{from.clone()} " → " {to.clone()}</strong> " changes the graph's score by "
            <strong data-testid="removal-nats">{signed(evidence.removed)} " nats"</strong>
            " (" {to.clone()} "'s family: " {format_number(evidence.child_family)} " → "
            {format_number(evidence.child_family_without)} " nats). "
            {capitalised(&evidence.removal_words(names))} "."
        }
        .into_any()
    };
    let reversal = if added {
        format!("Were the two joined: {reversal}")
    } else {
        reversal
    };
    view! {
        <p data-state="ready" data-edge=format!("{}->{}", evidence.from, evidence.to)
            data-added=added.to_string()
            data-removed=format!("{:.3}", evidence.removed)
            data-reversed=evidence.reversed_delta().map(|d| format!("{d:.3}")).unwrap_or_default()>
            {summary}
        </p>
        <p data-testid="reversal-words">{reversal}</p>
        <button class="small" data-testid="compare-directions" on:click=move |_| state.compare_directions(edge)>
            "Draw " {from.clone()} " → " {to.clone()} " and " {to.clone()} " → " {from.clone()} " side by side"
        </button>
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

/// The equivalence class of `result`'s graph beside it, while `shown` (a toggle it owns).
#[component]
pub fn EquivalenceClass(
    #[prop(into)] result: Signal<Option<RunResult>>,
    /// Whether the class is drawn (its `cpdag-toggle` sets it).
    shown: RwSignal<bool>,
) -> impl IntoView {
    let view_class = move || {
        if !shown.get() {
            return None;
        }
        let (names, graph) = result.with(|r| {
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
