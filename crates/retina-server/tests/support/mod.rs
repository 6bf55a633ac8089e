//! The served engine the endpoint tests run against: an engine with a `shop.items`
//! table of 500 rows, its SQL and metrics servers on loopback, and psql helpers.
#![allow(dead_code)] // each test binary uses a part

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_schema::DataType;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_server::pg::scram::ScramVerifier;
use retina_server::{ClientAuthentication, MetricsServer, PgServer};
use retina_storage::ParquetLakeStore;

/// A served engine. Field order is drop order: servers, then the runtime (outside any
/// async context), then the engine, whose storage owns a runtime of its own.
pub struct Fixture {
    pub session: Arc<RetinaSession>,
    pub ticks: TableId,
    pub sql: Option<PgServer>,
    pub metrics: Option<MetricsServer>,
    pub runtime: Option<tokio::runtime::Runtime>,
    pub engine: Arc<Engine>,
    pub table: TableId,
    pub _dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with_authentication(ClientAuthentication::Trust)
    }

    /// A server whose clients must give `password`.
    pub fn with_password(password: &str) -> Self {
        Self::with_authentication(ClientAuthentication::ScramSha256(Arc::new(ScramVerifier::from_password(password))))
    }

    pub fn with_authentication(authentication: ClientAuthentication) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig { shards: 2, block_rows: 64, file_rows: 256, batch_changes: 64, gc_interval: None, ..EngineConfig::default() };
        let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
        let engine = Arc::new(Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(store)).expect("engine"));
        let schema = TableSchema::from_columns(
            "shop.items",
            &[
                ("id", DataType::Int64, false),
                ("qty", DataType::Int32, false),
                ("price", DataType::Decimal128(10, 2), false),
                ("name", DataType::Utf8, true),
                ("ok", DataType::Boolean, false),
                ("weight", DataType::Float64, false),
            ],
            &["id"],
        )
        .expect("schema");
        let table = engine.create_table(schema).expect("table");
        let ticks = engine
            .create_table(TableSchema::from_columns("test.ticks", &[("id", DataType::Int64, false)], &["id"]).expect("schema"))
            .expect("ticks table");
        engine.submit((1..=500).map(|id| row(table, id)).collect()).expect("load");
        engine.sync().expect("sync");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        let session = Arc::new(RetinaSession::new(Arc::clone(&engine), SourceRegistry::new(), SessionOptions::default()));
        let sql = runtime
            .block_on(PgServer::start_with_authentication("127.0.0.1:0", Arc::clone(&session), authentication))
            .expect("sql server");
        let metrics = runtime.block_on(MetricsServer::start("127.0.0.1:0", Arc::clone(&session))).expect("metrics server");
        Self { session, ticks, sql: Some(sql), metrics: Some(metrics), runtime: Some(runtime), engine, table, _dir: dir }
    }

    pub fn addr(&self) -> SocketAddr {
        self.sql.as_ref().expect("server").local_addr()
    }

    pub fn psql(&self, args: &[&str]) -> std::process::Output {
        self.psql_with_password(None, args)
    }

    /// psql with `PGPASSWORD` set to `password` (unset for `None`); `-w`: never prompt.
    pub fn psql_with_password(&self, password: Option<&str>, args: &[&str]) -> std::process::Output {
        let port = self.addr().port().to_string();
        let mut command = Command::new("psql");
        command
            .args(["-X", "-w", "-h", "127.0.0.1", "-p", &port, "-U", "retina", "-d", "retina", "-A", "-t", "-v", "VERBOSITY=verbose"])
            .args(args)
            .env("PGCONNECT_TIMEOUT", "10")
            .env_remove("PGPASSWORD")
            .env_remove("PGPASSFILE")
            .env_remove("PGSERVICE");
        if let Some(password) = password {
            command.env("PGPASSWORD", password);
        }
        let output = command.output();
        match output {
            Ok(output) => output,
            Err(error) => panic!(
                "cannot run psql ({error}): these tests need the real psql binary; install the Debian package postgresql-client"
            ),
        }
    }

    pub fn psql_ok(&self, sql: &str) -> String {
        let output = self.psql(&["-v", "ON_ERROR_STOP=1", "-c", sql]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "psql -c {sql:?} failed: {stderr}");
        String::from_utf8_lossy(&output.stdout).trim_end().to_string()
    }

    pub fn psql_error(&self, sql: &str) -> String {
        let output = self.psql(&["-v", "ON_ERROR_STOP=1", "-c", sql]);
        assert!(!output.status.success(), "psql -c {sql:?} should fail");
        String::from_utf8_lossy(&output.stderr).to_string()
    }

    /// Whether no query snapshot is registered. A tick transaction first moves HWM, so
    /// a snapshot still held at the old HWM - 1 would keep LWM behind.
    pub fn no_live_snapshots(&self) -> bool {
        static NEXT: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);
        let id = NEXT.fetch_add(1, SeqCst);
        self.engine.submit(vec![RowChange::Insert { table: self.ticks, row: vec![Value::Int64(id)] }]).expect("tick");
        self.engine.sync().expect("sync");
        let txn = self.engine.transaction_service();
        txn.low_watermark() == txn.high_watermark().prev()
    }

    /// Waits up to `limit` until no query snapshot is registered: a query that ended
    /// in an error may still have split reads in flight, which hold its snapshot.
    pub fn released_within(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while !self.no_live_snapshots() {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// SQL queries started and not yet finished.
    pub fn running_queries(&self) -> u64 {
        let metrics = self.session.metrics().snapshot();
        metrics.started - metrics.finished
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let runtime = self.runtime.take().expect("runtime");
        if let Some(sql) = self.sql.take() {
            runtime.block_on(sql.shutdown());
        }
        if let Some(metrics) = self.metrics.take() {
            runtime.block_on(metrics.shutdown());
        }
        runtime.shutdown_timeout(Duration::from_secs(2));
    }
}

/// A raw StartupMessage (protocol 3.0, user and database `retina`).
pub fn send_startup(socket: &mut TcpStream) {
    let mut startup = Vec::new();
    startup.extend_from_slice(&196_608i32.to_be_bytes());
    startup.extend_from_slice(b"user\0retina\0database\0retina\0\0");
    let mut message = ((startup.len() + 4) as i32).to_be_bytes().to_vec();
    message.extend_from_slice(&startup);
    socket.write_all(&message).expect("startup");
}

pub fn row(table: TableId, id: i64) -> RowChange {
    RowChange::Insert {
        table,
        row: vec![
            Value::Int64(id),
            Value::Int32((id % 10) as i32),
            Value::Decimal128(id as i128 * 125),
            if id % 50 == 0 { Value::Null } else { Value::Utf8(format!("item {id}").into()) },
            Value::Boolean(id % 2 == 0),
            Value::Float64(id as f64 / 4.0),
        ],
    }
}

