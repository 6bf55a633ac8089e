//! `generator:chbench?rate=N`: the built-in CH-benCHmark-like workload, encoded as
//! Debezium JSON (BEGIN, events, END per transaction) on a producer thread that plays
//! the source database, and fed through the same decoder and sink as any stream.
//! Every row version carries `fresh_ts` = its source commit time (µs), so a query can
//! measure freshness the HyBench way.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::bounded;
use retina_workload::chbench::{schemas, ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_core::{TableId, TableSchema};

use super::channel::ChannelSource;
use super::uri::GeneratorSpec;
use super::{MessageSource, SourceEvent};
use crate::debezium::{DebeziumEncoder, EncoderOptions};
use crate::error::{CdcError, CdcResult};

/// Microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as i64)
}

pub use super::channel::EncodedChunk;

/// Encodes the generator's initial load and `row_changes` changes up front (benchmarks
/// that time decode and replay only). Returns the load chunks and the change chunks.
pub fn pre_encode(spec: &GeneratorSpec, row_changes: u64, options: EncoderOptions) -> CdcResult<(Vec<EncodedChunk>, Vec<EncodedChunk>)> {
    let (mut generator, mut encoder) = workload(spec, options)?;
    let mut load = Vec::new();
    generator
        .initial_load(0, 4096, |chunk| {
            let mut text = String::with_capacity(chunk.len() * 200);
            encoder.encode_transaction(&chunk, &mut text)?;
            load.push(EncodedChunk { text, row_changes: chunk.len() as u64 });
            Ok::<_, crate::DecodeError>(())
        })
        .map_err(|e| CdcError::Source { source_name: "generator:chbench".into(), reason: e.to_string() })?;
    let mut changes = Vec::new();
    let mut generated = 0u64;
    let mut sequence = 0i64;
    while generated < row_changes {
        let mut chunk = EncodedChunk { text: String::with_capacity(1 << 20), row_changes: 0 };
        while chunk.text.len() < (1 << 20) - 8192 && generated < row_changes {
            sequence += 1;
            let (_, txn) = generator.next_transaction(sequence);
            encoder.encode_transaction(&txn, &mut chunk.text).map_err(generator_error)?;
            chunk.row_changes += txn.len() as u64;
            generated += txn.len() as u64;
        }
        changes.push(chunk);
    }
    Ok((load, changes))
}

fn generator_error(error: crate::DecodeError) -> CdcError {
    CdcError::Source { source_name: "generator:chbench".into(), reason: error.to_string() }
}

fn workload(spec: &GeneratorSpec, options: EncoderOptions) -> CdcResult<(ChBenchGenerator, DebeziumEncoder)> {
    let ids: Vec<TableId> = (0..schemas().len() as u32).map(TableId).collect();
    let generator = ChBenchGenerator::new(spec.seed, ChBenchScale::for_base_rows(spec.base_rows), ChBenchTables::from_ids(&ids));
    let encoder = DebeziumEncoder::new(&schemas(), options).map_err(generator_error)?;
    Ok((generator, encoder))
}

/// The live generator source: a producer thread encodes at the target rate into a
/// channel that a [`ChannelSource`] reads.
pub struct GeneratorSource {
    lines: ChannelSource,
    stop: Arc<AtomicBool>,
    producer: Option<JoinHandle<()>>,
}

/// Says when the generator may start its changes (after the initial load).
pub type ChangesGate = Box<dyn Fn() -> bool + Send>;

impl GeneratorSource {
    pub fn start(spec: GeneratorSpec) -> CdcResult<Self> {
        Self::start_with(spec, EncoderOptions::default(), Box::new(|| true))
    }

    /// [`Self::start`] with lines encoded as `encoding` says, and changes held back
    /// until the reader has taken the whole load *and* `gate` says so (a benchmark
    /// that forwards the lines elsewhere waits until the mirror has the load).
    pub fn start_with(spec: GeneratorSpec, encoding: EncoderOptions, gate: ChangesGate) -> CdcResult<Self> {
        let (mut generator, mut encoder) = workload(&spec, encoding)?;
        let (sender, chunks) = bounded::<EncodedChunk>(256);
        let stop = Arc::new(AtomicBool::new(false));
        let producer_stop = Arc::clone(&stop);
        let producer = std::thread::Builder::new()
            .name("retina-generator".into())
            .spawn(move || {
                let mut text = String::new();
                let load = generator.initial_load(now_micros(), 4096, |chunk| {
                    text.clear();
                    encoder.encode_transaction(&chunk, &mut text).map_err(|_| ())?;
                    sender.send(EncodedChunk { text: std::mem::take(&mut text), row_changes: chunk.len() as u64 }).map_err(|_| ())
                });
                if load.is_err() {
                    return;
                }
                // Changes start once the reader has taken the whole load: stamped
                // while queued behind it in this channel, they would measure the
                // load's length, not how fresh the mirror is.
                while (!sender.is_empty() || !gate()) && !producer_stop.load(Relaxed) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                let start = Instant::now();
                let mut produced = 0u64;
                loop {
                    if producer_stop.load(Relaxed)
                        || spec.duration.is_some_and(|d| start.elapsed() >= d)
                        || spec.changes.is_some_and(|c| produced >= c)
                    {
                        return;
                    }
                    let due = match spec.rate {
                        Some(rate) => (start.elapsed().as_secs_f64() * rate as f64) as u64,
                        None => produced + 4096,
                    };
                    let due = spec.changes.map_or(due, |c| due.min(c));
                    if produced >= due {
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    let mut chunk = EncodedChunk { text: String::with_capacity(64 * 1024), row_changes: 0 };
                    while produced < due && chunk.text.len() < 60 * 1024 {
                        let (_, txn) = generator.next_transaction(now_micros());
                        if encoder.encode_transaction(&txn, &mut chunk.text).is_err() {
                            return;
                        }
                        chunk.row_changes += txn.len() as u64;
                        produced += txn.len() as u64;
                    }
                    if sender.send(chunk).is_err() {
                        return;
                    }
                }
            })
            .map_err(|e| CdcError::Source { source_name: "generator:chbench".into(), reason: e.to_string() })?;
        Ok(Self { lines: ChannelSource::new(chunks), stop, producer: Some(producer) })
    }
}

impl MessageSource for GeneratorSource {
    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        self.lines.next(buffer)
    }

    fn declared_tables(&self) -> Vec<TableSchema> {
        schemas()
    }
}

impl Drop for GeneratorSource {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        // Unblock a producer waiting on a full channel.
        self.lines.discard_pending();
        if let Some(producer) = self.producer.take() {
            while !producer.is_finished() {
                self.lines.discard_pending();
                std::thread::sleep(Duration::from_millis(1));
            }
            let _ = producer.join();
        }
    }
}
