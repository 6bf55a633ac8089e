//! What can go wrong in the PostgreSQL source. Every error names what and where:
//! the table and column, the value, the WAL position.

use retina_core::CoreError;

use crate::lsn::Lsn;
use crate::pgoutput::DecodeError;
use crate::wire::WireError;

#[derive(Debug, thiserror::Error)]
pub enum PgSourceError {
    /// Boxed: server errors carry several strings and would make every result large.
    #[error("postgres: {0}")]
    Wire(Box<WireError>),
    #[error("at WAL position {lsn}: {source}")]
    Decode { lsn: Lsn, source: DecodeError },
    /// A precondition on the server is not met; the text says what to change.
    #[error("postgres source set-up: {0}")]
    Setup(String),
    #[error("invalid postgres source option: {0}")]
    Config(String),
    #[error("table {table}, column {column}: type {type_name} is not supported (use the option unsupported_types=text to carry it as text)")]
    UnsupportedType { table: String, column: String, type_name: String },
    /// `detail`: the value, the type, where it was read and why it did not parse.
    #[error("table {table}, column {column}: {detail}")]
    Value { table: String, column: String, detail: String },
    #[error("table {table} has no primary key or replica identity, so its updates and deletes cannot be mirrored; add a primary key, set REPLICA IDENTITY FULL, or use the option no_identity=insert_only")]
    NoIdentity { table: String },
    #[error("table {table}: {change} at WAL position {lsn}; replay of this source stops here (nothing after it is applied or confirmed)")]
    SchemaChange { table: String, change: String, lsn: Lsn },
    #[error("table {table}, column {column}: an update at WAL position {lsn} left a TOASTed value unchanged and the server did not send it; set REPLICA IDENTITY FULL on the table so the old value comes with the change")]
    UnchangedToast { table: String, column: String, lsn: Lsn },
    #[error("at WAL position {lsn}: a change names relation {oid}, which no Relation message described")]
    UnknownRelation { oid: u32, lsn: Lsn },
    /// The server ended the replication stream (CopyDone), as it does when shutting
    /// down: a new session resumes.
    #[error("the server ended the replication stream after WAL position {lsn}")]
    StreamEnded { lsn: Lsn },
    #[error("replication protocol at WAL position {lsn}: {reason}")]
    Protocol { lsn: Lsn, reason: String },
    #[error("engine: {0}")]
    Engine(#[from] CoreError),
}

impl PgSourceError {
    /// The table an error belongs to when it is that table's alone (its shape, its
    /// identity, one of its values): the rest of the source can go on without it.
    pub fn table(&self) -> Option<&str> {
        match self {
            PgSourceError::UnsupportedType { table, .. }
            | PgSourceError::Value { table, .. }
            | PgSourceError::NoIdentity { table }
            | PgSourceError::SchemaChange { table, .. }
            | PgSourceError::UnchangedToast { table, .. } => Some(table),
            _ => None,
        }
    }
}

impl From<WireError> for PgSourceError {
    fn from(error: WireError) -> Self {
        PgSourceError::Wire(Box::new(error))
    }
}

pub type PgSourceResult<T> = Result<T, PgSourceError>;
