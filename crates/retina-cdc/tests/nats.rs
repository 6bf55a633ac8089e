//! The JetStream source against a real `nats-server -js` (Debian package
//! `nats-server`) started by the test on a free port in a temp dir.

mod common;

use std::time::Duration;

use common::*;
use retina_cdc::ingest::{run, StopWhen};
use retina_test_support::LocalNatsServer;
use retina_cdc::source::nats::NatsSource;
use retina_cdc::{CdcError, SinkOptions};

fn start_nats() -> LocalNatsServer {
    LocalNatsServer::start().unwrap_or_else(|e| panic!("{e}"))
}

/// Publishes `lines` to stream `cdc` (created if needed); returns their sequences.
fn publish(port: u16, lines: &[String]) -> Vec<u64> {
    publish_bytes(port, &lines.iter().map(|line| line.as_bytes().to_vec()).collect::<Vec<_>>())
}

/// [`publish`] for payloads that need not be text.
fn publish_bytes(port: u16, lines: &[Vec<u8>]) -> Vec<u64> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}")).await.expect("connect");
        let jetstream = async_nats::jetstream::new(client);
        jetstream
            .get_or_create_stream(async_nats::jetstream::stream::Config {
                name: "cdc".into(),
                subjects: vec!["cdc.>".into()],
                ..Default::default()
            })
            .await
            .expect("stream");
        let mut sequences = Vec::new();
        for line in lines {
            let ack = jetstream.publish("cdc.s.t", line.clone().into()).await.expect("publish").await.expect("stored");
            sequences.push(ack.sequence);
        }
        sequences
    })
}

fn delete_message(port: u16, sequence: u64) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}")).await.expect("connect");
        let stream = async_nats::jetstream::new(client).get_stream("cdc").await.expect("stream");
        stream.delete_message(sequence).await.expect("delete");
    });
}

fn ack_floor(port: u16, durable: &str) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}")).await.expect("connect");
        let stream = async_nats::jetstream::new(client).get_stream("cdc").await.expect("stream");
        let mut consumer: async_nats::jetstream::consumer::PullConsumer = stream.get_consumer(durable).await.expect("consumer");
        consumer.info().await.expect("info").ack_floor.stream_sequence
    })
}

fn transaction(id: &str, keys: &[i64]) -> Vec<String> {
    let mut lines = vec![begin(id)];
    lines.extend(keys.iter().enumerate().map(|(i, k)| event("c", *k, Some("n"), Some((id, i as u64 + 1)))));
    lines.push(end(id, keys.len() as u64, "s.t"));
    lines
}

fn ingest_nats(port: u16, durable: &str) -> (TestEngine, Result<retina_cdc::ingest::IngestReport, CdcError>) {
    let test = engine();
    let mut source = NatsSource::connect(&format!("127.0.0.1:{port}"), "cdc", durable).expect("source");
    let stop = StopWhen::idle_for(Duration::from_millis(300));
    let result = run(&test.engine, "nats://test/cdc", &mut source, SinkOptions::default(), stop);
    (test, result)
}

#[test]
fn replays_a_stream_and_acknowledges_only_what_is_visible() {
    let server = start_nats();
    let mut lines = transaction("1", &[1, 2]);
    lines.extend(transaction("2", &[3]));
    lines.push(r#"{"key":{"id":3},"value":null}"#.into()); // a tombstone after the last transaction
    publish(server.port(), &lines);
    let (test, report) = ingest_nats(server.port(), "retina");
    let report = report.expect("ingest");
    assert_eq!(report.stats.transactions_applied, 2);
    assert_eq!(rows(&test.engine, "s.t").len(), 3);
    assert_eq!(report.visible_position.as_deref(), Some("transport=7"));
    // Acknowledged up to the END of the last visible transaction, not the tombstone.
    assert_eq!(ack_floor(server.port(), "retina"), 7);

    // A second run of the same durable consumer gets only what was not acknowledged.
    publish(server.port(), &transaction("3", &[4]));
    let (test, report) = ingest_nats(server.port(), "retina");
    let report = report.expect("second ingest");
    assert_eq!(report.stats.transactions_applied, 1);
    assert_eq!(report.stats.tombstones, 1, "the unacknowledged tombstone is redelivered, nothing else");
    assert_eq!(rows(&test.engine, "s.t").len(), 1);
    assert_eq!(ack_floor(server.port(), "retina"), 11);
}

#[test]
fn a_failed_transaction_is_not_acknowledged() {
    let server = start_nats();
    let mut lines = transaction("1", &[1]);
    lines.extend([begin("2"), event("d", 42, None, Some(("2", 1))), end("2", 1, "s.t")]);
    publish(server.port(), &lines);
    let (_test, result) = ingest_nats(server.port(), "retina");
    let error = result.expect_err("delete of a missing key").to_string();
    assert!(error.contains("stream sequence 4") && error.contains("table s.t") && error.contains("key id=42"), "{error}");
    assert!(ack_floor(server.port(), "retina") < 4, "nothing of the failed transaction is acknowledged");
}

#[test]
fn a_sequence_gap_is_an_error_naming_the_missing_messages() {
    let server = start_nats();
    let mut lines = transaction("1", &[1]);
    lines.extend(transaction("2", &[2]));
    publish(server.port(), &lines);
    delete_message(server.port(), 5);
    let (_test, result) = ingest_nats(server.port(), "retina");
    let error = result.expect_err("gap").to_string();
    assert!(error.contains("stream sequence 6") && error.contains("5..5"), "{error}");
    assert_eq!(ack_floor(server.port(), "retina"), 3, "the transaction before the gap is applied and acknowledged");
}

/// A payload that is not UTF-8 stops the source naming its sequence and byte, after
/// what came before it is applied; it is never read with replacement characters.
#[test]
fn a_message_that_is_not_utf8_is_an_error_naming_its_sequence() {
    let server = start_nats();
    let mut lines: Vec<Vec<u8>> = transaction("1", &[1]).into_iter().map(String::into_bytes).collect();
    let mut bad = event("c", 2, Some("x"), None).into_bytes();
    let at = bad.len() - 5;
    bad[at] = 0xff;
    lines.push(bad);
    publish_bytes(server.port(), &lines);
    let (test, result) = ingest_nats(server.port(), "retina");
    let error = result.expect_err("not UTF-8").to_string();
    assert!(error.contains(&format!("the message at stream sequence 4 is not valid UTF-8 (byte {} of the message)", at + 1)), "{error}");
    assert_eq!(rows(&test.engine, "s.t").len(), 1, "the transaction before it is applied");
    assert_eq!(ack_floor(server.port(), "retina"), 3, "and acknowledged, the bad message not");
}
