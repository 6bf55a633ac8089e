//! Files of a lake, made and found directly: the page-index and ranged-read tests
//! write one large data file; the layout tests find a document's latest version.

use std::sync::Arc;

use retina_core::catalog::DataFileMeta;
use retina_core::storage::DataFiles;
use retina_core::{FileId, RowId, TableSchema, Ts};

/// Writes one data file of `rows` rows to `store` for a table `(id Int64, note Utf8)`:
/// ids `0..rows` in order, notes from `note`, every row created at ts 1. Returns the
/// catalog entry that names it.
pub fn write_numbered_file(store: &dyn DataFiles, table: &TableSchema, file_id: u64, rows: i64, note: impl Fn(i64) -> String) -> DataFileMeta {
    let batch = arrow_array::RecordBatch::try_new(
        table.stored_schema(),
        vec![
            Arc::new(arrow_array::Int64Array::from_iter_values(0..rows)),
            Arc::new(arrow_array::StringArray::from_iter_values((0..rows).map(note))),
            Arc::new(arrow_array::Int64Array::from_iter_values((0..rows).map(|_| 1))),
        ],
    )
    .expect("batch");
    let written = store.write_file(table, FileId(file_id), &[batch]).expect("write");
    DataFileMeta {
        file_id: FileId(file_id),
        path: written.path,
        row_count: rows as u64,
        first_row_id: RowId(0),
        min_create_ts: Ts(1),
        max_create_ts: Ts(1),
        size_bytes: written.size_bytes,
        replaces: Vec::new(),
        column_ranges: Vec::new(),
    }
}

/// The latest version of a versioned document of a local lake
/// (`<folder>/<stem>-<version>.json`).
pub fn latest_version(dir: &std::path::Path, folder: &str, stem: &str) -> std::path::PathBuf {
    let mut names: Vec<String> = std::fs::read_dir(dir.join(folder))
        .expect("document folder")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with(&format!("{stem}-")) && name.ends_with(".json"))
        .collect();
    names.sort();
    dir.join(folder).join(names.last().expect("a committed version"))
}
