//! The paper's Algorithm 1: repeat { runnable set R_k → induced conflict
//! subgraph → colouring → one batch per colour } until every task is scheduled.
//!
//! Batches run one after another (each batch's tasks in parallel); a step's
//! batches all finish before the next step's runnable set is computed. Each task
//! is in exactly one runnable set, so building all induced subgraphs costs
//! O(n + m) in total and the whole plan O(n + m) for greedy and smallest-last.

use crate::colour::{colour, Colouring, LocalGraph};
use crate::graph::ConflictGraph;
use crate::model::{TaskIdx, Workload};

/// One macro-step k: the batches S_{k,c}, in colour order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Step {
    /// Batches of task indexes; tasks within a batch never conflict.
    pub batches: Vec<Vec<TaskIdx>>,
}

/// A complete batch plan. Invariants (checked by `validate`): every task is in
/// exactly one batch; a task's dependencies are all in earlier steps; no batch
/// contains two conflicting tasks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    /// The colouring used.
    pub colouring: Colouring,
    /// Macro-steps in execution order.
    pub steps: Vec<Step>,
}

impl Plan {
    /// Total number of batches (the schedule length in batch units).
    pub fn batch_count(&self) -> usize {
        self.steps.iter().map(|s| s.batches.len()).sum()
    }

    /// Batches in execution order, flattened across steps.
    pub fn batches(&self) -> impl Iterator<Item = &Vec<TaskIdx>> {
        self.steps.iter().flat_map(|s| s.batches.iter())
    }

    /// Global batch number of every task (`u32::MAX` for an unscheduled one).
    pub fn batch_of(&self, n: usize) -> Vec<u32> {
        let mut out = vec![u32::MAX; n];
        for (i, b) in self.batches().enumerate() {
            for &t in b {
                if let Some(slot) = out.get_mut(t as usize) {
                    *slot = i as u32;
                }
            }
        }
        out
    }

    /// Checks the plan's invariants against the workload and graph; returns a
    /// description of the first violation.
    pub fn validate(&self, w: &Workload, g: &ConflictGraph) -> Result<(), String> {
        let n = w.len();
        let mut step_of = vec![u32::MAX; n];
        for (k, s) in self.steps.iter().enumerate() {
            for b in &s.batches {
                for &t in b {
                    if step_of[t as usize] != u32::MAX {
                        return Err(format!("task {} scheduled twice", w.display_name(t)));
                    }
                    step_of[t as usize] = k as u32;
                }
                for (i, &x) in b.iter().enumerate() {
                    for &y in &b[i + 1..] {
                        if g.conflicts(x, y) {
                            return Err(format!("batch holds conflicting {} and {}", w.display_name(x), w.display_name(y)));
                        }
                    }
                }
            }
        }
        for t in 0..n as TaskIdx {
            if step_of[t as usize] == u32::MAX {
                return Err(format!("task {} not scheduled", w.display_name(t)));
            }
            for &d in &w.task(t).deps {
                if step_of[d as usize] >= step_of[t as usize] {
                    return Err(format!("{} runs before its dependency {}", w.display_name(t), w.display_name(d)));
                }
            }
        }
        Ok(())
    }
}

/// Runs Algorithm 1 on a workload whose conflict graph is `g`.
pub fn plan(w: &Workload, g: &ConflictGraph, algo: Colouring) -> Plan {
    let n = w.len();
    let succ = w.successors();
    let mut remaining: Vec<u32> = w.tasks().iter().map(|t| t.deps.len() as u32).collect();
    let mut runnable: Vec<TaskIdx> = (0..n as TaskIdx).filter(|&t| remaining[t as usize] == 0).collect();
    let mut local = vec![u32::MAX; n];
    let mut steps = Vec::new();
    while !runnable.is_empty() {
        let sub = induced(g, &runnable, &mut local);
        let (colours, k) = colour(&sub, algo);
        let mut batches: Vec<Vec<TaskIdx>> = vec![Vec::new(); k as usize];
        for (i, &t) in runnable.iter().enumerate() {
            batches[colours[i] as usize].push(t);
        }
        for &t in &runnable {
            local[t as usize] = u32::MAX;
        }
        let mut next = Vec::new();
        for &t in &runnable {
            for &s in &succ[t as usize] {
                remaining[s as usize] -= 1;
                if remaining[s as usize] == 0 {
                    next.push(s);
                }
            }
        }
        steps.push(Step { batches });
        next.sort_unstable();
        runnable = next;
    }
    Plan { colouring: algo, steps }
}

/// The subgraph of `g` induced by `vertices`, on local ids = positions in
/// `vertices`. `local` is scratch of size n, all `u32::MAX` on entry; the
/// caller resets the entries of `vertices` afterwards.
pub fn induced(g: &ConflictGraph, vertices: &[TaskIdx], local: &mut [u32]) -> LocalGraph {
    for (i, &v) in vertices.iter().enumerate() {
        local[v as usize] = i as u32;
    }
    let mut offsets = Vec::with_capacity(vertices.len() + 1);
    let mut nbrs = Vec::new();
    offsets.push(0u32);
    for &v in vertices {
        for &u in g.neighbours(v) {
            let l = local[u as usize];
            if l != u32::MAX {
                nbrs.push(l);
            }
        }
        offsets.push(nbrs.len() as u32);
    }
    LocalGraph::from_csr(offsets, nbrs)
}
