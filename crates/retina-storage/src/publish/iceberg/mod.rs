//! Iceberg v3 publication over the same files as the Delta table: each changed
//! table gets a snapshot whose data manifest lists every visible file and whose
//! delete manifest lists one deletion vector per file that hides rows, as
//! `deletion-vector-v1` blobs in Puffin files (the same portable Roaring bitmap as
//! the Delta DV). `metadata/v<N>.metadata.json` and `metadata/version-hint.text`
//! let readers open the table by path.
//!
//! A DV whose rows did not change is carried over (the entry keeps its sequence
//! number and Puffin location); only changed ones are written. Columns resolve by
//! the table's name mapping (Retina's Parquet files carry no field ids), which
//! maps `_create_ts` to an id no schema has: readers never see it. Snapshots older than the
//! retention expire with the manifests and Puffin files only they used.

pub(crate) mod avro;

use std::collections::{BTreeMap, BTreeSet};

use arrow_schema::{DataType, TimeUnit};
use retina_core::{TableSchema, Ts};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use self::avro::Datum;
use super::deletion_vector::HiddenRows;
use crate::error::StorageError;
use crate::io::ObjectIo;

/// Magic of a `deletion-vector-v1` blob.
const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
const PUFFIN_MAGIC: &[u8; 4] = b"PFA1";

/// What publication remembers of a table's Iceberg side.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct IcebergTable {
    pub table_uuid: String,
    /// `N` of the latest `v<N>.metadata.json` (0: none yet).
    pub metadata_version: u64,
    pub last_sequence_number: i64,
    pub next_row_id: i64,
    pub current_snapshot_id: Option<i64>,
    /// Every schema the table had, by schema id (an added column adds one).
    #[serde(default)]
    pub schemas: Vec<Value>,
    /// Retained snapshots, oldest first.
    pub snapshots: Vec<Snapshot>,
    /// Retained metadata files: (relative path, written at ms).
    pub metadata_log: Vec<(String, i64)>,
    /// Files of the current snapshot, by path relative to the table folder.
    pub files: BTreeMap<String, IcebergFile>,
    /// The Delta version the current snapshot describes. When a publication
    /// committed Delta and then failed on Iceberg, the Iceberg side is behind and
    /// is committed by the next publication even if Delta then has nothing new
    /// (else a cut named a Delta version and an older Iceberg snapshot).
    #[serde(default)]
    pub delta_version: Option<u64>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    pub json: Value,
    pub timestamp_ms: i64,
    /// Manifests and manifest list this snapshot wrote (relative paths).
    pub wrote: Vec<String>,
    /// Puffin files its DVs are in.
    pub puffins: BTreeSet<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct IcebergFile {
    pub size: u64,
    pub records: u64,
    pub first_row_id: i64,
    pub sequence_number: i64,
    pub snapshot_id: i64,
    pub dv: Option<IcebergDv>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct IcebergDv {
    /// The Puffin file, relative to the table folder, and its size.
    pub puffin: String,
    pub puffin_size: u64,
    pub offset: u64,
    pub length: u64,
    pub cardinality: u64,
    pub sequence_number: i64,
    pub snapshot_id: i64,
    pub fingerprint: u64,
}

/// A visible file of the new snapshot and the rows it hides.
pub(crate) struct FileInput<'a> {
    pub path: &'a str,
    pub size: u64,
    pub records: u64,
    pub hidden: &'a HiddenRows,
}

/// Iceberg's name for a column type, or why it has none.
fn iceberg_type(table: &str, column: &str, data_type: &DataType) -> Result<String, StorageError> {
    Ok(match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int16 | DataType::Int32 => "int".into(),
        DataType::Int64 => "long".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 => "string".into(),
        DataType::Binary => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamptz".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp".into(),
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => "timestamptz_ns".into(),
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "timestamp_ns".into(),
        DataType::Time64(TimeUnit::Microsecond) => "time".into(),
        DataType::Decimal128(precision, scale) => format!("decimal({precision}, {scale})"),
        other => {
            return Err(StorageError::Publication {
                reason: format!("table {table}, column {column}: Iceberg has no type for {other}; the table is not published"),
            })
        }
    })
}

/// The field id `_create_ts` is mapped to: in no schema (new columns take ids from
/// 1 up, Iceberg's metadata columns sit just below `i32::MAX`), so readers that
/// resolve the file's columns through the name mapping know it and never read it
/// (pyiceberg refuses a file column the mapping lacks).
const CREATE_TS_FIELD_ID: i64 = 2_000_000_000;

/// The table schema (field ids 1.. in column order, so an added column takes the
/// next id; `_create_ts` not among them) and its name mapping.
fn schema_json(schema: &TableSchema) -> Result<(Value, String), StorageError> {
    let mut fields = Vec::new();
    let mut mapping = Vec::new();
    for (index, field) in schema.columns().fields().iter().enumerate() {
        let id = index + 1;
        fields.push(json!({
            "id": id,
            "name": field.name(),
            "required": !field.is_nullable(),
            "type": iceberg_type(schema.name(), field.name(), field.data_type())?,
        }));
        mapping.push(json!({ "field-id": id, "names": [field.name()] }));
    }
    mapping.push(json!({ "field-id": CREATE_TS_FIELD_ID, "names": [retina_core::schema::CREATE_TS_COLUMN] }));
    Ok((json!({ "type": "struct", "schema-id": 0, "fields": fields }), Value::Array(mapping).to_string()))
}

/// Checks that every column has an Iceberg type.
pub(crate) fn check_schema(schema: &TableSchema) -> Result<(), StorageError> {
    schema_json(schema).map(|_| ())
}

const MANIFEST_ENTRY_SCHEMA: &str = r#"{"type":"record","name":"manifest_entry","fields":[
{"name":"status","type":"int","field-id":0},
{"name":"snapshot_id","type":["null","long"],"default":null,"field-id":1},
{"name":"sequence_number","type":["null","long"],"default":null,"field-id":3},
{"name":"file_sequence_number","type":["null","long"],"default":null,"field-id":4},
{"name":"data_file","field-id":2,"type":{"type":"record","name":"r2","fields":[
{"name":"content","type":"int","field-id":134},
{"name":"file_path","type":"string","field-id":100},
{"name":"file_format","type":"string","field-id":101},
{"name":"partition","type":{"type":"record","name":"r102","fields":[]},"field-id":102},
{"name":"record_count","type":"long","field-id":103},
{"name":"file_size_in_bytes","type":"long","field-id":104},
{"name":"first_row_id","type":["null","long"],"default":null,"field-id":142},
{"name":"referenced_data_file","type":["null","string"],"default":null,"field-id":143},
{"name":"content_offset","type":["null","long"],"default":null,"field-id":144},
{"name":"content_size_in_bytes","type":["null","long"],"default":null,"field-id":145}]}}]}"#;

const MANIFEST_FILE_SCHEMA: &str = r#"{"type":"record","name":"manifest_file","fields":[
{"name":"manifest_path","type":"string","field-id":500},
{"name":"manifest_length","type":"long","field-id":501},
{"name":"partition_spec_id","type":"int","field-id":502},
{"name":"content","type":"int","field-id":517},
{"name":"sequence_number","type":"long","field-id":515},
{"name":"min_sequence_number","type":"long","field-id":516},
{"name":"added_snapshot_id","type":"long","field-id":503},
{"name":"added_files_count","type":"int","field-id":504},
{"name":"existing_files_count","type":"int","field-id":505},
{"name":"deleted_files_count","type":"int","field-id":506},
{"name":"added_rows_count","type":"long","field-id":512},
{"name":"existing_rows_count","type":"long","field-id":513},
{"name":"deleted_rows_count","type":"long","field-id":514},
{"name":"first_row_id","type":["null","long"],"default":null,"field-id":520}]}"#;

const EXISTING: i32 = 0;
const ADDED: i32 = 1;

/// One manifest entry: `inherited` entries (added now) leave snapshot, sequence
/// numbers and first row id to the manifest list.
#[allow(clippy::too_many_arguments)]
fn entry(
    inherited: bool,
    snapshot_id: i64,
    sequence_number: i64,
    content: i32,
    path: String,
    format: &str,
    records: i64,
    size: i64,
    first_row_id: Option<i64>,
    dv: Option<(String, i64, i64)>,
) -> Datum {
    let known = |value: i64| Datum::optional_long((!inherited).then_some(value));
    let (referenced, offset, length) = match dv {
        Some((referenced, offset, length)) => (Some(referenced), Some(offset), Some(length)),
        None => (None, None, None),
    };
    Datum::Record(vec![
        Datum::Int(if inherited { ADDED } else { EXISTING }),
        known(snapshot_id),
        known(sequence_number),
        known(sequence_number),
        Datum::Record(vec![
            Datum::Int(content),
            Datum::Text(path),
            Datum::Text(format.into()),
            Datum::Record(Vec::new()),
            Datum::Long(records),
            Datum::Long(size),
            Datum::optional_long(if inherited { None } else { first_row_id }),
            Datum::optional_text(referenced.as_deref()),
            Datum::optional_long(offset),
            Datum::optional_long(length),
        ]),
    ])
}

/// Commits the next snapshot of the table at `root` (relative to the data dir,
/// which is `base_uri`) listing `files`; snapshots published before
/// `expired_before_ms` go, with what only they used.
#[allow(clippy::too_many_arguments)]
pub(crate) fn commit(
    io: &ObjectIo,
    base_uri: &str,
    root: &str,
    schema: &TableSchema,
    ts: Ts,
    now_ms: i64,
    expired_before_ms: i64,
    table: &mut IcebergTable,
    files: &[FileInput<'_>],
) -> Result<(), StorageError> {
    let failed = |reason: String| StorageError::Publication { reason: format!("{root}: Iceberg: {reason}") };
    if table.table_uuid.is_empty() {
        table.table_uuid = uuid::Uuid::new_v4().to_string();
    }
    let (mut schema_value, name_mapping) = schema_json(schema)?;
    // A changed schema (an added column) becomes the next schema id; old snapshots
    // keep theirs.
    let known = table.schemas.last().map(|last| last["fields"] == schema_value["fields"]).unwrap_or(false);
    if !known {
        schema_value["schema-id"] = json!(table.schemas.len());
        table.schemas.push(schema_value.clone());
    }
    let schema_value = table.schemas.last().cloned().unwrap_or(schema_value);
    let schema_id = schema_value["schema-id"].as_i64().unwrap_or_default();
    let uri = |relative: &str| format!("{base_uri}/{root}/{relative}");
    let sequence_number = table.last_sequence_number + 1;
    let snapshot_id = (uuid::Uuid::new_v4().as_u64_pair().0 & (i64::MAX as u64)) as i64;
    let first_row_id = table.next_row_id;
    let tag = uuid::Uuid::new_v4();

    // Data files and their DVs; new DVs go into one Puffin file.
    let puffin_name = format!("metadata/dv-{tag}.puffin");
    let mut puffin = PUFFIN_MAGIC.to_vec();
    let mut blobs = Vec::new();
    let (mut data_entries, mut delete_entries) = (Vec::new(), Vec::new());
    let mut next_files = BTreeMap::new();
    let (mut added_rows, mut added_files, mut existing_files, mut existing_rows) = (0i64, 0, 0, 0i64);
    let (mut added_dvs, mut existing_dvs) = (0, 0);
    let mut row_cursor = first_row_id;
    let mut puffins = BTreeSet::new();
    for file in files {
        let old = table.files.get(file.path).filter(|old| old.size == file.size && old.records == file.records);
        let mut current = match old {
            Some(old) => {
                data_entries.push(entry(false, old.snapshot_id, old.sequence_number, 0, uri(file.path), "PARQUET", old.records as i64, old.size as i64, Some(old.first_row_id), None));
                existing_files += 1;
                existing_rows += old.records as i64;
                old.clone()
            }
            None => {
                data_entries.push(entry(true, snapshot_id, sequence_number, 0, uri(file.path), "PARQUET", file.records as i64, file.size as i64, None, None));
                added_files += 1;
                added_rows += file.records as i64;
                let assigned = IcebergFile {
                    size: file.size,
                    records: file.records,
                    first_row_id: row_cursor,
                    sequence_number,
                    snapshot_id,
                    dv: None,
                };
                row_cursor += file.records as i64;
                assigned
            }
        };
        if file.hidden.is_empty() {
            current.dv = None;
        } else {
            let fingerprint = file.hidden.fingerprint();
            let reused = current.dv.clone().filter(|dv| dv.fingerprint == fingerprint);
            let dv = match reused {
                Some(dv) => {
                    let location = (uri(file.path), dv.offset as i64, dv.length as i64);
                    let size = dv.puffin_size as i64;
                    delete_entries.push(entry(false, dv.snapshot_id, dv.sequence_number, 1, uri(&dv.puffin), "PUFFIN", dv.cardinality as i64, size, None, Some(location)));
                    existing_dvs += 1;
                    dv
                }
                None => {
                    let mut vector = DV_MAGIC.to_vec();
                    file.hidden.write_portable(&mut vector);
                    let offset = puffin.len() as u64;
                    puffin.extend_from_slice(&(vector.len() as u32).to_be_bytes());
                    puffin.extend_from_slice(&vector);
                    puffin.extend_from_slice(&crc32fast::hash(&vector).to_be_bytes());
                    let length = puffin.len() as u64 - offset;
                    blobs.push(json!({
                        "type": "deletion-vector-v1",
                        "fields": [2147483545],
                        "snapshot-id": -1,
                        "sequence-number": -1,
                        "offset": offset,
                        "length": length,
                        "properties": { "referenced-data-file": uri(file.path), "cardinality": file.hidden.len().to_string() },
                    }));
                    let location = (uri(file.path), offset as i64, length as i64);
                    delete_entries.push(entry(true, snapshot_id, sequence_number, 1, uri(&puffin_name), "PUFFIN", file.hidden.len() as i64, 0, None, Some(location)));
                    added_dvs += 1;
                    IcebergDv {
                        puffin: puffin_name.clone(),
                        puffin_size: 0, // known once the file is complete (below)
                        offset,
                        length,
                        cardinality: file.hidden.len(),
                        sequence_number,
                        snapshot_id,
                        fingerprint,
                    }
                }
            };
            puffins.insert(dv.puffin.clone());
            current.dv = Some(dv);
        }
        next_files.insert(file.path.to_string(), current);
    }
    let mut wrote = Vec::new();
    if !blobs.is_empty() {
        let footer = json!({ "blobs": blobs, "properties": { "created-by": concat!("retina ", env!("CARGO_PKG_VERSION")) } }).to_string();
        puffin.extend_from_slice(PUFFIN_MAGIC);
        puffin.extend_from_slice(footer.as_bytes());
        puffin.extend_from_slice(&(footer.len() as i32).to_le_bytes());
        puffin.extend_from_slice(&[0u8; 4]);
        puffin.extend_from_slice(PUFFIN_MAGIC);
        // The file sizes of DV entries are the Puffin file's.
        let size = puffin.len() as i64;
        for entry in &mut delete_entries {
            set_file_size_if(entry, &uri(&puffin_name), size);
        }
        for file in next_files.values_mut() {
            if let Some(dv) = file.dv.as_mut().filter(|dv| dv.puffin == puffin_name) {
                dv.puffin_size = size as u64;
            }
        }
        io.overwrite(&format!("{root}/{puffin_name}"), puffin)?;
    }
    // Manifests and the manifest list.
    let spec_metadata = |content: &str| -> Vec<(&'static str, String)> {
        vec![
            ("schema", schema_value.to_string()),
            ("schema-id", schema_id.to_string()),
            ("partition-spec", "[]".into()),
            ("partition-spec-id", "0".into()),
            ("format-version", "3".into()),
            ("content", content.into()),
        ]
    };
    let mut manifests = Vec::new();
    let min_sequence = |entries: &[Datum]| -> i64 {
        entries
            .iter()
            .filter_map(|e| match e {
                Datum::Record(f) => match &f[2] {
                    Datum::Optional(Some(v)) => match **v {
                        Datum::Long(s) => Some(s),
                        _ => None,
                    },
                    _ => Some(sequence_number),
                },
                _ => None,
            })
            .min()
            .unwrap_or(sequence_number)
    };
    for (content, entries, added, existing, added_rows_count, existing_rows_count) in [
        (0, &data_entries, added_files, existing_files, added_rows, existing_rows),
        (1, &delete_entries, added_dvs, existing_dvs, 0, 0),
    ] {
        if entries.is_empty() {
            continue;
        }
        let name = format!("metadata/{tag}-m{content}.avro");
        let bytes = avro::container_file(MANIFEST_ENTRY_SCHEMA, &spec_metadata(if content == 0 { "data" } else { "deletes" }), entries);
        let length = bytes.len() as i64;
        io.overwrite(&format!("{root}/{name}"), bytes)?;
        manifests.push(Datum::Record(vec![
            Datum::Text(uri(&name)),
            Datum::Long(length),
            Datum::Int(0),
            Datum::Int(content),
            Datum::Long(sequence_number),
            Datum::Long(min_sequence(entries)),
            Datum::Long(snapshot_id),
            Datum::Int(added),
            Datum::Int(existing),
            Datum::Int(0),
            Datum::Long(added_rows_count),
            Datum::Long(existing_rows_count),
            Datum::Long(0),
            Datum::optional_long((content == 0).then_some(first_row_id)),
        ]));
        wrote.push(name);
    }
    let list_name = format!("metadata/snap-{snapshot_id}-{tag}.avro");
    let list_metadata = vec![
        ("snapshot-id", snapshot_id.to_string()),
        ("parent-snapshot-id", table.current_snapshot_id.map_or("null".into(), |id| id.to_string())),
        ("sequence-number", sequence_number.to_string()),
        ("first-row-id", first_row_id.to_string()),
        ("format-version", "3".into()),
    ];
    io.overwrite(&format!("{root}/{list_name}"), avro::container_file(MANIFEST_FILE_SCHEMA, &list_metadata, &manifests))?;
    wrote.push(list_name.clone());

    // The snapshot, and expiry of old ones.
    let mut snapshot = json!({
        "snapshot-id": snapshot_id,
        "sequence-number": sequence_number,
        "timestamp-ms": now_ms,
        "manifest-list": uri(&list_name),
        "summary": {
            "operation": "overwrite",
            "retina.ts": ts.0.to_string(),
            "added-data-files": added_files.to_string(),
            "total-data-files": next_files.len().to_string(),
        },
        "schema-id": schema_id,
        "first-row-id": first_row_id,
        "added-rows": added_rows,
    });
    if let Some(parent) = table.current_snapshot_id {
        snapshot["parent-snapshot-id"] = json!(parent);
    }
    table.snapshots.push(Snapshot { json: snapshot, timestamp_ms: now_ms, wrote, puffins });
    table.current_snapshot_id = Some(snapshot_id);
    table.last_sequence_number = sequence_number;
    table.next_row_id = first_row_id + added_rows;
    table.files = next_files;
    let expired = table.snapshots.iter().take(table.snapshots.len() - 1).take_while(|s| s.timestamp_ms < expired_before_ms).count();
    let gone: Vec<Snapshot> = table.snapshots.drain(..expired).collect();
    let still_used: BTreeSet<&String> = table.snapshots.iter().flat_map(|s| &s.puffins).collect();
    for snapshot in &gone {
        for path in snapshot.wrote.iter().chain(snapshot.puffins.iter().filter(|p| !still_used.contains(p))) {
            io.delete(&format!("{root}/{path}"))?;
        }
    }

    // The metadata file and the version hint.
    let version = table.metadata_version + 1;
    let metadata_name = format!("metadata/v{version}.metadata.json");
    let metadata_log: Vec<Value> = table.metadata_log.iter().map(|(path, at)| json!({ "metadata-file": uri(path), "timestamp-ms": at })).collect();
    let metadata = json!({
        "format-version": 3,
        "table-uuid": table.table_uuid,
        "location": format!("{base_uri}/{root}"),
        "last-sequence-number": sequence_number,
        "last-updated-ms": now_ms,
        "last-column-id": schema.column_count(),
        "schemas": table.schemas,
        "current-schema-id": schema_id,
        "partition-specs": [{ "spec-id": 0, "fields": [] }],
        "default-spec-id": 0,
        "last-partition-id": 999,
        "properties": {
            "schema.name-mapping.default": name_mapping,
            "write.parquet.compression-codec": "snappy",
            "retina.ts": ts.0.to_string(),
        },
        "current-snapshot-id": snapshot_id,
        "snapshots": table.snapshots.iter().map(|s| s.json.clone()).collect::<Vec<_>>(),
        "snapshot-log": table.snapshots.iter().map(|s| json!({ "snapshot-id": s.json["snapshot-id"], "timestamp-ms": s.timestamp_ms })).collect::<Vec<_>>(),
        "metadata-log": metadata_log,
        "sort-orders": [{ "order-id": 0, "fields": [] }],
        "default-sort-order-id": 0,
        "refs": { "main": { "snapshot-id": snapshot_id, "type": "branch" } },
        "statistics": [],
        "partition-statistics": [],
        "next-row-id": table.next_row_id,
    });
    let bytes = serde_json::to_vec_pretty(&metadata).map_err(|e| failed(e.to_string()))?;
    if !io.create(&format!("{root}/{metadata_name}"), bytes)? {
        return Err(StorageError::CommitRace { location: io.location().to_string(), what: "Iceberg metadata", version });
    }
    io.overwrite(&format!("{root}/metadata/version-hint.text"), version.to_string().into_bytes())?;
    table.metadata_version = version;
    table.metadata_log.push((metadata_name.clone(), now_ms));
    let expired = table.metadata_log.len().saturating_sub(1).min(table.metadata_log.iter().take_while(|(_, at)| *at < expired_before_ms).count());
    for (path, _) in table.metadata_log.drain(..expired) {
        io.delete(&format!("{root}/{path}"))?;
    }
    Ok(())
}

/// Sets the `file_size_in_bytes` of a manifest entry whose file is `path`.
fn set_file_size_if(entry: &mut Datum, path: &str, size: i64) {
    if let Datum::Record(fields) = entry {
        if let Some(Datum::Record(data_file)) = fields.get_mut(4) {
            if matches!(&data_file[1], Datum::Text(p) if p == path) {
                data_file[5] = Datum::Long(size);
            }
        }
    }
}

impl IcebergTable {
    /// Picks up a metadata version this state has not seen (a crash between an
    /// Iceberg commit and the state's save, or a state file lost): the table's id,
    /// sequence numbers, row ids and snapshots come from the newest metadata file,
    /// so the next commit continues its history.
    pub fn catch_up(&mut self, io: &ObjectIo, root: &str) -> Result<(), StorageError> {
        let failed = |reason: String| StorageError::Publication { reason: format!("{root}: Iceberg metadata: {reason}") };
        let Some(hint) = io.get(&format!("{root}/metadata/version-hint.text"))? else { return Ok(()) };
        let version: u64 = std::str::from_utf8(&hint.bytes).ok().and_then(|t| t.trim().parse().ok()).ok_or_else(|| failed("unreadable version hint".into()))?;
        if version <= self.metadata_version {
            return Ok(());
        }
        let path = format!("{root}/metadata/v{version}.metadata.json");
        let found = io.get(&path)?.ok_or_else(|| failed(format!("{path} is missing")))?;
        let metadata: Value = serde_json::from_slice(&found.bytes).map_err(|e| failed(e.to_string()))?;
        let number = |key: &str| metadata[key].as_i64().ok_or_else(|| failed(format!("{key} is missing")));
        self.table_uuid = metadata["table-uuid"].as_str().ok_or_else(|| failed("table-uuid is missing".into()))?.to_string();
        self.last_sequence_number = number("last-sequence-number")?;
        self.next_row_id = number("next-row-id")?;
        self.current_snapshot_id = metadata["current-snapshot-id"].as_i64();
        self.schemas = metadata["schemas"].as_array().cloned().unwrap_or_default();
        let known: BTreeMap<i64, Snapshot> = self.snapshots.drain(..).filter_map(|s| s.json["snapshot-id"].as_i64().map(|id| (id, s))).collect();
        self.snapshots = metadata["snapshots"]
            .as_array()
            .map(|all| {
                all.iter()
                    .map(|json| {
                        let id = json["snapshot-id"].as_i64().unwrap_or_default();
                        known.get(&id).cloned().unwrap_or_else(|| Snapshot {
                            json: json.clone(),
                            timestamp_ms: json["timestamp-ms"].as_i64().unwrap_or_default(),
                            wrote: Vec::new(),
                            puffins: BTreeSet::new(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.metadata_log.push((format!("metadata/v{version}.metadata.json"), number("last-updated-ms")?));
        self.metadata_version = version;
        Ok(())
    }
}
