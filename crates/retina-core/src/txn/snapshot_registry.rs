//! Registration of live query snapshots, from which the low watermark is derived.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use crate::error::{CoreError, CoreResult};
use crate::types::Ts;

const EMPTY: u64 = u64::MAX;
/// A slot whose query has claimed it but not yet read HWM.
const PENDING: u64 = u64::MAX - 1;

/// A fixed set of slots, each empty, pending, or holding a live snapshot ts.
///
/// Invariant (what makes LWM safe): a query stores `PENDING` in its slot *before* it
/// reads HWM. An LWM computation reads HWM *before* it scans the slots. So either the
/// scan sees the query (pending: LWM does not move; or its ts), or the query's HWM
/// read comes after the computation's, and its ts is at least the computed LWM.
/// All accesses are `SeqCst` so these program orders are globally ordered.
pub struct SnapshotRegistry {
    slots: Box<[AtomicU64]>,
    next_hint: AtomicUsize,
    lwm: AtomicU64,
}

impl SnapshotRegistry {
    pub fn new(capacity: usize) -> Self {
        let slots = (0..capacity.max(1)).map(|_| AtomicU64::new(EMPTY)).collect();
        Self { slots, next_hint: AtomicUsize::new(0), lwm: AtomicU64::new(0) }
    }

    /// Registers a snapshot at `read_hwm() - 1`.
    pub fn register(self: &Arc<Self>, read_hwm: impl FnOnce() -> Ts) -> CoreResult<Snapshot> {
        let slot = self.claim_slot()?;
        let ts = read_hwm().prev();
        self.slots[slot].store(ts.0, SeqCst);
        Ok(Snapshot { ts, registry: Arc::clone(self), slot })
    }

    /// Registers a snapshot at the current low watermark, holding LWM there: for
    /// storage GC, which must not pass any running query.
    ///
    /// The ts is computed afresh after our PENDING mark is visible, as the minimum of
    /// HWM - 1 and the registered snapshots, ignoring pending ones (they will register
    /// at or above HWM - 1). It is therefore at or above every LWM a concurrent
    /// computation could have published without seeing our mark (so nothing was
    /// folded past it), and at or below every running query.
    pub fn register_at_low_watermark(self: &Arc<Self>, read_hwm: impl FnOnce() -> Ts) -> CoreResult<Snapshot> {
        let slot = self.claim_slot()?;
        let mut ts = read_hwm().prev().0;
        for (index, other) in self.slots.iter().enumerate() {
            match other.load(SeqCst) {
                EMPTY | PENDING => {}
                _ if index == slot => {}
                value => ts = ts.min(value),
            }
        }
        self.slots[slot].store(ts, SeqCst);
        Ok(Snapshot { ts: Ts(ts), registry: Arc::clone(self), slot })
    }

    fn claim_slot(&self) -> CoreResult<usize> {
        let len = self.slots.len();
        let start = self.next_hint.fetch_add(1, SeqCst) % len;
        for i in 0..len {
            let slot = (start + i) % len;
            if self.slots[slot].compare_exchange(EMPTY, PENDING, SeqCst, SeqCst).is_ok() {
                return Ok(slot);
            }
        }
        Err(CoreError::TooManySnapshots { limit: len })
    }

    /// Computes the low watermark given the current HWM reader. Non-decreasing.
    pub fn low_watermark(&self, read_hwm: impl FnOnce() -> Ts) -> Ts {
        let mut candidate = read_hwm().prev().0;
        for slot in self.slots.iter() {
            match slot.load(SeqCst) {
                EMPTY => {}
                // A query between claim and HWM read: stay where we are.
                PENDING => return Ts(self.lwm.load(SeqCst)),
                ts => candidate = candidate.min(ts),
            }
        }
        let previous = self.lwm.fetch_max(candidate, SeqCst);
        Ts(previous.max(candidate))
    }

    /// Number of live snapshots (for metrics).
    pub fn live_count(&self) -> usize {
        self.slots.iter().filter(|slot| slot.load(SeqCst) != EMPTY).count()
    }
}

/// A registered query snapshot. While it lives, LWM stays at or below `ts`, so every
/// version visible at `ts` stays readable. Dropping it (also during unwinding after an
/// error or panic) releases the registration.
pub struct Snapshot {
    ts: Ts,
    registry: Arc<SnapshotRegistry>,
    slot: usize,
}

impl Snapshot {
    pub fn ts(&self) -> Ts {
        self.ts
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("ts", &self.ts).finish()
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.registry.slots[self.slot].store(EMPTY, SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lwm_is_smallest_live_snapshot_or_hwm_minus_one() {
        let registry = Arc::new(SnapshotRegistry::new(4));
        assert_eq!(registry.low_watermark(|| Ts(10)), Ts(9));
        let old = registry.register(|| Ts(10)).expect("slot");
        assert_eq!(old.ts(), Ts(9));
        let newer = registry.register(|| Ts(20)).expect("slot");
        assert_eq!(registry.low_watermark(|| Ts(30)), Ts(9));
        drop(old);
        assert_eq!(registry.low_watermark(|| Ts(30)), Ts(19));
        drop(newer);
        assert_eq!(registry.low_watermark(|| Ts(30)), Ts(29));
        assert_eq!(registry.live_count(), 0);
    }

    #[test]
    fn pending_registration_holds_lwm() {
        let registry = Arc::new(SnapshotRegistry::new(2));
        assert_eq!(registry.low_watermark(|| Ts(5)), Ts(4));
        let snapshot = registry
            .register(|| {
                // While this query is pending, LWM must not pass what it will read.
                assert_eq!(registry.low_watermark(|| Ts(50)), Ts(4));
                Ts(6)
            })
            .expect("slot");
        assert_eq!(snapshot.ts(), Ts(5));
    }

    #[test]
    fn snapshot_at_low_watermark_holds_it() {
        let registry = Arc::new(SnapshotRegistry::new(4));
        let query = registry.register(|| Ts(10)).expect("slot");
        let gc = registry.register_at_low_watermark(|| Ts(20)).expect("slot");
        assert_eq!(gc.ts(), Ts(9), "the oldest running query");
        drop(gc);
        assert_eq!(registry.low_watermark(|| Ts(20)), Ts(9));
        let gc = registry.register_at_low_watermark(|| Ts(20)).expect("slot");
        assert_eq!(gc.ts(), Ts(9));
        drop(query);
        assert_eq!(registry.low_watermark(|| Ts(20)), Ts(9), "held by the GC snapshot");
        drop(gc);
        let fresh = registry.register_at_low_watermark(|| Ts(30)).expect("slot");
        assert_eq!(fresh.ts(), Ts(29), "no query: HWM - 1, at or above anything GC may have folded");
    }

    /// Memory GC folds at whatever LWM it computes; a storage-GC snapshot taken at LWM
    /// concurrently must never be below a value GC folded at while it is held.
    #[test]
    fn snapshot_at_low_watermark_is_never_below_what_gc_folded() {
        use std::sync::atomic::{AtomicBool, AtomicU64};
        let registry = Arc::new(SnapshotRegistry::new(8));
        let hwm = Arc::new(AtomicU64::new(1));
        let folded = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let committer = {
            let (hwm, stop) = (Arc::clone(&hwm), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    hwm.fetch_add(1, SeqCst);
                }
            })
        };
        let gc = {
            let (registry, hwm, folded, stop) = (Arc::clone(&registry), Arc::clone(&hwm), Arc::clone(&folded), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let lwm = registry.low_watermark(|| Ts(hwm.load(SeqCst)));
                    folded.fetch_max(lwm.0, SeqCst);
                }
            })
        };
        for _ in 0..20_000 {
            let held = registry.register_at_low_watermark(|| Ts(hwm.load(SeqCst))).expect("slot");
            let lwm = registry.low_watermark(|| Ts(hwm.load(SeqCst)));
            assert!(lwm <= held.ts(), "LWM {lwm} passed the held {}", held.ts());
            let max_folded = folded.load(SeqCst);
            assert!(max_folded <= held.ts().0, "GC folded at {max_folded}, above the held {}", held.ts());
        }
        stop.store(true, SeqCst);
        committer.join().expect("committer");
        gc.join().expect("gc");
    }

    #[test]
    fn full_registry_is_an_error_and_drop_frees_slots() {
        let registry = Arc::new(SnapshotRegistry::new(1));
        let first = registry.register(|| Ts(3)).expect("slot");
        let err = registry.register(|| Ts(3)).expect_err("full");
        assert!(err.to_string().contains("limit 1"));
        drop(first);
        registry.register(|| Ts(3)).expect("slot freed on drop");
    }

    #[test]
    fn snapshot_released_when_holder_panics() {
        let registry = Arc::new(SnapshotRegistry::new(2));
        let cloned = Arc::clone(&registry);
        let result = std::thread::spawn(move || {
            let _snapshot = cloned.register(|| Ts(3)).expect("slot");
            panic!("query failed");
        })
        .join();
        assert!(result.is_err());
        assert_eq!(registry.live_count(), 0);
        assert_eq!(registry.low_watermark(|| Ts(9)), Ts(8));
    }
}
