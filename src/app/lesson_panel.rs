//! The guided lessons (`page_model::lessons`, files under `lessons/`): the list of lessons
//! (`lesson-list`) and the open lesson's current step (`lesson-step`) with its text, the button
//! that carries out its action, its task, how its check stands on the page, Back and Next. When the
//! result on screen has an exact posterior (five variables or fewer), the step shows it grouped by
//! equivalence class (`lesson-posterior`). The panel has no lesson-specific code: a new lesson is
//! a new file.

use super::examples::{fetch_text, EXAMPLES};
use super::run_panel::{blocker, start_run};
use super::settings_store::SettingsStore;
use super::{AppState, DataState, Explanation};
use crate::page_model::format_probability;
use crate::page_model::lessons::{
    posterior_classes, ClassLine, Lesson, LessonProgress, PageFacts, ResultFacts, StepAction,
    StepStatus,
};
use leptos::prelude::*;

/// Classes of the exact posterior a lesson step lists.
const LESSON_CLASSES: usize = 3;
/// Most DAGs a lesson step offers to list one by one (every DAG on four variables).
const MAX_LISTED_GRAPHS: usize = 543;

/// The lessons as read from `lessons/`, or why they could not be.
#[derive(Debug, Clone, PartialEq)]
enum Catalogue {
    Loading,
    Ready(Vec<Lesson>),
    Failed(String),
}

/// Reads `lessons/index.json` and every lesson it lists, validating each against the built-in
/// examples.
async fn read_catalogue() -> Result<Vec<Lesson>, String> {
    let index: Vec<String> = serde_json::from_str(&fetch_text("lessons/index.json").await?)
        .map_err(|e| format!("lessons/index.json is not a list of lesson ids: {e}"))?;
    let stems: Vec<&str> = EXAMPLES.iter().map(|e| e.stem).collect();
    let mut lessons = Vec::with_capacity(index.len());
    for id in index {
        let text = fetch_text(&format!("lessons/{id}.json")).await?;
        lessons.push(Lesson::parse(&text, &stems).map_err(|e| e.to_string())?);
    }
    Ok(lessons)
}

/// What the page shows, as the lessons' checks read it.
fn page_facts(state: AppState) -> PageFacts {
    let explanation = state.page.explanation.get();
    PageFacts {
        names: state.page.data.with(DataState::names),
        result: state.page.result.with(|r| {
            r.as_ref().map(|r| ResultFacts {
                names: r.names.clone(),
                edges: r.edges.clone(),
            })
        }),
        cpdag_shown: state.cpdag_shown.get(),
        edge_explained: matches!(
            explanation,
            Explanation::Edge(_) | Explanation::Directions(_)
        ),
        directions_compared: matches!(explanation, Explanation::Directions(_)),
        runs_started: state.page.runs_started.get(),
    }
}

/// Carries out a step's action on the page (settings and knowledge steps on `store`), or says
/// why it cannot be done now.
fn carry_out(
    state: AppState,
    store: SettingsStore,
    action: &StepAction,
    facts: &PageFacts,
) -> Result<(), String> {
    match action {
        StepAction::LoadExample { example } => {
            let stem = EXAMPLES
                .iter()
                .find(|e| e.stem == example)
                .ok_or_else(|| format!("there is no built-in example {example}"))?
                .stem;
            super::examples::load(state, stem);
        }
        StepAction::Simulate { .. } => {
            let spec = action.simulation().expect("a simulate action")?;
            state.simulate(spec);
        }
        StepAction::UseSettings {
            preset,
            method,
            fields,
        } => store.use_settings(*preset, *method, fields)?,
        StepAction::Knowledge {
            forbid,
            require,
            tiers,
        } => {
            let names = state
                .page
                .data
                .with_untracked(DataState::names)
                .ok_or("load the data first")?;
            store.set_knowledge(&names, forbid, require, tiers)?
        }
        StepAction::Run => {
            if let Some(why) = blocker(state, store) {
                return Err(format!("the run cannot start: {why}"));
            }
            start_run(state, store);
        }
        StepAction::ShowCpdag => {
            if facts.result.is_none() {
                return Err("run the search first: the class is the result's".into());
            }
            state.cpdag_shown.set(true);
        }
        StepAction::ExplainEdge { .. } => {
            let edge = action
                .result_edge(facts.result.as_ref())
                .expect("an edge")?;
            state.explain(edge);
        }
        StepAction::CompareDirections { .. } => {
            let edge = action
                .result_edge(facts.result.as_ref())
                .expect("an edge")?;
            state.compare_directions(edge);
        }
    }
    Ok(())
}

#[component]
pub fn LessonPanel(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    let store = SettingsStore::expect();
    let catalogue = RwSignal::new(Catalogue::Loading);
    let open = RwSignal::new(None::<usize>);
    let progress = RwSignal::new(LessonProgress::default());
    let action_error = RwSignal::new(None::<String>);
    let completed = RwSignal::new(Vec::<String>::new());
    wasm_bindgen_futures::spawn_local(async move {
        catalogue.set(match read_catalogue().await {
            Ok(lessons) => Catalogue::Ready(lessons),
            Err(e) => Catalogue::Failed(e),
        });
    });
    let facts = Memo::new(move |_| page_facts(state));
    let lesson = move || match (catalogue.get(), open.get()) {
        (Catalogue::Ready(lessons), Some(k)) => lessons.get(k).cloned(),
        _ => None,
    };
    // The page is busy: a button that starts more work waits.
    let busy = move || {
        state.busy_with().is_some()
            || matches!(state.page.explanation.get(), Explanation::Working { .. })
    };

    let list = move || {
        let lessons = match catalogue.get() {
            Catalogue::Loading => return view! { <p class="hint">"Reading the lessons…"</p> }.into_any(),
            Catalogue::Failed(e) => {
                return view! { <p class="invalid" data-testid="lesson-error">"The lessons could not be read: " {e}</p> }
                    .into_any()
            }
            Catalogue::Ready(lessons) => lessons,
        };
        let items = lessons
            .into_iter()
            .enumerate()
            .map(|(k, l)| {
                let id = l.id.clone();
                let done = Memo::new(move |_| completed.with(|c| c.contains(&id)));
                view! {
                    <li data-completed=move || if done.get() { "yes" } else { "no" }>
                        <button class="link" data-testid="lesson-open" data-lesson=l.id.clone() on:click=move |_| {
                            open.set(Some(k));
                            progress.set(LessonProgress::default());
                            action_error.set(None);
                        }>{l.title.clone()}</button>
                        {move || done.get().then(|| view! { <span class="done-mark" title="completed">" ✓"</span> })}
                        <span class="hint">" " {l.idea.clone()} " (" {l.steps.len()} " steps)"</span>
                    </li>
                }
            })
            .collect_view();
        view! {
            <p class="hint">"Short guided lessons: each step explains one thing, does it for you with a button, and checks what you see."</p>
            <ol class="lesson-list" data-testid="lesson-list">{items}</ol>
        }
        .into_any()
    };

    let step_view = move || {
        let lesson = lesson()?;
        let p = progress.get();
        let step = lesson.steps.get(p.step)?.clone();
        let total = lesson.steps.len();
        let status = p.status(&lesson, &facts.get());
        let is_last = p.step + 1 == total;
        let paragraphs = step
            .text
            .split("\n\n")
            .map(|para| view! { <p>{para.to_string()}</p> })
            .collect_view();
        let action = step.action.clone().map(|action| {
            let label = action.label();
            let done = p.action_done;
            let on_click = move |_| {
                let before = facts.get_untracked();
                match carry_out(state, store, &action, &before) {
                    Ok(()) => {
                        action_error.set(None);
                        progress.update(|p| p.action_carried_out(before.runs_started));
                    }
                    Err(e) => action_error.set(Some(e)),
                }
            };
            view! {
                <button class=if done { "lesson-action" } else { "lesson-action primary" } data-testid="lesson-action"
                    data-done=if done { "yes" } else { "no" } disabled=busy on:click=on_click>
                    {label}
                </button>
            }
        });
        let task = step
            .task
            .clone()
            .map(|t| view! { <p class="task"><strong>"Your turn: "</strong>{t}</p> });
        let check_text = match &status {
            StepStatus::Done if step.check.is_some() => "Done ✓".to_string(),
            StepStatus::Done => "Read it, then go on.".to_string(),
            StepStatus::ActionPending => "Press the button above to begin this step.".to_string(),
            StepStatus::Waiting(missing) => format!("Not yet: {missing}."),
        };
        let lesson_for_next = lesson.clone();
        let next = move |_| {
            let facts = facts.get_untracked();
            if is_last {
                if progress.with_untracked(|p| p.completed(&lesson_for_next, &facts)) {
                    let id = lesson_for_next.id.clone();
                    completed.update(|c| {
                        if !c.contains(&id) {
                            c.push(id)
                        }
                    });
                    open.set(None);
                }
            } else {
                progress.update(|p| {
                    p.next(&lesson_for_next, &facts);
                });
                action_error.set(None);
            }
        };
        let can_go_on = status == StepStatus::Done;
        Some(view! {
            <div class="lesson-head">
                <h3 data-testid="lesson-title">{lesson.title.clone()}</h3>
                <button class="quiet" data-testid="lesson-close" on:click=move |_| open.set(None)>"All lessons"</button>
            </div>
            <p class="hint lesson-idea">{lesson.idea.clone()}</p>
            <div class="lesson-step" data-testid="lesson-step" data-lesson=lesson.id.clone()
                data-step=(p.step + 1).to_string() data-steps=total.to_string() data-status=status.code()>
                <p class="step-count">"Step " {p.step + 1} " of " {total}</p>
                {paragraphs}
                {action}
                {move || action_error.get().map(|e| view! { <p class="invalid" data-testid="lesson-action-error" role="alert">{e}</p> })}
                {task}
                <p class="lesson-check" data-testid="lesson-check" data-status=status.code()>{check_text}</p>
                <LessonPosterior state=state />
            </div>
            <div class="lesson-nav">
                <button data-testid="lesson-back" disabled=p.step == 0 on:click=move |_| {
                    progress.update(LessonProgress::back);
                    action_error.set(None);
                }>"Back"</button>
                <button class="primary" data-testid=if is_last { "lesson-finish" } else { "lesson-next" }
                    disabled=!can_go_on on:click=next>
                    {if is_last { "Finish the lesson" } else { "Next" }}
                </button>
            </div>
        })
    };

    view! {
        <section class="panel lessons" data-testid="lessons" aria-labelledby="lessons-heading">
            <h2 id="lessons-heading">"Learn: guided lessons"</h2>
            {move || if open.get().is_some() { step_view().into_any() } else { list().into_any() }}
        </section>
    }
}

/// The exact posterior of the result on screen, grouped by Markov equivalence class, each class
/// with every member DAG's probability: what the evidence says beyond independence.
#[component]
fn LessonPosterior(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    move || {
        let (names, posterior) = state.page.result.with(|r| {
            let r = r.as_ref()?;
            Some((r.names.clone(), r.posterior.clone()?))
        })?;
        let lines = posterior_classes(&posterior, &names, LESSON_CLASSES);
        let rest: f64 = posterior
            .classes
            .iter()
            .skip(LESSON_CLASSES)
            .map(|c| c.probability)
            .sum();
        let class_items = |lines: Vec<ClassLine>| {
            lines
                .into_iter()
                .map(|line| {
                    let members = line
                        .members
                        .iter()
                        .map(|(graph, p)| format!("{graph} ({})", format_probability(*p)))
                        .collect::<Vec<_>>()
                        .join("; ");
                    view! {
                        <li data-probability=format!("{:.6}", line.probability)>
                            <strong>{format_probability(line.probability)}</strong> " for the class "
                            <code>{line.cpdag}</code>
                            <span class="members">": " {members}</span>
                        </li>
                    }
                })
                .collect_view()
        };
        let items = class_items(lines);
        // Every graph, class by class, where there are few enough to read (three or four
        // variables: 25 or 543 DAGs); five variables' 29,281 stay summed.
        let every = (posterior.graphs.len() <= MAX_LISTED_GRAPHS && rest > 0.0).then(|| {
            let all = class_items(posterior_classes(&posterior, &names, usize::MAX));
            view! {
                <details data-testid="lesson-posterior-all">
                    <summary>"Every graph, class by class (" {posterior.classes.len()} " classes)"</summary>
                    <ol>{all}</ol>
                </details>
            }
        });
        Some(view! {
            <div class="lesson-posterior" data-testid="lesson-posterior">
                <p>
                    "The exact posterior: all " {posterior.graphs.len()} " DAGs scored, grouped by equivalence class "
                    "(graphs in one class make the same independence statements; only the evidence tells them apart)."
                </p>
                <ol>{items}</ol>
                {(rest > 0.0).then(|| view! { <p class="hint">"All other classes: " {format_probability(rest)}</p> })}
                {every}
            </div>
        })
    }
}
