//! `retina jobs ...`: the partition-aware meta-scheduler CLI (ARCHITECTURE.md §3.8).
//!
//! `plan` analyses a job file (ours or a Databricks Jobs 2.1 definition), builds
//! the conflict graph and prints the batch plan; `--emit-databricks` writes the
//! job back with the dependencies that serialise the conflicts. `run` executes the
//! tasks on Delta tables under a lake (`retina-jobs`), ordered by a schedule.

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
    /// Execute job files' tasks on Delta Lake tables under a lake, conflict-free.
    Run(RunArgs),
}

#[derive(Args)]
pub struct PlanArgs {
    /// Job file: our YAML/JSON format or a Databricks Jobs API 2.1 definition.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, default_value = "table", value_parser = ["table", "json", "dot"])]
    pub format: String,
    /// Conflict rules: the paper's, Delta Lake's matrix under an isolation level, or
    /// delta-rs's (what `retina jobs run` commits meet).
    #[arg(long, default_value = "delta-write-serializable", value_parser = ["paper", "delta-write-serializable", "delta-serializable", "delta-rs"])]
    pub rules: String,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
    /// READ never conflicts with a data write (Delta itself never raises for it).
    #[arg(long)]
    pub ignore_read_write: bool,
    /// Write the job as a Databricks definition with the added dependencies.
    #[arg(long, value_name = "OUT.json")]
    pub emit_databricks: Option<PathBuf>,
}

#[derive(Args)]
pub struct RunArgs {
    /// Job files: ours (YAML/JSON) or Databricks Jobs API 2.1 definitions.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Lake root: a local directory, or an object store (`s3://BUCKET/PREFIX?endpoint=…`,
    /// `gs://`, `az://`, configured as data dirs are); table `a.b` is the Delta table in
    /// `ROOT/a/b`.
    #[arg(long)]
    pub lake: String,
    /// none: every task whose dependencies are done starts at once (what platform
    /// schedulers do); batches: the paper's Algorithm 1; admission: a task starts when
    /// its dependencies are done and no conflicting task runs.
    #[arg(long, default_value = "admission", value_parser = ["none", "batches", "admission"])]
    pub schedule: String,
    /// Tasks running at once at most.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How often a task aborted by a commit conflict is run again (whole task).
    #[arg(long, default_value_t = 0)]
    pub retries: u32,
    /// A job file that arrives later: FILE@SECONDSs (e.g. b.yaml@20s); repeatable.
    #[arg(long, value_name = "FILE@TIME")]
    pub arrive: Vec<String>,
    /// A folder whose job files (.yaml, .yml, .json) arrive when they appear
    /// (move them in whole); the run ends once all tasks finished and none came for
    /// --watch-idle-seconds.
    #[arg(long)]
    pub watch: Option<PathBuf>,
    #[arg(long, default_value_t = 10.0)]
    pub watch_idle_seconds: f64,
    /// A Retina data dir whose published cut (`_retina/published/latest.json`) is
    /// readable by table name: every read of the run sees that one cut.
    #[arg(long, value_name = "DATA_DIR")]
    pub mirror: Option<String>,
    /// Load and translate every statement, report what cannot be executed, run nothing.
    #[arg(long)]
    pub check: bool,
    /// Print the report as one JSON object on the last line too.
    #[arg(long)]
    pub json: bool,
    /// Draw the run as a Gantt chart (SVG).
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<PathBuf>,
    /// Conflict rules: delta-rs's (what the commits meet: an append counts as reading
    /// its whole table), or those of `retina jobs plan`.
    #[arg(long, default_value = "delta-rs", value_parser = ["delta-rs", "paper", "delta-write-serializable", "delta-serializable"])]
    pub rules: String,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

/// How a job's SQL is analysed and its runnable sets coloured (`plan` and `run`).
#[derive(Args)]
pub struct AnalysisArgs {
    /// Colouring of each runnable set (dsatur never uses more batches than greedy).
    #[arg(long, alias = "coloring", default_value = "dsatur", value_parser = ["greedy", "dsatur", "smallest-last"])]
    pub colouring: String,
    /// Partition columns of a table, first = bucketing column; repeatable (for
    /// `run`, added to those the Delta table itself declares).
    #[arg(long = "partition-columns", value_name = "TABLE=COL[,COL..]")]
    pub partition_columns: Vec<String>,
    /// SQL dialect (overrides the file's).
    #[arg(long, value_parser = ["generic", "databricks", "hive", "spark"])]
    pub dialect: Option<String>,
    /// A task whose SQL cannot be analysed conflicts with every task instead of failing.
    #[arg(long)]
    pub assume_conflict: bool,
}

impl AnalysisArgs {
    fn colouring(&self) -> anyhow::Result<Colouring> {
        Colouring::parse(&self.colouring).with_context(|| format!("unknown colouring `{}`", self.colouring))
    }

    fn load_options(&self) -> anyhow::Result<LoadOptions> {
        let dialect = match &self.dialect {
            Some(d) => Some(SqlDialect::parse(d).with_context(|| format!("unknown dialect `{d}`"))?),
            None => None,
        };
        let partition_columns = self.partition_columns.iter().map(|p| parse_partition_option(p)).collect::<Result<Vec<_>, _>>()?;
        Ok(LoadOptions { dialect, partition_columns, assume_conflict: self.assume_conflict })
    }
}

pub fn run(args: JobsArgs) -> anyhow::Result<()> {
    match args.command {
        JobsCommand::Plan(a) => plan_cmd(a),
        JobsCommand::Run(a) => run_cmd(a),
    }
}

fn run_cmd(a: RunArgs) -> anyhow::Result<()> {
    use retina_jobs::run::{Arrival, RunEvent, RunOptions, Watch};
    let schedule = retina_jobs::Schedule::parse(&a.schedule).with_context(|| format!("unknown schedule `{}`", a.schedule))?;
    if a.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if !(a.watch_idle_seconds >= 0.0 && a.watch_idle_seconds.is_finite()) {
        bail!("--watch-idle-seconds must be zero or more, got {}", a.watch_idle_seconds);
    }
    let kind = RuleKind::parse(&a.rules).with_context(|| format!("unknown rules `{}`", a.rules))?;
    let colouring = a.analysis.colouring()?;
    let load = a.analysis.load_options()?;
    let arrivals = a.arrive.iter().map(|text| Arrival::parse(text)).collect::<Result<Vec<_>, _>>()?;
    let options = RunOptions {
        schedule,
        concurrency: a.concurrency,
        retries: a.retries,
        rules: Rules::new(kind, true),
        colouring,
        load,
        arrivals,
        watch: a.watch.clone().map(|dir| Watch { dir, idle: std::time::Duration::from_secs_f64(a.watch_idle_seconds) }),
    };
    let mut lake = retina_jobs::Lake::open(&a.lake)?;
    if let Some(dir) = &a.mirror {
        lake = lake.with_mirror(retina_jobs::lake::Mirror::open(dir)?);
    }
    // block_in_place (subqueries evaluated inside sqlparser's visitor) needs the multi-thread runtime.
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    if a.check {
        let (mut tasks, mut statements) = (0, 0);
        let mut taken = std::collections::HashSet::new();
        for file in &a.files {
            let loaded = runtime.block_on(retina_jobs::load_tasks(&lake, file, &options.load, &taken))?;
            tasks += loaded.len();
            statements += loaded.iter().map(|t| t.statements.len()).sum::<usize>();
            taken.extend(loaded.into_iter().map(|t| t.key));
        }
        println!("{tasks} tasks, {statements} statements: every statement can be executed");
        return Ok(());
    }
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:30}] {pos}/{len} tasks finished, {msg}, {elapsed}").expect("the template is valid").progress_chars("=> "),
    );
    let mut on_event = |event: RunEvent| match event {
        RunEvent::Progress { running, waiting, finished, total } => {
            bar.set_length(total as u64);
            bar.set_position(finished as u64);
            bar.set_message(format!("{running} running, {waiting} waiting"));
        }
        RunEvent::Replanned { at_s, reason } => bar.println(format!("{at_s:7.2} s  re-plan: {reason}")),
        RunEvent::Aborted { task, attempt, conflict } => bar.println(format!("          {task}: attempt {attempt} aborted by {conflict}")),
        RunEvent::Arrived { file, tasks } => bar.println(format!("          {} arrived ({tasks} tasks)", file.display())),
        RunEvent::Started { .. } | RunEvent::Finished { .. } => bar.tick(),
    };
    let report = runtime.block_on(retina_jobs::run(&lake, &a.files, &options, &mut on_event))?;
    bar.finish_and_clear();
    print!("{}", report.to_table());
    if let Some(path) = &a.timeline {
        std::fs::write(path, retina_jobs::timeline::svg(&report)).with_context(|| format!("writing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    if a.json {
        println!("{}", report.to_json());
    }
    if report.failed > 0 || report.skipped > 0 {
        bail!("{} task(s) failed and {} were skipped", report.failed, report.skipped);
    }
    Ok(())
}

fn plan_cmd(a: PlanArgs) -> anyhow::Result<()> {
    let kind = RuleKind::parse(&a.rules).with_context(|| format!("unknown rules `{}`", a.rules))?;
    let algo = a.analysis.colouring()?;
    let set = load_job_file(&a.file)?;
    let opts = a.analysis.load_options()?;
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
