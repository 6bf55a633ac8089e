//! The apply layer every source shares: one source transaction in, one mirror
//! transaction out. Sources (Debezium streams, PostgreSQL, Kafka, ...) rebuild their
//! transactions in their own way, but what happens between "a complete source
//! transaction" and [`Engine::submit_from`] is the same for all of them and lives
//! here once: TRUNCATE expansion (the engine has no truncate operation) and padding
//! of rows converted before their table got a new column.

use crate::error::CoreResult;
use crate::replay::{Engine, RowChange};
use crate::types::{TableId, Ts};
use crate::value::Value;

/// One change of a source transaction, already converted to Retina rows.
#[derive(Clone, Debug, PartialEq)]
pub enum SourceChange {
    Row(RowChange),
    /// TRUNCATE of a table: every row live at this point of the transaction goes.
    Truncate(TableId),
}

impl SourceChange {
    pub fn table(&self) -> TableId {
        match self {
            SourceChange::Row(row) => row.table(),
            SourceChange::Truncate(table) => *table,
        }
    }
}

/// A submitted source transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitted {
    pub ts: Ts,
    /// Row changes of the mirror transaction (a TRUNCATE counts the rows it deleted).
    pub row_changes: usize,
}

/// Submits one complete source transaction as one mirror transaction recorded at
/// `position` of `source`. `widened` lists tables that got a column while the
/// source's rows were being converted: their short rows get NULLs (the shape the
/// source database itself reads them in).
pub fn submit_source_transaction(
    engine: &Engine,
    source: &str,
    position: String,
    changes: Vec<SourceChange>,
    widened: &[TableId],
) -> CoreResult<Submitted> {
    let mut rows = expand_truncates(engine, changes)?;
    if !widened.is_empty() {
        pad_short_rows(engine, widened, &mut rows)?;
    }
    let row_changes = rows.len();
    Ok(Submitted { ts: engine.submit_from(source, position, rows)?, row_changes })
}

/// A TRUNCATE empties its table at its point of the transaction: the transaction's
/// earlier changes to that table are dropped and every row that was live before the
/// transaction is deleted. `Engine::live_keys` waits until everything submitted
/// earlier is visible, so those are exactly the rows the transaction starts from.
pub fn expand_truncates(engine: &Engine, changes: Vec<SourceChange>) -> CoreResult<Vec<RowChange>> {
    if !changes.iter().any(|c| matches!(c, SourceChange::Truncate(_))) {
        return Ok(changes
            .into_iter()
            .filter_map(|c| match c {
                SourceChange::Row(row) => Some(row),
                SourceChange::Truncate(_) => None,
            })
            .collect());
    }
    let mut out: Vec<RowChange> = Vec::with_capacity(changes.len());
    for change in changes {
        match change {
            SourceChange::Row(row) => out.push(row),
            SourceChange::Truncate(table) => {
                // Also drops an earlier TRUNCATE's deletes of the same table: the rows
                // from before the transaction are deleted once, here.
                out.retain(|c| c.table() != table);
                out.extend(engine.live_keys(table)?.into_iter().map(|key| RowChange::Delete { table, key }));
            }
        }
    }
    Ok(out)
}

/// Rows of `tables` in `changes` that are shorter than their table's current schema
/// get NULLs for the missing columns: a source that converted rows before it added a
/// column (same transaction, or an event bound to an older schema) submits them in
/// the table's shape, as the source database itself reads them.
pub fn pad_short_rows(engine: &Engine, tables: &[TableId], changes: &mut [RowChange]) -> CoreResult<()> {
    for &table in tables {
        let width = engine.table(table)?.column_count();
        for change in changes.iter_mut().filter(|c| c.table() == table) {
            if let Some(row) = change.row_mut().filter(|row| row.len() < width) {
                row.resize(width, Value::Null);
            }
        }
    }
    Ok(())
}
