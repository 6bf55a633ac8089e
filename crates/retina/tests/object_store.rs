//! The command line on an S3 data dir (moto, started for real): `retina ingest`
//! writes a lakehouse to `s3://BUCKET/PREFIX` without creating a local directory,
//! and `retina sql --data-dir` on the same URL reads it back; the secret given in the
//! URL never appears in what either prints.

use std::process::Command;

use retina_test_support::LocalS3Server;

const RETINA: &str = env!("CARGO_BIN_EXE_retina");

#[test]
fn ingest_into_and_sql_from_an_s3_data_dir() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("lake").unwrap_or_else(|e| panic!("{e}"));
    let location = format!(
        "s3://lake/mirror?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=verysecret",
        server.endpoint()
    );
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
