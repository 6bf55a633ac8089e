//! Taking a checkpoint (ARCHITECTURE.md §3.7) while replay and queries go on.
//!
//! The checkpoint holds a query snapshot at C = HWM - 1 while it captures what C
//! needs (visibility bitmaps at C, the buffered blocks with rows created at or before
//! C). That keeps LWM at or below C, so memory GC cannot fold anything C still needs,
//! and what it captures is a consistent state without stopping replay. The snapshot
//! goes before the slow part (writing segments and manifests), so memory GC is held
//! up for the capture only.

use std::collections::HashMap;
use std::sync::atomic::Ordering::{Relaxed, SeqCst};
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;

use crate::replay::durability::segment_merge;
use crate::replay::shared::EngineShared;
use crate::catalog::DataFileMeta;
use crate::checkpoint::{CheckpointFile, CheckpointManifest, CheckpointTable, RowSegment, CHECKPOINT_FORMAT_VERSION};
use crate::error::{CoreError, CoreResult};
use crate::scan::created_at_or_before;
use crate::schema::TableSchema;
use crate::types::Ts;

/// Rows `start..end` of consecutive batches.
fn slice_rows(batches: &[RecordBatch], start: usize, end: usize) -> Vec<RecordBatch> {
    let mut out = Vec::new();
    let mut offset = 0;
    for batch in batches {
        let (from, to) = (start.max(offset), end.min(offset + batch.num_rows()));
        if from < to {
            out.push(batch.slice(from - offset, to - from));
        }
        offset += batch.num_rows();
    }
    out
}

/// `words` up to its last one with a deleted row: a file nobody deleted from holds
/// no words while the manifest is built, written and published.
fn without_trailing_zeros(mut words: Vec<u64>) -> Vec<u64> {
    let used = words.iter().rposition(|&w| w != 0).map_or(0, |last| last + 1);
    words.truncate(used);
    words.shrink_to_fit();
    words
}

/// Buffered rows a checkpoint still has to write, and where their segment goes.
struct UnwrittenSegment {
    /// Indexes into the checkpoint's tables and that table's files.
    table: usize,
    file: usize,
    schema: Arc<TableSchema>,
    rows: Vec<RecordBatch>,
    first_row: u64,
}

/// What one checkpoint did.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointReport {
    pub ts: Ts,
    pub files: usize,
    /// Buffered rows this checkpoint wrote (rows saved by earlier ones are reused).
    pub buffered_rows: u64,
    pub millis: f64,
    /// The checkpoint is durable, but deleting what it made unneeded failed (files
    /// storage GC replaced, checkpoint segments): they stay, and the next checkpoint
    /// deletes them.
    pub cleanup_error: Option<String>,
}

/// How many periodic checkpoints in a row an idle engine skips at most: one still
/// runs every so often (a minute at the default 5 s), so clean-up and the expiry of
/// published versions, which run after a checkpoint, go on while nothing changes.
pub(crate) const IDLE_CHECKPOINTS_SKIPPED_AT_MOST: u64 = 11;

impl EngineShared {
    /// The periodic checkpoint: [`Self::checkpoint`], or `None` when it would save
    /// what the latest one saved. An idle mirror rewrote its whole checkpoint and
    /// catalog every few seconds (~2 MB at 100M rows; writes and requests that an
    /// object store bills) for nothing.
    pub(crate) fn checkpoint_unless_idle(&self) -> Option<CoreResult<CheckpointReport>> {
        if self.nothing_to_checkpoint() && self.idle_checkpoints_skipped.load(Relaxed) < IDLE_CHECKPOINTS_SKIPPED_AT_MOST {
            self.idle_checkpoints_skipped.fetch_add(1, Relaxed);
            return None;
        }
        self.idle_checkpoints_skipped.store(0, Relaxed);
        Some(self.checkpoint())
    }

    /// Whether a checkpoint now would hold what the latest one holds: no
    /// transaction became visible since (so no row, delete or source position
    /// changed), no file or table changed, and nothing waits for clean-up.
    fn nothing_to_checkpoint(&self) -> bool {
        let _one_at_a_time = self.checkpoint_write.lock();
        self.stats.checkpoints.load(Relaxed) > 0
            && self.stats.last_checkpoint_ts.load(Relaxed) == self.txn.high_watermark().prev().0
            && self.catalog_changes.load(SeqCst) == self.checkpointed_catalog_changes.load(SeqCst)
            && self.retired.lock().is_empty()
            && self.last_checkpoint_error.lock().is_none()
    }

    /// Writes a checkpoint at HWM - 1 and makes it the latest.
    pub(crate) fn checkpoint(&self) -> CoreResult<CheckpointReport> {
        let _one_at_a_time = self.checkpoint_write.lock();
        // A change to the files after this point is not known to be in this
        // checkpoint: the next one must run.
        let catalog_changes = self.catalog_changes.load(SeqCst);
        // Files retired after this point wait for the next checkpoint.
        let sequence = self.checkpoint_started.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        let started = Instant::now();
        let snapshot = self.txn.snapshot()?;
        let ts = snapshot.ts();
        let sources = self.sources.at(ts);
        let tables = self.registry.read().tables.clone();
        // Segments earlier checkpoints wrote, by buffered file; flushed files drop out.
        // Cloned, not taken: if this checkpoint fails, the next one still knows them.
        let mut written = self.checkpoint_segments.lock().clone();
        let mut still_buffered = HashMap::new();
        let mut unwritten = Vec::new();
        let mut checkpoint_tables = Vec::with_capacity(tables.len());
        let (mut file_count, mut buffered_rows) = (0, 0);
        for table in &tables {
            let schema = table.schema();
            let files = table.files();
            let mut checkpoint_files = Vec::with_capacity(files.flushed.len() + files.virtual_files.len());
            for file in &files.flushed {
                let rows = file.meta.row_count;
                checkpoint_files.push(CheckpointFile {
                    file_id: file.meta.file_id,
                    first_row_id: file.meta.first_row_id,
                    capacity: rows,
                    rows,
                    deleted: without_trailing_zeros(file.visibility.bitmap_at(ts, rows as usize)),
                    segments: Vec::new(),
                    meta: Some(DataFileMeta::clone(&file.meta)),
                });
            }
            for file in &files.virtual_files {
                let blocks = crate::schema_evolution::conform_batches(&schema, &file.blocks())?;
                let batches = created_at_or_before(&blocks, schema.create_ts_index(), ts);
                let rows: u64 = batches.iter().map(|b| b.num_rows() as u64).sum();
                if rows == 0 {
                    continue; // its row ids stay reserved through `next_row_id`
                }
                let mut segments = written.remove(&file.file_id()).unwrap_or_default();
                let mut saved: u64 = segments.iter().map(|s| s.rows).sum();
                if rows > saved {
                    // The newest segments may be rewritten with the new rows as one,
                    // so a slowly filling file does not pile them up.
                    let segment_rows: Vec<u64> = segments.iter().map(|s| s.rows).collect();
                    segments.truncate(segment_merge::segments_kept(&segment_rows, rows - saved));
                    saved = segments.iter().map(|s| s.rows).sum();
                    // Written after the snapshot is released (below): slow I/O must not
                    // hold LWM. The rows are immutable blocks captured here.
                    unwritten.push(UnwrittenSegment {
                        table: checkpoint_tables.len(),
                        file: checkpoint_files.len(),
                        schema: Arc::clone(&schema),
                        rows: slice_rows(&batches, saved as usize, rows as usize),
                        first_row: saved,
                    });
                    buffered_rows += rows - saved;
                }
                checkpoint_files.push(CheckpointFile {
                    file_id: file.file_id(),
                    first_row_id: file.first_row_id(),
                    capacity: file.capacity() as u64,
                    rows,
                    deleted: without_trailing_zeros(file.visibility().bitmap_at(ts, rows as usize)),
                    segments,
                    meta: None,
                });
            }
            file_count += checkpoint_files.len();
            checkpoint_tables.push(CheckpointTable {
                id: table.id(),
                schema: TableSchema::clone(&schema),
                next_row_id: table.next_row_id(),
                files: checkpoint_files,
            });
        }
        // Everything that needs C's visibility is captured: let LWM go on, so memory
        // GC is not stopped while segments and manifests are written.
        drop(snapshot);
        for segment in unwritten {
            let file = &mut checkpoint_tables[segment.table].files[segment.file];
            let stored = self.store.write_checkpoint_segment(&segment.schema, file.file_id, segment.first_row, ts, &segment.rows)?;
            file.segments.push(RowSegment { path: stored.path, rows: segment.rows.iter().map(|b| b.num_rows() as u64).sum() });
        }
        for table in &checkpoint_tables {
            for file in table.files.iter().filter(|f| f.meta.is_none()) {
                still_buffered.insert(file.file_id, file.segments.clone());
            }
        }
        let manifest = CheckpointManifest {
            format_version: CHECKPOINT_FORMAT_VERSION,
            ts,
            shards: self.config.shards,
            next_file_id: self.next_file_id.load(std::sync::atomic::Ordering::Relaxed),
            tables: checkpoint_tables,
            sources: sources.clone(),
        };
        // `return` fails this checkpoint here (the next one runs in full); `panic` is
        // a crash at this step. The same for the next two.
        fail::fail_point!("checkpoint::after-segments", |_| Err(crate::error::failpoint_error("checkpoint::after-segments", "the checkpoint failed here")));
        // The catalog must list every flushed file the checkpoint relies on.
        self.write_catalog()?;
        fail::fail_point!("checkpoint::before-manifest", |_| Err(crate::error::failpoint_error("checkpoint::before-manifest", "the checkpoint failed here")));
        let segments_left = match self.store.save_checkpoint(&manifest) {
            Ok(()) => None,
            Err(CoreError::CommittedButCleanupFailed { source, .. }) => Some(format!("deleting checkpoint segments it does not need: {source}")),
            Err(error) => return Err(error),
        };
        fail::fail_point!("checkpoint::after-manifest", |_| Err(crate::error::failpoint_error("checkpoint::after-manifest", "the checkpoint failed here")));
        // Durable from here on: what depends on that is recorded before clean-up,
        // whose failure must not make a durable checkpoint look failed.
        *self.checkpoint_segments.lock() = still_buffered;
        self.checkpoint_seq.store(sequence, std::sync::atomic::Ordering::Relaxed);
        self.sources.trim(ts);
        *self.durable_sources.lock() = sources;
        self.stats.checkpoints.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.stats.last_checkpoint_ts.store(ts.0, std::sync::atomic::Ordering::Relaxed);
        self.checkpointed_catalog_changes.store(catalog_changes, SeqCst);
        let files_left = self.delete_retired_files().err().map(|e| format!("deleting files storage GC replaced: {e}"));
        let cleanup_error = match (segments_left, files_left) {
            (Some(segments), Some(files)) => Some(format!("{segments}; {files}")),
            (one, other) => one.or(other),
        };
        Ok(CheckpointReport { ts, files: file_count, buffered_rows, millis: started.elapsed().as_secs_f64() * 1000.0, cleanup_error })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field};

    use crate::replay::config::EngineConfig;
    use crate::replay::engine::Engine;
    use crate::storage::MemoryLakeStore;
    use crate::txn::EmbeddedTransactionService;
    use crate::RowChange;
    use crate::value::Value;

    /// The periodic checkpoint runs after a transaction, a new column or a failed
    /// checkpoint; with nothing new it is skipped, but never more than
    /// [`IDLE_CHECKPOINTS_SKIPPED_AT_MOST`] times in a row.
    #[test]
    fn an_idle_engine_skips_periodic_checkpoints_a_bounded_number_of_times() {
        let config = EngineConfig { shards: 2, block_rows: 4, file_rows: 8, batch_changes: 1, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
        let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(MemoryLakeStore::new())).expect("engine");
        let shared = Arc::clone(&engine.shared);
        let table = engine.create_table(TableSchema::from_columns("s.t", &[("id", DataType::Int64, false)], &["id"]).expect("schema")).expect("table");
        let checkpoints = || shared.stats.checkpoints.load(Relaxed);
        // Runs (or not) the periodic checkpoint; whether one was written.
        let periodic = || match shared.checkpoint_unless_idle() {
            Some(result) => {
                result.expect("checkpoint");
                true
            }
            None => false,
        };
        assert!(periodic(), "the first one runs");
        assert!(!periodic(), "nothing changed");

        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(1)] }]).expect("insert");
        engine.sync().expect("sync");
        assert!(periodic(), "a transaction is visible");
        assert_eq!(shared.stats.last_checkpoint_ts.load(Relaxed), engine.snapshot().expect("snapshot").ts().0);

        let before = checkpoints();
        let skipped = (0..IDLE_CHECKPOINTS_SKIPPED_AT_MOST).filter(|_| !periodic()).count() as u64;
        assert_eq!(skipped, IDLE_CHECKPOINTS_SKIPPED_AT_MOST);
        assert_eq!(checkpoints(), before);
        assert!(periodic(), "one runs after the most skipped in a row");
        assert!(!periodic(), "and the count starts again");

        engine.add_column(table, Field::new("note", DataType::Utf8, true)).expect("add column");
        assert!(periodic(), "a new column changes the catalog, not the ts");
        assert!(!periodic());

        *shared.last_checkpoint_error.lock() = Some("disk full".into());
        assert!(periodic(), "the last one failed");
        *shared.last_checkpoint_error.lock() = None;
        assert!(!periodic());

        // An explicit checkpoint always runs.
        let before = checkpoints();
        engine.checkpoint().expect("checkpoint");
        assert_eq!(checkpoints(), before + 1);
    }
}
