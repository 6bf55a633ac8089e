//! Where data files live under the store's prefix: `tables/<table>/<file id>.parquet`,
//! checkpoint segments in `tables/<table>/_segments/`
//! (the catalog manifest is in [`crate::manifest`], checkpoints in
//! [`crate::checkpoint_files`]).

use retina_core::{FileId, TableSchema};

/// A table's folder, `tables/<table>`: its data files, checkpoint segments and,
/// once published, its Delta log.
pub(crate) fn table_folder(table: &TableSchema) -> String {
    format!("tables/{}", folder_name(table.name()))
}

/// The longest folder name kept whole: filesystems allow 255 bytes a component, and
/// the Iceberg and Delta files beside it add nothing to the folder's own name.
const MAX_FOLDER_NAME: usize = 200;

/// The folder name of a table, injective over table names: each byte that is not an
/// ASCII letter, digit, `.`, `_` or `-` (and a leading `.`, so `.` and `..` stay
/// folders of their own) becomes `~` and two hex digits. Names of safe characters
/// keep their folder as before; `s.a b`, `s.a_b` and `s.a/b` no longer share one.
/// `~` is unreserved in URIs, so published locations need no percent-encoding. A
/// name longer than [`MAX_FOLDER_NAME`] keeps its first part and ends in a SHA-256 of
/// the whole name (128-character schema and table names, as SQL Server and Oracle
/// allow, made checkpoints fail with "File name too long").
pub(crate) fn folder_name(name: &str) -> String {
    let mut folder = String::with_capacity(name.len());
    for (at, byte) in name.bytes().enumerate() {
        let safe = byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-') || (byte == b'.' && at > 0);
        if safe {
            folder.push(char::from(byte));
        } else {
            folder.push_str(&format!("~{byte:02x}"));
        }
    }
    if folder.len() <= MAX_FOLDER_NAME {
        return folder;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    // The kept part ends on a whole escape, so it reads as the name's start.
    // (The folder is ASCII: every other byte was escaped.)
    let mut keep = MAX_FOLDER_NAME - hex.len() - 2;
    if let Some(at) = folder[..keep].rfind('~').filter(|at| keep - at < 3) {
        keep = at;
    }
    format!("{}~~{hex}", &folder[..keep])
}

/// The object path of a table's data file.
pub(crate) fn data_file_path(table: &TableSchema, file_id: FileId) -> String {
    format!("{}/{file_id}.parquet", table_folder(table))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_distinct_for_distinct_tables_and_stay_short() {
        let names = ["s.a b", "s.a_b", "s.a/b", "s.a\0b", "s.a~5fb", "s.a~20b", ".", "..", "s..", "public.orders", "s.ä"];
        let folders: std::collections::BTreeSet<String> = names.iter().map(|n| folder_name(n)).collect();
        assert_eq!(folders.len(), names.len(), "{folders:?}");
        assert_eq!(folder_name("public.orders"), "public.orders", "safe names keep their folder");
        assert_eq!(folder_name("chbench.order_line"), "chbench.order_line");
        assert_eq!(folder_name("."), "~2e");
        assert_eq!(folder_name(".."), "~2e.");
        assert_eq!(folder_name("s.a/b"), "s.a~2fb");
        assert!(folders.iter().all(|f| !f.contains('/') && f != "." && f != ".."));
        let long_a = format!("{}.{}", "a".repeat(128), "t".repeat(128));
        let long_b = format!("{}.{}", "a".repeat(128), "u".repeat(128));
        let (fa, fb) = (folder_name(&long_a), folder_name(&long_b));
        assert!(fa.len() <= MAX_FOLDER_NAME && fb.len() <= MAX_FOLDER_NAME, "{} {}", fa.len(), fb.len());
        assert_ne!(fa, fb);
        assert!(fa.starts_with("aaaa"));
        let wide = "ü".repeat(120);
        let folder = folder_name(&wide);
        assert!(folder.len() <= MAX_FOLDER_NAME);
        assert!(folder.split("~~").next().is_some_and(|kept| kept.len() % 3 == 0), "whole escapes kept: {folder}");
    }
}
