//! `retina bench scan`: the cost of vectorized filter-on-read, measured two ways on the
//! same two tables (one with stale versions, one without; `retina_bench::scan`).
//!
//! - The bare scan (`scan_overhead_ratio`): the visible rows materialized as batches
//!   and not read. A clean write buffer is handed out as slices of its blocks without
//!   touching them, so this is the strictest measure: every byte the filter moves
//!   counts, and nothing a query does dilutes it.
//! - A table-scan query (`query_overhead_ratio`), the paper's method (§6, "a simple
//!   table-scan query"): SQL through the query engine that reads every column of
//!   every visible row. Both tables must give the same answer.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context};
use clap::Args;
use futures::StreamExt;
use retina_bench::scan::{self, LoadedTable, ScanReport};
use retina_query::datafusion::arrow::record_batch::RecordBatch;
use retina_query::datafusion::arrow::util::pretty::pretty_format_batches;
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use serde::Serialize;

use super::bench_query::median;
use super::progress::TerminalProgress;

#[derive(Args)]
pub struct ScanArgs {
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    #[arg(long, default_value_t = 0.01)]
    stale_fraction: f64,
    #[arg(long, default_value_t = 15)]
    repetitions: usize,
    #[arg(long)]
    json: bool,
}

/// The table-scan query: every column of every visible row is read.
fn scan_query() -> String {
    format!("SELECT count(*), sum(id), sum(qty), sum(amount), sum(version), max(tag), min(tag) FROM {}", scan::TABLE_NAME)
}

#[derive(Serialize)]
struct QueryOverhead {
    sql: String,
    clean_query_ms_median: f64,
    stale_query_ms_median: f64,
    /// Median query time with stale versions / without.
    query_overhead_ratio: f64,
}

#[derive(Serialize)]
struct Report {
    #[serde(flatten)]
    scan: ScanReport,
    #[serde(flatten)]
    query: QueryOverhead,
}

pub fn run(args: ScanArgs) -> anyhow::Result<()> {
    if args.repetitions == 0 {
        bail!("--repetitions must be positive");
    }
    let work = tempfile::Builder::new().prefix("retina-bench-scan-").tempdir()?;
    let config = scan::ScanBenchConfig { rows: args.rows, stale_fraction: args.stale_fraction, repetitions: args.repetitions };
    let mut progress = TerminalProgress::new();
    let tables = scan::load_tables(&config, work.path(), &mut |phase, done, total| progress.update(phase, done, total))?;
    let report = scan::measure(&tables, &config, &mut |phase, done, total| progress.update(phase, done, total))?;
    let query = time_query(&tables, args.repetitions, &mut progress)?;
    progress.finish();
    println!(
        "scan of {} visible rows: {:.2} ms clean, {:.2} ms with {} stale versions: ratio {:.3}",
        report.visible_rows, report.clean_scan_ms_median, report.stale_scan_ms_median, report.stale_versions, report.scan_overhead_ratio
    );
    println!(
        "  split by split: files {:.2} ms clean, {:.2} ms stale; write buffer {:.2} ms clean ({} rows), {:.2} ms stale ({} rows)",
        report.clean_file_ms_median,
        report.stale_file_ms_median,
        report.clean_write_buffer_ms_median,
        report.clean_write_buffer_rows,
        report.stale_write_buffer_ms_median,
        report.stale_write_buffer_rows
    );
    println!(
        "table-scan query: {:.2} ms clean, {:.2} ms stale: ratio {:.3}",
        query.clean_query_ms_median, query.stale_query_ms_median, query.query_overhead_ratio
    );
    if args.json {
        println!("{}", serde_json::to_string(&Report { scan: report, query })?);
    }
    Ok(())
}

/// Times [`scan_query`] on both tables, alternating after one warm-up run each, and
/// checks that they answer the same.
fn time_query(tables: &scan::ScanTables, repetitions: usize, progress: &mut TerminalProgress) -> anyhow::Result<QueryOverhead> {
    let sql = scan_query();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let session = |loaded: &LoadedTable| RetinaSession::new(Arc::clone(&loaded.engine), SourceRegistry::new(), SessionOptions::default());
    let (stale, clean) = (session(&tables.stale), session(&tables.clean));
    runtime.block_on(async {
        let (_, stale_answer) = run_query(&stale, &sql).await.context("the query on the table with stale versions")?;
        let (_, clean_answer) = run_query(&clean, &sql).await.context("the query on the clean table")?;
        if stale_answer != clean_answer {
            bail!("the two tables answer differently: {stale_answer} with stale versions, {clean_answer} without");
        }
        let (mut stale_ms, mut clean_ms) = (Vec::new(), Vec::new());
        for round in 0..repetitions {
            stale_ms.push(run_query(&stale, &sql).await?.0);
            clean_ms.push(run_query(&clean, &sql).await?.0);
            progress.update("table-scan query", round as u64 + 1, repetitions as u64);
        }
        let (stale, clean) = (median(stale_ms), median(clean_ms));
        Ok(QueryOverhead { sql: sql.clone(), clean_query_ms_median: clean, stale_query_ms_median: stale, query_overhead_ratio: stale / clean })
    })
}

/// Runs `sql` to its end: milliseconds, and the answer as text.
async fn run_query(session: &RetinaSession, sql: &str) -> anyhow::Result<(f64, String)> {
    let start = Instant::now();
    let mut stream = session.sql(sql).await?;
    let mut batches: Vec<RecordBatch> = Vec::new();
    while let Some(batch) = stream.next().await {
        batches.push(batch?);
    }
    let ms = start.elapsed().as_secs_f64() * 1000.0;
    Ok((ms, pretty_format_batches(&batches)?.to_string()))
}
