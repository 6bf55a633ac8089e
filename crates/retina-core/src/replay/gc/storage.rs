//! Storage GC (ARCHITECTURE.md §3.7, paper §4.3): files whose stale share passes a
//! threshold are rewritten with only their live rows, and swapped in.
//!
//! - Each file's rewrite is as of its own g = LWM, held for that file's rewrite
//!   only, so no running or future query is below g: the new file (rows not
//!   deleted at g) answers every one of them, given the deletes after g. Holding one
//!   g for a whole run instead would stop memory GC for its duration (measured:
//!   visibility memory jumped 4x while a run rewrote ~100 files).
//! - The swap runs in the shard that owns the file's keys, where no delete can race
//!   it: deletes that reached the old file after g are replayed onto the new one
//!   (dual delete), keys are repointed, then the table's file list is swapped.
//! - The old file is deleted only once a checkpoint that started after the swap is
//!   in place and no query that could read it remains.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::RecordBatch;
use crossbeam_channel::{bounded, Sender};

use crate::replay::durability::flusher::create_ts_range;
use crate::index::shard_of;
use crate::replay::messages::ShardMessage;
use crate::replay::messages::{FileSwap, RetiredFile};
use crate::replay::shared::EngineShared;
use crate::catalog::DataFileMeta;
use crate::error::{CoreError, CoreResult};
use crate::rows::value_at;
use crate::table::{FlushedFile, TableRuntime};
use crate::types::Ts;
use crate::value::encode_key;
use crate::visibility::RgWriter;

/// What one storage-GC run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StorageGcReport {
    /// LWM when the run started; each file is rewritten at the LWM of its turn.
    pub rewritten_at: Ts,
    pub files_rewritten: usize,
    pub rows_kept: u64,
    pub rows_dropped: u64,
    pub millis: f64,
}

impl EngineShared {
    /// Rewrites every flushed file whose stale share at LWM exceeds `threshold`.
    pub(crate) fn collect_storage_garbage(&self, threshold: f64, shards: &[Sender<ShardMessage>]) -> CoreResult<StorageGcReport> {
        let started = Instant::now();
        let mut report = StorageGcReport { rewritten_at: self.txn.low_watermark(), ..StorageGcReport::default() };
        let tables = self.registry.read().tables.clone();
        for table in &tables {
            for file in table.files().flushed.iter() {
                let hold = self.txn.snapshot_at_low_watermark()?;
                let g = hold.ts();
                let rows = file.meta.row_count as usize;
                let deleted = file.visibility.bitmap_at(g, rows);
                let stale: u64 = deleted.iter().map(|w| w.count_ones() as u64).sum();
                if rows == 0 || stale as f64 / rows as f64 <= threshold {
                    continue;
                }
                let Some(kept) = self.rewrite(table, file, &deleted, g, shards)? else {
                    continue; // swapped meanwhile: nothing of it is rewritten twice
                };
                drop(hold);
                report.files_rewritten += 1;
                report.rows_kept += kept;
                report.rows_dropped += rows as u64 - kept;
            }
        }
        if report.files_rewritten > 0 {
            fail::fail_point!("storage_gc::before-catalog", |_| Ok(report.clone()));
            self.save_catalog()?;
        }
        report.millis = started.elapsed().as_secs_f64() * 1000.0;
        Ok(report)
    }

    /// Rewrites `old` with its rows live at `g` and swaps the result in; `None` when
    /// the owning shard found `old` already gone from the table (the new file is
    /// deleted again).
    fn rewrite(&self, table: &Arc<TableRuntime>, old: &FlushedFile, deleted: &[u64], g: Ts, shards: &[Sender<ShardMessage>]) -> CoreResult<Option<u64>> {
        let schema = table.schema();
        let rows = old.meta.row_count as usize;
        let all_columns: Vec<usize> = (0..=schema.create_ts_index()).collect();
        let decoded = self.store.read_file(&schema, &old.meta, &all_columns, &[])?.batches;
        let live: Vec<RecordBatch> = crate::scan::drop_deleted_rows(&decoded, deleted)?;
        let old_offsets: Vec<u32> =
            (0..rows).filter(|&row| deleted.get(row / 64).is_none_or(|w| w >> (row % 64) & 1 == 0)).map(|r| r as u32).collect();
        let mut moves = Vec::with_capacity(old_offsets.len());
        let mut new_offset = 0u32;
        for batch in &live {
            for row in 0..batch.num_rows() {
                let key_values = schema
                    .primary_key()
                    .iter()
                    .map(|&column| value_at(batch.column(column).as_ref(), row))
                    .collect::<CoreResult<Vec<_>>>()?;
                let old_offset = *old_offsets.get(new_offset as usize).ok_or_else(|| {
                    CoreError::Storage(format!("storage GC: file {} returned more live rows than its bitmap has", old.meta.path))
                })?;
                moves.push((encode_key(&key_values), old_offset, new_offset));
                new_offset += 1;
            }
        }
        let kept = moves.len();
        let shard = match moves.first() {
            Some((key, _, _)) => shard_of(key, shards.len()),
            None => 0,
        };
        if moves.iter().any(|(key, _, _)| shard_of(key, shards.len()) != shard) {
            return Err(CoreError::Storage(format!("storage GC: the keys of file {} belong to several shards", old.meta.path)));
        }
        let new = if kept == 0 {
            None
        } else {
            let file_id = self.allocate_file_id();
            let first_row_id = table.reserve_row_ids(kept as u64);
            let stored = self.store.write_file(&schema, file_id, &live)?;
            let (min_create_ts, max_create_ts) = create_ts_range(&live, schema.create_ts_index());
            let meta = DataFileMeta {
                file_id,
                path: stored.path,
                row_count: kept as u64,
                first_row_id,
                min_create_ts,
                max_create_ts,
                size_bytes: stored.size_bytes,
                // The whole lineage, so recovery can tell that a rewrite of a rewrite
                // still holds rows of a file its checkpoint has.
                replaces: old.meta.replaces.iter().copied().chain([old.meta.file_id]).collect(),
                column_ranges: crate::column_ranges::column_ranges(&schema, &live),
            };
            let writer = RgWriter::new(kept);
            Some((FlushedFile { meta: Arc::new(meta), visibility: Arc::clone(writer.visibility()) }, writer))
        };
        fail::fail_point!("storage_gc::before-swap", |_| Ok(Some(0)));
        let new_path = new.as_ref().map(|(file, _)| file.meta.path.clone());
        let (done, swapped) = bounded(1);
        let swap = FileSwap { table: table.id(), old: old.clone(), new, moves, rewritten_at: g, done };
        shards[shard].send(ShardMessage::SwapFile(Box::new(swap))).map_err(|_| CoreError::EngineStopped { reason: "a shard exited".into() })?;
        let swapped = swapped.recv().map_err(|_| CoreError::EngineStopped { reason: "a shard exited during a file swap".into() })?;
        if !swapped {
            if let Some(path) = new_path {
                self.store.delete_file(&path)?;
            }
            return Ok(None);
        }
        self.retired.lock().push(RetiredFile {
            meta: DataFileMeta::clone(&old.meta),
            readers: Arc::downgrade(&old.visibility),
            checkpoint_seq: self.checkpoint_started.load(std::sync::atomic::Ordering::SeqCst) + 1,
        });
        Ok(Some(kept as u64))
    }

    /// Deletes retired files nothing can read any more. Called after a checkpoint.
    /// A file whose delete fails stays retired, with those not tried yet, for the
    /// next call (dropping them leaked them in storage for good).
    pub(crate) fn delete_retired_files(&self) -> CoreResult<()> {
        let completed = self.checkpoint_seq.load(Relaxed);
        let deletable: Vec<RetiredFile> = {
            let mut retired = self.retired.lock();
            let (ready, waiting): (Vec<_>, Vec<_>) = retired
                .drain(..)
                .partition(|file| file.checkpoint_seq <= completed && file.readers.strong_count() == 0);
            *retired = waiting;
            ready
        };
        let mut deletable = deletable.into_iter();
        while let Some(file) = deletable.next() {
            if let Err(error) = self.delete_retired_file(&file) {
                self.retired.lock().extend(std::iter::once(file).chain(deletable));
                return Err(error);
            }
        }
        Ok(())
    }

    fn delete_retired_file(&self, file: &RetiredFile) -> CoreResult<()> {
        fail::fail_point!("storage_gc::delete-retired", |_| Err(crate::error::failpoint_error(
            "storage_gc::delete-retired",
            format!("{} was not deleted", file.meta.path)
        )));
        self.store.delete_file(&file.meta.path)
    }
}

