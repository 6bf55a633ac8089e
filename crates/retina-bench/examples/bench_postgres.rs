//! The PostgreSQL source benchmarks without the SQL layer, for a quick release build
//! (`retina bench postgres` runs the same functions):
//! `cargo run --release -p retina-postgres --example bench_postgres -- URL [ROWS] [RATE] [SECONDS] [COPY_ROWS]`.

use std::sync::Arc;

use retina_core::EngineConfig;
use retina_bench::postgres as bench;
use retina_storage::ParquetLakeStore;

fn store(dir: &tempfile::TempDir) -> Arc<ParquetLakeStore> {
    Arc::new(ParquetLakeStore::open(dir.path().to_str().expect("utf-8 temp path")).expect("store"))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let url = args.first().ok_or("usage: bench_postgres URL [ROWS] [RATE] [SECONDS] [COPY_ROWS]")?;
    let number = |i: usize, default: u64| args.get(i).and_then(|v| v.parse().ok()).unwrap_or(default);
    let (rows, rate, seconds, copy_rows) = (number(1, 1_000_000), number(2, 10_000), number(3, 10), number(4, 10_000_000));
    let dir = tempfile::tempdir()?;
    let figures = bench::throughput(url, store(&dir), EngineConfig::default(), rows)?;
    println!("throughput: {}", serde_json::to_string(&figures)?);
    let dir = tempfile::tempdir()?;
    let figures = bench::freshness(url, store(&dir), EngineConfig::default(), rate, seconds)?;
    println!("freshness: {}", serde_json::to_string(&figures)?);
    if copy_rows > 0 {
        let dir = tempfile::tempdir()?;
        let figures = bench::copy(url, store(&dir), EngineConfig::default(), copy_rows)?;
        println!("copy: {}", serde_json::to_string(&figures)?);
    }
    Ok(())
}
