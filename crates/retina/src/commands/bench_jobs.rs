//! `retina bench jobs`: pipeline jobs executed for real on Delta tables under each
//! schedule (the IoT example and synthetic workloads at the paper's three conflict
//! densities): makespan, aborted attempts, wasted task-seconds, re-plans and the
//! scheduler's time per decision.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use retina_bench::jobs::{format_row, JobsBenchConfig};
use retina_jobs::Schedule;
use retina_scheduler::synth::Density;
use retina_scheduler::{RuleKind, Rules};

#[derive(Args)]
pub struct JobsBenchArgs {
    /// Readings per device type of the IoT example (0: leave it out).
    #[arg(long, default_value_t = 1_000_000)]
    pub iot_rows: usize,
    /// Synthetic workloads' task counts (comma-separated; empty: none).
    #[arg(long, value_delimiter = ',', default_value = "50")]
    pub tasks: Vec<usize>,
    /// Conflict densities of the synthetic workloads (default: all three).
    #[arg(long, value_delimiter = ',', value_parser = ["low", "medium", "high"])]
    pub density: Vec<String>,
    /// Rows per partition of the synthetic tables.
    #[arg(long, default_value_t = 20_000)]
    pub rows_per_partition: usize,
    /// Schedules to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "none,batches,admission", value_parser = ["none", "batches", "admission"])]
    pub schedules: Vec<String>,
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Retries of a task a conflict aborted (so that `none` finishes).
    #[arg(long, default_value_t = 5)]
    pub retries: u32,
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// The IoT example's folder (its setup.yaml, pipeline.yaml and sql/).
    #[arg(long, default_value = "examples/jobs/iot")]
    pub iot_dir: PathBuf,
    /// Where the lakes go (default: a temporary directory).
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Print one JSON object on the last line.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: JobsBenchArgs) -> anyhow::Result<()> {
    let densities = if args.density.is_empty() {
        Density::ALL.to_vec()
    } else {
        args.density.iter().map(|d| Density::parse(d).with_context(|| format!("unknown density `{d}`"))).collect::<anyhow::Result<_>>()?
    };
    let schedules = args.schedules.iter().map(|s| Schedule::parse(s).with_context(|| format!("unknown schedule `{s}`"))).collect::<anyhow::Result<_>>()?;
    let config = JobsBenchConfig {
        iot_rows: args.iot_rows,
        synthetic_tasks: args.tasks.iter().copied().filter(|&n| n > 0).collect(),
        densities,
        rows_per_partition: args.rows_per_partition,
        schedules,
        concurrency: args.concurrency.max(1),
        retries: args.retries,
        rules: Rules::new(RuleKind::DeltaRs, true),
        seed: args.seed,
    };
    let temporary = tempfile::tempdir().context("creating a work directory")?;
    let work = args.work_dir.clone().unwrap_or_else(|| temporary.path().to_path_buf());
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    if config.iot_rows > 0 && !args.iot_dir.join("pipeline.yaml").exists() {
        anyhow::bail!("{} holds no pipeline.yaml: run from the source tree's root or pass --iot-dir (or --iot-rows 0)", args.iot_dir.display());
    }
    let examples = args.iot_dir.canonicalize().unwrap_or(args.iot_dir.clone());
    let rows = retina_bench::jobs::run(&config, &work, &examples, &mut |row| println!("{}", format_row(row))).map_err(|e| anyhow::anyhow!("{e}"))?;
    if args.json {
        println!("{}", serde_json::to_string(&serde_json::json!({ "benchmark": "jobs", "concurrency": config.concurrency, "retries": config.retries, "runs": rows }))?);
    }
    Ok(())
}
