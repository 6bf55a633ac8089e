//! Updates that keep columns of the row they replace (an after-image without the
//! unchanged TOAST values) and change its primary key. The row moves to the shard of
//! its new key, which cannot read the old one, so the kept values are read here from
//! the old key's shard, after everything submitted before, and the change becomes a
//! plain update. Debezium sends a PostgreSQL key update as a delete and an insert,
//! which the sink pairs into one such update. Rare, so one round trip each.

use std::collections::HashSet;

use crate::error::{CoreError, CoreResult};
use crate::index::HashedKey;
use crate::replay::hot_path::operation::RowChange;
use crate::replay::messages::ShardMessage;
use crate::schema::TableSchema;
use crate::types::{TableId, Ts};
use crate::value::{Row, Value};
use crate::value_text::key_text;

use super::{key_of, row_key, Engine};

impl Engine {
    /// `changes` with every key-changing [`RowChange::UpdateKeeping`] turned into a
    /// [`RowChange::Update`] of the values read (see the module).
    pub(super) fn resolve_kept_moves(&self, changes: Vec<RowChange>) -> CoreResult<Vec<RowChange>> {
        if !changes.iter().any(|c| matches!(c, RowChange::UpdateKeeping { .. })) {
            return Ok(changes);
        }
        let mut out = Vec::with_capacity(changes.len());
        // The keys the changes before a move write, gathered only once one is found.
        let mut written = EarlierWrites::default();
        for change in changes {
            let change = match change {
                RowChange::UpdateKeeping { table, key, row, keep } => self.resolve_kept_move(table, key, row, keep, &out, &mut written)?,
                other => other,
            };
            out.push(change);
        }
        Ok(out)
    }

    fn resolve_kept_move(
        &self,
        table: TableId,
        key: Vec<Value>,
        mut row: Row,
        keep: Vec<usize>,
        earlier: &[RowChange],
        written: &mut EarlierWrites,
    ) -> CoreResult<RowChange> {
        let schema = self.table(table)?.schema();
        let old = key_of(&schema, &key)?;
        if row_key(&schema, &row, Some(&old))? == old {
            return Ok(RowChange::UpdateKeeping { table, key, row, keep });
        }
        let shown_key = key_text(&schema, old.bytes());
        let unavailable = |reason| CoreError::UnavailableValue {
            table: schema.name().to_string(),
            column: keep.first().map_or_else(String::new, |&c| schema.column_name(c)),
            key: shown_key.clone(),
            ts: Ts(0),
            reason,
        };
        if let Some(&bad) = keep.iter().find(|&&c| c >= schema.column_count()) {
            return Err(CoreError::ArityMismatch { table: schema.name().to_string(), expected: schema.column_count(), actual: bad + 1 });
        }
        // An earlier change of the transaction is not applied yet: its row cannot be read.
        if written.contains(self, earlier, table, &old) {
            return Err(unavailable("an earlier change of its transaction wrote the row, and this update moves it to another key"));
        }
        let previous = self.read_latest(table, old, keep.clone())?.map_err(unavailable)?;
        for (&column, value) in keep.iter().zip(previous) {
            if let Some(slot) = row.get_mut(column) {
                *slot = value;
            }
        }
        Ok(RowChange::Update { table, key, row })
    }

    /// The latest values of `columns` of `table`'s row with `key`, after everything
    /// submitted so far: the pending batch goes to the shards first, and the question
    /// after it to the key's shard. The reason when the key has no live row.
    fn read_latest(&self, table: TableId, key: HashedKey, columns: Vec<usize>) -> CoreResult<Result<Vec<Value>, &'static str>> {
        self.flush_batch()?;
        let (reply, answer) = crossbeam_channel::bounded(1);
        let shard = key.shard(self.shard_inboxes.len());
        self.shard_inboxes[shard]
            .send(ShardMessage::ReadLatest { table, key, columns, reply })
            .map_err(|_| self.stopped("a shard thread exited"))?;
        answer.recv().map_err(|_| self.stopped("a shard thread exited"))?
    }
}

/// The (table, key) pairs written by the changes of a transaction before a move,
/// gathered as far as needed: a transaction of many moves is read once, not once per
/// move.
#[derive(Default)]
struct EarlierWrites {
    keys: HashSet<(TableId, Vec<u8>)>,
    scanned: usize,
}

impl EarlierWrites {
    fn contains(&mut self, engine: &Engine, earlier: &[RowChange], table: TableId, key: &HashedKey) -> bool {
        for change in &earlier[self.scanned..] {
            let Ok(runtime) = engine.table(change.table()) else { continue };
            let schema = runtime.schema();
            for written in written_keys(change, &schema) {
                self.keys.insert((change.table(), written.bytes().to_vec()));
            }
        }
        self.scanned = earlier.len();
        self.keys.contains(&(table, key.bytes().to_vec()))
    }
}

/// The keys whose rows `change` deletes or writes.
fn written_keys(change: &RowChange, schema: &TableSchema) -> Vec<HashedKey> {
    let key = |values: &[Value]| key_of(schema, values).ok();
    let row = |values: &[Value]| row_key(schema, values, None).ok();
    match change {
        RowChange::Insert { row: r, .. } | RowChange::Upsert { row: r, .. } => row(r).into_iter().collect(),
        RowChange::Update { key: k, row: r, .. }
        | RowChange::UpdateOrInsert { key: k, row: r, .. }
        | RowChange::UpdateKeeping { key: k, row: r, .. } => key(k).into_iter().chain(row(r)).collect(),
        RowChange::Delete { key: k, .. } | RowChange::DeleteIfPresent { key: k, .. } => key(k).into_iter().collect(),
    }
}
