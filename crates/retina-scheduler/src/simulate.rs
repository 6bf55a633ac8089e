//! Event-driven admission and the makespan simulator.
//!
//! Algorithm 1 waits for a whole batch (and a whole step) before starting the
//! next one, so one long task holds back everything behind it. Event-driven
//! admission starts a task the moment its dependencies are done and no running
//! task conflicts with it; when several such tasks conflict with each other, the
//! one with the longest remaining critical path (its duration plus the longest
//! chain of successors) goes first. [`simulate_batches`] and [`event_driven`]
//! compute the makespan of both modes on the tasks' duration estimates.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::graph::ConflictGraph;
use crate::model::{TaskIdx, Workload};
use crate::plan::Plan;

/// Longest path from each task to the end of the DAG, including its own
/// duration: the priority of event-driven admission.
pub fn critical_path(w: &Workload) -> Vec<f64> {
    let succ = w.successors();
    let mut cp: Vec<f64> = w.tasks().iter().map(|t| t.duration).collect();
    if let Ok(order) = w.topo_order() {
        for &t in order.iter().rev() {
            let best = succ[t as usize].iter().map(|&s| cp[s as usize]).fold(0.0, f64::max);
            cp[t as usize] = w.task(t).duration + best;
        }
    }
    cp
}

/// Makespan of a batch plan: batches run one after another, each as long as its
/// longest task.
pub fn simulate_batches(w: &Workload, plan: &Plan) -> f64 {
    plan.batches().map(|b| b.iter().map(|&t| w.task(t).duration).fold(0.0, f64::max)).sum()
}

/// Start and end time of every task under event-driven admission.
/// Invariants: `start[t] >= end[d]` for each dependency `d`; conflicting tasks'
/// intervals `[start, end)` do not overlap.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EventSchedule {
    /// Start time per task.
    pub start: Vec<f64>,
    /// End time per task.
    pub end: Vec<f64>,
    /// Time the last task ends.
    pub makespan: f64,
}

/// A finishing event; the heap pops the earliest time first, then lowest task.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Finish(f64, TaskIdx);

impl Eq for Finish {}

impl Ord for Finish {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then_with(|| other.1.cmp(&self.1))
    }
}

impl PartialOrd for Finish {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Simulates event-driven admission with unlimited parallel slots.
///
/// `blocked[t]` counts running tasks that conflict with `t`; a ready task starts
/// when it reaches zero. Only tasks that just became ready or unblocked are
/// examined at each event, so the simulation costs O((n + m) log n).
pub fn event_driven(w: &Workload, g: &ConflictGraph) -> EventSchedule {
    let n = w.len();
    let succ = w.successors();
    let prio = critical_path(w);
    let mut remaining: Vec<u32> = w.tasks().iter().map(|t| t.deps.len() as u32).collect();
    let mut blocked = vec![0u32; n];
    let mut started = vec![false; n];
    let mut start = vec![0.0; n];
    let mut end = vec![0.0; n];
    let mut events: BinaryHeap<Finish> = BinaryHeap::new();
    let mut candidates: Vec<TaskIdx> = (0..n as TaskIdx).filter(|&t| remaining[t as usize] == 0).collect();
    let mut now = 0.0f64;
    loop {
        candidates.sort_unstable_by(|&a, &b| prio[b as usize].total_cmp(&prio[a as usize]).then(a.cmp(&b)));
        candidates.dedup();
        for &c in &candidates {
            let ci = c as usize;
            if started[ci] || blocked[ci] > 0 || remaining[ci] > 0 {
                continue;
            }
            started[ci] = true;
            start[ci] = now;
            end[ci] = now + w.task(c).duration;
            for &nb in g.neighbours(c) {
                blocked[nb as usize] += 1;
            }
            events.push(Finish(end[ci], c));
        }
        candidates.clear();
        let Some(Finish(t, first)) = events.pop() else { break };
        now = t;
        let mut finished = vec![first];
        while let Some(&Finish(t2, f)) = events.peek() {
            if t2 != t {
                break;
            }
            events.pop();
            finished.push(f);
        }
        for f in finished {
            for &nb in g.neighbours(f) {
                let b = &mut blocked[nb as usize];
                *b -= 1;
                if *b == 0 && !started[nb as usize] && remaining[nb as usize] == 0 {
                    candidates.push(nb);
                }
            }
            for &s in &succ[f as usize] {
                remaining[s as usize] -= 1;
                if remaining[s as usize] == 0 {
                    candidates.push(s);
                }
            }
        }
    }
    let makespan = end.iter().copied().fold(0.0, f64::max);
    EventSchedule { start, end, makespan }
}

/// Checks an event schedule's invariants; returns the first violation.
pub fn validate_events(w: &Workload, g: &ConflictGraph, s: &EventSchedule) -> Result<(), String> {
    for t in 0..w.len() as TaskIdx {
        let ti = t as usize;
        if s.end[ti] < s.start[ti] + w.task(t).duration - 1e-9 {
            return Err(format!("{} did not run to completion", w.display_name(t)));
        }
        for &d in &w.task(t).deps {
            if s.start[ti] + 1e-9 < s.end[d as usize] {
                return Err(format!("{} started before dependency {} ended", w.display_name(t), w.display_name(d)));
            }
        }
    }
    for e in g.edges() {
        let (a, b) = (e.a as usize, e.b as usize);
        if s.start[a] < s.end[b] - 1e-9 && s.start[b] < s.end[a] - 1e-9 {
            return Err(format!("conflicting {} and {} overlap in time", w.display_name(e.a), w.display_name(e.b)));
        }
    }
    Ok(())
}
