//! Recovery (ARCHITECTURE.md §3.7): rebuild an engine's state from the catalog and the
//! latest checkpoint at ts C; replay then resumes from the sources' positions of C.
//!
//! - Flushed files come from the catalog, with their visibility at C from the
//!   checkpoint. Rows created after C (files flushed after the checkpoint) are masked
//!   as deleted: their transactions are replayed again from the source.
//! - Rows that were in write buffers at C come back from the checkpoint's files as
//!   complete virtual files, flushed right after start.
//! - The primary index is rebuilt from the rows visible at C. A reader (a store
//!   that may not write) applies no change and needs no index: it gets none, and
//!   reads no flushed file at open unless the file has rows created after C.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::RecordBatch;

use crate::replay::durability::index_rebuild::{IndexRebuild, KeyedFile, RebuildError};
use crate::replay::durability::source_progress::SourcePosition;
use crate::replay::messages::FlushJob;
use crate::replay::messages::RestoredShardTable;
use crate::replay::shared::TableRegistry;
use crate::catalog::{DataFileMeta, CATALOG_FORMAT_VERSION};
use crate::checkpoint::{CheckpointFile, CheckpointManifest, CHECKPOINT_FORMAT_VERSION, OLDEST_CHECKPOINT_FORMAT_VERSION};
use crate::error::{CoreError, CoreResult};
use crate::index::{MainIndex, MainIndexEntry, SinglePointIndex};
use crate::schema::TableSchema;
use crate::storage::LakeStore;
use crate::table::{FlushedFile, TableFiles, TableRuntime};
use crate::types::{FileId, RowId, TableId, Ts};
use crate::visibility::RgWriter;
use crate::write_buffer::VirtualFile;

/// Figures of a recovery.
#[derive(Clone, Debug, PartialEq)]
pub struct RecoveryReport {
    pub checkpoint_ts: Ts,
    pub tables: usize,
    pub files: usize,
    /// Rows whose keys were read: to rebuild the primary index, or to hide rows
    /// created after the checkpoint.
    pub rows_scanned: u64,
    /// Live keys restored (none for a reader, which rebuilds no index).
    pub keys: u64,
    /// Files of a version-1 catalog read once to record their column ranges.
    pub files_given_column_ranges: usize,
    pub millis: f64,
}

pub(crate) struct RecoveredState {
    pub(crate) checkpoint_ts: Ts,
    pub(crate) shards: usize,
    pub(crate) registry: TableRegistry,
    pub(crate) next_file_id: u64,
    /// Per shard, per table.
    pub(crate) shard_tables: Vec<Vec<RestoredShardTable>>,
    pub(crate) sources: Vec<SourcePosition>,
    pub(crate) to_flush: Vec<FlushJob>,
    pub(crate) report: RecoveryReport,
}

/// Rebuilds the state in `store`, or returns `None` when it holds nothing yet.
pub(crate) fn recover(store: &dyn LakeStore, configured_shards: usize) -> CoreResult<Option<RecoveredState>> {
    let started = Instant::now();
    // The checkpoint first: a writer saves the catalog before each checkpoint, so a
    // reader beside a running writer then gets a catalog at least as new as the
    // checkpoint, the same shape a crash leaves (never a checkpoint naming files
    // its catalog does not list yet).
    let checkpoint = store.load_checkpoint()?;
    let catalog = store.load_catalog()?;
    let Some(catalog) = catalog else {
        if checkpoint.is_some() {
            return Err(CoreError::Storage("a checkpoint exists but the catalog manifest is missing".into()));
        }
        return Ok(None);
    };
    let checkpoint = checkpoint.unwrap_or_else(|| CheckpointManifest {
        format_version: CHECKPOINT_FORMAT_VERSION,
        ts: Ts(0),
        shards: configured_shards,
        next_file_id: 1,
        tables: Vec::new(),
        sources: Vec::new(),
    });
    if !(OLDEST_CHECKPOINT_FORMAT_VERSION..=CHECKPOINT_FORMAT_VERSION).contains(&checkpoint.format_version) {
        return Err(CoreError::Storage(format!(
            "checkpoint format version {} is not supported by this build (it reads {OLDEST_CHECKPOINT_FORMAT_VERSION} to \
             {CHECKPOINT_FORMAT_VERSION})",
            checkpoint.format_version
        )));
    }
    let ts = checkpoint.ts;
    let shards = checkpoint.shards.max(1);
    let build_index = store.writable();
    let checkpointed: HashMap<TableId, _> = checkpoint.tables.iter().map(|t| (t.id, t)).collect();

    let mut registry = TableRegistry::default();
    let mut shard_tables: Vec<Vec<RestoredShardTable>> = (0..shards).map(|_| Vec::new()).collect();
    let mut to_flush = Vec::new();
    let (mut rows_scanned, mut keys, mut file_count, mut files_given_column_ranges) = (0u64, 0u64, 0usize, 0usize);
    let mut next_file_id = catalog.next_file_id.max(checkpoint.next_file_id);
    for (position, entry) in catalog.tables.iter().enumerate() {
        if entry.id != TableId(position as u32) {
            return Err(CoreError::Storage(format!(
                "catalog lists table {} with id {} at position {position}; ids must be dense",
                entry.schema.name(),
                entry.id.0
            )));
        }
        let schema = &entry.schema;
        let saved: HashMap<FileId, &CheckpointFile> = checkpointed
            .get(&entry.id)
            .map(|t| t.files.iter().map(|f| (f.file_id, f)).collect())
            .unwrap_or_default();
        let mut next_row_id = checkpointed.get(&entry.id).map_or(0, |t| t.next_row_id);
        let flushed = flushed_files_at(&entry.files, &saved);
        let buffered: Vec<&CheckpointFile> = {
            let flushed_ids: Vec<FileId> = flushed.iter().map(|meta| meta.file_id).collect();
            let mut buffered: Vec<&CheckpointFile> =
                saved.values().copied().filter(|f| f.is_buffered() && !flushed_ids.contains(&f.file_id)).collect();
            buffered.sort_by_key(|f| f.first_row_id);
            buffered
        };
        let mut rebuild = if build_index {
            // At most the rows visible at C get keys, spread evenly over the shards.
            let stored: u64 = entry.files.iter().map(|meta| meta.row_count).sum::<u64>()
                + saved.values().filter(|f| f.is_buffered()).map(|f| f.rows).sum::<u64>();
            let deleted: u64 = saved.values().flat_map(|f| &f.deleted).map(|w| w.count_ones() as u64).sum();
            let visible = stored.saturating_sub(deleted);
            let mut indexes: Vec<SinglePointIndex> = (0..shards).map(|_| SinglePointIndex::new()).collect();
            for index in &mut indexes {
                index.reserve((visible / shards as u64) as usize);
            }
            // A table of one file has nothing to build in parallel.
            let threads = if flushed.len() + buffered.len() > 1 { index_threads() } else { 1 };
            Some(IndexRebuild::start(indexes, schema.primary_key().len(), threads)?)
        } else {
            None
        };
        let mut main_entries = Vec::new();
        let mut origins = Vec::new();
        let mut files = TableFiles::default();

        for mut meta in flushed {
            if catalog.format_version < CATALOG_FORMAT_VERSION && meta.column_ranges.is_empty() {
                // Written before column ranges were recorded: read once, recorded by
                // the next catalog save.
                let user_columns: Vec<usize> = (0..schema.column_count()).collect();
                let batches = store.read_file(schema, &meta, &user_columns, &[])?.batches;
                meta.column_ranges = crate::column_ranges::column_ranges(schema, &batches);
                files_given_column_ranges += 1;
            }
            let meta = &meta;
            let rows = meta.row_count as usize;
            let mut deleted = vec![0u64; rows.div_ceil(64)];
            if let Some(saved) = saved.get(&meta.file_id) {
                for (word, saved_word) in deleted.iter_mut().zip(&saved.deleted) {
                    *word = *saved_word;
                }
            }
            // A reader reads a file only to hide rows created after C.
            let key_rows = (rebuild.is_some() || meta.max_create_ts > ts).then(|| read_key_columns(store, schema, meta)).transpose()?;
            if let Some(key_rows) = &key_rows {
                mask_created_after(key_rows, schema, ts, &mut deleted);
                rows_scanned += key_rows.iter().map(|b| b.num_rows() as u64).sum::<u64>();
            }
            let writer = RgWriter::from_bitmap(rows, &deleted, ts);
            let visibility = Arc::clone(writer.visibility());
            origins.push(RowOrigin { first_row_id: meta.first_row_id, rows: meta.row_count, file_id: meta.file_id, source: "a flushed file" });
            let owner = match (&mut rebuild, key_rows) {
                (Some(rebuild), Some(key_rows)) => rebuild
                    .add(KeyedFile { first_row_id: meta.first_row_id, key_rows, deleted })
                    .map_err(|e| rebuild_error(e, schema, ts, &origins))?,
                _ => 0,
            };
            main_entries.push((owner, MainIndexEntry { first_row_id: meta.first_row_id, rows: rows as u64, file_id: meta.file_id, writer }));
            next_row_id = next_row_id.max(meta.first_row_id.0 + meta.row_count);
            next_file_id = next_file_id.max(meta.file_id.0 + 1);
            files.flushed.push(FlushedFile { meta: Arc::new(meta.clone()), visibility });
            file_count += 1;
        }
        for saved in buffered {
            let all_columns: Vec<usize> = (0..=schema.create_ts_index()).collect();
            let mut batches = Vec::new();
            for segment in &saved.segments {
                let segment_meta = DataFileMeta {
                    file_id: saved.file_id,
                    path: segment.path.clone(),
                    row_count: segment.rows,
                    first_row_id: saved.first_row_id,
                    min_create_ts: Ts(0),
                    max_create_ts: ts,
                    size_bytes: 0,
                    replaces: Vec::new(),
                    column_ranges: Vec::new(),
                };
                let segment_batches = store.read_file(schema, &segment_meta, &all_columns, &[])?.batches;
                let rows: u64 = segment_batches.iter().map(|b| b.num_rows() as u64).sum();
                if rows != segment.rows {
                    return Err(CoreError::Storage(format!(
                        "checkpoint segment {} holds {rows} rows, the checkpoint says {}",
                        segment.path, segment.rows
                    )));
                }
                batches.extend(segment_batches);
            }
            let writer = RgWriter::from_bitmap(saved.capacity as usize, &saved.deleted, ts);
            let file = Arc::new(VirtualFile::recovered(
                entry.id,
                saved.file_id,
                saved.first_row_id,
                saved.capacity as usize,
                Arc::clone(writer.visibility()),
                batches,
            ));
            origins.push(RowOrigin { first_row_id: saved.first_row_id, rows: saved.rows, file_id: saved.file_id, source: "checkpoint segments" });
            let owner = match &mut rebuild {
                Some(rebuild) => {
                    let key_rows = project_key_columns(schema, &file.blocks())?;
                    rows_scanned += key_rows.iter().map(|b| b.num_rows() as u64).sum::<u64>();
                    rebuild
                        .add(KeyedFile { first_row_id: saved.first_row_id, key_rows, deleted: saved.deleted.clone() })
                        .map_err(|e| rebuild_error(e, schema, ts, &origins))?
                }
                None => 0,
            };
            main_entries.push((owner, MainIndexEntry { first_row_id: saved.first_row_id, rows: saved.capacity, file_id: saved.file_id, writer }));
            next_row_id = next_row_id.max(saved.first_row_id.0 + saved.capacity);
            next_file_id = next_file_id.max(saved.file_id.0 + 1);
            files.virtual_files.push(Arc::clone(&file));
            file_count += 1;
            to_flush.push(file);
        }
        let indexes = match rebuild {
            Some(rebuild) => {
                let (indexes, restored) = rebuild.finish().map_err(|e| rebuild_error(e, schema, ts, &origins))?;
                keys += restored;
                indexes
            }
            None => (0..shards).map(|_| SinglePointIndex::new()).collect(),
        };
        main_entries.sort_by_key(|(_, e): &(usize, MainIndexEntry)| e.first_row_id);
        let table = Arc::new(TableRuntime::restored(entry.id, TableSchema::clone(schema), next_row_id, files));
        // A file's rows all belong to one shard (its keys hash there), so only that
        // shard gets its range and its visibility's writer: it is the only one that
        // deletes in it or swaps it.
        let mut mains: Vec<MainIndex> = (0..shards).map(|_| MainIndex::new()).collect();
        for (owner, entry) in main_entries {
            let main = mains.get_mut(owner).ok_or_else(|| {
                CoreError::Storage(format!("recovery: file {} belongs to shard {owner} of {shards}", entry.file_id.0))
            })?;
            main.push(entry);
        }
        for ((index, main), shard_table) in indexes.into_iter().zip(mains).zip(shard_tables.iter_mut()) {
            shard_table.push(RestoredShardTable { table: Arc::clone(&table), index, main });
        }
        registry.by_name.insert(schema.name().to_string(), entry.id);
        registry.tables.push(table);
    }
    let to_flush = to_flush
        .into_iter()
        .map(|file| FlushJob { table: Arc::clone(&registry.tables[file.table_id().0 as usize]), file })
        .collect();
    Ok(Some(RecoveredState {
        checkpoint_ts: ts,
        shards,
        registry,
        next_file_id,
        shard_tables,
        sources: checkpoint.sources,
        to_flush,
        report: RecoveryReport {
            checkpoint_ts: ts,
            tables: catalog.tables.len(),
            files: file_count,
            rows_scanned,
            keys,
            files_given_column_ranges,
            millis: started.elapsed().as_secs_f64() * 1000.0,
        },
    }))
}

/// The flushed files to recover: the catalog's, except storage-GC rewrites of files
/// the checkpoint holds (made after it: the checkpoint's files are what its bitmaps
/// describe), plus the checkpoint's flushed files that such a rewrite removed from
/// the catalog (they are deleted only after a newer checkpoint is in place).
fn flushed_files_at(catalog: &[DataFileMeta], checkpointed: &HashMap<FileId, &CheckpointFile>) -> Vec<DataFileMeta> {
    let mut files: Vec<DataFileMeta> = catalog
        .iter()
        .filter(|meta| {
            checkpointed.contains_key(&meta.file_id) || !meta.replaces.iter().any(|id| checkpointed.contains_key(id))
        })
        .cloned()
        .collect();
    for saved in checkpointed.values() {
        if let Some(meta) = &saved.meta {
            if !files.iter().any(|f| f.file_id == meta.file_id) {
                files.push(meta.clone());
            }
        }
    }
    files.sort_by_key(|f| f.first_row_id);
    files
}

/// The primary-key columns followed by `_create_ts` of a flushed file.
fn read_key_columns(store: &dyn LakeStore, schema: &TableSchema, meta: &DataFileMeta) -> CoreResult<Vec<RecordBatch>> {
    let (columns, _) = key_column_order(schema);
    let batches = store.read_file(schema, meta, &columns, &[])?.batches;
    reorder_to_key_order(schema, &columns, batches)
}

/// The same columns from in-memory batches of the stored schema.
fn project_key_columns(schema: &TableSchema, batches: &[RecordBatch]) -> CoreResult<Vec<RecordBatch>> {
    let (_, key_then_ts) = key_column_order(schema);
    batches.iter().map(|b| b.project(&key_then_ts).map_err(CoreError::from)).collect()
}

/// (ascending stored columns to read, primary key then `_create_ts` in stored indices).
fn key_column_order(schema: &TableSchema) -> (Vec<usize>, Vec<usize>) {
    let mut key_then_ts: Vec<usize> = schema.primary_key().to_vec();
    key_then_ts.push(schema.create_ts_index());
    let mut ascending = key_then_ts.clone();
    ascending.sort_unstable();
    (ascending, key_then_ts)
}

fn reorder_to_key_order(schema: &TableSchema, read: &[usize], batches: Vec<RecordBatch>) -> CoreResult<Vec<RecordBatch>> {
    let (_, key_then_ts) = key_column_order(schema);
    let positions: Vec<usize> =
        key_then_ts.iter().map(|c| read.binary_search(c).expect("every key column was read")).collect();
    batches.iter().map(|b| b.project(&positions).map_err(CoreError::from)).collect()
}

/// Marks rows created after `ts` as deleted: their transactions replay again.
/// `key_rows` have `_create_ts` as their last column.
fn mask_created_after(key_rows: &[RecordBatch], schema: &TableSchema, ts: Ts, deleted: &mut [u64]) {
    let ts_column = schema.primary_key().len();
    let mut offset = 0;
    for batch in key_rows {
        for (i, &created) in batch.column(ts_column).as_primitive::<Int64Type>().values().iter().enumerate() {
            if created as u64 > ts.0 {
                let row = offset + i;
                deleted[row / 64] |= 1 << (row % 64);
            }
        }
        offset += batch.num_rows();
    }
}

/// Where recovered rows came from, for errors that name a row.
struct RowOrigin {
    first_row_id: RowId,
    rows: u64,
    file_id: FileId,
    source: &'static str,
}

/// A row id as an error shows it: its file, the row's offset there and where the
/// file was read from.
fn describe_row(row: RowId, origins: &[RowOrigin]) -> String {
    match origins.iter().rev().find(|o| row.0 >= o.first_row_id.0 && row.0 < o.first_row_id.0 + o.rows) {
        Some(origin) => {
            format!("row id {} (row {} of file {}, from {})", row.0, row.0 - origin.first_row_id.0, origin.file_id.0, origin.source)
        }
        None => format!("row id {} (in no recovered file)", row.0),
    }
}

/// The threads that rebuild a table's index: one per core, since recovery is all
/// the process does meanwhile.
fn index_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// A rebuild's error, naming a duplicated key's rows by their files.
fn rebuild_error(error: RebuildError, schema: &TableSchema, checkpoint_ts: Ts, origins: &[RowOrigin]) -> CoreError {
    match error {
        RebuildError::Core(error) => error,
        RebuildError::Duplicate { existing: (existing, existing_created), duplicate: (duplicate, duplicate_created) } => {
            CoreError::Storage(format!(
                "recovery: table {} has two visible rows with the same primary key at checkpoint ts {}: {} created at ts {} and {} created at ts {}",
                schema.name(),
                checkpoint_ts.0,
                describe_row(existing, origins),
                existing_created.0,
                describe_row(duplicate, origins),
                duplicate_created.0
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_schema::{DataType, Field, Schema};

    /// Two visible rows of one key (a lake recovery cannot trust): the error names
    /// the table, the checkpoint and, for each row, its file, offset, source and
    /// create ts. (`index_rebuild`'s tests find the duplicates.)
    #[test]
    fn two_visible_rows_of_one_key_are_named_with_their_files() {
        let schema = TableSchema::new("t", Schema::new(vec![Field::new("id", DataType::Int64, false)]), vec![0]).expect("schema");
        let origins = [
            RowOrigin { first_row_id: RowId(0), rows: 4096, file_id: FileId(3), source: "a flushed file" },
            RowOrigin { first_row_id: RowId(4096), rows: 3, file_id: FileId(9), source: "checkpoint segments" },
        ];
        let duplicate = RebuildError::Duplicate { existing: (RowId(4096), Ts(10)), duplicate: (RowId(4098), Ts(12)) };
        let message = rebuild_error(duplicate, &schema, Ts(20), &origins).to_string();
        assert!(message.contains("table t"), "{message}");
        assert!(message.contains("checkpoint ts 20"), "{message}");
        assert!(message.contains("row id 4096 (row 0 of file 9, from checkpoint segments) created at ts 10"), "{message}");
        assert!(message.contains("row id 4098 (row 2 of file 9, from checkpoint segments) created at ts 12"), "{message}");
        assert_eq!(describe_row(RowId(5), &origins), "row id 5 (row 5 of file 3, from a flushed file)");
        assert_eq!(describe_row(RowId(9999), &origins), "row id 9999 (in no recovered file)");
    }
}
