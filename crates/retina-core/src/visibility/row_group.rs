//! `RgVisibility`: the tiles of one row group, and `RgWriter`, their one writer.

use std::sync::Arc;

use crossbeam_epoch as epoch;

use super::tile::TileVisibility;
use super::{TILE_ROWS, TILE_WORDS};
use super::DeleteBitmap;
use crate::types::Ts;

/// Visibility of a row group of up to `capacity` rows, split into 4096-row tiles.
/// The contract of [`TileVisibility`]: one writer, many readers, one collector. The
/// writer is the row group's [`RgWriter`], made with it; through `&RgVisibility`
/// (what readers and memory GC share) nothing can be deleted.
pub struct RgVisibility {
    tiles: Box<[TileVisibility]>,
    capacity: usize,
}

/// The single writer of one row group's visibility: the only way to mark its rows
/// deleted.
///
/// Contract: a row group exists only together with its one writer (both are made by
/// [`RgWriter::new`] or [`RgWriter::from_bitmap`]); the writer is not `Clone`, and
/// [`RgWriter::delete`] takes `&mut self`. So two deletes on one row group's tiles
/// never run at once, which their lock-free delete-ts lists rely on (a second
/// concurrent writer would free blocks under the first). The writer may move between
/// threads: the replayer shard that owns the row group's keys holds it in its main
/// index (storage GC makes a rewritten file's writer and hands it to that shard).
/// Deletes must come in non-decreasing ts order (checked in debug builds).
///
/// ```
/// use retina_core::visibility::RgWriter;
/// use retina_core::Ts;
///
/// let mut writer = RgWriter::new(10);
/// let readers = std::sync::Arc::clone(writer.visibility());
/// writer.delete(3, Ts(1));
/// assert!(readers.is_deleted_at(3, Ts(1)));
/// ```
///
/// A second writer cannot be made from safe code. The writer cannot be cloned:
///
/// ```compile_fail,E0599
/// use retina_core::visibility::RgWriter;
///
/// let writer = RgWriter::new(10);
/// let _second = writer.clone();
/// ```
///
/// The shared visibility cannot delete:
///
/// ```compile_fail,E0599
/// use retina_core::visibility::RgWriter;
/// use retina_core::Ts;
///
/// let writer = RgWriter::new(10);
/// writer.visibility().delete(3, Ts(1));
/// ```
///
/// And two threads cannot use one writer at once:
///
/// ```compile_fail,E0499
/// use retina_core::visibility::RgWriter;
/// use retina_core::Ts;
///
/// let mut writer = RgWriter::new(10);
/// std::thread::scope(|scope| {
///     scope.spawn(|| writer.delete(1, Ts(1)));
///     scope.spawn(|| writer.delete(2, Ts(2)));
/// });
/// ```
pub struct RgWriter {
    visibility: Arc<RgVisibility>,
    /// The ts of the latest delete, for the order check.
    last_ts: Ts,
}

impl RgWriter {
    /// A row group of `capacity` rows with no deletes, and its writer.
    pub fn new(capacity: usize) -> Self {
        let tiles = (0..capacity.div_ceil(TILE_ROWS)).map(|_| TileVisibility::new()).collect();
        Self { visibility: Arc::new(RgVisibility { tiles, capacity }), last_ts: Ts(0) }
    }

    /// A row group whose rows set in `deleted` are deleted at or before `base_ts`
    /// (recovery from a checkpoint), and its writer.
    pub fn from_bitmap(capacity: usize, deleted: &[u64], base_ts: Ts) -> Self {
        let tiles = (0..capacity.div_ceil(TILE_ROWS))
            .map(|tile| {
                let mut words = [0u64; TILE_WORDS];
                for (i, word) in words.iter_mut().enumerate() {
                    *word = deleted.get(tile * TILE_WORDS + i).copied().unwrap_or(0);
                }
                TileVisibility::with_base(words, base_ts)
            })
            .collect();
        Self { visibility: Arc::new(RgVisibility { tiles, capacity }), last_ts: Ts(0) }
    }

    /// The row group's visibility, for readers and memory GC.
    pub fn visibility(&self) -> &Arc<RgVisibility> {
        &self.visibility
    }

    /// Marks row `offset` of the row group deleted at `ts`.
    ///
    /// # Panics
    /// If `offset >= capacity`: row locations come from the index, never from input.
    pub fn delete(&mut self, offset: u32, ts: Ts) {
        let offset = offset as usize;
        let visibility = &*self.visibility;
        assert!(offset < visibility.capacity, "row offset {offset} outside row group of {}", visibility.capacity);
        debug_assert!(ts >= self.last_ts, "row-group delete at {ts} after one at {}", self.last_ts);
        self.last_ts = ts;
        // SAFETY: the tiles of a row group are made only inside its one writer, which
        // is not Clone, and `&mut self` makes this the only delete running on them.
        unsafe { visibility.tiles[offset / TILE_ROWS].delete((offset % TILE_ROWS) as u16, ts) }
    }
}

impl RgVisibility {
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Deleted-rows bitmap for the first `rows` rows at snapshot `qts`.
    pub fn bitmap_at(&self, qts: Ts, rows: usize) -> DeleteBitmap {
        let rows = rows.min(self.capacity);
        let tiles = rows.div_ceil(TILE_ROWS);
        let mut bitmap = vec![0u64; tiles * TILE_WORDS];
        let guard = epoch::pin();
        for (tile, words) in self.tiles[..tiles].iter().zip(bitmap.chunks_exact_mut(TILE_WORDS)) {
            let words: &mut [u64; TILE_WORDS] = words.try_into().expect("chunks are TILE_WORDS long");
            tile.bitmap_at_pinned(qts, words, &guard);
        }
        bitmap.truncate(rows.div_ceil(64));
        bitmap
    }

    /// Whether row `offset` is deleted at `qts` (a point check; scans use bitmaps).
    pub fn is_deleted_at(&self, offset: u32, qts: Ts) -> bool {
        let offset = offset as usize;
        if offset >= self.capacity {
            return false;
        }
        let mut words = [0u64; TILE_WORDS];
        self.tiles[offset / TILE_ROWS].bitmap_at(qts, &mut words);
        let in_tile = offset % TILE_ROWS;
        words[in_tile / 64] >> (in_tile % 64) & 1 == 1
    }

    /// Every delete with `ts > after` as (row offset, ts), sorted by ts: what storage
    /// GC replays onto a rewritten file (dual delete). Requires `after >= LWM`.
    pub fn deletes_after(&self, after: Ts) -> Vec<(u32, Ts)> {
        let mut out = Vec::new();
        for (index, tile) in self.tiles.iter().enumerate() {
            tile.deletes_after(after, (index * TILE_ROWS) as u32, &mut out);
        }
        out.sort_by_key(|&(offset, ts)| (ts, offset));
        out
    }

    /// Memory GC over every tile; returns the number of retired delete-ts blocks.
    pub fn collect_garbage(&self, lwm: Ts) -> usize {
        self.tiles.iter().map(|tile| tile.collect_garbage(lwm)).sum()
    }

    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.tiles.iter().map(TileVisibility::memory_bytes).sum::<usize>()
    }

    pub fn pending_entries(&self) -> usize {
        self.tiles.iter().map(TileVisibility::pending_entries).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletes_route_to_their_tile_and_bitmap_is_trimmed() {
        let mut writer = RgWriter::new(3 * TILE_ROWS);
        let rg = Arc::clone(writer.visibility());
        writer.delete(5, Ts(1));
        writer.delete(TILE_ROWS as u32 + 7, Ts(2));
        writer.delete(2 * TILE_ROWS as u32 + 9, Ts(3));
        let bitmap = rg.bitmap_at(Ts(2), 2 * TILE_ROWS + 100);
        assert_eq!(bitmap.len(), (2 * TILE_ROWS + 100).div_ceil(64));
        let ones: u32 = bitmap.iter().map(|w| w.count_ones()).sum();
        assert_eq!(ones, 2, "the ts-3 delete is after the snapshot");
        assert!(rg.is_deleted_at(TILE_ROWS as u32 + 7, Ts(2)));
        assert!(!rg.is_deleted_at(2 * TILE_ROWS as u32 + 9, Ts(2)));
        assert!(rg.is_deleted_at(2 * TILE_ROWS as u32 + 9, Ts(3)));
    }

    #[test]
    fn deletes_after_lists_newer_deletes_in_ts_order() {
        let mut writer = RgWriter::new(2 * TILE_ROWS);
        let rg = Arc::clone(writer.visibility());
        // Tile by tile the deletes are (5, 1), (2, 4), (4097, 3).
        writer.delete(5, Ts(1));
        writer.delete(TILE_ROWS as u32 + 1, Ts(3));
        writer.delete(2, Ts(4));
        assert_eq!(rg.deletes_after(Ts(2)), vec![(TILE_ROWS as u32 + 1, Ts(3)), (2, Ts(4))]);
        assert!(rg.deletes_after(Ts(4)).is_empty());
    }

    #[test]
    fn restored_row_group_matches_its_bitmap() {
        let rows = 2 * TILE_ROWS + 10;
        let mut deleted = vec![0u64; rows.div_ceil(64)];
        for row in [1usize, 4097, rows - 1] {
            deleted[row / 64] |= 1 << (row % 64);
        }
        let mut writer = RgWriter::from_bitmap(rows, &deleted, Ts(9));
        let rg = Arc::clone(writer.visibility());
        assert_eq!(rg.bitmap_at(Ts(9), rows), deleted);
        writer.delete(2, Ts(10));
        assert!(rg.is_deleted_at(2, Ts(10)) && !rg.is_deleted_at(2, Ts(9)));
    }

    #[test]
    fn bits_per_tuple_of_a_fully_collected_row_group_is_near_one() {
        let rows = 16 * TILE_ROWS;
        let mut writer = RgWriter::new(rows);
        let rg = Arc::clone(writer.visibility());
        for offset in (0..rows as u32).step_by(7) {
            writer.delete(offset, Ts(offset as u64 + 1));
        }
        rg.collect_garbage(Ts(rows as u64 + 1));
        let bits = rg.memory_bytes() as f64 * 8.0 / rows as f64;
        // Each tile: its 4096-bit bitmap, a 16-byte snapshot header and the 16-byte
        // tile; no delete-ts block is left once everything is folded.
        assert!(bits < 1.07, "{bits} bits per tuple after GC");
    }
}
