//! `retina bench postgres --url URL`: the PostgreSQL source's throughput (and whether
//! PostgreSQL's own decoding is the limit), freshness at a steady rate, and initial
//! copy speed. Needs a superuser URL of a server with `wal_level = logical`; the
//! benchmark creates and drops its own tables, publications and slots.

use std::sync::Arc;

use clap::Args;
use retina_bench::postgres as bench;
use retina_core::EngineConfig;
use retina_storage::ParquetLakeStore;
use serde::Serialize;

#[derive(Args)]
pub struct PostgresBenchArgs {
    /// postgres://USER@HOST:PORT/DB of the server to replicate from.
    #[arg(long)]
    url: String,
    /// Rows inserted and then updated for the throughput run (2 row changes each).
    #[arg(long, default_value_t = 1_000_000)]
    rows: u64,
    /// Row changes per second for the freshness run.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Seconds of the freshness run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Rows of the table the copy run copies.
    #[arg(long, default_value_t = 10_000_000)]
    copy_rows: u64,
    /// Which runs: any of throughput, freshness, copy (comma-separated).
    #[arg(long, default_value = "throughput,freshness,copy")]
    runs: String,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Default)]
struct Report {
    throughput: Option<bench::ThroughputFigures>,
    freshness: Option<bench::FreshnessFigures>,
    copy: Option<bench::CopyFigures>,
}

fn store(dir: &tempfile::TempDir) -> anyhow::Result<Arc<ParquetLakeStore>> {
    let path = dir.path().to_str().ok_or_else(|| anyhow::anyhow!("temporary directory path is not UTF-8"))?;
    Ok(Arc::new(ParquetLakeStore::open(path)?))
}

pub fn run(args: PostgresBenchArgs) -> anyhow::Result<()> {
    let mut report = Report::default();
    let runs: Vec<&str> = args.runs.split(',').map(str::trim).collect();
    if runs.contains(&"throughput") {
        let dir = tempfile::Builder::new().prefix("retina-bench-").tempdir()?;
        let figures = bench::throughput(&args.url, store(&dir)?, EngineConfig::default(), args.rows)?;
        println!(
            "throughput: {} row changes in {:.2} s = {:.0}/s using {:.2} cores here, walsender {}; PostgreSQL decoding the same backlog alone (SQL function, no walsender): {:.2} s = {:.0}/s",
            figures.row_changes,
            figures.seconds,
            figures.row_changes_per_second,
            figures.retina_cpu_share,
            figures.walsender_cpu_share.map_or("not measured (remote server)".to_string(), |share| format!("{share:.2} cores")),
            figures.postgres_decode_seconds,
            figures.postgres_decode_per_second
        );
        report.throughput = Some(figures);
    }
    if runs.contains(&"freshness") {
        let dir = tempfile::Builder::new().prefix("retina-bench-").tempdir()?;
        let figures = bench::freshness(&args.url, store(&dir)?, EngineConfig::default(), args.rate, args.seconds)?;
        println!(
            "freshness at {} row changes/s (achieved {:.0}/s, {} transactions): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            figures.target_row_changes_per_second, figures.achieved_row_changes_per_second, figures.transactions, figures.p50_ms, figures.p99_ms, figures.max_ms
        );
        report.freshness = Some(figures);
    }
    if runs.contains(&"copy") {
        let dir = tempfile::Builder::new().prefix("retina-bench-").tempdir()?;
        let figures = bench::copy(&args.url, store(&dir)?, EngineConfig::default(), args.copy_rows)?;
        println!("initial copy: {} rows in {:.2} s = {:.0} rows/s", figures.rows, figures.seconds, figures.rows_per_second);
        report.copy = Some(figures);
    }
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}
