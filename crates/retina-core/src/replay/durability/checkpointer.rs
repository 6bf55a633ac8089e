//! Taking a checkpoint (ARCHITECTURE.md §3.7) while replay and queries go on.
//!
//! The checkpoint holds a query snapshot at C = HWM - 1 while it captures what C
//! needs (visibility bitmaps at C, the buffered blocks with rows created at or before
//! C). That keeps LWM at or below C, so memory GC cannot fold anything C still needs,
//! and what it captures is a consistent state without stopping replay. The snapshot
//! goes before the slow part (writing segments and manifests), so memory GC is held
//! up for the capture only.

use std::collections::HashMap;
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

impl EngineShared {
    /// Writes a checkpoint at HWM - 1 and makes it the latest.
    pub(crate) fn checkpoint(&self) -> CoreResult<CheckpointReport> {
        let _one_at_a_time = self.checkpoint_write.lock();
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
        self.save_catalog()?;
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
        let files_left = self.delete_retired_files().err().map(|e| format!("deleting files storage GC replaced: {e}"));
        let cleanup_error = match (segments_left, files_left) {
            (Some(segments), Some(files)) => Some(format!("{segments}; {files}")),
            (one, other) => one.or(other),
        };
        Ok(CheckpointReport { ts, files: file_count, buffered_rows, millis: started.elapsed().as_secs_f64() * 1000.0, cleanup_error })
    }
}
