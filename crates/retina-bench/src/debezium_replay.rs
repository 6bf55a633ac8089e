//! CDC benchmarks behind `retina bench replay --format debezium` and `retina bench
//! freshness`: the CH-benCHmark-like stream as Debezium JSON through the real decoder
//! and sink.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use retina_workload::chbench::{schemas, DISTRICT};
use retina_workload::chbench::ChBenchScale;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig};
use retina_storage::ParquetLakeStore;
use serde::Serialize;

use retina_cdc::debezium::{decode_line, EncoderOptions, Line, Message, Op, SchemaElider};
use retina_cdc::error::{CdcError, CdcResult};
use retina_cdc::ingest::{run, IngestReport, StopWhen};
use retina_cdc::position::Position;
use retina_cdc::sink::SinkOptions;
use retina_cdc::source::{MessageSource, SourceEvent};
use retina_cdc::source::generator::EncodedChunk;
use retina_cdc::source::generator::{now_micros, pre_encode, GeneratorSource};
use retina_cdc::source::uri::GeneratorSpec;

use crate::measure::{process_cpu_seconds, thread_cpu_seconds, Latency};

fn start_engine(data_dir: &std::path::Path, config: EngineConfig) -> CdcResult<Engine> {
    let location = data_dir.to_str().ok_or_else(|| CdcError::InvalidOption(format!("{} is not UTF-8", data_dir.display())))?;
    let store = Arc::new(ParquetLakeStore::open(location).map_err(|e| CdcError::InvalidOption(format!("data dir {}: {e}", retina_storage::redacted(location))))?);
    Ok(Engine::start(config, Arc::new(EmbeddedTransactionService::new()), store)?)
}

#[derive(Clone, Debug)]
pub struct DebeziumReplayConfig {
    pub base_rows: u64,
    pub row_changes: u64,
    pub shards: usize,
    pub seed: u64,
    /// How each line is written: bare payloads, or with Kafka Connect's schema
    /// envelope and key (`JsonConverter` with `schemas.enable=true`, its default).
    pub encoding: EncoderOptions,
}

#[derive(Clone, Debug, Serialize)]
pub struct DebeziumReplayReport {
    pub base_rows: u64,
    pub row_changes: u64,
    pub transactions: u64,
    pub events: u64,
    pub json_bytes: u64,
    /// Messages (change events + BEGIN/END) decoded per second, images included.
    pub decode_events_per_s: f64,
    pub decode_mb_per_s: f64,
    /// The same per second of the decoding thread's own CPU time (Linux): the figure
    /// a busy shared machine does not distort.
    pub decode_events_per_cpu_s: Option<f64>,
    /// Debezium JSON lines to visible mirror transactions, per second.
    pub row_changes_per_s: f64,
    pub replay_seconds: f64,
    /// CPU time all threads of the process used meanwhile (Linux): with `shards` + 1
    /// busy threads on a shared 2-core machine, wall time alone understates the rate.
    pub replay_cpu_seconds: Option<f64>,
    pub shards: usize,
    /// What each line carried: `"payload"`, `"envelope"`, with `"+key"` when keyed.
    pub encoding: &'static str,
}

/// The replay benchmarks' set-up: the stream encoded up front (load, changes) and an
/// engine with the CH-benCHmark tables.
pub(crate) fn encoded_workload(
    config: &DebeziumReplayConfig,
    data_dir: &std::path::Path,
) -> CdcResult<(Engine, Vec<EncodedChunk>, Vec<EncodedChunk>)> {
    let spec = GeneratorSpec { base_rows: config.base_rows, seed: config.seed, ..GeneratorSpec::default() };
    let (load, changes) = pre_encode(&spec, config.row_changes, config.encoding)?;
    let engine_config =
        EngineConfig { shards: config.shards, gc_interval: Some(Duration::from_secs(1)), ..EngineConfig::default() };
    let engine = start_engine(data_dir, engine_config)?;
    for schema in schemas() {
        engine.create_table(schema)?;
    }
    Ok((engine, load, changes))
}

/// Encodes the stream up front, then times (1) decoding alone and (2) decode +
/// reconstruct + replay until visible.
pub fn replay_debezium(config: &DebeziumReplayConfig, data_dir: &std::path::Path) -> CdcResult<DebeziumReplayReport> {
    let (engine, load, changes) = encoded_workload(config, data_dir)?;
    let mut load_source = ChunkSource::new(&load, 0);
    let loaded = run(&engine, "generator:chbench", &mut load_source, SinkOptions::default(), StopWhen::default())?;

    // Decode alone: envelope and both images, as the sink does.
    let plans: Vec<_> = schemas().iter().map(|s| (s.name().to_string(), retina_cdc::sink::tables::plan_of_schema(s))).collect();
    let plans = plans.into_iter().map(|(n, p)| p.map(|p| (n, p))).collect::<Result<std::collections::HashMap<_, _>, _>>()
        .map_err(|e| CdcError::InvalidOption(e.to_string()))?;
    let (mut events, mut bytes) = (0u64, 0u64);
    let cpu_start = thread_cpu_seconds();
    let start = Instant::now();
    for chunk in &changes {
        bytes += chunk.text.len() as u64;
        for line in chunk.text.lines() {
            events += 1;
            let message = decode_line(line).map_err(|error| CdcError::Decode { position: Position::generated(events), table: None, error })?;
            if let Message::Change(event) = message {
                let plan = plans.get(&event.table).ok_or_else(|| CdcError::InvalidOption(format!("unknown table {}", event.table)))?;
                let decoded = match (event.op, &event.after, &event.before) {
                    (Op::Delete, _, Some(before)) => plan.decode_key(before).map(|_| ()),
                    (_, Some(after), _) => plan.decode_row(after).map(|_| ()),
                    _ => Ok(()),
                };
                decoded.map_err(|error| CdcError::Decode { position: Position::generated(events), table: Some(event.table.clone()), error })?;
            }
        }
    }
    let decode_seconds = start.elapsed().as_secs_f64();
    let decode_cpu_seconds = thread_cpu_seconds().zip(cpu_start).map(|(end, start)| end - start);

    let process_cpu_start = process_cpu_seconds();
    let start = Instant::now();
    let mut change_source = ChunkSource::new(&changes, load_source.position);
    let replayed = run(&engine, "generator:chbench", &mut change_source, SinkOptions::default(), StopWhen::default())?;
    let replay_seconds = start.elapsed().as_secs_f64();
    let replay_cpu_seconds = process_cpu_seconds().zip(process_cpu_start).map(|(end, start)| end - start);
    let row_changes: u64 = changes.iter().map(|c| c.row_changes).sum();
    Ok(DebeziumReplayReport {
        base_rows: loaded.stats.row_changes_applied,
        row_changes,
        transactions: replayed.stats.transactions_applied,
        events,
        json_bytes: bytes,
        decode_events_per_s: events as f64 / decode_seconds,
        decode_mb_per_s: bytes as f64 / decode_seconds / 1e6,
        decode_events_per_cpu_s: decode_cpu_seconds.filter(|s| *s > 0.0).map(|s| events as f64 / s),
        row_changes_per_s: row_changes as f64 / replay_seconds,
        replay_seconds,
        replay_cpu_seconds,
        shards: engine.config().shards,
        encoding: match (config.encoding.with_schemas, config.encoding.with_keys) {
            (true, true) => "envelope+key",
            (true, false) => "envelope",
            (false, true) => "payload+key",
            (false, false) => "payload",
        },
    })
}

#[derive(Clone, Debug)]
pub struct FreshnessConfig {
    pub base_rows: u64,
    pub rate: u64,
    pub seconds: f64,
    pub shards: usize,
    /// Pause between freshness queries.
    pub query_interval: Duration,
    /// The engine's memory-GC period (`None`: no periodic GC).
    pub gc_interval: Option<Duration>,
    /// The engine's checkpoint period (`None`: none while it runs).
    pub checkpoint_interval: Option<Duration>,
    /// The engine's `background_nice`.
    pub background_nice: i32,
}

#[derive(Clone, Debug, Serialize)]
pub struct FreshnessReport {
    pub rate: u64,
    /// The whole run, base load included.
    pub seconds: f64,
    pub row_changes: u64,
    /// Row changes after the base load, per second since it became visible.
    pub row_changes_per_s: f64,
    pub queries: usize,
    pub freshness_p50_ms: f64,
    pub freshness_p99_ms: f64,
    pub freshness_max_ms: f64,
    pub gc_interval_ms: Option<u64>,
}

/// The generator's stream at `rate`, as it would feed a mirror: its spec.
pub fn freshness_stream(config: &FreshnessConfig) -> GeneratorSpec {
    GeneratorSpec {
        rate: Some(config.rate),
        duration: Some(Duration::from_secs_f64(config.seconds)),
        base_rows: config.base_rows,
        ..GeneratorSpec::default()
    }
}

/// Streams `generator:chbench` at `rate` through the sink while a query thread takes
/// snapshots and measures `now − max(district.fresh_ts)` (HyBench's freshness).
pub fn freshness(config: &FreshnessConfig, data_dir: &std::path::Path) -> CdcResult<FreshnessReport> {
    let spec = freshness_stream(config);
    freshness_of(config, data_dir, move |engine| {
        let mut source = GeneratorSource::start(spec)?;
        run(engine, "generator:chbench", &mut source, SinkOptions::default(), StopWhen::default())
    })
}

/// The freshness measurement around `feed`, which brings the generator's stream
/// ([`freshness_stream`]: base load, then changes stamped with their generation time)
/// into `engine` by any path and returns once it is all applied.
pub fn freshness_of(
    config: &FreshnessConfig,
    data_dir: &std::path::Path,
    feed: impl FnOnce(&Arc<Engine>) -> CdcResult<IngestReport>,
) -> CdcResult<FreshnessReport> {
    let engine_config = EngineConfig {
        shards: config.shards,
        gc_interval: config.gc_interval,
        checkpoint_interval: config.checkpoint_interval,
        background_nice: config.background_nice,
        ..EngineConfig::default()
    };
    let engine = Arc::new(start_engine(data_dir, engine_config)?);
    let stop = Arc::new(AtomicBool::new(false));
    let measuring = Arc::new(AtomicBool::new(false));
    // (query start, newest fresh_ts seen), both in microseconds.
    let samples = Arc::new(Mutex::new(Vec::<(i64, i64)>::new()));
    let query_thread = {
        let (engine, stop, measuring, samples, interval) =
            (Arc::clone(&engine), Arc::clone(&stop), Arc::clone(&measuring), Arc::clone(&samples), config.query_interval);
        std::thread::spawn(move || -> CdcResult<()> {
            // RETINA_FRESHNESS_TRACE=1: print every sample above 20 ms with what the
            // engine was doing (for finding where the tail comes from).
            let trace = std::env::var_os("RETINA_FRESHNESS_TRACE").is_some();
            let trace_start = Instant::now();
            while !stop.load(SeqCst) {
                std::thread::sleep(interval);
                let Some(district) = engine.table_id(DISTRICT) else { continue };
                let started = now_micros();
                let snapshot = engine.snapshot()?;
                // district.fresh_ts is column 6; nearly every transaction updates a district.
                let newest = retina_workload::chbench::queries::newest_fresh_ts(&engine, district, 6, &snapshot)?;
                if let (true, Some(newest)) = (measuring.load(SeqCst), newest) {
                    let sample = (started - newest).max(0) as f64 / 1000.0;
                    if trace && sample > 20.0 {
                        let stats = engine.stats();
                        eprintln!(
                            "trace: {:.3} s freshness {sample:.1} ms flushed {} checkpoints {} gc {} hwm {}",
                            trace_start.elapsed().as_secs_f64(), stats.files_flushed, stats.checkpoints, stats.gc_runs, stats.high_watermark.0
                        );
                    }
                    if let Ok(mut samples) = samples.lock() {
                        samples.push((started, newest));
                    }
                }
            }
            Ok(())
        })
    };
    let result = {
        // The base load arrives first (its fresh_ts is the load time): measure after it.
        let start = Instant::now();
        let load_rows = base_rows_of(config.base_rows);
        let engine_for_sink = Arc::clone(&engine);
        let flag = Arc::clone(&measuring);
        // Set once `feed` returned: a feed that failed before the load arrived must
        // not leave this thread waiting for it.
        let fed = Arc::new(AtomicBool::new(false));
        let fed_seen = Arc::clone(&fed);
        let flag_thread = std::thread::spawn(move || {
            // Measure only once the whole base load is visible (timestamps are handed
            // out 1, 2, ... to this engine's only source), plus a short warm-up.
            while engine_for_sink.stats().row_changes < load_rows && !fed_seen.load(SeqCst) {
                std::thread::sleep(Duration::from_millis(2));
            }
            let load_transactions = engine_for_sink.stats().transactions;
            while engine_for_sink.stats().high_watermark.0 <= load_transactions
                && engine_for_sink.failure().is_none()
                && !fed_seen.load(SeqCst)
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            let load_visible = Instant::now();
            // The load's files are still being written for a second or two, which is
            // a start-up transient, not the steady state the figure is about.
            let _ = engine_for_sink.wait_for_flushes();
            std::thread::sleep(Duration::from_millis(500));
            flag.store(true, SeqCst);
            load_visible
        });
        let report = feed(&engine);
        fed.store(true, SeqCst);
        let load_visible = flag_thread.join().unwrap_or(start);
        (report, start.elapsed().as_secs_f64(), load_visible.elapsed().as_secs_f64())
    };
    stop.store(true, SeqCst);
    let queries = query_thread.join().map_err(|_| CdcError::InvalidOption("query thread panicked".into()));
    let (report, seconds, change_seconds) = result;
    let report = report?;
    queries??;
    let samples = freshness_samples(&samples.lock().map(|s| s.clone()).unwrap_or_default());
    let latency = Latency::of(samples);
    let row_changes = report.stats.row_changes_applied.saturating_sub(base_rows_of(config.base_rows));
    Ok(FreshnessReport {
        rate: config.rate,
        seconds,
        row_changes,
        row_changes_per_s: row_changes as f64 / change_seconds.max(1e-9),
        queries: latency.count,
        freshness_p50_ms: latency.p50_ms,
        freshness_p99_ms: latency.p99_ms,
        freshness_max_ms: latency.max_ms,
        gc_interval_ms: config.gc_interval.map(|d| d.as_millis() as u64),
    })
}

fn base_rows_of(target: u64) -> u64 {
    ChBenchScale::for_base_rows(target).base_rows()
}

/// Freshness in ms of each (query start, newest fresh_ts seen) sample taken while the
/// stream was still producing: a query that starts after the last transaction was
/// generated measures how long the stream has been over, not how fresh the data is.
fn freshness_samples(samples: &[(i64, i64)]) -> Vec<f64> {
    let last_generated = samples.iter().map(|&(_, newest)| newest).max().unwrap_or(0);
    samples
        .iter()
        .filter(|&&(started, _)| started <= last_generated)
        .map(|&(started, newest)| (started - newest).max(0) as f64 / 1000.0)
        .collect()
}

/// Pre-encoded chunks as a finite source (positions continue after `start`).
struct ChunkSource<'c> {
    chunks: &'c [EncodedChunk],
    chunk: usize,
    offset: usize,
    position: u64,
}

impl<'c> ChunkSource<'c> {
    fn new(chunks: &'c [EncodedChunk], start: u64) -> Self {
        Self { chunks, chunk: 0, offset: 0, position: start }
    }
}

impl MessageSource for ChunkSource<'_> {
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        retina_cdc::source::next_whole(buffer, |line, elider| self.next_line(line, elider))
    }

    /// Read as `LineSource` reads a file (the same elision of known schemas), so the
    /// benchmark's reading thread costs what a file's does.
    fn next_line(&mut self, line: &mut Line, elider: &mut SchemaElider) -> CdcResult<SourceEvent> {
        while let Some(chunk) = self.chunks.get(self.chunk) {
            let rest = &chunk.text[self.offset..];
            if rest.is_empty() {
                self.chunk += 1;
                self.offset = 0;
                continue;
            }
            // The vectorized search `LineSource` reads files with (std's is several
            // times slower on ~2 KB lines).
            let end = memchr::memchr(b'\n', rest.as_bytes()).unwrap_or(rest.len());
            elider.fill_text(line, &rest[..end]).map_err(|e| CdcError::Source {
                source_name: "generated chunks".into(),
                reason: format!("no character boundary at byte {}", e.valid_up_to),
            })?;
            self.offset += (end + 1).min(rest.len());
            self.position += 1;
            return Ok(SourceEvent::Message(Position::generated(self.position)));
        }
        Ok(SourceEvent::End)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_taken_after_the_stream_ended_are_not_freshness() {
        // The last transaction was generated at 1_000; queries at 1_010 and 1_020
        // still see it, and only measure the idle time since.
        let samples = [(900, 890), (1_000, 990), (1_010, 1_000), (1_020, 1_000)];
        assert_eq!(freshness_samples(&samples), vec![0.01, 0.01]);
        assert!(freshness_samples(&[]).is_empty());
    }
}
