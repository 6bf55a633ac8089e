//! `retina jobs run`: pipeline jobs' SQL tasks executed on Delta Lake tables.
//!
//! The meta-scheduler (`retina-scheduler`) decides *when* a task may start; this
//! crate runs it. Every write goes through delta-rs's own operations and commits
//! through its own conflict checker, never around it, so a schedule that lets
//! conflicting tasks overlap meets Delta's real optimistic-concurrency aborts
//! (`ConcurrentAppend`, `ConcurrentDeleteRead`, ...), and a schedule that orders
//! them does not.
//!
//! Module map: `lake` (table names → Delta tables under a root, a DataFusion
//! session that reads them) · `recording_store` (the object store that remembers
//! what an attempt wrote, so an aborted attempt leaves no file behind) · `attempt`
//! (the versions an attempt committed, undone when it does not finish) ·
//! `statement` (SQL → the steps we execute, checked before anything runs) ·
//! `execute` (one step through delta-rs) · `conflict` (delta-rs errors → conflict
//! kinds) · `tasks` (job files → analysed tasks) · `dispatch` (the three schedules)
//! · `run` (the one driver: attempts, retries, arrivals, completions) · `report`
//! (per-task table, summary, JSON) · `timeline` (the run as an SVG Gantt chart).

pub mod attempt;
pub mod conflict;
pub mod dispatch;
pub mod error;
pub mod execute;
pub mod lake;
mod recording_store;
pub mod report;
pub mod run;
pub mod statement;
pub mod tasks;
pub mod timeline;

pub use conflict::ConflictKind;
pub use dispatch::Schedule;
pub use error::{JobsError, Result};
pub use lake::Lake;
pub use report::{RunReport, TaskReport};
pub use run::{run, Arrival, RunEvent, RunOptions};
pub use tasks::{load_tasks, TaskSpec};
