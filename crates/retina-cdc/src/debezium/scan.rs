//! A change event's payload read by a scanner that knows its shape, instead of serde.
//!
//! Once an envelope's schemas are recognized (see `envelope`), parsing the payload
//! (`op`, the images, the `source` and `transaction` blocks) with serde_json was most
//! of a line's decode cost. On the CH-benCHmark `stock` stream
//! (`examples/decode_lines.rs`, one thread), a bare payload line took 1.75 µs and an
//! envelope + key line 2.45 µs; with this scanner, 1.05 and 1.72 µs. It matches
//! field names directly, parses an image's short integers itself, and finds string
//! ends eight bytes at a time. No crate fits: simd-json parses in place (a mutable copy of every line) and
//! sonic-rs wants CPU features at build time and its own raw-value type in every
//! decode structure.
//!
//! The scanner accepts a strict subset of what the serde path accepts and produces
//! exactly the [`Fields`] serde would: strings without escapes are borrowed, short
//! integers are parsed here, and every other value (escaped strings, floats, long
//! integers, struct-valued columns) is handed to serde_json on its own span, so it is
//! read by the same code. Transaction messages (BEGIN, END) are read too. Anything
//! else (a wrapper, a duplicate or escaped field name, malformed JSON, deep nesting)
//! returns `None`, and the caller's serde parse gives the answer or the error.

use std::borrow::Cow;

use super::fields::{Block, Fields, SourceFields, TransactionFields};
use super::image::{Image, Scalar};

/// Nesting deeper than this is left to serde (whose own limit is 128).
const MAX_DEPTH: usize = 64;

/// Integers with at most this many digits fit an `i64`, so they parse without checks.
const SHORT_INTEGER_DIGITS: usize = 18;

/// The fields of `text`, a change event's payload object, or `None` when the serde
/// path must decide (see the module docs).
pub(super) fn payload(text: &str) -> Option<Fields<'_>> {
    let mut scanner = Scanner { text, at: 0 };
    let fields = scanner.payload()?;
    scanner.skip_whitespace();
    (scanner.at == text.len()).then_some(fields)
}

/// Panics unless the scanner reads `text` exactly as serde does, or declines it where
/// serde fails (for the fuzzer, which cannot see this module's internals).
#[doc(hidden)]
pub fn assert_agrees_with_serde(text: &str) {
    if let Some(scanned) = payload(text) {
        let serde = serde_json::from_str::<Fields>(text).map(|fields| format!("{fields:?}"));
        assert_eq!(serde.as_deref().ok(), Some(format!("{scanned:?}").as_str()), "scanner and serde differ on {text:?}");
    }
}

/// A string token: its raw JSON text (quotes included) and whether it has escapes.
#[derive(Clone, Copy)]
struct Str<'a> {
    raw: &'a str,
    escaped: bool,
}

impl<'a> Str<'a> {
    /// The text between the quotes, when it needs no unescaping.
    #[inline(always)]
    fn plain(self) -> Option<&'a str> {
        (!self.escaped).then(|| &self.raw[1..self.raw.len() - 1])
    }

    /// The string's value: borrowed, or unescaped by serde_json (which also rejects
    /// what it would reject in a full parse, such as a lone surrogate).
    #[inline(always)]
    fn text(self) -> Option<Cow<'a, str>> {
        match self.plain() {
            Some(text) => Some(Cow::Borrowed(text)),
            None => serde_json::from_str::<String>(self.raw).ok().map(Cow::Owned),
        }
    }
}

/// Invariant: `at` is at a byte of `text` that starts a character (the scanner only
/// stops at ASCII structural bytes), or at its end.
struct Scanner<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Scanner<'a> {
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    #[inline(always)]
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes().get(self.at) {
            self.at += 1;
        }
    }

    /// The next byte after whitespace, not consumed.
    #[inline(always)]
    fn peek(&mut self) -> Option<u8> {
        self.skip_whitespace();
        self.bytes().get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn literal(&mut self, literal: &str) -> Option<()> {
        self.bytes()[self.at..].starts_with(literal.as_bytes()).then(|| self.at += literal.len())
    }

    /// An object, calling `field` with each key and the cursor before its value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, Str<'a>) -> Option<()>) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            if self.peek()? != b'"' {
                return None;
            }
            let key = self.string()?;
            self.eat(b':')?;
            field(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string at the cursor, checked as serde_json checks one it skips: no control
    /// characters, only JSON's escapes (`\u` with four hex digits).
    #[inline(always)]
    fn string(&mut self) -> Option<Str<'a>> {
        let start = self.at;
        self.at += 1;
        let mut escaped = false;
        loop {
            self.at = special_byte(self.bytes(), self.at)?;
            match self.bytes()[self.at] {
                b'"' => {
                    self.at += 1;
                    return Some(Str { raw: &self.text[start..self.at], escaped });
                }
                b'\\' => self.at += 1,
                _ => return None,
            }
            escaped = true;
            match *self.bytes().get(self.at)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 1,
                b'u' => {
                    let hex = self.bytes().get(self.at + 1..self.at + 5)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.at += 5;
                }
                _ => return None,
            }
        }
    }

    /// A number at the cursor, checked against JSON's grammar; its text.
    #[inline(always)]
    fn number(&mut self) -> Option<&'a str> {
        let bytes = self.bytes();
        let digits = |mut i: usize| {
            while let Some(b'0'..=b'9') = bytes.get(i) {
                i += 1;
            }
            i
        };
        let start = self.at;
        let mut i = start + usize::from(bytes.get(start) == Some(&b'-'));
        i = match bytes.get(i)? {
            b'0' => i + 1,
            b'1'..=b'9' => digits(i + 1),
            _ => return None,
        };
        if bytes.get(i) == Some(&b'.') {
            let end = digits(i + 1);
            if end == i + 1 {
                return None;
            }
            i = end;
        }
        if let Some(b'e' | b'E') = bytes.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = bytes.get(i) {
                i += 1;
            }
            let end = digits(i);
            if end == i {
                return None;
            }
            i = end;
        }
        self.at = i;
        Some(&self.text[start..i])
    }

    /// Any value, checked; its raw text.
    fn value(&mut self, depth: usize) -> Option<&'a str> {
        let first = self.peek()?;
        let start = self.at;
        match first {
            b'"' => {
                self.string()?;
            }
            b'{' if depth < MAX_DEPTH => self.object(|scanner, _| scanner.value(depth + 1).map(drop))?,
            b'[' if depth < MAX_DEPTH => {
                self.at += 1;
                if self.peek()? == b']' {
                    self.at += 1;
                } else {
                    loop {
                        self.value(depth + 1)?;
                        match self.peek()? {
                            b',' => self.at += 1,
                            b']' => {
                                self.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
            }
            b't' => self.literal("true")?,
            b'f' => self.literal("false")?,
            b'n' => self.literal("null")?,
            b'-' | b'0'..=b'9' => {
                self.number()?;
            }
            _ => return None,
        }
        Some(&self.text[start..self.at])
    }

    /// A value's raw text, `null` read as absent (as the serde fields read it).
    fn raw(&mut self) -> Option<Option<&'a str>> {
        let raw = self.value(1)?;
        Some((raw != "null").then_some(raw))
    }

    /// A column value of an image, as [`Scalar`]'s serde visitor makes it.
    #[inline(always)]
    fn scalar(&mut self) -> Option<Scalar<'a>> {
        match self.peek()? {
            b'"' => self.string()?.text().map(Scalar::Str),
            b'-' | b'0'..=b'9' => {
                let text = self.number()?;
                short_integer(text).or_else(|| serde_json::from_str::<Scalar>(text).ok())
            }
            b't' => self.literal("true").map(|()| Scalar::Bool(true)),
            b'f' => self.literal("false").map(|()| Scalar::Bool(false)),
            b'n' => self.literal("null").map(|()| Scalar::Null),
            // Struct-valued columns (decimals, geometries) and arrays: serde's reading.
            b'{' | b'[' => serde_json::from_str::<Scalar>(self.value(2)?).ok(),
            _ => None,
        }
    }

    /// A row image or `null`.
    fn image(&mut self) -> Option<Option<Image<'a>>> {
        if self.peek()? == b'n' {
            return self.literal("null").map(|()| None);
        }
        let mut fields = Vec::with_capacity(24);
        self.object(|scanner, key| {
            // The common values are pushed where they are made: returned through
            // `scalar`'s merged result they were copied through the stack, read back
            // before their stores had landed (measured: 1.15 -> 1.05 µs a bare line).
            match scanner.peek()? {
                b'"' => {
                    let text = scanner.string()?.text()?;
                    fields.push((key.text()?, Scalar::Str(text)));
                }
                b'-' | b'0'..=b'9' => {
                    let text = scanner.number()?;
                    let value = match short_integer(text) {
                        Some(value) => value,
                        None => serde_json::from_str::<Scalar>(text).ok()?,
                    };
                    fields.push((key.text()?, value));
                }
                _ => {
                    let value = scanner.scalar()?;
                    fields.push((key.text()?, value));
                }
            }
            Some(())
        })?;
        Some(Some(Image { fields }))
    }

    /// A nested block: an object read by `read`, or `null` (absent). Anything else is
    /// an error the serde path words.
    fn block<T>(&mut self, read: impl FnOnce(&mut Self) -> Option<T>) -> Option<Option<Block<T>>> {
        match self.peek()? {
            b'n' => self.literal("null").map(|()| None),
            b'{' => read(self).map(|fields| Some(Block::Object(fields))),
            _ => None,
        }
    }

    /// The payload object. Field names with escapes and repeated known fields go to
    /// serde (which matches escaped names, and rejects repeats).
    fn payload(&mut self) -> Option<Fields<'a>> {
        let mut fields = Fields::default();
        let mut seen = Seen::default();
        self.object(|scanner, key| {
            match key.plain()? {
                "op" => fields.op = seen.first(0).and_then(|()| scanner.raw())?,
                "after" => fields.after = seen.first(1).and_then(|()| scanner.image())?,
                "before" => fields.before = seen.first(2).and_then(|()| scanner.image())?,
                "source" => fields.source = seen.first(3).and_then(|()| scanner.block(|block| block.raw_block(source_slot)))?,
                "transaction" => fields.transaction = seen.first(4).and_then(|()| scanner.block(|block| block.raw_block(transaction_slot)))?,
                // A transaction message's fields, as raw text like `op` (one BEGIN and
                // one END per transaction: on Kafka each was parsed by serde twice, in
                // the fetcher and in the decode worker, at about a change event's cost).
                "status" => fields.status = seen.first(5).and_then(|()| scanner.raw())?,
                "id" => fields.id = seen.first(6).and_then(|()| scanner.raw())?,
                "event_count" => fields.event_count = seen.first(7).and_then(|()| scanner.raw())?,
                "data_collections" => fields.data_collections = seen.first(8).and_then(|()| scanner.raw())?,
                // Wrappers are read by the serde path.
                "key" | "value" | "table" | "schema" | "payload" => return None,
                _ => {
                    scanner.value(1)?;
                }
            }
            Some(())
        })?;
        Some(fields)
    }

    /// A block kept as raw field texts: `slot` says where a known field goes (and
    /// its bit, for repeats); other fields are skipped, checked.
    fn raw_block<T: Default>(&mut self, slot: impl for<'t> Fn(&'t mut T, &str) -> Option<(&'t mut Option<&'a str>, u32)>) -> Option<T> {
        let mut block = T::default();
        let mut seen = Seen::default();
        self.object(|scanner, key| {
            match slot(&mut block, key.plain()?) {
                Some((field, bit)) => {
                    seen.first(bit)?;
                    *field = scanner.raw()?;
                }
                None => {
                    scanner.value(2)?;
                }
            }
            Some(())
        })?;
        Some(block)
    }
}

/// Where a `source` field goes (see [`SourceFields`]).
fn source_slot<'t, 'a>(source: &'t mut SourceFields<'a>, name: &str) -> Option<(&'t mut Option<&'a str>, u32)> {
    Some(match name {
        "connector" => (&mut source.connector, 0),
        "db" => (&mut source.db, 1),
        "schema" => (&mut source.schema, 2),
        "table" => (&mut source.table, 3),
        "txId" => (&mut source.tx_id, 4),
        "sequence" => (&mut source.sequence, 5),
        "file" => (&mut source.file, 6),
        "pos" => (&mut source.pos, 7),
        "row" => (&mut source.row, 8),
        "gtid" => (&mut source.gtid, 9),
        "snapshot" => (&mut source.snapshot, 10),
        "keyspace" => (&mut source.keyspace, 11),
        "server_transaction_id" => (&mut source.server_transaction_id, 12),
        _ => return None,
    })
}

/// Where a `transaction` field goes (see [`TransactionFields`]).
fn transaction_slot<'t, 'a>(transaction: &'t mut TransactionFields<'a>, name: &str) -> Option<(&'t mut Option<&'a str>, u32)> {
    Some(match name {
        "id" => (&mut transaction.id, 0),
        "total_order" => (&mut transaction.total_order, 1),
        "data_collection_order" => (&mut transaction.data_collection_order, 2),
        _ => return None,
    })
}

/// Which known fields of an object were read.
#[derive(Default)]
struct Seen(u32);

impl Seen {
    /// `Some` the first time `bit` is marked.
    fn first(&mut self, bit: u32) -> Option<()> {
        let mask = 1 << bit;
        let first = self.0 & mask == 0;
        self.0 |= mask;
        first.then_some(())
    }
}

/// The index of the first byte at or after `from` that a string cannot hold as it
/// is: a quote, a backslash or a control character. Eight bytes at a time (as
/// serde_json does): column values are short, and `memchr2`'s setup per string cost
/// more than the search (measured: 1.51 against 1.17 µs a line, with inlining).
#[inline(always)]
fn special_byte(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8) {
        let word = u64::from_le_bytes(chunk.try_into().ok()?);
        let quote = word ^ (ONES * u64::from(b'"'));
        let backslash = word ^ (ONES * u64::from(b'\\'));
        // Each term sets a byte's high bit where that byte is a match (a borrow can set
        // it above a match too, but the lowest set bit is always exact).
        let found = (word.wrapping_sub(ONES * 0x20) & !word)
            | (quote.wrapping_sub(ONES) & !quote)
            | (backslash.wrapping_sub(ONES) & !backslash);
        let found = found & HIGH;
        if found != 0 {
            return Some(at + found.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    bytes[at..].iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20).map(|i| at + i)
}

/// An integer of at most [`SHORT_INTEGER_DIGITS`] digits as serde_json reads it:
/// non-negative ones as `U64`, negative ones as `I64`. `-0` (a float to serde_json)
/// and everything else is `None`.
#[inline(always)]
fn short_integer(text: &str) -> Option<Scalar<'static>> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(digits) => (true, digits),
        None => (false, text),
    };
    if digits.len() > SHORT_INTEGER_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let value = digits.bytes().fold(0u64, |value, digit| value * 10 + u64::from(digit - b'0'));
    match (negative, value) {
        (false, value) => Some(Scalar::U64(value)),
        (true, 0) => None,
        // At most 18 digits: below i64::MAX.
        (true, value) => Some(Scalar::I64(-(value as i64))),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// A PostgreSQL update as Debezium 2.7 writes it (REPLICA IDENTITY DEFAULT).
    const STOCK_UPDATE: &str = r#"{"before":null,"after":{"s_w_id":1,"s_i_id":41855,"s_quantity":61,"s_dist_01":"nesgjftvxzklekgslngnkgqi","s_ytd":6,"s_data":"jdjtqojymwnizljelspyokrexmllgpfsbkuctxzj"},"source":{"version":"2.7.3.Final","connector":"postgresql","name":"dbserver1","ts_ms":1709288130000,"snapshot":"false","db":"postgres","sequence":"[\"20199936\",\"20200000\"]","schema":"public","table":"stock","txId":21500,"lsn":20200000,"xmin":null},"op":"u","ts_ms":1709288130500,"transaction":null}"#;

    fn serde_fields(text: &str) -> Option<String> {
        serde_json::from_str::<Fields>(text).ok().map(|fields| format!("{fields:?}"))
    }

    /// The scanner's answer is serde's whenever it gives one, and it gives none where
    /// serde fails.
    fn agrees(text: &str) -> Option<String> {
        assert_agrees_with_serde(text);
        payload(text).map(|fields| format!("{fields:?}"))
    }

    #[test]
    fn reads_debezium_payloads_as_serde_does() {
        assert!(agrees(STOCK_UPDATE).is_some(), "the common shape takes the scanner");
        let mysql = r#"{"before":{"id":1,"price":"AeI=","w":-7},"after":{"id":1,"price":{"scale":2,"value":"AeI="},"w":-0,"f":1.5e3,"big":18446744073709551616,"g":{"wkb":"AQ==","srid":4326},"a":[1,[2]],"t":true,"n":null},"source":{"connector":"mysql","db":"shop","table":"t","file":"mysql-bin.000003","pos":154,"row":1,"gtid":"u:7","snapshot":true},"op":"c","ts_ms":1,"transaction":{"id":"u:7","total_order":2,"data_collection_order":1,"extra":{"x":[]}}}"#;
        assert!(agrees(mysql).is_some());
        let spaced = " {\n \"op\" : \"c\" ,\t\"after\" : { \"id\" : 1 , \"s\" : \"a\\\"b\\u00e9\" } , \"source\" : { \"schema\" : \"s\" , \"table\" : \"t\" } }\r\n";
        assert!(agrees(spaced).is_some());
        assert!(agrees(r#"{"op":"c","after":{"n\u0061me":"x","i":-12345678901234567,"j":123456789012345678,"k":1234567890123456789}}"#).is_some());
        assert!(agrees("{}").is_some());
        // Transaction messages, as Debezium writes them and with nulls, spaces, escapes.
        for message in [
            r#"{"status":"BEGIN","id":"571:33461528","ts_ms":1,"event_count":null,"data_collections":null}"#,
            r#"{"status":"END","id":"571:33461528","ts_ms":1,"event_count":3,"data_collections":[{"data_collection":"s.a","event_count":2},{"data_collection":"s.b","event_count":1}]}"#,
            " { \"status\" : \"END\" , \"id\" : \"a\\\"b\" , \"event_count\" : 1 , \"data_collections\" : [ ] } ",
            r#"{"status":"END","id":12,"event_count":"x","data_collections":{"not":"a list"}}"#,
        ] {
            assert!(agrees(message).is_some(), "{message}");
        }
    }

    #[test]
    fn leaves_other_shapes_and_bad_json_to_serde() {
        let declined = [
            r#"{"schema":{},"payload":{"op":"c"}}"#,
            r#"{"key":{"id":1},"value":null}"#,
            r#"{"status":"BEGIN","status":"END","id":"1"}"#,
            r#"{"status":"END","data_collections":[{"a":1},]}"#,
            r#"{"op":"c","op":"u"}"#,
            r#"{"o\u0070":"c"}"#,
            r#"{"op":"c","source":{"table":"a","table":"b"}}"#,
            r#"{"op":"c","source":7}"#,
            r#"{"op":"c","after":[1]}"#,
            r#"{"op":"c","after":{"s":"\uD800"}}"#,
            r#"{"op":"c","after":{"i":01}}"#,
            r#"{"op":"c","after":{"i":1.}}"#,
            r#"{"op":"c","after":{"i":1e}}"#,
            r#"{"op":"c","after":{"i":-}}"#,
            r#"{"op":"c","after":{"s":"\x"}}"#,
            "{\"op\":\"c\",\"after\":{\"s\":\"a\tb\"}}",
            r#"{"op":"c",}"#,
            r#"{"op":"c"} x"#,
            r#"{"op":"c","ts":nul}"#,
            r#"{"op":"c","x":[1,]}"#,
            r#"[1]"#,
            r#"{"op":"c""#,
        ];
        for text in declined {
            assert_eq!(payload(text).map(|f| format!("{f:?}")), None, "{text}");
        }
        let deep = format!(r#"{{"op":"c","x":{}{}}}"#, "[".repeat(100), "]".repeat(100));
        assert!(payload(&deep).is_none(), "deep nesting goes to serde");
        assert!(serde_fields(&deep).is_some());
    }

    /// Every line of the fuzz seeds (captured Debezium shapes: PostgreSQL, MySQL,
    /// envelopes, transaction messages, odd values), and every change-event payload
    /// inside them, reads the same either way.
    #[test]
    fn agrees_with_serde_on_the_fuzz_seeds() {
        fn payloads(value: &serde_json::Value, out: &mut Vec<String>) {
            match value {
                serde_json::Value::Object(map) => {
                    if map.contains_key("op") {
                        out.push(value.to_string());
                    }
                    map.values().for_each(|inner| payloads(inner, out));
                }
                serde_json::Value::Array(items) => items.iter().for_each(|inner| payloads(inner, out)),
                _ => {}
            }
        }
        let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/debezium_message");
        let (mut lines, mut scanned) = (0, 0);
        for entry in std::fs::read_dir(&seeds).expect("the fuzz seeds") {
            let bytes = std::fs::read(entry.expect("a seed").path()).expect("a seed's bytes");
            for line in String::from_utf8_lossy(&bytes).lines() {
                let mut texts = vec![line.to_string()];
                if let Ok(value) = serde_json::from_str::<serde_json::Value>(line) {
                    payloads(&value, &mut texts);
                }
                for text in &texts {
                    lines += 1;
                    scanned += usize::from(agrees(text).is_some());
                }
            }
        }
        assert!(scanned > 20 && lines > scanned, "{scanned} of {lines} texts scanned: the seeds exercise both paths");
    }

    #[test]
    fn special_bytes_are_found_at_every_offset() {
        for special in [b'"', b'\\', 0x00, 0x1f] {
            for len in 0..40 {
                for at in 0..len {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = special;
                    bytes[len - 1] = if at == len - 1 { special } else { 0xff };
                    for from in 0..=at {
                        assert_eq!(special_byte(&bytes, from), Some(at), "{special} at {at} of {len} from {from}");
                    }
                }
                assert_eq!(special_byte(&vec![0x20; len], 0), None);
                assert_eq!(special_byte(&vec![0x80; len], 0), None);
            }
        }
    }

    proptest! {
        // Cheap cases: many more than CI's default.
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Random edits of a real payload: wherever the scanner answers, serde answers
        /// the same.
        #[test]
        fn agrees_with_serde_on_edited_payloads(
            edits in prop::collection::vec((0usize..400, prop::sample::select(vec![
                "", " ", "\\", "\"", "\\u00", "-", "0", "1.5", "e9", "null", ",", ":", "{", "}", "[", "]", "\t", "é", "\u{1}",
            ])), 1..4),
            cut in prop::bool::ANY,
        ) {
            let mut text = STOCK_UPDATE.to_string();
            for (at, insert) in edits {
                let at = text.floor_char_boundary(at.min(text.len()));
                if cut && at < text.len() {
                    let end = text.ceil_char_boundary(at + 1);
                    text.replace_range(at..end, insert);
                } else {
                    text.insert_str(at, insert);
                }
            }
            agrees(&text);
        }
    }
}
