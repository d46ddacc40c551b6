//! What the run's progress bar shows: the fraction, its text and its state. A stopped run keeps
//! the fraction it had reached when it was stopped (the worker's final snapshot says 1, which
//! would read as "all done").

use super::format_seconds_left;

/// Where the run stands, as the progress bar tells it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RunProgress {
    /// No snapshot yet.
    NotStarted,
    /// Running: the snapshot's fraction done, seconds computed so far and the estimate left.
    Running {
        fraction: f64,
        elapsed: f64,
        remaining: Option<f64>,
    },
    /// Paused at `fraction`.
    Paused { fraction: f64 },
    /// Stopped by the user after reaching `reached` (the last running fraction).
    Stopped { reached: f64, elapsed: f64 },
    /// Ended on its own (done or failed).
    Finished { elapsed: f64 },
}

/// The progress bar's value, text and state code (a CSS class and `data-state`).
#[derive(Debug, Clone, PartialEq)]
pub struct ProgressShown {
    /// In 0 … 1.
    pub fraction: f64,
    pub text: String,
    /// "idle", "running", "paused", "stopped" or "finished".
    pub state: &'static str,
}

/// A fraction in 0 … 1 (NaN and negatives are 0).
fn unit(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// The fraction reached, updated from a snapshot: a running snapshot's `progress` (the only
/// ones that measure the work), anything else keeps `previous`.
pub fn fraction_reached(previous: f64, snapshot_running: bool, progress: f64) -> f64 {
    if snapshot_running {
        unit(progress)
    } else {
        previous
    }
}

/// What the progress bar shows for `run`.
pub fn progress_shown(run: RunProgress) -> ProgressShown {
    match run {
        RunProgress::NotStarted => ProgressShown {
            fraction: 0.0,
            text: "not started".into(),
            state: "idle",
        },
        RunProgress::Running {
            fraction,
            elapsed,
            remaining,
        } => ProgressShown {
            fraction: unit(fraction),
            text: format!(
                "{:.0} % · {} · {:.1} s so far",
                100.0 * unit(fraction),
                format_seconds_left(remaining.unwrap_or(f64::INFINITY)),
                elapsed
            ),
            state: "running",
        },
        RunProgress::Paused { fraction } => ProgressShown {
            fraction: unit(fraction),
            text: format!("{:.0} % · paused", 100.0 * unit(fraction)),
            state: "paused",
        },
        RunProgress::Stopped { reached, elapsed } => {
            let reached = unit(reached);
            // Rounded as the running text is, but a stopped run never reads 100 %.
            let percent = (100.0 * reached).round().min(99.0);
            ProgressShown {
                fraction: reached,
                text: format!("stopped at {percent:.0} % · after {elapsed:.1} s of computing"),
                state: "stopped",
            }
        }
        RunProgress::Finished { elapsed } => ProgressShown {
            fraction: 1.0,
            text: format!("finished in {elapsed:.1} s of computing"),
            state: "finished",
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stopped_run_keeps_the_fraction_it_reached() {
        // Running snapshots move the fraction; the final (stopped) snapshot's 1.0 does not.
        let mut reached = 0.0;
        for (running, progress) in [(true, 0.1), (true, 0.37), (false, 1.0)] {
            reached = fraction_reached(reached, running, progress);
        }
        assert_eq!(reached, 0.37);
        let shown = progress_shown(RunProgress::Stopped {
            reached,
            elapsed: 4.3,
        });
        assert_eq!(shown.fraction, 0.37);
        assert_eq!(shown.state, "stopped");
        assert_eq!(shown.text, "stopped at 37 % · after 4.3 s of computing");
    }

    #[test]
    fn a_stopped_run_never_reads_full_and_bad_fractions_are_clamped() {
        let shown = progress_shown(RunProgress::Stopped {
            reached: 0.998,
            elapsed: 1.0,
        });
        assert!(shown.text.starts_with("stopped at 99 %"), "{}", shown.text);
        assert_eq!(fraction_reached(0.5, true, f64::NAN), 0.0);
        assert_eq!(fraction_reached(0.5, true, 3.0), 1.0);
        assert_eq!(fraction_reached(0.5, true, -1.0), 0.0);
        let shown = progress_shown(RunProgress::Stopped {
            reached: f64::NAN,
            elapsed: 0.0,
        });
        assert_eq!(
            (shown.fraction, shown.text.as_str()),
            (0.0, "stopped at 0 % · after 0.0 s of computing")
        );
    }

    #[test]
    fn the_other_states_read_as_before() {
        let shown = progress_shown(RunProgress::NotStarted);
        assert_eq!((shown.fraction, shown.state), (0.0, "idle"));
        assert_eq!(shown.text, "not started");
        let shown = progress_shown(RunProgress::Paused { fraction: 0.42 });
        assert_eq!(shown.text, "42 % · paused");
        let shown = progress_shown(RunProgress::Finished { elapsed: 12.34 });
        assert_eq!((shown.fraction, shown.state), (1.0, "finished"));
        assert_eq!(shown.text, "finished in 12.3 s of computing");
        let shown = progress_shown(RunProgress::Running {
            fraction: 0.5,
            elapsed: 3.0,
            remaining: Some(3.0),
        });
        assert_eq!(shown.state, "running");
        assert!(shown.text.starts_with("50 % · ") && shown.text.ends_with("3.0 s so far"));
    }
}
