//! Storage faults: a lake store that fails on demand. A failed flush is retried
//! (the rows stay readable in memory meanwhile), a failed checkpoint leaves the
//! previous one in force, and recovery after it loses nothing.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use retina_core::catalog::{CatalogManifest, DataFileMeta};
use retina_core::checkpoint::CheckpointManifest;
use retina_core::rows::rows_of;
use retina_core::storage::{CatalogStore, CheckpointStore, DataFiles, DecodedRows, MemoryLakeStore, PageBound, StoredFile};
use retina_core::{CoreError, CoreResult, Engine, EngineConfig, FileId, RowChange, TableSchema, Ts, Value};

/// Fails the next `fail_writes` data-file writes and `fail_checkpoints` checkpoint saves.
#[derive(Default)]
struct FlakyStore {
    inner: MemoryLakeStore,
    fail_writes: AtomicUsize,
    fail_checkpoints: AtomicUsize,
}

fn take_failure(counter: &AtomicUsize) -> bool {
    counter.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok()
}

impl DataFiles for FlakyStore {
    fn write_file(&self, table: &TableSchema, file_id: FileId, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        if take_failure(&self.fail_writes) {
            return Err(CoreError::Storage("injected: disk full".into()));
        }
        self.inner.write_file(table, file_id, batches)
    }
    fn read_file(&self, table: &TableSchema, file: &DataFileMeta, columns: &[usize], bounds: &[PageBound]) -> CoreResult<DecodedRows> {
        self.inner.read_file(table, file, columns, bounds)
    }
    fn delete_file(&self, path: &str) -> CoreResult<()> {
        self.inner.delete_file(path)
    }
}

impl CatalogStore for FlakyStore {
    fn save_catalog(&self, catalog: &CatalogManifest) -> CoreResult<()> {
        self.inner.save_catalog(catalog)
    }
    fn load_catalog(&self) -> CoreResult<Option<CatalogManifest>> {
        self.inner.load_catalog()
    }
}

impl CheckpointStore for FlakyStore {
    fn write_checkpoint_segment(&self, table: &TableSchema, file_id: FileId, first_row: u64, ts: Ts, batches: &[RecordBatch]) -> CoreResult<StoredFile> {
        self.inner.write_checkpoint_segment(table, file_id, first_row, ts, batches)
    }
    fn save_checkpoint(&self, checkpoint: &CheckpointManifest) -> CoreResult<()> {
        if take_failure(&self.fail_checkpoints) {
            return Err(CoreError::Storage("injected: checkpoint write failed".into()));
        }
        self.inner.save_checkpoint(checkpoint)
    }
    fn load_checkpoint(&self) -> CoreResult<Option<CheckpointManifest>> {
        self.inner.load_checkpoint()
    }
}

fn schema() -> TableSchema {
    TableSchema::from_columns("s.items", &[("id", DataType::Int64, false)], &["id"]).expect("schema")
}

fn config() -> EngineConfig {
    EngineConfig { shards: 1, block_rows: 4, file_rows: 8, batch_changes: 4, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, storage_gc_threshold: 0.5, background_nice: 0 }
}

fn count(engine: &Engine) -> usize {
    let table = engine.table_id("s.items").expect("table");
    let snapshot = engine.snapshot().expect("snapshot");
    rows_of(&engine.scan(table, &snapshot, None).expect("scan")).expect("rows").len()
}

#[test]
fn failed_flushes_are_retried_and_reported() {
    let store = Arc::new(FlakyStore::default());
    store.fail_writes.store(2, SeqCst);
    let engine = Engine::open(config(), store.clone()).expect("open");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..20 {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes succeed after retries");
    let stats = engine.stats();
    assert_eq!((stats.files_flushed, stats.flush_failures), (2, 2));
    assert_eq!(stats.last_flush_error, None, "the last attempt succeeded");
    assert_eq!(count(&engine), 20);

    // While a flush keeps failing, the error says what and where.
    store.fail_writes.store(usize::MAX, SeqCst);
    for id in 20..40 {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let error = loop {
        if let Some(error) = engine.stats().last_flush_error {
            break error;
        }
        assert!(std::time::Instant::now() < deadline, "no flush failed");
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert!(error.contains("disk full") && error.contains("s.items"), "{error}");
    store.fail_writes.store(0, SeqCst);
    engine.wait_for_flushes().expect("the retry succeeds");
    assert_eq!(engine.stats().last_flush_error, None);
    assert_eq!(count(&engine), 40);
}

/// A flush that fails on every attempt stops the engine with an error naming the
/// file, the table, the attempts and the cause; nothing is applied after it.
#[test]
fn a_flush_that_keeps_failing_stops_the_engine_and_says_why() {
    let store = Arc::new(FlakyStore::default());
    let engine = Engine::open(config(), store.clone()).expect("open");
    let table = engine.create_table(schema()).expect("table");
    store.fail_writes.store(usize::MAX, SeqCst);
    for id in 0..9 {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
    }
    engine.sync().expect("the rows are applied in memory");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let failure = loop {
        if let Some(failure) = engine.failure() {
            break failure.to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the engine never gave up on the flush");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    for part in ["flush of file", "of table s.items", "(attempt 8)", "injected: disk full"] {
        assert!(failure.contains(part), "{part:?} missing from: {failure}");
    }
    let refused = engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(100)] }]).expect_err("stopped");
    assert!(matches!(refused, CoreError::EngineStopped { .. }), "{refused}");
}

#[test]
fn failed_checkpoint_keeps_the_previous_one_and_recovery_loses_nothing_before_it() {
    let store = Arc::new(FlakyStore::default());
    let engine = Engine::open(config(), store.clone()).expect("open");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..10 {
        engine.submit_from("src", id.to_string(), vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
    }
    engine.sync().expect("sync");
    let good = engine.checkpoint().expect("checkpoint");
    for id in 10..15 {
        engine.submit_from("src", id.to_string(), vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
    }
    engine.sync().expect("sync");
    store.fail_checkpoints.store(1, SeqCst);
    let error = engine.checkpoint().expect_err("injected failure");
    assert!(error.to_string().contains("checkpoint write failed"), "{error}");
    drop(engine);
    let recovered = Engine::open(config(), store).expect("recover");
    assert_eq!(recovered.recovery_report().expect("recovered").checkpoint_ts, good.ts);
    assert_eq!(recovered.recovered_positions()[0].position, "9");
    assert_eq!(count(&recovered), 10, "rows after the good checkpoint come back by replaying the source");
}
