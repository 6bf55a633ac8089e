//! Jobs executed for real on Delta tables under a temporary lake: the IoT example
//! under every schedule against a serial run, a real delta-rs conflict when
//! conflicting tasks overlap on purpose (and retries converging), no trace of an
//! aborted attempt, failures stopping only their dependents, arrivals re-planning,
//! and statements refused before anything runs.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use retina_jobs::report::{AttemptOutcome, TaskStatus};
use retina_jobs::run::{Arrival, RunOptions};
use retina_jobs::{ConflictKind, JobsError, Lake, RunReport, Schedule};

/// The tests of this file one at a time: the failpoint is process-wide, and
/// `cargo test` runs the tests of a file as threads of one process.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `jobs::hold-before-write` set to `value` until dropped (also when a test panics).
struct Hold;

impl Hold {
    fn new(value: &str) -> Self {
        fail::cfg("jobs::hold-before-write", value).expect("failpoint");
        Hold
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        fail::remove("jobs::hold-before-write");
    }
}

fn options(schedule: Schedule, concurrency: usize, retries: u32) -> RunOptions {
    RunOptions { retries, ..RunOptions::new(schedule, concurrency) }
}

async fn run(lake: &Lake, files: &[PathBuf], options: &RunOptions) -> RunReport {
    retina_jobs::run(lake, files, options, &mut |_| {}).await.unwrap_or_else(|e| panic!("run {files:?}: {e}"))
}

fn example(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/jobs/iot").join(file)
}

/// The example's setup job with `rows` readings per device type instead of millions.
fn small_setup(dir: &Path, rows: usize) -> PathBuf {
    let text = std::fs::read_to_string(example("setup.yaml")).expect("setup.yaml");
    let path = dir.join("setup.yaml");
    std::fs::write(&path, text.replace("generate_series(1, 3000000)", &format!("generate_series(1, {rows})"))).expect("write setup");
    path
}

/// The IoT pipeline as one chain in `order` (each task depends on the one before):
/// the serial run a concurrent run must equal.
fn serial_pipeline(dir: &Path, order: &[String]) -> PathBuf {
    let sql_dir = example("sql");
    let mut text = String::from("name: iot_pipeline\ndialect: databricks\ntasks:\n");
    for (i, key) in order.iter().enumerate() {
        let id = key.rsplit('/').next().expect("task id");
        let file = sql_dir.join(format!("{}.sql", id.to_lowercase()));
        text.push_str(&format!("  - id: {id}\n    sql_file: {}\n", file.display()));
        if i > 0 {
            let previous = order[i - 1].rsplit('/').next().expect("task id");
            text.push_str(&format!("    depends_on: [{previous}]\n"));
        }
    }
    let path = dir.join("serial.yaml");
    std::fs::write(&path, text).expect("write serial job");
    path
}

/// Every row of `table`, rendered and sorted.
async fn rows_of(lake: &Lake, table: &str) -> Vec<String> {
    lake.sorted_rows(table).await.expect("read").unwrap_or_else(|| panic!("{table} exists"))
}

const IOT_TABLES: [&str; 4] = ["staging.raw_events", "mart.enriched_events", "ops.pipeline_status", "ref.sensors"];

async fn iot_state(lake: &Lake) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for table in IOT_TABLES {
        out.push(rows_of(lake, table).await);
    }
    out
}

fn start_order(report: &RunReport) -> Vec<String> {
    let mut started: Vec<(f64, String)> = report.tasks.iter().map(|t| (t.start_s.expect("started"), t.task.clone())).collect();
    started.sort_by(|a, b| a.partial_cmp(b).expect("times"));
    started.into_iter().map(|(_, t)| t).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_iot_pipeline_runs_without_conflicts_under_admission_and_batches_and_equals_a_serial_run() {
    let _serial = serial();
    for schedule in [Schedule::Admission, Schedule::Batches] {
        let work = tempfile::tempdir().expect("tempdir");
        let lake = Lake::open(work.path().join("lake").to_str().expect("utf-8")).expect("lake");
        let setup = small_setup(work.path(), 4000);
        let report = run(&lake, &[setup.clone()], &options(Schedule::Admission, 4, 0)).await;
        assert_eq!(report.succeeded, 7, "{}", report.to_table());
        let report = run(&lake, &[example("pipeline.yaml")], &options(schedule, 4, 0)).await;
        assert_eq!((report.succeeded, report.aborted_attempts), (7, 0), "{:?}:\n{}", schedule, report.to_table());
        assert!(report.tasks.iter().all(|t| t.conflicts == 0 && t.attempts == 1));
        let concurrent = iot_state(&lake).await;
        assert!(!concurrent[1].is_empty(), "the mart was filled");

        let serial_dir = tempfile::tempdir().expect("tempdir");
        let serial_lake = Lake::open(serial_dir.path().join("lake").to_str().expect("utf-8")).expect("lake");
        run(&serial_lake, &[setup], &options(Schedule::Admission, 4, 0)).await;
        let chain = serial_pipeline(serial_dir.path(), &start_order(&report));
        let serial = run(&serial_lake, &[chain], &options(Schedule::None, 1, 0)).await;
        assert_eq!(serial.succeeded, 7, "{}", serial.to_table());
        assert_eq!(iot_state(&serial_lake).await, concurrent, "{schedule:?}: the concurrent run equals the serial run in its start order");
    }
}

/// Writes job `name` with `tasks` (id, SQL; no dependencies) to `path`.
fn job_file(path: &Path, name: &str, tasks: &[(&str, &str)]) {
    let mut text = format!("name: {name}\ndialect: databricks\ntasks:\n");
    for (id, sql) in tasks {
        text.push_str(&format!("  - id: {id}\n    sql: \"{sql}\"\n"));
    }
    std::fs::write(path, text).expect("job");
}

/// A table `t.events` partitioned by `p`, 20 rows in `a` and 20 in `b`.
async fn events_lake(dir: &Path) -> Lake {
    events_lake_at(dir.join("lake").to_str().expect("utf-8"), dir).await
}

/// [`events_lake`] at `location` (a folder or an object-store URL); job files go to `dir`.
async fn events_lake_at(location: &str, dir: &Path) -> Lake {
    let lake = Lake::open(location).expect("lake");
    let setup = dir.join("events_setup.yaml");
    std::fs::write(
        &setup,
        "name: setup\ndialect: databricks\ntasks:\n  - id: create\n    sql: |\n      CREATE TABLE t.events USING DELTA PARTITIONED BY (p) AS\n      SELECT value AS id, value % 10 AS v, CASE WHEN value % 2 = 0 THEN 'a' ELSE 'b' END AS p FROM generate_series(1, 40)\n",
    )
    .expect("setup");
    let report = run(&lake, &[setup], &options(Schedule::Admission, 1, 0)).await;
    assert_eq!(report.succeeded, 1, "{}", report.to_table());
    lake
}

/// Two tasks on partition `a`: a DELETE and an UPDATE (the paper's Figure 5 pair).
fn conflicting_job(dir: &Path, first: &str, second: &str) -> PathBuf {
    let path = dir.join("conflicting.yaml");
    let tasks = [("Clean_up", "DELETE FROM t.events WHERE p = 'a' AND v < 5"), ("Update_status", "UPDATE t.events SET v = v + 100 WHERE p = 'a'")];
    let mut text = String::from("name: pair\ndialect: databricks\ntasks:\n");
    for id in [first, second] {
        let (_, sql) = tasks.iter().find(|(name, _)| *name == id).expect("known task");
        text.push_str(&format!("  - id: {id}\n    sql: \"{sql}\"\n"));
    }
    std::fs::write(&path, text).expect("job");
    path
}

/// Checks that every Parquet file in the table's folder is listed by an `add` of
/// some commit; returns the number of commits.
fn commits_checking_files(lake: &Lake, table: &str) -> usize {
    let folder = lake.table_url(table).expect("url").to_file_path().expect("path");
    let log = folder.join("_delta_log");
    let mut commits = 0;
    let mut added = HashSet::new();
    for entry in std::fs::read_dir(&log).expect("log").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if name.ends_with(".json") && name.len() == 25 {
            commits += 1;
            for line in std::fs::read_to_string(entry.path()).expect("commit").lines() {
                let action: serde_json::Value = serde_json::from_str(line).expect("action");
                if let Some(path) = action["add"]["path"].as_str() {
                    added.insert(percent_decode(path));
                }
            }
        }
    }
    let mut stack = vec![folder.clone()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir").flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path != log {
                    stack.push(path);
                }
            } else if path.extension().is_some_and(|x| x == "parquet") {
                let relative = path.strip_prefix(&folder).expect("inside").to_string_lossy().to_string();
                assert!(added.contains(&relative), "{relative} is in no commit: an aborted attempt left it behind");
            }
        }
    }
    commits
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let Ok(value) = u8::from_str_radix(&text[i + 1..i + 3], 16) {
                out.push(value);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlapping_conflicting_tasks_meet_a_real_delta_conflict_and_retries_converge_to_a_serial_run() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    // Both tasks take their snapshot, then wait: whichever commits second conflicts.
    let hold = Hold::new("return(400)");
    let job = conflicting_job(work.path(), "Clean_up", "Update_status");
    let report = run(&lake, &[job.clone()], &options(Schedule::None, 2, 2)).await;
    drop(hold);
    assert_eq!(report.succeeded, 2, "{}", report.to_table());
    assert!(report.aborted_attempts >= 1, "a real conflict: {}", report.to_table());
    let kinds: Vec<ConflictKind> = report
        .tasks
        .iter()
        .flat_map(|t| &t.attempt_log)
        .filter_map(|a| match a.outcome {
            AttemptOutcome::Conflict { kind, .. } => Some(kind),
            _ => None,
        })
        .collect();
    // Which one depends on which commits first: the DELETE meets the UPDATE's rewritten files
    // (ConcurrentAppend), the UPDATE the removed ones (DeleteRead or DeleteDelete).
    assert!(kinds.iter().all(|k| matches!(k, ConflictKind::ConcurrentDeleteRead | ConflictKind::ConcurrentDeleteDelete | ConflictKind::ConcurrentAppend)), "{kinds:?}");
    assert!(report.wasted_task_s > 0.3, "the aborted attempt's time is counted: {}", report.wasted_task_s);

    // The same as running the winner, then the loser.
    let winner = report.tasks.iter().find(|t| t.conflicts == 0).expect("a winner").task.rsplit('/').next().expect("id").to_string();
    let loser = if winner == "Clean_up" { "Update_status" } else { "Clean_up" };
    let serial_dir = tempfile::tempdir().expect("tempdir");
    let serial_lake = events_lake(serial_dir.path()).await;
    let chain = serial_dir.path().join("chain.yaml");
    let text = std::fs::read_to_string(conflicting_job(serial_dir.path(), &winner, loser)).expect("job");
    std::fs::write(&chain, text.replacen(&format!("  - id: {loser}\n"), &format!("  - id: {loser}\n    depends_on: [{winner}]\n"), 1)).expect("chain");
    run(&serial_lake, &[chain], &options(Schedule::None, 1, 0)).await;
    assert_eq!(rows_of(&lake, "t.events").await, rows_of(&serial_lake, "t.events").await);
    // The aborted attempt made no version and left no file.
    assert_eq!(commits_checking_files(&lake, "t.events"), commits_checking_files(&serial_lake, "t.events"), "versions of the concurrent and the serial run");

    // Admission keeps them apart, under the same hold: no conflict.
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let hold = Hold::new("return(400)");
    let report = run(&lake, &[conflicting_job(work.path(), "Clean_up", "Update_status")], &options(Schedule::Admission, 2, 0)).await;
    drop(hold);
    assert_eq!((report.succeeded, report.aborted_attempts), (2, 0), "{}", report.to_table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_retries_a_lost_commit_fails_its_task_and_skips_its_dependents() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let job = work.path().join("job.yaml");
    std::fs::write(
        &job,
        "name: pair\ndialect: databricks\ntasks:\n  - id: A\n    sql: \"DELETE FROM t.events WHERE p = 'a' AND v < 5\"\n  - id: B\n    sql: \"UPDATE t.events SET v = v + 100 WHERE p = 'a'\"\n  - id: after_A\n    depends_on: [A]\n    sql: \"SELECT count(*) FROM t.events\"\n  - id: after_B\n    depends_on: [B]\n    sql: \"SELECT count(*) FROM t.events\"\n",
    )
    .expect("job");
    let hold = Hold::new("return(400)");
    let report = run(&lake, &[job], &options(Schedule::None, 2, 0)).await;
    drop(hold);
    assert_eq!((report.succeeded, report.failed, report.skipped), (2, 1, 1), "{}", report.to_table());
    let failed = report.tasks.iter().find(|t| t.status == TaskStatus::Failed).expect("a failed task");
    let error = failed.error.as_deref().expect("its error");
    assert!(error.contains("statement 1") && error.contains("t.events") && error.contains("concurrent"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_fails_stops_its_dependents_with_a_clear_error_and_the_others_run() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let job = work.path().join("job.yaml");
    std::fs::write(
        &job,
        "name: j\ndialect: databricks\ntasks:\n  - id: bad\n    sql: \"UPDATE t.missing SET v = 1 WHERE p = 'a'\"\n  - id: child\n    depends_on: [bad]\n    sql: \"DELETE FROM t.events WHERE v = 1\"\n  - id: grandchild\n    depends_on: [child]\n    sql: \"DELETE FROM t.events WHERE v = 2\"\n  - id: other\n    sql: \"INSERT INTO t.events SELECT 100, 1, 'b'\"\n",
    )
    .expect("job");
    let report = run(&lake, &[job], &options(Schedule::Admission, 2, 3)).await;
    let status = |id: &str| report.tasks.iter().find(|t| t.task == format!("j/{id}")).expect("task").clone();
    assert_eq!(status("bad").status, TaskStatus::Failed);
    let error = status("bad").error.expect("error");
    assert!(error.contains("j/bad") && error.contains("t.missing") && error.contains("does not exist"), "{error}");
    assert_eq!(status("bad").attempts, 1, "not a conflict: not retried");
    assert_eq!(status("child").status, TaskStatus::Skipped);
    assert!(status("child").error.expect("why").contains("j/bad"));
    assert_eq!(status("grandchild").status, TaskStatus::Skipped);
    assert_eq!(status("other").status, TaskStatus::Succeeded);
    assert_eq!(status("other").rows_written, 1);
    assert_eq!(rows_of(&lake, "t.events").await.len(), 41);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arriving_task_that_conflicts_with_a_running_one_replans_and_waits_for_it() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let first = work.path().join("first.yaml");
    job_file(&first, "first", &[("update_a", "UPDATE t.events SET v = v + 1 WHERE p = 'a'")]);
    let second = work.path().join("second.yaml");
    job_file(&second, "second", &[("delete_a", "DELETE FROM t.events WHERE p = 'a' AND v > 5"), ("update_b", "UPDATE t.events SET v = v + 1 WHERE p = 'b'")]);
    let mut options = options(Schedule::Admission, 4, 0);
    options.arrivals = vec![Arrival { file: second, after: std::time::Duration::from_millis(150) }];
    let hold = Hold::new("return(600)");
    let report = run(&lake, &[first], &options).await;
    drop(hold);
    assert_eq!((report.succeeded, report.aborted_attempts), (3, 0), "{}", report.to_table());
    assert!(report.replan_log.iter().any(|r| r.reason.contains("second/delete_a")), "{:?}", report.replan_log);
    let task = |key: &str| report.tasks.iter().find(|t| t.task == key).expect("task").clone();
    assert!(task("second/delete_a").start_s >= task("first/update_a").end_s, "the conflicting arrival waited: {}", report.to_table());
    assert!(task("second/update_b").start_s < task("first/update_a").end_s, "the other partition did not wait: {}", report.to_table());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_the_executor_cannot_run_is_refused_before_anything_runs() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let cases = [
        ("ALTER TABLE t.events ADD COLUMN w INT", "is not a statement the executor runs"),
        ("INSERT INTO t.events PARTITION (p) SELECT 1, 2, 'a'", "dynamic partitions are not supported"),
        ("UPDATE t.events SET (v, id) = (1, 2)", "assign one column at a time"),
        ("CREATE TABLE t.other (a INT) USING PARQUET", "Delta tables only"),
        ("INSERT OVERWRITE t.events REPLACE WHERE p = 'a' SELECT 1, 2, 'a'", "REPLACE WHERE goes with INSERT INTO"),
    ];
    for (sql, expected) in cases {
        let job = work.path().join("bad.yaml");
        std::fs::write(&job, format!("name: j\ndialect: databricks\ntasks:\n  - id: first\n    sql: \"INSERT INTO t.events SELECT 300, 1, 'a'\"\n  - id: second\n    sql: \"SELECT 1; {sql}\"\n")).expect("job");
        let error = retina_jobs::run(&lake, &[job], &options(Schedule::Admission, 2, 0), &mut |_| {}).await.expect_err(sql);
        let text = error.to_string();
        assert!(matches!(error, JobsError::Unsupported { statement: 2, .. }), "{sql}: {text}");
        assert!(text.contains("j/second") && text.contains("statement 2") && text.contains(expected), "{sql}: {text}");
    }
    assert_eq!(rows_of(&lake, "t.events").await.len(), 40, "nothing ran");
}

/// Why `retina jobs run` schedules with the delta-rs rules: delta-rs counts a blind
/// append as reading every file of its table, so an append to partition `b` loses
/// its commit to an UPDATE of partition `a` that committed after the append's
/// snapshot (Spark's Delta would let both commit). Under `none` that is a real
/// `ConcurrentDeleteRead`; under admission with the delta-rs rules the append waits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blind_append_loses_to_a_rewrite_of_another_partition_unless_the_delta_rs_rules_keep_them_apart() {
    let _serial = serial();
    for (schedule, conflicts) in [(Schedule::None, 1), (Schedule::Admission, 0)] {
        let work = tempfile::tempdir().expect("tempdir");
        let lake = events_lake(work.path()).await;
        let update = work.path().join("update.yaml");
        job_file(&update, "first", &[("update_a", "UPDATE t.events SET v = v + 1 WHERE p = 'a'")]);
        let append = work.path().join("append.yaml");
        job_file(&append, "second", &[("append_b", "INSERT INTO t.events SELECT 500, 5, 'b'")]);
        let mut options = options(schedule, 2, 0);
        // The append takes its snapshot while the update holds, and commits after it.
        options.arrivals = vec![Arrival { file: append, after: std::time::Duration::from_millis(150) }];
        let hold = Hold::new("return(500)");
        let report = run(&lake, &[update], &options).await;
        drop(hold);
        let append = report.tasks.iter().find(|t| t.task == "second/append_b").expect("append");
        assert_eq!(append.conflicts, conflicts, "{schedule:?}: {}", report.to_table());
        if conflicts > 0 {
            assert!(matches!(append.attempt_log[0].outcome, AttemptOutcome::Conflict { kind: ConflictKind::ConcurrentDeleteRead, .. }), "{:?}", append.attempt_log);
        } else {
            assert_eq!(report.succeeded, 2, "{}", report.to_table());
        }
    }
}

/// A job file moved into the watched folder while the run goes on is run too; the
/// run ends once everything finished and nothing new came for the idle time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_dropped_into_the_watched_folder_joins_the_run() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let watched = work.path().join("incoming");
    std::fs::create_dir_all(&watched).expect("watched folder");
    let first = work.path().join("first.yaml");
    job_file(&first, "first", &[("update_a", "UPDATE t.events SET v = v + 1 WHERE p = 'a'")]);
    let staged = work.path().join("later.yaml");
    job_file(&staged, "later", &[("delete_b", "DELETE FROM t.events WHERE p = 'b'")]);
    let target = watched.join("later.yaml");
    let mover = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        std::fs::rename(staged, target).expect("move the job in");
    });
    let mut options = options(Schedule::Admission, 2, 0);
    options.watch = Some(retina_jobs::run::Watch { dir: watched, idle: std::time::Duration::from_millis(1500) });
    let report = run(&lake, &[first], &options).await;
    mover.join().expect("mover");
    assert_eq!(report.succeeded, 2, "{}", report.to_table());
    let later = report.tasks.iter().find(|t| t.task == "later/delete_b").expect("the dropped job ran");
    assert!(later.arrived_s >= 0.3, "it arrived when it was dropped: {}", later.arrived_s);
    assert_eq!(rows_of(&lake, "t.events").await.len(), 20, "partition b was deleted");
}

/// Task A's third statement loses its commit to B; its first two (a CREATE and an
/// UPDATE of the other partition) had committed. The attempt takes both back:
/// without a retry nothing of A is visible, and with one A's statements apply
/// exactly once, as in the serial run B then A.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_attempt_that_loses_a_later_commit_takes_its_earlier_commits_back() {
    let _serial = serial();
    let a = "CREATE TABLE t.audit AS SELECT 1 AS n; UPDATE t.events SET v = v + 1000 WHERE p = 'b'; UPDATE t.events SET v = v + 100 WHERE p = 'a'";
    let b = "DELETE FROM t.events WHERE p = 'a' AND v < 5";
    let job = |dir: &Path, chained: bool| {
        let path = dir.join("multi.yaml");
        let depends = if chained { "    depends_on: [B]\n" } else { "" };
        std::fs::write(&path, format!("name: multi\ndialect: databricks\ntasks:\n  - id: A\n{depends}    sql: \"{a}\"\n  - id: B\n    sql: \"{b}\"\n")).expect("job");
        path
    };
    let serial_dir = tempfile::tempdir().expect("tempdir");
    let serial_lake = events_lake(serial_dir.path()).await;
    let only_b = serial_dir.path().join("only_b.yaml");
    std::fs::write(&only_b, format!("name: only\ndialect: databricks\ntasks:\n  - id: B\n    sql: \"{b}\"\n")).expect("job");
    run(&serial_lake, &[only_b], &options(Schedule::None, 1, 0)).await;
    let after_b = rows_of(&serial_lake, "t.events").await;
    run(&serial_lake, &[job(serial_dir.path(), true)], &options(Schedule::None, 1, 0)).await;
    let after_b_then_a = rows_of(&serial_lake, "t.events").await;

    for retries in [0, 1] {
        let work = tempfile::tempdir().expect("tempdir");
        let lake = events_lake(work.path()).await;
        // B takes its snapshot at once and commits after 1.5 s; A's third statement takes
        // its snapshot after A's first two committed, and commits after B.
        let hold = Hold::new("return(A#3=3000,B#1=1500)");
        let report = run(&lake, &[job(work.path(), false)], &options(Schedule::None, 2, retries)).await;
        drop(hold);
        let task_a = report.tasks.iter().find(|t| t.task == "multi/A").expect("A");
        let first = &task_a.attempt_log[0];
        assert!(matches!(first.outcome, AttemptOutcome::Conflict { statement: 3, .. }), "{}", report.to_table());
        assert_eq!(first.undone_commits, 2, "the CREATE and the UPDATE of b: {:?}", task_a.attempt_log);
        if retries == 0 {
            assert_eq!(task_a.status, TaskStatus::Failed);
            assert_eq!(rows_of(&lake, "t.events").await, after_b, "nothing of A is visible");
            assert!(lake.load("t.audit").await.expect("load").is_none(), "the table A created is gone");
            assert!(!lake.table_url("t.audit").expect("url").to_file_path().expect("path").exists(), "with its folder");
        } else {
            assert_eq!((task_a.status, task_a.attempts), (TaskStatus::Succeeded, 2), "{}", report.to_table());
            assert_eq!(rows_of(&lake, "t.events").await, after_b_then_a, "A applied once, after B");
            assert_eq!(rows_of(&lake, "t.audit").await, vec!["1".to_string()]);
        }
        commits_checking_files(&lake, "t.events");
    }
}

/// A took back nothing it could not: C deleted the rows A's first statement wrote
/// before A lost its second commit, so undoing A's first statement would bring
/// back rows C deleted. The error says so, and A is not retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_undo_that_would_bring_back_rows_another_task_deleted_is_refused() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let job = work.path().join("job.yaml");
    job_file(&job, "j", &[("A", "UPDATE t.events SET v = v + 1000 WHERE p = 'b'; UPDATE t.events SET v = v + 100 WHERE p = 'a'"), ("B", "DELETE FROM t.events WHERE p = 'a' AND v < 5"), ("C", "SELECT count(*) FROM t.events; DELETE FROM t.events WHERE p = 'b' AND v >= 1000")]);
    // A's first statement commits at once; C deletes its rows at 1.5 s; B commits at 3 s;
    // A's second statement, whose snapshot predates B's commit, commits at 5 s and loses.
    let hold = Hold::new("return(A#2=5000,B#1=3000,C#1=1500)");
    let report = run(&lake, &[job], &options(Schedule::None, 3, 2)).await;
    drop(hold);
    let task = |id: &str| report.tasks.iter().find(|t| t.task == format!("j/{id}")).expect("task").clone();
    assert_eq!((task("B").status, task("C").status), (TaskStatus::Succeeded, TaskStatus::Succeeded), "{}", report.to_table());
    let a = task("A");
    assert_eq!((a.status, a.attempts), (TaskStatus::Failed, 1), "not retried: {}", report.to_table());
    let error = a.error.expect("error");
    assert!(error.contains("j/A") && error.contains("could not all be taken back") && error.contains("t.events") && error.contains("a later commit removed"), "{error}");
}

/// The same executor on an S3 lake (moto): tables created, a real conflict between
/// overlapping tasks detected through S3's create-once put, an aborted attempt
/// undone, and the retry converging; the folder-only checks are skipped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_on_an_s3_lake_with_real_conflicts_and_undo() {
    let _serial = serial();
    let server = retina_test_support::LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("jobs").unwrap_or_else(|e| panic!("{e}"));
    let work = tempfile::tempdir().expect("tempdir");
    let location = format!("s3://jobs/lake?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=verysecret", server.endpoint());
    let lake = events_lake_at(&location, work.path()).await;
    assert!(lake.root().as_str().starts_with("s3://jobs/lake/"), "{}", lake.root());
    assert_eq!(rows_of(&lake, "t.events").await.len(), 40);
    let job = work.path().join("multi.yaml");
    job_file(&job, "multi", &[("A", "UPDATE t.events SET v = v + 1000 WHERE p = 'b'; UPDATE t.events SET v = v + 100 WHERE p = 'a'"), ("B", "DELETE FROM t.events WHERE p = 'a' AND v < 5")]);
    let hold = Hold::new("return(A#2=3000,B#1=1500)");
    let report = run(&lake, &[job], &options(Schedule::None, 2, 1)).await;
    drop(hold);
    let a = report.tasks.iter().find(|t| t.task == "multi/A").expect("A");
    assert!(matches!(a.attempt_log[0].outcome, AttemptOutcome::Conflict { statement: 2, .. }), "{}", report.to_table());
    assert_eq!((a.attempt_log[0].undone_commits, a.status, report.succeeded), (1, TaskStatus::Succeeded, 2), "{}", report.to_table());
    let rows = rows_of(&lake, "t.events").await;
    // B deleted the 12 rows of `a` with v < 5 (v is 0, 2 or 4); A added 1000 to `b` once
    // and 100 to the rest of `a`.
    assert_eq!(rows.len(), 28, "{rows:?}");
    let v = |row: &String| row.split('|').nth(1).and_then(|v| v.parse::<i64>().ok()).expect("v");
    assert!(rows.iter().filter(|r| r.ends_with("|b")).all(|r| (1000..1010).contains(&v(r))), "{rows:?}");
    assert!(rows.iter().filter(|r| r.ends_with("|a")).all(|r| [106, 108].contains(&v(r))), "{rows:?}");
}

/// Delta's selective overwrite: the rows the predicate matches are replaced by the
/// query's, the rest stay; rows that do not match the predicate are refused by
/// delta-rs, naming the statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_replace_where_overwrites_the_rows_its_predicate_matches() {
    let _serial = serial();
    let work = tempfile::tempdir().expect("tempdir");
    let lake = events_lake(work.path()).await;
    let job = work.path().join("replace.yaml");
    job_file(&job, "r", &[("replace_a", "INSERT INTO t.events REPLACE WHERE p = 'a' AND v >= 4 SELECT id, v + 100, p FROM t.events WHERE p = 'a' AND v >= 4 AND id <= 20")]);
    let report = run(&lake, &[job], &options(Schedule::Admission, 1, 0)).await;
    assert_eq!(report.succeeded, 1, "{}", report.to_table());
    let task = &report.tasks[0];
    assert_eq!(task.rows_written, 6, "ids 4, 6, 8, 14, 16, 18");
    let rows = rows_of(&lake, "t.events").await;
    let v = |row: &String| row.split('|').nth(1).and_then(|v| v.parse::<i64>().ok()).expect("v");
    let a: Vec<&String> = rows.iter().filter(|r| r.ends_with("|a")).collect();
    // 12 rows of `a` had v >= 4 (4, 6, 8 in each ten); 6 came back (+100), 6 were dropped.
    assert_eq!((rows.len(), a.len()), (34, 14), "{rows:?}");
    assert_eq!(a.iter().filter(|r| v(r) >= 100).count(), 6, "{a:?}");
    assert_eq!(rows.iter().filter(|r| r.ends_with("|b")).count(), 20, "partition b untouched");

    let job = work.path().join("mismatch.yaml");
    job_file(&job, "m", &[("wrong_rows", "INSERT INTO t.events REPLACE WHERE p = 'a' SELECT 999, 1, 'b'")]);
    let report = run(&lake, &[job], &options(Schedule::Admission, 1, 0)).await;
    let error = report.tasks[0].error.clone().expect("refused");
    assert!(error.contains("m/wrong_rows") && error.contains("statement 1") && error.contains("t.events"), "{error}");
    assert_eq!(rows_of(&lake, "t.events").await.len(), 34, "nothing written");
}
