//! Turning a user-given data location into an object store.

use std::sync::Arc;

use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::ObjectStore;
use url::Url;

use crate::error::StorageError;

/// Name of the lock file in a local data dir.
pub const LOCK_FILE: &str = "retina.lock";

/// An exclusive lock on a local data dir, released when dropped (or when the process
/// dies: it is an OS file lock, so a crashed process never leaves it stale).
pub struct DataDirLock {
    _file: std::fs::File,
}

type Opened = (Arc<dyn ObjectStore>, Path, Option<DataDirLock>);

/// Opens `location`: a local directory (created if missing, and locked) or a URL that
/// `object_store` understands (`file:///...`, `memory:///`, `s3://...` when built
/// with that backend). Returns the store, the prefix inside it and the lock.
pub fn open_object_store(location: &str) -> Result<Opened, StorageError> {
    let bad = |reason: String| StorageError::Location { location: location.to_string(), reason };
    if location.contains("://") {
        let url = Url::parse(location).map_err(|e| bad(e.to_string()))?;
        if url.scheme() == "file" {
            let dir = url.to_file_path().map_err(|()| bad("not a local path".into()))?;
            return open_local(&dir, location);
        }
        let (store, prefix) = object_store::parse_url(&url).map_err(|e| bad(e.to_string()))?;
        return Ok((Arc::from(store), prefix, None));
    }
    open_local(std::path::Path::new(location), location)
}

fn open_local(dir: &std::path::Path, location: &str) -> Result<Opened, StorageError> {
    let bad = |reason: String| StorageError::Location { location: location.to_string(), reason };
    std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| bad(format!("cannot create {LOCK_FILE}: {e}")))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(StorageError::Locked { dir: dir.display().to_string(), lock_file: dir.join(LOCK_FILE).display().to_string() });
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(bad(format!("cannot lock {LOCK_FILE}: {e}"))),
    }
    let store = LocalFileSystem::new_with_prefix(dir).map_err(|e| bad(e.to_string()))?;
    Ok((Arc::new(store), Path::default(), Some(DataDirLock { _file: file })))
}
