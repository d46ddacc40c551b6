//! The largest values the search's settings may take: each keeps a run within memory and time a
//! user can wait for, and each is named in the message that refuses a larger one.

/// The most restarts a run may ask for (each holds a full model of every variable).
pub const MAX_RESTARTS: usize = 1000;
/// The most inducing points per variable: M² doubles per variable and restart, and M is capped by
/// the rows used anyway.
pub const MAX_INDUCING_POINTS: usize = 10_000;
/// The largest minibatch (the uncollapsed bound).
pub const MAX_BATCH_SIZE: usize = 1_000_000;
/// The most Monte Carlo samples per step (the uncollapsed bound).
pub const MAX_SAMPLES: usize = 10_000;
/// The most power iterations per step.
pub const MAX_POWER_ITERATIONS: usize = 10_000;
/// The longest any phase may be asked to run (the paper's longest is 50 000).
pub const MAX_PHASE_ITERATIONS: usize = 100_000_000;
/// The most worker threads.
pub const MAX_THREADS: usize = 4096;
