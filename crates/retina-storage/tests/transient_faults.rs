//! Transient storage faults in the middle of a background step: the step is
//! retried, and the lake holds each row once, live, after recovery too.
//! Driven by retina-core's failpoints (on in these tests); this binary has one test,
//! so the failpoint configuration cannot reach another test's engine.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use retina_core::rows::rows_of;
use retina_core::storage::CatalogStore;
use retina_core::{Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_storage::ParquetLakeStore;

const ROWS: i64 = 65;

fn config() -> EngineConfig {
    EngineConfig {
        shards: 1,
        block_rows: 16,
        file_rows: 64,
        gc_interval: None,
        checkpoint_interval: None,
        storage_gc_interval: None,
        ..EngineConfig::default()
    }
}

fn open(dir: &std::path::Path) -> (Engine, Arc<ParquetLakeStore>) {
    let store = Arc::new(ParquetLakeStore::open(dir.to_str().expect("utf-8 path")).expect("store"));
    (Engine::open(config(), Arc::clone(&store) as _).expect("open"), store)
}

/// Every key of `table` once, with its value.
fn visible(engine: &Engine, table: TableId) -> Vec<(i64, i64)> {
    let snapshot = engine.snapshot().expect("snapshot");
    let rows = rows_of(&engine.scan(table, &snapshot, None).expect("scan")).expect("rows");
    let mut seen = HashSet::new();
    let mut out: Vec<(i64, i64)> = rows
        .iter()
        .map(|row| match (&row[0], &row[1]) {
            (Value::Int64(id), Value::Int64(v)) => {
                assert!(seen.insert(*id), "key {id} is visible twice");
                (*id, *v)
            }
            other => panic!("unexpected row {other:?}"),
        })
        .collect();
    out.sort_unstable();
    out
}

/// A flush whose catalog save fails once is retried; storage GC then rewrites the
/// file once, and no row is visible twice: not live, not after a restart.
#[test]
fn a_flush_retried_after_a_failed_catalog_save_leaves_each_row_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, store) = open(dir.path());
    let schema = TableSchema::new(
        "t",
        Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("v", DataType::Int64, false)]),
        vec![0],
    )
    .expect("schema");
    let table = engine.create_table(schema).expect("create");

    fail::cfg("flush::before-catalog", "1*return").expect("failpoint");
    // 65 rows: the 65th starts a second file, which sends the first to the flusher.
    for id in 0..ROWS {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Int64(0)] }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes");
    fail::remove("flush::before-catalog");
    let stats = engine.stats();
    let error = stats.last_flush_error.expect("the first attempt failed");
    assert!(error.contains("failpoint flush::before-catalog"), "{error}");
    assert_eq!(stats.files_flushed, 1, "the retry flushed the file");

    let catalog = store.load_catalog().expect("catalog").expect("a catalog");
    let ids: Vec<u64> = catalog.tables[table.0 as usize].files.iter().map(|f| f.file_id.0).collect();
    assert_eq!(ids.len(), 1, "the flushed file is listed once: {ids:?}");

    // Most rows of the flushed file get a new version: storage GC rewrites it.
    for id in 0..60 {
        engine.submit(vec![RowChange::Update { table, key: vec![Value::Int64(id)], row: vec![Value::Int64(id), Value::Int64(1)] }]).expect("update");
    }
    engine.sync().expect("sync");
    let report = engine.collect_storage_garbage(0.3).expect("storage GC");
    assert_eq!(report.files_rewritten, 1, "{report:?}");
    let expected: Vec<(i64, i64)> = (0..ROWS).map(|id| (id, i64::from(id < 60))).collect();
    assert_eq!(visible(&engine, table), expected);

    engine.close().expect("close");
    drop(store); // its lock on the directory
    let (engine, _) = open(dir.path());
    assert_eq!(visible(&engine, table), expected, "after recovery");
}
