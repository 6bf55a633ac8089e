//! Crash test: the replayer runs in a child process and is killed with SIGKILL at
//! random moments (during replay, flushes, checkpoints, GC), then restarted, until it
//! finishes the stream. The final lakehouse must equal the stream applied once, in
//! order; the worker itself checks a cross-table invariant on snapshots as it runs.
//! `RETINA_CRASH_KILLS` sets the number of kills (default 50). The same tests run
//! with the lake on an S3-compatible server (moto), where a restart after a kill
//! must also wait for the killed writer's lease to expire.

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
use retina_test_support::LocalS3Server;
use retina_workload::chbench::{schemas, ChBenchTables};
use retina_workload::crash_stream::crash_stream;

const SEED: u64 = 11;
const BASE_ROWS: u64 = 3_000;
const TRANSACTIONS: usize = 30_000;

/// How long a writer's lease lasts on S3 here: a killed writer's successor waits
/// at most this long.
const LEASE_SECONDS: f64 = 1.0;

/// A lake for one test: a temporary local directory, or a bucket on a moto server.
enum Lake {
    Local(tempfile::TempDir),
    S3 { _server: Option<LocalS3Server>, location: String },
}

impl Lake {
    fn local() -> Self {
        Lake::Local(tempfile::tempdir().expect("tempdir"))
    }

    /// A lake on a moto server of its own.
    fn s3() -> Self {
        let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
        let location = s3_location(&server, "crash");
        Lake::S3 { _server: Some(server), location }
    }

    /// A lake in a new bucket of `server`.
    fn s3_bucket(server: &LocalS3Server, bucket: &str) -> Self {
        Lake::S3 { _server: None, location: s3_location(server, bucket) }
    }

    fn location(&self) -> String {
        match self {
            Lake::Local(dir) => dir.path().to_str().expect("utf-8 temp dir").to_string(),
            Lake::S3 { location, .. } => location.clone(),
        }
    }
}

/// A new bucket on `server`, as a lake location with a short lease.
fn s3_location(server: &LocalS3Server, bucket: &str) -> String {
    server.create_bucket(bucket).unwrap_or_else(|e| panic!("{e}"));
    format!(
        "s3://{bucket}/lake?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=test&lease_seconds={LEASE_SECONDS}",
        server.endpoint()
    )
}

fn worker(location: &str) -> Command {
    worker_for(location, TRANSACTIONS)
}

fn worker_for(location: &str, transactions: usize) -> Command {
    worker::command(location, SEED, BASE_ROWS, transactions)
}

/// Whether a worker's output says it found the lake leased by another writer.
fn refused_for_lease(output: &std::process::Output) -> bool {
    !output.status.success() && String::from_utf8_lossy(&output.stderr).contains("holds its lease")
}

/// Runs `command` to its end, starting it again while the lake is still leased
/// by a killed writer (S3 only: a local lock dies with its process).
fn output_once_unleased(mut command: impl FnMut() -> Command) -> std::process::Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let output = command().output().expect("run the worker");
        if !refused_for_lease(&output) || Instant::now() > deadline {
            return output;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
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
    kill_and_restart(&Lake::local(), kills, "");
}

/// Kills at random moments of a replay whose background steps also fail at random
/// (the faults of [`TRANSIENT_FAULTS`]): recovery starts from whatever a failed step
/// left, and the end state is still exact.
#[test]
fn killed_and_restarted_replay_with_transient_faults_ends_in_the_exact_final_state() {
    let kills: usize = std::env::var("RETINA_CRASH_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(50) / 2;
    kill_and_restart(&Lake::local(), kills, TRANSIENT_FAULTS);
}

#[test]
fn killed_and_restarted_replay_on_s3_ends_in_the_exact_final_state() {
    let kills: usize = std::env::var("RETINA_CRASH_KILLS_S3").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    kill_and_restart(&Lake::s3(), kills, "");
}

/// Kills the worker `kills` times, then lets it finish; `faults` (as
/// [`TRANSIENT_FAULTS`], or empty) are on in every run but the last.
fn kill_and_restart(lake: &Lake, kills: usize, faults: &str) {
    let location = lake.location();
    let mut rng = rand::rngs::SmallRng::seed_from_u64(SEED);
    let mut killed = 0;
    let deadline = Instant::now() + Duration::from_secs(600);
    while killed < kills {
        assert!(Instant::now() < deadline, "crash test took too long");
        let mut child = worker(&location).env(worker::TRANSIENT_FAULTS_ENV, faults).spawn().expect("start crash_worker");
        std::thread::sleep(Duration::from_millis(rng.random_range(20..250)));
        match child.try_wait().expect("poll child") {
            Some(status) => {
                let output = child.wait_with_output().expect("output");
                if refused_for_lease(&output) {
                    continue; // the killed writer's lease has not expired yet
                }
                assert!(status.success(), "worker failed: {}", String::from_utf8_lossy(&output.stderr));
                panic!("the worker finished after {killed} kills: make the stream longer for {kills} kills");
            }
            None => {
                child.kill().expect("SIGKILL");
                let output = child.wait_with_output().expect("reap");
                if refused_for_lease(&output) {
                    continue; // refused, and killed before it could exit
                }
                let stderr = String::from_utf8_lossy(&output.stderr);
                assert!(!stderr.contains("crash_worker:"), "worker reported an error before the kill: {stderr}");
                killed += 1;
            }
        }
    }
    let output = output_once_unleased(|| worker(&location));
    assert!(output.status.success(), "final run failed: {}", String::from_utf8_lossy(&output.stderr));
    assert!(String::from_utf8_lossy(&output.stdout).contains("DONE"));
    assert_final_state(&location, TRANSACTIONS, &format!("after {killed} kills"));
}

/// Two writers on one S3 lake: while the first runs, the second refuses to start
/// and names it; once the first is killed, the second takes over when the lease
/// expires, and the stream ends applied exactly once.
#[test]
fn a_second_writer_on_s3_is_refused_then_takes_over_from_a_killed_one() {
    let transactions = 6_000;
    let lake = Lake::s3();
    let location = lake.location();
    let mut first = worker_for(&location, transactions).spawn().expect("start the first writer");
    std::thread::sleep(Duration::from_millis(1000));
    assert!(first.try_wait().expect("poll").is_none(), "the first writer still runs");
    let second = worker_for(&location, transactions).output().expect("second writer");
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(refused_for_lease(&second), "the second writer must refuse to start: {stderr}");
    assert!(stderr.contains(&format!("pid {}", first.id())), "the refusal names the holder: {stderr}");
    assert!(stderr.contains("s from now"), "and when its lease expires: {stderr}");

    first.kill().expect("SIGKILL the holder");
    let _ = first.wait_with_output();
    let killed_at = Instant::now();
    let mut taken_over_after = None;
    let output = output_once_unleased(|| {
        taken_over_after = Some(killed_at.elapsed());
        worker_for(&location, transactions)
    });
    assert!(output.status.success(), "the second writer failed: {}", String::from_utf8_lossy(&output.stderr));
    let waited = taken_over_after.expect("started");
    assert!(waited < Duration::from_secs_f64(LEASE_SECONDS * 3.0 + 5.0), "took over {waited:?} after the kill");
    assert_final_state(&location, transactions, "after the second writer took over");
}

/// Opens the lakehouse at `location` and compares every table with the stream
/// applied once.
fn assert_final_state(location: &str, transactions: usize, context: &str) {
    let store = Arc::new(ParquetLakeStore::open(location).expect("store"));
    let config = EngineConfig { gc_interval: None, checkpoint_interval: None, ..EngineConfig::default() };
    let engine = Engine::open(config, Arc::clone(&store) as _)
        .unwrap_or_else(|e| panic!("open {context}: {e}\n{}", describe_lake(store.as_ref())));
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

/// The catalog's and the latest checkpoint's files of every table, for a failure
/// that recovery reports: which files the rows it names came from, and how.
fn describe_lake(store: &ParquetLakeStore) -> String {
    use retina_core::storage::{CatalogStore, CheckpointStore};
    let mut out = String::new();
    let checkpoint = store.load_checkpoint();
    match store.load_catalog() {
        Ok(Some(catalog)) => {
            for table in &catalog.tables {
                out += &format!("catalog, table {} (next file id {}):\n", table.schema.name(), catalog.next_file_id);
                for f in &table.files {
                    out += &format!(
                        "  file {} rows {}..{} create ts {}..{} replaces {:?}\n",
                        f.file_id.0, f.first_row_id.0, f.first_row_id.0 + f.row_count, f.min_create_ts.0, f.max_create_ts.0,
                        f.replaces.iter().map(|id| id.0).collect::<Vec<_>>()
                    );
                }
            }
        }
        other => out += &format!("catalog: {other:?}\n"),
    }
    match checkpoint {
        Ok(Some(checkpoint)) => {
            out += &format!("checkpoint at ts {}:\n", checkpoint.ts.0);
            for table in &checkpoint.tables {
                out += &format!("  table {} (next row id {}):\n", table.schema.name(), table.next_row_id);
                for f in &table.files {
                    let deleted: u32 = f.deleted.iter().map(|w| w.count_ones()).sum();
                    out += &format!(
                        "    file {} rows {}..{} (capacity {}) deleted {deleted} {}\n",
                        f.file_id.0, f.first_row_id.0, f.first_row_id.0 + f.rows, f.capacity,
                        if f.is_buffered() { format!("in {} segments", f.segments.len()) } else { "flushed".into() }
                    );
                }
            }
        }
        other => out += &format!("checkpoint: {other:?}\n"),
    }
    out
}

/// Transient faults in background steps, at random: the first and then a fifth of
/// the catalog saves after a flush, a fifth of storage-GC rewrites at their swap or
/// catalog save, of deletes of replaced files and of unneeded checkpoint segments,
/// and a tenth of checkpoints at each step from its segments to after its manifest. The steps are retried or left for the next run, and the run
/// ends in the exact final state, which a reopened lake recovers.
const TRANSIENT_FAULTS: &str = "flush::before-catalog=1*return->20%return;storage_gc::before-swap=20%return;\
    storage_gc::before-catalog=20%return;storage_gc::delete-retired=20%return;\
    storage::delete-unreferenced-segments=20%return;checkpoint::after-segments=10%return;\
    checkpoint::before-manifest=10%return;checkpoint::after-manifest=10%return";

#[test]
fn transient_faults_during_replay_leave_the_exact_final_state() {
    replay_with_transient_faults(&Lake::local());
}

#[test]
fn transient_faults_during_replay_on_s3_leave_the_exact_final_state() {
    replay_with_transient_faults(&Lake::s3());
}

fn replay_with_transient_faults(lake: &Lake) {
    let location = lake.location();
    let transactions = 6_000;
    let output = worker_for(&location, transactions)
        .env(worker::TRANSIENT_FAULTS_ENV, TRANSIENT_FAULTS)
        .output()
        .expect("run with transient faults");
    assert!(output.status.success(), "the run failed: {}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!stdout.contains("FLUSH FAILURES: 0\n") && stdout.contains("FLUSH FAILURES: "), "no fault was met: {stdout}");
    assert_final_state(&location, transactions, "after transient faults");
}

/// Each risky step, hit deterministically: the worker aborts when it reaches the
/// failpoint, restarts, finishes; the state must be exact.
#[test]
fn aborting_at_each_failpoint_then_restarting_ends_in_the_exact_final_state() {
    abort_at_each_failpoint(&|_| Lake::local());
}

#[test]
fn aborting_at_each_failpoint_on_s3_then_restarting_ends_in_the_exact_final_state() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    abort_at_each_failpoint(&|index| Lake::s3_bucket(&server, &format!("failpoint-{index}")));
}

fn abort_at_each_failpoint(new_lake: &dyn Fn(usize) -> Lake) {
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
    for (index, failpoint) in FAILPOINTS.into_iter().enumerate() {
        let lake = new_lake(index);
        let location = lake.location();
        let output = worker_for(&location, transactions)
            // The third hit, or the first for storage GC's rarer steps.
            .env("FAILPOINTS", if failpoint.starts_with("storage_gc") { format!("{failpoint}=panic") } else { format!("{failpoint}=2*off->panic") })
            .output()
            .expect("run with the failpoint");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{failpoint} never fired: {stderr}");
        assert!(stderr.contains(failpoint), "{failpoint}: the worker died of something else: {stderr}");
        let output = output_once_unleased(|| worker_for(&location, transactions));
        assert!(output.status.success(), "{failpoint}: restart failed: {}", String::from_utf8_lossy(&output.stderr));
        assert_final_state(&location, transactions, &format!("after aborting at {failpoint}"));
    }
}
