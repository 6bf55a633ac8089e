//! `retina bench replay`: replay throughput of pre-decoded CH-benCHmark-like
//! transactions on a loaded base, and visibility memory after replay with GC.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_core::{CoreError, CoreResult, EmbeddedTransactionService, Engine, EngineConfig, RowChange};
use retina_storage::ParquetLakeStore;
use serde::Serialize;

use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use crate::progress::Progress;

#[derive(Clone, Debug)]
pub struct ReplayBenchConfig {
    pub base_rows: u64,
    pub row_changes: u64,
    pub shards: usize,
    pub seed: u64,
    pub gc_interval: Duration,
}

impl Default for ReplayBenchConfig {
    fn default() -> Self {
        Self {
            base_rows: 1_000_000,
            row_changes: 5_000_000,
            shards: EngineConfig::default().shards,
            seed: 42,
            gc_interval: Duration::from_secs(1),
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    pub base_rows: u64,
    pub load_seconds: f64,
    pub transactions: u64,
    pub row_changes: u64,
    pub shards: usize,
    pub replay_seconds: f64,
    /// Row changes applied and made visible per second (the headline figure).
    pub row_changes_per_s: f64,
    pub transactions_per_s: f64,
    pub stored_versions: u64,
    pub visibility_bytes: u64,
    /// Visibility memory per stored row version after GC at the final LWM.
    pub visibility_bits_per_tuple: f64,
    pub files_flushed: u64,
    pub gc_runs: u64,
}

/// Runs the benchmark with data files under `data_dir` (real Parquet files).
pub fn run(config: &ReplayBenchConfig, data_dir: &Path, progress: Progress) -> CoreResult<ReplayReport> {
    let location = data_dir.to_str().ok_or_else(|| CoreError::Storage(format!("{} is not UTF-8", data_dir.display())))?;
    let store = Arc::new(ParquetLakeStore::open(location)?);
    let engine_config =
        EngineConfig { shards: config.shards, gc_interval: Some(config.gc_interval), ..EngineConfig::default() };
    let engine = Engine::start(engine_config, Arc::new(EmbeddedTransactionService::new()), store)?;
    let tables = ChBenchTables::create(&engine)?;
    let scale = ChBenchScale::for_base_rows(config.base_rows);
    let mut generator = ChBenchGenerator::new(config.seed, scale, tables);

    let base_rows = scale.base_rows();
    let start = Instant::now();
    let mut loaded = 0u64;
    generator.initial_load(0, 4096, |chunk| {
        loaded += chunk.len() as u64;
        progress("load", loaded, base_rows);
        engine.submit(chunk).map(|_| ())
    })?;
    engine.sync()?;
    let load_seconds = start.elapsed().as_secs_f64();

    // Pre-decode the stream so the timed part measures replay only.
    let mut transactions: Vec<Vec<RowChange>> = Vec::new();
    let mut generated = 0u64;
    while generated < config.row_changes {
        let (_, changes) = generator.next_transaction(transactions.len() as i64);
        generated += changes.len() as u64;
        transactions.push(changes);
        if transactions.len() % 10_000 == 0 {
            progress("generate", generated, config.row_changes);
        }
    }
    let transaction_count = transactions.len() as u64;

    let start = Instant::now();
    let mut applied = 0u64;
    for (n, changes) in transactions.into_iter().enumerate() {
        applied += changes.len() as u64;
        engine.submit(changes)?;
        if n % 20_000 == 0 {
            progress("replay", applied, generated);
        }
    }
    engine.sync()?;
    let replay_seconds = start.elapsed().as_secs_f64();
    progress("replay", generated, generated);

    engine.wait_for_flushes()?;
    engine.collect_garbage();
    let stats = engine.stats();
    Ok(ReplayReport {
        base_rows,
        load_seconds,
        transactions: transaction_count,
        row_changes: generated,
        shards: engine.config().shards,
        replay_seconds,
        row_changes_per_s: generated as f64 / replay_seconds,
        transactions_per_s: transaction_count as f64 / replay_seconds,
        stored_versions: stats.stored_versions,
        visibility_bytes: stats.visibility_bytes,
        visibility_bits_per_tuple: stats.visibility_bits_per_tuple(),
        files_flushed: stats.files_flushed,
        gc_runs: stats.gc_runs,
    })
}
