//! Single-point index: primary-key bytes -> row id, versioned by ts, with tombstones.

use hashbrown::HashMap;

use crate::types::{RowId, Ts};

/// The versions of one key, oldest first: `(ts, Some(row))` is a live row written at
/// ts, `(ts, None)` a tombstone written at ts.
///
/// Invariant: timestamps strictly increase along the versions. The common case of a
/// single version is stored inline, without a heap allocation.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyVersions {
    One(Ts, Option<RowId>),
    Many(Vec<(Ts, Option<RowId>)>),
}

impl KeyVersions {
    fn latest(&self) -> (Ts, Option<RowId>) {
        match self {
            KeyVersions::One(ts, row) => (*ts, *row),
            KeyVersions::Many(versions) => *versions.last().expect("Many holds at least two versions"),
        }
    }

    fn at(&self, ts: Ts) -> Option<RowId> {
        match self {
            KeyVersions::One(written, row) => (*written <= ts).then_some(*row).flatten(),
            KeyVersions::Many(versions) => {
                let index = versions.partition_point(|(written, _)| *written <= ts);
                index.checked_sub(1).and_then(|i| versions[i].1)
            }
        }
    }

    fn push(&mut self, ts: Ts, row: Option<RowId>) {
        match self {
            KeyVersions::One(old_ts, old_row) => {
                debug_assert!(*old_ts <= ts);
                if *old_ts == ts {
                    // Same transaction (e.g. delete then re-insert): keep the last write.
                    *old_row = row;
                } else {
                    *self = KeyVersions::Many(vec![(*old_ts, *old_row), (ts, row)]);
                }
            }
            KeyVersions::Many(versions) => match versions.last_mut() {
                Some(last) if last.0 == ts => last.1 = row,
                _ => versions.push((ts, row)),
            },
        }
    }

    /// Drops versions no snapshot at or above `lwm` can see. Returns false when the
    /// key can be removed entirely (only a tombstone at or below `lwm` remains).
    fn prune(&mut self, lwm: Ts) -> bool {
        if let KeyVersions::Many(versions) = self {
            // The newest version at or below lwm is the oldest one anyone can see.
            let visible_from = versions.partition_point(|(ts, _)| *ts <= lwm).saturating_sub(1);
            versions.drain(..visible_from);
            if versions.len() == 1 {
                *self = KeyVersions::One(versions[0].0, versions[0].1);
            }
        }
        !matches!(self, KeyVersions::One(ts, None) if *ts <= lwm)
    }
}

/// Parts of a [`SinglePointIndex`]: index GC walks one part at a time, so it holds
/// its shard for a sixteenth of a full pass (a full pass over a million keys took
/// 20–25 ms, a visible freshness bump every time it ran).
pub const INDEX_PARTS: usize = 16;

/// One shard's single-point index for one table.
///
/// Invariant: a key lives in part [`part_of`] of it, and only there.
pub struct SinglePointIndex {
    parts: Box<[HashMap<Box<[u8]>, KeyVersions>]>,
}

impl Default for SinglePointIndex {
    fn default() -> Self {
        Self { parts: (0..INDEX_PARTS).map(|_| HashMap::new()).collect() }
    }
}

/// The part of `key`, from its last bytes (where encoded keys vary most: the low
/// bytes of integers, the end of strings before their terminator).
#[inline]
fn part_of(key: &[u8]) -> usize {
    let mut hash = 0u32;
    for &byte in key.iter().rev().take(12) {
        hash = hash.wrapping_mul(31) ^ u32::from(byte);
    }
    hash as usize % INDEX_PARTS
}

impl SinglePointIndex {
    pub fn new() -> Self {
        Self::default()
    }

    fn part(&self, key: &[u8]) -> &HashMap<Box<[u8]>, KeyVersions> {
        &self.parts[part_of(key)]
    }

    /// The live row of `key` as of the newest version (what replay needs).
    pub fn latest(&self, key: &[u8]) -> Option<RowId> {
        self.part(key).get(key).and_then(|versions| versions.latest().1)
    }

    /// The live row of `key` visible at snapshot `ts`.
    pub fn lookup_at(&self, key: &[u8], ts: Ts) -> Option<RowId> {
        self.part(key).get(key).and_then(|versions| versions.at(ts))
    }

    /// Records that `key` points to `row` from `ts` on.
    pub fn insert(&mut self, key: &[u8], row: RowId, ts: Ts) {
        self.write(key, ts, Some(row));
    }

    /// Points `key`'s newest version from row `from` to row `to`, keeping its ts (the
    /// row moved to another file, its content did not change). Returns whether the
    /// newest version was `from`.
    pub fn repoint(&mut self, key: &[u8], from: RowId, to: RowId) -> bool {
        let Some(versions) = self.parts[part_of(key)].get_mut(key) else { return false };
        let newest = match versions {
            KeyVersions::One(_, row) => row,
            KeyVersions::Many(list) => &mut list.last_mut().expect("Many holds at least two versions").1,
        };
        if *newest == Some(from) {
            *newest = Some(to);
            true
        } else {
            false
        }
    }

    /// Records a tombstone for `key` at `ts`.
    pub fn delete(&mut self, key: &[u8], ts: Ts) {
        self.write(key, ts, None);
    }

    fn write(&mut self, key: &[u8], ts: Ts, row: Option<RowId>) {
        let part = &mut self.parts[part_of(key)];
        match part.get_mut(key) {
            Some(versions) => versions.push(ts, row),
            None => {
                part.insert(key.into(), KeyVersions::One(ts, row));
            }
        }
    }

    /// Index GC: drops versions invisible to every snapshot at or above `lwm`, and
    /// keys whose only remaining version is an old tombstone.
    pub fn collect_garbage(&mut self, lwm: Ts) {
        for part in 0..INDEX_PARTS {
            self.collect_garbage_part(lwm, part);
        }
    }

    /// [`Self::collect_garbage`] over part `part % INDEX_PARTS` only.
    pub fn collect_garbage_part(&mut self, lwm: Ts, part: usize) {
        self.parts[part % INDEX_PARTS].retain(|_, versions| versions.prune(lwm));
    }

    pub fn len(&self) -> usize {
        self.parts.iter().map(HashMap::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(HashMap::is_empty)
    }

    /// Iterates over keys with a live newest version (for checkpoints and tests).
    pub fn live_entries(&self) -> impl Iterator<Item = (&[u8], RowId)> {
        self.parts
            .iter()
            .flat_map(|part| part.iter())
            .filter_map(|(key, versions)| versions.latest().1.map(|row| (key.as_ref(), row)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_answer_snapshot_lookups() {
        let mut index = SinglePointIndex::new();
        index.insert(b"k", RowId(1), Ts(10));
        index.delete(b"k", Ts(20));
        index.insert(b"k", RowId(2), Ts(30));
        assert_eq!(index.lookup_at(b"k", Ts(9)), None);
        assert_eq!(index.lookup_at(b"k", Ts(10)), Some(RowId(1)));
        assert_eq!(index.lookup_at(b"k", Ts(25)), None);
        assert_eq!(index.lookup_at(b"k", Ts(30)), Some(RowId(2)));
        assert_eq!(index.latest(b"k"), Some(RowId(2)));
        assert_eq!(index.latest(b"other"), None);
    }

    #[test]
    fn repoint_moves_only_the_newest_matching_version() {
        let mut index = SinglePointIndex::new();
        index.insert(b"k", RowId(1), Ts(1));
        assert!(!index.repoint(b"k", RowId(7), RowId(9)));
        assert!(index.repoint(b"k", RowId(1), RowId(9)));
        assert_eq!(index.latest(b"k"), Some(RowId(9)));
        index.delete(b"k", Ts(2));
        assert!(!index.repoint(b"k", RowId(9), RowId(10)), "a deleted key stays deleted");
    }

    #[test]
    fn same_ts_writes_keep_the_last() {
        let mut index = SinglePointIndex::new();
        index.insert(b"k", RowId(1), Ts(5));
        index.delete(b"k", Ts(6));
        index.insert(b"k", RowId(2), Ts(6));
        assert_eq!(index.lookup_at(b"k", Ts(6)), Some(RowId(2)));
        assert_eq!(index.lookup_at(b"k", Ts(5)), Some(RowId(1)));
    }

    #[test]
    fn gc_keeps_what_snapshots_at_lwm_see() {
        let mut index = SinglePointIndex::new();
        index.insert(b"a", RowId(1), Ts(1));
        index.insert(b"a", RowId(2), Ts(5)); // an update moved the row
        index.insert(b"b", RowId(3), Ts(2));
        index.delete(b"b", Ts(3));
        index.collect_garbage(Ts(4));
        assert_eq!(index.lookup_at(b"a", Ts(4)), Some(RowId(1)));
        assert_eq!(index.lookup_at(b"a", Ts(5)), Some(RowId(2)));
        assert_eq!(index.len(), 1, "b's tombstone at 3 <= lwm is dropped");
        index.collect_garbage(Ts(5));
        assert_eq!(index.live_entries().count(), 1);
        assert_eq!(index.lookup_at(b"a", Ts(5)), Some(RowId(2)));
    }

    /// GC part by part ends where a full pass ends; keys spread over the parts.
    #[test]
    fn gc_by_parts_equals_a_full_pass_and_keys_spread_over_parts() {
        let build = || {
            let mut index = SinglePointIndex::new();
            for id in 0u64..2_000 {
                let key = crate::value::encode_key(&[crate::value::Value::Int64(id as i64)]);
                index.insert(&key, RowId(id), Ts(1));
                if id % 3 == 0 {
                    index.delete(&key, Ts(2));
                }
            }
            index
        };
        let mut full = build();
        full.collect_garbage(Ts(5));
        let mut by_parts = build();
        for part in 0..INDEX_PARTS {
            by_parts.collect_garbage_part(Ts(5), part);
        }
        assert_eq!(full.len(), by_parts.len());
        assert_eq!(full.len(), 2_000 - 667, "old tombstones are gone");
        let busiest = by_parts.parts.iter().map(HashMap::len).max().unwrap_or(0);
        assert!(busiest < by_parts.len() / 4, "one part holds {busiest} of {} keys", by_parts.len());
        // One part only: the others keep their tombstones.
        let mut one = build();
        one.collect_garbage_part(Ts(5), 0);
        assert!(one.len() > full.len());
    }
}
