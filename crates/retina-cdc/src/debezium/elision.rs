//! Known schemas left out of a line as it is read.
//!
//! With Kafka Connect's default JSON every line repeats its table's schema (about
//! three quarters of a `stock` line's 4 KB). Reading a line used to move those bytes
//! four times: the UTF-8 check and the copy into the line on the reading thread, and
//! on a decode worker (another core, so cache misses) the comparison that recognizes
//! the schema and the binding lookup's second comparison. Here the reading thread
//! compares them once, while they are still in its cache, against the schemas of
//! tables the sink has bound, and keeps only the rest of the line plus a reference
//! to the shared schema text. The decoder takes the reference as the schema, and the
//! binding lookup recognizes it by address.
//!
//! Leaving bytes out is an exact substitution: `line.full()` puts the same bytes
//! back, so dead letters, errors and any layout the decoder's fast path does not take
//! see the line as it was read.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use smallvec::SmallVec;

/// How many schema texts are shared; past it, new schemas are simply not left out
/// (their lines cost what they did before). A stream evolving its schemas more often
/// than this over one process's life is not the common case this serves.
const MAX_SCHEMAS: usize = 256;

/// Shorter schemas cost less to copy than to look up.
const MIN_SCHEMA_LEN: usize = 32;

/// Where JsonConverter puts the schemas: `{"key":{"schema":KS,…},"value":{"schema":S,…}}`
/// for a keyed record, `{"schema":S,…}` for a value alone. These compact forms are
/// matched first; the same layout with whitespace between its tokens (Python's
/// `json.dumps` writes `{"key": {"schema": …`) is found token by token
/// ([`SpacedLayout`]).
const KEYED_PREFIX: &[u8] = br#"{"key":{"schema":"#;
const VALUE_PREFIX: &[u8] = br#"{"schema":"#;
const VALUE_AFTER_KEY: &[u8] = br#","value":{"schema":"#;

/// Schema texts that parsed as part of a message of a bound table, shared by the sink
/// (which adds them) and the threads reading sources (which leave them out of lines).
///
/// Invariant: every text held is valid JSON that starts with `{` and ends with `}`, so
/// a line with one left out is valid UTF-8 exactly when its remaining pieces are.
#[derive(Clone, Default)]
pub struct KnownSchemas {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Bumped on every addition, so a reader refreshes its copy only then.
    generation: AtomicU64,
    schemas: Mutex<Vec<Arc<str>>>,
}

impl KnownSchemas {
    /// The shared copy of `schema`, a schema text that parsed as JSON (added if there
    /// is room and it is one worth leaving out).
    pub fn intern(&self, schema: &str) -> Arc<str> {
        let mut schemas = self.shared.schemas.lock();
        if let Some(known) = schemas.iter().find(|known| ***known == *schema) {
            return Arc::clone(known);
        }
        let text: Arc<str> = schema.into();
        let worth = schema.len() >= MIN_SCHEMA_LEN && schema.starts_with('{') && schema.ends_with('}');
        if worth && schemas.len() < MAX_SCHEMAS {
            schemas.push(Arc::clone(&text));
            self.shared.generation.fetch_add(1, Ordering::Release);
        }
        text
    }

    fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }
}

/// One schema left out of a line's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Elision {
    /// Where in the line's text the schema's bytes were.
    pub at: usize,
    pub schema: Arc<str>,
}

/// A message as read: its text with known schemas left out (at most the key's and the
/// value's), in the order they occurred.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Line {
    text: String,
    elided: SmallVec<[Elision; 2]>,
}

impl Line {
    /// A line holding `text` as it is.
    pub fn plain(text: impl Into<String>) -> Self {
        Self { text: text.into(), elided: SmallVec::new() }
    }

    /// The text with the schemas left out (see [`Self::elided`]).
    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn elided(&self) -> &[Elision] {
        &self.elided
    }

    /// The text to fill for a message read as it is (nothing left out).
    pub fn plain_text_mut(&mut self) -> &mut String {
        self.elided.clear();
        &mut self.text
    }

    /// Empties the line, keeping its buffer.
    pub fn clear(&mut self) {
        self.text.clear();
        self.elided.clear();
    }

    /// Appends text kept as it is.
    pub fn push_str(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// The size of the text held (what a left-out schema does not cost).
    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.elided.is_empty()
    }

    /// The text, for reuse as a buffer.
    pub fn into_text(self) -> String {
        self.text
    }

    /// The line exactly as it was read.
    pub fn full(&self) -> Cow<'_, str> {
        if self.elided.is_empty() {
            return Cow::Borrowed(&self.text);
        }
        let mut full = String::with_capacity(self.text.len() + self.elided.iter().map(|e| e.schema.len()).sum::<usize>());
        let mut from = 0;
        for elision in &self.elided {
            full.push_str(&self.text[from..elision.at]);
            full.push_str(&elision.schema);
            from = elision.at;
        }
        full.push_str(&self.text[from..]);
        Cow::Owned(full)
    }
}

impl From<String> for Line {
    fn from(text: String) -> Self {
        Self::plain(text)
    }
}

impl From<&str> for Line {
    fn from(text: &str) -> Self {
        Self::plain(text)
    }
}

/// A line that is not valid UTF-8: the first invalid byte's offset in the line.
#[derive(Debug, PartialEq, Eq)]
pub struct NotUtf8 {
    pub valid_up_to: usize,
}

/// The reading thread's side: a copy of the shared schemas, most recently matched
/// first, refreshed when the sink adds one.
pub struct SchemaElider {
    /// `None`: leaves nothing out, and costs no allocation to make.
    known: Option<KnownSchemas>,
    generation: u64,
    schemas: Vec<Arc<str>>,
    /// Built once: building it per line cost more than the search.
    value_after_key: memchr::memmem::Finder<'static>,
}

impl SchemaElider {
    pub fn new(known: KnownSchemas) -> Self {
        Self { known: Some(known), ..Self::none() }
    }

    /// The schemas this elider leaves out (`None` for [`Self::none`]), for another
    /// elider on another thread.
    pub fn known(&self) -> Option<&KnownSchemas> {
        self.known.as_ref()
    }

    /// An elider that never leaves anything out (for callers without a sink).
    pub fn none() -> Self {
        Self { known: None, generation: u64::MAX, schemas: Vec::new(), value_after_key: memchr::memmem::Finder::new(VALUE_AFTER_KEY) }
    }

    /// Fills `line` with `bytes` (one message without its newline), leaving out the
    /// known schemas found where JsonConverter puts them.
    pub fn fill(&mut self, line: &mut Line, bytes: &[u8]) -> Result<(), NotUtf8> {
        self.fill_pieces(line, bytes, push_checked)
    }

    /// [`Self::fill`] for a message that is text already: its pieces are not checked
    /// again. (Every piece ends next to a schema's ASCII brace or at an end of
    /// `text`, so at a character boundary: the error cannot happen.)
    pub fn fill_text(&mut self, line: &mut Line, text: &str) -> Result<(), NotUtf8> {
        self.fill_pieces(line, text.as_bytes(), |line, _, from, to| {
            line.push_str(text.get(from..to).ok_or(NotUtf8 { valid_up_to: from })?);
            Ok(())
        })
    }

    /// Fills `line` from `bytes`, appending the pieces around left-out schemas with
    /// `push` (`line`, `bytes`, piece start, piece end).
    fn fill_pieces(
        &mut self,
        line: &mut Line,
        bytes: &[u8],
        push: impl Fn(&mut String, &[u8], usize, usize) -> Result<(), NotUtf8>,
    ) -> Result<(), NotUtf8> {
        self.refresh();
        line.text.clear();
        line.elided.clear();
        // Where in `bytes` each left-out schema starts, in order.
        let mut cuts: [Option<(usize, Arc<str>)>; 2] = [None, None];
        if !self.schemas.is_empty() {
            if let Some(key_start) = SpacedLayout::keyed_schema(bytes) {
                let key = self.known_at(bytes, key_start);
                let key_end = key_start + key.as_ref().map_or(0, |schema| schema.len());
                cuts[0] = key.map(|schema| (key_start, schema));
                if let Some(start) = self.value_schema_after_key(bytes, key_end) {
                    cuts[1] = self.known_at(bytes, start).map(|schema| (start, schema));
                }
            } else if let Some(start) = SpacedLayout::value_schema(bytes) {
                cuts[0] = self.known_at(bytes, start).map(|schema| (start, schema));
            }
        }
        // A fresh line is allocated once, at the size it keeps (a quarter of the
        // line's bytes when its schemas are left out).
        let left_out: usize = cuts.iter().flatten().map(|(_, schema)| schema.len()).sum();
        line.text.reserve(bytes.len() - left_out);
        let mut from = 0;
        for (start, schema) in cuts.into_iter().flatten() {
            push(&mut line.text, bytes, from, start)?;
            from = start + schema.len();
            line.elided.push(Elision { at: line.text.len(), schema });
        }
        push(&mut line.text, bytes, from, bytes.len())
    }

    /// Appends `bytes`, a Connect key or value as its own message (`{"schema":S,…}`
    /// or anything else), to `line`, leaving out `S` when it is known. On an error
    /// (its offset is within `bytes`) the line is as it was.
    pub fn append_envelope(&mut self, line: &mut Line, bytes: &[u8]) -> Result<(), NotUtf8> {
        self.refresh();
        let (length, elided) = (line.text.len(), line.elided.len());
        let known = SpacedLayout::value_schema(bytes).and_then(|start| Some((start, self.known_at(bytes, start)?)));
        let appended = match known {
            Some((start, schema)) => push_checked(&mut line.text, bytes, 0, start).and_then(|()| {
                let from = start + schema.len();
                line.elided.push(Elision { at: line.text.len(), schema });
                push_checked(&mut line.text, bytes, from, bytes.len())
            }),
            None => push_checked(&mut line.text, bytes, 0, bytes.len()),
        };
        if appended.is_err() {
            line.text.truncate(length);
            line.elided.truncate(elided);
        }
        appended
    }

    /// Where the value's schema starts after a keyed line's key (from `from`): the
    /// first `,"value":{"schema":`, or in a spaced line the first `"value"` followed
    /// by `:`, `{`, `"schema"` and `:`.
    fn value_schema_after_key(&self, bytes: &[u8], from: usize) -> Option<usize> {
        if let Some(found) = self.value_after_key.find(&bytes[from..]) {
            return Some(SpacedLayout::skip_whitespace(bytes, from + found + VALUE_AFTER_KEY.len()));
        }
        let mut search = from;
        while let Some(found) = memchr::memmem::find(&bytes[search..], br#""value""#) {
            let after_name = search + found + br#""value""#.len();
            let start = SpacedLayout::after(bytes, after_name, b":")
                .and_then(|at| SpacedLayout::after(bytes, at, b"{"))
                .and_then(|at| SpacedLayout::schema_after(bytes, at));
            if start.is_some() {
                return start;
            }
            search = after_name;
        }
        None
    }

    fn refresh(&mut self) {
        let Some(known) = &self.known else { return };
        let generation = known.generation();
        if generation == self.generation {
            return;
        }
        self.generation = generation;
        let shared = known.shared.schemas.lock();
        for schema in shared.iter() {
            if !self.schemas.iter().any(|known| Arc::ptr_eq(known, schema)) {
                self.schemas.push(Arc::clone(schema));
            }
        }
    }

    /// The known schema `bytes` holds at `start`, moved to the front.
    fn known_at(&mut self, bytes: &[u8], start: usize) -> Option<Arc<str>> {
        let rest = &bytes[start..];
        let index = self.schemas.iter().position(|known| ends_alike(rest, known.as_bytes()) && rest.starts_with(known.as_bytes()))?;
        self.schemas[..=index].rotate_right(1);
        Some(Arc::clone(&self.schemas[0]))
    }
}

/// The envelope's layout read token by token, with JSON whitespace allowed between
/// tokens but not before the line's first brace (so a line that starts with
/// whitespace is read as it is: see `decode_elided`). Each function returns the index
/// of the schema's first byte.
struct SpacedLayout;

impl SpacedLayout {
    /// `{"key":{"schema":` in any spacing.
    fn keyed_schema(bytes: &[u8]) -> Option<usize> {
        if bytes.starts_with(KEYED_PREFIX) {
            return Some(Self::skip_whitespace(bytes, KEYED_PREFIX.len()));
        }
        let at = Self::after(bytes, Self::opening(bytes)?, br#""key""#)?;
        let at = Self::after(bytes, Self::after(bytes, at, b":")?, b"{")?;
        Self::schema_after(bytes, at)
    }

    /// `{"schema":` in any spacing.
    fn value_schema(bytes: &[u8]) -> Option<usize> {
        if bytes.starts_with(VALUE_PREFIX) {
            return Some(Self::skip_whitespace(bytes, VALUE_PREFIX.len()));
        }
        Self::schema_after(bytes, Self::opening(bytes)?)
    }

    fn opening(bytes: &[u8]) -> Option<usize> {
        (bytes.first() == Some(&b'{')).then_some(1)
    }

    /// `"schema"`, `:` and whitespace from `at`.
    fn schema_after(bytes: &[u8], at: usize) -> Option<usize> {
        let at = Self::after(bytes, Self::after(bytes, at, br#""schema""#)?, b":")?;
        Some(Self::skip_whitespace(bytes, at))
    }

    /// The index after whitespace and then `token` from `at`.
    fn after(bytes: &[u8], at: usize, token: &[u8]) -> Option<usize> {
        let at = Self::skip_whitespace(bytes, at);
        bytes.get(at..)?.starts_with(token).then_some(at + token.len())
    }

    fn skip_whitespace(bytes: &[u8], mut at: usize) -> usize {
        while bytes.get(at).is_some_and(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
            at += 1;
        }
        at
    }
}

/// Whether `text` has `known`'s last bytes where `known` would end in it: a quick
/// rejection before the full comparison (schemas of different tables share their
/// first hundred bytes or so and differ at the end, where the name is).
#[inline]
fn ends_alike(text: &[u8], known: &[u8]) -> bool {
    const TAIL: usize = 32;
    let start = known.len().saturating_sub(TAIL);
    text.get(start..known.len()).is_some_and(|tail| tail == &known[start..])
}

/// Appends `bytes[from..to]` to `text` if it is valid UTF-8; the error gives the first
/// invalid byte's offset in `bytes`. Checking the pieces apart is checking the whole
/// line: every piece boundary is next to a schema's ASCII `{` or `}`.
fn push_checked(text: &mut String, bytes: &[u8], from: usize, to: usize) -> Result<(), NotUtf8> {
    match std::str::from_utf8(&bytes[from..to]) {
        Ok(piece) => {
            text.push_str(piece);
            Ok(())
        }
        Err(error) => Err(NotUtf8 { valid_up_to: from + error.valid_up_to() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"t.Envelope"}"#;
    const KEY_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"t.Key"}"#;

    fn elider(schemas: &[&str]) -> SchemaElider {
        let known = KnownSchemas::default();
        for schema in schemas {
            known.intern(schema);
        }
        SchemaElider::new(known)
    }

    fn filled(elider: &mut SchemaElider, text: &str) -> Line {
        let mut line = Line::default();
        elider.fill(&mut line, text.as_bytes()).expect("utf-8");
        assert_eq!(line.full(), text, "the full line is the line read");
        let mut from_text = Line::default();
        elider.fill_text(&mut from_text, text).expect("text");
        assert_eq!(from_text, line, "text fills the same line as its bytes");
        line
    }

    #[test]
    fn keyed_line_leaves_out_both_schemas() {
        let mut elider = elider(&[SCHEMA, KEY_SCHEMA]);
        let text = format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":1}}}},"value":{{"schema":{SCHEMA},"payload":{{"op":"c"}}}}}}"#);
        let line = filled(&mut elider, &text);
        assert_eq!(line.text(), r#"{"key":{"schema":,"payload":{"id":1}},"value":{"schema":,"payload":{"op":"c"}}}"#);
        let schemas: Vec<&str> = line.elided().iter().map(|e| &*e.schema).collect();
        assert_eq!(schemas, [KEY_SCHEMA, SCHEMA]);
        assert_eq!(line.elided()[0].at, KEYED_PREFIX.len());
    }

    #[test]
    fn value_line_and_unknown_schemas() {
        let mut elider = elider(&[SCHEMA]);
        let line = filled(&mut elider, &format!(r#"{{"schema":{SCHEMA},"payload":{{"op":"c"}}}}"#));
        assert_eq!((line.text(), line.elided().len()), (r#"{"schema":,"payload":{"op":"c"}}"#, 1));
        // A key schema nobody bound stays; the value's is still left out.
        let text = format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":1}}}},"value":{{"schema":{SCHEMA},"payload":null}}}}"#);
        let line = filled(&mut elider, &text);
        assert_eq!(line.elided().len(), 1);
        assert!(line.text().contains(KEY_SCHEMA));
        // Other layouts, a changed schema, whitespace: read as they are.
        for text in [
            format!(r#"{{"payload":{{"op":"c"}},"schema":{SCHEMA}}}"#),
            format!(r#"{{"schema":{},"payload":{{}}}}"#, SCHEMA.replace("int32", "int64")),
            format!(r#" {{"schema":{SCHEMA},"payload":{{}}}}"#),
            r#"{"op":"c"}"#.to_string(),
        ] {
            let line = filled(&mut elider, &text);
            assert!(line.elided().is_empty(), "{text}");
        }
    }

    /// The layout with whitespace between its tokens (as Python's `json.dumps` writes
    /// it): the schemas are left out where they start, after the whitespace.
    #[test]
    fn spaced_lines_leave_out_their_schemas_too() {
        let mut elider = elider(&[SCHEMA, KEY_SCHEMA]);
        let text = format!("{{\"key\": {{ \"schema\" :\n{KEY_SCHEMA}, \"payload\": {{\"id\": 1}}}}, \"value\": {{\"schema\":\t{SCHEMA}, \"payload\": null}}}}");
        let line = filled(&mut elider, &text);
        let schemas: Vec<&str> = line.elided().iter().map(|e| &*e.schema).collect();
        assert_eq!(schemas, [KEY_SCHEMA, SCHEMA], "{}", line.text());
        assert_eq!(&text[line.elided()[0].at..][..KEY_SCHEMA.len()], KEY_SCHEMA);
        let line = filled(&mut elider, &format!("{{\"schema\": {SCHEMA}, \"payload\": {{}}}}"));
        assert_eq!(line.text(), r#"{"schema": , "payload": {}}"#);
        let line = filled(&mut elider, &format!("{{\"key\":{{\"schema\": {KEY_SCHEMA},\"payload\":1}},\"value\":{{\"schema\": {SCHEMA},\"payload\":{{}}}}}}"));
        assert_eq!(line.elided().len(), 2, "{}", line.text());
        let mut appended = Line::default();
        elider.append_envelope(&mut appended, format!("{{ \"schema\": {SCHEMA}}}").as_bytes()).expect("utf-8");
        assert_eq!((appended.text(), appended.elided().len()), (r#"{ "schema": }"#, 1));
    }

    #[test]
    fn a_schema_added_later_is_seen_by_the_elider() {
        let known = KnownSchemas::default();
        let mut elider = SchemaElider::new(known.clone());
        let text = format!(r#"{{"schema":{SCHEMA},"payload":{{}}}}"#);
        assert!(filled(&mut elider, &text).elided().is_empty());
        let shared = known.intern(SCHEMA);
        let line = filled(&mut elider, &text);
        assert!(Arc::ptr_eq(&line.elided()[0].schema, &shared), "the line refers to the shared text");
        assert!(Arc::ptr_eq(&known.intern(SCHEMA), &shared), "interned once");
    }

    #[test]
    fn short_or_odd_schemas_are_not_shared() {
        let known = KnownSchemas::default();
        for schema in ["{}", r#""a string schema that is long enough to count""#, r#"{"type":"string","optional":false} "#] {
            known.intern(schema);
        }
        assert_eq!(known.generation(), 0);
    }

    #[test]
    fn invalid_utf8_is_found_at_its_offset_in_the_line_read() {
        let mut elider = elider(&[SCHEMA, KEY_SCHEMA]);
        let mut bytes = format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":"é"}}}},"value":{{"schema":{SCHEMA},"payload":{{"a":"é"}}}}}}"#).into_bytes();
        let whole = |bytes: &[u8]| std::str::from_utf8(bytes).map(|_| ()).map_err(|e| NotUtf8 { valid_up_to: e.valid_up_to() });
        let mut line = Line::default();
        assert_eq!(elider.fill(&mut line, &bytes), Ok(()));
        let positions: Vec<usize> = bytes.windows(2).enumerate().filter(|(_, w)| w == b"\xc3\xa9").map(|(i, _)| i).collect();
        for position in positions {
            let mut broken = bytes.clone();
            broken[position + 1] = b'x';
            assert_eq!(elider.fill(&mut line, &broken), whole(&broken));
            assert!(whole(&broken).is_err());
        }
        bytes.insert(0, 0xff);
        assert_eq!(elider.fill(&mut line, &bytes), Err(NotUtf8 { valid_up_to: 0 }));
    }

    #[test]
    fn schema_text_inside_a_key_payload_is_left_out_exactly_where_it_is() {
        // The search for the value's schema can land inside a key payload; the
        // substitution is still exact (the decoder checks where the schema was).
        let mut elider = elider(&[SCHEMA]);
        let text = format!(r#"{{"key":{{"schema":{{"type":"string"}},"payload":{{"id":1,"value":{{"schema":{SCHEMA}}}}}}},"value":null}}"#);
        let line = filled(&mut elider, &text);
        assert_eq!(line.elided().len(), 1);
        assert!(line.text().ends_with(r#","value":{"schema":}}},"value":null}"#), "{}", line.text());
    }
}
