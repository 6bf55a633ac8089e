//! Exactly once across processes: a stream cut off mid-transaction is replayed into a
//! lakehouse, the engine is closed (checkpoint with the source position) and reopened,
//! and the whole stream is replayed again: nothing is applied twice, nothing skipped.

mod common;

use std::sync::Arc;

use common::*;
use retina_workload::chbench::{schemas, ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_cdc::debezium::{DebeziumEncoder, EncoderOptions};
use retina_cdc::SinkOptions;
use retina_core::{Engine, EngineConfig, TableId};
use retina_storage::ParquetLakeStore;

fn open(dir: &std::path::Path) -> Engine {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8")).expect("store");
    let config = EngineConfig { shards: 2, gc_interval: None, ..EngineConfig::default() };
    let engine = Engine::open(config, Arc::new(store)).expect("open");
    for schema in schemas() {
        if engine.table_id(schema.name()).is_none() {
            engine.create_table(schema).expect("table");
        }
    }
    engine
}

/// The generator's initial load and 300 transactions: the changes of each mirror
/// transaction, and the Debezium JSON lines of all of them.
fn chbench_stream() -> (Vec<Vec<retina_core::RowChange>>, Vec<String>) {
    let ids: Vec<TableId> = (0..9).map(TableId).collect();
    let mut generator = ChBenchGenerator::new(3, ChBenchScale::for_base_rows(2_000), ChBenchTables::from_ids(&ids));
    let mut encoder = DebeziumEncoder::new(&schemas(), EncoderOptions::default()).expect("encoder");
    let mut text = String::new();
    let mut stream = Vec::new();
    generator.initial_load(1, 256, |chunk| {
        stream.push(chunk);
        Ok::<_, ()>(())
    }).expect("load");
    for n in 0..300 {
        stream.push(generator.next_transaction(n + 2).1);
    }
    for changes in &stream {
        encoder.encode_transaction(changes, &mut text).expect("encode");
    }
    (stream, text.lines().map(String::from).collect())
}

#[test]
fn reopened_lakehouse_resumes_after_the_last_applied_transaction() {
    let (stream, lines) = chbench_stream();
    // Cut inside a transaction half-way: after a BEGIN and one event.
    let cut = lines[..lines.len() / 2].iter().rposition(|l| l.contains("\"BEGIN\"")).map(|begin| begin + 2).expect("a BEGIN");

    let dir = tempfile::tempdir().expect("temp dir");
    let engine = open(dir.path());
    let first = ingest(&engine, &lines[..cut], SinkOptions::default());
    let error = first.expect_err("the cut stream ends inside a transaction").to_string();
    assert!(error.contains("ended before its END"), "{error}");
    engine.close().expect("close with a checkpoint");

    let engine = open(dir.path());
    assert!(!engine.recovered_positions().is_empty(), "the checkpoint holds the source position");
    let second = ingest(&engine, &lines, SinkOptions::default()).expect("resume without duplicate keys");
    let total_transactions = stream.len() as u64;
    assert!(second.stats.transactions_applied < total_transactions, "the first run's transactions are not applied again");

    // Same tables as replaying the generator's changes directly.
    let expected = engine_with_direct_replay(&stream);
    for schema in schemas() {
        assert_eq!(rows(&engine, schema.name()), rows(&expected.engine, schema.name()), "{}", schema.name());
    }
}

fn engine_with_direct_replay(stream: &[Vec<retina_core::RowChange>]) -> TestEngine {
    let test = engine();
    for schema in schemas() {
        test.engine.create_table(schema).expect("table");
    }
    for changes in stream {
        test.engine.submit(changes.clone()).expect("submit");
    }
    test.engine.sync().expect("sync");
    test
}

#[test]
fn a_reader_stopped_mid_transaction_drops_it_unapplied_and_the_restart_applies_it_once() {
    let (stream, lines) = chbench_stream();
    let cut = lines[..lines.len() / 2].iter().rposition(|l| l.contains("\"BEGIN\"")).map(|begin| begin + 2).expect("a BEGIN");

    let dir = tempfile::tempdir().expect("temp dir");
    let engine = open(dir.path());
    let mut sink = retina_cdc::Sink::new(&engine, "file:test.jsonl", SinkOptions::default()).expect("sink");
    for (number, line) in lines[..cut].iter().enumerate() {
        sink.handle(retina_cdc::Position::line(number as u64 + 1), line).expect("handle");
    }
    // A server shutting down: no error, the open transaction is not applied.
    assert_eq!(sink.stop().expect("stop"), 1, "one transaction was open at the cut");
    let applied = sink.stats().transactions_applied;
    drop(sink);
    let partial = engine_with_direct_replay(&stream[..applied as usize]);
    for schema in schemas() {
        assert_eq!(rows(&engine, schema.name()), rows(&partial.engine, schema.name()), "{} before the restart", schema.name());
    }
    engine.close().expect("close with a checkpoint");

    let engine = open(dir.path());
    let second = ingest(&engine, &lines, SinkOptions::default()).expect("resume");
    assert_eq!(applied + second.stats.transactions_applied, stream.len() as u64, "each transaction applied exactly once");
    let expected = engine_with_direct_replay(&stream);
    for schema in schemas() {
        assert_eq!(rows(&engine, schema.name()), rows(&expected.engine, schema.name()), "{}", schema.name());
    }
}

/// A change event of `s.t` inside transaction `txn` at PostgreSQL LSN `lsn` (so it
/// carries a source order: `source.sequence` = [last commit LSN, LSN]).
fn ordered_event(id: i64, txn: &str, total_order: u64, last_commit: u64, lsn: u64) -> String {
    let line = event("c", id, Some("x"), Some((txn, total_order)));
    line.replace(r#""txId":"#, &format!(r#""sequence":"[\"{last_commit}\",\"{lsn}\"]","txId":"#))
}

/// Transactions interleave in the stream (T1 opens, T2 opens and completes, T1
/// completes) and the process stops between T2's END and T1's END. The recorded
/// position must not pass T1's BEGIN: the restart reads from there again, drops T2 by
/// its source order and applies T1, each exactly once.
#[test]
fn a_stop_inside_interleaved_transactions_resumes_before_the_open_one() {
    let lines = vec![
        begin("t1"),
        ordered_event(1, "t1", 1, 100, 110),
        begin("t2"),
        ordered_event(2, "t2", 1, 100, 120),
        end("t2", 1, "s.t"),
        // T2 committed at 125: T1's later events carry it as the last commit.
        ordered_event(3, "t1", 2, 125, 130),
        end("t1", 2, "s.t"),
    ];
    let cut = 5; // after END t2, with t1 still open
    let dir = tempfile::tempdir().expect("temp dir");
    let open = || {
        let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
        let config = EngineConfig { shards: 2, gc_interval: None, ..EngineConfig::default() };
        Engine::open(config, Arc::new(store)).expect("open")
    };
    let engine = open();
    let first = ingest(&engine, &lines[..cut], SinkOptions::default());
    assert!(first.expect_err("t1 is still open at the cut").to_string().contains("ended before its END"));
    assert_eq!(rows(&engine, "s.t").len(), 1, "t2 was applied");
    engine.close().expect("close with a checkpoint");

    let engine = open();
    let second = ingest(&engine, &lines, SinkOptions::default()).expect("the restart reads t1 from its BEGIN");
    assert_eq!(second.stats.transactions_applied, 1, "only t1: t2 is recognized by its source order");
    assert_eq!(second.stats.duplicate_transactions, 1);
    let ids: Vec<String> = rows(&engine, "s.t").iter().map(|row| format!("{:?}", row[0])).collect();
    assert_eq!(ids, vec!["Int64(1)", "Int64(2)", "Int64(3)"]);
}
