//! What a restart reports: its phase, the terms of its objective, each phase's record, its
//! faults and its outcome.

use serde::{Deserialize, Serialize};

use crate::discovery::cgp::component::LatentRecord;

/// Where a restart is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Fitting each variable's starting point (a GP regression on its candidate parents).
    Initialising,
    /// γ = 0: the evidence and the prior only.
    WarmUp,
    /// γ rises until the graph is acyclic (h < τ).
    Acyclic,
    /// Removing the weakest edges until the graph is a DAG.
    Thresholding,
    /// The graph is fixed; the remaining hyperparameters settle.
    CoolDown,
    /// Each edge is tested by evidence: refit its child without it and keep the edge only if the
    /// objective prefers it.
    Pruning,
    /// The exact search (not a restart's phase): every family (variable, parent set) is scored.
    Families,
    Done,
    Failed,
}

impl Phase {
    /// One plain sentence of what is happening in this phase.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::Initialising => "Fitting a starting model for each variable from all the others.",
            Phase::WarmUp => "Learning how strongly each variable depends on each other one, with no pressure towards a DAG yet.",
            Phase::Acyclic => "Raising the acyclicity penalty until the weighted graph has no cycles left.",
            Phase::Thresholding => "Removing the weakest edges until the graph is a DAG.",
            Phase::CoolDown => "Refitting every variable on its chosen parents, with the graph fixed.",
            Phase::Pruning => "Testing each edge by evidence: refitting its effect without it and keeping the edge only if the evidence is higher with it.",
            Phase::Families => "Scoring each variable's evidence given each candidate parent set, once per family, for the exact search over DAGs.",
            Phase::Done => "Finished: this restart's graph and evidence are final.",
            Phase::Failed => "This restart failed; the others go on.",
        }
    }
}

/// The objective's terms at one iteration (nats, whole-data scale).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Terms {
    /// Σ_i of each variable's collapsed bound (scaled to all rows).
    pub elbo: f64,
    /// log p(θ) under Gamma(1, 10), over all D(D−1) pairs and both kernel kinds.
    pub log_prior: f64,
    /// h(A) = |λ_max(A)| by power iteration.
    pub h: f64,
    /// h₂, the 2-cycle penalty (0 unless the settings add it).
    #[serde(default)]
    pub h_pairs: f64,
    pub gamma: f64,
    /// elbo + log_prior − γ (h + h₂).
    pub objective: f64,
}

/// A numerical fault and what was done about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultEvent {
    pub restart: usize,
    pub iteration: usize,
    pub phase: Phase,
    /// The variable (column index) whose bound failed.
    pub variable: usize,
    pub message: String,
    /// What was done, in words.
    pub action: String,
}

/// Why a phase ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseEnd {
    /// The objective stopped improving (warm-up, cool-down).
    Converged,
    /// The phase ran to its most iterations without meeting its goal.
    Cap,
    /// The acyclic phase reached h(A) < τ.
    HBelowTau,
    /// The acyclic phase ended because the edges that pass the final thresholds form a DAG.
    SurvivingEdgesAcyclic,
    /// Thresholding is one step.
    Done,
}

/// What one phase of a restart did: how long it ran, why it ended, and the graph it left.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PhaseRecord {
    pub phase: Phase,
    /// Iterations in this phase (pruning: refits of one variable).
    pub iterations: usize,
    pub ended_by: PhaseEnd,
    /// h(A) and γ at the phase's last iteration.
    pub h: f64,
    pub gamma: f64,
    /// The edges (cause, effect) passing the final thresholds when the phase ended (after
    /// thresholding: the DAG kept).
    pub edges: Vec<(usize, usize)>,
    /// 2-cycles among those edges.
    pub two_cycles: usize,
    /// Edges (cause, effect) the pruning phase removed (empty for other phases).
    #[serde(default)]
    pub removed: Vec<(usize, usize)>,
}

/// A finished restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RestartOutcome {
    pub index: usize,
    /// The final bound + log prior (γ = 0): restarts are compared by this.
    pub score: f64,
    pub elbo: f64,
    pub log_prior: f64,
    /// Edges (cause, effect) after the final thresholds.
    pub edges: Vec<(usize, usize)>,
    /// W[cause][effect] = θ^lin + θ^se of the edge (0 where there is none).
    pub weights: Vec<Vec<f64>>,
    pub iterations: usize,
    /// One record per phase, in order (absent in records saved before it existed).
    #[serde(default)]
    pub phases: Vec<PhaseRecord>,
    /// What the latent w does in each variable's final model (collapsed bound; empty otherwise).
    #[serde(default)]
    pub latents: Vec<LatentRecord>,
    /// Σ_i F(i | pa(i)) of this restart's DAG on the rows used, each family refitted from the same
    /// start (`discovery::family`), when restarts are compared that way.
    #[serde(default)]
    pub graph_evidence: Option<f64>,
}
