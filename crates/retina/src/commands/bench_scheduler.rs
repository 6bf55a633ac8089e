//! `retina bench scheduler`: the meta-scheduler paper's experiment — planning
//! time (conflict discovery + Algorithm 1), batches per colouring and conflict
//! edges on synthetic workloads of n tasks at low/medium/high conflict density.
//! Without `--tasks`, sweeps n = 50, 100, 200, …, 1,000, 10,000, 100,000.

use anyhow::Context;
use clap::Args;
use retina_bench::scheduler::{format_row, run_point, BenchRow, SWEEP};
use retina_scheduler::synth::Density;
use retina_scheduler::{RuleKind, Rules};

#[derive(Args)]
pub struct SchedulerBenchArgs {
    /// Number of tasks (default: the sweep).
    #[arg(long)]
    pub tasks: Option<usize>,
    /// Conflict density (default: all three).
    #[arg(long, value_parser = ["low", "medium", "high"])]
    pub density: Option<String>,
    /// Conflict rules.
    #[arg(long, default_value = "delta-write-serializable", value_parser = ["paper", "delta-write-serializable", "delta-serializable"])]
    pub rules: String,
    /// Print one JSON object on the last line.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: SchedulerBenchArgs) -> anyhow::Result<()> {
    let kind = RuleKind::parse(&args.rules).with_context(|| format!("unknown rules `{}`", args.rules))?;
    let rules = Rules::new(kind, true);
    let densities: Vec<Density> = match &args.density {
        Some(d) => vec![Density::parse(d).with_context(|| format!("unknown density `{d}`"))?],
        None => Density::ALL.to_vec(),
    };
    let sizes: Vec<usize> = match args.tasks {
        Some(n) => vec![n],
        None => SWEEP.to_vec(),
    };
    let mut rows: Vec<BenchRow> = Vec::new();
    for &d in &densities {
        for &n in &sizes {
            let r = run_point(n, d, &rules);
            println!("{}", format_row(&r));
            rows.push(r);
        }
    }
    if args.json {
        let find = |n: usize| rows.iter().find(|r| r.tasks == n && r.density == Density::High).map(|r| r.plan_ms);
        let obj = serde_json::json!({
            "benchmark": "scheduler",
            "rules": kind.as_str(),
            "target_1000_high_ms": 50.0,
            "plan_ms_1000_high": find(1000),
            "target_100000_ms": 5000.0,
            "plan_ms_100000_high": find(100_000),
            "points": rows,
        });
        println!("{}", serde_json::to_string(&obj)?);
    }
    Ok(())
}
