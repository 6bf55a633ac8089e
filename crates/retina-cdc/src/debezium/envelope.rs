//! Kafka Connect's schema envelope read without re-reading its schemas.
//!
//! With `schemas.enable=true` (JsonConverter's default) every message repeats its
//! table's schema, typically two to five times the size of the payload, and every
//! key repeats the key schema. Tokenizing that text was most of the decode cost
//! (measured: serde_json's `ignore_value` and string skipping took ~37% of the CPU of
//! an envelope replay). This module recognizes a schema it has already seen by
//! comparing bytes, and hands back only the payload to parse.
//!
//! The fast path accepts exactly the canonical layouts JsonConverter writes,
//! `{"schema":S,"payload":P}` and, keyed, `{"key":{"schema":KS,"payload":KP},
//! "value":{"schema":S,"payload":P}}` (whitespace allowed between tokens), where `S`
//! and `KS` are byte-identical to schemas this thread validated before. Anything else
//! (a new schema, another field order, escapes in field names, a null value) returns
//! `None` and the caller's full parse decides, so the result is the same either way:
//! the structural tokens are checked literally, each schema is a complete JSON value
//! identical to one that parsed, and the payloads are parsed by the caller.

use std::cell::RefCell;

use serde_json::value::RawValue;

use super::elision::Elision;

/// How many distinct schemas a thread remembers; a stream of more tables than this,
/// interleaved, falls back to the full parse for some lines (correct, just slower).
const REMEMBERED_SCHEMAS: usize = 64;

/// Schemas shorter than this cost less to tokenize than to look up.
const MIN_REMEMBERED_LEN: usize = 32;

thread_local! {
    /// Per thread, so decode workers share nothing and take no lock; each learns the
    /// stream's few schemas from its first lines. Most recently matched first.
    static SEEN: RefCell<Vec<Box<str>>> = const { RefCell::new(Vec::new()) };
}

/// The pieces of an envelope line whose schemas were recognized.
#[derive(Debug)]
pub(super) struct Parts<'a> {
    /// The key's schema text and payload, for a keyed line.
    pub key: Option<(&'a str, &'a RawValue)>,
    /// The value schema text (valid JSON: identical to one that parsed).
    pub schema: &'a str,
    /// The value payload text, not yet parsed (never `null`).
    pub payload: &'a str,
    /// The table the line's wrapper names, for events without a `source` block.
    pub table: Option<&'a str>,
}

/// Remembers `schema`, a value or key schema that parsed as part of a message.
pub(super) fn remember(schema: &str) {
    if schema.len() < MIN_REMEMBERED_LEN || !schema.starts_with('{') {
        return;
    }
    SEEN.with_borrow_mut(|seen| {
        if seen.iter().any(|known| &**known == schema) {
            return;
        }
        if seen.len() == REMEMBERED_SCHEMAS {
            seen.pop();
        }
        seen.insert(0, schema.into());
    });
}

/// The parts of `line` when it has a canonical layout and known schemas.
#[cfg(test)]
pub(super) fn split(line: &str) -> Option<Parts<'_>> {
    split_line(line, &[])
}

/// The parts of `text`, a line with the schemas `elided` left out (see
/// [`super::elision`]), when it has a canonical layout and its schemas are known: each
/// left out where a schema belongs, or remembered by this thread. A schema left out
/// anywhere else makes the line go to the full parse (of the full line).
pub(super) fn split_line<'a>(text: &'a str, elided: &'a [Elision]) -> Option<Parts<'a>> {
    let mut cursor = Cursor { text, at: 0, elided, consumed: 0 };
    cursor.token("{")?;
    // The table a Kafka source read it under (see `source::kafka`), ahead of the rest.
    let table = if cursor.peek_literal("\"table\"") {
        cursor.token("\"table\"")?;
        cursor.token(":")?;
        let name = cursor.plain_string()?;
        cursor.token(",")?;
        Some(name)
    } else {
        None
    };
    // How many braces close the line after the payload: the value envelope's, and the
    // wrapper's when there is one.
    let mut closing = 1;
    let mut key = None;
    if cursor.peek_literal("\"key\"") {
        cursor.token("\"key\"")?;
        cursor.token(":")?;
        cursor.token("{")?;
        let key_schema = cursor.known_schema_then_payload()?;
        let key_payload = cursor.value()?;
        key = Some((key_schema, key_payload));
        cursor.token("}")?;
        cursor.token(",")?;
    }
    if key.is_some() || table.is_some() {
        cursor.token("\"value\"")?;
        cursor.token(":")?;
        cursor.token("{")?;
        closing = 2;
    }
    let schema = cursor.known_schema_then_payload()?;
    let mut payload = cursor.rest();
    for _ in 0..closing {
        payload = payload.trim_end().strip_suffix('}')?;
    }
    let payload = payload.trim();
    if payload.is_empty() || payload == "null" || cursor.consumed != elided.len() {
        return None;
    }
    Some(Parts { key, table, schema, payload })
}

struct Cursor<'a> {
    text: &'a str,
    at: usize,
    /// Schemas left out of `text`, and how many of them were read as schemas.
    elided: &'a [Elision],
    consumed: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_whitespace(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start_matches([' ', '\t', '\n', '\r']).len();
    }

    fn peek_literal(&mut self, literal: &str) -> bool {
        self.skip_whitespace();
        self.rest().starts_with(literal)
    }

    /// Whitespace, then exactly `literal`.
    fn token(&mut self, literal: &str) -> Option<()> {
        self.skip_whitespace();
        self.rest().starts_with(literal).then(|| self.at += literal.len())
    }

    /// `"schema":S,"payload":` (after the envelope's brace) with `S` known: returns
    /// `S`, the cursor left at the payload.
    fn known_schema_then_payload(&mut self) -> Option<&'a str> {
        self.token("\"schema\"")?;
        self.token(":")?;
        let schema = self.known_schema()?;
        self.token(",")?;
        self.token("\"payload\"")?;
        self.token(":")?;
        Some(schema)
    }

    /// A schema left out here, or a remembered one starting here (moved to the front of
    /// the memory).
    fn known_schema(&mut self) -> Option<&'a str> {
        self.skip_whitespace();
        if let Some(elision) = self.elided.get(self.consumed).filter(|e| e.at == self.at) {
            self.consumed += 1;
            return Some(&elision.schema);
        }
        let rest = self.rest();
        let length = SEEN.with_borrow_mut(|seen| {
            let index = seen.iter().position(|known| ends_alike(rest, known) && rest.starts_with(&**known))?;
            let length = seen[index].len();
            seen[..=index].rotate_right(1);
            Some(length)
        })?;
        self.at += length;
        Some(&rest[..length])
    }

    /// A JSON string without escapes starting here, its text (a table name; a name
    /// with escapes takes the full parse).
    fn plain_string(&mut self) -> Option<&'a str> {
        self.skip_whitespace();
        let rest = self.rest().strip_prefix('"')?;
        let end = rest.find(['"', '\\'])?;
        if rest.as_bytes()[end] != b'"' {
            return None;
        }
        self.at += end + 2;
        Some(&rest[..end])
    }

    /// One JSON value starting here (found by its brackets and strings, then
    /// validated by serde_json): the key payload, which is small.
    fn value(&mut self) -> Option<&'a RawValue> {
        self.skip_whitespace();
        let rest = self.rest();
        let length = value_length(rest.as_bytes())?;
        let raw = serde_json::from_str::<&RawValue>(&rest[..length]).ok()?;
        self.at += length;
        Some(raw)
    }
}

/// Whether `text` has the last bytes of `known` where `known` would end in it: a
/// quick rejection before the full comparison. Schemas of different tables share
/// their first hundred bytes or so (`{"type":"struct","fields":[{"type":"struct",…`)
/// and differ in their last ones (the `…stock.Envelope` name), so comparing the
/// full prefix of each remembered schema cost ~10% of decoding a line.
#[inline]
fn ends_alike(text: &str, known: &str) -> bool {
    const TAIL: usize = 32;
    let (text, known) = (text.as_bytes(), known.as_bytes());
    let start = known.len().saturating_sub(TAIL);
    text.get(start..known.len()).is_some_and(|tail| tail == &known[start..])
}

/// The length of the JSON value at the start of `bytes` if it is well bracketed,
/// scanning strings (with escapes) and nesting only; serde_json checks the rest.
fn value_length(bytes: &[u8]) -> Option<usize> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for (index, &byte) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, byte) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    in_string = false;
                    if depth == 0 {
                        return Some(index + 1);
                    }
                }
                _ => {}
            }
            continue;
        }
        match byte {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + 1);
                }
            }
            b',' | b' ' | b'\t' | b'\n' | b'\r' if depth == 0 => return Some(index),
            _ if depth == 0 && index + 1 == bytes.len() => return Some(bytes.len()),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"t.Envelope"}"#;
    const KEY_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"t.Key"}"#;

    /// Each test runs on its own thread, so each starts with an empty memory.
    #[test]
    fn unknown_schema_is_left_to_the_full_parse() {
        let line = format!(r#"{{"schema":{SCHEMA},"payload":{{"op":"c"}}}}"#);
        assert!(split(&line).is_none());
        remember(SCHEMA);
        let parts = split(&line).expect("known schema");
        assert_eq!((parts.schema, parts.payload, parts.key.is_none()), (SCHEMA, r#"{"op":"c"}"#, true));
    }

    #[test]
    fn keyed_line_gives_both_schemas_and_payloads() {
        remember(SCHEMA);
        remember(KEY_SCHEMA);
        let line = format!(" {{ \"key\" : {{\"schema\":{KEY_SCHEMA}, \"payload\": {{\"id\":\"a,}}\\\"\"}} }},\"value\":{{\"schema\":{SCHEMA},\"payload\":{{\"op\":\"d\"}} }} }}\n");
        let parts = split(&line).expect("canonical");
        let (key_schema, key) = parts.key.expect("key");
        assert_eq!((key_schema, key.get()), (KEY_SCHEMA, r#"{"id":"a,}\""}"#));
        assert_eq!((parts.schema, parts.payload), (SCHEMA, r#"{"op":"d"}"#));
    }

    #[test]
    fn other_layouts_and_changed_schemas_fall_back() {
        remember(SCHEMA);
        remember(KEY_SCHEMA);
        let changed = SCHEMA.replace("int32", "int64");
        for line in [
            format!(r#"{{"payload":{{"op":"c"}},"schema":{SCHEMA}}}"#),
            format!(r#"{{"schema":{changed},"payload":{{"op":"c"}}}}"#),
            format!(r#"{{"schema":{SCHEMA},"payload":null}}"#),
            format!(r#"{{"sch\u0065ma":{SCHEMA},"payload":{{"op":"c"}}}}"#),
            format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":1}}}},"value":null}}"#),
            format!(r#"{{"key":{{"id":1}},"value":{{"schema":{SCHEMA},"payload":{{"op":"c"}}}}}}"#),
            format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":1}},"x":1}},"value":{{"schema":{SCHEMA},"payload":{{}}}}}}"#),
        ] {
            assert!(split(&line).is_none(), "{line}");
        }
    }

    #[test]
    fn a_schema_that_is_a_prefix_of_another_does_not_match_it() {
        remember(SCHEMA);
        let longer = format!("{}{}", &SCHEMA[..SCHEMA.len() - 1], r#","version":2}"#);
        let line = format!(r#"{{"schema":{longer},"payload":{{"op":"c"}}}}"#);
        assert!(split(&line).is_none());
    }

    #[test]
    fn memory_is_bounded() {
        for n in 0..(REMEMBERED_SCHEMAS + 10) {
            remember(&SCHEMA.replace("t.Envelope", &format!("t{n}.Envelope")));
        }
        SEEN.with_borrow(|seen| assert_eq!(seen.len(), REMEMBERED_SCHEMAS));
    }

    #[test]
    fn schemas_that_differ_only_at_the_end_or_only_at_the_start_are_told_apart() {
        let stock = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"s.stock.Envelope"}"#;
        let order = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"s.order.Envelope"}"#;
        let other_start = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"s.stock.Envelope"}"#;
        remember(stock);
        let line = |schema: &str| format!(r#"{{"schema":{schema},"payload":{{"op":"c"}}}}"#);
        assert_eq!(split(&line(stock)).map(|parts| parts.schema), Some(stock));
        assert!(split(&line(order)).is_none(), "same start, other end");
        assert!(split(&line(other_start)).is_none(), "same end, other start");
        assert!(ends_alike(stock, stock) && !ends_alike(order, stock) && !ends_alike("short", stock));
    }

    #[test]
    fn value_length_stops_at_the_end_of_the_first_value() {
        assert_eq!(value_length(br#"{"a":[1,{"b":"}"}]},"x""#), Some(19));
        assert_eq!(value_length(br#""s\"t","x""#), Some(6));
        assert_eq!(value_length(b"123,4"), Some(3));
        assert_eq!(value_length(b"123"), Some(3));
        assert_eq!(value_length(b"{\"a\":1"), None);
        assert_eq!(value_length(b"}"), None);
    }
}
