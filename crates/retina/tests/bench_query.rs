//! `retina bench query` at toy size: base, static and live runs of every query,
//! alternating, and the ratios between them; bad sizes are refused.

mod support;

use std::process::Command;

use support::RETINA;

#[test]
fn query_bench_alternates_static_and_live_runs_and_reports_ratios() {
    let output = Command::new(RETINA)
        .args(["bench", "query", "--base-rows", "3000", "--repetitions", "2", "--rate", "2000", "--delta", "0.2", "--json"])
        .output()
        .expect("run retina bench query");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("alternating static/live"), "{stdout}");
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("json line")).expect("json report");
    let queries = report["queries"].as_array().expect("queries");
    assert!(queries.len() >= 10, "{report}");
    for query in queries {
        for phase in ["base_ms", "static_ms", "live_ms", "datafusion_ms"] {
            assert!(query[phase].as_f64().is_some_and(|ms| ms > 0.0), "{phase} of {query}");
        }
    }
    for ratio in ["query_slowdown_ratio", "delta_slowdown_ratio", "retina_vs_datafusion_ratio"] {
        assert!(report[ratio].as_f64().is_some_and(|r| r > 0.0 && r.is_finite()), "{ratio}: {report}");
    }
    assert_eq!(report["warehouses"], 1);
    assert!(report["row_changes_during_live"].as_u64().is_some_and(|n| n > 0), "the live runs ran under changes: {report}");
}

#[test]
fn query_bench_refuses_zero_warehouses_and_two_sizes() {
    let zero = Command::new(RETINA).args(["bench", "query", "--warehouses", "0"]).output().expect("run");
    assert!(!zero.status.success());
    assert!(String::from_utf8_lossy(&zero.stderr).contains("--warehouses must be positive"), "{}", String::from_utf8_lossy(&zero.stderr));
    let both = Command::new(RETINA).args(["bench", "query", "--warehouses", "2", "--base-rows", "5000"]).output().expect("run");
    assert!(!both.status.success());
    assert!(String::from_utf8_lossy(&both.stderr).contains("cannot be used with"), "{}", String::from_utf8_lossy(&both.stderr));
}
