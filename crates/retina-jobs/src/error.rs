//! Errors of the executor. Each names the task and statement it comes from and
//! keeps its source (delta-rs's or DataFusion's error) in the chain.

use deltalake_core::datafusion::error::DataFusionError;
use deltalake_core::DeltaTableError;

pub type Result<T, E = JobsError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// A statement we cannot execute (found before anything runs).
    #[error("task {task}, statement {statement} ({position}): {detail}")]
    Unsupported { task: String, statement: usize, position: String, detail: String },
    /// SQL that does not parse.
    #[error("task {task}: the SQL does not parse: {detail}")]
    Parse { task: String, detail: String },
    /// A task with no SQL.
    #[error("task {task} has no SQL to run")]
    NoSql { task: String },
    /// delta-rs refused or failed a statement (a commit conflict among them).
    #[error("task {task}, statement {statement} on {table}: {source}")]
    Delta {
        task: String,
        statement: usize,
        table: String,
        #[source]
        source: DeltaTableError,
    },
    /// Planning or running a query failed.
    #[error("task {task}, statement {statement}: {source}")]
    Query {
        task: String,
        statement: usize,
        #[source]
        source: DataFusionError,
    },
    /// An attempt failed, and the versions its earlier statements committed could
    /// not all be taken back: they stay visible (the task is not retried).
    #[error("task {task}: {cause}; the versions its earlier statements committed could not all be taken back: {source}")]
    Undo {
        task: String,
        cause: Box<JobsError>,
        #[source]
        source: UndoError,
    },
    /// A statement names a table the lake does not hold.
    #[error("task {task}, statement {statement}: table {table} does not exist under {lake}")]
    MissingTable { task: String, statement: usize, table: String, lake: String },
    /// A statement's data does not fit its target table.
    #[error("task {task}, statement {statement} on {table}: {detail}")]
    Mismatch { task: String, statement: usize, table: String, detail: String },
    /// The lake root is not a directory or URL we can use.
    #[error("lake {lake}: {detail}")]
    Lake { lake: String, detail: String },
    /// Job files, analysis and planning.
    #[error(transparent)]
    Scheduler(#[from] retina_scheduler::SchedulerError),
    /// An arrival or watch folder that cannot be read.
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

impl JobsError {
    /// The delta-rs error inside, if this is one.
    pub fn delta(&self) -> Option<&DeltaTableError> {
        match self {
            JobsError::Delta { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why an attempt's commits could not all be taken back.
#[derive(Debug, thiserror::Error)]
pub enum UndoError {
    /// Another writer built on the attempt's data.
    #[error("version {version} of {table} cannot be undone: {detail}")]
    BuiltUpon { table: String, version: u64, detail: String },
    /// Loading the table or committing the undo failed.
    #[error("undoing version {version} of {table}: {source}")]
    Delta {
        table: String,
        version: u64,
        #[source]
        source: DeltaTableError,
    },
}
