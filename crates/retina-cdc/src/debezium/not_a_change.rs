//! Lines that are Debezium (or Kafka Connect) output but not row change events:
//! schema change events, heartbeats, rows flattened by `ExtractNewRecordState`,
//! CloudEvents and PostgreSQL logical decoding messages. They reach a mirror when a
//! source reads one topic too many or a connector runs a transform; "field op:
//! missing" would not tell the operator which, so the error names the kind and what
//! to change. Only the error path reads a line this way (a second parse of a line
//! already refused), so the decoder's speed is untouched.

use serde_json::{Map, Value};

use crate::error::DecodeError;

/// Fields `ExtractNewRecordState` adds to a flattened row (`__deleted` with
/// `delete.handling.mode=rewrite`, the others with `add.fields`).
const FLATTENED_FIELDS: [&str; 7] = ["__deleted", "__op", "__table", "__db", "__schema", "__source_ts_ms", "__lsn"];

/// `error` explained when `line` is one of the known kinds of messages that are not
/// row changes; `error` itself otherwise.
pub(super) fn explain(line: &str, error: DecodeError) -> DecodeError {
    let missing_op = matches!(&error, DecodeError::MissingField { field } if field == "op");
    let logical_message = matches!(&error, DecodeError::UnknownOp { op, .. } if op == "m");
    if !missing_op && !logical_message {
        return error;
    }
    let Ok(Value::Object(top)) = serde_json::from_str::<Value>(line) else { return error };
    match kind(&top) {
        Some(kind) => DecodeError::NotAChangeEvent(kind.to_string()),
        None => error,
    }
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
    let value = match top.get("value") {
        Some(Value::Object(value)) if !top.contains_key("op") => value,
        _ => top,
    };
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
            (r#"{"specversion":"1.0","type":"io.debezium.postgresql.datachangeevent","data":{}}"#, "CloudEvents"),
            (
                r#"{"op":"m","ts_ms":1,"source":{"connector":"postgresql","schema":"","table":""},"message":{"prefix":"p","content":"aGk="}}"#,
                "logical decoding message",
            ),
        ];
        for (line, expected) in cases {
            let text = error(line);
            assert!(text.contains(expected), "{line}: {text}");
            assert!(text.starts_with("not a row change event: "), "{text}");
        }
    }

    #[test]
    fn a_change_event_missing_its_op_keeps_that_error() {
        assert_eq!(error(r#"{"after":{"id":1},"source":{"schema":"s","table":"t"}}"#), "field op: missing");
        assert_eq!(error(r#"{"op":"x","after":{},"source":{"schema":"s","table":"t"}}"#), "field op: unknown op \"x\"");
    }
}
