//! `retina bench replay --source kafka`: the CH-benCHmark-like stream laid out as
//! Debezium on Kafka Connect writes it (a topic per table, `--partitions` each,
//! records keyed by primary key, a one-partition transaction topic), replayed by the
//! ingest driver `retina serve --source kafka://…` runs until every transaction is
//! visible and checkpointed. Without a broker address the benchmark starts its own
//! `tansu` broker. [`kafka_freshness`] is `retina bench freshness --source kafka`.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_cdc::debezium::{decode_line, EncoderOptions, Message};
use retina_cdc::error::{CdcError, CdcResult};
use retina_cdc::ingest::{drive, open_source, options_for_uri, DriveOptions, StopWhen};
use retina_cdc::sink::SinkOptions;
use retina_cdc::source::generator::{EncodedChunk, GeneratorSource};
use retina_cdc::source::{MessageSource, SourceEvent};
use retina_core::SourceRegistry;
use retina_test_support::LocalKafkaBroker;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use serde::Serialize;

use retina_workload::chbench::{schemas, ChBenchScale};

use crate::debezium_replay::{encoded_workload, freshness_of, freshness_stream, DebeziumReplayConfig, FreshnessConfig, FreshnessReport};

const PREFIX: &str = "bench";
/// How long the driver waits with nothing to read before the stream counts as
/// replayed; not part of the measured time.
const IDLE_EXIT: Duration = Duration::from_millis(500);

#[derive(Clone, Debug, Serialize)]
pub struct KafkaReplayReport {
    pub broker: String,
    pub topics: usize,
    pub partitions_per_topic: i32,
    pub row_changes: u64,
    pub messages: u64,
    pub transactions: u64,
    /// Records produced per second (the benchmark's producer, not Retina).
    pub produce_messages_per_s: f64,
    /// Broker to visible and checkpointed mirror transactions, per second.
    pub row_changes_per_s: f64,
    pub replay_seconds: f64,
    /// The most memory the reassembly held for incomplete transactions.
    pub held_bytes_peak: u64,
    pub shards: usize,
}

fn bench_error(reason: String) -> CdcError {
    CdcError::Source { source_name: "bench kafka".into(), reason }
}

/// One record to produce and where: (topic, key, value).
type Routed = (String, Option<String>, String);

/// Splits the encoded lines (`{"key":…,"value":…}`) into Kafka records: BEGIN/END to
/// the transaction topic, each event to its table's topic.
fn route(chunks: &[EncodedChunk]) -> CdcResult<Vec<Routed>> {
    chunks.iter().flat_map(|chunk| chunk.text.lines()).map(route_line).collect()
}

/// One encoded line as the record Kafka Connect would write for it.
fn route_line(line: &str) -> CdcResult<Routed> {
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        key: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow)]
        value: &'a serde_json::value::RawValue,
    }
    let parsed: Line<'_> = serde_json::from_str(line).map_err(|e| bench_error(format!("encoded line: {e}")))?;
    let value = parsed.value.get().to_string();
    let key = parsed.key.map(|k| k.get().to_string()).filter(|k| k != "null");
    Ok((topic_of(&value)?, key, value))
}

/// The topic of an encoded value: its table's for a change event, else the
/// transaction topic. The table is read off the generator's own source block when
/// it is there (cheap enough for a live producer), else by decoding the value.
fn topic_of(value: &str) -> CdcResult<String> {
    const SOURCE: &str = r#""source":{"connector":"postgresql","name":"retina-generator","db":"retina","schema":""#;
    let fast = value.rfind(SOURCE).and_then(|at| {
        let (schema, rest) = value[at + SOURCE.len()..].split_once('"')?;
        let (table, _) = rest.strip_prefix(r#","table":""#)?.split_once('"')?;
        Some(format!("{PREFIX}.{schema}.{table}"))
    });
    if let Some(topic) = fast {
        return Ok(topic);
    }
    Ok(match decode_line(value).map_err(|e| bench_error(format!("encoded line: {e}")))? {
        Message::Change(event) => format!("{PREFIX}.{}", event.table),
        _ => format!("{PREFIX}.transaction"),
    })
}

/// The partition a keyed record goes to (as Kafka's partitioner does, with another
/// hash); the transaction topic has one.
fn partition_of(topic: &str, key: Option<&str>, partitions: i32) -> i32 {
    match key {
        Some(key) if !topic.ends_with(".transaction") => {
            let mut hasher = std::collections::hash_map::DefaultHasher::new();
            key.hash(&mut hasher);
            (hasher.finish() % partitions as u64) as i32
        }
        _ => 0,
    }
}

fn record(key: Option<&String>, value: &str) -> Record {
    Record {
        key: key.map(|k| k.clone().into_bytes()),
        value: Some(value.as_bytes().to_vec()),
        headers: BTreeMap::new(),
        timestamp: chrono_now(),
    }
}

/// Creates the topics and produces `records`, each keyed record to the partition
/// its key hashes to (as Kafka's partitioner does, with another hash).
fn produce(runtime: &tokio::runtime::Runtime, broker: &str, records: &[Routed], partitions: i32, create: bool) -> CdcResult<()> {
    runtime.block_on(async {
        let client = ClientBuilder::new(vec![broker.to_string()]).build().await.map_err(|e| bench_error(format!("connect {broker}: {e}")))?;
        let mut by_partition: BTreeMap<(String, i32), Vec<Record>> = BTreeMap::new();
        for (topic, key, value) in records {
            let partition = partition_of(topic, key.as_deref(), partitions);
            by_partition.entry((topic.clone(), partition)).or_default().push(record(key.as_ref(), value));
        }
        if create {
            let topics: std::collections::BTreeSet<&String> = by_partition.keys().map(|(t, _)| t).collect();
            create_topics(&client, topics, partitions).await?;
        }
        for ((topic, partition), records) in by_partition {
            let partition_client = client
                .partition_client(topic.as_str(), partition, UnknownTopicHandling::Retry)
                .await
                .map_err(|e| bench_error(format!("{topic}/{partition}: {e}")))?;
            let mut batch = Vec::new();
            let mut bytes = 0;
            for record in records {
                bytes += record.approximate_size();
                batch.push(record);
                if bytes > 512 << 10 {
                    partition_client.produce(std::mem::take(&mut batch), Compression::NoCompression).await.map_err(|e| bench_error(format!("produce: {e}")))?;
                    bytes = 0;
                }
            }
            if !batch.is_empty() {
                partition_client.produce(batch, Compression::NoCompression).await.map_err(|e| bench_error(format!("produce: {e}")))?;
            }
        }
        Ok(())
    })
}

async fn create_topics(client: &rskafka::client::Client, topics: impl IntoIterator<Item = &String>, partitions: i32) -> CdcResult<()> {
    let controller = client.controller_client().map_err(|e| bench_error(format!("controller: {e}")))?;
    for topic in topics {
        let count = if topic.ends_with(".transaction") { 1 } else { partitions };
        controller.create_topic(topic.as_str(), count, 1, 5_000).await.map_err(|e| bench_error(format!("create topic {topic}: {e}")))?;
    }
    Ok(())
}

fn chrono_now() -> rskafka::chrono::DateTime<rskafka::chrono::Utc> {
    rskafka::chrono::Utc::now()
}

/// Produces the initial load and replays it (untimed), then produces the changes and
/// times their replay through the ingest driver until visible and checkpointed.
pub fn replay_kafka(config: &DebeziumReplayConfig, broker: Option<&str>, partitions: i32, data_dir: &std::path::Path) -> CdcResult<KafkaReplayReport> {
    let own = if broker.is_none() { Some(LocalKafkaBroker::start().map_err(|e| bench_error(e.to_string()))?) } else { None };
    let broker = broker.map(str::to_string).or(own.as_ref().map(LocalKafkaBroker::bootstrap)).unwrap_or_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| bench_error(format!("runtime: {e}")))?;
    let (engine, load, changes) = encoded_workload(config, data_dir)?;
    let uri = format!("kafka://{broker}/{PREFIX}");
    let run = |stop: StopWhen, registry: Option<SourceRegistry>| {
        let mut source = open_source(&uri)?;
        let options = DriveOptions { sink: options_for_uri(&uri, SinkOptions::default())?, stop, status: registry };
        drive(&engine, &uri, source.as_mut(), options)
    };
    produce(&runtime, &broker, &route(&load)?, partitions, true)?;
    run(StopWhen::idle_for(IDLE_EXIT), None)?;

    let records = route(&changes)?;
    let topics = records.iter().map(|(t, _, _)| t.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    let start = Instant::now();
    produce(&runtime, &broker, &records, partitions, false)?;
    let produce_messages_per_s = records.len() as f64 / start.elapsed().as_secs_f64();

    let registry = SourceRegistry::new();
    let start = Instant::now();
    let replayed = run(StopWhen::idle_for(IDLE_EXIT), Some(registry.clone()))?;
    let replay_seconds = start.elapsed().saturating_sub(IDLE_EXIT).as_secs_f64();
    let held_bytes_peak = registry.list().first().and_then(|s| s.held_bytes_peak).unwrap_or(0);
    drop(own);
    let row_changes: u64 = changes.iter().map(|c| c.row_changes).sum();
    if replayed.stats.row_changes_applied != row_changes {
        return Err(bench_error(format!("replayed {} row changes of {row_changes} produced", replayed.stats.row_changes_applied)));
    }
    Ok(KafkaReplayReport {
        broker,
        topics,
        partitions_per_topic: partitions,
        row_changes,
        messages: records.len() as u64,
        transactions: replayed.stats.transactions_applied,
        produce_messages_per_s,
        row_changes_per_s: row_changes as f64 / replay_seconds,
        replay_seconds,
        held_bytes_peak,
        shards: engine.config().shards,
    })
}

/// `retina bench freshness --source kafka`: the generator's stream at a steady rate,
/// produced live to the broker as Kafka Connect lays it out, read back by the ingest
/// driver `retina serve --source kafka://` runs, with freshness measured as for the
/// in-process stream (`now − max(district.fresh_ts)`, stamped when generated): so it
/// includes the producer, the broker, fetching and reassembly.
pub fn kafka_freshness(config: &FreshnessConfig, broker: Option<&str>, partitions: i32, data_dir: &std::path::Path) -> CdcResult<FreshnessReport> {
    let own = if broker.is_none() { Some(LocalKafkaBroker::start().map_err(|e| bench_error(e.to_string()))?) } else { None };
    let broker = broker.map(str::to_string).or(own.as_ref().map(LocalKafkaBroker::bootstrap)).unwrap_or_default();
    let spec = freshness_stream(config);
    let load_rows = ChBenchScale::for_base_rows(config.base_rows).base_rows();
    let report = freshness_of(config, data_dir, move |engine| {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| bench_error(format!("runtime: {e}")))?;
        let client = runtime
            .block_on(ClientBuilder::new(vec![broker.clone()]).build())
            .map_err(|e| bench_error(format!("connect {broker}: {e}")))?;
        let mut topics: Vec<String> = schemas().iter().map(|t| format!("{PREFIX}.{}", t.name())).collect();
        topics.push(format!("{PREFIX}.transaction"));
        runtime.block_on(create_topics(&client, &topics, partitions))?;
        // Changes start once the mirror has the whole load, so none waits behind it.
        let gate_engine = Arc::clone(engine);
        let gate = Box::new(move || gate_engine.stats().row_changes >= load_rows);
        let source = GeneratorSource::start_with(spec, EncoderOptions::kafka_connect_default(), gate)?;
        let done = Arc::new(AtomicBool::new(false));
        let producer = {
            let done = Arc::clone(&done);
            std::thread::Builder::new()
                .name("bench-kafka-producer".into())
                .spawn(move || {
                    let produced = produce_live(&runtime, &client, source, partitions);
                    done.store(true, SeqCst);
                    produced
                })
                .map_err(|e| bench_error(format!("producer thread: {e}")))?
        };
        // Stop once the producer is done and everything it produced is applied.
        let stop = Arc::new(AtomicBool::new(false));
        let stopper = {
            let (stop, done, engine) = (Arc::clone(&stop), Arc::clone(&done), Arc::clone(engine));
            std::thread::spawn(move || {
                let mut last = (u64::MAX, Instant::now());
                while !(done.load(SeqCst) && last.1.elapsed() >= IDLE_EXIT) {
                    let applied = engine.stats().row_changes;
                    if applied != last.0 {
                        last = (applied, Instant::now());
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                stop.store(true, SeqCst);
            })
        };
        let uri = format!("kafka://{broker}/{PREFIX}");
        let mut kafka = open_source(&uri)?;
        let options = DriveOptions { sink: options_for_uri(&uri, SinkOptions::default())?, stop: StopWhen::on_flag(Arc::clone(&stop)), status: None };
        let report = drive(engine, &uri, kafka.as_mut(), options);
        stop.store(true, SeqCst);
        done.store(true, SeqCst);
        let _ = stopper.join();
        let produced = producer.join().map_err(|_| bench_error("the producer thread panicked".into()))?;
        produced?;
        report
    });
    drop(own);
    report
}

/// Reads `source`'s lines and produces each as its Kafka record, sending what has
/// accumulated whenever the generator pauses (or every 2,000 records), so records
/// wait for no batch at the set rate.
fn produce_live(runtime: &tokio::runtime::Runtime, client: &rskafka::client::Client, mut source: GeneratorSource, partitions: i32) -> CdcResult<()> {
    let mut clients: BTreeMap<(String, i32), Arc<rskafka::client::partition::PartitionClient>> = BTreeMap::new();
    let mut pending: BTreeMap<(String, i32), Vec<Record>> = BTreeMap::new();
    let mut count = 0usize;
    let mut line = String::new();
    loop {
        let event = source.next(&mut line)?;
        if let SourceEvent::Message(_) = event {
            let (topic, key, value) = route_line(&line)?;
            let partition = partition_of(&topic, key.as_deref(), partitions);
            pending.entry((topic, partition)).or_default().push(record(key.as_ref(), &value));
            count += 1;
            if count < 2_000 {
                continue;
            }
        }
        runtime.block_on(async {
            let mut sends = Vec::new();
            for ((topic, partition), records) in std::mem::take(&mut pending) {
                let client = match clients.get(&(topic.clone(), partition)) {
                    Some(client) => Arc::clone(client),
                    None => {
                        let made = client
                            .partition_client(topic.as_str(), partition, UnknownTopicHandling::Retry)
                            .await
                            .map_err(|e| bench_error(format!("{topic}/{partition}: {e}")))?;
                        Arc::clone(clients.entry((topic, partition)).or_insert(Arc::new(made)))
                    }
                };
                sends.push(async move { client.produce(records, Compression::NoCompression).await });
            }
            for result in futures::future::join_all(sends).await {
                result.map_err(|e| bench_error(format!("produce: {e}")))?;
            }
            Ok::<_, CdcError>(())
        })?;
        count = 0;
        if let SourceEvent::End = event {
            return Ok(());
        }
    }
}
