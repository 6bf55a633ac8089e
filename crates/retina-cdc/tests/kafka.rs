//! The Kafka source against a real Apache Kafka 4.4 broker (KRaft, from Maven Central jars),
//! with records produced by `kafka-python` (PyPI) as Kafka Connect lays them out: a
//! topic per table, several partitions keyed by primary key, and a transaction topic.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::rows;
use retina_cdc::ingest::{drive, ingest_uri, DriveOptions, StopWhen};
use retina_cdc::SinkOptions;
use retina_core::{Engine, EngineConfig, SourceRegistry};
use retina_storage::ParquetLakeStore;
use retina_test_support::{KafkaRecord, LocalKafkaBroker};

fn broker() -> LocalKafkaBroker {
    LocalKafkaBroker::start().unwrap_or_else(|e| panic!("{e}"))
}

fn open_engine(dir: &std::path::Path) -> Engine {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8 temp dir")).expect("store");
    let config = EngineConfig { shards: 2, gc_interval: None, ..EngineConfig::default() };
    Engine::open(config, Arc::new(store)).expect("engine (recovering what the data dir holds)")
}

const VALUE_SCHEMA: &str = r#"{"type":"struct","name":"srv.s.Envelope","fields":[{"type":"struct","optional":true,"field":"before","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]},{"type":"struct","optional":true,"field":"after","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]},{"type":"struct","optional":false,"field":"source","fields":[{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"}]},{"type":"string","optional":false,"field":"op"},{"type":"struct","optional":true,"field":"transaction","fields":[{"type":"string","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"total_order"},{"type":"int64","optional":false,"field":"data_collection_order"}]}]}"#;
const KEY_SCHEMA: &str = r#"{"type":"struct","name":"srv.s.Key","fields":[{"type":"int64","optional":false,"field":"id"}]}"#;

fn key(id: i64) -> String {
    format!(r#"{{"schema":{KEY_SCHEMA},"payload":{{"id":{id}}}}}"#)
}

/// A change event of table `s.<table>` as Kafka Connect's JsonConverter writes it.
fn change(table: &str, op: &str, id: i64, name: Option<&str>, transaction: Option<(&str, u64)>) -> KafkaRecord {
    let after = match (op, name) {
        ("d", _) | (_, None) => "null".to_string(),
        (_, Some(name)) => format!(r#"{{"id":{id},"name":"{name}"}}"#),
    };
    let transaction = match transaction {
        Some((tx, order)) => format!(r#"{{"id":"{tx}","total_order":{order},"data_collection_order":{order}}}"#),
        None => "null".to_string(),
    };
    let payload = format!(
        r#"{{"before":null,"after":{after},"source":{{"schema":"s","table":"{table}"}},"op":"{op}","transaction":{transaction}}}"#
    );
    KafkaRecord {
        topic: format!("srv.s.{table}"),
        key: Some(key(id)),
        value: Some(format!(r#"{{"schema":{VALUE_SCHEMA},"payload":{payload}}}"#)),
        partition: None,
    }
}

fn marker(status: &str, id: &str, counts: &[(&str, u64)]) -> KafkaRecord {
    let value = if status == "BEGIN" {
        format!(r#"{{"schema":null,"payload":{{"status":"BEGIN","id":"{id}","event_count":null,"data_collections":null}}}}"#)
    } else {
        let total: u64 = counts.iter().map(|(_, c)| c).sum();
        let collections: Vec<String> =
            counts.iter().map(|(t, c)| format!(r#"{{"data_collection":"s.{t}","event_count":{c}}}"#)).collect();
        format!(
            r#"{{"schema":null,"payload":{{"status":"END","id":"{id}","event_count":{total},"data_collections":[{}]}}}}"#,
            collections.join(",")
        )
    };
    KafkaRecord { topic: "srv.transaction".into(), key: Some(format!(r#"{{"id":"{id}"}}"#)), value: Some(value), partition: None }
}

/// Transaction `n`: inserts row n into `s.a` and rows 2n, 2n+1 into `s.b`. Its ids
/// are as Debezium's PostgreSQL connector writes them: `txId:LSN`, with each
/// message's own LSN, so BEGIN, events and END carry different ids.
fn transaction(n: i64) -> (Vec<KafkaRecord>, Vec<KafkaRecord>) {
    let id = |lsn: i64| format!("{n}:{}", 10 * n + lsn);
    let markers = vec![marker("BEGIN", &id(0), &[]), marker("END", &id(4), &[("a", 1), ("b", 2)])];
    let events = vec![
        change("a", "c", n, Some("x"), Some((&id(1), 1))),
        change("b", "c", 2 * n, Some("y"), Some((&id(2), 2))),
        change("b", "c", 2 * n + 1, Some("z"), Some((&id(3), 3))),
    ];
    (markers, events)
}

/// Produces transaction `n`'s markers, then its events.
fn produce_transaction(broker: &LocalKafkaBroker, n: i64) {
    let (markers, events) = transaction(n);
    broker.produce(&markers).expect("markers");
    broker.produce(&events).expect("events");
}

fn topics(broker: &LocalKafkaBroker) {
    broker.create_topic("srv.transaction", 1).expect("transaction topic");
    broker.create_topic("srv.s.a", 3).expect("topic a");
    broker.create_topic("srv.s.b", 2).expect("topic b");
}

fn uri(broker: &LocalKafkaBroker, options: &str) -> String {
    format!("kafka://{}/srv{options}", broker.bootstrap())
}

fn ingest(engine: &Engine, uri: &str) -> Result<retina_cdc::ingest::IngestReport, retina_cdc::CdcError> {
    ingest_uri(engine, uri, SinkOptions::default(), StopWhen::idle_for(Duration::from_millis(1500)))
}

/// A run told to stop at once when idle still reads every partition to the end the
/// broker reports: before the first fetches are answered nothing is ready, which is
/// not the end of the stream (a busy broker's first answer once took longer than a
/// one-second idle limit, and `retina ingest` ended "caught up" having applied nothing).
#[test]
fn a_run_that_stops_at_idle_stops_only_once_every_partition_is_read_to_its_end() {
    let broker = broker();
    topics(&broker);
    let (mut markers, mut events) = (Vec::new(), Vec::new());
    for n in 1..=2_000 {
        let (m, e) = transaction(n);
        markers.extend(m);
        events.extend(e);
    }
    broker.produce(&markers).expect("produce markers");
    broker.produce(&events).expect("produce events");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let report = ingest_uri(&engine, &uri(&broker, ""), SinkOptions::default(), StopWhen::idle_for(Duration::ZERO)).expect("ingest");
    assert_eq!(report.ended, retina_cdc::ingest::Ended::Idle);
    assert_eq!(report.stats.transactions_applied, 2_000, "every transaction the broker holds is applied");
    assert_eq!(rows(&engine, "s.b").len(), 4_000);
}

#[test]
fn transactions_spread_over_topics_and_partitions_are_applied_whole_and_resumed_exactly_once() {
    let broker = broker();
    topics(&broker);
    // Markers first, then every table's events, as a lagging connector task would
    // leave them: each transaction is complete only once both topics are read.
    let (mut markers, mut events) = (Vec::new(), Vec::new());
    for n in 1..=100 {
        let (m, e) = transaction(n);
        markers.extend(m);
        events.extend(e);
    }
    broker.produce(&markers).expect("produce markers");
    broker.produce(&events).expect("produce events");
    let dir = tempfile::tempdir().expect("data dir");
    let uri = uri(&broker, "");
    {
        let engine = open_engine(dir.path());
        let report = ingest(&engine, &uri).expect("ingest");
        assert_eq!(report.stats.transactions_applied, 100);
        assert_eq!(report.stats.row_changes_applied, 300);
        assert_eq!(rows(&engine, "s.a").len(), 100);
        assert_eq!(rows(&engine, "s.b").len(), 200);
        let durable = report.durable_position.expect("durable position");
        assert!(durable.contains("offsets=srv.s.a/0="), "{durable}");
        assert!(durable.contains("srv.transaction/0=200"), "every marker is applied: {durable}");
    }
    // The durable offsets reached the consumer group, as another client reads them.
    let committed = broker.committed_offsets("retina-srv").expect("committed offsets");
    assert_eq!(committed_sums(&committed), [("srv.s.a".to_string(), 100), ("srv.s.b".into(), 200), ("srv.transaction".into(), 200)], "{committed:?}");
    assert_eq!(committed.keys().filter(|(topic, _)| topic == "srv.s.a").count(), 3, "every partition: {committed:?}");
    // More transactions, and a restart on the same data dir: only the new ones apply.
    let (mut markers, mut events) = (Vec::new(), Vec::new());
    for n in 101..=120 {
        let (m, e) = transaction(n);
        markers.extend(m);
        events.extend(e);
    }
    // A delete keyed only by the message key (before: null, PostgreSQL's default
    // replica identity in some setups), then its tombstone.
    markers.extend([marker("BEGIN", "del", &[]), marker("END", "del", &[("a", 1)])]);
    events.push(change("a", "d", 1, None, Some(("del", 1))));
    events.push(KafkaRecord { topic: "srv.s.a".into(), key: Some(key(1)), value: None, partition: None });
    broker.produce(&events).expect("produce events");
    broker.produce(&markers).expect("produce markers");
    let engine = open_engine(dir.path());
    let report = ingest(&engine, &uri).expect("second ingest");
    assert_eq!(report.stats.transactions_applied, 21, "only what the first run did not apply");
    assert_eq!(report.stats.duplicate_transactions, 0);
    assert_eq!(rows(&engine, "s.a").len(), 119, "120 inserted, row 1 deleted by its message key");
    assert_eq!(rows(&engine, "s.b").len(), 240);
    let committed = broker.committed_offsets("retina-srv").expect("committed offsets");
    assert_eq!(committed_sums(&committed), [("srv.s.a".to_string(), 122), ("srv.s.b".into(), 240), ("srv.transaction".into(), 242)], "{committed:?}");
}

/// Committed offsets summed per topic (records before them, over its partitions).
fn committed_sums(committed: &std::collections::BTreeMap<(String, i32), i64>) -> Vec<(String, i64)> {
    let mut sums = std::collections::BTreeMap::new();
    for ((topic, _), offset) in committed {
        *sums.entry(topic.clone()).or_insert(0) += offset;
    }
    sums.into_iter().collect()
}

#[test]
fn a_table_topic_far_behind_the_others_holds_its_transactions_until_it_catches_up() {
    let broker = broker();
    topics(&broker);
    let (mut markers, mut a_events, mut b_events) = (Vec::new(), Vec::new(), Vec::new());
    for n in 1..=50 {
        let (m, e) = transaction(n);
        markers.extend(m);
        for record in e {
            if record.topic == "srv.s.a" { a_events.push(record) } else { b_events.push(record) }
        }
    }
    broker.produce(&markers).expect("markers");
    broker.produce(&a_events).expect("table a");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let registry = SourceRegistry::new();
    let uri = uri(&broker, "");
    let ingest_thread = std::thread::spawn({
        let registry = registry.clone();
        move || {
            let mut source = retina_cdc::ingest::open_source(&uri).expect("source");
            let options = DriveOptions {
                sink: retina_cdc::ingest::options_for_uri(&uri, SinkOptions::default()).expect("options"),
                stop: StopWhen::idle_for(Duration::from_secs(4)),
                status: Some(registry),
            };
            let report = drive(&engine, &uri, source.as_mut(), options);
            (engine, report)
        }
    });
    // While table b's topic is empty, every transaction is held, none applied.
    std::thread::sleep(Duration::from_millis(2000));
    let status = registry.list().into_iter().next().expect("status");
    assert_eq!(status.transactions, 0, "nothing is applied before its transaction is complete");
    assert_eq!(status.held_transactions, Some(50), "{status:?}");
    assert!(status.held_bytes.unwrap_or(0) > 50 * 500, "{status:?}");
    let lag: u64 = status.partitions.iter().filter(|p| p.topic == "srv.s.a").map(|p| p.lag_messages).sum();
    assert_eq!(lag, 50, "table a's events are read but not applied: {:?}", status.partitions);
    broker.produce(&b_events).expect("table b, late");
    let (engine, report) = ingest_thread.join().expect("ingest");
    let report = report.expect("ingest");
    assert_eq!(report.stats.transactions_applied, 50);
    assert_eq!((rows(&engine, "s.a").len(), rows(&engine, "s.b").len()), (50, 100));
}

#[test]
fn a_missing_event_stops_the_source_naming_the_transaction_and_the_position_stays_before_it() {
    let broker = broker();
    topics(&broker);
    produce_transaction(&broker, 1);
    // Transaction 2 says 3 events, but one of table b's never arrives.
    let (markers, mut events) = transaction(2);
    events.pop();
    broker.produce(&markers).expect("markers");
    broker.produce(&events).expect("events");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let uri = uri(&broker, "?transaction_timeout_s=1");
    let result = ingest_uri(&engine, &uri, SinkOptions::default(), StopWhen::idle_for(Duration::from_secs(5)));
    let error = result.expect_err("incomplete transaction").to_string();
    assert!(error.contains("transaction 2 cannot complete"), "{error}");
    assert!(error.contains("its END says 3 events, 2 arrived"), "{error}");
    assert!(error.contains("srv.s.a partition") && error.contains("srv.s.b partition"), "{error}");
    assert!(error.contains("not advanced"), "{error}");
    assert_eq!(rows(&engine, "s.a").len(), 1, "transaction 1 is applied, transaction 2 is not");
    let position = engine.durable_positions().into_iter().next().expect("durable position").position;
    assert!(position.contains("srv.transaction/0=2"), "the position stays at transaction 2's BEGIN: {position}");
    // Nor does the consumer group's: what is committed is what a restart resumes from.
    let committed = broker.committed_offsets("retina-srv").expect("committed offsets");
    assert_eq!(committed.get(&("srv.transaction".to_string(), 0)), Some(&2), "{committed:?}");
    assert_eq!(committed_sums(&committed).iter().map(|(_, sum)| sum).sum::<i64>(), 2 + 3, "transaction 1 only: {committed:?}");
}

#[test]
fn commit_offsets_false_commits_nothing_to_the_group() {
    let broker = broker();
    topics(&broker);
    produce_transaction(&broker, 1);
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let report = ingest(&engine, &uri(&broker, "?commit_offsets=false")).expect("ingest");
    assert_eq!(report.stats.transactions_applied, 1);
    let committed = broker.committed_offsets("retina-srv").expect("committed offsets");
    assert!(committed.is_empty(), "{committed:?}");
}

#[test]
fn without_transaction_metadata_every_event_is_its_own_transaction_and_the_status_says_so() {
    let broker = broker();
    broker.create_topic("srv.s.a", 2).expect("topic");
    let records: Vec<KafkaRecord> = (1..=30).map(|n| change("a", "c", n, Some("x"), None)).collect();
    broker.produce(&records).expect("produce");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let uri = uri(&broker, "");
    let registry = SourceRegistry::new();
    let mut source = retina_cdc::ingest::open_source(&uri).expect("source");
    let options = DriveOptions {
        sink: retina_cdc::ingest::options_for_uri(&uri, SinkOptions::default()).expect("options"),
        stop: StopWhen::idle_for(Duration::from_millis(1500)),
        status: Some(registry.clone()),
    };
    let report = drive(&engine, &uri, source.as_mut(), options).expect("ingest");
    assert_eq!(report.stats.transactions_applied, 30);
    assert_eq!(rows(&engine, "s.a").len(), 30);
    let status = registry.list().into_iter().next().expect("status");
    let detail = status.detail.unwrap_or_default();
    assert!(detail.contains("no transaction topic srv.transaction yet") && detail.contains("apply one by one"), "{detail}");
    assert_eq!(status.partitions.len(), 2);
    assert!(status.partitions.iter().all(|p| p.lag_messages == 0), "{:?}", status.partitions);
}

/// A change event without a `source` block (a connector configured to drop it):
/// only its topic names its table.
fn sourceless(topic: &str, id: i64) -> KafkaRecord {
    let schema = VALUE_SCHEMA.replace(r#"{"type":"struct","optional":false,"field":"source","fields":[{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"}]},"#, "");
    assert!(!schema.contains("source"), "the schema lost its source block");
    let payload = format!(r#"{{"before":null,"after":{{"id":{id},"name":"n{id}"}},"op":"c","transaction":null}}"#);
    KafkaRecord { topic: topic.to_string(), key: Some(key(id)), value: Some(format!(r#"{{"schema":{schema},"payload":{payload}}}"#)), partition: None }
}

#[test]
fn events_without_a_source_block_belong_to_the_table_their_topic_names_unless_table_is_given() {
    let broker = broker();
    broker.create_topic("srv.s.a", 2).expect("topic a");
    broker.create_topic("srv.inventory.b", 1).expect("topic b");
    let mut records: Vec<KafkaRecord> = (1..=10).map(|n| sourceless("srv.s.a", n)).collect();
    records.extend((1..=4).map(|n| sourceless("srv.inventory.b", n)));
    // One keyless: the topic still names its table.
    let mut keyless = sourceless("srv.inventory.b", 5);
    keyless.key = None;
    records.push(keyless);
    broker.produce(&records).expect("produce");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let report = ingest(&engine, &uri(&broker, "")).expect("ingest");
    assert_eq!(report.stats.transactions_applied, 15);
    assert_eq!(rows(&engine, "s.a").len(), 10);
    assert_eq!(rows(&engine, "inventory.b").len(), 5);

    // `table=` names the table before the topic does.
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    ingest(&engine, &uri(&broker, "?topics=srv.s.a&table=s.c")).expect("ingest");
    assert_eq!(rows(&engine, "s.c").len(), 10);
    assert!(engine.table_id("s.a").is_none(), "nothing went to the topic's table");
}

/// Debezium creates its transaction topic only at the first transaction after its
/// snapshot: an event that names a transaction before that topic exists waits for
/// it (it stopped the source for good before). It is neither applied nor passed
/// over: once the topic appears with the transaction's BEGIN and END, the event is
/// applied, whole.
#[test]
fn an_event_that_names_a_transaction_waits_for_a_transaction_topic_that_appears_later() {
    let broker = broker();
    broker.create_topic("srv.s.a", 1).expect("topic");
    broker.produce(&[change("a", "c", 1, Some("x"), Some(("7:1", 1)))]).expect("produce");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let report = ingest(&engine, &uri(&broker, "")).expect("the event waits, nothing fails");
    assert_eq!(report.stats.transactions_applied, 0, "held until its transaction is known: {report:?}");
    assert!(engine.table_id("s.a").is_none_or(|_| rows(&engine, "s.a").is_empty()));
    broker.produce(&[marker("BEGIN", "7:1", &[]), marker("END", "7:2", &[("a", 1)])]).expect("the transaction topic appears");
    let report = ingest(&engine, &uri(&broker, "")).expect("ingest");
    assert_eq!(report.stats.transactions_applied, 1, "{report:?}");
    assert_eq!(rows(&engine, "s.a").len(), 1);
}

#[test]
fn a_bad_message_is_reported_with_its_topic_partition_and_offset() {
    let broker = broker();
    broker.create_topic("srv.s.a", 1).expect("topic");
    let mut bad = change("a", "c", 2, Some("x"), None);
    bad.value = Some(bad.value.unwrap_or_default().replace(r#""id":2,"name""#, r#""id":"two","name""#));
    broker.produce(&[change("a", "c", 1, Some("x"), None), bad]).expect("produce");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let error = ingest(&engine, &uri(&broker, "")).expect_err("mistyped id").to_string();
    assert!(error.starts_with("topic srv.s.a partition 0 offset 1: kafka message 2"), "{error}");
    assert!(error.contains("after.id"), "{error}");
    assert_eq!(rows(&engine, "s.a").len(), 1);
}

#[test]
fn a_deleted_topic_or_a_changed_partition_count_is_an_error_on_restart() {
    let broker = broker();
    topics(&broker);
    produce_transaction(&broker, 1);
    let dir = tempfile::tempdir().expect("data dir");
    let uri = uri(&broker, "");
    {
        let engine = open_engine(dir.path());
        ingest(&engine, &uri).expect("first ingest");
    }
    broker.delete_topic("srv.s.b").expect("delete topic");
    {
        let engine = open_engine(dir.path());
        let error = ingest(&engine, &uri).expect_err("deleted topic").to_string();
        assert!(error.contains("topic srv.s.b is in the recorded position but no longer exists"), "{error}");
    }
    broker.create_topic("srv.s.b", 4).expect("topic b again, wider");
    let engine = open_engine(dir.path());
    let error = ingest(&engine, &uri).expect_err("partition count changed").to_string();
    assert!(error.contains("topic srv.s.b now has 4 partitions where the recorded position has 2"), "{error}");
}

#[test]
fn a_broker_that_is_not_there_is_a_clear_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("port").local_addr().expect("address").port();
    let error = match retina_cdc::ingest::open_source(&format!("kafka://127.0.0.1:{port}/srv")) {
        Ok(_) => panic!("connected to nothing"),
        Err(error) => error.to_string(),
    };
    assert!(error.contains("cannot connect to 127.0.0.1:"), "{error}");
}

#[test]
fn a_restart_while_transactions_are_held_reads_them_again_and_applies_each_once() {
    let broker = broker();
    topics(&broker);
    // Transactions 1..=30 complete; 31 has its markers and table a's event only.
    let mut first = Vec::new();
    for n in 1..=30 {
        let (markers, events) = transaction(n);
        first.extend([markers[0].clone()]);
        first.extend(events);
        first.push(markers[1].clone());
    }
    let (markers, events) = transaction(31);
    first.extend(markers);
    first.push(events[0].clone());
    broker.produce(&first).expect("first part");
    let dir = tempfile::tempdir().expect("data dir");
    let uri = uri(&broker, "");
    {
        let engine = open_engine(dir.path());
        let report = ingest(&engine, &uri).expect("first ingest");
        assert_eq!(report.stats.transactions_applied, 30);
        let durable = report.durable_position.expect("durable");
        assert!(durable.contains("srv.transaction/0=60"), "transaction 31's BEGIN is where the transaction topic resumes: {durable}");
    }
    let mut rest: Vec<KafkaRecord> = events[1..].to_vec();
    for n in 32..=40 {
        let (markers, events) = transaction(n);
        rest.push(markers[0].clone());
        rest.extend(events);
        rest.push(markers[1].clone());
    }
    broker.produce(&rest).expect("the rest");
    let engine = open_engine(dir.path());
    let report = ingest(&engine, &uri).expect("second ingest");
    assert_eq!(report.stats.transactions_applied, 10, "31 (read again from its first event) and 32..=40");
    assert_eq!((rows(&engine, "s.a").len(), rows(&engine, "s.b").len()), (40, 80));
}

#[test]
fn past_the_memory_budget_partitions_that_run_ahead_are_paused_and_a_stuck_transaction_is_named() {
    let broker = broker();
    topics(&broker);
    // 1,500 transactions whose table-a events arrive while table b's never do: the
    // held bytes pass a 1 MB budget, table a's partitions are paused, and the first
    // transaction times out naming the budget.
    let (mut markers, mut a_events) = (Vec::new(), Vec::new());
    for n in 1..=1500 {
        let (m, e) = transaction(n);
        markers.extend(m);
        a_events.extend(e.into_iter().filter(|r| r.topic == "srv.s.a"));
    }
    broker.produce(&markers).expect("markers");
    broker.produce(&a_events).expect("table a");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let uri = uri(&broker, "?memory_budget_mb=1&transaction_timeout_s=2");
    let result = ingest_uri(&engine, &uri, SinkOptions::default(), StopWhen::idle_for(Duration::from_secs(10)));
    let error = result.expect_err("stuck").to_string();
    assert!(error.contains("transaction 1 cannot complete: its END says 3 events, 1 arrived"), "{error}");
    assert!(error.contains("(memory_budget_mb=1), so partitions running ahead are paused"), "{error}");
    assert!(rows(&engine, "s.a").is_empty());
}

#[test]
fn over_tls_records_are_fetched_and_offsets_committed_and_an_untrusted_certificate_is_a_clear_error() {
    let broker = LocalKafkaBroker::start_tls().unwrap_or_else(|e| panic!("{e}"));
    topics(&broker);
    produce_transaction(&broker, 1);
    let ca = broker.tls_ca().expect("the broker's certificate");
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    // The system's roots do not know the broker's self-signed certificate.
    let error = ingest(&engine, &uri(&broker, "?tls=true")).expect_err("an untrusted certificate").to_string();
    assert!(error.contains("cannot connect") && error.to_lowercase().contains("certificate"), "{error}");
    let report = ingest(&engine, &uri(&broker, &format!("?tls_ca={}", ca.display()))).expect("ingest over TLS");
    assert_eq!(report.stats.transactions_applied, 1);
    assert_eq!(rows(&engine, "s.b").len(), 2);
    let committed = broker.committed_offsets("retina-srv").expect("committed offsets over TLS");
    assert_eq!(committed_sums(&committed), [("srv.s.a".to_string(), 1), ("srv.s.b".into(), 2), ("srv.transaction".into(), 2)], "{committed:?}");
}

/// An ingest with the right password. tansu 0.6 now and then refuses a correct
/// SCRAM proof ("invalid proof", about one handshake in four here, a different one
/// each time); the ingest is exactly-once, so it is run again then, up to five times.
fn ingest_over_sasl(engine: &Engine, uri: &str) -> retina_cdc::ingest::IngestReport {
    let mut tries = 0;
    loop {
        tries += 1;
        match ingest(engine, uri) {
            Ok(report) => return report,
            Err(error) if tries < 5 && error.to_string().contains("invalid proof") => continue,
            Err(error) => panic!("ingest over SASL (try {tries}): {error}"),
        }
    }
}

#[test]
fn over_sasl_scram_records_are_fetched_and_offsets_committed_and_a_wrong_password_is_a_clear_error() {
    let topics = [("srv.transaction", 1), ("srv.s.a", 3), ("srv.s.b", 2)];
    let broker = LocalKafkaBroker::start_sasl("SCRAM-SHA-256", "alice", "s3cret", &topics).unwrap_or_else(|e| panic!("{e}"));
    for n in 1..=3 {
        produce_transaction(&broker, n);
    }
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let error = ingest(&engine, &uri(&broker, "?sasl_mechanism=SCRAM-SHA-256&sasl_username=alice&sasl_password=wrong-one")).expect_err("a wrong password").to_string();
    assert!(error.contains("cannot connect") && error.contains("SASL"), "{error}");
    assert!(!error.contains("wrong-one"), "the password is not shown: {error}");
    let report = ingest_over_sasl(&engine, &uri(&broker, "?sasl_mechanism=SCRAM-SHA-256&sasl_username=alice&sasl_password=s3cret"));
    assert_eq!(report.stats.transactions_applied, 3);
    assert_eq!((rows(&engine, "s.a").len(), rows(&engine, "s.b").len()), (3, 6));
    let committed = broker.committed_offsets("retina-srv").expect("committed offsets over SASL");
    assert_eq!(committed_sums(&committed), [("srv.s.a".to_string(), 3), ("srv.s.b".into(), 6), ("srv.transaction".into(), 6)], "{committed:?}");

    // SCRAM-SHA-512 too.
    let broker = LocalKafkaBroker::start_sasl("SCRAM-SHA-512", "bob", "pa55", &topics).unwrap_or_else(|e| panic!("{e}"));
    produce_transaction(&broker, 1);
    let dir = tempfile::tempdir().expect("data dir");
    let engine = open_engine(dir.path());
    let report = ingest_over_sasl(&engine, &uri(&broker, "?sasl_mechanism=SCRAM-SHA-512&sasl_username=bob&sasl_password=pa55"));
    assert_eq!(report.stats.transactions_applied, 1);
}

/// Waits until `topic`'s partition 0 starts at `offset` on the broker (its retention
/// has run), as kafka-python reads it.
fn wait_for_log_start(broker: &LocalKafkaBroker, topic: &str, offset: i64, within: Duration) {
    let deadline = std::time::Instant::now() + within;
    loop {
        let earliest = broker.earliest_offsets(topic).expect("earliest offsets");
        if earliest.get(&0) == Some(&offset) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{topic} still starts at {earliest:?}, not {offset}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Ingests `uri` into `engine`, returning the report and the source's status detail.
fn ingest_with_status(engine: &Engine, uri: &str) -> Result<(retina_cdc::ingest::IngestReport, String), retina_cdc::CdcError> {
    let registry = SourceRegistry::new();
    let mut source = retina_cdc::ingest::open_source(uri)?;
    let options = DriveOptions {
        sink: retina_cdc::ingest::options_for_uri(uri, SinkOptions::default())?,
        stop: StopWhen::idle_for(Duration::from_millis(1500)),
        status: Some(registry.clone()),
    };
    let report = drive(engine, uri, source.as_mut(), options)?;
    let detail = registry.list().into_iter().next().and_then(|status| status.detail).unwrap_or_default();
    Ok((report, detail))
}

#[test]
fn records_removed_by_retention_before_they_were_applied_are_a_clear_error_unless_the_gap_is_accepted() {
    let broker = LocalKafkaBroker::start_with_retention(Duration::from_millis(300)).unwrap_or_else(|e| panic!("{e}"));
    let retention_ms = 15_000;
    broker
        .create_topic_with_config("srv.s.a", 1, &[("cleanup.policy", "delete"), ("retention.ms", &retention_ms.to_string())])
        .expect("topic with retention");
    let now_ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64;
    let hour_ms = 3_600_000;
    let records = |ids: std::ops::RangeInclusive<i64>| ids.map(|n| change("a", "c", n, Some("x"), None)).collect::<Vec<_>>();
    // Offsets 0..=4 are past retention when produced; 5..=9 pass it 15 s from now.
    broker.produce_at(&records(1..=5), now_ms - hour_ms).expect("old records");
    broker.produce_at(&records(6..=10), now_ms).expect("recent records");
    wait_for_log_start(&broker, "srv.s.a", 5, Duration::from_secs(10));

    // A new mirror would miss offsets 0..=4.
    let dir = tempfile::tempdir().expect("data dir");
    let uri = uri(&broker, "");
    {
        let engine = open_engine(dir.path());
        let error = ingest(&engine, &uri).expect_err("a retention gap at the start").to_string();
        assert!(
            error.contains("topic srv.s.a partition 0: a new mirror starts at offset 0, but the broker's log now starts at 5: records 0..4 are gone"),
            "{error}"
        );
        assert!(error.contains("allow_retention_gap=true"), "{error}");
        assert!(engine.table_id("s.a").is_none(), "nothing was applied");
        // Accepting the gap starts where the log now starts, and the status says so.
        let (report, detail) = ingest_with_status(&engine, &format!("{uri}?allow_retention_gap=true")).expect("ingest accepting the gap");
        assert_eq!(report.stats.transactions_applied, 5);
        assert!(detail.contains("topic srv.s.a partition 0 started at offset 5 (allow_retention_gap)"), "{detail}");
        let durable = report.durable_position.expect("durable position");
        assert!(durable.contains("srv.s.a/0=10"), "{durable}");
        assert_eq!(rows(&engine, "s.a").len(), 5);
    }

    // The mirror stops; offsets 10..=14 are produced and, with 5..=9, pass retention
    // before it restarts; 15..=19 stay.
    broker.produce_at(&records(11..=15), now_ms).expect("records the mirror misses");
    broker.produce_at(&records(16..=20), now_ms + hour_ms).expect("records that stay");
    wait_for_log_start(&broker, "srv.s.a", 15, Duration::from_millis(retention_ms as u64 + 15_000));
    let engine = open_engine(dir.path());
    let error = ingest(&engine, &uri).expect_err("a retention gap after the recorded position").to_string();
    assert!(
        error.contains("topic srv.s.a partition 0: the recorded position resumes at offset 10, but the broker's log now starts at 15: records 10..14 are gone"),
        "{error}"
    );
    assert_eq!(rows(&engine, "s.a").len(), 5, "the position did not move past the gap");
    let (report, _) = ingest_with_status(&engine, &format!("{uri}?allow_retention_gap=true")).expect("ingest accepting the gap");
    assert_eq!(report.stats.transactions_applied, 5);
    assert_eq!(rows(&engine, "s.a").len(), 10);
}
