//! Prior knowledge: a grid of cause × effect cells, each clicked through free → forbidden →
//! required, and a tier per variable. A contradiction is explained (naming the variables) and
//! blocks the run.

use super::{AppState, DataState};
use crate::discovery::knowledge::Knowledge;
use crate::page_model::{grid_from_names, knowledge_from_grid, EdgeRule};
use leptos::prelude::*;

/// The knowledge as the run would use it, or why it cannot be used.
pub fn current_knowledge(state: AppState) -> Option<Result<Knowledge, String>> {
    let names = state.page.data.with(DataState::names)?;
    let rules = state.rules.get();
    let tiers = state.tiers.get();
    Some(knowledge_from_grid(&names, &rules, &tiers))
}

/// Sets the grid to forbid and require the named edges (every other cell free) and the named
/// variables' tiers (the others none): a lesson's knowledge step. Says which name is not a
/// variable of the loaded data, changing nothing then.
pub fn set_knowledge(
    state: AppState,
    forbid: &[(String, String)],
    require: &[(String, String)],
    tiers: &[(String, u32)],
) -> Result<(), String> {
    let names = state
        .page
        .data
        .with_untracked(DataState::names)
        .ok_or("load the data first")?;
    let rules = grid_from_names(&names, forbid, require)?;
    let mut tier_texts = vec![String::new(); names.len()];
    for (name, tier) in tiers {
        let i = names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| format!("{name} is not one of the variables {}", names.join(", ")))?;
        tier_texts[i] = tier.to_string();
    }
    state.rules.set(rules);
    state.tiers.set(tier_texts);
    Ok(())
}

/// Column headers of up to this many characters are written flat; longer ones upwards.
const FLAT_HEADER_CHARS: usize = 3;

#[component]
pub fn KnowledgePanel(
    /// The page's shell: its state and the commands that change it.
    state: AppState,
) -> impl IntoView {
    let body = move || {
        let Some(names) = state.page.data.with(DataState::names) else {
            return view! { <p class="hint">"Load data to state what you already know about its causes."</p> }
                .into_any();
        };
        let d = names.len();
        // Names wider than a cell are written upwards, so a column stays one cell wide; the
        // full name is in the title either way (long ones are cut with an ellipsis).
        let rotated = names.iter().any(|n| n.chars().count() > FLAT_HEADER_CHARS);
        let header = names
            .iter()
            .map(|n| view! { <th scope="col" class="effect" title=n.clone()><span>{n.clone()}</span></th> })
            .collect_view();
        let rows = names
            .iter()
            .enumerate()
            .map(|(i, cause)| {
                let cells = (0..d)
                    .map(|j| {
                        if i == j {
                            return view! { <td class="diagonal"></td> }.into_any();
                        }
                        let rule = move || {
                            state
                                .rules
                                .with(|r| r.get(i * d + j).copied().unwrap_or_default())
                        };
                        let title = format!("{} → {}", names[i], names[j]);
                        let label = title.clone();
                        let on_click = move |_| {
                            state.rules.update(|r| {
                                if let Some(cell) = r.get_mut(i * d + j) {
                                    *cell = cell.next();
                                }
                            })
                        };
                        view! {
                            <td>
                                <button
                                    class=move || format!("cell {}", rule().code())
                                    data-testid="knowledge-cell"
                                    data-from=i
                                    data-to=j
                                    data-rule=move || rule().code()
                                    title=move || format!("{title}: {}", rule().code())
                                    aria-label=move || format!("{label}: {}", rule().code())
                                    on:click=on_click
                                >
                                    {move || rule().symbol()}
                                </button>
                            </td>
                        }
                        .into_any()
                    })
                    .collect_view();
                view! { <tr><th scope="row" class="cause" title=cause.clone()>{cause.clone()}</th>{cells}</tr> }
            })
            .collect_view();
        let tiers = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let value = move || state.tiers.with(|t| t.get(i).cloned().unwrap_or_default());
                let on_input = move |ev: web_sys::Event| {
                    let text = event_target_value(&ev);
                    state.tiers.update(|t| {
                        if let Some(slot) = t.get_mut(i) {
                            *slot = text;
                        }
                    });
                };
                view! {
                    <label class="tier">
                        <span class="name">{name.clone()}</span>
                        <input type="text" inputmode="numeric" size="3" data-testid="tier-input" data-variable=i prop:value=value on:input=on_input />
                    </label>
                }
            })
            .collect_view();
        let reset = move |_| {
            state.rules.set(vec![EdgeRule::Free; d * d]);
            state.tiers.set(vec![String::new(); d]);
        };
        view! {
            <p class="hint">"Click a cell to forbid (✕) or require (→) the edge row → column; click again to move on. Tiers: a variable in a later tier can never cause one in an earlier tier (leave empty for no tier)."</p>
            // The grid scrolls inside this box (both ways, headers sticky) rather than widening
            // the panel: 20 and more variables do not fit a column.
            <div class="scroll knowledge-scroll" data-testid="knowledge-scroll" tabindex="0"
                role="region" aria-label="Prior knowledge grid, scrollable">
                <table class="knowledge-grid" class:rotated=rotated data-testid="knowledge-grid">
                    <thead><tr><th class="corner">"cause ↓ effect →"</th>{header}</tr></thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            <div class="tiers">{tiers}</div>
            <button class="quiet" on:click=reset>"Clear all knowledge"</button>
        }
        .into_any()
    };
    let problem = move || current_knowledge(state).and_then(Result::err);
    view! {
        <section class="panel" aria-labelledby="knowledge-heading">
            <h2 id="knowledge-heading">"3. Prior knowledge (optional)"</h2>
            {body}
            {move || problem().map(|p| view! {
                <p class="invalid" data-testid="knowledge-error" role="alert">{p}</p>
            })}
        </section>
    }
}
