//! Apache Kafka for tests: a real Apache Kafka 4.4 broker (KRaft, one node that is
//! both broker and controller) run from the jars `scripts/services/resolve.sh`
//! fetches with Maven, with kafka-python as the independent producer, admin client
//! and offset reader.

use std::ffi::OsString;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{ServerProcess, ServiceError};

/// How long a broker may take from the JVM's start until it serves requests
/// (~4 s on two idle cores; more while a build runs beside it).
const START_LIMIT: Duration = Duration::from_secs(60);

/// The cluster id every test broker is formatted with (what `StorageTool
/// random-uuid` prints: 16 bytes, here `retina-test-kafk`, in URL-safe base64
/// without padding). Each broker is a cluster of its own in its own directory.
const CLUSTER_ID: &str = "cmV0aW5hLXRlc3Qta2Fmaw";

/// An Apache Kafka 4.4 broker on free loopback ports, in KRaft mode as a single node
/// (broker and controller in one JVM), with its log directory in a temporary
/// directory; killed and removed on drop. It has three listeners on 127.0.0.1:
/// `CLIENT` ([`Self::bootstrap`]: plain TCP, TLS or SASL), `INTERNAL` (plain TCP,
/// between the broker and itself, and where this type creates and deletes topics)
/// and `CONTROLLER`. Topics are created on first use too (`auto.create.topics.enable`,
/// one partition). Records are produced by `kafka-python` (PyPI; in the venv
/// `scripts/test.sh` makes), whose default partitioner hashes keys as Kafka
/// Connect's does.
///
/// Needs a Java 17+ runtime (`$JAVA_HOME/bin/java`, else `java` on `PATH`) and
/// Kafka's jars in `${RETINA_JARS:-$HOME/.cache/retina-jars}/kafka`
/// (`scripts/services/resolve.sh`). Starting one takes a few seconds: a JVM formats
/// its log directory, then another runs the broker.
pub struct LocalKafkaBroker {
    /// The broker's JVM; `port` is the `CLIENT` listener's. Declared first: it is
    /// killed before its directory is removed.
    process: ServerProcess,
    /// The plain-TCP `INTERNAL` listener's port.
    internal_port: u16,
    /// The `CLIENT` listener speaks TLS, with `tls/ca.pem` in `dir` as its CA.
    tls: bool,
    sasl: Option<SaslUser>,
    /// `server.properties`, `log4j2.properties`, `kafka.log` (the JVM's output),
    /// `data/` (the log directory) and, with TLS, `tls/`.
    dir: tempfile::TempDir,
}

/// The user a SASL broker knows.
struct SaslUser {
    mechanism: &'static str,
    username: String,
    password: String,
}

/// What the `CLIENT` listener speaks.
enum ClientListener {
    Plain,
    /// TLS with a certificate for 127.0.0.1, in a PEM key store.
    Tls,
    /// SASL SCRAM over plain TCP, knowing one user.
    Sasl(SaslUser),
}

/// Command-line arguments: literal words, then paths (and words) as `OsString`s.
fn args(words: &[&str], rest: &[PathBuf]) -> Vec<OsString> {
    words.iter().map(OsString::from).chain(rest.iter().map(|p| p.clone().into_os_string())).collect()
}

/// The folder holding Apache Kafka's jars: `$RETINA_JARS/kafka`, else
/// `$HOME/.cache/retina-jars/kafka`, where `scripts/services/resolve.sh` puts them.
fn kafka_jars() -> Result<PathBuf, ServiceError> {
    let root = std::env::var_os("RETINA_JARS")
        .filter(|root| !root.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache/retina-jars")));
    let Some(jars) = root.map(|root| root.join("kafka")) else {
        return Err(ServiceError::new(
            "kafka",
            "neither RETINA_JARS nor HOME is set: run scripts/services/resolve.sh (scripts/test.sh runs it) to fetch Apache Kafka's jars with Maven".into(),
        ));
    };
    let has_kafka = std::fs::read_dir(&jars)
        .map(|entries| entries.flatten().any(|entry| entry.file_name().to_string_lossy().starts_with("kafka_2.13-")))
        .unwrap_or(false);
    if !has_kafka {
        return Err(ServiceError::new(
            "kafka",
            format!(
                "no Apache Kafka jars (kafka_2.13-*.jar) in {}: run scripts/services/resolve.sh (scripts/test.sh runs it) to fetch Apache Kafka's jars with Maven",
                jars.display()
            ),
        ));
    }
    Ok(jars)
}

/// `$JAVA_HOME/bin/java` when `JAVA_HOME` is set, else `java`.
fn java() -> OsString {
    match std::env::var_os("JAVA_HOME").filter(|home| !home.is_empty()) {
        Some(home) => Path::new(&home).join("bin/java").into_os_string(),
        None => "java".into(),
    }
}

/// `java` with a heap of `heap`, Kafka's jars on the class path and its logging
/// configured by `dir/log4j2.properties`.
fn java_command(jars: &Path, dir: &Path, heap: &str) -> Command {
    let mut class_path = jars.as_os_str().to_os_string();
    class_path.push("/*");
    let mut log4j = OsString::from("-Dlog4j2.configurationFile=");
    log4j.push(dir.join("log4j2.properties"));
    let mut logs_dir = OsString::from("-Dkafka.logs.dir=");
    logs_dir.push(dir);
    let mut command = Command::new(java());
    command.arg(heap).arg("-Djava.awt.headless=true").arg(log4j).arg(logs_dir).arg("-cp").arg(class_path);
    command
}

/// Three distinct free loopback ports (held together while they are picked).
fn free_ports() -> Result<[u16; 3], ServiceError> {
    let bind = || {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| Ok((listener.local_addr()?.port(), listener)))
            .map_err(|e| ServiceError::new("kafka", format!("no free port: {e}")))
    };
    let (a, _held_a) = bind()?;
    let (b, _held_b) = bind()?;
    let (c, _held_c) = bind()?;
    Ok([a, b, c])
}

/// Whether a Kafka broker answers an ApiVersions request (version 0) on the plain-TCP
/// `port`: it does once it serves requests.
fn answers_api_versions(port: u16) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    if stream.set_read_timeout(Some(Duration::from_secs(1))).is_err() {
        return false;
    }
    let client_id = b"retina-test";
    let mut request = Vec::new();
    request.extend_from_slice(&18i16.to_be_bytes()); // ApiVersions
    request.extend_from_slice(&0i16.to_be_bytes()); // version 0
    request.extend_from_slice(&1i32.to_be_bytes()); // correlation id
    request.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    request.extend_from_slice(client_id);
    let mut framed = (request.len() as i32).to_be_bytes().to_vec();
    framed.extend_from_slice(&request);
    // The answer starts with its size and the request's correlation id.
    let mut answer = [0u8; 8];
    stream.write_all(&framed).is_ok() && stream.read_exact(&mut answer).is_ok() && answer[4..] == 1i32.to_be_bytes()[..]
}

/// The last `lines` lines of the text file at `path` (empty when it cannot be read).
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read(path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Kafka's logging: warnings and errors, to the JVM's standard output.
const LOG4J2: &str = "status = warn
appender.out.type = Console
appender.out.name = out
appender.out.target = SYSTEM_OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = out
";

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
/// `topic partition offset` line per partition with a commit (internal topics such
/// as `__consumer_offsets` left out).
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

/// What creates a topic (`NAME PARTITIONS [KEY=VALUE…]`, replication factor 1) with
/// kafka-python's admin client, then waits until every partition has its leader, so
/// that the next client finds the topic ready.
const CREATE_TOPIC: &str = r#"
import sys, time
from kafka.admin import KafkaAdminClient, NewTopic
name, partitions = sys.argv[2], int(sys.argv[3])
config = dict(pair.split("=", 1) for pair in sys.argv[4:])
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1])
admin.create_topics([NewTopic(name, partitions, 1, topic_configs=config)])
deadline = time.monotonic() + 30
while True:
    described = admin.describe_topics([name])
    if any(t["topic"] == name and t["error_code"] == 0 and len(t["partitions"]) == partitions and all(p["leader"] >= 0 for p in t["partitions"]) for t in described):
        break
    if time.monotonic() > deadline:
        sys.exit(f"topic {name} has not got a leader for each of its {partitions} partitions within 30 s: {described}")
    time.sleep(0.05)
admin.close()
"#;

/// What deletes a topic with kafka-python's admin client, then waits until the
/// broker no longer lists it.
const DELETE_TOPIC: &str = r#"
import sys, time
from kafka.admin import KafkaAdminClient
name = sys.argv[2]
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1])
admin.delete_topics([name])
deadline = time.monotonic() + 30
while name in admin.list_topics():
    if time.monotonic() > deadline:
        sys.exit(f"topic {name} is still listed 30 s after its deletion")
    time.sleep(0.05)
admin.close()
"#;

impl LocalKafkaBroker {
    /// Starts the broker (plain TCP) and waits until it serves requests; fails saying
    /// what to install or run when Java or Kafka's jars are missing.
    pub fn start() -> Result<Self, ServiceError> {
        Self::launch(ClientListener::Plain, None)
    }

    /// A broker whose retention check runs every `maintenance`: Kafka then deletes,
    /// in a topic created with `cleanup.policy=delete` and a `retention.ms` (see
    /// [`Self::create_topic_with_config`]), the records whose timestamp (see
    /// [`Self::produce_at`]) is older than `retention.ms`.
    ///
    /// Kafka deletes whole log segments from the log's start, never single records:
    /// a segment goes once its newest timestamp is past retention, and not while an
    /// earlier segment stays. So that records produced at different times can go at
    /// different times, this broker rolls a new segment (`log.roll.ms` =
    /// `maintenance`) when a record batch's timestamp lies more than `maintenance`
    /// after the first timestamp of the segment it would join; records whose
    /// timestamps are closer together than that go together, and a record older than
    /// retention stays as long as a newer one in its segment or before it in the log
    /// does (a topic's own `segment.ms` overrides `log.roll.ms`). It also takes timestamps any distance in the
    /// future (Kafka's default refuses those more than an hour ahead), and runs its
    /// first retention check at once instead of 30 s after starting.
    pub fn start_with_retention(maintenance: Duration) -> Result<Self, ServiceError> {
        Self::launch(ClientListener::Plain, Some(maintenance))
    }

    /// A broker that requires SASL SCRAM (`mechanism` `SCRAM-SHA-256` or
    /// `SCRAM-SHA-512`) from every client on [`Self::bootstrap`], knowing one user
    /// (made when its log directory is formatted), with `topics` (name, partitions)
    /// created. The user's name and password may not hold `,` or `"` (Kafka's
    /// format tool reads them from a comma-separated list).
    pub fn start_sasl(mechanism: &'static str, username: &str, password: &str, topics: &[(&str, u32)]) -> Result<Self, ServiceError> {
        if !matches!(mechanism, "SCRAM-SHA-256" | "SCRAM-SHA-512") {
            return Err(ServiceError::new("kafka", format!("no SASL mechanism {mechanism} here (SCRAM-SHA-256, SCRAM-SHA-512)")));
        }
        if [username, password].iter().any(|text| text.contains([',', '"'])) {
            return Err(ServiceError::new("kafka", format!("the SASL user {username:?} or its password holds `,` or `\"`, which Kafka's format tool cannot take")));
        }
        let user = SaslUser { mechanism, username: username.to_string(), password: password.to_string() };
        let broker = Self::launch(ClientListener::Sasl(user), None)?;
        for (topic, partitions) in topics {
            broker.create_topic(topic, *partitions)?;
        }
        Ok(broker)
    }

    /// [`Self::start`] reachable only over TLS on [`Self::bootstrap`] (a certificate
    /// for IP 127.0.0.1 signed by a CA made for it); clients trust [`Self::tls_ca`].
    pub fn start_tls() -> Result<Self, ServiceError> {
        Self::launch(ClientListener::Tls, None)
    }

    /// Formats a log directory for a broker with this `listener` (and `retention`
    /// check interval), starts the broker and waits until it serves requests.
    fn launch(listener: ClientListener, retention: Option<Duration>) -> Result<Self, ServiceError> {
        let error = |reason: String| ServiceError::new("kafka", reason);
        let jars = kafka_jars()?;
        let dir = tempfile::tempdir().map_err(|e| error(format!("temp dir: {e}")))?;
        let [client_port, internal_port, controller_port] = free_ports()?;
        let write = |name: &str, text: &str| std::fs::write(dir.path().join(name), text).map_err(|e| error(format!("{name}: {e}")));
        let (protocol, mut extra) = match &listener {
            ClientListener::Plain => ("PLAINTEXT", String::new()),
            ClientListener::Tls => {
                let key_store = make_certificates(&dir.path().join("tls"))?;
                ("SSL", format!("ssl.keystore.type=PEM\nssl.keystore.location={}\n", key_store.display()))
            }
            ClientListener::Sasl(user) => (
                "SASL_PLAINTEXT",
                format!(
                    "sasl.enabled.mechanisms={mechanism}\n\
                     listener.name.client.{lower}.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n",
                    mechanism = user.mechanism,
                    lower = user.mechanism.to_lowercase()
                ),
            ),
        };
        if let Some(maintenance) = retention {
            let ms = maintenance.as_millis().max(1);
            extra.push_str(&format!(
                "log.retention.check.interval.ms={ms}\n\
                 log.initial.task.delay.ms=0\n\
                 log.roll.ms={ms}\n\
                 log.message.timestamp.after.max.ms=9223372036854775807\n"
            ));
        }
        let (client, internal, controller) =
            (format!("127.0.0.1:{client_port}"), format!("127.0.0.1:{internal_port}"), format!("127.0.0.1:{controller_port}"));
        let properties = format!(
            "process.roles=broker,controller\n\
             node.id=1\n\
             controller.quorum.bootstrap.servers={controller}\n\
             listeners=CLIENT://{client},INTERNAL://{internal},CONTROLLER://{controller}\n\
             advertised.listeners=CLIENT://{client},INTERNAL://{internal},CONTROLLER://{controller}\n\
             listener.security.protocol.map=CLIENT:{protocol},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=INTERNAL\n\
             log.dirs={data}\n\
             auto.create.topics.enable=true\n\
             num.partitions=1\n\
             default.replication.factor=1\n\
             offsets.topic.replication.factor=1\n\
             offsets.topic.num.partitions=1\n\
             transaction.state.log.replication.factor=1\n\
             transaction.state.log.min.isr=1\n\
             share.coordinator.state.topic.replication.factor=1\n\
             share.coordinator.state.topic.min.isr=1\n\
             group.initial.rebalance.delay.ms=0\n\
             {extra}",
            data = dir.path().join("data").display()
        );
        write("server.properties", &properties)?;
        write("log4j2.properties", LOG4J2)?;
        let server_properties = dir.path().join("server.properties");
        let cannot_run = |e: std::io::Error| {
            error(format!(
                "cannot run {} ({e}): install a Java 17+ runtime (apt-get install -y openjdk-17-jre-headless) or set JAVA_HOME",
                java().to_string_lossy()
            ))
        };

        // A short-lived JVM: compile little, collect simply.
        let mut format_tool = java_command(&jars, dir.path(), "-Xmx256m");
        format_tool.args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "kafka.tools.StorageTool", "format", "-t", CLUSTER_ID, "-c"]);
        format_tool.arg(&server_properties).arg("--standalone");
        let sasl = match listener {
            ClientListener::Sasl(user) => {
                format_tool.arg("--add-scram").arg(format!("{}=[name=\"{}\",password=\"{}\"]", user.mechanism, user.username, user.password));
                Some(user)
            }
            ClientListener::Plain | ClientListener::Tls => None,
        };
        let output = format_tool.output().map_err(cannot_run)?;
        if !output.status.success() {
            return Err(error(format!(
                "formatting its log directory failed ({}): {}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            )));
        }

        let log_path = dir.path().join("kafka.log");
        let log = std::fs::File::create(&log_path).map_err(|e| error(format!("kafka.log: {e}")))?;
        let log_too = log.try_clone().map_err(|e| error(format!("kafka.log: {e}")))?;
        let started = Instant::now();
        let child = java_command(&jars, dir.path(), "-Xmx512m")
            .arg("kafka.Kafka")
            .arg(&server_properties)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_too)
            .spawn()
            .map_err(cannot_run)?;
        // Killed (by drop) when it does not come up.
        let mut process = ServerProcess { child, port: client_port };
        let failed = |what: String| error(format!("{what}; the end of its output ({}):\n{}", log_path.display(), tail(&log_path, 30)));
        loop {
            if let Ok(Some(status)) = process.child.try_wait() {
                return Err(failed(format!("the broker exited ({status}) before serving requests")));
            }
            // Its ports may accept connections a little before it serves requests.
            if TcpStream::connect(("127.0.0.1", client_port)).is_ok() && answers_api_versions(internal_port) {
                break;
            }
            if started.elapsed() > START_LIMIT {
                return Err(failed(format!("the broker did not serve requests on port {internal_port} within {} s", START_LIMIT.as_secs())));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let tls = matches!(protocol, "SSL");
        Ok(Self { process, internal_port, tls, sasl, dir })
    }

    /// The certificate a TLS broker's clients trust (`None` without TLS).
    pub fn tls_ca(&self) -> Option<PathBuf> {
        self.tls.then(|| self.dir.path().join("tls/ca.pem"))
    }

    /// kafka-python with this broker's connection settings, on [`Self::bootstrap`].
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

    /// Runs a kafka-python admin `script` against the plain `INTERNAL` listener with
    /// `arguments`, for `what`.
    fn admin(&self, script: &str, arguments: &[String], what: &str) -> Result<(), ServiceError> {
        let output = Command::new(crate::venv_python())
            .args(["-c", script, &format!("127.0.0.1:{}", self.internal_port)])
            .args(arguments)
            .output()
            .map_err(|e| {
                ServiceError::new("kafka-python", format!("cannot run Python ({e}): run scripts/test.sh, which installs kafka-python into <target dir>/py-clients"))
            })?;
        if !output.status.success() {
            return Err(ServiceError::new("kafka", format!("{what}: {}", String::from_utf8_lossy(&output.stderr))));
        }
        Ok(())
    }

    /// The broker process's id (the JVM's), for reading what CPU it used
    /// (`/proc/{pid}/stat`).
    pub fn pid(&self) -> u32 {
        self.process.child.id()
    }

    /// `127.0.0.1:PORT` where clients connect (TLS or SASL when the broker was
    /// started so).
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.process.port)
    }

    pub fn create_topic(&self, name: &str, partitions: u32) -> Result<(), ServiceError> {
        self.create_topic_with_config(name, partitions, &[])
    }

    /// Creates topic `name` with topic configs (`("retention.ms", "60000")`,
    /// `("segment.ms", "1000")`, …), waiting until each partition has its leader.
    pub fn create_topic_with_config(&self, name: &str, partitions: u32, config: &[(&str, &str)]) -> Result<(), ServiceError> {
        let arguments: Vec<String> =
            [name.to_string(), partitions.to_string()].into_iter().chain(config.iter().map(|(key, value)| format!("{key}={value}"))).collect();
        self.admin(CREATE_TOPIC, &arguments, &format!("topic create {name}"))
    }

    /// Deletes topic `name`, waiting until the broker no longer lists it.
    pub fn delete_topic(&self, name: &str) -> Result<(), ServiceError> {
        self.admin(DELETE_TOPIC, &[name.to_string()], &format!("topic delete {name}"))
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

    /// The offsets committed to consumer `group`, as kafka-python's consumer reads
    /// them (an independent client): (topic, partition) → offset.
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

/// Makes, with `openssl` in `dir`, a CA (`ca.pem`, what clients trust) and the
/// broker's certificate for IP 127.0.0.1 signed by it (webpki takes no CA
/// certificate as a server's own); returns the PEM key store Kafka reads: the
/// broker's private key (PKCS#8, unencrypted) followed by its certificate.
fn make_certificates(dir: &Path) -> Result<PathBuf, ServiceError> {
    let error = |reason: String| ServiceError::new("openssl", reason);
    std::fs::create_dir_all(dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    let path = |name: &str| dir.join(name);
    std::fs::write(path("leaf.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n").map_err(|e| error(format!("leaf.ext: {e}")))?;
    let steps: [Vec<OsString>; 4] = [
        args(&["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=retina-test-ca", "-keyout"], &[path("ca.key"), "-out".into(), path("ca.pem")]),
        args(&["req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout"], &[path("key.pem"), "-out".into(), path("leaf.csr")]),
        args(
            &["x509", "-req", "-days", "1", "-CAcreateserial", "-in"],
            &[path("leaf.csr"), "-CA".into(), path("ca.pem"), "-CAkey".into(), path("ca.key"), "-extfile".into(), path("leaf.ext"), "-out".into(), path("cert.pem")],
        ),
        args(&["pkcs8", "-topk8", "-nocrypt", "-in"], &[path("key.pem"), "-out".into(), path("key.pk8.pem")]),
    ];
    for step in steps {
        let output = Command::new("openssl").args(&step).output().map_err(|e| error(format!("cannot run it ({e}): apt-get install openssl")))?;
        if !output.status.success() {
            return Err(error(format!("making the certificates failed: {}", String::from_utf8_lossy(&output.stderr))));
        }
    }
    let read = |name: &str| std::fs::read_to_string(path(name)).map_err(|e| error(format!("{name}: {e}")));
    let key_store = path("keystore.pem");
    std::fs::write(&key_store, read("key.pk8.pem")? + &read("cert.pem")?).map_err(|e| error(format!("keystore.pem: {e}")))?;
    Ok(key_store)
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
