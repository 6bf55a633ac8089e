//! Blocking calls into an object store, each error naming the lake, the operation
//! and the object.
//!
//! The engine's threads are synchronous; object-store calls run on a small private
//! tokio runtime, so callers must not be inside an async context. Retries of
//! transient failures (5xx, throttling, connection resets) are object_store's own,
//! with exponential backoff (its default `RetryConfig`: up to 10 retries within 3
//! minutes); what still fails here is permanent, or lasted past that.

use bytes::Bytes;
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use std::sync::Arc;
use tokio::runtime::Runtime;

use crate::error::StorageError;

/// An object read with the version a conditional write of it must name.
pub(crate) struct Versioned {
    pub bytes: Bytes,
    pub version: UpdateVersion,
}

/// One lake's object store, its prefix and the runtime that drives it.
pub(crate) struct ObjectIo {
    store: Arc<dyn ObjectStore>,
    prefix: Path,
    /// The location as the user gave it, secrets hidden: for error messages.
    location: String,
    /// The lake's root as an absolute URI (see `location::Opened::base_uri`).
    base_uri: String,
    runtime: Runtime,
}

impl ObjectIo {
    pub fn new(store: Arc<dyn ObjectStore>, prefix: Path, location: String, base_uri: String) -> Result<Self, StorageError> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("retina-storage-io")
            .enable_all()
            .build()
            .map_err(StorageError::Runtime)?;
        Ok(Self { store, prefix, location, base_uri, runtime })
    }

    pub fn location(&self) -> &str {
        &self.location
    }

    pub fn base_uri(&self) -> &str {
        &self.base_uri
    }

    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The object path of `relative` (a path under the lake's prefix).
    pub fn path(&self, relative: &str) -> Path {
        Path::from(format!("{}/{relative}", self.prefix).trim_start_matches('/'))
    }

    /// `location` relative to the lake's prefix.
    pub fn relative<'a>(&self, location: &'a Path) -> &'a str {
        let full = location.as_ref();
        full.strip_prefix(self.prefix.as_ref()).unwrap_or(full).trim_start_matches('/')
    }

    pub fn error(&self, operation: &'static str, path: &Path, source: object_store::Error) -> StorageError {
        StorageError::ObjectStore { location: self.location.clone(), operation, path: path.to_string(), source: Box::new(source) }
    }

    /// Writes `bytes` at `relative` under `mode`; returns the new object's version.
    /// Object-store puts are atomic: readers see the old object or the new one.
    pub fn put(&self, relative: &str, bytes: impl Into<PutPayload>, mode: PutMode) -> Result<UpdateVersion, object_store::Error> {
        let path = self.path(relative);
        let options = PutOptions::from(mode);
        self.runtime.block_on(self.store.put_opts(&path, bytes.into(), options)).map(UpdateVersion::from)
    }

    /// Creates `relative` holding `bytes` unless it exists. `Ok(false)`: another
    /// object is there. An object already holding exactly `bytes` counts as created:
    /// it is this writer's own earlier attempt, whose success reply was lost (a
    /// timeout after the store wrote it) before object_store or the caller retried.
    /// Reading that retry as another writer's commit stopped every later commit.
    pub fn create(&self, relative: &str, bytes: Vec<u8>) -> Result<bool, StorageError> {
        let payload = bytes::Bytes::from(bytes);
        match self.put(relative, payload.clone(), PutMode::Create) {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
                Ok(self.get(relative)?.is_some_and(|found| found.bytes == payload))
            }
            Err(source) => Err(self.error("creating", &self.path(relative), source)),
        }
    }

    /// [`Self::put`] that overwrites, with the error named.
    pub fn overwrite(&self, relative: &str, bytes: impl Into<PutPayload>) -> Result<(), StorageError> {
        self.put(relative, bytes, PutMode::Overwrite).map(|_| ()).map_err(|source| self.error("writing", &self.path(relative), source))
    }

    /// The object at `relative` and its version, `None` when there is none.
    pub fn get(&self, relative: &str) -> Result<Option<Versioned>, StorageError> {
        let path = self.path(relative);
        let result = self.runtime.block_on(async {
            match self.store.get(&path).await {
                Ok(found) => {
                    let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
                    found.bytes().await.map(|bytes| Some(Versioned { bytes, version }))
                }
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(error) => Err(error),
            }
        });
        result.map_err(|source| self.error("reading", &path, source))
    }

    /// The size in bytes of the object at `relative`.
    pub fn size(&self, relative: &str) -> Result<u64, StorageError> {
        let path = self.path(relative);
        self.runtime.block_on(self.store.head(&path)).map(|meta| meta.size).map_err(|source| self.error("reading the size of", &path, source))
    }

    /// Deletes `relative`; a missing object is not an error.
    pub fn delete(&self, relative: &str) -> Result<(), StorageError> {
        let path = self.path(relative);
        match self.runtime.block_on(self.store.delete(&path)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(source) => Err(self.error("deleting", &path, source)),
        }
    }

    /// Every object under the folder `relative`, recursively, as relative paths.
    pub fn list(&self, relative: &str) -> Result<Vec<String>, StorageError> {
        let prefix = self.path(relative);
        let found: Vec<Path> = self
            .runtime
            .block_on(async { self.store.list(Some(&prefix)).map_ok(|meta| meta.location).try_collect::<Vec<_>>().await })
            .map_err(|source| self.error("listing", &prefix, source))?;
        Ok(found.iter().map(|location| self.relative(location).to_string()).collect())
    }

    /// The objects directly in the folder `relative` (not in its subfolders).
    pub fn list_folder(&self, relative: &str) -> Result<Vec<String>, StorageError> {
        let prefix = self.path(relative);
        let listed = self
            .runtime
            .block_on(self.store.list_with_delimiter(Some(&prefix)))
            .map_err(|source| self.error("listing", &prefix, source))?;
        Ok(listed.objects.iter().map(|meta| self.relative(&meta.location).to_string()).collect())
    }
}
