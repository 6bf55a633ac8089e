//! SQL in `retina demo`: the CH-benCHmark queries run as SQL (DataFusion over Retina
//! snapshots) while the workload replays, and with `--serve` the PostgreSQL endpoint,
//! open from the end of the initial load until Ctrl-C.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use retina_bench::live::Latency;
use retina_core::Engine;
use retina_workload::chbench::sql::QUERIES;
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_server::PgServer;
use tokio::runtime::Runtime;
use tokio::task::JoinHandle;

/// Pause between two SQL queries, so the demo's replay keeps most of the CPU.
const PAUSE: Duration = Duration::from_millis(50);

type Samples = Arc<Mutex<BTreeMap<&'static str, Vec<f64>>>>;

pub struct DemoSql {
    runtime: Option<Runtime>,
    session: Option<Arc<RetinaSession>>,
    server: Option<PgServer>,
    stop: Arc<AtomicBool>,
    queries: Option<JoinHandle<Result<(), String>>>,
    samples: Samples,
}

impl DemoSql {
    /// Starts the SQL query loop and, with `listen`, the PostgreSQL endpoint.
    pub fn start(engine: &Arc<Engine>, listen: Option<&str>) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let session = Arc::new(RetinaSession::new(Arc::clone(engine), SourceRegistry::new(), SessionOptions::default()));
        let server = match listen {
            Some(listen) => {
                let server = runtime.block_on(PgServer::start(listen, Arc::clone(&session)))?;
                let addr = server.local_addr();
                eprintln!("retina demo: SQL endpoint open: psql -h {} -p {} -U retina retina", addr.ip(), addr.port());
                Some(server)
            }
            None => None,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let samples: Samples = Arc::default();
        let queries = {
            let (session, stop, samples) = (Arc::clone(&session), Arc::clone(&stop), Arc::clone(&samples));
            runtime.spawn(async move {
                while !stop.load(SeqCst) {
                    for query in QUERIES {
                        if stop.load(SeqCst) {
                            break;
                        }
                        let start = Instant::now();
                        let mut stream = session.sql(query.sql).await.map_err(|e| format!("{}: {e}", query.name))?;
                        while let Some(batch) = stream.next().await {
                            batch.map_err(|e| format!("{}: {e}", query.name))?;
                        }
                        let ms = start.elapsed().as_secs_f64() * 1000.0;
                        if let Ok(mut samples) = samples.lock() {
                            samples.entry(query.name).or_default().push(ms);
                        }
                        tokio::time::sleep(PAUSE).await;
                    }
                }
                Ok(())
            })
        };
        Ok(Self { runtime: Some(runtime), session: Some(session), server, stop, queries: Some(queries), samples })
    }

    /// Stops the query loop; returns each query's latency.
    pub fn stop_queries(&mut self) -> anyhow::Result<Vec<(&'static str, Latency)>> {
        self.stop.store(true, SeqCst);
        if let (Some(runtime), Some(queries)) = (self.runtime.as_ref(), self.queries.take()) {
            runtime.block_on(queries).context("the SQL query loop panicked")?.map_err(anyhow::Error::msg)?;
        }
        let samples = self.samples.lock().map_err(|_| anyhow::anyhow!("query samples poisoned"))?;
        // In the order of the query list.
        Ok(QUERIES
            .iter()
            .filter_map(|query| samples.get(query.name).map(|values| (query.name, Latency::of(values.clone()))))
            .collect())
    }

    /// Keeps the endpoint open until Ctrl-C.
    pub fn serve_until_interrupted(&mut self) -> anyhow::Result<()> {
        let (Some(runtime), Some(server)) = (self.runtime.as_ref(), self.server.as_ref()) else { return Ok(()) };
        let addr = server.local_addr();
        println!("The SQL endpoint stays open (Ctrl-C to stop):");
        println!("  psql -h {} -p {} -U retina retina", addr.ip(), addr.port());
        println!("  retina sql --connect {addr} -c 'SELECT * FROM retina.watermarks'");
        runtime.block_on(tokio::signal::ctrl_c()).context("waiting for Ctrl-C")?;
        Ok(())
    }
}

impl Drop for DemoSql {
    fn drop(&mut self) {
        self.stop.store(true, SeqCst);
        if let Some(runtime) = self.runtime.take() {
            if let Some(server) = self.server.take() {
                runtime.block_on(server.shutdown());
            }
            runtime.shutdown_timeout(Duration::from_secs(2));
        }
        // The session (and its engine handle) goes after the runtime, off any async context.
        self.session.take();
    }
}
