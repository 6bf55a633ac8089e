//! Lock-free tracking of committed timestamps above the high watermark.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};

use crate::types::Ts;

/// A ring of commit flags for the timestamps in `[hwm, hwm + capacity)`.
///
/// Invariants:
/// - `hwm` only moves forward, one step at a time, and only over a committed ts: the
///   thread that clears the flag of `hwm` (compare-exchange true -> false) is the only
///   one allowed to store `hwm + 1`, so no step is taken twice or skipped.
/// - A timestamp is committed at most once and only while `ts < hwm + capacity`
///   (allocation waits for room), so a flag slot is never shared by two live ts.
///
/// All operations are `SeqCst`: a committer stores its flag then reads `hwm`, an
/// advancer stores `hwm` then reads the next flag; with sequential consistency at
/// least one of them sees the other, so a commit is never stranded below the window.
pub(crate) struct CommitWindow {
    hwm: AtomicU64,
    flags: Box<[AtomicBool]>,
    mask: u64,
}

impl CommitWindow {
    /// `capacity` is rounded up to a power of two.
    pub(crate) fn new(start: Ts, capacity: usize) -> Self {
        let capacity = capacity.max(2).next_power_of_two();
        let flags = (0..capacity).map(|_| AtomicBool::new(false)).collect();
        Self { hwm: AtomicU64::new(start.0), flags, mask: capacity as u64 - 1 }
    }

    pub(crate) fn capacity(&self) -> u64 {
        self.mask + 1
    }

    pub(crate) fn high_watermark(&self) -> Ts {
        Ts(self.hwm.load(SeqCst))
    }

    /// Whether `ts` fits the window, i.e. may be committed now.
    pub(crate) fn has_room_for(&self, ts: Ts) -> bool {
        ts.0 < self.hwm.load(SeqCst) + self.capacity()
    }

    /// Records that `ts` is fully replayed and advances HWM over the gap-free prefix.
    /// The caller guarantees `hwm <= ts < hwm + capacity` and that `ts` is committed
    /// once.
    pub(crate) fn commit(&self, ts: Ts) {
        debug_assert!(self.has_room_for(ts), "commit of {ts} outside the window");
        self.flags[(ts.0 & self.mask) as usize].store(true, SeqCst);
        loop {
            let hwm = self.hwm.load(SeqCst);
            let flag = &self.flags[(hwm & self.mask) as usize];
            if flag.compare_exchange(true, false, SeqCst, SeqCst).is_err() {
                return;
            }
            // We own the step from `hwm`: nobody else can clear this flag again
            // before `hwm` moves, because the next ts mapping to it is >= hwm + capacity.
            self.hwm.store(hwm + 1, SeqCst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn hwm_advances_only_over_gap_free_prefix() {
        let window = CommitWindow::new(Ts(1), 8);
        window.commit(Ts(2));
        window.commit(Ts(3));
        assert_eq!(window.high_watermark(), Ts(1), "ts 1 is missing");
        window.commit(Ts(1));
        assert_eq!(window.high_watermark(), Ts(4));
        window.commit(Ts(5));
        assert_eq!(window.high_watermark(), Ts(4));
        window.commit(Ts(4));
        assert_eq!(window.high_watermark(), Ts(6));
    }

    #[test]
    fn room_is_bounded_by_capacity() {
        let window = CommitWindow::new(Ts(1), 4);
        assert!(window.has_room_for(Ts(4)));
        assert!(!window.has_room_for(Ts(5)));
        window.commit(Ts(1));
        assert!(window.has_room_for(Ts(5)));
    }

    #[test]
    fn concurrent_commits_in_random_order_reach_the_end() {
        for round in 0..20u64 {
            let total = 20_000u64;
            let window = Arc::new(CommitWindow::new(Ts(1), 1 << 16));
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let window = Arc::clone(&window);
                    std::thread::spawn(move || {
                        // Each thread commits a strided, locally shuffled subset.
                        let mut mine: Vec<u64> = (1..=total).filter(|ts| ts % 4 == t).collect();
                        let len = mine.len();
                        for i in 0..len {
                            let j = ((i as u64 * 7919 + round) % len as u64) as usize;
                            mine.swap(i, j);
                        }
                        for ts in mine {
                            window.commit(Ts(ts));
                        }
                    })
                })
                .collect();
            for thread in threads {
                thread.join().expect("committer thread panicked");
            }
            assert_eq!(window.high_watermark(), Ts(total + 1), "round {round}");
        }
    }
}
