//! The interface to lake storage. The engine depends on this trait only, so the
//! core builds without Parquet; `retina-storage` implements it with Parquet files
//! through object_store, and [`MemoryLakeStore`] keeps batches in memory.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use parking_lot::Mutex;

use crate::catalog::{CatalogManifest, DataFileMeta};
use crate::checkpoint::CheckpointManifest;
use crate::error::{CoreError, CoreResult};
use crate::schema::TableSchema;
use crate::types::{FileId, Ts};
use crate::visibility::DeleteBitmap;

/// Where a written file ended up.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredFile {
    pub path: String,
    pub size_bytes: u64,
}

/// Inclusive bounds on the values of one integer-encoded column (integers, dates,
/// times, timestamps: Parquet INT32/INT64) that a query's filter implies, e.g.
/// `o_id BETWEEN 10 AND 20` or `d_id = 3`. `None` is unbounded on that side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageBound {
    /// Index into the table's stored columns.
    pub column: usize,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl PageBound {
    /// Whether a page whose values lie in `min..=max` may hold a value in bounds.
    pub fn may_match(&self, min: i64, max: i64) -> bool {
        self.min.is_none_or(|low| max >= low) && self.max.is_none_or(|high| min <= high)
    }
}

pub trait LakeStore: Send + Sync {
    /// Writes `batches` (stored schema: user columns + `_create_ts`) as one data file
    /// with a single row group, under a name derived from `file_id`. A failed write
    /// leaves no visible file.
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile>;

    /// Reads the columns `columns` (indices into `table`'s stored schema, ascending)
    /// of a file, in row order. With `skip`, rows whose bit is set are left out (the
    /// visibility mask, applied while decoding where the format allows it). A file
    /// written under another version of the schema is conformed to `table`
    /// ([`crate::schema_evolution::StoredColumns`]): added columns read as NULL.
    fn read_file(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        skip: Option<&DeleteBitmap>,
    ) -> CoreResult<Vec<RecordBatch>>;

    /// [`Self::read_file`] that may also leave out whole pages whose statistics (the
    /// Parquet page index) prove that no row satisfies every bound in `bounds`.
    /// Returns the batches and how many rows were skipped that way. An optimization
    /// only: the caller still filters what comes back. The default skips nothing.
    fn read_file_pruned(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        skip: Option<&DeleteBitmap>,
        bounds: &[PageBound],
    ) -> CoreResult<(Vec<RecordBatch>, u64)> {
        let _ = bounds;
        Ok((self.read_file(table, file, columns, skip)?, 0))
    }

    /// Deletes a data file that no catalog, checkpoint or query references any more.
    fn delete_file(&self, path: &str) -> CoreResult<()>;

    /// Replaces the catalog manifest atomically.
    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()>;

    /// The last saved manifest, if any.
    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>>;

    /// Writes rows `first_row ..` of a write buffer's file as a segment of the
    /// checkpoint at `ts` (readable back with [`Self::read_file`]). Segment paths are
    /// never reused, so a segment an older checkpoint references is never rewritten.
    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile>;

    /// Makes `checkpoint` the latest one, atomically, then removes the checkpoint
    /// objects it does not reference. Every segment it names must already be written.
    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()>;

    /// The latest complete checkpoint, if any.
    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>>;

    /// Stores an opaque object at `path` (atomically, like every write): the
    /// materialized visibility of long queries. Stores that cannot hold objects say so.
    fn put_object(&self, path: &str, _bytes: Vec<u8>) -> CoreResult<()> {
        Err(CoreError::Storage(format!("this lake store cannot hold objects (writing {path})")))
    }

    /// The object at `path`, if any.
    fn get_object(&self, path: &str) -> CoreResult<Option<Vec<u8>>> {
        Err(CoreError::Storage(format!("this lake store cannot hold objects (reading {path})")))
    }

    /// Deletes every object under the folder `prefix` (nothing if there is none).
    fn delete_objects(&self, prefix: &str) -> CoreResult<()> {
        Err(CoreError::Storage(format!("this lake store cannot hold objects (deleting {prefix})")))
    }
}

/// A lake store in memory, for tests and throwaway runs.
#[derive(Default)]
pub struct MemoryLakeStore {
    files: Mutex<HashMap<String, Vec<RecordBatch>>>,
    objects: Mutex<HashMap<String, Vec<u8>>>,
    catalog: Mutex<Option<CatalogManifest>>,
    checkpoint: Mutex<Option<CheckpointManifest>>,
}

impl MemoryLakeStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The paths of the objects held ([`LakeStore::put_object`]), sorted.
    pub fn object_paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = self.objects.lock().keys().cloned().collect();
        paths.sort();
        paths
    }
}

impl LakeStore for MemoryLakeStore {
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        let path = format!("{}/{file_id}.mem", table.name());
        let size_bytes = batches.iter().map(|b| b.get_array_memory_size() as u64).sum();
        self.files.lock().insert(path.clone(), batches.to_vec());
        Ok(StoredFile { path, size_bytes })
    }

    fn read_file(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        skip: Option<&DeleteBitmap>,
    ) -> CoreResult<Vec<RecordBatch>> {
        let files = self.files.lock();
        let batches = files
            .get(&file.path)
            .ok_or_else(|| CoreError::Storage(format!("file {} does not exist", file.path)))?;
        let projected = batches
            .iter()
            .map(|b| {
                let plan = crate::schema_evolution::StoredColumns::plan(table, b.num_columns(), columns);
                plan.assemble(table, columns, &b.project(plan.physical())?)
            })
            .collect::<CoreResult<Vec<_>>>()?;
        match skip {
            Some(deleted) => crate::scan::drop_deleted_rows(&projected, deleted),
            None => Ok(projected),
        }
    }

    fn delete_file(&self, path: &str) -> CoreResult<()> {
        self.files.lock().remove(path);
        Ok(())
    }

    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()> {
        *self.catalog.lock() = Some(catalog.clone());
        Ok(())
    }

    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        Ok(self.catalog.lock().clone())
    }

    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile> {
        let path = format!("checkpoints/segments/{}/{file_id}-{first_row}-{ts}.mem", table.name());
        self.files.lock().insert(path.clone(), batches.to_vec());
        Ok(StoredFile { path, size_bytes: 0 })
    }

    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()> {
        *self.checkpoint.lock() = Some(checkpoint.clone());
        let referenced = checkpoint.referenced_paths();
        self.files.lock().retain(|path, _| !path.starts_with("checkpoints/") || referenced.contains(path.as_str()));
        Ok(())
    }

    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        Ok(self.checkpoint.lock().clone())
    }

    fn put_object(&self, path: &str, bytes: Vec<u8>) -> CoreResult<()> {
        self.objects.lock().insert(path.to_string(), bytes);
        Ok(())
    }

    fn get_object(&self, path: &str) -> CoreResult<Option<Vec<u8>>> {
        Ok(self.objects.lock().get(path).cloned())
    }

    fn delete_objects(&self, prefix: &str) -> CoreResult<()> {
        let folder = format!("{}/", prefix.trim_end_matches('/'));
        self.objects.lock().retain(|path, _| !path.starts_with(&folder));
        Ok(())
    }
}
