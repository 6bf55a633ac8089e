//! `retina ingest postgres://…`: copies a database, streams what came after, stops
//! once caught up and exits 0; a second run resumes from the slot; a source that
//! fails makes the command fail, and `retina serve` too.

use std::path::Path;
use std::process::{Command, Output};

#[path = "../../retina-postgres/tests/support/mod.rs"]
mod pg_support;

use pg_support::PgCluster;

const RETINA: &str = env!("CARGO_BIN_EXE_retina");

fn ingest(lake: &Path, uri: &str) -> Output {
    Command::new(RETINA)
        .args(["ingest", "--idle-exit-seconds", "0.2", "--data-dir"])
        .arg(lake)
        .arg(uri)
        .output()
        .expect("run retina ingest")
}

fn sql(lake: &Path, query: &str) -> String {
    let output = Command::new(RETINA).args(["sql", "--format", "csv", "--data-dir"]).arg(lake).args(["-c", query]).output().expect("retina sql");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[test]
fn ingest_mirrors_a_database_until_caught_up_and_resumes_on_the_next_run() {
    let cluster = PgCluster::new();
    cluster.psql("CREATE TABLE items (id int PRIMARY KEY, name text); INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 500) g");
    let dir = tempfile::tempdir().expect("tempdir");
    let lake = dir.path().join("lake");
    let uri = cluster.url("postgres");

    let first = ingest(&lake, &uri);
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(first.status.success(), "{stdout}{}", String::from_utf8_lossy(&first.stderr));
    assert!(stdout.contains("500 rows copied"), "{stdout}");
    assert!(sql(&lake, "SELECT count(*) AS n FROM public.items").contains("500"));

    cluster.psql("INSERT INTO items VALUES (501, 'later'); DELETE FROM items WHERE id <= 10; UPDATE items SET name = 'renamed' WHERE id = 11");
    let second = ingest(&lake, &uri);
    let stdout = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{stdout}{}", String::from_utf8_lossy(&second.stderr));
    assert!(stdout.contains("0 rows copied") && stdout.contains("12 row changes streamed"), "resumed from the slot: {stdout}");
    let rows = sql(&lake, "SELECT count(*) AS n, max(id) AS top, min(name) AS first FROM public.items");
    assert!(rows.contains("491,501,item 100"), "{rows}");
    assert_eq!(sql(&lake, "SELECT name FROM public.items WHERE id = 11").trim().lines().last(), Some("renamed"));
}

#[test]
fn ingest_exits_non_zero_when_the_source_fails() {
    let cluster = PgCluster::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let output = ingest(&dir.path().join("lake"), &format!("{}?publication=missing_pub&tables=public.nothing", cluster.url("postgres")));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "a failed source fails the command: {stderr}");
    assert!(stderr.contains("source postgres://postgres@127.0.0.1"), "{stderr}");
    // retina serve too: it serves until told to stop, then exits non-zero naming the source.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let served = Command::new(RETINA)
        .args(["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--seconds", "2", "--data-dir"])
        .arg(dir.path().join("served"))
        .args(["--source", &format!("postgres://postgres@127.0.0.1:{port}/postgres")])
        .output()
        .expect("run retina serve");
    let stderr = String::from_utf8_lossy(&served.stderr);
    assert!(!served.status.success(), "a failed source fails serve: {stderr}");
    assert!(stderr.contains("a source failed while serving") && stderr.contains("cannot connect"), "{stderr}");
    let flags = Command::new(RETINA)
        .args(["ingest", "--infer-schema", "--data-dir"])
        .arg(dir.path().join("lake2"))
        .arg(cluster.url("postgres"))
        .output()
        .expect("run retina ingest");
    assert!(!flags.status.success());
    assert!(String::from_utf8_lossy(&flags.stderr).contains("catalog"), "{}", String::from_utf8_lossy(&flags.stderr));
}

#[test]
fn the_source_logs_through_the_one_logger_as_json_lines() {
    let cluster = PgCluster::new();
    cluster.psql("CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)");
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(RETINA)
        .args(["--log-format", "json", "ingest", "--idle-exit-seconds", "0.2", "--data-dir"])
        .arg(dir.path().join("lake"))
        .arg(cluster.url("postgres"))
        .env("RUST_LOG", "retina_postgres=info")
        .output()
        .expect("run retina ingest");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let events: Vec<serde_json::Value> =
        stderr.lines().map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"))).collect();
    let messages: Vec<&str> = events.iter().filter_map(|event| event["fields"]["message"].as_str()).collect();
    assert!(messages.contains(&"publication created") && messages.contains(&"streaming"), "{messages:?}");
    assert!(events.iter().all(|event| event["level"] == "INFO"), "RUST_LOG chose the level: {stderr}");

    let refused = Command::new(RETINA).args(["--log-format", "xml", "sql", "-c", "SELECT 1"]).output().expect("run retina");
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("use text or json"));
}
