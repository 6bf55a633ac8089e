//! One task per partition: fetches records from the broker into the source's queue,
//! from where a restart resumes, pausing while the reassembly says the partition runs
//! ahead.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Sender, TrySendError};
use rskafka::client::partition::{OffsetAt, PartitionClient};

use super::ready::Preparer;
use super::{Fetched, FetchedRecords};

/// What the source thread controls a fetcher with.
pub(super) struct Controls {
    pub sender: Sender<Fetched>,
    pub stop: Arc<AtomicBool>,
    pub paused: Arc<AtomicBool>,
    /// How long a fetch waits on the broker for new records (`fetch_wait_ms=`).
    pub wait_ms: i32,
    /// Bytes asked of the partition per fetch (`max_partition_fetch_bytes=`).
    pub max_bytes: i32,
    pub stats: Arc<FetchStats>,
    /// Makes the partition's records ready for the source thread.
    pub preparer: Preparer,
}

/// Where fetchers spend their time, summed over all partitions: what tells a replay
/// that waits on the broker from one that waits on the source thread
/// (`RETINA_KAFKA_TRACE=1` prints it when the source closes).
#[derive(Default)]
pub(super) struct FetchStats {
    fetches: AtomicU64,
    empty_fetches: AtomicU64,
    records: AtomicU64,
    value_bytes: AtomicU64,
    /// Waiting for the broker's answers.
    fetch_micros: AtomicU64,
    /// Paused by back-pressure.
    paused_micros: AtomicU64,
    /// Waiting for room in the source thread's queue.
    hand_over_micros: AtomicU64,
    /// With `RETINA_KAFKA_TRACE`: for each fetch with records, when it arrived
    /// (seconds since the source started) and how old (ms, by the record's
    /// timestamp) its oldest record was then. Tells how much of a live stream's
    /// freshness is spent before the mirror has the record.
    arrival_ages_ms: Option<(Instant, Mutex<Vec<(u32, u32)>>)>,
}

impl FetchStats {
    pub fn new(trace: bool) -> Self {
        Self { arrival_ages_ms: trace.then(|| (Instant::now(), Mutex::default())), ..Self::default() }
    }

    pub fn describe(&self) -> String {
        let (fetches, records) = (self.fetches.load(Relaxed), self.records.load(Relaxed));
        let seconds = |micros: &AtomicU64| micros.load(Relaxed) as f64 / 1e6;
        format!(
            "{fetches} fetches ({} empty), {records} records, {:.1} MB of values ({:.0} KB a fetch with records); \
             fetcher seconds summed over partitions: {:.2} waiting for the broker, {:.2} paused, {:.2} waiting for the source thread",
            self.empty_fetches.load(Relaxed),
            self.value_bytes.load(Relaxed) as f64 / 1e6,
            self.value_bytes.load(Relaxed) as f64 / 1e3 / (fetches - self.empty_fetches.load(Relaxed)).max(1) as f64,
            seconds(&self.fetch_micros),
            seconds(&self.paused_micros),
            seconds(&self.hand_over_micros),
        ) + &self.describe_arrival_ages()
    }

    fn note_arrival(&self, oldest_timestamp_ms: i64) {
        let Some((started, ages)) = &self.arrival_ages_ms else { return };
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        if let Ok(mut ages) = ages.lock() {
            ages.push((started.elapsed().as_secs() as u32, u32::try_from(now_ms - oldest_timestamp_ms).unwrap_or(0)));
        }
    }

    /// Median and maximum arrival age per second of the source's life.
    fn describe_arrival_ages(&self) -> String {
        match self.arrival_ages_ms.as_ref().map(|(_, ages)| ages.lock().map(|a| a.clone())) {
            Some(Ok(ages)) => ages_by_second(ages),
            _ => String::new(),
        }
    }
}

/// `(second, age)` samples as `; … by second (median/max ms): 0s:M/X 1s:…`.
fn ages_by_second(ages: Vec<(u32, u32)>) -> String {
    let mut by_second: std::collections::BTreeMap<u32, Vec<u32>> = std::collections::BTreeMap::new();
    for (second, age) in ages {
        by_second.entry(second).or_default().push(age);
    }
    let mut out = String::from("; oldest record's age on arrival by second (median/max ms):");
    for (second, mut ages) in by_second {
        ages.sort_unstable();
        out.push_str(&format!(" {second}s:{}/{}", ages[ages.len() / 2], ages[ages.len() - 1]));
    }
    out
}

fn add_elapsed(counter: &AtomicU64, since: Instant) {
    counter.fetch_add(since.elapsed().as_micros() as u64, Relaxed);
}

/// Fetches partition `partition` from `offset` on until stopped or failed (the
/// failure is the last thing sent).
pub(super) async fn run(client: PartitionClient, partition: usize, mut offset: i64, controls: Controls) {
    let Controls { sender, stop, paused, wait_ms, max_bytes, stats, mut preparer } = controls;
    let (topic, number) = (client.topic().to_string(), client.partition());
    match batch_start(&client, offset, max_bytes).await {
        Ok(start) => offset = start,
        Err(reason) => {
            let _ = hand_over(&sender, Fetched { partition, result: Err(format!("topic {topic} partition {number}: {reason}")) }).await;
            return;
        }
    }
    let mut known_high_watermark = -1;
    // The last answer handed over held records: the next empty one is handed over
    // too, telling the source the partition is read to its end.
    let mut handed_records = false;
    // Records are known to wait past `offset` (the last fetch returned some and the
    // high watermark lies beyond them): the next fetch need not wait for new ones.
    // tansu 0.6 holds a fetch for its whole wait unless it fills the maximum size,
    // even when records are there, so a backlog read with the long-poll wait took
    // 100 ms a fetch (measured: 79K row changes/s against 128K/s without it).
    let mut behind = false;
    while !stop.load(Relaxed) {
        if paused.load(Relaxed) {
            let since = Instant::now();
            tokio::time::sleep(Duration::from_millis(5)).await;
            add_elapsed(&stats.paused_micros, since);
            continue;
        }
        let started = Instant::now();
        let result = client.fetch_records(offset, 1..max_bytes, if behind { 0 } else { wait_ms }).await;
        add_elapsed(&stats.fetch_micros, started);
        stats.fetches.fetch_add(1, Relaxed);
        let result = match result {
            Ok((mut records, high_watermark)) => {
                let empty = records.is_empty();
                if empty {
                    stats.empty_fetches.fetch_add(1, Relaxed);
                }
                stats.records.fetch_add(records.len() as u64, Relaxed);
                let bytes: usize = records.iter().map(|r| r.record.value.as_ref().map_or(0, Vec::len)).sum();
                stats.value_bytes.fetch_add(bytes as u64, Relaxed);
                // tansu 0.6 may answer with record batches out of offset order.
                records.sort_unstable_by_key(|r| r.offset);
                if let Some(first) = records.first() {
                    stats.note_arrival(first.record.timestamp.timestamp_millis());
                }
                if let Some(last) = records.last() {
                    offset = offset.max(last.offset + 1);
                }
                behind = !empty && high_watermark > offset;
                if empty && started.elapsed() < Duration::from_millis(2) {
                    // A broker that answers an empty fetch at once (no long poll).
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                if empty && high_watermark == known_high_watermark && !handed_records {
                    continue; // nothing new to tell
                }
                known_high_watermark = high_watermark;
                handed_records = !empty;
                let last_timestamp_ms = records.last().map(|r| r.record.timestamp.timestamp_millis());
                Ok(FetchedRecords { records: preparer.prepare(records), high_watermark, last_timestamp_ms })
            }
            Err(error) => Err(describe_fetch_error(&topic, number, offset, &error)),
        };
        let failed = result.is_err();
        let since = Instant::now();
        let handed_over = hand_over(&sender, Fetched { partition, result }).await;
        add_elapsed(&stats.hand_over_micros, since);
        if !handed_over || failed {
            return;
        }
    }
}

/// Queues `fetched` for the source thread, waiting while the queue is full without
/// blocking the runtime's thread (which the source thread itself needs for its own
/// requests, e.g. starting a fetcher for a new topic, while the queue is full);
/// `false` once the source is gone.
async fn hand_over(sender: &Sender<Fetched>, mut fetched: Fetched) -> bool {
    loop {
        match sender.try_send(fetched) {
            Ok(()) => return true,
            Err(TrySendError::Disconnected(_)) => return false,
            Err(TrySendError::Full(again)) => {
                fetched = again;
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

/// Where to fetch from to read `floor` again. Kafka answers a fetch at any offset
/// with the record batch holding it; some brokers (tansu 0.6) answer only from a
/// batch's first offset and return nothing for one inside it, which would silently
/// skip the rest of that batch. So when `floor` is not what comes back, the fetch
/// steps back (64, 512, … records, down to the log's start) until a batch holding
/// `floor` or an earlier offset comes back; the ledger drops what lies below
/// `floor`.
async fn batch_start(client: &PartitionClient, floor: i64, max_bytes: i32) -> Result<i64, String> {
    let first_at = |at: i64| async move {
        client.fetch_records(at, 1..max_bytes, 0).await.map(|(records, high_watermark)| (records.first().map(|r| r.offset), high_watermark))
    };
    let (first, high_watermark) = first_at(floor).await.map_err(|e| format!("fetching from offset {floor} failed: {e}"))?;
    if high_watermark <= floor || first.is_some_and(|first| first <= floor) {
        return Ok(floor);
    }
    let earliest = client.get_offset(OffsetAt::Earliest).await.map_err(|e| format!("cannot read its first offset: {e}"))?;
    let mut back = 64;
    loop {
        let at = (floor - back).max(earliest);
        let (first, _) = first_at(at).await.map_err(|e| format!("fetching from offset {at} failed: {e}"))?;
        if first.is_some_and(|first| first <= floor) {
            return Ok(at);
        }
        if at == earliest {
            // Nothing at or before `floor` comes back: the records from `floor` on
            // start a later batch (a gap Kafka itself leaves, e.g. after compaction).
            return Ok(floor);
        }
        back *= 8;
    }
}

fn describe_fetch_error(topic: &str, partition: i32, offset: i64, error: &rskafka::client::error::Error) -> String {
    use rskafka::client::error::{Error, ProtocolError};
    match error {
        Error::ServerError { protocol_error: ProtocolError::OffsetOutOfRange, .. } => format!(
            "topic {topic} partition {partition}: offset {offset} no longer exists on the broker (removed by retention \
             or deletion) before it was applied; the mirror would miss those records, so the source stops here"
        ),
        Error::ServerError { protocol_error: ProtocolError::UnknownTopicOrPartition, .. } => {
            format!("topic {topic} partition {partition} no longer exists on the broker (deleted?) at offset {offset}")
        }
        other => format!("topic {topic} partition {partition}: fetching from offset {offset} failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrival_ages_are_summed_up_per_second_with_median_and_maximum() {
        let ages = vec![(1, 40), (0, 5), (1, 10), (0, 7), (1, 20), (0, 6)];
        assert_eq!(ages_by_second(ages), "; oldest record's age on arrival by second (median/max ms): 0s:6/7 1s:20/40");
        let stats = FetchStats::new(true);
        let now_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        stats.note_arrival(now_ms - 250);
        let described = stats.describe();
        let age: u32 = described.rsplit("0s:").next().and_then(|a| a.split('/').next()).and_then(|a| a.parse().ok()).unwrap_or(0);
        assert!((250..1_000).contains(&age), "{described}");
        assert!(!FetchStats::new(false).describe().contains("age"), "no ages without the trace");
    }
}
