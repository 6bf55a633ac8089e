//! The data-change operations a mirror transaction carries.

use crate::index::HashedKey;
use crate::types::{TableId, Ts};
use crate::value::{Row, Value};

/// One row change of a source transaction, already decoded.
///
/// `Insert`, `Update` and `Delete` are strict: an insert of a live key, or an update
/// or delete of a key without a live row, stops replay (the mirror and the source
/// disagree). The other variants say how a source wants a row the mirror may or may
/// not have to be treated; the decision is taken where the key's index is, in the
/// shard that owns it, at the change's point of the transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum RowChange {
    /// A new row (after-image).
    Insert { table: TableId, row: Row },
    /// Replace the row with primary key `key` by `row`. When `row`'s key differs this
    /// moves the row (delete in one shard, insert in another, same transaction).
    Update { table: TableId, key: Vec<Value>, row: Row },
    /// Remove the row with primary key `key` (from the before-image).
    Delete { table: TableId, key: Vec<Value> },
    /// The source's current state of a row (a snapshot read): inserted, replacing
    /// the live row with the same key if there is one.
    Upsert { table: TableId, row: Row },
    /// [`RowChange::Update`] of a row the mirror may not have (a stream that starts
    /// without a snapshot): when `key` has no live row, `row` is inserted. Counted in
    /// [`crate::EngineStats::absent_row_upserts`].
    UpdateOrInsert { table: TableId, key: Vec<Value>, row: Row },
    /// [`RowChange::Delete`] that does nothing when `key` has no live row. Counted in
    /// [`crate::EngineStats::absent_row_deletes_ignored`].
    DeleteIfPresent { table: TableId, key: Vec<Value> },
    /// An update whose after-image lacks the values of the columns `keep` (indices
    /// into the row; PostgreSQL's unchanged TOAST values): they take the values of the
    /// row it replaces, read where that row is stored (write buffer or data file).
    /// `row` holds anything (NULL) at those columns. The row must exist (else there
    /// is no previous value and replay stops with
    /// [`crate::CoreError::UnavailableValue`]). When `row` has another primary key the
    /// row moves: its kept values are read before the change is routed.
    UpdateKeeping { table: TableId, key: Vec<Value>, row: Row, keep: Vec<usize> },
}

impl RowChange {
    pub fn table(&self) -> TableId {
        match self {
            RowChange::Insert { table, .. }
            | RowChange::Update { table, .. }
            | RowChange::Delete { table, .. }
            | RowChange::Upsert { table, .. }
            | RowChange::UpdateOrInsert { table, .. }
            | RowChange::DeleteIfPresent { table, .. }
            | RowChange::UpdateKeeping { table, .. } => *table,
        }
    }

    /// The full row the change writes, if it writes one.
    pub fn row_mut(&mut self) -> Option<&mut Row> {
        match self {
            RowChange::Insert { row, .. }
            | RowChange::Update { row, .. }
            | RowChange::Upsert { row, .. }
            | RowChange::UpdateOrInsert { row, .. }
            | RowChange::UpdateKeeping { row, .. } => Some(row),
            RowChange::Delete { .. } | RowChange::DeleteIfPresent { .. } => None,
        }
    }
}

/// What a shard does when a delete finds no live row for its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IfAbsent {
    /// Stop replay: [`crate::CoreError::MissingKey`].
    Fail,
    /// Nothing to delete (the delete half of an upsert).
    Ignore,
    /// The delete half of an [`RowChange::UpdateOrInsert`]: nothing to delete, the
    /// insert half adds the row; counted as an absent-row upsert.
    CountUpsert,
    /// [`RowChange::DeleteIfPresent`]: counted as an ignored delete.
    CountIgnoredDelete,
}

/// What a shard applies: the engine has already encoded keys and picked shards.
#[derive(Debug)]
pub(crate) enum ShardOp {
    /// `replace`: a live row with the same key is deleted first (an upsert).
    Insert { table: TableId, key: HashedKey, row: Row, replace: bool },
    Delete { table: TableId, key: HashedKey, operation: &'static str, if_absent: IfAbsent },
    /// [`RowChange::UpdateKeeping`] with an unchanged key: both halves in one shard.
    UpdateKeeping { table: TableId, key: HashedKey, row: Row, keep: Vec<usize> },
}

/// The part of one mirror transaction that falls to one shard.
#[derive(Debug)]
pub(crate) struct ShardTxn {
    pub(crate) ts: Ts,
    pub(crate) ops: Vec<ShardOp>,
}
