//! The dynamic scheduler: tasks arrive and complete over time; the conflict
//! graph is maintained incrementally through the [`ConflictIndex`], and the
//! colouring is recomputed only on a *material change* (paper §3, eq. 1–2):
//!
//! 1. an arriving task that is runnable and conflicts with a running or planned
//!    task (a non-conflicting one joins the current batch without re-planning);
//! 2. the completion of a task that held an exclusive access (UPDATE, DELETE,
//!    MERGE, OVERWRITE, DDL) and whose completion removed conflict edges
//!    (ΔE ≠ ∅), since that may free a better colouring. A task that becomes
//!    runnable because of a completion is treated like an arrival.
//!
//! Dispatch ([`DynamicScheduler::poll`]) takes tasks from the head batch, and
//! additionally refuses any task that conflicts with a running one: the plan is
//! an ordering preference, the running-conflict counter is the safety guarantee.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::access::Access;
use crate::analysis::{intern, Analyzer, RawAccess};
use crate::colour::{colour, Colouring, LocalGraph};
use crate::error::{Result, SchedulerError};
use crate::index::ConflictIndex;
use crate::model::TaskIdx;
use crate::rules::Rules;

/// Life cycle of a task in the dynamic scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Some dependency has not completed.
    Waiting,
    /// Runnable and placed in a batch, not started.
    Planned,
    /// Dispatched by `poll`, not completed.
    Running,
    /// Completed; its accesses and edges are gone.
    Done,
}

/// What an arrival or completion caused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Outcome {
    /// Whether the change was material and the plan was recoloured.
    pub replanned: bool,
    /// Tasks that became runnable (the arrival itself, or successors).
    pub became_runnable: usize,
}

#[derive(Debug, Clone)]
struct DynTask {
    name: String,
    state: TaskState,
    remaining_deps: u32,
    successors: Vec<TaskIdx>,
    access_ids: Vec<u32>,
    exclusive: bool,
}

/// Incremental scheduler. Invariants: `adj` is symmetric and holds exactly the
/// conflict edges between tasks that are not `Done`; `running_conflicts[t]`
/// is the number of `Running` neighbours of `t`; every `Planned` task is in
/// exactly one batch of `batches`; no two `Running` tasks are adjacent.
#[derive(Debug)]
pub struct DynamicScheduler {
    algo: Colouring,
    names: crate::access::Interner,
    index: ConflictIndex,
    pending_primary: HashMap<String, String>,
    tasks: Vec<DynTask>,
    by_name: HashMap<String, TaskIdx>,
    adj: Vec<HashSet<TaskIdx>>,
    running_conflicts: Vec<u32>,
    universal: Vec<TaskIdx>,
    batches: VecDeque<Vec<TaskIdx>>,
    replans: usize,
}

impl DynamicScheduler {
    /// A scheduler with the given rules and colouring. `primary` maps table →
    /// its first partition column (for bucketing), as declared for analysis.
    pub fn new(rules: Rules, algo: Colouring, primary: &[(String, String)]) -> Self {
        let mut names = crate::access::Interner::default();
        let mut prim = HashMap::new();
        for (t, c) in primary {
            let (t, c) = (names.intern(t), names.intern(c));
            prim.insert(t, c);
        }
        Self {
            algo,
            names,
            index: ConflictIndex::new(rules, prim),
            pending_primary: HashMap::new(),
            tasks: Vec::new(),
            by_name: HashMap::new(),
            adj: Vec::new(),
            running_conflicts: Vec::new(),
            universal: Vec::new(),
            batches: VecDeque::new(),
            replans: 0,
        }
    }

    /// How many times the plan was recoloured.
    pub fn replans(&self) -> usize {
        self.replans
    }

    /// The state of a task by name.
    pub fn state(&self, name: &str) -> Option<TaskState> {
        self.by_name.get(name).map(|&t| self.tasks[t as usize].state)
    }

    /// The current batches (task names), head first.
    pub fn batches(&self) -> Vec<Vec<String>> {
        self.batches.iter().map(|b| b.iter().map(|&t| self.tasks[t as usize].name.clone()).collect()).collect()
    }

    /// Names of running tasks.
    pub fn running(&self) -> Vec<String> {
        self.tasks.iter().filter(|t| t.state == TaskState::Running).map(|t| t.name.clone()).collect()
    }

    /// Analyses `sql` and submits the task.
    pub fn submit_sql(&mut self, analyzer: &Analyzer, name: &str, deps: &[&str], sql: &str) -> Result<Outcome> {
        let raw = analyzer.analyze_raw(name, sql)?;
        for (t, cols) in analyzer.catalog().declared() {
            if let Some(c) = cols.first() {
                self.pending_primary.insert(t.clone(), c.clone());
            }
        }
        self.submit(name, deps, &raw, false)
    }

    /// Submits a task with known accesses (`universal` = unknown accesses,
    /// conflicts with everything). Dependencies must name submitted tasks.
    pub fn submit(&mut self, name: &str, deps: &[&str], raw: &[RawAccess], universal: bool) -> Result<Outcome> {
        if self.by_name.contains_key(name) {
            return Err(SchedulerError::TaskState { task: name.to_string(), detail: "already submitted".to_string() });
        }
        let mut dep_ids = Vec::with_capacity(deps.len());
        for d in deps {
            let id = *self.by_name.get(*d).ok_or_else(|| SchedulerError::UnknownDependency {
                job: "dynamic".to_string(),
                task: name.to_string(),
                dependency: d.to_string(),
            })?;
            dep_ids.push(id);
        }
        let t = self.tasks.len() as TaskIdx;
        self.sync_primary();
        let accesses: Vec<Access> = raw.iter().map(|r| intern(r, &mut self.names)).collect();
        let exclusive = universal || accesses.iter().any(|a| a.mode.is_exclusive());
        let remaining = dep_ids.iter().filter(|&&d| self.tasks[d as usize].state != TaskState::Done).count() as u32;
        for &d in &dep_ids {
            if self.tasks[d as usize].state != TaskState::Done {
                self.tasks[d as usize].successors.push(t);
            }
        }
        self.tasks.push(DynTask {
            name: name.to_string(),
            state: TaskState::Waiting,
            remaining_deps: remaining,
            successors: Vec::new(),
            access_ids: Vec::new(),
            exclusive,
        });
        self.by_name.insert(name.to_string(), t);
        self.adj.push(HashSet::new());
        self.running_conflicts.push(0);

        // Incremental edges: index hits, plus universal tasks on either side.
        let mut hits = Vec::new();
        let mut ids = Vec::with_capacity(accesses.len());
        for a in &accesses {
            ids.push(self.index.insert(t, a, &mut hits));
        }
        self.tasks[t as usize].access_ids = ids;
        let mut nbrs: HashSet<TaskIdx> = hits.iter().map(|&h| self.index.owner(h)).collect();
        nbrs.extend(self.universal.iter().copied());
        if universal {
            nbrs.extend((0..t).filter(|&o| self.tasks[o as usize].state != TaskState::Done));
            self.universal.push(t);
        }
        nbrs.remove(&t);
        for &o in &nbrs {
            self.adj[o as usize].insert(t);
            self.adj[t as usize].insert(o);
            if self.tasks[o as usize].state == TaskState::Running {
                self.running_conflicts[t as usize] += 1;
            }
        }
        let mut out = Outcome::default();
        if remaining == 0 {
            out.became_runnable = 1;
            out.replanned = self.make_runnable(&[t]);
        }
        Ok(out)
    }

    /// Takes the next tasks to start: from the head batch, those with no running
    /// conflicting task. Marks them running and returns their names.
    pub fn poll(&mut self) -> Vec<String> {
        let mut started = Vec::new();
        while let Some(head) = self.batches.front_mut() {
            let mut keep = Vec::new();
            let batch = std::mem::take(head);
            for t in batch {
                if self.running_conflicts[t as usize] == 0 {
                    self.tasks[t as usize].state = TaskState::Running;
                    for &o in &self.adj[t as usize] {
                        self.running_conflicts[o as usize] += 1;
                    }
                    started.push(self.tasks[t as usize].name.clone());
                } else {
                    keep.push(t);
                }
            }
            if keep.is_empty() {
                self.batches.pop_front();
            } else {
                if let Some(h) = self.batches.front_mut() {
                    *h = keep;
                }
                break;
            }
        }
        started
    }

    /// Records that a running task finished.
    pub fn complete(&mut self, name: &str) -> Result<Outcome> {
        let t = *self.by_name.get(name).ok_or_else(|| SchedulerError::TaskState { task: name.to_string(), detail: "unknown task".to_string() })?;
        if self.tasks[t as usize].state != TaskState::Running {
            return Err(SchedulerError::TaskState { task: name.to_string(), detail: format!("completed while {:?}", self.tasks[t as usize].state) });
        }
        self.tasks[t as usize].state = TaskState::Done;
        for id in std::mem::take(&mut self.tasks[t as usize].access_ids) {
            self.index.remove(id);
        }
        self.universal.retain(|&u| u != t);
        let removed: Vec<TaskIdx> = self.adj[t as usize].drain().collect();
        for &o in &removed {
            self.adj[o as usize].remove(&t);
            self.running_conflicts[o as usize] = self.running_conflicts[o as usize].saturating_sub(1);
        }
        let material = self.tasks[t as usize].exclusive && !removed.is_empty();
        let mut newly = Vec::new();
        for s in std::mem::take(&mut self.tasks[t as usize].successors) {
            let st = &mut self.tasks[s as usize];
            st.remaining_deps = st.remaining_deps.saturating_sub(1);
            if st.remaining_deps == 0 && st.state == TaskState::Waiting {
                newly.push(s);
            }
        }
        let mut out = Outcome { replanned: false, became_runnable: newly.len() };
        let replanned = self.make_runnable(&newly);
        if material && !replanned {
            self.replan();
            out.replanned = true;
        } else {
            out.replanned = replanned;
        }
        Ok(out)
    }

    /// Moves `ts` to Planned: into the head batch when they conflict with no
    /// running or planned task (and not with each other), otherwise re-plans.
    fn make_runnable(&mut self, ts: &[TaskIdx]) -> bool {
        if ts.is_empty() {
            return false;
        }
        for &t in ts {
            self.tasks[t as usize].state = TaskState::Planned;
        }
        let material = ts.iter().any(|&t| {
            self.adj[t as usize].iter().any(|&o| matches!(self.tasks[o as usize].state, TaskState::Running | TaskState::Planned))
        });
        if material {
            self.replan();
            return true;
        }
        match self.batches.front_mut() {
            Some(head) => head.extend_from_slice(ts),
            None => self.batches.push_back(ts.to_vec()),
        }
        false
    }

    /// Recolours all planned tasks on the conflict subgraph they induce.
    fn replan(&mut self) {
        self.replans += 1;
        let planned: Vec<TaskIdx> = (0..self.tasks.len() as TaskIdx).filter(|&t| self.tasks[t as usize].state == TaskState::Planned).collect();
        let local: HashMap<TaskIdx, u32> = planned.iter().enumerate().map(|(i, &t)| (t, i as u32)).collect();
        let adj: Vec<Vec<u32>> = planned
            .iter()
            .map(|&t| {
                let mut v: Vec<u32> = self.adj[t as usize].iter().filter_map(|o| local.get(o).copied()).collect();
                v.sort_unstable();
                v
            })
            .collect();
        let (colours, k) = colour(&LocalGraph::from_adjacency(&adj), self.algo);
        let mut batches = vec![Vec::new(); k as usize];
        for (i, &t) in planned.iter().enumerate() {
            batches[colours[i] as usize].push(t);
        }
        self.batches = batches.into_iter().collect();
    }

    /// Applies partition columns learnt from an analyzer. The first declaration
    /// of a table wins (see `ConflictIndex::declare_primary`).
    fn sync_primary(&mut self) {
        for (t, c) in std::mem::take(&mut self.pending_primary) {
            let (ts, cs) = (self.names.intern(&t), self.names.intern(&c));
            self.index.declare_primary(ts, cs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Mode;
    use std::collections::BTreeSet;

    fn acc(table: &str, mode: Mode, day: Option<&str>) -> RawAccess {
        let constraint = day.map(|d| [("day".to_string(), BTreeSet::from([d.to_string()]))].into_iter().collect()).unwrap_or_default();
        RawAccess { table: table.to_string(), mode, constraint }
    }

    #[test]
    fn replans_only_on_material_change() {
        let prim = [("t".to_string(), "day".to_string())];
        let mut s = DynamicScheduler::new(Rules::default(), Colouring::Dsatur, &prim);
        // Disjoint partitions: joins the current batch, no recolouring.
        let o = s.submit("a", &[], &[acc("t", Mode::Update, Some("1"))], false).expect("submit");
        assert!(!o.replanned);
        let o = s.submit("b", &[], &[acc("t", Mode::Update, Some("2"))], false).expect("submit");
        assert!(!o.replanned);
        assert_eq!(s.replans(), 0);
        assert_eq!(s.poll().len(), 2);
        // Conflicts with running `a`: material (eq. 1).
        let o = s.submit("c", &[], &[acc("t", Mode::Delete, Some("1"))], false).expect("submit");
        assert!(o.replanned);
        assert!(s.poll().is_empty(), "c must wait for a");
        // A waiting task (dependency not done) is not coloured yet: not material.
        let o = s.submit("d", &["b"], &[acc("t", Mode::Read, Some("2"))], false).expect("submit");
        assert!(!o.replanned);
        // `b` held an exclusive access and conflicts with `d`: material (eq. 2).
        let before = s.replans();
        let o = s.complete("b").expect("complete");
        assert!(o.replanned && s.replans() > before);
        assert_eq!(s.state("d"), Some(TaskState::Planned));
        // Completing `a` unblocks `c`.
        s.complete("a").expect("complete");
        let started = s.poll();
        assert!(started.contains(&"c".to_string()) && started.contains(&"d".to_string()));
        // Errors name the task.
        let e = s.complete("zzz").expect_err("unknown");
        assert!(e.to_string().contains("zzz"));
        let e = s.submit("e", &["nope"], &[], false).expect_err("unknown dep");
        assert!(e.to_string().contains("nope"));
    }

    #[test]
    fn completion_of_a_reader_is_not_material() {
        let mut s = DynamicScheduler::new(Rules::default(), Colouring::Greedy, &[]);
        s.submit("r", &[], &[acc("t", Mode::Read, None)], false).expect("submit");
        assert_eq!(s.poll(), vec!["r".to_string()]);
        s.submit("w", &[], &[acc("t", Mode::Update, None)], false).expect("submit");
        let before = s.replans();
        let o = s.complete("r").expect("complete");
        assert!(!o.replanned, "a reader holds no exclusive access");
        assert_eq!(s.replans(), before);
        assert_eq!(s.poll(), vec!["w".to_string()]);
    }

    #[test]
    fn universal_task_conflicts_with_everything() {
        let mut s = DynamicScheduler::new(Rules::default(), Colouring::Greedy, &[]);
        s.submit("u", &[], &[], true).expect("submit");
        s.submit("x", &[], &[acc("other", Mode::Insert, None)], false).expect("submit");
        let started = s.poll();
        assert_eq!(started.len(), 1, "{started:?}");
    }
}
