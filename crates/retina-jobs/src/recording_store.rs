//! An object store that remembers every object written through it.
//!
//! delta-rs writes an operation's data files before it tries to commit; when the
//! commit loses to a concurrent one, those files stay behind, unreferenced. An
//! attempt's tables are opened over this wrapper, so an aborted attempt deletes
//! exactly the files it wrote, and never a file of a concurrent writer whose
//! commit is still in flight (which a "delete what no version lists" sweep would).
//! The commit files it records are the versions the attempt made (a commit is a
//! create-once put, so only a put that succeeded counts), which is how an attempt
//! that does not finish knows what to undo (`attempt`).
//! No crate does this: object_store's wrappers limit, throttle or prefix.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use deltalake_core::ObjectStore;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, PutMultipartOptions, PutOptions, PutPayload, PutResult,
    RenameOptions, Result,
};
use parking_lot::Mutex;

/// Forwards to `inner`; records the path of every put, multipart upload, copy and
/// rename target that succeeded, in order.
#[derive(Debug)]
pub(crate) struct RecordingStore {
    inner: Arc<dyn ObjectStore>,
    written: Arc<Mutex<Vec<Path>>>,
}

impl RecordingStore {
    pub fn new(inner: Arc<dyn ObjectStore>) -> Self {
        Self { inner, written: Arc::default() }
    }

    /// How many writes are recorded.
    pub fn len(&self) -> usize {
        self.written.lock().len()
    }

    /// What was written after the first `mark` writes (store paths).
    pub fn written_since(&self, mark: usize) -> Vec<Path> {
        self.written.lock().get(mark..).map(<[Path]>::to_vec).unwrap_or_default()
    }

    fn record<T>(&self, path: &Path, result: Result<T>) -> Result<T> {
        if result.is_ok() {
            self.written.lock().push(path.clone());
        }
        result
    }
}

impl fmt::Display for RecordingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Recording({})", self.inner)
    }
}

#[async_trait::async_trait]
impl ObjectStore for RecordingStore {
    async fn put_opts(&self, location: &Path, payload: PutPayload, opts: PutOptions) -> Result<PutResult> {
        self.record(location, self.inner.put_opts(location, payload, opts).await)
    }

    async fn put_multipart_opts(&self, location: &Path, opts: PutMultipartOptions) -> Result<Box<dyn MultipartUpload>> {
        // Recorded when started: a failed upload may have left parts behind.
        self.written.lock().push(location.clone());
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(&self, location: &Path, ranges: &[Range<u64>]) -> Result<Vec<bytes::Bytes>> {
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(&self, locations: BoxStream<'static, Result<Path>>) -> BoxStream<'static, Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(&self, prefix: Option<&Path>, offset: &Path) -> BoxStream<'static, Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
        self.record(to, self.inner.copy_opts(from, to, options).await)
    }

    async fn rename_opts(&self, from: &Path, to: &Path, options: RenameOptions) -> Result<()> {
        self.record(to, self.inner.rename_opts(from, to, options).await)
    }
}
