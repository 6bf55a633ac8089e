//! A Kafka-protocol broker for tests: `tansu` (plain TCP), optionally behind a TLS
//! front, with kafka-python as the independent producer and offset reader.

use std::process::{Command, Stdio};
use std::time::Duration;

use super::{free_port, ServerProcess, ServiceError};

/// A Kafka-protocol broker (`tansu`, from crates.io: `cargo install tansu --locked
/// --features dynostore,libsql`) on a free loopback port with in-memory storage, stopped on
/// drop. Records are produced by `kafka-python` (PyPI; in the venv `scripts/test.sh`
/// makes), whose default partitioner hashes keys as Kafka Connect's does.
pub struct LocalKafkaBroker {
    process: ServerProcess,
    tls: Option<TlsFront>,
    sasl: Option<SaslUser>,
    /// The folder of its SQLite storage, when it has one (dropped after the process).
    _storage: Option<tempfile::TempDir>,
}

/// The user a SASL broker knows (tansu's in-memory and object-store storage keep no
/// SCRAM credentials: a SASL broker has SQLite storage).
struct SaslUser {
    mechanism: &'static str,
    username: String,
    password: String,
}

/// TLS in front of the broker (tansu 0.6 takes `--cert`/`--key` but serves plain
/// TCP): a Python asyncio proxy terminating TLS with a certificate for 127.0.0.1 made
/// by `openssl`, on the port the broker advertises, so every client (metadata,
/// fetches, group commits) reaches the broker through it.
struct TlsFront {
    process: ServerProcess,
    /// Holds `ca.pem` (the CA clients trust), the broker's `cert.pem` and keys.
    dir: tempfile::TempDir,
}

/// Command-line arguments: literal words, then paths (and words) as `OsString`s.
fn args(words: &[&str], rest: &[std::path::PathBuf]) -> Vec<std::ffi::OsString> {
    words.iter().map(std::ffi::OsString::from).chain(rest.iter().map(|p| p.clone().into_os_string())).collect()
}

/// The TLS proxy: `LISTEN_PORT TARGET_PORT CERT KEY`.
const TLS_PROXY: &str = r#"
import asyncio, ssl, sys
listen, target, cert, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError, ssl.SSLError):
        pass
    finally:
        writer.close()
async def handle(client_reader, client_writer):
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        client_writer.close()
        return
    await asyncio.gather(pipe(client_reader, upstream_writer), pipe(upstream_reader, client_writer))
async def main():
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = await asyncio.start_server(handle, "127.0.0.1", listen, ssl=context)
    async with server:
        await server.serve_forever()
asyncio.run(main())
"#;

/// One record to produce: topic, key and value as raw bytes of text (`None` = a
/// null key or value, e.g. a tombstone), and a partition when the test places it.
#[derive(Clone, Debug)]
pub struct KafkaRecord {
    pub topic: String,
    pub key: Option<String>,
    pub value: Option<String>,
    pub partition: Option<i32>,
}

/// kafka-python's connection settings: TLS trusting `KAFKA_TLS_CA` when it is set,
/// SASL with `KAFKA_SASL_MECHANISM`/`_USERNAME`/`_PASSWORD` when those are.
const CONNECTION: &str = r#"
import os
connection = {"security_protocol": "SSL", "ssl_cafile": os.environ["KAFKA_TLS_CA"]} if os.environ.get("KAFKA_TLS_CA") else {}
if os.environ.get("KAFKA_SASL_MECHANISM"):
    connection = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": os.environ["KAFKA_SASL_MECHANISM"],
                  "sasl_plain_username": os.environ["KAFKA_SASL_USERNAME"], "sasl_plain_password": os.environ["KAFKA_SASL_PASSWORD"]}
"#;

/// What produces the records: kafka-python, reading one JSON object per line.
const PRODUCER: &str = r#"
import json, sys
from kafka import KafkaProducer
producer = KafkaProducer(bootstrap_servers=sys.argv[1], acks="all", linger_ms=5, batch_size=262144, max_request_size=16777216, **connection)
timestamp_ms = int(os.environ["KAFKA_TIMESTAMP_MS"]) if os.environ.get("KAFKA_TIMESTAMP_MS") else None
count = 0
for line in sys.stdin:
    record = json.loads(line)
    encode = lambda text: None if text is None else text.encode()
    producer.send(record["topic"], key=encode(record["key"]), value=encode(record["value"]), partition=record.get("partition"), timestamp_ms=timestamp_ms)
    count += 1
producer.flush()
print(count)
"#;

/// What reads where each partition of a topic now starts (its earliest offset).
const EARLIEST_OFFSETS: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], **connection)
partitions = [TopicPartition(sys.argv[2], p) for p in sorted(consumer.partitions_for_topic(sys.argv[2]) or [])]
for partition, offset in sorted(consumer.beginning_offsets(partitions).items()):
    print(partition.partition, offset)
consumer.close()
"#;

/// What reads a consumer group's committed offsets: kafka-python's consumer, one
/// `topic partition offset` line per partition with a commit. (Its admin client's
/// `list_consumer_group_offsets` asks for all partitions at once, an OffsetFetch
/// tansu 0.6 answers in a form kafka-python cannot decode.)
const GROUP_OFFSETS: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], enable_auto_commit=False, **connection)
for topic in sorted(consumer.topics()):
    for partition in sorted(consumer.partitions_for_topic(topic) or []):
        offset = consumer.committed(TopicPartition(topic, partition))
        if offset is not None:
            print(topic, partition, offset)
consumer.close(autocommit=False)
"#;

impl LocalKafkaBroker {
    /// Starts the broker and waits until it listens; fails saying what to install
    /// when `tansu` is missing.
    pub fn start() -> Result<Self, ServiceError> {
        let port = free_port("tansu")?;
        Ok(Self { process: Self::start_tansu(port, port, "memory://tansu/", false, None)?, tls: None, sasl: None, _storage: None })
    }

    /// A broker on tansu's SQLite storage whose maintenance runs every `maintenance`:
    /// it then deletes the records of a topic created with `cleanup.policy=delete`
    /// whose timestamp is older than the topic's `retention.ms` (see
    /// [`Self::create_topic_with_config`], [`Self::produce_at`]), as Kafka's retention
    /// does. (Unlike Kafka, which drops whole segments from the log's start, tansu
    /// deletes record by record, so a test keeps timestamps in offset order.)
    pub fn start_with_retention(maintenance: Duration) -> Result<Self, ServiceError> {
        let error = |reason: String| ServiceError::new("tansu", reason);
        let storage = tempfile::tempdir().map_err(|e| error(format!("temp dir: {e}")))?;
        let engine = format!("sqlite://tansu.db?maintenance_interval={}ms", maintenance.as_millis());
        let port = free_port("tansu")?;
        let process = Self::start_tansu(port, port, &engine, false, Some(storage.path()))
            .map_err(|e| error(format!("{e} (retention needs tansu's SQLite storage: cargo install tansu --locked --features dynostore,libsql)")))?;
        Ok(Self { process, tls: None, sasl: None, _storage: Some(storage) })
    }

    /// A broker that requires SASL SCRAM (`mechanism` `SCRAM-SHA-256` or
    /// `SCRAM-SHA-512`) from every client, knowing one user. tansu 0.6 creates users
    /// and topics only through an unauthenticated connection, so it first runs
    /// without authentication to make the user and `topics` (name, partitions),
    /// then again, on the same storage, with it.
    pub fn start_sasl(mechanism: &'static str, username: &str, password: &str, topics: &[(&str, u32)]) -> Result<Self, ServiceError> {
        let error = |reason: String| ServiceError::new("tansu", reason);
        let storage = tempfile::tempdir().map_err(|e| error(format!("temp dir: {e}")))?;
        // tansu reads `sqlite://` paths relative to its working directory.
        let engine = "sqlite://tansu.db";
        let tansu_mechanism = match mechanism {
            "SCRAM-SHA-256" => "scram256",
            "SCRAM-SHA-512" => "scram512",
            other => return Err(error(format!("no SASL mechanism {other} in tansu (SCRAM-SHA-256, SCRAM-SHA-512)"))),
        };
        let port = free_port("tansu")?;
        let needs_sqlite = |e: ServiceError| error(format!("{e} (SASL users need tansu's SQLite storage: cargo install tansu --locked --features dynostore,libsql)"));
        let setup =
            Self { process: Self::start_tansu(port, port, engine, false, Some(storage.path())).map_err(needs_sqlite)?, tls: None, sasl: None, _storage: None };
        let output = Command::new(Self::tansu())
            .args(["user", "create", username, password, "--mechanism", tansu_mechanism, "--broker", &setup.admin_address()])
            .output()
            .map_err(|e| error(format!("user create: {e}")))?;
        if !output.status.success() {
            return Err(error(format!(
                "user create {username}: {} (a tansu without SQLite storage keeps no users: cargo install tansu --locked --features dynostore,libsql)",
                String::from_utf8_lossy(&output.stderr)
            )));
        }
        for (topic, partitions) in topics {
            setup.create_topic(topic, *partitions)?;
        }
        drop(setup);
        let sasl = SaslUser { mechanism, username: username.to_string(), password: password.to_string() };
        let process = Self::start_tansu(port, port, engine, true, Some(storage.path()))?;
        Ok(Self { process, tls: None, sasl: Some(sasl), _storage: Some(storage) })
    }

    /// [`Self::start`] reachable only over TLS ([`Self::bootstrap`] is the TLS
    /// port); clients trust [`Self::tls_ca`].
    pub fn start_tls() -> Result<Self, ServiceError> {
        let error = |reason: String| ServiceError::new("openssl", reason);
        let (port, front_port) = (free_port("tansu")?, free_port("tls proxy")?);
        let dir = tempfile::tempdir().map_err(|e| error(format!("temp dir: {e}")))?;
        // A CA, and the broker's certificate for 127.0.0.1 signed by it (webpki takes
        // no CA certificate as a server's own).
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
            .map_err(|e| error(format!("leaf.ext: {e}")))?;
        let steps: [Vec<std::ffi::OsString>; 3] = [
            args(&["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=retina-test-ca", "-keyout"], &[path("ca.key"), "-out".into(), path("ca.pem")]),
            args(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout"], &[path("key.pem"), "-out".into(), path("leaf.csr")]),
            args(
                &["x509", "-req", "-days", "1", "-CAcreateserial", "-in"],
                &[path("leaf.csr"), "-CA".into(), path("ca.pem"), "-CAkey".into(), path("ca.key"), "-extfile".into(), path("leaf.ext"), "-out".into(), path("cert.pem")],
            ),
        ];
        for step in steps {
            let output = Command::new("openssl").args(&step).output().map_err(|e| error(format!("cannot run it ({e}): apt-get install openssl")))?;
            if !output.status.success() {
                return Err(error(format!("making the certificates failed: {}", String::from_utf8_lossy(&output.stderr))));
            }
        }
        let (cert, key) = (path("cert.pem"), path("key.pem"));
        let process = Self::start_tansu(port, front_port, "memory://tansu/", false, None)?;
        let proxy = Command::new(crate::venv_python())
            .args(["-c", TLS_PROXY, &front_port.to_string(), &port.to_string()])
            .arg(&cert)
            .arg(&key)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| ServiceError::new("python3", format!("cannot start the TLS proxy: {e}")))?;
        let front = ServerProcess::listening(proxy, front_port, "tls proxy", Duration::from_secs(20))?;
        Ok(Self { process, tls: Some(TlsFront { process: front, dir }), sasl: None, _storage: None })
    }

    /// tansu listening on `port` with `storage`, telling clients to connect to
    /// `advertised`; requiring SASL when `authentication`; run in `dir` when given.
    fn start_tansu(port: u16, advertised: u16, storage: &str, authentication: bool, dir: Option<&std::path::Path>) -> Result<ServerProcess, ServiceError> {
        let (listener, advertised) = (format!("tcp://127.0.0.1:{port}"), format!("tcp://127.0.0.1:{advertised}"));
        let mut command = Command::new(Self::tansu());
        command.args(["broker", "--listener-url", &listener, "--advertised-listener-url", &advertised, "--storage-engine", storage]);
        if authentication {
            command.arg("--authentication");
        }
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let child = command
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                ServiceError::new("tansu", format!("cannot start it ({e}): run scripts/test.sh, or cargo install tansu --locked --features dynostore,libsql"))
            })?;
        ServerProcess::listening(child, port, "tansu", Duration::from_secs(20))
    }

    /// The certificate a TLS broker's clients trust (`None` without TLS).
    pub fn tls_ca(&self) -> Option<std::path::PathBuf> {
        self.tls.as_ref().map(|front| front.dir.path().join("ca.pem"))
    }

    /// kafka-python with this broker's connection settings.
    fn python(&self, script: &str) -> Command {
        let mut command = Command::new(crate::venv_python());
        command.args(["-c", &format!("{CONNECTION}{script}"), &self.bootstrap()]);
        if let Some(ca) = self.tls_ca() {
            command.env("KAFKA_TLS_CA", ca);
        }
        if let Some(user) = &self.sasl {
            command.env("KAFKA_SASL_MECHANISM", user.mechanism).env("KAFKA_SASL_USERNAME", &user.username).env("KAFKA_SASL_PASSWORD", &user.password);
        }
        command
    }

    fn tansu() -> std::ffi::OsString {
        let cargo_bin = std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".cargo/bin/tansu"));
        match cargo_bin.filter(|path| path.exists()) {
            Some(path) => path.into_os_string(),
            None => "tansu".into(),
        }
    }

    /// `127.0.0.1:PORT` where clients connect (the TLS port with TLS).
    /// The broker process's id, for reading what CPU it used (`/proc/{pid}/stat`).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.tls.as_ref().map_or(self.process.port, |front| front.process.port))
    }

    /// The broker's own plain-TCP address (its admin CLI connects there).
    fn admin_address(&self) -> String {
        format!("tcp://127.0.0.1:{}", self.process.port)
    }

    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), ServiceError> {
        self.create_topic_with_config(name, partitions, &[])
    }

    /// Creates topic `name` with topic configs (`("retention.ms", "60000")`, …).
    pub fn create_topic_with_config(&self, name: &str, partitions: u32, config: &[(&str, &str)]) -> Result<(), ServiceError> {
        let mut command = Command::new(Self::tansu());
        command.args(["topic", "create", name, "--partitions", &partitions.to_string(), "--broker", &self.admin_address()]);
        for (key, value) in config {
            command.arg("--config").arg(format!("{key}={value}"));
        }
        let output = command
            .output()
            .map_err(|e| ServiceError::new("tansu", format!("topic create {name}: {e}")))?;
        if !output.status.success() {
            return Err(ServiceError::new("tansu", format!("topic create {name}: {}", String::from_utf8_lossy(&output.stderr))));
        }
        Ok(())
    }

    pub fn delete_topic(&self, name: &str) -> Result<(), ServiceError> {
        let output = Command::new(Self::tansu())
            .args(["topic", "delete", name, "--broker", &self.admin_address()])
            .output()
            .map_err(|e| ServiceError::new("tansu", format!("topic delete {name}: {e}")))?;
        if !output.status.success() {
            return Err(ServiceError::new("tansu", format!("topic delete {name}: {}", String::from_utf8_lossy(&output.stderr))));
        }
        Ok(())
    }

    /// Produces `records` in order with kafka-python (acks=all), waiting until all
    /// are stored.
    pub fn produce(&self, records: &[KafkaRecord]) -> Result<(), ServiceError> {
        self.produce_with(records, None)
    }

    /// [`Self::produce`] with every record's timestamp set to `timestamp_ms` (ms
    /// since the epoch) instead of the time it is sent.
    pub fn produce_at(&self, records: &[KafkaRecord], timestamp_ms: i64) -> Result<(), ServiceError> {
        self.produce_with(records, Some(timestamp_ms))
    }

    fn produce_with(&self, records: &[KafkaRecord], timestamp_ms: Option<i64>) -> Result<(), ServiceError> {
        use std::io::Write;
        let error = |reason: String| ServiceError::new("kafka-python", reason);
        let mut command = self.python(PRODUCER);
        if let Some(timestamp_ms) = timestamp_ms {
            command.env("KAFKA_TIMESTAMP_MS", timestamp_ms.to_string());
        }
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| error(format!("cannot run Python ({e}): run scripts/test.sh, which installs kafka-python into <target dir>/py-clients")))?;
        let mut stdin = child.stdin.take().ok_or_else(|| error("no stdin".into()))?;
        let text = records.iter().map(record_json).collect::<Vec<_>>().join("\n") + "\n";
        let writer = std::thread::spawn(move || stdin.write_all(text.as_bytes()));
        let output = child.wait_with_output().map_err(|e| error(format!("producer: {e}")))?;
        let _ = writer.join();
        if !output.status.success() {
            return Err(error(format!("producer failed: {}", String::from_utf8_lossy(&output.stderr))));
        }
        Ok(())
    }

    /// Where each partition of `topic` now starts, as kafka-python reads it:
    /// partition → earliest offset.
    pub fn earliest_offsets(&self, topic: &str) -> Result<std::collections::BTreeMap<i32, i64>, ServiceError> {
        self.offsets_script(EARLIEST_OFFSETS, topic, "reading earliest offsets", |fields| Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?)))
    }

    /// The offsets committed to consumer `group`, as kafka-python's admin client
    /// reads them (an independent client): (topic, partition) → offset.
    pub fn committed_offsets(&self, group: &str) -> Result<std::collections::BTreeMap<(String, i32), i64>, ServiceError> {
        self.offsets_script(GROUP_OFFSETS, group, "reading committed offsets", |fields| {
            Some(((fields.next()?.to_string(), fields.next()?.parse().ok()?), fields.next()?.parse().ok()?))
        })
    }

    /// Runs a kafka-python `script` with `argument` and parses each line it prints.
    fn offsets_script<K: Ord>(
        &self,
        script: &str,
        argument: &str,
        what: &str,
        parse: impl Fn(&mut std::str::SplitWhitespace<'_>) -> Option<(K, i64)>,
    ) -> Result<std::collections::BTreeMap<K, i64>, ServiceError> {
        let error = |reason: String| ServiceError::new("kafka-python", reason);
        let output = self
            .python(script)
            .arg(argument)
            .output()
            .map_err(|e| error(format!("cannot run Python ({e}): run scripts/test.sh, which installs kafka-python into <target dir>/py-clients")))?;
        if !output.status.success() {
            return Err(error(format!("{what} failed: {}", String::from_utf8_lossy(&output.stderr))));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines().map(|line| parse(&mut line.split_whitespace()).ok_or_else(|| error(format!("unexpected line {line:?}")))).collect()
    }
}

/// A record as the producer script reads it (JSON strings escaped by hand: this
/// crate has no JSON dependency).
fn record_json(record: &KafkaRecord) -> String {
    fn text(value: &Option<String>) -> String {
        match value {
            None => "null".into(),
            Some(text) => {
                let mut out = String::with_capacity(text.len() + 2);
                out.push('"');
                for c in text.chars() {
                    match c {
                        '"' => out.push_str("\\\""),
                        '\\' => out.push_str("\\\\"),
                        '\n' => out.push_str("\\n"),
                        '\r' => out.push_str("\\r"),
                        '\t' => out.push_str("\\t"),
                        c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                        c => out.push(c),
                    }
                }
                out.push('"');
                out
            }
        }
    }
    let partition = record.partition.map_or_else(|| "null".to_string(), |p| p.to_string());
    format!(
        r#"{{"topic":{},"key":{},"value":{},"partition":{partition}}}"#,
        text(&Some(record.topic.clone())),
        text(&record.key),
        text(&record.value)
    )
}
