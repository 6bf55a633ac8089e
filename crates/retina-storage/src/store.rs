//! `ParquetLakeStore`: the lake store (every capability trait of
//! `retina_core::storage`) of the embedded default and of object storage.

use std::sync::Arc;

use arrow_array::RecordBatch;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};
use parking_lot::Mutex;
use retina_core::catalog::{CatalogManifest, DataFileMeta};
use retina_core::checkpoint::CheckpointManifest;
use retina_core::storage::{CatalogStore, CheckpointStore, DataFiles, DecodedRows, PageBound, Publication, PublishedTable, StoredFile};
use retina_core::{CoreError, CoreResult, FileId, TableSchema, Ts};

use crate::column_encoding::CompressionGoal;
use crate::direct_write::{DirectWriter, Written};
use crate::error::StorageError;
use crate::io::ObjectIo;
use crate::lease::Lease;
use crate::ranged_reads::{self, FooterCache, RangedFile};
use crate::versioned::Document;
use crate::publish::{self, PublicationReport, PublishOptions, PublishedCut, Publisher};
use crate::{checkpoint_files, layout, location, manifest, parquet_files};

/// What this store may do to the lake.
enum Access {
    /// The one writer: a local directory's OS lock, or an object store's lease
    /// (`None` for a store given directly, which the caller answers for).
    Writer { _lock: Option<location::DataDirLock>, lease: Option<Lease> },
    /// Reads only; takes neither lock nor lease, and refuses every write.
    Reader,
}

/// Data files as `tables/<table>/<file id>.parquet`, the catalog manifest and the
/// checkpoint pointer as numbered versions ([`crate::versioned`]), under one
/// object-store prefix.
///
/// The engine's threads are synchronous; object-store calls run on a small private
/// tokio runtime, so callers must not be inside an async context.
pub struct ParquetLakeStore {
    io: Arc<ObjectIo>,
    access: Access,
    footers: FooterCache,
    /// The latest version of each document this writer read or committed (`None`:
    /// not looked yet); the next commit creates the one after it.
    catalog_version: Mutex<Option<u64>>,
    checkpoint_version: Mutex<Option<u64>>,
    /// On an object store, not a local directory.
    remote: bool,
    /// Writes data files around the page cache, on a local directory.
    direct: Option<DirectFiles>,
    /// Publishes each checkpoint as Delta tables, when turned on.
    publisher: Option<Publisher>,
    publication: Mutex<PublicationStatus>,
    /// Whether the segments folder of lakes from before publication was swept.
    legacy_segments_swept: std::sync::atomic::AtomicBool,
    /// What new data files favour: fast scans on a local disk, small files on an
    /// object store, unless [`Self::compressing_for`] says otherwise.
    compression: CompressionGoal,
}

/// How the last publication went.
#[derive(Clone, Debug, Default)]
pub struct PublicationStatus {
    /// The latest published cut: read when the store opens, then the one this
    /// writer published last (kept in memory, so a query's view needs no I/O).
    pub cut: Option<PublishedCut>,
    pub last: Option<PublicationReport>,
    /// The error of the last attempt, if it failed (cleared by the next success).
    pub error: Option<String>,
    /// Publications that succeeded, and their time: total and longest.
    pub publications: u64,
    pub total_millis: f64,
    pub max_millis: f64,
}

/// A local lake's files written with [`DirectWriter`], at the paths object_store's
/// local store reads them from.
struct DirectFiles {
    paths: object_store::local::LocalFileSystem,
    writer: DirectWriter,
}

impl DirectFiles {
    fn new(dir: &std::path::Path) -> Result<Self, StorageError> {
        let paths = object_store::local::LocalFileSystem::new_with_prefix(dir)
            .map_err(|error| StorageError::Location { location: dir.display().to_string(), reason: error.to_string() })?;
        Ok(Self { paths, writer: DirectWriter::new() })
    }

    /// Writes `bytes` at the lake path `relative`, unless the file system refuses.
    fn write(&self, io: &ObjectIo, relative: &str, bytes: &[u8]) -> Result<Written, StorageError> {
        let location = io.path(relative);
        let path = self.paths.path_to_filesystem(&location).map_err(|source| io.error("writing", &location, source))?;
        self.writer.write(&path, bytes).map_err(|source| StorageError::DirectWrite {
            location: io.location().to_string(),
            path: path.display().to_string(),
            source,
        })
    }
}

/// Files a scan reads at once from an object store ([`DataFiles::parallel_reads`]).
const REMOTE_PARALLEL_READS: usize = 8;

impl ParquetLakeStore {
    /// Opens a local directory or object-store URL (see [`location::open`]) as its
    /// one writer: a local directory is locked for this process (see
    /// [`location::DataDirLock`]); on an object store this process takes the lease
    /// ([`Lease`]), or fails naming the writer that holds it.
    pub fn open(location: &str) -> Result<Self, StorageError> {
        let opened = location::open(location, true)?;
        let lock = opened.local_dir.as_deref().map(location::lock_local).transpose()?;
        let io = Arc::new(ObjectIo::new(opened.store, opened.prefix, location::redacted(location), opened.base_uri)?);
        let lease = if opened.needs_lease { Some(Lease::acquire(Arc::clone(&io), opened.lease)?) } else { None };
        let direct = opened.local_dir.as_deref().map(DirectFiles::new).transpose()?;
        let mut store = Self::new(io, Access::Writer { _lock: lock, lease }, opened.local_dir.is_none());
        store.direct = direct;
        Ok(store.with_published_cut())
    }

    /// Opens a lake to read it while its writer may be running elsewhere: no lock,
    /// no lease, and every write is refused with [`StorageError::ReadOnly`].
    pub fn open_reader(location: &str) -> Result<Self, StorageError> {
        let opened = location::open(location, false)?;
        let io = Arc::new(ObjectIo::new(opened.store, opened.prefix, location::redacted(location), opened.base_uri)?);
        Ok(Self::new(io, Access::Reader, opened.local_dir.is_none()).with_published_cut())
    }

    /// A writer over `store` under `prefix`; the caller ensures it is the only one.
    /// Any store given this way is read as an object store (ranges merged, reads in
    /// parallel); formats that name files by URI (Iceberg) name them `store:///PREFIX/…`.
    pub fn with_store(store: Arc<dyn ObjectStore>, prefix: Path) -> Result<Self, StorageError> {
        let base_uri = format!("store:///{prefix}").trim_end_matches('/').to_string();
        let io = Arc::new(ObjectIo::new(store, prefix, "(object store)".into(), base_uri)?);
        Ok(Self::new(io, Access::Writer { _lock: None, lease: None }, true))
    }

    fn new(io: Arc<ObjectIo>, access: Access, remote: bool) -> Self {
        let (catalog_version, checkpoint_version) = (Mutex::new(None), Mutex::new(None));
        Self {
            io,
            access,
            footers: FooterCache::new(),
            catalog_version,
            checkpoint_version,
            remote,
            direct: None,
            publisher: None,
            publication: Mutex::new(PublicationStatus::default()),
            legacy_segments_swept: std::sync::atomic::AtomicBool::new(false),
            compression: if remote { CompressionGoal::SmallFiles } else { CompressionGoal::FastScans },
        }
    }

    /// Remembers the lake's latest published cut (an unreadable one is reported as
    /// the publication's error).
    fn with_published_cut(self) -> Self {
        let loaded = publish::latest_cut(&self.io);
        {
            let mut status = self.publication.lock();
            match loaded {
                Ok(cut) => status.cut = cut,
                Err(error) => status.error = Some(error.to_string()),
            }
        }
        self
    }

    /// Turns on publication (`Some`): after every checkpoint, each table is also
    /// committed as a Delta Lake version, and as an Iceberg snapshot if asked, over
    /// the same files ([`crate::publish`]).
    pub fn publishing(mut self, options: Option<PublishOptions>) -> Self {
        self.publisher = options.map(Publisher::new);
        self
    }

    /// Writes the data files from now on towards `goal` (files already written keep
    /// their encoding; readers need nothing new, as compression is per column chunk).
    pub fn compressing_for(mut self, goal: CompressionGoal) -> Self {
        self.compression = goal;
        self
    }

    #[cfg(test)]
    pub(crate) fn object_io(&self) -> &ObjectIo {
        &self.io
    }

    /// Publishes a durable checkpoint. The checkpoint stands whatever happens here:
    /// a failure is reported in the status, and the next checkpoint publishes again.
    fn publish_checkpoint(&self, publisher: &Publisher, checkpoint: &CheckpointManifest) {
        let result = publisher.publish(&self.io, self, checkpoint);
        let mut status = self.publication.lock();
        match result {
            Ok((report, cut)) => {
                status.error = (!report.unpublished.is_empty()).then(|| report.unpublished.join("; "));
                status.publications += 1;
                status.total_millis += report.millis;
                status.max_millis = status.max_millis.max(report.millis);
                status.cut = Some(cut);
                status.last = Some(report);
            }
            Err(error) => status.error = Some(error.to_string()),
        }
    }

    /// How the last publication went.
    pub fn publication_status(&self) -> PublicationStatus {
        self.publication.lock().clone()
    }

    /// The latest published cut, read from the lake now
    /// (`_retina/published/latest.json`), if any.
    pub fn latest_published_cut(&self) -> CoreResult<Option<PublishedCut>> {
        Ok(publish::latest_cut(&self.io)?)
    }

    /// The object path of a table's data file.
    pub fn data_file_path(table: &TableSchema, file_id: FileId) -> String {
        layout::data_file_path(table, file_id)
    }

    /// The writer whose expired lease this one took over, if it did.
    pub fn took_over_from(&self) -> Option<&str> {
        match &self.access {
            Access::Writer { lease: Some(lease), .. } => lease.took_over_from.as_deref(),
            _ => None,
        }
    }

    /// Fails unless this store may write now (a writer that still holds its lease).
    fn may_write(&self, operation: &'static str) -> Result<(), StorageError> {
        match &self.access {
            Access::Reader => Err(StorageError::ReadOnly { location: self.io.location().to_string(), operation }),
            Access::Writer { lease: Some(lease), .. } => lease.check(),
            Access::Writer { lease: None, .. } => Ok(()),
        }
    }

    /// Writes `batches` as a Parquet file at `path` (atomically, like every put).
    fn put_parquet(&self, path: String, table: &TableSchema, batches: &[RecordBatch]) -> Result<StoredFile, StorageError> {
        self.may_write("writing a data file")?;
        let bytes = parquet_files::encode(&table.stored_schema(), batches, self.compression)
            .map_err(|source| StorageError::Parquet { path: path.clone(), source })?;
        let size_bytes = bytes.len() as u64;
        let written = match &self.direct {
            Some(direct) => direct.write(&self.io, &path, bytes.as_ref())?,
            None => Written::Unsupported,
        };
        if written == Written::Unsupported {
            self.io.overwrite(&path, bytes)?;
        }
        Ok(StoredFile { path, size_bytes })
    }

    /// Loads the latest version of `document` and remembers its number; a writer
    /// also sweeps versions a crashed predecessor left behind.
    fn load_document(&self, document: &Document, known: &Mutex<Option<u64>>) -> Result<Option<bytes::Bytes>, StorageError> {
        let latest = document.load_latest(&self.io)?;
        let version = latest.found.as_ref().map_or(0, |(version, _)| *version);
        *known.lock() = Some(version);
        if matches!(self.access, Access::Writer { .. }) && version > 0 {
            document.sweep(&self.io, &latest.versions, version)?;
        }
        Ok(latest.found.map(|(_, bytes)| bytes))
    }

    /// Commits `bytes` as the version after the latest this writer knows.
    fn commit_document(&self, document: &Document, known: &Mutex<Option<u64>>, bytes: Vec<u8>) -> Result<(), StorageError> {
        self.may_write("committing")?;
        let mut known = known.lock();
        let latest = match *known {
            Some(version) => version,
            None => document.versions(&self.io)?.last().copied().unwrap_or(0),
        };
        document.commit(&self.io, latest + 1, bytes)?;
        *known = Some(latest + 1);
        Ok(())
    }

    /// Deletes the checkpoint segments `checkpoint` (now in place, with its
    /// publication, whose retained versions keep theirs) does not reference.
    fn delete_unreferenced_segments(&self, checkpoint: &CheckpointManifest) -> Result<(), StorageError> {
        let referenced = checkpoint.referenced_paths();
        let mut folders: Vec<String> = checkpoint.tables.iter().map(|t| checkpoint_files::segments_folder(&t.schema)).collect();
        // Swept once a process, and only marked swept once every delete went through.
        let sweep_legacy = !self.legacy_segments_swept.load(std::sync::atomic::Ordering::Relaxed);
        if sweep_legacy {
            folders.push(checkpoint_files::LEGACY_SEGMENTS_FOLDER.to_string());
        }
        let mut unreferenced = Vec::new();
        for folder in folders {
            unreferenced.extend(self.io.list(&folder)?.into_iter().filter(|path| !referenced.contains(path.as_str())));
        }
        fail::fail_point!("storage::delete-unreferenced-segments", |_| Err(StorageError::Checkpoint {
            reason: "failpoint storage::delete-unreferenced-segments".into()
        }));
        let deletable = match &self.publisher {
            // A state that cannot be read keeps every file, and says so in the
            // checkpoint's clean-up error: the next checkpoint retries.
            Some(publisher) => publisher.unneeded(&self.io, unreferenced)?,
            None => unreferenced,
        };
        for path in deletable {
            self.io.delete(&path)?;
        }
        if sweep_legacy {
            self.legacy_segments_swept.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(())
    }
}

impl DataFiles for ParquetLakeStore {
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        Ok(self.put_parquet(Self::data_file_path(table, file_id), table, batches)?)
    }

    fn read_file(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize], bounds: &[PageBound]) -> CoreResult<DecodedRows> {
        self.read_file_dropping(table, file, columns, bounds, &[])
    }

    fn read_file_dropping(
        &self,
        table: &TableSchema,
        file: &DataFileMeta,
        columns: &[usize],
        bounds: &[PageBound],
        dropped: &[u64],
    ) -> CoreResult<DecodedRows> {
        let path = self.io.path(&file.path);
        let store = Arc::clone(self.io.store());
        let read = self.io.runtime().block_on(async {
            // Checkpoint segments are read at recovery with no recorded size.
            let size = match file.size_bytes {
                0 => store.head(&path).await?.size,
                size => size,
            };
            let coalesce = self.remote.then_some(ranged_reads::REMOTE_COALESCE_BYTES);
            let file = RangedFile::new(store, path, size, coalesce);
            ranged_reads::read(file, &self.footers, table, columns, bounds, dropped).await
        });
        match read {
            Ok(read) => Ok(DecodedRows {
                batches: read.batches,
                selected: read.selected,
                bytes_fetched: read.bytes_fetched,
                dropped_left_out: read.dropped_left_out,
            }),
            Err(error) if is_not_found(&error) => {
                Err(CoreError::Storage(format!("data file {} of the catalog is missing from storage", file.path)))
            }
            Err(source) => Err(StorageError::Parquet { path: file.path.clone(), source }.into()),
        }
    }

    /// A file a retained published version still lists is deleted once its
    /// retention has passed, not now.
    fn delete_file(&self, path: &str) -> CoreResult<()> {
        self.may_write("deleting a data file")?;
        self.footers.forget(self.io.path(path).as_ref());
        match &self.publisher {
            Some(publisher) => Ok(publisher.delete_when_unreferenced(&self.io, path)?),
            None => Ok(self.io.delete(path)?),
        }
    }

    /// Object-store reads are round trips (milliseconds each, more than the decode
    /// on S3), so a scan keeps several in flight; local reads are bounded by the CPU.
    fn parallel_reads(&self) -> Option<usize> {
        self.remote.then_some(REMOTE_PARALLEL_READS)
    }
}

/// Whether a read failed because the object does not exist.
fn is_not_found(error: &parquet::errors::ParquetError) -> bool {
    match error {
        parquet::errors::ParquetError::External(source) => {
            matches!(source.downcast_ref::<object_store::Error>(), Some(object_store::Error::NotFound { .. }))
        }
        _ => false,
    }
}

impl CatalogStore for ParquetLakeStore {
    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()> {
        Ok(self.commit_document(&manifest::DOCUMENT, &self.catalog_version, manifest::encode(catalog)?)?)
    }

    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        match self.load_document(&manifest::DOCUMENT, &self.catalog_version)? {
            Some(bytes) => Ok(Some(manifest::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    fn writable(&self) -> bool {
        matches!(self.access, Access::Writer { .. })
    }
}

impl CheckpointStore for ParquetLakeStore {
    fn write_checkpoint_segment(
        &self,
        table: &TableSchema,
        file_id: FileId,
        first_row: u64,
        ts: Ts,
        batches: &[RecordBatch],
    ) -> CoreResult<StoredFile> {
        Ok(self.put_parquet(checkpoint_files::segment_path(table, file_id, first_row, ts), table, batches)?)
    }

    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()> {
        self.commit_document(&checkpoint_files::DOCUMENT, &self.checkpoint_version, checkpoint_files::encode(checkpoint)?)?;
        if let Some(publisher) = self.publisher.as_ref().filter(|publisher| publisher.due()) {
            self.publish_checkpoint(publisher, checkpoint);
        }
        self.delete_unreferenced_segments(checkpoint)
            .map_err(|source| CoreError::CommittedButCleanupFailed { what: "the checkpoint", source: Box::new(source) })
    }

    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        match self.load_document(&checkpoint_files::DOCUMENT, &self.checkpoint_version)? {
            Some(bytes) => Ok(Some(checkpoint_files::decode(&bytes)?)),
            None => Ok(None),
        }
    }

    fn publish_pending(&self) -> CoreResult<()> {
        if let Some(publisher) = self.publisher.as_ref().filter(|publisher| publisher.take_pending()) {
            if let Some(checkpoint) = self.load_checkpoint()? {
                self.publish_checkpoint(publisher, &checkpoint);
            }
        }
        Ok(())
    }

    /// The latest published cut (for a store opened to read, the one of when it
    /// opened), with this writer's last publication error.
    fn publication(&self) -> CoreResult<Option<Publication>> {
        let PublicationStatus { cut, error: last_error, publications, last, .. } = self.publication_status();
        if cut.is_none() && self.publisher.is_none() {
            return Ok(None);
        }
        let last_millis = last.map_or(0.0, |report| report.millis);
        let mut publication = Publication { last_error, publications, last_millis, ..Publication::default() };
        if let Some(cut) = cut {
            publication.ts = Some(Ts(cut.ts));
            publication.published_at_ms = cut.published_at_ms;
            for table in cut.tables {
                if let (Some(metadata), Some(snapshot)) = (&table.iceberg_metadata, table.iceberg_snapshot_id) {
                    let number = metadata.rsplit("/v").next().and_then(|n| n.strip_suffix(".metadata.json")).and_then(|n| n.parse().ok());
                    publication.tables.push(PublishedTable {
                        table: table.table.clone(),
                        format: "iceberg",
                        path: metadata.clone(),
                        version: number.unwrap_or_default(),
                        snapshot_id: Some(snapshot),
                    });
                }
                publication.tables.push(PublishedTable {
                    table: table.table,
                    format: "delta",
                    path: table.delta_path,
                    version: table.delta_version,
                    snapshot_id: None,
                });
            }
        }
        Ok(Some(publication))
    }
}
