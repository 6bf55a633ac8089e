//! The primary index rebuilt at recovery, on as many threads as there are cores.
//!
//! Inserting the keys was ~80% of a large lake's recovery (each key a cache miss
//! in a large hash table) and ran on one thread. The shards' indexes are
//! independent, and every key of a file belongs to one shard (replay routes a key
//! to the shard its hash names, and a shard writes only its own files), so whole
//! files go to a worker thread owning their shard while the recovering thread
//! reads the next ones. A key of a shard its worker does not own (a file breaking
//! that rule: none should) is handed back and inserted after the workers end, so
//! the result never depends on the rule holding.

use std::sync::mpsc::{sync_channel, SyncSender};
use std::thread::JoinHandle;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, Int64Type};
use arrow_array::{Array, RecordBatch};
use arrow_schema::DataType;

use crate::error::CoreError;
use crate::index::{HashedKey, SinglePointIndex};
use crate::rows::value_at;
use crate::types::{RowId, Ts};

/// How many keys ahead a worker asks for a key's index memory (replay's shards use
/// the same distance): the probes' cache misses then overlap.
const PREFETCH_DISTANCE: usize = 6;

/// Files queued to a worker: a file's key columns are ~1 MB at most, and the
/// recovering thread only needs to stay a file ahead.
const QUEUED_FILES: usize = 2;

/// One file's keys, as recovery read them.
pub(super) struct KeyedFile {
    pub(super) first_row_id: RowId,
    /// The primary-key columns, then `_create_ts`.
    pub(super) key_rows: Vec<RecordBatch>,
    /// Rows not visible at the checkpoint (bit set): they get no key.
    pub(super) deleted: Vec<u64>,
}

/// Why a rebuild stopped.
#[derive(Debug)]
pub(super) enum RebuildError {
    /// Two visible rows of one key, each as (row, created at): a lake recovery
    /// cannot trust. The caller names the rows' files.
    Duplicate { existing: (RowId, Ts), duplicate: (RowId, Ts) },
    Core(CoreError),
}

impl From<CoreError> for RebuildError {
    fn from(error: CoreError) -> Self {
        RebuildError::Core(error)
    }
}

/// A table's indexes being rebuilt: [`Self::add`] each file in row-id order, then
/// [`Self::finish`].
pub(super) struct IndexRebuild {
    shards: usize,
    key_columns: usize,
    workers: Workers,
}

enum Workers {
    /// One group holding every shard, on the recovering thread (a table of one
    /// file, or one core).
    Inline(ShardGroup),
    /// Group `g` (shards `s` with `s % groups == g`) on thread `g`.
    Threads(Vec<(SyncSender<KeyedFile>, JoinHandle<Result<ShardGroup, RebuildError>>)>),
}

impl IndexRebuild {
    /// Starts rebuilding `indexes` (one per shard) with `threads` workers (1: on
    /// this thread).
    pub(super) fn start(indexes: Vec<SinglePointIndex>, key_columns: usize, threads: usize) -> Result<Self, CoreError> {
        let shards = indexes.len().max(1);
        let groups = threads.clamp(1, shards);
        let mut grouped: Vec<Vec<SinglePointIndex>> = (0..groups).map(|_| Vec::new()).collect();
        for (shard, index) in indexes.into_iter().enumerate() {
            grouped[shard % groups].push(index);
        }
        let new_group = |group, indexes| ShardGroup { group, groups, shards, key_columns, indexes, foreign: Vec::new(), added: 0 };
        let workers = if groups == 1 {
            Workers::Inline(new_group(0, grouped.pop().unwrap_or_default()))
        } else {
            let mut threads = Vec::with_capacity(groups);
            for (group, indexes) in grouped.into_iter().enumerate() {
                let (sender, files) = sync_channel::<KeyedFile>(QUEUED_FILES);
                let mut worker = new_group(group, indexes);
                let handle = std::thread::Builder::new()
                    .name(format!("retina-recover-index-{group}"))
                    .spawn(move || {
                        for file in files {
                            worker.index_file(&file)?;
                        }
                        Ok(worker)
                    })
                    .map_err(|e| CoreError::Storage(format!("recovery: cannot start an index thread: {e}")))?;
                threads.push((sender, handle));
            }
            Workers::Threads(threads)
        };
        Ok(Self { shards, key_columns, workers })
    }

    /// Queues `file`'s visible keys for their shard's index. Returns the shard
    /// owning the file (that of its first visible key; 0 when none is visible).
    pub(super) fn add(&mut self, file: KeyedFile) -> Result<usize, RebuildError> {
        let Some(first) = first_visible_key(&file, self.key_columns)? else { return Ok(0) };
        let owner = first.shard(self.shards);
        match &mut self.workers {
            Workers::Inline(group) => group.index_file(&file)?,
            Workers::Threads(threads) => {
                let at = owner % threads.len();
                if threads[at].0.send(file).is_err() {
                    // The worker stopped on an error: that error is the answer.
                    let (_, handle) = threads.swap_remove(at);
                    return Err(join(handle).err().unwrap_or_else(|| {
                        RebuildError::Core(CoreError::Storage("recovery: an index thread stopped early".into()))
                    }));
                }
            }
        }
        Ok(owner)
    }

    /// Waits for the workers and returns the indexes, one per shard, with the
    /// number of keys added.
    pub(super) fn finish(self) -> Result<(Vec<SinglePointIndex>, u64), RebuildError> {
        let groups = match self.workers {
            Workers::Inline(group) => vec![group],
            Workers::Threads(threads) => {
                let handles: Vec<_> = threads.into_iter().map(|(sender, handle)| {
                    drop(sender);
                    handle
                }).collect();
                // Every worker is joined before an error is returned, so none
                // outlives the recovery.
                let results: Vec<_> = handles.into_iter().map(join).collect();
                results.into_iter().collect::<Result<Vec<_>, _>>()?
            }
        };
        let group_count = groups.len();
        let mut added = 0;
        let mut foreign = Vec::new();
        let mut by_group: Vec<std::vec::IntoIter<SinglePointIndex>> = Vec::with_capacity(group_count);
        for group in groups {
            added += group.added;
            foreign.extend(group.foreign);
            by_group.push(group.indexes.into_iter());
        }
        let mut indexes: Vec<SinglePointIndex> = (0..self.shards)
            .map(|shard| by_group[shard % group_count].next().unwrap_or_default())
            .collect();
        for (key, created, row) in foreign {
            insert_once(&mut indexes[key.shard(self.shards)], &key, created, row)?;
            added += 1;
        }
        Ok((indexes, added))
    }
}

fn join(handle: JoinHandle<Result<ShardGroup, RebuildError>>) -> Result<ShardGroup, RebuildError> {
    // A panic in a worker is a bug: it goes on as the recovering thread's.
    handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// The key of the first row of `file` that is not deleted.
fn first_visible_key(file: &KeyedFile, key_columns: usize) -> Result<Option<HashedKey>, CoreError> {
    let mut offset = 0;
    for batch in &file.key_rows {
        if let Some(row) = (0..batch.num_rows()).find(|row| !is_deleted(&file.deleted, offset + row)) {
            return Ok(Some(key_at(batch, row, key_columns, &mut Vec::new())?));
        }
        offset += batch.num_rows();
    }
    Ok(None)
}

fn is_deleted(deleted: &[u64], row: usize) -> bool {
    deleted.get(row / 64).is_some_and(|word| word >> (row % 64) & 1 == 1)
}

fn key_at(batch: &RecordBatch, row: usize, key_columns: usize, values: &mut Vec<crate::value::Value>) -> Result<HashedKey, CoreError> {
    values.clear();
    for column in 0..key_columns {
        values.push(value_at(batch.column(column).as_ref(), row)?);
    }
    Ok(HashedKey::encode(values.iter(), None))
}

/// Key columns that are all 32- or 64-bit integers without nulls (ids, the usual
/// key), encoded straight from their arrays: a `Value` per column and the
/// thread's encoding buffer were ~18% of a worker's time. The bytes are those of
/// [`crate::value::Value::encode_key_part`] (tested); other keys go through it.
struct IntegerKey<'a> {
    columns: Vec<IntegerColumn<'a>>,
}

enum IntegerColumn<'a> {
    Int32(&'a [i32]),
    Int64(&'a [i64]),
}

/// The longest key [`IntegerKey`] encodes: a tag and 8 bytes per column.
const INTEGER_KEY_BYTES: usize = 64;

impl<'a> IntegerKey<'a> {
    fn of(batch: &'a RecordBatch, key_columns: usize) -> Option<Self> {
        if key_columns * 9 > INTEGER_KEY_BYTES {
            return None;
        }
        let columns = (0..key_columns)
            .map(|column| {
                let array = batch.column(column);
                if array.null_count() > 0 {
                    return None;
                }
                match array.data_type() {
                    DataType::Int32 => Some(IntegerColumn::Int32(array.as_primitive::<Int32Type>().values())),
                    DataType::Int64 => Some(IntegerColumn::Int64(array.as_primitive::<Int64Type>().values())),
                    _ => None,
                }
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Self { columns })
    }

    fn key(&self, row: usize) -> HashedKey {
        let mut bytes = [0u8; INTEGER_KEY_BYTES];
        let mut len = 0;
        for column in &self.columns {
            match column {
                IntegerColumn::Int32(values) => {
                    bytes[len] = 3;
                    bytes[len + 1..len + 5].copy_from_slice(&values[row].to_be_bytes());
                    len += 5;
                }
                IntegerColumn::Int64(values) => {
                    bytes[len] = 4;
                    bytes[len + 1..len + 9].copy_from_slice(&values[row].to_be_bytes());
                    len += 9;
                }
            }
        }
        HashedKey::from_bytes(&bytes[..len])
    }
}

/// Adds `key` at `row`, live since `created`, unless a visible row has it already.
fn insert_once(index: &mut SinglePointIndex, key: &HashedKey, created: Ts, row: RowId) -> Result<(), RebuildError> {
    let slot = index.slot(key);
    if let Some(existing) = slot.latest_since() {
        return Err(RebuildError::Duplicate { existing, duplicate: (row, created) });
    }
    slot.write(created, Some(row));
    Ok(())
}

/// The shards one worker owns, and what it has done.
struct ShardGroup {
    group: usize,
    groups: usize,
    shards: usize,
    key_columns: usize,
    /// Shard `s` of this group at `s / groups`.
    indexes: Vec<SinglePointIndex>,
    /// Keys of other groups' shards: (key, created at, row).
    foreign: Vec<(HashedKey, Ts, RowId)>,
    added: u64,
}

impl ShardGroup {
    fn index_file(&mut self, file: &KeyedFile) -> Result<(), RebuildError> {
        let mut values = Vec::with_capacity(self.key_columns);
        let mut keys: Vec<(usize, HashedKey)> = Vec::new();
        let mut offset = 0usize;
        for batch in &file.key_rows {
            let created = batch.column(self.key_columns).as_primitive::<Int64Type>().values();
            let integers = IntegerKey::of(batch, self.key_columns);
            keys.clear();
            for row in 0..batch.num_rows() {
                if !is_deleted(&file.deleted, offset + row) {
                    let key = match &integers {
                        Some(integers) => integers.key(row),
                        None => key_at(batch, row, self.key_columns, &mut values)?,
                    };
                    keys.push((row, key));
                }
            }
            for (i, (row, key)) in keys.iter().enumerate() {
                if let Some((_, ahead)) = keys.get(i + PREFETCH_DISTANCE) {
                    if let Some(index) = self.own_index(ahead) {
                        index.prefetch(ahead);
                    }
                }
                let at = RowId(file.first_row_id.0 + (offset + row) as u64);
                let created = Ts(created[*row] as u64);
                match self.own_index(key) {
                    Some(index) => insert_once(index, key, created, at)?,
                    None => {
                        self.foreign.push((key.clone(), created, at));
                        continue;
                    }
                }
                self.added += 1;
            }
            offset += batch.num_rows();
        }
        Ok(())
    }

    /// This group's index of `key`'s shard, or `None` when another group owns it.
    fn own_index(&mut self, key: &HashedKey) -> Option<&mut SinglePointIndex> {
        let shard = key.shard(self.shards);
        (shard % self.groups == self.group).then(|| self.indexes.get_mut(shard / self.groups)).flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Int64Array};

    /// A file of `keys` created at ts 10 + position, rows `deleted` hidden.
    fn file(first_row_id: u64, keys: &[i64], deleted: &[usize]) -> KeyedFile {
        let created: Vec<i64> = (0..keys.len() as i64).map(|i| 10 + i).collect();
        let key_column: ArrayRef = Arc::new(Int64Array::from(keys.to_vec()));
        let created: ArrayRef = Arc::new(Int64Array::from(created));
        let batch = RecordBatch::try_from_iter([("id", key_column), ("_create_ts", created)]).expect("batch");
        let mut bitmap = vec![0u64; keys.len().div_ceil(64)];
        for &row in deleted {
            bitmap[row / 64] |= 1 << (row % 64);
        }
        KeyedFile { first_row_id: RowId(first_row_id), key_rows: vec![batch], deleted: bitmap }
    }

    fn shard_of(key: i64, shards: usize) -> usize {
        HashedKey::encode([crate::value::Value::Int64(key)].iter(), None).shard(shards)
    }

    /// Per shard, the (key bytes, row) pairs of its index, sorted.
    fn contents(indexes: &[SinglePointIndex]) -> Vec<Vec<(Vec<u8>, RowId)>> {
        indexes
            .iter()
            .map(|index| {
                let mut entries: Vec<_> = index.live_entries().map(|(key, row)| (key.to_vec(), row)).collect();
                entries.sort();
                entries
            })
            .collect()
    }

    fn rebuild(files: Vec<KeyedFile>, shards: usize, threads: usize) -> Result<(Vec<SinglePointIndex>, u64, Vec<usize>), RebuildError> {
        let indexes = (0..shards).map(|_| SinglePointIndex::new()).collect();
        let mut rebuild = IndexRebuild::start(indexes, 1, threads)?;
        let mut owners = Vec::new();
        for file in files {
            owners.push(rebuild.add(file)?);
        }
        let (indexes, added) = rebuild.finish()?;
        Ok((indexes, added, owners))
    }

    /// Files as replay writes them (each shard's keys in files of its own), and
    /// files that mix shards: threads give exactly what one thread gives, each key
    /// in its own shard's index.
    #[test]
    fn threads_build_the_indexes_one_thread_builds() {
        let shards = 4;
        let mut files_of_shard: Vec<Vec<i64>> = vec![Vec::new(); shards];
        for key in 0..4_000i64 {
            files_of_shard[shard_of(key, shards)].push(key);
        }
        let mixed: Vec<i64> = (4_000..4_300).collect();
        let make = || {
            let mut files = Vec::new();
            let mut first = 0;
            for keys in &files_of_shard {
                for chunk in keys.chunks(300) {
                    files.push(file(first, chunk, &[1, 7]));
                    first += chunk.len() as u64;
                }
            }
            files.push(file(first, &mixed, &[0]));
            files
        };
        let (one, one_added, one_owners) = rebuild(make(), shards, 1).expect("one thread");
        for threads in [2, 3, 4, 8] {
            let (many, added, owners) = rebuild(make(), shards, threads).expect("threads");
            assert_eq!(contents(&many), contents(&one), "{threads} threads");
            assert_eq!((added, &owners), (one_added, &one_owners), "{threads} threads");
        }
        let per_shard = contents(&one);
        for (shard, entries) in per_shard.iter().enumerate() {
            for (key, _) in entries {
                assert_eq!(HashedKey::from_bytes(key).shard(shards), shard);
            }
        }
        // Every key but the deleted rows: two per 300-key file of each shard, one of the mixed file.
        let deleted_rows: u64 = files_of_shard.iter().map(|keys| 2 * keys.len().div_ceil(300) as u64).sum::<u64>() + 1;
        assert_eq!(one_added, 4_300 - deleted_rows);
        assert_eq!(per_shard.iter().map(Vec::len).sum::<usize>() as u64, one_added);
        // A file's owner is the shard of its first visible key (row 0 of the mixed file is deleted).
        assert_eq!(*one_owners.last().expect("owners"), shard_of(4_001, shards));
    }

    /// A key visible in two files is refused with both rows, on one thread and on
    /// several, also when the second copy is in a file of another shard.
    #[test]
    fn a_key_visible_twice_is_refused_with_both_rows() {
        let shards = 2;
        let key = 41;
        let own: Vec<i64> = (0..200).filter(|k| shard_of(*k, shards) == shard_of(key, shards)).collect();
        let other: Vec<i64> = (0..200).filter(|k| shard_of(*k, shards) != shard_of(key, shards)).collect();
        let at = own.iter().position(|k| *k == key).expect("key 41 in its shard's file") as u64;
        for threads in [1, 2] {
            let mut misplaced = vec![other[0], key];
            misplaced.extend(&other[1..10]);
            let files = vec![file(0, &own, &[]), file(1_000, &misplaced, &[])];
            match rebuild(files, shards, threads) {
                Err(RebuildError::Duplicate { existing, duplicate }) => {
                    let mut rows = [existing, duplicate];
                    rows.sort();
                    assert_eq!(rows, [(RowId(at), Ts(10 + at)), (RowId(1_001), Ts(11))], "{threads} threads");
                }
                other => panic!("{threads} threads: expected a duplicate, got {:?}", other.map(|(_, added, _)| added)),
            }
            // Deleted in the second file, the key is no duplicate.
            let files = vec![file(0, &own, &[]), file(1_000, &misplaced, &[1])];
            let (_, added, _) = rebuild(files, shards, threads).expect("no duplicate");
            assert_eq!(added, (own.len() + misplaced.len() - 1) as u64);
        }
    }

    /// Integer keys read from their arrays are the bytes `Value`s encode to; a
    /// key with a null or of another type is left to the `Value`s.
    #[test]
    fn integer_keys_encode_as_values_do() {
        use arrow_array::{Int32Array, StringArray};
        let a: ArrayRef = Arc::new(Int32Array::from(vec![i32::MIN, -1, 0, 7, i32::MAX]));
        let b: ArrayRef = Arc::new(Int64Array::from(vec![i64::MIN, -1, 0, 1 << 40, i64::MAX]));
        let batch = RecordBatch::try_from_iter([("a", Arc::clone(&a)), ("b", Arc::clone(&b)), ("c", Arc::clone(&a))]).expect("batch");
        let integers = IntegerKey::of(&batch, 3).expect("integer columns");
        for row in 0..batch.num_rows() {
            assert_eq!(integers.key(row), key_at(&batch, row, 3, &mut Vec::new()).expect("values"), "row {row}");
        }
        let nullable: ArrayRef = Arc::new(Int64Array::from(vec![Some(1), None, Some(3), Some(4), Some(5)]));
        let text: ArrayRef = Arc::new(StringArray::from(vec!["a", "b", "c", "d", "e"]));
        for other in [nullable, text] {
            let batch = RecordBatch::try_from_iter([("a", Arc::clone(&a)), ("x", other)]).expect("batch");
            assert!(IntegerKey::of(&batch, 2).is_none());
        }
        let wide: Vec<(String, ArrayRef)> = (0..8).map(|i| (format!("k{i}"), Arc::clone(&b))).collect();
        assert!(IntegerKey::of(&RecordBatch::try_from_iter(wide).expect("batch"), 8).is_none(), "72 bytes do not fit");
    }

    /// A file with no visible row goes to no worker and is owned by shard 0.
    #[test]
    fn a_file_without_visible_rows_adds_nothing() {
        let (indexes, added, owners) = rebuild(vec![file(0, &[1, 2, 3], &[0, 1, 2])], 2, 2).expect("rebuild");
        assert_eq!((added, owners), (0, vec![0]));
        assert!(indexes.iter().all(SinglePointIndex::is_empty));
    }
}
