//! Column values kept as text whose wire form no reader could turn back into the
//! value: arrays whose elements have logical types, and pgvector's sparse vectors.
//!
//! An array column is stored as JSON text (no list column type yet). For numbers and
//! strings the text as it came is the value, but a `numeric(5,2)[]` arrives as base64
//! unscaled bytes whose scale is only in the schema, a `date[]` as day numbers, a
//! `timestamp[]` as epoch microseconds. Each such element is decoded as a column of
//! its type would be, then written as PostgreSQL's `to_json` writes it: decimals as
//! numbers, dates `"1999-01-08"`, timestamps `"2004-10-19T10:23:54.987654"`, times
//! `"10:23:54"`, bytes `"\\x0102"`. Only such arrays take this path (a schema says
//! so), so ordinary arrays cost nothing more.

use std::fmt::Write as _;

use retina_core::Value;
use serde_json::Value as Json;

use super::image::Scalar;
use super::time;
use super::types::DebeziumType;

/// Decodes one element as a column of its kind ([`super::value::value_of`]; passed
/// in, since that decoder calls this module for arrays).
pub type ElementDecoder = fn(&DebeziumType, &Scalar<'_>) -> Result<Value, String>;

/// The JSON text of an array (`text`, compact JSON) of `element` values.
pub fn array_text(element: &DebeziumType, text: &str, decode: ElementDecoder) -> Result<Value, String> {
    let array: Json = serde_json::from_str(text).map_err(|e| format!("an array that is not JSON: {e}"))?;
    let mut out = String::with_capacity(text.len());
    write_element(element, &array, decode, &mut out)?;
    Ok(Value::Utf8(out.into()))
}

fn write_element(kind: &DebeziumType, json: &Json, decode: ElementDecoder, out: &mut String) -> Result<(), String> {
    match json {
        Json::Null => out.push_str("null"),
        // A nested array (a schema's array of arrays, or a multi-dimensional value).
        Json::Array(items) => {
            let inner = match kind {
                DebeziumType::Array(inner) => inner,
                kind => kind,
            };
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_element(inner, item, decode, out)?;
            }
            out.push(']');
        }
        scalar => {
            // Decoded exactly as a column of this kind (the same checks, the same
            // errors); an element is rare enough that going through text is fine.
            let raw = scalar.to_string();
            let scalar: Scalar<'_> = serde_json::from_str(&raw).map_err(|e| e.to_string())?;
            let value = decode(kind, &scalar).map_err(|e| format!("element {raw}: {e}"))?;
            write_value(kind, &value, out)?;
        }
    }
    Ok(())
}

/// `value` as PostgreSQL's `to_json` writes a value of its type.
fn write_value(kind: &DebeziumType, value: &Value, out: &mut String) -> Result<(), String> {
    let quoted = |out: &mut String, text: &str| out.push_str(&Json::String(text.to_string()).to_string());
    match value {
        Value::Null => out.push_str("null"),
        Value::Boolean(v) => out.push_str(if *v { "true" } else { "false" }),
        Value::Int16(v) => out.push_str(&v.to_string()),
        Value::Int32(v) => out.push_str(&v.to_string()),
        Value::Int64(v) => out.push_str(&v.to_string()),
        Value::Float32(v) => out.push_str(&Json::from(f64::from(*v)).to_string()),
        Value::Float64(v) => out.push_str(&Json::from(*v).to_string()),
        // A variable-scale decimal's exact text is a JSON number.
        Value::Utf8(text) if *kind == DebeziumType::VariableScaleDecimal => out.push_str(text),
        Value::Utf8(text) => quoted(out, text),
        Value::Decimal128(unscaled) => match kind {
            DebeziumType::Decimal { .. } => out.push_str(&value.text(Some(&kind.arrow_type())).to_string()),
            _ => return Err(format!("decimal {unscaled} without a scale")),
        },
        Value::Binary(bytes) => {
            let mut hex = String::with_capacity(2 + bytes.len() * 2);
            hex.push_str("\\x");
            bytes.iter().for_each(|b| {
                let _ = write!(hex, "{b:02x}");
            });
            quoted(out, &hex);
        }
        Value::Date32(days) => quoted(out, &time::iso_date(i64::from(*days))),
        Value::Time64Micros(micros) => quoted(out, &time::iso_time_of_day(micros.saturating_mul(1000))),
        Value::Time64Nanos(nanos) => quoted(out, &time::iso_time_of_day(*nanos)),
        Value::TimestampMicros(micros) => {
            let nanos = micros.checked_mul(1000).ok_or_else(|| format!("timestamp {micros} µs is out of range"))?;
            quoted(out, &time::iso_timestamp(nanos));
        }
        Value::TimestampNanos(nanos) => quoted(out, &time::iso_timestamp(*nanos)),
    }
    Ok(())
}

/// pgvector's text of a sparse vector, `{1:10,5:20}/25` (indices ascending, as
/// pgvector writes them), from Debezium's `{"dimensions": n, "vector": …}`: its map
/// of int16 keys arrives as `[[index, value], …]` (Connect's JSON for maps whose keys
/// are not strings) or as an object.
pub fn sparse_vector_text(text: &str) -> Result<Value, String> {
    let bad = |why: &str| format!("a sparse vector {why}: {text}");
    let Ok(Json::Object(fields)) = serde_json::from_str::<Json>(text) else { return Err(bad("that is not an object")) };
    let dimensions = fields.get("dimensions").and_then(Json::as_u64).ok_or_else(|| bad("without dimensions"))?;
    let index = |key: &Json| match key {
        Json::String(text) => text.parse::<u64>().ok(),
        key => key.as_u64(),
    };
    let mut entries: Vec<(u64, f64)> = match fields.get("vector") {
        Some(Json::Array(pairs)) => pairs
            .iter()
            .map(|pair| match pair.as_array().map(Vec::as_slice) {
                Some([key, value]) => index(key).zip(value.as_f64()),
                _ => None,
            })
            .collect::<Option<_>>(),
        Some(Json::Object(map)) => map.iter().map(|(key, value)| key.parse().ok().zip(value.as_f64())).collect(),
        _ => None,
    }
    .ok_or_else(|| bad("whose vector is not a map of indices to numbers"))?;
    entries.sort_by_key(|(index, _)| *index);
    let mut out = String::from("{");
    for (i, (index, value)) in entries.iter().enumerate() {
        let separator = if i > 0 { "," } else { "" };
        let _ = write!(out, "{separator}{index}:{value}");
    }
    let _ = write!(out, "}}/{dimensions}");
    Ok(Value::Utf8(out.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(element: DebeziumType, json: &str) -> Result<String, String> {
        array_text(&element, json, crate::debezium::value::value_of).map(|value| match value {
            Value::Utf8(text) => text.to_string(),
            other => panic!("{other:?}"),
        })
    }

    /// transferia's captured PostgreSQL 1.8 arrays (`numeric(5,2)[]`, `date[]`,
    /// `timestamp(6)[]`, `numeric[]`).
    #[test]
    fn elements_read_as_postgresql_writes_them() {
        let decimal = DebeziumType::Decimal { precision: 5, scale: 2 };
        assert_eq!(text(decimal, r#"["ME8=",null,"ME8="]"#), Ok("[123.67,null,123.67]".into()));
        assert_eq!(text(DebeziumType::Date, "[10599,10599]"), Ok(r#"["1999-01-08","1999-01-08"]"#.into()));
        let micros = DebeziumType::TimestampMicros { timezone: None };
        assert_eq!(text(micros, "[1098181434987654]"), Ok(r#"["2004-10-19T10:23:54.987654"]"#.into()));
        let variable = r#"[{"scale":0,"value":"EAAAAAAAAAAAAAAAAA=="},{"scale":2,"value":"MDk="}]"#;
        assert_eq!(text(DebeziumType::VariableScaleDecimal, variable), Ok("[1267650600228229401496703205376,123.45]".into()));
        assert_eq!(text(DebeziumType::Binary, r#"["AQI="]"#), Ok(r#"["\\x0102"]"#.into()));
        assert_eq!(text(DebeziumType::TimeMicros, "[[3600000000],[0]]"), Ok(r#"[["01:00:00"],["00:00:00"]]"#.into()), "two dimensions");
        let error = text(DebeziumType::Decimal { precision: 5, scale: 2 }, r#"["not base64!"]"#).expect_err("bad element");
        assert!(error.contains("\"not base64!\""), "{error}");
    }

    #[test]
    fn sparse_vectors_read_as_pgvector_writes_them() {
        let shown = |json: &str| sparse_vector_text(json).map(|value| format!("{value:?}"));
        let pairs = r#"{"dimensions":25,"vector":[[5,20.0],[1,10.0],[3,0.5]]}"#;
        assert_eq!(shown(pairs), Ok(format!("{:?}", Value::Utf8("{1:10,3:0.5,5:20}/25".into()))));
        let object = r#"{"dimensions":3,"vector":{"2":1.5}}"#;
        assert_eq!(shown(object), Ok(format!("{:?}", Value::Utf8("{2:1.5}/3".into()))));
        assert!(sparse_vector_text(r#"{"vector":[]}"#).expect_err("no dimensions").contains("without dimensions"));
        assert!(sparse_vector_text(r#"{"dimensions":2,"vector":[[1]]}"#).is_err());
    }
}
