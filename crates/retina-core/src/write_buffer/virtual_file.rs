//! A virtual file: the in-memory blocks of one write buffer, read like a data file.

use std::sync::atomic::{AtomicBool, Ordering::{Acquire, Release}};
use std::sync::Arc;

use arc_swap::ArcSwap;
use arrow_array::RecordBatch;

use crate::types::{FileId, RowId, TableId};
use crate::visibility::{RgVisibility, RgWriter};

/// The in-memory blocks of one shard's write buffer for one table, with a
/// pre-assigned file id and one row group of `capacity` rows. When full it is written
/// as a Parquet file under the same id, so row locations never change.
///
/// Invariants:
/// - `blocks` is a consistent prefix of the file's rows in row order: the writer
///   replaces the whole list atomically, and a replacement only appends rows or
///   merges adjacent pieces (same rows, same order).
/// - Row `i` of the virtual file has row id `first_row_id + i` and location
///   `(file_id, 0, i)`.
/// - After `is_complete()` turns true, `blocks` never changes again.
pub struct VirtualFile {
    table_id: TableId,
    file_id: FileId,
    first_row_id: RowId,
    capacity: usize,
    visibility: Arc<RgVisibility>,
    blocks: ArcSwap<Vec<RecordBatch>>,
    complete: AtomicBool,
}

impl VirtualFile {
    /// An empty virtual file and the writer of its visibility (for the shard that
    /// appends to it).
    pub fn new(table_id: TableId, file_id: FileId, first_row_id: RowId, capacity: usize) -> (Self, RgWriter) {
        let writer = RgWriter::new(capacity);
        let file = Self {
            table_id,
            file_id,
            first_row_id,
            capacity,
            visibility: Arc::clone(writer.visibility()),
            blocks: ArcSwap::from_pointee(Vec::new()),
            complete: AtomicBool::new(false),
        };
        (file, writer)
    }

    /// A complete virtual file rebuilt from a checkpoint: its rows and visibility as
    /// they were at the checkpoint. No rows are appended to it; it only waits for its
    /// flush.
    pub fn recovered(
        table_id: TableId,
        file_id: FileId,
        first_row_id: RowId,
        capacity: usize,
        visibility: Arc<RgVisibility>,
        blocks: Vec<RecordBatch>,
    ) -> Self {
        Self {
            table_id,
            file_id,
            first_row_id,
            capacity,
            visibility,
            blocks: ArcSwap::from_pointee(blocks),
            complete: AtomicBool::new(true),
        }
    }

    pub fn table_id(&self) -> TableId {
        self.table_id
    }

    pub fn file_id(&self) -> FileId {
        self.file_id
    }

    pub fn first_row_id(&self) -> RowId {
        self.first_row_id
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    pub fn visibility(&self) -> &Arc<RgVisibility> {
        &self.visibility
    }

    /// The published blocks: a consistent prefix of the file's rows.
    pub fn blocks(&self) -> Arc<Vec<RecordBatch>> {
        self.blocks.load_full()
    }

    pub fn published_rows(&self) -> usize {
        self.blocks.load().iter().map(RecordBatch::num_rows).sum()
    }

    pub fn is_complete(&self) -> bool {
        self.complete.load(Acquire)
    }

    /// Writer only: replaces the published blocks (see the type's invariants).
    pub(crate) fn set_blocks(&self, blocks: Vec<RecordBatch>) {
        debug_assert!(!self.is_complete(), "a complete virtual file is immutable");
        self.blocks.store(Arc::new(blocks));
    }

    /// Writer only: no more rows will be appended.
    pub(crate) fn mark_complete(&self) {
        self.complete.store(true, Release);
    }
}
