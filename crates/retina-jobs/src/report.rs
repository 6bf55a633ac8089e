//! What a run did: per task (start, end, attempts, conflicts, rows written) and
//! in sum (makespan, aborted attempts, task-seconds wasted, re-plans), as a text
//! table and as one JSON object.

use serde::Serialize;

use crate::conflict::ConflictKind;
use crate::dispatch::Schedule;

/// How one attempt of a task ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AttemptOutcome {
    Committed,
    /// delta-rs's conflict checker refused a commit.
    Conflict { kind: ConflictKind, statement: usize },
    /// Any other error (bad SQL, a missing table, ...).
    Failed { error: String },
}

#[derive(Debug, Clone, Serialize)]
pub struct AttemptReport {
    pub start_s: f64,
    pub end_s: f64,
    #[serde(flatten)]
    pub outcome: AttemptOutcome,
    /// Versions the attempt had committed before its error, taken back.
    pub undone_commits: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Not finished (the run stopped first).
    Pending,
    Succeeded,
    /// Its last attempt failed (a conflict past the retries, or another error).
    Failed,
    /// Not run: a dependency failed or was skipped.
    Skipped,
}

#[derive(Debug, Clone, Serialize)]
pub struct TaskReport {
    pub task: String,
    pub status: TaskStatus,
    /// When it arrived (seconds since the run started).
    pub arrived_s: f64,
    pub start_s: Option<f64>,
    pub end_s: Option<f64>,
    pub attempts: usize,
    /// Attempts aborted by a commit conflict.
    pub conflicts: usize,
    pub rows_written: u64,
    pub error: Option<String>,
    pub attempt_log: Vec<AttemptReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Replan {
    pub at_s: f64,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub schedule: Schedule,
    pub concurrency: usize,
    pub makespan_s: f64,
    pub aborted_attempts: usize,
    /// Task-seconds spent in attempts that were aborted by a conflict.
    pub wasted_task_s: f64,
    /// Versions that attempts which did not finish had committed, taken back.
    pub undone_commits: usize,
    pub replans: usize,
    pub replan_log: Vec<Replan>,
    /// Scheduler decisions (adds, start queries, completions) and their cost.
    pub scheduler_decisions: u64,
    pub scheduler_decision_us_mean: f64,
    pub scheduler_decision_us_max: f64,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Job files that arrived but could not be loaded.
    pub arrival_errors: Vec<String>,
    /// The Retina snapshot of the published mirror every read of it saw, if one was read.
    pub mirror_ts: Option<u64>,
    pub tasks: Vec<TaskReport>,
}

impl RunReport {
    /// The summary as one JSON line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// A table per task, then the summary.
    pub fn to_table(&self) -> String {
        let width = self.tasks.iter().map(|t| t.task.len()).max().unwrap_or(4).max(4);
        let mut out = format!("{:<width$}  {:>9}  {:>7}  {:>7}  {:>8}  {:>9}  {:>12}\n", "task", "status", "start s", "end s", "attempts", "conflicts", "rows written");
        for t in &self.tasks {
            let status = match t.status {
                TaskStatus::Pending => "pending",
                TaskStatus::Succeeded => "ok",
                TaskStatus::Failed => "FAILED",
                TaskStatus::Skipped => "skipped",
            };
            let time = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}"));
            out.push_str(&format!(
                "{:<width$}  {:>9}  {:>7}  {:>7}  {:>8}  {:>9}  {:>12}\n",
                t.task,
                status,
                time(t.start_s),
                time(t.end_s),
                t.attempts,
                t.conflicts,
                t.rows_written
            ));
        }
        for t in self.tasks.iter().filter(|t| t.error.is_some()) {
            out.push_str(&format!("{}: {}\n", t.task, t.error.as_deref().unwrap_or_default()));
        }
        for replan in &self.replan_log {
            out.push_str(&format!("re-plan at {:.2} s: {}\n", replan.at_s, replan.reason));
        }
        if let Some(ts) = self.mirror_ts {
            out.push_str(&format!("mirror tables read at the published cut ts {ts}\n"));
        }
        for error in &self.arrival_errors {
            out.push_str(&format!("arrival not loaded: {error}\n"));
        }
        out.push_str(&format!(
            "schedule {}: makespan {:.2} s, {} aborted attempts ({} of their commits undone), {:.2} task-seconds wasted, {} re-plans; {} ok, {} failed, {} skipped; {} scheduler decisions at {:.1} µs each on average\n",
            self.schedule.name(),
            self.makespan_s,
            self.aborted_attempts,
            self.undone_commits,
            self.wasted_task_s,
            self.replans,
            self.succeeded,
            self.failed,
            self.skipped,
            self.scheduler_decisions,
            self.scheduler_decision_us_mean
        ));
        out
    }
}
