//! The decoder against the encoder: a generated CH-benCHmark stream, encoded as
//! Debezium JSON in every shape and replayed through the sink, gives the same tables
//! as replaying the generator's row changes directly. Plus transaction reconstruction
//! under random interleavings, and redelivered transactions applied once.

mod common;

use common::*;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use retina_workload::chbench::{schemas, ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_cdc::debezium::{DebeziumEncoder, EncoderOptions};
use retina_cdc::{Grouping, SinkOptions};
use retina_core::{RowChange, TableId};

fn generated(seed: u64, transactions: usize) -> Vec<Vec<RowChange>> {
    let ids: Vec<TableId> = (0..9).map(TableId).collect();
    let mut generator = ChBenchGenerator::new(seed, ChBenchScale::for_base_rows(3_000), ChBenchTables::from_ids(&ids));
    let mut stream = Vec::new();
    generator.initial_load(1, 512, |chunk| {
        stream.push(chunk);
        Ok::<_, ()>(())
    }).expect("load");
    for n in 0..transactions {
        stream.push(generator.next_transaction(n as i64 + 2).1);
    }
    stream
}

fn direct(stream: &[Vec<RowChange>]) -> TestEngine {
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
fn generated_stream_round_trips_in_every_shape() {
    let stream = generated(11, 400);
    let expected = direct(&stream);
    for options in [
        EncoderOptions { with_schemas: false, with_keys: false },
        EncoderOptions { with_schemas: true, with_keys: false },
        EncoderOptions { with_schemas: true, with_keys: true },
        EncoderOptions { with_schemas: false, with_keys: true },
    ] {
        let mut encoder = DebeziumEncoder::new(&schemas(), options).expect("encoder");
        let mut text = String::new();
        for changes in &stream {
            encoder.encode_transaction(changes, &mut text).expect("encode");
        }
        let lines: Vec<String> = text.lines().map(String::from).collect();
        let test = engine();
        if !options.with_schemas {
            for schema in schemas() {
                test.engine.create_table(schema).expect("catalog table for a schemaless stream");
            }
        }
        let mut sink_options = SinkOptions::default();
        if options.with_schemas && !options.with_keys {
            // Schemas but no message keys: the keys come from --primary-key.
            for schema in schemas() {
                let key = schema.primary_key().iter().map(|&i| schema.columns().field(i).name().clone()).collect();
                sink_options.primary_keys.insert(schema.name().to_string(), key);
            }
        }
        let report = ingest(&test.engine, &lines, sink_options).expect("ingest");
        assert_eq!(report.stats.transactions_applied, stream.len() as u64, "{options:?}");
        for schema in schemas() {
            assert_eq!(rows(&test.engine, schema.name()), rows(&expected.engine, schema.name()), "{} {options:?}", schema.name());
        }
    }
}

#[test]
fn redelivered_transactions_are_applied_once() {
    let stream = generated(5, 50);
    let mut encoder = DebeziumEncoder::new(&schemas(), EncoderOptions::default()).expect("encoder");
    let mut blocks = Vec::new();
    for changes in &stream {
        let mut text = String::new();
        encoder.encode_transaction(changes, &mut text).expect("encode");
        blocks.push(text);
    }
    // A connector restart re-sends transactions 20..30 after transaction 30.
    let mut text = blocks[..30].concat();
    text.push_str(&blocks[20..30].concat());
    text.push_str(&blocks[30..].concat());
    let test = engine();
    for schema in schemas() {
        test.engine.create_table(schema).expect("table");
    }
    let lines: Vec<String> = text.lines().map(String::from).collect();
    let report = ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(report.stats.duplicate_transactions, 10);
    assert_eq!(report.stats.transactions_applied, stream.len() as u64);
    let expected = direct(&stream);
    for schema in schemas() {
        assert_eq!(rows(&test.engine, schema.name()), rows(&expected.engine, schema.name()));
    }
}

#[test]
fn streams_without_metadata_group_by_source_transaction_or_per_event() {
    let line = |id: i64, txid: u64| {
        format!(r#"{{"before":null,"after":{{"id":{id},"name":"n"}},"source":{{"schema":"s","table":"t","txId":{txid}}},"op":"c"}}"#)
    };
    let lines = vec![line(1, 10), line(2, 10), line(3, 11), line(4, 12), line(5, 12)];
    for (grouping, transactions) in [(Grouping::SourceTransaction, 3), (Grouping::PerEvent, 5)] {
        let test = engine();
        let mut options = SinkOptions { infer_schema: true, grouping, ..SinkOptions::default() };
        options.primary_keys.insert("s.t".into(), vec!["id".into()]);
        let report = ingest(&test.engine, &lines, options).expect("ingest");
        assert_eq!(report.stats.transactions_applied, transactions, "{grouping:?}");
        assert_eq!(rows(&test.engine, "s.t").len(), 5);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Transactions whose events interleave (and arrive out of total_order inside a
    /// transaction) are rebuilt exactly: every row arrives, each transaction once.
    #[test]
    fn reconstruction_under_random_interleavings(sizes in prop::collection::vec(1usize..5, 1..8), seed in any::<u64>()) {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let mut queues: Vec<Vec<String>> = Vec::new();
        let mut key = 0i64;
        for (t, size) in sizes.iter().enumerate() {
            let id = format!("tx{t}");
            let mut events: Vec<String> = (1..=*size as u64).map(|order| {
                key += 1;
                event("c", key, Some("v"), Some((&id, order)))
            }).collect();
            events.shuffle(&mut rng);
            let mut queue = vec![begin(&id)];
            queue.extend(events);
            queue.push(end(&id, *size as u64, "s.t"));
            queues.push(queue);
        }
        // Merge the queues in random order, keeping each queue's own order.
        let mut lines = Vec::new();
        let mut cursors = vec![0usize; queues.len()];
        while lines.len() < queues.iter().map(Vec::len).sum::<usize>() {
            let open: Vec<usize> = (0..queues.len()).filter(|&q| cursors[q] < queues[q].len()).collect();
            let pick = open[rng.random_range(0..open.len())];
            lines.push(queues[pick][cursors[pick]].clone());
            cursors[pick] += 1;
        }
        let test = engine();
        let report = ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
        prop_assert_eq!(report.stats.transactions_applied, sizes.len() as u64);
        prop_assert_eq!(rows(&test.engine, "s.t").len() as i64, key);
    }
}
