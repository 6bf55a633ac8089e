//! `retina demo`, the README's first command, end to end: the change stream goes
//! through the Debezium encoder and the CDC sink while SQL queries run, the summary
//! reports what happened, and the data dir reopens afterwards.

use std::process::Command;

const RETINA: &str = env!("CARGO_BIN_EXE_retina");

#[test]
fn demo_replays_debezium_through_the_sink_and_leaves_a_data_dir_that_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data_dir = dir.path().join("demo");
    let output = Command::new(RETINA)
        .args(["demo", "--seconds", "2", "--rate", "5000", "--base-rows", "20000", "--json", "--data-dir"])
        .arg(&data_dir)
        .output()
        .expect("run retina demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("Summary") && stdout.contains("freshness") && stdout.contains("SQL CH-Q1"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a JSON line")).expect("JSON summary");
    assert!(report["row_changes"].as_u64().expect("row_changes") > 1_000, "{report}");
    assert_eq!(report["consistency_violations"], 0);

    // The data dir opens again with the replayed rows.
    let count = Command::new(RETINA)
        .args(["sql", "--format", "csv", "--data-dir"])
        .arg(&data_dir)
        .args(["-c", "SELECT count(*) AS n FROM chbench.order_line"])
        .output()
        .expect("retina sql");
    assert!(count.status.success(), "{}", String::from_utf8_lossy(&count.stderr));
    let text = String::from_utf8_lossy(&count.stdout);
    let rows: u64 = text.lines().nth(1).and_then(|l| l.parse().ok()).unwrap_or_else(|| panic!("a count: {text}"));
    assert!(rows > 0);

    // A non-empty directory the demo did not write is refused, not replaced.
    let other = dir.path().join("precious");
    std::fs::create_dir_all(&other).expect("dir");
    std::fs::write(other.join("keep.txt"), "mine").expect("file");
    let refused = Command::new(RETINA).args(["demo", "--seconds", "1", "--data-dir"]).arg(&other).output().expect("run retina demo");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("was not written by `retina demo`"));
    assert!(other.join("keep.txt").exists());
}
