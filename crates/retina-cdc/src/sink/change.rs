//! What one event asks of its mirror transaction, and the pairing of a primary-key
//! update that Debezium sends as two events.
//!
//! Debezium's PostgreSQL connector sends an UPDATE that changes the primary key as a
//! delete of the old key and an insert of the new one (a tombstone between them on
//! Kafka), both at the update's source position. Under REPLICA IDENTITY DEFAULT the
//! insert's after-image holds the unavailable-value placeholder for TOAST columns the
//! update left unchanged: their values are the deleted row's. Once a transaction is
//! complete and in order, such an insert and the delete just before it become one
//! key-changing update keeping those columns, which the engine applies as a move.

use std::sync::Arc;

use retina_core::{Row, RowChange, SourceChange, TableId};

use crate::error::CdcError;
use crate::position::{Position, SourceOrder};

/// What one event asks of its mirror transaction.
#[derive(Clone, Debug, PartialEq)]
pub enum SinkChange {
    /// A change of the apply layer: a row change, or a Debezium `op: t` truncate
    /// (expanded at submission).
    Source(SourceChange),
    /// An insert whose after-image lacks the values of `keep` (see the module).
    /// `column` and `key` name the first of them and the row, for the error when no
    /// delete pairs with it.
    InsertKeeping { table: TableId, row: Row, keep: Vec<usize>, column: String, key: String },
}

impl SinkChange {
    pub fn row(change: RowChange) -> Self {
        Self::Source(SourceChange::Row(change))
    }

    pub fn truncate(table: TableId) -> Self {
        Self::Source(SourceChange::Truncate(table))
    }
}

/// One decoded change waiting for its transaction to complete.
#[derive(Debug, Clone)]
pub struct PendingChange {
    pub change: SinkChange,
    pub table: Arc<str>,
    pub position: Position,
    pub order: Option<SourceOrder>,
}

/// Pairs each insert keeping values with the delete just before it (see the module):
/// same table, same source position. The changes of a complete transaction, in order.
pub fn pair_key_updates(changes: &mut Vec<PendingChange>) -> Result<(), Box<CdcError>> {
    if !changes.iter().any(|c| matches!(c.change, SinkChange::InsertKeeping { .. })) {
        return Ok(());
    }
    let mut paired: Vec<PendingChange> = Vec::with_capacity(changes.len());
    for pending in changes.drain(..) {
        let SinkChange::InsertKeeping { table, row, keep, column, key } = pending.change else {
            paired.push(pending);
            continue;
        };
        let old_key = match paired.last() {
            Some(before) if before.order == pending.order => match &before.change {
                SinkChange::Source(SourceChange::Row(
                    RowChange::Delete { table: deleted, key } | RowChange::DeleteIfPresent { table: deleted, key },
                )) if *deleted == table => Some(key.clone()),
                _ => None,
            },
            _ => None,
        };
        let Some(old_key) = old_key else {
            return Err(Box::new(CdcError::UnavailableValue {
                position: pending.position,
                table: pending.table.to_string(),
                column,
                key,
                reason: "the after-image of an insert holds Debezium's unavailable-value placeholder, and no delete of \
                         the same primary-key update comes just before it: there is no previous row to take the value from"
                    .into(),
            }));
        };
        paired.pop();
        let change = SinkChange::row(RowChange::UpdateKeeping { table, key: old_key, row, keep });
        paired.push(PendingChange { change, ..pending });
    }
    *changes = paired;
    Ok(())
}
