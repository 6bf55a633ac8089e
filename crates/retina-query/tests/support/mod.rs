//! Shared set-up of the SQL tests: an engine over Parquet files in a temp dir with
//! small files, so a few thousand rows span many splits (flushed and in memory).

#![allow(dead_code)]

use std::sync::Arc;

use arrow_schema::DataType;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::datafusion::arrow::util::pretty::pretty_format_batches;
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_storage::ParquetLakeStore;

/// Runs `f` on a fresh thread and waits for it. The Parquet store blocks on a tokio
/// runtime of its own, which must not happen on a thread that drives async tasks (a
/// test body); engine calls that reach storage (start, create_table, scan, export)
/// go through this.
pub fn off<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    std::thread::scope(|scope| scope.spawn(f).join().expect("offloaded call panicked"))
}

/// An engine that is dropped on a plain thread: the Parquet store owns a tokio
/// runtime, and a runtime must not be dropped inside an async context (the test body).
pub struct TestEngine(Option<Arc<Engine>>);

impl TestEngine {
    pub fn new(engine: Engine) -> Self {
        Self(Some(Arc::new(engine)))
    }
}

impl std::ops::Deref for TestEngine {
    type Target = Arc<Engine>;
    fn deref(&self) -> &Arc<Engine> {
        self.0.as_ref().expect("engine present until drop")
    }
}

impl Drop for TestEngine {
    fn drop(&mut self) {
        if let Some(engine) = self.0.take() {
            let _ = std::thread::spawn(move || drop(engine)).join();
        }
    }
}

pub fn engine_with(dir: &std::path::Path, config: EngineConfig) -> TestEngine {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8 temp dir")).expect("open store");
    TestEngine::new(Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(store)).expect("engine"))
}

pub fn small_engine(dir: &std::path::Path) -> TestEngine {
    let config = EngineConfig { shards: 2, block_rows: 64, file_rows: 256, batch_changes: 64, gc_interval: None, ..EngineConfig::default() };
    engine_with(dir, config)
}

pub fn session(engine: &Arc<Engine>) -> RetinaSession {
    RetinaSession::new(Arc::clone(engine), SourceRegistry::new(), SessionOptions { target_partitions: 2, ..SessionOptions::default() })
}

/// `public.items(id int64 pk, qty int32, name utf8 null)`.
pub fn items_table(engine: &Engine, name: &str) -> TableId {
    let schema = TableSchema::from_columns(
        name,
        &[("id", DataType::Int64, false), ("qty", DataType::Int32, false), ("name", DataType::Utf8, true)],
        &["id"],
    )
    .expect("schema");
    engine.create_table(schema).expect("create table")
}

pub fn item(table: TableId, id: i64, qty: i32) -> RowChange {
    RowChange::Insert { table, row: vec![Value::Int64(id), Value::Int32(qty), Value::Utf8(format!("item-{id}").into())] }
}

pub fn update(table: TableId, id: i64, qty: i32) -> RowChange {
    RowChange::Update {
        table,
        key: vec![Value::Int64(id)],
        row: vec![Value::Int64(id), Value::Int32(qty), Value::Utf8(format!("item-{id}").into())],
    }
}

pub fn delete(table: TableId, id: i64) -> RowChange {
    RowChange::Delete { table, key: vec![Value::Int64(id)] }
}

pub fn pretty(batches: &[RecordBatch]) -> String {
    pretty_format_batches(batches).expect("format").to_string()
}

pub fn total_rows(batches: &[RecordBatch]) -> usize {
    batches.iter().map(RecordBatch::num_rows).sum()
}

/// Whether no query snapshot is registered. A tick transaction first moves HWM, so
/// a snapshot still held at the old HWM - 1 would keep LWM behind.
pub fn no_live_snapshots(engine: &Engine) -> bool {
    off(|| tick(engine));
    let txn = engine.transaction_service();
    txn.low_watermark() == txn.high_watermark().prev()
}

/// Waits (up to 10 s) until no query snapshot is registered. A query that ended
/// with an error may still have split reads in flight on blocking threads; they
/// hold the snapshot until they finish, which is what keeps their reads safe.
pub async fn released_soon(engine: &Engine) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !no_live_snapshots(engine) {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    true
}

/// Commits one insert into `test.ticks` (created on first use).
pub fn tick(engine: &Engine) {
    static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
    let table = match engine.table_id("test.ticks") {
        Some(table) => table,
        None => {
            let schema = TableSchema::from_columns("test.ticks", &[("id", DataType::Int64, false)], &["id"]).expect("schema");
            engine.create_table(schema).expect("ticks table")
        }
    };
    let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("tick");
    engine.sync().expect("sync");
}
