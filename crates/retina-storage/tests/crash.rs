//! Crash test: the replayer runs in a child process and is killed with SIGKILL at
//! random moments (during replay, flushes, checkpoints, GC), then restarted, until it
//! finishes the stream. The final lakehouse must equal the stream applied once, in
//! order; the worker itself checks a cross-table invariant on snapshots as it runs.
//! `RETINA_CRASH_KILLS` sets the number of kills (default 50).

#[path = "crash/worker.rs"]
mod worker;

use std::collections::HashMap;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use retina_core::rows::rows_of;
use retina_core::value::encode_key;
use retina_core::{Engine, EngineConfig, RowChange, TableId, Value};
use retina_storage::ParquetLakeStore;
use retina_workload::chbench::{schemas, ChBenchTables};
use retina_workload::crash_stream::crash_stream;

const SEED: u64 = 11;
const BASE_ROWS: u64 = 3_000;
const TRANSACTIONS: usize = 30_000;

fn worker(dir: &std::path::Path) -> Command {
    worker_for(dir, TRANSACTIONS)
}

fn worker_for(dir: &std::path::Path, transactions: usize) -> Command {
    worker::command(dir, SEED, BASE_ROWS, transactions)
}

/// Not a test: the worker process the tests here spawn (this binary run again).
#[test]
#[ignore = "the crash tests' worker process; they start it themselves"]
fn crash_worker_process() {
    worker::main()
}

/// The stream applied once, in order: live rows per table, by key.
fn expected(tables: &ChBenchTables, transactions: usize) -> HashMap<TableId, HashMap<Vec<u8>, Vec<Value>>> {
    let schemas = schemas();
    let ids = tables.all();
    let key_of = |table: TableId, row: &[Value]| {
        let schema = &schemas[ids.iter().position(|&t| t == table).expect("known table")];
        encode_key(schema.primary_key().iter().map(|&i| &row[i]))
    };
    let mut state: HashMap<TableId, HashMap<Vec<u8>, Vec<Value>>> = ids.iter().map(|&t| (t, HashMap::new())).collect();
    for changes in crash_stream(*tables, SEED, BASE_ROWS, transactions) {
        for change in changes {
            match change {
                RowChange::Insert { table, row } => {
                    let key = key_of(table, &row);
                    assert!(state.get_mut(&table).expect("table").insert(key, row).is_none(), "stream inserts a live key");
                }
                RowChange::Update { table, key, row } => {
                    let rows = state.get_mut(&table).expect("table");
                    assert!(rows.remove(&encode_key(&key)).is_some(), "stream updates a missing key");
                    let new_key = key_of(table, &row);
                    rows.insert(new_key, row);
                }
                RowChange::Delete { table, key } => {
                    assert!(state.get_mut(&table).expect("table").remove(&encode_key(&key)).is_some(), "stream deletes a missing key");
                }
                other => panic!("the crash stream has only inserts, updates and deletes: {other:?}"),
            }
        }
    }
    state
}

#[test]
fn killed_and_restarted_replay_ends_in_the_exact_final_state() {
    let kills: usize = std::env::var("RETINA_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = rand::rngs::SmallRng::seed_from_u64(SEED);
    let mut killed = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while killed < kills {
        assert!(Instant::now() < deadline, "crash test took too long");
        let mut child = worker(dir.path()).spawn().expect("start crash_worker");
        std::thread::sleep(Duration::from_millis(rng.random_range(20..250)));
        match child.try_wait().expect("poll child") {
            Some(status) => {
                let output = child.wait_with_output().expect("output");
                assert!(status.success(), "worker failed: {}", String::from_utf8_lossy(&output.stderr));
                panic!("the worker finished after {killed} kills: make the stream longer for {kills} kills");
            }
            None => {
                child.kill().expect("SIGKILL");
                let output = child.wait_with_output().expect("reap");
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(!stderr.contains("crash_worker:"), "worker reported an error before the kill: {stderr}");
                killed += 1;
            }
        }
    }
    let output = worker(dir.path()).output().expect("final run");
    assert!(output.status.success(), "final run failed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("DONE"));
    assert_final_state(dir.path(), TRANSACTIONS, &format!("after {killed} kills"));
}

/// Opens the lakehouse in `dir` and compares every table with the stream applied once.
fn assert_final_state(dir: &std::path::Path, transactions: usize, context: &str) {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8")).expect("store");
    let config = EngineConfig { gc_interval: None, checkpoint_interval: None, ..EngineConfig::default() };
    let engine = Engine::open(config, Arc::new(store)).expect("open after the runs");
    let ids: Vec<TableId> = schemas().iter().map(|s| engine.table_id(s.name()).expect("table")).collect();
    let tables = ChBenchTables::from_ids(&ids);
    let expected = expected(&tables, transactions);
    let snapshot = engine.snapshot().expect("snapshot");
    for (index, schema) in schemas().iter().enumerate() {
        let table = ids[index];
        let rows = rows_of(&engine.scan(table, &snapshot, None).expect("scan")).expect("rows");
        let mut got: HashMap<Vec<u8>, Vec<Value>> = HashMap::new();
        for row in rows {
            let key = encode_key(schema.primary_key().iter().map(|&i| &row[i]));
            assert!(got.insert(key, row).is_none(), "{}: a key is visible twice {context}", schema.name());
        }
        assert_eq!(got.len(), expected[&table].len(), "{}: row count {context}", schema.name());
        assert!(got == expected[&table], "{}: rows differ {context}", schema.name());
    }
}

/// Each risky step, hit deterministically: the worker aborts when it reaches the
/// failpoint, restarts, finishes; the state must be exact.
#[test]
fn aborting_at_each_failpoint_then_restarting_ends_in_the_exact_final_state() {
    const FAILPOINTS: [&str; 9] = [
        "storage_gc::before-swap",
        "storage_gc::before-catalog",
        "flush::after-write",
        "flush::before-catalog",
        "checkpoint::after-segments",
        "checkpoint::before-manifest",
        "checkpoint::after-manifest",
        "gc::between-files",
        "shard::before-rotate",
    ];
    let transactions = 4_000;
    for failpoint in FAILPOINTS {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = worker_for(dir.path(), transactions)
            // The third hit, or the first for storage GC's rarer steps.
            .env("FAILPOINTS", if failpoint.starts_with("storage_gc") { format!("{failpoint}=panic") } else { format!("{failpoint}=2*off->panic") })
            .output()
            .expect("run with the failpoint");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{failpoint} never fired: {stderr}");
        assert!(stderr.contains(failpoint), "{failpoint}: the worker died of something else: {stderr}");
        let output = worker_for(dir.path(), transactions).output().expect("restart");
        assert!(output.status.success(), "{failpoint}: restart failed: {}", String::from_utf8_lossy(&output.stderr));
        assert_final_state(dir.path(), transactions, &format!("after aborting at {failpoint}"));
    }
}
