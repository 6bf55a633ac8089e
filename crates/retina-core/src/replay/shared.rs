//! State shared by the engine handle, the shards, the flusher and the background
//! threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::{Relaxed, SeqCst}};
use std::sync::Arc;


use crossbeam_channel::Sender;
use parking_lot::{Mutex, RwLock};

use crate::replay::config::EngineConfig;
use crate::replay::durability::source_progress::{SourcePosition, SourceProgress};
use crate::replay::messages::{FlushJob, FlushMessage, RetiredFile};
use crate::replay::stats::SharedStats;
use crate::catalog::{CatalogManifest, DataFileMeta, TableEntry, CATALOG_FORMAT_VERSION};
use crate::checkpoint::RowSegment;
use crate::error::{CoreError, CoreResult};
use crate::schema::TableSchema;
use crate::storage::LakeStore;
use crate::table::TableRuntime;
use crate::txn::TransactionService;
use crate::types::{FileId, TableId, Ts};
use crate::write_buffer::VirtualFile;

/// The tables of an engine, by id and by name.
///
/// Invariant: `tables[i].id() == TableId(i)`; ids are dense and never reused.
#[derive(Default)]
pub(crate) struct TableRegistry {
    pub(crate) tables: Vec<Arc<TableRuntime>>,
    pub(crate) by_name: HashMap<String, TableId>,
}

/// State shared by the engine handle, the shards, the flusher and the GC thread.
pub(crate) struct EngineShared {
    pub(crate) config: EngineConfig,
    pub(crate) txn: Arc<dyn TransactionService>,
    pub(crate) store: Arc<dyn LakeStore>,
    /// Opened over a store that may not write ([`crate::storage::CatalogStore::writable`]).
    pub(crate) read_only: bool,
    pub(crate) registry: RwLock<TableRegistry>,
    pub(crate) next_file_id: AtomicU64,
    pub(crate) failed: AtomicBool,
    pub(crate) failure: Mutex<Option<String>>,
    pub(crate) last_flush_error: Mutex<Option<String>>,
    pub(crate) last_checkpoint_error: Mutex<Option<String>>,
    pub(crate) flusher: Mutex<Option<Sender<FlushMessage>>>,
    pub(crate) catalog_write: Mutex<()>,
    /// Serializes checkpoints.
    pub(crate) checkpoint_write: Mutex<()>,
    /// Checkpoint segments written so far for each buffered (virtual) file.
    pub(crate) checkpoint_segments: Mutex<HashMap<FileId, Vec<RowSegment>>>,
    pub(crate) sources: SourceProgress,
    /// Per source, the position the latest saved checkpoint holds: what a source may
    /// be told to discard (NATS acknowledgement, PostgreSQL flush LSN).
    pub(crate) durable_sources: Mutex<Vec<SourcePosition>>,
    /// Files swapped out by storage GC, waiting for deletion.
    pub(crate) retired: Mutex<Vec<RetiredFile>>,
    /// Sequence number of the last checkpoint started, and of the last completed.
    pub(crate) checkpoint_started: AtomicU64,
    pub(crate) checkpoint_seq: AtomicU64,
    /// Catalog saves for a change (flush, storage-GC swap, new table or column),
    /// and how many of them the latest checkpoint had seen when it started: equal
    /// means no file changed since ([`Self::checkpoint_unless_idle`]).
    pub(crate) catalog_changes: AtomicU64,
    pub(crate) checkpointed_catalog_changes: AtomicU64,
    /// Periodic checkpoints skipped in a row because nothing changed.
    pub(crate) idle_checkpoints_skipped: AtomicU64,
    /// The LWM memory GC last folded every file's visibility at; held while it
    /// folds, so a caller of GC returns only once the fold it skips is done.
    pub(crate) visibility_folded_at: Mutex<Option<Ts>>,
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

    pub(crate) fn new_virtual_file(&self, table: &TableRuntime) -> (Arc<VirtualFile>, crate::visibility::RgWriter) {
        let capacity = self.config.file_rows;
        let (file, writer) = VirtualFile::new(table.id(), self.allocate_file_id(), table.reserve_row_ids(capacity as u64), capacity);
        let file = Arc::new(file);
        table.add_virtual_file(Arc::clone(&file));
        (file, writer)
    }

    pub(crate) fn flush(&self, job: FlushJob) {
        if let Some(flusher) = self.flusher.lock().as_ref() {
            // The flusher outlives every shard, so a send cannot fail while shards run.
            let _ = flusher.send(FlushMessage::Job(job));
        }
    }

    /// Waits until the flusher has written every file queued so far; `false` when
    /// there is no flusher to wait for (it exited, or the engine is read-only).
    pub(crate) fn wait_for_queued_flushes(&self) -> bool {
        let (reply, done) = crossbeam_channel::bounded(1);
        let sent = self.flusher.lock().as_ref().is_some_and(|flusher| flusher.send(FlushMessage::Barrier(reply)).is_ok());
        sent && done.recv().is_ok()
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

    pub(crate) fn failure(&self) -> Option<CoreError> {
        self.failure.lock().clone().map(|reason| CoreError::EngineStopped { reason })
    }

    pub(crate) fn record_flush_error(&self, message: String) {
        self.stats.flush_failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        *self.last_flush_error.lock() = Some(message);
    }

    /// Writes the manifest of every table and its flushed files.
    /// Saves the catalog after a change to the tables or their files.
    pub(crate) fn save_catalog(&self) -> CoreResult<()> {
        self.catalog_changes.fetch_add(1, SeqCst);
        self.write_catalog()
    }

    /// Writes the catalog as it is (a checkpoint's own save, which changes nothing).
    pub(crate) fn write_catalog(&self) -> CoreResult<()> {
        let _guard = self.catalog_write.lock();
        let tables = self.registry.read().tables.clone();
        let manifest = CatalogManifest {
            format_version: CATALOG_FORMAT_VERSION,
            tables: tables
                .iter()
                .map(|table| TableEntry {
                    id: table.id(),
                    schema: TableSchema::clone(&table.schema()),
                    files: table.files().flushed.iter().map(|f| DataFileMeta::clone(&f.meta)).collect(),
                })
                .collect(),
            next_file_id: self.next_file_id.load(Relaxed),
        };
        self.store.save_catalog(&manifest)
    }
}

