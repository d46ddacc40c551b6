//! Which device a run computes on: the WebGPU device the coordinating worker opened, the measured
//! placement of collapsed bounds and family fits, the notes that tell the page, and a lost device.

use super::*;

impl Driver {
    /// Tells the driver what the shell found: the browser's WebGPU `adapter` (described) and
    /// whether a device on it works (`Ok`) or why not (`Err`).
    pub fn set_gpu(&mut self, adapter: Option<String>, device: Result<(), String>) {
        self.adapter = adapter.clone();
        match device {
            Ok(()) => {
                self.gpu = adapter;
                self.gpu_note = None;
            }
            Err(why) => {
                self.gpu = None;
                self.gpu_note = Some(why);
            }
        }
    }

    /// Test hook: collapsed runs whose Ψ2 work N·M² is at least `work` may compute on the GPU.
    pub fn set_psi2_min_work(&mut self, work: f64) {
        self.psi2_min_work = Some(work);
    }

    /// Test hook: every collapsed continuous run computes on `side` (with a working GPU),
    /// unmeasured.
    pub fn set_collapsed_side(&mut self, side: Side) {
        self.collapsed_side = Some(side);
    }

    /// The current collapsed continuous run's probe, if it has a working GPU to place it on.
    pub fn collapsed_probe(&self) -> Option<Arc<PlacementProbe>> {
        self.collapsed_probe.clone()
    }

    /// Whether the work `probe` places computes on the GPU now: a device works and the probe
    /// chose it (or a test forced it).
    pub(super) fn placed_on_gpu(&self, probe: &Option<Arc<PlacementProbe>>) -> bool {
        self.gpu.is_some()
            && probe
                .as_ref()
                .is_some_and(|p| p.placed() == Some(Side::Device))
    }

    /// Whether the current collapsed run computes on the GPU now.
    pub(super) fn collapsed_on_gpu(&self) -> bool {
        self.placed_on_gpu(&self.collapsed_probe)
    }

    /// Whether a probe of the current run is still timing both sides (its units are then
    /// dispatched, to be timed where they run).
    pub(super) fn probing(&self) -> bool {
        self.gpu.is_some()
            && [&self.family_probe, &self.collapsed_probe]
                .into_iter()
                .flatten()
                .any(|p| p.probing())
    }

    /// Test hook: every run's family fits compute on `side` (with a working GPU), unmeasured.
    pub fn set_family_side(&mut self, side: Side) {
        self.family_side = Some(side);
    }

    /// The current run's family fits' probe, if the run has a working GPU to place them on.
    pub fn family_probe(&self) -> Option<Arc<PlacementProbe>> {
        self.family_probe.clone()
    }

    /// Whether the current run's family fits compute on the GPU now.
    pub(super) fn families_on_gpu(&self) -> bool {
        self.placed_on_gpu(&self.family_probe)
    }

    /// Whether the current run fits families (the exact search, or hybrid's second part).
    pub(super) fn run_fits_families(&self) -> bool {
        self.session
            .as_ref()
            .is_some_and(|s| matches!(s.settings().method, Method::Exact | Method::Hybrid))
    }

    /// Why the current run's family fits compute on the CPU with a working GPU: still being
    /// measured, or measured (or forced) there.
    pub(super) fn families_note(&self) -> String {
        let probe = self.family_probe.as_ref();
        match (probe.map(|p| p.placed()), probe.and_then(|p| p.choice())) {
            (Some(None), _) | (None, _) => "the first family fits are timed on WebGPU (in lockstep, each round's Ψ2 sums in one submission) and on the CPU; the faster computes the rest".into(),
            (Some(Some(_)), Some(choice)) => format!(
                "the family fits compute on the CPU, which is faster here: {}",
                choice.reason
            ),
            (Some(Some(_)), None) => "the family fits compute on the CPU (placed there by a test)".into(),
        }
    }

    /// The choices behind the current run's placements, for its result.
    pub(super) fn device_choices(&self) -> Vec<DeviceChoice> {
        [&self.collapsed_probe, &self.family_probe]
            .into_iter()
            .flatten()
            .filter_map(|p| p.choice())
            .map(|mut choice| {
                if let Some(why) = &self.gpu_lost_in_run {
                    // Whatever the probe chose, everything after the failure ran on the CPU.
                    choice.reason +=
                        &format!("; then the GPU failed ({why}) and the CPU computed the rest");
                }
                choice
            })
            .collect()
    }

    /// N·M² from which a collapsed run's Ψ2 goes to the GPU.
    pub(super) fn psi2_min_work(&self) -> f64 {
        self.psi2_min_work.unwrap_or(PSI2_MIN_WORK)
    }

    /// The Ψ2 work N·M² of the current run's largest collapsed variable (every other variable a
    /// candidate parent, N the rows used), if it is a collapsed continuous search.
    pub(super) fn collapsed_psi2_work(&self) -> Option<f64> {
        let session = self.session.as_ref()?;
        let settings = session.settings();
        if settings.bound != BoundKind::Collapsed || settings.method != Method::Cgp {
            return None;
        }
        let (n, d) = session.data().shape();
        let m = settings.inducing_for(d).min(n) as f64;
        Some(n as f64 * m * m)
    }

    /// Whether the current run computes on the GPU: a device works and the run's work goes
    /// there (the continuous search with the uncollapsed bound; with the collapsed bound, or the
    /// exact search's family fits, where a probe measured the GPU faster).
    pub fn run_uses_gpu(&self) -> bool {
        self.families_on_gpu()
            || self.collapsed_on_gpu()
            || self.gpu.is_some()
                && self.session.as_ref().is_some_and(|s| {
                    let settings = s.settings();
                    settings.method == Method::Cgp && settings.bound == BoundKind::Uncollapsed
                })
    }

    /// Why the current collapsed run computes on the CPU with a working GPU: still being
    /// measured, measured (or forced) there, or too small to time.
    pub(super) fn collapsed_note(&self, work: f64) -> String {
        match self.collapsed_probe.as_ref() {
            None => format!(
                "this run's Ψ2 work (N·M² = {work:.1e}) is below the {:.0e} from which the \
                 collapsed bound times WebGPU against the CPU: it computes on the CPU",
                self.psi2_min_work()
            ),
            Some(p) => match (p.placed(), p.choice()) {
                (None, _) => "the first iterations are timed with their Ψ2 sums on WebGPU and on \
                              the CPU; the faster computes the rest"
                    .into(),
                (Some(_), Some(choice)) => format!(
                    "the collapsed search computes on the CPU, which is faster here: {}",
                    choice.reason
                ),
                (Some(_), None) => {
                    "the collapsed search computes on the CPU (placed there by a test)".into()
                }
            },
        }
    }

    /// Where the current run computes, for the page.
    pub fn backend_message(&self, switched: bool) -> FromWorker {
        let on_gpu = self.run_uses_gpu();
        let note = match (&self.adapter, on_gpu, &self.gpu_note) {
            (None, _, _) | (Some(_), true, _) => None,
            (Some(_), false, Some(why)) => Some(why.clone()),
            (Some(_), false, None) if self.run_fits_families() => Some(self.families_note()),
            (Some(_), false, None) => Some(match self.collapsed_psi2_work() {
                Some(work) => self.collapsed_note(work),
                None => {
                    "this run's bound has no GPU path at this size: it computes on the CPU".into()
                }
            }),
        };
        FromWorker::Pong {
            backend: if on_gpu {
                ComputeBackend::WebGpu
            } else {
                ComputeBackend::Cpu
            },
            adapter: self.adapter.clone(),
            note,
            switched,
        }
    }

    /// The shell's GPU failed (`why`) during batch `batch`: the shell computes that batch on the
    /// CPU from the same jobs (so nothing is lost), and every later unit computes on the CPU.
    /// The page is told of the switch.
    pub fn gpu_lost(&mut self, why: &str) -> Reaction {
        let was_on_gpu = self.run_uses_gpu();
        // A probe puts some of the run's work on the device before it decides.
        if was_on_gpu || self.family_probe.is_some() || self.collapsed_probe.is_some() {
            self.gpu_lost_in_run = Some(why.into());
        }
        self.gpu = None;
        self.gpu_note = Some(format!(
            "the GPU failed ({why}); the run went on on the CPU from the batch in hand, with nothing lost"
        ));
        web_log(&format!(
            "occam: the GPU failed ({why}); computing on the CPU"
        ));
        Reaction::message(self.backend_message(was_on_gpu))
    }
}
