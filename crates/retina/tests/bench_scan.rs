//! `retina bench scan` at toy size: the bare scans and the table-scan query over the
//! same two tables, both tables answering the query alike; bad options are refused.

mod support;

use std::process::Command;

use support::RETINA;

#[test]
fn scan_bench_reports_the_bare_scan_and_the_table_scan_query() {
    let output = Command::new(RETINA)
        .args(["bench", "scan", "--rows", "20000", "--repetitions", "2", "--json"])
        .output()
        .expect("run retina bench scan");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("table-scan query:"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("json line")).expect("json report");
    assert_eq!((report["visible_rows"].as_u64(), report["stale_versions"].as_u64()), (Some(20_000), Some(200)), "{report}");
    for figure in ["clean_scan_ms_median", "stale_scan_ms_median", "clean_query_ms_median", "stale_query_ms_median"] {
        assert!(report[figure].as_f64().is_some_and(|ms| ms > 0.0), "{figure}: {report}");
    }
    for ratio in ["scan_overhead_ratio", "query_overhead_ratio"] {
        assert!(report[ratio].as_f64().is_some_and(|r| r > 0.0 && r.is_finite()), "{ratio}: {report}");
    }
    assert!(report["sql"].as_str().is_some_and(|sql| sql.contains("FROM bench.scan")), "{report}");
}

#[test]
fn scan_bench_refuses_zero_repetitions() {
    let output = Command::new(RETINA).args(["bench", "scan", "--repetitions", "0"]).output().expect("run");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--repetitions must be positive"), "{}", String::from_utf8_lossy(&output.stderr));
}
