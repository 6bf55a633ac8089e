//! `retina bench NAME [--json]`: whole-system benchmarks. Every benchmark prints
//! human-readable progress and, with `--json`, one JSON object on its last line.

use clap::{Args, Subcommand};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub name: BenchName,
}

#[derive(Subcommand)]
pub enum BenchName {
    /// Partition-aware meta-scheduler: planning time, batches and edges.
    Scheduler(super::bench_scheduler::SchedulerBenchArgs),
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.name {
        BenchName::Scheduler(args) => super::bench_scheduler::run(args),
    }
}
