//! What TLS costs the PostgreSQL source's two data paths, measured on the wire
//! client alone (the only part TLS changes): the initial copy (`COPY … TO STDOUT` of
//! a narrow table) and the replication stream (a backlog of row changes read through
//! `START_REPLICATION` and decoded from pgoutput). The same server serves both modes;
//! runs alternate plain and TLS so drift hits both alike.
//!
//! `cargo bench -p retina-postgres --bench tls_cost -- [--rows N] [--changes N] [--runs N]`
//! (defaults 1,000,000 rows, 500,000 changes, 5 runs). Prints min/median/max per mode
//! and the TLS cost of the medians. Needs the PostgreSQL server binaries and openssl,
//! as the tests do.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use retina_postgres::pgoutput::{LogicalMessage, PgOutputDecoder, ReplicationMessage};
use retina_postgres::wire::{ConnectConfig, CopyBothEvent, PgConnection, SslMode, TlsOptions};
use retina_postgres::Lsn;
use support::certificates::TestCa;
use support::{PgCluster, PgClusterOptions, ServerTls};

struct Settings {
    rows: u64,
    changes: u64,
    runs: usize,
}

fn settings() -> Settings {
    let mut settings = Settings { rows: 1_000_000, changes: 500_000, runs: 5 };
    let args: Vec<String> = std::env::args().collect();
    let mut index = 1;
    while index < args.len() {
        let value = || args.get(index + 1).and_then(|v| v.parse::<u64>().ok());
        match args[index].as_str() {
            "--rows" => settings.rows = value().expect("--rows N"),
            "--changes" => settings.changes = value().expect("--changes N"),
            "--runs" => settings.runs = value().expect("--runs N") as usize,
            _ => {
                index += 1;
                continue;
            }
        }
        index += 2;
    }
    settings
}

fn with_mode(config: &ConnectConfig, mode: SslMode) -> ConnectConfig {
    ConnectConfig { tls: TlsOptions { mode, ..TlsOptions::default() }, ..config.clone() }
}

/// Rows per second of one `COPY narrow TO STDOUT`.
fn copy_rate(config: &ConnectConfig, rows: u64) -> f64 {
    let mut connection = PgConnection::connect(config, false).expect("connect");
    let started = Instant::now();
    let mut bytes = 0usize;
    let copied = connection
        .copy_out("COPY narrow TO STDOUT", &mut |chunk| {
            bytes += chunk.len();
            Ok(())
        })
        .expect("copy");
    assert_eq!(copied, rows);
    rows as f64 / started.elapsed().as_secs_f64()
}

/// User plus system CPU seconds of a process (`self` or a pid), from `/proc`.
fn cpu_seconds(process: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{process}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at ") ".
    let fields: Vec<&str> = stat.rsplit_once(") ").map(|(_, rest)| rest.split(' ').collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// One stream run: changes per second, and the CPU share (of one core) this
/// process and the walsender used meanwhile.
struct StreamRun {
    rate: f64,
    client_cpu: f64,
    walsender_cpu: f64,
}

/// Reads the backlog in `slot` up to `end` (without confirming anything, so every
/// run reads the same backlog).
fn stream_rate(config: &ConnectConfig, end: Lsn, changes: u64) -> StreamRun {
    let mut connection = PgConnection::connect(config, true).expect("connect");
    let walsender = connection.backend_pid().to_string();
    let (client_before, walsender_before) = (cpu_seconds("self"), cpu_seconds(&walsender));
    let started = Instant::now();
    connection
        .start_copy_both("START_REPLICATION SLOT bench LOGICAL 0/0 (proto_version '1', publication_names 'bench')")
        .expect("start replication");
    let mut decoder = PgOutputDecoder::new();
    let mut seen = 0u64;
    loop {
        match connection.read_copy_data(Duration::from_secs(5)).expect("read") {
            CopyBothEvent::Data(payload) => match ReplicationMessage::decode(payload).expect("message") {
                ReplicationMessage::XLogData { body, .. } => match decoder.decode(body).expect("pgoutput") {
                    LogicalMessage::Insert { .. } | LogicalMessage::Update { .. } | LogicalMessage::Delete { .. } => seen += 1,
                    LogicalMessage::Commit { end_lsn, .. } if end_lsn >= end => break,
                    _ => {}
                },
                ReplicationMessage::Keepalive { .. } => {}
            },
            CopyBothEvent::Timeout => panic!("the stream stalled after {seen} changes"),
            CopyBothEvent::End => panic!("the server ended the stream"),
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    assert_eq!(seen, changes, "the whole backlog was read");
    StreamRun {
        rate: seen as f64 / seconds,
        client_cpu: (cpu_seconds("self") - client_before) / seconds,
        walsender_cpu: (cpu_seconds(&walsender) - walsender_before) / seconds,
    }
}

/// PostgreSQL's own client (`pg_recvlogical`, libpq and OpenSSL) reading the same
/// backlog: the reference that tells the server's cost of TLS from ours.
fn recvlogical_rate(cluster: &PgCluster, sslmode: &str, end: Lsn, changes: u64) -> f64 {
    let program = [cluster.binaries().bin_dir.clone()]
        .into_iter()
        .chain(std::fs::read_dir("/usr/lib/postgresql").into_iter().flatten().flatten().map(|entry| entry.path().join("bin")))
        .map(|dir| dir.join("pg_recvlogical"))
        .find(|path| path.is_file())
        .expect("pg_recvlogical (apt-get install postgresql)");
    let conninfo = format!("host=localhost port={} dbname=postgres user=postgres sslmode={sslmode}", cluster.port());
    // pg_recvlogical confirms what it read, so it reads a copy of the slot.
    cluster.psql("SELECT pg_copy_logical_replication_slot('bench', 'bench_reference')");
    let started = Instant::now();
    let output = std::process::Command::new(&program)
        .args(["-d", &conninfo, "--slot", "bench_reference", "--start", "--endpos", &end.to_string(), "--no-loop", "-f", "/dev/null"])
        .args(["-o", "proto_version=1", "-o", "publication_names=bench"])
        .output()
        .unwrap_or_else(|error| panic!("cannot run {}: {error}", program.display()));
    let rate = changes as f64 / started.elapsed().as_secs_f64();
    assert!(output.status.success(), "pg_recvlogical: {}", String::from_utf8_lossy(&output.stderr));
    cluster.psql("SELECT pg_drop_replication_slot('bench_reference')");
    rate
}

fn spread(label: &str, mut rates: Vec<f64>) -> f64 {
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    println!(
        "{label:<22} min {:>10.0}  median {:>10.0}  max {:>10.0}  per second ({} runs)",
        rates[0],
        median,
        rates[rates.len() - 1],
        rates.len()
    );
    median
}

fn main() {
    let settings = settings();
    let certificates = tempfile::tempdir().expect("tempdir");
    let ca = TestCa::new(certificates.path(), "bench-ca");
    let server = ca.issue("server", "localhost", &["DNS:localhost"]);
    let cluster = PgCluster::start_with(PgClusterOptions {
        tls: Some(ServerTls { certificate: server.certificate, key: server.key, client_ca: None }),
        ..PgClusterOptions::default()
    });
    let base = cluster.config("postgres", "postgres");
    println!("setting up {} rows and a backlog of {} row changes", settings.rows, settings.changes);
    cluster.psql(&format!(
        "CREATE TABLE narrow (id int8 PRIMARY KEY, v int4, t text);
         INSERT INTO narrow SELECT g, g % 1000, 'row ' || g FROM generate_series(1, {}) g;
         CREATE TABLE changes (id int8 PRIMARY KEY, v int4);
         CREATE PUBLICATION bench FOR TABLE changes;",
        settings.rows
    ));
    cluster.psql("SELECT pg_create_logical_replication_slot('bench', 'pgoutput')");
    // The backlog: inserts in 10,000-row transactions.
    let mut written = 0;
    while written < settings.changes {
        let batch = (settings.changes - written).min(10_000);
        cluster.psql(&format!(
            "INSERT INTO changes SELECT g, g % 7 FROM generate_series({}, {}) g",
            written + 1,
            written + batch
        ));
        written += batch;
    }
    let end: Lsn = cluster.psql("SELECT pg_current_wal_lsn()").parse().expect("lsn");

    let (plain, tls) = (with_mode(&base, SslMode::Disable), with_mode(&base, SslMode::Require));
    {
        let mut check = PgConnection::connect(&tls, false).expect("TLS session");
        assert!(check.is_tls());
        let _ = check.query_rows("SELECT 1");
    }
    let (mut copy_plain, mut copy_tls, mut stream_plain, mut stream_tls) = (vec![], vec![], vec![], vec![]);
    let (mut reference_plain, mut reference_tls) = (vec![], vec![]);
    for run in 0..settings.runs {
        // Alternate which goes first, so warm-up and drift hit both.
        if run % 2 == 0 {
            copy_plain.push(copy_rate(&plain, settings.rows));
            copy_tls.push(copy_rate(&tls, settings.rows));
            stream_plain.push(stream_rate(&plain, end, settings.changes));
            stream_tls.push(stream_rate(&tls, end, settings.changes));
        } else {
            copy_tls.push(copy_rate(&tls, settings.rows));
            copy_plain.push(copy_rate(&plain, settings.rows));
            stream_tls.push(stream_rate(&tls, end, settings.changes));
            stream_plain.push(stream_rate(&plain, end, settings.changes));
        }
        reference_plain.push(recvlogical_rate(&cluster, "disable", end, settings.changes));
        reference_tls.push(recvlogical_rate(&cluster, "require", end, settings.changes));
        eprintln!("run {} of {} done", run + 1, settings.runs);
    }
    let copy_plain = spread("copy, plain (rows)", copy_plain);
    let copy_tls = spread("copy, TLS (rows)", copy_tls);
    for (label, runs) in [("plain", &stream_plain), ("TLS", &stream_tls)] {
        let share = |pick: fn(&StreamRun) -> f64| runs.iter().map(pick).sum::<f64>() / runs.len() as f64;
        println!(
            "stream, {label}: CPU share of one core, mean over runs: this client {:.2}, walsender {:.2}",
            share(|run| run.client_cpu),
            share(|run| run.walsender_cpu)
        );
    }
    let stream_plain = spread("stream, plain (changes)", stream_plain.iter().map(|run| run.rate).collect());
    let stream_tls = spread("stream, TLS (changes)", stream_tls.iter().map(|run| run.rate).collect());
    let reference_plain = spread("pg_recvlogical, plain", reference_plain);
    let reference_tls = spread("pg_recvlogical, TLS", reference_tls);
    println!(
        "TLS cost (medians): copy {:.1}%, stream {:.1}%; PostgreSQL's own pg_recvlogical on the same backlog {:.1}%",
        100.0 * (1.0 - copy_tls / copy_plain),
        100.0 * (1.0 - stream_tls / stream_plain),
        100.0 * (1.0 - reference_tls / reference_plain)
    );
}
