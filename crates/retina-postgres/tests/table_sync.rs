//! Tables added to the publication after the initial copy: copied in a snapshot of
//! their own and then streamed, with nothing lost or applied twice while the other
//! tables keep streaming, whether they change meanwhile or not, and whether they
//! join while the source runs or while it is stopped.

mod bank;
mod mirror;
mod support;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bank::{assert_converges, check_invariants, create_bank, Load};
use mirror::{eventually, mirrored_rows, open_engine, RunningSource};
use rand::{Rng, SeedableRng};
use retina_postgres::wire::PgConnection;
use support::PgCluster;

fn source_rows(cluster: &PgCluster, table: &str) -> Vec<String> {
    let mut rows: Vec<String> = cluster.psql(&format!("SELECT * FROM {table}")).lines().map(String::from).collect();
    rows.sort();
    rows
}

fn assert_table_converges(cluster: &PgCluster, engine: &retina_core::Engine, table: &str) {
    let expected = source_rows(cluster, table);
    eventually(Duration::from_secs(60), &format!("{table} equals the source"), || {
        let rows = mirrored_rows(engine, &format!("public.{table}"));
        (rows == expected).then_some(()).ok_or(format!("{} rows, the source {}", rows.len(), expected.len()))
    });
}

/// Updates random rows of `events` and inserts new ones, one transaction each.
fn start_events_writer(cluster: &PgCluster, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let config = cluster.config("postgres", "postgres");
    std::thread::spawn(move || {
        let mut connection = PgConnection::connect(&config, false).expect("connect");
        let mut rng = rand::rngs::SmallRng::seed_from_u64(11);
        let mut next = 100_000;
        let mut written = 0;
        while !stop.load(Ordering::Relaxed) {
            let id = rng.random_range(1..=20_000);
            next += 1;
            connection
                .simple_query(&format!("BEGIN; UPDATE events SET n = n + 1 WHERE id = {id}; INSERT INTO events VALUES ({next}, 1); DELETE FROM events WHERE id = {}; COMMIT", id + 1))
                .expect("write events");
            written += 1;
        }
        written
    })
}

#[test]
fn a_table_added_under_load_is_copied_then_streamed_with_nothing_lost_or_doubled() {
    let cluster = PgCluster::new();
    create_bank(&cluster);
    cluster.psql("CREATE TABLE events (id int PRIMARY KEY, n int NOT NULL); INSERT INTO events SELECT g, 0 FROM generate_series(1, 20000) g");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &format!("{}?tables=accounts,history", cluster.url("postgres")));
    source.wait_streaming();
    assert!(engine.table_id("public.events").is_none(), "not published yet");
    let load = Load::start(&cluster, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let writer = start_events_writer(&cluster, Arc::clone(&stop));
    std::thread::sleep(Duration::from_millis(300));

    cluster.psql("ALTER PUBLICATION retina ADD TABLE events");
    eventually(Duration::from_secs(60), "events is copied", || {
        let status = source.status.lock().clone();
        (!status.synced.is_empty()).then_some(()).ok_or(format!("{:?} {:?}", status.phase, status.error))
    });
    std::thread::sleep(Duration::from_millis(500));
    check_invariants(&engine).expect("the other tables stay consistent");
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().expect("writer");
    let transfers = load.finish();
    assert!(written > 20 && transfers > 20, "{written} event writes, {transfers} transfers");
    assert_table_converges(&cluster, &engine, "events");
    assert_converges(&cluster, &engine);
    let mut shown = retina_core::SourceStatus::new("pg", "pg");
    source.status.lock().fill(&mut shown);
    assert!(shown.detail.as_deref().is_some_and(|d| d.contains("joined the publication: public.events")), "{:?}", shown.detail);
    source.stop().expect("stops cleanly");
}

#[test]
fn a_quiet_table_is_found_by_polling_and_one_added_while_stopped_at_the_next_start() {
    let cluster = PgCluster::new();
    cluster.psql(
        "CREATE TABLE a (id int PRIMARY KEY); INSERT INTO a VALUES (1);
         CREATE TABLE quiet (id int PRIMARY KEY, v text); INSERT INTO quiet SELECT g, 'q' || g FROM generate_series(1, 500) g;
         CREATE TABLE later (id int PRIMARY KEY); INSERT INTO later SELECT generate_series(1, 300)",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let uri = format!("{}?tables=a", cluster.url("postgres"));
    let source = RunningSource::start(&engine, &uri);
    source.wait_streaming();
    // No change of it ever reaches the stream: only the publication poll finds it.
    cluster.psql("ALTER PUBLICATION retina ADD TABLE quiet");
    assert_table_converges(&cluster, &engine, "quiet");
    source.stop().expect("stops cleanly");

    cluster.psql("ALTER PUBLICATION retina ADD TABLE later; INSERT INTO later VALUES (301); INSERT INTO a VALUES (2)");
    // The publication now differs from tables=, which names what Retina created: use it as it is.
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    assert_table_converges(&cluster, &engine, "later");
    assert_table_converges(&cluster, &engine, "a");
    cluster.psql("UPDATE later SET id = -id WHERE id <= 3; INSERT INTO quiet VALUES (501, 'streamed')");
    assert_table_converges(&cluster, &engine, "later");
    assert_table_converges(&cluster, &engine, "quiet");
    source.stop().expect("stops cleanly");
}
