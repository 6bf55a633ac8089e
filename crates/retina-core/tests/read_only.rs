//! A read-only engine: opened over a store that may not write (a reader beside the
//! lake's writer), it recovers the latest checkpoint and answers scans, refuses
//! changes, and writes nothing, not even from its background threads.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use retina_core::catalog::{CatalogManifest, DataFileMeta};
use retina_core::checkpoint::CheckpointManifest;
use retina_core::rows::rows_of;
use retina_core::storage::{CatalogStore, CheckpointStore, DataFiles, DecodedRows, MemoryLakeStore, PageBound, StoredFile};
use retina_core::{CoreError, CoreResult, Engine, EngineConfig, FileId, RowChange, TableSchema, Ts, Value};

/// Reads `inner`; counts (and refuses) every write.
struct ReaderStore {
    inner: Arc<MemoryLakeStore>,
    writes: AtomicUsize,
    reads: AtomicUsize,
}

impl ReaderStore {
    fn refuse<T>(&self) -> CoreResult<T> {
        self.writes.fetch_add(1, SeqCst);
        Err(CoreError::Storage("a reader's store was asked to write".into()))
    }
}

impl DataFiles for ReaderStore {
    fn write_file(&self, _: &TableSchema, _: FileId, _: &[RecordBatch]) -> CoreResult<StoredFile> {
        self.refuse()
    }
    fn read_file(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize], bounds: &[PageBound]) -> CoreResult<DecodedRows> {
        self.reads.fetch_add(1, SeqCst);
        self.inner.read_file(table, file, columns, bounds)
    }
    fn delete_file(&self, _: &str) -> CoreResult<()> {
        self.refuse()
    }
}

impl CatalogStore for ReaderStore {
    fn save_catalog(&self, _: &CatalogManifest) -> CoreResult<()> {
        self.refuse()
    }
    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        self.inner.load_catalog()
    }
    fn writable(&self) -> bool {
        false
    }
}

impl CheckpointStore for ReaderStore {
    fn write_checkpoint_segment(&self, _: &TableSchema, _: FileId, _: u64, _: Ts, _: &[RecordBatch]) -> CoreResult<StoredFile> {
        self.refuse()
    }
    fn save_checkpoint(&self, _: &CheckpointManifest) -> CoreResult<()> {
        self.refuse()
    }
    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        self.inner.load_checkpoint()
    }
}

fn schema() -> TableSchema {
    TableSchema::from_columns("s.items", &[("id", DataType::Int64, false)], &["id"]).expect("schema")
}

#[test]
fn a_read_only_engine_reads_the_checkpoint_and_writes_nothing() {
    let lake = Arc::new(MemoryLakeStore::new());
    let quiet = EngineConfig { shards: 1, block_rows: 4, file_rows: 8, batch_changes: 4, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
    let writer = Engine::open(quiet.clone(), Arc::clone(&lake) as _).expect("writer");
    let table = writer.create_table(schema()).expect("table");
    for id in 0..20 {
        writer.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
    }
    writer.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(3)] }]).expect("delete");
    writer.wait_for_flushes().expect("flush");
    writer.checkpoint().expect("checkpoint");

    // Background work that writes is due every few milliseconds: none may run.
    let busy = EngineConfig {
        gc_interval: Some(Duration::from_millis(2)),
        checkpoint_interval: Some(Duration::from_millis(2)),
        storage_gc_interval: Some(Duration::from_millis(2)),
        storage_gc_threshold: 0.0,
        ..quiet
    };
    let store = Arc::new(ReaderStore { inner: Arc::clone(&lake), writes: AtomicUsize::new(0), reads: AtomicUsize::new(0) });
    let reader = Engine::open(busy, Arc::clone(&store) as _).expect("a read-only engine");
    assert!(reader.is_read_only() && !writer.is_read_only());
    let rows = rows_of(&reader.scan(table, &reader.snapshot().expect("snapshot"), None).expect("scan")).expect("rows");
    assert_eq!(rows.len(), 19, "the checkpoint's rows, the delete applied");
    std::thread::sleep(Duration::from_millis(50));

    let refused = [
        reader.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(99)] }]).map(|_| ()),
        reader.create_table(TableSchema::from_columns("s.other", &[("id", DataType::Int64, false)], &["id"]).expect("schema")).map(|_| ()),
        reader.checkpoint().map(|_| ()),
    ];
    for result in refused {
        let error = result.expect_err("a read-only engine refuses");
        assert!(matches!(error, CoreError::ReadOnly { .. }), "{error}");
    }
    reader.close().expect("a read-only close");
    assert_eq!(store.writes.load(SeqCst), 0, "the read-only engine asked its store to write");
    writer.close().expect("the writer goes on");
}

/// A reader applies no change, so it rebuilds no primary index, and at open it
/// reads only the checkpoint's segments and the files holding rows created after
/// the checkpoint (to hide them); it still shows exactly the checkpoint's rows.
#[test]
fn a_read_only_engine_builds_no_index_and_reads_only_files_newer_than_the_checkpoint() {
    let lake = Arc::new(MemoryLakeStore::new());
    let quiet = EngineConfig { shards: 2, block_rows: 4, file_rows: 8, batch_changes: 4, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
    let writer = Engine::open(quiet.clone(), Arc::clone(&lake) as _).expect("writer");
    let table = writer.create_table(schema()).expect("table");
    let insert = |ids: std::ops::Range<i64>| {
        for id in ids {
            writer.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
        }
    };
    insert(0..60);
    writer.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(5)] }]).expect("delete");
    writer.wait_for_flushes().expect("flush");
    let checkpoint = writer.checkpoint().expect("checkpoint");
    let ids = |engine: &Engine| {
        let rows = rows_of(&engine.scan(table, &engine.snapshot().expect("snapshot"), None).expect("scan")).expect("rows");
        let mut ids: Vec<i64> = rows.iter().map(|row| if let [Value::Int64(id)] = row[..] { id } else { panic!("{row:?}") }).collect();
        ids.sort_unstable();
        ids
    };
    let at_checkpoint = ids(&writer);
    assert_eq!(at_checkpoint.len(), 59);
    // After the checkpoint: rows flushed to new files, and deletes in old ones.
    insert(60..100);
    writer.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(7)] }]).expect("delete");
    writer.wait_for_flushes().expect("flush");

    let catalog = lake.load_catalog().expect("catalog").expect("a catalog");
    let files = &catalog.tables[0].files;
    let newer = files.iter().filter(|meta| meta.max_create_ts > checkpoint.ts).count();
    let manifest = lake.load_checkpoint().expect("checkpoint").expect("a checkpoint");
    // Segments of files still buffered (a file flushed since is read as the file).
    let segments: usize = manifest.tables[0]
        .files
        .iter()
        .filter(|f| f.is_buffered() && !files.iter().any(|meta| meta.file_id == f.file_id))
        .map(|f| f.segments.len())
        .sum();
    assert!(newer > 0 && newer < files.len(), "{newer} of {} files are newer than the checkpoint", files.len());

    let store = Arc::new(ReaderStore { inner: Arc::clone(&lake), writes: AtomicUsize::new(0), reads: AtomicUsize::new(0) });
    let reader = Engine::open(quiet.clone(), Arc::clone(&store) as _).expect("a read-only engine");
    let report = reader.recovery_report().expect("recovered").clone();
    assert_eq!(report.checkpoint_ts, checkpoint.ts);
    assert_eq!(report.keys, 0, "a reader rebuilds no index");
    assert_eq!(store.reads.load(SeqCst), newer + segments, "reads at open: the newer files and the segments");
    assert_eq!(ids(&reader), at_checkpoint, "a reader sees the checkpoint's rows");
    let keys = reader.live_keys(table).expect("live keys");
    assert_eq!(keys.len(), 59);
    reader.close().expect("a read-only close");

    // The writer's own recovery of the same lake rebuilds every key.
    writer.close().expect("close");
    let reopened = Engine::open(quiet, Arc::clone(&lake) as _).expect("writer reopens");
    assert_eq!(reopened.recovery_report().expect("recovered").keys, 98);
}
