//! The analysed workload: tasks with dependencies and accesses (the paper's
//! `<Id, Job_Id, D_t, R_t>`), in flat arrays indexed by dense task ids.

use std::collections::HashMap;
use std::ops::Range;

use crate::access::{Access, Interner, Sym};
use crate::error::{Result, SchedulerError};

/// Dense task index inside a [`Workload`].
pub type TaskIdx = u32;

/// One task. Invariants: every `deps` entry is a valid index of the same
/// workload; `accesses` is a range of `Workload::accesses`.
#[derive(Debug, Clone)]
pub struct Task {
    /// Task id as written in the job file (unique within its job).
    pub name: String,
    /// The job it belongs to.
    pub job: String,
    /// Tasks that must complete before this one starts.
    pub deps: Vec<TaskIdx>,
    /// Estimated duration (arbitrary unit, default 1); used for critical-path
    /// priorities and the makespan simulator.
    pub duration: f64,
    /// Its accesses are unknown (unparseable SQL under `--assume-conflict`): it
    /// conflicts with every other task.
    pub universal: bool,
    accesses: Range<u32>,
}

/// A set of jobs flattened into tasks, ready for conflict discovery.
///
/// Invariants: `owner[a]` is the task whose range contains access `a`; tasks'
/// ranges are contiguous and in task order; `primary[table]`, when present, is
/// the partition column the conflict index buckets that table by.
#[derive(Debug, Clone, Default)]
pub struct Workload {
    tasks: Vec<Task>,
    accesses: Vec<Access>,
    owner: Vec<TaskIdx>,
    /// Interned table, column and value names.
    pub names: Interner,
    primary: HashMap<Sym, Sym>,
    multi_job: bool,
    /// Non-fatal findings of the analysis (ambiguous names, ...).
    pub warnings: Vec<String>,
}

impl Workload {
    /// An empty workload.
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares the partition column that the index buckets `table` by (the first
    /// declared partition column of the table).
    pub fn set_primary_partition_column(&mut self, table: &str, column: &str) {
        let (t, c) = (self.names.intern(table), self.names.intern(column));
        self.primary.insert(t, c);
    }

    /// The bucketing column of a table, if declared.
    pub fn primary_partition_column(&self, table: Sym) -> Option<Sym> {
        self.primary.get(&table).copied()
    }

    /// Appends a task and returns its index. `deps` may name tasks added later;
    /// call [`Workload::check`] once all tasks are in.
    pub fn add_task(&mut self, job: &str, name: &str, deps: Vec<TaskIdx>, accesses: Vec<Access>, duration: f64, universal: bool) -> TaskIdx {
        let idx = self.tasks.len() as TaskIdx;
        if let Some(first) = self.tasks.first() {
            if first.job != job {
                self.multi_job = true;
            }
        }
        let start = self.accesses.len() as u32;
        for a in accesses {
            self.accesses.push(a);
            self.owner.push(idx);
        }
        let end = self.accesses.len() as u32;
        let duration = if duration.is_finite() && duration > 0.0 { duration } else { 1.0 };
        self.tasks.push(Task { name: name.to_string(), job: job.to_string(), deps, duration, universal, accesses: start..end });
        idx
    }

    /// Validates dependency indexes and acyclicity.
    pub fn check(&self) -> Result<()> {
        let n = self.tasks.len();
        for t in &self.tasks {
            for &d in &t.deps {
                if d as usize >= n {
                    return Err(SchedulerError::UnknownDependency { job: t.job.clone(), task: t.name.clone(), dependency: format!("#{d}") });
                }
            }
        }
        if let Err(t) = self.topo_order() {
            let task = &self.tasks[t as usize];
            return Err(SchedulerError::DependencyCycle { job: task.job.clone(), task: task.name.clone() });
        }
        Ok(())
    }

    /// Tasks in dependency order (Kahn); on a cycle, `Err` with a task on it.
    pub fn topo_order(&self) -> std::result::Result<Vec<TaskIdx>, TaskIdx> {
        let n = self.tasks.len();
        let mut indeg = vec![0u32; n];
        let succ = self.successors();
        for (i, t) in self.tasks.iter().enumerate() {
            indeg[i] = t.deps.iter().filter(|&&d| (d as usize) < n).count() as u32;
        }
        let mut order: Vec<TaskIdx> = (0..n as TaskIdx).filter(|&t| indeg[t as usize] == 0).collect();
        let mut head = 0;
        while head < order.len() {
            let t = order[head];
            head += 1;
            for &s in &succ[t as usize] {
                indeg[s as usize] -= 1;
                if indeg[s as usize] == 0 {
                    order.push(s);
                }
            }
        }
        if order.len() == n {
            Ok(order)
        } else {
            Err((0..n as TaskIdx).find(|&t| indeg[t as usize] > 0).unwrap_or(0))
        }
    }

    /// Successor lists (the reverse of `deps`), counting a repeated dependency once
    /// per occurrence so in-degree bookkeeping stays consistent.
    pub fn successors(&self) -> Vec<Vec<TaskIdx>> {
        let mut succ = vec![Vec::new(); self.tasks.len()];
        for (i, t) in self.tasks.iter().enumerate() {
            for &d in &t.deps {
                if let Some(s) = succ.get_mut(d as usize) {
                    s.push(i as TaskIdx);
                }
            }
        }
        succ
    }

    /// Number of tasks.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// True when there are no tasks.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    /// All tasks.
    pub fn tasks(&self) -> &[Task] {
        &self.tasks
    }

    /// One task.
    pub fn task(&self, t: TaskIdx) -> &Task {
        &self.tasks[t as usize]
    }

    /// All accesses, task by task.
    pub fn accesses(&self) -> &[Access] {
        &self.accesses
    }

    /// The task owning access `a`.
    pub fn owner(&self, a: u32) -> TaskIdx {
        self.owner[a as usize]
    }

    /// The accesses of task `t`.
    pub fn task_accesses(&self, t: TaskIdx) -> &[Access] {
        let r = &self.tasks[t as usize].accesses;
        &self.accesses[r.start as usize..r.end as usize]
    }

    /// Global access ids of task `t`.
    pub fn task_access_ids(&self, t: TaskIdx) -> Range<u32> {
        self.tasks[t as usize].accesses.clone()
    }

    /// Display name: the task id, prefixed by `job/` when there are several jobs.
    pub fn display_name(&self, t: TaskIdx) -> String {
        let task = &self.tasks[t as usize];
        if self.multi_job {
            format!("{}/{}", task.job, task.name)
        } else {
            task.name.clone()
        }
    }

    /// Finds a task by display name or plain id.
    pub fn find(&self, name: &str) -> Option<TaskIdx> {
        (0..self.tasks.len() as TaskIdx).find(|&t| self.display_name(t) == name || self.tasks[t as usize].name == name)
    }

    /// Replaces the table of every access through `remap` (used to unify
    /// differently qualified references to the same table).
    pub fn remap_tables(&mut self, remap: &HashMap<Sym, Sym>) {
        for a in &mut self.accesses {
            if let Some(&to) = remap.get(&a.table) {
                a.table = to;
            }
        }
    }
}
