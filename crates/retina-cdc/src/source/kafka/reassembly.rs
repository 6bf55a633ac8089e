//! Cross-topic transaction reassembly (Retina paper §3.3, §5.3): Debezium on Kafka
//! Connect writes each table's events to its own topic and the transaction
//! boundaries to a separate one, so one source transaction arrives as pieces on
//! several partitions, interleaved with others. This merges them back into one
//! ordered stream in which every transaction's BEGIN, events and END are adjacent,
//! released in the transaction topic's order once all its events have arrived.
//!
//! It decides only *when* a transaction is complete (its END is read and
//! `event_count` events carrying its id have arrived); the sink's
//! [`Reconstructor`](crate::sink::Reconstructor) still checks the per-table counts and
//! `total_order` of what it is handed, so there is one place that validates
//! transactions.

use std::collections::VecDeque;

// Keyed by transaction ids: hashbrown's seeded foldhash instead of SipHash, which
// was ~5% of the source thread on `bench replay --source kafka`.
use hashbrown::HashMap;
use std::fmt::Write as _;
use std::time::Instant;

use super::offsets::{PartitionLedger, PartitionResume, ResumeOffsets, Taken};
use super::peek::{EventTransaction, Marker};
use crate::debezium::Line;

/// How many released transactions are remembered to recognize their second copies:
/// after a Kafka Connect worker dies, Debezium sends again everything since its last
/// flushed offset (`offset.flush.interval.ms`, a minute by default: 120,000
/// transactions at 2,000 a second). Each costs a 64-bit hash.
const RELEASED_REMEMBERED: usize = 1 << 18;

impl From<&str> for EventTransaction {
    fn from(id: &str) -> Self {
        Self { id: id.to_string(), total_order: None }
    }
}

/// A line ready for the sink, with the partition and offset it came from and, when
/// it ends a mirror transaction, the position a restart resumes from once it is
/// applied.
#[derive(Debug)]
pub struct Ready {
    pub line: Line,
    pub partition: usize,
    pub offset: i64,
    pub resume: Option<String>,
}

struct HeldEvent {
    partition: usize,
    offset: i64,
    line: Line,
}

struct HeldTransaction {
    begin: Option<(i64, Line)>,
    end: Option<(i64, Line, u64)>,
    events: Vec<HeldEvent>,
    /// The `total_order`s held, as bits: a second copy of an event (Debezium resends
    /// from its last flushed offset, which may lie inside a transaction) is not
    /// counted again.
    orders: Vec<u64>,
    /// How many of `events` came from each partition (by index; shorter when the
    /// last partitions gave none): back-pressure asks for the head transaction's
    /// count per partition after every fetch, and a transaction of a million
    /// events must not be counted again each time.
    per_partition: Vec<u32>,
    bytes: usize,
    first_seen: Instant,
}

impl HeldTransaction {
    fn new() -> Self {
        Self { begin: None, end: None, events: Vec::new(), orders: Vec::new(), per_partition: Vec::new(), bytes: 0, first_seen: Instant::now() }
    }

    /// Notes `total_order`; `false` when an event of that number is held already.
    fn first_copy(&mut self, total_order: Option<u64>) -> bool {
        let Some(order) = total_order else { return true };
        let (word, bit) = ((order / 64) as usize, 1u64 << (order % 64));
        if self.orders.len() <= word {
            self.orders.resize(word + 1, 0);
        }
        let first = self.orders[word] & bit == 0;
        self.orders[word] |= bit;
        first
    }

    fn hold(&mut self, event: HeldEvent) {
        if self.per_partition.len() <= event.partition {
            self.per_partition.resize(event.partition + 1, 0);
        }
        self.per_partition[event.partition] += 1;
        self.bytes += event.line.len();
        self.events.push(event);
    }

    fn events_from(&self, partition: usize) -> usize {
        self.per_partition.get(partition).map_or(0, |count| *count as usize)
    }

    fn complete(&self) -> bool {
        self.end.as_ref().is_some_and(|(_, _, count)| self.events.len() as u64 >= *count)
    }
}

/// A transaction that holds memory without completing, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    pub id: String,
    pub first_seen: Instant,
    pub has_end: bool,
    /// What it waits for, in words: expected and arrived events per partition.
    pub detail: String,
}

/// The merge state. The transaction topic is one of the partitions once it exists:
/// Debezium creates it only at the first transaction after its snapshot, so a source
/// started before that learns of it later ([`Self::add_transaction_partition`]), and
/// events that carry a transaction id wait for it meanwhile.
///
/// Invariant: every record taken in is held by exactly one transaction or is in
/// `ready` (or was a no-op), and each partition's ledger says which; so the resume
/// position computed at any release covers exactly what `ready` holds before it.
pub struct Reassembly {
    names: Vec<(String, i32)>,
    /// Partition indexes in name order: the order positions are written in.
    by_name: Vec<usize>,
    ledgers: Vec<PartitionLedger>,
    /// The transaction topic's partition index, once it is read.
    transaction_partition: Option<usize>,
    /// An event named a transaction while no transaction topic was read: the source
    /// should look for the topic now rather than at its next periodic refresh.
    awaiting_transaction_topic: bool,
    transactions: HashMap<String, HeldTransaction>,
    /// Ids in the order their END was read: the order transactions are released in.
    ends: VecDeque<String>,
    ready: VecDeque<Ready>,
    held_bytes: usize,
    held_bytes_peak: usize,
    released: ReleasedIds,
    /// Records dropped as second copies of what was held or released.
    duplicates: u64,
}

/// Ids of the transactions released last (hashes, oldest first), to drop what
/// Debezium sends again of them.
struct ReleasedIds {
    order: VecDeque<u64>,
    set: hashbrown::HashSet<u64>,
    hasher: hashbrown::DefaultHashBuilder,
}

impl ReleasedIds {
    fn new() -> Self {
        Self { order: VecDeque::new(), set: hashbrown::HashSet::new(), hasher: hashbrown::DefaultHashBuilder::default() }
    }

    fn hash(&self, id: &str) -> u64 {
        use std::hash::BuildHasher;
        self.hasher.hash_one(id)
    }

    fn contains(&self, id: &str) -> bool {
        self.set.contains(&self.hash(id))
    }

    fn insert(&mut self, id: &str) {
        let hash = self.hash(id);
        if self.set.insert(hash) {
            self.order.push_back(hash);
            if self.order.len() > RELEASED_REMEMBERED {
                if let Some(oldest) = self.order.pop_front() {
                    self.set.remove(&oldest);
                }
            }
        }
    }
}

impl Reassembly {
    /// `partitions`: every partition read, with where it resumes; the transaction
    /// topic's first when `has_transaction_topic`.
    pub fn new(partitions: Vec<((String, i32), PartitionResume)>, has_transaction_topic: bool) -> Self {
        let (names, ledgers): (Vec<_>, Vec<_>) =
            partitions.into_iter().map(|(name, resume)| (name, PartitionLedger::resuming(&resume))).unzip();
        let mut by_name: Vec<usize> = (0..names.len()).collect();
        by_name.sort_by(|a, b| names[*a].cmp(&names[*b]));
        Self {
            names,
            by_name,
            ledgers,
            transaction_partition: has_transaction_topic.then_some(0),
            awaiting_transaction_topic: false,
            transactions: HashMap::new(),
            ends: VecDeque::new(),
            ready: VecDeque::new(),
            held_bytes: 0,
            held_bytes_peak: 0,
            released: ReleasedIds::new(),
            duplicates: 0,
        }
    }

    /// Records dropped as second copies (Debezium's resends after a Connect restart).
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Adds a partition that appeared while running (a new table's topic).
    pub fn add_partition(&mut self, name: (String, i32), resume: PartitionResume) -> usize {
        self.names.push(name);
        self.ledgers.push(PartitionLedger::resuming(&resume));
        let index = self.names.len() - 1;
        let at = self.by_name.partition_point(|i| self.names[*i] < self.names[index]);
        self.by_name.insert(at, index);
        index
    }

    /// Adds the transaction topic's (single) partition once it appeared.
    pub fn add_transaction_partition(&mut self, name: (String, i32), resume: PartitionResume) -> usize {
        let index = self.add_partition(name, resume);
        self.transaction_partition = Some(index);
        self.awaiting_transaction_topic = false;
        index
    }

    /// The transaction topic's partition index, once it is read.
    pub fn transaction_partition(&self) -> Option<usize> {
        self.transaction_partition
    }

    /// Whether events wait for a transaction topic that is not read yet.
    pub fn awaits_transaction_topic(&self) -> bool {
        self.awaiting_transaction_topic
    }

    /// Every record of `partition` below this offset is finished.
    pub fn applied_offset(&self, partition: usize) -> i64 {
        self.ledgers[partition].floor()
    }

    pub fn name(&self, partition: usize) -> (&str, i32) {
        let (topic, number) = &self.names[partition];
        (topic, *number)
    }

    pub fn partitions(&self) -> usize {
        self.names.len()
    }

    /// The offset `partition` is to be read from next.
    pub fn next_offset(&self, partition: usize) -> i64 {
        self.ledgers[partition].next()
    }

    /// A record of the transaction topic.
    pub fn marker(&mut self, offset: i64, marker: Marker, line: Line) {
        let Some(tp) = self.transaction_partition else { return };
        match self.ledgers[tp].take(offset) {
            Taken::New => {}
            Taken::AppliedBefore => return self.ledgers[tp].finish(offset),
            Taken::Again => return,
        }
        let bytes = line.len();
        let id = match &marker {
            Marker::Begin { id } | Marker::End { id, .. } => id,
        };
        if self.released.contains(id) {
            // A second copy of a released transaction's BEGIN or END.
            self.duplicates += 1;
            self.ledgers[tp].finish(offset);
            return;
        }
        match marker {
            Marker::Begin { id } => {
                let transaction = self.transactions.entry(id).or_insert_with(HeldTransaction::new);
                if transaction.begin.is_some() || transaction.end.is_some() {
                    // A repeated BEGIN (a producer retry): the first copy stands.
                    self.ledgers[tp].finish(offset);
                    return;
                }
                transaction.begin = Some((offset, line));
                transaction.bytes += bytes;
                self.ledgers[tp].hold(offset);
            }
            Marker::End { id, event_count } => {
                let transaction = self.transactions.entry(id.clone()).or_insert_with(HeldTransaction::new);
                if transaction.end.is_some() {
                    self.ledgers[tp].finish(offset);
                    return;
                }
                transaction.end = Some((offset, line, event_count));
                transaction.bytes += bytes;
                self.ledgers[tp].hold(offset);
                self.ends.push_back(id);
            }
        }
        self.held_bytes += bytes;
        self.release();
    }

    /// A change event (or a tombstone: `line` `None`) of data partition `partition`,
    /// with its transaction id when it carries transaction metadata.
    pub fn event(&mut self, partition: usize, offset: i64, transaction: Option<EventTransaction>, line: Option<Line>) -> Result<(), String> {
        match self.ledgers[partition].take(offset) {
            Taken::New => {}
            Taken::AppliedBefore => {
                self.ledgers[partition].finish(offset);
                return Ok(());
            }
            Taken::Again => return Ok(()),
        }
        let Some(line) = line else {
            self.ledgers[partition].finish(offset); // a tombstone: nothing to apply
            self.extend_last_resume();
            return Ok(());
        };
        match transaction {
            Some(EventTransaction { id, total_order }) => {
                if self.released.contains(&id) {
                    // A second copy of an event of a released transaction.
                    self.duplicates += 1;
                    self.ledgers[partition].finish(offset);
                    return Ok(());
                }
                // Without a transaction topic yet, the event waits for it: Debezium
                // creates it at the first transaction it streams, so it may appear
                // a moment after this event.
                self.awaiting_transaction_topic |= self.transaction_partition.is_none();
                let transaction = self.transactions.entry(id).or_insert_with(HeldTransaction::new);
                if !transaction.first_copy(total_order) {
                    self.duplicates += 1;
                    self.ledgers[partition].finish(offset);
                    return Ok(());
                }
                self.held_bytes += line.len();
                self.held_bytes_peak = self.held_bytes_peak.max(self.held_bytes);
                transaction.hold(HeldEvent { partition, offset, line });
                self.ledgers[partition].hold(offset);
                self.release();
            }
            None => {
                // No transaction metadata: the event is its own transaction.
                self.ledgers[partition].finish(offset);
                let resume = Some(self.resume_text());
                self.ready.push_back(Ready { line, partition, offset, resume });
            }
        }
        Ok(())
    }

    /// Moves every complete transaction at the head of the END order to `ready`.
    fn release(&mut self) {
        // Only a transaction topic's END puts an id in `ends`.
        let Some(tp) = self.transaction_partition else { return };
        while let Some(id) = self.ends.front() {
            if !self.transactions.get(id).is_some_and(HeldTransaction::complete) {
                return;
            }
            let Some(id) = self.ends.pop_front() else { return };
            let Some(transaction) = self.transactions.remove(&id) else { return };
            self.held_bytes -= transaction.bytes;
            self.released.insert(&id);
            match transaction.begin {
                Some((offset, line)) => {
                    self.ledgers[tp].finish(offset);
                    self.ready.push_back(Ready { line, partition: tp, offset, resume: None });
                }
                // Its BEGIN was read before a restart of Kafka Connect, which then
                // sent the events again and the END (Debezium restores the open
                // transaction from its flushed offsets and does not repeat the BEGIN).
                // The END's count says the events are all here: the transaction is
                // whole, and the sink still checks its order (an applied one is a
                // duplicate) and counts.
                None => {
                    let offset = transaction.end.as_ref().map_or(0, |(offset, _, _)| *offset);
                    let line = Line::plain(synthetic_begin(&id));
                    self.ready.push_back(Ready { line, partition: tp, offset, resume: None });
                }
            }
            for event in transaction.events {
                self.ledgers[event.partition].finish(event.offset);
                self.ready.push_back(Ready { line: event.line, partition: event.partition, offset: event.offset, resume: None });
            }
            if let Some((offset, line, _)) = transaction.end {
                self.ledgers[tp].finish(offset);
                let resume = Some(self.resume_text());
                self.ready.push_back(Ready { line, partition: tp, offset, resume });
            }
        }
    }

    /// After a no-op record (a tombstone) finished: when the newest line waiting for
    /// the sink ends a mirror transaction, its resume position now covers the no-op
    /// too, so the position (and the group's committed offset) does not stay one
    /// record behind after Debezium's delete + tombstone pair until the next
    /// transaction. Nothing is held between them, so the invariant holds.
    fn extend_last_resume(&mut self) {
        if self.ready.back().is_some_and(|last| last.resume.is_some()) {
            let resume = self.resume_text();
            if let Some(last) = self.ready.back_mut() {
                last.resume = Some(resume);
            }
        }
    }

    pub fn pop_ready(&mut self) -> Option<Ready> {
        self.ready.pop_front()
    }

    /// Where every partition resumes once everything released so far is applied.
    pub fn resume_offsets(&self) -> ResumeOffsets {
        ResumeOffsets(self.names.iter().cloned().zip(self.ledgers.iter().map(PartitionLedger::resume)).collect())
    }

    /// [`Self::resume_offsets`] as the text recorded with a transaction, written
    /// straight from the ledgers (once per released transaction: no map, no name
    /// copies).
    fn resume_text(&self) -> String {
        let mut out = String::with_capacity(self.names.len() * 32);
        for &index in &self.by_name {
            let (topic, partition) = &self.names[index];
            self.ledgers[index].write_resume(&mut out, topic, *partition);
        }
        out
    }

    /// Since when the transaction [`Self::oldest_waiting`] would describe has waited
    /// (cheap: checked at every idle moment).
    pub fn waiting_since(&self) -> Option<Instant> {
        match self.ends.front().and_then(|id| self.transactions.get(id)) {
            Some(head) => Some(head.first_seen),
            None => self.transactions.values().map(|t| t.first_seen).min(),
        }
    }

    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    pub fn held_bytes_peak(&self) -> usize {
        self.held_bytes_peak
    }

    pub fn held_transactions(&self) -> usize {
        self.transactions.len()
    }

    /// Records held in `partition` that the next transaction to release does not
    /// need: the partition runs ahead of it, and reading more of it only adds memory.
    pub fn runs_ahead(&self, partition: usize) -> bool {
        let held = self.ledgers[partition].held();
        let for_head = self
            .ends
            .front()
            .and_then(|id| self.transactions.get(id))
            .map_or(0, |t| t.events_from(partition));
        held > for_head
    }

    /// The transaction that has held memory longest without completing.
    pub fn oldest_waiting(&self) -> Option<Waiting> {
        let (id, transaction) = match self.ends.front().and_then(|id| self.transactions.get_key_value(id)) {
            Some(head) => head,
            None => self.transactions.iter().min_by_key(|(_, t)| t.first_seen)?,
        };
        let mut detail = String::new();
        match &transaction.end {
            Some((_, _, count)) => {
                let _ = write!(detail, "its END says {count} events, {} arrived", transaction.events.len());
            }
            None => {
                let _ = write!(detail, "{} events arrived, but no END", transaction.events.len());
            }
        }
        let per_partition: Vec<(usize, u32)> =
            transaction.per_partition.iter().copied().enumerate().filter(|(_, count)| *count > 0).collect();
        if !per_partition.is_empty() {
            detail.push_str(" (");
            for (i, (partition, count)) in per_partition.iter().enumerate() {
                let (topic, number) = self.name(*partition);
                let _ = write!(detail, "{}{count} from {topic} partition {number}", if i > 0 { ", " } else { "" });
            }
            detail.push(')');
        }
        Some(Waiting { id: id.clone(), first_seen: transaction.first_seen, has_end: transaction.end.is_some(), detail })
    }
}

/// A BEGIN record for transaction `id`, as Debezium writes one.
fn synthetic_begin(id: &str) -> String {
    let id = serde_json::Value::String(id.to_string());
    format!(r#"{{"status":"BEGIN","id":{id},"event_count":null,"data_collections":null}}"#)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reassembly(data_partitions: usize) -> Reassembly {
        let mut partitions = vec![(("srv.transaction".to_string(), 0), PartitionResume::default())];
        for p in 0..data_partitions {
            partitions.push(((format!("srv.public.t{p}"), 0), PartitionResume::default()));
        }
        Reassembly::new(partitions, true)
    }

    fn drain(r: &mut Reassembly) -> Vec<(String, Option<String>)> {
        std::iter::from_fn(|| r.pop_ready()).map(|ready| (ready.line.text().to_string(), ready.resume)).collect()
    }

    #[test]
    fn a_transaction_is_released_once_its_end_and_all_its_events_arrived() {
        let mut r = reassembly(2);
        // An event before its BEGIN is held.
        r.event(2, 0, Some("tx1".into()), Some("e2".into())).unwrap();
        r.marker(0, Marker::Begin { id: "tx1".into() }, "begin".into());
        r.marker(1, Marker::End { id: "tx1".into(), event_count: 2 }, "end".into());
        assert!(drain(&mut r).is_empty(), "one event still missing");
        assert_eq!(r.resume_offsets().encode(), "srv.public.t0/0=0,srv.public.t1/0=0,srv.transaction/0=0");
        r.event(1, 0, Some("tx1".into()), Some("e1".into())).unwrap();
        let lines = drain(&mut r);
        let texts: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(texts, ["begin", "e2", "e1", "end"]);
        assert_eq!(lines[3].1.as_deref(), Some("srv.public.t0/0=1,srv.public.t1/0=1,srv.transaction/0=2"));
        assert!(lines[..3].iter().all(|(_, resume)| resume.is_none()));
        assert_eq!((r.held_bytes(), r.held_transactions()), (0, 0));
    }

    #[test]
    fn transactions_are_released_in_the_transaction_topics_order() {
        let mut r = reassembly(1);
        r.marker(0, Marker::Begin { id: "a".into() }, "begin a".into());
        r.marker(1, Marker::End { id: "a".into(), event_count: 1 }, "end a".into());
        r.marker(2, Marker::Begin { id: "b".into() }, "begin b".into());
        r.marker(3, Marker::End { id: "b".into(), event_count: 1 }, "end b".into());
        // b's event comes first (the producer reordered): b waits for a.
        r.event(1, 0, Some("b".into()), Some("b1".into())).unwrap();
        assert!(drain(&mut r).is_empty());
        assert!(r.runs_ahead(1), "partition 1 holds only what a later transaction needs");
        r.event(1, 1, Some("a".into()), Some("a1".into())).unwrap();
        let lines = drain(&mut r);
        let texts: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(texts, ["begin a", "a1", "end a", "begin b", "b1", "end b"]);
        // After a alone, offset 0 of the data partition (b's event) was not applied yet,
        // but offset 1 (a's) was.
        assert_eq!(lines[2].1.as_deref(), Some("srv.public.t0/0=0+1,srv.transaction/0=2"));
        assert_eq!(lines[5].1.as_deref(), Some("srv.public.t0/0=2,srv.transaction/0=4"));
    }

    #[test]
    fn events_without_metadata_are_their_own_transactions_and_tombstones_are_skipped() {
        let mut r = Reassembly::new(vec![(("srv.public.t".to_string(), 0), PartitionResume::default())], false);
        r.event(0, 0, None, Some("e0".into())).unwrap();
        r.event(0, 1, None, None).unwrap();
        r.event(0, 2, None, Some("e2".into())).unwrap();
        let lines = drain(&mut r);
        // The tombstone after e0 is covered by e0's position: nothing is left between.
        assert_eq!(lines, [("e0".into(), Some("srv.public.t/0=2".into())), ("e2".into(), Some("srv.public.t/0=3".into()))]);
        // A tombstone after the sink took the line leaves the position as it was.
        r.event(0, 3, None, None).unwrap();
        assert!(drain(&mut r).is_empty());
        assert!(!r.awaits_transaction_topic());
    }

    /// Debezium creates its transaction topic only at the first transaction after
    /// its snapshot: a source started before that holds the events that name a
    /// transaction until the topic appears, then releases them whole.
    #[test]
    fn events_of_a_transaction_wait_for_a_transaction_topic_that_appears_later() {
        let mut r = Reassembly::new(vec![(("srv.public.t".to_string(), 0), PartitionResume::default())], false);
        r.event(0, 0, None, Some("snapshot row".into())).unwrap();
        r.event(0, 1, Some("tx9".into()), Some("e1".into())).unwrap();
        r.event(0, 2, Some("tx9".into()), Some("e2".into())).unwrap();
        let lines = drain(&mut r);
        assert_eq!(lines, [("snapshot row".into(), Some("srv.public.t/0=1".into()))], "the transaction's events wait");
        assert!(r.awaits_transaction_topic());
        assert_eq!(r.resume_offsets().encode(), "srv.public.t/0=1", "nothing held is acknowledged");
        let tp = r.add_transaction_partition(("srv.transaction".to_string(), 0), PartitionResume::default());
        assert!(!r.awaits_transaction_topic());
        r.marker(0, Marker::Begin { id: "tx9".into() }, "begin".into());
        r.marker(1, Marker::End { id: "tx9".into(), event_count: 2 }, "end".into());
        let lines = drain(&mut r);
        let texts: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(texts, ["begin", "e1", "e2", "end"]);
        assert_eq!(lines[3].1.as_deref(), Some("srv.public.t/0=3,srv.transaction/0=2"));
        assert_eq!(r.transaction_partition(), Some(tp));
    }

    /// After Kafka Connect restarts, Debezium sends a transaction's events again and
    /// its END, without its BEGIN (read before the restart, and released with the
    /// first copy): the transaction still goes out whole, with a BEGIN of its own.
    #[test]
    fn a_transaction_whose_begin_came_before_a_restart_is_released_whole() {
        let mut r = reassembly(1);
        r.event(1, 0, Some("571".into()), Some("e1".into())).unwrap();
        r.event(1, 1, Some("571".into()), Some("e2".into())).unwrap();
        r.marker(0, Marker::End { id: "571".into(), event_count: 2 }, "end".into());
        let lines = drain(&mut r);
        let texts: Vec<&str> = lines.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(texts, [r#"{"status":"BEGIN","id":"571","event_count":null,"data_collections":null}"#, "e1", "e2", "end"]);
        assert_eq!(lines[3].1.as_deref(), Some("srv.public.t0/0=2,srv.transaction/0=1"));
        let decoded = crate::debezium::decode_line(texts[0]).expect("the synthetic BEGIN decodes");
        assert!(matches!(decoded, crate::debezium::Message::Begin { id } if id == "571"));
    }

    fn numbered(id: &str, total_order: u64) -> Option<EventTransaction> {
        Some(EventTransaction { id: id.into(), total_order: Some(total_order) })
    }

    /// What Debezium sent after a SIGKILL of its Kafka Connect worker whose last
    /// flushed offset lay inside transaction 765 (captured:
    /// tests/data/debezium_connect_restart_offset_in_txn.jsonl): events from the
    /// flushed one on again, one of them a second copy, and a second identical END.
    /// The copy is not counted; the transaction goes out once, whole.
    #[test]
    fn events_sent_again_after_a_connect_restart_are_counted_once() {
        let mut r = reassembly(1);
        r.marker(0, Marker::Begin { id: "765".into() }, "begin".into());
        for order in 1..=8 {
            r.event(1, order as i64 - 1, numbered("765", order), Some(format!("e{order}").into())).unwrap();
        }
        r.marker(1, Marker::End { id: "765".into(), event_count: 10 }, "end".into());
        // The restart: 8 again, then 9 and 10 for the first time, then the END again.
        for (offset, order) in [(8, 8), (9, 9), (10, 10)] {
            r.event(1, offset, numbered("765", order), Some(format!("e{order}").into())).unwrap();
        }
        r.marker(2, Marker::End { id: "765".into(), event_count: 10 }, "end".into());
        let texts: Vec<String> = drain(&mut r).into_iter().map(|(line, _)| line).collect();
        let expected: Vec<String> =
            ["begin"].into_iter().map(String::from).chain((1..=10).map(|n| format!("e{n}"))).chain(["end".to_string()]).collect();
        assert_eq!(texts, expected);
        assert_eq!(r.duplicates(), 2, "the second e8 and the second END");
        assert_eq!(r.resume_offsets().encode(), "srv.public.t0/0=11,srv.transaction/0=3", "the copies are passed over");
        // A whole transaction sent again (BEGIN, events, END) after it was released.
        r.marker(3, Marker::Begin { id: "765".into() }, "begin".into());
        r.event(1, 11, numbered("765", 1), Some("e1".into())).unwrap();
        r.marker(4, Marker::End { id: "765".into(), event_count: 10 }, "end".into());
        assert!(drain(&mut r).is_empty(), "nothing of it goes out twice");
        assert_eq!(r.held_transactions(), 0);
        assert_eq!(r.resume_offsets().encode(), "srv.public.t0/0=12,srv.transaction/0=5");
    }

    /// The real thing: what Debezium 3.6.1 on Kafka Connect 4.3 sent around a SIGKILL
    /// of its worker (captured by scripts/services/debezium_restart_probe.py), fed in
    /// the order the records reached the broker. Every transaction goes out exactly
    /// once, with as many distinct events as its END counts.
    #[test]
    fn captured_connect_restarts_release_every_transaction_once_and_whole() {
        for capture in ["debezium_connect_restart.jsonl", "debezium_connect_restart_offset_in_txn.jsonl"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(capture);
            let text = std::fs::read_to_string(&path).expect("the capture");
            let mut records: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("a record")).collect();
            records.retain(|r| r["topic"].as_str().is_some_and(|t| t.starts_with("dbz.")));
            records.sort_by_key(|r| (r["timestamp"].as_i64(), r["offset"].as_i64()));
            let mut topics: Vec<String> = records.iter().filter_map(|r| r["topic"].as_str().map(str::to_string)).collect();
            topics.sort();
            topics.dedup();
            topics.retain(|t| t != "dbz.transaction");
            let mut partitions = vec![(("dbz.transaction".to_string(), 0), PartitionResume::default())];
            partitions.extend(topics.iter().map(|t| ((t.clone(), 0), PartitionResume::default())));
            let mut r = Reassembly::new(partitions, true);
            let mut ends = std::collections::BTreeMap::new();
            for record in &records {
                let (topic, offset) = (record["topic"].as_str().expect("topic"), record["offset"].as_i64().expect("offset"));
                let value = record["value"].as_str();
                if topic == "dbz.transaction" {
                    let Some(value) = value else { continue };
                    let marker = crate::source::kafka::peek::marker(value).expect("a marker");
                    if let Marker::End { id, event_count } = &marker {
                        ends.insert(id.clone(), *event_count);
                    }
                    r.marker(offset, marker, value.into());
                } else {
                    let partition = 1 + topics.iter().position(|t| t == topic).expect("known topic");
                    let transaction = value.and_then(|v| crate::source::kafka::peek::transaction(v.as_bytes()).expect("peek"));
                    r.event(partition, offset, transaction, value.map(Line::from)).expect("event");
                }
            }
            let mut released: std::collections::BTreeMap<String, Vec<u64>> = std::collections::BTreeMap::new();
            let mut current: Option<String> = None;
            while let Some(ready) = r.pop_ready() {
                let text = ready.line.text().to_string();
                match crate::debezium::decode_line(&text) {
                    Ok(crate::debezium::Message::Begin { id }) => {
                        assert!(!released.contains_key(&id), "{capture}: transaction {id} released twice");
                        released.insert(id.clone(), Vec::new());
                        current = Some(id);
                    }
                    Ok(crate::debezium::Message::End { id, .. }) => assert_eq!(current.take().as_ref(), Some(&id)),
                    _ => {
                        let transaction = crate::source::kafka::peek::transaction(text.as_bytes()).expect("peek");
                        if let (Some(id), Some(t)) = (&current, transaction) {
                            released.get_mut(id).expect("open").push(t.total_order.expect("numbered"));
                        }
                    }
                }
            }
            assert!(!released.is_empty(), "{capture}: transactions came out");
            for (id, mut orders) in released {
                orders.sort_unstable();
                let expected: Vec<u64> = (1..=ends[&id]).collect();
                assert_eq!(orders, expected, "{capture}: transaction {id} whole, each event once");
            }
            assert!(r.duplicates() > 0, "{capture}: the restart's second copies were recognized");
            assert_eq!(r.held_transactions(), 0, "{capture}: nothing left waiting");
        }
    }

    #[test]
    fn the_tombstone_after_a_transactions_last_delete_moves_its_position_past_it() {
        let mut r = reassembly(1);
        r.marker(0, Marker::Begin { id: "d".into() }, "begin d".into());
        r.marker(1, Marker::End { id: "d".into(), event_count: 1 }, "end d".into());
        // The delete completes the transaction; its tombstone is the next record.
        r.event(1, 0, Some("d".into()), Some("delete".into())).unwrap();
        r.event(1, 1, None, None).unwrap();
        let lines = drain(&mut r);
        assert_eq!(lines.last().and_then(|(_, resume)| resume.as_deref()), Some("srv.public.t0/0=2,srv.transaction/0=2"));
    }

    #[test]
    fn a_restart_skips_what_the_previous_run_applied() {
        let resume = ResumeOffsets::decode("srv.public.t0/0=0+1,srv.transaction/0=2").unwrap();
        let mut r = Reassembly::new(resume.0.into_iter().rev().collect(), true);
        r.marker(2, Marker::Begin { id: "b".into() }, "begin b".into());
        r.marker(3, Marker::End { id: "b".into(), event_count: 1 }, "end b".into());
        r.event(1, 0, Some("b".into()), Some("b1".into())).unwrap();
        r.event(1, 1, Some("a".into()), Some("a1".into())).unwrap(); // applied before: skipped
        let texts: Vec<String> = drain(&mut r).into_iter().map(|(l, _)| l).collect();
        assert_eq!(texts, ["begin b", "b1", "end b"]);
        assert_eq!(r.held_transactions(), 0, "the skipped event opened nothing");
    }

    #[test]
    fn the_oldest_waiting_transaction_says_what_it_waits_for() {
        let mut r = reassembly(1);
        r.marker(0, Marker::Begin { id: "tx7".into() }, "b".into());
        r.marker(1, Marker::End { id: "tx7".into(), event_count: 3 }, "e".into());
        r.event(1, 0, Some("tx7".into()), Some("x".into())).unwrap();
        let waiting = r.oldest_waiting().unwrap();
        assert_eq!(waiting.id, "tx7");
        assert!(waiting.has_end);
        assert_eq!(waiting.detail, "its END says 3 events, 1 arrived (1 from srv.public.t0 partition 0)");
    }

    /// Counted per partition as events arrive: the detail and back-pressure agree
    /// with the events held, however they interleave.
    #[test]
    fn a_waiting_transaction_is_counted_per_partition() {
        let mut r = reassembly(3);
        r.marker(0, Marker::Begin { id: "tx8".into() }, "b".into());
        r.marker(1, Marker::End { id: "tx8".into(), event_count: 6 }, "e".into());
        for (partition, offset) in [(3, 0), (1, 0), (3, 1), (3, 2), (1, 1)] {
            r.event(partition, offset, Some("tx8".into()), Some("x".into())).unwrap();
        }
        let waiting = r.oldest_waiting().unwrap();
        assert_eq!(
            waiting.detail,
            "its END says 6 events, 5 arrived (2 from srv.public.t0 partition 0, 3 from srv.public.t2 partition 0)"
        );
        assert!(!r.runs_ahead(1) && !r.runs_ahead(2) && !r.runs_ahead(3), "everything held is the head's");
        r.event(2, 0, Some("tx9".into()), Some("y".into())).unwrap();
        assert!(r.runs_ahead(2), "partition 2 holds only a later transaction's event");
    }
}
