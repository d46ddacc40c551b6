//! Guided lessons as data: a [`Lesson`] is a JSON file (under `www/lessons/`, listed in its
//! `index.json`) with a sequence of steps, each one idea in a few sentences, an optional action
//! the page can do for the student (load an example, simulate a drawn graph, choose settings,
//! state knowledge, show the equivalence class), a task in words and a check the page evaluates
//! against what is on screen ([`PageFacts`]). Adding a lesson is adding a file: the page has no
//! lesson-specific code. Parsing, validation and the checks are plain Rust, tested natively.

use serde::{Deserialize, Serialize};

use crate::data::generate::{Mechanism, SimulationSpec};
use crate::discovery::cgp::{Method, Preset};

/// Most steps a lesson may have (a lesson is short: one idea, a few steps).
pub const MAX_LESSON_STEPS: usize = 12;

/// One guided lesson.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lesson {
    /// Short identifier, also the file's stem.
    pub id: String,
    pub title: String,
    /// The one idea, in a sentence (shown in the lesson list).
    pub idea: String,
    pub steps: Vec<LessonStep>,
}

/// One step: what to read, what the page can do, what to do and how it is checked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LessonStep {
    /// The explanation, plain text (paragraphs separated by blank lines).
    pub text: String,
    /// What the step's button does for the student, if anything.
    #[serde(default)]
    pub action: Option<StepAction>,
    /// What the student should do or look at, in words.
    #[serde(default)]
    pub task: Option<String>,
    /// What must hold on the page before the step counts as done (none: reading is enough).
    #[serde(default)]
    pub check: Option<StepCheck>,
}

/// Something a step does on the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepAction {
    /// Loads a built-in example (its file stem under `examples/`).
    LoadExample { example: String },
    /// Simulates data from a graph given by names and named edges, and loads them with the
    /// graph as the truth.
    Simulate {
        names: Vec<String>,
        edges: Vec<(String, String)>,
        #[serde(default)]
        hidden: Vec<String>,
        mechanism: Mechanism,
        rows: usize,
        seed: u64,
    },
    /// Chooses a preset and a method, and sets form fields by key (`data-field`).
    UseSettings {
        #[serde(default)]
        preset: Option<Preset>,
        #[serde(default)]
        method: Option<Method>,
        #[serde(default)]
        fields: Vec<(String, String)>,
    },
    /// States prior knowledge by variable names: forbidden and required edges.
    Knowledge {
        #[serde(default)]
        forbid: Vec<(String, String)>,
        #[serde(default)]
        require: Vec<(String, String)>,
    },
    /// Starts a run with the settings on the page.
    Run,
    /// Shows the result's Markov equivalence class.
    ShowCpdag,
}

/// What must hold on the page for a step to be done.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepCheck {
    /// Data with exactly these column names are loaded.
    DataLoaded { names: Vec<String> },
    /// A run has finished (done or stopped) and its result is on screen.
    RunFinished,
    /// The result has the edge from → to.
    HasEdge { from: String, to: String },
    /// The result has no edge between a and b, in either direction.
    NotAdjacent { a: String, b: String },
    /// The result's equivalence class is shown.
    CpdagShown,
    /// An edge of the result has been explained by its evidence.
    EdgeExplained,
}

/// What the page shows, as a lesson's checks read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageFacts {
    /// The loaded data's column names.
    pub names: Option<Vec<String>>,
    /// The result on screen.
    pub result: Option<ResultFacts>,
    pub cpdag_shown: bool,
    pub edge_explained: bool,
}

/// A result as a lesson's checks read it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ResultFacts {
    pub names: Vec<String>,
    /// (cause, effect) indices into `names`.
    pub edges: Vec<(usize, usize)>,
}

/// Why a lesson file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LessonError {
    #[error("lesson file is not valid: {0}")]
    Json(String),
    #[error("lesson {id}: {problem}")]
    Invalid { id: String, problem: String },
}

impl Lesson {
    /// Reads and validates a lesson file. `examples` are the built-in examples' stems (a
    /// `load_example` step must name one of them).
    pub fn parse(text: &str, examples: &[&str]) -> Result<Self, LessonError> {
        let lesson: Lesson =
            serde_json::from_str(text).map_err(|e| LessonError::Json(e.to_string()))?;
        lesson.validate(examples)?;
        Ok(lesson)
    }

    fn validate(&self, examples: &[&str]) -> Result<(), LessonError> {
        let invalid = |problem: String| LessonError::Invalid {
            id: self.id.clone(),
            problem,
        };
        if self.id.is_empty() || self.title.trim().is_empty() || self.idea.trim().is_empty() {
            return Err(invalid("a lesson needs an id, a title and an idea".into()));
        }
        if self.steps.is_empty() || self.steps.len() > MAX_LESSON_STEPS {
            return Err(invalid(format!(
                "a lesson has 1 to {MAX_LESSON_STEPS} steps, this one {}",
                self.steps.len()
            )));
        }
        for (k, step) in self.steps.iter().enumerate() {
            let at = |problem: String| invalid(format!("step {}: {problem}", k + 1));
            if step.text.trim().is_empty() {
                return Err(at("its text is empty".into()));
            }
            match &step.action {
                Some(StepAction::LoadExample { example })
                    if !examples.contains(&example.as_str()) =>
                {
                    return Err(at(format!("there is no built-in example {example}")));
                }
                Some(action @ StepAction::Simulate { .. }) => {
                    let spec = action
                        .simulation()
                        .expect("a simulate action")
                        .map_err(at)?;
                    crate::data::generate::simulate(&SimulationSpec {
                        samples: spec.samples.min(20),
                        ..spec
                    })
                    .map_err(|e| at(e.to_string()))?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

impl StepAction {
    /// A simulate action as the worker's [`SimulationSpec`] (None for other actions; `Err` when an
    /// edge or hidden variable names no variable).
    pub fn simulation(&self) -> Option<Result<SimulationSpec, String>> {
        let StepAction::Simulate {
            names,
            edges,
            hidden,
            mechanism,
            rows,
            seed,
        } = self
        else {
            return None;
        };
        let index = |name: &String| {
            names
                .iter()
                .position(|n| n == name)
                .ok_or_else(|| format!("{name} is not one of the variables {}", names.join(", ")))
        };
        Some((|| {
            Ok(SimulationSpec {
                names: names.clone(),
                edges: edges
                    .iter()
                    .map(|(a, b)| Ok((index(a)?, index(b)?)))
                    .collect::<Result<_, String>>()?,
                hidden: hidden.iter().map(index).collect::<Result<_, String>>()?,
                mechanism: *mechanism,
                samples: *rows,
                seed: *seed,
            })
        })())
    }
}

impl StepCheck {
    /// Whether the check holds on `facts`: `Ok(())`, or what is still missing, in words.
    pub fn evaluate(&self, facts: &PageFacts) -> Result<(), String> {
        let edge = |from: &str, to: &str| {
            facts.result.as_ref().is_some_and(|r| {
                let at = |n: &str| r.names.iter().position(|x| x == n);
                match (at(from), at(to)) {
                    (Some(i), Some(j)) => r.edges.contains(&(i, j)),
                    _ => false,
                }
            })
        };
        match self {
            StepCheck::DataLoaded { names } => match &facts.names {
                Some(loaded) if loaded == names => Ok(()),
                _ => Err(format!("load the data with columns {}", names.join(", "))),
            },
            StepCheck::RunFinished => match facts.result {
                Some(_) => Ok(()),
                None => Err("run the search and wait for its result".into()),
            },
            StepCheck::HasEdge { from, to } => {
                if facts.result.is_none() {
                    Err("run the search first".into())
                } else if edge(from, to) {
                    Ok(())
                } else {
                    Err(format!(
                        "the result has no edge {from} → {to}: try another seed or more rows"
                    ))
                }
            }
            StepCheck::NotAdjacent { a, b } => {
                if facts.result.is_none() {
                    Err("run the search first".into())
                } else if edge(a, b) || edge(b, a) {
                    Err(format!("the result still joins {a} and {b}"))
                } else {
                    Ok(())
                }
            }
            StepCheck::CpdagShown => match facts.cpdag_shown {
                true => Ok(()),
                false => Err("show the equivalence class (the CPDAG box under the edges)".into()),
            },
            StepCheck::EdgeExplained => match facts.edge_explained {
                true => Ok(()),
                false => Err("press “Why?” next to an edge of the result".into()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLES: [&str; 3] = ["chain", "fork", "collider"];

    fn lesson(steps: &str) -> String {
        format!(r#"{{"id": "t", "title": "T", "idea": "One idea.", "steps": {steps}}}"#)
    }

    #[test]
    fn a_lesson_reads_and_its_checks_follow_the_page() {
        let text = lesson(
            r#"[
            {"text": "Load it.", "action": {"kind": "load_example", "example": "chain"},
             "check": {"kind": "data_loaded", "names": ["a", "b"]}},
            {"text": "Simulate.", "action": {"kind": "simulate", "names": ["x", "y"], "edges": [["x", "y"]],
             "mechanism": "gpcde", "rows": 300, "seed": 1}},
            {"text": "Run.", "action": {"kind": "use_settings", "preset": "interactive", "method": "exact",
             "fields": [["restarts", "1"]]}, "check": {"kind": "has_edge", "from": "x", "to": "y"}},
            {"text": "Look.", "action": {"kind": "show_cpdag"}, "check": {"kind": "cpdag_shown"}}
        ]"#,
        );
        let l = Lesson::parse(&text, &EXAMPLES).unwrap();
        assert_eq!(l.steps.len(), 4);
        let spec = l.steps[1]
            .action
            .as_ref()
            .unwrap()
            .simulation()
            .unwrap()
            .unwrap();
        assert_eq!((spec.edges.clone(), spec.samples), (vec![(0, 1)], 300));
        let mut facts = PageFacts::default();
        let check = |k: usize, f: &PageFacts| l.steps[k].check.as_ref().unwrap().evaluate(f);
        assert!(check(0, &facts).unwrap_err().contains("a, b"));
        facts.names = Some(vec!["a".into(), "b".into()]);
        assert_eq!(check(0, &facts), Ok(()));
        assert!(check(2, &facts)
            .unwrap_err()
            .contains("run the search first"));
        let result = |edges| ResultFacts {
            names: vec!["x".into(), "y".into()],
            edges,
        };
        facts.result = Some(result(vec![(1, 0)]));
        assert!(check(2, &facts).unwrap_err().contains("no edge x → y"));
        facts.result = Some(result(vec![(0, 1)]));
        assert_eq!(check(2, &facts), Ok(()));
        assert!(check(3, &facts).is_err());
        facts.cpdag_shown = true;
        assert_eq!(check(3, &facts), Ok(()));
        let apart = StepCheck::NotAdjacent {
            a: "y".into(),
            b: "x".into(),
        };
        assert!(apart.evaluate(&facts).unwrap_err().contains("still joins"));
    }

    #[test]
    fn a_bad_lesson_is_refused_with_where_and_why() {
        let refused = |steps: &str| {
            Lesson::parse(&lesson(steps), &EXAMPLES)
                .unwrap_err()
                .to_string()
        };
        assert!(refused("[]").contains("1 to 12 steps"));
        assert!(refused(r#"[{"text": " "}]"#).contains("step 1: its text is empty"));
        assert!(refused(
            r#"[{"text": "a", "action": {"kind": "load_example", "example": "sachs"}}]"#
        )
        .contains("no built-in example sachs"));
        assert!(refused(
            r#"[{"text": "a", "action": {"kind": "simulate", "names": ["x"], "edges": [["x", "z"]],
                "mechanism": "linear", "rows": 50, "seed": 0}}]"#
        )
        .contains("z is not one of the variables x"));
        assert!(refused(
            r#"[{"text": "a", "action": {"kind": "simulate", "names": ["x", "y"], "edges": [["x", "y"], ["y", "x"]],
                "mechanism": "linear", "rows": 50, "seed": 0}}]"#
        )
        .contains("cycle"));
        assert!(refused(r#"[{"text": "a", "colour": "red"}]"#).contains("unknown field"));
        assert!(Lesson::parse("{", &EXAMPLES).is_err());
    }
}
