//! The DataFusion scan of Retina tables: visible rows only, `_create_ts` hidden, one
//! partition per split, projection pushed into the split reads, one snapshot per
//! query, released at the end, on error and on cancellation.

mod support;

use std::sync::Arc;

use futures::StreamExt;
use retina_core::scan::table_splits;
use retina_query::QueryError;
use support::*;

/// 1000 rows over many files; every 7th updated, every 11th deleted.
fn loaded(dir: &std::path::Path) -> (TestEngine, retina_core::TableId) {
    let engine = small_engine(dir);
    let table = items_table(&engine, "items");
    for chunk in (0..1000i64).collect::<Vec<_>>().chunks(50) {
        engine.submit(chunk.iter().map(|&id| item(table, id, id as i32)).collect()).expect("insert");
    }
    for id in (0..1000i64).step_by(7) {
        engine.submit(vec![update(table, id, -1)]).expect("update");
    }
    for id in (0..1000i64).step_by(11) {
        engine.submit(vec![delete(table, id)]).expect("delete");
    }
    engine.wait_for_flushes().expect("flush");
    (engine, table)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_star_returns_the_visible_rows_without_create_ts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, table) = off(|| loaded(dir.path()));
    let session = session(&engine);
    let (schema, batches) = session.collect("SELECT * FROM items ORDER BY id").await.expect("query");
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["id", "qty", "name"], "_create_ts is hidden");
    let expected = 1000 - (0..1000).filter(|id| id % 11 == 0).count();
    assert_eq!(total_rows(&batches), expected);

    // Same rows as the engine's own snapshot scan.
    let direct = off(|| {
        let snapshot = engine.snapshot().expect("snapshot");
        engine.scan(table, &snapshot, None).expect("scan")
    });
    let (_, sorted) = session.collect("SELECT id, qty, name FROM public.items ORDER BY id").await.expect("query");
    let mut direct_rows: Vec<String> = pretty(&direct).lines().skip(3).filter(|l| l.starts_with('|')).map(String::from).collect();
    direct_rows.sort_by_key(|line| line.split('|').nth(1).and_then(|v| v.trim().parse::<i64>().ok()));
    let sql_rows: Vec<String> = pretty(&sorted).lines().skip(3).filter(|l| l.starts_with('|')).map(String::from).collect();
    assert_eq!(sql_rows, direct_rows);

    let (_, updated) = session.collect("SELECT count(*) AS n FROM items WHERE qty = -1").await.expect("query");
    let updated_count = (0..1000).filter(|id| id % 7 == 0 && id % 11 != 0).count();
    assert!(pretty(&updated).contains(&format!("| {updated_count} ")), "{}", pretty(&updated));

    let error = session.collect("SELECT _create_ts FROM items").await.expect_err("hidden column");
    assert_eq!(error.sqlstate(), "42703", "{error}");
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_partition_per_split_and_projection_pushed_down() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, table) = off(|| loaded(dir.path()));
    // Some rows stay in the write buffer: the virtual file is a split too.
    engine.submit(vec![item(table, 5000, 1)]).expect("insert");
    engine.sync().expect("sync");
    let splits = table_splits(&engine.table(table).expect("table")).len();
    assert!(splits > 3, "expected many splits, got {splits}");
    let session = session(&engine);
    let plan = session.plan_sql("SELECT qty FROM items").await.expect("plan");
    let snapshot = retina_query::QuerySnapshot::new(engine.snapshot().expect("snapshot"));
    let results = session.execute_at(plan, &snapshot).await.expect("execute");
    assert_eq!(results.snapshot_ts(), Some(snapshot.ts()), "execute_at reads at the given snapshot");
    drop(results);
    let (_, explain) = session.collect("EXPLAIN SELECT qty FROM items").await.expect("explain");
    let text = pretty(&explain);
    assert!(text.contains("RetinaScanExec: table=items, snapshot_ts="), "{text}");
    assert!(text.contains(&format!("splits={splits}, projection=[qty]")), "{text}");
    drop(snapshot);
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_is_shared_by_tables_and_released_on_end_error_and_drop() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = off(|| loaded(dir.path()));
    let other = off(|| items_table(&engine, "shop.other"));
    engine.submit(vec![item(other, 1, 1)]).expect("insert");
    engine.sync().expect("sync");
    let session = session(&engine);

    // Dropped after the first batch: the snapshot goes with the stream.
    let mut stream = session.sql("SELECT * FROM items, shop.other").await.expect("query");
    let ts = stream.snapshot_ts().expect("snapshot ts");
    assert_eq!(engine.transaction_service().low_watermark(), ts, "a running query holds LWM");
    let first = stream.next().await.expect("a batch").expect("ok");
    assert!(first.num_rows() > 0);
    engine.submit(vec![item(other, 2, 2)]).expect("insert");
    engine.sync().expect("sync");
    assert_eq!(engine.transaction_service().low_watermark(), ts, "LWM waits for the query");
    drop(stream);
    // DataFusion's tasks are aborted and in-flight split reads finish on their
    // blocking threads; then the last handle goes.
    assert!(released_soon(&engine).await, "dropping the stream releases the snapshot");

    // Failing at execution (division by zero) releases it too.
    let error = session.collect("SELECT 1 / (qty - qty) FROM items").await.expect_err("division by zero");
    assert!(matches!(error.sqlstate(), "22012" | "22000"), "{error} -> {}", error.sqlstate());
    assert!(released_soon(&engine).await, "a failed query releases its snapshot");
    let metrics = session.metrics().snapshot();
    assert_eq!(metrics.started, metrics.finished, "every query is counted once");
    assert!(metrics.failed >= 2, "the dropped and the failed query count as failed: {metrics:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_errors_have_sqlstates_and_leave_no_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = off(|| loaded(dir.path()));
    let session = session(&engine);
    let cases = [
        ("SELEC 1", "42601"),
        ("SELECT * FROM nope", "42P01"),
        ("SELECT nope FROM items", "42703"),
        ("SELECT no_such_function(1)", "42883"),
        ("INSERT INTO items VALUES (1, 2, 'x')", "25006"),
        ("CREATE TABLE t (a int)", "25006"),
        ("DROP TABLE items", "25006"),
        ("SELECT 1; SELECT 2", "42601"),
    ];
    for (sql, code) in cases {
        let error = session.collect(sql).await.expect_err(sql);
        assert_eq!(error.sqlstate(), code, "{sql}: {error}");
    }
    assert!(matches!(session.collect("INSERT INTO items VALUES (1, 2, 'x')").await, Err(QueryError::ReadOnly { .. })));
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn system_views_show_watermarks_tables_sources_and_metrics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = off(|| loaded(dir.path()));
    let sources = retina_query::SourceRegistry::new();
    let mut status = retina_query::SourceStatus::new("gen", "generator:chbench?rate=10");
    status.state = "running".into();
    status.transactions = 7;
    sources.update(status);
    let session = retina_query::RetinaSession::new(Arc::clone(&engine), sources, retina_query::SessionOptions::default());
    let (_, watermarks) = session.collect("SELECT hwm, lwm, hwm > lwm AS ordered FROM retina.watermarks").await.expect("watermarks");
    let text = pretty(&watermarks);
    assert!(text.contains("| true "), "{text}");
    let hwm = engine.transaction_service().high_watermark().0;
    assert!(text.contains(&format!("| {hwm} ")), "{text}");
    off(|| engine.checkpoint()).expect("checkpoint");
    let (_, durability) = session
        .collect("SELECT checkpoint_ts, last_flush_error IS NULL AS flushed, last_checkpoint_error IS NULL AS checkpointed FROM retina.watermarks")
        .await
        .expect("durability");
    let text = pretty(&durability);
    let checkpoint_ts = engine.stats().last_checkpoint_ts.0;
    assert!(checkpoint_ts > 0 && text.contains(&format!("| {checkpoint_ts} ")) && text.contains("| true    | true "), "{text}");
    let (_, tables) = session.collect("SELECT schema_name, table_name, files FROM retina.tables").await.expect("tables");
    assert!(pretty(&tables).contains("| public      | items      |"), "{}", pretty(&tables));
    let (_, listed) = session.collect("SELECT source, state, transactions FROM retina.sources").await.expect("sources");
    assert!(pretty(&listed).contains("| gen    | running | 7 "), "{}", pretty(&listed));
    let (_, metrics) =
        session.collect("SELECT value FROM retina.metrics WHERE name = 'retina_queries_finished_total'").await.expect("metrics");
    assert!(pretty(&metrics).contains("| 4.0 "), "four queries finished before this one: {}", pretty(&metrics));
    let (_, shown) = session.collect("SHOW TABLES").await.expect("show tables");
    assert!(pretty(&shown).contains("watermarks"), "{}", pretty(&shown));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_over_its_memory_limit_fails_with_53200_and_others_still_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, _) = off(|| loaded(dir.path()));
    let tiny = retina_query::RetinaSession::new(
        Arc::clone(&engine),
        retina_query::SourceRegistry::new(),
        retina_query::SessionOptions { target_partitions: 2, query_memory_limit: Some(1024), ..Default::default() },
    );
    let error = tiny.collect("SELECT name, count(*) FROM items GROUP BY name ORDER BY name").await.expect_err("over the limit");
    assert_eq!(error.sqlstate(), "53200", "{error}");
    let (_, small) = tiny.collect("SELECT 1 AS one").await.expect("a query within the limit");
    assert_eq!(total_rows(&small), 1);
    assert!(released_soon(&engine).await, "the failed query releases its snapshot");
}

/// A table held only in the write buffer, read block by block as the query pulls
/// them: an older snapshot sees its rows before the updates and deletes, a newer one
/// after, and `count(*)` agrees with the rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_buffer_rows_are_masked_block_by_block_at_each_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = retina_core::EngineConfig { shards: 1, block_rows: 64, file_rows: 1 << 20, gc_interval: None, ..Default::default() };
    let engine = off(|| engine_with(dir.path(), config));
    let table = off(|| items_table(&engine, "items"));
    for chunk in (0..3000i64).collect::<Vec<_>>().chunks(100) {
        engine.submit(chunk.iter().map(|&id| item(table, id, 1)).collect()).expect("insert");
    }
    engine.sync().expect("sync");
    let before = retina_query::QuerySnapshot::new(engine.snapshot().expect("snapshot"));
    for id in (0..3000i64).step_by(7) {
        engine.submit(vec![update(table, id, 2)]).expect("update");
    }
    engine.submit((0..3000i64).step_by(11).map(|id| delete(table, id)).collect()).expect("delete");
    engine.sync().expect("sync");
    let splits = table_splits(&engine.table(table).expect("table"));
    assert!(splits.iter().all(|split| matches!(split, retina_core::scan::ScanSplit::Virtual(_))), "nothing flushed");

    let session = session(&engine);
    let sql = "SELECT count(*), sum(qty), count(DISTINCT id) FROM items";
    let mut at_before = session.execute_at(session.plan_sql(sql).await.expect("plan"), &before).await.expect("run");
    let mut rows = Vec::new();
    while let Some(batch) = at_before.next().await {
        rows.push(batch.expect("batch"));
    }
    assert_eq!(cells(&rows), ["3000", "3000", "3000"]);

    let live = 3000 - (0..3000).filter(|id| id % 11 == 0).count();
    let updated = (0..3000).filter(|id| id % 7 == 0 && id % 11 != 0).count();
    let (_, now) = session.collect(sql).await.expect("query");
    // Updated rows have qty 2.
    assert_eq!(cells(&now), [live.to_string(), (live + updated).to_string(), live.to_string()]);
    let (_, count_only) = session.collect("SELECT count(*) FROM items").await.expect("count");
    assert_eq!(cells(&count_only), [live.to_string()]);
    drop(at_before);
    drop(before);
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}

/// The cells of a one-row result, as text.
fn cells(batches: &[retina_query::datafusion::arrow::record_batch::RecordBatch]) -> Vec<String> {
    let text = pretty(batches);
    let row = text.lines().nth(3).unwrap_or_default();
    row.split('|').map(str::trim).filter(|cell| !cell.is_empty()).map(String::from).collect()
}
