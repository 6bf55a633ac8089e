//! The one driver of a run: loads the job files, asks the schedule which tasks
//! to start, runs their attempts, retries the ones a commit conflict aborted,
//! and feeds arrivals (`--arrive`, `--watch`) and completions back to the
//! schedule, which re-plans when that is material.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_scheduler::load::LoadOptions;
use retina_scheduler::{Colouring, RuleKind, Rules};
use tokio::task::JoinSet;

use crate::attempt::AttemptWrites;
use crate::conflict::ConflictKind;
use crate::dispatch::{dispatcher, Dispatcher, Schedule};
use crate::error::{JobsError, Result};
use crate::execute::{execute, StatementContext};
use crate::lake::Lake;
use crate::report::{AttemptOutcome, AttemptReport, Replan, RunReport, TaskReport, TaskStatus};
use crate::tasks::{load_tasks, TaskSpec};

/// A job file that arrives while the run goes on.
#[derive(Debug, Clone)]
pub struct Arrival {
    pub file: PathBuf,
    pub after: Duration,
}

impl Arrival {
    /// `FILE@20s` (also `@1.5s`, `@500ms`).
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = || JobsError::Invalid(format!("--arrive {text}: expected FILE@SECONDSs (e.g. jobs/b.yaml@20s) or FILE@MILLISms"));
        let (file, at) = text.rsplit_once('@').ok_or_else(invalid)?;
        let after = if let Some(ms) = at.strip_suffix("ms") {
            Duration::from_millis(ms.parse().map_err(|_| invalid())?)
        } else {
            let seconds: f64 = at.strip_suffix('s').unwrap_or(at).parse().map_err(|_| invalid())?;
            if !(seconds >= 0.0 && seconds.is_finite()) {
                return Err(invalid());
            }
            Duration::from_secs_f64(seconds)
        };
        Ok(Self { file: PathBuf::from(file), after })
    }
}

/// A folder watched for new job files.
#[derive(Debug, Clone)]
pub struct Watch {
    pub dir: PathBuf,
    /// The run ends once every task finished and no file arrived for this long.
    pub idle: Duration,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub schedule: Schedule,
    pub concurrency: usize,
    /// Attempts after the first one that a commit conflict may cost.
    pub retries: u32,
    pub rules: Rules,
    pub colouring: Colouring,
    pub load: LoadOptions,
    pub arrivals: Vec<Arrival>,
    pub watch: Option<Watch>,
}

impl RunOptions {
    /// `schedule` at `concurrency` with what `retina jobs run` uses unless told
    /// otherwise: no retries, delta-rs's conflict rules, DSatur colouring, the job
    /// files' own settings, no arrivals, no watched folder.
    pub fn new(schedule: Schedule, concurrency: usize) -> Self {
        Self {
            schedule,
            concurrency,
            retries: 0,
            rules: Rules::new(RuleKind::DeltaRs, true),
            colouring: Colouring::Dsatur,
            load: LoadOptions::default(),
            arrivals: Vec::new(),
            watch: None,
        }
    }
}

/// What happens, as it happens (for progress displays).
#[derive(Debug, Clone)]
pub enum RunEvent {
    Started { task: String, attempt: usize },
    Aborted { task: String, attempt: usize, conflict: ConflictKind },
    Finished { task: String, status: TaskStatus },
    Replanned { at_s: f64, reason: String },
    Arrived { file: PathBuf, tasks: usize },
    /// Counts after every change.
    Progress { running: usize, waiting: usize, finished: usize, total: usize },
}

/// What an attempt's future gives back.
struct AttemptDone {
    key: String,
    start: Instant,
    end: Instant,
    result: Result<u64>,
    /// Commits of the attempt taken back after its error.
    undone: usize,
}

/// Runs `files` (and whatever arrives) on `lake`; returns the report. Errors
/// before anything runs (a job that does not load or a statement we cannot
/// execute) are returned as such; a task that fails during the run is reported.
/// Needs a multi-thread Tokio runtime (subqueries are evaluated with
/// `block_in_place`).
pub async fn run(lake: &Lake, files: &[PathBuf], options: &RunOptions, on_event: &mut (dyn FnMut(RunEvent) + Send)) -> Result<RunReport> {
    let mut state = RunState::new(options);
    for file in files {
        let tasks = load_tasks(lake, file, &options.load, &state.keys()).await?;
        state.admit(tasks, Duration::ZERO, on_event)?;
    }
    state.epoch = Instant::now();
    let mut arrivals = options.arrivals.clone();
    arrivals.sort_by_key(|a| a.after);
    let mut arrivals: std::collections::VecDeque<Arrival> = arrivals.into();
    let mut watched: BTreeSet<PathBuf> = BTreeSet::new();
    let mut last_arrival = Instant::now();
    let mut running: JoinSet<AttemptDone> = JoinSet::new();
    loop {
        state.start_ready(lake, &mut running, on_event)?;
        let everything_done = running.is_empty() && state.all_finished();
        let watching = options.watch.as_ref().is_some_and(|w| last_arrival.elapsed() < w.idle);
        if everything_done && arrivals.is_empty() && !watching {
            break;
        }
        if running.is_empty() && !state.all_finished() && arrivals.is_empty() && options.watch.is_none() {
            let stuck: Vec<String> = state.unfinished();
            return Err(JobsError::Invalid(format!("no task can start, yet these have not run: {}", stuck.join(", "))));
        }
        let next_arrival = arrivals.front().map(|a| state.epoch + a.after);
        tokio::select! {
            Some(joined) = running.join_next(), if !running.is_empty() => {
                let done = joined.map_err(|e| JobsError::Invalid(format!("a task's attempt panicked: {e}")))?;
                state.attempt_done(lake, done, &mut running, on_event)?;
            }
            _ = tokio::time::sleep_until(next_arrival.unwrap_or_else(Instant::now).into()), if next_arrival.is_some() => {
                if let Some(arrival) = arrivals.pop_front() {
                    state.arrive(lake, &arrival.file, &options.load, on_event).await?;
                    last_arrival = Instant::now();
                }
            }
            _ = tokio::time::sleep(Duration::from_millis(200)), if options.watch.is_some() => {
                if let Some(watch) = &options.watch {
                    for file in new_job_files(&watch.dir, &mut watched)? {
                        state.arrive(lake, &file, &options.load, on_event).await?;
                        last_arrival = Instant::now();
                    }
                }
            }
        }
    }
    let mut report = state.report();
    report.mirror_ts = lake.mirror().map(|m| m.ts);
    Ok(report)
}

/// Job files in `dir` not seen before (`.yaml`, `.yml`, `.json`), in name order.
fn new_job_files(dir: &Path, seen: &mut BTreeSet<PathBuf>) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(|source| JobsError::Io { what: "watched folder", path: dir.to_path_buf(), source })?;
    let mut fresh: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|x| x.to_str()).is_some_and(|x| matches!(x, "yaml" | "yml" | "json")))
        .filter(|p| !seen.contains(p))
        .collect();
    fresh.sort();
    seen.extend(fresh.iter().cloned());
    Ok(fresh)
}

struct TaskRun {
    spec: Arc<TaskSpec>,
    report: TaskReport,
}

struct RunState {
    options: RunOptions,
    dispatcher: Box<dyn Dispatcher>,
    tasks: HashMap<String, TaskRun>,
    order: Vec<String>,
    running: usize,
    epoch: Instant,
    replans: Vec<Replan>,
    arrival_errors: Vec<String>,
    decisions: u64,
    decision_total: Duration,
    decision_max: Duration,
}

impl RunState {
    fn new(options: &RunOptions) -> Self {
        Self {
            options: options.clone(),
            dispatcher: dispatcher(options.schedule, options.rules, options.colouring),
            tasks: HashMap::new(),
            order: Vec::new(),
            running: 0,
            epoch: Instant::now(),
            replans: Vec::new(),
            arrival_errors: Vec::new(),
            decisions: 0,
            decision_total: Duration::ZERO,
            decision_max: Duration::ZERO,
        }
    }

    fn keys(&self) -> HashSet<String> {
        self.tasks.keys().cloned().collect()
    }

    fn seconds(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.epoch).as_secs_f64()
    }

    /// Times one scheduler decision and logs the re-plan it caused.
    fn decide<T>(&mut self, on_event: &mut (dyn FnMut(RunEvent) + Send), f: impl FnOnce(&mut dyn Dispatcher) -> Result<(T, Option<String>)>) -> Result<T> {
        let started = Instant::now();
        let (value, replan) = f(self.dispatcher.as_mut())?;
        let took = started.elapsed();
        self.decisions += 1;
        self.decision_total += took;
        self.decision_max = self.decision_max.max(took);
        if let Some(reason) = replan {
            let at_s = self.seconds(Instant::now());
            on_event(RunEvent::Replanned { at_s, reason: reason.clone() });
            self.replans.push(Replan { at_s, reason });
        }
        Ok(value)
    }

    fn admit(&mut self, tasks: Vec<TaskSpec>, arrived: Duration, on_event: &mut (dyn FnMut(RunEvent) + Send)) -> Result<()> {
        let specs: Vec<Arc<TaskSpec>> = tasks.into_iter().map(Arc::new).collect();
        let refs: Vec<&TaskSpec> = specs.iter().map(|s| s.as_ref()).collect();
        self.decide(on_event, |d| Ok(((), d.add(&refs)?)))?;
        for spec in specs {
            let report = TaskReport {
                task: spec.key.clone(),
                status: TaskStatus::Pending,
                arrived_s: arrived.as_secs_f64(),
                start_s: None,
                end_s: None,
                attempts: 0,
                conflicts: 0,
                rows_written: 0,
                error: None,
                attempt_log: Vec::new(),
            };
            self.order.push(spec.key.clone());
            self.tasks.insert(spec.key.clone(), TaskRun { spec, report });
        }
        self.progress(on_event);
        Ok(())
    }

    async fn arrive(&mut self, lake: &Lake, file: &Path, load: &LoadOptions, on_event: &mut (dyn FnMut(RunEvent) + Send)) -> Result<()> {
        match load_tasks(lake, file, load, &self.keys()).await {
            Ok(tasks) => {
                on_event(RunEvent::Arrived { file: file.to_path_buf(), tasks: tasks.len() });
                let arrived = Instant::now().saturating_duration_since(self.epoch);
                self.admit(tasks, arrived, on_event)
            }
            // A bad arrival is reported; what runs goes on.
            Err(error) => {
                self.arrival_errors.push(format!("{}: {error}", file.display()));
                Ok(())
            }
        }
    }

    fn all_finished(&self) -> bool {
        self.tasks.values().all(|t| t.report.status != TaskStatus::Pending)
    }

    fn unfinished(&self) -> Vec<String> {
        self.order.iter().filter(|k| self.tasks[*k].report.status == TaskStatus::Pending).cloned().collect()
    }

    /// Starts what the schedule lets start; skips (and finishes) tasks whose
    /// dependency failed, which may let more start.
    fn start_ready(&mut self, lake: &Lake, running: &mut JoinSet<AttemptDone>, on_event: &mut (dyn FnMut(RunEvent) + Send)) -> Result<()> {
        loop {
            let slots = self.options.concurrency.saturating_sub(self.running);
            if slots == 0 {
                return Ok(());
            }
            let ready = self.decide(on_event, |d| Ok((d.ready(slots), None)))?;
            if ready.is_empty() {
                return Ok(());
            }
            for key in ready {
                let failed_dep = {
                    let spec = &self.tasks[&key].spec;
                    spec.deps.iter().find(|d| matches!(self.tasks.get(*d).map(|t| t.report.status), Some(TaskStatus::Failed | TaskStatus::Skipped))).cloned()
                };
                if let Some(dep) = failed_dep {
                    let task = self.tasks.get_mut(&key).ok_or_else(|| JobsError::Invalid(format!("unknown task {key}")))?;
                    task.report.status = TaskStatus::Skipped;
                    task.report.error = Some(format!("not run: its dependency {dep} did not succeed"));
                    on_event(RunEvent::Finished { task: key.clone(), status: TaskStatus::Skipped });
                    self.decide(on_event, |d| Ok(((), d.finished(&key)?)))?;
                    continue;
                }
                self.spawn(lake, &key, running, on_event);
            }
            self.progress(on_event);
        }
    }

    fn spawn(&mut self, lake: &Lake, key: &str, running: &mut JoinSet<AttemptDone>, on_event: &mut (dyn FnMut(RunEvent) + Send)) {
        let Some(task) = self.tasks.get_mut(key) else { return };
        task.report.attempts += 1;
        let attempt = task.report.attempts;
        let spec = Arc::clone(&task.spec);
        let lake = lake.clone();
        self.running += 1;
        on_event(RunEvent::Started { task: key.to_string(), attempt });
        running.spawn(async move {
            let start = Instant::now();
            let (result, undone) = run_attempt(&lake, &spec).await;
            AttemptDone { key: spec.key.clone(), start, end: Instant::now(), result, undone }
        });
    }

    fn attempt_done(&mut self, lake: &Lake, done: AttemptDone, running: &mut JoinSet<AttemptDone>, on_event: &mut (dyn FnMut(RunEvent) + Send)) -> Result<()> {
        self.running -= 1;
        let (start_s, end_s) = (self.seconds(done.start), self.seconds(done.end));
        let retries = self.options.retries as usize;
        let task = self.tasks.get_mut(&done.key).ok_or_else(|| JobsError::Invalid(format!("unknown task {}", done.key)))?;
        task.report.start_s.get_or_insert(start_s);
        let conflict = done.result.as_ref().err().and_then(|e| match e {
            JobsError::Delta { statement, source, .. } => ConflictKind::of(source).map(|kind| (kind, *statement)),
            _ => None,
        });
        let outcome = match (&done.result, conflict) {
            (Ok(_), _) => AttemptOutcome::Committed,
            (Err(_), Some((kind, statement))) => AttemptOutcome::Conflict { kind, statement },
            (Err(error), None) => AttemptOutcome::Failed { error: error.to_string() },
        };
        task.report.attempt_log.push(AttemptReport { start_s, end_s, outcome, undone_commits: done.undone });
        let attempt = task.report.attempts;
        let status = match (done.result, conflict) {
            (Ok(rows), _) => {
                task.report.rows_written = rows;
                TaskStatus::Succeeded
            }
            (Err(error), Some((kind, _))) => {
                task.report.conflicts += 1;
                on_event(RunEvent::Aborted { task: done.key.clone(), attempt, conflict: kind });
                if attempt <= retries {
                    // Re-run the whole task, as a platform scheduler's retry does.
                    self.spawn(lake, &done.key, running, on_event);
                    self.progress(on_event);
                    return Ok(());
                }
                task.report.error = Some(error.to_string());
                TaskStatus::Failed
            }
            (Err(error), None) => {
                task.report.error = Some(error.to_string());
                TaskStatus::Failed
            }
        };
        task.report.status = status;
        task.report.end_s = Some(end_s);
        on_event(RunEvent::Finished { task: done.key.clone(), status });
        let key = done.key;
        self.decide(on_event, |d| Ok(((), d.finished(&key)?)))?;
        self.progress(on_event);
        Ok(())
    }

    fn progress(&self, on_event: &mut (dyn FnMut(RunEvent) + Send)) {
        let finished = self.tasks.values().filter(|t| t.report.status != TaskStatus::Pending).count();
        let total = self.tasks.len();
        on_event(RunEvent::Progress { running: self.running, waiting: total - finished - self.running, finished, total });
    }

    fn report(self) -> RunReport {
        let mut tasks: Vec<TaskReport> = Vec::with_capacity(self.order.len());
        let mut by_key = self.tasks;
        for key in &self.order {
            if let Some(task) = by_key.remove(key) {
                tasks.push(task.report);
            }
        }
        let makespan_s = tasks.iter().filter_map(|t| t.end_s).fold(0.0, f64::max);
        let aborted: Vec<&AttemptReport> = tasks.iter().flat_map(|t| &t.attempt_log).filter(|a| matches!(a.outcome, AttemptOutcome::Conflict { .. })).collect();
        let count = |status| tasks.iter().filter(|t| t.status == status).count();
        RunReport {
            schedule: self.options.schedule,
            concurrency: self.options.concurrency,
            makespan_s,
            aborted_attempts: aborted.len(),
            wasted_task_s: aborted.iter().fold(0.0, |sum, a| sum + (a.end_s - a.start_s)),
            undone_commits: tasks.iter().flat_map(|t| &t.attempt_log).map(|a| a.undone_commits).sum(),
            replans: self.replans.len(),
            replan_log: self.replans,
            scheduler_decisions: self.decisions,
            scheduler_decision_us_mean: if self.decisions == 0 { 0.0 } else { self.decision_total.as_secs_f64() * 1e6 / self.decisions as f64 },
            scheduler_decision_us_max: self.decision_max.as_secs_f64() * 1e6,
            succeeded: count(TaskStatus::Succeeded),
            failed: count(TaskStatus::Failed),
            skipped: count(TaskStatus::Skipped),
            arrival_errors: self.arrival_errors,
            mirror_ts: None,
            tasks,
        }
    }
}

/// One attempt: the task's statements in order, each its own Delta commit. An
/// attempt that ends in an error takes its commits back (`attempt`), so nothing
/// of it stays visible and a retry starts from the same tables; returns how many
/// it took back. When they cannot all be taken back, the error says so (and the
/// task is not retried: a retry would apply them twice).
async fn run_attempt(lake: &Lake, spec: &TaskSpec) -> (Result<u64>, usize) {
    let mut writes = AttemptWrites::new(lake);
    let mut rows = 0;
    for (i, statement) in spec.statements.iter().enumerate() {
        let at = StatementContext { task: &spec.key, number: i + 1, default_schema: spec.default_schema.as_deref() };
        match execute(lake, at, statement, &mut writes).await {
            Ok(written) => rows += written,
            Err(error) if writes.commits().is_empty() => return (Err(error), 0),
            Err(error) => {
                return match writes.undo(lake).await {
                    Ok(undone) => (Err(error), undone),
                    Err(undo) => (Err(JobsError::Undo { task: spec.key.clone(), cause: Box::new(error), source: undo }), 0),
                }
            }
        }
    }
    (Ok(rows), 0)
}
