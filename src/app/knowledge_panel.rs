//! Prior knowledge: a grid of cause × effect cells, each clicked through free → forbidden →
//! required, and a tier per variable. A contradiction is explained (naming the variables) and
//! blocks the run.

use super::settings_store::SettingsStore;
use super::DataState;
use leptos::prelude::*;

/// Column headers of up to this many characters are written flat; longer ones upwards.
const FLAT_HEADER_CHARS: usize = 3;

#[component]
pub fn KnowledgePanel(
    /// The data loaded: the grid has a row and a column per variable.
    #[prop(into)]
    data: Signal<DataState>,
) -> impl IntoView {
    let store = SettingsStore::expect();
    let body = move || {
        let Some(names) = data.with(DataState::names) else {
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
                            store
                                .rules
                                .with(|r| r.get(i * d + j).copied().unwrap_or_default())
                        };
                        let title = format!("{} → {}", names[i], names[j]);
                        let label = title.clone();
                        let on_click = move |_| {
                            store.rules.update(|r| {
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
                let value = move || store.tiers.with(|t| t.get(i).cloned().unwrap_or_default());
                let on_input = move |ev: web_sys::Event| {
                    let text = event_target_value(&ev);
                    store.tiers.update(|t| {
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
        let reset = move |_| store.clear_knowledge(d);
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
    let problem = move || {
        store
            .knowledge(data.with(DataState::names))
            .and_then(Result::err)
    };
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
