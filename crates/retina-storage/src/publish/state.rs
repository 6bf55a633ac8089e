//! What publication has committed, per table: the Delta version and, for every file
//! it lists, the DV it carries and a fingerprint of the rows it hides, so the next
//! publication touches only the files whose hidden rows changed.
//!
//! Saved as `_retina/published/state.json` after each publication. A crash between
//! a Delta commit and that save leaves the state behind the log; the first
//! publication after a restart rolls each table forward by reading the versions
//! after the one recorded (Retina wrote them, so it reads only what it writes).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::deletion_vector::DeletionVectorDescriptor;
use super::delta_log::{self, Action};
use crate::error::StorageError;
use crate::io::ObjectIo;

const STATE_PATH: &str = "_retina/published/state.json";

/// Bumped when the state's meaning changes; another version is rebuilt from the logs.
const STATE_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PublishedState {
    format_version: u32,
    /// By table name.
    pub tables: BTreeMap<String, PublishedTable>,
    /// Files older versions still reference, and deletions waiting for them.
    #[serde(default)]
    pub retention: super::retention::Retention,
    /// Retained cuts, oldest first: (ts, published at ms).
    #[serde(default)]
    pub cuts: Vec<(u64, i64)>,
}

#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct PublishedTable {
    /// The Delta table's folder, relative to the data dir.
    pub root: String,
    /// The Delta table id (`metaData.id`).
    pub delta_id: String,
    /// The latest committed version; `None` before the first commit.
    pub version: Option<u64>,
    /// User columns in the published schema.
    pub columns: usize,
    /// Files the latest version lists, by path relative to `root`.
    pub files: BTreeMap<String, PublishedFile>,
    /// The table's Iceberg side.
    #[serde(default)]
    pub iceberg: super::iceberg::IcebergTable,
    /// Delta checkpoints written, oldest first: (version, written at ms).
    #[serde(default)]
    pub checkpoints: Vec<(u64, i64)>,
    /// Whether this process has checked the log for versions after `version`.
    #[serde(skip)]
    caught_up: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct PublishedFile {
    pub size: u64,
    pub records: u64,
    /// [`super::deletion_vector::HiddenRows::fingerprint`] of the hidden rows; 0 for
    /// a file learnt from the log, so its DV is written again once.
    pub fingerprint: u64,
    pub dv: Option<DeletionVectorDescriptor>,
    /// The `add` action's statistics, for Delta checkpoints.
    #[serde(default)]
    pub stats: Option<String>,
}

impl PublishedState {
    pub fn load(io: &ObjectIo) -> Result<Self, StorageError> {
        let empty = Self { format_version: STATE_FORMAT_VERSION, tables: BTreeMap::new(), retention: Default::default(), cuts: Vec::new() };
        let Some(found) = io.get(STATE_PATH)? else { return Ok(empty) };
        let state: Self =
            serde_json::from_slice(&found.bytes).map_err(|e| StorageError::Publication { reason: format!("{STATE_PATH}: {e}") })?;
        // Another format: every table is rebuilt from its log.
        Ok(if state.format_version == STATE_FORMAT_VERSION { state } else { empty })
    }

    pub fn save(&self, io: &ObjectIo) -> Result<(), StorageError> {
        let bytes = serde_json::to_vec(self).map_err(|e| StorageError::Publication { reason: e.to_string() })?;
        io.overwrite(STATE_PATH, bytes)
    }

    /// Whether the latest published version of a table lists `path` (lake-relative).
    pub fn lists(&self, path: &str) -> bool {
        lists(&self.tables, path)
    }

    /// Forgets expired retention; returns the files whose deletion is due now.
    pub fn expire(&mut self, now_ms: i64) -> Vec<String> {
        let tables = &self.tables;
        self.retention.expire(now_ms, |path| lists(tables, path))
    }

    /// Whether a published version within retention (the latest included) needs `path`.
    pub fn needs(&self, path: &str, now_ms: i64) -> bool {
        self.lists(path) || self.retention.is_kept(path, now_ms)
    }

    /// The state of table `name`, rolled forward over log versions this state has
    /// not seen (once per process), and the retention it adds to.
    pub fn table(&mut self, io: &ObjectIo, name: &str, root: &str) -> Result<(&mut PublishedTable, &mut super::retention::Retention), StorageError> {
        let table = self.tables.entry(name.to_string()).or_insert_with(|| PublishedTable {
            root: root.to_string(),
            delta_id: uuid::Uuid::new_v4().to_string(),
            version: None,
            columns: 0,
            files: BTreeMap::new(),
            checkpoints: Vec::new(),
            iceberg: Default::default(),
            caught_up: false,
        });
        if !table.caught_up {
            table.catch_up(io)?;
            table.iceberg.catch_up(io, root)?;
            table.drop_stray_dv_files(io, &self.retention)?;
            table.caught_up = true;
        }
        Ok((table, &mut self.retention))
    }
}

fn lists(tables: &BTreeMap<String, PublishedTable>, path: &str) -> bool {
    tables.values().any(|table| {
        path.strip_prefix(table.root.as_str()).and_then(|rest| rest.strip_prefix('/')).is_some_and(|rest| table.files.contains_key(rest))
    })
}

impl PublishedTable {
    /// Deletes DV files of the table that no version uses or keeps: left by a
    /// publication that failed before its commit (swept once per process).
    fn drop_stray_dv_files(&self, io: &ObjectIo, retention: &super::retention::Retention) -> Result<(), StorageError> {
        let current = self.dv_files()?;
        let now_ms = super::now_ms();
        for path in io.list_folder(&self.root)? {
            let name = path.rsplit('/').next().unwrap_or(&path);
            let is_dv = name.starts_with("deletion_vector_") && name.ends_with(".bin");
            if is_dv && !current.contains(name) && !retention.is_kept(&path, now_ms) {
                io.delete(&path)?;
            }
        }
        Ok(())
    }

    /// The DV files the current version's files point at.
    pub fn dv_files(&self) -> Result<BTreeSet<String>, StorageError> {
        self.files.values().filter_map(|f| f.dv.as_ref()).map(|dv| dv.file_name()).collect()
    }

    fn catch_up(&mut self, io: &ObjectIo) -> Result<(), StorageError> {
        loop {
            let next = self.version.map_or(0, |v| v + 1);
            let Some(actions) = delta_log::read_commit(io, &self.root, next)? else { return Ok(()) };
            for action in actions {
                match action {
                    Action::MetaData(metadata) => {
                        self.delta_id = metadata.id;
                        let schema: serde_json::Value = serde_json::from_str(&metadata.schema_string)
                            .map_err(|e| StorageError::Publication { reason: format!("{} version {next}: schema: {e}", self.root) })?;
                        self.columns = schema["fields"].as_array().map_or(0, Vec::len);
                    }
                    Action::Add(add) => {
                        let records = add
                            .stats
                            .as_deref()
                            .and_then(|s| serde_json::from_str::<serde_json::Value>(s).ok())
                            .and_then(|s| s["numRecords"].as_u64())
                            .unwrap_or(0);
                        let file = PublishedFile { size: add.size, records, fingerprint: 0, dv: add.deletion_vector, stats: add.stats };
                        self.files.insert(add.path, file);
                    }
                    Action::Remove(remove) => {
                        self.files.remove(&remove.path);
                    }
                    _ => {}
                }
            }
            self.version = Some(next);
        }
    }
}
