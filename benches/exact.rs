//! Time of the exact search's combinatorial part on random score tables: the best DAG by dynamic
//! programming over subsets and the edge probabilities over orders, for D = 10, 15, 20 with P
//! candidate parents and at most K parents per variable (the family fits are timed elsewhere).
//!
//! Run: `cargo bench --bench exact` (add `-- quick` for D = 10 only).

use occam::discovery::exact::{admissible_families, best_dag, order_edge_probabilities, Mask};
use occam::discovery::knowledge::Knowledge;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Instant;

fn table(d: usize, p: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<Vec<(Mask, f64)>> {
    let knowledge = Knowledge::none(d);
    (0..d)
        .map(|i| {
            let mut others: Vec<usize> = (0..d).filter(|&j| j != i).collect();
            // A random candidate list of size p.
            for a in 0..others.len() {
                let b = rng.random_range(a..others.len());
                others.swap(a, b);
            }
            others.truncate(p);
            others.sort_unstable();
            admissible_families(i, &others, k, &knowledge)
                .expect("no knowledge")
                .into_iter()
                .map(|m| {
                    (
                        m,
                        -1000.0 + rng.random_range(-300.0..0.0) + 40.0 * m.count_ones() as f64,
                    )
                })
                .collect()
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; without it (`cargo test --all-targets`) the quick size only.
    let quick = std::env::args().any(|a| a == "quick") || !std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if quick { &[10] } else { &[10, 15, 20] };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    println!("| D | P | K | families | best DAG (s) | edge probabilities (s) |");
    println!("|---|---|---|---|---|---|");
    for &d in sizes {
        for (p, k) in [(8, 3), (12, 4)] {
            let t = table(d, p.min(d - 1), k, &mut rng);
            let families: usize = t.iter().map(Vec::len).sum();
            let repeats = if d >= 20 { 3 } else { 5 };
            let mut dp = Vec::new();
            let mut orders = Vec::new();
            for _ in 0..repeats {
                let t0 = Instant::now();
                std::hint::black_box(best_dag(&t).expect("a DAG"));
                dp.push(t0.elapsed().as_secs_f64());
                let t0 = Instant::now();
                std::hint::black_box(order_edge_probabilities(&t).expect("probabilities"));
                orders.push(t0.elapsed().as_secs_f64());
            }
            println!(
                "| {d} | {} | {k} | {families} | {:.4} | {:.4} |",
                p.min(d - 1),
                median(dp),
                median(orders)
            );
        }
    }
}
