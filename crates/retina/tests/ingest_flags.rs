//! `retina ingest --on-absent-row` and `--table` (and their URI options) end to end:
//! a stream excerpt whose first events update and delete rows never inserted, and a
//! capture without `source` blocks.

use std::path::Path;
use std::process::{Command, Output};

const RETINA: &str = env!("CARGO_BIN_EXE_retina");

fn ingest(data_dir: &Path, uri: &str, flags: &[&str]) -> Output {
    Command::new(RETINA)
        .args(["ingest", "--infer-schema", "--data-dir"])
        .arg(data_dir)
        .arg(uri)
        .args(flags)
        .output()
        .expect("run retina ingest")
}

fn sql(data_dir: &Path, query: &str) -> String {
    let output = Command::new(RETINA).args(["sql", "--format", "csv", "--data-dir"]).arg(data_dir).args(["-c", query]).output().expect("retina sql");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn event(op: &str, id: i64, name: Option<&str>, tx: u64) -> String {
    let after = name.map_or_else(|| "null".to_string(), |n| format!(r#"{{"id":{id},"name":"{n}"}}"#));
    let before = if op == "d" { format!(r#"{{"id":{id},"name":null}}"#) } else { "null".to_string() };
    format!(
        r#"{{"key":{{"id":{id}}},"value":{{"before":{before},"after":{after},"source":{{"version":"2.7.3.Final","connector":"postgresql","name":"db","ts_ms":1,"snapshot":"false","db":"shop","sequence":"[null,\"{tx}\"]","schema":"public","table":"items","txId":{tx},"lsn":{tx},"xmin":null}},"op":"{op}","ts_ms":2}}}}"#
    )
}

#[test]
fn on_absent_row_and_table_flags_and_uri_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let excerpt = dir.path().join("excerpt.jsonl");
    let lines = [event("u", 1, Some("first"), 10), event("d", 2, None, 11), event("u", 1, Some("second"), 12), "null".to_string()];
    std::fs::write(&excerpt, lines.join("\n") + "\n").expect("write");
    let uri = format!("file:{}", excerpt.display());

    let strict = ingest(&dir.path().join("strict"), &uri, &[]);
    assert!(!strict.status.success());
    let stderr = String::from_utf8_lossy(&strict.stderr);
    assert!(stderr.contains("public.items") && stderr.contains("--on-absent-row upsert"), "{stderr}");

    let lake = dir.path().join("lake");
    let tolerant = ingest(&lake, &uri, &["--on-absent-row", "upsert"]);
    let stdout = String::from_utf8_lossy(&tolerant.stdout);
    assert!(tolerant.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&tolerant.stderr));
    assert!(stdout.contains("1 absent-row upserts, 1 absent-row deletes ignored"), "{stdout}");
    assert_eq!(sql(&lake, "SELECT id, name FROM public.items ORDER BY id").lines().nth(1), Some("1,second"));

    // The same through the URI option, on a fresh lake.
    let via_uri = ingest(&dir.path().join("lake2"), &format!("{uri}?on_absent_row=upsert"), &[]);
    assert!(via_uri.status.success(), "{}", String::from_utf8_lossy(&via_uri.stderr));

    // A capture without source blocks: --table names its table.
    let bare = dir.path().join("bare.jsonl");
    std::fs::write(&bare, "{\"key\":{\"id\":5},\"value\":{\"before\":null,\"after\":{\"id\":5,\"name\":\"x\"},\"op\":\"c\",\"ts_ms\":1}}\n").expect("write");
    let bare_uri = format!("file:{}", bare.display());
    let refused = ingest(&dir.path().join("lake3"), &bare_uri, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--table"), "{}", String::from_utf8_lossy(&refused.stderr));
    let lake4 = dir.path().join("lake4");
    let named = ingest(&lake4, &bare_uri, &["--table", "shop.bare"]);
    assert!(named.status.success(), "{}", String::from_utf8_lossy(&named.stderr));
    assert_eq!(sql(&lake4, "SELECT id, name FROM shop.bare").lines().nth(1), Some("5,x"));
    let lake5 = dir.path().join("lake5");
    let named = ingest(&lake5, &format!("{bare_uri}?table=shop.bare"), &[]);
    assert!(named.status.success(), "{}", String::from_utf8_lossy(&named.stderr));
    assert_eq!(sql(&lake5, "SELECT id, name FROM shop.bare").lines().nth(1), Some("5,x"));
}

/// Bytes of a table's Parquet files: flushed files and checkpoint segments (a small
/// ingest's rows are all in segments), not the Delta log's checkpoints.
fn data_file_bytes(folder: &Path) -> u64 {
    std::fs::read_dir(folder)
        .expect("table folder")
        .map(|entry| entry.expect("entry").path())
        .map(|path| match path.file_name().and_then(|name| name.to_str()) {
            Some("_segments") => data_file_bytes(&path),
            _ if path.extension().is_some_and(|extension| extension == "parquet") => std::fs::metadata(&path).expect("metadata").len(),
            _ => 0,
        })
        .sum()
}

#[test]
fn compression_flag_trades_scan_speed_for_file_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let stream = dir.path().join("inserts.jsonl");
    let lines: Vec<String> = (1..=20_000).map(|id| event("c", id, Some(&format!("n{}", id % 5)), id as u64)).collect();
    std::fs::write(&stream, lines.join("\n") + "\n").expect("write");
    let uri = format!("file:{}", stream.display());
    let mut bytes = Vec::new();
    for (lake, flags) in [("auto", &[][..]), ("fast", &["--compression", "fast-scans"][..]), ("small", &["--compression", "small-files"][..])] {
        let lake = dir.path().join(lake);
        let output = ingest(&lake, &uri, flags);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(sql(&lake, "SELECT count(*), sum(id) FROM public.items").lines().nth(1), Some("20000,200010000"));
        bytes.push(data_file_bytes(&lake.join("tables").join("public.items")));
    }
    // A local lake favours fast scans by default; small files compress the ids.
    assert!(bytes[1] > 0 && bytes[0] == bytes[1], "auto on a local directory is fast-scans: {bytes:?}");
    assert!(bytes[2] * 4 < bytes[1] * 3, "small files {} bytes against fast scans {}", bytes[2], bytes[1]);
    let refused = ingest(&dir.path().join("bad"), &uri, &["--compression", "tiny"]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("small-files"), "{}", String::from_utf8_lossy(&refused.stderr));
}
