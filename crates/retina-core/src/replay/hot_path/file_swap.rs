//! A storage-GC swap, applied in the shard that owns the file's keys (see
//! `gc::storage`): the deletes that reached the old file after the rewrite are
//! replayed onto the new one (dual delete), keys are repointed, and the table's file
//! list is swapped.

use crate::table::TableRuntime;
use crate::types::{RowId, Ts};
use crate::visibility::RgWriter;

use crate::replay::messages::FileSwap;

impl RgWriter {
    /// Replays `deletes` (old offset, ts), in ts order, onto the rows that moved.
    pub(crate) fn replay_moved_deletes(&mut self, deletes: &[(u32, Ts)], old_to_new: &[u32]) {
        for &(old_offset, ts) in deletes {
            if let Some(&new_offset) = old_to_new.get(old_offset as usize) {
                if new_offset != u32::MAX {
                    self.delete(new_offset, ts);
                }
            }
        }
    }
}

/// Applies a swap in the owning shard (called from the shard's thread). Consumes the
/// swap and lets go of the old file before reporting done: the old file may be
/// deleted as soon as no one holds its visibility, and the storage-GC thread checks
/// that right after.
///
/// A swap whose old file is no longer in the table (swapped already) changes
/// nothing and reports `false`: adding its new file would hold a second copy of
/// rows that live elsewhere, never deleted by replay.
pub(crate) fn apply_swap(
    swap: FileSwap,
    index: &mut crate::index::SinglePointIndex,
    main: &mut crate::index::MainIndex,
    table: &TableRuntime,
) {
    let FileSwap { old, new, moves, rewritten_at, done, .. } = swap;
    let old_meta = &old.meta;
    if !table.has_flushed(old_meta.file_id) {
        drop((old, new, moves));
        let _ = done.send(false);
        return;
    }
    let mut new_file = None;
    if let Some((new, mut writer)) = new {
        let mut old_to_new = vec![u32::MAX; old_meta.row_count as usize];
        for (_, old_offset, new_offset) in &moves {
            old_to_new[*old_offset as usize] = *new_offset;
        }
        writer.replay_moved_deletes(&old.visibility.deletes_after(rewritten_at), &old_to_new);
        for (key, old_offset, new_offset) in &moves {
            index.repoint(
                key,
                RowId(old_meta.first_row_id.0 + *old_offset as u64),
                RowId(new.meta.first_row_id.0 + *new_offset as u64),
            );
        }
        main.push(crate::index::MainIndexEntry {
            first_row_id: new.meta.first_row_id,
            rows: new.meta.row_count,
            file_id: new.meta.file_id,
            writer,
        });
        new_file = Some(new);
    }
    main.remove_file(old_meta.file_id);
    table.replace_flushed(old_meta.file_id, new_file);
    drop((old, moves));
    let _ = done.send(true);
}
