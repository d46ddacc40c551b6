//! Checking a run record (`result.json`) read back from a file before the page shows it: a record
//! is plain JSON anyone can edit, and the views index its adjacency by its names.

use crate::engine::RunResult;
use std::collections::HashSet;

/// Most variables a record may have to be shown (the views draw every variable and pair).
pub const MAX_RECORD_VARIABLES: usize = 200;

/// Reads a run record from JSON text and checks it is consistent: at most
/// [`MAX_RECORD_VARIABLES`] distinct names, a D × D adjacency of finite weights, and edges
/// between distinct listed variables without repeats. Errors say what is wrong.
pub fn read_record(text: &str) -> Result<RunResult, String> {
    let r: RunResult = serde_json::from_str(text)
        .map_err(|e| format!("not an Occam run record (result.json): {e}"))?;
    let d = r.names.len();
    if d == 0 || d > MAX_RECORD_VARIABLES {
        return Err(format!(
            "the record has {d} variables; between 1 and {MAX_RECORD_VARIABLES} can be shown"
        ));
    }
    if r.names.iter().collect::<HashSet<_>>().len() != d {
        return Err("the record names a variable twice".into());
    }
    if r.adjacency.len() != d || r.adjacency.iter().any(|row| row.len() != d) {
        return Err(format!("the record's adjacency is not {d} × {d}"));
    }
    if r.adjacency.iter().flatten().any(|w| !w.is_finite()) {
        return Err("the record's adjacency holds a value that is not a finite number".into());
    }
    let mut seen = HashSet::new();
    for &(i, j) in &r.edges {
        if i >= d || j >= d {
            return Err(format!(
                "an edge ({i}, {j}) names a variable the record does not have"
            ));
        }
        if i == j {
            return Err(format!(
                "the edge {} → {} is a self-loop",
                r.names[i], r.names[j]
            ));
        }
        if !seen.insert((i, j)) {
            return Err(format!(
                "the edge {} → {} is listed twice",
                r.names[i], r.names[j]
            ));
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Dataset;
    use crate::discovery::knowledge::Knowledge;
    use crate::discovery::settings::Preset;
    use crate::engine::Session;

    fn record() -> RunResult {
        let n = 40;
        let a: Vec<f64> = (0..n).map(|k| (k as f64 * 0.7).sin()).collect();
        let b: Vec<f64> = a
            .iter()
            .enumerate()
            .map(|(k, x)| x.tanh() + 0.1 * (k as f64).cos())
            .collect();
        let data = Dataset::new(vec!["a".into(), "b".into()], vec![a, b]);
        let mut settings = Preset::Interactive.settings();
        settings.restarts = 1;
        settings.inducing_points = 5;
        settings.cap_iterations(5);
        let settings = settings.check().unwrap();
        let mut s = Session::new(&data, Knowledge::none(2), settings, 0, None).unwrap();
        while !s.is_finished() {
            s.step(1.0);
        }
        s.result()
    }

    #[test]
    fn a_saved_record_reads_back_as_itself() {
        let r = record();
        let text = serde_json::to_string_pretty(&r).unwrap();
        assert_eq!(read_record(&text).unwrap(), r);
    }

    #[test]
    fn inconsistent_records_are_refused_with_a_reason() {
        let edit = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v = serde_json::to_value(record()).unwrap();
            f(&mut v);
            read_record(&v.to_string()).unwrap_err()
        };
        assert!(read_record("{")
            .unwrap_err()
            .contains("not an Occam run record"));
        assert!(edit(&|v| v["edges"] = serde_json::json!([[0, 5]])).contains("does not have"));
        assert!(edit(&|v| v["edges"] = serde_json::json!([[1, 1]])).contains("self-loop"));
        assert!(edit(&|v| v["edges"] = serde_json::json!([[0, 1], [0, 1]])).contains("twice"));
        assert!(edit(&|v| v["names"] = serde_json::json!(["a", "a"])).contains("twice"));
        assert!(edit(&|v| v["adjacency"] = serde_json::json!([[0.0, 1.0]])).contains("2 × 2"));
        let many: Vec<String> = (0..=MAX_RECORD_VARIABLES)
            .map(|k| format!("v{k}"))
            .collect();
        assert!(edit(&|v| v["names"] = serde_json::json!(many)).contains("can be shown"));
    }
}
