//! `retina jobs ...`: the partition-aware meta-scheduler CLI (ARCHITECTURE.md §3.8).
//!
//! `plan` analyses a job file (ours or a Databricks Jobs 2.1 definition), builds
//! the conflict graph and prints the batch plan; `--emit-databricks` writes the
//! job back with the dependencies that serialise the conflicts. `run` (executing
//! tasks against tables) is a later issue and says so.

use std::path::PathBuf;

use anyhow::{bail, Context};
use clap::{Args, Subcommand};
use retina_scheduler::databricks::{added_dependencies, emit};
use retina_scheduler::graph::discover;
use retina_scheduler::jobfile::{load_job_file, parse_partition_option};
use retina_scheduler::load::{build_workload, LoadOptions};
use retina_scheduler::render::report;
use retina_scheduler::{Colouring, RuleKind, Rules, SqlDialect};

#[derive(Args)]
pub struct JobsArgs {
    #[command(subcommand)]
    pub command: JobsCommand,
}

#[derive(Subcommand)]
pub enum JobsCommand {
    /// Analyse a job file's SQL, find conflicting tasks and print a conflict-free plan.
    Plan(PlanArgs),
    /// Execute a job's tasks against Retina tables (not built yet).
    Run(RunArgs),
}

#[derive(Args)]
pub struct PlanArgs {
    /// Job file: our YAML/JSON format or a Databricks Jobs API 2.1 definition.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = ["table", "json", "dot"])]
    pub format: String,
    /// Conflict rules: the paper's, or Delta Lake's matrix under an isolation level.
    #[arg(long, default_value = "delta-write-serializable", value_parser = ["paper", "delta-write-serializable", "delta-serializable"])]
    pub rules: String,
    /// Colouring of each runnable set (dsatur never uses more batches than greedy).
    #[arg(long, alias = "coloring", default_value = "dsatur", value_parser = ["greedy", "dsatur", "smallest-last"])]
    pub colouring: String,
    /// Partition columns of a table, first = bucketing column; repeatable.
    #[arg(long = "partition-columns", value_name = "TABLE=COL[,COL..]")]
    pub partition_columns: Vec<String>,
    /// SQL dialect (overrides the file's).
    #[arg(long, value_parser = ["generic", "databricks", "hive", "spark"])]
    pub dialect: Option<String>,
    /// A task whose SQL cannot be parsed conflicts with every task instead of failing.
    #[arg(long)]
    pub assume_conflict: bool,
    /// READ never conflicts with a data write (Delta itself never raises for it).
    #[arg(long)]
    pub ignore_read_write: bool,
    /// Write the job as a Databricks definition with the added dependencies.
    #[arg(long, value_name = "OUT.json")]
    pub emit_databricks: Option<PathBuf>,
}

#[derive(Args)]
pub struct RunArgs {
    /// Job file.
    pub file: PathBuf,
}

pub fn run(args: JobsArgs) -> anyhow::Result<()> {
    match args.command {
        JobsCommand::Plan(a) => plan_cmd(a),
        JobsCommand::Run(a) => bail!(
            "retina jobs run {}: executing tasks against tables is not built yet (it comes with the query engine); \
             use `retina jobs plan` to get a conflict-free plan, or `--emit-databricks` to run it on your platform scheduler",
            a.file.display()
        ),
    }
}

fn plan_cmd(a: PlanArgs) -> anyhow::Result<()> {
    let kind = RuleKind::parse(&a.rules).with_context(|| format!("unknown rules `{}`", a.rules))?;
    let algo = Colouring::parse(&a.colouring).with_context(|| format!("unknown colouring `{}`", a.colouring))?;
    let dialect = match &a.dialect {
        Some(d) => Some(SqlDialect::parse(d).with_context(|| format!("unknown dialect `{d}`"))?),
        None => None,
    };
    let mut partition_columns = Vec::new();
    for p in &a.partition_columns {
        partition_columns.push(parse_partition_option(p)?);
    }
    let set = load_job_file(&a.file)?;
    let opts = LoadOptions { dialect, partition_columns, assume_conflict: a.assume_conflict };
    let w = build_workload(&set, &opts)?;
    let rules = Rules::new(kind, !a.ignore_read_write);
    let g = discover(&w, &rules);
    let (rep, chosen) = report(&w, &g, &rules, algo);
    match a.format.as_str() {
        "json" => println!("{}", rep.to_json()),
        "dot" => print!("{}", rep.to_dot()),
        _ => print!("{}", rep.to_table()),
    }
    if let Some(out) = &a.emit_databricks {
        let added = added_dependencies(&w, &g, &chosen);
        let doc = emit(&set, &w, &added);
        let text = serde_json::to_string_pretty(&doc)?;
        std::fs::write(out, text + "\n").with_context(|| format!("writing {}", out.display()))?;
        eprintln!("wrote {} ({} added dependencies)", out.display(), added.len());
    }
    Ok(())
}
