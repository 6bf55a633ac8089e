//! `ParquetLakeStore`: the lake store (every capability trait of
//! `retina_core::storage`) of the embedded default and of object storage.

use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use futures::TryStreamExt;
use retina_core::catalog::{CatalogManifest, DataFileMeta};
use retina_core::checkpoint::CheckpointManifest;
use retina_core::storage::{CatalogStore, CheckpointStore, DataFiles, DecodedRows, PageBound, StoredFile};
use retina_core::{CoreError, CoreResult, FileId, TableSchema, Ts};
use tokio::runtime::Runtime;

use crate::error::StorageError;
use crate::{checkpoint_files, layout, location, manifest, parquet_files};

/// Data files as `tables/<table>/<file id>.parquet` and the catalog manifest as
/// `catalog/manifest.json`, under one object-store prefix.
///
/// The engine's threads are synchronous; object-store calls run on a small private
/// tokio runtime, so callers must not be inside an async context.
pub struct ParquetLakeStore {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    runtime: Runtime,
    /// Held for the store's life: one writer process per local data dir.
    _lock: Option<location::DataDirLock>,
}

impl ParquetLakeStore {
    /// Opens a local directory or object-store URL (see [`location::open_object_store`]).
    /// A local directory is locked for this process (see [`location::DataDirLock`]).
    pub fn open(location: &str) -> Result<Self, StorageError> {
        let (store, prefix, lock) = location::open_object_store(location)?;
        let mut opened = Self::with_store(store, prefix)?;
        opened._lock = lock;
        Ok(opened)
    }

    pub fn with_store(store: Arc<dyn ObjectStore>, prefix: Path) -> Result<Self, StorageError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("retina-storage-io")
            .enable_all()
            .build()
            .map_err(StorageError::Runtime)?;
        Ok(Self { store, prefix, runtime, _lock: None })
    }

    fn path(&self, relative: &str) -> Path {
        Path::from(format!("{}/{relative}", self.prefix).trim_start_matches('/'))
    }

    /// The object path of a table's data file.
    pub fn data_file_path(table: &TableSchema, file_id: FileId) -> String {
        layout::data_file_path(table, file_id)
    }

    fn put(&self, relative: &str, bytes: Vec<u8>) -> Result<(), StorageError> {
        let path = self.path(relative);
        self.runtime
            .block_on(self.store.put(&path, PutPayload::from(bytes)))
            .map(|_| ())
            .map_err(|source| StorageError::ObjectStore { path: path.to_string(), source })
    }

    /// Writes `batches` as a Parquet file at `path` (atomically, like every put).
    fn put_parquet(&self, path: String, table: &TableSchema, batches: &[RecordBatch]) -> Result<StoredFile, StorageError> {
        let bytes = parquet_files::encode(&table.stored_schema(), batches)
            .map_err(|source| StorageError::Parquet { path: path.clone(), source })?;
        let size_bytes = bytes.len() as u64;
        self.put(&path, bytes)?;
        Ok(StoredFile { path, size_bytes })
    }

    /// Deletes the objects under the folder `relative` whose path (relative to the
    /// lake) `doomed` picks.
    fn delete_under(&self, relative: &str, doomed: impl Fn(&str) -> bool) -> Result<(), StorageError> {
        let prefix = self.path(relative);
        let locations: Vec<Path> = self
            .runtime
            .block_on(async { self.store.list(Some(&prefix)).map_ok(|meta| meta.location).try_collect::<Vec<_>>().await })
            .map_err(|source| StorageError::ObjectStore { path: prefix.to_string(), source })?;
        for location in locations {
            let relative = location.as_ref().strip_prefix(self.prefix.as_ref()).unwrap_or(location.as_ref());
            if !doomed(relative.trim_start_matches('/')) {
                continue;
            }
            match self.runtime.block_on(self.store.delete(&location)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(source) => return Err(StorageError::ObjectStore { path: location.to_string(), source }),
            }
        }
        Ok(())
    }

    fn get(&self, relative: &str) -> Result<Option<Bytes>, StorageError> {
        let path = self.path(relative);
        let result = self.runtime.block_on(async {
            match self.store.get(&path).await {
                Ok(found) => found.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(error),
            }
        });
        result.map_err(|source| StorageError::ObjectStore { path: path.to_string(), source })
    }
}

impl DataFiles for ParquetLakeStore {
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        Ok(self.put_parquet(Self::data_file_path(table, file_id), table, batches)?)
    }

    fn read_file(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize], bounds: &[PageBound]) -> CoreResult<DecodedRows> {
        let bytes = self.get(&file.path)?.ok_or_else(|| {
            CoreError::Storage(format!("data file {} of the catalog is missing from storage", file.path))
        })?;
        let (batches, selected) = parquet_files::decode_pruned(bytes, table, columns, bounds)
            .map_err(|source| StorageError::Parquet { path: file.path.clone(), source })?;
        Ok(DecodedRows { batches, selected })
    }

    fn delete_file(&self, path: &str) -> CoreResult<()> {
        let location = self.path(path);
        match self.runtime.block_on(self.store.delete(&location)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(StorageError::ObjectStore { path: location.to_string(), source }.into()),
        }
    }

}

impl CatalogStore for ParquetLakeStore {
    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()> {
        self.put(manifest::MANIFEST_PATH, manifest::encode(catalog)?)?;
        Ok(())
    }

    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        match self.get(manifest::MANIFEST_PATH)? {
            Some(bytes) => Ok(Some(manifest::decode(&bytes)?)),
            None => Ok(None),
        }
    }

}

impl CheckpointStore for ParquetLakeStore {
    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile> {
        Ok(self.put_parquet(checkpoint_files::segment_path(table, file_id, first_row, ts), table, batches)?)
    }

    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()> {
        self.put(checkpoint_files::LATEST_PATH, checkpoint_files::encode(checkpoint)?)?;
        // Only now may segments no checkpoint references go: the new one is in place.
        let referenced = checkpoint.referenced_paths();
        Ok(self.delete_under(checkpoint_files::SEGMENTS_FOLDER, |relative| !referenced.contains(relative))?)
    }

    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        match self.get(checkpoint_files::LATEST_PATH)? {
            Some(bytes) => Ok(Some(checkpoint_files::decode(&bytes)?)),
            None => Ok(None),
        }
    }

}
