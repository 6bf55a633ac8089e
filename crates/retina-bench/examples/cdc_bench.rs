//! The CDC benchmarks without the CLI (which needs the DataFusion build):
//! `cargo run --release -p retina-cdc --example cdc_bench -- [replay|freshness|nats]`
//! (`nats`: the stream through a JetStream stream on a `nats-server` it starts, or
//! on `CDC_BENCH_NATS=HOST:PORT`).

use std::time::Duration;

use retina_bench::debezium_replay::{freshness, replay_debezium, DebeziumReplayConfig, FreshnessConfig};

/// As in the `retina` binary: shards free rows the sink thread allocated, which glibc's
/// arenas serialize on a lock.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `NAME=value` from the environment, else `default` (sizes for quick runs).
fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `CDC_BENCH_FORMAT=envelope`: lines as Kafka Connect writes them by default
/// (schema envelope and key); otherwise bare payloads.
fn encoding() -> retina_cdc::debezium::EncoderOptions {
    match std::env::var("CDC_BENCH_FORMAT").as_deref() {
        Ok("envelope") => retina_cdc::debezium::EncoderOptions::kafka_connect_default(),
        _ => Default::default(),
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "replay".into());
    let shards = std::thread::available_parallelism().map_or(2, |n| n.get());
    let background_nice = knob("CDC_BENCH_NICE", retina_core::EngineConfig::default().background_nice as u64) as i32;
    let dir = tempfile::tempdir()?;
    match which.as_str() {
        "replay" => {
            let config = DebeziumReplayConfig {
                base_rows: knob("CDC_BENCH_BASE_ROWS", 1_000_000),
                row_changes: knob("CDC_BENCH_CHANGES", 5_000_000),
                shards,
                seed: 42,
                encoding: encoding(),
            };
            let report = replay_debezium(&config, dir.path())?;
            println!("{}", serde_json::to_string(&report)?);
        }
        "nats" => {
            let config = DebeziumReplayConfig {
                base_rows: knob("CDC_BENCH_BASE_ROWS", 1_000_000),
                row_changes: knob("CDC_BENCH_CHANGES", 2_000_000),
                shards,
                seed: 42,
                encoding: encoding(),
            };
            let server = std::env::var("CDC_BENCH_NATS").ok();
            let report = retina_bench::nats_replay::replay_nats(&config, server.as_deref(), dir.path())?;
            println!("{}", serde_json::to_string(&report)?);
        }
        "freshness" => {
            let config = FreshnessConfig {
                base_rows: knob("CDC_BENCH_BASE_ROWS", 1_000_000),
                rate: knob("CDC_BENCH_RATE", 100_000),
                seconds: knob("CDC_BENCH_SECONDS", 20) as f64,
                shards,
                query_interval: Duration::from_millis(10),
                gc_interval: match std::env::var("CDC_BENCH_GC_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
                    None => retina_core::EngineConfig::default().gc_interval,
                    Some(0) => None,
                    Some(ms) => Some(Duration::from_millis(ms)),
                },
                background_nice,
                checkpoint_interval: match std::env::var("CDC_BENCH_CHECKPOINT_MS").ok().and_then(|v| v.parse::<u64>().ok()) {
                    None => retina_core::EngineConfig::default().checkpoint_interval,
                    Some(0) => None,
                    Some(ms) => Some(Duration::from_millis(ms)),
                },
            };
            let report = freshness(&config, dir.path())?;
            println!("{}", serde_json::to_string(&report)?);
        }
        "native" => {
            // The same workload replayed from pre-decoded row changes, for comparison.
            let config = retina_bench::replay::ReplayBenchConfig {
                base_rows: knob("CDC_BENCH_BASE_ROWS", 1_000_000),
                row_changes: knob("CDC_BENCH_CHANGES", 5_000_000),
                shards,
                gc_interval: Duration::from_millis(knob("CDC_BENCH_GC_MS", 1000)),
                ..Default::default()
            };
            let report = retina_bench::replay::run(&config, dir.path(), &mut |_, _, _| {})?;
            println!("{}", serde_json::to_string(&report)?);
        }
        other => return Err(format!("unknown benchmark {other}: replay, native or freshness").into()),
    }
    Ok(())
}
