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
    // Caught up and durable: the slot's confirmed position passed the source's end.
    let end = cluster.psql("SELECT pg_current_wal_lsn()");
    let deadline = Instant::now() + Duration::from_secs(60);
    while cluster.psql(&format!("SELECT confirmed_flush_lsn >= '{end}' FROM pg_replication_slots WHERE slot_name = 'retina_slot'")) != "t" {
        assert!(Instant::now() < deadline, "the worker never confirmed {end}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(worker.stdin.take());
    let status = worker.wait().expect("worker exits");
    assert!(status.success(), "clean stop: {status}");
    let engine = open_engine(dir.path());
    assert_converges(&cluster, &engine);
    check_invariants(&engine).expect("invariants at the end");
}
