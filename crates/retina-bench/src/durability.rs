//! `retina bench durability`: what checkpoints cost and what recovery takes.
//!
//! 1. Checkpoint pause: a steady CH-benCHmark-like stream at a fixed rate, each
//!    group commit timed from send to visible, once with checkpoints every
//!    `checkpoint_every` and once without; the p99 difference is the pause that
//!    checkpoints add to replay.
//! 2. Visibility memory under steady load with GC on, sampled every second.
//! 3. Recovery: the engine is dropped without a clean shutdown and reopened; the
//!    time to rebuild its state is reported per million rows.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_core::{CoreError, CoreResult, Engine, EngineConfig, RowChange};
use retina_storage::ParquetLakeStore;
use serde::Serialize;

use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use crate::measure::Latency;
use crate::progress::Progress;

#[derive(Clone, Debug)]
pub struct DurabilityBenchConfig {
    pub base_rows: u64,
    /// Row changes per second of the steady stream.
    pub rate: u64,
    pub seconds: f64,
    pub checkpoint_every: Duration,
    pub seed: u64,
    /// Row changes replayed flat out for the storage-GC comparison (each side).
    pub gc_effect_changes: u64,
}

impl Default for DurabilityBenchConfig {
    fn default() -> Self {
        Self {
            base_rows: 1_000_000,
            rate: 200_000,
            seconds: 10.0,
            checkpoint_every: Duration::from_millis(500),
            seed: 42,
            gc_effect_changes: 2_000_000,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct DurabilityReport {
    pub rate: u64,
    pub seconds: f64,
    pub commit_latency_with_checkpoints: Latency,
    pub commit_latency_without_checkpoints: Latency,
    /// p99 commit latency with checkpoints minus without (0 if checkpoints cost nothing).
    pub checkpoint_pause_p99_ms: f64,
    pub checkpoints_taken: u64,
    pub checkpoint_ms: f64,
    pub checkpoint_buffered_rows: u64,
    /// Visibility bits per tuple sampled once a second under load (GC on).
    pub visibility_bits_per_tuple_max: f64,
    pub visibility_bits_per_tuple_last: f64,
    pub recovered_rows: u64,
    pub recovery_ms: f64,
    pub recovery_ms_per_million_rows: f64,
    /// Replay of the same amount of pre-generated changes, flat out, without and
    /// with storage GC rewriting files at the same time.
    pub replay_changes_per_s_without_storage_gc: f64,
    pub replay_changes_per_s_with_storage_gc: f64,
    /// 1 - with / without (target <= 0.10).
    pub replay_drop_during_storage_gc: f64,
    pub storage_gc_rows_rewritten: u64,
    pub storage_gc_rows_per_s: f64,
}

struct SteadyRun {
    commit_latency: Latency,
    checkpoints: u64,
    bits_per_tuple: Vec<f64>,
}

fn engine_in(dir: &Path, checkpoint_every: Option<Duration>) -> CoreResult<Engine> {
    let location = dir.to_str().ok_or_else(|| CoreError::Storage(format!("{} is not UTF-8", dir.display())))?;
    let config = EngineConfig { checkpoint_interval: checkpoint_every, ..EngineConfig::default() };
    Engine::open(config, Arc::new(ParquetLakeStore::open(location)?))
}

fn load(engine: &Engine, config: &DurabilityBenchConfig, progress: Progress) -> CoreResult<ChBenchGenerator> {
    let tables = ChBenchTables::create(engine)?;
    let scale = ChBenchScale::for_base_rows(config.base_rows);
    let mut generator = ChBenchGenerator::new(config.seed, scale, tables);
    let total = scale.base_rows();
    let mut loaded = 0;
    generator.initial_load(0, 4096, |chunk| {
        loaded += chunk.len() as u64;
        progress("load", loaded, total);
        engine.submit(chunk).map(|_| ())
    })?;
    engine.sync()?;
    Ok(generator)
}

/// Replays at `rate` for `seconds`, timing each group commit until visible.
fn steady(engine: &Engine, generator: &mut ChBenchGenerator, config: &DurabilityBenchConfig, phase: &str, progress: Progress) -> CoreResult<SteadyRun> {
    let start = Instant::now();
    let mut changes = 0u64;
    let mut latencies = Vec::new();
    let mut bits_per_tuple = Vec::new();
    let mut last_sample = Instant::now();
    let checkpoints_before = engine.stats().checkpoints;
    while start.elapsed().as_secs_f64() < config.seconds {
        let due = (start.elapsed().as_secs_f64() * config.rate as f64) as u64;
        let mut last = None;
        while changes < due {
            let (_, txn) = generator.next_transaction(0);
            changes += txn.len() as u64;
            last = Some(engine.submit(txn)?);
        }
        if let Some(ts) = last {
            let sent = Instant::now();
            engine.flush_batch()?;
            engine.wait_visible(ts)?;
            latencies.push(sent.elapsed().as_secs_f64() * 1000.0);
        }
        if last_sample.elapsed() >= Duration::from_secs(1) {
            bits_per_tuple.push(engine.stats().visibility_bits_per_tuple());
            last_sample = Instant::now();
            progress(phase, (start.elapsed().as_secs_f64() * 1000.0) as u64, (config.seconds * 1000.0) as u64);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(SteadyRun {
        commit_latency: Latency::of(latencies),
        checkpoints: engine.stats().checkpoints - checkpoints_before,
        bits_per_tuple,
    })
}

/// Replays `batches` flat out; returns row changes per second.
fn replay_flat_out(engine: &Engine, batches: Vec<Vec<RowChange>>) -> CoreResult<f64> {
    let changes: usize = batches.iter().map(Vec::len).sum();
    let start = Instant::now();
    for txn in batches {
        engine.submit(txn)?;
    }
    engine.sync()?;
    Ok(changes as f64 / start.elapsed().as_secs_f64())
}

/// Storage GC's cost to replay: the same volume replayed without and with a
/// concurrent storage-GC loop (threshold 0: every file with a stale row is rewritten).
fn storage_gc_effect(engine: &Engine, generator: &mut ChBenchGenerator, changes: u64) -> CoreResult<(f64, f64, u64, f64)> {
    let stream = |generator: &mut ChBenchGenerator| {
        let mut out = Vec::new();
        let mut total = 0;
        while total < changes {
            let (_, txn) = generator.next_transaction(0);
            total += txn.len() as u64;
            out.push(txn);
        }
        out
    };
    let first = stream(generator);
    let second = stream(generator);
    engine.collect_garbage();
    let without = replay_flat_out(engine, first)?;
    engine.collect_garbage();
    let stop = AtomicBool::new(false);
    let (with, (rewritten, gc_seconds)) = std::thread::scope(|scope| -> CoreResult<_> {
        let gc = scope.spawn(|| -> CoreResult<(u64, f64)> {
            let (mut rows, mut seconds) = (0u64, 0.0);
            // One more round once the replay is done and its full files are flushed: on
            // busy cores a short replay can end before a round finds a stale flushed
            // file, and the files it left stale are part of the work this measures.
            loop {
                let replay_done = stop.load(SeqCst);
                if replay_done {
                    engine.wait_for_flushes()?;
                }
                engine.collect_garbage();
                let report = engine.collect_storage_garbage(0.0)?;
                rows += report.rows_kept;
                seconds += report.millis / 1000.0;
                if replay_done {
                    return Ok((rows, seconds));
                }
            }
        });
        let with = replay_flat_out(engine, second);
        stop.store(true, SeqCst);
        let gc = gc.join().map_err(|_| CoreError::EngineStopped { reason: "storage GC thread panicked".into() })??;
        Ok((with?, gc))
    })?;
    Ok((without, with, rewritten, rewritten as f64 / gc_seconds.max(1e-9)))
}

pub fn run(config: &DurabilityBenchConfig, work_dir: &Path, progress: Progress) -> CoreResult<DurabilityReport> {
    // Without checkpoints first (a separate lakehouse), then with them.
    let without = {
        let engine = engine_in(&work_dir.join("without"), None)?;
        let mut generator = load(&engine, config, progress)?;
        steady(&engine, &mut generator, config, "steady, no checkpoints", progress)?
    };
    let dir = work_dir.join("with");
    let (with, checkpoint, mut generator) = {
        let engine = engine_in(&dir, Some(config.checkpoint_every))?;
        let mut generator = load(&engine, config, progress)?;
        let with = steady(&engine, &mut generator, config, "steady, with checkpoints", progress)?;
        engine.sync()?;
        let checkpoint = engine.checkpoint()?;
        (with, checkpoint, generator)
        // Dropped here without `close`: recovery below starts from that checkpoint,
        // which holds everything, so the generator's state still matches the data.
    };
    let started = Instant::now();
    let engine = engine_in(&dir, None)?;
    let recovery_ms = started.elapsed().as_secs_f64() * 1000.0;
    progress("storage GC effect", 0, 1);
    let (without_gc, with_gc, rewritten, gc_rows_per_s) = storage_gc_effect(&engine, &mut generator, config.gc_effect_changes)?;
    let report = engine.recovery_report().cloned().ok_or_else(|| CoreError::Storage("the engine did not recover".into()))?;
    let recovered_rows = report.rows_scanned;
    Ok(DurabilityReport {
        rate: config.rate,
        seconds: config.seconds,
        checkpoint_pause_p99_ms: (with.commit_latency.p99_ms - without.commit_latency.p99_ms).max(0.0),
        commit_latency_with_checkpoints: with.commit_latency,
        commit_latency_without_checkpoints: without.commit_latency,
        checkpoints_taken: with.checkpoints,
        checkpoint_ms: checkpoint.millis,
        checkpoint_buffered_rows: checkpoint.buffered_rows,
        visibility_bits_per_tuple_max: with.bits_per_tuple.iter().copied().fold(0.0, f64::max),
        visibility_bits_per_tuple_last: with.bits_per_tuple.last().copied().unwrap_or(0.0),
        recovered_rows,
        recovery_ms,
        recovery_ms_per_million_rows: recovery_ms / (recovered_rows.max(1) as f64 / 1e6),
        replay_changes_per_s_without_storage_gc: without_gc,
        replay_changes_per_s_with_storage_gc: with_gc,
        replay_drop_during_storage_gc: 1.0 - with_gc / without_gc,
        storage_gc_rows_rewritten: rewritten,
        storage_gc_rows_per_s: gc_rows_per_s,
    })
}
