//! Partition-aware meta-scheduler for data-pipeline jobs on a lakehouse.
//!
//! After "A dynamic, partition-aware meta-scheduler for Delta Lake pipelines"
//! (ARCHITECTURE.md §3.8): jobs are DAGs of SQL tasks; each task's SQL is analysed into
//! `(table, mode, partitions)` accesses; tasks whose accesses conflict under the
//! chosen rules get an edge in a conflict graph; runnable tasks are coloured so
//! that conflicting tasks never run together.
//!
//! Where this goes beyond the paper: conflict discovery is near-linear
//! (`index.rs`) instead of all-pairs; the conflict matrix can be Delta Lake's real
//! one; DSatur and smallest-last colourings; an event-driven admission mode with
//! critical-path priority and a makespan simulator; and an incremental dynamic
//! scheduler (`dynamic.rs`) that re-plans only on material changes.
//!
//! Module map: `access` (modes, partition specs) · `analysis` (SQL → accesses) ·
//! `rules` (conflict matrices) · `index` (bucketed conflict index) · `graph`
//! (conflict graph, discovery) · `colour` · `plan` (Algorithm 1) · `simulate`
//! (event-driven admission, makespans) · `dynamic` (arrivals/completions) ·
//! `jobfile` and `databricks` (inputs, write-back) · `load` (jobs → workload) ·
//! `render` (table/json/dot) · `synth` (the paper's synthetic workloads; its experiment is `retina-bench`'s
//! `scheduler` module).

pub mod access;
pub mod analysis;
pub mod colour;
pub mod databricks;
pub mod dynamic;
pub mod error;
pub mod graph;
pub mod index;
pub mod jobfile;
pub mod jobset;
pub mod load;
pub mod model;
pub mod plan;
pub mod render;
pub mod rules;
pub mod simulate;
pub mod synth;

pub use access::{Access, Mode, PartitionSpec};
pub use analysis::{Analyzer, SqlDialect, TableCatalog};
pub use colour::Colouring;
pub use error::{Result, SchedulerError};
pub use graph::{discover, discover_all_pairs, ConflictGraph, Edge};
pub use model::{TaskIdx, Workload};
pub use plan::{plan, Plan};
pub use rules::{RuleKind, Rules};
