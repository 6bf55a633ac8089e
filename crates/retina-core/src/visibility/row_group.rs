//! `RgVisibility`: the tiles of one row group.

use crossbeam_epoch as epoch;

use super::tile::{TileVisibility, TILE_ROWS, TILE_WORDS};
use super::DeleteBitmap;
use crate::types::Ts;

/// Visibility of a row group of up to `capacity` rows, split into 4096-row tiles.
/// The same contract as [`TileVisibility`]: one writer (the owning shard), many
/// readers, one collector.
pub struct RgVisibility {
    tiles: Box<[TileVisibility]>,
    capacity: usize,
}

impl RgVisibility {
    pub fn new(capacity: usize) -> Self {
        let tiles = (0..capacity.div_ceil(TILE_ROWS)).map(|_| TileVisibility::new()).collect();
        Self { tiles, capacity }
    }

    /// A row group whose rows set in `deleted` are deleted at or before `base_ts`
    /// (recovery from a checkpoint).
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
        Self { tiles, capacity }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Marks row `offset` of the row group deleted at `ts`. Writer only.
    ///
    /// # Panics
    /// If `offset >= capacity`: row locations come from the index, never from input.
    pub fn delete(&self, offset: u32, ts: Ts) {
        let offset = offset as usize;
        assert!(offset < self.capacity, "row offset {offset} outside row group of {}", self.capacity);
        self.tiles[offset / TILE_ROWS].delete((offset % TILE_ROWS) as u16, ts);
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
        let rg = RgVisibility::new(3 * TILE_ROWS);
        rg.delete(5, Ts(1));
        rg.delete(TILE_ROWS as u32 + 7, Ts(2));
        rg.delete(2 * TILE_ROWS as u32 + 9, Ts(3));
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
        let rg = RgVisibility::new(2 * TILE_ROWS);
        rg.delete(TILE_ROWS as u32 + 1, Ts(3));
        rg.delete(2, Ts(4));
        rg.delete(5, Ts(1));
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
        let rg = RgVisibility::from_bitmap(rows, &deleted, Ts(9));
        assert_eq!(rg.bitmap_at(Ts(9), rows), deleted);
        rg.delete(2, Ts(10));
        assert!(rg.is_deleted_at(2, Ts(10)) && !rg.is_deleted_at(2, Ts(9)));
    }

    #[test]
    fn bits_per_tuple_of_a_fully_collected_row_group_is_near_one() {
        let rows = 16 * TILE_ROWS;
        let rg = RgVisibility::new(rows);
        for offset in (0..rows as u32).step_by(7) {
            rg.delete(offset, Ts(offset as u64 + 1));
        }
        rg.collect_garbage(Ts(rows as u64 + 1));
        let bits = rg.memory_bytes() as f64 * 8.0 / rows as f64;
        // Each tile: its 4096-bit bitmap, a 16-byte snapshot header and the 16-byte
        // tile; no delete-ts block is left once everything is folded.
        assert!(bits < 1.07, "{bits} bits per tuple after GC");
    }
}
