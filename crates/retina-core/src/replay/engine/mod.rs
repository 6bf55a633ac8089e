//! `Engine`: tables, replayer shards, the flusher and memory GC of one Retina
//! instance, behind owned-value methods that could cross a process boundary.

mod kept_moves;
mod startup;
pub(crate) mod threads;

use std::sync::atomic::{AtomicBool, Ordering::{Relaxed, SeqCst}};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arrow_array::RecordBatch;
use crossbeam_channel::Sender;
use parking_lot::Mutex;

use crate::replay::config::EngineConfig;
use crate::replay::durability::checkpointer::CheckpointReport;
use crate::replay::durability::recovery::RecoveryReport;
use crate::replay::durability::source_progress::SourcePosition;
use crate::replay::gc::memory::collect_garbage;
use crate::replay::gc::storage::StorageGcReport;
use crate::replay::hot_path::commit_group::CommitGroup;
use crate::replay::hot_path::operation::{IfAbsent, RowChange, ShardOp, ShardTxn};
use crate::index::HashedKey;
use crate::replay::messages::ShardMessage;
use crate::replay::shared::EngineShared;
use crate::replay::stats::EngineStats;
use crate::error::{CoreError, CoreResult};
use crate::schema::TableSchema;
use crate::scan;
use crate::storage::{DataFiles, LakeStore};
use crate::table::TableRuntime;
use crate::txn::{Snapshot, TransactionService};
use crate::types::{TableId, Ts};
use crate::value::Value;

/// Transactions collected for the next group commit.
pub(super) struct PendingBatch {
    pub(super) per_shard: Vec<Vec<ShardTxn>>,
    pub(super) timestamps: Vec<Ts>,
    pub(super) changes: usize,
    pub(super) last_submitted: Ts,
}

/// One Retina instance: create tables, submit mirror transactions, take snapshots and
/// scan them.
///
/// Invariant: transactions are applied in submission order, which is also their ts
/// order (ts is allocated under the submission lock); so every shard replays its keys
/// in ts order and tiles receive deletes in ts order.
pub struct Engine {
    pub(super) shared: Arc<EngineShared>,
    pub(super) shard_inboxes: Vec<Sender<ShardMessage>>,
    pub(super) pending: Mutex<PendingBatch>,
    pub(super) threads: Vec<JoinHandle<()>>,
    pub(super) stop_background: Arc<AtomicBool>,
    pub(super) recovery: Option<(RecoveryReport, Vec<SourcePosition>)>,
}

impl Engine {
    /// What recovery did, when this engine was opened from existing state.
    pub fn recovery_report(&self) -> Option<&RecoveryReport> {
        self.recovery.as_ref().map(|(report, _)| report)
    }

    /// The source positions of the recovered checkpoint: resume each source after
    /// its position (everything up to it is applied, nothing after it).
    pub fn recovered_positions(&self) -> &[SourcePosition] {
        self.recovery.as_ref().map_or(&[], |(_, positions)| positions.as_slice())
    }

    /// Takes a checkpoint now (replay and queries go on meanwhile).
    pub fn checkpoint(&self) -> CoreResult<CheckpointReport> {
        self.writable("a checkpoint")?;
        if let Some(error) = self.shared.failure() {
            return Err(error);
        }
        self.shared.checkpoint()
    }

    /// Clean shutdown: makes everything submitted visible, flushes full files and
    /// takes a final checkpoint. A read-only engine just stops, reporting the
    /// checkpoint it recovered.
    pub fn close(self) -> CoreResult<CheckpointReport> {
        if self.shared.read_only {
            let ts = self.recovery_report().map_or(Ts(0), |report| report.checkpoint_ts);
            return Ok(CheckpointReport { ts, files: 0, buffered_rows: 0, millis: 0.0, cleanup_error: None });
        }
        self.flush_and_checkpoint()
    }

    /// Whether the engine was opened over a store that may not write.
    pub fn is_read_only(&self) -> bool {
        self.shared.read_only
    }

    fn writable(&self, operation: &'static str) -> CoreResult<()> {
        if self.shared.read_only {
            return Err(CoreError::ReadOnly { operation });
        }
        Ok(())
    }

    /// [`Self::close`] through a shared handle (a server whose connection tasks may
    /// still hold the engine for a moment): the same final checkpoint, so the data dir
    /// reopens as it is now, without waiting to be the last owner.
    pub fn flush_and_checkpoint(&self) -> CoreResult<CheckpointReport> {
        self.wait_for_flushes()?;
        let report = self.checkpoint()?;
        self.shared.store.publish_pending()?;
        Ok(report)
    }

    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    pub fn transaction_service(&self) -> &Arc<dyn TransactionService> {
        &self.shared.txn
    }

    /// The lake store the engine's files live in (query engines read splits from it).
    pub fn store(&self) -> &Arc<dyn LakeStore> {
        &self.shared.store
    }

    /// The store's data files alone: what a reader of splits needs.
    pub fn data_files(&self) -> Arc<dyn DataFiles> {
        Arc::clone(&self.shared.store) as Arc<dyn DataFiles>
    }

    /// Creates a table and records it in the catalog.
    pub fn create_table(&self, schema: TableSchema) -> CoreResult<TableId> {
        self.writable("creating a table")?;
        let id = {
            let mut registry = self.shared.registry.write();
            if registry.by_name.contains_key(schema.name()) {
                return Err(CoreError::TableExists { table: schema.name().to_string() });
            }
            let id = TableId(registry.tables.len() as u32);
            registry.by_name.insert(schema.name().to_string(), id);
            registry.tables.push(Arc::new(TableRuntime::new(id, schema)));
            id
        };
        self.shared.save_catalog()?;
        Ok(id)
    }

    /// The primary keys of every row of `table` visible once everything submitted so
    /// far is: what a TRUNCATE at this point deletes (the engine has no truncate
    /// operation of its own).
    pub fn live_keys(&self, table: TableId) -> CoreResult<Vec<Vec<Value>>> {
        self.sync()?;
        let snapshot = self.snapshot()?;
        let key_columns = self.table(table)?.schema().primary_key().to_vec();
        crate::rows::rows_of(&self.scan(table, &snapshot, Some(&key_columns))?)
    }

    /// Adds a nullable column at the end of a table's schema and records it in the
    /// catalog. Nothing stored is rewritten: rows written before read the column as
    /// NULL. Everything submitted before is applied first (rows of the old shape),
    /// and rows submitted after must have the new shape; the caller serializes this
    /// with its own submissions (a source adds the column between two transactions).
    pub fn add_column(&self, table: TableId, field: arrow_schema::Field) -> CoreResult<()> {
        self.writable("adding a column")?;
        self.sync()?;
        let runtime = self.shared.table(table)?;
        let widened = runtime.schema().with_column(field)?;
        runtime.set_schema(widened);
        self.shared.save_catalog()
    }

    pub fn table_id(&self, name: &str) -> Option<TableId> {
        self.shared.registry.read().by_name.get(name).copied()
    }

    pub fn table(&self, id: TableId) -> CoreResult<Arc<TableRuntime>> {
        self.shared.table(id)
    }

    pub fn tables(&self) -> Vec<Arc<TableRuntime>> {
        self.shared.registry.read().tables.clone()
    }

    /// Submits one mirror transaction; returns its timestamp. It becomes visible, all
    /// at once, after its batch is sent (when full, or by [`Self::flush_batch`]) and
    /// every shard it touches has applied it.
    pub fn submit(&self, changes: Vec<RowChange>) -> CoreResult<Ts> {
        self.submit_inner(changes, None)
    }

    /// [`Self::submit`] for a transaction read from `source` at `position`; once it is
    /// visible, [`Self::source_positions`] reports that position.
    pub fn submit_from(&self, source: &str, position: String, changes: Vec<RowChange>) -> CoreResult<Ts> {
        self.submit_inner(changes, Some((source, position)))
    }

    /// For every source, the position held by the latest saved checkpoint: only up
    /// to here may a source be told it can discard data. Visible is not enough: a
    /// crash before the next checkpoint goes back to this position.
    pub fn durable_positions(&self) -> Vec<SourcePosition> {
        self.shared.durable_sources.lock().clone()
    }

    /// For every source, the position of its newest visible transaction.
    pub fn source_positions(&self) -> Vec<SourcePosition> {
        self.shared.sources.at(self.shared.txn.high_watermark().prev())
    }

    fn submit_inner(&self, changes: Vec<RowChange>, origin: Option<(&str, String)>) -> CoreResult<Ts> {
        self.writable("applying changes")?;
        if let Some(error) = self.shared.failure() {
            return Err(error);
        }
        let changes = self.resolve_kept_moves(changes)?;
        // A read guard, not a clone of the table list: this runs once per transaction.
        let registry = self.shared.registry.read();
        let tables = &registry.tables;
        let shards = self.shard_inboxes.len();
        // Route first, so a bad change rejects the transaction before it gets a ts.
        // An update routes two operations.
        let mut routed: Vec<(usize, ShardOp)> = Vec::with_capacity(2 * changes.len());
        let change_count = changes.len();
        for change in changes {
            let table = tables
                .get(change.table().0 as usize)
                .ok_or_else(|| CoreError::UnknownTable { table: format!("#{}", change.table().0) })?;
            let schema = &*table.schema();
            match change {
                RowChange::Insert { table: id, row } => {
                    let key = row_key(schema, &row, None)?;
                    routed.push((key.shard(shards), ShardOp::Insert { table: id, key, row, replace: false }));
                }
                RowChange::Upsert { table: id, row } => {
                    let key = row_key(schema, &row, None)?;
                    routed.push((key.shard(shards), ShardOp::Insert { table: id, key, row, replace: true }));
                }
                RowChange::Delete { table: id, key } => {
                    let key = key_of(schema, &key)?;
                    routed.push((key.shard(shards), ShardOp::Delete { table: id, key, operation: "delete", if_absent: IfAbsent::Fail }));
                }
                RowChange::DeleteIfPresent { table: id, key } => {
                    let key = key_of(schema, &key)?;
                    let if_absent = IfAbsent::CountIgnoredDelete;
                    routed.push((key.shard(shards), ShardOp::Delete { table: id, key, operation: "delete", if_absent }));
                }
                RowChange::Update { table: id, key, row } => route_update(&mut routed, schema, shards, id, &key, row, IfAbsent::Fail)?,
                RowChange::UpdateOrInsert { table: id, key, row } => {
                    route_update(&mut routed, schema, shards, id, &key, row, IfAbsent::CountUpsert)?
                }
                RowChange::UpdateKeeping { table: id, key, row, keep } => {
                    // A key-changing one became an update in `resolve_kept_moves`.
                    let old = key_of(schema, &key)?;
                    if let Some(&bad) = keep.iter().find(|&&c| c >= schema.column_count()) {
                        return Err(CoreError::ArityMismatch { table: schema.name().to_string(), expected: schema.column_count(), actual: bad + 1 });
                    }
                    routed.push((old.shard(shards), ShardOp::UpdateKeeping { table: id, key: old, row, keep }));
                }
            }
        }
        drop(registry);
        // Each shard's part is allocated once at its size, not grown op by op.
        let mut per_shard = vec![0usize; shards];
        for &(shard, _) in &routed {
            per_shard[shard] += 1;
        }
        let mut pending = self.pending.lock();
        let ts = self.shared.txn.allocate()?;
        for (shard, op) in routed {
            let txns = &mut pending.per_shard[shard];
            match txns.last_mut() {
                Some(txn) if txn.ts == ts => txn.ops.push(op),
                _ => {
                    let mut ops = Vec::with_capacity(per_shard[shard]);
                    ops.push(op);
                    txns.push(ShardTxn { ts, ops });
                }
            }
        }
        if let Some((source, position)) = origin {
            self.shared.sources.record(source, ts, position);
        }
        pending.timestamps.push(ts);
        pending.changes += change_count.max(1);
        pending.last_submitted = ts;
        self.shared.stats.transactions.fetch_add(1, Relaxed);
        self.shared.stats.row_changes.fetch_add(change_count as u64, Relaxed);
        if pending.changes >= self.shared.config.batch_changes {
            self.send_batch(&mut pending)?;
        }
        Ok(ts)
    }

    /// Sends the collected transactions to the shards as one group commit.
    pub fn flush_batch(&self) -> CoreResult<()> {
        let mut pending = self.pending.lock();
        self.send_batch(&mut pending)
    }

    fn send_batch(&self, pending: &mut PendingBatch) -> CoreResult<()> {
        if pending.timestamps.is_empty() {
            return Ok(());
        }
        let participants = pending.per_shard.iter().filter(|txns| !txns.is_empty()).count();
        let group = CommitGroup::new(std::mem::take(&mut pending.timestamps), participants, Arc::clone(&self.shared.txn));
        pending.changes = 0;
        for (shard, txns) in pending.per_shard.iter_mut().enumerate() {
            if txns.is_empty() {
                continue;
            }
            // The next batch is about as long as this one.
            let txns = std::mem::replace(txns, Vec::with_capacity(txns.len()));
            let message = ShardMessage::Apply { group: Arc::clone(&group), txns };
            self.shard_inboxes[shard].send(message).map_err(|_| self.stopped("a shard thread exited"))?;
        }
        Ok(())
    }

    /// Sends the pending batch and waits until everything submitted so far is visible.
    /// Returns the high watermark.
    pub fn sync(&self) -> CoreResult<Ts> {
        let last = {
            let mut pending = self.pending.lock();
            self.send_batch(&mut pending)?;
            pending.last_submitted
        };
        self.wait_visible(last)
    }

    /// Waits until HWM passes `ts` (or the engine fails).
    pub fn wait_visible(&self, ts: Ts) -> CoreResult<Ts> {
        let backoff = crossbeam_utils::Backoff::new();
        loop {
            let hwm = self.shared.txn.high_watermark();
            if hwm > ts {
                return Ok(hwm);
            }
            if let Some(error) = self.shared.failure() {
                return Err(error);
            }
            if backoff.is_completed() {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                backoff.snooze();
            }
        }
    }

    /// `sync`, then waits until every virtual file completed so far is flushed.
    pub fn wait_for_flushes(&self) -> CoreResult<()> {
        self.sync()?;
        if !self.shared.wait_for_queued_flushes() {
            return Err(self.stopped("the flusher exited"));
        }
        match self.shared.failure() {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    /// Takes a query snapshot at HWM - 1.
    pub fn snapshot(&self) -> CoreResult<Snapshot> {
        self.shared.txn.snapshot()
    }

    /// The rows of `table` visible at `snapshot` (Algorithm 1), with the user columns
    /// in `projection` (all when `None`).
    pub fn scan(&self, table: TableId, snapshot: &Snapshot, projection: Option<&[usize]>) -> CoreResult<Vec<RecordBatch>> {
        let table = self.table(table)?;
        scan::scan_table(&table, self.shared.store.as_ref(), snapshot.ts(), projection)
    }

    /// Storage GC now: rewrites every flushed file with more than `threshold` (0..1)
    /// of its rows stale at LWM. Replay and queries go on meanwhile.
    pub fn collect_storage_garbage(&self, threshold: f64) -> CoreResult<StorageGcReport> {
        if let Some(error) = self.shared.failure() {
            return Err(error);
        }
        self.shared.collect_storage_garbage(threshold, &self.shard_inboxes)
    }

    /// Runs memory GC now; returns the LWM it used.
    pub fn collect_garbage(&self) -> Ts {
        collect_garbage(&self.shared, &self.shard_inboxes)
    }

    pub fn stats(&self) -> EngineStats {
        let tables = self.tables();
        let (visibility_bytes, stored_versions) = tables
            .iter()
            .map(|t| t.visibility_and_versions())
            .fold((0u64, 0u64), |(bytes, versions), (b, v)| (bytes + b as u64, versions + v));
        let stats = &self.shared.stats;
        EngineStats {
            high_watermark: self.shared.txn.high_watermark(),
            low_watermark: self.shared.txn.low_watermark(),
            transactions: stats.transactions.load(Relaxed),
            row_changes: stats.row_changes.load(Relaxed),
            files_flushed: stats.files_flushed.load(Relaxed),
            gc_runs: stats.gc_runs.load(Relaxed),
            checkpoints: stats.checkpoints.load(Relaxed),
            last_checkpoint_ts: Ts(stats.last_checkpoint_ts.load(Relaxed)),
            last_checkpoint_error: self.shared.last_checkpoint_error.lock().clone(),
            visibility_bytes,
            stored_versions,
            last_flush_error: self.shared.last_flush_error.lock().clone(),
            flush_failures: stats.flush_failures.load(Relaxed),
            absent_row_upserts: stats.absent_row_upserts.load(Relaxed),
            absent_row_deletes_ignored: stats.absent_row_deletes_ignored.load(Relaxed),
        }
    }

    /// [`EngineStats::absent_row_upserts`] and [`EngineStats::absent_row_deletes_ignored`]
    /// (two loads, for callers that poll them).
    pub fn absent_row_counts(&self) -> (u64, u64) {
        let stats = &self.shared.stats;
        (stats.absent_row_upserts.load(Relaxed), stats.absent_row_deletes_ignored.load(Relaxed))
    }

    /// The first error that stopped the engine, if any.
    pub fn failure(&self) -> Option<CoreError> {
        self.shared.failure()
    }

    fn stopped(&self, reason: &str) -> CoreError {
        self.shared.failure().unwrap_or_else(|| CoreError::EngineStopped { reason: reason.to_string() })
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.flush_batch();
        self.stop_background.store(true, SeqCst);
        // Shards exit when their inboxes close; the flusher when its sender goes too.
        self.shard_inboxes.clear();
        let shard_and_gc: Vec<_> = self.threads.drain(1..).collect();
        for thread in shard_and_gc {
            let _ = thread.join();
        }
        self.shared.flusher.lock().take();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// An update: the delete of the old key's row and the insert of the new row, each in
/// the shard owning its key.
fn route_update(
    routed: &mut Vec<(usize, ShardOp)>,
    schema: &TableSchema,
    shards: usize,
    table: TableId,
    key: &[Value],
    row: crate::value::Row,
    if_absent: IfAbsent,
) -> CoreResult<()> {
    let old = key_of(schema, key)?;
    // Most updates keep their key: then its hash is not computed twice.
    let new = row_key(schema, &row, Some(&old))?;
    routed.push((old.shard(shards), ShardOp::Delete { table, key: old, operation: "update", if_absent }));
    routed.push((new.shard(shards), ShardOp::Insert { table, key: new, row, replace: false }));
    Ok(())
}

/// The primary key taken from a full row image (`known` when equal to it).
fn row_key(schema: &TableSchema, row: &[Value], known: Option<&HashedKey>) -> CoreResult<HashedKey> {
    if row.len() != schema.column_count() {
        return Err(CoreError::ArityMismatch {
            table: schema.name().to_string(),
            expected: schema.column_count(),
            actual: row.len(),
        });
    }
    Ok(HashedKey::encode(schema.primary_key().iter().map(|&i| &row[i]), known))
}

/// A primary key given as key-column values, checked against the key columns so
/// that a mistyped key is reported as such, not as a missing row.
fn key_of(schema: &TableSchema, key: &[Value]) -> CoreResult<HashedKey> {
    if key.len() != schema.primary_key().len() {
        return Err(CoreError::ArityMismatch {
            table: format!("{} (primary key)", schema.name()),
            expected: schema.primary_key().len(),
            actual: key.len(),
        });
    }
    for (&column, value) in schema.primary_key().iter().zip(key) {
        let field = schema.columns().field(column);
        if matches!(value, Value::Null) {
            return Err(CoreError::NullViolation { table: format!("{} (primary key)", schema.name()), column: field.name().clone() });
        }
        if !value.fits(field.data_type()) {
            return Err(CoreError::TypeMismatch {
                table: format!("{} (primary key)", schema.name()),
                column: field.name().clone(),
                expected: field.data_type().to_string(),
                actual: value.type_name(),
            });
        }
    }
    Ok(HashedKey::encode(key, None))
}
