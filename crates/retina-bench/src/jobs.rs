//! `retina bench jobs`: pipeline jobs executed for real on Delta tables under each
//! schedule: the IoT example, and the scheduler's synthetic workloads written as
//! SQL over a few partitioned tables. What it measures per run: makespan, attempts
//! aborted by delta-rs's conflict checker, task-seconds they wasted, re-plans, and
//! the scheduler's time per decision.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use retina_jobs::run::RunOptions;
use retina_jobs::{Lake, RunReport, Schedule};
use retina_scheduler::access::Mode;
use retina_scheduler::synth::{generate, Density};
use retina_scheduler::Rules;
use serde::Serialize;

/// One executed run.
#[derive(Debug, Clone, Serialize)]
pub struct JobsBenchRow {
    pub workload: String,
    pub tasks: usize,
    pub schedule: Schedule,
    pub makespan_s: f64,
    pub aborted_attempts: usize,
    /// Versions aborted attempts had committed, undone.
    pub undone_commits: usize,
    pub wasted_task_s: f64,
    pub replans: usize,
    pub failed: usize,
    pub scheduler_decisions: u64,
    pub scheduler_decision_us_mean: f64,
    pub scheduler_decision_us_max: f64,
}

impl JobsBenchRow {
    fn of(workload: &str, report: &RunReport) -> Self {
        Self {
            workload: workload.to_string(),
            tasks: report.tasks.len(),
            schedule: report.schedule,
            makespan_s: report.makespan_s,
            aborted_attempts: report.aborted_attempts,
            undone_commits: report.undone_commits,
            wasted_task_s: report.wasted_task_s,
            replans: report.replans,
            failed: report.failed + report.skipped,
            scheduler_decisions: report.scheduler_decisions,
            scheduler_decision_us_mean: report.scheduler_decision_us_mean,
            scheduler_decision_us_max: report.scheduler_decision_us_max,
        }
    }
}

pub fn format_row(row: &JobsBenchRow) -> String {
    format!(
        "{:<22} {:>5} tasks  {:<9} makespan {:>7.2} s  aborted {:>3} (undone {:>2})  wasted {:>6.2} task-s  re-plans {:>3}  failed {:>2}  decision {:>7.1} µs mean {:>8.1} µs max",
        row.workload,
        row.tasks,
        row.schedule.name(),
        row.makespan_s,
        row.aborted_attempts,
        row.undone_commits,
        row.wasted_task_s,
        row.replans,
        row.failed,
        row.scheduler_decision_us_mean,
        row.scheduler_decision_us_max
    )
}

#[derive(Debug, Clone)]
pub struct JobsBenchConfig {
    /// Readings per device type in the IoT example (0: skip it).
    pub iot_rows: usize,
    /// Synthetic workloads: task counts × densities.
    pub synthetic_tasks: Vec<usize>,
    pub densities: Vec<Density>,
    /// Rows per partition of the synthetic tables.
    pub rows_per_partition: usize,
    pub schedules: Vec<Schedule>,
    pub concurrency: usize,
    /// Retries of an aborted task (what `none` needs to finish).
    pub retries: u32,
    pub rules: Rules,
    pub seed: u64,
}

fn options(config: &JobsBenchConfig, schedule: Schedule) -> RunOptions {
    RunOptions { retries: config.retries, rules: config.rules, ..RunOptions::new(schedule, config.concurrency) }
}

pub type BenchResult<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// Runs every workload under every schedule, each on a fresh copy of its set-up lake.
pub fn run(config: &JobsBenchConfig, work: &Path, examples: &Path, on_row: &mut dyn FnMut(&JobsBenchRow)) -> BenchResult<Vec<JobsBenchRow>> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut rows = Vec::new();
    let mut workloads: Vec<(String, PathBuf, PathBuf)> = Vec::new();
    if config.iot_rows > 0 {
        let setup = work.join("iot_setup.yaml");
        let text = std::fs::read_to_string(examples.join("setup.yaml"))?;
        std::fs::write(&setup, text.replace("generate_series(1, 3000000)", &format!("generate_series(1, {})", config.iot_rows)))?;
        workloads.push((format!("iot ({} rows)", config.iot_rows), setup, examples.join("pipeline.yaml")));
    }
    for &tasks in &config.synthetic_tasks {
        for &density in &config.densities {
            let name = format!("synthetic-{tasks}-{}", density.as_str());
            let jobs = synthetic_jobs(work, &name, tasks, density, config.seed, config.rows_per_partition)?;
            workloads.push((format!("synthetic {}", density.as_str()), jobs.setup, jobs.pipeline));
        }
    }
    for (name, setup, pipeline) in workloads {
        let template = work.join(format!("lake-{}", rows.len()));
        let lake = Lake::open(template.to_str().ok_or("work dir is not UTF-8")?)?;
        let report = runtime.block_on(retina_jobs::run(&lake, &[setup], &options(config, Schedule::Admission), &mut |_| {}))?;
        if report.failed + report.skipped > 0 {
            return Err(format!("the set-up of {name} failed:\n{}", report.to_table()).into());
        }
        for &schedule in &config.schedules {
            let copy = work.join(format!("run-{}-{}", rows.len(), schedule.name()));
            copy_dir(&template, &copy)?;
            let lake = Lake::open(copy.to_str().ok_or("work dir is not UTF-8")?)?;
            let report = runtime.block_on(retina_jobs::run(&lake, &[pipeline.clone()], &options(config, schedule), &mut |_| {}))?;
            let row = JobsBenchRow::of(&name, &report);
            on_row(&row);
            rows.push(row);
            std::fs::remove_dir_all(&copy)?;
        }
        std::fs::remove_dir_all(&template)?;
    }
    Ok(rows)
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Output tables the synthetic jobs' private merges go to (with the hot tables,
/// about ten tables in all).
const OUT_TABLES: usize = 8;

/// A synthetic workload written as job files.
#[derive(Debug, Clone)]
pub struct SyntheticJobs {
    /// Creates and fills every table the pipeline names.
    pub setup: PathBuf,
    pub pipeline: PathBuf,
    /// Every task of the pipeline: its key (`job/task`) and its statements.
    pub tasks: Vec<(String, Vec<String>)>,
    /// The tables the pipeline writes.
    pub tables: Vec<String>,
}

impl SyntheticJobs {
    /// One job running `order` (task keys of the pipeline) one after the other: the
    /// serial run a concurrent run must equal.
    pub fn serial_job(&self, order: &[String], path: &Path) -> std::io::Result<()> {
        let mut text = String::from("name: serial\ntasks:\n");
        let id = |key: &str| key.replace('/', "__");
        for (i, key) in order.iter().enumerate() {
            let statements = self.tasks.iter().find(|(k, _)| k == key).map(|(_, s)| s.as_slice()).unwrap_or_default();
            let deps: Vec<String> = order[..i].last().map(|previous| id(previous)).into_iter().collect();
            text.push_str(&task_yaml(&id(key), &deps, statements));
        }
        std::fs::write(path, text)
    }
}

/// The synthetic workload as SQL: a set-up job creating the tables its accesses
/// name (`hot.t<h>` partitioned by `day`, `out.t<k>` by `p`, `raw.src`), and the
/// jobs, each access one statement of its mode on its partition.
pub fn synthetic_jobs(work: &Path, name: &str, tasks: usize, density: Density, seed: u64, rows: usize) -> BenchResult<SyntheticJobs> {
    let workload = generate(tasks, density, seed);
    let mut hot_days: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    let mut jobs: Vec<(String, Vec<String>)> = Vec::new();
    let mut all_tasks = Vec::new();
    for t in 0..workload.len() as u32 {
        let task = workload.task(t);
        let mut statements = Vec::new();
        for access in workload.task_accesses(t) {
            let table = workload.names.name(access.table).to_string();
            let value = access.partitions.columns().first().and_then(|(_, values)| values.first().copied()).map(|v| workload.names.name(v).to_string());
            if table == "raw.src" {
                statements.push("SELECT count(*), sum(v) FROM raw.src".to_string());
                continue;
            }
            let Some(value) = value else { continue };
            if let Some(stripped) = table.strip_prefix("job") {
                // job<j>.out, partition p = t<t>: a private merge into a shared output table.
                let job: usize = stripped.split('.').next().and_then(|j| j.parse().ok()).unwrap_or(0);
                let out = format!("out.t{}", job % OUT_TABLES);
                statements.push(format!(
                    "MERGE INTO {out} AS t USING (SELECT {t} AS id, '{value}' AS p, 1 AS v) AS s ON t.p = '{value}' AND t.id = s.id \
                     WHEN MATCHED THEN UPDATE SET v = t.v + s.v WHEN NOT MATCHED THEN INSERT (id, p, v) VALUES (s.id, s.p, s.v)"
                ));
                continue;
            }
            hot_days.entry(table.clone()).or_default().insert(value.clone());
            statements.push(match access.mode {
                Mode::Read => format!("SELECT sum(v) FROM {table} WHERE day = '{value}'"),
                // Not commutative with the merges' and overwrites' additions, so the
                // order of conflicting tasks shows in the tables.
                Mode::Update => format!("UPDATE {table} SET v = (v * 3 + {}) % 1000003 WHERE day = '{value}'", t % 7 + 1),
                Mode::Delete => format!("DELETE FROM {table} WHERE day = '{value}' AND id % 97 = {}", t % 97),
                Mode::Merge => format!(
                    "MERGE INTO {table} AS t USING (SELECT id, day FROM {table} WHERE day = '{value}' AND id % 50 = {}) AS s ON t.day = '{value}' AND t.id = s.id \
                     WHEN MATCHED THEN UPDATE SET v = t.v + 2",
                    t % 50
                ),
                Mode::Overwrite => format!("INSERT OVERWRITE {table} PARTITION (day = '{value}') SELECT id, v + 3 FROM {table} WHERE day = '{value}'"),
                other => return Err(format!("the synthetic generator made a {other:?} access, which this benchmark does not write as SQL").into()),
            });
        }
        let deps: Vec<String> = task.deps.iter().map(|&d| workload.task(d).name.clone()).collect();
        all_tasks.push((format!("{}/{}", task.job, task.name), statements.clone()));
        match jobs.last_mut() {
            Some((job, list)) if *job == task.job => list.push(task_yaml(&task.name, &deps, &statements)),
            _ => jobs.push((task.job.clone(), vec![task_yaml(&task.name, &deps, &statements)])),
        }
    }
    let mut setup = String::from("name: setup\ntasks:\n");
    setup.push_str(&task_yaml(
        "raw_src",
        &[],
        &[format!("CREATE TABLE raw.src USING DELTA AS SELECT value AS id, value % 13 AS v FROM generate_series(1, {})", rows.max(1))],
    ));
    for (table, days) in &hot_days {
        let cases: Vec<String> = days.iter().enumerate().map(|(i, d)| format!("WHEN {i} THEN '{d}'")).collect();
        setup.push_str(&task_yaml(
            &table.replace('.', "_"),
            &[],
            &[format!(
                "CREATE TABLE {table} USING DELTA PARTITIONED BY (day) AS SELECT value AS id, value % 11 AS v, CASE value % {} {} END AS day FROM generate_series(0, {})",
                days.len(),
                cases.join(" "),
                rows * days.len() - 1
            )],
        ));
    }
    for k in 0..OUT_TABLES {
        setup.push_str(&task_yaml(&format!("out_t{k}"), &[], &[format!("CREATE TABLE out.t{k} (id BIGINT, p STRING, v BIGINT) USING DELTA PARTITIONED BY (p)")]));
    }
    let mut pipeline = String::from("jobs:\n");
    for (job, tasks) in &jobs {
        let _ = writeln!(pipeline, "  - name: {job}\n    tasks:");
        for task in tasks {
            for line in task.lines() {
                let _ = writeln!(pipeline, "    {line}");
            }
        }
    }
    let setup_path = work.join(format!("{name}-setup.yaml"));
    let pipeline_path = work.join(format!("{name}.yaml"));
    std::fs::write(&setup_path, setup)?;
    std::fs::write(&pipeline_path, pipeline)?;
    let mut tables: Vec<String> = hot_days.into_keys().collect();
    tables.extend((0..OUT_TABLES).map(|k| format!("out.t{k}")));
    Ok(SyntheticJobs { setup: setup_path, pipeline: pipeline_path, tasks: all_tasks, tables })
}

fn task_yaml(id: &str, deps: &[String], statements: &[String]) -> String {
    let mut out = format!("  - id: {id}\n");
    if !deps.is_empty() {
        let _ = writeln!(out, "    depends_on: [{}]", deps.join(", "));
    }
    out.push_str("    statements:\n");
    for statement in statements {
        let _ = writeln!(out, "      - \"{}\"", statement.replace('\\', "\\\\").replace('"', "\\\""));
    }
    out
}
