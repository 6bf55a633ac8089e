//! A shard thread that panics stops the engine with an error naming it: the ingest
//! fails instead of waiting forever for a commit the dead shard never reports. Its
//! own test binary, since a failpoint is process-wide.

mod common;

use std::time::Duration;

use common::*;
use retina_cdc::SinkOptions;

#[test]
fn a_panicking_shard_fails_the_ingest_instead_of_hanging_it() {
    let scenario = fail::FailScenario::setup();
    fail::cfg("shard::apply", "panic(a bug in the shard)").expect("failpoint");
    let (done, result) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let test = engine();
        let lines = vec![begin("1"), event("c", 1, Some("a"), Some(("1", 1))), end("1", 1, "s.t")];
        let outcome = ingest(&test.engine, &lines, SinkOptions::default()).map(|_| ()).map_err(|e| e.to_string());
        let _ = done.send(outcome);
    });
    let outcome = result.recv_timeout(Duration::from_secs(60)).expect("the ingest hung after a shard panicked");
    let error = outcome.expect_err("a shard panicked");
    assert!(error.contains("retina-shard") && error.contains("panicked") && error.contains("a bug in the shard"), "{error}");
    scenario.teardown();
}
