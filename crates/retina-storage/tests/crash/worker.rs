//! The crash tests' worker: replays the crash-test stream into a lake (a local
//! directory or an object-store URL), resuming
//! after the recovered position; checkpoints, flushes and GC run often so that a kill
//! lands anywhere. Checks the cross-table invariant on snapshots as it goes.
//!
//! It is this test binary run again ([`command`]), so it needs no binary target of
//! its own: the arguments come in [`ARGS_ENV`] (LOCATION SEED BASE_ROWS TRANSACTIONS).
//! With `FAILPOINTS=name=action` (the `fail` crate; retina-core's `failpoints`
//! feature is on in these tests) it aborts at that exact step.

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use retina_core::{Engine, EngineConfig, TableId};
use retina_storage::ParquetLakeStore;
use retina_workload::chbench::queries::undelivered_orders;
use retina_workload::chbench::{schemas, ChBenchTables};
use retina_workload::crash_stream::crash_stream;

const SOURCE: &str = "crash-stream";
/// Where the worker process finds its arguments.
pub const ARGS_ENV: &str = "RETINA_CRASH_WORKER_ARGS";
/// Failpoints (`name=action;…`, as `FAILPOINTS`) turned on once the lake is open
/// and its tables exist, and off before the final clean shutdown.
pub const TRANSIENT_FAULTS_ENV: &str = "RETINA_CRASH_TRANSIENT_FAULTS";

/// The worker process for the lake at `location` (stdout and stderr piped; no
/// failpoints unless the caller sets `FAILPOINTS`).
pub fn command(location: &str, seed: u64, base_rows: u64, transactions: usize) -> Command {
    let mut command = Command::new(std::env::current_exe().expect("the test binary's path"));
    // `--nocapture`: the worker's output is the process's, not the harness's.
    command
        .args(["crash_worker_process", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
        .env(ARGS_ENV, format!("{location}\t{seed}\t{base_rows}\t{transactions}"))
        .env_remove("FAILPOINTS")
        .env_remove(TRANSIENT_FAULTS_ENV)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// The worker's main: never returns (exit code 0 when done, 2 on an error, abort on
/// a panic or a failpoint).
pub fn main() -> ! {
    // A panic anywhere, including a failpoint configured through FAILPOINTS, is a
    // crash at exactly that step: abort the process like a kill would.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("crash_worker: aborting at {info}");
        std::process::abort();
    }));
    let _failpoints = fail::FailScenario::setup();
    match run() {
        Ok(()) => std::process::exit(0),
        Err(message) => {
            // One write: `eprintln!` writes its pieces one by one, and a kill between
            // them left "crash_worker: " without the lease refusal the test looks for.
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("crash_worker: {message}\n").as_bytes());
            std::process::exit(2)
        }
    }
}

fn run() -> Result<(), String> {
    let args = std::env::var(ARGS_ENV).map_err(|e| format!("{ARGS_ENV}: {e}"))?;
    let [dir, seed, base_rows, transactions] = args.split('\t').collect::<Vec<_>>()[..] else {
        return Err(format!("{ARGS_ENV} must be LOCATION SEED BASE_ROWS TRANSACTIONS (tab-separated), got {args:?}"));
    };
    let parse = |s: &str, what: &str| s.parse::<u64>().map_err(|e| format!("{what} {s:?}: {e}"));
    let (seed, base_rows, transactions) =
        (parse(seed, "seed")?, parse(base_rows, "base rows")?, parse(transactions, "transactions")? as usize);
    let config = EngineConfig {
        shards: 2,
        block_rows: 256,
        file_rows: 1024,
        batch_changes: 256,
        gc_interval: Some(Duration::from_millis(5)),
        checkpoint_interval: Some(Duration::from_millis(15)),
       
        storage_gc_interval: Some(Duration::from_millis(40)),
        storage_gc_threshold: 0.3,
        background_nice: 5,
    };
    let store = ParquetLakeStore::open(dir).map_err(|e| e.to_string())?;
    let engine = Engine::open(config, Arc::new(store)).map_err(|e| e.to_string())?;
    // A kill may land between two table creations: create what is missing.
    let mut ids: Vec<TableId> = Vec::new();
    for schema in schemas() {
        let id = match engine.table_id(schema.name()) {
            Some(id) => id,
            None => engine.create_table(schema).map_err(|e| e.to_string())?,
        };
        ids.push(id);
    }
    let tables = ChBenchTables::from_ids(&ids);
    // Background faults start once the lake is open and its tables exist (an open
    // or a table creation that fails is an error the caller sees, not a fault to
    // ride out).
    let transient_faults: Vec<(String, String)> = std::env::var(TRANSIENT_FAULTS_ENV)
        .unwrap_or_default()
        .split(';')
        .filter_map(|entry| entry.trim().split_once('='))
        .map(|(name, action)| (name.to_string(), action.to_string()))
        .collect();
    for (name, action) in &transient_faults {
        fail::cfg(name, action).map_err(|e| format!("{TRANSIENT_FAULTS_ENV}: {name}={action}: {e}"))?;
    }
    let resume = engine
        .recovered_positions()
        .iter()
        .find(|p| p.source == SOURCE)
        .map(|p| p.position.parse::<usize>().map(|k| k + 1))
        .transpose()
        .map_err(|e| format!("bad recovered position: {e}"))?
        .unwrap_or(0);
    let stream = crash_stream(tables, seed, base_rows, transactions);
    for (k, changes) in stream.into_iter().enumerate().skip(resume) {
        engine.submit_from(SOURCE, k.to_string(), changes).map_err(|e| format!("transaction {k}: {e}"))?;
        if k % 25 == 0 {
            engine.flush_batch().map_err(|e| e.to_string())?;
            let snapshot = engine.snapshot().map_err(|e| e.to_string())?;
            let (new_orders, undelivered) = undelivered_orders(&engine, &tables, &snapshot).map_err(|e| e.to_string())?;
            if new_orders != undelivered {
                return Err(format!("snapshot {}: {new_orders} new orders but {undelivered} undelivered orders", snapshot.ts()));
            }
        }
    }
    // For tests that inject transient faults: proof that they were met (and retried).
    println!("FLUSH FAILURES: {}", engine.stats().flush_failures);
    // Faults stop before the clean shutdown: its own errors are not what is tested.
    for (name, _) in &transient_faults {
        fail::remove(name);
    }
    engine.close().map_err(|e| e.to_string())?;
    println!("DONE");
    Ok(())
}
