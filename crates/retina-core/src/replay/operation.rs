//! The data-change operations a mirror transaction carries.

use crate::types::{TableId, Ts};
use crate::value::{Row, Value};

/// One row change of a source transaction, already decoded.
#[derive(Clone, Debug, PartialEq)]
pub enum RowChange {
    /// A new row (after-image).
    Insert { table: TableId, row: Row },
    /// Replace the row with primary key `key` by `row`. When `row`'s key differs this
    /// moves the row (delete in one shard, insert in another, same transaction).
    Update { table: TableId, key: Vec<Value>, row: Row },
    /// Remove the row with primary key `key` (from the before-image).
    Delete { table: TableId, key: Vec<Value> },
}

impl RowChange {
    pub fn table(&self) -> TableId {
        match self {
            RowChange::Insert { table, .. } | RowChange::Update { table, .. } | RowChange::Delete { table, .. } => *table,
        }
    }
}

/// What a shard applies: the engine has already encoded keys and picked shards.
#[derive(Debug)]
pub(crate) enum ShardOp {
    Insert { table: TableId, key: Vec<u8>, row: Row },
    Delete { table: TableId, key: Vec<u8>, operation: &'static str },
}

/// The part of one mirror transaction that falls to one shard.
#[derive(Debug)]
pub(crate) struct ShardTxn {
    pub(crate) ts: Ts,
    pub(crate) ops: Vec<ShardOp>,
}
