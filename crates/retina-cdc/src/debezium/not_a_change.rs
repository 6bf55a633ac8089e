//! Lines that are Debezium (or Kafka Connect) output but not row change events:
//! schema change events, heartbeats, rows flattened by `ExtractNewRecordState`,
//! CloudEvents and PostgreSQL logical decoding messages; and change events printed in
//! Avro's JSON encoding. They reach a mirror when a source reads one topic too many,
//! a connector runs a transform or a file was dumped with an Avro console consumer;
//! "field op: missing" would not tell the operator which, so the error names the
//! kind and what to change. Only the error path reads a line this way (a second
//! parse of a line already refused), so the decoder's speed is untouched.

use serde_json::{Map, Value};

use crate::error::DecodeError;

/// Fields `ExtractNewRecordState` adds to a flattened row (`__deleted` with
/// `delete.handling.mode=rewrite`, the others with `add.fields`).
const FLATTENED_FIELDS: [&str; 7] = ["__deleted", "__op", "__table", "__db", "__schema", "__source_ts_ms", "__lsn"];

/// Avro's type names, which its JSON encoding wraps a union's value in
/// (`{"string":"true"}`).
const AVRO_UNION_BRANCHES: [&str; 7] = ["string", "int", "long", "boolean", "double", "float", "bytes"];

/// Why a MongoDB connector's event is refused.
pub(super) const MONGODB_UNSUPPORTED: &str = "MongoDB events are not supported: their documents come as JSON text and \
     their source block names a collection, not a table with columns";

/// `error` explained when `line` is one of the known kinds of messages that are not
/// row changes, or a change event in Avro's JSON encoding; `error` itself otherwise.
pub(super) fn explain(line: &str, error: DecodeError) -> DecodeError {
    let worth_a_look = match &error {
        DecodeError::MissingField { field } => field == "op",
        DecodeError::UnknownOp { op, .. } => op == "m",
        // The mistyped field is where decoding stopped; the line as a whole tells why.
        DecodeError::MistypedField { .. } => true,
        // A MongoDB document, JSON text where a row image object belongs, fails the
        // parse of the whole line; so does a line that is JSON but not an object.
        DecodeError::MalformedJson(_) => true,
        _ => false,
    };
    if !worth_a_look {
        return error;
    }
    let top = match serde_json::from_str::<Value>(line) {
        Ok(Value::Object(top)) => top,
        Ok(other) => return DecodeError::NotAChangeEvent(not_an_object(&other)),
        Err(_) => return error,
    };
    if connector(&top) == Some("mongodb") {
        return DecodeError::bad_value("source.connector", MONGODB_UNSUPPORTED);
    }
    if matches!(error, DecodeError::MalformedJson(_)) {
        return error;
    }
    if let DecodeError::MistypedField { field, .. } = &error {
        return match has_avro_union(&top) {
            true => DecodeError::AvroJson { field: field.clone() },
            false => error,
        };
    }
    match kind(&top) {
        Some(kind) => DecodeError::NotAChangeEvent(kind.to_string()),
        None => error,
    }
}

/// What a line that is JSON but not an object is, as the error's text.
fn not_an_object(value: &Value) -> String {
    let what = match value {
        Value::String(text) if text.is_empty() => "an empty JSON string",
        Value::String(_) => "a JSON string",
        Value::Array(_) => "a JSON array",
        Value::Number(_) => "a JSON number",
        Value::Bool(_) => "a JSON boolean",
        // A null line is a tombstone and never reaches here.
        Value::Null | Value::Object(_) => "JSON null",
    };
    format!("{what}, where a change event is a JSON object (with before, after, source and op)")
}

/// The message inside a `{"key":…,"value":…}` wrapper, or the line itself.
fn unwrapped(top: &Map<String, Value>) -> &Map<String, Value> {
    match top.get("value") {
        Some(Value::Object(value)) if !top.contains_key("op") => value,
        _ => top,
    }
}

/// The `source.connector` of the message in `top` (inside a Kafka wrapper or a
/// schema envelope).
fn connector(top: &Map<String, Value>) -> Option<&str> {
    let value = unwrapped(top);
    let payload = match value.get("payload") {
        Some(Value::Object(payload)) => payload,
        _ => value,
    };
    payload.get("source")?.get("connector")?.as_str()
}

/// Whether a field of the `source` block holds an Avro union's JSON encoding, as
/// `kafka-avro-console-consumer` prints Debezium's Avro records.
fn has_avro_union(top: &Map<String, Value>) -> bool {
    let Some(Value::Object(source)) = unwrapped(top).get("source") else { return false };
    source.values().any(|field| {
        matches!(field, Value::Object(wrapped) if wrapped.len() == 1 && wrapped.keys().all(|k| AVRO_UNION_BRANCHES.contains(&k.as_str())))
    })
}

/// What the message is, as the error's text.
fn kind(top: &Map<String, Value>) -> Option<&'static str> {
    if top.contains_key("specversion") {
        return Some(
            "a CloudEvents message (Debezium's CloudEventsConverter); Retina reads what Kafka Connect's \
             JsonConverter writes: set value.converter=org.apache.kafka.connect.json.JsonConverter",
        );
    }
    // A Kafka wrapper's value, then a `{"schema":…,"payload":…}` envelope's payload.
    let value = unwrapped(top);
    let (payload, schema_name) = match (value.get("payload"), value.get("schema")) {
        (Some(Value::Object(payload)), schema) => {
            (payload, schema.and_then(|s| s.get("name")).and_then(Value::as_str))
        }
        _ => (value, None),
    };
    if payload.get("op").and_then(Value::as_str) == Some("m") {
        return Some(
            "a PostgreSQL logical decoding message (op \"m\", from pg_logical_emit_message): it holds no row \
             change; leave the connector's message topic out of the source",
        );
    }
    let ticdc = payload.get("source").and_then(|source| source.get("connector")).and_then(Value::as_str) == Some("TiCDC");
    if ticdc && (payload.contains_key("ddl") || payload.contains_key("tableChanges")) {
        return Some(
            "a TiCDC DDL event, which TiCDC writes into the data topics: it holds no row change (a table's new \
             columns come with its change events' schemas); set it aside with --dead-letter, or leave DDL out of \
             the changefeed (filter event-filters ignore-event = [\"all ddl\"])",
        );
    }
    if payload.contains_key("ddl") || payload.contains_key("tableChanges") {
        return Some(
            "a schema change event (the connector's schema change topic): it holds no row change, and a \
             table's new columns come with its own change events' schemas; leave that topic out of the source",
        );
    }
    let heartbeat_schema = schema_name.is_some_and(|name| name.ends_with(".Heartbeat"));
    if heartbeat_schema || (payload.len() == 1 && payload.contains_key("ts_ms")) {
        return Some(
            "a heartbeat (the __debezium-heartbeat topic): it holds no row change; leave that topic out of \
             the source",
        );
    }
    if FLATTENED_FIELDS.iter().any(|field| payload.contains_key(*field)) {
        return Some(
            "a row flattened by the ExtractNewRecordState transform (it has __deleted / __op fields): a mirror \
             needs Debezium's change event (before, after, source, op, transaction) to apply deletes and \
             transactions exactly; remove that transform from the connector",
        );
    }
    if payload.is_empty() {
        return Some("an empty JSON object: it has none of a change event's fields (before, after, source, op)");
    }
    let envelope_fields = ["before", "after", "source", "op", "status"];
    if !envelope_fields.iter().any(|field| payload.contains_key(*field)) {
        return Some(
            "a plain row without Debezium's change event fields (before, after, source, op): a row flattened \
             by a transform such as ExtractNewRecordState, or not Debezium output; Retina needs the connector's \
             change events as they are",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::debezium::decode_line;

    fn error(line: &str) -> String {
        decode_line(line).map(|_| ()).expect_err(line).to_string()
    }

    #[test]
    fn each_kind_is_named() {
        let cases = [
            // MySQL's schema change topic, with its schema envelope.
            (
                r#"{"schema":{"type":"struct","name":"io.debezium.connector.mysql.SchemaChangeValue"},"payload":{"source":{"connector":"mysql","db":"inventory","table":"customers"},"ts_ms":1,"databaseName":"inventory","ddl":"ALTER TABLE customers ADD COLUMN c INT","tableChanges":[]}}"#,
                "a schema change event",
            ),
            (r#"{"schema":{"type":"struct","name":"io.debezium.connector.common.Heartbeat"},"payload":{"ts_ms":1}}"#, "a heartbeat"),
            (r#"{"ts_ms":1700000000000}"#, "a heartbeat"),
            (r#"{"id":1,"name":"a","__deleted":"true"}"#, "ExtractNewRecordState"),
            (r#"{"key":{"id":1},"value":{"schema":{"type":"struct"},"payload":{"id":1,"__op":"u"}}}"#, "ExtractNewRecordState"),
            (r#"{"id":1,"name":"a"}"#, "a plain row"),
            ("{}", "an empty JSON object"),
            (r#""""#, "an empty JSON string, where a change event is a JSON object"),
            (r#""text""#, "a JSON string, where"),
            ("[]", "a JSON array, where"),
            ("[1, 2]", "a JSON array, where"),
            ("42", "a JSON number, where"),
            ("true", "a JSON boolean, where"),
            (r#"{"specversion":"1.0","type":"io.debezium.postgresql.datachangeevent","data":{}}"#, "CloudEvents"),
            (
                r#"{"op":"m","ts_ms":1,"source":{"connector":"postgresql","schema":"","table":""},"message":{"prefix":"p","content":"aGk="}}"#,
                "logical decoding message",
            ),
            (
                r#"{"payload":{"source":{"connector":"TiCDC","db":"test","table":"t"},"ts_ms":1,"databaseName":"test","ddl":"RENAME TABLE test.t TO test.u","tableChanges":[]}}"#,
                "a TiCDC DDL event",
            ),
        ];
        // RisingWave's captured MongoDB snapshot row: the document is JSON text.
        let mongo = r#"{"schema":null,"payload":{"before":null,"after":"{\"_id\": {\"$numberLong\": \"1004\"}}","source":{"connector":"mongodb","db":"d","collection":"c"},"op":"r","ts_ms":1}}"#;
        let text = error(mongo);
        assert!(text.starts_with("field source.connector: MongoDB events are not supported"), "{text}");
        for (line, expected) in cases {
            let text = error(line);
            assert!(text.contains(expected), "{line}: {text}");
            assert!(text.starts_with("not a row change event: "), "{text}");
        }
    }

    #[test]
    fn avro_json_is_named() {
        // kafka-avro-console-consumer's output of a SQL Server snapshot row.
        let line = r#"{"before":null,"after":{"server1.dbo.customers.Value":{"id":1001}},"source":{"version":"1.7.1.Final","connector":"sqlserver","name":"server1","ts_ms":1,"snapshot":{"string":"true"},"db":"testDB","schema":"dbo","table":"customers","commit_lsn":{"string":"00000025:00000410:0001"}},"op":"r","ts_ms":{"long":1},"transaction":null}"#;
        let text = error(line);
        assert!(text.starts_with("field source.snapshot: {\"string\": …}"), "{text}");
        assert!(text.contains("Avro's JSON encoding"), "{text}");
        // A mistyped field without that shape keeps its own error.
        let plain = r#"{"before":null,"after":{"id":1},"source":{"schema":"s","table":5},"op":"c"}"#;
        assert_eq!(error(plain), "field source.table: expected a string, got 5");
    }

    #[test]
    fn a_change_event_missing_its_op_keeps_that_error() {
        assert_eq!(error(r#"{"after":{"id":1},"source":{"schema":"s","table":"t"}}"#), "field op: missing");
        assert_eq!(error(r#"{"op":"x","after":{},"source":{"schema":"s","table":"t"}}"#), "field op: unknown op \"x\"");
    }
}
