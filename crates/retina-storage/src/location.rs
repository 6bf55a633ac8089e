//! Turning a user-given data location into an object store.

use std::sync::Arc;

use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::ObjectStore;
use url::Url;

use crate::store::StorageError;

/// Opens `location`: a local directory (created if missing) or a URL that
/// `object_store` understands (`file:///...`, `memory:///`, `s3://...` when built
/// with that backend). Returns the store and the prefix inside it.
pub fn open_object_store(location: &str) -> Result<(Arc<dyn ObjectStore>, Path), StorageError> {
    let bad = |reason: String| StorageError::Location { location: location.to_string(), reason };
    if location.contains("://") {
        let url = Url::parse(location).map_err(|e| bad(e.to_string()))?;
        if url.scheme() == "file" {
            let dir = url.to_file_path().map_err(|()| bad("not a local path".into()))?;
            return open_local(&dir).map_err(|e| bad(e.to_string()));
        }
        let (store, prefix) = object_store::parse_url(&url).map_err(|e| bad(e.to_string()))?;
        return Ok((Arc::from(store), prefix));
    }
    open_local(std::path::Path::new(location)).map_err(|e| bad(e.to_string()))
}

fn open_local(dir: &std::path::Path) -> Result<(Arc<dyn ObjectStore>, Path), Box<dyn std::error::Error>> {
    std::fs::create_dir_all(dir)?;
    let store = LocalFileSystem::new_with_prefix(dir)?;
    Ok((Arc::new(store), Path::default()))
}
