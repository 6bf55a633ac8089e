//! Records made ready by their fetcher, off the source thread: a data record's value
//! checked as UTF-8 and wrapped with its topic's table and key (known schemas left
//! out), its transaction id peeked; a transaction-topic record's marker read.
//!
//! The source thread is the replay's serial stage: it files every record in the
//! reassembly, hands lines to the decode workers and applies their results. Doing
//! this per-record work there kept it runnable but waiting for a core about 40% of
//! a Kafka replay while the fetcher's thread slept most of the time (sampled from
//! the scheduler's switches), so each fetcher does it for its own records before
//! handing them over. A record that cannot be made ready carries its reason, and the
//! source thread reports it when it reaches that record, in order, as before.

use std::sync::{Arc, OnceLock};

use rskafka::record::RecordAndOffset;

use super::peek::{self, EventTransaction, Marker};
use crate::debezium::elision::NotUtf8;
use crate::debezium::{KnownSchemas, Line, SchemaElider};

/// One record as the source thread takes it in.
pub(super) struct ReadyRecord {
    pub offset: i64,
    /// What it holds, or why it cannot be read (the source thread adds where).
    pub content: Result<Content, String>,
}

pub(super) enum Content {
    /// A transaction-topic record (without a value: nothing to take in).
    Marker(Option<(Marker, Line)>),
    /// A change event's transaction and line (no line: a tombstone).
    Event(Option<EventTransaction>, Option<Line>),
}

/// What a partition's records are.
pub(super) enum RecordKind {
    Transactions,
    /// A table's topic: the JSON string of the table it names.
    Changes { table: String },
}

/// Makes one partition's records ready. Its elider leaves out the schemas the sink
/// knows once the source thread has shared them (`known`); until then it leaves
/// nothing out, which decodes the same.
pub(super) struct Preparer {
    kind: RecordKind,
    known: Arc<OnceLock<KnownSchemas>>,
    elider: SchemaElider,
    scratch: Line,
}

impl Preparer {
    pub fn new(kind: RecordKind, known: Arc<OnceLock<KnownSchemas>>) -> Self {
        Self { kind, known, elider: SchemaElider::none(), scratch: Line::default() }
    }

    pub fn prepare(&mut self, records: Vec<RecordAndOffset>) -> Vec<ReadyRecord> {
        if self.elider.known().is_none() {
            if let Some(known) = self.known.get() {
                self.elider = SchemaElider::new(known.clone());
            }
        }
        records
            .into_iter()
            .map(|RecordAndOffset { record, offset }| {
                let content = match &self.kind {
                    RecordKind::Transactions => marker(record.value).map(Content::Marker),
                    RecordKind::Changes { table } => match record.value {
                        None => Ok(Content::Event(None, None)),
                        Some(value) => event(&mut self.elider, &mut self.scratch, table, record.key.as_deref(), &value),
                    },
                };
                ReadyRecord { offset, content }
            })
            .collect()
    }
}

fn not_utf8(valid_up_to: usize) -> String {
    format!("the value is not UTF-8 text: invalid byte at index {valid_up_to}")
}

fn marker(value: Option<Vec<u8>>) -> Result<Option<(Marker, Line)>, String> {
    let Some(value) = value else { return Ok(None) };
    let value = String::from_utf8(value).map_err(|e| not_utf8(e.utf8_error().valid_up_to()))?;
    let marker = peek::marker(&value).map_err(|reason| format!("transaction topic record: {reason}"))?;
    Ok(Some((marker, Line::plain(value))))
}

fn event(elider: &mut SchemaElider, scratch: &mut Line, table: &str, key: Option<&[u8]>, value: &[u8]) -> Result<Content, String> {
    wrap(elider, scratch, table, key, value).map_err(|NotUtf8 { valid_up_to }| not_utf8(valid_up_to))?;
    let transaction = peek::transaction(value)?;
    // Held until its transaction completes: a copy of exactly its size.
    Ok(Content::Event(transaction, Some(scratch.clone())))
}

/// Fills `line` with what the sink decodes: `{"table":T,"key":K,"value":V}`, with
/// `table` (the JSON string of the table the topic names, for events without a
/// `source` block) and the key when it is a JSON object (with or without schema) in
/// UTF-8; the known schemas of key and value are left out (see
/// [`crate::debezium::elision`]). The error is the value's first byte that is not
/// UTF-8.
fn wrap(elider: &mut SchemaElider, line: &mut Line, table: &str, key: Option<&[u8]>, value: &[u8]) -> Result<(), NotUtf8> {
    let key = key.filter(|k| k.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') && std::str::from_utf8(k).is_ok());
    line.clear();
    line.push_str("{\"table\":");
    line.push_str(table);
    if let Some(key) = key {
        line.push_str(",\"key\":");
        elider.append_envelope(line, key)?;
    }
    line.push_str(",\"value\":");
    elider.append_envelope(line, value)?;
    line.push_str("}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topic_s_table_and_json_keys_wrap_the_value_and_other_keys_are_left_out() {
        let wrapped = |key: Option<&[u8]>, value: &str| {
            let mut line = Line::default();
            wrap(&mut SchemaElider::none(), &mut line, "\"s.t\"", key, value.as_bytes()).map(|()| line.text().to_string())
        };
        assert_eq!(wrapped(Some(br#"{"id":1}"#), "{\"op\":\"c\"}").as_deref(), Ok(r#"{"table":"s.t","key":{"id":1},"value":{"op":"c"}}"#));
        assert_eq!(wrapped(Some(b"plain-text-key"), "{}").as_deref(), Ok(r#"{"table":"s.t","value":{}}"#));
        assert_eq!(wrapped(Some(b"{\"id\":\"\xff\"}"), "{}").as_deref(), Ok(r#"{"table":"s.t","value":{}}"#));
        assert_eq!(wrapped(None, "{}").as_deref(), Ok(r#"{"table":"s.t","value":{}}"#));
    }

    /// Known schemas of key and value are left out, and a value that is not UTF-8
    /// is found at its byte.
    #[test]
    fn known_schemas_are_left_out_of_the_wrapped_line() {
        let schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"t.Envelope"}"#;
        let known = crate::debezium::KnownSchemas::default();
        known.intern(schema);
        let mut elider = SchemaElider::new(known);
        let mut line = Line::default();
        let value = format!(r#"{{"schema":{schema},"payload":{{"op":"c"}}}}"#);
        let key = format!(r#"{{"schema":{schema},"payload":{{"id":1}}}}"#);
        wrap(&mut elider, &mut line, "\"s.t\"", Some(key.as_bytes()), value.as_bytes()).expect("utf-8");
        assert_eq!(line.text(), r#"{"table":"s.t","key":{"schema":,"payload":{"id":1}},"value":{"schema":,"payload":{"op":"c"}}}"#);
        assert_eq!(line.full(), format!(r#"{{"table":"s.t","key":{key},"value":{value}}}"#));
        let mut bad = value.into_bytes();
        let at = bad.len() - 4;
        bad[at] = 0xff;
        assert_eq!(wrap(&mut elider, &mut line, "\"s.t\"", None, &bad), Err(NotUtf8 { valid_up_to: at }));
    }

    fn record(offset: i64, value: Option<&[u8]>) -> RecordAndOffset {
        let record = rskafka::record::Record {
            key: None,
            value: value.map(<[u8]>::to_vec),
            headers: Default::default(),
            timestamp: rskafka::chrono::DateTime::from_timestamp_millis(0).expect("epoch"),
        };
        RecordAndOffset { record, offset }
    }

    /// A fetcher's records come out one for one and in order: lines wrapped with the
    /// topic's table, transaction ids peeked, tombstones kept, and a value that is
    /// not UTF-8 carried as its reason, for the source thread to report in its place.
    #[test]
    fn records_are_made_ready_in_order_with_their_reasons() {
        let mut preparer = Preparer::new(RecordKind::Changes { table: "\"s.t\"".into() }, Arc::new(OnceLock::new()));
        let value = br#"{"payload":{"op":"c","transaction":{"id":"7","total_order":1,"data_collection_order":1}}}"#;
        let ready = preparer.prepare(vec![record(3, Some(value)), record(4, None), record(5, Some(b"{\"a\":\"\xff\"}"))]);
        assert_eq!(ready.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![3, 4, 5]);
        match &ready[0].content {
            Ok(Content::Event(Some(transaction), Some(line))) => {
                assert_eq!(transaction, &EventTransaction { id: "7".into(), total_order: Some(1) });
                assert!(line.text().starts_with(r#"{"table":"s.t","value":{"payload""#), "{}", line.text());
            }
            _ => panic!("a change event with its transaction"),
        }
        assert!(matches!(ready[1].content, Ok(Content::Event(None, None))), "a tombstone");
        assert!(matches!(&ready[2].content, Err(reason) if reason.contains("not UTF-8") && reason.contains("index 6")));

        let mut markers = Preparer::new(RecordKind::Transactions, Arc::new(OnceLock::new()));
        let begin = br#"{"status":"BEGIN","id":"7","event_count":null,"data_collections":null}"#;
        let ready = markers.prepare(vec![record(0, Some(begin)), record(1, None), record(2, Some(b"{}"))]);
        assert!(matches!(&ready[0].content, Ok(Content::Marker(Some((Marker::Begin { id }, _)))) if id == "7"));
        assert!(matches!(ready[1].content, Ok(Content::Marker(None))));
        assert!(matches!(&ready[2].content, Err(reason) if reason.starts_with("transaction topic record: ")));
    }
}
