//! Visibility memory over a long steady change run (issue 7's 10-minute figure):
//! a CH-benCHmark-like base, then a steady stream at RATE row changes/s for SECONDS
//! with memory GC every GC_MS and checkpoints and storage GC at their defaults;
//! prints one JSON line every 10 s and a summary at the end.
//!
//! `cargo run --release -p retina-bench --example visibility_memory -- [SECONDS] [RATE] [GC_MS] [BASE_ROWS]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_core::{Engine, EngineConfig};
use retina_storage::ParquetLakeStore;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<u64> = std::env::args().skip(1).map(|a| a.parse()).collect::<Result<_, _>>()?;
    let arg = |i: usize, default: u64| args.get(i).copied().unwrap_or(default);
    let (seconds, rate, gc_ms, base_rows) = (arg(0, 600), arg(1, 200_000), arg(2, 100), arg(3, 1_000_000));
    let dir = tempfile::tempdir()?;
    let config = EngineConfig { gc_interval: Some(Duration::from_millis(gc_ms)), ..EngineConfig::default() };
    let store = ParquetLakeStore::open(dir.path().to_str().ok_or("temp dir is not UTF-8")?)?;
    let engine = Engine::open(config, Arc::new(store))?;
    let tables = ChBenchTables::create(&engine)?;
    let mut generator = ChBenchGenerator::new(42, ChBenchScale::for_base_rows(base_rows), tables);
    generator.initial_load(0, 4096, |chunk| engine.submit(chunk).map(|_| ()))?;
    engine.sync()?;
    let start = Instant::now();
    let (mut changes, mut samples, mut last_report) = (0u64, Vec::new(), Instant::now());
    while start.elapsed().as_secs_f64() < seconds as f64 {
        let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
        while changes < due {
            let (_, txn) = generator.next_transaction(0);
            changes += txn.len() as u64;
            engine.submit(txn)?;
        }
        engine.flush_batch()?;
        if last_report.elapsed() >= Duration::from_secs(1) {
            let stats = engine.stats();
            samples.push(stats.visibility_bits_per_tuple());
            if samples.len() % 10 == 0 || stats.visibility_bits_per_tuple() > 1.3 {
                println!(
                    "{{\"second\":{},\"bits_per_tuple\":{:.4},\"stored_versions\":{},\"visibility_bytes\":{},\"row_changes\":{changes}}}",
                    samples.len(),
                    stats.visibility_bits_per_tuple(),
                    stats.stored_versions,
                    stats.visibility_bytes
                );
            }
            if std::env::var_os("VISIBILITY_DIAGNOSE").is_some() && stats.visibility_bits_per_tuple() > 1.3 {
                for table in engine.tables() {
                    let files = table.files();
                    let flushed_rows: u64 = files.flushed.iter().map(|f| f.meta.row_count).sum();
                    let flushed_bytes: usize = files.flushed.iter().map(|f| f.visibility.memory_bytes()).sum();
                    let small = files.flushed.iter().filter(|f| f.meta.row_count < 4096).count();
                    let virtual_rows: usize = files.virtual_files.iter().map(|v| v.published_rows()).sum();
                    let virtual_bytes: usize = files.virtual_files.iter().map(|v| v.visibility().memory_bytes()).sum();
                    eprintln!(
                        "  {}: {} flushed files ({small} under 4096 rows), {flushed_rows} rows, {flushed_bytes} B; {} virtual files, {virtual_rows} rows, {virtual_bytes} B",
                        table.name(),
                        files.flushed.len(),
                        files.virtual_files.len()
                    );
                }
            }
            last_report = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let max = samples.iter().copied().fold(0.0, f64::max);
    let after_first_minute = samples.iter().skip(60).copied().fold(0.0, f64::max);
    let mean = samples.iter().sum::<f64>() / samples.len().max(1) as f64;
    println!(
        "{{\"seconds\":{seconds},\"rate\":{rate},\"gc_ms\":{gc_ms},\"achieved_rate\":{:.0},\"bits_per_tuple_max\":{max:.4},\"bits_per_tuple_max_after_60s\":{after_first_minute:.4},\"bits_per_tuple_mean\":{mean:.4},\"bits_per_tuple_last\":{:.4}}}",
        changes as f64 / start.elapsed().as_secs_f64(),
        samples.last().copied().unwrap_or(0.0)
    );
    Ok(())
}
