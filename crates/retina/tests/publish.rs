//! `retina ingest` publishes its checkpoints as Delta and Iceberg tables by default:
//! after an ingest of inserts, updates and deletes across two tables, every reader
//! (DuckDB, delta-rs, pyiceberg, Polars) reads exactly what `retina sql` shows at the
//! versions of the cut, and `retina.published` names them. `--publish none` writes
//! neither.

use std::path::Path;
use std::process::{Command, Output};

mod support;
use support::{debezium_event as event, two_table_capture, RETINA};

fn ingest(data_dir: &Path, uri: &str, flags: &[&str]) -> Output {
    Command::new(RETINA).args(["ingest", "--data-dir"]).arg(data_dir).arg(uri).args(flags).output().expect("run retina ingest")
}

fn sql(data_dir: &Path, query: &str) -> Vec<String> {
    let output = Command::new(RETINA).args(["sql", "--format", "csv", "--data-dir"]).arg(data_dir).args(["-c", query]).output().expect("retina sql");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).lines().skip(1).map(str::to_string).collect()
}

/// Every table of the lake's latest cut, read by each Delta and Iceberg reader.
fn read_cut(lake: &Path) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/read_published.py");
    let output = Command::new(retina_test_support::venv_python()).arg(script).arg("--cut").arg(lake).output().expect("run scripts/read_published.py");
    assert!(output.status.success(), "read_published.py: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("reader output")
}

#[test]
fn an_ingest_is_published_as_delta_and_iceberg_tables_that_other_engines_read_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let capture = dir.path().join("capture.jsonl");
    std::fs::write(&capture, two_table_capture(200)).expect("write");
    let lake = dir.path().join("lake");
    let keys = ["--primary-key", "public.items=id", "--primary-key", "public.orders=id"];
    let run = ingest(&lake, &format!("file:{}", capture.display()), &keys);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));

    let published =
        sql(&lake, "SELECT schema_name, table_name, format, path, version, last_error FROM retina.published ORDER BY table_name, format");
    assert_eq!(published.len(), 4, "{published:?}");
    assert!(published[0].starts_with("public,items,delta,tables/public.items,"), "{published:?}");
    assert!(published[1].starts_with("public,items,iceberg,tables/public.items/metadata/v"), "{published:?}");
    assert!(published.iter().all(|row| row.ends_with(',')), "no error: {published:?}");
    let cut = read_cut(&lake);
    for table in ["items", "orders"] {
        let expected = sql(&lake, &format!("SELECT * FROM public.{table}"));
        let mut expected: Vec<Vec<String>> = expected.iter().map(|line| line.split(',').map(str::to_string).collect()).collect();
        expected.sort();
        let readers = [("delta", "duckdb"), ("delta", "deltalake"), ("delta", "polars"), ("iceberg", "pyiceberg"), ("iceberg", "duckdb"), ("iceberg", "polars")];
        for (format, reader) in readers {
            let seen = &cut["tables"][format!("public.{table}")][format][reader];
            assert!(seen.get("error").is_none(), "{format} {reader} on {table}: {}", seen["error"]);
            let rows: Vec<Vec<String>> = serde_json::from_value(seen["rows"].clone()).expect("rows");
            assert_eq!(rows, expected, "{format} {reader} rows of {table}");
        }
    }

    // The cut's figures are metrics too (`retina.metrics`, `/metrics`).
    let metrics = sql(&lake, "SELECT name, value FROM retina.metrics WHERE name LIKE 'retina_publi%' ORDER BY name");
    let published_ts = metrics.iter().find(|m| m.starts_with("retina_published_ts,")).expect("retina_published_ts");
    assert!(!published_ts.ends_with(",0.0") && !published_ts.ends_with(",0"), "{metrics:?}");
    assert!(metrics.iter().any(|m| m == "retina_publication_failing,0.0" || m == "retina_publication_failing,0"), "{metrics:?}");

    // Formats that cannot be published alone, and a negative retention, are refused.
    for (flags, says) in [
        (vec!["--publish", "iceberg"], "--publish iceberg needs delta"),
        (vec!["--publish", "none,delta"], "--publish none cannot be combined"),
        (vec!["--publish-retention-seconds=-1"], "--publish-retention-seconds must be zero or a positive"),
        (vec!["--publish-interval=-2"], "--publish-interval-seconds must be zero or a positive"),
    ] {
        let refused = ingest(&dir.path().join("refused"), &format!("file:{}", capture.display()), &[&keys[..], &flags[..]].concat());
        assert!(!refused.status.success(), "{flags:?} must be refused");
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }

    // An interval longer than the run: checkpoints inside it are not published, and
    // the clean shutdown publishes the final state.
    let sparse = dir.path().join("sparse");
    let run = ingest(&sparse, &format!("file:{}", capture.display()), &[&keys[..], &["--publish-interval", "3600", "--checkpoint-seconds", "0.05"]].concat());
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let sparse_cut = read_cut(&sparse);
    for table in ["items", "orders"] {
        let mut expected: Vec<Vec<String>> = sql(&sparse, &format!("SELECT * FROM public.{table}")).iter().map(|l| l.split(',').map(str::to_string).collect()).collect();
        expected.sort();
        let seen = &sparse_cut["tables"][format!("public.{table}")]["delta"]["duckdb"];
        let rows: Vec<Vec<String>> = serde_json::from_value(seen["rows"].clone()).unwrap_or_else(|_| panic!("rows of {table}: {seen}"));
        assert_eq!(rows, expected, "the final state of {table} is published");
    }

    let unpublished = dir.path().join("unpublished");
    let run = ingest(&unpublished, &format!("file:{}", capture.display()), &[&keys[..], &["--publish", "none"]].concat());
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    assert!(!unpublished.join("tables/public.items/_delta_log").exists());
    assert!(!unpublished.join("tables/public.items/metadata").exists());
    assert!(sql(&unpublished, "SELECT * FROM retina.published").is_empty());
}

/// Delta Lake has no time-of-day type and no nanosecond timestamp: a table with a
/// `time` column and a `datetime2`-like nanosecond timestamp is still published, the
/// Delta table without those columns (its description names them) and the Iceberg
/// table with them, and every reader reads what `retina sql` shows.
#[test]
fn a_table_with_time_and_nanosecond_columns_is_published_without_them_in_delta_and_with_them_in_iceberg() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fields = r#"[{"type":"int64","optional":false,"field":"id"},{"type":"int64","optional":true,"name":"io.debezium.time.MicroTime","version":1,"field":"t"},{"type":"int64","optional":true,"name":"io.debezium.time.NanoTimestamp","version":1,"field":"at"},{"type":"string","optional":true,"field":"name"}]"#;
    let schema = format!(
        r#"{{"type":"struct","fields":[{{"type":"struct","fields":{fields},"optional":true,"name":"db.public.clock.Value","field":"before"}},{{"type":"struct","fields":{fields},"optional":true,"name":"db.public.clock.Value","field":"after"}},{{"type":"struct","fields":[{{"type":"string","optional":false,"field":"connector"}},{{"type":"string","optional":false,"field":"schema"}},{{"type":"string","optional":false,"field":"table"}},{{"type":"int64","optional":true,"field":"txId"}}],"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"}},{{"type":"string","optional":false,"field":"op"}}],"optional":false,"name":"db.public.clock.Envelope"}}"#
    );
    // Nanosecond values on whole microseconds, which the Python readers' datetimes hold exactly.
    let lines: Vec<String> = [(1, "86399999999", "1700000000123456000", "last"), (2, "0", "null", "midnight"), (3, "45296123456", "-86400000000000", "noon-ish")]
        .iter()
        .map(|(id, micros, nanos, name)| {
            format!(
                r#"{{"schema":{schema},"payload":{{"before":null,"after":{{"id":{id},"t":{micros},"at":{nanos},"name":"{name}"}},"source":{{"connector":"postgresql","schema":"public","table":"clock","txId":{id}}},"op":"c"}}}}"#
            )
        })
        .collect();
    let capture = dir.path().join("clock.jsonl");
    std::fs::write(&capture, lines.join("\n") + "\n").expect("write");
    let lake = dir.path().join("lake");
    let run = ingest(&lake, &format!("file:{}", capture.display()), &["--primary-key", "public.clock=id"]);
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let published = sql(&lake, "SELECT format, last_error FROM retina.published ORDER BY format");
    assert_eq!(published, ["delta,", "iceberg,"], "both published without an error");
    let log = std::fs::read_to_string(lake.join("tables/public.clock/_delta_log/00000000000000000000.json")).expect("first Delta commit");
    assert!(log.contains("(the Iceberg table has them): t (time of day), at (timestamp in nanoseconds)"), "{log}");

    let rows = |query: &str| {
        let mut rows: Vec<Vec<String>> = sql(&lake, query).iter().map(|line| line.split(',').map(str::to_string).collect()).collect();
        rows.sort();
        rows
    };
    // The timestamp as Python prints a datetime (six digits of fraction, none when it
    // is zero), which is what the readers' rows hold.
    let (without_time, with_time) =
        (rows("SELECT id, name FROM public.clock"), rows("SELECT id, t, to_char(at, '%Y-%m-%d %H:%M:%S%.f'), name FROM public.clock"));
    assert_eq!(with_time[0], ["1", "23:59:59.999999", "2023-11-14 22:13:20.123456", "last"]);
    assert_eq!(with_time[1], ["2", "00:00:00", "", "midnight"]);
    assert_eq!(with_time[2][2], "1969-12-31 00:00:00");
    let cut = read_cut(&lake);
    for (format, reader, expected) in [
        ("delta", "duckdb", &without_time),
        ("delta", "deltalake", &without_time),
        ("delta", "polars", &without_time),
        ("iceberg", "pyiceberg", &with_time),
        ("iceberg", "duckdb", &with_time),
        ("iceberg", "polars", &with_time),
    ] {
        let seen = &cut["tables"]["public.clock"][format][reader];
        // DuckDB 1.4.4's iceberg extension does not know Iceberg v3's timestamp_ns
        // (its delta_scan reads the table without the column); a newer one must read it.
        let error = seen.get("error").and_then(|e| e.as_str());
        if (format, reader) == ("iceberg", "duckdb") && error.is_some_and(|e| e.contains("Unrecognized primitive type: timestamp_ns")) {
            continue;
        }
        assert!(error.is_none(), "{format} {reader}: {}", seen["error"]);
        let rows: Vec<Vec<String>> = serde_json::from_value(seen["rows"].clone()).expect("rows");
        assert_eq!(&rows, expected, "{format} {reader}");
    }
}

/// SQL Server's `time(7)` (a time of day in nanoseconds) has no type in Iceberg, and
/// pyiceberg cannot read a Parquet file holding one even when the column is not
/// declared: the table is left out of the published cut, and `--json` says which
/// tables were published and why one was not (before, only the text report did).
#[test]
fn an_ingest_reports_in_json_a_table_no_format_could_publish() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fields = r#"[{"type":"int64","optional":false,"field":"id"},{"type":"int64","optional":true,"name":"io.debezium.time.NanoTime","version":1,"field":"t7"},{"type":"string","optional":true,"field":"name"}]"#;
    let schema = format!(
        r#"{{"type":"struct","fields":[{{"type":"struct","fields":{fields},"optional":true,"name":"db.dbo.clock7.Value","field":"before"}},{{"type":"struct","fields":{fields},"optional":true,"name":"db.dbo.clock7.Value","field":"after"}},{{"type":"struct","fields":[{{"type":"string","optional":false,"field":"connector"}},{{"type":"string","optional":false,"field":"schema"}},{{"type":"string","optional":false,"field":"table"}}],"optional":false,"name":"io.debezium.connector.sqlserver.Source","field":"source"}},{{"type":"string","optional":false,"field":"op"}}],"optional":false,"name":"db.dbo.clock7.Envelope"}}"#
    );
    let mut lines: Vec<String> = [(1, "45296123456700", "a"), (2, "null", "b")]
        .iter()
        .map(|(id, nanos, name)| {
            format!(
                r#"{{"schema":{schema},"payload":{{"before":null,"after":{{"id":{id},"t7":{nanos},"name":"{name}"}},"source":{{"connector":"sqlserver","schema":"dbo","table":"clock7"}},"op":"r"}}}}"#
            )
        })
        .collect();
    lines.push(event("items", "c", 1, Some("one"), 1));
    let capture = dir.path().join("clock7.jsonl");
    std::fs::write(&capture, lines.join("\n") + "\n").expect("write");
    let lake = dir.path().join("lake");
    let run = ingest(&lake, &format!("file:{}", capture.display()), &["--primary-key", "dbo.clock7=id", "--primary-key", "public.items=id", "--json"]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{stdout}{}", String::from_utf8_lossy(&run.stderr));
    let report: serde_json::Value = serde_json::from_str(stdout.lines().last().expect("json line")).expect("json report");
    assert_eq!(report["published_tables"], serde_json::json!(["public.items"]), "{report}");
    let error = report["publication_error"].as_str().unwrap_or_default();
    assert!(error.contains("dbo.clock7") && error.contains("t7") && error.contains("not published"), "{report}");
    assert_eq!(sql(&lake, "SELECT id, t7, name FROM dbo.clock7 ORDER BY id"), ["1,12:34:56.123456700,a", "2,,b"], "the mirror has it all");
}
