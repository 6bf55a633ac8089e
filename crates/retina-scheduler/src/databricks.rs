//! Databricks Jobs API 2.1 job definitions: read them, and write them back with
//! the conflict-serialising dependencies added (the paper's Figure 6), so users
//! keep their platform scheduler and only take our plan.
//!
//! Accepted shapes: a create/reset payload `{name, tasks: [...]}` or a `jobs/get`
//! response `{job_id, settings: {name, tasks: [...]}}`. Per task we read
//! `task_key`, `depends_on[].task_key` and `sql_task.file.path` (resolved relative
//! to the definition's folder); other task kinds have no SQL we can analyse.

use std::path::Path;

use serde_json::{json, Value};

use crate::error::{Result, SchedulerError};
use crate::graph::ConflictGraph;
use crate::jobset::{read_sql, stem, JobDef, JobSet, TaskDef};
use crate::model::{TaskIdx, Workload};
use crate::plan::Plan;

/// Whether `v` looks like a Databricks job definition.
pub fn is_databricks(v: &Value) -> bool {
    let tasks = v.get("settings").and_then(|s| s.get("tasks")).or_else(|| v.get("tasks"));
    tasks.and_then(Value::as_array).is_some_and(|ts| ts.iter().any(|t| t.get("task_key").is_some()))
}

fn settings(v: &Value) -> &Value {
    v.get("settings").unwrap_or(v)
}

/// Parses a Databricks definition into a one-job [`JobSet`].
pub fn parse(path: &Path, base: &Path, value: Value) -> Result<JobSet> {
    let bad = |detail: String| SchedulerError::JobFormat { path: path.to_path_buf(), detail };
    let s = settings(&value);
    let name = s.get("name").and_then(Value::as_str).map(str::to_string).unwrap_or_else(|| stem(path));
    let tasks = s.get("tasks").and_then(Value::as_array).ok_or_else(|| bad("no `tasks` array".to_string()))?;
    let mut job = JobDef { name, tasks: Vec::new() };
    for (i, t) in tasks.iter().enumerate() {
        let id = t.get("task_key").and_then(Value::as_str).ok_or_else(|| bad(format!("tasks[{i}] has no `task_key`")))?;
        let mut depends_on = Vec::new();
        for d in t.get("depends_on").and_then(Value::as_array).into_iter().flatten() {
            let key = d.get("task_key").and_then(Value::as_str).ok_or_else(|| bad(format!("task `{id}`: depends_on entry without `task_key`")))?;
            depends_on.push(key.to_string());
        }
        let sql_file = t.get("sql_task").and_then(|q| q.get("file")).and_then(|f| f.get("path")).and_then(Value::as_str).map(str::to_string);
        let sql = match &sql_file {
            Some(f) => Some(read_sql(base, f)?),
            None => None,
        };
        job.tasks.push(TaskDef { id: id.to_string(), depends_on, sql, sql_file, duration: None });
    }
    Ok(JobSet { jobs: vec![job], databricks: Some(value), path: path.to_path_buf(), ..Default::default() })
}

/// Dependencies to add so that conflicting tasks never run concurrently under
/// a dependency-driven platform scheduler: for each conflict edge whose tasks are
/// not already ordered by the DAG (or by an edge added earlier), the task in the
/// later batch of `plan` depends on the one in the earlier batch. Returns
/// `(before, after)` pairs. Cost: one reachability search per edge, fine for
/// real jobs (Databricks caps a job at 1,000 tasks).
pub fn added_dependencies(w: &Workload, g: &ConflictGraph, plan: &Plan) -> Vec<(TaskIdx, TaskIdx)> {
    let batch = plan.batch_of(w.len());
    let mut preds: Vec<Vec<TaskIdx>> = w.tasks().iter().map(|t| t.deps.clone()).collect();
    let mut edges: Vec<(TaskIdx, TaskIdx)> = g
        .edges()
        .iter()
        .map(|e| if batch[e.a as usize] <= batch[e.b as usize] { (e.a, e.b) } else { (e.b, e.a) })
        .collect();
    edges.sort_by_key(|&(x, y)| (batch[y as usize], batch[x as usize], x, y));
    let mut added = Vec::new();
    for (before, after) in edges {
        if !reaches(&preds, after, before) {
            preds[after as usize].push(before);
            added.push((before, after));
        }
    }
    added
}

/// Whether `target` is an ancestor of `from` along `preds`.
fn reaches(preds: &[Vec<TaskIdx>], from: TaskIdx, target: TaskIdx) -> bool {
    let mut seen = vec![false; preds.len()];
    let mut stack = vec![from];
    while let Some(v) = stack.pop() {
        for &p in &preds[v as usize] {
            if p == target {
                return true;
            }
            if !seen[p as usize] {
                seen[p as usize] = true;
                stack.push(p);
            }
        }
    }
    false
}

/// The job definition with the added dependencies: the original Databricks
/// document when the input was one (every other field kept), otherwise a
/// skeleton per job (`task_key`, `depends_on`, `sql_task.file.path`). Edges
/// between tasks of different jobs cannot be expressed in one job's
/// `depends_on`; they are listed under `x-retina-cross-job-conflicts`.
pub fn emit(set: &JobSet, w: &Workload, added: &[(TaskIdx, TaskIdx)]) -> Value {
    let mut cross = Vec::new();
    let mut extra: Vec<Vec<String>> = vec![Vec::new(); w.len()];
    for &(before, after) in added {
        let (tb, ta) = (w.task(before), w.task(after));
        if tb.job == ta.job {
            extra[after as usize].push(tb.name.clone());
        } else {
            cross.push(json!({"before": w.display_name(before), "after": w.display_name(after)}));
        }
    }
    let extra_of = |job: &str, task: &str| -> &[String] {
        (0..w.len() as TaskIdx)
            .find(|&t| w.task(t).job == job && w.task(t).name == task)
            .map(|t| extra[t as usize].as_slice())
            .unwrap_or(&[])
    };
    let mut out = match &set.databricks {
        Some(original) => {
            let mut doc = original.clone();
            let job_name = set.jobs.first().map(|j| j.name.clone()).unwrap_or_default();
            let tasks = match doc.get_mut("settings") {
                Some(s) => s.get_mut("tasks"),
                None => doc.get_mut("tasks"),
            };
            if let Some(Value::Array(tasks)) = tasks {
                for t in tasks.iter_mut() {
                    let key = t.get("task_key").and_then(Value::as_str).unwrap_or_default().to_string();
                    add_deps(t, extra_of(&job_name, &key));
                }
            }
            doc
        }
        None => {
            let jobs: Vec<Value> = set
                .jobs
                .iter()
                .map(|j| {
                    let tasks: Vec<Value> = j
                        .tasks
                        .iter()
                        .map(|t| {
                            let mut v = json!({"task_key": t.id});
                            let deps: Vec<Value> = t.depends_on.iter().map(|d| json!({"task_key": d})).collect();
                            if !deps.is_empty() {
                                v["depends_on"] = Value::Array(deps);
                            }
                            if let Some(f) = &t.sql_file {
                                v["sql_task"] = json!({"file": {"path": f}});
                            }
                            add_deps(&mut v, extra_of(&j.name, &t.id));
                            v
                        })
                        .collect();
                    json!({"name": j.name, "tasks": tasks})
                })
                .collect();
            if jobs.len() == 1 {
                jobs.into_iter().next().unwrap_or(Value::Null)
            } else {
                json!({"jobs": jobs})
            }
        }
    };
    if !cross.is_empty() {
        if let Value::Object(m) = &mut out {
            m.insert("x-retina-cross-job-conflicts".to_string(), Value::Array(cross));
        }
    }
    out
}

fn add_deps(task: &mut Value, extra: &[String]) {
    if extra.is_empty() {
        return;
    }
    let Value::Object(m) = task else { return };
    let deps = m.entry("depends_on").or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(list) = deps {
        for e in extra {
            if !list.iter().any(|d| d.get("task_key").and_then(Value::as_str) == Some(e)) {
                list.push(json!({"task_key": e}));
            }
        }
    }
}
