//! The CDC benchmarks without the SQL layer, for a quick release build (`retina bench
//! replay --format debezium` and `retina bench freshness` run the same functions):
//! `cargo run --release -p retina-cdc --example bench_cdc -- [BASE_ROWS] [CHANGES] [RATE] [SECONDS]`.

use std::time::Duration;

use retina_cdc::bench::{freshness, replay_debezium, DebeziumReplayConfig, FreshnessConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let (base_rows, changes, rate, seconds) = (arg(0, 1_000_000), arg(1, 5_000_000), arg(2, 100_000), arg(3, 20));
    let shards = std::thread::available_parallelism().map_or(2, |n| n.get());
    let dir = tempfile::tempdir()?;
    let replay = replay_debezium(&DebeziumReplayConfig { base_rows, row_changes: changes, shards, seed: 42 }, dir.path())?;
    println!("replay: {}", serde_json::to_string(&replay)?);
    let dir = tempfile::tempdir()?;
    let config = FreshnessConfig {
        base_rows,
        rate,
        seconds: seconds as f64,
        shards,
        query_interval: Duration::from_millis(10),
        gc_interval: retina_core::EngineConfig::default().gc_interval,
    };
    println!("freshness: {}", serde_json::to_string(&freshness(&config, dir.path())?)?);
    Ok(())
}
