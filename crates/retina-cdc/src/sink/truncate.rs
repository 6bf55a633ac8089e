//! Debezium truncate events (`op: t`). The engine has no truncate operation, so a
//! truncate becomes deletes of every key live at that point of its transaction: the
//! keys visible before the transaction (read from a snapshot after everything earlier
//! is made visible), adjusted by the transaction's own earlier changes.

use std::collections::{HashMap, HashSet};

use retina_core::value::encode_key;
use retina_core::{Engine, RowChange, TableId, Value};

use super::reconstruct::SinkChange;
use crate::error::CdcResult;

/// The mirror transaction's row changes with each truncate replaced by deletes.
pub fn expand(engine: &Engine, changes: Vec<SinkChange>) -> CdcResult<Vec<RowChange>> {
    let truncated: HashSet<TableId> =
        changes.iter().filter_map(|c| if let SinkChange::Truncate(t) = c { Some(*t) } else { None }).collect();
    // Everything submitted before this transaction is visible first, so these are
    // exactly the rows this transaction starts from.
    let mut live: HashMap<TableId, HashMap<Vec<u8>, Vec<Value>>> = HashMap::new();
    for &table in &truncated {
        let keys = engine.live_keys(table)?;
        live.insert(table, keys.into_iter().map(|key| (encode_key(&key), key)).collect());
    }
    let mut out = Vec::with_capacity(changes.len());
    for change in changes {
        match change {
            SinkChange::Truncate(table) => {
                let keys = live.get_mut(&table).map(std::mem::take).unwrap_or_default();
                out.extend(keys.into_values().map(|key| RowChange::Delete { table, key }));
            }
            SinkChange::Row(row) => {
                if let Some(keys) = live.get_mut(&row.table()) {
                    track(engine, keys, &row)?;
                }
                out.push(row);
            }
        }
    }
    Ok(out)
}

/// Keeps a truncated table's live keys current through the transaction's own changes.
fn track(engine: &Engine, keys: &mut HashMap<Vec<u8>, Vec<Value>>, change: &RowChange) -> CdcResult<()> {
    let runtime = engine.table(change.table())?;
    let key_of_row = |row: &[Value]| -> Vec<Value> { runtime.schema().primary_key().iter().map(|&i| row[i].clone()).collect() };
    match change {
        RowChange::Insert { row, .. } | RowChange::Upsert { row, .. } => {
            let key = key_of_row(row);
            keys.insert(encode_key(&key), key);
        }
        RowChange::Delete { key, .. } | RowChange::DeleteIfPresent { key, .. } => {
            keys.remove(&encode_key(key));
        }
        RowChange::Update { key, row, .. } | RowChange::UpdateOrInsert { key, row, .. } | RowChange::UpdateKeeping { key, row, .. } => {
            keys.remove(&encode_key(key));
            let new_key = key_of_row(row);
            keys.insert(encode_key(&new_key), new_key);
        }
    }
    Ok(())
}
