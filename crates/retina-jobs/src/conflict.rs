//! delta-rs's commit-conflict errors, by kind: what an aborted attempt reports.

use deltalake_core::kernel::transaction::{CommitConflictError, TransactionError};
use deltalake_core::DeltaTableError;

/// Why delta-rs's conflict checker refused a commit (its `CommitConflictError`
/// variants, the names Delta Lake's own exceptions carry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum ConflictKind {
    /// Files were added that this operation should have read.
    ConcurrentAppend,
    /// A file this operation read was removed.
    ConcurrentDeleteRead,
    /// A file this operation removes was removed first.
    ConcurrentDeleteDelete,
    /// The table's metadata (schema, partitioning) changed.
    MetadataChanged,
    /// The same application transaction committed, or the version was taken.
    ConcurrentTransaction,
    /// The protocol changed (e.g. two writers creating the same table).
    ProtocolChanged,
}

impl ConflictKind {
    /// The kind of conflict inside `error`, if it is a commit conflict.
    pub fn of(error: &DeltaTableError) -> Option<Self> {
        match error {
            DeltaTableError::Transaction { source } => match source {
                TransactionError::CommitConflict(conflict) => Some(match conflict {
                    CommitConflictError::ConcurrentAppend => Self::ConcurrentAppend,
                    CommitConflictError::ConcurrentDeleteRead => Self::ConcurrentDeleteRead,
                    CommitConflictError::ConcurrentDeleteDelete => Self::ConcurrentDeleteDelete,
                    CommitConflictError::MetadataChanged => Self::MetadataChanged,
                    CommitConflictError::ConcurrentTransaction => Self::ConcurrentTransaction,
                    CommitConflictError::ProtocolChanged(_) => Self::ProtocolChanged,
                    _ => return None,
                }),
                TransactionError::MaxCommitAttempts(_) => Some(Self::ConcurrentTransaction),
                _ => None,
            },
            DeltaTableError::VersionAlreadyExists(_) => Some(Self::ConcurrentTransaction),
            _ => None,
        }
    }

    /// Delta Lake's name for it (the exception Spark would raise).
    pub fn name(self) -> &'static str {
        match self {
            Self::ConcurrentAppend => "ConcurrentAppendException",
            Self::ConcurrentDeleteRead => "ConcurrentDeleteReadException",
            Self::ConcurrentDeleteDelete => "ConcurrentDeleteDeleteException",
            Self::MetadataChanged => "MetadataChangedException",
            Self::ConcurrentTransaction => "ConcurrentTransactionException",
            Self::ProtocolChanged => "ProtocolChangedException",
        }
    }
}

impl std::fmt::Display for ConflictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
