//! `retina bench scan`: the cost of vectorized filter-on-read. The same visible rows
//! are scanned from a table that also holds stale versions and from one that holds
//! none; the ratio of the two scan times is the overhead of visibility filtering.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow_schema::DataType;
use retina_core::{CoreError, CoreResult, EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_storage::ParquetLakeStore;
use serde::Serialize;

use crate::progress::Progress;

#[derive(Clone, Debug)]
pub struct ScanBenchConfig {
    pub rows: u64,
    /// Share of rows updated once, leaving one stale version each.
    pub stale_fraction: f64,
    pub repetitions: usize,
}

impl Default for ScanBenchConfig {
    fn default() -> Self {
        Self { rows: 1_000_000, stale_fraction: 0.01, repetitions: 15 }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct ScanReport {
    pub visible_rows: u64,
    pub stale_versions: u64,
    pub repetitions: usize,
    pub clean_scan_ms_median: f64,
    pub stale_scan_ms_median: f64,
    /// Median scan time with stale versions / without (target <= 1.03).
    pub scan_overhead_ratio: f64,
    pub clean_rows_per_s: f64,
}

fn schema() -> TableSchema {
    TableSchema::from_columns(
        "bench.scan",
        &[
            ("id", DataType::Int64, false),
            ("qty", DataType::Int32, false),
            ("amount", DataType::Float64, false),
            ("tag", DataType::Utf8, false),
            ("version", DataType::Int64, false),
        ],
        &["id"],
    )
    .expect("valid schema")
}

fn row(id: u64, version: i64) -> Vec<Value> {
    vec![
        Value::Int64(id as i64),
        Value::Int32((id % 100) as i32),
        Value::Float64(id as f64 * 0.5),
        Value::Utf8(format!("tag-{}", id % 50).into()),
        Value::Int64(version),
    ]
}

/// Whether row `id` is one of the updated ones (spread evenly over the table).
fn is_updated(id: u64, fraction: f64) -> bool {
    let every = (1.0 / fraction).round().max(1.0) as u64;
    id % every == every / 2
}

fn load(dir: &Path, config: &ScanBenchConfig, with_stale: bool, progress: Progress) -> CoreResult<(Engine, TableId, u64)> {
    let location = dir.to_str().ok_or_else(|| CoreError::Storage(format!("{} is not UTF-8", dir.display())))?;
    let engine = Engine::start(
        EngineConfig { gc_interval: None, ..EngineConfig::default() },
        Arc::new(EmbeddedTransactionService::new()),
        Arc::new(ParquetLakeStore::open(location)?),
    )?;
    let table = engine.create_table(schema())?;
    let phase = if with_stale { "load table with stale versions" } else { "load clean table" };
    let mut chunk = Vec::with_capacity(4096);
    for id in 0..config.rows {
        let version = if !with_stale && is_updated(id, config.stale_fraction) { 1 } else { 0 };
        chunk.push(RowChange::Insert { table, row: row(id, version) });
        if chunk.len() == 4096 {
            engine.submit(std::mem::take(&mut chunk))?;
            progress(phase, id, config.rows);
        }
    }
    let mut stale = 0;
    if with_stale {
        for id in (0..config.rows).filter(|&id| is_updated(id, config.stale_fraction)) {
            chunk.push(RowChange::Update { table, key: vec![Value::Int64(id as i64)], row: row(id, 1) });
            stale += 1;
            if chunk.len() == 4096 {
                engine.submit(std::mem::take(&mut chunk))?;
            }
        }
    }
    if !chunk.is_empty() {
        engine.submit(chunk)?;
    }
    engine.wait_for_flushes()?;
    engine.collect_garbage();
    Ok((engine, table, stale))
}

fn time_scan(engine: &Engine, table: TableId) -> CoreResult<(f64, u64)> {
    let snapshot = engine.snapshot()?;
    let start = Instant::now();
    let batches = engine.scan(table, &snapshot, None)?;
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    Ok((start.elapsed().as_secs_f64() * 1000.0, rows))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

pub fn run(config: &ScanBenchConfig, work_dir: &Path, progress: Progress) -> CoreResult<ScanReport> {
    let (stale_engine, stale_table, stale_versions) = load(&work_dir.join("stale"), config, true, progress)?;
    let (clean_engine, clean_table, _) = load(&work_dir.join("clean"), config, false, progress)?;
    let (mut stale_times, mut clean_times) = (Vec::new(), Vec::new());
    let mut visible = 0;
    // Warm the page cache, then alternate so drift hits both sides alike.
    time_scan(&stale_engine, stale_table)?;
    time_scan(&clean_engine, clean_table)?;
    for round in 0..config.repetitions.max(1) {
        let (ms, rows) = time_scan(&stale_engine, stale_table)?;
        stale_times.push(ms);
        let (clean_ms, clean_rows) = time_scan(&clean_engine, clean_table)?;
        clean_times.push(clean_ms);
        if rows != clean_rows {
            return Err(CoreError::Storage(format!("scan mismatch: {rows} rows with stale versions, {clean_rows} without")));
        }
        visible = rows;
        progress("scan", round as u64 + 1, config.repetitions as u64);
    }
    let clean = median(&mut clean_times);
    let stale = median(&mut stale_times);
    Ok(ScanReport {
        visible_rows: visible,
        stale_versions,
        repetitions: config.repetitions,
        clean_scan_ms_median: clean,
        stale_scan_ms_median: stale,
        scan_overhead_ratio: stale / clean,
        clean_rows_per_s: visible as f64 / (clean / 1000.0),
    })
}
