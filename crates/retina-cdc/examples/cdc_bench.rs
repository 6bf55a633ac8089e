//! The CDC benchmarks without the CLI (which needs the DataFusion build):
//! `cargo run --release -p retina-cdc --example cdc_bench -- [replay|freshness]`.

use std::time::Duration;

use retina_cdc::bench::{freshness, replay_debezium, DebeziumReplayConfig, FreshnessConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let which = std::env::args().nth(1).unwrap_or_else(|| "replay".into());
    let shards = std::thread::available_parallelism().map_or(2, |n| n.get());
    let dir = tempfile::tempdir()?;
    match which.as_str() {
        "replay" => {
            let config = DebeziumReplayConfig { base_rows: 1_000_000, row_changes: 5_000_000, shards, seed: 42 };
            let report = replay_debezium(&config, dir.path())?;
            println!("{}", serde_json::to_string(&report)?);
        }
        "freshness" => {
            let config = FreshnessConfig { base_rows: 1_000_000, rate: 100_000, seconds: 20.0, shards, query_interval: Duration::from_millis(10) };
            let report = freshness(&config, dir.path())?;
            println!("{}", serde_json::to_string(&report)?);
        }
        other => return Err(format!("unknown benchmark {other}: replay or freshness").into()),
    }
    Ok(())
}
