//! The runtime state of one table shared by replayers, the flusher and readers.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::{Acquire, Relaxed, Release}};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::catalog::DataFileMeta;
use crate::schema::TableSchema;
use crate::types::{FileId, RowId, TableId};
use crate::visibility::RgVisibility;
use crate::write_buffer::VirtualFile;

/// A data file in lake storage with its in-memory visibility.
#[derive(Clone)]
pub struct FlushedFile {
    /// Shared: every change to a table's file lists copies the lists, and a large
    /// table has thousands of files with paths and column ranges each.
    pub meta: Arc<DataFileMeta>,
    pub visibility: Arc<RgVisibility>,
}

/// The files of a table at one moment: flushed files and in-memory virtual files.
///
/// Invariant: every row version is in exactly one of the two lists; a virtual file
/// moves to `flushed` (same file id, same visibility) in one atomic swap.
#[derive(Clone, Default)]
pub struct TableFiles {
    pub flushed: Vec<FlushedFile>,
    pub virtual_files: Vec<Arc<VirtualFile>>,
}

/// One table's shared state.
pub struct TableRuntime {
    id: TableId,
    /// The schema's name, which never changes.
    name: String,
    /// Replaced only by [`Self::set_schema`] (a column added); readers take the
    /// version they start with and conform what they read to it.
    schema: ArcSwap<TableSchema>,
    /// `schema`'s user column count, stored after it: a plain load on the hot path.
    column_count: AtomicUsize,
    next_row_id: AtomicU64,
    files: ArcSwap<TableFiles>,
    /// Serializes writers of `files` (rare: file creation and flush); readers never lock.
    files_update: Mutex<()>,
}

impl TableRuntime {
    pub fn new(id: TableId, schema: TableSchema) -> Self {
        Self {
            id,
            name: schema.name().to_string(),
            column_count: AtomicUsize::new(schema.column_count()),
            schema: ArcSwap::from_pointee(schema),
            next_row_id: AtomicU64::new(0),
            files: ArcSwap::from_pointee(TableFiles::default()),
            files_update: Mutex::new(()),
        }
    }

    pub fn id(&self) -> TableId {
        self.id
    }

    /// The current schema.
    pub fn schema(&self) -> Arc<TableSchema> {
        self.schema.load_full()
    }

    /// The current schema's number of user columns, without taking a reference to it
    /// (the replay hot path checks this per row).
    pub fn column_count(&self) -> usize {
        self.column_count.load(Acquire)
    }

    pub(crate) fn set_schema(&self, schema: TableSchema) {
        let count = schema.column_count();
        self.schema.store(Arc::new(schema));
        self.column_count.store(count, Release);
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next row id to hand out (every smaller one is reserved).
    pub fn next_row_id(&self) -> u64 {
        self.next_row_id.load(Relaxed)
    }

    /// A table rebuilt by recovery, with its files and row-id counter.
    pub(crate) fn restored(id: TableId, schema: TableSchema, next_row_id: u64, files: TableFiles) -> Self {
        Self {
            id,
            name: schema.name().to_string(),
            column_count: AtomicUsize::new(schema.column_count()),
            schema: ArcSwap::from_pointee(schema),
            next_row_id: AtomicU64::new(next_row_id),
            files: ArcSwap::from_pointee(files),
            files_update: Mutex::new(()),
        }
    }

    /// Reserves `count` consecutive row ids.
    pub fn reserve_row_ids(&self, count: u64) -> RowId {
        RowId(self.next_row_id.fetch_add(count, Relaxed))
    }

    /// The current file lists (a consistent snapshot of them).
    pub fn files(&self) -> Arc<TableFiles> {
        self.files.load_full()
    }

    pub(crate) fn add_virtual_file(&self, file: Arc<VirtualFile>) {
        let _guard = self.files_update.lock();
        let mut files = TableFiles::clone(&self.files.load());
        files.virtual_files.push(file);
        self.files.store(Arc::new(files));
    }

    /// Swaps a virtual file for its flushed copy; `false` (and nothing changes) when
    /// the file is not virtual any more. Adding it again would be a second copy of
    /// its rows: storage GC rewrote both entries, and every live row was then
    /// visible twice.
    pub(crate) fn replace_with_flushed(&self, file_id: FileId, flushed: FlushedFile) -> bool {
        let _guard = self.files_update.lock();
        let mut files = TableFiles::clone(&self.files.load());
        let virtual_files = files.virtual_files.len();
        files.virtual_files.retain(|v| v.file_id() != file_id);
        if files.virtual_files.len() == virtual_files {
            return false;
        }
        files.flushed.push(flushed);
        self.files.store(Arc::new(files));
        true
    }

    /// Whether a flushed file with this id is in the table's list.
    pub(crate) fn has_flushed(&self, file_id: FileId) -> bool {
        self.files.load().flushed.iter().any(|f| f.meta.file_id == file_id)
    }

    /// Swaps a flushed file for the file storage GC rewrote it into (or drops it
    /// when `new` is `None`: none of its rows was live).
    pub(crate) fn replace_flushed(&self, old: FileId, new: Option<FlushedFile>) {
        let _guard = self.files_update.lock();
        let mut files = TableFiles::clone(&self.files.load());
        files.flushed.retain(|f| f.meta.file_id != old);
        files.flushed.extend(new);
        self.files.store(Arc::new(files));
    }

    /// Bytes of visibility structures and row versions stored (flushed rows plus
    /// published in-memory rows), from one list of files so that a file swapped in
    /// between (flush, storage GC) cannot count in one and not in the other.
    pub fn visibility_and_versions(&self) -> (usize, u64) {
        let files = self.files();
        let bytes = files.flushed.iter().map(|f| f.visibility.memory_bytes()).sum::<usize>()
            + files.virtual_files.iter().map(|v| v.visibility().memory_bytes()).sum::<usize>();
        let versions = files.flushed.iter().map(|f| f.meta.row_count).sum::<u64>()
            + files.virtual_files.iter().map(|v| v.published_rows() as u64).sum::<u64>();
        (bytes, versions)
    }
}
