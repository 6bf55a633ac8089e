//! The Delta Lake transaction log that publication writes: actions as the protocol
//! spells them, a table's schema in Delta's JSON form, and commits as
//! `_delta_log/<version, 20 digits>.json`, each created exactly once.
//!
//! Why not `deltalake-core`: Retina is the only writer of these tables and knows
//! every file it published (the publication state), so it needs neither log replay
//! nor a conflict checker, and delta-rs's own operations cannot write deletion
//! vectors (delta-rs #4079). What is left, JSON actions and a create-once put, is
//! a page of code, where the crate would add a DataFusion-sized build to the CLI.
//!
//! `_create_ts` stays out of what readers see by not being declared: without column
//! mapping, the protocol defines a table's columns by `schemaString` and readers
//! resolve each declared column in a data file by name, so a physical column no
//! field names is never read (DuckDB/delta-kernel, delta-rs, Polars and Spark all
//! project the declared columns). Column mapping (`name` mode), which would list
//! it as a dropped column, is not used: Polars 2.1 refuses every table that has
//! the `columnMapping` feature, and an open table that Polars cannot read is not
//! open enough.

use std::collections::BTreeMap;

use arrow_schema::{DataType, TimeUnit};
use retina_core::TableSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::deletion_vector::DeletionVectorDescriptor;
use crate::error::StorageError;
use crate::io::ObjectIo;

/// `appId` of the `txn` action whose version is the published Retina ts.
pub(crate) const TXN_APP_ID: &str = "retina";

/// One log action, serialized as `{"<kind>": {...}}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Action {
    CommitInfo(Value),
    Protocol(Protocol),
    MetaData(Metadata),
    Txn(Txn),
    Add(Add),
    Remove(Remove),
    /// Any other action (a reader of our own log skips what it does not write).
    #[serde(untagged)]
    Other(Value),
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Protocol {
    pub min_reader_version: u32,
    pub min_writer_version: u32,
    pub reader_features: Vec<String>,
    pub writer_features: Vec<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Metadata {
    pub id: String,
    pub name: String,
    pub format: Value,
    pub schema_string: String,
    pub partition_columns: Vec<String>,
    pub configuration: BTreeMap<String, String>,
    pub created_time: i64,
    /// Says which columns the table leaves out (see [`metadata`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Txn {
    pub app_id: String,
    pub version: u64,
    pub last_updated: i64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Add {
    pub path: String,
    pub partition_values: BTreeMap<String, String>,
    pub size: u64,
    pub modification_time: i64,
    pub data_change: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Remove {
    pub path: String,
    pub deletion_timestamp: i64,
    pub data_change: bool,
    pub extended_file_metadata: bool,
    pub partition_values: BTreeMap<String, String>,
    pub size: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_vector: Option<DeletionVectorDescriptor>,
}

/// The protocol of a published table: deletion vectors (and `timestampNtz` when a
/// column needs it) are table features, so reader 3 / writer 7.
///
/// A column declared `nullable: false` (a primary key) is a NOT NULL constraint,
/// which Delta enforces as an invariant: Delta's reference reader (Spark) refuses a
/// table whose metadata needs `invariants` unless the protocol lists that (writer-only)
/// feature (`DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH`); delta-rs, Polars and DuckDB
/// do not check.
pub(crate) fn protocol(schema: &TableSchema) -> Protocol {
    let mut features = vec!["deletionVectors".to_string()];
    let fields = schema.columns().fields();
    if fields.iter().any(|f| matches!(f.data_type(), DataType::Timestamp(TimeUnit::Microsecond, None))) {
        features.push("timestampNtz".into());
    }
    let mut writer_features = features.clone();
    if fields.iter().any(|f| !f.is_nullable() && declared(f.data_type())) {
        writer_features.push("invariants".into());
    }
    Protocol { min_reader_version: 3, min_writer_version: 7, reader_features: features, writer_features }
}

/// Whether a column of this type is declared in the Delta schema (see [`metadata`]).
fn declared(data_type: &DataType) -> bool {
    undeclared_kind(data_type).is_none()
}

/// Why a column of this type is left out of the Delta schema, if it is.
fn undeclared_kind(data_type: &DataType) -> Option<&'static str> {
    match data_type {
        DataType::Time64(_) => Some("time of day"),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => Some("timestamp in nanoseconds"),
        _ => None,
    }
}

/// The table's metadata: its user columns, and the table property that turns on
/// deletion vectors.
///
/// Delta Lake has no time-of-day type and no nanosecond timestamp (SQL Server's
/// `datetime2`, Oracle's `TIMESTAMP(9)`): such a column is left undeclared, as
/// `_create_ts` is (readers never read it), so the rest of the table is still
/// published; the table's description names it, and the Iceberg table (v3 has both
/// types) declares it. Declaring a nanosecond column as `timestamp` would not do:
/// Spark refuses Parquet's `TIMESTAMP(NANOS)` under a microsecond type.
pub(crate) fn metadata(id: &str, schema: &TableSchema, created_ms: i64) -> Result<Metadata, StorageError> {
    check_names_apart(schema)?;
    let mut fields = Vec::new();
    let mut left_out = Vec::new();
    for field in schema.columns().fields() {
        if let Some(kind) = undeclared_kind(field.data_type()) {
            left_out.push(format!("{} ({kind})", field.name()));
            continue;
        }
        fields.push(json!({
            "name": field.name(),
            "type": delta_type(schema.name(), field.name(), field.data_type())?,
            "nullable": field.is_nullable(),
            "metadata": {},
        }));
    }
    let description = (!left_out.is_empty()).then(|| {
        format!("Columns left out, Delta Lake having no such type (the Iceberg table has them): {}", left_out.join(", "))
    });
    let schema_string = json!({ "type": "struct", "fields": fields }).to_string();
    let configuration = BTreeMap::from([("delta.enableDeletionVectors".to_string(), "true".to_string())]);
    Ok(Metadata {
        id: id.to_string(),
        name: schema.name().to_string(),
        format: json!({ "provider": "parquet", "options": {} }),
        schema_string,
        partition_columns: Vec::new(),
        configuration,
        created_time: created_ms,
        description,
    })
}

/// Delta Lake resolves column names case-insensitively (Spark, Trino, Delta's own
/// checks): a table with `ID` beside `id` fails in every Delta reader, so it is not
/// published, and the error names both columns.
pub(crate) fn check_names_apart(schema: &TableSchema) -> Result<(), StorageError> {
    let fields = schema.columns().fields();
    for (at, field) in fields.iter().enumerate() {
        if let Some(earlier) = fields[..at].iter().find(|earlier| earlier.name().eq_ignore_ascii_case(field.name())) {
            return Err(StorageError::Publication {
                reason: format!(
                    "table {}: columns {} and {} differ only in case, which Delta Lake and Iceberg readers cannot tell \
                     apart; the table is not published",
                    schema.name(),
                    earlier.name(),
                    field.name()
                ),
            });
        }
    }
    Ok(())
}

/// Delta's name for an Arrow type as Retina stores it in Parquet.
fn delta_type(table: &str, column: &str, data_type: &DataType) -> Result<String, StorageError> {
    Ok(match data_type {
        DataType::Boolean => "boolean".into(),
        DataType::Int16 => "short".into(),
        DataType::Int32 => "integer".into(),
        DataType::Int64 => "long".into(),
        DataType::Float32 => "float".into(),
        DataType::Float64 => "double".into(),
        DataType::Utf8 => "string".into(),
        DataType::Binary => "binary".into(),
        DataType::Date32 => "date".into(),
        DataType::Timestamp(TimeUnit::Microsecond, Some(_)) => "timestamp".into(),
        DataType::Timestamp(TimeUnit::Microsecond, None) => "timestamp_ntz".into(),
        DataType::Decimal128(precision, scale) => format!("decimal({precision},{scale})"),
        other => {
            return Err(StorageError::Publication {
                reason: format!(
                    "table {table}, column {column}: Delta Lake has no type for {other}; the table is not \
                     published"
                ),
            })
        }
    })
}

/// The log object of `version` under the table folder `root`.
pub(crate) fn commit_path(root: &str, version: u64) -> String {
    format!("{root}/_delta_log/{version:020}.json")
}

/// Writes `actions` as version `version` of the table at `root`, failing if that
/// version exists (another writer, or a commit this one made and lost track of).
pub(crate) fn commit(io: &ObjectIo, root: &str, version: u64, actions: &[Action]) -> Result<(), StorageError> {
    let mut bytes = Vec::new();
    for action in actions {
        serde_json::to_writer(&mut bytes, action).map_err(|e| StorageError::Publication { reason: e.to_string() })?;
        bytes.push(b'\n');
    }
    match io.create(&commit_path(root, version), bytes)? {
        true => Ok(()),
        false => Err(StorageError::CommitRace { location: io.location().to_string(), what: "Delta log", version }),
    }
}

/// The actions of a committed version, `None` when it does not exist.
pub(crate) fn read_commit(io: &ObjectIo, root: &str, version: u64) -> Result<Option<Vec<Action>>, StorageError> {
    let Some(found) = io.get(&commit_path(root, version))? else { return Ok(None) };
    let text = std::str::from_utf8(&found.bytes).map_err(|e| StorageError::Publication { reason: format!("{root} version {version}: {e}") })?;
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).map_err(|e| StorageError::Publication { reason: format!("{root} version {version}: {e}") }))
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_serialize_as_the_protocol_names_them() {
        let add = Action::Add(Add {
            path: "1.parquet".into(),
            partition_values: BTreeMap::new(),
            size: 10,
            modification_time: 5,
            data_change: true,
            stats: None,
            deletion_vector: None,
        });
        let text = serde_json::to_string(&add).expect("json");
        assert!(text.starts_with(r#"{"add":{"path":"1.parquet","partitionValues":{},"size":10,"#), "{text}");
        let back: Action = serde_json::from_str(&text).expect("back");
        assert!(matches!(back, Action::Add(a) if a.path == "1.parquet"));
        let other: Action = serde_json::from_str(r#"{"checkpointMetadata":{"version":3}}"#).expect("other");
        assert!(matches!(other, Action::Other(_)));
        let info = serde_json::to_string(&Action::CommitInfo(json!({"a": 1}))).expect("json");
        assert_eq!(info, r#"{"commitInfo":{"a":1}}"#);
    }

    /// Spark refuses a table whose NOT NULL column is not backed by the protocol's
    /// `invariants` writer feature; readers need no such feature.
    #[test]
    fn a_not_null_column_lists_the_invariants_writer_feature() {
        let keyed = TableSchema::from_columns("s.k", &[("id", DataType::Int64, false), ("v", DataType::Utf8, true)], &["id"]).expect("schema");
        let protocol_of_keyed = protocol(&keyed);
        assert!(protocol_of_keyed.writer_features.contains(&"invariants".to_string()), "{protocol_of_keyed:?}");
        assert!(!protocol_of_keyed.reader_features.contains(&"invariants".to_string()), "a writer-only feature");
        let nullable = TableSchema::from_columns("s.n", &[("id", DataType::Int64, true)], &["id"]).expect("schema");
        assert!(!protocol(&nullable).writer_features.contains(&"invariants".to_string()));
    }

    #[test]
    fn columns_that_differ_only_in_case_are_not_published() {
        let schema = TableSchema::from_columns("s.c", &[("id", DataType::Int64, false), ("ID", DataType::Utf8, true)], &["id"]).expect("schema");
        let error = metadata("x", &schema, 0).expect_err("refused").to_string();
        assert!(error.contains("table s.c") && error.contains("columns id and ID"), "{error}");
    }

    #[test]
    fn schemas_map_to_delta_types_without_create_ts() {
        let schema = TableSchema::from_columns(
            "s.t",
            &[
                ("id", DataType::Int64, false),
                ("at", DataType::Timestamp(TimeUnit::Microsecond, None), true),
                ("amount", DataType::Decimal128(12, 2), true),
            ],
            &["id"],
        )
        .expect("schema");
        let published = metadata("x", &schema, 0).expect("metadata");
        let parsed: Value = serde_json::from_str(&published.schema_string).expect("schema json");
        assert_eq!(parsed["fields"][0]["type"], "long");
        assert_eq!(parsed["fields"][1]["type"], "timestamp_ntz");
        assert_eq!(parsed["fields"][2]["type"], "decimal(12,2)");
        assert_eq!(parsed["fields"].as_array().expect("fields").len(), 3, "no _create_ts");
        assert!(protocol(&schema).reader_features.contains(&"timestampNtz".to_string()));
        assert!(published.description.is_none());
        let times = TableSchema::from_columns(
            "s.n",
            &[("id", DataType::Int64, false), ("t", DataType::Time64(TimeUnit::Microsecond), true), ("n", DataType::Utf8, true)],
            &["id"],
        )
        .expect("schema");
        let published = metadata("x", &times, 0).expect("a time column is left out");
        let parsed: Value = serde_json::from_str(&published.schema_string).expect("schema json");
        let names: Vec<&str> = parsed["fields"].as_array().expect("fields").iter().filter_map(|f| f["name"].as_str()).collect();
        assert_eq!(names, ["id", "n"]);
        assert!(published.description.as_deref().is_some_and(|d| d.ends_with("(the Iceberg table has them): t (time of day)")), "{:?}", published.description);
        let nanos = TableSchema::from_columns(
            "s.n",
            &[
                ("id", DataType::Int64, false),
                ("t", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
                ("z", DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into())), true),
            ],
            &["id"],
        )
        .expect("schema");
        let published = metadata("x", &nanos, 0).expect("nanosecond timestamps are left out");
        let parsed: Value = serde_json::from_str(&published.schema_string).expect("schema json");
        assert_eq!(parsed["fields"].as_array().expect("fields").len(), 1, "only id: {parsed}");
        let description = published.description.unwrap_or_default();
        assert!(description.ends_with("t (timestamp in nanoseconds), z (timestamp in nanoseconds)"), "{description}");
        assert!(!protocol(&nanos).reader_features.contains(&"timestampNtz".to_string()), "no declared timestamp_ntz column");
        // Every type a table may have maps; the error stays for a type added later.
        let error = delta_type("s.i", "d", &DataType::Duration(TimeUnit::Microsecond)).expect_err("no Delta type").to_string();
        assert!(error.contains("table s.i, column d"), "{error}");
    }
}
