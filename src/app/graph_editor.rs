//! Draw a causal graph and simulate data from it (`data-testid="graph-editor"`): variables are
//! added with a button or a double click on the canvas, moved by dragging, named in the field
//! below; clicking one variable and then another draws an edge between them (an edge that would
//! close a cycle is refused, with the cycle named); a selected edge can be reversed or deleted. A
//! mechanism, a row count and a seed make it data: "Simulate" has the worker generate it
//! ([`crate::worker::protocol::ToWorker::Simulate`]), and the page loads it as a dropped file with the
//! drawing as its ground truth. The drawing's rules live in [`crate::page_model::graph_editor`].

use super::download::download_text;
use super::{AppState, SimulationState};
use crate::generate::Mechanism;
use crate::graph::{to_adjacency_csv, to_dagitty, to_dot, to_edge_list_csv, to_tetrad};
use crate::page_model::graph_editor::{
    node_half_width, pill_exit, DrawnGraph, CANVAS_HEIGHT, CANVAS_WIDTH, NODE_FONT_SIZE,
    NODE_HALF_HEIGHT,
};
use leptos::prelude::*;

/// What is selected on the canvas.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Selection {
    Nothing,
    /// A variable; `connect` when it was clicked (the next click on another variable draws an
    /// edge from it), not when it was just added (the next click selects the other one).
    Node {
        index: usize,
        connect: bool,
    },
    Edge(usize, usize),
}

impl Selection {
    fn node(self) -> Option<usize> {
        match self {
            Selection::Node { index, .. } => Some(index),
            _ => None,
        }
    }
}

/// A variable being dragged: which one, and whether the pointer has moved enough to count as a
/// drag rather than a click.
#[derive(Debug, Clone, Copy)]
struct Drag {
    node: usize,
    from: (f64, f64),
    moved: bool,
}

/// Pointer travel (canvas units) below which a press and release is a click.
const CLICK_SLOP: f64 = 4.0;

/// Starting drawings a teacher can pick: (value, label, names, edges, hidden).
type Template = (
    &'static str,
    &'static str,
    &'static [&'static str],
    &'static [(usize, usize)],
    &'static [usize],
);
const TEMPLATES: [Template; 5] = [
    (
        "chain",
        "Chain A → B → C",
        &["A", "B", "C"],
        &[(0, 1), (1, 2)],
        &[],
    ),
    (
        "fork",
        "Fork A ← B → C",
        &["A", "B", "C"],
        &[(1, 0), (1, 2)],
        &[],
    ),
    (
        "collider",
        "Collider A → C ← B",
        &["A", "B", "C"],
        &[(0, 2), (1, 2)],
        &[],
    ),
    (
        "confounder",
        "Hidden confounder Z → X, Z → Y",
        &["Z", "X", "Y"],
        &[(0, 1), (0, 2)],
        &[0],
    ),
    ("empty", "An empty canvas", &[], &[], &[]),
];

/// The words each mechanism is listed with.
fn mechanism_label(mechanism: Mechanism) -> &'static str {
    match mechanism {
        Mechanism::Linear => "Linear, Gaussian (not identifiable)",
        Mechanism::Mlp => "Neural network (MLP)",
        Mechanism::Gp => "Gaussian process, additive noise",
        Mechanism::GpCde => "GP-CDE, non-Gaussian noise",
    }
}

/// The drawing that starts the editor: the collider, the example a class meets first.
fn template(value: &str) -> DrawnGraph {
    let (_, _, names, edges, hidden) = TEMPLATES
        .iter()
        .find(|t| t.0 == value)
        .copied()
        .unwrap_or(TEMPLATES[2]);
    let mut graph = DrawnGraph::from_parts(names, edges).unwrap_or_default();
    for &h in hidden {
        graph.set_hidden(h, true);
    }
    graph
}

#[component]
pub fn GraphEditorPanel(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    let graph = RwSignal::new(template("collider"));
    let selection = RwSignal::new(Selection::Nothing);
    let message = RwSignal::new(None::<String>);
    let drag = RwSignal::new(None::<Drag>);
    let mechanism = RwSignal::new(Mechanism::GpCde);
    let rows = RwSignal::new("500".to_string());
    let seed = RwSignal::new("0".to_string());
    let svg_ref = NodeRef::<leptos::svg::Svg>::new();

    // Client coordinates → canvas units.
    let to_canvas = move |client_x: i32, client_y: i32| -> Option<(f64, f64)> {
        let svg = svg_ref.get_untracked()?;
        let rect = svg.get_bounding_client_rect();
        if rect.width() <= 0.0 || rect.height() <= 0.0 {
            return None;
        }
        Some((
            (f64::from(client_x) - rect.left()) * CANVAS_WIDTH / rect.width(),
            (f64::from(client_y) - rect.top()) * CANVAS_HEIGHT / rect.height(),
        ))
    };
    // A click on variable `i`: with another variable selected, an edge from it; else select `i`.
    let click_node = move |i: usize| match selection.get_untracked() {
        Selection::Node {
            index: from,
            connect: true,
        } if from != i => {
            let result = graph.try_update(|g| g.add_edge(from, i));
            match result {
                Some(Err(e)) => message.set(Some(e.to_string())),
                _ => {
                    message.set(None);
                    selection.set(Selection::Edge(from, i));
                }
            }
        }
        Selection::Node { index, .. } if index == i => selection.set(Selection::Nothing),
        _ => {
            message.set(None);
            selection.set(Selection::Node {
                index: i,
                connect: true,
            });
        }
    };
    let on_move = move |ev: web_sys::PointerEvent| {
        let Some(mut d) = drag.get_untracked() else {
            return;
        };
        let Some((x, y)) = to_canvas(ev.client_x(), ev.client_y()) else {
            return;
        };
        if !d.moved && (x - d.from.0).hypot(y - d.from.1) < CLICK_SLOP {
            return;
        }
        d.moved = true;
        drag.set(Some(d));
        graph.update(|g| g.move_node(d.node, x, y));
    };
    let on_up = move |_: web_sys::PointerEvent| {
        if let Some(d) = drag.get_untracked() {
            drag.set(None);
            if !d.moved {
                click_node(d.node);
            }
        }
    };
    let on_background = move |_: web_sys::PointerEvent| {
        selection.set(Selection::Nothing);
    };
    let add_at = move |x: f64, y: f64| match graph.try_update(|g| g.add_node(x, y)) {
        Some(Ok(i)) => {
            message.set(None);
            selection.set(Selection::Node {
                index: i,
                connect: false,
            });
        }
        Some(Err(e)) => message.set(Some(e.to_string())),
        None => {}
    };
    let on_double = move |ev: web_sys::MouseEvent| {
        if let Some((x, y)) = to_canvas(ev.client_x(), ev.client_y()) {
            add_at(x, y);
        }
    };
    let delete_selected = move || {
        match selection.get_untracked() {
            Selection::Node { index, .. } => graph.update(|g| g.delete_node(index)),
            Selection::Edge(a, b) => graph.update(|g| g.delete_edge(a, b)),
            Selection::Nothing => return,
        }
        message.set(None);
        selection.set(Selection::Nothing);
    };
    let on_key = move |ev: web_sys::KeyboardEvent| {
        // Only on the canvas itself: the name field below handles its own keys.
        match ev.key().as_str() {
            "Delete" | "Backspace" => {
                ev.prevent_default();
                delete_selected();
            }
            "Escape" => selection.set(Selection::Nothing),
            _ => {}
        }
    };

    let edges = move || {
        let g = graph.get();
        let selected = selection.get();
        g.edges()
            .iter()
            .map(|&(a, b)| {
                let (na, nb) = (&g.nodes()[a], &g.nodes()[b]);
                let (dx, dy) = (nb.x - na.x, nb.y - na.y);
                let (ox, oy) = pill_exit(&na.name, dx, dy);
                let (ix, iy) = pill_exit(&nb.name, -dx, -dy);
                // The arrowhead's tip stops just short of the effect's border.
                let gap = 2.0 / dx.hypot(dy).max(1e-9);
                let (x1, y1) = (na.x + ox, na.y + oy);
                let (x2, y2) = (nb.x + ix - dx * gap, nb.y + iy - dy * gap);
                let is_selected = selected == Selection::Edge(a, b);
                let hidden = na.hidden || nb.hidden;
                view! {
                    <g class="editor-edge" data-testid="editor-edge" data-from=na.name.clone()
                        data-to=nb.name.clone() data-selected=if is_selected { "yes" } else { "no" }
                        on:pointerdown=move |ev: web_sys::PointerEvent| {
                            ev.stop_propagation();
                            message.set(None);
                            selection.set(Selection::Edge(a, b));
                        }>
                        <title>{format!("{} → {} (click to select)", na.name, nb.name)}</title>
                        // A wide transparent line makes the edge easy to hit.
                        <line x1=format!("{x1:.1}") y1=format!("{y1:.1}") x2=format!("{x2:.1}") y2=format!("{y2:.1}")
                            stroke="transparent" stroke-width="14" />
                        <line x1=format!("{x1:.1}") y1=format!("{y1:.1}") x2=format!("{x2:.1}") y2=format!("{y2:.1}")
                            stroke=if is_selected { "#c2410c" } else { "#1d2430" }
                            stroke-width=if is_selected { "3" } else { "2" }
                            stroke-dasharray=hidden.then_some("6 4")
                            marker-end=if is_selected { "url(#editor-arrow-selected)" } else { "url(#editor-arrow)" } />
                    </g>
                }
            })
            .collect_view()
    };
    let nodes = move || {
        let g = graph.get();
        let selected = selection.get();
        g.nodes()
            .iter()
            .enumerate()
            .map(|(i, node)| {
                let is_selected = selected.node() == Some(i);
                view! {
                    <g class="editor-node" data-testid="editor-node" data-name=node.name.clone()
                        data-selected=if is_selected { "yes" } else { "no" }
                        data-hidden=if node.hidden { "yes" } else { "no" }
                        on:pointerdown=move |ev: web_sys::PointerEvent| {
                            ev.stop_propagation();
                            if let Some(from) = to_canvas(ev.client_x(), ev.client_y()) {
                                drag.set(Some(Drag { node: i, from, moved: false }));
                            }
                        }>
                        <rect x=format!("{:.1}", node.x - node_half_width(&node.name)) y=format!("{:.1}", node.y - NODE_HALF_HEIGHT)
                            width=format!("{:.1}", 2.0 * node_half_width(&node.name)) height=format!("{:.1}", 2.0 * NODE_HALF_HEIGHT)
                            rx=format!("{NODE_HALF_HEIGHT}")
                            fill=if node.hidden { "#f1f3f6" } else { "#ffffff" }
                            stroke=if is_selected { "#c2410c" } else { "#1d2430" }
                            stroke-width=if is_selected { "3" } else { "1.5" }
                            stroke-dasharray=node.hidden.then_some("5 3") />
                        <text x=format!("{:.1}", node.x) y=format!("{:.1}", node.y + 0.35 * NODE_FONT_SIZE) text-anchor="middle"
                            font-size=format!("{NODE_FONT_SIZE}") fill="#1d2430">{node.name.clone()}</text>
                    </g>
                }
            })
            .collect_view()
    };

    // The selected variable's name and hidden flag, and the selected edge's actions.
    let selection_tools = move || {
        match selection.get() {
        Selection::Node { index: i, .. } => {
            let node = graph.with(|g| g.nodes().get(i).cloned())?;
            let rename = move |ev: web_sys::Event| {
                let name = event_target_value(&ev);
                match graph.try_update(|g| g.rename(i, &name)) {
                    Some(Err(e)) => message.set(Some(e.to_string())),
                    _ => message.set(None),
                }
            };
            Some(
                view! {
                    <div class="editor-tools">
                        <label>"Name "
                            <input data-testid="variable-name" type="text" maxlength="40"
                                prop:value=node.name.clone() on:change=rename />
                        </label>
                        <label title="Generated with the others, then left out of the data: a hidden common cause">
                            <input data-testid="variable-hidden" type="checkbox" prop:checked=node.hidden
                                on:change=move |ev| {
                                    let hidden = event_target_checked(&ev);
                                    graph.update(|g| g.set_hidden(i, hidden));
                                } />
                            " hidden (not in the data)"
                        </label>
                        <button data-testid="delete-variable" on:click=move |_| delete_selected()>"Delete variable"</button>
                        <span class="hint">"Click another variable to draw an edge from this one."</span>
                    </div>
                }
                .into_any(),
            )
        }
        Selection::Edge(a, b) => Some(
            view! {
                <div class="editor-tools">
                    <button data-testid="reverse-edge" on:click=move |_| {
                        match graph.try_update(|g| g.reverse_edge(a, b)) {
                            Some(Err(e)) => message.set(Some(e.to_string())),
                            _ => {
                                message.set(None);
                                selection.set(Selection::Edge(b, a));
                            }
                        }
                    }>"Reverse edge"</button>
                    <button data-testid="delete-edge" on:click=move |_| delete_selected()>"Delete edge"</button>
                </div>
            }
            .into_any(),
        ),
        Selection::Nothing => None,
    }
    };

    let busy = move || state.busy_with().is_some();
    let simulate = move |_| {
        let Ok(samples) = rows.get_untracked().trim().parse::<usize>() else {
            message.set(Some("rows must be a whole number, e.g. 500".into()));
            return;
        };
        let Ok(seed) = seed.get_untracked().trim().parse::<u64>() else {
            message.set(Some("the seed must be a whole number ≥ 0".into()));
            return;
        };
        let drawn = graph.get_untracked();
        if drawn.nodes().iter().all(|n| n.hidden) {
            message.set(Some("draw at least one observed variable first".into()));
            return;
        }
        message.set(None);
        state.simulate(drawn.spec(mechanism.get_untracked(), samples, seed));
    };
    // The drawing downloads in every format a result's graph does.
    type Writer = fn(&crate::graph::Digraph, &[String]) -> String;
    let export = move |file_name: &'static str, mime: &'static str, write: Writer| {
        let (g, names) = graph.with_untracked(DrawnGraph::digraph);
        if let Err(e) = download_text(file_name, mime, &write(&g, &names)) {
            message.set(Some(e));
        }
    };
    let formats: [(&str, &str, &'static str, &'static str, Writer); 5] = [
        (
            "csv",
            "Adjacency CSV",
            "drawn_graph.adjacency.csv",
            "text/csv",
            to_adjacency_csv,
        ),
        (
            "edges",
            "Edge list CSV",
            "drawn_graph.edges.csv",
            "text/csv",
            to_edge_list_csv,
        ),
        ("dot", "DOT", "drawn_graph.dot", "text/vnd.graphviz", to_dot),
        (
            "dagitty",
            "DAGitty",
            "drawn_graph.dagitty.txt",
            "text/plain",
            to_dagitty,
        ),
        (
            "tetrad",
            "Tetrad",
            "drawn_graph.tetrad.txt",
            "text/plain",
            to_tetrad,
        ),
    ];
    let export_buttons = formats
        .into_iter()
        .map(|(format, label, file_name, mime, write)| {
            view! {
                <button class="small" data-testid="export-drawn-graph" data-format=format
                    on:click=move |_| export(file_name, mime, write)>{label}</button>
            }
        })
        .collect_view();
    let status = move || match state.page.simulation.get() {
        SimulationState::Running => Some("Simulating in the worker…".to_string()),
        SimulationState::Failed(why) => Some(why),
        SimulationState::Idle => None,
    };

    view! {
        <section class="panel editor-panel">
            <h2>"Draw a graph and simulate data"</h2>
            <p class="hint">
                "Double-click the canvas or use the button to add a variable; drag to move it. Click one variable, then another, to draw an edge. Dashed variables are hidden: generated, then left out of the data."
            </p>
            <div class="editor-bar">
                <label>"Start from "
                    <select data-testid="editor-template" on:change=move |ev| {
                        graph.set(template(&event_target_value(&ev)));
                        selection.set(Selection::Nothing);
                        message.set(None);
                    }>
                        {TEMPLATES
                            .iter()
                            .map(|t| view! { <option value=t.0 selected=t.0 == "collider">{t.1}</option> })
                            .collect_view()}
                    </select>
                </label>
                <button data-testid="add-variable" on:click=move |_| {
                    let k = graph.with_untracked(|g| g.nodes().len()) as f64;
                    add_at(60.0 + (k * 90.0) % (CANVAS_WIDTH - 120.0), 50.0 + 60.0 * ((k * 90.0) / (CANVAS_WIDTH - 120.0)).floor());
                }>"Add variable"</button>
            </div>
            <svg data-testid="graph-editor" node_ref=svg_ref class="graph-editor" tabindex="0"
                viewBox=format!("0 0 {CANVAS_WIDTH} {CANVAS_HEIGHT}") role="application"
                aria-label="Graph editor: draw the causal graph to simulate"
                on:pointermove=on_move on:pointerup=on_up on:pointerleave=on_up
                on:dblclick=on_double on:keydown=on_key>
                <defs>
                    <marker id="editor-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8"
                        markerUnits="userSpaceOnUse" orient="auto-start-reverse">
                        <path d="M 0 0 L 10 5 L 0 10 z" fill="#1d2430" />
                    </marker>
                    <marker id="editor-arrow-selected" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9"
                        markerUnits="userSpaceOnUse" orient="auto-start-reverse">
                        <path d="M 0 0 L 10 5 L 0 10 z" fill="#c2410c" />
                    </marker>
                </defs>
                <rect x="0" y="0" width=format!("{CANVAS_WIDTH}") height=format!("{CANVAS_HEIGHT}") fill="#fbfcfe"
                    on:pointerdown=on_background />
                <g>{edges}</g>
                <g>{nodes}</g>
            </svg>
            {selection_tools}
            <p class="editor-message" data-testid="editor-message" role="status">{move || message.get()}</p>
            <div class="editor-simulate">
                <label>"Mechanism "
                    <select data-testid="mechanism-select" on:change=move |ev| {
                        if let Ok(m) = event_target_value(&ev).parse::<Mechanism>() {
                            mechanism.set(m);
                        }
                    }>
                        {Mechanism::ALL
                            .iter()
                            .map(|&m| view! {
                                <option value=m.as_str() selected=m == Mechanism::GpCde>{mechanism_label(m)}</option>
                            })
                            .collect_view()}
                    </select>
                </label>
                <label>"Rows " <input data-testid="simulate-rows" type="text" inputmode="numeric" size="6"
                    prop:value=move || rows.get() on:change=move |ev| rows.set(event_target_value(&ev)) /></label>
                <label>"Seed " <input data-testid="simulate-seed" type="text" inputmode="numeric" size="6"
                    prop:value=move || seed.get() on:change=move |ev| seed.set(event_target_value(&ev)) /></label>
                <button data-testid="simulate-button" class="primary" disabled=busy on:click=simulate>"Simulate"</button>
            </div>
            <div class="editor-export">"Download the drawing: " {export_buttons}</div>
            <p class="hint" data-testid="simulation-status">{status}</p>
        </section>
    }
}
