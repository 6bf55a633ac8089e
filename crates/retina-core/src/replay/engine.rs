//! `Engine`: tables, replayer shards, the flusher and memory GC of one Retina
//! instance, behind owned-value methods that could cross a process boundary.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::{Relaxed, SeqCst}};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arrow_array::RecordBatch;
use crossbeam_channel::{bounded, Sender};
use parking_lot::{Mutex, RwLock};

use super::commit_group::CommitGroup;
use super::flusher::{self, FlushJob, FlushMessage};
use super::operation::{RowChange, ShardOp, ShardTxn};
use super::routing::shard_of;
use super::shard::{virtual_file_for, Shard, ShardMessage};
use super::source_progress::{SourcePosition, SourceProgress};
use crate::catalog::{CatalogManifest, TableEntry, CATALOG_FORMAT_VERSION};
use crate::error::{CoreError, CoreResult};
use crate::schema::TableSchema;
use crate::scan;
use crate::storage::LakeStore;
use crate::table::TableRuntime;
use crate::txn::{Snapshot, TransactionService};
use crate::types::{FileId, TableId, Ts};
use crate::value::{encode_key, Value};
use crate::write_buffer::VirtualFile;

/// Tuning of an engine. Defaults follow the paper (4096-row blocks and tiles).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Replayer shard threads.
    pub shards: usize,
    /// Rows per write-buffer block.
    pub block_rows: usize,
    /// Rows per virtual file (= per flushed Parquet file and its single row group).
    pub file_rows: usize,
    /// Row changes per group-commit batch; a smaller batch is sent by `flush_batch`.
    pub batch_changes: usize,
    /// Memory-GC period; `None` runs GC only when asked.
    pub gc_interval: Option<Duration>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            shards: std::thread::available_parallelism().map_or(2, |n| n.get()),
            block_rows: 4096,
            file_rows: 16 * 4096,
            batch_changes: 4096,
            gc_interval: Some(Duration::from_secs(1)),
        }
    }
}

/// Counters shared by the engine's threads.
#[derive(Default)]
pub(crate) struct SharedStats {
    pub(crate) files_flushed: AtomicU64,
    pub(crate) row_changes: AtomicU64,
    pub(crate) transactions: AtomicU64,
    pub(crate) gc_runs: AtomicU64,
}

/// A point-in-time view of the engine's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineStats {
    pub high_watermark: Ts,
    pub low_watermark: Ts,
    pub transactions: u64,
    pub row_changes: u64,
    pub files_flushed: u64,
    pub gc_runs: u64,
    pub visibility_bytes: u64,
    pub stored_versions: u64,
    pub last_flush_error: Option<String>,
}

impl EngineStats {
    /// Visibility memory per stored row version, in bits (the paper's metric).
    pub fn visibility_bits_per_tuple(&self) -> f64 {
        if self.stored_versions == 0 {
            return 0.0;
        }
        self.visibility_bytes as f64 * 8.0 / self.stored_versions as f64
    }
}

#[derive(Default)]
struct TableRegistry {
    tables: Vec<Arc<TableRuntime>>,
    by_name: HashMap<String, TableId>,
}

/// State shared by the engine handle, the shards, the flusher and the GC thread.
pub(crate) struct EngineShared {
    pub(crate) config: EngineConfig,
    pub(crate) txn: Arc<dyn TransactionService>,
    pub(crate) store: Arc<dyn LakeStore>,
    registry: RwLock<TableRegistry>,
    next_file_id: AtomicU64,
    failed: AtomicBool,
    failure: Mutex<Option<String>>,
    last_flush_error: Mutex<Option<String>>,
    flusher: Mutex<Option<Sender<FlushMessage>>>,
    catalog_write: Mutex<()>,
    sources: SourceProgress,
    pub(crate) stats: SharedStats,
}

impl EngineShared {
    pub(crate) fn table(&self, id: TableId) -> CoreResult<Arc<TableRuntime>> {
        self.registry
            .read()
            .tables
            .get(id.0 as usize)
            .cloned()
            .ok_or_else(|| CoreError::UnknownTable { table: format!("#{}", id.0) })
    }

    pub(crate) fn allocate_file_id(&self) -> FileId {
        FileId(self.next_file_id.fetch_add(1, Relaxed))
    }

    pub(crate) fn new_virtual_file(&self, table: &TableRuntime) -> Arc<VirtualFile> {
        virtual_file_for(self, table)
    }

    pub(crate) fn flush(&self, job: FlushJob) {
        if let Some(flusher) = self.flusher.lock().as_ref() {
            // The flusher outlives every shard, so a send cannot fail while shards run.
            let _ = flusher.send(FlushMessage::Job(job));
        }
    }

    pub(crate) fn has_failed(&self) -> bool {
        self.failed.load(SeqCst)
    }

    /// Stops the engine: no further batch commits. The first failure is kept.
    pub(crate) fn fail(&self, reason: String) {
        let mut failure = self.failure.lock();
        if failure.is_none() {
            *failure = Some(reason);
        }
        self.failed.store(true, SeqCst);
    }

    fn failure(&self) -> Option<CoreError> {
        self.failure.lock().clone().map(|reason| CoreError::EngineStopped { reason })
    }

    pub(crate) fn record_flush_error(&self, message: String) {
        *self.last_flush_error.lock() = Some(message);
    }

    /// Writes the manifest of every table and its flushed files.
    pub(crate) fn save_catalog(&self) -> CoreResult<()> {
        let _guard = self.catalog_write.lock();
        let tables = self.registry.read().tables.clone();
        let manifest = CatalogManifest {
            format_version: CATALOG_FORMAT_VERSION,
            tables: tables
                .iter()
                .map(|table| TableEntry {
                    id: table.id(),
                    schema: TableSchema::clone(table.schema()),
                    files: table.files().flushed.iter().map(|f| f.meta.clone()).collect(),
                })
                .collect(),
            next_file_id: self.next_file_id.load(Relaxed),
        };
        self.store.save_catalog(&manifest)
    }
}

/// Transactions collected for the next group commit.
struct PendingBatch {
    per_shard: Vec<Vec<ShardTxn>>,
    timestamps: Vec<Ts>,
    changes: usize,
    last_submitted: Ts,
}

/// One Retina instance: create tables, submit mirror transactions, take snapshots and
/// scan them.
///
/// Invariant: transactions are applied in submission order, which is also their ts
/// order (ts is allocated under the submission lock); so every shard replays its keys
/// in ts order and tiles receive deletes in ts order.
pub struct Engine {
    shared: Arc<EngineShared>,
    shard_inboxes: Vec<Sender<ShardMessage>>,
    pending: Mutex<PendingBatch>,
    threads: Vec<JoinHandle<()>>,
    stop_gc: Arc<AtomicBool>,
}

impl Engine {
    /// Starts shards, flusher and GC over `store`. A store whose catalog already holds
    /// data files is refused: resuming needs the checkpoint and recovery work.
    pub fn start(config: EngineConfig, txn: Arc<dyn TransactionService>, store: Arc<dyn LakeStore>) -> CoreResult<Self> {
        let mut registry = TableRegistry::default();
        let mut next_file_id = 1;
        if let Some(manifest) = store.load_catalog()? {
            if manifest.format_version != CATALOG_FORMAT_VERSION {
                return Err(CoreError::Storage(format!(
                    "catalog format version {} is not supported (expected {CATALOG_FORMAT_VERSION})",
                    manifest.format_version
                )));
            }
            if manifest.tables.iter().any(|t| !t.files.is_empty()) {
                return Err(CoreError::Storage(
                    "the data dir already holds data files; resuming from them needs recovery from a checkpoint, \
                     which this build does not have yet: use an empty data dir"
                        .into(),
                ));
            }
            for entry in manifest.tables {
                registry.by_name.insert(entry.schema.name().to_string(), entry.id);
                registry.tables.push(Arc::new(TableRuntime::new(entry.id, entry.schema)));
            }
            next_file_id = manifest.next_file_id;
        }
        let shards = config.shards.max(1);
        let (flush_sender, flush_inbox) = bounded(1024);
        let shared = Arc::new(EngineShared {
            config: EngineConfig { shards, ..config },
            txn,
            store,
            registry: RwLock::new(registry),
            next_file_id: AtomicU64::new(next_file_id),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            last_flush_error: Mutex::new(None),
            flusher: Mutex::new(Some(flush_sender)),
            catalog_write: Mutex::new(()),
            sources: SourceProgress::default(),
            stats: SharedStats::default(),
        });
        let mut threads = Vec::new();
        let flusher_shared = Arc::clone(&shared);
        threads.push(spawn("retina-flusher", move || flusher::run(flusher_shared, flush_inbox))?);
        let mut shard_inboxes = Vec::with_capacity(shards);
        for index in 0..shards {
            let (sender, inbox) = bounded(64);
            let shard = Shard::new(Arc::clone(&shared));
            threads.push(spawn(&format!("retina-shard-{index}"), move || shard.run(inbox))?);
            shard_inboxes.push(sender);
        }
        let stop_gc = Arc::new(AtomicBool::new(false));
        if let Some(interval) = shared.config.gc_interval {
            let (gc_shared, gc_inboxes, stop) = (Arc::clone(&shared), shard_inboxes.clone(), Arc::clone(&stop_gc));
            threads.push(spawn("retina-gc", move || {
                while !stop.load(SeqCst) {
                    sleep_unless_stopped(interval, &stop);
                    collect_garbage(&gc_shared, &gc_inboxes);
                }
            })?);
        }
        Ok(Self {
            shared,
            pending: Mutex::new(PendingBatch {
                per_shard: (0..shards).map(|_| Vec::new()).collect(),
                timestamps: Vec::new(),
                changes: 0,
                last_submitted: Ts(0),
            }),
            shard_inboxes,
            threads,
            stop_gc,
        })
    }

    pub fn config(&self) -> &EngineConfig {
        &self.shared.config
    }

    pub fn transaction_service(&self) -> &Arc<dyn TransactionService> {
        &self.shared.txn
    }

    /// Creates a table and records it in the catalog.
    pub fn create_table(&self, schema: TableSchema) -> CoreResult<TableId> {
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

    /// For every source, the position of its newest visible transaction.
    pub fn source_positions(&self) -> Vec<SourcePosition> {
        self.shared.sources.visible(self.shared.txn.high_watermark())
    }

    fn submit_inner(&self, changes: Vec<RowChange>, origin: Option<(&str, String)>) -> CoreResult<Ts> {
        if let Some(error) = self.shared.failure() {
            return Err(error);
        }
        let tables = self.tables();
        let shards = self.shard_inboxes.len();
        // Route first, so a bad change rejects the transaction before it gets a ts.
        let mut routed: Vec<(usize, ShardOp)> = Vec::with_capacity(changes.len() + 2);
        let change_count = changes.len();
        for change in changes {
            let table = tables
                .get(change.table().0 as usize)
                .ok_or_else(|| CoreError::UnknownTable { table: format!("#{}", change.table().0) })?;
            let schema = table.schema();
            match change {
                RowChange::Insert { table: id, row } => {
                    let key = row_key(schema, &row)?;
                    routed.push((shard_of(&key, shards), ShardOp::Insert { table: id, key, row }));
                }
                RowChange::Delete { table: id, key } => {
                    let key = key_bytes(schema, &key)?;
                    routed.push((shard_of(&key, shards), ShardOp::Delete { table: id, key, operation: "delete" }));
                }
                RowChange::Update { table: id, key, row } => {
                    let old = key_bytes(schema, &key)?;
                    let new = row_key(schema, &row)?;
                    routed.push((shard_of(&old, shards), ShardOp::Delete { table: id, key: old, operation: "update" }));
                    routed.push((shard_of(&new, shards), ShardOp::Insert { table: id, key: new, row }));
                }
            }
        }
        let mut pending = self.pending.lock();
        let ts = self.shared.txn.allocate()?;
        for (shard, op) in routed {
            let txns = &mut pending.per_shard[shard];
            match txns.last_mut() {
                Some(txn) if txn.ts == ts => txn.ops.push(op),
                _ => txns.push(ShardTxn { ts, ops: vec![op] }),
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
            let message = ShardMessage::Apply { group: Arc::clone(&group), txns: std::mem::take(txns) };
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
        let (reply, done) = bounded(1);
        if let Some(flusher) = self.shared.flusher.lock().as_ref() {
            flusher.send(FlushMessage::Barrier(reply)).map_err(|_| self.stopped("the flusher exited"))?;
        }
        done.recv().map_err(|_| self.stopped("the flusher exited"))?;
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

    /// Runs memory GC now; returns the LWM it used.
    pub fn collect_garbage(&self) -> Ts {
        collect_garbage(&self.shared, &self.shard_inboxes)
    }

    pub fn stats(&self) -> EngineStats {
        let tables = self.tables();
        let stats = &self.shared.stats;
        EngineStats {
            high_watermark: self.shared.txn.high_watermark(),
            low_watermark: self.shared.txn.low_watermark(),
            transactions: stats.transactions.load(Relaxed),
            row_changes: stats.row_changes.load(Relaxed),
            files_flushed: stats.files_flushed.load(Relaxed),
            gc_runs: stats.gc_runs.load(Relaxed),
            visibility_bytes: tables.iter().map(|t| t.visibility_memory_bytes() as u64).sum(),
            stored_versions: tables.iter().map(|t| t.stored_versions()).sum(),
            last_flush_error: self.shared.last_flush_error.lock().clone(),
        }
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
        self.stop_gc.store(true, SeqCst);
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

/// Memory GC: fold visibility below LWM in every file, and prune shard indexes.
fn collect_garbage(shared: &EngineShared, shard_inboxes: &[Sender<ShardMessage>]) -> Ts {
    let lwm = shared.txn.low_watermark();
    let tables = shared.registry.read().tables.clone();
    for table in tables {
        let files = table.files();
        for file in &files.flushed {
            file.visibility.collect_garbage(lwm);
        }
        for file in &files.virtual_files {
            file.visibility().collect_garbage(lwm);
        }
    }
    for inbox in shard_inboxes {
        let _ = inbox.try_send(ShardMessage::CollectIndexGarbage { lwm });
    }
    shared.stats.gc_runs.fetch_add(1, Relaxed);
    lwm
}

fn sleep_unless_stopped(interval: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(20);
    let mut slept = Duration::ZERO;
    while slept < interval && !stop.load(SeqCst) {
        std::thread::sleep(step.min(interval - slept));
        slept += step;
    }
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> CoreResult<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(body)
        .map_err(|e| CoreError::EngineStopped { reason: format!("cannot start thread {name}: {e}") })
}

/// Encodes the primary key taken from a full row image.
fn row_key(schema: &TableSchema, row: &[Value]) -> CoreResult<Vec<u8>> {
    if row.len() != schema.column_count() {
        return Err(CoreError::ArityMismatch {
            table: schema.name().to_string(),
            expected: schema.column_count(),
            actual: row.len(),
        });
    }
    Ok(encode_key(schema.primary_key().iter().map(|&i| &row[i])))
}

/// Encodes a primary key given as key-column values.
fn key_bytes(schema: &TableSchema, key: &[Value]) -> CoreResult<Vec<u8>> {
    if key.len() != schema.primary_key().len() {
        return Err(CoreError::ArityMismatch {
            table: format!("{} (primary key)", schema.name()),
            expected: schema.primary_key().len(),
            actual: key.len(),
        });
    }
    Ok(encode_key(key))
}
