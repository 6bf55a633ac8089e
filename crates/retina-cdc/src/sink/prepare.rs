//! A message turned into what the reconstructor needs (row changes of a known table,
//! or a transaction marker). Shared by the sink's own path and the decode stage that
//! does this work on another thread.

use std::sync::Arc;

use parking_lot::RwLock;
use retina_core::RowChange;

use super::reconstruct::SinkChange;
use super::tables::{KnownBindings, TableBinding};
use crate::debezium::{decode_line, ChangeEvent, Message, Op, TransactionBlock};
use crate::error::{CdcError, CdcResult, DecodeError};
use crate::position::{Position, SourceOrder};

/// A decoded message, owning everything it needs.
#[derive(Debug)]
pub enum Prepared {
    Tombstone,
    Begin { id: String },
    End { id: String, event_count: u64, data_collections: Vec<(String, u64)> },
    Change {
        table: Arc<str>,
        changes: Vec<SinkChange>,
        transaction: Option<TransactionBlock>,
        source_transaction: Option<String>,
        order: Option<SourceOrder>,
    },
}

/// Prepares `line` if that needs no decision of the sink: it decodes, and its table is
/// already known. Otherwise (an error, a new table or schema) `None`: the sink then
/// handles the raw line itself, producing the exact error or creating the table.
pub fn prepare_known(line: &str, position: Position, known: &RwLock<KnownBindings>) -> Option<Prepared> {
    Some(match decode_line(line).ok()? {
        Message::Tombstone => Prepared::Tombstone,
        Message::Begin { id } => Prepared::Begin { id },
        Message::End { id, event_count, data_collections } => Prepared::End { id, event_count, data_collections },
        Message::Change(event) => {
            let binding = known.read().lookup(&event)?;
            let changes = row_changes(&binding, &event, position).ok()?;
            change(*event, &binding, changes)
        }
    })
}

/// The prepared form of a change event whose row changes are known.
pub fn change(event: ChangeEvent<'_>, binding: &TableBinding, changes: Vec<SinkChange>) -> Prepared {
    Prepared::Change {
        table: Arc::clone(&binding.name),
        changes,
        transaction: event.transaction,
        source_transaction: event.source_transaction,
        order: event.order,
    }
}

/// The changes one event of `binding`'s table asks for.
pub fn row_changes(binding: &TableBinding, event: &ChangeEvent<'_>, position: Position) -> CdcResult<Vec<SinkChange>> {
    let plan = &binding.plan;
    let decode_error = |field: &str| {
        let table = Some(event.table.clone());
        let field = field.to_string();
        move |error: DecodeError| CdcError::Decode { position, table, error: error.within(&field) }
    };
    let table = binding.id;
    let change = match event.op {
        Op::Create | Op::Read => {
            let after = event.after.as_ref().ok_or_else(|| decode_error("")(DecodeError::missing("after")))?;
            RowChange::Insert { table, row: plan.decode_row(after).map_err(decode_error("after"))? }
        }
        Op::Update => {
            let after = event.after.as_ref().ok_or_else(|| decode_error("")(DecodeError::missing("after")))?;
            let row = plan.decode_row(after).map_err(decode_error("after"))?;
            let key = match &event.before {
                Some(before) => plan.decode_key(before).map_err(decode_error("before"))?,
                None => plan.key_of_row(&row).map_err(decode_error("after"))?,
            };
            RowChange::Update { table, key, row }
        }
        Op::Delete => {
            let key = match (&event.before, event.key) {
                (Some(before), _) => plan.decode_key(before).map_err(decode_error("before"))?,
                (None, Some(key)) => plan.decode_key_json(key).map_err(decode_error("key"))?,
                (None, None) => {
                    return Err(CdcError::NoPrimaryKey {
                        position,
                        table: event.table.clone(),
                        reason: "delete without a before-image or a message key".into(),
                    })
                }
            };
            RowChange::Delete { table, key }
        }
        Op::Truncate => return Ok(vec![SinkChange::Truncate(table)]),
    };
    Ok(vec![SinkChange::Row(change)])
}
