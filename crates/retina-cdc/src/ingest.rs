//! The ingest driver: the one loop that runs a source into a sink, behind
//! `retina ingest`, `retina serve --source`, `retina demo` and the benchmarks.
//!
//! source -> decode stage (two workers) -> sink -> engine, with:
//! - acknowledgements to the source only up to what the latest *checkpoint* made
//!   durable (a crash recovers to the checkpoint and replays from its position, so
//!   acknowledging what is merely visible loses data);
//! - a stop flag (a server shutting down) and an idle limit (one-shot ingests of live
//!   streams);
//! - the source's status published to a [`SourceRegistry`] while it runs.
//!
//! There is deliberately one driver: two copies of this loop once disagreed on what
//! to acknowledge, and the one nothing tested lost data.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_core::{Engine, SourceRegistry, SourceStatus};

use crate::debezium::{Line, SchemaElider};
use crate::error::CdcResult;
use crate::pipeline::{DecodeStage, LineBatch, PreparedBatch, BATCH_LINES, MAX_IN_FLIGHT};
use crate::sink::{Sink, SinkOptions, SinkStats};
use crate::source::generator::GeneratorSource;
use crate::source::kafka::KafkaSource;
use crate::source::lines::LineSource;
use crate::source::nats::NatsSource;
use crate::source::uri::{parse_source_uri, parse_source_uri_with_options, SourceSpec};
use crate::source::{MessageSource, SourceEvent};

/// Opens the source a URI names.
pub fn open_source(uri: &str) -> CdcResult<Box<dyn MessageSource>> {
    Ok(match parse_source_uri(uri)? {
        SourceSpec::File(path) => Box::new(LineSource::open_file(&path)?),
        SourceSpec::Stdin => Box::new(LineSource::stdin()),
        SourceSpec::Nats { server, stream, durable } => Box::new(NatsSource::connect(&server, &stream, &durable)?),
        SourceSpec::Generator(spec) => Box::new(GeneratorSource::start(spec)?),
        SourceSpec::Kafka(spec) => Box::new(KafkaSource::connect(&crate::source::uri::redacted(uri), *spec)?),
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
#[derive(Clone, Debug, Default)]
pub struct StopWhen {
    /// Stop after this long without a message, once the source is caught up
    /// ([`MessageSource::caught_up`]): live sources in tests and one-shot ingests of a
    /// stream.
    pub idle_for: Option<Duration>,
    /// Stop as soon as this is set (a server shutting down). Open source
    /// transactions are dropped unapplied: they come after the recorded position, so
    /// a restart reads them again.
    pub flag: Option<Arc<AtomicBool>>,
}

impl StopWhen {
    /// Stop after `idle` without a message.
    pub fn idle_for(idle: Duration) -> Self {
        Self { idle_for: Some(idle), flag: None }
    }

    /// Stop when `flag` is set.
    pub fn on_flag(flag: Arc<AtomicBool>) -> Self {
        Self { idle_for: None, flag: Some(flag) }
    }

    fn flagged(&self) -> bool {
        self.flag.as_ref().is_some_and(|flag| flag.load(Relaxed))
    }
}

/// How one run of the driver ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The finite stream ended.
    Finished,
    /// The source idled for [`StopWhen::idle_for`].
    Idle,
    /// [`StopWhen::flag`] was set.
    Stopped,
}

impl Ended {
    fn state(self) -> &'static str {
        match self {
            Ended::Finished => "finished",
            Ended::Idle => "caught up",
            Ended::Stopped => "stopped",
        }
    }
}

/// What one ingest run did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct IngestReport {
    pub source: String,
    pub ended: Ended,
    pub stats: SinkStats,
    pub seconds: f64,
    /// The recorded position of the newest visible transaction.
    pub visible_position: Option<String>,
    /// The position the final checkpoint made durable (and the source was told).
    pub durable_position: Option<String>,
}

/// The driver's settings beyond the sink's own.
#[derive(Clone, Debug, Default)]
pub struct DriveOptions {
    pub sink: SinkOptions,
    pub stop: StopWhen,
    /// Where to publish the source's status (every 100 ms and at the end).
    pub status: Option<SourceRegistry>,
}

/// Replays `source` into `engine` until it ends (or idles for `stop.idle_for`), then
/// checkpoints and acknowledges everything applied.
pub fn run(
    engine: &Engine,
    uri: &str,
    source: &mut dyn MessageSource,
    options: SinkOptions,
    stop: StopWhen,
) -> CdcResult<IngestReport> {
    drive(engine, uri, source, DriveOptions { sink: options, stop, status: None })
}

/// Opens `uri` and [`run`]s it, with the URI's own options applied
/// ([`options_for_uri`]).
pub fn ingest_uri(engine: &Engine, uri: &str, options: SinkOptions, stop: StopWhen) -> CdcResult<IngestReport> {
    let options = options_for_uri(uri, options)?;
    let mut source = open_source(uri)?;
    run(engine, uri, source.as_mut(), options, stop)
}

/// `options` with what the source URI itself says (`table=`, `on_absent_row=`):
/// the URI is the more specific of the two, so it wins over command-line flags.
pub fn options_for_uri(uri: &str, mut options: SinkOptions) -> CdcResult<SinkOptions> {
    let (_, apply) = parse_source_uri_with_options(uri)?;
    apply.apply_to(&mut options);
    Ok(options)
}

/// The driver. Runs `source` (recorded under the name `uri`) until it ends, idles
/// out or is stopped; then makes everything applied visible, takes a checkpoint and
/// acknowledges it to the source. On an error, everything before the bad
/// transaction is still made visible, checkpointed and acknowledged, so a restart
/// resumes right there.
pub fn drive(engine: &Engine, uri: &str, source: &mut dyn MessageSource, options: DriveOptions) -> CdcResult<IngestReport> {
    let uri = &crate::source::uri::redacted(uri);
    let mut status = options.status.map(|registry| StatusPublisher::new(registry, uri));
    let opened = create_declared_tables(engine, source)
        .and_then(|()| Sink::new(engine, uri, options.sink))
        .and_then(|sink| source.start(sink.resume_position()).map(|()| sink));
    let mut sink = match opened {
        Ok(sink) => sink,
        Err(error) => {
            if let Some(status) = status.as_mut() {
                status.failed(&error, None);
            }
            return Err(error);
        }
    };
    if let Some(status) = status.as_mut() {
        status.publish("running", &sink, source);
    }
    let start = Instant::now();
    let mut driver = Driver { sink: &mut sink, source, stop: &options.stop, status: status.as_mut(), handled: 0, last_status: Instant::now() };
    let outcome = driver.replay().map_err(|error| located(error, source));
    let outcome = match outcome {
        Ok(ended) => {
            // Make everything applied durable, then let the source discard it. Full
            // files are written by the flusher first: a checkpoint would otherwise
            // also write those still queued as checkpoint segments, encoding and
            // writing them twice (measured: a fifth of the driver's time in a
            // 400K-change `retina ingest`).
            engine.flush_and_checkpoint().map_err(crate::CdcError::from).and_then(|_| acknowledge(&sink, source)).map(|()| ended)
        }
        Err(error) => {
            // Stop at the bad transaction, but let everything before it become
            // durable (and acknowledged), so a restart resumes right there.
            if engine.failure().is_none() && sink.stop_at_error().is_ok() && engine.sync().is_ok() && engine.checkpoint().is_ok() {
                let _ = acknowledge(&sink, source);
            }
            Err(error)
        }
    };
    match outcome {
        Ok(ended) => {
            if let Some(status) = status.as_mut() {
                status.publish(ended.state(), &sink, source);
            }
            Ok(IngestReport {
                source: uri.to_string(),
                ended,
                stats: sink.stats().clone(),
                seconds: start.elapsed().as_secs_f64(),
                visible_position: sink.visible_position().map(|p| p.encode()),
                durable_position: sink.durable_position().map(|p| p.encode()),
            })
        }
        Err(error) => {
            if let Some(status) = status.as_mut() {
                status.failed(&error, Some((&sink, &*source)));
            }
            Err(error)
        }
    }
}

/// Acknowledge (and publish status) at least this often while messages flow.
const ACKNOWLEDGE_EVERY: u64 = 4096;
const STATUS_EVERY: Duration = Duration::from_millis(100);

/// One run's loop state.
struct Driver<'a, 'e> {
    sink: &'a mut Sink<'e>,
    source: &'a mut dyn MessageSource,
    stop: &'a StopWhen,
    status: Option<&'a mut StatusPublisher>,
    handled: u64,
    last_status: Instant,
}

impl Driver<'_, '_> {
    /// The source is read on this thread, lines are decoded in batches on the decode
    /// stage, and prepared messages are handed to the sink in order. When the source
    /// runs dry everything in flight is drained and the partial group-commit batch is
    /// sent, so freshness does not wait for a full batch.
    fn replay(&mut self) -> CdcResult<Ended> {
        let mut stage = DecodeStage::start(self.sink.known_bindings())?;
        let mut batch: LineBatch = Vec::with_capacity(BATCH_LINES);
        let mut buffer = Line::default();
        let mut elider = SchemaElider::new(self.sink.known_schemas());
        let mut idle_since: Option<Instant> = None;
        loop {
            if self.stop.flagged() {
                self.drain(&mut stage, &mut batch)?;
                self.sink.stop()?;
                return Ok(Ended::Stopped);
            }
            let event = match self.source.next_line(&mut buffer, &mut elider) {
                Ok(event) => event,
                Err(error) => {
                    // What arrived before the source failed is applied first (a gap is
                    // reported after the transactions before it).
                    self.drain(&mut stage, &mut batch)?;
                    return Err(error);
                }
            };
            match event {
                SourceEvent::Message(position) => {
                    idle_since = None;
                    if let Some(offsets) = self.source.take_resume_offsets() {
                        self.sink.note_resume_offsets(position.value, offsets);
                    }
                    // The next line gets a buffer of its own size (the source reserves
                    // it), not this one's: most of a line's schema text is left out.
                    batch.push((position, std::mem::take(&mut buffer)));
                    if batch.len() >= BATCH_LINES {
                        stage.send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH_LINES)))?;
                        // Apply what is decoded without waiting, and wait for the oldest
                        // batch only when every worker has a batch queued behind the one it
                        // decodes: waiting as soon as each worker had one left a worker idle
                        // while this thread applied and read.
                        while let Some(prepared) = stage.try_receive()? {
                            self.apply(prepared)?;
                        }
                        if stage.in_flight() >= MAX_IN_FLIGHT {
                            if let Some(prepared) = stage.receive()? {
                                self.apply(prepared)?;
                            }
                        }
                    }
                }
                SourceEvent::Idle => {
                    self.drain(&mut stage, &mut batch)?;
                    self.sink.idle()?;
                    self.acknowledge()?;
                    self.publish_status();
                    if !self.source.caught_up() {
                        idle_since = None;
                        continue;
                    }
                    let since = *idle_since.get_or_insert_with(Instant::now);
                    if self.stop.idle_for.is_some_and(|limit| since.elapsed() >= limit) {
                        self.sink.finish()?;
                        return Ok(Ended::Idle);
                    }
                }
                SourceEvent::End => {
                    self.drain(&mut stage, &mut batch)?;
                    self.sink.finish()?;
                    return Ok(Ended::Finished);
                }
            }
        }
    }

    fn drain(&mut self, stage: &mut DecodeStage, batch: &mut LineBatch) -> CdcResult<()> {
        stage.send(std::mem::take(batch))?;
        while let Some(prepared) = stage.receive()? {
            self.apply(prepared)?;
        }
        Ok(())
    }

    fn apply(&mut self, batch: PreparedBatch) -> CdcResult<()> {
        for (position, line, prepared) in batch {
            match prepared {
                Some(prepared) => self.sink.handle_prepared(position, prepared, &line)?,
                None => self.sink.handle(position, &line.full())?,
            }
            self.handled += 1;
            if self.handled.is_multiple_of(ACKNOWLEDGE_EVERY) {
                self.acknowledge()?;
                self.publish_status();
            }
        }
        Ok(())
    }

    fn acknowledge(&mut self) -> CdcResult<()> {
        acknowledge(self.sink, self.source)
    }

    /// Publishes the status when `STATUS_EVERY` passed. A live source that has
    /// nothing new for a moment is still `running`; lag figures say how far behind.
    fn publish_status(&mut self) {
        if self.last_status.elapsed() < STATUS_EVERY {
            return;
        }
        self.last_status = Instant::now();
        if let Some(status) = self.status.as_deref_mut() {
            status.publish("running", self.sink, &*self.source);
        }
    }
}

/// Tells the source it may discard what the latest checkpoint holds (not merely what
/// is visible: a crash recovers to the checkpoint and replays from its position).
fn acknowledge(sink: &Sink<'_>, source: &mut dyn MessageSource) -> CdcResult<()> {
    match sink.durable_position() {
        Some(position) => source.acknowledge(&position),
        None => Ok(()),
    }
}

/// `error` with where its message came from in the source's own terms (Kafka's
/// topic, partition and offset), when the source knows.
fn located(error: crate::CdcError, source: &dyn MessageSource) -> crate::CdcError {
    match error.position().and_then(|position| source.locate(position)) {
        Some(location) => crate::CdcError::Located { location, error: Box::new(error) },
        None => error,
    }
}

/// Publishes one source's [`SourceStatus`] from its sink's counters.
struct StatusPublisher {
    registry: SourceRegistry,
    status: SourceStatus,
}

impl StatusPublisher {
    /// Named as the source's positions are (so `retina.sources` finds them), showing
    /// the whole (redacted) URI.
    fn new(registry: SourceRegistry, uri: &str) -> Self {
        let status = SourceStatus::new(crate::position::position_key(uri), uri);
        registry.update(status.clone());
        Self { registry, status }
    }

    fn publish(&mut self, state: &str, sink: &Sink<'_>, source: &dyn MessageSource) {
        source.report(&mut self.status);
        let stats = sink.stats();
        self.status.state = state.to_string();
        self.status.messages = stats.messages;
        self.status.transactions = stats.transactions_applied;
        self.status.row_changes = stats.row_changes_applied;
        self.status.duplicate_transactions = stats.duplicate_transactions;
        self.status.diverted = stats.diverted();
        self.status.durable_position = sink.durable_position().map(|p| p.encode());
        self.registry.update(self.status.clone());
    }

    fn failed(&mut self, error: &crate::CdcError, running: Option<(&Sink<'_>, &dyn MessageSource)>) {
        self.status.last_error = Some(error.to_string());
        match running {
            Some((sink, source)) => self.publish("failed", sink, source),
            None => {
                self.status.state = "failed".into();
                self.registry.update(self.status.clone());
            }
        }
    }
}
