//! Replays the crash-test stream into a data dir, resuming after the recovered
//! position; checkpoints, flushes and GC run often so that a kill lands anywhere.
//! Checks the cross-table invariant on snapshots as it goes. Used by
//! `tests/crash.rs`, which kills it with SIGKILL at random moments.
//!
//! Usage: crash_worker DATA_DIR SEED BASE_ROWS TRANSACTIONS
//! With `FAILPOINTS=name=action` (the `fail` crate, when built with retina-core's
//! `failpoints` feature, as the tests do) it aborts at that exact step.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use retina_bench::chbench::{schemas, ChBenchTables};
use retina_bench::crash_stream::crash_stream;
use retina_bench::queries::undelivered_orders;
use retina_core::{Engine, EngineConfig, TableId};
use retina_storage::ParquetLakeStore;

const SOURCE: &str = "crash-stream";

fn main() -> ExitCode {
    // A panic anywhere, including a failpoint configured through FAILPOINTS, is a
    // crash at exactly that step: abort the process like a kill would.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("crash_worker: aborting at {info}");
        std::process::abort();
    }));
    let _failpoints = fail::FailScenario::setup();
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("crash_worker: {message}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, seed, base_rows, transactions] = args.as_slice() else {
        return Err("usage: crash_worker DATA_DIR SEED BASE_ROWS TRANSACTIONS".into());
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
        materialize_queries_after: None,
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
    engine.close().map_err(|e| e.to_string())?;
    println!("DONE");
    Ok(())
}
