//! Where data files live under the store's prefix: `tables/<table>/<file id>.parquet`
//! (the catalog manifest is in [`crate::manifest`], checkpoints in
//! [`crate::checkpoint_files`]).

use retina_core::{FileId, TableSchema};

/// The object path of a table's data file; the table name is kept readable, with
/// characters that are not safe in object keys replaced by `_`.
pub(crate) fn data_file_path(table: &TableSchema, file_id: FileId) -> String {
    let folder: String = table
        .name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    format!("tables/{folder}/{file_id}.parquet")
}
