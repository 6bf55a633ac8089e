//! Kafka Connect schemas as Debezium's JSON converter writes them with
//! `schemas.enable=true`: the envelope's `after` (or `before`) struct gives a table's
//! columns, the key schema its primary key.

use serde::Deserialize;

use super::row::ColumnPlan;
use super::types::DebeziumType;
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
    image.fields.iter().map(|field| column_of(field, "schema.after")).collect()
}

/// The field names of a key schema, in order: the primary-key columns.
pub fn key_columns(raw: &str) -> Result<Vec<String>, DecodeError> {
    let key = parse(raw, "key.schema")?;
    key.fields
        .iter()
        .map(|f| f.field.clone().ok_or_else(|| DecodeError::missing("key.schema.fields[].field")))
        .collect()
}

fn column_of(field: &ConnectSchema, context: &str) -> Result<ColumnPlan, DecodeError> {
    let name = field.field.clone().ok_or_else(|| DecodeError::missing(format!("{context}.fields[].field")))?;
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
    let kind = DebeziumType::from_connect(&name, &field.connect_type, field.name.as_deref(), decimal)?;
    Ok(ColumnPlan { name, kind, nullable: field.optional })
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
    fn unknown_column_type_names_field() {
        let bad = ENVELOPE.replace("io.debezium.time.MicroTimestamp", "io.debezium.time.Martian");
        let error = columns_of_envelope(&bad).expect_err("unknown type").to_string();
        assert!(error.contains("field at") && error.contains("io.debezium.time.Martian"), "{error}");
    }
}
