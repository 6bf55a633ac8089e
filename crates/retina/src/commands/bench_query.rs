//! `retina bench query`: query-performance consistency, the paper's Figure 9 method.
//! The CH-benCHmark SQL queries run on the freshly loaded base data (static), then
//! again while the change stream replays at `--rate` row changes/s after a `--delta`
//! share of the base has changed (live). `query_slowdown_ratio` is the geomean of
//! live latencies over the geomean of static ones (target <= 1.05). The same queries
//! also run in plain DataFusion over a Parquet export of the static snapshot: the
//! geomean ratio `retina_vs_datafusion_ratio` shows what the Retina layer costs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use futures::StreamExt;
use retina_bench::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig};
use retina_query::chbench_queries::QUERIES;
use retina_query::datafusion::prelude::SessionContext;
use retina_query::export::{export_snapshot, plain_context};
use retina_query::{QuerySnapshot, RetinaSession, SessionOptions, SourceRegistry};
use retina_storage::ParquetLakeStore;
use serde::Serialize;

use super::progress::TerminalProgress;

#[derive(Args)]
pub struct QueryBenchArgs {
    /// Rows in the initial database.
    #[arg(long, default_value_t = 200_000)]
    base_rows: u64,
    /// Background row changes per second during the live phase.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Share of the base rows changed before the live measurements start.
    #[arg(long, default_value_t = 0.01)]
    delta: f64,
    /// Timed runs of every query per phase (after one warm-up run).
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep the Parquet export of the static snapshot (and `queries.json`, the SQL of
    /// every query) in this directory, e.g. to run the same queries in another engine
    /// (`scripts/duckdb_queries.py`).
    #[arg(long)]
    keep_copy: Option<std::path::PathBuf>,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct QueryTimes {
    name: &'static str,
    static_ms: f64,
    live_ms: f64,
    datafusion_ms: f64,
}

#[derive(Serialize)]
struct QueryBenchReport {
    base_rows: u64,
    rate: u64,
    delta: f64,
    repetitions: usize,
    queries: Vec<QueryTimes>,
    static_geomean_ms: f64,
    live_geomean_ms: f64,
    datafusion_geomean_ms: f64,
    /// Live geomean / static geomean (paper's Figure 9; target <= 1.05).
    query_slowdown_ratio: f64,
    /// Retina (static) geomean / plain DataFusion over the exported Parquet files.
    retina_vs_datafusion_ratio: f64,
    row_changes_during_live: u64,
    live_row_changes_per_s: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

fn geomean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, count) = values.fold((0.0, 0usize), |(sum, count), v| (sum + v.max(1e-6).ln(), count + 1));
    if count == 0 { 0.0 } else { (sum / count as f64).exp() }
}

async fn time_retina(session: &RetinaSession, sql: &str) -> anyhow::Result<f64> {
    let start = Instant::now();
    let mut stream = session.sql(sql).await?;
    while let Some(batch) = stream.next().await {
        batch?;
    }
    Ok(start.elapsed().as_secs_f64() * 1000.0)
}

async fn time_plain(context: &SessionContext, sql: &str) -> anyhow::Result<f64> {
    let start = Instant::now();
    context.sql(sql).await?.collect().await?;
    Ok(start.elapsed().as_secs_f64() * 1000.0)
}

pub fn run(args: QueryBenchArgs) -> anyhow::Result<()> {
    if args.repetitions == 0 || !(0.0..=1.0).contains(&args.delta) {
        bail!("--repetitions must be positive and --delta within 0..=1");
    }
    let work = tempfile::Builder::new().prefix("retina-bench-query-").tempdir()?;
    let location = work.path().join("lake");
    std::fs::create_dir_all(&location)?;
    let store = ParquetLakeStore::open(location.to_str().context("temp dir is not UTF-8")?)?;
    let engine = Arc::new(Engine::start(EngineConfig::default(), Arc::new(EmbeddedTransactionService::new()), Arc::new(store))?);
    let tables = ChBenchTables::create(&engine)?;
    let mut generator = ChBenchGenerator::new(args.seed, ChBenchScale::for_base_rows(args.base_rows), tables);
    let mut progress = TerminalProgress::new();
    let base_rows = generator.scale().base_rows();
    let mut loaded = 0;
    generator.initial_load(1, 4096, |chunk| {
        loaded += chunk.len() as u64;
        progress.update("initial load", loaded, base_rows);
        engine.submit(chunk).map(|_| ())
    })?;
    engine.wait_for_flushes()?;
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let session = RetinaSession::new(Arc::clone(&engine), SourceRegistry::new(), SessionOptions::default());
    let snapshot = QuerySnapshot::new(engine.snapshot()?);
    let copy_dir = args.keep_copy.clone().unwrap_or_else(|| work.path().join("static-copy"));
    let exported = export_snapshot(&engine, &snapshot, &copy_dir)?;
    drop(snapshot);
    if args.keep_copy.is_some() {
        let queries: Vec<serde_json::Value> =
            QUERIES.iter().map(|q| serde_json::json!({ "name": q.name, "sql": q.sql })).collect();
        std::fs::write(copy_dir.join("queries.json"), serde_json::to_string_pretty(&queries)?)
            .with_context(|| format!("writing queries.json in {}", copy_dir.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let plain = runtime.block_on(plain_context(&exported, threads))?;

    let count = QUERIES.len();
    let mut static_ms = vec![Vec::new(); count];
    let mut plain_ms = vec![Vec::new(); count];
    let mut live_ms = vec![Vec::new(); count];
    runtime.block_on(async {
        for (index, query) in QUERIES.iter().enumerate() {
            time_retina(&session, query.sql).await.with_context(|| query.name)?; // warm-up
            time_plain(&plain, query.sql).await.with_context(|| query.name)?;
            progress.update("warm-up", index as u64 + 1, count as u64);
        }
        for rep in 0..args.repetitions {
            for (index, query) in QUERIES.iter().enumerate() {
                static_ms[index].push(time_retina(&session, query.sql).await?);
                plain_ms[index].push(time_plain(&plain, query.sql).await?);
            }
            progress.update("static data", rep as u64 + 1, args.repetitions as u64);
        }
        anyhow::Ok(())
    })?;

    // Live phase: replay in the background at the target rate.
    let stop = Arc::new(AtomicBool::new(false));
    let replayed = Arc::new(AtomicU64::new(0));
    let replay = {
        let (engine, stop, replayed, rate) = (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&replayed), args.rate);
        std::thread::spawn(move || -> retina_core::CoreResult<()> {
            let start = Instant::now();
            let mut clock = 2;
            while !stop.load(SeqCst) {
                let due = (start.elapsed().as_secs_f64() * rate as f64) as u64;
                while replayed.load(SeqCst) < due {
                    clock += 1;
                    let (_, txn) = generator.next_transaction(clock);
                    replayed.fetch_add(txn.len() as u64, SeqCst);
                    engine.submit(txn)?;
                }
                engine.flush_batch()?;
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(())
        })
    };
    let delta_rows = (base_rows as f64 * args.delta) as u64;
    while replayed.load(SeqCst) < delta_rows && !replay.is_finished() {
        progress.update("building the delta", replayed.load(SeqCst), delta_rows);
        std::thread::sleep(Duration::from_millis(20));
    }
    let live_start = (Instant::now(), replayed.load(SeqCst));
    let measured = runtime.block_on(async {
        for rep in 0..args.repetitions {
            for (index, query) in QUERIES.iter().enumerate() {
                live_ms[index].push(time_retina(&session, query.sql).await?);
            }
            progress.update("under replay", rep as u64 + 1, args.repetitions as u64);
        }
        anyhow::Ok(())
    });
    let live_seconds = live_start.0.elapsed().as_secs_f64();
    let live_changes = replayed.load(SeqCst) - live_start.1;
    stop.store(true, SeqCst);
    replay.join().map_err(|_| anyhow::anyhow!("the replay thread panicked"))??;
    measured?;
    progress.finish();
    drop(session);
    drop(plain);
    runtime.shutdown_timeout(Duration::from_secs(2));

    let queries: Vec<QueryTimes> = QUERIES
        .iter()
        .enumerate()
        .map(|(i, q)| QueryTimes {
            name: q.name,
            static_ms: median(static_ms[i].clone()),
            live_ms: median(live_ms[i].clone()),
            datafusion_ms: median(plain_ms[i].clone()),
        })
        .collect();
    let static_geomean_ms = geomean(queries.iter().map(|q| q.static_ms));
    let live_geomean_ms = geomean(queries.iter().map(|q| q.live_ms));
    let datafusion_geomean_ms = geomean(queries.iter().map(|q| q.datafusion_ms));
    let report = QueryBenchReport {
        base_rows,
        rate: args.rate,
        delta: args.delta,
        repetitions: args.repetitions,
        static_geomean_ms,
        live_geomean_ms,
        datafusion_geomean_ms,
        query_slowdown_ratio: live_geomean_ms / static_geomean_ms,
        retina_vs_datafusion_ratio: static_geomean_ms / datafusion_geomean_ms,
        row_changes_during_live: live_changes,
        live_row_changes_per_s: live_changes as f64 / live_seconds.max(1e-9),
        queries,
    };
    println!("{:<12} {:>12} {:>12} {:>14}", "query", "static ms", "live ms", "DataFusion ms");
    for q in &report.queries {
        println!("{:<12} {:>12.2} {:>12.2} {:>14.2}", q.name, q.static_ms, q.live_ms, q.datafusion_ms);
    }
    println!(
        "geomean: static {:.2} ms, live {:.2} ms ({:.0} row changes/s), plain DataFusion {:.2} ms",
        report.static_geomean_ms, report.live_geomean_ms, report.live_row_changes_per_s, report.datafusion_geomean_ms
    );
    println!(
        "query_slowdown_ratio {:.3} (target <= 1.05); retina_vs_datafusion_ratio {:.3}",
        report.query_slowdown_ratio, report.retina_vs_datafusion_ratio
    );
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    drop(engine);
    Ok(())
}
