//! The engine's counters and the figures it reports.

use std::sync::atomic::AtomicU64;

use crate::types::Ts;

/// Counters shared by the engine's threads.
#[derive(Default)]
pub(crate) struct SharedStats {
    pub(crate) files_flushed: AtomicU64,
    pub(crate) flush_failures: AtomicU64,
    pub(crate) row_changes: AtomicU64,
    pub(crate) transactions: AtomicU64,
    pub(crate) gc_runs: AtomicU64,
    /// Memory-GC runs that visited every file's visibility (the others had
    /// nothing new to fold).
    pub(crate) visibility_gc_passes: AtomicU64,
    pub(crate) checkpoints: AtomicU64,
    pub(crate) last_checkpoint_ts: AtomicU64,
    pub(crate) absent_row_upserts: AtomicU64,
    pub(crate) absent_row_deletes_ignored: AtomicU64,
}

/// A point-in-time view of the engine's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineStats {
    pub high_watermark: Ts,
    pub low_watermark: Ts,
    pub transactions: u64,
    pub row_changes: u64,
    pub files_flushed: u64,
    pub gc_runs: u64,
    pub checkpoints: u64,
    pub last_checkpoint_ts: Ts,
    pub last_checkpoint_error: Option<String>,
    pub visibility_bytes: u64,
    pub stored_versions: u64,
    /// Why the latest flush attempt failed; `None` once a later one succeeded.
    pub last_flush_error: Option<String>,
    /// Flush attempts that failed (each was retried).
    pub flush_failures: u64,
    /// [`crate::RowChange::UpdateOrInsert`]s whose row was absent (applied as inserts).
    pub absent_row_upserts: u64,
    /// [`crate::RowChange::DeleteIfPresent`]s whose row was absent (ignored).
    pub absent_row_deletes_ignored: u64,
}

impl EngineStats {
    /// Visibility memory per stored row version, in bits (the paper's metric).
    pub fn visibility_bits_per_tuple(&self) -> f64 {
        if self.stored_versions == 0 {
            return 0.0;
        }
        self.visibility_bytes as f64 * 8.0 / self.stored_versions as f64
    }
}

