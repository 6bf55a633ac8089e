//! What every source publishes about itself while it runs (the `retina.sources` view,
//! `/metrics`, benchmarks): one type for all source kinds, so a new source fills the
//! same fields instead of inventing its own.

use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::RwLock;

/// The state of one source.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceStatus {
    /// The name the engine records positions under.
    pub name: String,
    /// The URI it was configured with.
    pub uri: String,
    /// Phase: `starting`, `copying`, `running`/`streaming`, `caught up`,
    /// `finished`, `stopped` or `failed`.
    pub state: String,
    /// The source position a checkpoint made durable: what was acknowledged to the
    /// source (a crash recovers to it and replays from there).
    pub durable_position: Option<String>,
    /// Messages read from the source (change events, markers, tombstones).
    pub messages: u64,
    /// Transactions submitted so far.
    pub transactions: u64,
    /// Row changes submitted so far.
    pub row_changes: u64,
    /// Transactions received again (after a restart) and dropped as already applied.
    pub duplicate_transactions: u64,
    /// Messages diverted or tolerated instead of applied as sent (dead letters,
    /// `on_absent_row=upsert` adjustments): never silent, always counted here.
    pub diverted: u64,
    /// How far behind the source's head the sink is, in transactions (when known).
    pub lag_transactions: Option<u64>,
    /// How far behind the source's log head the mirror is, in bytes (PostgreSQL: WAL).
    pub lag_bytes: Option<u64>,
    /// Milliseconds since the newest applied source transaction committed, while
    /// behind (0 when caught up); from source commit timestamps.
    pub lag_millis: Option<u64>,
    /// Per partition of a partitioned source (Kafka): its applied offset and lag.
    pub partitions: Vec<PartitionLag>,
    /// Transactions the source holds while their pieces arrive (Kafka reassembly),
    /// and the bytes they take.
    pub held_transactions: Option<u64>,
    pub held_bytes: Option<u64>,
    /// The most bytes held at once since the source started.
    pub held_bytes_peak: Option<u64>,
    /// What the source wants an operator to know about how it reads (e.g. a Kafka
    /// stream without transaction metadata, applied event by event).
    pub detail: Option<String>,
    /// Tables the source stopped mirroring after an error of theirs while the others
    /// go on (PostgreSQL's `on_table_error=pause`).
    pub paused_tables: Vec<String>,
    pub last_error: Option<String>,
    pub updated_at: SystemTime,
}

/// One partition of a partitioned source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// Every record below this offset is applied (or handed to the sink).
    pub applied_offset: i64,
    /// The broker's high watermark, as of the last fetch.
    pub high_watermark: i64,
    pub lag_messages: u64,
    /// Age of the newest record read from the partition while it lags (0 when none).
    pub lag_millis: u64,
}

impl SourceStatus {
    pub fn new(name: impl Into<String>, uri: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            uri: uri.into(),
            state: "starting".into(),
            durable_position: None,
            messages: 0,
            transactions: 0,
            row_changes: 0,
            duplicate_transactions: 0,
            diverted: 0,
            lag_transactions: None,
            lag_bytes: None,
            lag_millis: None,
            partitions: Vec::new(),
            held_transactions: None,
            held_bytes: None,
            held_bytes_peak: None,
            detail: None,
            paused_tables: Vec::new(),
            last_error: None,
            updated_at: SystemTime::now(),
        }
    }
}

/// Shared list of source states. Cheap to clone (an `Arc`).
#[derive(Clone, Debug, Default)]
pub struct SourceRegistry {
    sources: Arc<RwLock<Vec<SourceStatus>>>,
}

impl SourceRegistry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the status of the source named `status.name` (adds it if new).
    pub fn update(&self, mut status: SourceStatus) {
        status.updated_at = SystemTime::now();
        let mut sources = self.sources.write();
        match sources.iter_mut().find(|s| s.name == status.name) {
            Some(existing) => *existing = status,
            None => sources.push(status),
        }
    }

    pub fn list(&self) -> Vec<SourceStatus> {
        self.sources.read().clone()
    }
}
