//! The single-writer lease of a lake on an object store, where there is no file
//! lock: the object `retina.lease` names its holder and an expiry, and the holder
//! renews it in the background.
//!
//! Acquiring creates the object (`PutMode::Create`: `If-None-Match: *` on S3) or,
//! when the holder's expiry has passed, replaces it naming the version read
//! (`PutMode::Update`: `If-Match: <ETag>`), so of two writers starting together
//! exactly one gets it. Renewal also names the version it last wrote; finding
//! another one means a writer took the lease over, and this one stops committing.
//!
//! Expiry is compared with each machine's wall clock, so writers on different
//! machines must keep their clocks within a fraction of the lease (NTP does).
//! Catalog and checkpoint commits create numbered versions exactly once
//! ([`crate::versioned`]), so even a writer that has not yet noticed it lost the
//! lease cannot overwrite a commit of the new holder.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::{PutMode, UpdateVersion};
use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};

use crate::error::StorageError;
use crate::io::ObjectIo;

/// Object path of the lease, under the lake's prefix.
pub const LEASE_PATH: &str = "retina.lease";

/// How long a lease lasts unless renewed (URL option `lease_seconds`); a crashed
/// writer's lake can be taken over after this.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(30);

#[derive(Clone, Debug, Serialize, Deserialize)]
struct LeaseRecord {
    owner: String,
    expires_at_ms: u64,
}

struct LeaseState {
    io: Arc<ObjectIo>,
    owner: String,
    duration: Duration,
    /// The version of the lease object this writer last wrote, and its expiry.
    held: Mutex<(UpdateVersion, u64)>,
    /// Why this writer may no longer commit, once it lost the lease.
    lost: Mutex<Option<String>>,
    stop: Mutex<bool>,
    wake: Condvar,
}

/// A held lease; released (deleted) when dropped.
pub struct Lease {
    state: Arc<LeaseState>,
    renewer: Option<JoinHandle<()>>,
    /// The holder whose expired lease this one replaced, if any.
    pub took_over_from: Option<String>,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// A lease time for people: UTC, and how far from now.
fn shown_time(ms: u64) -> String {
    let seconds_from_now = (ms as i64 - now_ms() as i64) as f64 / 1000.0;
    let utc = chrono::DateTime::from_timestamp_millis(ms as i64)
        .map_or_else(|| format!("{ms} ms since the epoch"), |time| time.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string());
    format!("{utc} ({seconds_from_now:.1} s from now)")
}

/// Who this process is, for the holder field: host, pid and a per-start nonce.
fn owner_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown-host".into());
    let nonce = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host} pid {} ({nonce:08x})", std::process::id())
}

impl Lease {
    /// Takes the lease of the lake in `io`, or fails naming the writer that holds it
    /// and when its lease expires.
    pub fn acquire(io: Arc<ObjectIo>, duration: Duration) -> Result<Self, StorageError> {
        let owner = owner_id();
        let encode = |expires_at_ms| {
            serde_json::to_vec(&LeaseRecord { owner: owner.clone(), expires_at_ms }).map_err(|e| StorageError::Lease {
                location: io.location().to_string(),
                reason: e.to_string(),
            })
        };
        // A lost race (another writer created or took it between our read and write)
        // is read again: its new holder is then named.
        for _ in 0..3 {
            let expires_at_ms = now_ms() + duration.as_millis() as u64;
            let (mode, previous) = match io.get(LEASE_PATH)? {
                None => (PutMode::Create, None),
                Some(found) => {
                    let record: LeaseRecord = serde_json::from_slice(&found.bytes).map_err(|e| StorageError::Lease {
                        location: io.location().to_string(),
                        reason: format!("{LEASE_PATH} is not a lease record ({e}); if no writer runs, delete it"),
                    })?;
                    if record.expires_at_ms > now_ms() {
                        return Err(StorageError::Leased {
                            location: io.location().to_string(),
                            holder: record.owner,
                            expires: shown_time(record.expires_at_ms),
                        });
                    }
                    (PutMode::Update(found.version), Some(record.owner))
                }
            };
            match io.put(LEASE_PATH, encode(expires_at_ms)?, mode) {
                Ok(version) => {
                    let took_over_from = previous;
                    let state = Arc::new(LeaseState {
                        io,
                        owner,
                        duration,
                        held: Mutex::new((version, expires_at_ms)),
                        lost: Mutex::new(None),
                        stop: Mutex::new(false),
                        wake: Condvar::new(),
                    });
                    let renewing = Arc::clone(&state);
                    let renewer = std::thread::Builder::new()
                        .name("retina-lease".into())
                        .spawn(move || renew_until_stopped(&renewing))
                        .map_err(|e| StorageError::Lease {
                            location: state.io.location().to_string(),
                            reason: format!("cannot start the renewal thread: {e}"),
                        })?;
                    return Ok(Self { state, renewer: Some(renewer), took_over_from });
                }
                Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => continue,
                Err(source) => return Err(io.error("taking the lease", &io.path(LEASE_PATH), source)),
            }
        }
        Err(StorageError::Lease { location: io.location().to_string(), reason: "other writers keep taking the lease; try again".into() })
    }

    /// Fails when this writer may no longer commit: another took the lease over, or
    /// renewals failed until it expired.
    pub fn check(&self) -> Result<(), StorageError> {
        let state = &self.state;
        let reason = state.lost.lock().clone().or_else(|| {
            let expires = state.held.lock().1;
            (expires <= now_ms()).then(|| format!("it expired at {} before a renewal succeeded", shown_time(expires)))
        });
        match reason {
            Some(reason) => Err(StorageError::LeaseLost { location: state.io.location().to_string(), reason }),
            None => Ok(()),
        }
    }
}

fn renew_until_stopped(state: &LeaseState) {
    let period = state.duration / 3;
    loop {
        {
            let mut stop = state.stop.lock();
            if !*stop {
                state.wake.wait_for(&mut stop, period);
            }
            if *stop || state.lost.lock().is_some() {
                return;
            }
        }
        let expires_at_ms = now_ms() + state.duration.as_millis() as u64;
        let record = LeaseRecord { owner: state.owner.clone(), expires_at_ms };
        let Ok(bytes) = serde_json::to_vec(&record) else { continue };
        let version = state.held.lock().0.clone();
        match state.io.put(LEASE_PATH, bytes, PutMode::Update(version)) {
            Ok(version) => *state.held.lock() = (version, expires_at_ms),
            Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
                // An earlier renewal may have landed with its reply lost: then the
                // record is still ours, under a version we did not learn. Adopt it.
                let found = state.io.get(LEASE_PATH).ok().flatten();
                let record = found.as_ref().and_then(|found| serde_json::from_slice::<LeaseRecord>(&found.bytes).ok());
                match (found, record) {
                    (Some(found), Some(record)) if record.owner == state.owner => {
                        *state.held.lock() = (found.version, record.expires_at_ms);
                    }
                    _ => *state.lost.lock() = Some("another writer replaced it (it took the lease over)".into()),
                }
            }
            // Transient: `check` refuses commits once the held expiry passes.
            Err(_) => {}
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self.state.stop.lock() = true;
        self.state.wake.notify_all();
        if let Some(renewer) = self.renewer.take() {
            let _ = renewer.join();
        }
        // Release only our own lease: a writer that took over keeps its own (the
        // delete is not conditional, so the owner is read just before).
        if self.state.lost.lock().is_some() {
            return;
        }
        let ours = self.state.io.get(LEASE_PATH).ok().flatten().and_then(|found| serde_json::from_slice::<LeaseRecord>(&found.bytes).ok());
        if ours.is_some_and(|record| record.owner == self.state.owner) {
            let _ = self.state.io.delete(LEASE_PATH);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore, PutMultipartOptions,
        PutOptions, PutPayload, PutResult,
    };

    /// An in-memory store whose next put, once armed, is written but answered with
    /// an error: a reply lost on the network after the store applied the request.
    #[derive(Debug)]
    struct LosesOneReply {
        inner: InMemory,
        armed: Arc<AtomicBool>,
    }

    impl std::fmt::Display for LosesOneReply {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "LosesOneReply({})", self.inner)
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for LosesOneReply {
        async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> object_store::Result<PutResult> {
            let result = self.inner.put_opts(location, payload, opts).await?;
            if self.armed.swap(false, SeqCst) {
                return Err(object_store::Error::Generic { store: "test", source: "the reply was lost".into() });
            }
            Ok(result)
        }
        async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.inner.put_multipart_opts(location, opts).await
        }
        async fn get_opts(&self, location: &Path, options: GetOptions) -> object_store::Result<GetResult> {
            self.inner.get_opts(location, options).await
        }
        fn delete_stream(&self, locations: BoxStream<'static, object_store::Result<Path>>) -> BoxStream<'static, object_store::Result<Path>> {
            self.inner.delete_stream(locations)
        }
        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.inner.list(prefix)
        }
        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }
        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> object_store::Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    /// A renewal that reached the store but whose reply was lost leaves the writer
    /// holding the lease: the next renewal finds the record still its own (under a
    /// version it did not learn) and goes on, instead of calling the lease lost.
    #[test]
    fn a_renewal_whose_reply_was_lost_keeps_the_lease() {
        let armed = Arc::new(AtomicBool::new(false));
        let store = LosesOneReply { inner: InMemory::new(), armed: Arc::clone(&armed) };
        let io = Arc::new(ObjectIo::new(Arc::new(store), Path::from(""), "memory lake".into(), "memory:///".into()).expect("io"));
        let lease = Lease::acquire(Arc::clone(&io), Duration::from_millis(300)).expect("acquire");
        armed.store(true, SeqCst);
        // Renewals every 100 ms: the lost one, then one that meets the new version,
        // then others; past the first expiry (300 ms) the lease must still hold.
        std::thread::sleep(Duration::from_millis(700));
        assert!(!armed.load(SeqCst), "a renewal ran and lost its reply");
        lease.check().expect("the lease is still held");
        let record: LeaseRecord = serde_json::from_slice(&io.get(LEASE_PATH).expect("read").expect("a lease").bytes).expect("record");
        assert_eq!(record.owner, lease.state.owner);
        assert!(record.expires_at_ms > now_ms(), "renewed after the lost reply");
    }
}
