//! Kill-and-compare for every CDC source kind the one ingest driver runs: a
//! multi-table transactional bank stream (Debezium JSON with the schema envelope and
//! a key, BEGIN/END transaction metadata) is replayed by a real `retina serve` or
//! `retina ingest` process that is SIGKILLed at random moments — also before its
//! first checkpoint — and restarted. After every kill the recovered data dir is a
//! consistent prefix of the source (the cross-table invariant holds, transfers are
//! gap-free); at the end the mirror equals the source exactly. Nothing a checkpoint
//! did not hold may have been acknowledged to the source: against a driver that
//! acknowledged what was merely visible, the NATS runs end with transfers missing.
//!
//! NATS runs need `nats-server` (Debian package `nats-server`); Kafka runs Apache
//! Kafka 4.4 (jars from Maven Central) and `kafka-python` (PyPI), as `scripts/test.sh` installs.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use retina_test_support::{KafkaRecord, LocalKafkaBroker, LocalNatsServer};

mod support;

use support::{spawn_serve, RETINA};

const ACCOUNTS: i64 = 20;
const OPENING_BALANCE: i64 = 1000;

// ---------------------------------------------------------------------------------
// The source: a bank's change stream, as Debezium's PostgreSQL connector writes it
// through Kafka Connect's JsonConverter (schemas enabled) with transaction metadata.

const ACCOUNTS_VALUE: &str = r#"[{"type":"int64","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"balance"}]"#;
const TRANSFERS_VALUE: &str = r#"[{"type":"int64","optional":false,"field":"id"},{"type":"int64","optional":false,"field":"from_id"},{"type":"int64","optional":false,"field":"to_id"},{"type":"int64","optional":false,"field":"amount"}]"#;

fn envelope_schema(table: &str, value_fields: &str) -> String {
    format!(
        r#"{{"type":"struct","optional":false,"name":"pg.bank.{table}.Envelope","version":1,"fields":[{{"type":"struct","optional":true,"name":"pg.bank.{table}.Value","field":"before","fields":{value_fields}}},{{"type":"struct","optional":true,"name":"pg.bank.{table}.Value","field":"after","fields":{value_fields}}},{{"type":"struct","optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source","fields":[{{"type":"string","optional":false,"field":"version"}},{{"type":"string","optional":false,"field":"connector"}},{{"type":"string","optional":false,"field":"name"}},{{"type":"int64","optional":false,"field":"ts_ms"}},{{"type":"string","optional":false,"field":"db"}},{{"type":"string","optional":false,"field":"schema"}},{{"type":"string","optional":false,"field":"table"}},{{"type":"int64","optional":true,"field":"txId"}},{{"type":"int64","optional":true,"field":"lsn"}}]}},{{"type":"string","optional":false,"field":"op"}},{{"type":"int64","optional":true,"field":"ts_ms"}},{{"type":"struct","optional":true,"name":"event.block","field":"transaction","fields":[{{"type":"string","optional":false,"field":"id"}},{{"type":"int64","optional":false,"field":"total_order"}},{{"type":"int64","optional":false,"field":"data_collection_order"}}]}}]}}"#
    )
}

const KEY_SCHEMA: &str = r#"{"type":"struct","optional":false,"name":"pg.bank.Key","fields":[{"type":"int64","optional":false,"field":"id"}]}"#;

/// The stream's lines and the source's final state.
struct BankStream {
    lines: Vec<String>,
    accounts: BTreeMap<i64, i64>,
    transfers: Vec<[i64; 4]>,
}

struct Encoder {
    lines: Vec<String>,
    lsn: u64,
    accounts_schema: String,
    transfers_schema: String,
}

impl Encoder {
    /// One source transaction: BEGIN, its events (table, op, id, before, after), END.
    fn transaction(&mut self, txid: u64, events: &[(&str, &str, i64, Option<String>, Option<String>)]) {
        let id = format!("{txid}:{}", self.lsn);
        self.lines.push(format!(r#"{{"schema":null,"payload":{{"status":"BEGIN","id":"{id}","event_count":null,"data_collections":null,"ts_ms":1700000000000}}}}"#));
        let mut per_table: BTreeMap<&str, u64> = BTreeMap::new();
        for (order, (table, op, key, before, after)) in events.iter().enumerate() {
            let table_order = per_table.entry(table).or_default();
            *table_order += 1;
            self.lsn += 8;
            let schema = if *table == "accounts" { &self.accounts_schema } else { &self.transfers_schema };
            let image = |image: &Option<String>| image.clone().unwrap_or_else(|| "null".into());
            self.lines.push(format!(
                r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":{key}}}}},"value":{{"schema":{schema},"payload":{{"before":{},"after":{},"source":{{"version":"2.7.3.Final","connector":"postgresql","name":"pg","ts_ms":1700000000000,"db":"shop","schema":"bank","table":"{table}","txId":{txid},"lsn":{}}},"op":"{op}","ts_ms":1700000000001,"transaction":{{"id":"{id}","total_order":{},"data_collection_order":{table_order}}}}}}}}}"#,
                image(before),
                image(after),
                self.lsn,
                order + 1,
            ));
        }
        let collections: Vec<String> =
            per_table.iter().map(|(table, count)| format!(r#"{{"data_collection":"bank.{table}","event_count":{count}}}"#)).collect();
        self.lines.push(format!(
            r#"{{"schema":null,"payload":{{"status":"END","id":"{id}","event_count":{},"data_collections":[{}],"ts_ms":1700000000002}}}}"#,
            events.len(),
            collections.join(",")
        ));
    }
}

fn account(id: i64, balance: i64) -> Option<String> {
    Some(format!(r#"{{"id":{id},"balance":{balance}}}"#))
}

fn bank_stream(transfers: usize, seed: u64) -> BankStream {
    let mut encoder = Encoder {
        lines: Vec::new(),
        lsn: 1000,
        accounts_schema: envelope_schema("accounts", ACCOUNTS_VALUE),
        transfers_schema: envelope_schema("transfers", TRANSFERS_VALUE),
    };
    let mut accounts: BTreeMap<i64, i64> = (1..=ACCOUNTS).map(|id| (id, OPENING_BALANCE)).collect();
    let opening: Vec<_> = (1..=ACCOUNTS).map(|id| ("accounts", "c", id, None, account(id, OPENING_BALANCE))).collect();
    encoder.transaction(1, &opening);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut done = Vec::with_capacity(transfers);
    for n in 1..=transfers as i64 {
        let from = rng.random_range(1..=ACCOUNTS);
        let to = (from - 1 + rng.random_range(1..ACCOUNTS)) % ACCOUNTS + 1; // never `from`
        let amount = rng.random_range(1..=50);
        let (from_before, to_before) = (accounts[&from], accounts[&to]);
        accounts.insert(from, from_before - amount);
        accounts.insert(to, accounts[&to] + amount);
        let transfer = Some(format!(r#"{{"id":{n},"from_id":{from},"to_id":{to},"amount":{amount}}}"#));
        encoder.transaction(
            n as u64 + 1,
            &[
                ("transfers", "c", n, None, transfer),
                ("accounts", "u", from, account(from, from_before), account(from, from_before - amount)),
                ("accounts", "u", to, account(to, to_before), account(to, to_before + amount)),
            ],
        );
        done.push([n, from, to, amount]);
    }
    BankStream { lines: encoder.lines, accounts, transfers: done }
}

// ---------------------------------------------------------------------------------
// Reading a stopped data dir and checking it.

fn query_csv(dir: &Path, sql: &str) -> Vec<Vec<i64>> {
    let output = Command::new(RETINA)
        .args(["sql", "--format", "csv", "--data-dir"])
        .arg(dir)
        .args(["-c", sql])
        .output()
        .expect("run retina sql");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        // Before the first checkpoint a data dir may hold no tables yet.
        assert!(stderr.contains("not found") || stderr.contains("42P01"), "retina sql {sql:?}: {stderr}");
        return Vec::new();
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .skip(1)
        .map(|line| line.split(',').map(|v| v.parse().unwrap_or_else(|_| panic!("not a number in {line:?}"))).collect())
        .collect()
}

/// The mirror's accounts and transfers.
fn mirror(dir: &Path) -> (BTreeMap<i64, i64>, Vec<[i64; 4]>) {
    let accounts = query_csv(dir, "SELECT id, balance FROM bank.accounts ORDER BY id").into_iter().map(|r| (r[0], r[1])).collect();
    let transfers = query_csv(dir, "SELECT id, from_id, to_id, amount FROM bank.transfers ORDER BY id")
        .into_iter()
        .map(|r| [r[0], r[1], r[2], r[3]])
        .collect();
    (accounts, transfers)
}

/// What a recovered data dir must be: a prefix of the source, torn nowhere.
fn check_consistent_prefix(dir: &Path, stream: &BankStream, when: &str) -> usize {
    let (accounts, transfers) = mirror(dir);
    if accounts.is_empty() {
        assert!(transfers.is_empty(), "{when}: transfers without accounts");
        return 0;
    }
    assert_eq!(accounts.len() as i64, ACCOUNTS, "{when}: the opening transaction is torn");
    assert_eq!(transfers.as_slice(), &stream.transfers[..transfers.len()], "{when}: transfers are not a gap-free prefix of the source");
    let mut expected: BTreeMap<i64, i64> = (1..=ACCOUNTS).map(|id| (id, OPENING_BALANCE)).collect();
    for [_, from, to, amount] in &transfers {
        *expected.entry(*from).or_default() -= amount;
        *expected.entry(*to).or_default() += amount;
    }
    assert_eq!(accounts, expected, "{when}: balances disagree with the {} transfers (a torn transaction)", transfers.len());
    transfers.len()
}

fn check_equal_to_source(dir: &Path, stream: &BankStream) {
    let (accounts, transfers) = mirror(dir);
    assert_eq!(transfers.len(), stream.transfers.len(), "transfers lost or duplicated");
    assert_eq!(transfers, stream.transfers);
    assert_eq!(accounts, stream.accounts);
}

// ---------------------------------------------------------------------------------
// Processes.

fn sigkill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        sigkill(&mut self.0);
    }
}

fn start_nats() -> LocalNatsServer {
    LocalNatsServer::start().unwrap_or_else(|e| panic!("{e}"))
}

/// Publishes every line to the JetStream stream `cdc` (pipelined, then all acks awaited).
fn publish(port: u16, lines: &[String]) {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let client = async_nats::connect(format!("127.0.0.1:{port}")).await.expect("connect");
        let jetstream = async_nats::jetstream::new(client);
        jetstream
            .get_or_create_stream(async_nats::jetstream::stream::Config { name: "cdc".into(), subjects: vec!["cdc.>".into()], ..Default::default() })
            .await
            .expect("stream");
        for chunk in lines.chunks(512) {
            let mut acks = Vec::with_capacity(chunk.len());
            for line in chunk {
                acks.push(jetstream.publish("cdc.bank", line.clone().into()).await.expect("publish"));
            }
            for ack in acks {
                ack.await.expect("stored");
            }
        }
    });
}

/// `retina serve` on `source`; returns once its SQL endpoint is up.
fn start_serve(dir: &Path, source: &str, checkpoint_seconds: &str) -> (Killed, u16) {
    let serve = spawn_serve(dir, &["--checkpoint-seconds", checkpoint_seconds, "--source", source]);
    let port = serve.sql.rsplit(':').next().and_then(|p| p.parse().ok()).expect("port");
    (Killed(serve.child), port)
}

fn psql(port: u16, sql: &str) -> Option<String> {
    let output = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", "retina", "-d", "retina", "-A", "-t", "-c", sql])
        .output()
        .unwrap_or_else(|e| panic!("cannot run psql ({e}): install the Debian package postgresql-client"));
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Kills `run`'s process at random moments (`rounds` times), checking the recovered
/// data dir after each kill; returns the number of transfers seen after each kill.
fn kill_rounds(dir: &Path, stream: &BankStream, rounds: usize, seed: u64, mut start: impl FnMut(&str) -> Killed) -> Vec<usize> {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut seen = Vec::new();
    for round in 0..rounds {
        // The first run checkpoints at the default period and is killed before its
        // first checkpoint, once much of the stream is visible: whatever it told the
        // source must come again. Later runs checkpoint often and die anywhere.
        let (checkpoint_seconds, delay) =
            if round == 0 { ("5", rng.random_range(1_500..3_500)) } else { (CHECKPOINT_SECONDS, rng.random_range(300..2_500)) };
        let mut process = start(checkpoint_seconds);
        std::thread::sleep(Duration::from_millis(delay));
        sigkill(&mut process.0);
        seen.push(check_consistent_prefix(dir, stream, &format!("after kill {round} at {delay} ms")));
    }
    seen
}

const TRANSFERS: usize = 15_000;
/// Short, so that kills fall between several checkpoints of one replay.
const CHECKPOINT_SECONDS: &str = "0.3";

#[test]
fn serve_from_nats_killed_at_random_moments_ends_equal_to_the_source() {
    let stream = bank_stream(TRANSFERS, 7);
    let nats = start_nats();
    publish(nats.port(), &stream.lines);
    let dir = tempfile::tempdir().expect("data dir");
    let source = format!("nats://{}/cdc", nats.address());
    let seen = kill_rounds(dir.path(), &stream, 5, 1, |checkpoint| start_serve(dir.path(), &source, checkpoint).0);
    eprintln!("transfers recovered after each kill: {seen:?}");

    serve_to_the_end(dir.path(), &source, &stream, |port| {
        // The source's status shows what a checkpoint made durable (and was acknowledged).
        let deadline = Instant::now() + Duration::from_secs(30);
        let durable = "SELECT durable_position IS NOT NULL FROM retina.sources";
        while psql(port, durable).as_deref() != Some("t") {
            assert!(Instant::now() < deadline, "retina.sources never showed a durable position: {:?}", psql(port, "SELECT * FROM retina.sources"));
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    drop(nats);
}

/// A last `retina serve` run until every transfer is visible, `check` on its SQL
/// port, then a clean stop; the data dir must then equal the source.
fn serve_to_the_end(dir: &Path, source: &str, stream: &BankStream, check: impl FnOnce(u16)) {
    let (mut serve, port) = start_serve(dir, source, CHECKPOINT_SECONDS);
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        let count = psql(port, "SELECT count(*) FROM bank.transfers").and_then(|c| c.parse::<usize>().ok());
        if count == Some(TRANSFERS) {
            break;
        }
        assert!(Instant::now() < deadline, "serve never caught up: {count:?} of {TRANSFERS} transfers visible");
        std::thread::sleep(Duration::from_millis(200));
    }
    check(port);
    let pid = serve.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().expect("kill").success());
    let status = serve.0.wait().expect("serve exits");
    assert!(status.success(), "retina serve exited with {status}");
    check_equal_to_source(dir, stream);
}

/// The stream as Kafka Connect writes it: each table's events to its own topic
/// (keyed, so one account's updates stay in one partition), the BEGIN/END records to
/// the transaction topic.
fn kafka_records(stream: &BankStream) -> Vec<KafkaRecord> {
    stream
        .lines
        .iter()
        .map(|line| {
            if let Some(marker) = line.strip_prefix(r#"{"schema":null,"payload":{"status":"#) {
                let id = marker.split(r#""id":""#).nth(1).and_then(|rest| rest.split('"').next()).expect("transaction id");
                return KafkaRecord { topic: "pg.transaction".into(), key: Some(format!(r#"{{"id":"{id}"}}"#)), value: Some(line.clone()), partition: None };
            }
            let inner = line.strip_prefix(r#"{"key":"#).and_then(|l| l.strip_suffix('}')).expect("a keyed event");
            let (key, value) = inner.split_once(r#","value":"#).expect("key and value");
            let table = if value.contains(r#""table":"accounts""#) { "accounts" } else { "transfers" };
            KafkaRecord { topic: format!("pg.bank.{table}"), key: Some(key.to_string()), value: Some(value.to_string()), partition: None }
        })
        .collect()
}

fn start_kafka(stream: &BankStream) -> LocalKafkaBroker {
    let broker = LocalKafkaBroker::start().unwrap_or_else(|e| panic!("{e}"));
    for (topic, partitions) in [("pg.transaction", 1), ("pg.bank.accounts", 3), ("pg.bank.transfers", 2)] {
        broker.create_topic(topic, partitions).unwrap_or_else(|e| panic!("{e}"));
    }
    broker.produce(&kafka_records(stream)).unwrap_or_else(|e| panic!("{e}"));
    broker
}

#[test]
fn serve_from_kafka_killed_at_random_moments_ends_equal_to_the_source() {
    let stream = bank_stream(TRANSFERS, 10);
    let broker = start_kafka(&stream);
    let dir = tempfile::tempdir().expect("data dir");
    let source = format!("kafka://{}/pg", broker.bootstrap());
    let seen = kill_rounds(dir.path(), &stream, 5, 4, |checkpoint| start_serve(dir.path(), &source, checkpoint).0);
    eprintln!("transfers recovered after each kill: {seen:?}");
    serve_to_the_end(dir.path(), &source, &stream, |port| {
        // Every partition is applied to its end (the status is published every 100 ms).
        let deadline = Instant::now() + Duration::from_secs(10);
        let lag = "SELECT sum(lag_messages), count(*) FROM retina.source_partitions";
        while psql(port, lag).as_deref() != Some("0|6") {
            assert!(Instant::now() < deadline, "lag per partition: {:?}", psql(port, "SELECT * FROM retina.source_partitions"));
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    drop(broker);
}

#[test]
fn ingest_from_kafka_killed_at_random_moments_ends_equal_to_the_source() {
    let stream = bank_stream(TRANSFERS, 11);
    let broker = start_kafka(&stream);
    let dir = tempfile::tempdir().expect("data dir");
    let source = format!("kafka://{}/pg", broker.bootstrap());
    let seen = kill_rounds(dir.path(), &stream, 4, 5, |checkpoint| spawn_ingest(dir.path(), &source, checkpoint));
    eprintln!("transfers recovered after each kill: {seen:?}");
    ingest_to_the_end(dir.path(), &source);
    check_equal_to_source(dir.path(), &stream);
    drop(broker);
}

/// Runs `retina ingest` to its end (a clean exit); panics on failure.
fn ingest_to_the_end(dir: &Path, source: &str) {
    let output = Command::new(RETINA)
        .args(["ingest", "--idle-exit-seconds", "1", "--data-dir"])
        .arg(dir)
        .arg(source)
        .output()
        .expect("run retina ingest");
    assert!(output.status.success(), "retina ingest {source}: {}", String::from_utf8_lossy(&output.stderr));
}

fn spawn_ingest(dir: &Path, source: &str, checkpoint_seconds: &str) -> Killed {
    Killed(
        Command::new(RETINA)
            .args(["ingest", "--idle-exit-seconds", "1", "--checkpoint-seconds", checkpoint_seconds, "--data-dir"])
            .arg(dir)
            .arg(source)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start retina ingest"),
    )
}

#[test]
fn ingest_from_nats_killed_at_random_moments_ends_equal_to_the_source() {
    let stream = bank_stream(TRANSFERS, 8);
    let nats = start_nats();
    publish(nats.port(), &stream.lines);
    let dir = tempfile::tempdir().expect("data dir");
    let source = format!("nats://{}/cdc", nats.address());
    let seen = kill_rounds(dir.path(), &stream, 4, 2, |checkpoint| spawn_ingest(dir.path(), &source, checkpoint));
    eprintln!("transfers recovered after each kill: {seen:?}");
    ingest_to_the_end(dir.path(), &source);
    check_equal_to_source(dir.path(), &stream);
    drop(nats);
}

#[test]
fn ingest_from_a_file_killed_at_random_moments_ends_equal_to_the_source() {
    let stream = bank_stream(TRANSFERS, 9);
    let input = tempfile::NamedTempFile::new().expect("input file");
    std::fs::write(input.path(), stream.lines.join("\n") + "\n").expect("write the stream");
    let dir = tempfile::tempdir().expect("data dir");
    let source = format!("file:{}", input.path().display());
    let seen = kill_rounds(dir.path(), &stream, 4, 3, |checkpoint| spawn_ingest(dir.path(), &source, checkpoint));
    eprintln!("transfers recovered after each kill: {seen:?}");
    ingest_to_the_end(dir.path(), &source);
    check_equal_to_source(dir.path(), &stream);
}

#[test]
fn a_checkpoint_period_that_is_not_positive_is_refused() {
    let dir = tempfile::tempdir().expect("data dir");
    for command in ["ingest", "serve"] {
        let mut args = vec![command, "--checkpoint-seconds", "0", "--data-dir", dir.path().to_str().expect("utf-8")];
        if command == "ingest" {
            args.push("file:/nonexistent.jsonl");
        }
        let output = Command::new(RETINA).args(&args).output().expect("run retina");
        assert!(!output.status.success(), "retina {command} accepted --checkpoint-seconds 0");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--checkpoint-seconds must be a positive number of seconds, got 0"), "retina {command}: {stderr}");
    }
}
