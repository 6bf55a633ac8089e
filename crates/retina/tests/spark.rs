//! Apache Spark 4.0.1 with Delta Lake 4.0.0 and Iceberg 1.10.0, Delta's and
//! Iceberg's reference readers, read every published table at the versions of a cut
//! exactly as `retina sql` shows it: deletion vectors honoured, `_create_ts` absent.
//! Spark refused every Retina Delta table before (`DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH`:
//! a NOT NULL primary key needs the `invariants` writer feature).

use std::path::Path;
use std::process::{Command, Output};

use retina_test_support::SparkSession;

mod support;
use support::{two_table_capture, RETINA};

fn ingest(data_dir: &Path, capture: &Path, flags: &[&str]) -> Output {
    Command::new(RETINA)
        .args(["ingest", "--data-dir"])
        .arg(data_dir)
        .arg(format!("file:{}", capture.display()))
        .args(flags)
        .output()
        .expect("run retina ingest")
}

fn sql(data_dir: &Path, query: &str) -> Vec<Vec<String>> {
    let output = Command::new(RETINA).args(["sql", "--format", "csv", "--data-dir"]).arg(data_dir).args(["-c", query]).output().expect("retina sql");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let mut rows: Vec<Vec<String>> =
        String::from_utf8_lossy(&output.stdout).lines().skip(1).map(|line| line.split(',').map(str::to_string).collect()).collect();
    rows.sort();
    rows
}

/// Spark's rows as `retina sql --format csv` writes them: null as empty text.
fn as_text(rows: &[Vec<serde_json::Value>]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|value| match value {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

#[test]
fn spark_reads_every_published_table_at_the_cut_as_retina_shows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let capture = dir.path().join("capture.jsonl");
    std::fs::write(&capture, two_table_capture(300)).expect("write");
    let lake = dir.path().join("lake");
    let keys = ["--primary-key", "public.items=id", "--primary-key", "public.orders=id"];
    let run = ingest(&lake, &capture, &keys);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let cut: serde_json::Value =
        serde_json::from_slice(&std::fs::read(lake.join("_retina/published/latest.json")).expect("the latest cut")).expect("json");
    let mut spark = SparkSession::start().expect("spark");
    for table in cut["tables"].as_array().expect("tables") {
        let name = table["table"].as_str().expect("name");
        let expected = sql(&lake, &format!("SELECT * FROM {name}"));
        assert!(!expected.is_empty());
        let delta = lake.join(table["delta_path"].as_str().expect("delta path"));
        let version = table["delta_version"].as_u64().expect("delta version");
        let answer = spark
            .query(&format!("SELECT * FROM delta.`{}` VERSION AS OF {version}", delta.display()))
            .unwrap_or_else(|error| panic!("Spark refused the Delta table {name}: {error}"));
        assert_eq!(answer.columns, ["id", "name"], "{name}: no _create_ts");
        assert_eq!(as_text(&answer.rows), expected, "Spark's Delta rows of {name}");
        let metadata = lake.join(table["iceberg_metadata"].as_str().expect("iceberg metadata"));
        let answer = spark
            .query(&format!("ICEBERG {}", metadata.display()))
            .unwrap_or_else(|error| panic!("Spark refused the Iceberg table {name}: {error}"));
        assert_eq!(answer.columns, ["id", "name"], "{name}: no _create_ts");
        assert_eq!(as_text(&answer.rows), expected, "Spark's Iceberg rows of {name}");
    }
}
