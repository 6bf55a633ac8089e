//! A column added to a table that has rows everywhere: flushed Parquet files,
//! checkpoint segments and write-buffer blocks. Old rows read NULL for it, new rows
//! their value, updates of old rows take the new shape, readers that started before
//! keep their schema, and all of it survives checkpoints and crashes.

use std::sync::Arc;
use std::time::Duration;

use arrow_schema::{DataType, Field};
use retina_core::rows::rows_of;
use retina_core::{Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_storage::ParquetLakeStore;

fn config() -> EngineConfig {
    EngineConfig {
        shards: 2,
        block_rows: 16,
        file_rows: 64,
        batch_changes: 32,
        gc_interval: None,
        checkpoint_interval: None,
        ..EngineConfig::default()
    }
}

fn open(dir: &std::path::Path) -> Engine {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8 path")).expect("store");
    Engine::open(config(), Arc::new(store)).expect("open")
}

fn insert(table: TableId, id: i64, row: Vec<Value>) -> RowChange {
    let mut values = vec![Value::Int64(id)];
    values.extend(row);
    RowChange::Insert { table, row: values }
}

/// Every visible row as (id, qty, note).
fn rows(engine: &Engine, table: TableId) -> Vec<(i64, i32, Option<String>)> {
    engine.sync().expect("sync");
    let snapshot = engine.snapshot().expect("snapshot");
    let mut out: Vec<_> = rows_of(&engine.scan(table, &snapshot, None).expect("scan"))
        .expect("rows")
        .into_iter()
        .map(|row| {
            let id = match row[0] {
                Value::Int64(v) => v,
                ref other => panic!("id {other:?}"),
            };
            let qty = match row[1] {
                Value::Int32(v) => v,
                ref other => panic!("qty {other:?}"),
            };
            let note = match row.get(2) {
                Some(Value::Utf8(v)) => Some(v.to_string()),
                Some(Value::Null) | None => None,
                Some(other) => panic!("note {other:?}"),
            };
            (id, qty, note)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn an_added_column_reads_null_for_old_rows_everywhere_and_survives_recovery() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    let schema = TableSchema::from_columns("shop.items", &[("id", DataType::Int64, false), ("qty", DataType::Int32, false)], &["id"])
        .expect("schema");
    let table = engine.create_table(schema).expect("create");
    // 200 rows: several flushed files, the rest in write buffers; some checkpointed.
    for chunk in (0..200i64).collect::<Vec<_>>().chunks(10) {
        engine.submit(chunk.iter().map(|&id| insert(table, id, vec![Value::Int32(id as i32)])).collect()).expect("insert");
    }
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint");
    for id in 200..230i64 {
        engine.submit(vec![insert(table, id, vec![Value::Int32(id as i32)])]).expect("insert");
    }
    // A reader that started before the column is added.
    let old_snapshot = engine.snapshot().expect("snapshot");
    let old_schema_rows = {
        engine.sync().expect("sync");
        let snapshot = engine.snapshot().expect("snapshot");
        rows_of(&engine.scan(table, &snapshot, None).expect("scan")).expect("rows").len()
    };

    engine.add_column(table, Field::new("note", DataType::Utf8, true)).expect("add column");
    assert_eq!(engine.table(table).expect("table").schema().column_count(), 3);
    // Rows of the old shape are refused now, with the table named.
    let error = engine.submit(vec![insert(table, 999, vec![Value::Int32(0)])]);
    let stopped = match error {
        Err(error) => error.to_string(),
        Ok(_) => engine.sync().map(|_| String::new()).unwrap_or_else(|e| e.to_string()),
    };
    assert!(stopped.contains("shop.items"), "{stopped}");
    drop(engine);

    // Recovery knows the new column (the catalog was saved by add_column).
    let engine = open(dir.path());
    let table = engine.table_id("shop.items").expect("table");
    assert_eq!(engine.table(table).expect("table").schema().column_count(), 3);
    let recovered = rows(&engine, table);
    assert_eq!(recovered.len(), 200, "the checkpointed rows; the 30 after the checkpoint replay from the source");
    assert!(recovered.iter().all(|(_, _, note)| note.is_none()));
    drop(old_snapshot);

    // New rows, and updates of old rows (in files, in segments) with the new shape.
    for id in 200..230i64 {
        engine.submit(vec![insert(table, id, vec![Value::Int32(id as i32), Value::Utf8(format!("n{id}").into())])]).expect("insert");
    }
    for id in [0i64, 5, 150, 199] {
        engine
            .submit(vec![RowChange::Update {
                table,
                key: vec![Value::Int64(id)],
                row: vec![Value::Int64(id), Value::Int32(-1), Value::Utf8("updated".into())],
            }])
            .expect("update");
    }
    let check = |engine: &Engine, context: &str| {
        let all = rows(engine, table);
        assert_eq!(all.len(), 230, "{context}");
        for (id, qty, note) in &all {
            let expected = if [0, 5, 150, 199].contains(id) {
                (-1, Some("updated".to_string()))
            } else if *id >= 200 {
                (*id as i32, Some(format!("n{id}")))
            } else {
                (*id as i32, None)
            };
            assert_eq!((*qty, note.clone()), expected, "{context}: row {id}");
        }
    };
    check(&engine, "before flush");
    // A reader holding the schema from before the column reads every split, old and
    // new layouts, in its own two-column shape.
    let runtime = engine.table(table).expect("table");
    let narrow = TableSchema::from_columns("shop.items", &[("id", DataType::Int64, false), ("qty", DataType::Int32, false)], &["id"])
        .expect("schema");
    engine.sync().expect("sync");
    let snapshot = engine.snapshot().expect("snapshot");
    let mut seen = 0;
    for split in retina_core::scan::table_splits(&runtime) {
        for batch in retina_core::scan::read_split(&narrow, &split, engine.store().as_ref(), snapshot.ts(), None).expect("read") {
            assert_eq!(batch.num_columns(), 2);
            seen += batch.num_rows();
        }
    }
    assert_eq!(seen, 230, "the old reader sees every visible row");
    drop(snapshot);
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint");
    check(&engine, "after flush and checkpoint");
    assert!(old_schema_rows >= 200);
    drop(engine);
    let engine = open(dir.path());
    check(&engine, "after a crash");
    // Storage GC rewrites files of both layouts into the new one.
    engine.collect_storage_garbage(0.0).expect("storage gc");
    check(&engine, "after storage GC");
    std::thread::sleep(Duration::from_millis(10));
}

#[test]
fn only_new_nullable_columns_can_be_added() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open(dir.path());
    let schema = TableSchema::from_columns("t", &[("id", DataType::Int64, false)], &["id"]).expect("schema");
    let table = engine.create_table(schema).expect("create");
    let error = engine.add_column(table, Field::new("x", DataType::Int64, false)).expect_err("not nullable");
    assert!(error.to_string().contains("must be nullable"), "{error}");
    let error = engine.add_column(table, Field::new("id", DataType::Int64, true)).expect_err("exists");
    assert!(error.to_string().contains("exists already"), "{error}");
    let error = engine.add_column(table, Field::new("d", DataType::Duration(arrow_schema::TimeUnit::Second), true)).expect_err("type");
    assert!(error.to_string().contains("cannot store"), "{error}");
}
