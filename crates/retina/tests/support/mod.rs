//! Shared by the CLI's integration tests: starting `retina serve` as a user does.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub const RETINA: &str = env!("CARGO_BIN_EXE_retina");

/// A started `retina serve`: the process and its SQL and metrics addresses.
pub struct Spawned {
    pub child: Child,
    pub sql: String,
    pub metrics: String,
}

/// Starts `retina serve --data-dir DIR` on free loopback ports with `args`, and
/// returns once it printed where it serves SQL (its stdout is drained after that).
pub fn spawn_serve(dir: &Path, args: &[&str]) -> Spawned {
    let mut child = Command::new(RETINA)
        .args(["serve", "--data-dir"])
        .arg(dir)
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start retina serve");
    let stdout = child.stdout.take().expect("stdout");
    let mut lines = BufReader::new(stdout).lines();
    let line = loop {
        match lines.next() {
            Some(Ok(line)) if line.starts_with("retina serve: SQL") => break line,
            Some(Ok(_)) => continue,
            other => panic!("retina serve did not start: {other:?}"),
        }
    };
    // "retina serve: SQL (PostgreSQL protocol) on ADDR; metrics on http://ADDR/metrics"
    let sql = line.split(" on ").nth(1).and_then(|s| s.split(';').next()).expect("sql address").to_string();
    let metrics = line.rsplit("http://").next().and_then(|s| s.strip_suffix("/metrics")).expect("metrics address").to_string();
    std::thread::spawn(move || for _ in lines {}); // keep draining stdout
    Spawned { child, sql, metrics }
}

/// A Debezium event with its schema envelope, as Kafka Connect writes by default.
pub fn debezium_event(table: &str, op: &str, id: i64, name: Option<&str>, tx: u64) -> String {
    let row = |n: Option<&str>| n.map_or_else(|| format!(r#"{{"id":{id},"name":null}}"#), |n| format!(r#"{{"id":{id},"name":"{n}"}}"#));
    let (before, after) = match op {
        "d" => (format!(r#"{{"id":{id},"name":null}}"#), "null".to_string()),
        _ => ("null".to_string(), row(name)),
    };
    let fields = r#"[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]"#;
    let schema = format!(
        r#"{{"type":"struct","fields":[{{"type":"struct","fields":{fields},"optional":true,"name":"db.public.{table}.Value","field":"before"}},{{"type":"struct","fields":{fields},"optional":true,"name":"db.public.{table}.Value","field":"after"}},{{"type":"struct","fields":[{{"type":"string","optional":false,"field":"connector"}},{{"type":"string","optional":false,"field":"schema"}},{{"type":"string","optional":false,"field":"table"}},{{"type":"int64","optional":true,"field":"txId"}},{{"type":"int64","optional":true,"field":"lsn"}}],"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"}},{{"type":"string","optional":false,"field":"op"}},{{"type":"int64","optional":true,"field":"ts_ms"}}],"optional":false,"name":"db.public.{table}.Envelope"}}"#
    );
    format!(
        r#"{{"schema":{schema},"payload":{{"before":{before},"after":{after},"source":{{"connector":"postgresql","schema":"public","table":"{table}","txId":{tx},"lsn":{tx}}},"op":"{op}","ts_ms":2}}}}"#
    )
}


/// Inserts, updates and deletes of `rows` rows over two tables (`public.items`,
/// `public.orders`), as Debezium JSON lines with schemas: the capture the publication
/// tests ingest, so every reader meets deletion vectors.
pub fn two_table_capture(rows: i64) -> String {
    let mut lines = Vec::new();
    for id in 0..rows {
        lines.push(debezium_event("items", "c", id, Some(&format!("item {id}")), 1000 + id as u64));
        lines.push(debezium_event("orders", "c", id, None, 1000 + id as u64));
    }
    for id in (0..rows).step_by(3) {
        lines.push(debezium_event("items", "u", id, Some("changed"), 2000 + id as u64));
    }
    for id in (1..rows).step_by(5) {
        lines.push(debezium_event("items", "d", id, None, 3000 + id as u64));
        lines.push(debezium_event("orders", "d", id, None, 3000 + id as u64));
    }
    lines.join("\n") + "\n"
}
