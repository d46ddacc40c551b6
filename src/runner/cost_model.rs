//! The measured cost model that decides where a kind of work runs when a GPU is present: the
//! first jobs of the kind are split between the device and the host, each timed, and from then on
//! the kind goes where its measured cost per unit of work is lower ([`PlacementProbe`]). The
//! decision and the figures behind it are reported ([`DeviceChoice`]), so a user sees why the
//! run computes where it does.
//!
//! Why measured, not a fixed threshold: whether a GPU beats the host for a family's fits depends
//! on the card, the driver's submission latency, the host's cores and the family's size; a
//! threshold chosen on one machine is wrong on the next (on lavapipe the host is faster at every
//! size, on an H200 the device's Ψ2 sums are ~10³× the host's speed).
//!
//! Owns: the probe's samples and decision. Knows nothing of devices or jobs beyond their sizes.

use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};

/// Jobs timed on each side before the choice is made.
pub const PROBE_JOBS_PER_SIDE: usize = 2;

/// Where a kind of work was placed, and the measurements that placed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceChoice {
    /// The work this is about ("family fits").
    pub work: String,
    /// "GPU" or "CPU".
    pub chosen: String,
    /// Why: measured, or forced (a test hook, `--backend` options).
    pub reason: String,
    /// Seconds per unit of work on the device's path and on the host's, over the probe's jobs
    /// (for family fits a unit is 10⁶ Ψ2 terms: an evaluation has N·M² per model input); None
    /// when a side was not measured.
    pub device_seconds_per_unit: Option<f64>,
    pub cpu_seconds_per_unit: Option<f64>,
    /// Jobs timed on each side.
    pub device_jobs: usize,
    pub cpu_jobs: usize,
}

/// Where a job goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Device,
    Host,
}

/// Seconds and units of work summed over timed jobs.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Samples {
    jobs: usize,
    seconds: f64,
    units: f64,
}

impl Samples {
    fn add(&mut self, seconds: f64, units: f64) {
        self.jobs += 1;
        self.seconds += seconds;
        self.units += units;
    }

    /// Σ seconds / Σ units: a large job weighs as much as its work.
    fn per_unit(&self) -> Option<f64> {
        (self.jobs > 0 && self.units > 0.0).then(|| self.seconds / self.units)
    }
}

#[derive(Debug, Default)]
struct ProbeState {
    device: Samples,
    host: Samples,
    decided: Option<Side>,
    /// (device jobs, host jobs) timed when the choice was made.
    decided_on: (usize, usize),
    /// The host's longest probe job when the device was given up before its probe jobs ended.
    abandoned: Option<f64>,
    /// Jobs run on (device, host) and not timed: each side's first [`PlacementProbe::warm_up`].
    warming: (usize, usize),
}

/// How many times the host's longest probe job the device's probe jobs may run before the device
/// is given up (its jobs are then computed on the host).
pub const PROBE_PATIENCE: f64 = 4.0;

/// The probe of one kind of work: forced to a side, or split between both until each has
/// [`PROBE_JOBS_PER_SIDE`] timed jobs and then placed on the cheaper one for good.
#[derive(Debug)]
pub struct PlacementProbe {
    work: &'static str,
    forced: Option<Side>,
    /// Jobs on each side run before timing starts (see [`PlacementProbe::with_warm_up`]).
    warm_up: usize,
    state: Mutex<ProbeState>,
}

impl PlacementProbe {
    /// A probe of `work` that measures before it decides.
    pub fn measured(work: &'static str) -> Self {
        Self {
            work,
            forced: None,
            warm_up: 0,
            state: Mutex::new(ProbeState::default()),
        }
    }

    /// The same probe, leaving each side's first `jobs` untimed: for work whose first job on a
    /// side pays once for what later jobs reuse (a device's pipelines compiled and buffers made
    /// on the first submission), which would otherwise be charged to its per-unit cost.
    pub fn with_warm_up(self, jobs: usize) -> Self {
        Self {
            warm_up: jobs,
            ..self
        }
    }

    /// A probe of `work` that always places it on `side` (still timing what runs, for the
    /// report).
    pub fn forced(work: &'static str, side: Side) -> Self {
        Self {
            forced: Some(side),
            ..Self::measured(work)
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ProbeState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Where a job goes: the forced side, the decided one, or while probing the side `parity`
    /// picks (a property of the job, so the same job goes to the same side however often it is
    /// asked, and a batch's jobs are spread over both).
    pub fn side(&self, parity: bool) -> Side {
        if let Some(side) = self.forced.or(self.state().decided) {
            return side;
        }
        if parity {
            Side::Device
        } else {
            Side::Host
        }
    }

    /// Where the next job goes when a whole batch is placed at once: the forced or decided side,
    /// else while probing the side with fewer jobs so far, the device first (so the batches
    /// alternate: device, host, device, …, until each side has its warm-up and timed jobs).
    pub fn next_side(&self) -> Side {
        if let Some(side) = self.forced.or(self.state().decided) {
            return side;
        }
        let state = self.state();
        let (device, host) = (
            state.device.jobs + state.warming.0,
            state.host.jobs + state.warming.1,
        );
        if device <= host {
            Side::Device
        } else {
            Side::Host
        }
    }

    /// How many more jobs may go to the device in the next batch: all while the probe is forced
    /// or decided, else what the probe still lacks (so a slow device holds a batch up by at most
    /// [`PROBE_JOBS_PER_SIDE`] jobs).
    pub fn device_jobs_allowed(&self) -> usize {
        let state = self.state();
        match self.forced.or(state.decided) {
            Some(_) => usize::MAX,
            None => PROBE_JOBS_PER_SIDE.saturating_sub(state.device.jobs),
        }
    }

    /// Records a job that took `seconds` for `units` of work on `side`, and decides once both
    /// sides have their probe's jobs: the device when its cost per unit is lower.
    pub fn record(&self, side: Side, seconds: f64, units: f64) {
        if !(seconds.is_finite() && seconds >= 0.0 && units.is_finite() && units > 0.0) {
            return;
        }
        let mut state = self.state();
        let warming = match side {
            Side::Device => &mut state.warming.0,
            Side::Host => &mut state.warming.1,
        };
        if *warming < self.warm_up {
            *warming += 1;
            return;
        }
        match side {
            Side::Device => state.device.add(seconds, units),
            Side::Host => state.host.add(seconds, units),
        }
        if self.forced.is_none()
            && state.decided.is_none()
            && state.device.jobs >= PROBE_JOBS_PER_SIDE
            && state.host.jobs >= PROBE_JOBS_PER_SIDE
        {
            let (device, host) = (state.device.per_unit(), state.host.per_unit());
            state.decided = Some(match (device, host) {
                (Some(d), Some(h)) if d < h => Side::Device,
                _ => Side::Host,
            });
            state.decided_on = (state.device.jobs, state.host.jobs);
        }
    }

    /// The side the kind goes to for good (forced or decided); None while probing.
    pub fn placed(&self) -> Option<Side> {
        self.forced.or(self.state().decided)
    }

    /// Whether the probe is still measuring (neither forced nor decided).
    pub fn probing(&self) -> bool {
        self.forced.is_none() && self.state().decided.is_none()
    }

    /// Gives the device up while probing: a probe job on it ran past [`PROBE_PATIENCE`] times
    /// the host's longest job (`host_seconds`). The kind goes to the host from now on.
    pub fn abandon_device(&self, host_seconds: f64) {
        let mut state = self.state();
        if self.forced.is_none() && state.decided.is_none() {
            state.decided = Some(Side::Host);
            state.decided_on = (state.device.jobs, state.host.jobs);
            state.abandoned = Some(host_seconds);
        }
    }

    /// The choice so far, with its figures; None before any job of the kind was timed.
    pub fn choice(&self) -> Option<DeviceChoice> {
        let state = self.state();
        if state.device.jobs + state.host.jobs == 0 {
            return None;
        }
        let (device, host) = (state.device.per_unit(), state.host.per_unit());
        let figures = |d: Option<f64>, h: Option<f64>| match (d, h) {
            (Some(d), Some(h)) => {
                format!("{:.3} ms on the GPU, {:.3} ms on the CPU", d * 1e3, h * 1e3)
            }
            _ => "not both measured".into(),
        };
        let (chosen, reason) = match (self.forced, state.decided) {
            (Some(side), _) => (side, "forced (not measured)".to_string()),
            (None, Some(side)) if state.abandoned.is_some() => {
                let host = state.abandoned.unwrap_or_default();
                (
                    side,
                    format!(
                        "a GPU probe job ran past {PROBE_PATIENCE}× the CPU's longest ({host:.2} \
                         s): the GPU was given up, and its probe jobs computed on the CPU"
                    ),
                )
            }
            (None, Some(side)) => (
                side,
                format!(
                    "measured on {} GPU and {} CPU jobs, per unit of work: {}",
                    state.decided_on.0,
                    state.decided_on.1,
                    figures(device, host)
                ),
            ),
            (None, None) => (
                Side::Host,
                format!(
                    "still measuring ({} GPU and {} CPU jobs of {PROBE_JOBS_PER_SIDE} each timed)",
                    state.device.jobs, state.host.jobs
                ),
            ),
        };
        Some(DeviceChoice {
            work: self.work.into(),
            chosen: match chosen {
                Side::Device => "GPU",
                Side::Host => "CPU",
            }
            .into(),
            reason,
            device_seconds_per_unit: device,
            cpu_seconds_per_unit: host,
            device_jobs: state.device.jobs,
            cpu_jobs: state.host.jobs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_splits_by_parity_then_keeps_the_cheaper_side() {
        let probe = PlacementProbe::measured("family fits");
        assert_eq!(probe.device_jobs_allowed(), PROBE_JOBS_PER_SIDE);
        assert_eq!(probe.side(true), Side::Device);
        assert_eq!(probe.side(false), Side::Host);
        assert!(probe.choice().is_none());
        // The device costs 2 s per unit, the host 1 s: after two jobs each, the host.
        probe.record(Side::Device, 4.0, 2.0);
        probe.record(Side::Host, 1.0, 1.0);
        probe.record(Side::Device, 2.0, 1.0);
        assert_eq!(
            probe.side(true),
            Side::Device,
            "undecided with one host job"
        );
        probe.record(Side::Host, 3.0, 3.0);
        assert_eq!(probe.side(true), Side::Host);
        assert_eq!(probe.side(false), Side::Host);
        let choice = probe.choice().unwrap();
        assert_eq!(choice.chosen, "CPU");
        assert_eq!(choice.device_seconds_per_unit, Some(2.0));
        assert_eq!(choice.cpu_seconds_per_unit, Some(1.0));
        assert!(
            choice.reason.contains("2000.000 ms on the GPU"),
            "{}",
            choice.reason
        );
        assert_eq!(probe.device_jobs_allowed(), usize::MAX);
        // The decision stands whatever is timed later, and says what it was made on.
        probe.record(Side::Host, 100.0, 1.0);
        assert_eq!(probe.side(true), Side::Host);
        let reason = probe.choice().unwrap().reason;
        assert!(reason.contains("2 GPU and 2 CPU jobs"), "{reason}");
    }

    #[test]
    fn a_faster_device_wins_and_a_forced_side_is_kept() {
        let probe = PlacementProbe::measured("family fits");
        for _ in 0..PROBE_JOBS_PER_SIDE {
            probe.record(Side::Device, 1.0, 10.0);
            probe.record(Side::Host, 1.0, 1.0);
        }
        assert_eq!(probe.side(false), Side::Device);
        assert_eq!(probe.choice().unwrap().chosen, "GPU");

        let forced = PlacementProbe::forced("family fits", Side::Device);
        for _ in 0..5 {
            forced.record(Side::Device, 10.0, 1.0);
        }
        assert_eq!(forced.side(false), Side::Device);
        let choice = forced.choice().unwrap();
        assert_eq!((choice.chosen.as_str(), choice.cpu_jobs), ("GPU", 0));
        assert!(choice.reason.starts_with("forced"));
    }

    #[test]
    fn a_device_given_up_while_probing_sends_the_rest_to_the_host() {
        let probe = PlacementProbe::measured("family fits");
        assert!(probe.probing());
        probe.record(Side::Host, 1.0, 1.0);
        probe.abandon_device(2.0);
        assert!(!probe.probing());
        assert_eq!(probe.side(true), Side::Host);
        let choice = probe.choice().unwrap();
        assert_eq!(choice.chosen, "CPU");
        assert!(choice.reason.contains("(2.00 s)"), "{}", choice.reason);
        // A forced probe is never given up.
        let forced = PlacementProbe::forced("family fits", Side::Device);
        forced.abandon_device(2.0);
        assert_eq!(forced.side(false), Side::Device);
    }

    #[test]
    fn whole_batches_alternate_sides_and_each_sides_warm_up_is_not_timed() {
        let probe = PlacementProbe::measured("collapsed search").with_warm_up(1);
        let mut sides = Vec::new();
        // The device's first batch is slow (its pipelines are made) and untimed; then it is
        // twice as fast per unit as the host.
        let mut device_batches = 0;
        while probe.probing() {
            let side = probe.next_side();
            sides.push(side);
            match side {
                Side::Device => {
                    let seconds = if device_batches == 0 { 100.0 } else { 1.0 };
                    device_batches += 1;
                    probe.record(side, seconds, 2.0);
                }
                Side::Host => probe.record(side, 1.0, 1.0),
            }
            assert!(sides.len() <= 2 * (PROBE_JOBS_PER_SIDE + 1), "{sides:?}");
        }
        use Side::{Device as D, Host as H};
        assert_eq!(sides, vec![D, H, D, H, D, H]);
        let choice = probe.choice().unwrap();
        assert_eq!(choice.chosen, "GPU", "{}", choice.reason);
        assert_eq!((choice.device_jobs, choice.cpu_jobs), (2, 2));
        assert_eq!(choice.device_seconds_per_unit, Some(0.5));
        assert_eq!(probe.next_side(), Side::Device);
        // Without a warm-up the slow first batch would have decided for the host.
        let cold = PlacementProbe::measured("collapsed search");
        for seconds in [100.0, 1.0] {
            cold.record(Side::Device, seconds, 2.0);
            cold.record(Side::Host, 1.0, 1.0);
        }
        assert_eq!(cold.choice().unwrap().chosen, "CPU");
    }

    #[test]
    fn unusable_timings_are_not_recorded() {
        let probe = PlacementProbe::measured("family fits");
        probe.record(Side::Device, f64::NAN, 1.0);
        probe.record(Side::Host, 1.0, 0.0);
        assert!(probe.choice().is_none());
    }
}
