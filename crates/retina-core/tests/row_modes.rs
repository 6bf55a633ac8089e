//! The row changes whose outcome depends on what the mirror holds: upserts of
//! snapshot reads, updates and deletes of rows that may be absent
//! (`--on-absent-row upsert`), and updates that keep columns the source did not send
//! (PostgreSQL's unchanged TOAST values). Each is decided in the shard owning the key.

use std::sync::Arc;

use arrow_schema::DataType;
use retina_core::rows::rows_of;
use retina_core::storage::MemoryLakeStore;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableId, TableSchema, Value};

fn engine() -> Engine {
    let config = EngineConfig {
        shards: 2,
        block_rows: 4,
        file_rows: 8,
        batch_changes: 3,
        gc_interval: None,
        checkpoint_interval: None,
       
        storage_gc_interval: None,
        ..EngineConfig::default()
    };
    Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(MemoryLakeStore::new())).expect("engine")
}

fn documents(engine: &Engine) -> TableId {
    let schema = TableSchema::from_columns(
        "public.documents",
        &[("id", DataType::Int64, false), ("title", DataType::Utf8, true), ("body", DataType::Utf8, true), ("blob", DataType::Binary, true)],
        &["id"],
    )
    .expect("schema");
    engine.create_table(schema).expect("table")
}

fn doc(id: i64, title: &str, body: Option<&str>) -> Vec<Value> {
    let body = body.map_or(Value::Null, |b| Value::Utf8(b.into()));
    vec![Value::Int64(id), Value::Utf8(title.into()), body, Value::Binary(vec![id as u8; 3])]
}

fn rows(engine: &Engine, table: TableId) -> Vec<Vec<Value>> {
    let snapshot = engine.snapshot().expect("snapshot");
    let mut rows = rows_of(&engine.scan(table, &snapshot, None).expect("scan")).expect("rows");
    rows.sort_by_key(|r| format!("{r:?}"));
    rows
}

fn key(id: i64) -> Vec<Value> {
    vec![Value::Int64(id)]
}

#[test]
fn upsert_inserts_an_absent_row_and_replaces_a_live_one() {
    let engine = engine();
    let table = documents(&engine);
    engine.submit(vec![RowChange::Insert { table, row: doc(1, "a", Some("x")) }]).expect("insert");
    engine
        .submit(vec![RowChange::Upsert { table, row: doc(1, "a2", Some("y")) }, RowChange::Upsert { table, row: doc(2, "b", None) }])
        .expect("upserts");
    // Twice in one transaction too (an incremental snapshot re-reading a row).
    engine
        .submit(vec![RowChange::Upsert { table, row: doc(3, "c", None) }, RowChange::Upsert { table, row: doc(3, "c2", None) }])
        .expect("upserts");
    engine.sync().expect("sync");
    assert_eq!(rows(&engine, table), vec![doc(1, "a2", Some("y")), doc(2, "b", None), doc(3, "c2", None)]);
    let stats = engine.stats();
    assert_eq!((stats.absent_row_upserts, stats.absent_row_deletes_ignored), (0, 0), "snapshot reads are not absent-row upserts");
}

#[test]
fn absent_rows_fail_strict_changes_and_are_counted_by_tolerant_ones() {
    let engine = engine();
    let table = documents(&engine);
    engine.submit(vec![RowChange::Insert { table, row: doc(1, "a", None) }]).expect("insert");
    engine
        .submit(vec![
            RowChange::UpdateOrInsert { table, key: key(1), row: doc(1, "present", None) },
            RowChange::UpdateOrInsert { table, key: key(7), row: doc(7, "absent", None) },
            // A key change of an absent row: the new key is inserted.
            RowChange::UpdateOrInsert { table, key: key(8), row: doc(9, "moved", None) },
            RowChange::DeleteIfPresent { table, key: key(42) },
            RowChange::DeleteIfPresent { table, key: key(7) },
        ])
        .expect("tolerant changes");
    engine.sync().expect("sync");
    assert_eq!(rows(&engine, table), vec![doc(1, "present", None), doc(9, "moved", None)]);
    let stats = engine.stats();
    assert_eq!(stats.absent_row_upserts, 2, "keys 7 and 8 were absent");
    assert_eq!(stats.absent_row_deletes_ignored, 1, "key 42 was absent; key 7 was deleted");

    // The strict forms still stop replay on an absent row.
    engine.submit(vec![RowChange::Update { table, key: key(99), row: doc(99, "x", None) }]).expect("submitted");
    let error = engine.sync().expect_err("update of an absent row").to_string();
    assert!(error.contains("public.documents") && error.contains("no live row"), "{error}");
}

#[test]
fn update_keeping_takes_previous_values_wherever_the_row_is() {
    let engine = engine();
    let table = documents(&engine);
    // 20 rows with 8-row files: rows 1..=16 end up in flushed files, the rest in the
    // write buffers.
    for id in 1..=20 {
        engine.submit(vec![RowChange::Insert { table, row: doc(id, "t", Some(&format!("body {id}"))) }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes");
    assert!(engine.stats().files_flushed >= 1, "some rows must be in data files");
    let mut expected: Vec<Vec<Value>> = (1..=20).map(|id| doc(id, "t", Some(&format!("body {id}")))).collect();
    let mut changes = Vec::new();
    for id in [1i64, 5, 12, 19, 20] {
        // The after-image lacks `body` and `blob` (NULL here): both are kept.
        let mut row = doc(id, "new", None);
        row[3] = Value::Null;
        changes.push(RowChange::UpdateKeeping { table, key: key(id), row, keep: vec![2, 3] });
        expected[id as usize - 1][1] = Value::Utf8("new".into());
    }
    engine.submit(changes).expect("updates");
    // Inserted and then updated in one batch: the previous row is not published yet.
    engine
        .submit(vec![
            RowChange::Insert { table, row: doc(30, "fresh", Some("kept body")) },
            RowChange::UpdateKeeping { table, key: key(30), row: doc(30, "fresh2", None), keep: vec![2] },
        ])
        .expect("same-batch update");
    expected.push(doc(30, "fresh2", Some("kept body")));
    // Kept twice in a row: the second takes the first's kept value.
    engine.submit(vec![RowChange::UpdateKeeping { table, key: key(5), row: doc(5, "again", None), keep: vec![2, 3] }]).expect("again");
    expected[4][1] = Value::Utf8("again".into());
    engine.sync().expect("sync");
    expected.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(rows(&engine, table), expected);
}

#[test]
fn update_keeping_without_a_previous_row_stops_replay_naming_the_column() {
    let engine = engine();
    let table = documents(&engine);
    engine.submit(vec![RowChange::UpdateKeeping { table, key: key(3), row: doc(3, "x", None), keep: vec![2] }]).expect("submitted");
    let error = engine.sync().expect_err("nothing to keep").to_string();
    assert!(error.contains("public.documents") && error.contains("column body") && error.contains("not in the mirror"), "{error}");
    assert!(rows(&engine, table).is_empty(), "never stored with a NULL instead");
}

/// A key update keeping columns (Debezium's delete + insert of a PostgreSQL key update
/// with unchanged TOAST values, paired by the sink) moves the row: the kept values are
/// read from the old key's shard wherever the row is (data file, write buffer, this
/// batch), the new key may be in another shard, and the old key is gone.
#[test]
fn update_keeping_that_changes_the_key_moves_the_row_with_its_kept_values() {
    let engine = engine();
    let table = documents(&engine);
    for id in 1..=20 {
        engine.submit(vec![RowChange::Insert { table, row: doc(id, "t", Some(&format!("body {id}"))) }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes");
    let mut expected: Vec<Vec<Value>> = (1..=20).map(|id| doc(id, "t", Some(&format!("body {id}")))).collect();
    // Rows in data files (1..=4) and in write buffers (17..=20) move to keys 101..;
    // of eight pairs, the two shards' hash puts some apart.
    let mut changes = Vec::new();
    for id in [1i64, 2, 3, 4, 17, 18, 19, 20] {
        let mut row = doc(100 + id, "moved", None);
        row[3] = Value::Null;
        changes.push(RowChange::UpdateKeeping { table, key: key(id), row, keep: vec![2, 3] });
        let mut moved = doc(100 + id, "moved", Some(&format!("body {id}")));
        moved[3] = Value::Binary(vec![id as u8; 3]);
        expected[id as usize - 1] = moved;
    }
    engine.submit(changes).expect("moves");
    // Moved right after an insert submitted just before, in the same batch.
    engine.submit(vec![RowChange::Insert { table, row: doc(30, "fresh", Some("kept body")) }]).expect("insert 30");
    engine.submit(vec![RowChange::UpdateKeeping { table, key: key(30), row: doc(31, "fresh", None), keep: vec![2] }]).expect("move 30");
    expected.push(doc(31, "fresh", Some("kept body")));
    engine.sync().expect("sync");
    expected.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(rows(&engine, table), expected);
}

/// A move has no previous values when the old key has no row, or when the same
/// transaction wrote that row before (not applied yet, so not readable): refused at
/// submission, naming the column and the key, and the engine goes on.
#[test]
fn update_keeping_that_changes_the_key_without_a_readable_row_is_refused() {
    let engine = engine();
    let table = documents(&engine);
    let moved = |from: i64, to: i64| RowChange::UpdateKeeping { table, key: key(from), row: doc(to, "a", None), keep: vec![2] };
    let error = engine.submit(vec![moved(1, 2)]).expect_err("no row").to_string();
    assert!(error.contains("column body") && error.contains("key id=1") && error.contains("not in the mirror"), "{error}");
    let error = engine
        .submit(vec![RowChange::Insert { table, row: doc(3, "a", Some("b")) }, moved(3, 4)])
        .expect_err("written in the same transaction")
        .to_string();
    assert!(error.contains("key id=3") && error.contains("earlier change of its transaction"), "{error}");
    engine.sync().expect("the engine goes on");
    assert!(rows(&engine, table).is_empty(), "neither transaction applied");
}

/// A bulk update keeping columns of rows in data files (an UPDATE of many rows with
/// an unchanged TOAST column) reads each file once per batch, not once per row, also
/// when its rows alternate between files, and keeps every row's own values.
#[test]
fn a_bulk_update_keeping_columns_reads_each_data_file_once_per_batch() {
    let store = Arc::new(MemoryLakeStore::new());
    let config = EngineConfig {
        shards: 1,
        block_rows: 4,
        file_rows: 8,
        batch_changes: 1_000,
        gc_interval: None,
        checkpoint_interval: None,
        storage_gc_interval: None,
        ..EngineConfig::default()
    };
    let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::clone(&store) as _).expect("engine");
    let table = documents(&engine);
    engine
        .submit((1..=20).map(|id| RowChange::Insert { table, row: doc(id, "t", Some(&format!("body {id}"))) }).collect())
        .expect("insert");
    engine.wait_for_flushes().expect("flushes");
    assert_eq!(engine.stats().files_flushed, 2, "rows 1..=16 in two data files, the rest in the write buffer");
    let before = store.data_file_reads();
    let mut expected: Vec<Vec<Value>> = (1..=20).map(|id| doc(id, "t", Some(&format!("body {id}")))).collect();
    let mut changes = Vec::new();
    // Alternating between the two files' rows. (Not the write buffer's: the new
    // versions fill it, and a virtual file the flusher writes meanwhile is read.)
    for id in (1..=8i64).flat_map(|id| [id, id + 8]) {
        let mut row = doc(id, "new", None);
        row[3] = Value::Null;
        changes.push(RowChange::UpdateKeeping { table, key: key(id), row, keep: vec![2, 3] });
        expected[id as usize - 1][1] = Value::Utf8("new".into());
    }
    engine.submit(changes).expect("bulk update");
    engine.sync().expect("sync");
    assert_eq!(store.data_file_reads() - before, 2, "one read of each data file");
    expected.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(rows(&engine, table), expected);
}
