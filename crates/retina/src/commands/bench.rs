//! `retina bench NAME [--json]`: whole-system benchmarks. Every benchmark shows
//! progress on a terminal, prints a human summary and, with `--json`, one JSON object
//! on its last line.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use retina_bench::{durability, replay, txn};
use serde::Serialize;

use super::progress::TerminalProgress;

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub name: BenchName,
}

#[derive(Subcommand)]
pub enum BenchName {
    /// Replay of pre-decoded CH-benCHmark-like changes on a loaded base.
    Replay(ReplayArgs),
    /// Scan with stale versions vs. the same visible rows without.
    Scan(super::bench_scan::ScanArgs),
    /// Timestamp allocate + commit throughput.
    Txn(TxnArgs),
    /// Freshness of the Debezium CDC path at a steady rate (HyBench method).
    Freshness(super::bench_cdc::FreshnessArgs),
    /// Checkpoint pause, visibility memory under steady load, recovery time.
    Durability(DurabilityArgs),
    /// Partition-aware meta-scheduler: planning time, batches and edges.
    Scheduler(super::bench_scheduler::SchedulerBenchArgs),
    /// Pipeline jobs executed on Delta tables under each schedule: makespan, aborts, waste.
    Jobs(super::bench_jobs::JobsBenchArgs),
    /// CH-benCHmark SQL queries under replay vs. on static data, and vs. plain DataFusion.
    Query(super::bench_query::QueryBenchArgs),
    /// PostgreSQL source: replication throughput, freshness, initial copy speed.
    Postgres(super::bench_postgres::PostgresBenchArgs),
    /// Publication of checkpoints as Delta Lake and Iceberg: time, bytes and CPU.
    Publish(PublishArgs),
}

#[derive(Args)]
pub struct PublishArgs {
    /// Rows of the mirrored table.
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Row changes per second between checkpoints.
    #[arg(long, default_value_t = 100_000)]
    rate: u64,
    /// Checkpoints (each publishes) after the load.
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Seconds of changes before each checkpoint.
    #[arg(long, default_value_t = 2.0)]
    round_seconds: f64,
    /// Share of the keys the updates hit (recent rows, as OLTP updates mostly are).
    #[arg(long, default_value_t = 0.01)]
    hot_fraction: f64,
    /// delta,iceberg, delta, or none (the baseline: checkpoints without publication).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "delta,iceberg")]
    publish: Vec<super::publishing::PublishFormat>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where the lake goes (default: a temporary directory, removed after).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct ReplayArgs {
    /// Rows in the initial database.
    #[arg(long, default_value_t = 1_000_000)]
    base_rows: u64,
    /// Row changes to replay after the load.
    #[arg(long, default_value_t = 5_000_000)]
    changes: u64,
    /// Replayer shards (default: number of cores).
    #[arg(long)]
    shards: Option<usize>,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Where the Parquet files go: a directory or an object-store URL (default: a
    /// temporary directory, removed after).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// native: pre-decoded row changes; debezium: Debezium JSON lines (bare payloads)
    /// through the decoder and sink; debezium-envelope: the same lines as Kafka
    /// Connect writes them by default (schema envelope and key on every line).
    #[arg(long, default_value = "native", value_parser = ["native", "debezium", "debezium-envelope"])]
    format: String,
    /// memory: the stream replayed from memory; nats: published to a JetStream stream
    /// and replayed by the ingest driver `retina serve --source nats://` runs (Debezium
    /// JSON: bare payloads unless --format debezium-envelope).
    /// kafka: spread over a topic per table and a transaction topic and replayed by
    /// the driver `retina serve --source kafka://` runs.
    #[arg(long, default_value = "memory", value_parser = ["memory", "nats", "kafka"])]
    source: String,
    /// With --source nats: a running server HOST:PORT (default: the benchmark starts
    /// its own `nats-server -js`).
    #[arg(long, value_name = "HOST:PORT")]
    nats: Option<String>,
    #[command(flatten)]
    kafka: super::bench_cdc::KafkaBenchArgs,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct TxnArgs {
    #[arg(long, default_value_t = 20_000_000)]
    timestamps: u64,
    #[arg(long, default_value_t = 2)]
    threads: usize,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
pub struct DurabilityArgs {
    #[arg(long, default_value_t = 1_000_000)]
    base_rows: u64,
    /// Row changes per second of the steady stream.
    #[arg(long, default_value_t = 200_000)]
    rate: u64,
    /// Length of each steady run (one without, one with checkpoints).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Checkpoint period during the run with checkpoints, in milliseconds.
    #[arg(long, default_value_t = 500)]
    checkpoint_ms: u64,
    #[arg(long)]
    json: bool,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.name {
        BenchName::Replay(args) => {
            let work = WorkDir::new(args.data_dir)?;
            let envelope = args.format == "debezium-envelope";
            if args.source == "kafka" {
                let config = super::bench_cdc::replay_config(args.base_rows, args.changes, args.shards, args.seed, true);
                return super::bench_cdc::run_replay_kafka(&config, &args.kafka.config(), work.path(), args.json);
            }
            if args.source == "nats" {
                let config = super::bench_cdc::replay_config(args.base_rows, args.changes, args.shards, args.seed, envelope);
                return super::bench_cdc::run_replay_nats(&config, args.nats.as_deref(), work.path(), args.json);
            }
            if args.format.starts_with("debezium") {
                let config = super::bench_cdc::replay_config(args.base_rows, args.changes, args.shards, args.seed, envelope);
                return super::bench_cdc::run_replay(&config, work.path(), args.json);
            }
            let mut config = replay::ReplayBenchConfig {
                base_rows: args.base_rows,
                row_changes: args.changes,
                seed: args.seed,
                gc_interval: Duration::from_secs(1),
                ..Default::default()
            };
            if let Some(shards) = args.shards {
                config.shards = shards;
            }
            let mut progress = TerminalProgress::new();
            let report = replay::run(&config, work.path(), &mut |phase, done, total| progress.update(phase, done, total))?;
            progress.finish();
            println!(
                "replayed {} row changes ({} transactions) on a {}-row base with {} shards in {:.2} s: {:.0} row changes/s",
                report.row_changes, report.transactions, report.base_rows, report.shards, report.replay_seconds, report.row_changes_per_s
            );
            println!(
                "visibility: {} bytes for {} stored versions = {:.3} bits/tuple; {} files flushed",
                report.visibility_bytes, report.stored_versions, report.visibility_bits_per_tuple, report.files_flushed
            );
            print_json(args.json, &report)
        }
        BenchName::Publish(args) => {
            let work = WorkDir::new(args.data_dir)?;
            let publish = super::publishing::publish_options(&args.publish, Duration::from_secs(3600), Duration::ZERO)?;
            let config = retina_bench::publish::PublishBenchConfig {
                rows: args.rows,
                rate: args.rate,
                rounds: args.rounds,
                round_seconds: args.round_seconds,
                hot_fraction: args.hot_fraction,
                publish,
                seed: args.seed,
            };
            let mut progress = TerminalProgress::new();
            let report = retina_bench::publish::run(&config, work.path(), &mut |phase, done, total| progress.update(phase, done, total))?;
            progress.finish();
            println!(
                "{} rows ({} files), {} row changes/s on {:.0}% of the keys, {} checkpoints{}: publication {:.1} ms median, {:.1} ms max, {} bytes median; process CPU over the rounds {:.2} s in {:.2} s",
                report.rows,
                report.data_files,
                report.rate,
                report.hot_fraction * 100.0,
                report.rounds.len(),
                if report.publish { "" } else { " (not published)" },
                report.publication_ms_median,
                report.publication_ms_max,
                report.bytes_per_publication_median,
                report.rounds_cpu_seconds.unwrap_or(f64::NAN),
                report.rounds_seconds,
            );
            print_json(args.json, &report)
        }
        BenchName::Scan(args) => super::bench_scan::run(args),
        BenchName::Txn(args) => {
            let report = txn::run(args.timestamps, args.threads)?;
            println!(
                "{} timestamps allocated and committed: {:.0}/s on one thread, {:.0}/s on {} threads",
                report.timestamps, report.timestamps_per_s, report.concurrent_timestamps_per_s, report.threads
            );
            print_json(args.json, &report)
        }
        BenchName::Durability(args) => {
            let work = WorkDir::new(None)?;
            let config = durability::DurabilityBenchConfig {
                base_rows: args.base_rows,
                rate: args.rate,
                seconds: args.seconds,
                checkpoint_every: Duration::from_millis(args.checkpoint_ms),
                ..Default::default()
            };
            let mut progress = TerminalProgress::new();
            let report = durability::run(&config, work.path(), &mut |phase, done, total| progress.update(phase, done, total))?;
            progress.finish();
            println!(
                "commit latency p99: {:.2} ms with {} checkpoints, {:.2} ms without: checkpoint pause p99 {:.2} ms; one checkpoint {:.1} ms",
                report.commit_latency_with_checkpoints.p99_ms,
                report.checkpoints_taken,
                report.commit_latency_without_checkpoints.p99_ms,
                report.checkpoint_pause_p99_ms,
                report.checkpoint_ms
            );
            println!(
                "visibility under steady load: max {:.3}, last {:.3} bits/tuple; recovery of {} rows in {:.0} ms ({:.0} ms per million rows)",
                report.visibility_bits_per_tuple_max,
                report.visibility_bits_per_tuple_last,
                report.recovered_rows,
                report.recovery_ms,
                report.recovery_ms_per_million_rows
            );
            println!(
                "storage GC: {} rows rewritten at {:.0} rows/s; replay {:.0} row changes/s alone, {:.0} while it runs ({:.1}% drop)",
                report.storage_gc_rows_rewritten,
                report.storage_gc_rows_per_s,
                report.replay_changes_per_s_without_storage_gc,
                report.replay_changes_per_s_with_storage_gc,
                report.replay_drop_during_storage_gc * 100.0
            );
            print_json(args.json, &report)
        }
        BenchName::Scheduler(args) => super::bench_scheduler::run(args),
        BenchName::Jobs(args) => super::bench_jobs::run(args),
        BenchName::Freshness(args) => super::bench_cdc::run_freshness(args),
        BenchName::Query(args) => super::bench_query::run(args),
        BenchName::Postgres(args) => super::bench_postgres::run(args),
    }
}

fn print_json(enabled: bool, report: &impl Serialize) -> anyhow::Result<()> {
    if enabled {
        println!("{}", serde_json::to_string(report)?);
    }
    Ok(())
}

/// A benchmark's working directory: the given one, or a temporary one removed after.
struct WorkDir {
    path: PathBuf,
    _temp: Option<tempfile::TempDir>,
}

impl WorkDir {
    fn new(given: Option<PathBuf>) -> anyhow::Result<Self> {
        match given {
            Some(path) => {
                // An object-store URL is the store's to open; only directories are made.
                if !path.to_str().is_some_and(retina_storage::is_url) {
                    std::fs::create_dir_all(&path)?;
                }
                Ok(Self { path, _temp: None })
            }
            None => {
                let temp = tempfile::Builder::new().prefix("retina-bench-").tempdir()?;
                Ok(Self { path: temp.path().to_path_buf(), _temp: Some(temp) })
            }
        }
    }

    fn path(&self) -> &std::path::Path {
        &self.path
    }
}
