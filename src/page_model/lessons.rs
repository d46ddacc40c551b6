//! Guided lessons as data: a [`Lesson`] is a JSON file (under `www/lessons/`, listed in its
//! `index.json`) with a sequence of steps, each one idea in a few sentences, an optional action
//! the page can do for the student (load an example, simulate a drawn graph, choose settings,
//! state knowledge, show the equivalence class), a task in words and a check the page evaluates
//! against what is on screen ([`PageFacts`]). Adding a lesson is adding a file: the page has no
//! lesson-specific code. Parsing, validation and the checks are plain Rust, tested natively.

use serde::{Deserialize, Serialize};

use crate::base::names::Choice;
use crate::discovery::settings::{Method, Preset};
use crate::generate::{Mechanism, SimulationSpec};

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
    /// States prior knowledge by variable names: forbidden and required edges, and tiers (a
    /// variable in a later tier never causes one in an earlier tier). Replaces what was stated.
    Knowledge {
        #[serde(default)]
        forbid: Vec<(String, String)>,
        #[serde(default)]
        require: Vec<(String, String)>,
        #[serde(default)]
        tiers: Vec<(String, u32)>,
    },
    /// Starts a run with the settings on the page.
    Run,
    /// Shows the result's Markov equivalence class.
    ShowCpdag,
    /// Explains the result's edge from → to by its evidence ("Why?").
    ExplainEdge { from: String, to: String },
    /// Draws the result's edge from → to and its reversal side by side: both directions' fitted
    /// models and the Bayes factor between them.
    CompareDirections { from: String, to: String },
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
    /// An edge and its reversal have been drawn side by side.
    DirectionsCompared,
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
    pub directions_compared: bool,
    /// Runs started on the page so far (a result must come from a run after a step's action).
    pub runs_started: u64,
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
                    crate::generate::simulate(&SimulationSpec {
                        samples: spec.samples.min(20),
                        ..spec
                    })
                    .map_err(|e| at(e.to_string()))?;
                }
                Some(StepAction::UseSettings { fields, .. }) => {
                    if let Some((key, _)) = fields
                        .iter()
                        .find(|(key, _)| !crate::page_model::FIELDS.iter().any(|f| f.key == key))
                    {
                        return Err(at(format!("the settings have no field {key}")));
                    }
                }
                Some(
                    StepAction::ExplainEdge { from, to }
                    | StepAction::CompareDirections { from, to },
                ) if from == to => {
                    return Err(at(format!("{from} → {to} is not an edge")));
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
    /// Whether the check reads the result of a run (which must then be a run started after the
    /// step's action: the settings or knowledge it set must have been used).
    pub fn reads_a_run(&self) -> bool {
        matches!(
            self,
            StepCheck::RunFinished | StepCheck::HasEdge { .. } | StepCheck::NotAdjacent { .. }
        )
    }

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
            StepCheck::EdgeExplained | StepCheck::DirectionsCompared if facts.result.is_none() => {
                Err("run the search first".into())
            }
            StepCheck::EdgeExplained => match facts.edge_explained {
                true => Ok(()),
                false => Err("press “Why?” next to an edge of the result".into()),
            },
            StepCheck::DirectionsCompared => match facts.directions_compared {
                true => Ok(()),
                false => Err("draw both directions of an edge (the button under “Why?”)".into()),
            },
        }
    }
}

impl StepAction {
    /// The words on the step's button.
    pub fn label(&self) -> String {
        let pairs = |edges: &[(String, String)]| {
            edges
                .iter()
                .map(|(a, b)| format!("{a} → {b}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        match self {
            StepAction::LoadExample { example } => format!("Load the example {example}"),
            StepAction::Simulate {
                edges,
                hidden,
                mechanism,
                rows,
                ..
            } => {
                let graph = if edges.is_empty() {
                    "a graph without edges".to_string()
                } else {
                    pairs(edges)
                };
                let hidden = if hidden.is_empty() {
                    String::new()
                } else {
                    format!(", {} hidden", hidden.join(", "))
                };
                format!(
                    "Simulate {rows} rows from {graph} ({}{hidden})",
                    mechanism.as_str()
                )
            }
            StepAction::UseSettings { preset, method, .. } => {
                let mut parts = Vec::new();
                if let Some(p) = preset {
                    parts.push(format!("the {} preset", p.name()));
                }
                if let Some(m) = method {
                    parts.push(format!("the {} method", m.name()));
                }
                if parts.is_empty() {
                    "Use these settings".to_string()
                } else {
                    format!("Use {}", parts.join(" and "))
                }
            }
            StepAction::Knowledge {
                forbid,
                require,
                tiers,
            } => {
                let mut parts = Vec::new();
                if !forbid.is_empty() {
                    parts.push(format!("forbid {}", pairs(forbid)));
                }
                if !require.is_empty() {
                    parts.push(format!("require {}", pairs(require)));
                }
                if !tiers.is_empty() {
                    let tiers: Vec<String> =
                        tiers.iter().map(|(n, t)| format!("{n} {t}")).collect();
                    parts.push(format!("set the tiers {}", tiers.join(", ")));
                }
                if parts.is_empty() {
                    parts.push("clear the knowledge".into());
                }
                let mut text = parts.join(", ");
                if let Some(first) = text.get(..1) {
                    text = first.to_uppercase() + &text[1..];
                }
                text
            }
            StepAction::Run => "Start the run".to_string(),
            StepAction::ShowCpdag => "Show the equivalence class".to_string(),
            StepAction::ExplainEdge { from, to } => format!("Why {from} → {to}?"),
            StepAction::CompareDirections { from, to } => {
                format!("Draw {from} → {to} and {to} → {from} side by side")
            }
        }
    }

    /// The result's edge an explain or compare action is about, as (cause, effect) indices, or
    /// why it cannot be asked now. None for other actions.
    pub fn result_edge(
        &self,
        result: Option<&ResultFacts>,
    ) -> Option<Result<(usize, usize), String>> {
        let (StepAction::ExplainEdge { from, to } | StepAction::CompareDirections { from, to }) =
            self
        else {
            return None;
        };
        let Some(result) = result else {
            return Some(Err("run the search first".into()));
        };
        let at = |n: &String| result.names.iter().position(|x| x == n);
        Some(match (at(from), at(to)) {
            (Some(i), Some(j)) if result.edges.contains(&(i, j)) => Ok((i, j)),
            (Some(_), Some(_)) => Err(format!(
                "the result has no edge {from} → {to} to explain: run again, or with another seed"
            )),
            _ => Err(format!("the result has no variables {from} and {to}")),
        })
    }
}

/// Where a student is in an open lesson. The page keeps one; its methods are the only way the
/// step changes, so what the lesson panel shows follows from this and the page's facts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LessonProgress {
    /// The step shown (0-based).
    pub step: usize,
    /// Whether the step's action was carried out since the step was opened. A step with an action
    /// counts as done only after it: a result left from an earlier step must not pass its check.
    pub action_done: bool,
    /// [`PageFacts::runs_started`] when the action was carried out: a check that reads a run
    /// needs a later one.
    pub runs_at_action: u64,
}

/// How a step stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepStatus {
    /// The check holds (or there is none): the student may go on.
    Done,
    /// The step's button has not been pressed yet.
    ActionPending,
    /// What is still missing, in words.
    Waiting(String),
}

impl StepStatus {
    pub fn code(&self) -> &'static str {
        match self {
            StepStatus::Done => "done",
            StepStatus::ActionPending => "action",
            StepStatus::Waiting(_) => "waiting",
        }
    }
}

impl LessonProgress {
    /// How the current step of `lesson` stands on `facts`.
    pub fn status(&self, lesson: &Lesson, facts: &PageFacts) -> StepStatus {
        let Some(step) = lesson.steps.get(self.step) else {
            return StepStatus::Done;
        };
        if step.action.is_some() && !self.action_done {
            return StepStatus::ActionPending;
        }
        if let Some(check) = &step.check {
            if step.action.is_some()
                && check.reads_a_run()
                && facts.runs_started <= self.runs_at_action
            {
                return StepStatus::Waiting(
                    "run the search now (the Run button), after this step's change".into(),
                );
            }
        }
        match step.check.as_ref().map(|c| c.evaluate(facts)) {
            None | Some(Ok(())) => StepStatus::Done,
            Some(Err(missing)) => StepStatus::Waiting(missing),
        }
    }

    /// Records that the step's action was carried out, `runs_started` runs into the page's life
    /// (read before the action: an action that starts a run counts that run as later).
    pub fn action_carried_out(&mut self, runs_started: u64) {
        self.action_done = true;
        self.runs_at_action = runs_started;
    }

    /// Goes to the next step when the current one is done; returns whether it moved.
    pub fn next(&mut self, lesson: &Lesson, facts: &PageFacts) -> bool {
        if self.step + 1 >= lesson.steps.len() || self.status(lesson, facts) != StepStatus::Done {
            return false;
        }
        *self = LessonProgress {
            step: self.step + 1,
            ..LessonProgress::default()
        };
        true
    }

    /// Goes back one step (its action to be carried out again).
    pub fn back(&mut self) {
        *self = LessonProgress {
            step: self.step.saturating_sub(1),
            ..LessonProgress::default()
        };
    }

    /// Whether the whole lesson is done: its last step is shown and done.
    pub fn completed(&self, lesson: &Lesson, facts: &PageFacts) -> bool {
        self.step + 1 == lesson.steps.len() && self.status(lesson, facts) == StepStatus::Done
    }
}

/// One Markov equivalence class of an exact posterior as a lesson shows it: its probability,
/// its CPDAG in words, and its member DAGs with theirs.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassLine {
    pub probability: f64,
    /// The CPDAG: "A → B, B — C" ("no edges" for the empty graph).
    pub cpdag: String,
    /// (edges in words, probability) of each member DAG, most probable first.
    pub members: Vec<(String, f64)>,
}

/// The `max_classes` most probable classes of `posterior`, each with every member DAG (a class
/// over five variables has at most a few dozen), for a lesson's summary of the exact posterior.
pub fn posterior_classes(
    posterior: &crate::discovery::exact::GraphPosterior,
    names: &[String],
    max_classes: usize,
) -> Vec<ClassLine> {
    let name = |i: usize| {
        names
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("X{}", i + 1))
    };
    let words = |parts: Vec<String>| {
        if parts.is_empty() {
            "no edges".to_string()
        } else {
            parts.join(", ")
        }
    };
    posterior
        .classes
        .iter()
        .take(max_classes)
        .map(|class| {
            let mut members: Vec<(String, f64)> = class
                .members
                .iter()
                .filter_map(|&g| posterior.graphs.get(g))
                .map(|g| {
                    let edges = g
                        .edges
                        .iter()
                        .map(|&(a, b)| format!("{} → {}", name(a), name(b)))
                        .collect();
                    (words(edges), g.probability)
                })
                .collect();
            members.sort_by(|a, b| b.1.total_cmp(&a.1));
            let cpdag = class
                .directed
                .iter()
                .map(|&(a, b)| format!("{} → {}", name(a), name(b)))
                .chain(
                    class
                        .undirected
                        .iter()
                        .map(|&(a, b)| format!("{} — {}", name(a), name(b))),
                )
                .collect();
            ClassLine {
                probability: class.probability,
                cpdag: words(cpdag),
                members,
            }
        })
        .collect()
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
        assert!(refused(
            r#"[{"text": "a", "action": {"kind": "use_settings", "fields": [["colour", "red"]]}}]"#
        )
        .contains("step 1: the settings have no field colour"));
        assert!(refused(
            r#"[{"text": "a", "action": {"kind": "explain_edge", "from": "x", "to": "x"}}]"#
        )
        .contains("x → x is not an edge"));
        assert!(Lesson::parse("{", &EXAMPLES).is_err());
    }

    #[test]
    fn a_step_with_an_action_counts_only_after_it_and_next_waits_for_the_check() {
        let text = lesson(
            r#"[
            {"text": "Simulate.", "action": {"kind": "simulate", "names": ["x", "y"], "edges": [["x", "y"]],
             "mechanism": "gp", "rows": 100, "seed": 0}, "check": {"kind": "run_finished"}},
            {"text": "Read."},
            {"text": "Compare.", "action": {"kind": "compare_directions", "from": "x", "to": "y"},
             "check": {"kind": "directions_compared"}}
        ]"#,
        );
        let l = Lesson::parse(&text, &EXAMPLES).unwrap();
        let mut facts = PageFacts {
            result: Some(ResultFacts {
                names: vec!["x".into(), "y".into()],
                edges: vec![(0, 1)],
            }),
            runs_started: 2,
            ..PageFacts::default()
        };
        let mut progress = LessonProgress::default();
        // A result left from before does not pass a step whose button was not pressed,
        assert_eq!(progress.status(&l, &facts), StepStatus::ActionPending);
        assert!(!progress.next(&l, &facts));
        // nor one from a run before it was pressed.
        progress.action_carried_out(facts.runs_started);
        assert!(
            matches!(progress.status(&l, &facts), StepStatus::Waiting(w) if w.contains("run the search now"))
        );
        facts.runs_started = 3;
        assert_eq!(progress.status(&l, &facts), StepStatus::Done);
        assert!(progress.next(&l, &facts));
        assert_eq!(
            progress.status(&l, &facts).code(),
            "done",
            "reading is enough"
        );
        assert!(progress.next(&l, &facts));
        progress.action_carried_out(facts.runs_started);
        assert!(
            matches!(progress.status(&l, &facts), StepStatus::Waiting(w) if w.contains("both directions"))
        );
        assert!(!progress.completed(&l, &facts));
        facts.directions_compared = true;
        assert!(progress.completed(&l, &facts));
        assert!(!progress.next(&l, &facts), "the last step has no next");
        progress.back();
        assert_eq!(
            progress,
            LessonProgress {
                step: 1,
                action_done: false,
                runs_at_action: 0
            }
        );
        // The compare action finds its edge in the result, or says why not.
        let compare = l.steps[2].action.as_ref().unwrap();
        assert_eq!(compare.result_edge(facts.result.as_ref()), Some(Ok((0, 1))));
        assert!(compare
            .result_edge(None)
            .unwrap()
            .unwrap_err()
            .contains("run the search"));
        let reversed = ResultFacts {
            names: vec!["x".into(), "y".into()],
            edges: vec![(1, 0)],
        };
        assert!(compare
            .result_edge(Some(&reversed))
            .unwrap()
            .unwrap_err()
            .contains("no edge x → y"));
        assert_eq!(l.steps[0].action.as_ref().unwrap().result_edge(None), None);
        // An explanation is of a result: without one the check asks for a run.
        let no_result = PageFacts {
            edge_explained: true,
            ..PageFacts::default()
        };
        assert_eq!(
            StepCheck::EdgeExplained.evaluate(&no_result),
            Err("run the search first".into())
        );
    }

    #[test]
    fn every_action_says_what_its_button_does() {
        let label = |json: &str| serde_json::from_str::<StepAction>(json).unwrap().label();
        assert_eq!(
            label(r#"{"kind": "load_example", "example": "chain"}"#),
            "Load the example chain"
        );
        assert_eq!(
            label(
                r#"{"kind": "simulate", "names": ["Z", "X", "Y"], "edges": [["Z", "X"], ["Z", "Y"]],
                "hidden": ["Z"], "mechanism": "gp", "rows": 500, "seed": 0}"#
            ),
            "Simulate 500 rows from Z → X, Z → Y (gp, Z hidden)"
        );
        assert_eq!(
            label(r#"{"kind": "use_settings", "preset": "interactive", "method": "exact"}"#),
            "Use the interactive preset and the exact method"
        );
        assert_eq!(
            label(r#"{"kind": "knowledge", "forbid": [["A", "C"]], "require": [["A", "B"]]}"#),
            "Forbid A → C, require A → B"
        );
        assert_eq!(
            label(r#"{"kind": "knowledge", "tiers": [["A", 1], ["B", 2]]}"#),
            "Set the tiers A 1, B 2"
        );
        assert_eq!(
            label(r#"{"kind": "explain_edge", "from": "A", "to": "B"}"#),
            "Why A → B?"
        );
        assert_eq!(
            label(r#"{"kind": "show_cpdag"}"#),
            "Show the equivalence class"
        );
    }

    /// Two variables: the empty graph is a class of its own, X → Y and Y → X are one class whose
    /// members keep their own probabilities.
    #[test]
    fn the_exact_posterior_is_summarised_by_class_with_every_member() {
        use crate::discovery::exact::{enumerate_posterior, GraphPrior};
        // F(X | ∅) = -10, F(X | Y) = -9; F(Y | ∅) = -10, F(Y | X) = -7.
        let families = vec![
            vec![(0, -10.0), (0b10, -9.0)],
            vec![(0, -10.0), (0b01, -7.0)],
        ];
        let posterior = enumerate_posterior(&families, GraphPrior::Uniform).unwrap();
        let names = ["X".to_string(), "Y".to_string()];
        let lines = posterior_classes(&posterior, &names, 5);
        assert_eq!(lines.len(), 2);
        let (e3, e1, e0) = (3f64.exp(), 1f64.exp(), 1.0);
        let z = e3 + e1 + e0;
        assert!((lines[0].probability - (e3 + e1) / z).abs() < 1e-12);
        assert_eq!(lines[0].cpdag, "X — Y");
        assert_eq!(lines[0].members[0].0, "X → Y");
        assert!((lines[0].members[0].1 - e3 / z).abs() < 1e-12);
        assert_eq!(lines[0].members[1].0, "Y → X");
        assert_eq!(
            (lines[1].cpdag.as_str(), lines[1].members.len()),
            ("no edges", 1)
        );
        assert_eq!(posterior_classes(&posterior, &names, 1).len(), 1);
    }
}
