//! A message turned into what the reconstructor needs (row changes of a known table,
//! or a transaction marker). Shared by the sink's own path and the decode stage that
//! does this work on another thread.

use std::sync::Arc;

use parking_lot::RwLock;
use retina_core::RowChange;

use super::decoding::{Decoding, OnAbsentRow};
use super::change::SinkChange;
use super::tables::{KnownBindings, TableBinding};
use crate::debezium::{decode_elided, decode_line_with, ChangeEvent, Line, Message, Op, TablePlan, TransactionBlock};
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
pub fn prepare_known(line: &Line, position: Position, known: &RwLock<KnownBindings>) -> Option<Prepared> {
    let known = known.read();
    let default_table = known.decoding().default_table.as_deref();
    match decode_elided(line, default_table) {
        Some(decoded) => prepare_decoded(decoded.ok()?, position, &known),
        // A layout only the full parse reads: decoded from the full line, here still.
        None => prepare_decoded(decode_line_with(&line.full(), default_table).ok()?, position, &known),
    }
}

fn prepare_decoded(message: Message<'_>, position: Position, known: &KnownBindings) -> Option<Prepared> {
    Some(match message {
        Message::Tombstone => Prepared::Tombstone,
        Message::Begin { id } => Prepared::Begin { id },
        Message::End { id, event_count, data_collections } => Prepared::End { id, event_count, data_collections },
        Message::Change(event) => {
            let binding = known.lookup(&event)?;
            let changes = row_changes_with(&binding, &event, position, known.decoding()).ok()?;
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

/// The changes one event of `binding`'s table asks for, with the default [`Decoding`].
pub fn row_changes(binding: &TableBinding, event: &ChangeEvent<'_>, position: Position) -> CdcResult<Vec<SinkChange>> {
    row_changes_with(binding, event, position, &Decoding::default())
}

/// The changes one event of `binding`'s table asks for.
pub fn row_changes_with(
    binding: &TableBinding,
    event: &ChangeEvent<'_>,
    position: Position,
    decoding: &Decoding,
) -> CdcResult<Vec<SinkChange>> {
    let plan = &binding.plan;
    let decode_error = |field: &str| {
        let table = Some(event.table.clone());
        let field = field.to_string();
        move |error: DecodeError| CdcError::Decode { position, table, error: error.within(&field) }
    };
    let unavailable = |row: &[retina_core::Value], column: usize, reason: &str| CdcError::UnavailableValue {
        position,
        table: event.table.clone(),
        column: plan.columns()[column].name.clone(),
        key: describe_key(plan, row),
        reason: reason.to_string(),
    };
    let table = binding.id;
    let tolerant = decoding.on_absent_row == OnAbsentRow::Upsert;
    let change = match event.op {
        Op::Create | Op::Read => {
            let after = event.after.as_ref().ok_or_else(|| decode_error("")(DecodeError::missing("after")))?;
            let (row, missing) = plan.decode_after(after).map_err(decode_error("after"))?;
            if let Some(&column) = missing.first() {
                if let Some(&key_column) = missing.iter().find(|&&c| plan.primary_key().contains(&c)) {
                    return Err(unavailable(&row, key_column, "a primary-key column holds Debezium's unavailable-value placeholder"));
                }
                if event.op == Op::Read {
                    let reason = "the after-image of a snapshot row holds Debezium's unavailable-value placeholder: there is no previous row to take the value from";
                    return Err(unavailable(&row, column, reason));
                }
                // The insert half of a primary-key update, paired with its delete once
                // the transaction is complete (see `sink::change`).
                let (column, key) = (plan.columns()[column].name.clone(), describe_key(plan, &row));
                return Ok(vec![SinkChange::InsertKeeping { table, row, keep: missing, column, key }]);
            }
            // A snapshot row is the source's current state of the row: an upsert (an
            // incremental snapshot re-reads rows the stream already brought).
            if event.op == Op::Read { RowChange::Upsert { table, row } } else { RowChange::Insert { table, row } }
        }
        Op::Update => {
            let after = event.after.as_ref().ok_or_else(|| decode_error("")(DecodeError::missing("after")))?;
            let (mut row, mut missing) = plan.decode_after(after).map_err(decode_error("after"))?;
            let key = match &event.before {
                Some(before) => plan.decode_key(before).map_err(decode_error("before"))?,
                None => plan.key_of_row(&row).map_err(decode_error("after"))?,
            };
            if !missing.is_empty() {
                // The before-image's own value first (REPLICA IDENTITY FULL carries it).
                if let Some(before) = &event.before {
                    let mut still = Vec::with_capacity(missing.len());
                    for column in missing {
                        match plan.real_value(before, column).map_err(decode_error("before"))? {
                            Some(value) => row[column] = value,
                            None => still.push(column),
                        }
                    }
                    missing = still;
                }
            }
            if missing.is_empty() {
                if tolerant { RowChange::UpdateOrInsert { table, key, row } } else { RowChange::Update { table, key, row } }
            } else {
                if let Some(&column) = missing.iter().find(|&&c| plan.primary_key().contains(&c)) {
                    return Err(unavailable(&row, column, "a primary-key column holds Debezium's unavailable-value placeholder"));
                }
                if plan.key_of_row(&row).map_err(decode_error("after"))? != key {
                    let reason = "the update changes the primary key, so the previous row's value cannot be kept";
                    return Err(unavailable(&row, missing[0], reason));
                }
                // The rest comes from the mirror's current row, read in the shard.
                RowChange::UpdateKeeping { table, key, row, keep: missing }
            }
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
            if tolerant { RowChange::DeleteIfPresent { table, key } } else { RowChange::Delete { table, key } }
        }
        Op::Truncate => return Ok(vec![SinkChange::truncate(table)]),
    };
    Ok(vec![SinkChange::row(change)])
}

/// `col=value, ...` of a row's primary key, for errors.
fn describe_key(plan: &TablePlan, row: &[retina_core::Value]) -> String {
    plan.primary_key()
        .iter()
        .map(|&i| {
            let column = &plan.columns()[i];
            let value = row.get(i).map(|v| v.text(Some(&column.kind.arrow_type())).to_string()).unwrap_or_default();
            format!("{}={value}", column.name)
        })
        .collect::<Vec<_>>()
        .join(", ")
}
