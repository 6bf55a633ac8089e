//! Planner benchmark without the CLI: `cargo run --release -p retina-scheduler
//! --example plan_bench [-- N DENSITY]`. Without arguments, the paper's sweep.

use retina_bench::scheduler::{format_row, run_point, SWEEP};
use retina_scheduler::synth::Density;
use retina_scheduler::Rules;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rules = Rules::default();
    let points: Vec<(usize, Density)> = match args.as_slice() {
        [n, d] => match (n.parse(), Density::parse(d)) {
            (Ok(n), Some(d)) => vec![(n, d)],
            _ => {
                eprintln!("usage: plan_bench [N low|medium|high]");
                std::process::exit(2);
            }
        },
        _ => Density::ALL.iter().flat_map(|&d| SWEEP.iter().map(move |&n| (n, d))).collect(),
    };
    for (n, d) in points {
        println!("{}", format_row(&run_point(n, d, &rules)));
    }
}
