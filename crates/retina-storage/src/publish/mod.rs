//! Every checkpoint published as open tables (ARCHITECTURE.md §3.9): each table is a
//! Delta Lake table in its folder (`tables/<table>/_delta_log`) over the very
//! Parquet files Retina wrote, flushed files and checkpoint segments alike. A
//! deletion vector per file hides the rows not visible at the checkpoint's ts C:
//! deleted at or before C, or created after it.
//!
//! A publication costs what changed: a file whose hidden rows are the same as in
//! the last version is not touched; one whose set changed gets `remove` (old DV)
//! and `add` (new DV) in one commit; a file with nothing visible left is removed.
//! All tables are published at one C, and `_retina/published/latest.json` names,
//! per table, the Delta version that holds C: one consistent cut across tables.
//!
//! Each table that changed is also committed as an Iceberg v3 snapshot over the
//! same files with the same hidden rows ([`iceberg`]), and the cut names both.
//!
//! Publication runs after the checkpoint is durable and never holds it back: a
//! failure is reported ([`crate::ParquetLakeStore::publication_status`]) and the
//! next checkpoint publishes again from the last state that was committed.

mod deletion_vector;
mod delta_checkpoint;
mod delta_log;
mod delta_table;
mod iceberg;
mod retention;
mod state;

use std::collections::BTreeMap;

use parking_lot::Mutex;
use retina_core::checkpoint::{CheckpointManifest, CheckpointTable};
use retina_core::storage::DataFiles;
use retina_core::Ts;
use serde::{Deserialize, Serialize};

use self::deletion_vector::HiddenRows;
use self::retention::Retention;
use self::state::{PublishedState, PublishedTable};
use crate::error::StorageError;
use crate::io::ObjectIo;
use crate::layout;

/// Where the cut of the latest publication is written.
pub const LATEST_PATH: &str = "_retina/published/latest.json";

/// The folder of one file per retained cut, named by its ts.
const CUTS_FOLDER: &str = "_retina/published/cuts";

/// One consistent cut across tables: the Delta version of every table at `ts`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublishedCut {
    /// The Retina snapshot ts (the checkpoint's C) every listed version shows.
    pub ts: u64,
    pub published_at_ms: i64,
    pub tables: Vec<PublishedTableVersion>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PublishedTableVersion {
    pub table: String,
    /// The Delta table's folder, relative to the data dir.
    pub delta_path: String,
    pub delta_version: u64,
    /// The Iceberg metadata file of the snapshot, relative to the data dir.
    #[serde(default)]
    pub iceberg_metadata: Option<String>,
    #[serde(default)]
    pub iceberg_snapshot_id: Option<i64>,
}

/// What one publication wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PublicationReport {
    pub ts: u64,
    /// Tables that got a new Delta version.
    pub tables_committed: usize,
    pub files_added: usize,
    pub files_removed: usize,
    pub deletion_vectors: usize,
    /// Delta checkpoints written (every few versions of a table).
    pub delta_checkpoints: usize,
    /// Tables left out, each with the reason (a column type the format lacks).
    pub unpublished: Vec<String>,
    pub millis: f64,
}

/// What a store publishes at each checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishOptions {
    /// Iceberg snapshots beside the Delta versions (Delta is always published: its
    /// commit is what decides which files changed).
    pub iceberg: bool,
    /// How long a published version stays readable after a newer one replaces it:
    /// no file it references is deleted before.
    pub retention: std::time::Duration,
    /// At least this long between publications (zero: every checkpoint). A
    /// checkpoint inside the interval is not published; the store's
    /// `publish_pending` publishes the latest one at shutdown, so a clean stop
    /// always leaves its last state published.
    pub interval: std::time::Duration,
    /// Bytes past which a publication starts its next Delta DV file (default 32
    /// KiB: delta-kernel readers read a DV's whole file for each DV in it).
    pub dv_file_target_bytes: usize,
}

impl PublishOptions {
    /// Both formats, every checkpoint, versions kept for `retention`.
    pub fn every_checkpoint(retention: std::time::Duration) -> Self {
        Self {
            iceberg: true,
            retention,
            interval: std::time::Duration::ZERO,
            dv_file_target_bytes: deletion_vector::DV_FILE_TARGET_BYTES,
        }
    }
}

/// Publishes checkpoints as Delta and Iceberg tables; remembers what it published.
pub(crate) struct Publisher {
    /// Loaded from the lake when first needed.
    state: Mutex<Option<PublishedState>>,
    retention_ms: i64,
    iceberg: bool,
    interval: std::time::Duration,
    dv_file_target_bytes: usize,
    /// When the last publication started, and whether a checkpoint since was left
    /// unpublished by the interval.
    schedule: Mutex<(Option<std::time::Instant>, bool)>,
}

/// What publishing one table needs besides the table.
pub(super) struct Publishing<'a> {
    io: &'a ObjectIo,
    ts: Ts,
    now_ms: i64,
    /// Files leaving the published set stay until then.
    keep_until_ms: i64,
    report: &'a mut PublicationReport,
    retention: &'a mut Retention,
    dv_file_target_bytes: usize,
}

/// A file as the new version should list it.
pub(super) struct WantedFile {
    size: u64,
    records: u64,
    hidden: HiddenRows,
    /// Column statistics, for flushed files (segments have none recorded).
    ranges: Vec<retina_core::column_ranges::ColumnRange>,
}

impl Publisher {
    pub fn new(options: PublishOptions) -> Self {
        let retention_ms = options.retention.as_millis().min(i64::MAX as u128) as i64;
        Self {
            state: Mutex::new(None),
            retention_ms,
            iceberg: options.iceberg,
            interval: options.interval,
            dv_file_target_bytes: options.dv_file_target_bytes,
            schedule: Mutex::new((None, false)),
        }
    }

    /// Whether the checkpoint just taken is to be published now (the interval has
    /// passed since the last publication); if not, it is remembered as pending.
    pub fn due(&self) -> bool {
        let mut schedule = self.schedule.lock();
        let now = std::time::Instant::now();
        let due = schedule.0.is_none_or(|last| now.duration_since(last) >= self.interval);
        if due {
            *schedule = (Some(now), false);
        } else {
            schedule.1 = true;
        }
        due
    }

    /// Whether a checkpoint was left unpublished since the last publication; clears it.
    pub fn take_pending(&self) -> bool {
        let mut schedule = self.schedule.lock();
        let pending = schedule.1;
        if pending {
            *schedule = (Some(std::time::Instant::now()), false);
        }
        pending
    }

    /// Of `paths` (lake-relative), those no published version within retention
    /// references.
    pub fn unneeded(&self, io: &ObjectIo, mut paths: Vec<String>) -> Result<Vec<String>, StorageError> {
        let now_ms = now_ms();
        self.with_state(io, |state| paths.retain(|path| !state.needs(path, now_ms)))?;
        Ok(paths)
    }

    /// Deletes `path` now, or once no retained version references it.
    pub fn delete_when_unreferenced(&self, io: &ObjectIo, path: &str) -> Result<(), StorageError> {
        let kept = self.with_state(io, |state| {
            let kept = state.needs(path, now_ms());
            if kept {
                state.retention.defer(path);
            }
            kept
        })?;
        if !kept {
            io.delete(path)?;
        }
        Ok(())
    }

    fn with_state<T>(&self, io: &ObjectIo, f: impl FnOnce(&mut PublishedState) -> T) -> Result<T, StorageError> {
        let mut guard = self.state.lock();
        let state = match guard.as_mut() {
            Some(state) => state,
            None => guard.insert(PublishedState::load(io)?),
        };
        Ok(f(state))
    }

    /// Publishes `checkpoint`; returns what it wrote and the cut it made latest.
    pub fn publish(
        &self,
        io: &ObjectIo,
        files: &dyn DataFiles,
        checkpoint: &CheckpointManifest,
    ) -> Result<(PublicationReport, PublishedCut), StorageError> {
        let started = std::time::Instant::now();
        let mut guard = self.state.lock();
        let state = match guard.as_mut() {
            Some(state) => state,
            None => guard.insert(PublishedState::load(io)?),
        };
        let now_ms = now_ms();
        let mut report = PublicationReport { ts: checkpoint.ts.0, ..PublicationReport::default() };
        let keep_until_ms = now_ms.saturating_add(self.retention_ms);
        for table in &checkpoint.tables {
            // A table no format can describe is left out of every cut, and said so;
            // any other failure stops this publication before its cut is written.
            let described = delta_log::metadata("", &table.schema, 0).and_then(|_| match self.iceberg {
                true => iceberg::check_schema(&table.schema),
                false => Ok(()),
            });
            if let Err(error) = described {
                report.unpublished.push(error.to_string());
                continue;
            }
            let root = layout::table_folder(&table.schema);
            // Segments written before publication lie outside the table's folder:
            // the table waits (left out of the cut, and said so) until they flush.
            let outside = table.files.iter().flat_map(|f| &f.segments).find(|s| relative_to(&root, &s.path).is_err());
            if let Some(segment) = outside {
                if let Err(error) = relative_to(&root, &segment.path) {
                    report.unpublished.push(format!("table {}: {error}", table.schema.name()));
                }
                continue;
            }
            let (published, retention) = state.table(io, table.schema.name(), &root)?;
            let wanted = wanted_files(io, files, table, checkpoint.ts, &root, published)?;
            let mut publishing =
                Publishing { io, ts: checkpoint.ts, now_ms, keep_until_ms, report: &mut report, retention, dv_file_target_bytes: self.dv_file_target_bytes };
            let committed = delta_table::commit_table(&mut publishing, &table.schema, &root, published, &wanted, self.retention_ms)?;
            let iceberg_behind = published.iceberg.delta_version != published.version;
            if (committed || iceberg_behind) && self.iceberg {
                // The Iceberg snapshot lists the same visible files with the same DVs.
                let visible: Vec<iceberg::FileInput<'_>> = wanted
                    .iter()
                    .filter(|(path, _)| published.files.contains_key(*path))
                    .map(|(path, file)| iceberg::FileInput { path, size: file.size, records: file.records, hidden: &file.hidden })
                    .collect();
                let expired_before_ms = now_ms - self.retention_ms;
                iceberg::commit(io, io.base_uri(), &root, &table.schema, checkpoint.ts, now_ms, expired_before_ms, &mut published.iceberg, &visible)?;
                published.iceberg.delta_version = published.version;
            }
        }
        // Files no retained version needs any more, whose deletion is due.
        for path in state.expire(now_ms) {
            io.delete(&path)?;
        }
        state.save(io)?;
        let cut = PublishedCut {
            ts: checkpoint.ts.0,
            published_at_ms: now_ms,
            tables: checkpoint
                .tables
                .iter()
                .filter_map(|t| state.tables.get(t.schema.name()).map(|p| (t, p)))
                .filter_map(|(t, p)| {
                    p.version.map(|version| PublishedTableVersion {
                        table: t.schema.name().to_string(),
                        delta_path: p.root.clone(),
                        delta_version: version,
                        iceberg_metadata: (p.iceberg.metadata_version > 0)
                            .then(|| format!("{}/metadata/v{}.metadata.json", p.root, p.iceberg.metadata_version)),
                        iceberg_snapshot_id: p.iceberg.current_snapshot_id,
                    })
                })
                .collect(),
        };
        write_cut(io, &cut, &mut state.cuts, now_ms - self.retention_ms)?;
        report.millis = started.elapsed().as_secs_f64() * 1000.0;
        Ok((report, cut))
    }
}

/// The files of `table` at `ts` and the rows each must hide.
fn wanted_files(
    io: &ObjectIo,
    files: &dyn DataFiles,
    table: &CheckpointTable,
    ts: Ts,
    root: &str,
    published: &PublishedTable,
) -> Result<BTreeMap<String, WantedFile>, StorageError> {
    let mut wanted = BTreeMap::new();
    for file in &table.files {
        if let Some(meta) = &file.meta {
            let mut hidden = HiddenRows::from_words(&file.deleted, 0, meta.row_count);
            if meta.max_create_ts > ts {
                // Flushed after C with rows created after it: those are hidden too.
                let decoded = files
                    .read_file(&table.schema, meta, &[table.schema.create_ts_index()], &[])
                    .map_err(|source| StorageError::PublicationRead { path: meta.path.clone(), source: Box::new(source) })?;
                let mut row = 0u64;
                for batch in &decoded.batches {
                    let created = batch.column(0).as_any().downcast_ref::<arrow_array::Int64Array>().ok_or_else(|| {
                        StorageError::Publication { reason: format!("{}: _create_ts is not int64", meta.path) }
                    })?;
                    for value in created.values() {
                        if *value as u64 > ts.0 {
                            hidden.insert_range(row..row + 1);
                        }
                        row += 1;
                    }
                }
            }
            let path = relative_to(root, &meta.path)?;
            let ranges = meta.column_ranges.clone();
            wanted.insert(path, WantedFile { size: meta.size_bytes, records: meta.row_count, hidden, ranges });
        } else {
            let mut start = 0u64;
            for segment in &file.segments {
                let hidden = HiddenRows::from_words(&file.deleted, start, start + segment.rows);
                start += segment.rows;
                let path = relative_to(root, &segment.path)?;
                let size = match published.files.get(&path) {
                    Some(known) => known.size,
                    None => io.size(&segment.path)?,
                };
                wanted.insert(path, WantedFile { size, records: segment.rows, hidden, ranges: Vec::new() });
            }
        }
    }
    Ok(wanted)
}

/// `path` (relative to the data dir) relative to the table folder `root`.
fn relative_to(root: &str, path: &str) -> Result<String, StorageError> {
    path.strip_prefix(root).and_then(|rest| rest.strip_prefix('/')).map(str::to_string).ok_or_else(|| StorageError::Publication {
        reason: format!(
            "{path} is outside its table's folder {root} (a checkpoint segment from before publication); the table \
             is published once that file is flushed"
        ),
    })
}

/// Writes `cut` as the latest and as one retained cut, and drops the cuts
/// published before `expired_before_ms` (the retention), all but the latest.
fn write_cut(io: &ObjectIo, cut: &PublishedCut, cuts: &mut Vec<(u64, i64)>, expired_before_ms: i64) -> Result<(), StorageError> {
    let bytes = serde_json::to_vec_pretty(cut).map_err(|e| StorageError::Publication { reason: e.to_string() })?;
    let path = |ts: u64| format!("{CUTS_FOLDER}/{ts:020}.json");
    io.overwrite(&path(cut.ts), bytes.clone())?;
    io.overwrite(LATEST_PATH, bytes)?;
    cuts.push((cut.ts, cut.published_at_ms));
    let expired = cuts.iter().take(cuts.len() - 1).take_while(|(_, at)| *at < expired_before_ms).count();
    for (ts, _) in cuts.drain(..expired) {
        io.delete(&path(ts))?;
    }
    Ok(())
}

/// Reads the latest published cut, if any.
pub(crate) fn latest_cut(io: &ObjectIo) -> Result<Option<PublishedCut>, StorageError> {
    let Some(found) = io.get(LATEST_PATH)? else { return Ok(None) };
    serde_json::from_slice(&found.bytes).map(Some).map_err(|e| StorageError::Publication { reason: format!("{LATEST_PATH}: {e}") })
}

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{Int64Array, RecordBatch};
    use arrow_schema::DataType;
    use retina_core::catalog::DataFileMeta;
    use retina_core::checkpoint::{CheckpointFile, CheckpointTable, CHECKPOINT_FORMAT_VERSION};
    use retina_core::{FileId, RowId, TableId};

    use super::delta_log::{Action, Add};
    use super::*;
    use crate::ParquetLakeStore;
    use retina_core::TableSchema;

    /// A checkpoint at ts 5 of one flushed file whose rows were created at 1, 2, 3,
    /// 10 and 11 (flushed after the checkpoint's ts), with row 1 deleted.
    fn checkpoint_of_one_file(store: &ParquetLakeStore, schema: &TableSchema) -> CheckpointManifest {
        let batch = RecordBatch::try_new(
            schema.stored_schema(),
            vec![Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])), Arc::new(Int64Array::from(vec![1, 2, 3, 10, 11]))],
        )
        .expect("batch");
        let stored = store.write_file(schema, FileId(1), &[batch]).expect("write");
        let meta = DataFileMeta {
            file_id: FileId(1),
            path: stored.path,
            row_count: 5,
            first_row_id: RowId(0),
            min_create_ts: Ts(1),
            max_create_ts: Ts(11),
            size_bytes: stored.size_bytes,
            replaces: Vec::new(),
            column_ranges: Vec::new(),
        };
        let file = CheckpointFile {
            file_id: FileId(1),
            first_row_id: RowId(0),
            capacity: 5,
            rows: 5,
            deleted: vec![0b10],
            segments: Vec::new(),
            meta: Some(meta),
        };
        CheckpointManifest {
            format_version: CHECKPOINT_FORMAT_VERSION,
            ts: Ts(5),
            shards: 1,
            next_file_id: 2,
            tables: vec![CheckpointTable { id: TableId(0), schema: schema.clone(), next_row_id: 5, files: vec![file] }],
            sources: Vec::new(),
        }
    }

    /// A local lake holding [`checkpoint_of_one_file`] of table `s.t`, and a publisher
    /// that publishes every checkpoint.
    fn lake_of_one_file() -> (tempfile::TempDir, ParquetLakeStore, CheckpointManifest, Publisher) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
        let schema = TableSchema::from_columns("s.t", &[("id", DataType::Int64, false)], &["id"]).expect("schema");
        let checkpoint = checkpoint_of_one_file(&store, &schema);
        (dir, store, checkpoint, Publisher::new(PublishOptions::every_checkpoint(std::time::Duration::ZERO)))
    }

    fn only_add(actions: &[Action]) -> Add {
        let adds: Vec<&Add> = actions.iter().filter_map(|a| if let Action::Add(add) = a { Some(add) } else { None }).collect();
        assert_eq!(adds.len(), 1, "{actions:?}");
        adds[0].clone()
    }

    #[test]
    fn rows_created_after_the_checkpoint_are_hidden_beside_the_deleted_ones() {
        let (dir, store, mut checkpoint, publisher) = lake_of_one_file();
        let io = store.object_io();

        let (report, _) = publisher.publish(io, &store, &checkpoint).expect("publish");
        assert_eq!((report.tables_committed, report.files_added, report.deletion_vectors), (1, 1, 1));
        let add = only_add(&delta_log::read_commit(io, "tables/s.t", 0).expect("read").expect("version 0"));
        assert_eq!(add.path, "0000000000000001.parquet");
        let dv = add.deletion_vector.expect("a DV");
        let bytes = std::fs::read(dir.path().join("tables/s.t").join(dv.file_name().expect("name"))).expect("DV file");
        let mut expected = HiddenRows::default();
        expected.insert_range(1..2);
        expected.insert_range(3..5);
        assert_eq!(deletion_vector::read_from_file(&bytes, &dv).expect("DV"), expected);

        // Nothing changed: no new version.
        let (again, _) = publisher.publish(io, &store, &checkpoint).expect("publish again");
        assert_eq!(again.tables_committed, 0);
        assert!(delta_log::read_commit(io, "tables/s.t", 1).expect("read").is_none());

        // A later checkpoint sees every row (ts 11) with row 0 deleted as well: the
        // file is removed with its old DV and added with the new one.
        checkpoint.ts = Ts(11);
        checkpoint.tables[0].files[0].deleted = vec![0b11];
        let (changed, _) = publisher.publish(io, &store, &checkpoint).expect("publish a change");
        assert_eq!((changed.files_removed, changed.files_added), (1, 1));
        let actions = delta_log::read_commit(io, "tables/s.t", 1).expect("read").expect("version 1");
        assert!(actions.iter().any(|a| matches!(a, Action::Remove(r) if r.deletion_vector.as_ref() == Some(&dv))));
        assert_eq!(only_add(&actions).deletion_vector.expect("new DV").cardinality, 2);
        assert!(actions.iter().any(|a| matches!(a, Action::Txn(t) if t.version == 11)));

        // Every row deleted: the file goes, and the cut still names the table.
        checkpoint.ts = Ts(12);
        checkpoint.tables[0].files[0].deleted = vec![0b11111];
        let (emptied, _) = publisher.publish(io, &store, &checkpoint).expect("publish");
        assert_eq!((emptied.files_removed, emptied.files_added), (1, 0));
        let cut = latest_cut(io).expect("cut").expect("a cut");
        assert_eq!((cut.ts, cut.tables[0].delta_version), (12, 2));
    }

    /// A publication that committed Delta and then failed on Iceberg: the next one
    /// commits the Iceberg side although Delta has nothing new, so its cut names a
    /// Delta version and the Iceberg snapshot of the same checkpoint.
    #[test]
    fn an_iceberg_side_left_behind_by_a_failed_publication_catches_up() {
        let (dir, store, mut checkpoint, publisher) = lake_of_one_file();
        let io = store.object_io();
        let (_, cut) = publisher.publish(io, &store, &checkpoint).expect("publish");
        let first = &cut.tables[0];
        assert_eq!((first.delta_version, first.iceberg_metadata.as_deref()), (0, Some("tables/s.t/metadata/v1.metadata.json")));

        // The next Iceberg metadata file cannot be created (a directory is in its way).
        let blocker = dir.path().join("tables/s.t/metadata/v2.metadata.json");
        std::fs::create_dir_all(&blocker).expect("blocker");
        checkpoint.ts = Ts(11);
        checkpoint.tables[0].files[0].deleted = vec![0b11];
        let error = publisher.publish(io, &store, &checkpoint).expect_err("Iceberg cannot commit").to_string();
        assert!(delta_log::read_commit(io, "tables/s.t", 1).expect("read").is_some(), "Delta committed version 1: {error}");

        std::fs::remove_dir(&blocker).expect("unblock");
        let (_, cut) = publisher.publish(io, &store, &checkpoint).expect("publish again");
        let table = &cut.tables[0];
        assert_eq!((cut.ts, table.delta_version), (11, 1));
        assert_eq!(table.iceberg_metadata.as_deref(), Some("tables/s.t/metadata/v2.metadata.json"), "the Iceberg side caught up");
        let metadata: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.path().join("tables/s.t/metadata/v2.metadata.json")).expect("v2")).expect("json");
        assert_eq!(metadata["current-snapshot-id"], serde_json::json!(table.iceberg_snapshot_id));
    }

    #[test]
    fn a_table_with_segments_from_before_publication_waits_and_others_publish() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
        let schema = TableSchema::from_columns("s.t", &[("id", DataType::Int64, false)], &["id"]).expect("schema");
        let mut checkpoint = checkpoint_of_one_file(&store, &schema);
        let legacy = TableSchema::from_columns("s.legacy", &[("id", DataType::Int64, false)], &["id"]).expect("schema");
        let segment = retina_core::checkpoint::RowSegment { path: "checkpoints/segments/s.legacy/0000000000000002-0000000000-0000000000000001.parquet".into(), rows: 3 };
        let file = CheckpointFile { file_id: FileId(2), first_row_id: RowId(0), capacity: 64, rows: 3, deleted: Vec::new(), segments: vec![segment], meta: None };
        checkpoint.tables.push(CheckpointTable { id: TableId(1), schema: legacy, next_row_id: 3, files: vec![file] });
        let (report, cut) = Publisher::new(PublishOptions::every_checkpoint(std::time::Duration::ZERO))
            .publish(store.object_io(), &store, &checkpoint)
            .expect("publish");
        assert_eq!(report.unpublished.len(), 1, "{report:?}");
        assert!(report.unpublished[0].contains("table s.legacy") && report.unpublished[0].contains("outside its table's folder"), "{report:?}");
        assert_eq!(cut.tables.iter().map(|t| t.table.as_str()).collect::<Vec<_>>(), vec!["s.t"]);
    }

    #[test]
    fn a_nanosecond_timestamp_is_left_out_of_delta_and_declared_in_iceberg() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
        let schema = TableSchema::from_columns(
            "s.times",
            &[("id", DataType::Int64, false), ("at", DataType::Timestamp(arrow_schema::TimeUnit::Nanosecond, None), true)],
            &["id"],
        )
        .expect("schema");
        let plain = TableSchema::from_columns("s.plain", &[("id", DataType::Int64, false)], &["id"]).expect("schema");
        let checkpoint = CheckpointManifest {
            format_version: CHECKPOINT_FORMAT_VERSION,
            ts: Ts(3),
            shards: 1,
            next_file_id: 1,
            tables: vec![
                CheckpointTable { id: TableId(0), schema, next_row_id: 0, files: Vec::new() },
                CheckpointTable { id: TableId(1), schema: plain, next_row_id: 0, files: Vec::new() },
            ],
            sources: Vec::new(),
        };
        let (report, _) = Publisher::new(PublishOptions::every_checkpoint(std::time::Duration::ZERO)).publish(store.object_io(), &store, &checkpoint).expect("publish");
        assert!(report.unpublished.is_empty(), "{report:?}");
        let cut = latest_cut(store.object_io()).expect("cut").expect("a cut");
        assert_eq!(cut.tables.len(), 2, "both tables are published: {cut:?}");
        let actions = delta_log::read_commit(store.object_io(), "tables/s.times", 0).expect("read").expect("version 0");
        let delta_schema = actions
            .iter()
            .find_map(|a| match a {
                delta_log::Action::MetaData(m) => Some(m.schema_string.clone()),
                _ => None,
            })
            .expect("metaData");
        assert!(delta_schema.contains("\"id\"") && !delta_schema.contains("\"at\""), "{delta_schema}");
        let iceberg = std::fs::read_to_string(dir.path().join("tables/s.times/metadata/v1.metadata.json")).expect("Iceberg metadata");
        assert!(iceberg.contains("\"timestamp_ns\""), "{iceberg}");
    }
}
