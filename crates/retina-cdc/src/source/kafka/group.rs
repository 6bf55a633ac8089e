//! The applied offsets committed to a consumer group once a checkpoint holds them,
//! for lag tools only (`kafka-consumer-groups.sh --describe`, Burrow, Kafka UIs):
//! Retina resumes from the offsets stored with its own checkpoints, never from the
//! group's, so a commit that fails costs a stale lag figure, not data.
//!
//! Commits are made as a standalone consumer (generation -1, no member id), which
//! Kafka accepts for a group with no active members: no group membership or
//! rebalancing is joined. rskafka, the fetch client, has no consumer-group API, so
//! this speaks the three requests it needs (ApiVersions, FindCoordinator,
//! OffsetCommit, plus SASL) itself, with `kafka-protocol` for their encoding.
//!
//! Invariant: only offsets of a durable position are ever handed to
//! [`GroupCommitter::commit`] (the source's `acknowledge`), so the group never runs
//! ahead of what a restart would resume from.

use std::collections::{BTreeMap, HashMap};
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::error::ParseResponseErrorCode;
use kafka_protocol::messages::offset_commit_request::{OffsetCommitRequestPartition, OffsetCommitRequestTopic};
use kafka_protocol::messages::{
    ApiVersionsRequest, FindCoordinatorRequest, GroupId, OffsetCommitRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use super::options::Sasl;

/// How long one connection or request may take.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed commit before trying again (with the newest offsets).
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// Largest response accepted (the responses here are small).
const MAX_RESPONSE: usize = 16 << 20;

/// Where and how to connect: the same settings the fetching client uses.
#[derive(Clone)]
pub struct Connect {
    pub brokers: Vec<String>,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub sasl: Option<Sasl>,
}

/// Offsets to commit: (topic, partition) → the next offset to read.
pub type Offsets = BTreeMap<(String, i32), i64>;

#[derive(Default)]
struct Progress {
    /// Sequence number of the newest offsets handed over, and of those committed.
    wanted: u64,
    committed: u64,
    committed_at: Option<Instant>,
    /// Why the newest attempt failed (cleared by the next success).
    failed: Option<String>,
}

/// Commits offsets in the background on the source's I/O runtime; the newest offsets
/// replace older ones not yet sent, so a slow broker costs no queue.
pub struct GroupCommitter {
    group: String,
    wanted: watch::Sender<(u64, Arc<Offsets>)>,
    progress: Arc<Mutex<Progress>>,
    task: tokio::task::JoinHandle<()>,
}

impl GroupCommitter {
    pub fn start(runtime: &tokio::runtime::Runtime, connect: Connect, group: String) -> Self {
        let (wanted, receiver) = watch::channel((0, Arc::new(Offsets::new())));
        let progress = Arc::new(Mutex::new(Progress::default()));
        let task = runtime.spawn(run(connect, group.clone(), receiver, Arc::clone(&progress)));
        Self { group, wanted, progress, task }
    }

    /// Commits `offsets` (durable ones only) unless they are the ones last handed over.
    pub fn commit(&self, offsets: Offsets) {
        if offsets.is_empty() || *self.wanted.borrow().1 == offsets {
            return;
        }
        let sequence = {
            let mut progress = self.progress.lock();
            progress.wanted += 1;
            progress.wanted
        };
        self.wanted.send_replace((sequence, Arc::new(offsets)));
    }

    /// One line for `retina.sources`.
    pub fn describe(&self) -> String {
        let progress = self.progress.lock();
        match (&progress.failed, progress.committed_at) {
            (Some(reason), _) => format!("consumer group {}: committing offsets failed ({reason}); retrying", self.group),
            (None, Some(at)) => format!("consumer group {}: offsets committed {:.1} s ago", self.group, at.elapsed().as_secs_f64()),
            (None, None) => format!("consumer group {}: no offsets committed yet", self.group),
        }
    }

    /// Waits up to `timeout` until the newest offsets handed over are committed.
    pub fn flush(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let progress = self.progress.lock();
                if progress.committed >= progress.wanted {
                    return Ok(());
                }
                if Instant::now() >= deadline {
                    return Err(progress.failed.clone().unwrap_or_else(|| format!("not committed within {} s", timeout.as_secs())));
                }
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for GroupCommitter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The commit loop: commits the newest offsets whenever they change, keeping the
/// coordinator's connection between commits and reconnecting after any failure.
async fn run(connect: Connect, group: String, mut wanted: watch::Receiver<(u64, Arc<Offsets>)>, progress: Arc<Mutex<Progress>>) {
    let mut coordinator: Option<Connection> = None;
    loop {
        let (sequence, offsets) = wanted.borrow_and_update().clone();
        if sequence > progress.lock().committed {
            let result = commit(&mut coordinator, &connect, &group, &offsets).await;
            let failed = result.is_err();
            {
                let mut progress = progress.lock();
                match result {
                    Ok(()) => {
                        progress.committed = sequence;
                        progress.committed_at = Some(Instant::now());
                        progress.failed = None;
                    }
                    Err(reason) => progress.failed = Some(reason),
                }
            }
            if failed {
                coordinator = None;
                tokio::time::sleep(RETRY_AFTER).await;
                continue;
            }
        }
        if wanted.changed().await.is_err() {
            return;
        }
    }
}

async fn commit(coordinator: &mut Option<Connection>, connect: &Connect, group: &str, offsets: &Offsets) -> Result<(), String> {
    let connection = match coordinator {
        Some(connection) => connection,
        None => coordinator.insert(find_coordinator(connect, group).await?),
    };
    let version = connection.version::<OffsetCommitRequest>(2..=9)?;
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for ((topic, partition), offset) in offsets {
        let entry = OffsetCommitRequestPartition::default().with_partition_index(*partition).with_committed_offset(*offset);
        topics.entry(topic.as_str()).or_default().push(entry);
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.to_string())))
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetCommitRequestTopic::default().with_name(TopicName(StrBytes::from_string(name.to_string()))).with_partitions(partitions)
                })
                .collect(),
        );
    let response = connection.request(version, &request).await?;
    for topic in response.topics {
        for partition in topic.partitions {
            if let Some(error) = partition.error_code.err() {
                return Err(format!("topic {} partition {}: {error}", topic.name.0.as_str(), partition.partition_index));
            }
        }
    }
    Ok(())
}

/// Why no broker can be reached, from a connection of this module's own: the
/// fetching client retries a failed connection until its deadline and then says
/// only that it timed out, where this says why (a certificate, a refused port, SASL).
pub async fn diagnose(connect: &Connect) -> Option<String> {
    let mut failures = Vec::new();
    for broker in &connect.brokers {
        match Connection::open(broker, connect).await {
            Ok(_) => return None,
            Err(reason) => failures.push(reason),
        }
    }
    Some(failures.join("; "))
}

/// The group's coordinator, asked of the first broker that answers.
async fn find_coordinator(connect: &Connect, group: &str) -> Result<Connection, String> {
    let mut failures = Vec::new();
    for broker in &connect.brokers {
        let mut connection = match Connection::open(broker, connect).await {
            Ok(connection) => connection,
            Err(reason) => {
                failures.push(reason);
                continue;
            }
        };
        let address = connection.coordinator_of(group).await?;
        if address == *broker {
            return Ok(connection);
        }
        return Connection::open(&address, connect).await;
    }
    Err(failures.join("; "))
}

/// What a connection reads and writes: TCP, or TLS over it.
trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

/// One broker connection, after ApiVersions (and SASL when configured).
struct Connection {
    address: String,
    stream: Box<dyn Io>,
    correlation: i32,
    /// API key → (min, max) version the broker speaks.
    versions: HashMap<i16, (i16, i16)>,
}

impl Connection {
    async fn open(address: &str, connect: &Connect) -> Result<Self, String> {
        tokio::time::timeout(REQUEST_TIMEOUT, Self::handshake(address, connect))
            .await
            .map_err(|_| format!("{address}: no answer within {} s", REQUEST_TIMEOUT.as_secs()))?
    }

    async fn handshake(address: &str, connect: &Connect) -> Result<Self, String> {
        let tcp = TcpStream::connect(address).await.map_err(|e| format!("cannot connect to {address}: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Io> = match &connect.tls {
            None => Box::new(tcp),
            Some(config) => {
                let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
                let name = rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| format!("{address}: {e}"))?;
                let tls = tokio_rustls::TlsConnector::from(Arc::clone(config))
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("{address}: TLS: {e}"))?;
                Box::new(tls)
            }
        };
        let mut connection = Self { address: address.to_string(), stream, correlation: 0, versions: HashMap::new() };
        // Version 0: every broker answers it, before it knows what the client speaks.
        let response = connection.request(0, &ApiVersionsRequest::default()).await?;
        if let Some(error) = response.error_code.err() {
            return Err(format!("{address}: ApiVersions: {error}"));
        }
        connection.versions = response.api_keys.iter().map(|key| (key.api_key, (key.min_version, key.max_version))).collect();
        if let Some(sasl) = &connect.sasl {
            connection.authenticate(sasl).await?;
        }
        Ok(connection)
    }

    /// The highest version of `R` both sides speak, within `ours`.
    fn version<R: Request>(&self, ours: RangeInclusive<i16>) -> Result<i16, String> {
        let (min, max) = self.versions.get(&R::KEY).copied().ok_or_else(|| format!("{}: the broker does not offer API {}", self.address, R::KEY))?;
        let version = (*ours.end()).min(max);
        if version < min.max(*ours.start()) {
            return Err(format!("{}: API {} versions {min}..={max} on the broker, {ours:?} here", self.address, R::KEY));
        }
        Ok(version)
    }

    async fn request<R: Request>(&mut self, version: i16, request: &R) -> Result<R::Response, String> {
        let address = self.address.clone();
        let failed = |what: &str, e: &dyn std::fmt::Display| format!("{address}: API {} {what}: {e}", R::KEY);
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("retina")));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).map_err(|e| failed("encode", &e))?;
        request.encode(&mut body, version).map_err(|e| failed("encode", &e))?;
        let length = i32::try_from(body.len()).map_err(|e| failed("encode", &e))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_i32(length);
        frame.extend_from_slice(&body);
        let exchange = async {
            self.stream.write_all(&frame).await?;
            self.stream.flush().await?;
            let mut size = [0u8; 4];
            self.stream.read_exact(&mut size).await?;
            let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
            if size > MAX_RESPONSE {
                return Err(std::io::Error::other(format!("a response of {size} bytes")));
            }
            let mut response = vec![0u8; size];
            self.stream.read_exact(&mut response).await?;
            Ok(Bytes::from(response))
        };
        let mut response = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| failed("request", &format!("no answer within {} s", REQUEST_TIMEOUT.as_secs())))?
            .map_err(|e| failed("request", &e))?;
        let header = ResponseHeader::decode(&mut response, R::Response::header_version(version)).map_err(|e| failed("decode", &e))?;
        if header.correlation_id != self.correlation {
            return Err(failed("decode", &format!("answer to request {} where {} was sent", header.correlation_id, self.correlation)));
        }
        R::Response::decode(&mut response, version).map_err(|e| failed("decode", &e))
    }

    /// `HOST:PORT` of `group`'s coordinator.
    async fn coordinator_of(&mut self, group: &str) -> Result<String, String> {
        let version = self.version::<FindCoordinatorRequest>(1..=6)?;
        let key = StrBytes::from_string(group.to_string());
        let request = if version >= 4 {
            FindCoordinatorRequest::default().with_key_type(0).with_coordinator_keys(vec![key])
        } else {
            FindCoordinatorRequest::default().with_key_type(0).with_key(key)
        };
        let response = self.request(version, &request).await?;
        let (error, host, port) = match response.coordinators.first() {
            Some(found) if version >= 4 => (found.error_code, found.host.as_str().to_string(), found.port),
            _ => (response.error_code, response.host.as_str().to_string(), response.port),
        };
        if let Some(error) = error.err() {
            return Err(format!("{}: the coordinator of consumer group {group}: {error}", self.address));
        }
        Ok(format!("{host}:{port}"))
    }

    async fn authenticate(&mut self, sasl: &Sasl) -> Result<(), String> {
        let mechanism = sasl.mechanism.name();
        let address = self.address.clone();
        let failed = |e: &dyn std::fmt::Display| format!("{address}: SASL {mechanism}: {e}");
        let handshake = self.request(1, &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism))).await?;
        if let Some(error) = handshake.error_code.err() {
            let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(failed(&format!("{error} (the broker offers {})", offered.join(", "))));
        }
        let config = rsasl::config::SASLConfig::with_credentials(None, sasl.username.clone(), sasl.password.clone()).map_err(|e| failed(&e))?;
        let name = rsasl::prelude::Mechname::parse(mechanism.as_bytes()).map_err(|e| failed(&e))?;
        let mut session = rsasl::prelude::SASLClient::new(config).start_suggested(&[name]).map_err(|e| failed(&e))?;
        let version = self.version::<SaslAuthenticateRequest>(0..=1)?;
        let mut received: Option<Bytes> = None;
        loop {
            let mut out = Vec::new();
            let state = session.step(received.as_deref(), &mut out).map_err(|e| failed(&e))?;
            if state.has_sent_message() {
                let response = self.request(version, &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(out))).await?;
                if let Some(error) = response.error_code.err() {
                    let message = response.error_message.as_ref().map_or("", |m| m.as_str());
                    return Err(failed(&format!("{error} {message}")));
                }
                received = Some(response.auth_bytes);
            }
            if state.is_finished() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_commit_is_described_and_retried_with_the_newest_offsets() {
        // A loopback port nothing listens on: every connection is refused.
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
        let connect = Connect { brokers: vec![format!("127.0.0.1:{port}")], tls: None, sasl: None };
        let committer = GroupCommitter::start(&runtime, connect, "lag".into());
        assert!(committer.describe().contains("no offsets committed yet"), "{}", committer.describe());
        committer.commit(Offsets::from([(("t".to_string(), 0), 5)]));
        let error = committer.flush(Duration::from_millis(300)).expect_err("nothing listens");
        assert!(error.contains(&format!("cannot connect to 127.0.0.1:{port}")), "{error}");
        let described = committer.describe();
        assert!(described.contains("consumer group lag: committing offsets failed") && described.contains("retrying"), "{described}");
        // Newer offsets replace the ones not yet committed; the same ones twice are one.
        committer.commit(Offsets::from([(("t".to_string(), 0), 9)]));
        committer.commit(Offsets::from([(("t".to_string(), 0), 9)]));
        assert_eq!(committer.progress.lock().wanted, 2);
        assert_eq!(*committer.wanted.borrow().1, Offsets::from([(("t".to_string(), 0), 9)]));
    }
}
