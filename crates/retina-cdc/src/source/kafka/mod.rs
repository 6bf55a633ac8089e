//! `kafka://BROKER[,BROKER…]/TOPIC_PREFIX`: Debezium as Kafka Connect deploys it, a
//! topic per table (any number of partitions) and a transaction topic, merged back
//! into one stream of whole source transactions ([`reassembly`]) for the sink.
//!
//! Exactly once: the position recorded with each mirror transaction is the vector of
//! every partition's resume offset ([`offsets`]); a restart seeks every partition to
//! it and skips what it lists as applied. The transport position the sink sees is a
//! sequence number of handed-out messages, continued from the recorded one, so the
//! sink's own redelivery check keeps working.
//!
//! The client is `rskafka` (pure Rust: no C library to build or match, and it speaks
//! to the `tansu` broker the tests run; Debian's librdkafka 2.0.2 fails tansu's
//! ApiVersions handshake). It has no consumer-group API: durable offsets are
//! committed to a consumer group by [`group`], for lag tools only. The build uses
//! `third_party/rskafka`, a copy patched to set TCP_NODELAY: with Nagle's algorithm
//! on, requests sharing a connection waited for the broker's delayed ACK (~40 ms).

pub mod offsets;
pub mod options;
mod fetch;
mod group;
mod peek;
pub mod reassembly;
mod ready;
mod tls;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use retina_core::{PartitionLag, SourceStatus};
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder, Credentials, SaslConfig};

use super::{MessageSource, SourceEvent};
use crate::debezium::{KnownSchemas, Line, SchemaElider};
use crate::error::{CdcError, CdcResult};
use crate::position::{Position, SinkPosition};
use offsets::{PartitionResume, ResumeOffsets};
use group::GroupCommitter;
use options::{KafkaSpec, SaslMechanism, TopicSelection};
use ready::{Content, Preparer, ReadyRecord, RecordKind};
use reassembly::Reassembly;

/// Fetched batches waiting for the source thread, over all partitions. They are
/// not yet counted against the memory budget, so this bounds how far past it the
/// reassembly can go (up to 4 MB each): 64 let a backlog replay hold 438 MB
/// against a 256 MB budget.
const FETCHED_QUEUE: usize = 8;
/// How often a running source looks for new topics (new tables).
const TOPIC_REFRESH: Duration = Duration::from_secs(5);
/// How often it looks while events wait for the transaction topic to appear.
const TRANSACTION_TOPIC_REFRESH: Duration = Duration::from_millis(200);
/// How long connecting to the brokers may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Where recent messages came from, for error messages.
const LOCATIONS_KEPT: usize = 1 << 16;
/// How long closing the source waits for its last offsets to reach the group.
const LAST_COMMIT_WAIT: Duration = Duration::from_secs(5);

/// What a fetcher task delivers.
struct Fetched {
    partition: usize,
    result: Result<FetchedRecords, String>,
}

/// One fetch's answer, its records made ready by the fetcher.
struct FetchedRecords {
    records: Vec<ReadyRecord>,
    high_watermark: i64,
    /// The broker's timestamp of the last record, if any.
    last_timestamp_ms: Option<i64>,
}

/// What is known of one partition's head.
#[derive(Default, Clone, Copy)]
struct Head {
    high_watermark: i64,
    /// Timestamp (ms) of the newest record read.
    last_timestamp_ms: i64,
    /// A fetch of this partition was answered since the source started.
    answered: bool,
    /// The last answer held no record: nothing is left below the high watermark
    /// that a fetch returns (e.g. Kafka's transaction control records).
    answered_empty: bool,
}

impl Head {
    /// Read to the end the broker last reported.
    fn read_to_end(&self, next_offset: i64) -> bool {
        self.answered && (next_offset >= self.high_watermark || self.answered_empty)
    }
}

pub struct KafkaSource {
    name: String,
    spec: KafkaSpec,
    regex: Option<regex::Regex>,
    runtime: tokio::runtime::Runtime,
    client: Arc<Client>,
    /// `None` until [`MessageSource::start`].
    reassembly: Option<Reassembly>,
    heads: Vec<Head>,
    /// The sink's known schemas, shared with the fetchers once the driver's elider
    /// shows them (see [`ready`]).
    known_schemas: Arc<OnceLock<KnownSchemas>>,
    paused: Vec<Arc<AtomicBool>>,
    fetched_tx: Sender<Fetched>,
    fetched: Receiver<Fetched>,
    stop: Arc<AtomicBool>,
    sequence: u64,
    pending_offsets: Option<String>,
    /// (sequence, partition, offset) of recently handed-out messages.
    locations: VecDeque<(u64, usize, i64)>,
    reported_idle: bool,
    last_refresh: Instant,
    notes: Vec<String>,
    /// Commits durable offsets to the consumer group (`None`: `commit_offsets=false`).
    group: Option<GroupCommitter>,
    fetch_stats: Arc<fetch::FetchStats>,
    /// How often [`MessageSource::next`] found nothing ready (for `RETINA_KAFKA_TRACE`).
    idle_reports: u64,
}

impl KafkaSource {
    /// Connects to the brokers (nothing is read until [`MessageSource::start`]).
    pub fn connect(name: &str, spec: KafkaSpec) -> CdcResult<Self> {
        let error = |reason: String| CdcError::Source { source_name: name.to_string(), reason };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("retina-kafka")
            .enable_all()
            .build()
            .map_err(|e| error(format!("cannot start the I/O runtime: {e}")))?;
        let regex = match &spec.topics {
            TopicSelection::Regex(pattern) => Some(regex::Regex::new(pattern).map_err(|e| error(format!("topic_regex: {e}")))?),
            _ => None,
        };
        let tls = match &spec.tls {
            Some(ca) => Some(Arc::new(tls::client_config(ca.as_deref()).map_err(error)?)),
            None => None,
        };
        let client = connect_client(&runtime, &spec, tls.as_ref()).map_err(error)?;
        let (fetched_tx, fetched) = crossbeam_channel::bounded(FETCHED_QUEUE);
        let group = spec.group.as_ref().map(|group| {
            let connect = group::Connect { brokers: spec.brokers.clone(), tls, sasl: spec.sasl.clone() };
            GroupCommitter::start(&runtime, connect, group.clone())
        });
        Ok(Self {
            name: name.to_string(),
            spec,
            regex,
            runtime,
            client: Arc::new(client),
            reassembly: None,
            heads: Vec::new(),
            known_schemas: Arc::new(OnceLock::new()),
            paused: Vec::new(),
            fetched_tx,
            fetched,
            stop: Arc::new(AtomicBool::new(false)),
            sequence: 0,
            pending_offsets: None,
            locations: VecDeque::new(),
            reported_idle: false,
            last_refresh: Instant::now(),
            notes: Vec::new(),
            group,
            fetch_stats: Arc::new(fetch::FetchStats::new(std::env::var_os("RETINA_KAFKA_TRACE").is_some())),
            idle_reports: 0,
        })
    }

    fn error(&self, reason: String) -> CdcError {
        CdcError::Source { source_name: self.name.clone(), reason }
    }

    /// The topics on the broker, with their partition numbers.
    fn list_topics(&self) -> CdcResult<BTreeMap<String, Vec<i32>>> {
        let topics = self.runtime.block_on(self.client.list_topics()).map_err(|e| self.error(format!("cannot list topics: {e}")))?;
        Ok(topics.into_iter().map(|t| (t.name, t.partitions.into_iter().collect())).collect())
    }

    fn selected<'a>(&self, topics: &'a BTreeMap<String, Vec<i32>>) -> impl Iterator<Item = (&'a String, &'a Vec<i32>)> + use<'a, '_> {
        topics.iter().filter(|(name, _)| self.spec.selects(name, self.regex.as_ref()))
    }

    /// Where `topic/partition` starts when no recorded position knows it: at its first
    /// record, which must be offset 0 unless the user accepts a retention gap.
    fn checked_start(&self, topic: &str, partition: i32, floor: i64, recorded: bool) -> CdcResult<i64> {
        let client = self.partition_client(topic, partition)?;
        let earliest = self
            .runtime
            .block_on(client.get_offset(OffsetAt::Earliest))
            .map_err(|e| self.error(format!("topic {topic} partition {partition}: cannot read its first offset: {e}")))?;
        if floor >= earliest {
            return Ok(floor);
        }
        if self.spec.allow_retention_gap {
            return Ok(earliest);
        }
        let why = if recorded { "the recorded position resumes" } else { "a new mirror starts" };
        Err(self.error(format!(
            "topic {topic} partition {partition}: {why} at offset {floor}, but the broker's log now starts at {earliest}: \
             records {floor}..{} are gone (retention or deletion) and the mirror would miss them; \
             re-snapshot the source, or pass allow_retention_gap=true to start at {earliest}",
            earliest - 1
        )))
    }

    fn partition_client(&self, topic: &str, partition: i32) -> CdcResult<PartitionClient> {
        partition_client_of(&self.runtime, &self.client, topic, partition).map_err(|reason| self.error(reason))
    }

    /// Starts a fetcher task for `partition` of the reassembly, from its next offset.
    fn spawn_fetcher(&mut self, partition: usize) -> CdcResult<()> {
        let Some(reassembly) = &self.reassembly else { return Ok(()) };
        let (topic, number) = reassembly.name(partition);
        let (topic, offset) = (topic.to_string(), reassembly.next_offset(partition));
        let client = self.partition_client(&topic, number)?;
        let (sender, stop) = (self.fetched_tx.clone(), Arc::clone(&self.stop));
        let paused = Arc::new(AtomicBool::new(false));
        self.paused.push(Arc::clone(&paused));
        self.heads.push(Head::default());
        let kind = if reassembly.transaction_partition() == Some(partition) {
            RecordKind::Transactions
        } else {
            RecordKind::Changes { table: serde_json::to_string(&self.spec.table_of(&topic)).unwrap_or_else(|_| "null".to_string()) }
        };
        let preparer = Preparer::new(kind, Arc::clone(&self.known_schemas));
        let controls = fetch::Controls {
            sender,
            stop,
            paused,
            wait_ms: self.spec.fetch_wait_ms,
            max_bytes: self.spec.max_partition_fetch_bytes,
            stats: Arc::clone(&self.fetch_stats),
            preparer,
        };
        self.runtime.spawn(fetch::run(client, partition, offset, controls));
        Ok(())
    }

    /// Takes in fetched batches: all that are queued, or (after an idle report) what
    /// arrives within 100 ms. `false` when no record came (empty fetches only tell
    /// the partitions' high watermarks).
    fn receive(&mut self) -> CdcResult<bool> {
        let deadline = Instant::now() + if self.reported_idle { Duration::from_millis(100) } else { Duration::ZERO };
        let mut took_records = false;
        loop {
            while let Ok(fetched) = self.fetched.try_recv() {
                took_records |= self.take_in(fetched)?;
            }
            let now = Instant::now();
            if took_records || now >= deadline {
                break;
            }
            match self.fetched.recv_timeout(deadline - now) {
                Ok(fetched) => took_records |= self.take_in(fetched)?,
                Err(_) => break,
            }
        }
        self.apply_back_pressure();
        Ok(took_records)
    }

    /// Takes in one fetched batch; `true` when it held records.
    fn take_in(&mut self, fetched: Fetched) -> CdcResult<bool> {
        let FetchedRecords { records, high_watermark, last_timestamp_ms } = fetched.result.map_err(|reason| self.error(reason))?;
        let took_records = !records.is_empty();
        let partition = fetched.partition;
        let head = &mut self.heads[partition];
        head.high_watermark = high_watermark;
        head.answered = true;
        head.answered_empty = !took_records;
        if let Some(last) = last_timestamp_ms {
            head.last_timestamp_ms = last;
        }
        let Some(reassembly) = self.reassembly.as_mut() else { return Ok(took_records) };
        for ReadyRecord { offset, content } in records {
            let at = |reason: String| {
                let (topic, number) = reassembly.name(partition);
                CdcError::Source { source_name: self.name.clone(), reason: format!("topic {topic} partition {number} offset {offset}: {reason}") }
            };
            match content.map_err(at)? {
                Content::Marker(None) => {}
                Content::Marker(Some((marker, line))) => reassembly.marker(offset, marker, line),
                Content::Event(transaction, line) => reassembly
                    .event(partition, offset, transaction, line)
                    .map_err(|reason| CdcError::Source { source_name: self.name.clone(), reason })?,
            }
        }
        Ok(took_records)
    }

    /// Past the memory budget, partitions that only hold what later transactions
    /// need stop being fetched until the next transaction completes.
    fn apply_back_pressure(&self) {
        let Some(reassembly) = &self.reassembly else { return };
        let over = reassembly.held_bytes() > self.spec.memory_budget;
        for (partition, paused) in self.paused.iter().enumerate() {
            if reassembly.transaction_partition() != Some(partition) {
                paused.store(over && reassembly.runs_ahead(partition), Relaxed);
            }
        }
    }

    /// A transaction that cannot complete stops the source: its missing events did
    /// not arrive within the timeout although every partition was read to its end.
    fn check_waiting(&self) -> CdcResult<()> {
        let Some(reassembly) = &self.reassembly else { return Ok(()) };
        if reassembly.waiting_since().is_none_or(|since| since.elapsed() < self.spec.transaction_timeout) {
            return Ok(());
        }
        let Some(waiting) = reassembly.oldest_waiting() else { return Ok(()) };
        let read_to_end = (0..reassembly.partitions())
            .all(|p| self.paused[p].load(Relaxed) || self.heads[p].read_to_end(reassembly.next_offset(p)));
        if !read_to_end {
            return Ok(());
        }
        let over_budget = reassembly.held_bytes() > self.spec.memory_budget;
        let mut reason = format!(
            "transaction {} cannot complete: {} after {:.1} s with every partition read to its end",
            waiting.id,
            waiting.detail,
            waiting.first_seen.elapsed().as_secs_f64()
        );
        if reassembly.transaction_partition().is_none() {
            reason.push_str(&format!(
                "; its events carry transaction metadata, but the transaction topic {} does not exist (name it with \
                 transaction_topic= if Debezium's topic.transaction differs)",
                self.spec.transaction_topic
            ));
        } else if !waiting.has_end {
            reason.push_str(&format!("; the transaction topic {} has no END for it", self.spec.transaction_topic));
        }
        if over_budget {
            reason.push_str(&format!(
                "; {} bytes of later transactions are held (memory_budget_mb={}), so partitions running ahead are paused",
                reassembly.held_bytes(),
                self.spec.memory_budget >> 20
            ));
        }
        reason.push_str("; the position is not advanced past it (transaction_timeout_s= sets the wait)");
        Err(self.error(reason))
    }

    /// New topics (new tables) join while running; a known topic whose partition
    /// count changed is an error (its keys now hash elsewhere: order is lost).
    fn refresh_topics(&mut self) -> CdcResult<()> {
        let awaited = self.reassembly.as_ref().is_some_and(Reassembly::awaits_transaction_topic);
        let due = if awaited { TRANSACTION_TOPIC_REFRESH } else { TOPIC_REFRESH };
        if self.last_refresh.elapsed() < due {
            return Ok(());
        }
        self.last_refresh = Instant::now();
        let topics = self.list_topics()?;
        self.join_transaction_topic(&topics)?;
        let Some(reassembly) = &self.reassembly else { return Ok(()) };
        let mut known: BTreeMap<String, usize> = BTreeMap::new();
        for p in 0..reassembly.partitions() {
            *known.entry(reassembly.name(p).0.to_string()).or_default() += 1;
        }
        let mut new = Vec::new();
        for (topic, partitions) in self.selected(&topics) {
            match known.get(topic) {
                Some(count) if *count != partitions.len() => {
                    return Err(self.error(format!(
                        "topic {topic} now has {} partitions where it had {count}: Kafka orders records only within a \
                         partition, so the order of its changes is lost; re-snapshot the source",
                        partitions.len()
                    )));
                }
                Some(_) => {}
                None => new.extend(partitions.iter().map(|p| (topic.clone(), *p))),
            }
        }
        for (topic, partition) in new {
            let floor = self.checked_start(&topic, partition, 0, false)?;
            let Some(reassembly) = self.reassembly.as_mut() else { return Ok(()) };
            let index = reassembly.add_partition((topic, partition), PartitionResume { floor, applied_above: Vec::new() });
            self.spawn_fetcher(index)?;
        }
        Ok(())
    }
}

impl KafkaSource {
    /// Starts reading the transaction topic once it exists, from its first record:
    /// Debezium creates it at the first transaction it streams, which may be after
    /// this source started (events naming a transaction wait for it meanwhile).
    fn join_transaction_topic(&mut self, topics: &BTreeMap<String, Vec<i32>>) -> CdcResult<()> {
        if self.reassembly.as_ref().is_none_or(|r| r.transaction_partition().is_some()) {
            return Ok(());
        }
        let Some(numbers) = topics.get(&self.spec.transaction_topic) else { return Ok(()) };
        let partition = single_transaction_partition(&self.spec.transaction_topic, numbers).map_err(|reason| self.error(reason))?;
        let topic = self.spec.transaction_topic.clone();
        let floor = self.checked_start(&topic, partition, 0, false)?;
        let Some(reassembly) = self.reassembly.as_mut() else { return Ok(()) };
        let index = reassembly.add_transaction_partition((topic.clone(), partition), PartitionResume { floor, applied_above: Vec::new() });
        self.notes.retain(|note| !note.starts_with("no transaction topic"));
        self.spawn_fetcher(index)
    }
}

/// The transaction topic's one partition: its order is the order transactions are
/// applied in, so it must have exactly one.
fn single_transaction_partition(topic: &str, numbers: &[i32]) -> Result<i32, String> {
    match numbers {
        [one] => Ok(*one),
        _ => Err(format!(
            "the transaction topic {topic} has {} partitions: its order is the order transactions are applied in, so it \
             must have exactly one",
            numbers.len()
        )),
    }
}

impl MessageSource for KafkaSource {
    fn start(&mut self, recorded: Option<&SinkPosition>) -> CdcResult<()> {
        let resume = match recorded {
            None => ResumeOffsets::default(),
            Some(position) => {
                let text = position.offsets.as_deref().ok_or_else(|| {
                    self.error(format!(
                        "the recorded position {} holds no Kafka partition offsets: this data dir was fed by another kind \
                         of source under the same name",
                        position.encode()
                    ))
                })?;
                ResumeOffsets::decode(text).map_err(|e| self.error(format!("recorded position: {e}")))?
            }
        };
        self.sequence = recorded.map_or(0, |p| p.transport);
        let topics = self.list_topics()?;
        let transaction_partitions = topics.get(&self.spec.transaction_topic);
        let has_transaction_topic = transaction_partitions.is_some();
        let mut partitions: Vec<(String, i32)> = Vec::new();
        match transaction_partitions {
            Some(numbers) => {
                let partition = single_transaction_partition(&self.spec.transaction_topic, numbers).map_err(|reason| self.error(reason))?;
                partitions.push((self.spec.transaction_topic.clone(), partition));
            }
            None => self.notes.push(format!(
                "no transaction topic {} yet: events without transaction metadata apply one by one; events that name a \
                 transaction wait for the topic (Debezium creates it at the first transaction it streams)",
                self.spec.transaction_topic
            )),
        }
        for (topic, numbers) in self.selected(&topics) {
            partitions.extend(numbers.iter().map(|p| (topic.clone(), *p)));
        }
        if partitions.is_empty() || (has_transaction_topic && partitions.len() == 1) {
            let wanted = match &self.spec.topics {
                TopicSelection::Prefixed => format!("named {}.…", self.spec.prefix),
                TopicSelection::List(list) => format!("named {}", list.join(", ")),
                TopicSelection::Regex(pattern) => format!("matching {pattern}"),
            };
            self.notes.push(format!("no topic {wanted} yet; new topics are picked up as they appear"));
        }
        // Every partition the recorded position knows must still exist, with the
        // same partition count per topic.
        for (topic, partition) in resume.0.keys() {
            let Some(numbers) = topics.get(topic) else {
                return Err(self.error(format!(
                    "topic {topic} is in the recorded position but no longer exists on the broker (deleted?): its \
                     unapplied changes cannot be read"
                )));
            };
            if !numbers.contains(partition) || numbers.len() != resume.0.keys().filter(|(t, _)| t == topic).count() {
                return Err(self.error(format!(
                    "topic {topic} now has {} partitions where the recorded position has {}: Kafka orders records only \
                     within a partition, so the order of its changes is lost; re-snapshot the source",
                    numbers.len(),
                    resume.0.keys().filter(|(t, _)| t == topic).count()
                )));
            }
        }
        let mut start = Vec::new();
        for (topic, partition) in partitions {
            let recorded = resume.0.get(&(topic.clone(), partition)).cloned();
            let is_recorded = recorded.is_some();
            let mut resume = recorded.unwrap_or_default();
            let floor = self.checked_start(&topic, partition, resume.floor, is_recorded)?;
            if floor != resume.floor {
                self.notes.push(format!("topic {topic} partition {partition} started at offset {floor} (allow_retention_gap)"));
                resume = PartitionResume { floor, applied_above: resume.applied_above.into_iter().filter(|o| *o > floor).collect() };
            }
            start.push(((topic, partition), resume));
        }
        let count = start.len();
        self.reassembly = Some(Reassembly::new(start, has_transaction_topic));
        for partition in 0..count {
            self.spawn_fetcher(partition)?;
        }
        self.last_refresh = Instant::now();
        Ok(())
    }

    fn next(&mut self, buffer: &mut String) -> CdcResult<SourceEvent> {
        super::next_whole(buffer, |line, elider| self.next_line(line, elider))
    }

    fn next_line(&mut self, line: &mut Line, elider: &mut SchemaElider) -> CdcResult<SourceEvent> {
        if self.reassembly.is_none() {
            self.start(None)?;
        }
        loop {
            if let Some(ready) = self.reassembly.as_mut().and_then(Reassembly::pop_ready) {
                self.sequence += 1;
                self.reported_idle = false;
                *line = ready.line;
                self.pending_offsets = ready.resume;
                if self.locations.len() == LOCATIONS_KEPT {
                    self.locations.pop_front();
                }
                self.locations.push_back((self.sequence, ready.partition, ready.offset));
                return Ok(SourceEvent::Message(Position::kafka(self.sequence)));
            }
            if self.known_schemas.get().is_none() {
                if let Some(known) = elider.known() {
                    let _ = self.known_schemas.set(known.clone());
                }
            }
            if self.receive()? {
                continue;
            }
            self.check_waiting()?;
            self.refresh_topics()?;
            self.reported_idle = true;
            self.idle_reports += 1;
            return Ok(SourceEvent::Idle);
        }
    }

    fn take_resume_offsets(&mut self) -> Option<String> {
        self.pending_offsets.take()
    }

    /// Every partition was answered since the start and read to its high watermark
    /// (transactions still waiting for events stay unapplied, and unacknowledged).
    fn caught_up(&self) -> bool {
        let Some(reassembly) = &self.reassembly else { return false };
        (0..reassembly.partitions()).all(|p| self.heads[p].read_to_end(reassembly.next_offset(p)))
    }

    /// Commits the durable position's offsets to the consumer group (in the
    /// background; a failure shows in `retina.sources` and is retried).
    fn acknowledge(&mut self, durable: &SinkPosition) -> CdcResult<()> {
        let (Some(group), Some(text)) = (&self.group, durable.offsets.as_deref()) else { return Ok(()) };
        let resume = ResumeOffsets::decode(text).map_err(|e| self.error(format!("durable position: {e}")))?;
        group.commit(resume.0.into_iter().map(|(partition, resume)| (partition, resume.floor)).collect());
        Ok(())
    }

    fn locate(&self, position: Position) -> Option<String> {
        let reassembly = self.reassembly.as_ref()?;
        let index = self.locations.binary_search_by_key(&position.value, |(sequence, _, _)| *sequence).ok()?;
        let (_, partition, offset) = self.locations[index];
        let (topic, number) = reassembly.name(partition);
        Some(format!("topic {topic} partition {number} offset {offset}"))
    }

    fn report(&self, status: &mut SourceStatus) {
        let Some(reassembly) = &self.reassembly else { return };
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        status.partitions = (0..reassembly.partitions())
            .map(|p| {
                let (topic, partition) = reassembly.name(p);
                let head = self.heads[p];
                let applied = reassembly.applied_offset(p);
                let lag_messages = u64::try_from(head.high_watermark - applied).unwrap_or(0);
                let lag_millis = if lag_messages == 0 { 0 } else { u64::try_from(now_ms - head.last_timestamp_ms).unwrap_or(0) };
                PartitionLag { topic: topic.to_string(), partition, applied_offset: applied, high_watermark: head.high_watermark, lag_messages, lag_millis }
            })
            .collect();
        status.held_transactions = Some(reassembly.held_transactions() as u64);
        status.held_bytes = Some(reassembly.held_bytes() as u64);
        status.held_bytes_peak = Some(reassembly.held_bytes_peak() as u64);
        status.lag_transactions = None;
        let group = self.group.as_ref().map(GroupCommitter::describe);
        let duplicates = (reassembly.duplicates() > 0).then(|| {
            format!("{} records were second copies (a connector restart sends again what it had not flushed) and were dropped", reassembly.duplicates())
        });
        let notes: Vec<&str> = self.notes.iter().map(String::as_str).chain(group.as_deref()).chain(duplicates.as_deref()).collect();
        status.detail = (!notes.is_empty()).then(|| notes.join("; "));
    }
}

impl Drop for KafkaSource {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        // What the source did, for whoever asks for it (RUST_LOG=retina_cdc=debug);
        // it was the RETINA_KAFKA_TRACE switch.
        if tracing::enabled!(tracing::Level::DEBUG) {
            let peak = self.reassembly.as_ref().map_or(0, Reassembly::held_bytes_peak);
            tracing::debug!(
                source = %self.name,
                sequence = self.sequence,
                idle_reports = self.idle_reports,
                held_peak_mb = peak as f64 / 1e6,
                fetches = %self.fetch_stats.describe(),
                "kafka source stopped"
            );
        }
        // The last durable offsets are what lag tools should show once this stops.
        if let Some(group) = &self.group {
            if let Err(reason) = group.flush(LAST_COMMIT_WAIT) {
                tracing::warn!(source = %self.name, %reason, "the last offsets were not committed to the consumer group");
            }
        }
    }
}

/// `client`'s handle on `topic/partition`'s leader.
fn partition_client_of(runtime: &tokio::runtime::Runtime, client: &Client, topic: &str, partition: i32) -> Result<PartitionClient, String> {
    let found = runtime.block_on(async { tokio::time::timeout(CONNECT_TIMEOUT, client.partition_client(topic, partition, UnknownTopicHandling::Error)).await });
    found
        .map_err(|_| format!("topic {topic} partition {partition}: its leader did not answer within {} s", CONNECT_TIMEOUT.as_secs()))?
        .map_err(|e| format!("topic {topic} partition {partition}: {e}"))
}

/// A client of the brokers with the source's TLS and SASL settings.
fn connect_client(runtime: &tokio::runtime::Runtime, spec: &KafkaSpec, tls: Option<&Arc<rustls::ClientConfig>>) -> Result<Client, String> {
    let mut builder = ClientBuilder::new(spec.brokers.clone())
        .client_id("retina")
        .backoff_config(rskafka::BackoffConfig { deadline: Some(Duration::from_secs(30)), ..Default::default() });
    if let Some(sasl) = &spec.sasl {
        let credentials = Credentials::new(sasl.username.clone(), sasl.password.clone());
        builder = builder.sasl_config(match sasl.mechanism {
            SaslMechanism::Plain => SaslConfig::Plain(credentials),
            SaslMechanism::ScramSha256 => SaslConfig::ScramSha256(credentials),
            SaslMechanism::ScramSha512 => SaslConfig::ScramSha512(credentials),
        });
    }
    if let Some(config) = tls {
        builder = builder.tls_config(Arc::clone(config));
    }
    let brokers = spec.brokers.join(",");
    match runtime.block_on(async { tokio::time::timeout(CONNECT_TIMEOUT, builder.build()).await }) {
        Ok(built) => built.map_err(|e| {
            // rskafka's text says "Sasl handshake failed" or only "invalid proof",
            // depending on where the broker refused: name the cause either way.
            let reason = e.to_string();
            match &spec.sasl {
                Some(sasl) if reason.to_lowercase().contains("sasl") => {
                    format!("cannot connect to {brokers}: SASL authentication as {:?} failed: {reason}", sasl.username)
                }
                _ => format!("cannot connect to {brokers}: {reason}"),
            }
        }),
        Err(_) => {
            let connect = group::Connect { brokers: spec.brokers.clone(), tls: tls.cloned(), sasl: spec.sasl.clone() };
            let why = runtime.block_on(group::diagnose(&connect)).map_or_else(String::new, |why| format!(" ({why})"));
            Err(format!("cannot connect to {brokers}: no answer within {} s{why}", CONNECT_TIMEOUT.as_secs()))
        }
    }
}
