//! A job reads Retina's published mirror (Delta tables with deletion vectors) at
//! the cut it was given, whatever replay does after: a real Retina lake is
//! published by the engine, then changed past the cut.

use std::sync::Arc;

use arrow_schema::DataType;
use retina_core::{Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_jobs::lake::Mirror;
use retina_jobs::run::RunOptions;
use retina_jobs::{JobsError, Lake, Schedule};
use retina_storage::{ParquetLakeStore, PublishOptions};

fn options() -> RunOptions {
    RunOptions::new(Schedule::Admission, 2)
}

// A plain test: the engine and its store run their own I/O runtime, which may not be
// entered from inside another; the job part gets a runtime of its own below.
#[test]
fn a_job_reads_the_published_mirror_at_its_cut_with_deletion_vectors_applied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("mirror");
    let store = Arc::new(
        ParquetLakeStore::open(data.to_str().expect("utf-8"))
            .expect("store")
            .publishing(Some(PublishOptions::every_checkpoint(std::time::Duration::from_secs(3600)))),
    );
    let config = EngineConfig { shards: 2, block_rows: 16, file_rows: 64, batch_changes: 32, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
    let engine = Engine::open(config, Arc::clone(&store) as _).expect("engine");
    let schema = TableSchema::from_columns("shop.items", &[("id", DataType::Int64, false), ("qty", DataType::Int64, true)], &["id"]).expect("schema");
    let items = engine.create_table(schema).expect("table");
    engine.submit((0..200i64).map(|id| RowChange::Insert { table: items, row: vec![Value::Int64(id), Value::Int64(id)] }).collect()).expect("load");
    engine.wait_for_flushes().expect("flushes");
    engine.submit((0..200i64).filter(|id| id % 10 == 0).map(|id| RowChange::Delete { table: items, key: vec![Value::Int64(id)] }).collect()).expect("deletes");
    engine
        .submit((0..200i64).filter(|id| id % 7 == 0 && id % 10 != 0).map(|id| RowChange::Update { table: items, key: vec![Value::Int64(id)], row: vec![Value::Int64(id), Value::Int64(1000)] }).collect())
        .expect("updates");
    engine.sync().expect("sync");
    let cut = engine.checkpoint().expect("checkpoint publishes the cut");
    // Past the cut: visible in Retina, not in the cut the job reads.
    engine.submit((200..260i64).map(|id| RowChange::Insert { table: items, row: vec![Value::Int64(id), Value::Int64(1)] }).collect()).expect("later");
    engine.submit(vec![RowChange::Delete { table: items, key: vec![Value::Int64(1)] }]).expect("later delete");
    engine.sync().expect("sync");

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    runtime.block_on(read_the_cut(dir.path(), &data, cut.ts.0));
    drop(store);
    engine.close().expect("close");
}

async fn read_the_cut(dir: &std::path::Path, data: &std::path::Path, cut_ts: u64) {
    let mirror = Mirror::open(data.to_str().expect("utf-8")).expect("mirror");
    assert_eq!(mirror.ts, cut_ts);
    let lake = Lake::open(dir.join("lake").to_str().expect("utf-8")).expect("lake").with_mirror(mirror);
    let job = dir.join("copy.yaml");
    std::fs::write(
        &job,
        "name: copy\ndialect: databricks\ntasks:\n  - id: snapshot\n    sql: \"CREATE TABLE mart.items USING DELTA AS SELECT id, qty FROM shop.items\"\n  - id: total\n    depends_on: [snapshot]\n    sql: \"CREATE TABLE mart.total USING DELTA AS SELECT count(*) AS n, sum(qty) AS qty FROM shop.items\"\n",
    )
    .expect("job");
    let report = retina_jobs::run(&lake, &[job], &options(), &mut |_| {}).await.expect("run");
    assert_eq!(report.succeeded, 2, "{}", report.to_table());
    assert_eq!(report.mirror_ts, Some(cut_ts));

    let expected: Vec<(i64, i64)> = (0..200i64).filter(|id| id % 10 != 0).map(|id| (id, if id % 7 == 0 { 1000 } else { id })).collect();
    let copy = lake.load("mart.items").await.expect("load").expect("the copy exists");
    let ctx = deltalake_core::datafusion::prelude::SessionContext::new();
    copy.update_datafusion_session(&ctx.state()).expect("session");
    ctx.register_table("copy", copy.table_provider().await.expect("provider")).expect("register");
    let batches = ctx.sql("SELECT id, qty FROM copy ORDER BY id").await.expect("plan").collect().await.expect("scan");
    let mut rows = Vec::new();
    for batch in &batches {
        let ids = batch.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().expect("ids");
        let qty = batch.column(1).as_any().downcast_ref::<arrow_array::Int64Array>().expect("qty");
        rows.extend((0..batch.num_rows()).map(|i| (ids.value(i), qty.value(i))));
    }
    assert_eq!(rows, expected, "the copy is the cut: deleted rows hidden by the DVs, updates at their new value, later changes absent");

    // The mirror is read-only: a job that writes it is refused before it runs.
    let writer = dir.join("writer.yaml");
    std::fs::write(&writer, "name: w\ndialect: databricks\ntasks:\n  - id: touch\n    sql: \"DELETE FROM shop.items WHERE id = 3\"\n").expect("job");
    let error = retina_jobs::run(&lake, &[writer], &options(), &mut |_| {}).await.expect_err("writing the mirror");
    assert!(matches!(error, JobsError::Unsupported { .. }) && error.to_string().contains("shop.items is a table of the published mirror"), "{error}");
}
