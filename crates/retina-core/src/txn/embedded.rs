//! The in-process transaction service, the embedded default.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use crossbeam_utils::Backoff;

use super::commit_window::CommitWindow;
use super::snapshot_registry::{Snapshot, SnapshotRegistry};
use super::TransactionService;
use crate::error::{CoreError, CoreResult};
use crate::types::Ts;

/// Default number of timestamps that may be allocated ahead of HWM.
pub const DEFAULT_COMMIT_WINDOW: usize = 1 << 20;
/// Default number of concurrently registered query snapshots.
pub const DEFAULT_SNAPSHOT_SLOTS: usize = 4096;

/// Lock-free timestamps and watermarks for one process.
///
/// Invariant: `next > ts` for every allocated ts, and `hwm <= next`. Allocation waits
/// (spinning, then yielding) while the commit window is full, which bounds how far
/// replay can run ahead of visibility.
pub struct EmbeddedTransactionService {
    next: AtomicU64,
    window: CommitWindow,
    snapshots: Arc<SnapshotRegistry>,
}

impl EmbeddedTransactionService {
    pub fn new() -> Self {
        Self::starting_at(Ts::FIRST)
    }

    /// A service whose first allocated timestamp is `first` (recovery resumes here);
    /// everything below `first` counts as committed.
    pub fn starting_at(first: Ts) -> Self {
        Self::with_capacity(first, DEFAULT_COMMIT_WINDOW, DEFAULT_SNAPSHOT_SLOTS)
    }

    pub fn with_capacity(first: Ts, commit_window: usize, snapshot_slots: usize) -> Self {
        let first = Ts(first.0.max(Ts::FIRST.0));
        Self {
            next: AtomicU64::new(first.0),
            window: CommitWindow::new(first, commit_window),
            snapshots: Arc::new(SnapshotRegistry::new(snapshot_slots)),
        }
    }

    /// Number of live query snapshots.
    pub fn live_snapshots(&self) -> usize {
        self.snapshots.live_count()
    }
}

impl Default for EmbeddedTransactionService {
    fn default() -> Self {
        Self::new()
    }
}

impl TransactionService for EmbeddedTransactionService {
    fn allocate(&self) -> CoreResult<Ts> {
        self.allocate_range(1)
    }

    fn allocate_range(&self, count: u64) -> CoreResult<Ts> {
        let first = Ts(self.next.fetch_add(count, SeqCst));
        let last = Ts(first.0 + count.saturating_sub(1));
        if last > Ts::MAX {
            return Err(CoreError::TimestampOverflow { ts: last });
        }
        let backoff = Backoff::new();
        while !self.window.has_room_for(last) {
            backoff.snooze();
        }
        Ok(first)
    }

    fn commit(&self, ts: Ts) {
        self.window.commit(ts);
    }

    fn high_watermark(&self) -> Ts {
        self.window.high_watermark()
    }

    fn low_watermark(&self) -> Ts {
        self.snapshots.low_watermark(|| self.window.high_watermark())
    }

    fn snapshot(&self) -> CoreResult<Snapshot> {
        self.snapshots.register(|| self.window.high_watermark())
    }

    fn snapshot_at_low_watermark(&self) -> CoreResult<Snapshot> {
        self.snapshots.register_at_low_watermark(|| self.window.high_watermark())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_strictly_increase_and_snapshots_see_hwm_minus_one() {
        let service = EmbeddedTransactionService::new();
        let a = service.allocate().expect("ts");
        let b = service.allocate().expect("ts");
        assert!(a < b);
        assert_eq!(service.high_watermark(), Ts(1));
        assert_eq!(service.snapshot().expect("snapshot").ts(), Ts(0));
        service.commit(b);
        assert_eq!(service.high_watermark(), Ts(1), "a is not committed yet");
        service.commit(a);
        assert_eq!(service.high_watermark(), Ts(3));
        let snapshot = service.snapshot().expect("snapshot");
        assert_eq!(snapshot.ts(), b);
        let c = service.allocate().expect("ts");
        service.commit(c);
        assert_eq!(service.low_watermark(), b, "held by the live snapshot");
        drop(snapshot);
        assert_eq!(service.low_watermark(), c);
    }

    #[test]
    fn range_allocation_is_contiguous() {
        let service = EmbeddedTransactionService::new();
        let first = service.allocate_range(5).expect("range");
        assert_eq!(service.allocate().expect("ts"), Ts(first.0 + 5));
    }

    #[test]
    fn overflow_is_an_error() {
        let service = EmbeddedTransactionService::starting_at(Ts::MAX);
        assert!(service.allocate().is_ok());
        assert!(matches!(service.allocate(), Err(CoreError::TimestampOverflow { .. })));
    }

    #[test]
    fn allocation_waits_for_window_room() {
        let service = Arc::new(EmbeddedTransactionService::with_capacity(Ts(1), 2, 4));
        let first = service.allocate_range(2).expect("fits");
        let waiter = {
            let service = Arc::clone(&service);
            std::thread::spawn(move || service.allocate().expect("ts"))
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(!waiter.is_finished(), "window is full, allocation must wait");
        service.commit(first);
        assert_eq!(waiter.join().expect("no panic"), Ts(3));
    }

    #[test]
    fn lwm_never_exceeds_a_concurrent_snapshot() {
        // Queries register while committers move HWM and a GC thread reads LWM; a
        // snapshot must never be below an LWM computed while it was alive.
        let service = Arc::new(EmbeddedTransactionService::new());
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let committer = {
            let (service, stop) = (Arc::clone(&service), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let ts = service.allocate().expect("ts");
                    service.commit(ts);
                }
            })
        };
        let gc = {
            let (service, stop) = (Arc::clone(&service), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    service.low_watermark();
                }
            })
        };
        for _ in 0..20_000 {
            let snapshot = service.snapshot().expect("snapshot");
            let lwm = service.low_watermark();
            assert!(lwm <= snapshot.ts(), "lwm {lwm} passed live snapshot {}", snapshot.ts());
        }
        stop.store(true, SeqCst);
        committer.join().expect("committer");
        gc.join().expect("gc");
    }
}
