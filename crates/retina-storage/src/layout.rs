//! Where data files live under the store's prefix: `tables/<table>/<file id>.parquet`,
//! checkpoint segments in `tables/<table>/_segments/`
//! (the catalog manifest is in [`crate::manifest`], checkpoints in
//! [`crate::checkpoint_files`]).

use retina_core::{FileId, TableSchema};

/// A table's folder, `tables/<table>`: its data files, checkpoint segments and,
/// once published, its Delta log. The table name is kept readable, with characters
/// that are not safe in object keys replaced by `_`.
pub(crate) fn table_folder(table: &TableSchema) -> String {
    let folder: String = table
        .name()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    format!("tables/{folder}")
}

/// The object path of a table's data file.
pub(crate) fn data_file_path(table: &TableSchema, file_id: FileId) -> String {
    format!("{}/{file_id}.parquet", table_folder(table))
}
