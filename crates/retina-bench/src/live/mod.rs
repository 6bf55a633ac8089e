//! The live workload behind `retina demo`: the CH-benCHmark-like stream replayed at a
//! target rate into a data dir while analytical queries run on fresh snapshots.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use retina_core::{CoreError, CoreResult, Engine, EngineConfig, RowChange};
use retina_storage::ParquetLakeStore;
use retina_workload::chbench::queries;
use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use serde::Serialize;

pub use crate::measure::Latency;
use crate::progress::Progress;

mod debezium_feed;
pub use debezium_feed::DebeziumFeed;

#[derive(Clone, Debug)]
pub struct LiveConfig {
    pub base_rows: u64,
    pub seconds: f64,
    /// Target row changes per second.
    pub rate: u64,
    pub seed: u64,
    /// Publish the lake's checkpoints as open tables (`None`: do not).
    pub publish: Option<retina_storage::PublishOptions>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LiveReport {
    pub base_rows: u64,
    pub seconds: f64,
    pub transactions: u64,
    pub row_changes: u64,
    pub row_changes_per_s: f64,
    /// Query start minus the newest visible source time (HyBench method).
    pub freshness: Latency,
    pub q1_latency: Latency,
    pub consistency_latency: Latency,
    pub stock_level_latency: Latency,
    /// Snapshots where new_order and undelivered orders disagreed (must be 0).
    pub consistency_violations: u64,
    pub visibility_bits_per_tuple: f64,
    pub stored_versions: u64,
    pub files_flushed: u64,
    pub high_watermark: u64,
    pub low_watermark: u64,
}

fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

#[derive(Default)]
struct QuerySamples {
    freshness: Vec<f64>,
    q1: Vec<f64>,
    consistency: Vec<f64>,
    stock: Vec<f64>,
    violations: u64,
}

/// A feed's failure (its own error type, e.g. the CDC sink's).
pub type FeedError = Box<dyn std::error::Error + Send + Sync>;

/// How the generated transactions reach the engine.
pub trait ChangeFeed {
    /// Hands one generated source transaction to the engine (submitted, not
    /// necessarily visible yet).
    fn apply(&mut self, changes: Vec<RowChange>) -> Result<(), FeedError>;
    /// Nothing more is due right now: make what was applied visible (group commit).
    fn idle(&mut self) -> Result<(), FeedError>;
    /// The workload ended: everything applied is submitted (and a feed running on
    /// its own threads has finished them).
    fn finish(self: Box<Self>) -> Result<(), FeedError> {
        Ok(())
    }
}

/// Builds the feed once the engine exists.
pub trait ChangeFeedFactory {
    fn feed(&mut self, engine: &Arc<Engine>) -> Result<Box<dyn ChangeFeed>, FeedError>;
}

/// Submits the generated row changes as they are (no source format in between).
pub struct DirectFeed;

impl ChangeFeedFactory for DirectFeed {
    fn feed(&mut self, engine: &Arc<Engine>) -> Result<Box<dyn ChangeFeed>, FeedError> {
        Ok(Box::new(DirectSubmit { engine: Arc::clone(engine) }))
    }
}

struct DirectSubmit {
    engine: Arc<Engine>,
}

impl ChangeFeed for DirectSubmit {
    fn apply(&mut self, changes: Vec<RowChange>) -> Result<(), FeedError> {
        self.engine.submit(changes)?;
        Ok(())
    }

    fn idle(&mut self) -> Result<(), FeedError> {
        Ok(self.engine.flush_batch()?)
    }
}

fn feed_failed(error: FeedError) -> CoreError {
    CoreError::EngineStopped { reason: format!("the change feed failed: {error}") }
}

/// Runs the live workload in `data_dir` (Parquet files and catalog stay there).
pub fn run(config: &LiveConfig, data_dir: &Path, progress: Progress) -> CoreResult<LiveReport> {
    let (report, engine) = run_with(config, data_dir, progress, &mut DirectFeed, &mut |_| {})?;
    // Clean shutdown: a final checkpoint, so the data dir opens again as it is now.
    engine.flush_and_checkpoint()?;
    Ok(report)
}

/// [`run`] with the change stream going through `feeds` (e.g. encoded as Debezium
/// JSON and replayed by the CDC sink), calling `on_loaded` once the base data is
/// visible (e.g. to start SQL queries or a SQL endpoint beside the built-in queries),
/// and returning the engine so the caller can keep serving its data after the
/// workload ends (and should `close` it for a final checkpoint).
pub fn run_with(
    config: &LiveConfig,
    data_dir: &Path,
    progress: Progress,
    feeds: &mut dyn ChangeFeedFactory,
    on_loaded: &mut dyn FnMut(&Arc<Engine>),
) -> CoreResult<(LiveReport, Arc<Engine>)> {
    let location = data_dir.to_str().ok_or_else(|| CoreError::Storage(format!("{} is not UTF-8", data_dir.display())))?;
    // `open`, so the data dir is checkpointed and can be reopened after the demo.
    let store = ParquetLakeStore::open(location)?.publishing(config.publish);
    let engine = Arc::new(Engine::open(EngineConfig::default(), Arc::new(store))?);
    let tables = ChBenchTables::create(&engine)?;
    let scale = ChBenchScale::for_base_rows(config.base_rows);
    let mut generator = ChBenchGenerator::new(config.seed, scale, tables);
    let base_rows = scale.base_rows();
    let mut loaded = 0;
    generator.initial_load(now_micros(), 4096, |chunk| {
        loaded += chunk.len() as u64;
        progress("initial load", loaded, base_rows);
        engine.submit(chunk).map(|_| ())
    })?;
    engine.sync()?;
    on_loaded(&engine);

    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(Mutex::new(QuerySamples::default()));
    let query_thread = {
        let (engine, stop, samples) = (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&samples));
        std::thread::spawn(move || -> CoreResult<()> {
            while !stop.load(SeqCst) {
                run_queries(&engine, &tables, &samples)?;
            }
            Ok(())
        })
    };

    let start = Instant::now();
    let duration = Duration::from_secs_f64(config.seconds);
    let tick = Duration::from_millis(2);
    let (mut changes, mut transactions) = (0u64, 0u64);
    let mut last_report = Instant::now();
    let mut feed = feeds.feed(&engine).map_err(feed_failed)?;
    while start.elapsed() < duration {
        // Apply what the rate allows so far, then make it visible (group commit).
        let due = (start.elapsed().as_secs_f64() * config.rate as f64) as u64;
        while changes < due {
            let (_, txn) = generator.next_transaction(now_micros());
            changes += txn.len() as u64;
            transactions += 1;
            feed.apply(txn).map_err(feed_failed)?;
        }
        feed.idle().map_err(feed_failed)?;
        if last_report.elapsed() > Duration::from_millis(100) {
            progress("replaying", (start.elapsed().as_secs_f64() * 1000.0) as u64, (config.seconds * 1000.0) as u64);
            last_report = Instant::now();
        }
        std::thread::sleep(tick);
    }
    feed.finish().map_err(feed_failed)?;
    engine.sync()?;
    let seconds = start.elapsed().as_secs_f64();
    stop.store(true, SeqCst);
    query_thread.join().map_err(|_| CoreError::EngineStopped { reason: "query thread panicked".into() })??;
    engine.collect_garbage();
    let stats = engine.stats();
    let samples = std::mem::take(&mut *samples.lock().map_err(|_| CoreError::EngineStopped { reason: "poisoned".into() })?);
    let report = LiveReport {
        base_rows,
        seconds,
        transactions,
        row_changes: changes,
        row_changes_per_s: changes as f64 / seconds,
        freshness: Latency::of(samples.freshness),
        q1_latency: Latency::of(samples.q1),
        consistency_latency: Latency::of(samples.consistency),
        stock_level_latency: Latency::of(samples.stock),
        consistency_violations: samples.violations,
        visibility_bits_per_tuple: stats.visibility_bits_per_tuple(),
        stored_versions: stats.stored_versions,
        files_flushed: stats.files_flushed,
        high_watermark: stats.high_watermark.0,
        low_watermark: stats.low_watermark.0,
    };
    Ok((report, engine))
}

fn run_queries(engine: &Engine, tables: &ChBenchTables, samples: &Mutex<QuerySamples>) -> CoreResult<()> {
    let elapsed_ms = |start: Instant| start.elapsed().as_secs_f64() * 1000.0;
    let started_at = now_micros();
    let start = Instant::now();
    let snapshot = engine.snapshot()?;
    // district.fresh_ts is column 6; districts change in most transactions.
    let newest = queries::newest_fresh_ts(engine, tables.district, 6, &snapshot)?;
    let (new_orders, undelivered) = queries::undelivered_orders(engine, tables, &snapshot)?;
    let consistency_ms = elapsed_ms(start);
    let start = Instant::now();
    queries::ch_q1(engine, tables, &snapshot)?;
    let q1_ms = elapsed_ms(start);
    let start = Instant::now();
    queries::low_stock(engine, tables, &snapshot, 20)?;
    let stock_ms = elapsed_ms(start);
    let mut samples = samples.lock().map_err(|_| CoreError::EngineStopped { reason: "poisoned".into() })?;
    if let Some(newest) = newest {
        samples.freshness.push((started_at - newest).max(0) as f64 / 1000.0);
    }
    samples.consistency.push(consistency_ms);
    samples.q1.push(q1_ms);
    samples.stock.push(stock_ms);
    if new_orders != undelivered {
        samples.violations += 1;
    }
    Ok(())
}
