//! `TileVisibility`: the visibility of 4096 consecutive row versions.

use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::{AcqRel, Acquire, Relaxed, Release}};

use crossbeam_epoch::{self as epoch, Atomic, Guard, Owned};

use super::delete_ts_block::{pack_entry, unpack_entry, DeleteTsBlock, ENTRIES_PER_BLOCK};
use crate::types::Ts;

/// Rows per tile; a row offset inside a tile fits the entry's 12 bits.
pub const TILE_ROWS: usize = 4096;
/// u64 words in a tile's bitmap.
pub const TILE_WORDS: usize = TILE_ROWS / 64;

/// The immutable part of a tile: rows deleted at or before `base_ts` as a bitmap, and
/// where the delete-ts entries that may be newer than `base_ts` start.
struct VisibilitySnapshot {
    base_ts: u64,
    /// First block that may hold entries with ts > `base_ts` (entries <= `base_ts` in
    /// it are already folded; OR-ing them again is harmless).
    head: *mut DeleteTsBlock,
    bitmap: [u64; TILE_WORDS],
}

/// Visibility of one tile (paper Figure 7): a visibility snapshot plus a lock-free,
/// append-only delete-ts array.
///
/// Concurrency contract:
/// - exactly one thread (the owning replayer shard) calls [`TileVisibility::delete`],
///   in non-decreasing ts order;
/// - any number of readers call [`TileVisibility::bitmap_at`] with `qts >= LWM`;
/// - at most one thread at a time calls [`TileVisibility::collect_garbage`] with a
///   true LWM (every running and future query has `qts >= lwm`).
///
/// Memory: a tile that never saw a delete holds no snapshot (two null pointers).
/// Retired snapshots and blocks are freed through crossbeam-epoch once no reader
/// that could see them is pinned.
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

impl Default for TileVisibility {
    fn default() -> Self {
        Self::new()
    }
}

impl TileVisibility {
    pub fn new() -> Self {
        Self { snapshot: Atomic::null(), tail: AtomicPtr::new(ptr::null_mut()) }
    }

    /// A tile whose rows in `bitmap` are deleted at or before `base_ts` (recovery).
    /// An empty bitmap keeps the tile snapshot-free.
    pub fn with_base(bitmap: [u64; TILE_WORDS], base_ts: Ts) -> Self {
        let tile = Self::new();
        if bitmap.iter().any(|&word| word != 0) {
            let block = Box::into_raw(DeleteTsBlock::empty());
            tile.tail.store(block, Relaxed);
            let snapshot = VisibilitySnapshot { base_ts: base_ts.0, head: block, bitmap };
            tile.snapshot.store(Owned::new(snapshot), Release);
        }
        tile
    }

    /// Marks row `offset` deleted at `ts`. Writer only (see the type's contract).
    pub fn delete(&self, offset: u16, ts: Ts) {
        let entry = pack_entry(offset, ts);
        let tail = self.tail.load(Relaxed);
        if tail.is_null() {
            let block = Box::into_raw(DeleteTsBlock::with_first(entry));
            self.tail.store(block, Relaxed);
            let snapshot = VisibilitySnapshot { base_ts: 0, head: block, bitmap: [0; TILE_WORDS] };
            // Only the writer installs the first snapshot, and GC ignores a null one,
            // so a plain release store cannot lose a concurrent update.
            self.snapshot.store(Owned::new(snapshot), Release);
            return;
        }
        // SAFETY: `tail` is never freed while the tile lives: GC frees only blocks
        // strictly before the snapshot head, and the head is at or before the tail.
        let tail_block = unsafe { &*tail };
        for slot in &tail_block.entries {
            if slot.load(Relaxed) == 0 {
                slot.store(entry, Release);
                return;
            }
        }
        let block = Box::into_raw(DeleteTsBlock::with_first(entry));
        tail_block.next.store(block, Release);
        self.tail.store(block, Relaxed);
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
        let mut block = snapshot.head;
        while !block.is_null() {
            // SAFETY: blocks reachable from a snapshot loaded under `guard` are freed
            // only after that snapshot is retired and the guard released.
            let current = unsafe { &*block };
            for slot in &current.entries {
                let entry = slot.load(Acquire);
                if entry == 0 {
                    return;
                }
                let (offset, ts) = unpack_entry(entry);
                if ts > qts.0 {
                    return; // entries are in ts order
                }
                out[offset / 64] |= 1 << (offset % 64);
            }
            block = current.next.load(Acquire);
        }
    }

    /// Memory GC: folds every entry with `delete_ts <= lwm` into a new snapshot with
    /// `base_ts = lwm`, swaps it in atomically and retires the folded blocks. Blocks
    /// neither the writer nor readers. Returns the number of blocks retired.
    pub fn collect_garbage(&self, lwm: Ts) -> usize {
        let guard = epoch::pin();
        let current = self.snapshot.load(Acquire, &guard);
        // SAFETY: loaded under `guard`.
        let Some(snapshot) = (unsafe { current.as_ref() }) else { return 0 };
        if snapshot.base_ts >= lwm.0 {
            return 0;
        }
        let mut bitmap = snapshot.bitmap;
        let mut head = snapshot.head;
        let mut retired = Vec::new();
        'blocks: loop {
            // SAFETY: `head` is reachable from the pinned snapshot; see `bitmap_at_pinned`.
            let block = unsafe { &*head };
            for slot in &block.entries {
                let entry = slot.load(Acquire);
                if entry == 0 {
                    break 'blocks; // end of the list so far: keep this block
                }
                let (offset, ts) = unpack_entry(entry);
                if ts > lwm.0 {
                    break 'blocks; // first unfolded entry is in this block
                }
                bitmap[offset / 64] |= 1 << (offset % 64);
            }
            let next = block.next.load(Acquire);
            if next.is_null() {
                break; // the tail stays, the writer appends to it
            }
            retired.push(head);
            head = next;
        }
        let replacement = Owned::new(VisibilitySnapshot { base_ts: lwm.0, head, bitmap });
        match self.snapshot.compare_exchange(current, replacement, AcqRel, Acquire, &guard) {
            Ok(_) => {
                // SAFETY: the old snapshot and the folded blocks are unreachable from
                // the new snapshot; readers that still see them are pinned, so
                // destruction waits for them.
                unsafe {
                    guard.defer_destroy(current);
                    for block in &retired {
                        let block = *block as usize;
                        guard.defer_unchecked(move || drop(Box::from_raw(block as *mut DeleteTsBlock)));
                    }
                }
                retired.len()
            }
            Err(_) => 0, // another collector won; its snapshot is at least as new
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
        let mut block = snapshot.head;
        while !block.is_null() {
            // SAFETY: reachable from the pinned snapshot.
            let current = unsafe { &*block };
            for slot in &current.entries {
                let entry = slot.load(Acquire);
                if entry == 0 {
                    return;
                }
                let (offset, ts) = unpack_entry(entry);
                if ts > after.0 {
                    out.push((base + offset as u32, Ts(ts)));
                }
            }
            block = current.next.load(Acquire);
        }
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
            let mut block = snapshot.head;
            while !block.is_null() {
                bytes += std::mem::size_of::<DeleteTsBlock>();
                // SAFETY: reachable from the pinned snapshot.
                block = unsafe { &*block }.next.load(Acquire);
            }
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
        let mut block = snapshot.head;
        while !block.is_null() {
            // SAFETY: reachable from the pinned snapshot.
            let current = unsafe { &*block };
            count += current
                .entries
                .iter()
                .filter(|slot| {
                    let entry = slot.load(Acquire);
                    entry != 0 && unpack_entry(entry).1 > snapshot.base_ts
                })
                .count();
            block = current.next.load(Acquire);
        }
        count
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
                let mut block = snap.head;
                while !block.is_null() {
                    let owned = Box::from_raw(block);
                    block = owned.next.load(Relaxed);
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

    fn deleted_rows(tile: &TileVisibility, qts: u64) -> Vec<usize> {
        let mut bitmap = [0u64; TILE_WORDS];
        tile.bitmap_at(Ts(qts), &mut bitmap);
        (0..TILE_ROWS).filter(|row| bitmap[row / 64] >> (row % 64) & 1 == 1).collect()
    }

    #[test]
    fn bitmap_at_sees_deletes_at_or_before_qts() {
        let tile = TileVisibility::new();
        assert_eq!(deleted_rows(&tile, 100), Vec::<usize>::new());
        for (i, ts) in (1..=20u64).enumerate() {
            tile.delete((i * 100) as u16, Ts(ts));
        }
        assert_eq!(deleted_rows(&tile, 0), Vec::<usize>::new());
        assert_eq!(deleted_rows(&tile, 1), vec![0]);
        assert_eq!(deleted_rows(&tile, 9), (0..9).map(|i| i * 100).collect::<Vec<_>>());
        assert_eq!(deleted_rows(&tile, 20).len(), 20);
    }

    #[test]
    fn gc_folds_below_lwm_and_keeps_newer_entries() {
        let tile = TileVisibility::new();
        for ts in 1..=30u64 {
            tile.delete(ts as u16, Ts(ts));
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
        tile.delete(4000, Ts(31));
        assert!(deleted_rows(&tile, 31).contains(&4000));
        // Folding everything keeps the tail block only.
        tile.collect_garbage(Ts(31));
        assert_eq!(tile.pending_entries(), 0);
        assert_eq!(deleted_rows(&tile, 40).len(), 31);
        assert_eq!(tile.collect_garbage(Ts(20)), 0, "lwm never moves backwards");
    }

    #[test]
    fn tile_restored_from_a_base_bitmap() {
        let mut base = [0u64; TILE_WORDS];
        base[0] = 0b101;
        let tile = TileVisibility::with_base(base, Ts(50));
        assert_eq!(tile.base_ts(), Ts(50));
        assert_eq!(deleted_rows(&tile, 50), vec![0, 2]);
        tile.delete(7, Ts(51));
        assert_eq!(deleted_rows(&tile, 51), vec![0, 2, 7]);
        assert_eq!(deleted_rows(&tile, 50), vec![0, 2]);
        let empty = TileVisibility::with_base([0; TILE_WORDS], Ts(50));
        assert_eq!(empty.memory_bytes(), std::mem::size_of::<TileVisibility>());
    }

    #[test]
    fn tile_without_deletes_holds_no_snapshot() {
        let tile = TileVisibility::new();
        assert_eq!(tile.memory_bytes(), std::mem::size_of::<TileVisibility>());
        assert_eq!(tile.collect_garbage(Ts(10)), 0);
    }

    /// Writer, collector and readers race, with LWM from the real snapshot registry.
    /// A reader's bitmap at `qts` must hold exactly the rows deleted at or before
    /// `qts`, whatever GC does meanwhile.
    #[test]
    fn gc_racing_readers_and_writer_keeps_bitmaps_exact() {
        let tile = Arc::new(TileVisibility::new());
        let registry = Arc::new(SnapshotRegistry::new(8));
        let hwm = Arc::new(AtomicU64::new(1)); // every delete with ts < hwm is appended
        let stop = Arc::new(AtomicBool::new(false));
        // Row `ts - 1` is deleted at ts, ts = 1..=4096.
        let writer = {
            let (tile, hwm) = (Arc::clone(&tile), Arc::clone(&hwm));
            std::thread::spawn(move || {
                for ts in 1..=TILE_ROWS as u64 {
                    tile.delete((ts - 1) as u16, Ts(ts));
                    hwm.store(ts + 1, SeqCst);
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
        writer.join().expect("writer");
        std::thread::sleep(std::time::Duration::from_millis(20));
        stop.store(true, SeqCst);
        collector.join().expect("collector");
        for reader in readers {
            assert!(reader.join().expect("reader") > 0);
        }
        tile.collect_garbage(Ts(TILE_ROWS as u64));
        assert_eq!(deleted_rows(&tile, TILE_ROWS as u64).len(), TILE_ROWS);
    }
}
