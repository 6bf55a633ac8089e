//! `retina bench publish`: what publishing checkpoints as Delta Lake and Iceberg
//! tables costs: per checkpoint, its time, the files it touched and the bytes it
//! wrote, and the process CPU of replay plus checkpoints with publication on or off
//! (run both and compare).
//!
//! One table of `rows` rows; then rounds of updates at `rate` row changes/s, each
//! ended by a checkpoint (which publishes). Updates hit a hot key range of
//! `hot_fraction` of the table, as OLTP updates mostly touch recent rows: the files
//! whose hidden rows change are then few, whatever the table's size, and that is
//! what a publication should cost.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_schema::DataType;
use rand::{Rng, SeedableRng};
use retina_core::{CoreError, CoreResult, Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_storage::{ParquetLakeStore, PublishOptions};
use serde::Serialize;

use crate::measure::process_cpu_seconds;
use crate::progress::Progress;

#[derive(Clone, Debug)]
pub struct PublishBenchConfig {
    pub rows: u64,
    /// Row changes per second during the rounds.
    pub rate: u64,
    pub rounds: usize,
    pub round_seconds: f64,
    /// Share of the keys the updates hit.
    pub hot_fraction: f64,
    /// `None`: checkpoints without publication (the baseline).
    pub publish: Option<PublishOptions>,
    pub seed: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PublishRound {
    pub row_changes: u64,
    pub checkpoint_ms: f64,
    pub publication_ms: f64,
    pub files_added: usize,
    pub files_removed: usize,
    pub deletion_vectors: usize,
    /// Bytes of Delta log, DV, Iceberg metadata and Puffin files this round added.
    pub bytes_written: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PublishReport {
    pub rows: u64,
    pub rate: u64,
    pub hot_fraction: f64,
    pub publish: bool,
    pub data_files: usize,
    pub rounds: Vec<PublishRound>,
    pub publication_ms_median: f64,
    pub publication_ms_max: f64,
    pub bytes_per_publication_median: u64,
    /// CPU of the whole process over the rounds (replay, flushes, checkpoints and
    /// their publications).
    pub rounds_cpu_seconds: Option<f64>,
    pub rounds_seconds: f64,
}

fn schema() -> CoreResult<TableSchema> {
    TableSchema::from_columns(
        "bench.accounts",
        &[("id", DataType::Int64, false), ("balance", DataType::Int64, false), ("note", DataType::Utf8, true)],
        &["id"],
    )
}

fn row(id: i64, balance: i64) -> Vec<Value> {
    vec![Value::Int64(id), Value::Int64(balance), Value::Utf8(format!("account {id}").into())]
}

/// Bytes of the publication's own files under `dir` (logs, DVs, Iceberg metadata).
fn publication_bytes(dir: &Path) -> u64 {
    fn walk(dir: &Path, inside: bool, total: &mut u64) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let counted = inside || name == "_delta_log" || name == "metadata" || name == "_retina";
            if path.is_dir() {
                walk(&path, counted, total);
            } else if counted || name.starts_with("deletion_vector_") {
                *total += entry.metadata().map_or(0, |m| m.len());
            }
        }
    }
    let mut total = 0;
    walk(dir, false, &mut total);
    total
}

pub fn run(config: &PublishBenchConfig, data_dir: &Path, progress: Progress) -> CoreResult<PublishReport> {
    let location = data_dir.to_str().ok_or_else(|| CoreError::Storage(format!("{} is not UTF-8", data_dir.display())))?;
    let store = Arc::new(ParquetLakeStore::open(location)?.publishing(config.publish));
    let engine_config = EngineConfig { checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
    let engine = Engine::open(engine_config, Arc::clone(&store) as _)?;
    let table = engine.create_table(schema()?)?;
    let mut loaded = 0u64;
    while loaded < config.rows {
        let chunk = (loaded..(loaded + 4096).min(config.rows)).map(|id| RowChange::Insert { table, row: row(id as i64, 0) });
        engine.submit(chunk.collect())?;
        loaded = (loaded + 4096).min(config.rows);
        progress("load", loaded, config.rows);
    }
    engine.wait_for_flushes()?;
    engine.checkpoint()?;

    let mut rng = rand::rngs::SmallRng::seed_from_u64(config.seed);
    let hot = ((config.rows as f64 * config.hot_fraction) as u64).max(1);
    let hot_start = config.rows - hot;
    let per_round = (config.rate as f64 * config.round_seconds) as u64;
    let mut rounds = Vec::with_capacity(config.rounds);
    let cpu_start = process_cpu_seconds();
    let started = Instant::now();
    for round in 0..config.rounds {
        let round_start = Instant::now();
        let mut submitted = 0u64;
        while submitted < per_round {
            // 100 transactions of 10 updates each per paced step.
            let due = (round_start.elapsed().as_secs_f64() * config.rate as f64) as u64;
            if submitted >= due {
                std::thread::sleep(Duration::from_micros(500));
                continue;
            }
            let mut transaction = Vec::with_capacity(10);
            for _ in 0..10 {
                let id = (hot_start + rng.random_range(0..hot)) as i64;
                transaction.push(RowChange::Update { table, key: vec![Value::Int64(id)], row: row(id, rng.random_range(0..1_000_000)) });
            }
            engine.submit(transaction)?;
            submitted += 10;
        }
        engine.sync()?;
        let before = publication_bytes(data_dir);
        let checkpoint = engine.checkpoint()?;
        let status = store.publication_status();
        if let Some(error) = status.error {
            return Err(CoreError::Storage(format!("publication failed: {error}")));
        }
        let last = status.last.filter(|_| config.publish.is_some()).unwrap_or_default();
        rounds.push(PublishRound {
            row_changes: submitted,
            checkpoint_ms: checkpoint.millis,
            publication_ms: last.millis,
            files_added: last.files_added,
            files_removed: last.files_removed,
            deletion_vectors: last.deletion_vectors,
            bytes_written: publication_bytes(data_dir).saturating_sub(before),
        });
        progress("rounds", round as u64 + 1, config.rounds as u64);
    }
    let rounds_seconds = started.elapsed().as_secs_f64();
    let rounds_cpu_seconds = process_cpu_seconds().zip(cpu_start).map(|(end, start)| end - start);
    let data_files = engine.table(table)?.files().flushed.len();
    engine.close()?;
    let median = |mut values: Vec<f64>| {
        values.sort_by(f64::total_cmp);
        values.get(values.len() / 2).copied().unwrap_or(0.0)
    };
    let publication_ms_median = median(rounds.iter().map(|r| r.publication_ms).collect());
    let publication_ms_max = rounds.iter().map(|r| r.publication_ms).fold(0.0, f64::max);
    let bytes_per_publication_median = median(rounds.iter().map(|r| r.bytes_written as f64).collect()) as u64;
    Ok(PublishReport {
        rows: config.rows,
        rate: config.rate,
        hot_fraction: config.hot_fraction,
        publish: config.publish.is_some(),
        data_files,
        rounds,
        publication_ms_median,
        publication_ms_max,
        bytes_per_publication_median,
        rounds_cpu_seconds,
        rounds_seconds,
    })
}
