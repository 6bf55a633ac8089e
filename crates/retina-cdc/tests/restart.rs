//! Exactly once across processes: a stream cut off mid-transaction is replayed into a
//! lakehouse, the engine is closed (checkpoint with the source position) and reopened,
//! and the whole stream is replayed again: nothing is applied twice, nothing skipped.

mod common;

use std::sync::Arc;

use common::*;
use retina_bench::chbench::{schemas, ChBenchGenerator, ChBenchScale, ChBenchTables};
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
