//! Synthetic workloads like the paper's experiment (§4): `n` tasks at a given
//! conflict density, generated directly as accesses (the paper's generator also
//! produced resource sets, not SQL).
//!
//! The paper defines density by the share of tasks that take part in a conflict
//! (low ≈ 14–20 %, medium ≈ 20–28 %, high ≈ 33 %; its Figure 8a counts
//! "tasks with conflict"). A pairwise probability of 33 % would mean 1.6 billion
//! edges at 100,000 tasks, which no pipeline has. So: a `density` share of the
//! tasks is put into small groups (2–6 tasks) that rewrite the same partition of
//! a shared "hot" table (UPDATE/DELETE/MERGE/OVERWRITE, some with a READ of the
//! partition too, and a third of them also rewrite another group's partition so
//! that groups overlap); every other task merges into its own partition of its
//! job's table and reads a table nobody writes. Jobs have 10 tasks with random
//! in-job dependencies. The generator is seeded and deterministic.

use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

use crate::access::{Access, Mode, PartitionSpec};
use crate::model::{TaskIdx, Workload};

/// Conflict density level of the paper's experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Density {
    /// ≈ 17 % of tasks conflict.
    Low,
    /// ≈ 24 %.
    Medium,
    /// ≈ 33 %.
    High,
}

impl Density {
    /// All levels, low to high.
    pub const ALL: [Density; 3] = [Density::Low, Density::Medium, Density::High];

    /// Target share of tasks that take part in a conflict.
    pub fn share(self) -> f64 {
        match self {
            Density::Low => 0.17,
            Density::Medium => 0.24,
            Density::High => 0.33,
        }
    }

    /// Parses `low`, `medium`, `high` (also `small`).
    pub fn parse(s: &str) -> Option<Density> {
        match s.to_ascii_lowercase().as_str() {
            "low" | "small" => Some(Density::Low),
            "medium" | "med" => Some(Density::Medium),
            "high" => Some(Density::High),
            _ => None,
        }
    }

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Density::Low => "low",
            Density::Medium => "medium",
            Density::High => "high",
        }
    }
}

/// Tasks per synthetic job.
const JOB_SIZE: usize = 10;

/// Generates the workload. Deterministic for a given `(n, density, seed)`.
pub fn generate(n: usize, density: Density, seed: u64) -> Workload {
    let mut rng = SmallRng::seed_from_u64(seed ^ (n as u64).rotate_left(17) ^ density as u64);
    let mut w = Workload::new();
    let hot_tables = (n / 200).max(1);
    for h in 0..hot_tables {
        w.set_primary_partition_column(&format!("hot.t{h}"), "day");
    }
    let jobs = n.div_ceil(JOB_SIZE).max(1);
    for j in 0..jobs {
        w.set_primary_partition_column(&format!("job{j}.out"), "p");
    }

    // Choose the contending tasks and cut them into groups of 2..=6.
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(&mut rng);
    let contending = ((n as f64) * density.share()).round() as usize;
    let mut group_of = vec![u32::MAX; n];
    let mut groups = 0u32;
    let mut i = 0;
    while i + 1 < contending {
        let size = rng.random_range(2..=6usize).min(contending - i);
        let size = if contending - (i + size) == 1 { size + 1 } else { size };
        for &t in &order[i..i + size] {
            group_of[t] = groups;
        }
        groups += 1;
        i += size;
    }

    let rewrite = [Mode::Update, Mode::Delete, Mode::Merge, Mode::Overwrite];
    let src = w.names.intern("raw.src");
    let day = w.names.intern("day");
    let p = w.names.intern("p");
    for (t, &g) in group_of.iter().enumerate() {
        let job = t / JOB_SIZE;
        let first_in_job = job * JOB_SIZE;
        let mut deps: Vec<TaskIdx> = Vec::new();
        if t > first_in_job && rng.random_bool(0.6) {
            deps.push(rng.random_range(first_in_job..t) as TaskIdx);
        }
        let mut acc = vec![Access { table: src, mode: Mode::Read, partitions: PartitionSpec::whole() }];
        if g != u32::MAX {
            // Group g owns slot g: a unique (hot table, day) pair.
            let table = w.names.intern(&format!("hot.t{}", g as usize % hot_tables));
            let value = w.names.intern(&format!("d{}", g as usize / hot_tables));
            let spec = PartitionSpec::from_pairs([(day, vec![value])]);
            let mode = rewrite[rng.random_range(0..rewrite.len())];
            if rng.random_bool(0.3) {
                acc.push(Access { table, mode: Mode::Read, partitions: spec.clone() });
            }
            acc.push(Access { table, mode, partitions: spec });
            // A third of them also rewrite the slot of another group, so groups
            // overlap and the graph is not just disjoint cliques (this is where
            // colourings differ).
            if groups > 1 && rng.random_bool(0.35) {
                let g2 = rng.random_range(0..groups) as usize;
                let table = w.names.intern(&format!("hot.t{}", g2 % hot_tables));
                let value = w.names.intern(&format!("d{}", g2 / hot_tables));
                let mode = rewrite[rng.random_range(0..rewrite.len())];
                acc.push(Access { table, mode, partitions: PartitionSpec::from_pairs([(day, vec![value])]) });
            }
        } else {
            let table = w.names.intern(&format!("job{job}.out"));
            let value = w.names.intern(&format!("t{t}"));
            acc.push(Access { table, mode: Mode::Merge, partitions: PartitionSpec::from_pairs([(p, vec![value])]) });
        }
        let duration = rng.random_range(1.0..10.0f64);
        w.add_task(&format!("job{job}"), &format!("t{t}"), deps, acc, duration, false);
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::discover;
    use crate::rules::Rules;

    #[test]
    fn measured_density_matches_level() {
        for d in Density::ALL {
            let w = generate(2000, d, 7);
            w.check().expect("acyclic");
            let g = discover(&w, &Rules::default());
            let share = g.conflicting_tasks() as f64 / 2000.0;
            assert!((share - d.share()).abs() < 0.02, "{d:?}: {share}");
        }
    }
}
