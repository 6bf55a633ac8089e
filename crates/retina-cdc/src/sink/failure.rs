//! Turning an engine failure back into the source's terms. The engine reports a failed
//! mirror transaction by its ts and an encoded key; the sink knows which source
//! transaction (positions, id) got that ts and which columns form the key.

use retina_core::{Engine, Value};

use crate::error::CdcError;
use crate::position::Position;
use retina_core::Ts;

/// What the sink remembers of a submitted, not yet visible transaction.
#[derive(Debug, Clone)]
pub struct InFlight {
    pub ts: Ts,
    pub id: String,
    pub first: Position,
    pub last: Position,
}

/// Maps an engine error to the source transaction it happened in, naming the table and
/// the key columns with their values when the message has them.
pub fn explain(engine: &Engine, error: retina_core::CoreError, in_flight: &[InFlight]) -> CdcError {
    let message = error.to_string();
    let Some(ts) = number_after(&message, "at ts ") else {
        return CdcError::Engine(error);
    };
    let Some(transaction) = in_flight.iter().find(|t| t.ts.0 == ts) else {
        return CdcError::Engine(error);
    };
    let table = text_between(&message, "table ", ":");
    let key = text_between(&message, "of key ", " ").and_then(|hex| describe_key(engine, table.as_deref(), &hex));
    let mut detail = key.map(|key| format!(" (key {key})")).unwrap_or_default();
    if message.contains("that has no live row") {
        detail.push_str(ABSENT_ROW_HINT);
    }
    if transaction.first != transaction.last {
        // The transaction spans several messages: name where it starts and ends.
        detail.push_str(&format!("; the transaction ends at {}", transaction.last));
    }
    CdcError::Apply { position: transaction.first, transaction: transaction.id.clone(), table, source: Box::new(error), detail }
}

/// What to do about an update or delete of a row the mirror does not have.
const ABSENT_ROW_HINT: &str = "; if the stream did not start with a snapshot of the table (or is an excerpt), \
    pass --on-absent-row upsert (source URI option on_absent_row=upsert) to apply such updates as inserts and ignore such deletes";

fn number_after(text: &str, marker: &str) -> Option<u64> {
    let start = text.find(marker)? + marker.len();
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn text_between(text: &str, start: &str, end: &str) -> Option<String> {
    let from = text.find(start)? + start.len();
    let rest = &text[from..];
    Some(rest[..rest.find(end).unwrap_or(rest.len())].to_string())
}

/// `col=value, ...` from the engine's hex key encoding (see `Value::encode_key_part`).
fn describe_key(engine: &Engine, table: Option<&str>, hex: &str) -> Option<String> {
    let bytes: Vec<u8> = (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()).collect::<Option<_>>()?;
    let values = decode_key(&bytes)?;
    let names: Vec<String> = match table.and_then(|t| engine.table_id(t)).and_then(|id| engine.table(id).ok()) {
        Some(runtime) => {
            let schema = runtime.schema();
            schema.primary_key().iter().map(|&i| schema.columns().field(i).name().clone()).collect()
        }
        None => (0..values.len()).map(|i| format!("key{i}")).collect(),
    };
    Some(names.iter().zip(&values).map(|(n, v)| format!("{n}={}", show(v))).collect::<Vec<_>>().join(", "))
}

fn show(value: &Value) -> String {
    match value {
        Value::Utf8(s) => format!("{s:?}"),
        other => format!("{other:?}"),
    }
}

/// The inverse of the engine's key encoding, for the value types a key can have.
pub fn decode_key(mut bytes: &[u8]) -> Option<Vec<Value>> {
    let mut values = Vec::new();
    while let Some((&tag, rest)) = bytes.split_first() {
        let take = |n: usize, rest: &[u8]| -> Option<(Vec<u8>, usize)> { Some((rest.get(..n)?.to_vec(), n)) };
        let (value, used) = match tag {
            0 => (Value::Null, 0),
            1 => (Value::Boolean(*rest.first()? != 0), 1),
            2 => (Value::Int16(i16::from_be_bytes(take(2, rest)?.0.try_into().ok()?)), 2),
            3 => (Value::Int32(i32::from_be_bytes(take(4, rest)?.0.try_into().ok()?)), 4),
            4 => (Value::Int64(i64::from_be_bytes(take(8, rest)?.0.try_into().ok()?)), 8),
            7 | 8 => {
                let length = u32::from_be_bytes(take(4, rest)?.0.try_into().ok()?) as usize;
                let body = rest.get(4..4 + length)?.to_vec();
                let value = if tag == 7 { Value::Utf8(String::from_utf8(body).ok()?.into()) } else { Value::Binary(body) };
                (value, 4 + length)
            }
            9 => (Value::Date32(i32::from_be_bytes(take(4, rest)?.0.try_into().ok()?)), 4),
            10 => (Value::TimestampMicros(i64::from_be_bytes(take(8, rest)?.0.try_into().ok()?)), 8),
            11 => (Value::Decimal128(i128::from_be_bytes(take(16, rest)?.0.try_into().ok()?)), 16),
            _ => return None,
        };
        values.push(value);
        bytes = &rest[used..];
    }
    Some(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use retina_core::value::encode_key;

    #[test]
    fn key_encoding_decodes_back() {
        let key = vec![Value::Int32(-4), Value::Utf8("a b".into()), Value::Int64(9), Value::Decimal128(-12)];
        assert_eq!(decode_key(&encode_key(&key)), Some(key));
        assert_eq!(decode_key(&[3, 0]), None, "truncated");
    }

    #[test]
    fn finds_numbers_and_text_in_engine_messages() {
        let message = "replay engine stopped: table public.t: delete at ts 17 of key 0400000000000000 that has no live row";
        assert_eq!(number_after(message, "at ts "), Some(17));
        assert_eq!(text_between(message, "table ", ":").as_deref(), Some("public.t"));
        assert_eq!(text_between(message, "of key ", " ").as_deref(), Some("0400000000000000"));
    }
}
