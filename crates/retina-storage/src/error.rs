//! Errors of the lake storage, each naming the location or object it concerns.

use retina_core::CoreError;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("data location {location}: {reason}")]
    Location { location: String, reason: String },
    #[error("lake {location}: {operation} {path}: {source}")]
    ObjectStore { location: String, operation: &'static str, path: String, source: Box<object_store::Error> },
    #[error("lake {location}: writing {path} directly: {source}")]
    DirectWrite { location: String, path: String, source: std::io::Error },
    #[error("parquet file {path}: {source}")]
    Parquet { path: String, source: parquet::errors::ParquetError },
    #[error("catalog manifest: {reason}")]
    Manifest { reason: String },
    #[error("checkpoint: {reason}")]
    Checkpoint { reason: String },
    #[error("data dir {dir} is in use by another Retina process (it holds {lock_file}); stop it first")]
    Locked { dir: String, lock_file: String },
    #[error(
        "lake {location}: another writer committed {what} version {version} first; this writer stops \
         rather than overwrite it (are two writers running on one lake?)"
    )]
    CommitRace { location: String, what: &'static str, version: u64 },
    #[error("lake {location}: the latest {what} kept being replaced while it was read ({attempts} attempts)")]
    Unsettled { location: String, what: &'static str, attempts: usize },
    #[error("lake {location} is in use by another Retina writer: {holder} holds its lease until {expires}; stop it first (a crashed writer's lease runs out by itself)")]
    Leased { location: String, holder: String, expires: String },
    #[error("lake {location}: this writer lost its lease ({reason}); it commits nothing more")]
    LeaseLost { location: String, reason: String },
    #[error("lake {location}: lease: {reason}")]
    Lease { location: String, reason: String },
    #[error("lake {location} is open read-only: {operation} is not allowed")]
    ReadOnly { location: String, operation: &'static str },
    #[error("publishing open tables: {reason}")]
    Publication { reason: String },
    #[error("publishing open tables: reading {path}: {source}")]
    PublicationRead { path: String, source: Box<CoreError> },
    #[error("cannot start the storage I/O runtime: {0}")]
    Runtime(std::io::Error),
}

impl From<StorageError> for CoreError {
    fn from(error: StorageError) -> Self {
        CoreError::Store(Box::new(error))
    }
}
