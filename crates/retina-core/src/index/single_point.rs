//! Single-point index: primary-key bytes -> row id, versioned by ts, with tombstones.

use hashbrown::hash_table::{Entry, OccupiedEntry, VacantEntry};
use std::num::NonZeroU64;

use hashbrown::HashTable;
use thin_vec::{thin_vec, ThinVec};

use super::key::{stable_key_hash, HashedKey, StoredKey};
use crate::prefetch::prefetch_line;
use crate::types::{RowId, Ts};

/// One version of a key: from `ts` on it points to a row, or is a tombstone.
///
/// Packed into 16 bytes: the row is stored plus one, a tombstone being `u64::MAX`
/// (row ids count up from 0 per table and never get near it). `(Ts, Option<RowId>)`
/// took 24. The stored value is never 0, and that spare value is where
/// [`KeyVersions`] keeps its variant, so a key's versions take 16 bytes, not 24.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Version {
    ts: Ts,
    row_plus_one: NonZeroU64,
}

const TOMBSTONE: NonZeroU64 = NonZeroU64::MAX;

impl Version {
    fn new(ts: Ts, row: Option<RowId>) -> Self {
        let row_plus_one = match row {
            // Row ids are assigned by the engine, counting up from 0: far below
            // u64::MAX - 1, the last one that packs apart from the tombstone.
            Some(row) => {
                debug_assert!(row.0 < u64::MAX - 1, "row id {} is out of the index's range", row.0);
                NonZeroU64::new(row.0.wrapping_add(1)).unwrap_or(NonZeroU64::MIN)
            }
            None => TOMBSTONE,
        };
        Self { ts, row_plus_one }
    }

    fn row(self) -> Option<RowId> {
        (!self.is_tombstone()).then(|| RowId(self.row_plus_one.get() - 1))
    }

    fn is_tombstone(self) -> bool {
        self.row_plus_one == TOMBSTONE
    }
}

/// The versions of one key, oldest first.
///
/// Invariant: timestamps strictly increase along the versions. The common case of a
/// single version is stored inline, without a heap allocation; several (until index
/// GC folds them) sit behind a thin pointer (length and capacity in the allocation),
/// so the enum takes 16 bytes, not the 24 of a `Vec`: 8 bytes less on every key.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyVersions {
    One(Version),
    Many(ThinVec<Version>),
}

impl KeyVersions {
    fn latest(&self) -> Version {
        match self {
            KeyVersions::One(version) => *version,
            KeyVersions::Many(versions) => *versions.last().expect("Many holds at least two versions"),
        }
    }

    fn at(&self, ts: Ts) -> Option<RowId> {
        match self {
            KeyVersions::One(version) => (version.ts <= ts).then(|| version.row()).flatten(),
            KeyVersions::Many(versions) => {
                let index = versions.partition_point(|version| version.ts <= ts);
                index.checked_sub(1).and_then(|i| versions[i].row())
            }
        }
    }

    fn push(&mut self, ts: Ts, row: Option<RowId>) {
        let new = Version::new(ts, row);
        match self {
            KeyVersions::One(old) => {
                debug_assert!(old.ts <= ts);
                if old.ts == ts {
                    // Same transaction (e.g. delete then re-insert): keep the last write.
                    *old = new;
                } else {
                    *self = KeyVersions::Many(thin_vec![*old, new]);
                }
            }
            KeyVersions::Many(versions) => match versions.last_mut() {
                Some(last) if last.ts == ts => *last = new,
                _ => versions.push(new),
            },
        }
    }

    /// Whether index GC may ever drop something of this key: an older version, or
    /// the key itself once its tombstone is below LWM. A key with one live version
    /// holds no garbage, and GC does not visit it.
    fn awaits_gc(&self) -> bool {
        match self {
            KeyVersions::One(version) => version.is_tombstone(),
            KeyVersions::Many(_) => true,
        }
    }

    /// Drops versions no snapshot at or above `lwm` can see. Returns false when the
    /// key can be removed entirely (only a tombstone at or below `lwm` remains).
    fn prune(&mut self, lwm: Ts) -> bool {
        if let KeyVersions::Many(versions) = self {
            // The newest version at or below lwm is the oldest one anyone can see.
            let visible_from = versions.partition_point(|version| version.ts <= lwm).saturating_sub(1);
            versions.drain(..visible_from);
            if versions.len() == 1 {
                *self = KeyVersions::One(versions[0]);
            }
        }
        !self.is_expired(lwm)
    }

    /// Whether only a tombstone at or below `lwm` is left: the key can go.
    fn is_expired(&self, lwm: Ts) -> bool {
        matches!(self, KeyVersions::One(version) if version.is_tombstone() && version.ts <= lwm)
    }
}

/// Parts of a [`SinglePointIndex`]: index GC walks one part at a time, so it holds
/// its shard for a sixteenth of a full pass (a full pass over a million keys took
/// 20–25 ms, a visible freshness bump every time it ran).
pub const INDEX_PARTS: usize = 16;

/// Index GC probes the keys awaiting it one by one, unless more than one in this
/// many of a part's keys await it: then it walks the part instead, in memory order,
/// since a probe costs a cache miss and a walk's visit a fraction of one.
const WALK_WHEN_AWAITING_ONE_IN: usize = 8;

/// One key and its versions.
pub(crate) struct KeyEntry {
    key: StoredKey,
    versions: KeyVersions,
}

/// One shard's single-point index for one table.
///
/// Invariant: a key lives in part [`part_of`] of its [`table_hash`], and only there.
pub struct SinglePointIndex {
    parts: Box<[HashTable<KeyEntry>]>,
    /// Per part, the table hashes of its keys that await GC ([`KeyVersions::awaits_gc`]),
    /// so GC visits those and not every key: a pass over a large, idle or insert-only
    /// table walked all of its keys every few seconds for nothing (100M keys: ~5% of
    /// a core per shard, idle).
    ///
    /// Invariant: every key that awaits GC has its hash here; a hash may outlive its
    /// key's need (GC then finds nothing to do and drops it), and keys with the same
    /// hash share one.
    awaiting_gc: Box<[Vec<u64>]>,
    /// Per part, where its control bytes were at the last probe that found or added a key
    /// (0: not known yet), so [`Self::prefetch`] can name a bucket's memory without
    /// reading any of it. Only a hint: after the part grows it is stale, and a
    /// prefetch of a stale address is wasted, not wrong, until the next probe.
    control: [usize; INDEX_PARTS],
}

impl Default for SinglePointIndex {
    fn default() -> Self {
        Self {
            parts: (0..INDEX_PARTS).map(|_| HashTable::new()).collect(),
            awaiting_gc: (0..INDEX_PARTS).map(|_| Vec::new()).collect(),
            control: [0; INDEX_PARTS],
        }
    }
}

/// The hash table position of a key from its [`stable_key_hash`], which the router
/// already computed. Its low bits are the same for all keys of a shard when the shard
/// count is a power of two (`hash % shards` picked the shard), and hashbrown takes
/// the bucket from the low bits: rotated, those bits land at 47..50, which neither the
/// bucket (low bits), the control byte (top seven) nor [`part_of`] (32..36) uses.
#[inline]
fn table_hash(stable_hash: u64) -> u64 {
    stable_hash.rotate_right(17)
}

/// The part of a key with table hash `hash`.
#[inline]
fn part_of(hash: u64) -> usize {
    (hash >> 32) as usize % INDEX_PARTS
}

/// One key's place in the index, found with one hash and one probe: what replay
/// reads (the newest version) and then writes (a new version) at the same key.
pub(crate) struct KeySlot<'a> {
    place: Place<'a>,
    /// The key's table hash and its part's list of keys awaiting GC.
    hash: u64,
    awaiting_gc: &'a mut Vec<u64>,
    /// The part's prefetch hint ([`SinglePointIndex::prefetch`]).
    control: &'a mut usize,
}

/// Where the control bytes of `entry`'s table are: hashbrown keeps bucket `i` just
/// below them, at `-(i + 1)` entries.
fn control_bytes_of(entry: &OccupiedEntry<'_, KeyEntry>) -> usize {
    let at = std::ptr::from_ref(entry.get()).addr();
    at.wrapping_add((entry.bucket_index() + 1) * std::mem::size_of::<KeyEntry>())
}

enum Place<'a> {
    Present(OccupiedEntry<'a, KeyEntry>),
    Absent(VacantEntry<'a, KeyEntry>, &'a StoredKey),
}

impl KeySlot<'_> {
    /// The live row of the key as of its newest version.
    pub fn latest(&self) -> Option<RowId> {
        match &self.place {
            Place::Present(entry) => entry.get().versions.latest().row(),
            Place::Absent(..) => None,
        }
    }

    /// The live row of the key as of its newest version, with the ts it has been
    /// live since.
    pub fn latest_since(&self) -> Option<(RowId, Ts)> {
        match &self.place {
            Place::Present(entry) => {
                let version = entry.get().versions.latest();
                version.row().map(|row| (row, version.ts))
            }
            Place::Absent(..) => None,
        }
    }

    /// Records that the key points to `row` (`None`: a tombstone) from `ts` on.
    pub fn write(self, ts: Ts, row: Option<RowId>) {
        let starts_awaiting_gc = match self.place {
            Place::Present(mut entry) => {
                let versions = &mut entry.get_mut().versions;
                let awaited = versions.awaits_gc();
                versions.push(ts, row);
                !awaited && versions.awaits_gc()
            }
            Place::Absent(entry, key) => {
                let versions = KeyVersions::One(Version::new(ts, row));
                let awaits = versions.awaits_gc();
                // A new key is a hint too: a bulk load of new keys (recovery) never
                // finds one, and would never prefetch.
                *self.control = control_bytes_of(&entry.insert(KeyEntry { key: key.clone(), versions }));
                awaits
            }
        };
        if starts_awaiting_gc {
            self.awaiting_gc.push(self.hash);
        }
    }
}

impl SinglePointIndex {
    pub fn new() -> Self {
        Self::default()
    }

    /// Makes room for `keys` more keys spread over the parts, so a bulk load
    /// (recovery) does not rehash each part as it doubles.
    pub(crate) fn reserve(&mut self, keys: usize) {
        let per_part = keys / INDEX_PARTS + keys / INDEX_PARTS / 16 + 16;
        for part in self.parts.iter_mut() {
            part.reserve(per_part, |entry| table_hash(stable_key_hash(entry.key.as_bytes())));
        }
    }

    fn find(&self, key: &[u8]) -> Option<&KeyVersions> {
        let hash = table_hash(stable_key_hash(key));
        self.parts[part_of(hash)].find(hash, |entry| entry.key.as_bytes() == key).map(|entry| &entry.versions)
    }

    /// The place of `key`, to read and then write it with one probe and no hashing.
    pub(crate) fn slot<'a>(&'a mut self, key: &'a HashedKey) -> KeySlot<'a> {
        let (hash, key) = (table_hash(key.hash()), key.stored());
        // Only when the table grows: entries do not keep their hash (8 bytes each).
        let rehash = |entry: &KeyEntry| table_hash(stable_key_hash(entry.key.as_bytes()));
        let part = part_of(hash);
        let place = match self.parts[part].entry(hash, |entry| entry.key == *key, rehash) {
            Entry::Occupied(entry) => {
                self.control[part] = control_bytes_of(&entry);
                Place::Present(entry)
            }
            Entry::Vacant(entry) => Place::Absent(entry, key),
        };
        KeySlot { place, hash, awaiting_gc: &mut self.awaiting_gc[part], control: &mut self.control[part] }
    }

    /// Starts loading, without waiting, the table memory a [`Self::slot`] of `key`
    /// will read: a shard calls it a few operations ahead, so the cache misses of
    /// several probes overlap instead of each stalling the thread in turn (the
    /// probe was 31% of a shard's time on a million keys, nearly all of it waiting
    /// for memory).
    ///
    /// hashbrown starts probing at bucket `hash & (buckets - 1)`, reads a group of
    /// control bytes from there, and stores bucket `i` at `-(i + 1)` entries from
    /// the control bytes (an entry displaced by collisions lies further on, and is
    /// left to the probe). Nothing is read here: reading the bucket's control byte to find
    /// the entry was itself a miss that stalled (57% of the prefetching loop's
    /// samples). If hashbrown changed its layout, this would prefetch the wrong
    /// lines: slower, never wrong.
    #[inline]
    pub(crate) fn prefetch(&self, key: &HashedKey) {
        let hash = table_hash(key.hash());
        let part = part_of(hash);
        let control = self.control[part];
        let Some(mask) = self.parts[part].num_buckets().checked_sub(1) else { return };
        if control == 0 {
            return;
        }
        let bucket = hash as usize & mask;
        let size = std::mem::size_of::<KeyEntry>();
        let entry = control.wrapping_sub((bucket + 1) * size);
        for address in [control.wrapping_add(bucket), entry, entry.wrapping_add(size - 1)] {
            prefetch_line(address);
        }
    }

    /// The live row of `key` as of the newest version (what replay needs).
    pub fn latest(&self, key: &[u8]) -> Option<RowId> {
        self.find(key).and_then(|versions| versions.latest().row())
    }

    /// The live row of `key` visible at snapshot `ts`.
    pub fn lookup_at(&self, key: &[u8], ts: Ts) -> Option<RowId> {
        self.find(key).and_then(|versions| versions.at(ts))
    }

    /// Records that `key` points to `row` from `ts` on.
    pub fn insert(&mut self, key: &[u8], row: RowId, ts: Ts) {
        self.slot(&HashedKey::from_bytes(key)).write(ts, Some(row));
    }

    /// Points `key`'s newest version from row `from` to row `to`, keeping its ts (the
    /// row moved to another file, its content did not change). Returns whether the
    /// newest version was `from`.
    pub fn repoint(&mut self, key: &[u8], from: RowId, to: RowId) -> bool {
        let hash = table_hash(stable_key_hash(key));
        let Some(entry) = self.parts[part_of(hash)].find_mut(hash, |entry| entry.key.as_bytes() == key) else {
            return false;
        };
        let newest = match &mut entry.versions {
            KeyVersions::One(version) => version,
            KeyVersions::Many(list) => list.last_mut().expect("Many holds at least two versions"),
        };
        if newest.row() == Some(from) {
            *newest = Version::new(newest.ts, Some(to));
            true
        } else {
            false
        }
    }

    /// Records a tombstone for `key` at `ts`.
    pub fn delete(&mut self, key: &[u8], ts: Ts) {
        self.slot(&HashedKey::from_bytes(key)).write(ts, None);
    }

    /// Index GC: drops versions invisible to every snapshot at or above `lwm`, and
    /// keys whose only remaining version is an old tombstone.
    pub fn collect_garbage(&mut self, lwm: Ts) {
        for part in 0..INDEX_PARTS {
            self.collect_garbage_part(lwm, part);
        }
    }

    /// [`Self::collect_garbage`] over part `part % INDEX_PARTS` only: the keys that
    /// await GC, found by hash.
    pub fn collect_garbage_part(&mut self, lwm: Ts, part: usize) {
        let part = part % INDEX_PARTS;
        let mut hashes = std::mem::take(&mut self.awaiting_gc[part]);
        let table = &mut self.parts[part];
        let key_hash = |entry: &KeyEntry| table_hash(stable_key_hash(entry.key.as_bytes()));
        if hashes.len() * WALK_WHEN_AWAITING_ONE_IN > table.len() {
            // Many keys await: one pass in memory order is cheaper than a probe each.
            hashes.clear();
            table.retain(|entry| {
                let keep = entry.versions.prune(lwm);
                if keep && entry.versions.awaits_gc() {
                    hashes.push(key_hash(entry));
                }
                keep
            });
            self.awaiting_gc[part] = hashes;
            return;
        }
        let is_hash = |entry: &KeyEntry, hash: u64| key_hash(entry) == hash;
        hashes.retain(|&hash| {
            let (mut expired, mut still_awaiting) = (false, false);
            // May also yield other keys whose hashes share the probed bits.
            for entry in table.iter_hash_mut(hash).filter(|entry| is_hash(entry, hash)) {
                expired |= !entry.versions.prune(lwm);
                still_awaiting |= entry.versions.awaits_gc() && !entry.versions.is_expired(lwm);
            }
            while expired {
                match table.find_entry(hash, |entry| is_hash(entry, hash) && entry.versions.is_expired(lwm)) {
                    Ok(found) => drop(found.remove()),
                    Err(_) => expired = false,
                }
            }
            still_awaiting
        });
        if hashes.capacity() > 4 * hashes.len() + 1024 {
            hashes.shrink_to_fit(); // after a burst of updates
        }
        self.awaiting_gc[part] = hashes;
    }

    /// How many keys await GC (with keys sharing a hash counted once).
    pub fn awaiting_gc(&self) -> usize {
        self.awaiting_gc.iter().map(Vec::len).sum()
    }

    pub fn len(&self) -> usize {
        self.parts.iter().map(HashTable::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(HashTable::is_empty)
    }

    /// Iterates over keys with a live newest version (for checkpoints and tests).
    pub fn live_entries(&self) -> impl Iterator<Item = (&[u8], RowId)> {
        self.parts
            .iter()
            .flat_map(|part| part.iter())
            .filter_map(|entry| entry.versions.latest().row().map(|row| (entry.key.as_bytes(), row)))
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

    /// A key with one version fits 40 bytes: what a probe reads is a cache line or
    /// two, not three, and a table of them a sixth less than at 48.
    #[test]
    fn an_entry_takes_40_bytes() {
        assert_eq!(std::mem::size_of::<Version>(), 16);
        assert_eq!(std::mem::size_of::<KeyVersions>(), 16);
        assert_eq!(std::mem::size_of::<KeyEntry>(), 40);
    }

    /// The packed row keeps row 0, the largest real row ids and the tombstone apart.
    #[test]
    fn versions_round_trip_rows_and_tombstones() {
        for row in [0, 1, 65_535, u64::MAX - 2] {
            let version = Version::new(Ts(3), Some(RowId(row)));
            assert_eq!((version.row(), version.is_tombstone()), (Some(RowId(row)), false), "row {row}");
        }
        let tombstone = Version::new(Ts(3), None);
        assert_eq!((tombstone.row(), tombstone.is_tombstone()), (None, true));
    }

    /// Keys on both sides of the inline limit, and a slot read then written.
    #[test]
    fn long_and_short_keys_and_slots_answer_like_the_versions_they_hold() {
        let mut index = SinglePointIndex::new();
        let keys: Vec<Vec<u8>> = [0usize, 1, 21, 22, 23, 64].iter().map(|&len| (0..len as u8).collect()).collect();
        let keys: Vec<HashedKey> = keys.iter().map(|key| HashedKey::from_bytes(key)).collect();
        for (row, key) in keys.iter().enumerate() {
            let slot = index.slot(key);
            assert_eq!(slot.latest(), None);
            slot.write(Ts(1), Some(RowId(row as u64)));
        }
        for (row, key) in keys.iter().enumerate() {
            assert_eq!(index.latest(key.bytes()), Some(RowId(row as u64)), "key of {} bytes", key.bytes().len());
            let slot = index.slot(key);
            assert_eq!(slot.latest(), Some(RowId(row as u64)));
            slot.write(Ts(2), None);
            assert_eq!(index.lookup_at(key.bytes(), Ts(1)), Some(RowId(row as u64)));
            assert_eq!(index.lookup_at(key.bytes(), Ts(2)), None);
        }
        let mut live: Vec<&[u8]> = index.live_entries().map(|(key, _)| key).collect();
        assert!(live.is_empty());
        index.insert(keys[5].bytes(), RowId(9), Ts(3));
        live = index.live_entries().map(|(key, _)| key).collect();
        assert_eq!(live, vec![keys[5].bytes()], "a heap-stored key comes back whole");
    }

    proptest::proptest! {
        /// Any sequence of writes answers every snapshot lookup as a plain list of
        /// versions per key does, before and after GC.
        #[test]
        fn index_agrees_with_a_list_of_versions(ops in proptest::collection::vec((0u8..40, 0usize..3, proptest::bool::ANY), 1..200)) {
            let mut index = SinglePointIndex::new();
            let mut model: std::collections::HashMap<Vec<u8>, Vec<(Ts, Option<RowId>)>> = Default::default();
            let key_of = |k: u8, width: usize| -> Vec<u8> { std::iter::repeat_n(k, [3, 22, 30][width]).collect() };
            for (at, &(k, width, live)) in ops.iter().enumerate() {
                let (key, ts) = (key_of(k, width), Ts(at as u64 + 1));
                let row = live.then_some(RowId(at as u64));
                match at % 2 {
                    0 => index.slot(&HashedKey::from_bytes(&key)).write(ts, row),
                    _ => match row {
                        Some(row) => index.insert(&key, row, ts),
                        None => index.delete(&key, ts),
                    },
                }
                model.entry(key).or_default().push((ts, row));
            }
            let last = ops.len() as u64 + 1;
            for (key, versions) in &model {
                for ts in 0..=last {
                    let expected = versions.iter().rev().find(|(written, _)| written.0 <= ts).and_then(|(_, row)| *row);
                    proptest::prop_assert_eq!(index.lookup_at(key, Ts(ts)), expected);
                }
                proptest::prop_assert_eq!(index.latest(key), versions.last().and_then(|(_, row)| *row));
            }
            let lwm = Ts(last / 2);
            index.collect_garbage(lwm);
            for (key, versions) in &model {
                for ts in lwm.0..=last {
                    let expected = versions.iter().rev().find(|(written, _)| written.0 <= ts).and_then(|(_, row)| *row);
                    proptest::prop_assert_eq!(index.lookup_at(key, Ts(ts)), expected);
                }
            }
        }
    }

    /// Every key, its versions, sorted: two indexes hold the same when these match.
    fn contents(index: &SinglePointIndex) -> Vec<(Vec<u8>, KeyVersions)> {
        let mut all: Vec<_> = index.parts.iter().flat_map(|part| part.iter()).map(|e| (e.key.as_bytes().to_vec(), e.versions.clone())).collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// GC as it was: every key of every part visited.
    fn collect_garbage_walking_every_key(index: &mut SinglePointIndex, lwm: Ts) {
        for part in index.parts.iter_mut() {
            part.retain(|entry| entry.versions.prune(lwm));
        }
    }

    /// The invariant of `awaiting_gc`: every key that awaits GC has its hash listed.
    fn every_awaiting_key_is_listed(index: &SinglePointIndex) -> bool {
        index.parts.iter().zip(index.awaiting_gc.iter()).all(|(part, listed)| {
            part.iter().filter(|e| e.versions.awaits_gc()).all(|e| listed.contains(&table_hash(stable_key_hash(e.key.as_bytes()))))
        })
    }

    proptest::proptest! {
        /// GC of the keys awaiting it leaves what a walk over every key leaves, at any
        /// LWM, pass after pass, with writes in between; with a large base of keys
        /// that await nothing (GC probes the listed keys) and without (it walks).
        #[test]
        fn gc_of_awaiting_keys_equals_a_walk_over_every_key(
            base in proptest::prop_oneof![proptest::strategy::Just(0u32), proptest::strategy::Just(5_000)],
            rounds in proptest::collection::vec((proptest::collection::vec((0u8..60, proptest::bool::ANY), 0..80), 0u64..100), 1..6),
        ) {
            let (mut listed, mut walked) = (SinglePointIndex::new(), SinglePointIndex::new());
            for id in 0..base {
                listed.insert(&id.to_be_bytes(), RowId(id as u64), Ts(0));
                walked.insert(&id.to_be_bytes(), RowId(id as u64), Ts(0));
            }
            let mut ts = 0u64;
            for (writes, lwm_back) in rounds {
                for (k, live) in writes {
                    ts += 1;
                    let key = [k, k % 7];
                    for index in [&mut listed, &mut walked] {
                        match live {
                            true => index.insert(&key, RowId(ts), Ts(ts)),
                            false => index.delete(&key, Ts(ts)),
                        }
                    }
                }
                proptest::prop_assert!(every_awaiting_key_is_listed(&listed));
                let lwm = Ts(ts.saturating_sub(lwm_back));
                listed.collect_garbage(lwm);
                collect_garbage_walking_every_key(&mut walked, lwm);
                proptest::prop_assert_eq!(contents(&listed), contents(&walked));
                proptest::prop_assert!(every_awaiting_key_is_listed(&listed));
            }
        }
    }

    /// Keys with one live version are not visited: an insert-only or idle index has
    /// nothing awaiting GC, and GC brings an updated one back to that.
    #[test]
    fn only_updated_and_deleted_keys_await_gc() {
        let mut index = SinglePointIndex::new();
        for id in 0u64..10_000 {
            index.insert(&id.to_be_bytes(), RowId(id), Ts(1));
        }
        assert_eq!(index.awaiting_gc(), 0, "inserts leave nothing to collect");
        for id in 0u64..30 {
            index.insert(&id.to_be_bytes(), RowId(10_000 + id), Ts(2)); // an update
        }
        for id in 30u64..40 {
            index.delete(&id.to_be_bytes(), Ts(3));
        }
        index.delete(b"never there", Ts(3));
        index.insert(&0u64.to_be_bytes(), RowId(20_000), Ts(4)); // already awaiting
        assert_eq!(index.awaiting_gc(), 41);
        index.collect_garbage(Ts(2));
        assert_eq!(index.awaiting_gc(), 12, "newer than LWM: the tombstones and key 0's third version");
        assert_eq!(index.lookup_at(&0u64.to_be_bytes(), Ts(2)), Some(RowId(10_000)));
        index.collect_garbage(Ts(4));
        assert_eq!((index.awaiting_gc(), index.len()), (0, 9_990), "deleted keys gone, updated ones down to one version");
        assert_eq!(index.latest(&0u64.to_be_bytes()), Some(RowId(20_000)));
    }

    /// A prefetch is only a hint: on an empty index, for absent and present keys
    /// and across growth it answers nothing and changes nothing.
    #[test]
    fn prefetching_changes_no_answer() {
        let mut index = SinglePointIndex::new();
        let keys: Vec<HashedKey> = (0u32..5_000).map(|id| HashedKey::from_bytes(&id.to_be_bytes())).collect();
        index.prefetch(&keys[0]);
        for (row, key) in keys.iter().enumerate() {
            index.prefetch(key);
            index.slot(key).write(Ts(1), Some(RowId(row as u64)));
            index.prefetch(key);
            index.prefetch(&keys[(row * 7 + 1) % keys.len()]);
        }
        // Probes that find their key record where the control bytes are; prefetches
        // from that hint, made stale again by growth, still change nothing.
        for (row, key) in keys.iter().enumerate().rev() {
            index.prefetch(&keys[(row * 13 + 5) % keys.len()]);
            let slot = index.slot(key);
            assert_eq!(slot.latest(), Some(RowId(row as u64)));
            slot.write(Ts(2), Some(RowId(row as u64 + 10_000)));
            index.slot(&HashedKey::from_bytes(&(row as u32 + 100_000).to_be_bytes())).write(Ts(2), Some(RowId(0)));
        }
        assert!(index.control.iter().any(|&control| control != 0), "probes that found keys left hints");
        for (row, key) in keys.iter().enumerate() {
            index.prefetch(key);
            assert_eq!(index.latest(key.bytes()), Some(RowId(row as u64 + 10_000)));
        }
        assert_eq!(index.len(), 2 * keys.len());
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
        let busiest = by_parts.parts.iter().map(HashTable::len).max().unwrap_or(0);
        assert!(busiest < by_parts.len() / 4, "one part holds {busiest} of {} keys", by_parts.len());
        // One part only: the others keep their tombstones.
        let mut one = build();
        one.collect_garbage_part(Ts(5), 0);
        assert!(one.len() > full.len());
    }
}
