//! Engine behaviour through its public API, on the in-memory lake store.

use std::sync::Arc;

use arrow_schema::DataType;
use retina_core::rows::rows_of;
use retina_core::storage::{DataFiles, MemoryLakeStore};
use retina_core::{CoreError, EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableSchema, Ts, Value};

fn engine(config: EngineConfig) -> Engine {
    Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(MemoryLakeStore::new())).expect("engine")
}

fn small() -> EngineConfig {
    EngineConfig { shards: 2, block_rows: 4, file_rows: 8, batch_changes: 3, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, storage_gc_threshold: 0.5, background_nice: 0 }
}

fn accounts() -> TableSchema {
    TableSchema::from_columns(
        "bank.accounts",
        &[("id", DataType::Int64, false), ("owner", DataType::Utf8, true), ("balance", DataType::Int64, false)],
        &["id"],
    )
    .expect("schema")
}

fn account(id: i64, owner: &str, balance: i64) -> Vec<Value> {
    vec![Value::Int64(id), Value::Utf8(owner.into()), Value::Int64(balance)]
}

fn scan_sorted(engine: &Engine, table: retina_core::TableId, ts: Option<&retina_core::Snapshot>) -> Vec<Vec<Value>> {
    let owned;
    let snapshot = match ts {
        Some(s) => s,
        None => {
            owned = engine.snapshot().expect("snapshot");
            &owned
        }
    };
    let mut rows = rows_of(&engine.scan(table, snapshot, None).expect("scan")).expect("rows");
    rows.sort_by_key(|r| match r[0] {
        Value::Int64(v) => v,
        _ => i64::MIN,
    });
    rows
}

#[test]
fn insert_update_delete_and_primary_key_change_across_flushes() {
    let engine = engine(small());
    let table = engine.create_table(accounts()).expect("table");
    for id in 0..20 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "a", 100) }]).expect("insert");
    }
    engine.sync().expect("sync");
    let before = engine.snapshot().expect("snapshot");
    engine
        .submit(vec![
            RowChange::Update { table, key: vec![Value::Int64(3)], row: account(3, "b", 50) },
            RowChange::Delete { table, key: vec![Value::Int64(4)] },
            // Primary-key change: id 5 becomes id 105, likely in another shard.
            RowChange::Update { table, key: vec![Value::Int64(5)], row: account(105, "c", 100) },
        ])
        .expect("txn");
    engine.wait_for_flushes().expect("flushes");
    assert!(engine.stats().files_flushed >= 2, "8-row files must have been flushed");
    let now = scan_sorted(&engine, table, None);
    assert_eq!(now.len(), 19);
    assert!(now.contains(&account(3, "b", 50)));
    assert!(now.contains(&account(105, "c", 100)));
    assert!(!now.iter().any(|r| r[0] == Value::Int64(4) || r[0] == Value::Int64(5)));
    // The old snapshot still sees the state before the transaction.
    let old = scan_sorted(&engine, table, Some(&before));
    assert_eq!(old.len(), 20);
    assert!(old.contains(&account(3, "a", 100)));
    // A deleted key can be inserted again.
    engine.submit(vec![RowChange::Insert { table, row: account(4, "again", 1) }]).expect("re-insert");
    engine.sync().expect("sync");
    assert!(scan_sorted(&engine, table, None).contains(&account(4, "again", 1)));
}

#[test]
fn transaction_is_visible_all_at_once_across_tables() {
    let engine = engine(EngineConfig { batch_changes: 1_000_000, ..small() });
    let a = engine.create_table(accounts()).expect("a");
    let b = engine
        .create_table(
            TableSchema::from_columns("bank.audit", &[("id", DataType::Int64, false)], &["id"]).expect("schema"),
        )
        .expect("b");
    let ts = engine
        .submit(vec![
            RowChange::Insert { table: a, row: account(1, "x", 1) },
            RowChange::Insert { table: b, row: vec![Value::Int64(1)] },
        ])
        .expect("txn");
    // Not sent yet: a huge batch limit keeps it pending.
    assert!(engine.transaction_service().high_watermark() <= ts);
    assert!(scan_sorted(&engine, a, None).is_empty());
    engine.sync().expect("sync");
    assert_eq!(scan_sorted(&engine, a, None).len(), 1);
    assert_eq!(scan_sorted(&engine, b, None).len(), 1);
}

#[test]
fn bad_changes_are_errors_that_name_table_and_stop_commits() {
    let engine = engine(small());
    let table = engine.create_table(accounts()).expect("table");
    assert!(matches!(engine.create_table(accounts()), Err(CoreError::TableExists { .. })));
    let arity = engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(1)] }]);
    assert!(arity.expect_err("arity").to_string().contains("bank.accounts"));
    let unknown = engine.submit(vec![RowChange::Insert { table: retina_core::TableId(99), row: vec![] }]);
    assert!(matches!(unknown, Err(CoreError::UnknownTable { .. })));

    engine.submit(vec![RowChange::Insert { table, row: account(1, "x", 1) }]).expect("insert");
    let hwm = engine.sync().expect("sync");
    engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(42)] }]).expect("queued");
    let error = engine.sync().expect_err("missing key stops the engine");
    let message = error.to_string();
    assert!(message.contains("bank.accounts") && message.contains("delete"), "{message}");
    assert_eq!(engine.transaction_service().high_watermark(), hwm, "HWM must not pass the failed transaction");
    assert!(engine.submit(vec![]).is_err(), "a stopped engine refuses new work");
}

#[test]
fn type_errors_name_the_column_and_ts() {
    let engine = engine(small());
    let table = engine.create_table(accounts()).expect("table");
    let ts = engine
        .submit(vec![RowChange::Insert {
            table,
            row: vec![Value::Int64(1), Value::Int64(2), Value::Int64(3)],
        }])
        .expect("queued");
    let message = engine.sync().expect_err("type error").to_string();
    assert!(message.contains("column owner") && message.contains(&format!("ts {ts}")), "{message}");
    let duplicate = self::engine(small());
    let t = duplicate.create_table(accounts()).expect("table");
    duplicate.submit(vec![RowChange::Insert { table: t, row: account(1, "x", 1) }]).expect("insert");
    duplicate.submit(vec![RowChange::Insert { table: t, row: account(1, "y", 1) }]).expect("queued");
    assert!(matches!(duplicate.sync(), Err(CoreError::EngineStopped { reason }) if reason.contains("already has a live row")));
}

#[test]
fn gc_keeps_old_snapshot_results_and_frees_memory_after() {
    let engine = engine(EngineConfig { file_rows: 4096, block_rows: 1024, ..small() });
    let table = engine.create_table(accounts()).expect("table");
    for id in 0..1000 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "a", 0) }]).expect("insert");
    }
    engine.sync().expect("sync");
    let held = engine.snapshot().expect("snapshot");
    let expected = scan_sorted(&engine, table, Some(&held));
    for round in 1..=5 {
        for id in 0..1000 {
            engine
                .submit(vec![RowChange::Update { table, key: vec![Value::Int64(id)], row: account(id, "a", round) }])
                .expect("update");
        }
        engine.sync().expect("sync");
        let lwm = engine.collect_garbage();
        assert!(lwm <= held.ts(), "GC must not pass the held snapshot");
        assert_eq!(scan_sorted(&engine, table, Some(&held)), expected, "round {round}");
    }
    let bytes_held = engine.stats().visibility_bytes;
    drop(held);
    let lwm = engine.collect_garbage();
    assert!(lwm >= Ts(5000));
    let bytes_after = engine.stats().visibility_bytes;
    assert!(bytes_after < bytes_held, "GC after the reader left must free memory: {bytes_after} >= {bytes_held}");
    let rows = scan_sorted(&engine, table, None);
    assert!(rows.iter().all(|r| r[2] == Value::Int64(5)));
}

#[test]
fn source_positions_follow_visibility() {
    let engine = engine(EngineConfig { batch_changes: 1_000_000, ..small() });
    let table = engine.create_table(accounts()).expect("table");
    engine.submit_from("file:a.jsonl", "line 1".into(), vec![RowChange::Insert { table, row: account(1, "x", 1) }]).expect("t1");
    assert!(engine.source_positions().is_empty(), "not visible yet");
    engine.sync().expect("sync");
    engine.submit_from("file:a.jsonl", "line 2".into(), vec![RowChange::Insert { table, row: account(2, "x", 1) }]).expect("t2");
    let positions = engine.source_positions();
    assert_eq!(positions.len(), 1);
    assert_eq!((positions[0].source.as_str(), positions[0].position.as_str()), ("file:a.jsonl", "line 1"));
    engine.sync().expect("sync");
    assert_eq!(engine.source_positions()[0].position, "line 2");
}

#[test]
fn checkpoints_write_only_new_buffered_rows_and_recover() {
    let store = Arc::new(MemoryLakeStore::new());
    let config = EngineConfig { file_rows: 1024, ..small() };
    let engine = Engine::open(config.clone(), store.clone()).expect("open");
    let table = engine.create_table(accounts()).expect("table");
    for id in 0..100 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "a", 1) }]).expect("insert");
    }
    engine.sync().expect("sync");
    assert_eq!(engine.checkpoint().expect("first").buffered_rows, 100);
    for id in 100..130 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "b", 1) }]).expect("insert");
    }
    engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(5)] }]).expect("delete");
    engine.sync().expect("sync");
    let second = engine.checkpoint().expect("second");
    assert_eq!(second.buffered_rows, 30, "rows saved by the first checkpoint are reused");
    engine.submit(vec![RowChange::Insert { table, row: account(999, "lost", 1) }]).expect("after checkpoint");
    drop(engine);
    let recovered = Engine::open(config, store).expect("recover");
    assert_eq!(recovered.recovery_report().expect("recovered").checkpoint_ts, second.ts);
    let rows = scan_sorted(&recovered, table, None);
    assert_eq!(rows.len(), 129);
    assert!(!rows.iter().any(|r| r[0] == Value::Int64(5) || r[0] == Value::Int64(999)));
}

/// A table that gets a row per checkpoint does not pile up a segment per checkpoint:
/// the newest ones are merged, the replaced ones deleted, and recovery gets every row.
#[test]
fn a_slowly_filling_file_keeps_few_checkpoint_segments() {
    use retina_core::storage::CheckpointStore;

    let store = Arc::new(MemoryLakeStore::new());
    let config = EngineConfig { file_rows: 4096, ..small() };
    let engine = Engine::open(config.clone(), store.clone()).expect("open");
    let table = engine.create_table(accounts()).expect("table");
    let (mut most, mut written) = (0, 0);
    for id in 0..300 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "a", 1) }]).expect("insert");
        engine.sync().expect("sync");
        written += engine.checkpoint().expect("checkpoint").buffered_rows;
        let checkpoint = store.load_checkpoint().expect("load").expect("saved");
        let segments: Vec<usize> = checkpoint.tables[0].files.iter().map(|f| f.segments.len()).collect();
        assert_eq!(store.checkpoint_segments(), segments.iter().sum::<usize>(), "replaced segments are deleted");
        most = most.max(segments.into_iter().max().unwrap_or(0));
    }
    // Two shards, so two files of ~150 rows: segments of 1, 8 and 64 rows, at most
    // seven of each (a merge per checkpoint would be 150 each).
    assert!(most <= 21, "{most} segments in one file for ~150 rows saved one by one");
    assert!((300..=300 * 4).contains(&written), "{written} rows written for 300");
    drop(engine);
    let recovered = Engine::open(config, store).expect("recover");
    let ids: Vec<Value> = scan_sorted(&recovered, table, None).into_iter().map(|row| row[0].clone()).collect();
    assert_eq!(ids, (0..300).map(Value::Int64).collect::<Vec<_>>());
}

#[test]
fn mistyped_or_null_keys_are_rejected_at_submit() {
    let engine = engine(small());
    let table = engine.create_table(accounts()).expect("table");
    let wrong = engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int32(1)] }]).expect_err("int32 key");
    let message = wrong.to_string();
    assert!(message.contains("bank.accounts (primary key)") && message.contains("column id"), "{message}");
    let null = engine.submit(vec![RowChange::Update { table, key: vec![Value::Null], row: account(1, "x", 1) }]);
    assert!(matches!(null, Err(CoreError::NullViolation { .. })));
    engine.submit(vec![RowChange::Insert { table, row: account(1, "x", 1) }]).expect("the engine still works");
    engine.sync().expect("sync");
}

#[test]
fn storage_gc_rewrites_stale_files_and_keeps_every_snapshot_right() {
    let store = Arc::new(MemoryLakeStore::new());
    let config = EngineConfig { file_rows: 16, block_rows: 4, ..small() };
    let engine = Engine::open(config.clone(), store.clone()).expect("open");
    let table = engine.create_table(accounts()).expect("table");
    for id in 0..64 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "a", id) }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flush");
    let flushed_before = engine.table(table).expect("table").files().flushed.len();
    assert!(flushed_before >= 2);
    engine.checkpoint().expect("checkpoint before the deletes");
    let held = engine.snapshot().expect("snapshot");
    for id in (0..64).filter(|id| id % 4 != 0) {
        engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(id)] }]).expect("delete");
    }
    engine.sync().expect("sync");
    engine.collect_garbage();
    let report = engine.collect_storage_garbage(0.5).expect("storage GC");
    assert_eq!(report.files_rewritten, 0, "the held snapshot keeps LWM below the deletes");
    let expected_held = scan_sorted(&engine, table, Some(&held));
    drop(held);
    engine.collect_garbage();
    let report = engine.collect_storage_garbage(0.5).expect("storage GC");
    assert!(report.files_rewritten >= 2, "{report:?}");
    assert!(report.rows_dropped >= report.rows_kept, "{report:?}");
    let files = engine.table(table).expect("table").files();
    assert!(files.flushed.iter().any(|f| !f.meta.replaces.is_empty()));
    let now = scan_sorted(&engine, table, None);
    assert_eq!(now.len(), 16);
    assert_eq!(expected_held.len(), 64);
    // Moved rows stay reachable: update and delete them through the index.
    engine.submit(vec![RowChange::Update { table, key: vec![Value::Int64(4)], row: account(4, "moved", 1) }]).expect("update");
    engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(8)] }]).expect("delete");
    engine.sync().expect("sync");
    let after = scan_sorted(&engine, table, None);
    assert_eq!(after.len(), 15);
    assert!(after.contains(&account(4, "moved", 1)));
    // A crash before any checkpoint after the swap: recovery goes back to the old files.
    drop(engine);
    let recovered = Engine::open(config.clone(), store.clone()).expect("recover");
    assert_eq!(scan_sorted(&recovered, table, None).len(), 64, "the last checkpoint is from before the deletes");
    drop(recovered);
}

#[test]
fn storage_gc_then_checkpoint_deletes_the_old_files_and_recovers_from_the_new() {
    let store = Arc::new(MemoryLakeStore::new());
    let config = EngineConfig { file_rows: 16, block_rows: 4, ..small() };
    let engine = Engine::open(config.clone(), store.clone()).expect("open");
    let table = engine.create_table(accounts()).expect("table");
    for id in 0..32 {
        engine.submit(vec![RowChange::Insert { table, row: account(id, "a", id) }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flush");
    let old_paths: Vec<String> = engine.table(table).expect("table").files().flushed.iter().map(|f| f.meta.path.clone()).collect();
    for id in (0..32).filter(|id| id % 2 == 1) {
        engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(id)] }]).expect("delete");
    }
    engine.sync().expect("sync");
    engine.collect_garbage();
    assert!(engine.collect_storage_garbage(0.4).expect("storage GC").files_rewritten >= 1);
    engine.checkpoint().expect("checkpoint after the swap");
    let meta = engine.table(table).expect("table").files().flushed[0].meta.clone();
    for path in &old_paths {
        let gone = store.read_file(&accounts(), &retina_core::catalog::DataFileMeta { path: path.clone(), ..retina_core::catalog::DataFileMeta::clone(&meta) }, &[0], &[]);
        assert!(gone.is_err(), "old file {path} must be deleted after the checkpoint");
    }
    drop(engine);
    let recovered = Engine::open(config, store).expect("recover");
    let rows = scan_sorted(&recovered, table, None);
    assert_eq!(rows.len(), 16);
    assert!(rows.iter().all(|r| matches!(r[0], Value::Int64(id) if id % 2 == 0)));
}
