//! The result of planning a job file, and its three renderings: a text table
//! for people, JSON for tools, Graphviz DOT for pictures (solid arrows are
//! dependencies, dashed red edges conflicts, clusters batches).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::colour::Colouring;
use crate::databricks::added_dependencies;
use crate::graph::{describe_edge, ConflictGraph};
use crate::model::{TaskIdx, Workload};
use crate::plan::{plan, Plan};
use crate::rules::Rules;
use crate::simulate::{event_driven, simulate_batches};

/// One task in the report.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    /// Display name.
    pub name: String,
    /// Dependencies (display names).
    pub depends_on: Vec<String>,
    /// Accesses as `MODE table [partitions]`.
    pub accesses: Vec<String>,
    /// Global batch number (0-based) in the chosen plan.
    pub batch: u32,
    /// Event-driven simulated start and end.
    pub start: f64,
    /// End time in the event-driven simulation.
    pub end: f64,
}

/// One conflict edge in the report.
#[derive(Debug, Clone, Serialize)]
pub struct ConflictRow {
    /// First task.
    pub a: String,
    /// Second task.
    pub b: String,
    /// `table [partitions | partitions] MODE vs MODE`.
    pub reason: String,
    /// One task is an ancestor of the other, so the DAG already keeps them apart
    /// (computed for workloads up to 5,000 tasks; `false` above).
    pub ordered_by_dependencies: bool,
}

/// Everything `retina jobs plan` shows.
#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    /// Rule set name.
    pub rules: &'static str,
    /// Whether READ vs write conflicts were enabled.
    pub read_write_conflicts: bool,
    /// Colouring used for `batches`.
    pub colouring: &'static str,
    /// Steps → batches → task names.
    pub steps: Vec<Vec<Vec<String>>>,
    /// Number of batches per colouring algorithm.
    pub batches_by_colouring: BTreeMap<&'static str, usize>,
    /// Tasks.
    pub tasks: Vec<TaskRow>,
    /// Conflict edges with reasons.
    pub conflicts: Vec<ConflictRow>,
    /// Dependencies a platform scheduler needs to serialise the conflicts.
    pub added_dependencies: Vec<(String, String)>,
    /// Simulated makespan of the batch plan (duration units).
    pub makespan_batches: f64,
    /// Simulated makespan of event-driven admission.
    pub makespan_event_driven: f64,
    /// Analysis warnings.
    pub warnings: Vec<String>,
}

/// Plans `w` and gathers the report.
pub fn report(w: &Workload, g: &ConflictGraph, rules: &Rules, algo: Colouring) -> (PlanReport, Plan) {
    let chosen = plan(w, g, algo);
    let mut batches_by_colouring = BTreeMap::new();
    for a in Colouring::ALL {
        let k = if a == algo { chosen.batch_count() } else { plan(w, g, a).batch_count() };
        batches_by_colouring.insert(a.as_str(), k);
    }
    let batch = chosen.batch_of(w.len());
    let ev = event_driven(w, g);
    let name = |t: TaskIdx| w.display_name(t);
    let tasks = (0..w.len() as TaskIdx)
        .map(|t| TaskRow {
            name: name(t),
            depends_on: w.task(t).deps.iter().map(|&d| name(d)).collect(),
            accesses: if w.task(t).universal {
                vec!["UNKNOWN (conflicts with everything)".to_string()]
            } else {
                w.task_accesses(t)
                    .iter()
                    .map(|a| format!("{} {} [{}]", a.mode, w.names.name(a.table), a.partitions.display(&w.names)))
                    .collect()
            },
            batch: batch[t as usize],
            start: ev.start[t as usize],
            end: ev.end[t as usize],
        })
        .collect();
    let small = w.len() <= 5000;
    let conflicts = g
        .edges()
        .iter()
        .map(|e| ConflictRow {
            a: name(e.a),
            b: name(e.b),
            reason: describe_edge(w, e),
            ordered_by_dependencies: small && (is_ancestor(w, e.a, e.b) || is_ancestor(w, e.b, e.a)),
        })
        .collect();
    let added = added_dependencies(w, g, &chosen).into_iter().map(|(x, y)| (name(x), name(y))).collect();
    let r = PlanReport {
        rules: rules.kind().as_str(),
        read_write_conflicts: rules.read_write(),
        colouring: algo.as_str(),
        steps: chosen.steps.iter().map(|s| s.batches.iter().map(|b| b.iter().map(|&t| name(t)).collect()).collect()).collect(),
        batches_by_colouring,
        tasks,
        conflicts,
        added_dependencies: added,
        makespan_batches: simulate_batches(w, &chosen),
        makespan_event_driven: ev.makespan,
        warnings: w.warnings.clone(),
    };
    (r, chosen)
}

/// Whether `anc` is a (transitive) dependency of `t`.
fn is_ancestor(w: &Workload, anc: TaskIdx, t: TaskIdx) -> bool {
    let mut seen = vec![false; w.len()];
    let mut stack = vec![t];
    while let Some(v) = stack.pop() {
        for &d in &w.task(v).deps {
            if d == anc {
                return true;
            }
            if !std::mem::replace(&mut seen[d as usize], true) {
                stack.push(d);
            }
        }
    }
    false
}

impl PlanReport {
    /// Text for a terminal.
    pub fn to_table(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "rules: {} (read/write conflicts: {})   colouring: {}", self.rules, if self.read_write_conflicts { "on" } else { "off" }, self.colouring);
        let _ = writeln!(s, "\nTasks");
        for t in &self.tasks {
            let deps = if t.depends_on.is_empty() { "-".to_string() } else { t.depends_on.join(", ") };
            let _ = writeln!(s, "  {:<28} after: {}", t.name, deps);
            for a in &t.accesses {
                let _ = writeln!(s, "  {:<28}   {}", "", a);
            }
        }
        let open: Vec<&ConflictRow> = self.conflicts.iter().filter(|c| !c.ordered_by_dependencies).collect();
        let _ = writeln!(
            s,
            "\nConflicts the scheduler must serialise ({}; {} more are already ordered by dependencies)",
            open.len(),
            self.conflicts.len() - open.len()
        );
        if open.is_empty() {
            let _ = writeln!(s, "  none");
        }
        for c in open {
            let _ = writeln!(s, "  {} <-> {}: {}", c.a, c.b, c.reason);
        }
        let _ = writeln!(s, "\nPlan");
        let mut n = 0;
        for (k, step) in self.steps.iter().enumerate() {
            for b in step {
                let _ = writeln!(s, "  batch {:<3} (step {}): {}", n, k, b.join(", "));
                n += 1;
            }
        }
        let counts: Vec<String> = self.batches_by_colouring.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(s, "\nbatches by colouring: {}", counts.join(", "));
        let _ = writeln!(
            s,
            "simulated makespan: batches {:.1}, event-driven {:.1} (duration units)",
            self.makespan_batches, self.makespan_event_driven
        );
        if !self.added_dependencies.is_empty() {
            let _ = writeln!(s, "\nDependencies to add for a platform scheduler");
            for (a, b) in &self.added_dependencies {
                let _ = writeln!(s, "  {b} depends on {a}");
            }
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        s
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// Graphviz DOT.
    pub fn to_dot(&self) -> String {
        let q = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
        let mut s = String::from("digraph plan {\n  rankdir=LR;\n  node [shape=box];\n");
        let mut n = 0;
        for step in &self.steps {
            for b in step {
                let _ = writeln!(s, "  subgraph cluster_b{n} {{\n    label={};", q(&format!("batch {n}")));
                for t in b {
                    let _ = writeln!(s, "    {};", q(t));
                }
                s.push_str("  }\n");
                n += 1;
            }
        }
        for t in &self.tasks {
            for d in &t.depends_on {
                let _ = writeln!(s, "  {} -> {};", q(d), q(&t.name));
            }
        }
        for c in self.conflicts.iter().filter(|c| !c.ordered_by_dependencies) {
            let _ = writeln!(s, "  {} -> {} [dir=none, style=dashed, color=red, label={}];", q(&c.a), q(&c.b), q(&c.reason));
        }
        s.push_str("}\n");
        s
    }
}
