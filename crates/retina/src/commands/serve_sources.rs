//! The sources `retina serve` replays: any source URI of the CDC crate (`file:PATH`,
//! `-`, `nats://HOST:PORT/STREAM`, `generator:chbench?rate=N`), each driven through
//! the real Debezium sink on its own thread until the server stops, with its progress
//! published to the `retina.sources` view and `/metrics`; and `postgres://...`, a
//! PostgreSQL database through logical replication ([`retina_postgres::PgSource`]).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use retina_cdc::ingest::{create_declared_tables, open_source};
use retina_cdc::source::SourceEvent;
use retina_cdc::{parse_source_uri, CdcResult, Sink, SinkOptions};
use retina_core::Engine;
use retina_postgres::{PgSource, PgSourceOptions};
use retina_query::{SourceRegistry, SourceStatus};

/// A source being replayed; [`ServedSource::stop`] ends it.
pub struct ServedSource {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ServedSource {
    /// Checks a `--source` URI without opening anything, so a typo fails before the
    /// engine starts.
    pub fn validate(uri: &str) -> anyhow::Result<()> {
        if is_postgres(uri) {
            PgSourceOptions::parse(uri).with_context(|| format!("--source {uri}"))?;
        } else {
            parse_source_uri(uri).with_context(|| format!("--source {uri}"))?;
        }
        Ok(())
    }

    /// Opens `uri`, creates the tables it declares, and replays it on a thread. Fails
    /// (before serving starts) when the URI is invalid or the source cannot be opened.
    pub fn start(uri: &str, engine: Arc<Engine>, registry: SourceRegistry) -> anyhow::Result<Self> {
        if is_postgres(uri) {
            return Self::start_postgres(uri, engine, registry);
        }
        parse_source_uri(uri).with_context(|| format!("--source {uri}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let (ready, started) = mpsc::channel::<Result<(), String>>();
        let thread = {
            let (uri, stop) = (uri.to_string(), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("retina-source".into())
                .spawn(move || replay(&uri, &engine, &registry, &stop, ready))
                .context("starting a source thread")?
        };
        let served = Self { stop, thread: Some(thread) };
        match started.recv() {
            Ok(Ok(())) => Ok(served),
            Ok(Err(reason)) => {
                served.stop();
                Err(anyhow!("source {uri}: {reason}"))
            }
            Err(_) => {
                served.stop();
                Err(anyhow!("source {uri}: the source thread ended before it started"))
            }
        }
    }

    /// Replicates a PostgreSQL database on one thread while another publishes its
    /// status (phase, counts, WAL and time lag) every 100 ms.
    fn start_postgres(uri: &str, engine: Arc<Engine>, registry: SourceRegistry) -> anyhow::Result<Self> {
        let options = PgSourceOptions::parse(uri).with_context(|| format!("--source {uri}"))?;
        let source = PgSource::new(options);
        let stop = source.stop_flag();
        let shared = source.status();
        let name = source.name().to_string();
        let runner = std::thread::Builder::new()
            .name("retina-postgres".into())
            .spawn(move || {
                if let Err(error) = source.run(&engine) {
                    eprintln!("retina serve: source {} stopped: {error}", source.name());
                }
            })
            .context("starting the postgres source thread")?;
        let thread = std::thread::Builder::new()
            .name("retina-source-status".into())
            .spawn(move || {
                let mut status = SourceStatus::new(name.clone(), name);
                loop {
                    let finished = runner.is_finished();
                    let now = shared.lock().clone();
                    status.state = now.phase.as_str().into();
                    status.transactions = now.transactions;
                    status.row_changes = now.row_changes + now.copied_rows;
                    status.lag_bytes = Some(now.lag_bytes());
                    status.lag_millis = Some(now.lag_millis());
                    status.last_error = now.error.clone();
                    status.updated_at = std::time::SystemTime::now();
                    registry.update(status.clone());
                    if finished {
                        let _ = runner.join();
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
            .context("starting the source status thread")?;
        Ok(Self { stop, thread: Some(thread) })
    }

    pub fn stop(mut self) {
        self.stop.store(true, SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn is_postgres(uri: &str) -> bool {
    uri.starts_with("postgres://") || uri.starts_with("postgresql://")
}

fn replay(uri: &str, engine: &Engine, registry: &SourceRegistry, stop: &AtomicBool, ready: mpsc::Sender<Result<(), String>>) {
    let mut status = SourceStatus::new(uri, uri);
    let opened = open_source(uri).and_then(|source| {
        create_declared_tables(engine, source.as_ref())?;
        let sink = Sink::new(engine, uri, SinkOptions::default())?;
        Ok((source, sink))
    });
    let (mut source, mut sink) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            let _ = ready.send(Err(error.to_string()));
            return;
        }
    };
    status.state = "running".into();
    registry.update(status.clone());
    let _ = ready.send(Ok(()));
    let mut buffer = String::with_capacity(4096);
    let mut last_report = Instant::now();
    let outcome: CdcResult<&'static str> = (|| {
        while !stop.load(SeqCst) {
            match source.next(&mut buffer)? {
                SourceEvent::Message(position) => sink.handle(position, &buffer)?,
                SourceEvent::Idle => {
                    sink.idle()?;
                    if let Some(visible) = sink.visible_position() {
                        source.acknowledge(visible)?;
                    }
                }
                SourceEvent::End => {
                    sink.finish()?;
                    if let Some(visible) = sink.visible_position() {
                        source.acknowledge(visible)?;
                    }
                    return Ok("finished");
                }
            }
            if last_report.elapsed() >= Duration::from_millis(100) {
                publish(&mut status, &sink, registry);
                last_report = Instant::now();
            }
        }
        sink.stop()?;
        Ok("stopped")
    })();
    match outcome {
        Ok(state) => status.state = state.into(),
        Err(error) => {
            status.state = "failed".into();
            status.last_error = Some(error.to_string());
            eprintln!("retina serve: source {uri} stopped: {error}");
        }
    }
    publish(&mut status, &sink, registry);
}

fn publish(status: &mut SourceStatus, sink: &Sink<'_>, registry: &SourceRegistry) {
    let stats = sink.stats();
    status.transactions = stats.transactions_applied;
    status.row_changes = stats.row_changes_applied;
    registry.update(status.clone());
}
