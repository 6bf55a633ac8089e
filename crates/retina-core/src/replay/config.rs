//! Tuning of an engine.

use std::time::Duration;

/// Tuning of an engine. Defaults follow the paper (4096-row blocks and tiles).
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Replayer shard threads.
    pub shards: usize,
    /// Rows per write-buffer block.
    pub block_rows: usize,
    /// Rows per virtual file (= per flushed Parquet file and its single row group).
    pub file_rows: usize,
    /// Row changes per group-commit batch; a smaller batch is sent by `flush_batch`.
    pub batch_changes: usize,
    /// Memory-GC period; `None` runs GC only when asked.
    pub gc_interval: Option<Duration>,
    /// Checkpoint period; `None` checkpoints only when asked (and at `close`).
    pub checkpoint_interval: Option<Duration>,
    /// Storage-GC period; `None` runs it only when asked.
    pub storage_gc_interval: Option<Duration>,
    /// Share of a file's rows stale at LWM above which storage GC rewrites it.
    pub storage_gc_threshold: f64,
    /// Nice value of the background threads (flusher, checkpoints, memory and
    /// storage GC; Linux): positive values let replay and queries have the CPU first
    /// when both cores are busy, so background bursts do not become freshness spikes.
    /// 0 keeps them at the replay threads' priority.
    pub background_nice: i32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            shards: std::thread::available_parallelism().map_or(2, |n| n.get()),
            block_rows: 4096,
            file_rows: 16 * 4096,
            batch_changes: 4096,
            gc_interval: Some(Duration::from_millis(100)),
            checkpoint_interval: Some(Duration::from_secs(5)),
            storage_gc_interval: Some(Duration::from_secs(60)),
            storage_gc_threshold: 0.5,
            background_nice: 5,
        }
    }
}

