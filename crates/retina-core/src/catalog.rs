//! What the catalog records durably: tables, their schemas and their data files.
//! The bytes live wherever the [`crate::storage::LakeStore`] puts them.

use serde::{Deserialize, Serialize};

use crate::schema::TableSchema;
use crate::types::{FileId, RowId, TableId, Ts};

/// Bumped whenever the manifest's meaning changes; an unknown version is refused.
///
/// - 2: every data file's `column_ranges` are recorded (empty: no column has a
///   type that records one), the one source of column statistics;
/// - 1: older files may lack them; recovery reads such a file once, records its
///   ranges, and the next catalog save writes version 2.
pub const CATALOG_FORMAT_VERSION: u32 = 2;

/// The oldest manifest version this build reads (and migrates).
pub const OLDEST_CATALOG_FORMAT_VERSION: u32 = 1;

/// One flushed data file: a Parquet file with one row group holding the rows
/// `first_row_id .. first_row_id + row_count` of its table, `_create_ts` included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DataFileMeta {
    pub file_id: FileId,
    /// Path inside the lake store.
    pub path: String,
    pub row_count: u64,
    pub first_row_id: RowId,
    pub min_create_ts: Ts,
    pub max_create_ts: Ts,
    pub size_bytes: u64,
    /// For a file written by storage GC: the files whose live rows it holds, with
    /// their own lineage (a rewrite of a rewrite lists both).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<FileId>,
    /// Min and max of the file's columns, for skipping it (see
    /// [`crate::column_ranges`]); recorded for every file from catalog version 2 on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub column_ranges: Vec<crate::column_ranges::ColumnRange>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableEntry {
    pub id: TableId,
    pub schema: TableSchema,
    pub files: Vec<DataFileMeta>,
}

/// The whole catalog as one document, replaced atomically on every change.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CatalogManifest {
    pub format_version: u32,
    pub tables: Vec<TableEntry>,
    pub next_file_id: u64,
}

impl Default for CatalogManifest {
    fn default() -> Self {
        Self { format_version: CATALOG_FORMAT_VERSION, tables: Vec::new(), next_file_id: 1 }
    }
}
