//! `retina bench replay --source kafka`: the CH-benCHmark-like stream laid out as
//! Debezium on Kafka Connect writes it (a topic per table, `--partitions` each,
//! records keyed by primary key, a one-partition transaction topic), replayed by the
//! ingest driver `retina serve --source kafka://…` runs until every transaction is
//! visible and checkpointed. Without a broker address the benchmark starts its own
//! `tansu` broker.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use retina_cdc::debezium::{decode_line, Message};
use retina_cdc::error::{CdcError, CdcResult};
use retina_cdc::ingest::{drive, open_source, options_for_uri, DriveOptions, StopWhen};
use retina_cdc::sink::SinkOptions;
use retina_cdc::source::generator::EncodedChunk;
use retina_core::SourceRegistry;
use retina_test_support::LocalKafkaBroker;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use serde::Serialize;

use crate::debezium_replay::{encoded_workload, DebeziumReplayConfig};

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
    #[derive(serde::Deserialize)]
    struct Line<'a> {
        #[serde(borrow)]
        key: Option<&'a serde_json::value::RawValue>,
        #[serde(borrow)]
        value: &'a serde_json::value::RawValue,
    }
    let mut out = Vec::new();
    for chunk in chunks {
        for line in chunk.text.lines() {
            let parsed: Line<'_> = serde_json::from_str(line).map_err(|e| bench_error(format!("encoded line: {e}")))?;
            let value = parsed.value.get().to_string();
            let key = parsed.key.map(|k| k.get().to_string()).filter(|k| k != "null");
            let topic = match decode_line(&value).map_err(|e| bench_error(format!("encoded line: {e}")))? {
                Message::Change(event) => format!("{PREFIX}.{}", event.table),
                _ => format!("{PREFIX}.transaction"),
            };
            out.push((topic, key, value));
        }
    }
    Ok(out)
}

/// Creates the topics and produces `records`, each keyed record to the partition
/// its key hashes to (as Kafka's partitioner does, with another hash).
fn produce(runtime: &tokio::runtime::Runtime, broker: &str, records: &[Routed], partitions: i32, create: bool) -> CdcResult<()> {
    runtime.block_on(async {
        let client = ClientBuilder::new(vec![broker.to_string()]).build().await.map_err(|e| bench_error(format!("connect {broker}: {e}")))?;
        let mut by_partition: BTreeMap<(String, i32), Vec<Record>> = BTreeMap::new();
        for (topic, key, value) in records {
            let partition = match key {
                Some(key) if !topic.ends_with(".transaction") => {
                    let mut hasher = std::collections::hash_map::DefaultHasher::new();
                    key.hash(&mut hasher);
                    (hasher.finish() % partitions as u64) as i32
                }
                _ => 0,
            };
            let record = Record {
                key: key.as_ref().map(|k| k.clone().into_bytes()),
                value: Some(value.clone().into_bytes()),
                headers: BTreeMap::new(),
                timestamp: chrono_now(),
            };
            by_partition.entry((topic.clone(), partition)).or_default().push(record);
        }
        if create {
            let controller = client.controller_client().map_err(|e| bench_error(format!("controller: {e}")))?;
            let topics: std::collections::BTreeSet<&String> = by_partition.keys().map(|(t, _)| t).collect();
            for topic in topics {
                let count = if topic.ends_with(".transaction") { 1 } else { partitions };
                controller.create_topic(topic.as_str(), count, 1, 5_000).await.map_err(|e| bench_error(format!("create topic {topic}: {e}")))?;
            }
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
