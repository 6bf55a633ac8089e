//! `TileVisibility`: the visibility of 4096 consecutive row versions.

use std::sync::atomic::{AtomicPtr, Ordering::{AcqRel, Acquire, Relaxed}};
use std::sync::Arc;

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned, Shared};

use super::delete_ts_block::{
    list_blocks, pack_entry, unpack_entry, visit_entries, Append, DeleteTsBlock, ENTRIES_PER_BLOCK,
};
use super::TILE_WORDS;
use crate::types::Ts;

/// The immutable part of a tile: rows deleted at or before `base_ts` as a bitmap, and
/// where the delete-ts entries that may be newer than `base_ts` start.
struct VisibilitySnapshot {
    base_ts: u64,
    /// First block that may hold entries with ts > `base_ts` (entries <= `base_ts` in
    /// it are already folded; OR-ing them again is harmless); null when memory GC
    /// folded the whole list.
    head: *mut DeleteTsBlock,
    bitmap: [u64; TILE_WORDS],
}

/// Visibility of one tile (paper Figure 7): a visibility snapshot plus a lock-free,
/// append-only delete-ts array.
///
/// Concurrency contract:
/// - exactly one writer appends deletes, in non-decreasing ts order. A second
///   concurrent writer would race on `tail` and free blocks under the first, so
///   writing is not possible through `&TileVisibility`: it takes the tile's one
///   [`TileWriter`] (or, inside a row group, its one
///   [`RgWriter`](super::RgWriter)), by `&mut`;
/// - any number of readers call [`TileVisibility::bitmap_at`] with `qts >= LWM`;
/// - at most one thread at a time calls [`TileVisibility::collect_garbage`] with a
///   true LWM (every running and future query has `qts >= lwm`).
///
/// Invariants:
/// - while the current snapshot's `head` is not null, `tail` is the last block of
///   the list starting there (or a block memory GC has just sealed);
/// - the snapshot is replaced by memory GC, and by the writer only when it starts a
///   new list: the first delete, or after GC sealed the list (folded all of it).
///
/// Memory: a tile that never saw a delete holds no snapshot (two null pointers); one
/// whose deletes are all folded holds its snapshot and no block. Retired snapshots
/// and blocks are freed through crossbeam-epoch once no thread that could see them
/// is pinned; the writer is pinned while it touches `tail`, so a block GC seals and
/// retires under it stays valid until it notices the seal.
pub struct TileVisibility {
    snapshot: Atomic<VisibilitySnapshot>,
    /// Last block of the list; only the writer reads or writes it.
    tail: AtomicPtr<DeleteTsBlock>,
}

// SAFETY: the raw block pointers are shared under the contract above: blocks are only
// written through atomics, and freed only through epoch-deferred destruction or in
// `Drop`, which has exclusive access.
unsafe impl Send for TileVisibility {}
unsafe impl Sync for TileVisibility {}

/// The single writer of one standalone tile: the only way to append deletes to it.
///
/// It cannot be cloned and its [`TileWriter::delete`] takes `&mut self`, and a tile
/// is only made together with its writer, so safe code cannot get a second writer
/// of a tile. Readers share [`TileWriter::tile`].
///
/// ```
/// use retina_core::visibility::{TileWriter, TILE_WORDS};
/// use retina_core::Ts;
///
/// let mut writer = TileWriter::new();
/// let tile = std::sync::Arc::clone(writer.tile());
/// writer.delete(7, Ts(1));
/// let mut bitmap = [0u64; TILE_WORDS];
/// tile.bitmap_at(Ts(1), &mut bitmap);
/// assert_eq!(bitmap[0], 1 << 7);
/// ```
///
/// The shared handle cannot write:
///
/// ```compile_fail,E0624
/// use retina_core::visibility::{TileWriter};
/// use retina_core::Ts;
///
/// let writer = TileWriter::new();
/// writer.tile().delete(7, Ts(1));
/// ```
///
/// Nor can the writer be cloned:
///
/// ```compile_fail,E0599
/// use retina_core::visibility::TileWriter;
///
/// let writer = TileWriter::new();
/// let _second = writer.clone();
/// ```
pub struct TileWriter {
    tile: Arc<TileVisibility>,
    last_ts: Ts,
}

impl Default for TileWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl TileWriter {
    /// A tile with no deletes, and its writer.
    pub fn new() -> Self {
        Self { tile: Arc::new(TileVisibility::new()), last_ts: Ts(0) }
    }

    /// A tile whose rows in `bitmap` are deleted at or before `base_ts`, and its writer.
    pub fn with_base(bitmap: [u64; TILE_WORDS], base_ts: Ts) -> Self {
        Self { tile: Arc::new(TileVisibility::with_base(bitmap, base_ts)), last_ts: Ts(0) }
    }

    /// The tile, for readers and the collector.
    pub fn tile(&self) -> &Arc<TileVisibility> {
        &self.tile
    }

    /// Marks row `offset` deleted at `ts`; `ts` must not be below an earlier delete's.
    pub fn delete(&mut self, offset: u16, ts: Ts) {
        debug_assert!(ts >= self.last_ts, "tile delete at {ts} after one at {}", self.last_ts);
        self.last_ts = ts;
        // SAFETY: a tile is made only inside its one writer, which is not Clone, and
        // `&mut self` makes this the only delete running on it.
        unsafe { self.tile.delete(offset, ts) }
    }
}

impl TileVisibility {
    /// Tiles are made only with their writer: a [`TileWriter`] or a row group's.
    pub(super) fn new() -> Self {
        Self { snapshot: Atomic::null(), tail: AtomicPtr::new(std::ptr::null_mut()) }
    }

    /// A tile whose rows in `bitmap` are deleted at or before `base_ts` (recovery).
    /// An empty bitmap keeps the tile snapshot-free.
    pub(super) fn with_base(bitmap: [u64; TILE_WORDS], base_ts: Ts) -> Self {
        let tile = Self::new();
        if bitmap.iter().any(|&word| word != 0) {
            let snapshot = VisibilitySnapshot { base_ts: base_ts.0, head: std::ptr::null_mut(), bitmap };
            tile.snapshot.store(Owned::new(snapshot), Relaxed);
        }
        tile
    }

    /// Marks row `offset` deleted at `ts`. Reached through the tile's writer only.
    ///
    /// Pins the epoch; a shard that holds a guard across a batch makes that a counter
    /// increment.
    ///
    /// # Safety
    /// No other `delete` of this tile may run at the same time: the caller is the
    /// tile's one writer (see the type). Bitmaps are also only right when `ts` is not
    /// below an earlier delete's.
    pub(super) unsafe fn delete(&self, offset: u16, ts: Ts) {
        let guard = epoch::pin();
        let entry = pack_entry(offset, ts);
        let current = self.snapshot.load(Acquire, &guard);
        // SAFETY: loaded under `guard`.
        if unsafe { current.as_ref() }.is_some_and(|snapshot| !snapshot.head.is_null()) {
            // SAFETY: by the type's invariant `tail` is the end of the current list,
            // or a block GC sealed after we pinned, which stays allocated while pinned.
            let tail = unsafe { &*self.tail.load(Relaxed) };
            match tail.try_append(entry) {
                Append::Done => return,
                Append::Full => {
                    let block = Box::into_raw(DeleteTsBlock::with_first(entry));
                    if tail.try_link(block) {
                        self.tail.store(block, Relaxed);
                    } else {
                        self.start_list(block, &guard);
                    }
                    return;
                }
                Append::Sealed => {}
            }
        }
        self.start_list(Box::into_raw(DeleteTsBlock::with_first(entry)), &guard);
    }

    /// Writer: makes `block` the whole list, in a new snapshot. When memory GC sealed
    /// the old list but has not swapped its snapshot in yet, the writer folds that
    /// list itself (every entry in it is at or below GC's LWM): it never waits for GC.
    fn start_list(&self, block: *mut DeleteTsBlock, guard: &Guard) {
        loop {
            let current = self.snapshot.load(Acquire, guard);
            // SAFETY: loaded under `guard`.
            let (replacement, folded) = match unsafe { current.as_ref() } {
                None => (VisibilitySnapshot { base_ts: 0, head: block, bitmap: [0; TILE_WORDS] }, Vec::new()),
                Some(old) if old.head.is_null() => {
                    (VisibilitySnapshot { base_ts: old.base_ts, head: block, bitmap: old.bitmap }, Vec::new())
                }
                Some(old) => {
                    let (mut bitmap, mut base_ts) = (old.bitmap, old.base_ts);
                    // SAFETY: the list hangs off a snapshot loaded under `guard`.
                    unsafe {
                        visit_entries(old.head, |entry| {
                            let (offset, ts) = unpack_entry(entry);
                            bitmap[offset / 64] |= 1 << (offset % 64);
                            base_ts = base_ts.max(ts);
                            true
                        })
                    };
                    // SAFETY: as above.
                    let folded = unsafe { list_blocks(old.head) };
                    (VisibilitySnapshot { base_ts, head: block, bitmap }, folded)
                }
            };
            if self.snapshot.compare_exchange(current, Owned::new(replacement), AcqRel, Acquire, guard).is_ok() {
                self.tail.store(block, Relaxed);
                // SAFETY: the old snapshot and the folded list are unreachable from the
                // new snapshot; pinned readers delay their destruction.
                unsafe { retire(guard, current, &folded) };
                return;
            }
            // Memory GC swapped its snapshot in first: build on that one.
        }
    }

    /// The rows deleted at or before `qts`, as a bitmap: copy the base bitmap and OR in
    /// every entry with `delete_ts <= qts`. Requires `qts >= LWM`.
    pub fn bitmap_at(&self, qts: Ts, out: &mut [u64; TILE_WORDS]) {
        let guard = epoch::pin();
        self.bitmap_at_pinned(qts, out, &guard);
    }

    /// [`Self::bitmap_at`] for callers that already hold an epoch guard.
    pub fn bitmap_at_pinned(&self, qts: Ts, out: &mut [u64; TILE_WORDS], guard: &Guard) {
        let snapshot = self.snapshot.load(Acquire, guard);
        // SAFETY: loaded under `guard`; retired snapshots are destroyed only after all
        // guards pinned before their retirement are gone.
        let Some(snapshot) = (unsafe { snapshot.as_ref() }) else {
            out.fill(0);
            return;
        };
        debug_assert!(qts.0 >= snapshot.base_ts, "query at {qts} below tile base ts {}", snapshot.base_ts);
        *out = snapshot.bitmap;
        // SAFETY: blocks reachable from a snapshot loaded under `guard` are freed only
        // after that snapshot is retired and the guard released.
        unsafe {
            visit_entries(snapshot.head, |entry| {
                let (offset, ts) = unpack_entry(entry);
                if ts > qts.0 {
                    return false; // entries are in ts order
                }
                out[offset / 64] |= 1 << (offset % 64);
                true
            })
        };
    }

    /// Memory GC: folds every entry with `delete_ts <= lwm` into a new snapshot with
    /// `base_ts = lwm`, swaps it in atomically and retires the folded blocks. When the
    /// whole list is folded it is sealed and retired too, so a tile with no pending
    /// delete holds no block. Blocks neither the writer nor readers. Returns the
    /// number of blocks retired.
    pub fn collect_garbage(&self, lwm: Ts) -> usize {
        let guard = epoch::pin();
        let current = self.snapshot.load(Acquire, &guard);
        // SAFETY: loaded under `guard`.
        let Some(snapshot) = (unsafe { current.as_ref() }) else { return 0 };
        if snapshot.base_ts >= lwm.0 || snapshot.head.is_null() {
            return 0; // nothing to fold: no copy of the bitmap for an idle tile
        }
        let mut bitmap = snapshot.bitmap;
        let mut head = snapshot.head;
        let mut folded = Vec::new();
        'blocks: while !head.is_null() {
            // SAFETY: `head` is reachable from the pinned snapshot.
            let block = unsafe { &*head };
            let mut slot = 0;
            while slot < ENTRIES_PER_BLOCK {
                let Some(entry) = block.entry(slot) else {
                    // The end of the list, all of it folded: seal it so the writer
                    // starts a new one. If the writer appended first, look again.
                    if block.try_seal_slot(slot).is_ok() {
                        folded.push(head);
                        head = std::ptr::null_mut();
                        break 'blocks;
                    }
                    continue;
                };
                let (offset, ts) = unpack_entry(entry);
                if ts > lwm.0 {
                    break 'blocks; // the first unfolded entry is in this block: keep it
                }
                bitmap[offset / 64] |= 1 << (offset % 64);
                slot += 1;
            }
            folded.push(head);
            head = match block.next_block() {
                next if !next.is_null() => next,
                _ => match block.try_seal_next() {
                    Ok(()) => std::ptr::null_mut(),
                    Err(linked) => linked,
                },
            };
        }
        if folded.is_empty() {
            // No block to free: a new snapshot would only raise `base_ts`, and an idle
            // tile would get a fresh 528-byte copy on every GC run.
            return 0;
        }
        let replacement = Owned::new(VisibilitySnapshot { base_ts: lwm.0, head, bitmap });
        match self.snapshot.compare_exchange(current, replacement, AcqRel, Acquire, &guard) {
            Ok(_) => {
                // SAFETY: the old snapshot and the folded blocks are unreachable from
                // the new snapshot; readers that still see them are pinned, so
                // destruction waits for them.
                unsafe { retire(&guard, current, &folded) };
                folded.len()
            }
            // Only the writer replaces a snapshot meanwhile, after it found our seal:
            // it folded the sealed list itself and retires it.
            Err(_) => 0,
        }
    }

    /// Appends `(offset + base, ts)` for every delete with `ts > after`, in ts order.
    /// Requires `after >= base_ts` (the caller holds LWM at or below `after`).
    pub fn deletes_after(&self, after: Ts, base: u32, out: &mut Vec<(u32, Ts)>) {
        let guard = epoch::pin();
        let snapshot = self.snapshot.load(Acquire, &guard);
        // SAFETY: loaded under `guard`; see `bitmap_at_pinned`.
        let Some(snapshot) = (unsafe { snapshot.as_ref() }) else { return };
        debug_assert!(after.0 >= snapshot.base_ts, "deletes after {after} were folded at {}", snapshot.base_ts);
        // SAFETY: reachable from the pinned snapshot.
        unsafe {
            visit_entries(snapshot.head, |entry| {
                let (offset, ts) = unpack_entry(entry);
                if ts > after.0 {
                    out.push((base + offset as u32, Ts(ts)));
                }
                true
            })
        };
    }

    /// The snapshot's base ts (0 when the tile never saw a delete).
    pub fn base_ts(&self) -> Ts {
        let guard = epoch::pin();
        // SAFETY: loaded under `guard`.
        unsafe { self.snapshot.load(Acquire, &guard).as_ref() }.map_or(Ts(0), |s| Ts(s.base_ts))
    }

    /// Bytes of heap and inline memory this tile holds (for the bits-per-tuple metric).
    pub fn memory_bytes(&self) -> usize {
        let guard = epoch::pin();
        let mut bytes = std::mem::size_of::<Self>();
        // SAFETY: loaded under `guard`.
        if let Some(snapshot) = unsafe { self.snapshot.load(Acquire, &guard).as_ref() } {
            bytes += std::mem::size_of::<VisibilitySnapshot>();
            // SAFETY: reachable from the pinned snapshot.
            bytes += unsafe { list_blocks(snapshot.head) }.len() * std::mem::size_of::<DeleteTsBlock>();
        }
        bytes
    }

    /// Number of delete-ts entries not yet folded into the base bitmap (approximate
    /// while the writer appends).
    pub fn pending_entries(&self) -> usize {
        let guard = epoch::pin();
        // SAFETY: loaded under `guard`.
        let Some(snapshot) = (unsafe { self.snapshot.load(Acquire, &guard).as_ref() }) else { return 0 };
        let mut count = 0;
        // SAFETY: reachable from the pinned snapshot.
        unsafe {
            visit_entries(snapshot.head, |entry| {
                count += usize::from(unpack_entry(entry).1 > snapshot.base_ts);
                true
            })
        };
        count
    }
}

/// Defers the destruction of a replaced snapshot and the blocks folded into its
/// successor.
///
/// # Safety
/// `snapshot` (when not null) and `blocks` must be unreachable for threads that pin
/// after this call, and retired once only.
unsafe fn retire(guard: &Guard, snapshot: Shared<'_, VisibilitySnapshot>, blocks: &[*mut DeleteTsBlock]) {
    // SAFETY: per this function's contract.
    unsafe {
        if !snapshot.is_null() {
            guard.defer_destroy(snapshot);
        }
        for block in blocks {
            let block = *block as usize;
            guard.defer_unchecked(move || drop(Box::from_raw(block as *mut DeleteTsBlock)));
        }
    }
}

impl Drop for TileVisibility {
    fn drop(&mut self) {
        // SAFETY: `&mut self` means no reader, writer or collector runs; blocks before
        // the head were already handed to the epoch collector, the rest are freed here.
        unsafe {
            let guard = epoch::unprotected();
            let snapshot = self.snapshot.load(Relaxed, guard);
            if let Some(snap) = snapshot.as_ref() {
                for block in list_blocks(snap.head) {
                    drop(Box::from_raw(block));
                }
                drop(snapshot.into_owned());
            }
        }
    }
}

const _: () = assert!(ENTRIES_PER_BLOCK * 8 == 64, "entries fill one cache line");

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
    use std::sync::Arc;

    use crate::txn::SnapshotRegistry;
    use crate::visibility::TILE_ROWS;

    fn deleted_rows(tile: &TileVisibility, qts: u64) -> Vec<usize> {
        let mut bitmap = [0u64; TILE_WORDS];
        tile.bitmap_at(Ts(qts), &mut bitmap);
        (0..TILE_ROWS).filter(|row| bitmap[row / 64] >> (row % 64) & 1 == 1).collect()
    }

    #[test]
    fn bitmap_at_sees_deletes_at_or_before_qts() {
        let mut writer = TileWriter::new();
        let tile = Arc::clone(writer.tile());
        assert_eq!(deleted_rows(&tile, 100), Vec::<usize>::new());
        for (i, ts) in (1..=20u64).enumerate() {
            writer.delete((i * 100) as u16, Ts(ts));
        }
        assert_eq!(deleted_rows(&tile, 0), Vec::<usize>::new());
        assert_eq!(deleted_rows(&tile, 1), vec![0]);
        assert_eq!(deleted_rows(&tile, 9), (0..9).map(|i| i * 100).collect::<Vec<_>>());
        assert_eq!(deleted_rows(&tile, 20).len(), 20);
    }

    #[test]
    fn gc_folds_below_lwm_and_keeps_newer_entries() {
        let mut writer = TileWriter::new();
        let tile = Arc::clone(writer.tile());
        for ts in 1..=30u64 {
            writer.delete(ts as u16, Ts(ts));
        }
        let before = tile.memory_bytes();
        let retired = tile.collect_garbage(Ts(17));
        assert_eq!(retired, 2, "blocks 1-8 and 9-16 are fully folded");
        assert_eq!(tile.base_ts(), Ts(17));
        assert!(tile.memory_bytes() < before);
        assert_eq!(deleted_rows(&tile, 17), (1..=17).collect::<Vec<_>>());
        assert_eq!(deleted_rows(&tile, 25), (1..=25).collect::<Vec<_>>());
        assert_eq!(tile.pending_entries(), 13);
        // The writer keeps appending after GC, also into the retained tail block.
        writer.delete(4000, Ts(31));
        assert!(deleted_rows(&tile, 31).contains(&4000));
        // Folding everything seals and retires the whole list: only the snapshot stays.
        tile.collect_garbage(Ts(31));
        assert_eq!(tile.pending_entries(), 0);
        assert_eq!(deleted_rows(&tile, 40).len(), 31);
        assert_eq!(tile.memory_bytes(), folded_tile_bytes());
        assert_eq!(tile.collect_garbage(Ts(20)), 0, "lwm never moves backwards");
        // The writer starts a new list on the folded snapshot.
        writer.delete(4001, Ts(32));
        assert_eq!(deleted_rows(&tile, 31).len(), 31);
        assert_eq!(deleted_rows(&tile, 32).len(), 32);
        assert_eq!(tile.pending_entries(), 1);
    }

    fn folded_tile_bytes() -> usize {
        std::mem::size_of::<TileVisibility>() + std::mem::size_of::<VisibilitySnapshot>()
    }

    #[test]
    fn a_full_tail_block_is_sealed_through_its_next_and_the_writer_goes_on() {
        let mut writer = TileWriter::new();
        let tile = Arc::clone(writer.tile());
        for ts in 1..=ENTRIES_PER_BLOCK as u64 {
            writer.delete(ts as u16, Ts(ts));
        }
        assert_eq!(tile.collect_garbage(Ts(8)), 1, "the one full block is folded and retired");
        assert_eq!(tile.memory_bytes(), folded_tile_bytes());
        writer.delete(100, Ts(9));
        assert_eq!(deleted_rows(&tile, 9), vec![1, 2, 3, 4, 5, 6, 7, 8, 100]);
    }

    /// GC sealed the list but has not swapped its snapshot in when the writer comes:
    /// the writer folds the sealed list itself and GC's swap then fails harmlessly.
    #[test]
    fn a_writer_that_finds_a_seal_before_gc_swaps_folds_the_list_itself() {
        let mut writer = TileWriter::new();
        let tile = Arc::clone(writer.tile());
        for ts in 1..=3u64 {
            writer.delete(ts as u16 * 10, Ts(ts));
        }
        // What GC does before its swap: seal the end of the list.
        let guard = epoch::pin();
        let stale = tile.snapshot.load(Acquire, &guard);
        // SAFETY: loaded under `guard`.
        let head = unsafe { stale.as_ref() }.expect("a snapshot").head;
        // SAFETY: the list hangs off the pinned snapshot.
        assert_eq!(unsafe { &*head }.try_seal_slot(3), Ok(()));
        writer.delete(40, Ts(4));
        assert_eq!(deleted_rows(&tile, 3), vec![10, 20, 30]);
        assert_eq!(deleted_rows(&tile, 4), vec![10, 20, 30, 40]);
        assert_eq!(tile.base_ts(), Ts(3), "the writer folded the sealed entries");
        assert_eq!(tile.pending_entries(), 1);
        // GC's swap from the snapshot it started with fails.
        let late = Owned::new(VisibilitySnapshot { base_ts: 3, head: std::ptr::null_mut(), bitmap: [0; TILE_WORDS] });
        assert!(tile.snapshot.compare_exchange(stale, late, AcqRel, Acquire, &guard).is_err());
        drop(guard);
        assert_eq!(tile.collect_garbage(Ts(4)), 1);
        assert_eq!(deleted_rows(&tile, 9), vec![10, 20, 30, 40]);
    }

    /// Deletes in the race tests: a whole tile, fewer under Miri (an interpreter).
    const RACE_DELETES: u64 = if cfg!(miri) { 120 } else { TILE_ROWS as u64 };

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: if cfg!(miri) { 4 } else { proptest::prelude::ProptestConfig::default().cases }, ..Default::default() })]
        /// Single-threaded model check: random deletes (ts increasing), GC at random
        /// LWMs and reads at random snapshots at or above LWM, against a plain list
        /// of (row, delete ts).
        #[test]
        fn tile_matches_a_list_of_deletes(ops in proptest::collection::vec((0u8..4, 0u16..4096, 0u64..6), 1..300)) {
            let mut writer = TileWriter::new();
        let tile = Arc::clone(writer.tile());
            let mut model: Vec<(usize, u64)> = Vec::new();
            let (mut ts, mut lwm) = (0u64, 0u64);
            for (kind, offset, step) in ops {
                match kind {
                    0 | 1 => {
                        if model.iter().any(|&(row, _)| row == offset as usize) {
                            continue; // a row version is deleted once
                        }
                        ts += 1;
                        writer.delete(offset, Ts(ts));
                        model.push((offset as usize, ts));
                    }
                    2 => {
                        lwm = (lwm + step).min(ts);
                        tile.collect_garbage(Ts(lwm));
                    }
                    _ => {
                        let qts = (lwm + step).min(ts.max(lwm));
                        let mut expected: Vec<usize> = model.iter().filter(|&&(_, at)| at <= qts).map(|&(row, _)| row).collect();
                        expected.sort_unstable();
                        proptest::prop_assert_eq!(deleted_rows(&tile, qts), expected, "at {}", qts);
                    }
                }
            }
            tile.collect_garbage(Ts(ts));
            if ts > 0 {
                proptest::prop_assert_eq!(tile.memory_bytes(), folded_tile_bytes());
            }
            proptest::prop_assert_eq!(deleted_rows(&tile, ts).len(), model.len());
        }
    }

    #[test]
    fn tile_restored_from_a_base_bitmap() {
        let mut base = [0u64; TILE_WORDS];
        base[0] = 0b101;
        let mut writer = TileWriter::with_base(base, Ts(50));
        let tile = Arc::clone(writer.tile());
        assert_eq!(tile.base_ts(), Ts(50));
        assert_eq!(deleted_rows(&tile, 50), vec![0, 2]);
        writer.delete(7, Ts(51));
        assert_eq!(deleted_rows(&tile, 51), vec![0, 2, 7]);
        assert_eq!(deleted_rows(&tile, 50), vec![0, 2]);
        let empty = TileWriter::with_base([0; TILE_WORDS], Ts(50));
        assert_eq!(empty.tile().memory_bytes(), std::mem::size_of::<TileVisibility>());
    }

    #[test]
    fn tile_without_deletes_holds_no_snapshot() {
        let writer = TileWriter::new();
        let tile = writer.tile();
        assert_eq!(tile.memory_bytes(), std::mem::size_of::<TileVisibility>());
        assert_eq!(tile.collect_garbage(Ts(10)), 0);
    }

    /// Writer, collector and readers race, with LWM from the real snapshot registry.
    /// A reader's bitmap at `qts` must hold exactly the rows deleted at or before
    /// `qts`, whatever GC does meanwhile.
    #[test]
    fn gc_racing_readers_and_writer_keeps_bitmaps_exact() {
        race_gc_readers_and_writer(false);
    }

    /// The writer yields between deletes, so GC often folds the whole list and seals
    /// it while the writer is about to append.
    #[test]
    fn gc_sealing_under_a_slow_writer_keeps_bitmaps_exact() {
        race_gc_readers_and_writer(true);
    }

    fn race_gc_readers_and_writer(slow_writer: bool) {
        let mut writer = TileWriter::new();
        let tile = Arc::clone(writer.tile());
        let registry = Arc::new(SnapshotRegistry::new(8));
        let hwm = Arc::new(AtomicU64::new(1)); // every delete with ts < hwm is appended
        let stop = Arc::new(AtomicBool::new(false));
        // Row `ts - 1` is deleted at ts, ts = 1..=RACE_DELETES.
        let writing = {
            let hwm = Arc::clone(&hwm);
            std::thread::spawn(move || {
                for ts in 1..=RACE_DELETES {
                    writer.delete((ts - 1) as u16, Ts(ts));
                    hwm.store(ts + 1, SeqCst);
                    if slow_writer {
                        std::thread::yield_now();
                    }
                }
            })
        };
        let collector = {
            let (tile, registry, hwm, stop) =
                (Arc::clone(&tile), Arc::clone(&registry), Arc::clone(&hwm), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(SeqCst) {
                    let lwm = registry.low_watermark(|| Ts(hwm.load(SeqCst)));
                    tile.collect_garbage(lwm);
                    std::thread::yield_now();
                }
            })
        };
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (tile, registry, hwm, stop) =
                    (Arc::clone(&tile), Arc::clone(&registry), Arc::clone(&hwm), Arc::clone(&stop));
                std::thread::spawn(move || {
                    let mut bitmap = [0u64; TILE_WORDS];
                    let mut checks = 0;
                    while !stop.load(SeqCst) {
                        let snapshot = registry.register(|| Ts(hwm.load(SeqCst))).expect("slot");
                        let qts = snapshot.ts().0;
                        tile.bitmap_at(Ts(qts), &mut bitmap);
                        let ones: u64 = bitmap.iter().map(|w| w.count_ones() as u64).sum();
                        assert_eq!(ones, qts, "bitmap at {qts}");
                        let prefix_ok = (0..qts as usize).all(|row| bitmap[row / 64] >> (row % 64) & 1 == 1);
                        assert!(prefix_ok, "rows 0..{qts} must all be deleted");
                        checks += 1;
                    }
                    checks
                })
            })
            .collect();
        writing.join().expect("writer");
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(true, SeqCst);
        collector.join().expect("collector");
        for reader in readers {
            assert!(reader.join().expect("reader") > 0);
        }
        tile.collect_garbage(Ts(RACE_DELETES));
        assert_eq!(deleted_rows(&tile, RACE_DELETES).len(), RACE_DELETES as usize);
    }
}
