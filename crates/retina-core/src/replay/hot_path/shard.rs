//! A replayer shard: applies its part of each mirror transaction.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use arrow_array::RecordBatch;
use crossbeam_channel::Receiver;

use crate::replay::hot_path::file_swap::apply_swap;
use crate::replay::hot_path::kept_reads::KeptColumnsReads;
use crate::replay::hot_path::operation::{IfAbsent, ShardOp, ShardTxn};
use crate::replay::messages::{FlushJob, RestoredShardTable, ShardMessage};
use crate::replay::shared::EngineShared;
use crate::error::{CoreError, CoreResult};
use crate::index::{HashedKey, MainIndex, MainIndexEntry, SinglePointIndex};
use crate::prefetch::prefetch_slice;
use crate::schema::TableSchema;
use crate::table::TableRuntime;
use crate::rows::value_at;
use crate::schema_evolution::conform_batches;
use crate::types::{RowId, RowLocation, TableId, Ts};
use crate::value::{Row, Value};
use crate::value_text::key_text;
use crate::write_buffer::{validate_row, WriteBuffer};

/// What one shard owns for one table.
struct ShardTable {
    runtime: Arc<TableRuntime>,
    /// The runtime's schema as of this shard's last row; refreshed when a column
    /// was added (the column count differs).
    schema: Arc<TableSchema>,
    index: SinglePointIndex,
    main: MainIndex,
    buffer: Option<WriteBuffer>,
}

/// One shard thread's state. Nothing here is shared: other threads see this shard's
/// work only through published virtual-file blocks, tile visibility and commits.
pub(crate) struct Shard {
    shared: Arc<EngineShared>,
    tables: Vec<Option<ShardTable>>,
    dirty: Vec<TableId>,
    /// Data-file reads of kept columns while one batch is applied.
    kept_reads: KeptColumnsReads,
}

impl Shard {
    pub(crate) fn new(shared: Arc<EngineShared>) -> Self {
        Self { shared, tables: Vec::new(), dirty: Vec::new(), kept_reads: KeptColumnsReads::default() }
    }

    /// Installs what recovery rebuilt for one table, before the shard runs.
    pub(crate) fn restore(&mut self, restored: RestoredShardTable) {
        let slot = restored.table.id().0 as usize;
        if slot >= self.tables.len() {
            self.tables.resize_with(slot + 1, || None);
        }
        let schema = restored.table.schema();
        self.tables[slot] =
            Some(ShardTable { runtime: restored.table, schema, index: restored.index, main: restored.main, buffer: None });
    }

    /// The shard's event loop; returns when the engine drops its senders.
    pub(crate) fn run(mut self, inbox: Receiver<ShardMessage>) {
        for message in inbox {
            match message {
                ShardMessage::Apply { group, txns } => {
                    if self.shared.has_failed() {
                        continue; // never commit after a failure: HWM stays put
                    }
                    fail::fail_point!("shard::apply");
                    let applied = self.apply(txns);
                    self.kept_reads.clear();
                    match applied {
                        Ok(()) => group.shard_done(),
                        Err(error) => self.shared.fail(error.to_string()),
                    }
                }
                ShardMessage::SwapFile(swap) => match self.table_mut(swap.table) {
                    Ok(table) => apply_swap(*swap, &mut table.index, &mut table.main, &table.runtime),
                    Err(error) => self.shared.fail(error.to_string()),
                },
                ShardMessage::CollectIndexGarbage { lwm, part } => {
                    for table in self.tables.iter_mut().flatten() {
                        table.index.collect_garbage_part(lwm, part);
                    }
                }
                ShardMessage::ReadLatest { table, key, columns, reply } => {
                    let _ = reply.send(self.latest_values(table, &key, &columns));
                    self.kept_reads.clear();
                }
            }
        }
    }

    fn apply(&mut self, mut txns: Vec<ShardTxn>) -> CoreResult<()> {
        // Every tile delete pins the epoch; pinned here once, those pins are nested
        // and cost a counter increment each.
        let _pinned = crossbeam_epoch::pin();
        for first in 0..PREFETCH_DISTANCE {
            self.prefetch(op_ahead(&[], &txns, first));
        }
        for at in 0..txns.len() {
            let ts = txns[at].ts;
            let mut ops = std::mem::take(&mut txns[at].ops).into_iter();
            while let Some(op) = ops.next() {
                self.prefetch(op_ahead(ops.as_slice(), &txns[at + 1..], PREFETCH_DISTANCE - 1));
                match op {
                    ShardOp::Insert { table, key, row, replace: false } => self.insert(table, &key, row, ts)?,
                    ShardOp::Insert { table, key, row, replace: true } => {
                        self.delete(table, &key, "upsert", IfAbsent::Ignore, ts)?;
                        self.insert(table, &key, row, ts)?
                    }
                    ShardOp::Delete { table, key, operation, if_absent } => self.delete(table, &key, operation, if_absent, ts)?,
                    ShardOp::UpdateKeeping { table, key, row, keep } => self.update_keeping(table, &key, row, &keep, ts)?,
                }
            }
        }
        // Publish before the batch is reported applied, so rows are readable by the
        // time HWM passes them.
        for table in std::mem::take(&mut self.dirty) {
            if let Some(buffer) = self.table_mut(table)?.buffer.as_mut() {
                buffer.publish();
            }
        }
        Ok(())
    }

    /// Starts loading the index memory `op` will probe (see [`SinglePointIndex::prefetch`])
    /// and the values of the row it writes, which validation and the append read
    /// first (rows arrive from the routing thread's core, or from memory).
    fn prefetch(&self, op: Option<&ShardOp>) {
        let Some(op) = op else { return };
        let (ShardOp::Insert { table, key, .. } | ShardOp::Delete { table, key, .. } | ShardOp::UpdateKeeping { table, key, .. }) = op;
        if let Some(Some(table)) = self.tables.get(table.0 as usize) {
            table.index.prefetch(key);
        }
        if let ShardOp::Insert { row, .. } | ShardOp::UpdateKeeping { row, .. } = op {
            prefetch_slice(row, ROW_PREFETCH_BYTES);
        }
    }

    fn table_mut(&mut self, id: TableId) -> CoreResult<&mut ShardTable> {
        let slot = id.0 as usize;
        if slot >= self.tables.len() {
            self.tables.resize_with(slot + 1, || None);
        }
        if self.tables[slot].is_none() {
            let runtime = self.shared.table(id)?;
            let schema = runtime.schema();
            self.tables[slot] =
                Some(ShardTable { runtime, schema, index: SinglePointIndex::new(), main: MainIndex::new(), buffer: None });
        }
        Ok(self.tables[slot].as_mut().expect("filled above"))
    }

    fn insert(&mut self, table_id: TableId, key: &HashedKey, row: Row, ts: Ts) -> CoreResult<()> {
        let shared = Arc::clone(&self.shared);
        let table = self.table_mut(table_id)?;
        if table.runtime.column_count() != table.schema.column_count() {
            table.schema = table.runtime.schema();
            if let Some(buffer) = table.buffer.as_mut() {
                buffer.adopt_schema(Arc::clone(&table.schema));
            }
        }
        validate_row(&table.schema, &row).map_err(|e| at_ts(e, ts))?;
        // One hash and probe of the key for the check and the write below.
        let slot = table.index.slot(key);
        if slot.latest().is_some() {
            return Err(CoreError::DuplicateKey {
                table: table.runtime.name().to_string(),
                key: key_text(&table.schema, key.bytes()),
                ts,
            });
        }
        let needs_file = table.buffer.as_ref().is_none_or(WriteBuffer::is_full);
        if needs_file {
            let (file, writer) = shared.new_virtual_file(&table.runtime);
            table.main.push(MainIndexEntry {
                first_row_id: file.first_row_id(),
                rows: file.capacity() as u64,
                file_id: file.file_id(),
                writer,
            });
            match table.buffer.as_mut() {
                Some(buffer) => {
                    fail::fail_point!("shard::before-rotate");
                    let full = buffer.rotate(file);
                    shared.flush(FlushJob { table: Arc::clone(&table.runtime), file: full });
                }
                None => {
                    table.buffer =
                        Some(WriteBuffer::new(Arc::clone(&table.schema), shared.config.block_rows, file))
                }
            }
        }
        let buffer = table.buffer.as_mut().expect("created above");
        let offset = buffer.append(&row, ts);
        let row_id = RowId(buffer.file().first_row_id().0 + offset as u64);
        slot.write(ts, Some(row_id));
        if !self.dirty.contains(&table_id) {
            self.dirty.push(table_id);
        }
        Ok(())
    }

    fn delete(&mut self, table_id: TableId, key: &HashedKey, operation: &'static str, if_absent: IfAbsent, ts: Ts) -> CoreResult<()> {
        let table = self.table_mut(table_id)?;
        let slot = table.index.slot(key);
        let Some(row_id) = slot.latest() else {
            let counter = match if_absent {
                IfAbsent::Fail => {
                    return Err(CoreError::MissingKey {
                        table: table.runtime.name().to_string(),
                        key: key_text(&table.schema, key.bytes()),
                        operation,
                        ts,
                    })
                }
                IfAbsent::Ignore => return Ok(()),
                IfAbsent::CountUpsert => &self.shared.stats.absent_row_upserts,
                IfAbsent::CountIgnoredDelete => &self.shared.stats.absent_row_deletes_ignored,
            };
            counter.fetch_add(1, Relaxed);
            return Ok(());
        };
        let (location, visibility) =
            table.main.locate_mut(row_id).expect("every row id in the single-point index has a main-index range");
        visibility.delete(location.offset, ts);
        slot.write(ts, None);
        Ok(())
    }

    /// An update keeping the columns `keep` of the row it replaces: their values are
    /// read from where that row is (this shard's write buffer, another virtual file
    /// of the table, or a data file), then it is an update like any other.
    fn update_keeping(&mut self, table_id: TableId, key: &HashedKey, mut row: Row, keep: &[usize], ts: Ts) -> CoreResult<()> {
        let previous = match self.latest_values(table_id, key, keep)? {
            Ok(previous) => previous,
            Err(reason) => {
                let table = self.table_mut(table_id)?;
                return Err(CoreError::UnavailableValue {
                    table: table.runtime.name().to_string(),
                    column: keep.first().map_or_else(String::new, |&c| table.schema.column_name(c)),
                    key: key_text(&table.schema, key.bytes()),
                    ts,
                    reason,
                });
            }
        };
        for (&column, value) in keep.iter().zip(previous) {
            if let Some(slot) = row.get_mut(column) {
                *slot = value;
            }
        }
        self.delete(table_id, key, "update", IfAbsent::Fail, ts)?;
        self.insert(table_id, key, row, ts)
    }

    /// The values of `columns` of `key`'s live row, read where that row is (this
    /// shard's write buffer, another virtual file of the table, or a data file); the
    /// reason when the key has no live row or its stored row is not found.
    fn latest_values(&mut self, table_id: TableId, key: &HashedKey, columns: &[usize]) -> CoreResult<Result<Vec<Value>, &'static str>> {
        let shared = Arc::clone(&self.shared);
        let table = self.table_mut(table_id)?;
        let Some(row_id) = table.index.latest(key.bytes()) else {
            return Ok(Err("the row is not in the mirror"));
        };
        let (location, _) =
            table.main.locate_mut(row_id).expect("every row id in the single-point index has a main-index range");
        // A row appended earlier in this batch is not published yet; publishing early
        // is harmless (readers cut rows by `_create_ts`, and this ts is not visible).
        if let Some(buffer) = table.buffer.as_mut() {
            if buffer.file().file_id() == location.file_id && buffer.has_unpublished_rows() {
                buffer.publish();
            }
        }
        let runtime = Arc::clone(&table.runtime);
        let previous = previous_values(&shared, &runtime, location, columns, &mut self.kept_reads)?;
        Ok(previous.ok_or("its stored row could not be found"))
    }
}

/// How many operations ahead of the one being applied a shard prefetches index
/// memory: enough for a few misses to be in flight at once, few enough that the
/// lines are still cached when their operation comes.
const PREFETCH_DISTANCE: usize = 6;

/// How much of a row's values a prefetch asks for: the values themselves (not the
/// strings they point to) of a row of up to ~10 columns.
const ROW_PREFETCH_BYTES: usize = 256;

/// The operation `n` places after the current one: in `rest` (what remains of the
/// current transaction), then in the transactions after it.
fn op_ahead<'a>(rest: &'a [ShardOp], later: &'a [ShardTxn], mut n: usize) -> Option<&'a ShardOp> {
    if let Some(op) = rest.get(n) {
        return Some(op);
    }
    n -= rest.len();
    for txn in later {
        match txn.ops.get(n) {
            Some(op) => return Some(op),
            None => n -= txn.ops.len(),
        }
    }
    None
}

/// The values of `columns` of the row stored at `location`: from a virtual file's
/// published blocks, else from the data file in lake storage (read once per batch,
/// through `kept_reads`). `None` when the file is in neither list (it cannot be
/// while the index points at it).
fn previous_values(
    shared: &EngineShared,
    runtime: &TableRuntime,
    location: RowLocation,
    columns: &[usize],
    kept_reads: &mut KeptColumnsReads,
) -> CoreResult<Option<Vec<Value>>> {
    let schema = runtime.schema();
    let files = runtime.files();
    let offset = location.offset as usize;
    let pick = |batches: &[RecordBatch], logical: &[usize]| -> CoreResult<Option<Vec<Value>>> {
        let mut start = 0usize;
        for batch in batches {
            if offset < start + batch.num_rows() {
                let values = logical
                    .iter()
                    .map(|&c| value_at(batch.column(c).as_ref(), offset - start))
                    .collect::<CoreResult<Vec<Value>>>()?;
                return Ok(Some(values));
            }
            start += batch.num_rows();
        }
        Ok(None)
    };
    if let Some(file) = files.virtual_files.iter().find(|f| f.file_id() == location.file_id) {
        // Blocks written before a column was added have the old layout.
        let blocks = conform_batches(&schema, &file.blocks())?;
        return pick(&blocks, columns);
    }
    let mut sorted: Vec<usize> = columns.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let read: Vec<usize> = columns.iter().filter_map(|c| sorted.binary_search(c).ok()).collect();
    if let Some(batches) = kept_reads.get(location.file_id, &sorted, &schema) {
        return pick(batches, &read);
    }
    if let Some(file) = files.flushed.iter().find(|f| f.meta.file_id == location.file_id) {
        let batches = shared.store.read_file(&schema, &file.meta, &sorted, &[])?.batches;
        return pick(kept_reads.keep(location.file_id, sorted, schema, batches), &read);
    }
    Ok(None)
}

/// Puts the mirror-transaction ts into a row-validation error.
fn at_ts(error: CoreError, ts: Ts) -> CoreError {
    CoreError::InTransaction { ts, source: Box::new(error) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delete(n: u8) -> ShardOp {
        ShardOp::Delete { table: TableId(0), key: HashedKey::from_bytes(&[n]), operation: "delete", if_absent: IfAbsent::Fail }
    }

    fn key_of(op: Option<&ShardOp>) -> Option<u8> {
        match op {
            Some(ShardOp::Delete { key, .. }) => Some(key.bytes()[0]),
            _ => None,
        }
    }

    /// The prefetch cursor counts across transaction boundaries, skips empty ones and
    /// stops at the end of the batch.
    #[test]
    fn the_op_ahead_walks_into_later_transactions() {
        let rest = [delete(1), delete(2)];
        let later = [
            ShardTxn { ts: Ts(2), ops: vec![delete(3)] },
            ShardTxn { ts: Ts(3), ops: vec![] },
            ShardTxn { ts: Ts(4), ops: vec![delete(4), delete(5)] },
        ];
        let ahead: Vec<Option<u8>> = (0..6).map(|n| key_of(op_ahead(&rest, &later, n))).collect();
        assert_eq!(ahead, vec![Some(1), Some(2), Some(3), Some(4), Some(5), None]);
        assert_eq!(key_of(op_ahead(&[], &later, 0)), Some(3));
        assert_eq!(key_of(op_ahead(&[], &[], 0)), None);
    }
}
