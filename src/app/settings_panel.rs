//! Settings: the preset, restarts, seed, and the advanced section. Every value is read back on
//! each change; an unusable one is explained next to the form and blocks the run (nothing is
//! silently fixed).

use super::settings_store::SettingsStore;
use crate::base::names::Choice;
use crate::discovery::settings::{Method, Preset};
use crate::page_model::FIELDS;
use leptos::prelude::*;

#[component]
pub fn SettingsPanel() -> impl IntoView {
    let store = SettingsStore::expect();
    let on_preset = move |ev: web_sys::Event| {
        if let Ok(preset) = Preset::parse(&event_target_value(&ev)) {
            // Keep the seed the user chose; everything else follows the preset.
            let _ = store.use_settings(Some(preset), None, &[]);
        }
    };
    let field_view = move |k: usize| {
        let spec = FIELDS[k];
        let value = move || store.values.with(|v| v.get(k).cloned().unwrap_or_default());
        let on_input = move |ev: web_sys::Event| {
            let text = event_target_value(&ev);
            store.values.update(|v| {
                if let Some(slot) = v.get_mut(k) {
                    *slot = text;
                }
            });
        };
        let id = format!("setting-{}", spec.key);
        view! {
            <div class="field">
                <label for=id.clone()>{spec.label}</label>
                <input id=id type="text" inputmode="decimal" name=spec.key data-field=spec.key prop:value=value on:input=on_input />
                <span class="hint">{spec.help}</span>
            </div>
        }
    };
    let on_method = move |ev: web_sys::Event| {
        if let Ok(m) = Method::parse(&event_target_value(&ev)) {
            store.method.set(m);
        }
    };
    let method_note = move || {
        let text = match store.method.get() {
            Method::Cgp => "The continuous search: every variable a GP-CDE of all the others, an acyclicity penalty that rises until the weighted graph is a DAG, several restarts compared by evidence.",
            Method::Exact => "Exact Bayesian model selection: each variable's evidence is computed once for every candidate parent set (a family), and the best of all DAGs built from those families is found exactly. With 5 variables or fewer every DAG is listed with its posterior probability.",
            Method::Hybrid => "The continuous search first; the parents it finds join each variable's candidates, then the exact search picks the best DAG over the families.",
            Method::Auto => "Chosen when the run starts: the exact search for up to 12 variables, hybrid above. The result says which ran and why.",
        };
        view! { <p class="note" data-testid="method-note">{text}</p> }
    };
    // The exact search's fields sit with the basic ones only when they matter.
    let exact_keys = ["max_parents", "candidates", "edge_prior", "exact_few_rows"];
    let basic: Vec<usize> = (0..FIELDS.len())
        .filter(|&k| !FIELDS[k].advanced && !exact_keys.contains(&FIELDS[k].key))
        .collect();
    let exact_fields: Vec<usize> = (0..FIELDS.len())
        .filter(|&k| exact_keys.contains(&FIELDS[k].key))
        .collect();
    let advanced: Vec<usize> = (0..FIELDS.len()).filter(|&k| FIELDS[k].advanced).collect();
    let problem = move || store.settings().err();
    let preset_note = move || match store.preset.get() {
        Preset::Paper => Some(view! {
            <p class="note" data-testid="preset-note">"The paper preset runs the full GP-CDE schedule (25,000 + up to 50,000 + 25,000 iterations with M = 400): hours per data set in a browser. Use it to reproduce the paper, not to explore."</p>
        }),
        Preset::Thorough => Some(view! {
            <p class="note" data-testid="preset-note">"The thorough preset fits twice the rows with more inducing points, four restarts and longer phases, then compares the restarts by the evidence of their graphs: about 5 minutes for a 10-variable data set natively on 2 cores, longer in a browser (more compute workers help)."</p>
        }),
        Preset::Interactive => None,
    };

    view! {
        <section class="panel" aria-labelledby="settings-heading">
            <h2 id="settings-heading">"2. Settings"</h2>
            <div class="field">
                <label for="setting-preset">"Preset"</label>
                <select id="setting-preset" data-testid="preset-select" on:change=on_preset
                    prop:value=move || store.preset.get().name()>
                    {options(Preset::ALL.iter().map(|&p| (p.name(), preset_label(p))))}
                </select>
            </div>
            {preset_note}
            <div class="field">
                <label for="setting-method">"Method"</label>
                <select id="setting-method" data-testid="method-select" on:change=on_method
                    prop:value=move || store.method.get().name()>
                    {options(Method::ALL.iter().map(|&m| (m.name(), method_label(m))))}
                </select>
            </div>
            {method_note}
            <div class="fields">{basic.into_iter().map(field_view).collect_view()}</div>
            <div class="fields" data-testid="exact-fields" class:hidden=move || store.method.get() == Method::Cgp>
                {exact_fields.into_iter().map(field_view).collect_view()}
            </div>
            <details class="advanced">
                <summary>"Advanced"</summary>
                <div class="fields">{advanced.into_iter().map(field_view).collect_view()}</div>
            </details>
            {move || problem().map(|p| view! {
                <p class="invalid" data-testid="settings-error" role="alert">{p}</p>
            })}
        </section>
    }
}

/// A select's `<option>`s: (value, label) each.
fn options(choices: impl Iterator<Item = (&'static str, &'static str)>) -> impl IntoView {
    choices
        .map(|(value, label)| view! { <option value=value>{label}</option> })
        .collect_view()
}

/// What the preset selector says of each preset.
fn preset_label(preset: Preset) -> &'static str {
    match preset {
        Preset::Interactive => "interactive: fast, converges early",
        Preset::Thorough => "thorough: more rows, points and restarts (minutes)",
        Preset::Paper => "paper: the published schedule",
    }
}

/// What the method selector says of each method.
fn method_label(method: Method) -> &'static str {
    match method {
        Method::Cgp => "continuous (CGP-CDE)",
        Method::Exact => "exact over DAGs (DGP-CDE)",
        Method::Hybrid => "hybrid: continuous, then exact",
        Method::Auto => "auto: exact for few variables, hybrid above",
    }
}
