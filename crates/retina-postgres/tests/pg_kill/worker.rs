//! The kill test's worker: mirrors a PostgreSQL database into a data dir with the
//! PostgreSQL source, checkpointing often so that a kill lands anywhere. When its
//! standard input closes it stops cleanly (final checkpoint) and exits 0.
//!
//! It is this test binary run again ([`spawn`]), so it needs no binary target of its
//! own: the arguments come in [`ARGS_ENV`] (DATA_DIR and SOURCE_URI).

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use retina_core::{Engine, EngineConfig};
use retina_postgres::{PgSource, PgSourceOptions};
use retina_storage::ParquetLakeStore;

/// Where the worker process finds its arguments.
pub const ARGS_ENV: &str = "RETINA_PG_MIRROR_WORKER_ARGS";

/// Starts the worker process mirroring `uri` into `dir` (stdin piped: close it to
/// stop the worker cleanly).
pub fn spawn(dir: &Path, uri: &str) -> Child {
    Command::new(std::env::current_exe().expect("the test binary's path"))
        // `--nocapture`: the worker's output is the process's, not the harness's.
        .args(["pg_mirror_worker_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ARGS_ENV, format!("{}\t{uri}", dir.display()))
        .stdin(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the worker process")
}

/// The worker's main: never returns (exit code 0 after a clean stop, 2 on an error).
pub fn main() -> ! {
    match run() {
        Ok(()) => std::process::exit(0),
        Err(message) => {
            eprintln!("pg_mirror_worker: {message}");
            std::process::exit(2)
        }
    }
}

fn run() -> Result<(), String> {
    let args = std::env::var(ARGS_ENV).map_err(|e| format!("{ARGS_ENV}: {e}"))?;
    let Some((dir, uri)) = args.split_once('\t') else {
        return Err(format!("{ARGS_ENV} must be DATA_DIR and SOURCE_URI (tab-separated), got {args:?}"));
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
