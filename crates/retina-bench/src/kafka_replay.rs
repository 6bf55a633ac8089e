//! `retina bench replay --source kafka`: the CH-benCHmark-like stream laid out as
//! Debezium on Kafka Connect writes it (a topic per table, `--partitions` each,
//! records keyed by primary key, a one-partition transaction topic), replayed by the
//! ingest driver `retina serve --source kafka://…` runs until every transaction is
//! visible and checkpointed. Without a broker address the benchmark starts its own
//! Apache Kafka broker. [`kafka_freshness`] is `retina bench freshness --source kafka`.

use std::collections::{BTreeMap, VecDeque};
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

use crate::measure::{cpu_seconds_of, process_cpu_seconds};
use crate::debezium_replay::{encoded_workload, freshness_of, freshness_stream, DebeziumReplayConfig, FreshnessConfig, FreshnessReport};

const PREFIX: &str = "bench";
/// Records per produce request stop growing past this many bytes.
const MAX_REQUEST_BYTES: usize = 512 << 10;
/// How long the driver waits with nothing to read before the stream counts as
/// replayed; not part of the measured time.
const IDLE_EXIT: Duration = Duration::from_millis(500);
/// Runs of the source a phase may take before its missing changes are an error.
const MAX_IDLE_RUNS: u32 = 20;

/// Where the Kafka benchmarks' stream goes and how the source reads it.
#[derive(Clone, Debug)]
pub struct KafkaBenchConfig {
    /// A running broker `HOST:PORT`; `None`: the benchmark starts its own Apache Kafka.
    pub broker: Option<String>,
    /// Partitions of each table's topic.
    pub partitions: i32,
    /// The `kafka://` URI's options (`fetch_wait_ms=` matters with brokers that
    /// answer a waiting fetch when its wait is over, not when a record arrives).
    pub source_options: Option<String>,
}

impl KafkaBenchConfig {
    /// The broker (started when none is given), its address and the source URI.
    fn start(&self) -> CdcResult<(Option<LocalKafkaBroker>, String, String)> {
        let own = match &self.broker {
            None => Some(LocalKafkaBroker::start().map_err(|e| bench_error(e.to_string()))?),
            Some(_) => None,
        };
        let broker = self.broker.clone().or(own.as_ref().map(LocalKafkaBroker::bootstrap)).unwrap_or_default();
        let uri = match self.source_options.as_deref().filter(|o| !o.is_empty()) {
            Some(options) => format!("kafka://{broker}/{PREFIX}?{options}"),
            None => format!("kafka://{broker}/{PREFIX}"),
        };
        Ok((own, broker, uri))
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct KafkaReplayReport {
    pub broker: String,
    /// The source URI the replay read (its options included).
    pub source: String,
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
    /// The initial load (untimed before the changes): its row changes, and how long
    /// its replay took from the broker to applied, in transactions of 4,096 inserts
    /// spread over the tables' topics, so each arrives in pieces out of order.
    pub load_row_changes: u64,
    pub load_seconds: f64,
    /// The same records fetched again after the replay by a bare client (rskafka, one
    /// task per partition, as the source fetches), with nothing applied: the ceiling
    /// the broker and record decoding set on this machine.
    pub fetch_only_seconds: f64,
    pub fetch_only_records_per_s: f64,
    /// CPU seconds this process used during the replay: the mirror's (the records
    /// were produced before it started).
    pub replay_cpu_seconds: Option<f64>,
    /// CPU seconds the broker used during the replay, when the benchmark started it
    /// (not with `--kafka`): on a shared machine, what the mirror did not get.
    pub broker_replay_cpu_seconds: Option<f64>,
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
    match split_keyed(line) {
        Some((key, value)) => Ok((topic_of(value)?, key.map(str::to_string), value.to_string())),
        None => route_parsed(line),
    }
}

/// [`route_line`] by parsing the line.
fn route_parsed(line: &str) -> CdcResult<Routed> {
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
    Ok((topic_decoded(&value)?, key, value))
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
    match fast {
        Some(topic) => Ok(topic),
        None => topic_decoded(value),
    }
}

/// [`topic_of`] by decoding the value.
fn topic_decoded(value: &str) -> CdcResult<String> {
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

fn record(key: Option<String>, value: String) -> Record {
    Record {
        key: key.map(String::into_bytes),
        value: Some(value.into_bytes()),
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
            by_partition.entry((topic.clone(), partition)).or_default().push(record(key.clone(), value.clone()));
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
                if bytes > MAX_REQUEST_BYTES {
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
pub fn replay_kafka(config: &DebeziumReplayConfig, kafka: &KafkaBenchConfig, data_dir: &std::path::Path) -> CdcResult<KafkaReplayReport> {
    let (own, broker, uri) = kafka.start()?;
    let partitions = kafka.partitions;
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().map_err(|e| bench_error(format!("runtime: {e}")))?;
    let (engine, load, changes) = encoded_workload(config, data_dir)?;
    let run = |stop: StopWhen, registry: Option<SourceRegistry>| {
        let mut source = open_source(&uri)?;
        let options = DriveOptions { sink: options_for_uri(&uri, SinkOptions::default())?, stop, status: registry };
        drive(&engine, &uri, source.as_mut(), options)
    };
    // Runs the source until `expected` row changes are applied: a run ends after
    // IDLE_EXIT without a record, which a busy broker's first fetch can take, and
    // the next run resumes where the last one's durable position is. Gives the
    // row changes and transactions applied and the idle windows waited.
    let run_until = |expected: u64, registry: Option<SourceRegistry>| -> CdcResult<(u64, u64, u32)> {
        let (mut rows, mut transactions, mut windows) = (0, 0, 0);
        while rows < expected && windows < MAX_IDLE_RUNS {
            let report = run(StopWhen::idle_for(IDLE_EXIT), registry.clone())?;
            rows += report.stats.row_changes_applied;
            transactions += report.stats.transactions_applied;
            windows += 1;
        }
        Ok((rows, transactions, windows))
    };
    produce(&runtime, &broker, &route(&load)?, partitions, true)?;
    let load_row_changes: u64 = load.iter().map(|c| c.row_changes).sum();
    let load_started = Instant::now();
    let (loaded, _, windows) = run_until(load_row_changes, None)?;
    let load_seconds = load_started.elapsed().saturating_sub(IDLE_EXIT * windows).as_secs_f64();
    if loaded != load_row_changes {
        return Err(bench_error(format!("loaded {loaded} row changes of {load_row_changes} produced")));
    }

    let records = route(&changes)?;
    let topics = records.iter().map(|(t, _, _)| t.as_str()).collect::<std::collections::BTreeSet<_>>().len();
    let client = runtime.block_on(ClientBuilder::new(vec![broker.clone()]).build()).map_err(|e| bench_error(format!("connect {broker}: {e}")))?;
    let partition_list: Vec<(String, i32)> = records
        .iter()
        .map(|(topic, _, _)| topic.clone())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .flat_map(|topic| {
            let count = if topic.ends_with(".transaction") { 1 } else { partitions };
            (0..count).map(move |p| (topic.clone(), p))
        })
        .collect();
    let starts = runtime.block_on(latest_offsets(&client, &partition_list))?;
    let start = Instant::now();
    produce(&runtime, &broker, &records, partitions, false)?;
    let produce_messages_per_s = records.len() as f64 / start.elapsed().as_secs_f64();

    let registry = SourceRegistry::new();
    let broker_pid = own.as_ref().map(|broker| broker.pid().to_string());
    let broker_cpu = || broker_pid.as_deref().and_then(cpu_seconds_of);
    let cpu_before = (process_cpu_seconds(), broker_cpu());
    let start = Instant::now();
    let row_changes: u64 = changes.iter().map(|c| c.row_changes).sum();
    let (replayed, transactions, windows) = run_until(row_changes, Some(registry.clone()))?;
    let replay_seconds = start.elapsed().saturating_sub(IDLE_EXIT * windows).as_secs_f64();
    let replay_cpu_seconds = process_cpu_seconds().zip(cpu_before.0).map(|(end, start)| end - start);
    let broker_replay_cpu_seconds = broker_cpu().zip(cpu_before.1).map(|(end, start)| end - start);
    let held_bytes_peak = registry.list().first().and_then(|s| s.held_bytes_peak).unwrap_or(0);
    let started = Instant::now();
    let fetched = runtime.block_on(fetch_only(&client, &partition_list, &starts))?;
    let fetch_only_seconds = started.elapsed().as_secs_f64();
    if fetched != records.len() as u64 {
        return Err(bench_error(format!("the bare fetch read {fetched} records of {}", records.len())));
    }
    drop(own);
    if replayed != row_changes {
        return Err(bench_error(format!("replayed {replayed} row changes of {row_changes} produced")));
    }
    Ok(KafkaReplayReport {
        broker,
        source: retina_cdc::source::uri::redacted(&uri),
        topics,
        partitions_per_topic: partitions,
        row_changes,
        messages: records.len() as u64,
        transactions,
        produce_messages_per_s,
        row_changes_per_s: row_changes as f64 / replay_seconds,
        replay_seconds,
        held_bytes_peak,
        shards: engine.config().shards,
        load_row_changes,
        load_seconds,
        fetch_only_seconds,
        fetch_only_records_per_s: fetched as f64 / fetch_only_seconds,
        replay_cpu_seconds,
        broker_replay_cpu_seconds,
    })
}

/// Each partition's next offset.
async fn latest_offsets(client: &rskafka::client::Client, partitions: &[(String, i32)]) -> CdcResult<Vec<i64>> {
    let mut out = Vec::with_capacity(partitions.len());
    for (topic, partition) in partitions {
        let partition_client = client
            .partition_client(topic.as_str(), *partition, UnknownTopicHandling::Retry)
            .await
            .map_err(|e| bench_error(format!("{topic}/{partition}: {e}")))?;
        out.push(high_watermark(&partition_client).await.map_err(|e| bench_error(format!("{topic}/{partition}: {e}")))?);
    }
    Ok(out)
}

/// Fetches every partition from `starts` to its end (4 MB a fetch, as the source
/// asks), all partitions at once; the records read.
/// The partition's next offset, as a fetch reports it. Not `ListOffsets` (latest):
/// tansu 0.6's in-memory storage answers that with the stored batch modified last,
/// which is an earlier batch when two were stored within its clock's resolution (a
/// run with `--seed 7` counted 52 records of the load as changes).
async fn high_watermark(partition_client: &rskafka::client::partition::PartitionClient) -> Result<i64, rskafka::client::error::Error> {
    partition_client.fetch_records(0, 1..2, 0).await.map(|(_, high_watermark)| high_watermark)
}

async fn fetch_only(client: &rskafka::client::Client, partitions: &[(String, i32)], starts: &[i64]) -> CdcResult<u64> {
    let mut tasks = tokio::task::JoinSet::new();
    for ((topic, partition), start) in partitions.iter().zip(starts) {
        let partition_client = client
            .partition_client(topic.as_str(), *partition, UnknownTopicHandling::Retry)
            .await
            .map_err(|e| bench_error(format!("{topic}/{partition}: {e}")))?;
        let mut offset = *start;
        tasks.spawn(async move {
            let end = high_watermark(&partition_client).await.map_err(|e| e.to_string())?;
            let mut records = 0u64;
            while offset < end {
                let (batch, _) = partition_client.fetch_records(offset, 1..(4 << 20), 0).await.map_err(|e| e.to_string())?;
                if batch.is_empty() {
                    return Err(format!("no record at offset {offset} below the end {end}"));
                }
                // tansu 0.6 may answer from a batch that starts before `offset`.
                let fresh = batch.iter().filter(|r| r.offset >= offset).count() as u64;
                records += fresh;
                offset = batch.iter().map(|r| r.offset + 1).max().unwrap_or(offset).max(offset);
            }
            Ok::<u64, String>(records)
        });
    }
    let mut total = 0;
    while let Some(done) = tasks.join_next().await {
        total += done.map_err(|e| bench_error(format!("fetch task: {e}")))?.map_err(|e| bench_error(format!("fetch: {e}")))?;
    }
    Ok(total)
}

/// `retina bench freshness --source kafka`: the generator's stream at a steady rate,
/// produced live to the broker as Kafka Connect lays it out, read back by the ingest
/// driver `retina serve --source kafka://` runs, with freshness measured as for the
/// in-process stream (`now − max(district.fresh_ts)`, stamped when generated): so it
/// includes the producer, the broker, fetching and reassembly.
pub fn kafka_freshness(config: &FreshnessConfig, kafka: &KafkaBenchConfig, data_dir: &std::path::Path) -> CdcResult<FreshnessReport> {
    let (own, broker, uri) = kafka.start()?;
    let partitions = kafka.partitions;
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
        // Opened before the producer starts: every early return below stops it.
        let mut kafka = open_source(&uri)?;
        let sink = options_for_uri(&uri, SinkOptions::default())?;
        // Changes start once the mirror has the whole load, so none waits behind it.
        let gate_engine = Arc::clone(engine);
        let gate = Box::new(move || gate_engine.stats().row_changes >= load_rows);
        let source = GeneratorSource::start_with(spec, EncoderOptions::kafka_connect_default(), gate)?;
        let done = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let producer = {
            let (done, stop) = (Arc::clone(&done), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("bench-kafka-producer".into())
                .spawn(move || {
                    let produced = produce_live(&runtime, &client, source, partitions, &stop);
                    done.store(true, SeqCst);
                    produced
                })
                .map_err(|e| bench_error(format!("producer thread: {e}")))?
        };
        let options = DriveOptions { sink, stop: StopWhen::on_flag(Arc::clone(&stop)), status: None };
        // Stop once the producer is done and everything it produced is applied.
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
        let report = drive(engine, &uri, kafka.as_mut(), options);
        stop.store(true, SeqCst);
        done.store(true, SeqCst);
        let _ = stopper.join();
        let produced = producer.join().map_err(|_| bench_error("the producer thread panicked".into()))?;
        let report = report?;
        produced?;
        Ok(report)
    });
    drop(own);
    report
}

/// Reads `source`'s lines and produces each as its Kafka record. Each partition has
/// its own sender task that sends whatever has queued for it as one request as soon
/// as the previous one is acknowledged: records wait for no timer, partitions do not
/// wait for each other, and each partition's records stay in order (as Kafka
/// Connect's producer keeps them).
fn produce_live(
    runtime: &tokio::runtime::Runtime,
    client: &rskafka::client::Client,
    mut source: GeneratorSource,
    partitions: i32,
    stop: &AtomicBool,
) -> CdcResult<()> {
    type Queue = tokio::sync::mpsc::UnboundedSender<Vec<Record>>;
    let mut senders: BTreeMap<(String, i32), Queue> = BTreeMap::new();
    let mut tasks = Vec::new();
    let mut pending: BTreeMap<(String, i32), Vec<Record>> = BTreeMap::new();
    let mut line = String::new();
    let outcome = loop {
        if stop.load(SeqCst) {
            break Ok(()); // the reading side ended first (an error, reported by it)
        }
        let event = match source.next(&mut line) {
            Ok(event) => event,
            Err(error) => break Err(error),
        };
        if let SourceEvent::Message(_) = event {
            let (topic, key, value) = match route_line(&line) {
                Ok(routed) => routed,
                Err(error) => break Err(error),
            };
            let partition = partition_of(&topic, key.as_deref(), partitions);
            pending.entry((topic, partition)).or_default().push(record(key, value));
            if pending.values().map(Vec::len).sum::<usize>() < 256 {
                continue;
            }
        }
        for (target, records) in std::mem::take(&mut pending) {
            let queue = match senders.get(&target) {
                Some(queue) => queue,
                None => {
                    let made = runtime.block_on(client.partition_client(target.0.as_str(), target.1, UnknownTopicHandling::Retry));
                    let partition_client = match made {
                        Ok(made) => made,
                        Err(e) => return Err(bench_error(format!("{}/{}: {e}", target.0, target.1))),
                    };
                    let (queue, mut queued) = tokio::sync::mpsc::unbounded_channel::<Vec<Record>>();
                    tasks.push(runtime.spawn(async move {
                        // Requests of at most ~512 KB, as a broker's message.max.bytes wants.
                        let mut waiting: VecDeque<Record> = VecDeque::new();
                        loop {
                            if waiting.is_empty() {
                                match queued.recv().await {
                                    Some(records) => waiting.extend(records),
                                    None => return Ok::<_, String>(()),
                                }
                            }
                            while let Ok(more) = queued.try_recv() {
                                waiting.extend(more);
                            }
                            let (mut batch, mut bytes) = (Vec::new(), 0);
                            while let Some(record) = waiting.pop_front() {
                                bytes += record.approximate_size();
                                batch.push(record);
                                if bytes >= MAX_REQUEST_BYTES {
                                    break;
                                }
                            }
                            partition_client.produce(batch, Compression::NoCompression).await.map_err(|e| format!("produce: {e}"))?;
                        }
                    }));
                    senders.entry(target).or_insert(queue)
                }
            };
            if queue.send(records).is_err() {
                break; // its task failed: the error comes from joining it
            }
        }
        if let SourceEvent::End = event {
            break Ok(());
        }
    };
    drop(senders);
    for task in tasks {
        match runtime.block_on(task) {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => return Err(bench_error(reason)),
            Err(e) => return Err(bench_error(format!("a sender task failed: {e}"))),
        }
    }
    outcome
}

/// `{"key":K,"value":V}` as the generator's encoder writes it, split without parsing
/// (the live producer's cost per record is what limits the rate it can offer). The
/// CH-benCHmark keys have no column named `value`, so the first `,"value":` ends the
/// key. `None` for any other layout (then it is parsed).
fn split_keyed(line: &str) -> Option<(Option<&str>, &str)> {
    let inner = line.strip_prefix(r#"{"key":"#)?.strip_suffix('}')?;
    let (key, value) = inner.split_once(r#","value":"#)?;
    Some(((key != "null").then_some(key), value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use retina_cdc::source::generator::pre_encode;
    use retina_cdc::source::uri::GeneratorSpec;

    #[test]
    fn the_cheap_split_and_topic_agree_with_parsing_every_generated_line() {
        let spec = GeneratorSpec { base_rows: 2_000, ..GeneratorSpec::default() };
        let (load, changes) = pre_encode(&spec, 2_000, EncoderOptions::kafka_connect_default()).expect("encode");
        let mut tables = std::collections::BTreeSet::new();
        for line in load.iter().chain(&changes).flat_map(|chunk| chunk.text.lines()) {
            let (key, value) = split_keyed(line).expect("the encoder's keyed layout");
            let cheap = (topic_of(value).expect("topic"), key.map(str::to_string), value.to_string());
            assert_eq!(cheap, route_parsed(line).expect("parsed"), "{line}");
            tables.insert(cheap.0);
        }
        assert!(tables.len() >= 9, "every table and the transaction topic: {tables:?}");
        assert_eq!(split_keyed(r#"{"value":1}"#), None, "another layout is parsed instead");
    }

    /// A small run against the benchmark's own broker (Apache Kafka, as the Kafka
    /// tests run it): every produced change is replayed, the bare fetch reads every
    /// record, and the CPU of the mirror and of the broker during the replay is read.
    #[test]
    fn a_small_replay_through_its_own_broker_reports_where_the_cpu_went() {
        let config = DebeziumReplayConfig {
            base_rows: 2_000,
            row_changes: 20_000,
            shards: 2,
            seed: 7,
            encoding: EncoderOptions::kafka_connect_default(),
        };
        let kafka = KafkaBenchConfig { broker: None, partitions: 2, source_options: None };
        let dir = tempfile::tempdir().expect("temp dir");
        let report = replay_kafka(&config, &kafka, dir.path()).expect("replay through Apache Kafka (scripts/test.sh resolves its jars)");
        assert!(report.row_changes >= 20_000, "{report:?}");
        assert!(report.messages > report.row_changes, "BEGIN and END markers are records too: {report:?}");
        assert!(report.fetch_only_records_per_s > 0.0);
        let mirror = report.replay_cpu_seconds.expect("this process's CPU (Linux)");
        let broker = report.broker_replay_cpu_seconds.expect("the broker's CPU: the benchmark started it");
        assert!(mirror > 0.0 && broker > 0.0, "{report:?}");
        assert!(mirror < report.replay_seconds * 64.0, "CPU seconds, not ticks: {report:?}");
    }
}
