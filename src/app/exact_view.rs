//! What the exact search adds to a result: the posterior edge probabilities as a heatmap
//! (`data-testid="edge-probabilities"`) and, for five variables or fewer, the most probable
//! graphs drawn small with their probabilities, grouped by Markov equivalence class
//! (`data-testid="posterior"`).

use super::charts::{draw_heatmap, heatmap_cell_at};
use crate::discovery::exact::GraphPosterior;
use crate::engine::RunResult;
use crate::page_model::chart_scale::HeatmapScale;
use crate::page_model::{format_number, format_probability};
use leptos::prelude::*;

/// Classes listed at most; further ones are summed into one line.
const MAX_CLASSES: usize = 6;
/// Member DAGs drawn per class at most.
const MAX_MEMBERS: usize = 4;

/// The exact search's edge probabilities and posterior over graphs of `result` (nothing for a
/// result without them).
#[component]
pub fn ExactResults(
    #[prop(into)] result: Signal<Option<RunResult>>,
    /// Called with the (cause, effect) cell of the edge probabilities clicked.
    on_pair: Callback<(usize, usize)>,
) -> impl IntoView {
    move || {
        let result = result.get()?;
        let probabilities = result.edge_probabilities.clone()?;
        let prior = result
            .exact
            .as_ref()
            .map(|x| x.edge_probability_prior.clone())
            .unwrap_or_default();
        let summary = result.exact.as_ref().map(|x| {
            let w = &x.fit_work;
            format!(
                "{} families fitted, {} read from the cache; best graph's log score {} nats; \
                 {} fits behind the scores, {} of them stopped by a cap, {} bound evaluations; \
                 Ψ2 sums on the GPU for {} families, on the CPU for {}",
                result.families_fitted,
                result.cache_hits,
                format_number(x.log_score),
                w.fits,
                w.fits_hit_cap,
                w.evaluations,
                w.families_on_gpu,
                w.families_on_cpu
            )
        });
        let posterior = result
            .posterior
            .clone()
            .map(|p| posterior_view(&p, &result.names));
        Some(view! {
            <section class="exact" data-testid="edge-probabilities" aria-labelledby="edge-prob-heading">
                <h3 id="edge-prob-heading">"Posterior edge probabilities (row = cause, column = effect)"</h3>
                <p class="hint" data-testid="exact-summary" data-fitted=result.families_fitted
                    data-cache-hits=result.cache_hits
                    data-on-gpu=result.exact.as_ref().map(|x| x.fit_work.families_on_gpu)>{summary} ". Prior: " {prior} "."</p>
                <ProbabilityHeatmap names=result.names.clone() probabilities=probabilities edges=result.edges.clone() on_pair=on_pair />
            </section>
            {posterior}
        })
    }
}

/// The edge probabilities on a canvas, the chosen graph's cells outlined.
#[component]
fn ProbabilityHeatmap(
    names: Vec<String>,
    probabilities: Vec<Vec<f64>>,
    edges: Vec<(usize, usize)>,
    on_pair: Callback<(usize, usize)>,
) -> impl IntoView {
    let canvas = NodeRef::<leptos::html::Canvas>::new();
    Effect::new(move |_| {
        let Some(el) = canvas.get() else { return };
        if let Err(e) = draw_heatmap(
            &el,
            &names,
            &probabilities,
            &edges,
            HeatmapScale::Probability,
        ) {
            web_sys::console::warn_1(&format!("edge probabilities: {e}").into());
        }
    });
    let on_click = move |event: leptos::ev::MouseEvent| {
        if let Some(cell) = canvas.get().and_then(|el| heatmap_cell_at(&el, &event)) {
            on_pair.run(cell);
        }
    };
    view! {
        <canvas node_ref=canvas class="heatmap clickable" data-testid="edge-probabilities-canvas" width="420" height="400"
            title="Click a cell: why the graph has, or leaves out, that edge" on:click=on_click
            role="img" aria-label="Heatmap of the posterior edge probabilities"></canvas>
    }
}

/// The most probable equivalence classes, each with its member DAGs drawn small.
fn posterior_view(p: &GraphPosterior, names: &[String]) -> impl IntoView {
    let shown: Vec<_> = p.classes.iter().take(MAX_CLASSES).collect();
    let rest: f64 = p
        .classes
        .iter()
        .skip(MAX_CLASSES)
        .map(|c| c.probability)
        .sum();
    let rows = shown
        .into_iter()
        .enumerate()
        .map(|(k, class)| {
            let members = class
                .members
                .iter()
                .take(MAX_MEMBERS)
                .filter_map(|&g| p.graphs.get(g))
                .enumerate()
                .map(|(m, g)| {
                    view! {
                        <figure class="small-dag" data-probability=format!("{:.6}", g.probability)>
                            {small_dag(names, &g.edges, &format!("c{k}m{m}"))}
                            <figcaption>{format_probability(g.probability)}</figcaption>
                        </figure>
                    }
                })
                .collect_view();
            let more = class.members.len().saturating_sub(MAX_MEMBERS);
            let undirected = class.undirected.len();
            view! {
                <li class="class" data-probability=format!("{:.6}", class.probability)>
                    <p>
                        <strong>{format_probability(class.probability)}</strong>
                        " · " {class.members.len()} " DAG" {if class.members.len() == 1 { "" } else { "s" }}
                        " in this equivalence class (" {class.directed.len()} " directed, "
                        {undirected} " undirected edges in its CPDAG)"
                    </p>
                    <div class="members">{members}</div>
                    {(more > 0).then(|| view! { <p class="hint">"and " {more} " more"</p> })}
                </li>
            }
        })
        .collect_view();
    view! {
        <section class="exact" data-testid="posterior" aria-labelledby="posterior-heading">
            <h3 id="posterior-heading">"The most probable graphs, grouped by Markov equivalence class"</h3>
            <p class="hint">
                "Every one of the " {p.graphs.len()} " DAGs was scored. Prior: " {p.prior.clone()}
                ". Probability that the best graph's class is right: "
                <strong data-testid="best-class-probability">{format_probability(p.best_class_probability)}</strong> "."
            </p>
            <ol class="classes">{rows}</ol>
            {(rest > 0.0).then(|| view! { <p class="hint">"All other classes together: " {format_probability(rest)}</p> })}
        </section>
    }
}

/// A DAG on at most a handful of variables as a small SVG: nodes on a circle, arrows as lines.
fn small_dag(names: &[String], edges: &[(usize, usize)], key: &str) -> impl IntoView {
    let n = names.len().max(1);
    let (size, radius, node) = (120.0_f64, 42.0_f64, 13.0_f64);
    let centre = size / 2.0;
    let pos: Vec<(f64, f64)> = (0..n)
        .map(|k| {
            let a = -std::f64::consts::FRAC_PI_2 + 2.0 * std::f64::consts::PI * k as f64 / n as f64;
            (centre + radius * a.cos(), centre + radius * a.sin())
        })
        .collect();
    let marker = format!("arrow-{key}");
    let marker_ref = format!("url(#{marker})");
    let lines = edges
        .iter()
        .filter(|&&(a, b)| a < n && b < n)
        .map(|&(a, b)| {
            let ((x0, y0), (x1, y1)) = (pos[a], pos[b]);
            let (dx, dy) = (x1 - x0, y1 - y0);
            let len = (dx * dx + dy * dy).sqrt().max(1e-9);
            let (ux, uy) = (dx / len, dy / len);
            view! {
                <line x1=x0 + ux * node y1=y0 + uy * node x2=x1 - ux * (node + 2.0) y2=y1 - uy * (node + 2.0)
                    stroke="#1d2430" stroke-width="1.6" marker-end=marker_ref.clone() />
            }
        })
        .collect_view();
    let nodes = names
        .iter()
        .zip(&pos)
        .map(|(name, &(x, y))| {
            let label: String = name.chars().take(3).collect();
            view! {
                <g>
                    <title>{name.clone()}</title>
                    <circle cx=x cy=y r=node fill="#ffffff" stroke="#2f5d9a" stroke-width="1.5" />
                    <text x=x y=y + 4.0 text-anchor="middle" font-size="10">{label}</text>
                </g>
            }
        })
        .collect_view();
    let edge_text = edges
        .iter()
        .filter(|&&(a, b)| a < n && b < n)
        .map(|&(a, b)| format!("{} → {}", names[a], names[b]))
        .collect::<Vec<_>>()
        .join(", ");
    let label = if edge_text.is_empty() {
        "no edges".to_string()
    } else {
        edge_text
    };
    view! {
        <svg viewBox=format!("0 0 {size} {size}") width="120" height="120" role="img" aria-label=label>
            <defs>
                <marker id=marker viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
                    <path d="M 0 0 L 10 5 L 0 10 z" fill="#1d2430" />
                </marker>
            </defs>
            {lines}
            {nodes}
        </svg>
    }
}
