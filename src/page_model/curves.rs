//! The objective curves' history, gathered from snapshots: one series per restart (the page draws
//! the restart the snapshot shows) and where each phase began.

use crate::discovery::continuous::{Phase, Terms};
use crate::engine::Snapshot;

/// One sample of the objective curves.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurvePoint {
    pub iteration: usize,
    /// The evidence bound (ELBO, nats, whole-data scale).
    pub bound: f64,
    /// h(A) = |λ_max(A)|.
    pub h: f64,
    pub gamma: f64,
}

/// Points kept per restart before thinning: every other point is dropped when the series grows
/// past this, so a long run keeps its whole shape in bounded memory.
const MAX_POINTS: usize = 4000;

/// Curves of every restart.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    series: Vec<Vec<CurvePoint>>,
    phases: Vec<Vec<(usize, Phase)>>,
}

impl History {
    /// Adds what a snapshot says: every traced iteration, then each restart's current state.
    pub fn record(&mut self, snapshot: &Snapshot) {
        for p in &snapshot.trace {
            self.add(p.restart, p.iteration, p.phase, Some(p.terms));
        }
        for r in &snapshot.restarts {
            self.add(r.index, r.iteration, r.phase, r.terms);
        }
    }

    fn add(&mut self, restart: usize, iteration: usize, phase: Phase, terms: Option<Terms>) {
        if self.series.len() <= restart {
            self.series.resize(restart + 1, Vec::new());
            self.phases.resize(restart + 1, Vec::new());
        }
        let phases = &mut self.phases[restart];
        if phases.last().map(|&(_, p)| p) != Some(phase) {
            phases.push((iteration, phase));
        }
        let Some(t) = terms else { return };
        let series = &mut self.series[restart];
        if series.last().is_some_and(|p| p.iteration >= iteration) {
            return;
        }
        series.push(CurvePoint {
            iteration,
            bound: t.elbo,
            h: t.h,
            gamma: t.gamma,
        });
        if series.len() > MAX_POINTS {
            let last = series.pop();
            let mut k = 0;
            series.retain(|_| {
                k += 1;
                k % 2 == 1
            });
            series.extend(last);
        }
    }

    /// The points of restart `r`.
    pub fn points(&self, r: usize) -> &[CurvePoint] {
        self.series.get(r).map_or(&[], Vec::as_slice)
    }

    /// Where each phase of restart `r` began: (iteration, phase name).
    pub fn phase_starts(&self, r: usize) -> Vec<(usize, String)> {
        self.phases.get(r).map_or(Vec::new(), |p| {
            p.iter()
                .filter(|(_, phase)| !matches!(phase, Phase::Done | Phase::Failed))
                .map(|&(i, phase)| (i, phase_name(phase).to_string()))
                .collect()
        })
    }
}

/// A phase's short name, as the banner and the chart show it.
pub fn phase_name(phase: Phase) -> &'static str {
    match phase {
        Phase::Initialising => "starting",
        Phase::WarmUp => "warm-up",
        Phase::Acyclic => "acyclic",
        Phase::Thresholding => "thresholding",
        Phase::CoolDown => "cool-down",
        Phase::Pruning => "pruning",
        Phase::Families => "families",
        Phase::Done => "done",
        Phase::Failed => "failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{RestartProgress, Status, TracePoint};

    fn snapshot(iteration: usize, phase: Phase) -> Snapshot {
        let terms = Terms {
            elbo: -(iteration as f64),
            log_prior: 0.0,
            h: 1.0,
            h_pairs: 0.0,
            gamma: iteration as f64,
            objective: 0.0,
        };
        Snapshot {
            status: Status::Running,
            restart: 0,
            phase,
            phase_text: String::new(),
            iteration,
            terms: Some(terms),
            adjacency: vec![],
            edges: vec![],
            restarts: vec![RestartProgress {
                index: 1,
                phase,
                iteration,
                terms: Some(terms),
                score: None,
                failure: None,
            }],
            faults: vec![],
            trace: vec![],
            elapsed_seconds: 0.0,
            remaining_seconds: Some(0.0),
            progress: 0.0,
            exact: None,
        }
    }

    #[test]
    fn points_and_phase_starts_are_recorded_once() {
        let mut h = History::default();
        h.record(&snapshot(5, Phase::WarmUp));
        h.record(&snapshot(5, Phase::WarmUp));
        h.record(&snapshot(9, Phase::Acyclic));
        h.record(&snapshot(12, Phase::Done));
        assert!(h.points(0).is_empty());
        let its: Vec<usize> = h.points(1).iter().map(|p| p.iteration).collect();
        assert_eq!(its, vec![5, 9, 12]);
        assert_eq!(h.points(1)[1].gamma, 9.0);
        assert_eq!(
            h.phase_starts(1),
            vec![(5, "warm-up".to_string()), (9, "acyclic".to_string())]
        );
    }

    #[test]
    fn long_histories_are_thinned_but_keep_the_ends() {
        let mut h = History::default();
        for i in 1..=3 * MAX_POINTS {
            h.record(&snapshot(i, Phase::WarmUp));
        }
        let p = h.points(1);
        assert!(p.len() <= MAX_POINTS + 1, "{}", p.len());
        assert_eq!(p[0].iteration, 1);
        assert_eq!(p.last().unwrap().iteration, 3 * MAX_POINTS);
        assert!(p.windows(2).all(|w| w[1].iteration > w[0].iteration));
    }

    #[test]
    fn traced_iterations_fill_the_curve_between_snapshots() {
        let mut h = History::default();
        let mut snap = snapshot(10, Phase::Acyclic);
        let terms = snap.terms.unwrap();
        snap.trace = (1..=10)
            .map(|i| TracePoint {
                restart: 1,
                iteration: i,
                phase: if i < 4 { Phase::WarmUp } else { Phase::Acyclic },
                terms: Terms {
                    gamma: i as f64,
                    ..terms
                },
            })
            .collect();
        h.record(&snap);
        let its: Vec<usize> = h.points(1).iter().map(|p| p.iteration).collect();
        assert_eq!(its, (1..=10).collect::<Vec<_>>());
        assert_eq!(
            h.phase_starts(1),
            vec![(1, "warm-up".to_string()), (4, "acyclic".to_string())]
        );
    }
}
