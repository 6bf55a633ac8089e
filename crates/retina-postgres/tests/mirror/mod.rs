//! Shared by the replication tests: a Retina engine on a temp dir, a running source,
//! waiting for the mirror to catch up, and rendering mirrored rows as text.
#![allow(dead_code)] // each test binary uses a different part

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use retina_core::rows::rows_of;
use retina_core::{Engine, EngineConfig, Value};
use retina_postgres::{PgSource, PgSourceOptions, PgSourceResult, Phase, SharedStatus};
use retina_storage::ParquetLakeStore;

pub fn engine_config() -> EngineConfig {
    EngineConfig {
        shards: 2,
        block_rows: 256,
        file_rows: 1024,
        batch_changes: 256,
        checkpoint_interval: Some(Duration::from_millis(200)),
        ..EngineConfig::default()
    }
}

pub fn open_engine(dir: &std::path::Path) -> Arc<Engine> {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8 path")).expect("store");
    Arc::new(Engine::open(engine_config(), Arc::new(store)).expect("engine"))
}

/// A source running on its own thread.
pub struct RunningSource {
    pub status: SharedStatus,
    stop: Arc<std::sync::atomic::AtomicBool>,
    handle: Option<JoinHandle<PgSourceResult<()>>>,
    pub name: String,
}

impl RunningSource {
    pub fn start(engine: &Arc<Engine>, uri: &str) -> RunningSource {
        let options = PgSourceOptions::parse(uri).expect("source options");
        let source = PgSource::new(options);
        let status = source.status();
        let stop = source.stop_flag();
        let name = source.name().to_string();
        let engine = Arc::clone(engine);
        let handle = std::thread::spawn(move || source.run(&engine));
        RunningSource { status, stop, handle: Some(handle), name }
    }

    /// Stops it and returns how it ended.
    pub fn stop(mut self) -> PgSourceResult<()> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().expect("joined once").join().expect("source thread panicked")
    }

    /// Waits until it ends by itself (an error) and returns the result.
    pub fn wait_for_end(mut self, limit: Duration) -> PgSourceResult<()> {
        let deadline = Instant::now() + limit;
        let handle = self.handle.take().expect("joined once");
        while !handle.is_finished() {
            assert!(Instant::now() < deadline, "the source did not stop within {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        handle.join().expect("source thread panicked")
    }

    pub fn phase(&self) -> Phase {
        self.status.lock().phase
    }

    pub fn wait_streaming(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let status = self.status.lock().clone();
            match status.phase {
                Phase::Streaming => return,
                Phase::Failed | Phase::Stopped => panic!("the source ended: {:?}", status.error),
                _ => {}
            }
            assert!(Instant::now() < deadline, "the source never started streaming: {status:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for RunningSource {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(handle) = self.handle.take() {
            let _ = handle.join();
        }
    }
}

/// Every row of a Retina table (by name), rendered and sorted.
pub fn mirrored_rows(engine: &Engine, table: &str) -> Vec<String> {
    let Some(id) = engine.table_id(table) else { return Vec::new() };
    engine.sync().expect("sync");
    let snapshot = engine.snapshot().expect("snapshot");
    let runtime = engine.table(id).expect("table");
    let columns: Vec<usize> = (0..runtime.schema().column_count()).collect();
    let batches = engine.scan(id, &snapshot, Some(&columns)).expect("scan");
    let mut rows: Vec<String> = rows_of(&batches).expect("rows").iter().map(|row| render_row(row)).collect();
    rows.sort();
    rows
}

pub fn render_row(row: &[Value]) -> String {
    row.iter().map(render_value).collect::<Vec<_>>().join("|")
}

/// Values as PostgreSQL prints them for the column types the tests compare
/// (integers, numeric with its scale, text), NULL as the empty string.
pub fn render_value(value: &Value) -> String {
    match value {
        Value::Null => String::new(),
        Value::Int16(v) => v.to_string(),
        Value::Int32(v) => v.to_string(),
        Value::Int64(v) => v.to_string(),
        Value::Utf8(v) => v.to_string(),
        Value::Boolean(v) => if *v { "t" } else { "f" }.to_string(),
        // The tests' numeric columns have scale 2.
        Value::Decimal128(v) => cents(*v),
        other => format!("{other:?}"),
    }
}

/// `numeric(p, 2)` printed as PostgreSQL does.
pub fn cents(unscaled: i128) -> String {
    let sign = if unscaled < 0 { "-" } else { "" };
    let magnitude = unscaled.unsigned_abs();
    format!("{sign}{}.{:02}", magnitude / 100, magnitude % 100)
}

/// Waits until `check` holds (polling), panicking with `what` after `limit`.
pub fn eventually(limit: Duration, what: &str, mut check: impl FnMut() -> Result<(), String>) {
    let deadline = Instant::now() + limit;
    loop {
        match check() {
            Ok(()) => return,
            Err(reason) if Instant::now() >= deadline => panic!("{what}: {reason}"),
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}
