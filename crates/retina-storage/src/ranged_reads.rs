//! Reading Parquet files with range requests: a file's footer and page indexes are
//! fetched once and cached, then a read fetches only the column chunks it projects
//! and, when the page index rules pages out, only the pages it keeps. On an object
//! store that is the difference between fetching a whole object per query and
//! fetching a few ranges; on a local directory it saves reading unprojected columns.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use arrow_array::RecordBatch;
use bytes::Bytes;
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use lru::LruCache;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parking_lot::Mutex;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::errors::Result as ParquetResult;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use retina_core::storage::PageBound;
use retina_core::TableSchema;

use crate::parquet_files::plan_read;

/// Bytes fetched from the end of a file in one request for its footer: ours are a
/// few KB of metadata plus page indexes, so one request usually covers both.
const FOOTER_FETCH_BYTES: usize = 64 * 1024;

/// On an object store, ranges closer than this are fetched as one request (the gap
/// comes along, and is counted as fetched); the requests of one read run in
/// parallel (up to 10). object_store's default, 1 MiB, merges all of a 64K-row
/// file's column chunks into one request, so a projection or a page-pruned read
/// transferred the whole row group (CH-Q12: 3.0 MiB for the 0.5 MiB it needs). At
/// 64 KiB only near neighbours merge. On moto, whose per-request cost is high, that
/// measured slower (`retina bench query --warehouses 4`, static geomean 1.59x local
/// against 1.52x, 5 runs each); on S3, where a round trip costs about what 1 MiB of
/// transfer does and requests run in parallel, fetching less is the better default.
pub(crate) const REMOTE_COALESCE_BYTES: u64 = 64 * 1024;

/// Files whose metadata is kept. Data files are immutable and never reuse a path,
/// so an entry can only go stale by its file being deleted (then it is dropped).
const CACHED_FOOTERS: usize = 1024;

/// A file's rows as read, and what reading them fetched.
pub(crate) struct RangedRead {
    pub batches: Vec<RecordBatch>,
    pub selected: Option<Vec<bool>>,
    pub bytes_fetched: u64,
}

/// Parsed footers (with page indexes) of recently read files, by object path.
pub(crate) struct FooterCache {
    entries: Mutex<LruCache<String, ArrowReaderMetadata>>,
}

impl FooterCache {
    pub fn new() -> Self {
        let capacity = NonZeroUsize::new(CACHED_FOOTERS).unwrap_or(NonZeroUsize::MIN);
        Self { entries: Mutex::new(LruCache::new(capacity)) }
    }

    pub fn forget(&self, path: &str) {
        self.entries.lock().pop(path);
    }
}

/// One object read by ranges, counting the bytes it fetches.
pub(crate) struct RangedFile {
    store: Arc<dyn ObjectStore>,
    path: Path,
    size: u64,
    /// Bytes transferred (coalescing gaps included). Shared with the caller: the
    /// stream owns the file until it ends.
    fetched: Arc<AtomicU64>,
    /// Merge ranges closer than this into one request (`None`: fetch each as asked,
    /// for a local file).
    coalesce: Option<u64>,
}

impl RangedFile {
    /// The object at `path`, `size` bytes; `coalesce` as for the field.
    pub fn new(store: Arc<dyn ObjectStore>, path: Path, size: u64, coalesce: Option<u64>) -> Self {
        Self { store, path, size, fetched: Arc::new(AtomicU64::new(0)), coalesce }
    }
}

impl AsyncFileReader for RangedFile {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, ParquetResult<Bytes>> {
        async move {
            let bytes = self.store.get_range(&self.path, range).await?;
            self.fetched.fetch_add(bytes.len() as u64, Relaxed);
            Ok(bytes)
        }
        .boxed()
    }

    fn get_byte_ranges(&mut self, ranges: Vec<Range<u64>>) -> BoxFuture<'_, ParquetResult<Vec<Bytes>>> {
        async move {
            let Some(gap) = self.coalesce else {
                let parts = self.store.get_ranges(&self.path, &ranges).await?;
                self.fetched.fetch_add(parts.iter().map(|part| part.len() as u64).sum::<u64>(), Relaxed);
                return Ok(parts);
            };
            let (store, path, fetched) = (&self.store, &self.path, &self.fetched);
            let fetch = |range: Range<u64>| async move {
                let bytes = store.get_range(path, range).await?;
                fetched.fetch_add(bytes.len() as u64, Relaxed);
                Ok::<_, object_store::Error>(bytes)
            };
            Ok(object_store::coalesce_ranges(&ranges, fetch, gap).await?)
        }
        .boxed()
    }

    fn get_metadata<'a>(&'a mut self, _options: Option<&'a ArrowReaderOptions>) -> BoxFuture<'a, ParquetResult<Arc<ParquetMetaData>>> {
        async move {
            let size = self.size;
            let metadata = ParquetMetaDataReader::new()
                .with_page_index_policy(PageIndexPolicy::Optional)
                .with_prefetch_hint(Some(FOOTER_FETCH_BYTES))
                .load_and_finish(&mut *self, size)
                .await?;
            Ok(Arc::new(metadata))
        }
        .boxed()
    }
}

/// Reads the stored columns `columns` of `file`, leaving out the pages `bounds`
/// rule out. Call from inside the store's runtime.
pub(crate) async fn read(
    mut file: RangedFile,
    footers: &FooterCache,
    table: &TableSchema,
    columns: &[usize],
    bounds: &[PageBound],
) -> ParquetResult<RangedRead> {
    let key = file.path.to_string();
    let fetched = Arc::clone(&file.fetched);
    let cached = footers.entries.lock().get(&key).cloned();
    let metadata = match cached {
        Some(metadata) => metadata,
        None => {
            let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
            let metadata = ArrowReaderMetadata::load_async(&mut file, options).await?;
            footers.entries.lock().put(key, metadata.clone());
            metadata
        }
    };
    let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(file, metadata);
    let (builder, plan) = plan_read(builder, table, columns, bounds);
    let mut stream = builder.build()?;
    let mut batches = Vec::new();
    while let Some(batch) = stream.try_next().await? {
        batches.push(batch);
    }
    let batches = plan.conform(table, columns, batches)?;
    Ok(RangedRead { batches, selected: plan.selected, bytes_fetched: fetched.load(Relaxed) })
}
