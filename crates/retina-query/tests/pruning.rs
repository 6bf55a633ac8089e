//! Filter pushdown with statistics pruning: selective filters read fewer splits,
//! EXPLAIN and the counters show it, and results never change — on a table whose
//! rows are updated, deleted and inserted across files between queries.

mod support;

use std::sync::Arc;

use futures::StreamExt;
use retina_core::scan::table_splits;
use retina_core::{RowChange, TableId, Value};
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::{QuerySnapshot, RetinaSession, SessionOptions, SourceRegistry};
use support::*;

fn session_with_pruning(engine: &Arc<retina_core::Engine>, prune_splits: bool) -> RetinaSession {
    let options = SessionOptions { target_partitions: 2, prune_splits, ..SessionOptions::default() };
    RetinaSession::new(Arc::clone(engine), SourceRegistry::new(), options)
}

/// `rows` rows inserted in ascending id order, so each flushed file holds a narrow
/// id range (the files of the two shards interleave, but only in time).
fn loaded(dir: &std::path::Path, rows: i64) -> (TestEngine, TableId) {
    let engine = small_engine(dir);
    let table = items_table(&engine, "items");
    for chunk in (0..rows).collect::<Vec<_>>().chunks(100) {
        engine.submit(chunk.iter().map(|&id| item(table, id, (id % 100) as i32)).collect()).expect("insert");
    }
    engine.wait_for_flushes().expect("flush");
    (engine, table)
}

async fn rows_at(session: &RetinaSession, sql: &str, snapshot: &QuerySnapshot) -> Vec<String> {
    let plan = session.plan_sql(sql).await.expect("plan");
    let mut stream = session.execute_at(plan, snapshot).await.expect("execute");
    let mut batches: Vec<RecordBatch> = Vec::new();
    while let Some(batch) = stream.next().await {
        batches.push(batch.expect("batch"));
    }
    let mut lines: Vec<String> = pretty(&batches).lines().filter(|l| l.starts_with('|')).skip(1).map(String::from).collect();
    lines.sort();
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_filter_reads_fewer_splits_and_explain_shows_the_pruned_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, table) = off(|| loaded(dir.path(), 3000));
    let splits = table_splits(&engine.table(table).expect("table")).len();
    assert!(splits >= 10, "expected many files, got {splits}");
    // Flushed files carry their column ranges in the catalog: a session that never
    // read the table prunes on its very first query.
    let cold = session_with_pruning(&engine, true);
    let (_, first) = cold.collect("SELECT id FROM items WHERE id BETWEEN 1000 AND 1009").await.expect("cold query");
    assert_eq!(total_rows(&first), 10);
    let cold_metrics = cold.metrics().snapshot();
    assert!(cold_metrics.splits_pruned * 2 > splits as u64, "cold: pruned {} of {splits}", cold_metrics.splits_pruned);

    let session = session_with_pruning(&engine, true);
    let (_, all) = session.collect("SELECT * FROM items").await.expect("warm-up scan");
    assert_eq!(total_rows(&all), 3000);
    let warm = session.metrics().snapshot();
    assert_eq!((warm.splits_read as usize, warm.splits_pruned), (splits, 0));

    let (_, few) = session.collect("SELECT id FROM items WHERE id BETWEEN 1000 AND 1009 ORDER BY id").await.expect("query");
    assert_eq!(total_rows(&few), 10);
    let after = session.metrics().snapshot();
    let (read, pruned) = (after.splits_read - warm.splits_read, after.splits_pruned - warm.splits_pruned);
    assert_eq!(read + pruned, splits as u64, "every split is read or pruned");
    // A 10-row range: at most two files per shard (if it spans a boundary) and the
    // two write-buffer files, whose statistics are unknown.
    assert!(read <= 6 && read * 2 < splits as u64, "read {read} of {splits} splits");

    let (_, explain) = session.collect("EXPLAIN SELECT id FROM items WHERE id BETWEEN 1000 AND 1009").await.expect("explain");
    let text = pretty(&explain);
    assert!(text.contains(&format!("splits={read}, projection=[id], pruned_splits={pruned}, pruning_predicate=")), "{text}");
    assert!(text.contains("FilterExec"), "the filter is still applied above the scan (Inexact): {text}");

    let (_, analyzed) =
        session.collect("EXPLAIN ANALYZE SELECT id FROM items WHERE id IN (5, 2990)").await.expect("explain analyze");
    let text = pretty(&analyzed);
    assert!(text.contains("splits_pruned="), "{text}");
    assert!(text.contains("splits_read="), "{text}");
    // Bytes fetched from storage, per scan: flushed files are read from the lake.
    let fetched = text.split("bytes_fetched=").nth(1).and_then(|rest| rest.split([',', ']']).next()).unwrap_or("0");
    assert!(!fetched.starts_with('0'), "EXPLAIN ANALYZE shows the bytes a scan fetched ({fetched}): {text}");
    assert!(session.metrics().snapshot().bytes_fetched > 0, "and /metrics counts them");

    let (_, metrics) = session
        .collect("SELECT value FROM retina.metrics WHERE name = 'retina_scan_splits_pruned_total'")
        .await
        .expect("metrics view");
    let shown: f64 = pretty(&metrics).lines().nth(3).and_then(|l| l.trim_matches(|c| c == '|' || c == ' ').parse().ok()).unwrap_or(-1.0);
    assert_eq!(shown, session.metrics().snapshot().splits_pruned as f64);

    // Without pruning, the same query reads every split.
    let plain = session_with_pruning(&engine, false);
    plain.collect("SELECT * FROM items").await.expect("warm-up scan");
    let before = plain.metrics().snapshot();
    plain.collect("SELECT id FROM items WHERE id BETWEEN 1000 AND 1009").await.expect("query");
    let after = plain.metrics().snapshot();
    assert_eq!((after.splits_read - before.splits_read, after.splits_pruned), (splits as u64, 0));
}

/// Updates (new versions in newer files, old ones masked), deletes, inserts and NULLs
/// across files, some flushed and some still in the write buffer; every filter shape
/// gives the same rows with and without pruning, at the same snapshot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_with_and_without_pruning_are_equal_while_the_table_changes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, table) = off(|| loaded(dir.path(), 2000));
    let pruning = session_with_pruning(&engine, true);
    let plain = session_with_pruning(&engine, false);
    let queries = [
        "SELECT id, qty, name FROM items WHERE id BETWEEN 300 AND 420",
        "SELECT id, qty FROM items WHERE id < 150 OR id >= 1900",
        "SELECT id FROM items WHERE id IN (7, 700, 1400, 2500, 2999)",
        "SELECT id FROM items WHERE id NOT IN (1, 2, 3) AND id > 1990",
        "SELECT id, qty FROM items WHERE qty = 1000",
        "SELECT id, qty FROM items WHERE qty > 95 AND id <= 600",
        "SELECT count(*) AS n FROM items WHERE qty <> 50",
        "SELECT id FROM items WHERE name IS NULL",
        "SELECT count(*) AS n FROM items WHERE name IS NOT NULL AND id >= 1000",
        "SELECT id, name FROM items WHERE name = 'item-1500'",
        "SELECT id FROM items WHERE 2100 <= id",
        "SELECT id, qty FROM items WHERE qty + 0 = 1000 AND id BETWEEN 0 AND 300",
    ];
    pruning.collect("SELECT * FROM items").await.expect("warm-up scan");
    let mut deleted = std::collections::HashSet::new();
    for round in 0..6i64 {
        let mut changes: Vec<RowChange> = Vec::new();
        // Move rows across files: a new version of a spread of ids in a newer file.
        for id in (round * 13..2000).step_by(97).filter(|id| !deleted.contains(id)) {
            changes.push(update(table, id, 1000));
        }
        // NULL names on some rows.
        for id in (round * 5..2000).step_by(331).filter(|id| !deleted.contains(id)) {
            changes.push(RowChange::Update { table, key: vec![Value::Int64(id)], row: vec![Value::Int64(id), Value::Int32(-7), Value::Null] });
        }
        for id in (round * 3 + 1..2000).step_by(89) {
            if deleted.insert(id) {
                changes.push(delete(table, id));
            }
        }
        changes.extend((0..40).map(|id| item(table, 2000 + round * 100 + id, 42)));
        off(|| {
            for change in changes {
                engine.submit(vec![change]).expect("change");
            }
            // Even rounds flush to files; odd ones leave the changes in the write buffer.
            if round % 2 == 0 {
                engine.wait_for_flushes().expect("flush");
            } else {
                engine.sync().expect("sync");
            }
        });
        let snapshot = QuerySnapshot::new(engine.snapshot().expect("snapshot"));
        for sql in queries {
            let with = rows_at(&pruning, sql, &snapshot).await;
            let without = rows_at(&plain, sql, &snapshot).await;
            assert_eq!(with, without, "round {round}: {sql}");
        }
    }
    let pruned = pruning.metrics().snapshot().splits_pruned;
    assert!(pruned > 0, "the comparison must have pruned something to mean anything");
    assert_eq!(plain.metrics().snapshot().splits_pruned, 0);
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}

/// Inside a file the page index narrows the read: a 64K-row file of ascending ids is
/// read only around the ids asked for, EXPLAIN shows the bounds, EXPLAIN ANALYZE the
/// rows skipped, and the answer is the same as without any pruning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_index_skips_pages_inside_a_file_and_answers_the_same() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (engine, table) = off(|| {
        let config = retina_core::EngineConfig {
            shards: 1,
            file_rows: 65_536,
            gc_interval: None,
            checkpoint_interval: None,
            storage_gc_interval: None,
            ..retina_core::EngineConfig::default()
        };
        let engine = engine_with(dir.path(), config);
        let table = items_table(&engine, "items");
        for chunk in (0..70_000i64).collect::<Vec<_>>().chunks(4096) {
            engine.submit(chunk.iter().map(|&id| item(table, id, (id % 100) as i32)).collect()).expect("insert");
        }
        // A few deleted rows inside the range asked for stay deleted.
        engine.submit((40_000..40_005).map(|id| delete(table, id)).collect()).expect("delete");
        engine.wait_for_flushes().expect("flush");
        (engine, table)
    });
    assert!(!table_splits(&engine.table(table).expect("table")).is_empty());
    let session = session_with_pruning(&engine, true);
    let sql = "SELECT count(*) AS n, min(id) AS lo, max(id) AS hi FROM items WHERE id BETWEEN 39990 AND 40020";
    let (_, explain) = session.collect(&format!("EXPLAIN {sql}")).await.expect("explain");
    let text = pretty(&explain);
    assert!(text.contains("page_bounds=[id in [39990, 40020]]"), "{text}");
    // Statistics are the catalog's, recorded at flush: the first read skips pages.
    let (_, analyzed) = session.collect(&format!("EXPLAIN ANALYZE {sql}")).await.expect("explain analyze");
    let text = pretty(&analyzed);
    // Shown as e.g. "45.06 K".
    let shown = text
        .split("rows_skipped_by_page_index=")
        .nth(1)
        .and_then(|rest| rest.split([',', ']']).next())
        .unwrap_or_else(|| panic!("no rows_skipped_by_page_index in {text}"));
    let (number, scale) = match shown.trim().split_once(' ') {
        Some((number, "K")) => (number, 1_000.0),
        Some((number, "M")) => (number, 1_000_000.0),
        _ => (shown.trim(), 1.0),
    };
    let skipped = number.parse::<f64>().expect("a count") * scale;
    assert!(skipped > 30_000.0, "{shown} rows skipped: {text}");
    let snapshot = QuerySnapshot::new(engine.snapshot().expect("snapshot"));
    let pruned = rows_at(&session, sql, &snapshot).await;
    let plain = rows_at(&session_with_pruning(&engine, false), sql, &snapshot).await;
    assert_eq!(pruned, plain);
    assert_eq!(pruned, vec!["| 26 | 39990 | 40020 |".to_string()]);
}
