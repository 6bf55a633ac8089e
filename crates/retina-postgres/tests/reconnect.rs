//! The source outlives its server: PostgreSQL restarted (cleanly and by a crash)
//! while clients write transfers, with the source never restarted. It shows
//! `reconnecting`, resumes from its durable position, and the mirror ends equal to
//! the source with the bank's invariants holding throughout.

mod bank;
mod mirror;
mod support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bank::{assert_converges, check_invariants, create_bank, Load};
use mirror::{eventually, open_engine, RunningSource};
use retina_postgres::Phase;
use support::PgCluster;

/// Samples the published state (`retina.sources`' `state`) every few milliseconds.
struct StateWatcher {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<BTreeSet<String>>,
}

impl StateWatcher {
    fn start(source: &RunningSource) -> StateWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let status = Arc::clone(&source.status);
        let thread = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut seen = BTreeSet::new();
                let mut published = retina_core::SourceStatus::new("pg", "pg");
                while !stop.load(Ordering::Relaxed) {
                    status.lock().fill(&mut published);
                    seen.insert(published.state.clone());
                    std::thread::sleep(Duration::from_millis(2));
                }
                seen
            })
        };
        StateWatcher { stop, thread }
    }

    fn finish(self) -> BTreeSet<String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("watcher")
    }
}

fn transactions(source: &RunningSource) -> u64 {
    source.status.lock().transactions
}

#[test]
fn postgres_restarted_three_times_under_load_is_followed_without_restarting_the_source() {
    let mut cluster = PgCluster::new();
    create_bank(&cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    let watcher = StateWatcher::start(&source);
    let load = Load::start(&cluster, 4);
    for round in 0..3 {
        let before = transactions(&source);
        eventually(Duration::from_secs(30), "transfers are mirrored before the restart", || {
            (transactions(&source) >= before + 20).then_some(()).ok_or(format!("{} transactions", transactions(&source)))
        });
        if round == 1 {
            // A crash: no shutdown checkpoint, the slot restarts from its last saved position.
            cluster.stop_immediate();
            std::thread::sleep(Duration::from_millis(300));
            cluster.start();
        } else {
            cluster.restart();
        }
        eventually(Duration::from_secs(60), "the source streams again", || {
            let status = source.status.lock().clone();
            match status.phase {
                Phase::Streaming if status.reconnects > round => Ok(()),
                Phase::Failed | Phase::Stopped => panic!("the source ended: {:?}", status.error),
                phase => Err(format!("{phase:?} after {} reconnects", status.reconnects)),
            }
        });
        check_invariants(&engine).unwrap_or_else(|error| panic!("after restart {round}: {error}"));
    }
    let committed = load.finish();
    assert!(committed > 60, "the load committed {committed} transfers");
    assert_converges(&cluster, &engine);
    let states = watcher.finish();
    assert!(states.contains("reconnecting") && states.contains("streaming"), "states seen: {states:?}");
    let status = source.status.lock().clone();
    assert!(status.error.is_none(), "the error is cleared once streaming again: {:?}", status.error);
    source.stop().expect("stops cleanly");
}

#[test]
fn with_max_reconnects_zero_a_lost_connection_fails_the_source() {
    let mut cluster = PgCluster::new();
    cluster.psql("CREATE TABLE t (id int PRIMARY KEY)");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &format!("{}?max_reconnects=0", cluster.url("postgres")));
    source.wait_streaming();
    let started = Instant::now();
    cluster.restart();
    let error = source.wait_for_end(Duration::from_secs(30)).expect_err("the source fails");
    assert!(error.is_connection_loss(), "{error}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_server_that_is_down_at_the_first_start_fails_at_once() {
    let mut cluster = PgCluster::new();
    let uri = cluster.url("postgres");
    cluster.stop_immediate();
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &uri);
    let error = source.wait_for_end(Duration::from_secs(30)).expect_err("nothing to connect to");
    assert!(error.to_string().contains("cannot connect"), "{error}");
}

#[test]
fn run_until_caught_up_copies_streams_the_backlog_and_stops() {
    let cluster = PgCluster::new();
    create_bank(&cluster);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = retina_postgres::PgSource::new(retina_postgres::PgSourceOptions::parse(&cluster.url("postgres")).expect("uri"));
    // Writes continue while it copies, so part of what it must reach is streamed.
    let load = Load::start(&cluster, 2);
    std::thread::sleep(Duration::from_millis(300));
    let started = Instant::now();
    let source_thread = std::thread::scope(|scope| {
        let running = scope.spawn(|| source.run_until_caught_up(&engine, Duration::from_millis(200)));
        std::thread::sleep(Duration::from_millis(500));
        let committed = load.finish();
        (running.join().expect("source thread"), committed)
    });
    let (result, committed) = source_thread;
    result.expect("caught up without error");
    assert!(committed > 0);
    assert!(started.elapsed() < Duration::from_secs(60));
    assert_eq!(source.status().lock().phase, Phase::Stopped);
    // Caught up means everything committed before the load stopped is there now,
    // without waiting (the load stopped before the source's first position poll).
    let mut source_history: Vec<String> = cluster.psql("SELECT id, src, dst, amount FROM history").lines().map(String::from).collect();
    source_history.sort();
    assert_eq!(mirror::mirrored_rows(&engine, "public.history"), source_history);
}
