//! The PostgreSQL source in a real process killed with SIGKILL at random moments
//! while clients write transfers on the source: every restart resumes from the
//! slot, and the data dir ends equal to the source row for row (nothing lost,
//! nothing applied twice), with the bank's invariants holding after every recovery.

mod bank;
mod mirror;
mod support;
#[path = "pg_kill/worker.rs"]
mod worker;

use std::process::Child;
use std::time::{Duration, Instant};

use bank::*;
use mirror::open_engine;
use rand::{Rng, SeedableRng};
use support::PgCluster;

fn spawn_worker(dir: &std::path::Path, uri: &str) -> Child {
    worker::spawn(dir, uri)
}

/// Not a test: the worker process the test here spawns (this binary run again).
#[test]
#[ignore = "the kill test's worker process; it starts it itself"]
fn pg_mirror_worker_process() {
    worker::main()
}

/// Waits until the worker's walsender is attached to the slot.
fn wait_attached(cluster: &PgCluster, worker: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if cluster.psql("SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'retina_slot' AND active") == "1" {
            return;
        }
        if let Ok(Some(status)) = worker.try_wait() {
            panic!("the worker exited before streaming: {status}");
        }
        assert!(Instant::now() < deadline, "the worker never attached to the slot");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (up to `limit`) until the worker confirmed, durably, the source's current
/// end of WAL, then stops it cleanly.
fn finish_caught_up(cluster: &PgCluster, mut worker: Child, limit: Duration) {
    let end = cluster.psql("SELECT pg_current_wal_lsn()");
    let deadline = Instant::now() + limit;
    while cluster.psql(&format!("SELECT confirmed_flush_lsn >= '{end}' FROM pg_replication_slots WHERE slot_name = 'retina_slot'")) != "t" {
        assert!(Instant::now() < deadline, "the worker never confirmed {end}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(worker.stdin.take());
    let status = worker.wait().expect("worker exits");
    assert!(status.success(), "clean stop: {status}");
}

#[test]
fn sigkill_of_the_mirroring_process_loses_and_duplicates_nothing() {
    let cluster = PgCluster::new();
    create_bank(&cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = cluster.url("postgres");
    let mut worker = spawn_worker(dir.path(), &uri);
    wait_attached(&cluster, &mut worker);
    let load = Load::start(&cluster, 3);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
    for round in 0..8 {
        std::thread::sleep(Duration::from_millis(rng.random_range(300..1500)));
        worker.kill().expect("SIGKILL the worker");
        worker.wait().expect("reap the worker");
        // What a killed process left is a consistent prefix of the source.
        {
            let engine = open_engine(dir.path());
            check_invariants(&engine).unwrap_or_else(|violation| panic!("round {round}: recovered state is torn: {violation}"));
        }
        worker = spawn_worker(dir.path(), &uri);
        wait_attached(&cluster, &mut worker);
    }
    let committed = load.finish();
    assert!(committed > 50, "the load ran: {committed} transfers");
    finish_caught_up(&cluster, worker, Duration::from_secs(60));
    let engine = open_engine(dir.path());
    assert_converges(&cluster, &engine);
    check_invariants(&engine).expect("invariants at the end");
}

/// Writes to `events` (updates, inserts, deletes) until stopped, one transaction each.
fn events_writer(cluster: &PgCluster, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<u64> {
    let config = cluster.config("postgres", "postgres");
    std::thread::spawn(move || {
        let mut connection = retina_postgres::wire::PgConnection::connect(&config, false).expect("connect");
        let mut rng = rand::rngs::SmallRng::seed_from_u64(5);
        let (mut next, mut written) = (1_000_000, 0);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let id = rng.random_range(1..=100_000);
            next += 1;
            let sql = format!("BEGIN; UPDATE events SET n = n + 1 WHERE id = {id}; INSERT INTO events VALUES ({next}, 1); DELETE FROM events WHERE id = {}; COMMIT", id + 7);
            connection.simple_query(&sql).expect("write events");
            written += 1;
            // Pacing, not waiting for anything: a steady trickle across the kills,
            // leaving the 2-core machine to the worker and the server.
            std::thread::sleep(Duration::from_millis(2));
        }
        written
    })
}

#[test]
fn sigkill_while_a_table_joins_the_publication_loses_and_duplicates_nothing() {
    let cluster = PgCluster::new();
    create_bank(&cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = cluster.url("postgres");
    let mut worker = spawn_worker(dir.path(), &uri);
    wait_attached(&cluster, &mut worker);
    cluster.psql("CREATE TABLE events (id int PRIMARY KEY, n int NOT NULL); INSERT INTO events SELECT g, 0 FROM generate_series(1, 100000) g");
    let load = Load::start(&cluster, 2);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = events_writer(&cluster, std::sync::Arc::clone(&stop));
    cluster.psql("ALTER PUBLICATION retina ADD TABLE events");
    // Kills land before, during and after the copy of `events`.
    let mut rng = rand::rngs::SmallRng::seed_from_u64(23);
    for round in 0..6 {
        // A random moment is the point: there is no condition to wait for.
        std::thread::sleep(Duration::from_millis(rng.random_range(100..1200)));
        worker.kill().expect("SIGKILL the worker");
        worker.wait().expect("reap the worker");
        {
            let engine = open_engine(dir.path());
            check_invariants(&engine).unwrap_or_else(|violation| panic!("round {round}: recovered state is torn: {violation}"));
        }
        worker = spawn_worker(dir.path(), &uri);
        wait_attached(&cluster, &mut worker);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let written = writer.join().expect("events writer");
    let committed = load.finish();
    assert!(written > 20 && committed > 20, "{written} event writes, {committed} transfers");
    finish_caught_up(&cluster, worker, Duration::from_secs(120));
    let engine = open_engine(dir.path());
    assert_converges(&cluster, &engine);
    let mut expected: Vec<String> = cluster.psql("SELECT id, n FROM events").lines().map(String::from).collect();
    expected.sort();
    let mirrored = mirror::mirrored_rows(&engine, "public.events");
    assert_eq!(mirrored.len(), expected.len(), "events: every row once");
    assert!(mirrored == expected, "events equals the source row for row");
}
