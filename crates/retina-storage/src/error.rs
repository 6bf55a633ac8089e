//! Errors of the lake storage, each naming the location or object it concerns.

use retina_core::CoreError;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("data location {location}: {reason}")]
    Location { location: String, reason: String },
    #[error("object store, {path}: {source}")]
    ObjectStore { path: String, source: object_store::Error },
    #[error("parquet file {path}: {source}")]
    Parquet { path: String, source: parquet::errors::ParquetError },
    #[error("catalog manifest: {reason}")]
    Manifest { reason: String },
    #[error("checkpoint: {reason}")]
    Checkpoint { reason: String },
    #[error("data dir {dir} is in use by another Retina process (it holds {lock_file}); stop it first")]
    Locked { dir: String, lock_file: String },
    #[error("cannot start the storage I/O runtime: {0}")]
    Runtime(std::io::Error),
}

impl From<StorageError> for CoreError {
    fn from(error: StorageError) -> Self {
        CoreError::Store(Box::new(error))
    }
}
