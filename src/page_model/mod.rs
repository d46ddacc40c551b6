//! What the page computes that is not DOM: reading the settings form, the prior-knowledge grid,
//! comparing a result with an uploaded ground truth, checking a saved run record, the objective
//! curves' history, what the progress bar shows, number formatting and the layered drawing of a
//! graph (`graph_layout`). Plain Rust, compiled and tested natively; the Leptos components in `app`
//! only bind these to inputs and draw the results.

pub mod chart_scale;
mod curves;
pub mod drawing;
mod format;
pub mod graph_editor;
pub mod graph_layout;
mod knowledge_grid;
pub mod lessons;
pub mod page;
mod progress;
mod record;
mod settings_form;
mod truth;

pub use curves::{phase_name, CurvePoint, History};
pub use format::{
    format_bayes_factor, format_bytes, format_number, format_probability, format_seconds_left,
};
pub use knowledge_grid::{grid_from_names, knowledge_from_grid, EdgeRule};
pub use progress::{fraction_reached, progress_shown, ProgressShown, RunProgress};
pub use record::{read_record, MAX_RECORD_VARIABLES};
pub use settings_form::{
    parse_settings, preset_values, set_field, values_for_preset, FieldSpec, FIELDS,
};
pub use truth::{compare_to_truth, parse_truth, Truth, TruthReport};
