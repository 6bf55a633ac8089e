//! The delete-ts array: a singly linked list of blocks of eight packed entries.

use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering::{AcqRel, Acquire, Relaxed, Release}};

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

/// A slot value no entry takes (ts 0 is never allocated): memory GC writes it into
/// the first free slot of a fully folded tail block, so the writer appends no more
/// there and starts a new list instead (see `TileVisibility`).
pub(crate) const SEALED_SLOT: u64 = !TS_MASK;

/// The `next` of a full tail block that memory GC sealed. Never dereferenced.
fn sealed_next() -> *mut DeleteTsBlock {
    ptr::NonNull::dangling().as_ptr()
}

/// One block of the delete-ts array.
///
/// Invariants: slots fill left to right and are written once (0 -> entry) by the
/// tile's single writer; `next` is set once, after the block is full. Entries along
/// the list are in non-decreasing ts order because a shard replays in ts order.
/// Memory GC may seal the last block of a list whose entries it folded all: it
/// writes [`SEALED_SLOT`] into the first free slot (or a sentinel into `next` when
/// the block is full), with a compare-and-swap, so exactly one of the writer's
/// append and the seal succeeds. Readers treat a sealed slot or `next` as the end.
pub(crate) struct DeleteTsBlock {
    pub(crate) entries: [AtomicU64; ENTRIES_PER_BLOCK],
    pub(crate) next: AtomicPtr<DeleteTsBlock>,
}

/// What [`DeleteTsBlock::try_append`] did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Append {
    Done,
    /// Every slot holds an entry: link a new block.
    Full,
    /// Memory GC sealed the block: start a new list.
    Sealed,
}

impl DeleteTsBlock {
    pub(crate) fn empty() -> Box<Self> {
        Box::new(Self { entries: Default::default(), next: AtomicPtr::new(ptr::null_mut()) })
    }

    pub(crate) fn with_first(entry: u64) -> Box<Self> {
        let block = Self::empty();
        block.entries[0].store(entry, Relaxed);
        block
    }

    /// The entry in `slot`, or `None` at the end of the list (a free or sealed slot).
    #[inline]
    pub(crate) fn entry(&self, slot: usize) -> Option<u64> {
        match self.entries[slot].load(Acquire) {
            0 | SEALED_SLOT => None,
            entry => Some(entry),
        }
    }

    /// The next block, or null at the end of the list (also when sealed).
    #[inline]
    pub(crate) fn next_block(&self) -> *mut Self {
        let next = self.next.load(Acquire);
        if next == sealed_next() {
            ptr::null_mut()
        } else {
            next
        }
    }

    /// Writer: puts `entry` in the first free slot.
    pub(crate) fn try_append(&self, entry: u64) -> Append {
        for slot in &self.entries {
            match slot.load(Relaxed) {
                // Only memory GC's seal can race this write.
                0 => return slot.compare_exchange(0, entry, Release, Relaxed).map_or(Append::Sealed, |_| Append::Done),
                SEALED_SLOT => return Append::Sealed,
                _ => {}
            }
        }
        Append::Full
    }

    /// Writer: links `block` after this full block; `false` when memory GC sealed it.
    pub(crate) fn try_link(&self, block: *mut Self) -> bool {
        self.next.compare_exchange(ptr::null_mut(), block, Release, Relaxed).is_ok()
    }

    /// Memory GC: seals free slot `slot` (every entry before it is folded). On
    /// failure returns the entry the writer put there first. Sealing twice is no error.
    pub(crate) fn try_seal_slot(&self, slot: usize) -> Result<(), u64> {
        match self.entries[slot].compare_exchange(0, SEALED_SLOT, AcqRel, Acquire) {
            Ok(_) | Err(SEALED_SLOT) => Ok(()),
            Err(entry) => Err(entry),
        }
    }

    /// Memory GC: seals a full block that ends the list. On failure returns the
    /// block the writer linked first. Sealing twice is no error.
    pub(crate) fn try_seal_next(&self) -> Result<(), *mut Self> {
        match self.next.compare_exchange(ptr::null_mut(), sealed_next(), AcqRel, Acquire) {
            Ok(_) => Ok(()),
            Err(next) if next == sealed_next() => Ok(()),
            Err(next) => Err(next),
        }
    }
}

/// Calls `visit` with every entry of the list starting at `head`, in order, until
/// the list ends or `visit` returns `false`.
///
/// # Safety
/// Every block reachable from `head` must stay allocated during the call (the caller
/// is pinned and loaded `head` from a snapshot it holds, or owns the list).
#[inline]
pub(crate) unsafe fn visit_entries(mut head: *mut DeleteTsBlock, mut visit: impl FnMut(u64) -> bool) {
    while !head.is_null() {
        // SAFETY: the caller keeps the list alive.
        let block = unsafe { &*head };
        for slot in 0..ENTRIES_PER_BLOCK {
            match block.entry(slot) {
                Some(entry) if visit(entry) => {}
                _ => return,
            }
        }
        head = block.next_block();
    }
}

/// The blocks of the list starting at `head`, in order.
///
/// # Safety
/// As for [`visit_entries`].
pub(crate) unsafe fn list_blocks(mut head: *mut DeleteTsBlock) -> Vec<*mut DeleteTsBlock> {
    let mut blocks = Vec::new();
    while !head.is_null() {
        blocks.push(head);
        // SAFETY: the caller keeps the list alive.
        head = unsafe { &*head }.next_block();
    }
    blocks
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
            assert_ne!(entry, SEALED_SLOT, "no entry looks sealed");
        }
    }

    #[test]
    fn a_sealed_block_takes_no_more_entries_and_reads_as_the_end() {
        let block = DeleteTsBlock::with_first(pack_entry(3, Ts(1)));
        assert_eq!(block.try_seal_slot(1), Ok(()));
        assert_eq!(block.try_append(pack_entry(4, Ts(2))), Append::Sealed);
        assert_eq!(block.entry(0), Some(pack_entry(3, Ts(1))));
        assert_eq!(block.entry(1), None);

        let full = DeleteTsBlock::empty();
        for ts in 1..=ENTRIES_PER_BLOCK as u64 {
            assert_eq!(full.try_append(pack_entry(0, Ts(ts))), Append::Done);
        }
        assert_eq!(full.try_append(pack_entry(0, Ts(9))), Append::Full);
        assert_eq!(full.try_seal_next(), Ok(()));
        assert!(full.next_block().is_null(), "a sealed next reads as the end");
        let next = Box::into_raw(DeleteTsBlock::empty());
        assert!(!full.try_link(next), "the writer cannot link after a seal");
        // SAFETY: `next` was never linked.
        drop(unsafe { Box::from_raw(next) });
        // The writer appended first: the seal fails and says what is there.
        let raced = DeleteTsBlock::empty();
        assert_eq!(raced.try_append(pack_entry(1, Ts(5))), Append::Done);
        assert_eq!(raced.try_seal_slot(0), Err(pack_entry(1, Ts(5))));
    }
}
