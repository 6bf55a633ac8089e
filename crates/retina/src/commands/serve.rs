//! `retina serve`: replays every source into the lakehouse in a data dir and serves
//! SQL over the PostgreSQL wire protocol (default 127.0.0.1:5433) plus Prometheus
//! metrics (default 127.0.0.1:9187) until interrupted. Replay keeps running while
//! queries are served: queries read snapshots below HWM, replay writes above it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use retina_core::{Engine, EngineConfig};
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_server::{
    scram_from_password_file, ClientAuthentication, MetricsServer, PgServer, DEFAULT_METRICS_LISTEN, DEFAULT_SQL_LISTEN,
};
use retina_storage::{CompressionGoal, ParquetLakeStore, PublishOptions};

use super::serve_sources::ServedSource;

#[derive(Args)]
pub struct ServeArgs {
    /// The lakehouse: a directory (created if missing) or an object-store URL
    /// (`s3://BUCKET/PREFIX?…`, `gs://…`, `az://…`), which this process leases.
    #[arg(long)]
    pub data_dir: PathBuf,
    /// Address of the PostgreSQL endpoint.
    #[arg(long, default_value = DEFAULT_SQL_LISTEN)]
    pub listen: String,
    /// Address of the Prometheus endpoint (`GET /metrics`).
    #[arg(long, default_value = DEFAULT_METRICS_LISTEN)]
    pub metrics_listen: String,
    /// A source to replay (repeatable): file:PATH, -, nats://HOST:PORT/STREAM or
    /// generator:chbench?rate=ROWS_PER_S[&base_rows=N][&seed=S], or a PostgreSQL database
    /// postgres://USER@HOST:PORT/DB[?publication=P&slot=S&tables=A,B] (logical replication).
    #[arg(long = "source")]
    pub sources: Vec<String>,
    /// Memory one query may use in joins, aggregations and sorts, in MiB.
    #[arg(long, default_value_t = 1024)]
    pub query_memory_mb: usize,
    /// Stop after this many seconds (default: run until Ctrl-C / SIGTERM).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Require this password from every SQL client (SCRAM-SHA-256; psql reads it from
    /// PGPASSWORD or prompts). The file's first line is the password, or a PostgreSQL
    /// SCRAM-SHA-256 verifier. Without it, any user connects without a password.
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// Listen beyond loopback without --password-file (anyone who reaches the port
    /// reads every table): refused unless this says it is meant.
    #[arg(long)]
    pub insecure_no_password: bool,
    /// SQL clients served at once; one more is refused with SQLSTATE 53300.
    #[arg(long, default_value_t = retina_server::pg::connection_limit::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds between checkpoints: a crash loses nothing, but replays what came
    /// after the latest one, and sources are acknowledged only up to it.
    #[arg(long, default_value_t = 5.0)]
    pub checkpoint_seconds: f64,
    #[command(flatten)]
    pub publish: super::publishing::PublishArgs,
    #[command(flatten)]
    pub compression: super::file_compression::CompressionArgs,
}

/// Opens the lake at `location` as its writer, publishing as asked, its new data
/// files compressed towards `compression` (`None`: the store's choice by location).
pub fn open_lake(location: &str, publish: Option<PublishOptions>, compression: Option<CompressionGoal>, command: &str) -> anyhow::Result<ParquetLakeStore> {
    // A local dir is created (and locked) by the store; a URL names one that exists.
    let shown = retina_storage::redacted(location);
    let store = ParquetLakeStore::open(location).with_context(|| format!("opening the lake in {shown}"))?;
    if let Some(previous) = store.took_over_from() {
        eprintln!("retina {command}: took over the expired lease of {previous} on {shown}; recovering what it made durable");
    }
    let store = match compression {
        Some(goal) => store.compressing_for(goal),
        None => store,
    };
    Ok(store.publishing(publish))
}

/// What a serving instance runs on: engine, session and sources. The engine is
/// created and dropped outside any async context (its storage owns a runtime).
pub struct Instance {
    pub engine: Arc<Engine>,
    pub session: Arc<RetinaSession>,
    pub sources: Vec<ServedSource>,
}

impl Instance {
    /// Starts the engine in `data_dir` and the given sources.
    pub fn start(
        data_dir: &std::path::Path,
        source_uris: &[String],
        query_memory_mb: usize,
        config: EngineConfig,
        publish: Option<PublishOptions>,
        compression: Option<CompressionGoal>,
    ) -> anyhow::Result<Self> {
        for uri in source_uris {
            ServedSource::validate(uri)?;
        }
        let location = data_dir.to_str().with_context(|| format!("{} is not UTF-8", data_dir.display()))?;
        let shown = retina_storage::redacted(location);
        let store = open_lake(location, publish, compression, "serve")?;
        // `open` recovers a data dir that holds a lakehouse (from its latest checkpoint;
        // sources then resume from their recovered positions) or starts an empty one.
        let engine = Arc::new(
            Engine::open(config, Arc::new(store))
                .with_context(|| format!("opening the lakehouse in {shown}"))?,
        );
        let registry = SourceRegistry::new();
        let options = SessionOptions { query_memory_limit: Some(query_memory_mb.max(1) << 20), ..SessionOptions::default() };
        let session = Arc::new(RetinaSession::new(Arc::clone(&engine), registry.clone(), options));
        let mut sources = Vec::new();
        for uri in source_uris {
            eprintln!("retina serve: replaying {}", retina_core::redact::RedactedUri::new(&uri));
            sources.push(ServedSource::start(uri, Arc::clone(&engine), registry.clone())?);
        }
        Ok(Self { engine, session, sources })
    }

    /// Stops the sources, then closes the engine with a final checkpoint so the data
    /// dir reopens as it is now.
    /// A source that failed while serving makes this an error (after the checkpoint):
    /// `retina serve` then exits non-zero.
    pub fn stop(self) -> anyhow::Result<()> {
        let failures: Vec<String> = self.sources.into_iter().filter_map(ServedSource::stop).collect();
        drop(self.session);
        // Checkpoint through the shared handle: a connection task may still hold the
        // session (and so the engine) for a moment, and a plain sync would leave the
        // last changes to be lost on reopen.
        self.engine.flush_and_checkpoint().context("final flush and checkpoint")?;
        if !failures.is_empty() {
            anyhow::bail!("{} while serving: {}", if failures.len() == 1 { "a source failed" } else { "sources failed" }, failures.join("; "));
        }
        Ok(())
    }
}

pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    // Read the password before anything starts: a bad file stops nothing half-way.
    let authentication = match &args.password_file {
        Some(path) => scram_from_password_file(path)?,
        None => ClientAuthentication::Trust,
    };
    if args.password_file.is_none() && !args.insecure_no_password && !is_loopback(&args.listen) {
        anyhow::bail!(
            "--listen {} reaches beyond this machine, and without --password-file anyone who reaches it reads every \
             table: give --password-file PATH, or --insecure-no-password if that is meant",
            args.listen
        );
    }
    let config = EngineConfig { checkpoint_interval: Some(checkpoint_interval(args.checkpoint_seconds)?), ..EngineConfig::default() };
    let publish = args.publish.options()?;
    let instance = Instance::start(&args.data_dir, &args.sources, args.query_memory_mb, config, publish, args.compression.goal())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the async runtime")?;
    let endpoints =
        Endpoints { listen: &args.listen, metrics_listen: &args.metrics_listen, authentication, max_connections: args.max_connections };
    let served = runtime.block_on(serve(Arc::clone(&instance.session), endpoints, args.seconds));
    // Connection tasks hold the session; end them before the engine goes.
    runtime.shutdown_timeout(Duration::from_secs(2));
    instance.stop()?;
    served
}

/// `--checkpoint-seconds` as a period (positive and finite).
pub fn checkpoint_interval(seconds: f64) -> anyhow::Result<Duration> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        anyhow::bail!("--checkpoint-seconds must be a positive number of seconds, got {seconds}");
    }
    Ok(Duration::from_secs_f64(seconds))
}

/// Where and how `retina serve` listens.
pub struct Endpoints<'a> {
    pub listen: &'a str,
    pub metrics_listen: &'a str,
    pub authentication: ClientAuthentication,
    pub max_connections: usize,
}

/// Whether `listen` (HOST:PORT) is a loopback address; a name that does not parse
/// (`localhost` aside) is not assumed to be one.
fn is_loopback(listen: &str) -> bool {
    let host = listen.rsplit_once(':').map_or(listen, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Serves until a signal (or `seconds`); prints how to connect.
pub async fn serve(session: Arc<RetinaSession>, endpoints: Endpoints<'_>, seconds: Option<f64>) -> anyhow::Result<()> {
    let password = matches!(endpoints.authentication, ClientAuthentication::ScramSha256(_));
    let sql =
        PgServer::start_with_limit(endpoints.listen, Arc::clone(&session), endpoints.authentication, endpoints.max_connections).await?;
    let metrics = MetricsServer::start(endpoints.metrics_listen, session).await?;
    let addr = sql.local_addr();
    println!("retina serve: SQL (PostgreSQL protocol) on {addr}; metrics on http://{}/metrics", metrics.local_addr());
    if password {
        println!("  clients authenticate with the password of --password-file (SCRAM-SHA-256), e.g. PGPASSWORD=...");
    }
    println!("  connect with: psql -h {} -p {} -U retina retina", addr.ip(), addr.port());
    println!("  or:           retina sql --connect {addr}");
    wait_for_stop(seconds).await;
    eprintln!("retina serve: stopping");
    sql.shutdown().await;
    metrics.shutdown().await;
    Ok(())
}

async fn wait_for_stop(seconds: Option<f64>) {
    let timer = async {
        match seconds {
            Some(s) => tokio::time::sleep(Duration::from_secs_f64(s.max(0.0))).await,
            None => std::future::pending().await,
        }
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = timer => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback;

    #[test]
    fn only_loopback_addresses_count_as_loopback() {
        for listen in ["127.0.0.1:5433", "127.0.0.2:1", "[::1]:5433", "localhost:5433"] {
            assert!(is_loopback(listen), "{listen}");
        }
        for listen in ["0.0.0.0:5433", "[::]:5433", "10.0.0.1:5433", "db.example.com:5433", "5433"] {
            assert!(!is_loopback(listen), "{listen}");
        }
    }
}
