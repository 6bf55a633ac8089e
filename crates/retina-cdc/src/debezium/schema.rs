//! Kafka Connect schemas as Debezium's JSON converter writes them with
//! `schemas.enable=true`: the envelope's `after` (or `before`) struct gives a table's
//! columns, the key schema its primary key.

use serde::Deserialize;

use super::row::ColumnPlan;
use super::types::{sub_microsecond_zones, DebeziumType};
use crate::error::DecodeError;

#[derive(Deserialize)]
struct ConnectSchema {
    #[serde(rename = "type")]
    connect_type: String,
    #[serde(default)]
    optional: bool,
    name: Option<String>,
    field: Option<String>,
    #[serde(default)]
    fields: Vec<ConnectSchema>,
    parameters: Option<serde_json::Map<String, serde_json::Value>>,
    /// An array's element schema.
    items: Option<Box<ConnectSchema>>,
}

fn parse(raw: &str, what: &str) -> Result<ConnectSchema, DecodeError> {
    serde_json::from_str(raw).map_err(|e| DecodeError::bad_value(what, format!("not a Connect schema: {e}")))
}

/// The columns of a value (envelope) schema: the fields of its `after` struct, else
/// of its `before` struct.
pub fn columns_of_envelope(raw: &str) -> Result<Vec<ColumnPlan>, DecodeError> {
    let envelope = parse(raw, "schema")?;
    let image = ["after", "before"]
        .iter()
        .find_map(|name| envelope.fields.iter().find(|f| f.field.as_deref() == Some(name)))
        .ok_or_else(|| DecodeError::missing("schema.fields[after]"))?;
    let source = envelope.fields.iter().find(|f| f.field.as_deref() == Some("source"));
    let nanosecond_zones = source.and_then(|s| s.name.as_deref()).is_some_and(sub_microsecond_zones);
    image.fields.iter().map(|field| column_of(field, "schema.after", nanosecond_zones)).collect()
}

/// The field names of a key schema, in order: the primary-key columns.
pub fn key_columns(raw: &str) -> Result<Vec<String>, DecodeError> {
    let key = parse(raw, "key.schema")?;
    key.fields
        .iter()
        .map(|f| f.field.clone().ok_or_else(|| DecodeError::missing("key.schema.fields[].field")))
        .collect()
}

/// Why a column wrapped as `{"value":…,"set":…}` is refused.
const YUGABYTE_WRAPPED: &str = "the column comes wrapped as {\"value\": …, \"set\": …}, as YugabyteDB's connector \
     writes columns by default; add the PGCompatible transform that YugabyteDB ships with its connector, so that \
     columns come as plain values (as from Debezium's PostgreSQL connector)";

/// Whether `field` is a struct of exactly `value` and `set`: YugabyteDB's wrapping of
/// a column, which says whether an update set it.
fn is_value_set_wrapper(field: &ConnectSchema) -> bool {
    let mut names: Vec<&str> = field.fields.iter().filter_map(|f| f.field.as_deref()).collect();
    names.sort_unstable();
    field.connect_type == "struct" && names == ["set", "value"]
}

fn column_of(field: &ConnectSchema, context: &str, nanosecond_zones: bool) -> Result<ColumnPlan, DecodeError> {
    let name = field.field.clone().ok_or_else(|| DecodeError::missing(format!("{context}.fields[].field")))?;
    let kind = kind_of(field, &name, nanosecond_zones)?;
    Ok(ColumnPlan { name, kind, nullable: field.optional })
}

/// The kind of a column (or of an array's elements, named `name[]`).
fn kind_of(field: &ConnectSchema, name: &str, nanosecond_zones: bool) -> Result<DebeziumType, DecodeError> {
    let parameter = |key: &str| -> Option<String> {
        let value = field.parameters.as_ref()?.get(key)?;
        Some(match value {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    };
    let decimal = match parameter("scale") {
        None => None,
        Some(scale) => {
            let scale: i8 = scale
                .parse()
                .map_err(|_| DecodeError::mistyped(format!("{name}.parameters.scale"), "a small integer", scale.clone()))?;
            let precision = match parameter("connect.decimal.precision") {
                Some(p) => p.parse::<u8>().map_err(|_| {
                    DecodeError::mistyped(format!("{name}.parameters.connect.decimal.precision"), "a small integer", p.clone())
                })?,
                None => 38,
            };
            Some((precision.clamp(1, 38), scale))
        }
    };
    if is_value_set_wrapper(field) {
        return Err(DecodeError::bad_value(name, YUGABYTE_WRAPPED));
    }
    let kind = DebeziumType::from_connect(name, &field.connect_type, field.name.as_deref(), decimal)?;
    Ok(match kind {
        DebeziumType::ZonedTimestamp if nanosecond_zones => DebeziumType::ZonedTimestampNanos,
        // A plain array (not a vector) whose elements JSON does not show as themselves.
        DebeziumType::Utf8 if field.connect_type == "array" && field.name.is_none() => match &field.items {
            Some(items) => {
                let element = kind_of(items, &format!("{name}[]"), nanosecond_zones)?;
                if element.is_json_as_it_comes() { kind } else { DebeziumType::Array(Box::new(element)) }
            }
            None => kind,
        },
        kind => kind,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENVELOPE: &str = r#"{"type":"struct","name":"db.s.t.Envelope","fields":[
        {"type":"struct","optional":true,"field":"before","fields":[]},
        {"type":"struct","optional":true,"field":"after","fields":[
            {"type":"int32","optional":false,"field":"id"},
            {"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"price"},
            {"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","field":"at"}
        ]},
        {"type":"string","optional":false,"field":"op"}]}"#;

    #[test]
    fn envelope_gives_columns_with_semantic_types() {
        let columns = columns_of_envelope(ENVELOPE).expect("columns");
        assert_eq!(columns.len(), 3);
        assert_eq!(columns[0], ColumnPlan { name: "id".into(), kind: DebeziumType::Int32, nullable: false });
        assert_eq!(columns[1].kind, DebeziumType::Decimal { precision: 10, scale: 2 });
        assert_eq!(columns[2].kind, DebeziumType::TimestampMicros { timezone: None });
    }

    #[test]
    fn array_elements_keep_their_types_and_zones_their_connector_s_precision() {
        let decimal_items = r#"{"type":"array","optional":true,"field":"prices","items":{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}}}"#;
        let text_items = r#"{"type":"array","optional":true,"field":"tags","items":{"type":"string","optional":true}}"#;
        let zoned = r#"{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","field":"at"}"#;
        let envelope = |source: &str| {
            format!(
                r#"{{"type":"struct","fields":[{{"type":"struct","optional":true,"field":"after","fields":[{decimal_items},{text_items},{zoned}]}},
                {{"type":"struct","optional":false,"field":"source","name":"io.debezium.connector.{source}.Source","fields":[]}}]}}"#
            )
        };
        let kinds = |source| columns_of_envelope(&envelope(source)).expect("columns").into_iter().map(|c| c.kind).collect::<Vec<_>>();
        let postgres = kinds("postgresql");
        assert_eq!(postgres[0], DebeziumType::Array(Box::new(DebeziumType::Decimal { precision: 38, scale: 2 })));
        assert_eq!(postgres[1], DebeziumType::Utf8, "strings are JSON as they come");
        assert_eq!(postgres[2], DebeziumType::ZonedTimestamp);
        assert_eq!(kinds("sqlserver")[2], DebeziumType::ZonedTimestampNanos);
        assert_eq!(kinds("oracle")[2], DebeziumType::ZonedTimestampNanos);
        let unknown = envelope("postgresql").replace("org.apache.kafka.connect.data.Decimal", "io.debezium.data.Martian");
        let error = columns_of_envelope(&unknown).expect_err("unknown element type").to_string();
        assert!(error.contains("prices[]") && error.contains("io.debezium.data.Martian"), "{error}");
    }

    #[test]
    fn unknown_column_type_names_field() {
        let bad = ENVELOPE.replace("io.debezium.time.MicroTimestamp", "io.debezium.time.Martian");
        let error = columns_of_envelope(&bad).expect_err("unknown type").to_string();
        assert!(error.contains("field at") && error.contains("io.debezium.time.Martian"), "{error}");
    }

    /// YugabyteDB's connector (gRPC 1.7.0.13-BETA, as captured) names each column's
    /// struct after the column and wraps its value with a `set` flag.
    #[test]
    fn yugabyte_value_set_columns_are_refused_naming_the_transform() {
        let wrapped = ENVELOPE.replace(
            r#"{"type":"int32","optional":false,"field":"id"}"#,
            r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"value"},{"type":"boolean","optional":false,"field":"set"}],"optional":false,"name":"id","field":"id"}"#,
        );
        let error = columns_of_envelope(&wrapped).expect_err("wrapped column").to_string();
        assert!(error.starts_with("field id: the column comes wrapped as {\"value\": …, \"set\": …}"), "{error}");
        assert!(error.contains("PGCompatible"), "{error}");
        // Another struct keeps the unknown-type error.
        let other = wrapped.replace(r#""field":"set""#, r#""field":"flag""#);
        let error = columns_of_envelope(&other).expect_err("struct column").to_string();
        assert!(error.contains("unknown Debezium type id (struct)"), "{error}");
    }
}
