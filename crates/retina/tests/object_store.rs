//! The command line on an S3 data dir (moto, started for real): `retina ingest`
//! writes a lakehouse to `s3://BUCKET/PREFIX` without creating a local directory,
//! and `retina sql --data-dir` on the same URL reads it back; the secret given in the
//! URL never appears in what either prints. While `retina serve` holds the lake's
//! lease, a second writer is refused naming it, and `retina sql` still reads.

mod support;

use std::io::{Read, Write};
use std::process::Command;

use retina_test_support::LocalS3Server;
use support::{spawn_serve, RETINA};

/// A new bucket on `server`, as a data dir URL with a secret the output must hide.
fn new_lake(server: &LocalS3Server, bucket: &str) -> String {
    server.create_bucket(bucket).unwrap_or_else(|e| panic!("{e}"));
    format!(
        "s3://{bucket}/mirror?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=verysecret",
        server.endpoint()
    )
}

#[test]
fn ingest_into_and_sql_from_an_s3_data_dir() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    let location = new_lake(&server, "lake");
    let work = tempfile::tempdir().expect("tempdir");
    let ingest = Command::new(RETINA)
        .current_dir(work.path())
        .args(["ingest", "--data-dir", &location, "generator:chbench?base_rows=2000&changes=3000"])
        .output()
        .expect("run retina ingest");
    let (out, err) = (String::from_utf8_lossy(&ingest.stdout), String::from_utf8_lossy(&ingest.stderr));
    assert!(ingest.status.success(), "ingest failed: {out}{err}");
    assert!(!out.contains("verysecret") && !err.contains("verysecret"), "the secret leaked: {out}{err}");
    assert!(std::fs::read_dir(work.path()).expect("list").next().is_none(), "a local directory was created for the URL");

    let sql = Command::new(RETINA)
        .args(["sql", "--data-dir", &location, "--format", "csv", "-c", "SELECT count(*) AS n FROM chbench.warehouse"])
        .output()
        .expect("run retina sql");
    let (out, err) = (String::from_utf8_lossy(&sql.stdout), String::from_utf8_lossy(&sql.stderr));
    assert!(sql.status.success(), "sql failed: {out}{err}");
    let count: u64 = out.lines().nth(1).and_then(|line| line.trim().parse().ok()).unwrap_or_else(|| panic!("no count in {out}"));
    assert!(count > 0, "the warehouse table came back empty: {out}");
}

#[test]
fn a_running_serve_holds_the_lease_and_readers_still_read() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    let location = new_lake(&server, "leased");
    let ingest = || {
        Command::new(RETINA)
            .args(["ingest", "--data-dir", &location, "generator:chbench?base_rows=1000&changes=1000"])
            .output()
            .expect("run retina ingest")
    };
    let first = ingest();
    assert!(first.status.success(), "ingest failed: {}", String::from_utf8_lossy(&first.stderr));

    let mut serve = spawn_serve(std::path::Path::new(&location), &[]);
    let refused = ingest();
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "a second writer ran beside serve");
    assert!(err.contains("holds its lease until") && err.contains(&format!("pid {}", serve.child.id())), "{err}");
    assert!(!err.contains("verysecret"), "the secret leaked: {err}");

    let sql = Command::new(RETINA)
        .args(["sql", "--data-dir", &location, "--format", "csv", "-c", "SELECT count(*) AS n FROM chbench.warehouse"])
        .output()
        .expect("run retina sql");
    assert!(sql.status.success(), "a reader beside serve failed: {}", String::from_utf8_lossy(&sql.stderr));

    // Through serve: a query reads its files from S3, and /metrics counts the bytes.
    let psql = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", serve.sql.rsplit(':').next().expect("port"), "-U", "retina", "-d", "retina", "-Atc"])
        .arg("SELECT count(*) FROM chbench.stock")
        .output()
        .unwrap_or_else(|e| panic!("cannot run psql ({e}): install the Debian package postgresql-client"));
    assert!(psql.status.success(), "psql: {}", String::from_utf8_lossy(&psql.stderr));
    let mut metrics = std::net::TcpStream::connect(&serve.metrics).expect("metrics endpoint");
    write!(metrics, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("request");
    let mut page = String::new();
    metrics.read_to_string(&mut page).expect("metrics page");
    assert!(page.contains("retina_scan_bytes_fetched_total"), "{page}");
    assert!(!page.contains("verysecret"), "the secret leaked into /metrics");
    serve.child.kill().expect("stop serve");
    let _ = serve.child.wait();
}
