//! Driving a sink from a source: the loop behind `retina ingest` (and usable by
//! `retina serve`). Acknowledges to the source what the engine reports visible.

use std::time::{Duration, Instant};

use retina_core::Engine;

use crate::error::{CdcError, CdcResult};
use crate::pipeline::{DecodeStage, LineBatch, PreparedBatch, BATCH_LINES, DECODE_WORKERS};
use crate::sink::{Sink, SinkOptions, SinkStats};
use crate::source::generator::GeneratorSource;
use crate::source::lines::LineSource;
use crate::source::nats::NatsSource;
use crate::source::uri::{parse_source_uri, SourceSpec};
use crate::source::{MessageSource, SourceEvent};

/// Opens the source a URI names.
pub fn open_source(uri: &str) -> CdcResult<Box<dyn MessageSource>> {
    Ok(match parse_source_uri(uri)? {
        SourceSpec::File(path) => Box::new(LineSource::open_file(&path)?),
        SourceSpec::Stdin => Box::new(LineSource::stdin()),
        SourceSpec::Nats { server, stream, durable } => Box::new(NatsSource::connect(&server, &stream, &durable)?),
        SourceSpec::Generator(spec) => Box::new(GeneratorSource::start(spec)?),
    })
}

/// Creates the tables a source declares that the engine does not have yet.
pub fn create_declared_tables(engine: &Engine, source: &dyn MessageSource) -> CdcResult<()> {
    for schema in source.declared_tables() {
        if engine.table_id(schema.name()).is_none() {
            engine.create_table(schema)?;
        }
    }
    Ok(())
}

/// When to stop a source that does not end by itself.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopWhen {
    /// Stop after this long without a message (live sources in tests and one-shot
    /// ingests of a stream).
    pub idle_for: Option<Duration>,
}

/// What one ingest run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IngestReport {
    pub source: String,
    pub stats: SinkStats,
    pub seconds: f64,
    /// The recorded position of the newest visible transaction.
    pub visible_position: Option<String>,
}

/// Replays `source` into `engine` until it ends (or idles for `stop.idle_for`), then
/// waits until everything applied is visible and acknowledges it.
pub fn run(
    engine: &Engine,
    uri: &str,
    source: &mut dyn MessageSource,
    options: SinkOptions,
    stop: StopWhen,
) -> CdcResult<IngestReport> {
    create_declared_tables(engine, source)?;
    let mut sink = Sink::new(engine, uri, options)?;
    let start = Instant::now();
    match replay(&mut sink, source, stop) {
        Ok(()) => {
            // Make everything applied durable, then let the source discard it.
            engine.checkpoint()?;
            acknowledge(&sink, source)?;
        }
        Err(error) => {
            // Stop at the bad transaction, but let everything before it become visible
            // (and acknowledged), so a restart resumes right there.
            if engine.failure().is_none() && sink.idle().is_ok() && engine.sync().is_ok() && engine.checkpoint().is_ok() {
                let _ = acknowledge(&sink, source);
            }
            return Err(error);
        }
    }
    Ok(IngestReport {
        source: uri.to_string(),
        stats: sink.stats().clone(),
        seconds: start.elapsed().as_secs_f64(),
        visible_position: sink.visible_position().map(|p| p.encode()),
    })
}

/// The replay loop: the source is read on this thread, lines are decoded in batches
/// on the decode stage, and prepared messages are handed to the sink in order. When
/// the source runs dry everything in flight is drained and the partial group-commit
/// batch is sent.
fn replay(sink: &mut Sink<'_>, source: &mut dyn MessageSource, stop: StopWhen) -> CdcResult<()> {
    let mut stage = DecodeStage::start(sink.known_bindings())?;
    let mut batch: LineBatch = Vec::with_capacity(BATCH_LINES);
    let mut buffer = String::with_capacity(4096);
    let mut idle_since: Option<Instant> = None;
    let mut handled = 0u64;
    loop {
        let event = match source.next(&mut buffer) {
            Ok(event) => event,
            Err(error) => {
                // What arrived before the source failed is applied first (a gap is
                // reported after the transactions before it).
                drain(sink, source, &mut stage, &mut batch, &mut handled)?;
                return Err(error);
            }
        };
        match event {
            SourceEvent::Message(position) => {
                idle_since = None;
                let capacity = buffer.capacity();
                batch.push((position, std::mem::replace(&mut buffer, String::with_capacity(capacity))));
                if batch.len() >= BATCH_LINES {
                    stage.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH_LINES)))?;
                    // Keep every decode worker busy while the oldest batch is applied.
                    if stage.in_flight() > DECODE_WORKERS {
                        if let Some(prepared) = stage.receive()? {
                            apply(sink, source, prepared, &mut handled)?;
                        }
                    }
                }
            }
            SourceEvent::Idle => {
                drain(sink, source, &mut stage, &mut batch, &mut handled)?;
                sink.idle()?;
                acknowledge(sink, source)?;
                let since = *idle_since.get_or_insert_with(Instant::now);
                if stop.idle_for.is_some_and(|limit| since.elapsed() >= limit) {
                    break;
                }
            }
            SourceEvent::End => {
                drain(sink, source, &mut stage, &mut batch, &mut handled)?;
                break;
            }
        }
    }
    sink.finish()?;
    acknowledge(sink, source)
}

fn drain(
    sink: &mut Sink<'_>,
    source: &mut dyn MessageSource,
    stage: &mut DecodeStage,
    batch: &mut LineBatch,
    handled: &mut u64,
) -> CdcResult<()> {
    stage.send(std::mem::take(batch))?;
    while let Some(prepared) = stage.receive()? {
        apply(sink, source, prepared, handled)?;
    }
    Ok(())
}

fn apply(sink: &mut Sink<'_>, source: &mut dyn MessageSource, batch: PreparedBatch, handled: &mut u64) -> CdcResult<()> {
    for (position, line, prepared) in batch {
        match prepared {
            Some(prepared) => sink.handle_prepared(position, prepared, &line)?,
            None => sink.handle(position, &line)?,
        }
        *handled += 1;
        // Acknowledge every 4096 messages (and whenever the source runs dry).
        if *handled & 4095 == 0 {
            acknowledge(sink, source)?;
        }
    }
    Ok(())
}

/// Tells the source it may discard what the latest checkpoint holds (not merely what
/// is visible: a crash recovers to the checkpoint and replays from its position).
fn acknowledge(sink: &Sink<'_>, source: &mut dyn MessageSource) -> CdcResult<()> {
    match sink.durable_position() {
        Some(position) => source.acknowledge(position),
        None => Ok(()),
    }
}

/// Convenience for the CLI: open `uri` and [`run`] it.
pub fn ingest_uri(engine: &Engine, uri: &str, options: SinkOptions, stop: StopWhen) -> CdcResult<IngestReport> {
    let mut source = open_source(uri)?;
    run(engine, uri, source.as_mut(), options, stop).map_err(|e| match e {
        CdcError::Engine(core) => CdcError::Engine(core),
        other => other,
    })
}
