//! The next Delta Lake version of a published table: the files whose hidden rows
//! changed get `remove` (old DV) and `add` (new DV) in one commit, with the DVs of
//! the commit in DV files of bounded size; a checkpoint every few versions; files and DV files
//! leaving the table are handed to the retention.

use std::collections::BTreeMap;

use retina_core::column_ranges::RangeValue;
use retina_core::TableSchema;
use serde_json::{json, Value};

use super::deletion_vector::DeletionVectorFiles;
use super::delta_log::{self, Action, Add, Remove, Txn};
use super::state::{PublishedFile, PublishedTable};
use super::{delta_checkpoint, Publishing, WantedFile};
use crate::error::StorageError;

/// Commits the next Delta version of one table, if anything changed; returns
/// whether it did.
pub(super) fn commit_table(
    publishing: &mut Publishing<'_>,
    schema: &TableSchema,
    root: &str,
    published: &mut PublishedTable,
    wanted: &BTreeMap<String, WantedFile>,
    retention_ms: i64,
) -> Result<bool, StorageError> {
    let (io, ts, now_ms) = (publishing.io, publishing.ts, publishing.now_ms);
    let mut actions = Vec::new();
    let mut dv_files = DeletionVectorFiles::with_target(publishing.dv_file_target_bytes);
    let mut next_files = BTreeMap::new();
    let (mut added, mut removed) = (0, 0);
    for (path, file) in wanted {
        if file.hidden.len() >= file.records {
            continue; // nothing visible: not listed (removed below if it was)
        }
        let fingerprint = file.hidden.fingerprint();
        if let Some(old) = published.files.get(path) {
            if old.fingerprint == fingerprint {
                next_files.insert(path.clone(), old.clone());
                continue;
            }
            actions.push(Action::Remove(remove_action(path, old, now_ms)));
            removed += 1;
        }
        let dv = (!file.hidden.is_empty()).then(|| dv_files.push(&file.hidden));
        let stats = Some(stats(schema, file, dv.is_some()).to_string());
        let published_file = PublishedFile { size: file.size, records: file.records, fingerprint, dv, stats };
        actions.push(Action::Add(add_action(path, &published_file, now_ms)));
        added += 1;
        next_files.insert(path.clone(), published_file);
    }
    for (path, old) in &published.files {
        if !next_files.contains_key(path) && !actions.iter().any(|a| matches!(a, Action::Remove(r) if &r.path == path)) {
            actions.push(Action::Remove(remove_action(path, old, now_ms)));
            removed += 1;
        }
    }
    let schema_changed = published.columns != schema.column_count();
    if actions.is_empty() && published.version.is_some() && !schema_changed {
        return Ok(false);
    }
    let mut head = vec![Action::CommitInfo(json!({
        "timestamp": now_ms,
        "operation": "RETINA PUBLISH",
        "operationParameters": { "retinaTs": ts.0.to_string() },
        "engineInfo": concat!("retina/", env!("CARGO_PKG_VERSION")),
        "retinaTs": ts.0,
        "isBlindAppend": false,
    }))];
    // Restated in every commit: the features a schema needs change with it (a
    // `timestamp_ntz` or NOT NULL column added later needs `timestampNtz` or
    // `invariants`, which Spark and delta-kernel check at every version), and a table
    // published before `invariants` was listed heals at its next commit.
    head.push(Action::Protocol(delta_log::protocol(schema)));
    if published.version.is_none() || schema_changed {
        head.push(Action::MetaData(delta_log::metadata(&published.delta_id, schema, now_ms)?));
    }
    head.push(Action::Txn(Txn { app_id: delta_log::TXN_APP_ID.into(), version: ts.0, last_updated: now_ms }));
    head.extend(actions);
    let dvs = dv_files.len();
    for (name, bytes) in dv_files.into_files() {
        io.overwrite(&format!("{root}/{name}"), bytes)?;
    }
    let version = published.version.map_or(0, |v| v + 1);
    delta_log::commit(io, root, version, &head)?;
    let before = published.dv_files()?;
    // Older versions list the files this one leaves out: kept for the retention.
    for path in published.files.keys().filter(|path| !next_files.contains_key(*path)) {
        publishing.retention.keep(format!("{root}/{path}"), publishing.keep_until_ms, false);
    }
    published.version = Some(version);
    published.columns = schema.column_count();
    published.files = next_files;
    let current = published.dv_files()?;
    for name in before.difference(&current) {
        publishing.retention.keep(format!("{root}/{name}"), publishing.keep_until_ms, true);
    }
    if version > 0 && version % delta_checkpoint::CHECKPOINT_INTERVAL == 0 {
        let mut state = vec![
            Action::Protocol(delta_log::protocol(schema)),
            Action::MetaData(delta_log::metadata(&published.delta_id, schema, now_ms)?),
            Action::Txn(Txn { app_id: delta_log::TXN_APP_ID.into(), version: ts.0, last_updated: now_ms }),
        ];
        state.extend(published.files.iter().map(|(path, file)| Action::Add(add_action(path, file, now_ms))));
        delta_checkpoint::write(io, root, version, &state)?;
        published.checkpoints.push((version, now_ms));
        delta_checkpoint::drop_expired_log(io, root, &mut published.checkpoints, now_ms - retention_ms)?;
        publishing.report.delta_checkpoints += 1;
    }
    let report = &mut *publishing.report;
    report.tables_committed += 1;
    report.files_added += added;
    report.files_removed += removed;
    report.deletion_vectors += dvs;
    Ok(true)
}

fn add_action(path: &str, file: &PublishedFile, now_ms: i64) -> Add {
    Add {
        path: path.to_string(),
        partition_values: BTreeMap::new(),
        size: file.size,
        modification_time: now_ms,
        data_change: true,
        stats: file.stats.clone(),
        deletion_vector: file.dv.clone(),
    }
}

fn remove_action(path: &str, old: &PublishedFile, now_ms: i64) -> Remove {
    Remove {
        path: path.to_string(),
        deletion_timestamp: now_ms,
        data_change: true,
        extended_file_metadata: true,
        partition_values: BTreeMap::new(),
        size: old.size,
        deletion_vector: old.dv.clone(),
    }
}

/// Delta file statistics: physical rows, and min/max/null counts of the columns
/// whose recorded range maps exactly to Delta's JSON (integers and dates). The
/// ranges span every row of the file, so with a DV they are bounds, not tight.
fn stats(schema: &TableSchema, file: &WantedFile, has_dv: bool) -> Value {
    let (mut min, mut max, mut nulls) = (serde_json::Map::new(), serde_json::Map::new(), serde_json::Map::new());
    for range in &file.ranges {
        let Some(field) = schema.columns().fields().iter().find(|f| f.name() == &range.column) else { continue };
        let bound = |value: &RangeValue| -> Option<Value> {
            match (field.data_type(), value) {
                (arrow_schema::DataType::Int16 | arrow_schema::DataType::Int32 | arrow_schema::DataType::Int64, RangeValue::Int(v)) => {
                    Some(json!(v))
                }
                (arrow_schema::DataType::Date32, RangeValue::Int(days)) => {
                    let date = chrono::DateTime::from_timestamp(days.checked_mul(86_400)?, 0)?.date_naive();
                    Some(json!(date.format("%Y-%m-%d").to_string()))
                }
                _ => None,
            }
        };
        if let (Some(low), Some(high)) = (bound(&range.min), bound(&range.max)) {
            min.insert(range.column.clone(), low);
            max.insert(range.column.clone(), high);
            nulls.insert(range.column.clone(), json!(range.null_count));
        }
    }
    let mut stats = json!({ "numRecords": file.records, "tightBounds": !has_dv });
    if !min.is_empty() {
        stats["minValues"] = Value::Object(min);
        stats["maxValues"] = Value::Object(max);
        stats["nullCount"] = Value::Object(nulls);
    }
    stats
}
