//! The lesson files under `www/lessons/` (the ones the page lists): every file in `index.json`
//! reads and validates (its examples exist, its simulations can be drawn), its id is its file's
//! stem, and the five lessons issue 15 asks for are there.

use std::path::Path;

use occam::page_model::lessons::{Lesson, StepAction};

fn lessons_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/www/lessons"))
}

/// The built-in examples' stems, from the files the page serves.
fn example_stems() -> Vec<String> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/www/examples"));
    let mut stems: Vec<String> = std::fs::read_dir(dir)
        .expect("www/examples")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let stem = name.strip_suffix(".csv")?;
            (!stem.ends_with(".truth")).then(|| stem.to_string())
        })
        .collect();
    stems.sort();
    stems
}

#[test]
fn every_listed_lesson_reads_and_the_five_topics_are_there() {
    let index: Vec<String> = serde_json::from_str(
        &std::fs::read_to_string(lessons_dir().join("index.json")).expect("index.json"),
    )
    .expect("index.json is a list of lesson ids");
    let stems = example_stems();
    let examples: Vec<&str> = stems.iter().map(String::as_str).collect();
    let mut lessons = Vec::new();
    for id in &index {
        let text = std::fs::read_to_string(lessons_dir().join(format!("{id}.json")))
            .unwrap_or_else(|e| panic!("{id}.json: {e}"));
        let lesson = Lesson::parse(&text, &examples).unwrap_or_else(|e| panic!("{id}.json: {e}"));
        assert_eq!(&lesson.id, id, "a lesson's id is its file's stem");
        lessons.push(lesson);
    }
    // Every file in the folder is listed (a lesson left out of the index would never show).
    let mut files: Vec<String> = std::fs::read_dir(lessons_dir())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n != "index.json")
        .collect();
    files.sort();
    let mut listed: Vec<String> = index.iter().map(|id| format!("{id}.json")).collect();
    listed.sort();
    assert_eq!(files, listed);
    // The five: (a) independence, (b) cause or effect, (c) the penalty, (d) knowledge,
    // (e) failures.
    for id in [
        "independence",
        "cause-or-effect",
        "acyclicity",
        "knowledge",
        "failures",
    ] {
        assert!(index.iter().any(|i| i == id), "lesson {id} is missing");
    }
    // Each lesson gives the student something to do and check.
    for lesson in &lessons {
        assert!(
            lesson
                .steps
                .iter()
                .any(|s| s.check.is_some() && s.task.is_some()),
            "{}",
            lesson.id
        );
        for step in &lesson.steps {
            if let Some(action @ StepAction::Simulate { .. }) = &step.action {
                let spec = action.simulation().unwrap().unwrap();
                assert!(
                    spec.samples >= 30,
                    "{}: too few rows to teach with",
                    lesson.id
                );
            }
        }
    }
}
