//! Real services for tests and benchmarks, started on loopback ports in temporary
//! directories and stopped on drop. A missing service is an error that says what to
//! install, never a skipped test.

mod flaky_proxy;

pub use flaky_proxy::FlakyHttpProxy;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A service that could not be started.
#[derive(Debug, thiserror::Error)]
#[error("{service}: {reason}")]
pub struct ServiceError {
    pub service: &'static str,
    pub reason: String,
}

impl ServiceError {
    fn new(service: &'static str, reason: String) -> Self {
        Self { service, reason }
    }
}

/// A free loopback port for `service` to listen on.
fn free_port(service: &'static str) -> Result<u16, ServiceError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .map_err(|e| ServiceError::new(service, format!("no free port: {e}")))
}

/// Waits until `service` accepts connections on `port` (the server is started and
/// owned by the caller, which stops it on drop if this fails).
fn wait_listening(service: &'static str, port: u16, limit: Duration) -> Result<(), ServiceError> {
    let deadline = Instant::now() + limit;
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(ServiceError::new(service, format!("did not listen on port {port} within {} s", limit.as_secs())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A started server process on a loopback port, killed and reaped on drop.
struct ServerProcess {
    child: Child,
    port: u16,
}

impl ServerProcess {
    /// Waits until the process listens on its port; a server that does not is
    /// killed (by drop) before the error returns.
    fn listening(child: Child, port: u16, service: &'static str, limit: Duration) -> Result<Self, ServiceError> {
        let process = Self { child, port };
        wait_listening(service, port, limit)?;
        Ok(process)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `nats-server -js` on a free loopback port with its store in a temporary
/// directory, stopped on drop: what the tests run against, and the NATS
/// benchmark when no server is given.
pub struct LocalNatsServer {
    process: ServerProcess,
    address: String,
    _dir: tempfile::TempDir,
}

impl LocalNatsServer {
    /// Starts the server and waits until it listens; fails saying what to install
    /// when `nats-server` is missing.
    pub fn start() -> Result<Self, ServiceError> {
        let dir = tempfile::tempdir().map_err(|e| ServiceError::new("nats-server", format!("temporary directory: {e}")))?;
        let port = free_port("nats-server")?;
        let child = Command::new("nats-server")
            .args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| ServiceError::new("nats-server", format!("cannot start it ({e}): install the Debian package nats-server (apt-get install -y nats-server)")))?;
        let process = ServerProcess::listening(child, port, "nats-server", Duration::from_secs(10))?;
        Ok(Self { process, address: format!("127.0.0.1:{port}"), _dir: dir })
    }

    /// `HOST:PORT`.
    pub fn address(&self) -> &str {
        &self.address
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }
}

/// An S3-compatible server (`moto_server`, from PyPI's `moto[server]`) on a free
/// loopback port, stopped on drop. It honours ranged GETs and conditional PUTs.
/// Found in the venv `scripts/test.sh` makes (`<target dir>/py-clients`), or on
/// `PATH`.
pub struct LocalS3Server {
    process: ServerProcess,
}

impl LocalS3Server {
    /// Starts the server and waits until it answers; fails saying what to install
    /// when `moto_server` is missing.
    pub fn start() -> Result<Self, ServiceError> {
        Self::start_with(false)
    }

    /// [`Self::start`] with authentication enforced from the first request (moto's
    /// `INITIAL_NO_AUTH_ACTION_COUNT=0`): unknown credentials get `403`. Buckets
    /// cannot be created through [`Self::create_bucket`] then.
    pub fn start_requiring_auth() -> Result<Self, ServiceError> {
        Self::start_with(true)
    }

    fn start_with(require_auth: bool) -> Result<Self, ServiceError> {
        let error = |reason: String| ServiceError::new("moto_server", reason);
        let port = free_port("moto_server")?;
        let venv = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.ancestors().nth(3).map(|target| target.join("py-clients/bin/moto_server")))
            .filter(|path| path.exists());
        let program = venv.map_or_else(|| "moto_server".into(), |path| path.into_os_string());
        let mut command = Command::new(&program);
        if require_auth {
            command.env("INITIAL_NO_AUTH_ACTION_COUNT", "0");
        }
        let child = command
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                error(format!(
                    "cannot start {} ({e}): run scripts/test.sh, which installs moto[server] into <target dir>/py-clients, or pip install 'moto[server]'",
                    program.to_string_lossy()
                ))
            })?;
        Ok(Self { process: ServerProcess::listening(child, port, "moto_server", Duration::from_secs(30))? })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.process.port)
    }

    pub fn port(&self) -> u16 {
        self.process.port
    }

    /// Creates a bucket (path-style, unsigned: moto accepts it).
    pub fn create_bucket(&self, bucket: &str) -> Result<(), ServiceError> {
        use std::io::{Read, Write};
        let error = |reason: String| ServiceError::new("moto_server", reason);
        let mut stream = TcpStream::connect(("127.0.0.1", self.process.port)).map_err(|e| error(format!("connect: {e}")))?;
        write!(stream, "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", self.process.port)
            .map_err(|e| error(format!("create bucket {bucket}: {e}")))?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(|e| error(format!("create bucket {bucket}: {e}")))?;
        if !response.starts_with("HTTP/1.1 200") {
            return Err(error(format!("create bucket {bucket}: {}", response.lines().next().unwrap_or_default())));
        }
        Ok(())
    }
}

/// A Kafka-protocol broker (`tansu`, from crates.io: `cargo install tansu --locked
/// --features dynostore`) on a free loopback port with in-memory storage, stopped on
/// drop. Records are produced by `kafka-python` (PyPI; in the venv `scripts/test.sh`
/// makes), whose default partitioner hashes keys as Kafka Connect's does.
pub struct LocalKafkaBroker {
    process: ServerProcess,
}

/// One record to produce: topic, key and value as raw bytes of text (`None` = a
/// null key or value, e.g. a tombstone), and a partition when the test places it.
#[derive(Clone, Debug)]
pub struct KafkaRecord {
    pub topic: String,
    pub key: Option<String>,
    pub value: Option<String>,
    pub partition: Option<i32>,
}

/// What produces the records: kafka-python, reading one JSON object per line.
const PRODUCER: &str = r#"
import json, sys
from kafka import KafkaProducer
producer = KafkaProducer(bootstrap_servers=sys.argv[1], acks="all", linger_ms=5, batch_size=262144, max_request_size=16777216)
count = 0
for line in sys.stdin:
    record = json.loads(line)
    encode = lambda text: None if text is None else text.encode()
    producer.send(record["topic"], key=encode(record["key"]), value=encode(record["value"]), partition=record.get("partition"))
    count += 1
producer.flush()
print(count)
"#;

/// What reads a consumer group's committed offsets: kafka-python's consumer, one
/// `topic partition offset` line per partition with a commit. (Its admin client's
/// `list_consumer_group_offsets` asks for all partitions at once, an OffsetFetch
/// tansu 0.6 answers in a form kafka-python cannot decode.)
const GROUP_OFFSETS: &str = r#"
import sys
from kafka import KafkaConsumer, TopicPartition
consumer = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], enable_auto_commit=False)
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
        let listener = format!("tcp://127.0.0.1:{port}");
        let child = Command::new(Self::tansu())
            .args(["broker", "--listener-url", &listener, "--advertised-listener-url", &listener, "--storage-engine", "memory://tansu/"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                ServiceError::new("tansu", format!("cannot start it ({e}): run scripts/test.sh, or cargo install tansu --locked --features dynostore"))
            })?;
        Ok(Self { process: ServerProcess::listening(child, port, "tansu", Duration::from_secs(20))? })
    }

    fn tansu() -> std::ffi::OsString {
        let cargo_bin = std::env::var_os("HOME").map(|home| std::path::Path::new(&home).join(".cargo/bin/tansu"));
        match cargo_bin.filter(|path| path.exists()) {
            Some(path) => path.into_os_string(),
            None => "tansu".into(),
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.process.port)
    }

    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), ServiceError> {
        let output = Command::new(Self::tansu())
            .args(["topic", "create", name, "--partitions", &partitions.to_string(), "--broker", &format!("tcp://{}", self.bootstrap())])
            .output()
            .map_err(|e| ServiceError::new("tansu", format!("topic create {name}: {e}")))?;
        if !output.status.success() {
            return Err(ServiceError::new("tansu", format!("topic create {name}: {}", String::from_utf8_lossy(&output.stderr))));
        }
        Ok(())
    }

    pub fn delete_topic(&self, name: &str) -> Result<(), ServiceError> {
        let output = Command::new(Self::tansu())
            .args(["topic", "delete", name, "--broker", &format!("tcp://{}", self.bootstrap())])
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
        use std::io::Write;
        let error = |reason: String| ServiceError::new("kafka-python", reason);
        let python = python_in_venv();
        let mut child = Command::new(&python)
            .args(["-c", PRODUCER, &self.bootstrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| error(format!("cannot run {} ({e}): run scripts/test.sh, which installs kafka-python into <target dir>/py-clients", python.to_string_lossy())))?;
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
}

impl LocalKafkaBroker {
    /// The offsets committed to consumer `group`, as kafka-python's admin client
    /// reads them (an independent client): (topic, partition) → offset.
    pub fn committed_offsets(&self, group: &str) -> Result<std::collections::BTreeMap<(String, i32), i64>, ServiceError> {
        let error = |reason: String| ServiceError::new("kafka-python", reason);
        let python = python_in_venv();
        let output = Command::new(&python)
            .args(["-c", GROUP_OFFSETS, &self.bootstrap(), group])
            .output()
            .map_err(|e| error(format!("cannot run {} ({e}): run scripts/test.sh, which installs kafka-python into <target dir>/py-clients", python.to_string_lossy())))?;
        if !output.status.success() {
            return Err(error(format!("reading committed offsets failed: {}", String::from_utf8_lossy(&output.stderr))));
        }
        let text = String::from_utf8_lossy(&output.stdout);
        text.lines()
            .map(|line| {
                let mut fields = line.split_whitespace();
                let parsed = (|| Some(((fields.next()?.to_string(), fields.next()?.parse().ok()?), fields.next()?.parse().ok()?)))();
                parsed.ok_or_else(|| error(format!("unexpected line {line:?}")))
            })
            .collect()
    }
}

/// The venv's Python (`<target dir>/py-clients/bin/python`), else `python3`.
fn python_in_venv() -> std::ffi::OsString {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|target| target.join("py-clients/bin/python")))
        .filter(|path| path.exists())
        .map_or_else(|| "python3".into(), |path| path.into_os_string())
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
