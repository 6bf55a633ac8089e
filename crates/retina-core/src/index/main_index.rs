//! Main index: row-id ranges -> row-location ranges.

use std::sync::Arc;

use crate::types::{FileId, RowId, RowLocation};
use crate::visibility::{RgVisibility, RgWriter};

/// A contiguous row-id range that maps onto one file's single row group.
pub struct MainIndexEntry {
    pub first_row_id: RowId,
    pub rows: u64,
    pub file_id: FileId,
    /// The writer of the file's visibility, so a delete finds its tile without
    /// another lookup. Held here because the shard owning this index is the file's
    /// only writer.
    pub writer: RgWriter,
}

/// One shard's main index for one table.
///
/// Invariant: entries are sorted by `first_row_id` and do not overlap (a shard
/// reserves increasing row-id ranges), so a lookup is a binary search.
#[derive(Default)]
pub struct MainIndex {
    entries: Vec<MainIndexEntry>,
}

impl MainIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the range of a file, in row-id order.
    ///
    /// # Panics
    /// If the range overlaps another (row ids are reserved by the engine, never reused).
    pub fn push(&mut self, entry: MainIndexEntry) {
        let at = self.entries.partition_point(|e| e.first_row_id < entry.first_row_id);
        let overlaps_previous = at > 0 && {
            let previous = &self.entries[at - 1];
            previous.first_row_id.0 + previous.rows > entry.first_row_id.0
        };
        let overlaps_next = self.entries.get(at).is_some_and(|next| entry.first_row_id.0 + entry.rows > next.first_row_id.0);
        assert!(!overlaps_previous && !overlaps_next, "main-index ranges must not overlap");
        self.entries.insert(at, entry);
    }

    /// Drops the range of a file that storage GC replaced.
    pub fn remove_file(&mut self, file_id: FileId) {
        self.entries.retain(|e| e.file_id != file_id);
    }

    /// The location of `row` and its file's visibility (for reading).
    pub fn locate(&self, row: RowId) -> Option<(RowLocation, &Arc<RgVisibility>)> {
        let index = self.entries.partition_point(|e| e.first_row_id <= row).checked_sub(1)?;
        let entry = &self.entries[index];
        let offset = row.0 - entry.first_row_id.0;
        (offset < entry.rows).then(|| {
            (RowLocation { file_id: entry.file_id, row_group: 0, offset: offset as u32 }, entry.writer.visibility())
        })
    }

    /// The location of `row` and the writer of its file's visibility (for deletes).
    pub fn locate_mut(&mut self, row: RowId) -> Option<(RowLocation, &mut RgWriter)> {
        let index = self.entries.partition_point(|e| e.first_row_id <= row).checked_sub(1)?;
        let entry = &mut self.entries[index];
        let offset = row.0 - entry.first_row_id.0;
        (offset < entry.rows).then(|| {
            (RowLocation { file_id: entry.file_id, row_group: 0, offset: offset as u32 }, &mut entry.writer)
        })
    }

    pub fn entries(&self) -> &[MainIndexEntry] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locates_rows_inside_ranges_only() {
        let mut index = MainIndex::new();
        index.push(MainIndexEntry { first_row_id: RowId(0), rows: 10, file_id: FileId(1), writer: RgWriter::new(10) });
        index.push(MainIndexEntry { first_row_id: RowId(20), rows: 10, file_id: FileId(2), writer: RgWriter::new(10) });
        assert_eq!(index.locate(RowId(3)).map(|(l, _)| (l.file_id, l.offset)), Some((FileId(1), 3)));
        assert_eq!(index.locate_mut(RowId(25)).map(|(l, _)| (l.file_id, l.offset)), Some((FileId(2), 5)));
        assert!(index.locate(RowId(15)).is_none());
        assert!(index.locate_mut(RowId(30)).is_none());
        // The writer found is the one of the row's file.
        if let Some((location, writer)) = index.locate_mut(RowId(25)) {
            writer.delete(location.offset, crate::types::Ts(1));
        }
        let deleted = |index: &MainIndex, entry: usize| index.entries()[entry].writer.visibility().is_deleted_at(5, crate::types::Ts(1));
        assert!(!deleted(&index, 0) && deleted(&index, 1));
    }
}
