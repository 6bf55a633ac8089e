//! A real multi-client OLTP load on the source (money transfers between accounts,
//! with a history table): no query on the mirror ever sees half a transaction, and
//! through graceful restarts, Retina crashes and PostgreSQL crashes the mirror ends
//! equal to the source row for row: nothing lost, nothing applied twice.

mod bank;
mod mirror;
mod support;

use std::time::Duration;

use bank::*;
use mirror::*;
use rand::{Rng, SeedableRng};
use retina_postgres::Phase;
use support::PgCluster;

#[test]
fn queries_on_the_mirror_never_see_half_a_transfer() {
    let cluster = PgCluster::new();
    create_bank(&cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    let load = Load::start(&cluster, 4);
    let mut checks = 0;
    let mut seen = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(4);
    while std::time::Instant::now() < deadline {
        seen = check_invariants(&engine).unwrap_or_else(|violation| panic!("a query saw half a transaction: {violation}"));
        checks += 1;
    }
    let committed = load.finish();
    assert!(committed > 100, "the load ran: {committed} transfers");
    assert!(seen > 0 && checks > 20, "the checks saw transfers: {checks} checks, {seen} transfers at the last");
    assert_converges(&cluster, &engine);
    check_invariants(&engine).expect("invariants at the end");
    source.stop().expect("stops cleanly");
}

#[test]
fn restarts_and_crashes_of_either_side_lose_and_duplicate_nothing() {
    let mut cluster = PgCluster::new();
    create_bank(&cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let uri = cluster.url("postgres");
    let mut engine = open_engine(dir.path());
    let mut source = RunningSource::start(&engine, &uri);
    source.wait_streaming();
    let load = Load::start(&cluster, 3);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    for round in 0..9 {
        std::thread::sleep(Duration::from_millis(rng.random_range(200..900)));
        match round % 3 {
            // Graceful stop and start of the source.
            0 => {
                source.stop().expect("stops cleanly");
            }
            // Retina crashes: whatever was not checkpointed is gone.
            1 => {
                let _ = source.stop();
                drop(engine);
                engine = open_engine(dir.path());
                check_invariants(&engine).unwrap_or_else(|violation| panic!("round {round}: recovered state is torn: {violation}"));
            }
            // PostgreSQL crashes under the source and the load: the same source
            // reconnects and resumes from its durable position.
            _ => {
                let reconnects = source.status.lock().reconnects;
                cluster.stop_immediate();
                // Down for a random while: the fault itself, not a wait for a condition.
                std::thread::sleep(Duration::from_millis(rng.random_range(0..500)));
                cluster.start();
                eventually(Duration::from_secs(60), "the source streams again", || {
                    let status = source.status.lock().clone();
                    (status.phase == Phase::Streaming && status.reconnects > reconnects)
                        .then_some(())
                        .ok_or(format!("round {round}: {:?}, {:?}", status.phase, status.error))
                });
                continue;
            }
        }
        source = RunningSource::start(&engine, &uri);
        source.wait_streaming();
    }
    let committed = load.finish();
    assert!(committed > 100, "the load ran: {committed} transfers");
    assert_converges(&cluster, &engine);
    check_invariants(&engine).expect("invariants at the end");
    source.stop().expect("stops cleanly");
}
