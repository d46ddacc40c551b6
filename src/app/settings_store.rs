//! The user's inputs for the next run in one store: the settings form (preset, method, the
//! fields' texts) and the prior-knowledge grid (a rule per cause × effect cell, a tier per
//! variable). `App` creates it and provides it as Leptos context ([`SettingsStore::provide`]); the
//! settings, knowledge, run and lesson panels read it with [`SettingsStore::expect`]. What the
//! texts mean is `page_model`'s (`parse_settings`, `knowledge_from_grid`): the store only holds
//! them and reads them back.

use crate::discovery::knowledge::Knowledge;
use crate::discovery::settings::{Method, Preset, SearchSettings};
use crate::page_model::{
    grid_from_names, knowledge_from_grid, parse_settings, preset_values, set_field,
    values_for_preset, EdgeRule,
};
use leptos::prelude::*;

/// The settings form and the prior-knowledge grid, as signals (`Copy`).
#[derive(Clone, Copy)]
pub struct SettingsStore {
    pub preset: RwSignal<Preset>,
    /// The search the next run uses (`method-select`; auto until the user picks another).
    pub method: RwSignal<Method>,
    /// The settings fields' texts, in the order of `page_model::FIELDS`.
    pub values: RwSignal<Vec<String>>,
    /// The grid's rules, row (cause) by row.
    pub rules: RwSignal<Vec<EdgeRule>>,
    /// Each variable's tier as typed (empty: none).
    pub tiers: RwSignal<Vec<String>>,
}

impl SettingsStore {
    /// A new store (the interactive preset, no knowledge) provided to every component below the
    /// caller.
    pub fn provide() -> Self {
        let store = Self {
            preset: RwSignal::new(Preset::Interactive),
            // The method that wins (issue 33): exact for few variables, hybrid above.
            method: RwSignal::new(Method::Auto),
            values: RwSignal::new(preset_values(Preset::Interactive, 0)),
            rules: RwSignal::new(Vec::new()),
            tiers: RwSignal::new(Vec::new()),
        };
        provide_context(store);
        store
    }

    /// The store the app provided (call while a component is being created).
    pub fn expect() -> Self {
        expect_context::<Self>()
    }

    /// The settings as the run would use them, or why they cannot be used. Tracked.
    pub fn settings(self) -> Result<(SearchSettings, u64), String> {
        let (mut settings, seed) = self
            .values
            .with(|values| parse_settings(self.preset.get(), values))?;
        settings.method = self.method.get();
        settings.validate().map_err(|e| e.to_string())?;
        Ok((settings, seed))
    }

    /// Chooses a preset (its values, the seed typed kept), a method, and then sets fields by key
    /// (a lesson's settings step). An unknown field is refused before anything changes.
    pub fn use_settings(
        self,
        preset: Option<Preset>,
        method: Option<Method>,
        fields: &[(String, String)],
    ) -> Result<(), String> {
        let mut values = self.values.get_untracked();
        if let Some(preset) = preset {
            values = values_for_preset(preset, &values);
        }
        for (key, text) in fields {
            set_field(&mut values, key, text)?;
        }
        if let Some(preset) = preset {
            self.preset.set(preset);
        }
        if let Some(method) = method {
            self.method.set(method);
        }
        self.values.set(values);
        Ok(())
    }

    /// The knowledge over the variables `names` as the run would use it, or why it cannot be
    /// used; `None` without data. Tracked.
    pub fn knowledge(self, names: Option<Vec<String>>) -> Option<Result<Knowledge, String>> {
        let names = names?;
        let rules = self.rules.get();
        let tiers = self.tiers.get();
        Some(knowledge_from_grid(&names, &rules, &tiers))
    }

    /// Sets the grid over `names` to forbid and require the named edges (every other cell free)
    /// and the named variables' tiers (the others none): a lesson's knowledge step. Says which
    /// name is not a variable, changing nothing then.
    pub fn set_knowledge(
        self,
        names: &[String],
        forbid: &[(String, String)],
        require: &[(String, String)],
        tiers: &[(String, u32)],
    ) -> Result<(), String> {
        let rules = grid_from_names(names, forbid, require)?;
        let mut tier_texts = vec![String::new(); names.len()];
        for (name, tier) in tiers {
            let i = names.iter().position(|n| n == name).ok_or_else(|| {
                format!("{name} is not one of the variables {}", names.join(", "))
            })?;
            tier_texts[i] = tier.to_string();
        }
        self.rules.set(rules);
        self.tiers.set(tier_texts);
        Ok(())
    }

    /// Every rule of a grid of `columns` variables free, every tier empty.
    pub fn clear_knowledge(self, columns: usize) {
        self.rules.set(vec![EdgeRule::Free; columns * columns]);
        self.tiers.set(vec![String::new(); columns]);
    }
}
