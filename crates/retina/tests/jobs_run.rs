//! `retina jobs run` as a user runs it: the IoT example (its set-up made small) on a
//! temporary lake, with the per-task table, the JSON summary on the last line and
//! the timeline; `--check` refusing a statement it cannot execute before anything
//! runs; bad flags; a failing task making the exit status fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const RETINA: &str = env!("CARGO_BIN_EXE_retina");

fn example(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/jobs/iot").join(file)
}

fn jobs_run(args: &[&str]) -> Output {
    Command::new(RETINA).args(["jobs", "run"]).args(args).output().expect("run retina jobs run")
}

#[test]
fn the_iot_example_runs_with_a_report_a_json_summary_and_a_timeline() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    let setup = dir.path().join("setup.yaml");
    let text = std::fs::read_to_string(example("setup.yaml")).expect("setup.yaml");
    std::fs::write(&setup, text.replace("generate_series(1, 3000000)", "generate_series(1, 3000)")).expect("setup");
    let out = jobs_run(&[setup.to_str().expect("utf-8"), "--lake", lake.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));

    let pipeline = example("pipeline.yaml");
    let check = jobs_run(&[pipeline.to_str().expect("utf-8"), "--lake", lake.to_str().expect("utf-8"), "--check"]);
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    assert!(String::from_utf8_lossy(&check.stdout).contains("7 tasks, 9 statements: every statement can be executed"), "{}", String::from_utf8_lossy(&check.stdout));

    let timeline = dir.path().join("run.svg");
    let out = jobs_run(&[pipeline.to_str().expect("utf-8"), "--lake", lake.to_str().expect("utf-8"), "--json", "--timeline", timeline.to_str().expect("utf-8")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("iot_pipeline/Clean_up_raw_data") && stdout.contains("schedule admission: makespan"), "{stdout}");
    let summary: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("a last line")).expect("JSON on the last line");
    for key in ["makespan_s", "aborted_attempts", "wasted_task_s", "replans"] {
        assert!(summary[key].is_number(), "{key} in {summary}");
    }
    assert_eq!(summary["aborted_attempts"], 0);
    let tasks = summary["tasks"].as_array().expect("tasks");
    assert_eq!(tasks.len(), 7);
    assert!(tasks.iter().all(|t| t["attempts"] == 1 && t["conflicts"] == 0 && t["status"] == "succeeded"), "{summary}");
    let svg = std::fs::read_to_string(&timeline).expect("the timeline was written");
    assert!(svg.starts_with("<svg") && svg.matches("attempt 1:").count() == 7, "one bar per attempt");
}

#[test]
fn check_refuses_what_cannot_run_and_bad_flags_and_failures_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    let bad = dir.path().join("bad.yaml");
    std::fs::write(&bad, "name: j\ndialect: databricks\ntasks:\n  - id: a\n    sql: \"SELECT 1; TRUNCATE TABLE t.x\"\n").expect("job");
    let out = jobs_run(&[bad.to_str().expect("utf-8"), "--lake", lake.to_str().expect("utf-8"), "--check"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("task j/a, statement 2") && stderr.contains("is not a statement the executor runs"), "{stderr}");

    for (flags, says) in [
        (vec!["--schedule", "random"], "invalid value 'random'"),
        (vec!["--concurrency", "0"], "--concurrency must be at least 1"),
        (vec!["--arrive", "later.yaml"], "--arrive later.yaml: expected FILE@"),
    ] {
        let out = jobs_run(&[&[bad.to_str().expect("utf-8"), "--lake", lake.to_str().expect("utf-8")][..], &flags[..]].concat());
        assert!(!out.status.success(), "{flags:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(says), "{flags:?}: {}", String::from_utf8_lossy(&out.stderr));
    }

    // A task that fails at run time: reported, and the exit status says so.
    let failing = dir.path().join("failing.yaml");
    std::fs::write(&failing, "name: j\ndialect: databricks\ntasks:\n  - id: a\n    sql: \"DELETE FROM t.missing WHERE x = 1\"\n  - id: b\n    depends_on: [a]\n    sql: \"SELECT 1\"\n").expect("job");
    let out = jobs_run(&[failing.to_str().expect("utf-8"), "--lake", lake.to_str().expect("utf-8")]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("table t.missing does not exist") && stdout.contains("not run: its dependency j/a did not succeed"), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("1 task(s) failed and 1 were skipped"), "{}", String::from_utf8_lossy(&out.stderr));
}
