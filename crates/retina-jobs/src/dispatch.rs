//! The three schedules, behind one small interface the run loop drives: tasks
//! are added (at the start, or when they arrive), the loop asks which to start,
//! and reports each one that finished. A dispatcher returns the reason whenever
//! its plan changed, so every re-plan is logged with why.

use std::collections::{HashMap, HashSet, VecDeque};

use retina_scheduler::analysis::intern;
use retina_scheduler::dynamic::DynamicScheduler;
use retina_scheduler::{discover, plan, Colouring, Rules, Workload};

use crate::error::{JobsError, Result};
use crate::tasks::TaskSpec;

/// How tasks are started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Schedule {
    /// What a platform scheduler does today: every task whose dependencies are
    /// done starts at once (up to the concurrency); conflicts are Delta's to find.
    None,
    /// The paper's Algorithm 1: runnable sets coloured into batches that run one
    /// after another.
    Batches,
    /// Event-driven: a task starts when its dependencies are done and no
    /// conflicting task runs; re-planned on material changes only.
    Admission,
}

impl Schedule {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "none" => Some(Self::None),
            "batches" => Some(Self::Batches),
            "admission" => Some(Self::Admission),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Batches => "batches",
            Self::Admission => "admission",
        }
    }
}

/// What the run loop needs of a schedule.
pub(crate) trait Dispatcher: Send {
    /// Takes in new tasks (their dependencies are added before or with them).
    /// Returns why the plan changed, if it did.
    fn add(&mut self, tasks: &[&TaskSpec]) -> Result<Option<String>>;
    /// Up to `slots` tasks to start now.
    fn ready(&mut self, slots: usize) -> Vec<String>;
    /// A started task finished (whatever its outcome). Returns why the plan
    /// changed, if it did.
    fn finished(&mut self, key: &str) -> Result<Option<String>>;
}

pub(crate) fn dispatcher(schedule: Schedule, rules: Rules, colouring: Colouring) -> Box<dyn Dispatcher> {
    match schedule {
        Schedule::None => Box::new(Unordered::default()),
        Schedule::Admission => Box::new(Admission { scheduler: DynamicScheduler::new(rules, colouring, &[]), admitted: VecDeque::new() }),
        Schedule::Batches => Box::new(Batches { rules, colouring, tasks: HashMap::new(), started: HashSet::new(), done: HashSet::new(), current: Vec::new(), queue: VecDeque::new() }),
    }
}

/// Dependencies in the order the tasks must be submitted (a dependency first).
fn dependency_order<'a>(tasks: &[&'a TaskSpec]) -> Result<Vec<&'a TaskSpec>> {
    let keys: HashSet<&str> = tasks.iter().map(|t| t.key.as_str()).collect();
    let mut placed: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(tasks.len());
    while out.len() < tasks.len() {
        let before = out.len();
        for task in tasks {
            if !placed.contains(task.key.as_str()) && task.deps.iter().all(|d| placed.contains(d.as_str()) || !keys.contains(d.as_str())) {
                placed.insert(&task.key);
                out.push(*task);
            }
        }
        if out.len() == before {
            let stuck = tasks.iter().find(|t| !placed.contains(t.key.as_str())).map(|t| t.key.clone()).unwrap_or_default();
            return Err(JobsError::Invalid(format!("task {stuck} is on a dependency cycle")));
        }
    }
    Ok(out)
}

/// `--schedule none`: dependencies only, first come first started.
#[derive(Default)]
struct Unordered {
    remaining: HashMap<String, usize>,
    successors: HashMap<String, Vec<String>>,
    done: HashSet<String>,
    runnable: VecDeque<String>,
}

impl Dispatcher for Unordered {
    fn add(&mut self, tasks: &[&TaskSpec]) -> Result<Option<String>> {
        for task in dependency_order(tasks)? {
            let open: Vec<&String> = task.deps.iter().filter(|d| !self.done.contains(*d)).collect();
            for dep in &open {
                self.successors.entry((*dep).clone()).or_default().push(task.key.clone());
            }
            if open.is_empty() {
                self.runnable.push_back(task.key.clone());
            } else {
                self.remaining.insert(task.key.clone(), open.len());
            }
        }
        Ok(None)
    }

    fn ready(&mut self, slots: usize) -> Vec<String> {
        let n = slots.min(self.runnable.len());
        self.runnable.drain(..n).collect()
    }

    fn finished(&mut self, key: &str) -> Result<Option<String>> {
        self.done.insert(key.to_string());
        for successor in self.successors.remove(key).unwrap_or_default() {
            if let Some(left) = self.remaining.get_mut(&successor) {
                *left -= 1;
                if *left == 0 {
                    self.remaining.remove(&successor);
                    self.runnable.push_back(successor);
                }
            }
        }
        Ok(None)
    }
}

/// `--schedule admission`: the scheduler crate's dynamic scheduler.
struct Admission {
    scheduler: DynamicScheduler,
    /// Marked running by the scheduler (so they hold their conflicts), waiting for
    /// a free slot of the concurrency.
    admitted: VecDeque<String>,
}

impl Dispatcher for Admission {
    fn add(&mut self, tasks: &[&TaskSpec]) -> Result<Option<String>> {
        let mut reasons = Vec::new();
        for task in dependency_order(tasks)? {
            let deps: Vec<&str> = task.deps.iter().map(String::as_str).collect();
            let outcome = self.scheduler.submit(&task.key, &deps, &task.accesses, task.universal)?;
            if outcome.replanned {
                reasons.push(format!("arrival of {} conflicts with a running or planned task", task.key));
            }
        }
        Ok((!reasons.is_empty()).then(|| reasons.join("; ")))
    }

    fn ready(&mut self, slots: usize) -> Vec<String> {
        self.admitted.extend(self.scheduler.poll());
        let n = slots.min(self.admitted.len());
        self.admitted.drain(..n).collect()
    }

    fn finished(&mut self, key: &str) -> Result<Option<String>> {
        let outcome = self.scheduler.complete(key)?;
        Ok(outcome.replanned.then(|| format!("completion of {key} released conflicts or made conflicting tasks runnable")))
    }
}

/// `--schedule batches`: Algorithm 1 over the tasks not started yet; a batch
/// starts when the previous one has finished. An arrival re-plans what has not
/// started.
struct Batches {
    rules: Rules,
    colouring: Colouring,
    tasks: HashMap<String, TaskSpec>,
    started: HashSet<String>,
    done: HashSet<String>,
    /// The batch being run: its members not finished yet.
    current: Vec<String>,
    queue: VecDeque<Vec<String>>,
}

impl Batches {
    fn replan(&mut self) -> Result<()> {
        let mut pending: Vec<&TaskSpec> = self.tasks.values().filter(|t| !self.started.contains(&t.key)).collect();
        pending.sort_by(|a, b| a.key.cmp(&b.key));
        let index: HashMap<&str, u32> = pending.iter().enumerate().map(|(i, t)| (t.key.as_str(), i as u32)).collect();
        let mut workload = Workload::new();
        for task in &pending {
            let deps = task.deps.iter().filter_map(|d| index.get(d.as_str()).copied()).collect();
            let accesses = task.accesses.iter().map(|a| intern(a, &mut workload.names)).collect();
            workload.add_task(&task.job, &task.key, deps, accesses, task.duration, task.universal);
        }
        workload.check()?;
        let graph = discover(&workload, &self.rules);
        let plan = plan(&workload, &graph, self.colouring);
        self.queue = plan.batches().map(|batch| batch.iter().map(|&t| pending[t as usize].key.clone()).collect()).collect();
        Ok(())
    }
}

impl Dispatcher for Batches {
    fn add(&mut self, tasks: &[&TaskSpec]) -> Result<Option<String>> {
        let first = self.tasks.is_empty();
        for task in tasks {
            self.tasks.insert(task.key.clone(), (*task).clone());
        }
        self.replan()?;
        Ok((!first).then(|| format!("arrival of {} task(s) re-planned the batches not started", tasks.len())))
    }

    fn ready(&mut self, slots: usize) -> Vec<String> {
        let mut out = Vec::new();
        // The next batch starts only when every task of the current one finished.
        if self.current.is_empty() {
            if let Some(batch) = self.queue.pop_front() {
                self.current = batch;
            }
        }
        for key in &self.current {
            if out.len() == slots {
                break;
            }
            if self.started.insert(key.clone()) {
                out.push(key.clone());
            }
        }
        out
    }

    fn finished(&mut self, key: &str) -> Result<Option<String>> {
        self.done.insert(key.to_string());
        self.current.retain(|k| k != key);
        Ok(None)
    }
}
