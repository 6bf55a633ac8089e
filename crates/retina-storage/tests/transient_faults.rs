//! Transient storage faults in the middle of a background step: the step is
//! retried, and the lake holds each row once, live, after recovery too.
//! Driven by retina-core's failpoints (on in these tests), which are process-wide:
//! the tests here take [`ONE_AT_A_TIME`] so one's configuration never reaches
//! another's engine.

use std::collections::HashSet;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema};
use retina_core::rows::rows_of;
use retina_core::storage::CatalogStore;
use retina_core::{Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_storage::ParquetLakeStore;

const ROWS: i64 = 65;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

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

fn schema() -> TableSchema {
    TableSchema::new(
        "t",
        Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("v", DataType::Int64, false)]),
        vec![0],
    )
    .expect("schema")
}

/// The data files in the lake directory (checkpoint segments aside).
fn data_files(dir: &std::path::Path) -> Vec<String> {
    let folder = dir.join("tables").join("t");
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".parquet"))
        .collect();
    names.sort();
    names
}

/// This test's turn with the failpoints, a new lake in a temporary directory, its
/// engine and store, and its table `t`.
fn fresh_lake() -> (std::sync::MutexGuard<'static, ()>, tempfile::TempDir, Engine, Arc<ParquetLakeStore>, TableId) {
    let alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, store) = open(dir.path());
    let table = engine.create_table(schema()).expect("create");
    (alone, dir, engine, store, table)
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
    let (_alone, dir, engine, store, table) = fresh_lake();

    fail::cfg("flush::before-catalog", "1*return").expect("failpoint");
    // 65 rows: the 65th starts a second file, which sends the first to the flusher.
    for id in 0..ROWS {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Int64(0)] }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes");
    fail::remove("flush::before-catalog");
    let stats = engine.stats();
    assert_eq!((stats.flush_failures, stats.files_flushed), (1, 1), "the first attempt failed, the retry flushed the file");
    assert_eq!(stats.last_flush_error, None, "the retry succeeded");

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

/// A checkpoint after which deleting a file storage GC replaced fails is durable
/// all the same (it reports the clean-up error, it does not fail), and the file is
/// deleted by the next checkpoint instead of being forgotten in storage.
#[test]
fn a_failed_delete_of_a_replaced_file_is_retried_by_the_next_checkpoint() {
    let (_alone, dir, engine, _store, table) = fresh_lake();
    for id in 0..ROWS {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Int64(0)] }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes");
    let flushed = data_files(dir.path());
    assert_eq!(flushed.len(), 1, "{flushed:?}");
    for id in 0..60 {
        let update = RowChange::Update { table, key: vec![Value::Int64(id)], row: vec![Value::Int64(id), Value::Int64(1)] };
        engine.submit_from("updates", id.to_string(), vec![update]).expect("update");
    }
    engine.sync().expect("sync");
    assert_eq!(engine.collect_storage_garbage(0.3).expect("storage GC").files_rewritten, 1);

    fail::cfg("storage_gc::delete-retired", "1*return").expect("failpoint");
    let report = engine.checkpoint().expect("the checkpoint is durable");
    fail::remove("storage_gc::delete-retired");
    let error = report.cleanup_error.expect("the delete failed");
    assert!(error.contains(&flushed[0]), "{error}");
    let durable: Vec<(String, String)> = engine.durable_positions().into_iter().map(|p| (p.source, p.position)).collect();
    assert_eq!(durable, vec![("updates".to_string(), "59".to_string())], "what the checkpoint made durable is acknowledged");
    assert!(data_files(dir.path()).contains(&flushed[0]), "not deleted yet");

    let report = engine.checkpoint().expect("checkpoint");
    assert_eq!(report.cleanup_error, None);
    assert!(!data_files(dir.path()).contains(&flushed[0]), "deleted by the next checkpoint: {:?}", data_files(dir.path()));
    let expected: Vec<(i64, i64)> = (0..ROWS).map(|id| (id, i64::from(id < 60))).collect();
    assert_eq!(visible(&engine, table), expected);
}

/// Checkpoint segments a checkpoint made unneeded whose delete fails: the checkpoint
/// is durable all the same (it reports the clean-up error), and the next one
/// deletes them.
#[test]
fn a_failed_delete_of_unneeded_segments_is_retried_by_the_next_checkpoint() {
    let (_alone, dir, engine, _store, table) = fresh_lake();
    let segments = || -> Vec<String> {
        match std::fs::read_dir(dir.path().join("tables/t/_segments")) {
            Ok(entries) => entries.filter_map(|entry| entry.ok()?.file_name().into_string().ok()).collect(),
            Err(_) => Vec::new(),
        }
    };
    let insert = |ids: std::ops::Range<i64>| {
        for id in ids {
            let row = RowChange::Insert { table, row: vec![Value::Int64(id), Value::Int64(0)] };
            engine.submit_from("inserts", id.to_string(), vec![row]).expect("insert");
        }
    };
    // 30 buffered rows: the checkpoint saves them as a segment.
    insert(0..30);
    engine.sync().expect("sync");
    engine.checkpoint().expect("checkpoint");
    let first = segments();
    assert_eq!(first.len(), 1, "{first:?}");
    // The file fills and is flushed: the next checkpoint no longer needs the segment.
    insert(30..ROWS);
    engine.sync().expect("sync");
    engine.wait_for_flushes().expect("flushes");
    fail::cfg("storage::delete-unreferenced-segments", "1*return").expect("failpoint");
    let report = engine.checkpoint().expect("the checkpoint is durable");
    fail::remove("storage::delete-unreferenced-segments");
    let error = report.cleanup_error.expect("the segments were not deleted");
    assert!(error.contains("failpoint storage::delete-unreferenced-segments"), "{error}");
    let durable: Vec<(String, String)> = engine.durable_positions().into_iter().map(|p| (p.source, p.position)).collect();
    assert_eq!(durable, vec![("inserts".to_string(), (ROWS - 1).to_string())]);
    assert!(segments().contains(&first[0]), "not deleted yet");

    assert_eq!(engine.checkpoint().expect("checkpoint").cleanup_error, None);
    assert!(!segments().contains(&first[0]), "deleted by the next checkpoint: {:?}", segments());
}

/// A file left in the segments folder of lakes from before publication is swept by
/// the first checkpoint a process writes; when that clean-up fails, the next
/// checkpoint sweeps it (it was marked swept before its deletes, so it stayed until
/// the next process).
#[test]
fn a_failed_sweep_of_the_old_segments_folder_is_retried_by_the_next_checkpoint() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let legacy = dir.path().join("checkpoints/segments");
    std::fs::create_dir_all(&legacy).expect("legacy folder");
    let stray = legacy.join("7-0.parquet");
    std::fs::write(&stray, b"a segment of an old checkpoint").expect("stray segment");

    fail::cfg("storage::delete-unreferenced-segments", "1*return").expect("failpoint");
    let (engine, _store) = open(dir.path());
    let table = engine.create_table(schema());
    fail::remove("storage::delete-unreferenced-segments");
    let table = table.expect("create");
    assert!(stray.exists(), "the first sweep failed");

    let row = RowChange::Insert { table, row: vec![Value::Int64(1), Value::Int64(0)] };
    engine.submit_from("inserts", "1".to_string(), vec![row]).expect("insert");
    engine.sync().expect("sync");
    assert_eq!(engine.checkpoint().expect("checkpoint").cleanup_error, None);
    assert!(!stray.exists(), "the next checkpoint sweeps the old folder");
}

/// When the publication state that says which segments retained versions still need
/// cannot be read, the checkpoint keeps every segment and says why in its clean-up
/// error (it was dropped silently); once the state reads again, clean-up goes on.
#[test]
fn an_unreadable_publication_state_is_reported_by_the_checkpoint_clean_up() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tempfile::tempdir().expect("tempdir");
    let state = dir.path().join("_retina/published/state.json");
    std::fs::create_dir_all(state.parent().expect("folder")).expect("state folder");
    std::fs::write(&state, b"{ not json").expect("broken state");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8 path"))
        .expect("store")
        .publishing(Some(retina_storage::PublishOptions::every_checkpoint(std::time::Duration::ZERO)));
    let engine = Engine::open(config(), Arc::new(store) as _).expect("open");
    let table = engine.create_table(schema()).expect("create");
    let row = RowChange::Insert { table, row: vec![Value::Int64(1), Value::Int64(0)] };
    engine.submit_from("inserts", "1".to_string(), vec![row]).expect("insert");
    engine.sync().expect("sync");

    let report = engine.checkpoint().expect("the checkpoint is durable");
    let error = report.cleanup_error.expect("the clean-up says why it kept the segments");
    assert!(error.contains("_retina/published/state.json"), "{error}");

    std::fs::remove_file(&state).expect("state removed");
    assert_eq!(engine.checkpoint().expect("checkpoint").cleanup_error, None);
}
