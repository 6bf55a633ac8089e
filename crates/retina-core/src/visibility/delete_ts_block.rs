//! The delete-ts array: a singly linked list of blocks of eight packed entries.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64};

use crate::types::Ts;

/// Entries per block: eight u64, one cache line of entries.
pub(crate) const ENTRIES_PER_BLOCK: usize = 8;
const TS_MASK: u64 = (1 << Ts::BITS) - 1;

/// Packs a 12-bit row offset inside the tile and a 52-bit delete timestamp.
/// A packed entry is never zero because allocated timestamps are >= 1, so zero marks
/// a free slot.
#[inline]
pub(crate) fn pack_entry(offset: u16, ts: Ts) -> u64 {
    debug_assert!((offset as usize) < super::TILE_ROWS);
    debug_assert!(ts.0 >= 1 && ts <= Ts::MAX);
    ((offset as u64) << Ts::BITS) | ts.0
}

/// Unpacks an entry into (row offset, delete ts).
#[inline]
pub(crate) fn unpack_entry(entry: u64) -> (usize, u64) {
    ((entry >> Ts::BITS) as usize, entry & TS_MASK)
}

/// One block of the delete-ts array.
///
/// Invariants: slots fill left to right and are written once (0 -> entry) by the
/// tile's single writer; `next` is set once, after the block is full. Entries along
/// the list are in non-decreasing ts order because a shard replays in ts order.
pub(crate) struct DeleteTsBlock {
    pub(crate) entries: [AtomicU64; ENTRIES_PER_BLOCK],
    pub(crate) next: AtomicPtr<DeleteTsBlock>,
}

impl DeleteTsBlock {
    pub(crate) fn empty() -> Box<Self> {
        Box::new(Self { entries: Default::default(), next: AtomicPtr::new(ptr::null_mut()) })
    }

    pub(crate) fn with_first(entry: u64) -> Box<Self> {
        let block = Self::empty();
        block.entries[0].store(entry, std::sync::atomic::Ordering::Relaxed);
        block
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_and_is_never_zero() {
        for (offset, ts) in [(0u16, Ts(1)), (4095, Ts::MAX), (17, Ts(123_456))] {
            let entry = pack_entry(offset, ts);
            assert_ne!(entry, 0);
            assert_eq!(unpack_entry(entry), (offset as usize, ts.0));
        }
    }
}
