//! Every integration test of Occam in one test binary: one link instead of one per file, and the
//! files' tests share the harness's threads (the test command's native step runs on a 2-core CI
//! machine). Each file stays a module of its own: `cargo test --test integration gpu_bound::` runs
//! one file's tests.

mod common;

mod cgp_engine;
mod cli;
mod exact_dp;
mod exact_posterior;
mod exact_scores;
mod exact_search;
mod exact_session;
mod explain;
mod fuzz_readers;
mod generate_data;
mod generate_graphs;
mod gp_collapsed_bound;
mod gp_collapsed_fit;
mod gp_collapsed_psi;
mod gp_kernel;
mod gp_lbfgs;
mod gp_svgp;
mod gpu_bound;
mod gpu_cholesky;
mod gpu_device;
mod gpu_families;
mod gpu_parity;
mod gpu_psi;
mod gpu_resident;
mod graph_cpdag;
mod graph_io;
mod graph_sid;
mod latent_signal;
mod layers;
mod lessons;
mod names;
mod pairs_family;
mod stop_inside_units;
mod web_policy;
