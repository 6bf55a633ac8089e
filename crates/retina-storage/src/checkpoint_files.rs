//! Where checkpoints live and how their manifest is encoded.
//!
//! The checkpoint manifest advances by numbered versions,
//! `checkpoints/checkpoint-<version>.json`, each created exactly once
//! ([`crate::versioned`]; before versioning, one replaced `checkpoints/latest.json`).
//! Rows that were in write buffers live in segments in their table's folder,
//! `tables/<table>/_segments/` (so a published Delta table lists them by relative
//! path; lakes from before publication have them under `checkpoints/segments/`),
//! each written once and named by file, first row and the checkpoint ts that wrote it. A crash before the manifest's commit leaves the previous
//! checkpoint in force, with at worst unreferenced segments that the next checkpoint
//! removes.

use retina_core::checkpoint::{CheckpointManifest, CHECKPOINT_FORMAT_VERSION, OLDEST_CHECKPOINT_FORMAT_VERSION};
use retina_core::{FileId, TableSchema, Ts};

use crate::error::StorageError;
use crate::layout::table_folder;
use crate::versioned::Document;

pub(crate) const DOCUMENT: Document =
    Document { what: "checkpoint", folder: "checkpoints", stem: "checkpoint", legacy: "checkpoints/latest.json" };

/// Where segments were written before they moved into their tables' folders.
pub(crate) const LEGACY_SEGMENTS_FOLDER: &str = "checkpoints/segments";

/// The folder of a table's segments.
pub(crate) fn segments_folder(table: &TableSchema) -> String {
    format!("{}/_segments", table_folder(table))
}

/// Path of the segment holding rows `first_row..` of `file_id`, written at `ts`.
pub(crate) fn segment_path(table: &TableSchema, file_id: FileId, first_row: u64, ts: Ts) -> String {
    format!("{}/{file_id}-{first_row:010}-{:016}.parquet", segments_folder(table), ts.0)
}

pub(crate) fn encode(checkpoint: &CheckpointManifest) -> Result<Vec<u8>, StorageError> {
    serde_json::to_vec(checkpoint).map_err(|e| StorageError::Checkpoint { reason: e.to_string() })
}

pub(crate) fn decode(bytes: &[u8]) -> Result<CheckpointManifest, StorageError> {
    crate::manifest::decode_versioned(bytes, OLDEST_CHECKPOINT_FORMAT_VERSION..=CHECKPOINT_FORMAT_VERSION, "checkpoint manifest")
        .map_err(|reason| StorageError::Checkpoint { reason })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_other_versions() {
        let error = decode(br#"{"format_version": 7}"#).expect_err("version 7");
        assert!(error.to_string().contains("format version 7"), "{error}");
        let table = TableSchema::from_columns("s.t", &[("id", arrow_schema::DataType::Int64, false)], &["id"]).expect("schema");
        let path = segment_path(&table, FileId(3), 4096, Ts(12));
        assert_eq!(path, "tables/s.t/_segments/0000000000000003-0000004096-0000000000000012.parquet");
    }
}
