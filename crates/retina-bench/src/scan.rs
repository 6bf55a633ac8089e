//! `retina bench scan`: the cost of vectorized filter-on-read. The same visible rows
//! are scanned from a table that also holds stale versions and from one that holds
//! none; the ratio of the two scan times is the overhead of visibility filtering.
//!
//! The tables are loaded apart from the timed scans ([`load_tables`], [`measure`]), so
//! the CLI can also time a SQL query over the same two tables without this crate
//! depending on the query engine.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use arrow_schema::DataType;
use retina_core::scan::{scan_table_timed, ScanSplit};
use retina_core::storage::DataFiles;
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
    /// Where a scan's time goes, split by split (extra rounds after the timed ones):
    /// the flushed Parquet files and the write buffer's in-memory blocks.
    pub stale_file_ms_median: f64,
    pub stale_write_buffer_ms_median: f64,
    pub clean_file_ms_median: f64,
    pub clean_write_buffer_ms_median: f64,
    /// Row versions each table holds in its write buffer.
    pub stale_write_buffer_rows: u64,
    pub clean_write_buffer_rows: u64,
}

/// The benchmark table's SQL name in both engines.
pub const TABLE_NAME: &str = "bench.scan";

/// One loaded table and the engine that holds it.
pub struct LoadedTable {
    pub engine: Arc<Engine>,
    pub table: TableId,
}

/// The two tables the benchmark compares: the same visible rows, with and without
/// stale versions.
pub struct ScanTables {
    pub stale: LoadedTable,
    pub clean: LoadedTable,
    pub stale_versions: u64,
}

fn schema() -> TableSchema {
    TableSchema::from_columns(
        TABLE_NAME,
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

fn load(dir: &Path, config: &ScanBenchConfig, with_stale: bool, progress: Progress) -> CoreResult<(LoadedTable, u64)> {
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
    Ok((LoadedTable { engine: Arc::new(engine), table }, stale))
}

fn time_scan(engine: &Engine, table: TableId) -> CoreResult<(f64, u64)> {
    let snapshot = engine.snapshot()?;
    let start = Instant::now();
    let batches = engine.scan(table, &snapshot, None)?;
    let rows = batches.iter().map(|b| b.num_rows() as u64).sum();
    Ok((start.elapsed().as_secs_f64() * 1000.0, rows))
}

/// One scan as [`Engine::scan`] reads it, timed split by split: milliseconds in
/// flushed files, milliseconds in the write buffer, and the write buffer's rows.
fn time_splits(engine: &Engine, table: TableId) -> CoreResult<(f64, f64, u64)> {
    let snapshot = engine.snapshot()?;
    let runtime = engine.table(table)?;
    let store: &dyn DataFiles = engine.store().as_ref();
    let (mut file_ms, mut buffer_ms, mut buffer_rows) = (0.0, 0.0, 0);
    let batches = scan_table_timed(&runtime, store, snapshot.ts(), None, &mut |split, elapsed| {
        let ms = elapsed.as_secs_f64() * 1000.0;
        match split {
            ScanSplit::File(_) => file_ms += ms,
            ScanSplit::Virtual(file) => {
                buffer_ms += ms;
                buffer_rows += file.blocks().iter().map(|block| block.num_rows() as u64).sum::<u64>();
            }
        }
    })?;
    drop(batches);
    Ok((file_ms, buffer_ms, buffer_rows))
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Loads both tables (in `work_dir`), then times their scans.
pub fn run(config: &ScanBenchConfig, work_dir: &Path, progress: Progress) -> CoreResult<ScanReport> {
    let tables = load_tables(config, work_dir, progress)?;
    measure(&tables, config, progress)
}

/// Loads the table with stale versions and the clean one, flushed and collected.
pub fn load_tables(config: &ScanBenchConfig, work_dir: &Path, progress: Progress) -> CoreResult<ScanTables> {
    let (stale, stale_versions) = load(&work_dir.join("stale"), config, true, progress)?;
    let (clean, _) = load(&work_dir.join("clean"), config, false, progress)?;
    Ok(ScanTables { stale, clean, stale_versions })
}

/// Times the scans of both tables, alternating, then split by split.
pub fn measure(tables: &ScanTables, config: &ScanBenchConfig, progress: Progress) -> CoreResult<ScanReport> {
    let (stale_engine, stale_table) = (tables.stale.engine.as_ref(), tables.stale.table);
    let (clean_engine, clean_table) = (tables.clean.engine.as_ref(), tables.clean.table);
    let (mut stale_times, mut clean_times) = (Vec::new(), Vec::new());
    let mut visible = 0;
    // Warm the page cache, then alternate so drift hits both sides alike.
    time_scan(stale_engine, stale_table)?;
    time_scan(clean_engine, clean_table)?;
    for round in 0..config.repetitions.max(1) {
        let (ms, rows) = time_scan(stale_engine, stale_table)?;
        stale_times.push(ms);
        let (clean_ms, clean_rows) = time_scan(clean_engine, clean_table)?;
        clean_times.push(clean_ms);
        if rows != clean_rows {
            return Err(CoreError::Storage(format!("scan mismatch: {rows} rows with stale versions, {clean_rows} without")));
        }
        visible = rows;
        progress("scan", round as u64 + 1, config.repetitions as u64);
    }
    let clean = median(&mut clean_times);
    let stale = median(&mut stale_times);
    let mut parts: [Vec<f64>; 4] = Default::default();
    let (mut stale_buffer_rows, mut clean_buffer_rows) = (0, 0);
    for round in 0..config.repetitions.max(1) {
        let (file_ms, buffer_ms, rows) = time_splits(stale_engine, stale_table)?;
        parts[0].push(file_ms);
        parts[1].push(buffer_ms);
        stale_buffer_rows = rows;
        let (file_ms, buffer_ms, rows) = time_splits(clean_engine, clean_table)?;
        parts[2].push(file_ms);
        parts[3].push(buffer_ms);
        clean_buffer_rows = rows;
        progress("scan split by split", round as u64 + 1, config.repetitions as u64);
    }
    let [stale_file, stale_buffer, clean_file, clean_buffer] = parts.map(|mut times| median(&mut times));
    Ok(ScanReport {
        visible_rows: visible,
        stale_versions: tables.stale_versions,
        repetitions: config.repetitions,
        clean_scan_ms_median: clean,
        stale_scan_ms_median: stale,
        scan_overhead_ratio: stale / clean,
        clean_rows_per_s: visible as f64 / (clean / 1000.0),
        stale_file_ms_median: stale_file,
        stale_write_buffer_ms_median: stale_buffer,
        clean_file_ms_median: clean_file,
        clean_write_buffer_ms_median: clean_buffer,
        stale_write_buffer_rows: stale_buffer_rows,
        clean_write_buffer_rows: clean_buffer_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fewer rows than one data file: both tables sit in the write buffer, and the
    /// split-by-split report sees every row there and none in files.
    #[test]
    fn the_split_report_counts_the_write_buffer_rows() {
        let dir = tempfile::tempdir().expect("dir");
        let config = ScanBenchConfig { rows: 20_000, stale_fraction: 0.01, repetitions: 1 };
        let report = run(&config, dir.path(), &mut |_, _, _| {}).expect("bench");
        assert_eq!((report.visible_rows, report.stale_versions), (20_000, 200));
        assert_eq!((report.clean_write_buffer_rows, report.stale_write_buffer_rows), (20_000, 20_200));
        assert_eq!((report.clean_file_ms_median, report.stale_file_ms_median), (0.0, 0.0));
        assert!(report.stale_write_buffer_ms_median > 0.0, "{report:?}");
    }
}
