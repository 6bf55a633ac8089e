//! The two things reassembly must know of a record before the decode stage parses
//! it: which transaction a change event belongs to, and what a transaction-topic
//! record says (BEGIN or END, id, event count).
//!
//! Change events are found by their `"transaction":` key, searched from the end:
//! Debezium writes the envelope's `transaction` after `before`, `after` and `source`
//! (whatever the version), the value schema has no such key (it says
//! `"field":"transaction"`), and the text cannot occur inside a JSON string (its
//! quotes would be escaped). A column named `transaction` comes earlier in the
//! payload, so the last match is the envelope's. Anything unexpected there falls back
//! to a full parse, so this is a shortcut, never a different answer.

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::debezium::message::transaction_key;

#[derive(Deserialize)]
struct Block<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
}

/// A change event's place in its transaction: the id (as [`transaction_key`] reads
/// it) and `total_order`, the event's number in the transaction, when written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTransaction {
    pub id: String,
    pub total_order: Option<u64>,
}

/// [`transaction_id`] with the event's `total_order`: after a Kafka Connect restart
/// Debezium sends events again, and their numbers tell a second copy from a new event.
pub fn transaction(value: &[u8]) -> Result<Option<EventTransaction>, String> {
    Ok(transaction_id(value)?.map(|id| EventTransaction { id, total_order: total_order(value) }))
}

/// `total_order` of the envelope's transaction block, found after its last
/// `"transaction":` key as [`transaction_id`] finds the block; `None` when it is not
/// written plainly (the events are then counted, not told apart).
fn total_order(value: &[u8]) -> Option<u64> {
    const KEY: &[u8] = b"\"total_order\":";
    let block = memchr::memmem::rfind(value, b"\"transaction\":")?;
    let rest = &value[block..];
    let at = memchr::memmem::find(rest, KEY)? + KEY.len();
    let digits: Vec<u8> = rest[at..].iter().copied().skip_while(u8::is_ascii_whitespace).take_while(u8::is_ascii_digit).collect();
    std::str::from_utf8(&digits).ok()?.parse().ok()
}

/// The transaction of a change event value (its id as [`transaction_key`] reads
/// it), `None` without transaction metadata.
pub fn transaction_id(value: &[u8]) -> Result<Option<String>, String> {
    // The key is always a prefix of the id.
    full_id(value).map(|id| {
        id.map(|mut id| {
            id.truncate(transaction_key(&id).len());
            id
        })
    })
}

fn full_id(value: &[u8]) -> Result<Option<String>, String> {
    if let Some(found) = memchr::memmem::rfind(value, b"\"transaction\":") {
        let rest = &value[found + b"\"transaction\":".len()..];
        let start = rest.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(rest.len());
        let rest = &rest[start..];
        if rest.starts_with(b"null") {
            return Ok(None);
        }
        if let Some(id) = plain_leading_id(rest) {
            return Ok(Some(id.to_owned()));
        }
        if rest.first() == Some(&b'{') {
            let mut values = serde_json::Deserializer::from_slice(rest).into_iter::<Block<'_>>();
            if let Some(Ok(block)) = values.next() {
                return id_text(block.id).map(Some);
            }
        }
    }
    full_parse(value)
}

/// The id of a block that starts `{"id":"…"` with no escape in the id: how Debezium
/// writes it (the id first, compact). Anything else is left to the parser.
fn plain_leading_id(block: &[u8]) -> Option<&str> {
    let text = block.strip_prefix(b"{\"id\":\"")?;
    let end = memchr::memchr(b'"', text)?;
    let id = &text[..end];
    if id.contains(&b'\\') {
        return None;
    }
    std::str::from_utf8(id).ok()
}

/// The slow path: parse the whole value, bare or inside `{"schema":…,"payload":…}`.
fn full_parse(value: &[u8]) -> Result<Option<String>, String> {
    #[derive(Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow, default)]
        payload: Option<&'a RawValue>,
        #[serde(borrow, default)]
        transaction: Option<Block<'a>>,
    }
    let envelope: Envelope<'_> = serde_json::from_slice(value).map_err(|e| format!("malformed JSON: {e}"))?;
    if let Some(block) = envelope.transaction {
        return id_text(block.id).map(Some);
    }
    match envelope.payload.filter(|p| p.get() != "null") {
        Some(payload) => {
            let inner: Envelope<'_> = serde_json::from_str(payload.get()).map_err(|e| format!("malformed JSON: {e}"))?;
            inner.transaction.map(|block| id_text(block.id)).transpose()
        }
        None => Ok(None),
    }
}

/// Debezium's ids are strings (`"571:33461528"`); a number is taken as its text.
fn id_text(id: &RawValue) -> Result<String, String> {
    match serde_json::from_str::<serde_json::Value>(id.get()) {
        Ok(serde_json::Value::String(text)) => Ok(text),
        Ok(serde_json::Value::Number(number)) => Ok(number.to_string()),
        _ => Err(format!("transaction.id must be a string, got {}", id.get())),
    }
}

/// A record of the transaction topic, as far as reassembly needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Marker {
    Begin { id: String },
    End { id: String, event_count: u64 },
}

/// What a transaction-topic record says, through the decoder every source uses.
pub fn marker(value: &str) -> Result<Marker, String> {
    match crate::debezium::decode_line_with(value, None) {
        Ok(crate::debezium::Message::Begin { id }) => Ok(Marker::Begin { id }),
        Ok(crate::debezium::Message::End { id, event_count, .. }) => Ok(Marker::End { id, event_count }),
        Ok(_) => Err("not a transaction BEGIN or END record".into()),
        Err(error) => Err(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WITH_SCHEMA: &str = r#"{"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"string","field":"id"}],"field":"transaction"}]},"payload":{"before":null,"after":{"id":1,"transaction":"x"},"source":{"txId":5},"op":"c","transaction":{"id":"571:33461528","total_order":1,"data_collection_order":1}}}"#;

    #[test]
    fn finds_the_envelopes_transaction_not_a_columns() {
        assert_eq!(transaction_id(WITH_SCHEMA.as_bytes()), Ok(Some("571".into())), "PostgreSQL's xid, without the LSN");
        let bare = r#"{"before":null,"after":{"transaction":{"id":"column"}},"op":"c","transaction":{"id":7,"total_order":1}}"#;
        assert_eq!(transaction_id(bare.as_bytes()), Ok(Some("7".into())));
        assert_eq!(transaction_id(br#"{"after":{"id":1},"op":"c","transaction":null}"#), Ok(None));
        assert_eq!(transaction_id(br#"{"after":{"id":1},"op":"c"}"#), Ok(None));
        // An id with an escape, or a number, goes through the parser.
        assert_eq!(transaction_id(br#"{"op":"c","transaction":{"id":"a\"b","total_order":1}}"#), Ok(Some("a\"b".into())));
        assert_eq!(transaction_id(br#"{"op":"c","transaction":{"id":12,"total_order":1}}"#), Ok(Some("12".into())));
    }

    #[test]
    fn an_events_total_order_is_read_beside_its_id() {
        let event = transaction(WITH_SCHEMA.as_bytes()).expect("read").expect("a transaction");
        assert_eq!(event, EventTransaction { id: "571".into(), total_order: Some(1) });
        let spaced = br#"{"op":"c","transaction":{"id":"9:1","total_order": 42,"data_collection_order":3}}"#;
        assert_eq!(transaction(spaced).expect("read").and_then(|t| t.total_order), Some(42));
        let without = br#"{"op":"c","transaction":{"id":"9:1"}}"#;
        assert_eq!(transaction(without).expect("read").and_then(|t| t.total_order), None);
        assert_eq!(transaction(br#"{"op":"c","transaction":null}"#), Ok(None));
    }

    #[test]
    fn unusual_spacing_takes_the_full_parse_with_the_same_answer() {
        let spaced = r#"{ "payload" : { "op" : "c", "transaction" : { "id" : "9:1", "total_order" : 1 } } }"#;
        assert_eq!(transaction_id(spaced.as_bytes()), Ok(Some("9".into())));
        assert!(transaction_id(b"{not json").unwrap_err().contains("malformed JSON"));
        assert!(transaction_id(br#"{"transaction":{"id":[1]}}"#).unwrap_err().contains("must be a string"));
    }

    #[test]
    fn transaction_records_are_read_by_the_decoder() {
        let begin = r#"{"status":"BEGIN","id":"571","event_count":null,"data_collections":null}"#;
        assert_eq!(marker(begin), Ok(Marker::Begin { id: "571".into() }));
        let end = r#"{"schema":{"type":"struct"},"payload":{"status":"END","id":"571","event_count":2,"data_collections":[{"data_collection":"public.a","event_count":2}]}}"#;
        assert_eq!(marker(end), Ok(Marker::End { id: "571".into(), event_count: 2 }));
        assert!(marker(r#"{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t"}}"#).is_err());
    }
}
