//! `occam generate`: write a synthetic data set with its true graph, in the layout of the shared
//! benchmark data (`data.csv` with header X1..XD; `truth.csv` as D lines of D integers).

use crate::{ensure_dir, write_file_atomic, CliError};
use clap::{Args, ValueEnum};
use occam::generate::{generate_with_progress, GeneratorSettings, GraphKind, Mechanism};
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GraphArg {
    /// Erdős–Rényi: each pair in a random order is an edge with probability 2K/(D−1).
    Er,
    /// Scale-free (Barabási–Albert): each node in turn gets K edges to earlier nodes (hubs get many parents).
    Sf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum MechanismArg {
    /// Random MLP, two hidden layers of 128 ReLU units, noise as an input (the paper's recipe).
    Mlp,
    /// Linear-Gaussian.
    Linear,
    /// Additive-noise Gaussian-process sample.
    Gp,
    /// GP-CDE sample (the paper's appendix F recipe).
    Gpcde,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Graph model.
    #[arg(long, value_enum)]
    pub graph: GraphArg,
    /// Number of variables D.
    #[arg(long)]
    pub nodes: usize,
    /// Expected edges per node K (ER), or edges added per node (SF).
    #[arg(long)]
    pub edges_per_node: usize,
    /// Number of samples N.
    #[arg(long)]
    pub samples: usize,
    /// How each variable depends on its parents.
    #[arg(long, value_enum)]
    pub mechanism: MechanismArg,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output directory (created if missing).
    #[arg(long)]
    pub out: PathBuf,
}

/// Says so when `--edges-per-node` asks for more edges than a DAG on `--nodes` nodes can hold
/// (the graph is then as dense as it gets, fewer edges than asked).
fn note_edge_count(args: &GenerateArgs) {
    let d = args.nodes;
    let k = args.edges_per_node;
    let most = d * d.saturating_sub(1) / 2;
    let asked = match args.graph {
        // ER: each pair is an edge with probability 2K/(D − 1), capped at 1.
        GraphArg::Er => 2 * k > d.saturating_sub(1),
        // SF: each node gets K edges to earlier nodes, at most as many as there are.
        GraphArg::Sf => k > d.saturating_sub(1),
    };
    if asked {
        errln!(
            "note: --edges-per-node {k} asks for more edges than a DAG on {d} nodes holds (at most \
             {most} edges, {:.1} per node); the graph is drawn as dense as it can be",
            most as f64 / d.max(1) as f64
        );
    }
}

pub fn run(args: &GenerateArgs) -> Result<(), CliError> {
    let settings = GeneratorSettings {
        graph: match args.graph {
            GraphArg::Er => GraphKind::Er,
            GraphArg::Sf => GraphKind::Sf,
        },
        nodes: args.nodes,
        edges_per_node: args.edges_per_node,
        samples: args.samples,
        mechanism: match args.mechanism {
            MechanismArg::Mlp => Mechanism::Mlp,
            MechanismArg::Linear => Mechanism::Linear,
            MechanismArg::Gp => Mechanism::Gp,
            MechanismArg::Gpcde => Mechanism::GpCde,
        },
        seed: args.seed,
    };
    note_edge_count(args);
    ensure_dir(&args.out)?;
    // The GP mechanisms factorise an N × N matrix per column: at thousands of rows each column
    // takes seconds to minutes, so the columns are counted off on stderr.
    let slow = matches!(settings.mechanism, Mechanism::Gp | Mechanism::GpCde);
    let mut progress = |done: usize, total: usize, name: &str| {
        if slow {
            err!(
                "\rcolumns drawn: {done} / {total} (last {name}; each from a GP over {} rows)   ",
                args.samples
            );
        }
    };
    let generated =
        generate_with_progress(&settings, &mut progress).map_err(|e| CliError(e.to_string()))?;
    if slow {
        errln!();
    }

    let data_path = args.out.join("data.csv");
    write_file_atomic(&data_path, &generated.dataset.to_csv())?;
    let truth: String = generated
        .truth
        .to_matrix()
        .iter()
        .map(|row| {
            let cells: Vec<String> = row.iter().map(u8::to_string).collect();
            cells.join(",") + "\n"
        })
        .collect();
    let truth_path = args.out.join("truth.csv");
    write_file_atomic(&truth_path, &truth)?;
    let meta_path = args.out.join("meta.json");
    let meta = serde_json::to_string_pretty(&generated.meta)
        .map_err(|e| CliError(format!("cannot encode meta.json: {e}")))?;
    write_file_atomic(&meta_path, &(meta + "\n"))?;

    outln!(
        "wrote {} ({} rows × {} columns), {} ({} edges, A[i][j] = 1 means Xi+1 → Xj+1) and {}",
        data_path.display(),
        generated.dataset.rows(),
        generated.dataset.cols(),
        truth_path.display(),
        generated.truth.edge_count(),
        meta_path.display()
    );
    Ok(())
}
