//! Errors of the scheduler library. Every variant names *what* failed and *where*
//! (job, task, statement, SQL position or file), because the person reading it is
//! looking at a pipeline definition with dozens of tasks and needs to find the line.

use std::path::PathBuf;

/// Everything that can go wrong while loading, analysing or planning a workload.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The SQL of a task could not be parsed. `detail` carries sqlparser's message,
    /// which includes the line and column inside the task's SQL text.
    #[error("task `{task}`: cannot parse SQL: {detail}")]
    SqlParse { task: String, detail: String },

    /// A statement parsed but uses a construct whose accesses we cannot determine
    /// safely (for example `INSERT INTO TABLE FUNCTION ...`).
    #[error("task `{task}`, statement {statement} at {position}: {detail}")]
    UnsupportedSql { task: String, statement: usize, position: String, detail: String },

    /// A task has no SQL at all, so its accesses are unknown.
    #[error("task `{task}` has no SQL (give `sql`, `sql_file` or `statements`, or use --assume-conflict)")]
    NoSql { task: String },

    /// Two tasks of the same job share an id.
    #[error("job `{job}`: duplicate task id `{task}`")]
    DuplicateTask { job: String, task: String },

    /// A dependency names a task that does not exist in the job.
    #[error("job `{job}`, task `{task}`: depends on unknown task `{dependency}`")]
    UnknownDependency { job: String, task: String, dependency: String },

    /// The dependency graph has a cycle; `task` is one task on it.
    #[error("job `{job}`: dependency cycle through task `{task}`")]
    DependencyCycle { job: String, task: String },

    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io { path: PathBuf, source: std::io::Error },

    /// A job file is not valid YAML/JSON or does not have the expected shape.
    #[error("{}: {detail}", path.display())]
    JobFormat { path: PathBuf, detail: String },

    /// A command-line style option value was malformed.
    #[error("invalid {what} `{value}`: {detail}")]
    InvalidOption { what: &'static str, value: String, detail: String },

    /// A task id passed to the dynamic scheduler is unknown or in the wrong state.
    #[error("task `{task}`: {detail}")]
    TaskState { task: String, detail: String },
}

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, SchedulerError>;
