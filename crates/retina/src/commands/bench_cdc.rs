//! `retina bench replay --format debezium` and `retina bench freshness`: the CDC path
//! (Debezium JSON -> decoder -> sink -> engine) measured end to end.

use std::path::Path;
use std::time::Duration;

use clap::Args;
use retina_bench::debezium_replay::{freshness, replay_debezium, DebeziumReplayConfig, FreshnessConfig};
use retina_bench::kafka_replay::{kafka_freshness, replay_kafka, KafkaBenchConfig};
use retina_bench::nats_replay::replay_nats;

#[derive(Args)]
pub struct FreshnessArgs {
    /// Rows in the initial database.
    #[arg(long, default_value_t = 1_000_000)]
    base_rows: u64,
    /// Steady row changes per second.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    #[arg(long, default_value_t = 20.0)]
    seconds: f64,
    /// Replayer shards (default: number of cores).
    #[arg(long)]
    shards: Option<usize>,
    /// Pause between freshness queries, in milliseconds.
    #[arg(long, default_value_t = 10)]
    query_interval_ms: u64,
    /// The engine's memory-GC period in milliseconds (0: none; default: the engine's).
    #[arg(long)]
    gc_interval_ms: Option<u64>,
    /// memory: the generator feeds the sink in-process; kafka: it is produced live to
    /// a broker as Kafka Connect lays it out (a topic per table, a transaction topic,
    /// schema envelope and key) and read back by the `kafka://` source.
    #[arg(long, default_value = "memory", value_parser = ["memory", "kafka"])]
    source: String,
    #[command(flatten)]
    kafka: KafkaBenchArgs,
    #[arg(long)]
    json: bool,
}

/// Where a Kafka benchmark's stream goes and how the source reads it.
#[derive(Args)]
pub struct KafkaBenchArgs {
    /// With --source kafka: a running broker HOST:PORT (default: the benchmark
    /// starts its own Apache Kafka broker).
    #[arg(long, value_name = "HOST:PORT")]
    kafka: Option<String>,
    /// With --source kafka: partitions of each table's topic.
    #[arg(long, default_value_t = 2)]
    partitions: i32,
    /// With --source kafka: the source URI's options, e.g. fetch_wait_ms=10.
    #[arg(long, value_name = "K=V&..")]
    kafka_options: Option<String>,
}

impl KafkaBenchArgs {
    pub fn config(&self) -> KafkaBenchConfig {
        KafkaBenchConfig { broker: self.kafka.clone(), partitions: self.partitions, source_options: self.kafka_options.clone() }
    }
}

fn default_shards() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The replay benchmarks' stream. `envelope`: every line as Kafka Connect's
/// JsonConverter writes it by default (schema envelope and key); otherwise bare
/// payloads.
pub fn replay_config(base_rows: u64, changes: u64, shards: Option<usize>, seed: u64, envelope: bool) -> DebeziumReplayConfig {
    let encoding = if envelope { retina_cdc::debezium::EncoderOptions::kafka_connect_default() } else { Default::default() };
    DebeziumReplayConfig { base_rows, row_changes: changes, shards: shards.unwrap_or_else(default_shards), seed, encoding }
}

pub fn run_replay(config: &DebeziumReplayConfig, dir: &Path, json: bool) -> anyhow::Result<()> {
    let report = replay_debezium(config, dir)?;
    let summary = format!(
        "Debezium JSON ({}): decoded {} messages ({:.1} MB) at {:.0} events/s ({:.0} MB/s); end to end {}",
        report.encoding,
        report.events,
        report.json_bytes as f64 / 1e6,
        report.decode_events_per_s,
        report.decode_mb_per_s,
        replayed(report.row_changes, report.transactions, report.shards, report.replay_seconds, report.row_changes_per_s)
    );
    print_report(&summary, &report, json)
}

pub fn run_replay_nats(config: &DebeziumReplayConfig, server: Option<&str>, dir: &Path, json: bool) -> anyhow::Result<()> {
    let report = replay_nats(config, server, dir)?;
    let summary = format!(
        "Debezium JSON in JetStream ({}): published {} messages at {:.0}/s; replayed {}",
        report.server,
        report.messages,
        report.publish_messages_per_s,
        replayed(report.row_changes, report.transactions, report.shards, report.replay_seconds, report.row_changes_per_s)
    );
    print_report(&summary, &report, json)
}

pub fn run_replay_kafka(config: &DebeziumReplayConfig, kafka: &KafkaBenchConfig, dir: &Path, json: bool) -> anyhow::Result<()> {
    let report = replay_kafka(config, kafka, dir)?;
    let summary = format!(
        "Debezium JSON (envelope+key) in Kafka ({}, {} topics of {} partitions and a transaction topic): produced {} records at {:.0}/s; initial load of {} row changes replayed in {:.2} s; replayed {}; reassembly held at most {:.1} MB; the same records fetched alone, nothing applied: {:.2} s ({:.0} records/s)",
        report.broker,
        report.topics - 1,
        report.partitions_per_topic,
        report.messages,
        report.produce_messages_per_s,
        report.load_row_changes,
        report.load_seconds,
        replayed(report.row_changes, report.transactions, report.shards, report.replay_seconds, report.row_changes_per_s),
        report.held_bytes_peak as f64 / 1e6,
        report.fetch_only_seconds,
        report.fetch_only_records_per_s
    ) + &replay_cpu(report.replay_cpu_seconds, report.broker_replay_cpu_seconds);
    print_report(&summary, &report, json)
}

/// Where the replay's CPU went, when it could be read: the mirror's and the broker's.
fn replay_cpu(mirror: Option<f64>, broker: Option<f64>) -> String {
    match (mirror, broker) {
        (Some(mirror), Some(broker)) => format!("; CPU during the replay: mirror {mirror:.2} s, broker {broker:.2} s"),
        (Some(mirror), None) => format!("; CPU during the replay: mirror {mirror:.2} s"),
        _ => String::new(),
    }
}

fn replayed(row_changes: u64, transactions: u64, shards: usize, seconds: f64, rate: f64) -> String {
    format!("{row_changes} row changes ({transactions} transactions) with {shards} shards in {seconds:.2} s: {rate:.0} row changes/s")
}

/// The summary line, then with `--json` the report as one JSON object on the last line.
fn print_report(summary: &str, report: &impl serde::Serialize, json: bool) -> anyhow::Result<()> {
    println!("{summary}");
    if json {
        println!("{}", serde_json::to_string(report)?);
    }
    Ok(())
}

pub fn run_freshness(args: FreshnessArgs) -> anyhow::Result<()> {
    let dir = tempfile::Builder::new().prefix("retina-bench-").tempdir()?;
    let config = FreshnessConfig {
        base_rows: args.base_rows,
        rate: args.rate,
        seconds: args.seconds,
        shards: args.shards.unwrap_or_else(default_shards),
        query_interval: Duration::from_millis(args.query_interval_ms),
        gc_interval: match args.gc_interval_ms {
            None => retina_core::EngineConfig::default().gc_interval,
            Some(0) => None,
            Some(ms) => Some(Duration::from_millis(ms)),
        },
        checkpoint_interval: retina_core::EngineConfig::default().checkpoint_interval,
        background_nice: retina_core::EngineConfig::default().background_nice,
    };
    let report = match args.source.as_str() {
        "kafka" => kafka_freshness(&config, &args.kafka.config(), dir.path())?,
        _ => freshness(&config, dir.path())?,
    };
    println!(
        "{} freshness at {} row changes/s (achieved {:.0}/s over {:.1} s, {} queries): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        args.source, report.rate, report.row_changes_per_s, report.seconds, report.queries, report.freshness_p50_ms, report.freshness_p99_ms, report.freshness_max_ms
    );
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}
