//! The sources `retina serve` replays: any source URI of the CDC crate (`file:PATH`,
//! `-`, `nats://HOST:PORT/STREAM`, `generator:chbench?rate=N`), each run by the CDC
//! crate's one ingest driver on its own thread until the server stops, with its
//! progress published to the `retina.sources` view and `/metrics`; and
//! `postgres://...`, a PostgreSQL database through logical replication
//! ([`retina_postgres::PgSource`]).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{anyhow, Context};
use retina_cdc::ingest::{drive, open_source, options_for_uri, DriveOptions, StopWhen};
use retina_cdc::{parse_source_uri, SinkOptions};
use retina_core::redact::RedactedUri;
use retina_core::Engine;
use retina_postgres::{PgSource, PgSourceOptions};
use retina_query::{SourceRegistry, SourceStatus};

/// A source being replayed; [`ServedSource::stop`] ends it.
pub struct ServedSource {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Why the source ended by itself, if it failed: `retina serve` exits non-zero.
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

impl ServedSource {
    /// Checks a `--source` URI without opening anything, so a typo fails before the
    /// engine starts.
    pub fn validate(uri: &str) -> anyhow::Result<()> {
        if is_postgres(uri) {
            PgSourceOptions::parse(uri).with_context(|| format!("--source {}", RedactedUri::new(uri)))?;
        } else {
            parse_source_uri(uri).with_context(|| format!("--source {}", RedactedUri::new(uri)))?;
        }
        Ok(())
    }

    /// Opens `uri`, creates the tables it declares, and replays it on a thread. Fails
    /// (before serving starts) when the URI is invalid or the source cannot be opened.
    pub fn start(uri: &str, engine: Arc<Engine>, registry: SourceRegistry) -> anyhow::Result<Self> {
        if is_postgres(uri) {
            return Self::start_postgres(uri, engine, registry);
        }
        parse_source_uri(uri).with_context(|| format!("--source {}", RedactedUri::new(uri)))?;
        let stop = Arc::new(AtomicBool::new(false));
        let failure = Arc::new(std::sync::Mutex::new(None));
        let (ready, started) = mpsc::channel::<Result<(), String>>();
        let thread = {
            let (uri, stop, failed) = (uri.to_string(), Arc::clone(&stop), Arc::clone(&failure));
            std::thread::Builder::new()
                .name("retina-source".into())
                .spawn(move || {
                    if let Some(error) = replay(&uri, &engine, &registry, stop, ready) {
                        *failed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(error);
                    }
                })
                .context("starting a source thread")?
        };
        let served = Self { stop, thread: Some(thread), failure };
        match started.recv() {
            Ok(Ok(())) => Ok(served),
            Ok(Err(reason)) => {
                served.stop();
                Err(anyhow!("source {}: {reason}", RedactedUri::new(uri)))
            }
            Err(_) => {
                served.stop();
                Err(anyhow!("source {}: the source thread ended before it started", RedactedUri::new(uri)))
            }
        }
    }

    /// Replicates a PostgreSQL database on one thread while another publishes its
    /// status (phase, counts, WAL and time lag) every 100 ms.
    fn start_postgres(uri: &str, engine: Arc<Engine>, registry: SourceRegistry) -> anyhow::Result<Self> {
        let options = PgSourceOptions::parse(uri).with_context(|| format!("--source {}", RedactedUri::new(uri)))?;
        let source = PgSource::new(options);
        let stop = source.stop_flag();
        let shared = source.status();
        let name = source.name().to_string();
        let failure = Arc::new(std::sync::Mutex::new(None));
        let failed = Arc::clone(&failure);
        let runner = std::thread::Builder::new()
            .name("retina-postgres".into())
            .spawn(move || {
                if let Err(error) = source.run(&engine) {
                    eprintln!("retina serve: source {} stopped: {error}", source.name());
                    *failed.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(format!("source {}: {error}", source.name()));
                }
            })
            .context("starting the postgres source thread")?;
        let thread = std::thread::Builder::new()
            .name("retina-source-status".into())
            .spawn(move || {
                let mut status = SourceStatus::new(name.clone(), name);
                loop {
                    let finished = runner.is_finished();
                    shared.lock().fill(&mut status);
                    registry.update(status.clone());
                    if finished {
                        let _ = runner.join();
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
            .context("starting the source status thread")?;
        Ok(Self { stop, thread: Some(thread), failure })
    }

    /// Stops the source; returns why it had failed, if it had.
    pub fn stop(mut self) -> Option<String> {
        self.stop.store(true, SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.failure.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).take()
    }
}

/// Whether `uri` names a PostgreSQL database (logical replication) rather than a
/// change-event stream.
pub fn is_postgres(uri: &str) -> bool {
    uri.starts_with("postgres://") || uri.starts_with("postgresql://")
}

/// Runs the source through the one ingest driver until the server stops (or the
/// source ends or fails); the driver publishes its status and acknowledges only what
/// checkpoints made durable.
/// Returns why the source failed after it started, if it did.
fn replay(
    uri: &str,
    engine: &Engine,
    registry: &SourceRegistry,
    stop: Arc<AtomicBool>,
    ready: mpsc::Sender<Result<(), String>>,
) -> Option<String> {
    let mut source = match open_source(uri) {
        Ok(source) => source,
        Err(error) => {
            let _ = ready.send(Err(error.to_string()));
            return None;
        }
    };
    // `table=` and `on_absent_row=` ride on the URI.
    let sink = match options_for_uri(uri, SinkOptions::default()) {
        Ok(sink) => sink,
        Err(error) => {
            let _ = ready.send(Err(error.to_string()));
            return None;
        }
    };
    let _ = ready.send(Ok(()));
    let options = DriveOptions { sink, stop: StopWhen::on_flag(stop), status: Some(registry.clone()) };
    match drive(engine, uri, source.as_mut(), options) {
        Ok(_) => None,
        Err(error) => {
            eprintln!("retina serve: source {} stopped: {error}", RedactedUri::new(uri));
            Some(format!("source {}: {error}", RedactedUri::new(uri)))
        }
    }
}
