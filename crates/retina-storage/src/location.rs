//! Turning a user-given data location into an object store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::ObjectStore;
use url::Url;

use crate::error::StorageError;

/// Name of the lock file in a local data dir.
pub(crate) const LOCK_FILE: &str = "retina.lock";

/// An exclusive lock on a local data dir, released when dropped (or when the process
/// dies: it is an OS file lock, so a crashed process never leaves it stale).
pub struct DataDirLock {
    _file: std::fs::File,
}

/// A location made into an object store, before any lock or lease is taken.
pub(crate) struct Opened {
    pub store: Arc<dyn ObjectStore>,
    pub prefix: Path,
    /// The directory, for a local location (locked by writers).
    pub local_dir: Option<PathBuf>,
    /// Whether writers need the lease object (a shared object store).
    pub needs_lease: bool,
    /// The lease's duration (URL option `lease_seconds`).
    pub lease: Duration,
    /// The lake's root as an absolute URI without options (`file:///abs/dir`,
    /// `s3://bucket/prefix`): what formats that name files by URI (Iceberg) write.
    pub base_uri: String,
}

/// Opens `location` (see [`open`]) as an object store and the prefix inside it,
/// without locking it.
pub fn open_object_store(location: &str) -> Result<(Arc<dyn ObjectStore>, Path), StorageError> {
    open(location, true).map(|opened| (opened.store, opened.prefix))
}

/// Opens `location`: a local directory (created if missing when `create`) or a URL:
/// `file:///...`, `memory:///`, `s3://BUCKET/PREFIX` (AWS and S3-compatible
/// services), `gs://BUCKET/PREFIX`, `az://CONTAINER/PREFIX` (also `abfs[s]://`,
/// `azure://`). A cloud store is configured from the standard environment
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`,
/// `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP=true`; `GOOGLE_*`; `AZURE_*`) and then from
/// the URL's query options, which take the same keys with or without the prefix
/// (`?endpoint=http://127.0.0.1:9000&allow_http=true&region=us-east-1`), plus
/// Retina's own `lease_seconds` (how long a writer's lease lasts unless renewed).
pub(crate) fn open(location: &str, create: bool) -> Result<Opened, StorageError> {
    let bad = |reason: String| StorageError::Location { location: redacted(location), reason };
    if !is_url(location) {
        return open_local(std::path::Path::new(location), location, create);
    }
    let mut url = Url::parse(location).map_err(|e| bad(e.to_string()))?;
    if url.scheme() == "file" {
        let dir = url.to_file_path().map_err(|()| bad("not a local path".into()))?;
        return open_local(&dir, location, create);
    }
    let lease = take_lease_option(&mut url).map_err(bad)?;
    let needs_lease = url.scheme() != "memory";
    let base_uri = format!("{}://{}{}", url.scheme(), url.host_str().unwrap_or_default(), url.path()).trim_end_matches('/').to_string();
    if let Some(store) = open_cloud(&url).map_err(bad)? {
        let prefix = Path::from_url_path(url.path()).map_err(|e| bad(e.to_string()))?;
        return Ok(Opened { store, prefix, local_dir: None, needs_lease, lease, base_uri });
    }
    let (store, prefix) = object_store::parse_url(&url).map_err(|e| bad(e.to_string()))?;
    Ok(Opened { store: Arc::from(store), prefix, local_dir: None, needs_lease, lease, base_uri })
}

/// Removes Retina's `lease_seconds` from `url`'s options (the backends would refuse
/// it) and returns the lease duration.
fn take_lease_option(url: &mut Url) -> Result<Duration, String> {
    let mut lease = crate::lease::DEFAULT_LEASE;
    let mut kept = Vec::new();
    for (key, value) in url.query_pairs() {
        if key.eq_ignore_ascii_case("lease_seconds") {
            let seconds: f64 = value.parse().map_err(|_| format!("lease_seconds={value} is not a number of seconds"))?;
            if !(0.3..=3600.0).contains(&seconds) {
                return Err(format!("lease_seconds={value} is outside 0.3 to 3600"));
            }
            lease = Duration::from_secs_f64(seconds);
        } else {
            kept.push((key.into_owned(), value.into_owned()));
        }
    }
    if kept.is_empty() {
        url.set_query(None);
    } else {
        url.query_pairs_mut().clear().extend_pairs(kept);
    }
    Ok(lease)
}

/// A cloud object store for `url` (`None` for a scheme that is not one), from the
/// environment and the URL's query options. Retries of transient failures (5xx,
/// throttling, connection resets) are object_store's own, with backoff.
fn open_cloud(url: &Url) -> Result<Option<Arc<dyn ObjectStore>>, String> {
    use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
    use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
    use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};

    let options: Vec<(String, String)> = url.query_pairs().map(|(k, v)| (k.to_ascii_lowercase(), v.into_owned())).collect();
    // The bucket (container) URL without path or options: the builders read the
    // bucket from it, the prefix is the path.
    let bucket = format!("{}://{}", url.scheme(), url.host_str().unwrap_or_default());
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        "s3" | "s3a" => {
            let mut builder = AmazonS3Builder::from_env().with_url(bucket);
            for (key, value) in options {
                builder = builder.with_config(config_key::<AmazonS3ConfigKey>(&key, "aws_")?, value);
            }
            Arc::new(builder.build().map_err(|e| e.to_string())?)
        }
        "gs" => {
            let mut builder = GoogleCloudStorageBuilder::from_env().with_url(bucket);
            for (key, value) in options {
                builder = builder.with_config(config_key::<GoogleConfigKey>(&key, "google_")?, value);
            }
            Arc::new(builder.build().map_err(|e| e.to_string())?)
        }
        "az" | "azure" | "abfs" | "abfss" | "adl" => {
            let mut builder = MicrosoftAzureBuilder::from_env().with_url(url.as_str().split('?').next().unwrap_or_default());
            for (key, value) in options {
                builder = builder.with_config(config_key::<AzureConfigKey>(&key, "azure_")?, value);
            }
            Arc::new(builder.build().map_err(|e| e.to_string())?)
        }
        _ => return Ok(None),
    };
    Ok(Some(store))
}

/// A query option as a backend's config key, with or without its prefix
/// (`endpoint` or `aws_endpoint`).
fn config_key<K: std::str::FromStr>(key: &str, prefix: &str) -> Result<K, String> {
    key.parse::<K>()
        .or_else(|_| format!("{prefix}{key}").parse::<K>())
        .map_err(|_| format!("unknown option {key:?} in the URL (the object_store configuration keys, e.g. {prefix}endpoint)"))
}

/// Whether `location` is a URL (an object store, or `file://`), not a local path:
/// callers create only local directories.
pub fn is_url(location: &str) -> bool {
    location.contains("://")
}

/// `location` with its credentials hidden, for error messages and status output
/// (the one redaction every command uses: [`retina_core::redact`]).
pub fn redacted(location: &str) -> String {
    retina_core::redact::redacted(location)
}

fn open_local(dir: &std::path::Path, location: &str, create: bool) -> Result<Opened, StorageError> {
    let bad = |reason: String| StorageError::Location { location: location.to_string(), reason };
    if create {
        std::fs::create_dir_all(dir).map_err(|e| bad(e.to_string()))?;
    } else if !dir.is_dir() {
        return Err(bad("no such directory".into()));
    }
    let store = LocalFileSystem::new_with_prefix(dir).map_err(|e| bad(e.to_string()))?;
    let absolute = std::fs::canonicalize(dir).map_err(|e| bad(e.to_string()))?;
    let base_uri = Url::from_directory_path(&absolute)
        .map_err(|()| bad("not an absolute path".into()))?
        .to_string()
        .trim_end_matches('/')
        .to_string();
    Ok(Opened {
        store: Arc::new(store),
        prefix: Path::default(),
        local_dir: Some(dir.to_path_buf()),
        needs_lease: false,
        lease: Duration::ZERO,
        base_uri,
    })
}

/// Locks the local data dir `dir` for this process.
pub(crate) fn lock_local(dir: &std::path::Path) -> Result<DataDirLock, StorageError> {
    let bad = |reason: String| StorageError::Location { location: dir.display().to_string(), reason };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(LOCK_FILE))
        .map_err(|e| bad(format!("cannot create {LOCK_FILE}: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(DataDirLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(StorageError::Locked { dir: dir.display().to_string(), lock_file: dir.join(LOCK_FILE).display().to_string() })
        }
        Err(std::fs::TryLockError::Error(e)) => Err(bad(format!("cannot lock {LOCK_FILE}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_in_url_options_are_hidden_and_other_options_kept() {
        let shown = redacted("s3://b/lake?endpoint=http://x:9000&aws_secret_access_key=s3cr3t&session_token=t0k&region=eu");
        assert_eq!(shown, "s3://b/lake?endpoint=http://x:9000&aws_secret_access_key=***&session_token=***&region=eu");
        assert_eq!(redacted("/data/dir"), "/data/dir");
    }

    #[test]
    fn the_lease_option_is_taken_out_and_checked() {
        let mut url = Url::parse("s3://b/lake?endpoint=http://x:9000&lease_seconds=2.5").expect("url");
        assert_eq!(take_lease_option(&mut url), Ok(Duration::from_millis(2500)));
        assert_eq!(url.as_str(), "s3://b/lake?endpoint=http%3A%2F%2Fx%3A9000");
        let mut url = Url::parse("s3://b/lake?lease_seconds=0").expect("url");
        assert!(take_lease_option(&mut url).expect_err("too short").contains("lease_seconds=0"));
        let mut url = Url::parse("s3://b/lake").expect("url");
        assert_eq!(take_lease_option(&mut url), Ok(crate::lease::DEFAULT_LEASE));
    }

    #[test]
    fn options_take_keys_with_or_without_the_backend_prefix() {
        use object_store::aws::AmazonS3ConfigKey;
        assert!(config_key::<AmazonS3ConfigKey>("endpoint", "aws_").is_ok());
        assert!(config_key::<AmazonS3ConfigKey>("aws_region", "aws_").is_ok());
        let error = config_key::<AmazonS3ConfigKey>("colour", "aws_").err().expect("unknown");
        assert!(error.contains("colour"), "{error}");
    }
}
