//! `retina bench query`: query-performance consistency, the paper's Figure 9 method.
//! The CH-benCHmark SQL queries run on the freshly loaded base data (base), then a
//! `--delta` share of the base is changed and the repetitions alternate: every query
//! with the change stream paused (static), then every query while it replays at
//! `--rate` row changes/s (live). `query_slowdown_ratio` is the geomean of the live
//! medians over the geomean of the static ones (target <= 1.05); interleaving them
//! means both see the same data and the same machine, so drift between phases
//! (another process, the delta growing) does not land in one side only.
//! `delta_slowdown_ratio` (static over base) is what the stale versions cost. The
//! same queries also run in plain DataFusion over a Parquet export of the base
//! snapshot: `retina_vs_datafusion_ratio` (base over plain) is what the Retina layer
//! costs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Args;
use futures::StreamExt;
use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig};
use retina_workload::chbench::sql::QUERIES;
use retina_query::datafusion::prelude::SessionContext;
use retina_query::export::{export_snapshot, plain_context};
use retina_query::{QuerySnapshot, RetinaSession, SessionOptions, SourceRegistry};
use retina_storage::ParquetLakeStore;
use serde::Serialize;

use super::progress::TerminalProgress;

#[derive(Args)]
pub struct QueryBenchArgs {
    /// Rows in the initial database.
    #[arg(long, default_value_t = 200_000, conflicts_with = "warehouses")]
    base_rows: u64,
    /// Size the database by CH-benCHmark warehouses instead (about 250K rows each);
    /// e.g. 10, where queries take tens to hundreds of milliseconds and noise matters
    /// less than at the small default.
    #[arg(long)]
    warehouses: Option<u32>,
    /// Background row changes per second during the live phase.
    #[arg(long, default_value_t = 10_000)]
    rate: u64,
    /// Share of the base rows changed before the live measurements start.
    #[arg(long, default_value_t = 0.01)]
    delta: f64,
    /// Timed runs of every query per phase (after one warm-up run); static and live
    /// runs alternate.
    #[arg(long, default_value_t = 5)]
    repetitions: usize,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep the Parquet export of the static snapshot (and `queries.json`, the SQL of
    /// every query) in this directory, e.g. to run the same queries in another engine
    /// (`scripts/duckdb_queries.py`).
    #[arg(long)]
    keep_copy: Option<std::path::PathBuf>,
    /// Where the lake goes: a directory or an object-store URL, e.g.
    /// `s3://bucket/lake?endpoint=http://127.0.0.1:9000&allow_http=true` (default: a
    /// temporary directory). It must be empty.
    #[arg(long)]
    data_dir: Option<String>,
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct QueryTimes {
    name: &'static str,
    base_ms: f64,
    static_ms: f64,
    live_ms: f64,
    datafusion_ms: f64,
    /// Bytes one run fetched from storage, with split and page pruning.
    bytes_fetched: u64,
    /// The same without pruning.
    unpruned_bytes_fetched: u64,
}

#[derive(Serialize)]
struct QueryBenchReport {
    base_rows: u64,
    warehouses: i32,
    rate: u64,
    delta: f64,
    repetitions: usize,
    queries: Vec<QueryTimes>,
    base_geomean_ms: f64,
    static_geomean_ms: f64,
    live_geomean_ms: f64,
    datafusion_geomean_ms: f64,
    /// Live geomean / static geomean (paper's Figure 9; target <= 1.05).
    query_slowdown_ratio: f64,
    /// Static geomean (with the delta) / base geomean (before it).
    delta_slowdown_ratio: f64,
    /// Retina (base) geomean / plain DataFusion over the exported Parquet files.
    retina_vs_datafusion_ratio: f64,
    row_changes_during_live: u64,
    live_row_changes_per_s: f64,
}

/// The middle value (the upper one of an even count); 0 for none.
pub(super) fn median(mut values: Vec<f64>) -> f64 {
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

/// Bytes one run of `sql` fetched from storage (footers cached by earlier runs).
async fn bytes_fetched(session: &RetinaSession, sql: &str) -> anyhow::Result<u64> {
    let before = session.metrics().snapshot().bytes_fetched;
    time_retina(session, sql).await?;
    Ok(session.metrics().snapshot().bytes_fetched - before)
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
    let location = match &args.data_dir {
        Some(location) => location.clone(),
        None => work.path().join("lake").to_str().context("temp dir is not UTF-8")?.to_string(),
    };
    let shown = retina_storage::redacted(&location);
    let store = ParquetLakeStore::open(&location).with_context(|| format!("opening the lake in {shown}"))?;
    let engine = Arc::new(Engine::start(EngineConfig::default(), Arc::new(EmbeddedTransactionService::new()), Arc::new(store))?);
    let tables = ChBenchTables::create(&engine)?;
    let scale = match args.warehouses {
        Some(0) => bail!("--warehouses must be positive"),
        Some(warehouses) => ChBenchScale::for_base_rows(u64::from(warehouses) * 250_000),
        None => ChBenchScale::for_base_rows(args.base_rows),
    };
    let mut generator = ChBenchGenerator::new(args.seed, scale, tables);
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
    let mut base_ms = vec![Vec::new(); count];
    let mut static_ms = vec![Vec::new(); count];
    let mut plain_ms = vec![Vec::new(); count];
    let mut live_ms = vec![Vec::new(); count];
    let mut fetched = vec![(0, 0); count];
    let unpruned = RetinaSession::new(
        Arc::clone(&engine),
        SourceRegistry::new(),
        SessionOptions { prune_splits: false, ..SessionOptions::default() },
    );
    runtime.block_on(async {
        for (index, query) in QUERIES.iter().enumerate() {
            time_retina(&session, query.sql).await.with_context(|| query.name)?; // warm-up
            time_plain(&plain, query.sql).await.with_context(|| query.name)?;
            fetched[index] = (bytes_fetched(&session, query.sql).await?, bytes_fetched(&unpruned, query.sql).await?);
            progress.update("warm-up", index as u64 + 1, count as u64);
        }
        for rep in 0..args.repetitions {
            for (index, query) in QUERIES.iter().enumerate() {
                base_ms[index].push(time_retina(&session, query.sql).await?);
                plain_ms[index].push(time_plain(&plain, query.sql).await?);
            }
            progress.update("base data", rep as u64 + 1, args.repetitions as u64);
        }
        anyhow::Ok(())
    })?;

    // The change stream, in the background at the target rate while not paused.
    let stop = Arc::new(AtomicBool::new(false));
    let pause = Arc::new(AtomicBool::new(false));
    let paused = Arc::new(AtomicBool::new(false));
    let replayed = Arc::new(AtomicU64::new(0));
    let replay = {
        let (engine, stop, replayed, rate) = (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&replayed), args.rate);
        let (pause, paused) = (Arc::clone(&pause), Arc::clone(&paused));
        std::thread::spawn(move || -> retina_core::CoreResult<()> {
            // Running time only: a pause does not build up a burst to catch up on.
            let mut running = Duration::ZERO;
            let mut since = Instant::now();
            let mut clock = 2;
            while !stop.load(SeqCst) {
                if pause.load(SeqCst) {
                    if !paused.load(SeqCst) {
                        running += since.elapsed();
                        engine.wait_for_flushes()?;
                        paused.store(true, SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                if paused.swap(false, SeqCst) {
                    since = Instant::now();
                }
                let due = ((running + since.elapsed()).as_secs_f64() * rate as f64) as u64;
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
    let (mut live_seconds, mut live_changes) = (0.0, 0);
    let measured = runtime.block_on(async {
        for rep in 0..args.repetitions {
            pause.store(true, SeqCst);
            while !paused.load(SeqCst) && !replay.is_finished() {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            for (index, query) in QUERIES.iter().enumerate() {
                static_ms[index].push(time_retina(&session, query.sql).await?);
            }
            pause.store(false, SeqCst);
            let (started, changes_before) = (Instant::now(), replayed.load(SeqCst));
            for (index, query) in QUERIES.iter().enumerate() {
                live_ms[index].push(time_retina(&session, query.sql).await?);
            }
            live_seconds += started.elapsed().as_secs_f64();
            live_changes += replayed.load(SeqCst) - changes_before;
            progress.update("static and live, alternating", rep as u64 + 1, args.repetitions as u64);
        }
        anyhow::Ok(())
    });
    stop.store(true, SeqCst);
    replay.join().map_err(|_| anyhow::anyhow!("the replay thread panicked"))??;
    measured?;
    progress.finish();
    drop(session);
    drop(unpruned);
    drop(plain);
    runtime.shutdown_timeout(Duration::from_secs(2));

    let queries: Vec<QueryTimes> = QUERIES
        .iter()
        .enumerate()
        .map(|(i, q)| QueryTimes {
            name: q.name,
            base_ms: median(base_ms[i].clone()),
            static_ms: median(static_ms[i].clone()),
            live_ms: median(live_ms[i].clone()),
            datafusion_ms: median(plain_ms[i].clone()),
            bytes_fetched: fetched[i].0,
            unpruned_bytes_fetched: fetched[i].1,
        })
        .collect();
    let base_geomean_ms = geomean(queries.iter().map(|q| q.base_ms));
    let static_geomean_ms = geomean(queries.iter().map(|q| q.static_ms));
    let live_geomean_ms = geomean(queries.iter().map(|q| q.live_ms));
    let datafusion_geomean_ms = geomean(queries.iter().map(|q| q.datafusion_ms));
    let report = QueryBenchReport {
        base_rows,
        warehouses: scale.warehouses,
        rate: args.rate,
        delta: args.delta,
        repetitions: args.repetitions,
        base_geomean_ms,
        static_geomean_ms,
        live_geomean_ms,
        datafusion_geomean_ms,
        query_slowdown_ratio: live_geomean_ms / static_geomean_ms,
        delta_slowdown_ratio: static_geomean_ms / base_geomean_ms,
        retina_vs_datafusion_ratio: base_geomean_ms / datafusion_geomean_ms,
        row_changes_during_live: live_changes,
        live_row_changes_per_s: live_changes as f64 / live_seconds.max(1e-9),
        queries,
    };
    println!(
        "{} rows ({} warehouses), medians of {} alternating static/live repetitions",
        report.base_rows, report.warehouses, report.repetitions
    );
    println!(
        "{:<12} {:>10} {:>10} {:>10} {:>14} {:>12} {:>14}",
        "query", "base ms", "static ms", "live ms", "DataFusion ms", "fetched KiB", "unpruned KiB"
    );
    for q in &report.queries {
        println!(
            "{:<12} {:>10.2} {:>10.2} {:>10.2} {:>14.2} {:>12.0} {:>14.0}",
            q.name,
            q.base_ms,
            q.static_ms,
            q.live_ms,
            q.datafusion_ms,
            q.bytes_fetched as f64 / 1024.0,
            q.unpruned_bytes_fetched as f64 / 1024.0
        );
    }
    println!(
        "geomean: base {:.2} ms, static {:.2} ms, live {:.2} ms ({:.0} row changes/s), plain DataFusion {:.2} ms",
        report.base_geomean_ms, report.static_geomean_ms, report.live_geomean_ms, report.live_row_changes_per_s, report.datafusion_geomean_ms
    );
    println!(
        "query_slowdown_ratio {:.3} (target <= 1.05); delta_slowdown_ratio {:.3}; retina_vs_datafusion_ratio {:.3}",
        report.query_slowdown_ratio, report.delta_slowdown_ratio, report.retina_vs_datafusion_ratio
    );
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    }
    drop(engine);
    Ok(())
}
