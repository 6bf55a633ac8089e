//! Main index: row-id ranges -> row-location ranges.

use std::sync::Arc;

use crate::types::{FileId, RowId, RowLocation};
use crate::visibility::RgVisibility;

/// A contiguous row-id range that maps onto one file's single row group.
#[derive(Clone)]
pub struct MainIndexEntry {
    pub first_row_id: RowId,
    pub rows: u64,
    pub file_id: FileId,
    /// The file's visibility, so a delete finds its tile without another lookup.
    pub visibility: Arc<RgVisibility>,
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

    /// Adds the range of a new file. Its first row id must be above every range so far.
    ///
    /// # Panics
    /// If ranges would go out of order (row ids come from the engine, not input).
    pub fn push(&mut self, entry: MainIndexEntry) {
        if let Some(last) = self.entries.last() {
            assert!(
                entry.first_row_id.0 >= last.first_row_id.0 + last.rows,
                "main-index ranges must increase"
            );
        }
        self.entries.push(entry);
    }

    /// The location of `row` and its file's visibility.
    pub fn locate(&self, row: RowId) -> Option<(RowLocation, &Arc<RgVisibility>)> {
        let index = self.entries.partition_point(|e| e.first_row_id <= row).checked_sub(1)?;
        let entry = &self.entries[index];
        let offset = row.0 - entry.first_row_id.0;
        (offset < entry.rows).then(|| {
            (RowLocation { file_id: entry.file_id, row_group: 0, offset: offset as u32 }, &entry.visibility)
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
        let vis = Arc::new(RgVisibility::new(10));
        index.push(MainIndexEntry { first_row_id: RowId(0), rows: 10, file_id: FileId(1), visibility: vis.clone() });
        index.push(MainIndexEntry { first_row_id: RowId(20), rows: 10, file_id: FileId(2), visibility: vis });
        assert_eq!(index.locate(RowId(3)).map(|(l, _)| (l.file_id, l.offset)), Some((FileId(1), 3)));
        assert_eq!(index.locate(RowId(25)).map(|(l, _)| (l.file_id, l.offset)), Some((FileId(2), 5)));
        assert!(index.locate(RowId(15)).is_none());
        assert!(index.locate(RowId(30)).is_none());
    }
}
