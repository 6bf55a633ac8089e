//! The interface to lake storage, as small capability traits (data files, catalog,
//! checkpoints) that [`LakeStore`] puts together. The engine depends
//! on these traits only, so the core builds without Parquet; `retina-storage`
//! implements them with Parquet files through object_store, and [`MemoryLakeStore`]
//! keeps batches in memory. Stores only decode: visibility is applied by the core.

use std::collections::HashMap;

use arrow_array::RecordBatch;
use parking_lot::Mutex;

use crate::catalog::{CatalogManifest, DataFileMeta};
use crate::checkpoint::CheckpointManifest;
use crate::error::{CoreError, CoreResult};
use crate::schema::TableSchema;
use crate::types::{FileId, Ts};

/// Where a written file ended up.
#[derive(Clone, Debug, PartialEq)]
pub struct StoredFile {
    pub path: String,
    pub size_bytes: u64,
}

/// Inclusive bounds on the values of one integer-encoded column (integers, dates,
/// times, timestamps: Parquet INT32/INT64) that a query's filter implies, e.g.
/// `o_id BETWEEN 10 AND 20` or `d_id = 3`. `None` is unbounded on that side.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageBound {
    /// Index into the table's stored columns.
    pub column: usize,
    pub min: Option<i64>,
    pub max: Option<i64>,
}

impl PageBound {
    /// Whether a page whose values lie in `min..=max` may hold a value in bounds.
    pub fn may_match(&self, min: i64, max: i64) -> bool {
        self.min.is_none_or(|low| max >= low) && self.max.is_none_or(|high| min <= high)
    }
}

/// A data file's rows as decoded, before any visibility mask: the rows
/// `selected` names, in file order, so the core can line its delete bitmap up with
/// them ([`crate::scan`] applies visibility; stores only decode).
#[derive(Debug, Default)]
pub struct DecodedRows {
    pub batches: Vec<RecordBatch>,
    /// Which of the file's rows were decoded, when pages were left out; `None` when
    /// every row was.
    pub selected: Option<Vec<bool>>,
    /// Bytes the store fetched from storage for this read (footer included when it
    /// was not cached); 0 for a store that keeps files in memory.
    pub bytes_fetched: u64,
    /// The rows a [`DataFiles::read_file_dropping`] named were left out: `selected`
    /// is then `None` and the batches hold only the other rows.
    pub dropped_left_out: bool,
}

impl DecodedRows {
    /// Every row of the file.
    pub fn all(batches: Vec<RecordBatch>) -> Self {
        Self { batches, selected: None, bytes_fetched: 0, dropped_left_out: false }
    }

    /// Rows of the file left out by page pruning.
    pub fn skipped_rows(&self) -> u64 {
        self.selected.as_ref().map_or(0, |kept| kept.iter().filter(|&&keep| !keep).count() as u64)
    }
}

/// Data files: immutable, written once under a name derived from their id, read by
/// scans, recovery and storage GC, deleted when nothing references them.
pub trait DataFiles: Send + Sync {
    /// Writes `batches` (stored schema: user columns + `_create_ts`) as one data file
    /// with a single row group, under a name derived from `file_id`. A failed write
    /// leaves no visible file.
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile>;

    /// Decodes the columns `columns` (indices into `table`'s stored schema,
    /// ascending) of a file, in row order. A store may leave out whole pages whose
    /// statistics (the Parquet page index) prove that no row satisfies every bound in
    /// `bounds` (an optimization only: the caller still filters what comes back). A
    /// file written under another version of the schema is conformed to `table`
    /// ([`crate::schema_evolution::StoredColumns`]): added columns read as NULL.
    fn read_file(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize], bounds: &[PageBound]) -> CoreResult<DecodedRows>;

    /// [`Self::read_file`] for a reader that drops the rows set in `dropped` (bit
    /// `row % 64` of word `row / 64`, as a [`crate::visibility::DeleteBitmap`]): a store
    /// that can leave them out while decoding does, and says so in
    /// [`DecodedRows::dropped_left_out`], sparing the copy that dropping them from
    /// decoded batches costs. The default decodes every row.
    fn read_file_dropping(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        bounds: &[PageBound],
        dropped: &[u64],
    ) -> CoreResult<DecodedRows> {
        let _ = dropped;
        self.read_file(table, file, columns, bounds)
    }

    /// Deletes a data file that no catalog, checkpoint or query references any more.
    fn delete_file(&self, path: &str) -> CoreResult<()>;

    /// How many files a scan should read at once, at least: a store whose reads wait
    /// on network round trips wants more in flight than there are cores, so the waits
    /// overlap. `None`: as many as the query's parallelism.
    fn parallel_reads(&self) -> Option<usize> {
        None
    }
}

/// The catalog manifest: one document, replaced atomically.
pub trait CatalogStore: Send + Sync {
    /// Replaces the catalog manifest atomically.
    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()>;

    /// The last saved manifest, if any.
    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>>;

    /// Whether this store may write: `false` for a reader beside the lake's writer,
    /// over which an engine opens read-only (it recovers and serves queries, and
    /// writes nothing: no flush, checkpoint or GC).
    fn writable(&self) -> bool {
        true
    }
}

/// The open tables a store publishes at each checkpoint for other engines (Delta
/// Lake and Iceberg over the same files): the latest consistent cut across tables.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Publication {
    /// The snapshot ts every listed table version shows (`None`: nothing published).
    pub ts: Option<Ts>,
    pub published_at_ms: i64,
    pub tables: Vec<PublishedTable>,
    /// Why the last publication failed or left tables out, if it did.
    pub last_error: Option<String>,
    /// Publications this process made, and how long the last one took.
    pub publications: u64,
    pub last_millis: f64,
}

/// One table's version in one format of a [`Publication`].
#[derive(Clone, Debug, PartialEq)]
pub struct PublishedTable {
    pub table: String,
    /// `delta` or `iceberg`.
    pub format: &'static str,
    /// Relative to the lake's root: the Delta table's folder, or the Iceberg
    /// metadata file.
    pub path: String,
    /// The Delta version, or the number of the Iceberg metadata file.
    pub version: u64,
    /// The Iceberg snapshot.
    pub snapshot_id: Option<i64>,
}

/// Checkpoints: segments of the write buffer's rows and the manifest naming them.
pub trait CheckpointStore: Send + Sync {
    /// Writes rows `first_row ..` of a write buffer's file as a segment of the
    /// checkpoint at `ts` (readable back with [`DataFiles::read_file`]). Segment paths
    /// are never reused, so a segment an older checkpoint references is never
    /// rewritten.
    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile>;

    /// Makes `checkpoint` the latest one, atomically, then removes the checkpoint
    /// objects it does not reference. Every segment it names must already be written.
    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()>;

    /// The latest complete checkpoint, if any.
    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>>;

    /// Publishes the latest checkpoint if a publication interval left it
    /// unpublished (called at clean shutdown, after the final checkpoint).
    fn publish_pending(&self) -> CoreResult<()> {
        Ok(())
    }

    /// What the store publishes for other engines, if it publishes (`None`: it
    /// does not).
    fn publication(&self) -> CoreResult<Option<Publication>> {
        Ok(None)
    }
}

/// Everything the engine keeps in the lake. Code that needs one capability takes
/// that trait (a scan takes [`DataFiles`]), so a wrapper that changes one
/// capability implements one small trait and forwards the others.
pub trait LakeStore: DataFiles + CatalogStore + CheckpointStore {}

impl<T: DataFiles + CatalogStore + CheckpointStore> LakeStore for T {}

/// A lake store in memory, for tests and throwaway runs.
#[derive(Default)]
pub struct MemoryLakeStore {
    files: Mutex<HashMap<String, Vec<RecordBatch>>>,
    catalog: Mutex<Option<CatalogManifest>>,
    checkpoint: Mutex<Option<CheckpointManifest>>,
    data_file_reads: std::sync::atomic::AtomicU64,
}

impl MemoryLakeStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// How many times a data file was read: tests check that a path reads no more
    /// than it needs.
    pub fn data_file_reads(&self) -> u64 {
        self.data_file_reads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many checkpoint segments the store holds (referenced or not).
    pub fn checkpoint_segments(&self) -> usize {
        self.files.lock().keys().filter(|path| path.starts_with("checkpoints/")).count()
    }
}

impl DataFiles for MemoryLakeStore {
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        let path = format!("{}/{file_id}.mem", table.name());
        let size_bytes = batches.iter().map(|b| b.get_array_memory_size() as u64).sum();
        self.files.lock().insert(path.clone(), batches.to_vec());
        Ok(StoredFile { path, size_bytes })
    }

    /// Reads whole files: memory batches have no page index to prune with.
    fn read_file(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize], _bounds: &[PageBound]) -> CoreResult<DecodedRows> {
        self.data_file_reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let files = self.files.lock();
        let batches = files
            .get(&file.path)
            .ok_or_else(|| CoreError::Storage(format!("file {} does not exist", file.path)))?;
        let projected = batches
            .iter()
            .map(|b| {
                let plan = crate::schema_evolution::StoredColumns::plan(table, b.num_columns(), columns);
                plan.assemble(table, columns, &b.project(plan.physical())?)
            })
            .collect::<CoreResult<Vec<_>>>()?;
        Ok(DecodedRows::all(projected))
    }

    fn delete_file(&self, path: &str) -> CoreResult<()> {
        self.files.lock().remove(path);
        Ok(())
    }
}

impl CatalogStore for MemoryLakeStore {
    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()> {
        *self.catalog.lock() = Some(catalog.clone());
        Ok(())
    }

    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        Ok(self.catalog.lock().clone())
    }
}

impl CheckpointStore for MemoryLakeStore {
    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile> {
        let path = format!("checkpoints/segments/{}/{file_id}-{first_row}-{ts}.mem", table.name());
        self.files.lock().insert(path.clone(), batches.to_vec());
        Ok(StoredFile { path, size_bytes: 0 })
    }

    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()> {
        *self.checkpoint.lock() = Some(checkpoint.clone());
        let referenced = checkpoint.referenced_paths();
        self.files.lock().retain(|path, _| !path.starts_with("checkpoints/") || referenced.contains(path.as_str()));
        Ok(())
    }

    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        Ok(self.checkpoint.lock().clone())
    }
}
