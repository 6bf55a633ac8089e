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
use bytes::{Buf, Bytes};
use futures::future::BoxFuture;
use futures::{FutureExt, TryStreamExt};
use lru::LruCache;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parking_lot::Mutex;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{AsyncFileReader, ParquetRecordBatchStreamBuilder};
use parquet::errors::{ParquetError, Result as ParquetResult};
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::serialized_reader::SerializedPageReader;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};
use retina_core::storage::PageBound;
use retina_core::schema_evolution::StoredColumns;
use retina_core::TableSchema;

use crate::kept_decode::{decode_column, ColumnKind, KeptRuns};
use crate::parquet_files::{is_flat_row_group, plan_read, selected_rows, READ_BATCH_ROWS};

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
    /// The rows `dropped` named were left out.
    pub dropped_left_out: bool,
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
/// rule out, and the rows set in `dropped` (one bit per row of the file) where
/// [`kept_decode`] can (then [`RangedRead::dropped_left_out`]). Call from inside the
/// store's runtime.
pub(crate) async fn read(
    mut file: RangedFile,
    footers: &FooterCache,
    table: &TableSchema,
    columns: &[usize],
    bounds: &[PageBound],
    dropped: &[u64],
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
    if let Some(read) = read_kept(&mut file, &metadata, table, columns, bounds, dropped).await? {
        return Ok(read);
    }
    let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(file, metadata);
    let (builder, plan) = plan_read(builder, table, columns, bounds);
    let mut stream = builder.build()?;
    let mut batches = Vec::new();
    while let Some(batch) = stream.try_next().await? {
        batches.push(batch);
    }
    let batches = plan.conform(table, columns, batches)?;
    Ok(RangedRead { batches, selected: plan.selected, bytes_fetched: fetched.load(Relaxed), dropped_left_out: false })
}

/// [`read`] through [`kept_decode`]: the rows not in `dropped` of every projected
/// column chunk, decoded straight from their pages; `None` when a column is not one
/// it decodes, the file is not one flat row group in the table's layout, or the page
/// index prunes pages (parquet-rs then reads the file). `RETINA_KEPT_DECODE=0` in
/// the environment turns this path off, to measure it against parquet-rs in one build.
async fn read_kept(
    file: &mut RangedFile,
    metadata: &ArrowReaderMetadata,
    table: &TableSchema,
    columns: &[usize],
    bounds: &[PageBound],
    dropped: &[u64],
) -> ParquetResult<Option<RangedRead>> {
    let (parquet, schema) = (metadata.metadata(), metadata.schema());
    let stored = StoredColumns::plan(table, schema.fields().len(), columns);
    let layout_fits = !stored.physical().is_empty() && is_flat_row_group(parquet, schema.fields().len());
    if !layout_fits || std::env::var_os("RETINA_KEPT_DECODE").is_some_and(|v| v == "0") {
        return Ok(None);
    }
    // A file written before columns were added holds fewer: read what it has, in its
    // own indexes, and conform the batch to the table's layout below.
    let physical = stored.physical();
    let group = parquet.row_group(0);
    let mut kinds = Vec::with_capacity(physical.len());
    for &column in physical {
        match ColumnKind::of(group.column(column), schema.field(column).data_type()) {
            Some(kind) => kinds.push(kind),
            None => return Ok(None),
        }
    }
    if stored.is_identity() && selected_rows(parquet, bounds).is_some() {
        return Ok(None);
    }
    let rows = usize::try_from(group.num_rows()).map_err(|_| ParquetError::General("a negative row count".into()))?;
    let keep = KeptRuns::without(dropped, rows);
    let ranges: Vec<Range<u64>> = physical
        .iter()
        .map(|&column| {
            let (start, length) = group.column(column).byte_range();
            start..start + length
        })
        .collect();
    let chunks = file.get_byte_ranges(ranges.clone()).await?;
    let mut arrays = Vec::with_capacity(physical.len());
    for (((&column, kind), range), bytes) in physical.iter().zip(&kinds).zip(&ranges).zip(chunks) {
        let chunk = group.column(column);
        let fetched = Arc::new(FetchedChunk { start: range.start, bytes });
        let mut pages = SerializedPageReader::new(fetched, chunk, rows, None)?;
        let nullable = chunk.column_descr().max_def_level() > 0;
        let array = decode_column(&mut pages, kind, nullable, rows, &keep)
            .map_err(|error| ParquetError::General(format!("column {}: {error}", schema.field(column).name())))?;
        arrays.push(array);
    }
    let mut batch = RecordBatch::try_new(Arc::new(schema.project(physical)?), arrays)?;
    if !stored.is_identity() {
        batch = stored.assemble(table, columns, &batch).map_err(|e| ParquetError::General(e.to_string()))?;
    }
    let batches = (0..batch.num_rows())
        .step_by(READ_BATCH_ROWS)
        .map(|start| batch.slice(start, READ_BATCH_ROWS.min(batch.num_rows() - start)))
        .collect();
    Ok(Some(RangedRead { batches, selected: None, bytes_fetched: file.fetched.load(Relaxed), dropped_left_out: true }))
}

/// One column chunk fetched on its own, addressed by the file offsets a page reader
/// asks for.
struct FetchedChunk {
    start: u64,
    bytes: Bytes,
}

impl FetchedChunk {
    fn local(&self, start: u64, length: usize) -> ParquetResult<Bytes> {
        let from = start.checked_sub(self.start).and_then(|from| usize::try_from(from).ok());
        match from {
            Some(from) if from + length <= self.bytes.len() => Ok(self.bytes.slice(from..from + length)),
            _ => Err(ParquetError::EOF(format!(
                "{length} bytes at offset {start} are outside the column chunk at {} ({} bytes)",
                self.start,
                self.bytes.len()
            ))),
        }
    }
}

impl Length for FetchedChunk {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for FetchedChunk {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> ParquetResult<Self::T> {
        let rest = (self.start + self.bytes.len() as u64).saturating_sub(start);
        Ok(self.local(start, usize::try_from(rest).unwrap_or(usize::MAX))?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> ParquetResult<Bytes> {
        self.local(start, length)
    }
}
