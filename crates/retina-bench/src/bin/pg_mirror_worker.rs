//! Mirrors a PostgreSQL database into a data dir with the PostgreSQL source,
//! checkpointing often so that a kill lands anywhere. Used by `tests/pg_kill.rs`,
//! which kills it with SIGKILL at random moments and starts it again. When its
//! standard input closes it stops cleanly (final checkpoint) and exits 0.
//!
//! Usage: pg_mirror_worker DATA_DIR SOURCE_URI

use std::io::Read;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use retina_core::{Engine, EngineConfig};
use retina_postgres::{PgSource, PgSourceOptions};
use retina_storage::ParquetLakeStore;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("pg_mirror_worker: {message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, uri] = args.as_slice() else {
        return Err("usage: pg_mirror_worker DATA_DIR SOURCE_URI".into());
    };
    let config = EngineConfig {
        shards: 2,
        block_rows: 256,
        file_rows: 1024,
        batch_changes: 256,
        // Long enough that feedback (every 500 ms) often lands between two
        // checkpoints: confirming what is only visible would lose transactions.
        checkpoint_interval: Some(Duration::from_millis(700)),
        storage_gc_interval: Some(Duration::from_millis(200)),
        storage_gc_threshold: 0.3,
        ..EngineConfig::default()
    };
    let store = ParquetLakeStore::open(dir).map_err(|e| e.to_string())?;
    let engine = Arc::new(Engine::open(config, Arc::new(store)).map_err(|e| e.to_string())?);
    let source = PgSource::new(PgSourceOptions::parse(uri).map_err(|e| e.to_string())?);
    let stop = source.stop_flag();
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = std::io::stdin().read_to_end(&mut sink);
        stop.store(true, Ordering::Relaxed);
    });
    let outcome = source.run(&engine);
    let engine = Arc::try_unwrap(engine).map_err(|_| "the engine is still shared".to_string())?;
    engine.close().map_err(|e| e.to_string())?;
    outcome.map_err(|e| e.to_string())
}
