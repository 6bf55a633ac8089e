//! Every CH-benCHmark query on live, changing Retina tables returns exactly what the
//! same query returns from plain DataFusion over a static Parquet copy of the rows
//! visible at the query's snapshot. Replay (and memory GC) run throughout.

mod support;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_core::EngineConfig;
use retina_workload::chbench::sql::{QUERIES, UNDELIVERED_CONSISTENCY};
use retina_query::datafusion::arrow::array::{Array, AsArray};
use retina_query::datafusion::arrow::datatypes::{DataType, Float64Type};
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use retina_query::export::{export_snapshot, plain_context};
use retina_query::QuerySnapshot;
use support::*;

/// Source time: the queries filter on dates after 2007.
fn now_micros() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

/// Rows as strings; floats rounded (summation order differs between engines).
fn rows(batches: &[RecordBatch]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for batch in batches {
        let columns: Vec<Box<dyn Fn(usize) -> String + '_>> = batch
            .columns()
            .iter()
            .map(|array| -> Box<dyn Fn(usize) -> String + '_> {
                match array.data_type() {
                    DataType::Float64 => {
                        let values = array.as_primitive::<Float64Type>();
                        Box::new(move |row| if values.is_null(row) { "NULL".into() } else { format!("{:.9e}", values.value(row)) })
                    }
                    _ => {
                        let formatter = ArrayFormatter::try_new(array.as_ref(), &FormatOptions::default()).expect("formatter");
                        Box::new(move |row| if array.is_null(row) { "NULL".into() } else { formatter.value(row).to_string() })
                    }
                }
            })
            .collect();
        for row in 0..batch.num_rows() {
            out.push(columns.iter().map(|format| format(row)).collect());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ch_queries_on_live_tables_equal_a_static_parquet_copy_of_their_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = EngineConfig {
        shards: 2,
        block_rows: 1024,
        file_rows: 4096,
        batch_changes: 256,
        gc_interval: Some(Duration::from_millis(20)),
        ..EngineConfig::default()
    };
    let (engine, mut generator) = off(|| {
        let engine = engine_with(&dir.path().join("lake"), config);
        let tables = ChBenchTables::create(&engine).expect("tables");
        let mut generator = ChBenchGenerator::new(7, ChBenchScale::for_base_rows(20_000), tables);
        generator.initial_load(now_micros(), 2048, |chunk| engine.submit(chunk).map(|_| ())).expect("load");
        engine.sync().expect("sync");
        (engine, generator)
    });

    let stop = Arc::new(AtomicBool::new(false));
    let replay = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            while !stop.load(SeqCst) {
                for _ in 0..20 {
                    engine.submit(generator.next_transaction(now_micros()).1).expect("replay");
                }
                engine.flush_batch().expect("flush");
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };

    let session = session(&engine);
    let hwm_before = engine.transaction_service().high_watermark();
    for (round, query) in QUERIES.iter().enumerate() {
        let snapshot = QuerySnapshot::new(engine.snapshot().expect("snapshot"));
        let plan = session.plan_sql(query.sql).await.unwrap_or_else(|e| panic!("{}: {e}", query.name));
        let mut stream = session.execute_at(plan, &snapshot).await.unwrap_or_else(|e| panic!("{}: {e}", query.name));
        let schema = stream.schema();
        let mut live = Vec::new();
        while let Some(batch) = stream.next().await {
            live.push(batch.unwrap_or_else(|e| panic!("{}: {e}", query.name)));
        }
        let copy = dir.path().join(format!("copy-{round}"));
        let exported = off(|| export_snapshot(&engine, &snapshot, &copy).expect("export"));
        drop(snapshot);
        let plain = plain_context(&exported, 2).await.expect("plain context");
        let frame = plain.sql(query.sql).await.unwrap_or_else(|e| panic!("{} on the copy: {e}", query.name));
        let reference = frame.collect().await.expect("reference");
        let live_rows = rows(&live);
        assert_eq!(live_rows, rows(&reference), "{} differs from the static copy", query.name);
        let reference_schema = reference.first().map(|b| b.schema());
        if let Some(reference_schema) = reference_schema {
            let types = |s: &retina_query::datafusion::arrow::datatypes::Schema| {
                s.fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect::<Vec<_>>()
            };
            assert_eq!(types(&schema), types(&reference_schema), "{} schema", query.name);
        }
        // CH-Q22 (customers without orders, above the average balance) is empty on
        // the base data and gains and loses rows as the replay pays and orders; on a
        // loaded machine it was empty at its turn now and then. Its answer is still
        // compared above; only the guard against a vacuous comparison skips it.
        if query.name != "CH-Q22" {
            assert!(!live_rows.is_empty(), "{} returned no rows: the test data does not exercise it", query.name);
        }
    }
    for _ in 0..20 {
        let (_, batches) = session.collect(UNDELIVERED_CONSISTENCY).await.expect("consistency query");
        let counts = rows(&batches);
        assert_eq!(counts[0][0], counts[0][1], "new_order rows vs undelivered orders");
    }
    stop.store(true, SeqCst);
    replay.join().expect("replay thread");
    assert!(engine.transaction_service().high_watermark() > hwm_before, "tables changed while the queries ran");
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}
