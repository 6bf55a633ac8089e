//! Delta checkpoints: every [`CHECKPOINT_INTERVAL`] versions, the table's whole
//! state (protocol, metadata, the `txn` of the published ts and one `add` per
//! listed file) as `_delta_log/<version>.checkpoint.parquet`, and
//! `_delta_log/_last_checkpoint` pointing at it, so a reader starts there instead
//! of replaying every JSON commit since version 0.
//!
//! The rows are the same actions the JSON commits hold, decoded into the
//! checkpoint's Arrow schema by arrow-json: one action per row, the other action
//! columns null, as the protocol lays a checkpoint out.

use std::sync::Arc;

use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use serde_json::json;

use super::delta_log::Action;
use crate::error::StorageError;
use crate::io::ObjectIo;

/// Versions between checkpoints (Delta's own default for `delta.checkpointInterval`).
pub(crate) const CHECKPOINT_INTERVAL: u64 = 10;

fn string_map(name: &str) -> Field {
    let entries = Field::new(
        "key_value",
        DataType::Struct(Fields::from(vec![Field::new("key", DataType::Utf8, false), Field::new("value", DataType::Utf8, true)])),
        false,
    );
    Field::new(name, DataType::Map(Arc::new(entries), false), true)
}

fn strings(name: &str) -> Field {
    Field::new(name, DataType::List(Arc::new(Field::new("element", DataType::Utf8, true))), true)
}

fn deletion_vector() -> Field {
    Field::new(
        "deletionVector",
        DataType::Struct(Fields::from(vec![
            Field::new("storageType", DataType::Utf8, true),
            Field::new("pathOrInlineDv", DataType::Utf8, true),
            Field::new("offset", DataType::Int32, true),
            Field::new("sizeInBytes", DataType::Int32, true),
            Field::new("cardinality", DataType::Int64, true),
        ])),
        true,
    )
}

/// The checkpoint schema for the actions publication writes.
fn checkpoint_schema() -> SchemaRef {
    let structure = |name: &str, fields: Vec<Field>| Field::new(name, DataType::Struct(Fields::from(fields)), true);
    Arc::new(Schema::new(vec![
        structure(
            "txn",
            vec![
                Field::new("appId", DataType::Utf8, true),
                Field::new("version", DataType::Int64, true),
                Field::new("lastUpdated", DataType::Int64, true),
            ],
        ),
        structure(
            "add",
            vec![
                Field::new("path", DataType::Utf8, true),
                string_map("partitionValues"),
                Field::new("size", DataType::Int64, true),
                Field::new("modificationTime", DataType::Int64, true),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("stats", DataType::Utf8, true),
                deletion_vector(),
            ],
        ),
        structure(
            "remove",
            vec![
                Field::new("path", DataType::Utf8, true),
                Field::new("deletionTimestamp", DataType::Int64, true),
                Field::new("dataChange", DataType::Boolean, true),
                Field::new("extendedFileMetadata", DataType::Boolean, true),
                string_map("partitionValues"),
                Field::new("size", DataType::Int64, true),
                deletion_vector(),
            ],
        ),
        structure(
            "metaData",
            vec![
                Field::new("id", DataType::Utf8, true),
                Field::new("name", DataType::Utf8, true),
                Field::new("description", DataType::Utf8, true),
                structure("format", vec![Field::new("provider", DataType::Utf8, true), string_map("options")]),
                Field::new("schemaString", DataType::Utf8, true),
                strings("partitionColumns"),
                string_map("configuration"),
                Field::new("createdTime", DataType::Int64, true),
            ],
        ),
        structure(
            "protocol",
            vec![
                Field::new("minReaderVersion", DataType::Int32, true),
                Field::new("minWriterVersion", DataType::Int32, true),
                strings("readerFeatures"),
                strings("writerFeatures"),
            ],
        ),
    ]))
}

/// Writes the checkpoint of `version` (whose commit exists) from the table's whole
/// state as `actions`, then points `_last_checkpoint` at it.
pub(crate) fn write(io: &ObjectIo, root: &str, version: u64, actions: &[Action]) -> Result<(), StorageError> {
    let failed = |reason: String| StorageError::Publication { reason: format!("{root}: checkpoint of version {version}: {reason}") };
    let schema = checkpoint_schema();
    let mut lines = Vec::new();
    for action in actions.iter().filter(|a| !matches!(a, Action::CommitInfo(_) | Action::Other(_))) {
        serde_json::to_writer(&mut lines, action).map_err(|e| failed(e.to_string()))?;
        lines.push(b'\n');
    }
    let mut decoder = arrow_json::ReaderBuilder::new(Arc::clone(&schema))
        .with_batch_size(actions.len().max(1))
        .build_decoder()
        .map_err(|e| failed(e.to_string()))?;
    decoder.decode(&lines).map_err(|e| failed(e.to_string()))?;
    let batch = decoder.flush().map_err(|e| failed(e.to_string()))?.ok_or_else(|| failed("no actions".into()))?;
    let rows = batch.num_rows();
    let mut bytes = Vec::new();
    let mut writer = parquet::arrow::ArrowWriter::try_new(&mut bytes, schema, None).map_err(|e| failed(e.to_string()))?;
    writer.write(&batch).map_err(|e| failed(e.to_string()))?;
    writer.close().map_err(|e| failed(e.to_string()))?;
    io.overwrite(&format!("{root}/_delta_log/{version:020}.checkpoint.parquet"), bytes)?;
    let pointer = json!({ "version": version, "size": rows }).to_string();
    io.overwrite(&format!("{root}/_delta_log/_last_checkpoint"), pointer.into_bytes())
}

/// Deletes the log entries (commits and checkpoints) older than the newest
/// checkpoint written before `expired_before_ms`: no retained version needs them,
/// since a reader of any later version starts at that checkpoint.
pub(crate) fn drop_expired_log(io: &ObjectIo, root: &str, checkpoints: &mut Vec<(u64, i64)>, expired_before_ms: i64) -> Result<(), StorageError> {
    let Some(position) = checkpoints.iter().rposition(|(_, at)| *at < expired_before_ms) else { return Ok(()) };
    let oldest_needed = checkpoints[position].0;
    checkpoints.drain(..position);
    for path in io.list_folder(&format!("{root}/_delta_log"))? {
        let name = path.rsplit('/').next().unwrap_or(&path);
        let version = name.get(..20).filter(|d| d.bytes().all(|b| b.is_ascii_digit())).and_then(|d| d.parse::<u64>().ok());
        if version.is_some_and(|v| v < oldest_needed) {
            io.delete(&path)?;
        }
    }
    Ok(())
}
