//! A `LakeStore` view that learns file statistics from the reads a scan makes.
//!
//! `read_split` asks the store for a file's columns with the visibility mask as
//! `skip`. While some of the columns asked for have no statistics yet, this view
//! asks the real store for them unmasked, records min/max/nulls of every stored
//! version ([`crate::split_statistics`]), then drops the deleted rows itself with
//! `retina_core::scan::drop_deleted_rows` — what both stores do internally today
//! (decode, then filter), so the read costs the same. Once a file's columns are
//! known, reads pass straight through with the mask.
//!
//! Only reads go through this view; every other call is forwarded unchanged.

use datafusion::arrow::record_batch::RecordBatch;
use retina_core::catalog::{CatalogManifest, DataFileMeta};
use retina_core::checkpoint::CheckpointManifest;
use retina_core::scan::drop_deleted_rows;
use retina_core::storage::{LakeStore, PageBound, StoredFile};
use retina_core::visibility::DeleteBitmap;
use retina_core::{CoreResult, FileId, TableId, TableSchema, Ts};

use crate::split_statistics::SplitStatistics;

/// The store of one table's scan, recording into `statistics`.
pub struct RecordingStore<'a> {
    pub inner: &'a dyn LakeStore,
    pub statistics: &'a SplitStatistics,
    pub table: TableId,
}

impl RecordingStore<'_> {
    /// Whether some of `columns` of `file` have no statistics yet (a read learns them).
    fn learning(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize]) -> bool {
        let stored = table.stored_schema();
        let names: Vec<&str> =
            columns.iter().filter_map(|&index| stored.fields().get(index)).map(|field| field.name().as_str()).collect();
        self.statistics.lacks_any(self.table, file, &names)
    }
}

impl LakeStore for RecordingStore<'_> {
    fn read_file(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        skip: Option<&DeleteBitmap>,
    ) -> CoreResult<Vec<RecordBatch>> {
        if !self.learning(table, file, columns) {
            return self.inner.read_file(table, file, columns, skip);
        }
        let all_rows = self.inner.read_file(table, file, columns, None)?;
        self.statistics.record(self.table, file, &all_rows);
        match skip {
            Some(deleted) => drop_deleted_rows(&all_rows, deleted),
            None => Ok(all_rows),
        }
    }

    /// While statistics are being learned the file is read whole (the learning path
    /// above); afterwards reads may skip pages.
    fn read_file_pruned(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        skip: Option<&DeleteBitmap>,
        bounds: &[PageBound],
    ) -> CoreResult<(Vec<RecordBatch>, u64)> {
        if self.learning(table, file, columns) {
            return Ok((self.read_file(table, file, columns, skip)?, 0));
        }
        self.inner.read_file_pruned(table, file, columns, skip, bounds)
    }

    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        self.inner.write_file(table, file_id, batches)
    }

    fn delete_file(&self, path: &str) -> CoreResult<()> {
        self.inner.delete_file(path)
    }

    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()> {
        self.inner.save_catalog(catalog)
    }

    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        self.inner.load_catalog()
    }

    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile> {
        self.inner.write_checkpoint_segment(table, file_id, first_row, ts, batches)
    }

    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()> {
        self.inner.save_checkpoint(checkpoint)
    }

    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        self.inner.load_checkpoint()
    }

    fn put_object(&self, path: &str, bytes: Vec<u8>) -> CoreResult<()> {
        self.inner.put_object(path, bytes)
    }

    fn get_object(&self, path: &str) -> CoreResult<Option<Vec<u8>>> {
        self.inner.get_object(path)
    }

    fn delete_objects(&self, prefix: &str) -> CoreResult<()> {
        self.inner.delete_objects(prefix)
    }
}
