//! Errors of the core engine. Every variant names what failed and where.

use crate::types::{FileId, Ts};

pub type CoreResult<T> = Result<T, CoreError>;

#[derive(Debug, thiserror::Error)]
pub enum CoreError {
    #[error("invalid schema for table {table}: {reason}")]
    InvalidSchema { table: String, reason: String },

    #[error("the lakehouse is open read-only (a reader beside its writer): {operation} is not allowed")]
    ReadOnly { operation: &'static str },

    #[error("unknown table {table}")]
    UnknownTable { table: String },

    #[error("table {table} already exists")]
    TableExists { table: String },

    #[error("table {table}, column {column}: expected a value of type {expected}, got {actual}")]
    TypeMismatch { table: String, column: String, expected: String, actual: &'static str },

    #[error("table {table}, column {column}: null in a non-nullable column")]
    NullViolation { table: String, column: String },

    #[error("table {table}: row has {actual} values but the table has {expected} columns")]
    ArityMismatch { table: String, expected: usize, actual: usize },

    #[error("table {table}: insert at ts {ts} of key {key} that already has a live row")]
    DuplicateKey { table: String, key: String, ts: Ts },

    #[error("table {table}: {operation} at ts {ts} of key {key} that has no live row")]
    MissingKey { table: String, key: String, operation: &'static str, ts: Ts },

    /// An update that keeps columns of the row it replaces (a source that did not
    /// send their unchanged values, e.g. PostgreSQL TOAST) found no row to take them
    /// from. The placeholder is never stored, nor NULL or a default instead.
    #[error("table {table}: update at ts {ts} of key {key} leaves column {column} unchanged but {reason}, so there is no previous value to keep")]
    UnavailableValue { table: String, column: String, key: String, ts: Ts, reason: &'static str },

    #[error("mirror transaction ts {ts} is not above the last submitted ts {last}")]
    OutOfOrder { ts: Ts, last: Ts },

    #[error("timestamp space exhausted: {ts} exceeds the 52-bit limit")]
    TimestampOverflow { ts: Ts },

    #[error("too many concurrent snapshots (limit {limit})")]
    TooManySnapshots { limit: usize },

    #[error("snapshot ts {snapshot} is below the low watermark {lwm}: its versions may be garbage-collected")]
    SnapshotTooOld { snapshot: Ts, lwm: Ts },

    #[error("no visibility for file {file_id}")]
    MissingVisibility { file_id: FileId },

    /// A problem the core found in what storage holds (a missing file, a checkpoint
    /// that disagrees with its segments).
    #[error("storage: {0}")]
    Storage(String),

    /// A lake store's own failure, with its source chain (object store, Parquet).
    #[error(transparent)]
    Store(Box<dyn std::error::Error + Send + Sync>),

    /// A store's write was committed (it is durable), and only the clean-up after it
    /// failed (what the write made unneeded stays, for the next write to remove):
    /// callers count the write as done.
    #[error("{what} is committed, but the clean-up after it failed: {source}")]
    CommittedButCleanupFailed { what: &'static str, source: Box<dyn std::error::Error + Send + Sync> },

    #[error("arrow: {0}")]
    Arrow(#[from] arrow_schema::ArrowError),

    #[error("mirror transaction ts {ts}: {source}")]
    InTransaction { ts: Ts, source: Box<CoreError> },

    #[error("replay engine stopped: {reason}")]
    EngineStopped { reason: String },
}

/// The error a failpoint's `return` action injects at `name` (tests of faults).
#[cfg(feature = "failpoints")]
pub(crate) fn failpoint_error(name: &str, what: impl std::fmt::Display) -> CoreError {
    CoreError::Storage(format!("failpoint {name}: {what}"))
}
