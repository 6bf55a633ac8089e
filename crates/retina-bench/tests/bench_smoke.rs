//! The CDC benchmarks at toy sizes: they run end to end and report sane figures.

use std::time::Duration;

use retina_bench::debezium_replay::{freshness, replay_debezium, DebeziumReplayConfig, FreshnessConfig};

#[test]
fn debezium_replay_reports_decode_and_end_to_end_rates() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = DebeziumReplayConfig { base_rows: 3_000, row_changes: 20_000, shards: 2, seed: 1, encoding: Default::default() };
    let report = replay_debezium(&config, dir.path()).expect("bench");
    assert!(report.row_changes >= 20_000, "{report:?}");
    assert!(report.events > report.row_changes, "events include BEGIN/END: {report:?}");
    assert!(report.decode_events_per_s > 0.0 && report.row_changes_per_s > 0.0, "{report:?}");
}

/// The envelope form (schemas and keys on every line) replays the same stream.
#[test]
fn envelope_replay_applies_the_same_row_changes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let encoding = retina_cdc::debezium::EncoderOptions::kafka_connect_default();
    let config = DebeziumReplayConfig { base_rows: 3_000, row_changes: 20_000, shards: 2, seed: 1, encoding };
    let report = replay_debezium(&config, dir.path()).expect("bench");
    assert_eq!(report.encoding, "envelope+key");
    assert!(report.row_changes >= 20_000, "{report:?}");
    assert!(report.json_bytes > 20_000 * 1_000, "every line carries its schemas: {report:?}");
}

#[test]
fn freshness_is_measured_after_the_load() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = FreshnessConfig { base_rows: 3_000, rate: 5_000, seconds: 1.5, shards: 2, query_interval: Duration::from_millis(10), gc_interval: Some(Duration::from_millis(200)), checkpoint_interval: Some(Duration::from_millis(500)), background_nice: 5 };
    let report = freshness(&config, dir.path()).expect("bench");
    assert!(report.queries > 10, "{report:?}");
    assert!(report.row_changes > 2_000, "{report:?}");
    assert!(report.freshness_p50_ms < 1_000.0, "{report:?}");
}
