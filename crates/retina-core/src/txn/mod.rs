//! The transaction service (ARCHITECTURE.md §3.1, paper §3.4): mirror-transaction
//! timestamps, the high watermark (HWM) and the low watermark (LWM).
//!
//! Mirror transactions run at or above HWM, queries in [LWM, HWM), garbage
//! collection below LWM. That separation is the whole concurrency-control protocol.

mod commit_window;
mod embedded;
mod snapshot_registry;

pub use embedded::{EmbeddedTransactionService, DEFAULT_SNAPSHOT_SLOTS};
pub use snapshot_registry::{Snapshot, SnapshotRegistry};

use crate::error::CoreResult;
use crate::types::Ts;

/// The transaction service's interface. An etcd-backed implementation can follow
/// for the distributed deployment; every method takes and returns owned values.
pub trait TransactionService: Send + Sync {
    /// Allocates the next mirror-transaction timestamp. Timestamps are strictly
    /// increasing in call order and never reused.
    fn allocate(&self) -> CoreResult<Ts>;

    /// Allocates `count` consecutive timestamps and returns the first.
    fn allocate_range(&self, count: u64) -> CoreResult<Ts>;

    /// Marks `ts` as fully replayed. HWM passes it once every smaller allocated
    /// timestamp has been committed too.
    fn commit(&self, ts: Ts);

    /// Every mirror transaction with ts < HWM is fully replayed and visible.
    fn high_watermark(&self) -> Ts;

    /// The smallest snapshot ts of running queries, or HWM - 1 when none run.
    /// Non-decreasing.
    fn low_watermark(&self) -> Ts;

    /// Takes a query snapshot at HWM - 1, registered until the returned guard drops.
    fn snapshot(&self) -> CoreResult<Snapshot>;

    /// Takes a snapshot at the current LWM and holds LWM there until it drops (storage
    /// GC rewrites files as of a ts no running query is below).
    fn snapshot_at_low_watermark(&self) -> CoreResult<Snapshot>;
}
