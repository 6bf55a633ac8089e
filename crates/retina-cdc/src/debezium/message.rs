//! One line of a Debezium JSON stream: a change event, a transaction metadata message
//! (BEGIN / END) or a tombstone, bare or as `{"schema":…,"payload":…}`, and either of
//! those optionally wrapped as `{"key":…,"value":…}`.
//!
//! Images stay raw JSON here: they are decoded once the table (and so its column
//! types) is known.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::elision::Line;
use super::envelope;
use super::scan;
use super::fields::{Block, Fields, SourceFields};
use super::image::Image;
use super::not_a_change;
use crate::error::DecodeError;
use crate::position::SourceOrder;

/// Debezium's `op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Create,
    Update,
    Delete,
    /// Snapshot read: a row that existed when the connector started.
    Read,
    Truncate,
}

/// The `transaction` block of a change event.
#[derive(Clone, Debug, PartialEq)]
pub struct TransactionBlock {
    pub id: String,
    pub total_order: u64,
    pub data_collection_order: Option<u64>,
}

/// A decoded change event; images are still raw JSON.
#[derive(Debug)]
pub struct ChangeEvent<'a> {
    pub op: Op,
    /// `<schema>.<table>` after the source block (PostgreSQL schema, else MySQL db).
    pub table: String,
    pub before: Option<Image<'a>>,
    pub after: Option<Image<'a>>,
    /// The value (envelope) schema's JSON text when the stream carries schemas.
    pub schema: Option<&'a str>,
    /// The message key's payload, and its schema's JSON text, when the line carries a key.
    pub key: Option<&'a RawValue>,
    pub key_schema: Option<&'a str>,
    pub transaction: Option<TransactionBlock>,
    /// A snapshot row (`op: r`, or `op: c` marked `snapshot: "true"` as Debezium 1.1
    /// wrote them; `op` is then [`Op::Read`]): the source's current state of the row,
    /// applied as an upsert. Its source position is the snapshot's, shared by every
    /// row of it, so it has no `order`.
    pub snapshot: bool,
    /// The source's own transaction id (PostgreSQL `txId`, MySQL `gtid` or binlog
    /// `file:pos`), for grouping streams without transaction metadata.
    pub source_transaction: Option<String>,
    pub order: Option<SourceOrder>,
}

/// One message of the stream.
#[derive(Debug)]
pub enum Message<'a> {
    /// A null value (Kafka compaction tombstone): carries nothing to apply.
    Tombstone,
    Begin { id: String },
    End { id: String, event_count: u64, data_collections: Vec<(String, u64)> },
    Change(Box<ChangeEvent<'a>>),
}

#[derive(Deserialize)]
struct DataCollection<'a> {
    #[serde(borrow)]
    data_collection: Cow<'a, str>,
    event_count: u64,
}

/// serde_json counts lines inside the message; the stream position is named by the
/// caller, so only the column is kept.
/// The fields of a JSON object. serde reads a struct from a JSON array too (its
/// elements as the fields in order), so `[{…event…}]` or `[1]` decoded as a message
/// of no fields and was dropped without a word: only an object is read.
fn fields_of(text: &str) -> Result<Fields<'_>, DecodeError> {
    if text.trim_start().starts_with('[') {
        return Err(DecodeError::MalformedJson("a JSON array, where a message is a JSON object".into()));
    }
    serde_json::from_str(text).map_err(malformed)
}

fn malformed(error: serde_json::Error) -> DecodeError {
    let text = error.to_string();
    let reason = text.rsplit_once(" at line ").map_or(text.as_str(), |(reason, _)| reason);
    DecodeError::MalformedJson(format!("{reason} at column {}", error.column()))
}

/// A schema that is present and not `null`, remembered so later lines with the same
/// text skip re-reading it (see [`envelope`]).
fn known_schema(raw: Option<&RawValue>) -> Option<&str> {
    let schema = raw.filter(|s| s.get() != "null")?.get();
    envelope::remember(schema);
    Some(schema)
}

fn is_null(raw: Option<&str>) -> bool {
    raw.is_none_or(|r| r == "null")
}

fn shown(text: &str) -> String {
    if text.len() > 40 { format!("{}…", &text[..text.floor_char_boundary(40)]) } else { text.to_string() }
}

/// A string field (borrowed when it has no escapes). Escapes are looked for first:
/// a failed borrowing parse builds a formatted error, and Debezium's
/// `source.sequence` (`"[\"lsn\",\"lsn\"]"`) has escapes on every line (measured:
/// 8% of a decode thread's time went to those discarded errors).
fn string<'a>(raw: &'a str, field: &str) -> Result<Cow<'a, str>, DecodeError> {
    if let Some(text) = unescaped_string(raw) {
        return Ok(Cow::Borrowed(text));
    }
    serde_json::from_str::<String>(raw).map(Cow::Owned).map_err(|_| DecodeError::mistyped(field, "a string", shown(raw)))
}

/// The text of a JSON string that has no escapes, straight from its raw form: a raw
/// value is valid JSON, so quotes around text without a backslash are the whole
/// string. Cheaper than a parse for the short strings of every source block.
fn unescaped_string(raw: &str) -> Option<&str> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    memchr::memchr(b'\\', inner.as_bytes()).is_none().then_some(inner)
}

fn required<'a>(raw: Option<&'a str>, field: &str) -> Result<&'a str, DecodeError> {
    match raw {
        Some(raw) if raw != "null" => Ok(raw),
        _ => Err(DecodeError::missing(field)),
    }
}

fn unsigned(raw: &str, field: &str) -> Result<u64, DecodeError> {
    let text = raw;
    // Plain digits (what a valid JSON number without sign, fraction or exponent is)
    // parse without setting up a deserializer.
    if text.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(number) = text.parse::<u64>() {
            return Ok(number);
        }
    }
    serde_json::from_str::<u64>(text).map_err(|_| DecodeError::mistyped(field, "a non-negative integer", shown(raw)))
}

fn optional_unsigned(raw: Option<&str>, field: &str) -> Result<Option<u64>, DecodeError> {
    match raw {
        Some(raw) if raw != "null" => unsigned(raw, field).map(Some),
        _ => Ok(None),
    }
}

/// `source.txId`: a number (PostgreSQL, Db2, Informix) or text (Oracle's hex
/// transaction id, `"0a001900f1200000"`); an empty text is no id.
fn transaction_id(raw: Option<&str>) -> Result<Option<String>, DecodeError> {
    const FIELD: &str = "source.txId";
    match raw {
        None | Some("null") => Ok(None),
        Some(raw) if raw.starts_with('"') => {
            let text = string(raw, FIELD)?;
            Ok((!text.is_empty()).then(|| text.into_owned()))
        }
        Some(raw) => unsigned(raw, FIELD)
            .map(|id| Some(id.to_string()))
            .map_err(|_| DecodeError::mistyped(FIELD, "a non-negative integer or a string", shown(raw))),
    }
}

/// The part of a transaction id that names the transaction. Debezium's PostgreSQL
/// connector writes `txId:LSN` with the LSN of the message at hand, so the BEGIN,
/// each event and the END of one transaction carry different ids (its
/// `PostgresTransactionMonitor`); the xid before the colon is the transaction.
/// Other connectors' ids are not two runs of digits (MySQL's `uuid:n` GTIDs and
/// `file=…,pos=…`, SQL Server's and Db2's three-part LSNs, Oracle's hex ids) and
/// stay whole. Informix 2.6+ writes `txId:commitLSN`, the same on all three, and is
/// keyed by its txId too: exact while its transactions arrive one after another (a
/// file), but a txId reused while an earlier transaction is still being reassembled
/// from Kafka topics would meet it; telling the two apart needs the connector name,
/// which BEGIN and END records do not carry. The key is always a prefix of `id`.
pub fn transaction_key(id: &str) -> &str {
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    match id.split_once(':') {
        Some((xid, lsn)) if digits(xid) && digits(lsn) => xid,
        _ => id,
    }
}

/// Decodes one line. A message without a `source` block is an error (see
/// [`decode_line_with`]).
pub fn decode_line(line: &str) -> Result<Message<'_>, DecodeError> {
    decode_line_with(line, None)
}

/// Decodes one line; a change event without a `source` block belongs to
/// `default_table` (`--table`), else to the table its wrapper names (what a Kafka
/// source reads from the topic name), and without either is an error saying so. An empty line
/// and the JSON `null` (how tools write a Kafka tombstone's null value) are tombstones.
pub fn decode_line_with<'a>(line: &'a str, default_table: Option<&str>) -> Result<Message<'a>, DecodeError> {
    decode_full_line(line, default_table).map_err(|error| not_a_change::explain(line, error))
}

fn decode_full_line<'a>(line: &'a str, default_table: Option<&str>) -> Result<Message<'a>, DecodeError> {
    let trimmed = line.trim();
    if trimmed.is_empty() || trimmed == "null" {
        return Ok(Message::Tombstone);
    }
    if let Some(decoded) = envelope::split_line(trimmed, &[]).and_then(|parts| decode_parts(parts, default_table)) {
        return decoded;
    }
    // A bare payload (what the serde path below reads without a wrapper).
    if let Some(payload) = scan::payload(trimmed) {
        return decode_payload(payload, None, None, None, default_table);
    }
    let fields = fields_of(line)?;
    let wrapped = (fields.key.is_some() || fields.value.is_some()) && fields.op.is_none() && fields.status.is_none();
    if !wrapped {
        return decode_value(fields, None, None, default_table);
    }
    // `--table` / `table=` names the table before the transport does.
    let hint = fields.table.filter(|t| t.get() != "null").map(|t| string(t.get(), "table")).transpose()?;
    let default_table = default_table.or(hint.as_deref());
    let Some(value) = fields.value.filter(|v| v.get() != "null") else {
        return Ok(Message::Tombstone);
    };
    let (key, key_schema) = match fields.key.filter(|k| k.get() != "null") {
        None => (None, None),
        Some(key) => {
            let key_fields = fields_of(key.get())?;
            match key_fields.payload {
                Some(payload) if key_fields.schema.is_some() => (Some(payload), known_schema(key_fields.schema)),
                // `{"payload":{…}}` without a schema member (TiCDC with
                // debezium-disable-schema): the wrapper, not a key column named
                // `payload`, since a key column holds no object.
                Some(payload) if payload.get().trim_start().starts_with('{') => (Some(payload), None),
                _ => (Some(key), None),
            }
        }
    };
    let inner = fields_of(value.get())?;
    decode_value(inner, key, key_schema, default_table)
}

/// Decodes a line read with known schemas left out (see [`Line`]); `None` when it
/// takes the full parse, which needs the full line (`line.full()`): a layout the
/// envelope's fast path does not read, or a payload that does not parse there (the
/// full parse gives the error).
pub fn decode_elided<'a>(line: &'a Line, default_table: Option<&str>) -> Option<Result<Message<'a>, DecodeError>> {
    if line.elided().is_empty() {
        return Some(decode_line_with(line.text(), default_table));
    }
    // Nothing is left out of a line that starts with whitespace, so only its end may be
    // trimmed without moving where the schemas were.
    let decoded = envelope::split_line(line.text().trim_end(), line.elided()).and_then(|parts| decode_parts(parts, default_table))?;
    // An error is explained from the whole line, as `decode_line_with` explains it.
    Some(decoded.map_err(|error| not_a_change::explain(&line.full(), error)))
}

/// The envelope's payload decoded; `None` when it does not parse on the fast path.
fn decode_parts<'a>(parts: envelope::Parts<'a>, default_table: Option<&str>) -> Option<Result<Message<'a>, DecodeError>> {
    let payload = scan::payload(parts.payload).or_else(|| serde_json::from_str::<Fields>(parts.payload).ok())?;
    let (key, key_schema) = match parts.key {
        Some((schema, key)) => (Some(key), Some(schema)),
        None => (None, None),
    };
    Some(decode_payload(payload, Some(parts.schema), key, key_schema, default_table.or(parts.table)))
}

/// Decodes a value: `{"schema":…,"payload":…}` or a bare payload.
fn decode_value<'a>(
    fields: Fields<'a>,
    key: Option<&'a RawValue>,
    key_schema: Option<&'a str>,
    default_table: Option<&str>,
) -> Result<Message<'a>, DecodeError> {
    if fields.op.is_none() && fields.status.is_none() && fields.payload.is_some() {
        let Some(payload) = fields.payload.filter(|p| p.get() != "null") else {
            return Ok(Message::Tombstone);
        };
        let schema = known_schema(fields.schema);
        let inner = fields_of(payload.get())?;
        return decode_payload(inner, schema, key, key_schema, default_table);
    }
    decode_payload(fields, None, key, key_schema, default_table)
}

fn decode_payload<'a>(
    fields: Fields<'a>,
    schema: Option<&'a str>,
    key: Option<&'a RawValue>,
    key_schema: Option<&'a str>,
    default_table: Option<&str>,
) -> Result<Message<'a>, DecodeError> {
    if let Some(status) = fields.status.filter(|s| *s != "null") {
        return decode_transaction_message(&fields, status);
    }
    let op = string(required(fields.op, "op")?, "op")?;
    let connector = match &fields.source {
        Some(Block::Object(source)) => source.connector.and_then(|raw| unescaped_string(raw)),
        _ => None,
    };
    if connector == Some("mongodb") {
        return Err(DecodeError::bad_value("source.connector", super::not_a_change::MONGODB_UNSUPPORTED));
    }
    let op = match op.as_ref() {
        "c" => Op::Create,
        "u" => Op::Update,
        "d" => Op::Delete,
        "r" => Op::Read,
        "t" => Op::Truncate,
        // TiCDC's watermarks (`enable-tidb-extension`): it writes them into the data
        // topics among the row changes, and they carry no row, so nothing is applied.
        "m" if connector == Some("TiCDC") => return Ok(Message::Tombstone),
        other => return Err(DecodeError::UnknownOp { field: "op".into(), op: other.to_string() }),
    };
    let source = match fields.source {
        Some(Block::Object(source)) => Some(source),
        None | Some(Block::Null) => None,
        Some(Block::Other(other)) => return Err(DecodeError::mistyped("source", "an object", other)),
    };
    let table = match (&source, default_table) {
        (Some(source), _) => {
            let table_name = string(required(source.table, "source.table")?, "source.table")?;
            let present = |raw: Option<&'a str>| raw.filter(|r| *r != "null");
            let namespace = match (present(source.schema), present(source.db), present(source.keyspace)) {
                (Some(schema), _, _) => string(schema, "source.schema")?,
                // Vitess: `db` is empty, the keyspace is the namespace.
                (_, db, Some(keyspace)) if db.is_none_or(|db| db == "\"\"") => string(keyspace, "source.keyspace")?,
                (_, db, _) => string(required(db, "source.db")?, "source.db")?,
            };
            let mut table = String::with_capacity(namespace.len() + 1 + table_name.len());
            table.push_str(&namespace);
            table.push('.');
            table.push_str(&table_name);
            table
        }
        (None, Some(table)) => table.to_string(),
        (None, None) => return Err(DecodeError::NoSource),
    };
    let transaction = match fields.transaction {
        None | Some(Block::Null) => None,
        Some(Block::Other(other)) => return Err(DecodeError::mistyped("transaction", "an object", other)),
        Some(Block::Object(block)) => {
            Some(TransactionBlock {
                id: transaction_key(&string(required(block.id, "transaction.id")?, "transaction.id")?).to_owned(),
                total_order: unsigned(required(block.total_order, "transaction.total_order")?, "transaction.total_order")?,
                data_collection_order: optional_unsigned(block.data_collection_order, "transaction.data_collection_order")?,
            })
        }
    };
    let snapshot = match &source {
        Some(source) => is_snapshot(source.snapshot)?,
        None => false,
    };
    let (source_transaction, order) = match &source {
        Some(source) => source_identity(source, transaction.is_none())?,
        None => (None, None),
    };
    // Snapshot rows share the snapshot's position (and incremental-snapshot reads the
    // position streaming had reached): it orders nothing among them, and must not make
    // them look like redeliveries of each other or of a streamed change.
    // A snapshot marker makes a row an upsert only when it is one (`c` in Debezium
    // 1.1): an update or delete keeps its op (BemiDB's captured streams mark deletes).
    let (op, order) = match op {
        Op::Read => (Op::Read, None),
        Op::Create if snapshot => (Op::Read, None),
        _ if snapshot => (op, None),
        _ => (op, order),
    };
    let snapshot = op == Op::Read;
    let before = fields.before;
    let after = fields.after;
    match op {
        Op::Create | Op::Read | Op::Update if after.is_none() => return Err(DecodeError::missing("after")),
        _ => {}
    }
    Ok(Message::Change(Box::new(ChangeEvent {
        op,
        table,
        before,
        after,
        schema,
        key,
        key_schema,
        transaction,
        snapshot,
        source_transaction,
        order,
    })))
}

/// Whether `source.snapshot` marks a snapshot row: `"true"`, `"first"`, `"last"`,
/// `"first_in_data_collection"`, `"last_in_data_collection"`, `"incremental"` (or the
/// boolean `true` of old versions); `"false"`, `null` or absent do not.
fn is_snapshot(raw: Option<&str>) -> Result<bool, DecodeError> {
    let Some(raw) = raw.filter(|r| !is_null(Some(r))) else { return Ok(false) };
    match raw {
        "true" => return Ok(true),
        "false" => return Ok(false),
        _ => {}
    }
    Ok(string(raw, "source.snapshot")? != "false")
}

fn decode_transaction_message<'a>(fields: &Fields<'a>, status: &str) -> Result<Message<'a>, DecodeError> {
    let id = transaction_key(&string(required(fields.id, "id")?, "id")?).to_owned();
    match string(status, "status")?.as_ref() {
        "BEGIN" => Ok(Message::Begin { id }),
        "END" => {
            let event_count = unsigned(required(fields.event_count, "event_count")?, "event_count")?;
            let data_collections = match fields.data_collections.filter(|d| *d != "null") {
                None => Vec::new(),
                Some(raw) => serde_json::from_str::<Vec<DataCollection>>(raw)
                    .map_err(|_| DecodeError::mistyped("data_collections", "[{data_collection, event_count}]", shown(raw)))?
                    .into_iter()
                    .map(|c| (c.data_collection.into_owned(), c.event_count))
                    .collect(),
            };
            Ok(Message::End { id, event_count, data_collections })
        }
        other => Err(DecodeError::mistyped("status", "BEGIN or END", other.to_string())),
    }
}

/// `["123","456"]` (either may be `null`, read as 0) without a JSON parse: this runs
/// for every PostgreSQL event.
fn parse_sequence(text: &str) -> Option<(u64, u64)> {
    parse_sequence_quoted(text, "\"")
}

/// [`parse_sequence`] with the array's strings quoted by `quote`: `\"` reads the
/// sequence straight from its raw JSON string (`"[\"123\",\"456\"]"`), without
/// unescaping it into a new string first.
fn parse_sequence_quoted(text: &str, quote: &str) -> Option<(u64, u64)> {
    let inner = text.trim().strip_prefix('[')?.strip_suffix(']')?;
    let (first, second) = inner.split_once(',')?;
    let lsn = |part: &str| -> Option<u64> {
        let part = part.trim();
        if part == "null" {
            return Some(0);
        }
        let digits = part.strip_prefix(quote)?.strip_suffix(quote)?;
        digits.bytes().all(|b| b.is_ascii_digit()).then(|| digits.parse().ok()).flatten()
    };
    Some((lsn(first)?, lsn(second)?))
}

/// Whether a PostgreSQL sequence is Flink CDC's for a snapshot record: two elements,
/// each null, an LSN or Long.MIN_VALUE, and one of them Long.MIN_VALUE. Such a record
/// has no position in the log.
fn has_no_position(text: &str) -> bool {
    let Some(inner) = text.trim().strip_prefix('[').and_then(|t| t.strip_suffix(']')) else { return false };
    let min = format!("\"{}\"", i64::MIN);
    let elements: Vec<&str> = inner.split(',').map(str::trim).collect();
    let lsn = |e: &str| e.strip_prefix('"').and_then(|e| e.strip_suffix('"')).is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()));
    elements.len() == 2 && elements.contains(&min.as_str()) && elements.iter().all(|&e| e == min || e == "null" || lsn(e))
}

/// A PostgreSQL `source.sequence` read from its raw JSON string when its only
/// escapes are the quotes of its array (as Debezium writes it on every event);
/// `None` sends the caller to the general path.
fn raw_sequence(raw: &str) -> Option<(u64, u64)> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let bytes = inner.as_bytes();
    memchr::memchr_iter(b'\\', bytes).all(|at| bytes.get(at + 1) == Some(&b'"')).then(|| parse_sequence_quoted(inner, "\\\"")).flatten()
}

/// The source transaction id and monotone source order of an event (see
/// [`SourceOrder`] for why plain LSNs are not used).
fn source_identity(source: &SourceFields, want_transaction_id: bool) -> Result<(Option<String>, Option<SourceOrder>), DecodeError> {
    let connector = match source.connector.filter(|c| !is_null(Some(c))) {
        Some(raw) => Some(string(raw, "source.connector")?),
        None => None,
    };
    let tx_id = transaction_id(source.tx_id)?;
    let gtid = match source.gtid.filter(|g| !is_null(Some(g))) {
        Some(raw) => Some(string(raw, "source.gtid")?.into_owned()),
        None => None,
    };
    let file = match source.file.filter(|f| !is_null(Some(f))) {
        Some(raw) => Some(string(raw, "source.file")?),
        None => None,
    };
    let pos = optional_unsigned(source.pos, "source.pos")?;
    let row = optional_unsigned(source.row, "source.row")?.unwrap_or(0);
    let mut order = None;
    if let Some(sequence) = source.sequence.filter(|s| !is_null(Some(s))) {
        // PostgreSQL's: a string holding a JSON array ["<last commit lsn>", "<lsn>"]
        // (old versions name no connector). Another connector's own sequence
        // (Spanner's record number) gives no order.
        let postgresql = connector.as_deref().is_none_or(|c| c == "postgresql");
        let parsed = match raw_sequence(sequence) {
            Some(parsed) => Some(parsed),
            None => {
                let text = string(sequence, "source.sequence")?;
                match parse_sequence(&text) {
                    Some(parsed) => Some(parsed),
                    None if !postgresql || has_no_position(&text) => None,
                    None if text.contains("\"-") => {
                        return Err(DecodeError::mistyped("source.sequence", "LSNs (a negative one is no position)", text.to_string()))
                    }
                    None => return Err(DecodeError::mistyped("source.sequence", "[\"<lsn>\", \"<lsn>\"]", text.to_string())),
                }
            }
        };
        order = parsed.map(|(last_commit, lsn)| SourceOrder(last_commit, lsn, 0));
    } else if let (Some(file), Some(pos)) = (&file, pos) {
        if connector.as_deref().is_none_or(|c| c == "mysql") {
            let number = file.rsplit('.').next().and_then(|n| n.parse::<u64>().ok());
            order = number.map(|n| SourceOrder(n, pos, row));
        }
    }
    if !want_transaction_id {
        return Ok((None, order));
    }
    let source_transaction = match (tx_id, gtid, &file, pos) {
        (Some(tx), _, _, _) => Some(tx),
        (None, Some(gtid), _, _) => Some(gtid),
        (None, None, Some(file), Some(pos)) => Some(format!("{file}:{pos}")),
        _ => match source.server_transaction_id.filter(|t| !is_null(Some(t))) {
            Some(raw) => Some(string(raw, "source.server_transaction_id")?.into_owned()),
            None => None,
        },
    };
    Ok((source_transaction, order))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PG_UPDATE: &str = r#"{"before":null,"after":{"id":1,"name":"x"},"source":{"version":"2.5","connector":"postgresql","name":"db","ts_ms":1,"snapshot":"false","db":"inventory","sequence":"[\"100\",\"120\"]","schema":"public","table":"customers","txId":571,"lsn":120,"xmin":null},"op":"u","ts_ms":2,"transaction":{"id":"571:120","total_order":2,"data_collection_order":1}}"#;

    fn change(message: Message<'_>) -> ChangeEvent<'_> {
        match message {
            Message::Change(event) => *event,
            other => panic!("expected a change, got {other:?}"),
        }
    }

    #[test]
    fn bare_postgres_update() {
        let event = change(decode_line(PG_UPDATE).expect("decodes"));
        assert_eq!(event.op, Op::Update);
        assert_eq!(event.table, "public.customers");
        let after = event.after.as_ref().expect("after");
        assert_eq!(after.fields.iter().map(|(n, _)| n.as_ref()).collect::<Vec<_>>(), ["id", "name"]);
        assert!(event.before.is_none());
        assert_eq!(event.transaction, Some(TransactionBlock { id: "571".into(), total_order: 2, data_collection_order: Some(1) }));
        assert_eq!(event.source_transaction, None, "not needed when the event has a transaction block");
        assert_eq!(event.order, Some(SourceOrder(100, 120, 0)));
        let without_block = PG_UPDATE.replace(r#""transaction":{"id":"571:120","total_order":2,"data_collection_order":1}"#, r#""transaction":null"#);
        let event = change(decode_line(&without_block).expect("decodes"));
        assert_eq!(event.source_transaction.as_deref(), Some("571"));
        // Oracle's transaction ids are hex text.
        let oracle = r#"{"before":null,"after":{"ID":1},"source":{"connector":"oracle","schema":"U","table":"T","txId":"0a001900f1200000","scn":"1"},"op":"c"}"#;
        let event = change(decode_line(oracle).expect("decodes"));
        assert_eq!(event.source_transaction.as_deref(), Some("0a001900f1200000"));
        let without_id = oracle.replace("0a001900f1200000", "");
        let event = change(decode_line(&without_id).expect("decodes"));
        assert_eq!(event.source_transaction, None, "an empty id is none");
    }

    /// Escaped strings decode to their text, borrowed or not.
    #[test]
    fn escaped_string_fields_decode_to_their_text() {
        let escaped = PG_UPDATE.replace(r#""table":"customers""#, r#""table":"cust\u006fmers""#).replace(r#""op":"u""#, r#""op":"\u0075""#);
        let event = change(decode_line(&escaped).expect("decodes"));
        assert_eq!(event.table, "public.customers");
        assert_eq!(event.op, Op::Update);
        assert_eq!(event.order, Some(SourceOrder(100, 120, 0)), "the escaped sequence still parses");
        let mistyped = PG_UPDATE.replace(r#""op":"u""#, r#""op":"\x""#);
        assert!(decode_line(&mistyped).is_err(), "an invalid escape is an error, not a borrowed string");
    }

    #[test]
    fn schema_payload_and_key_value_wrapping() {
        let with_schema = format!(r#"{{"schema":{{"type":"struct","fields":[]}},"payload":{PG_UPDATE}}}"#);
        let event = change(decode_line(&with_schema).expect("schema+payload"));
        assert!(event.schema.is_some());
        let wrapped = format!(r#"{{"key":{{"schema":{{"type":"struct","fields":[{{"type":"int32","field":"id"}}]}},"payload":{{"id":1}}}},"value":{with_schema}}}"#);
        let event = change(decode_line(&wrapped).expect("key+value"));
        assert_eq!(event.key.map(|k| k.get()), Some(r#"{"id":1}"#));
        assert!(event.key_schema.is_some());
        // TiCDC writes the key wrapper without a schema member.
        let unschemed = format!(r#"{{"key":{{"payload":{{"id":1}}}},"value":{{"payload":{PG_UPDATE}}}}}"#);
        assert_eq!(change(decode_line(&unschemed).expect("wrapped key")).key.map(|k| k.get()), Some(r#"{"id":1}"#));
        let named_payload = format!(r#"{{"key":{{"payload":7}},"value":{PG_UPDATE}}}"#);
        assert_eq!(change(decode_line(&named_payload).expect("key column payload")).key.map(|k| k.get()), Some(r#"{"payload":7}"#));
        let bare_key = format!(r#"{{"key":{{"id":1}},"value":{PG_UPDATE}}}"#);
        // TiCDC's watermark among its row changes: nothing to apply.
        let watermark = r#"{"payload":{"source":{"connector":"TiCDC","db":"","table":"","commit_ts":3},"op":"m","ts_ms":1,"transaction":null}}"#;
        assert!(matches!(decode_line(watermark), Ok(Message::Tombstone)));
        let mongo = r#"{"before":null,"after":null,"source":{"connector":"mongodb","db":"d","collection":"c"},"op":"d","ts_ms":1}"#;
        let error = decode_line(mongo).map(|_| ()).expect_err("mongo").to_string();
        assert!(error.contains("MongoDB events are not supported"), "{error}");
        assert_eq!(change(decode_line(&bare_key).expect("bare key")).key.map(|k| k.get()), Some(r#"{"id":1}"#));
    }

    /// serde read a struct from a JSON array: `[{…event…}]` and `[1]` decoded as a
    /// message of no fields and were dropped without a word.
    #[test]
    fn a_json_array_is_an_error_not_a_message_of_no_fields() {
        for line in [format!("[{PG_UPDATE}]"), "[1]".to_string(), "[]".to_string(), format!(r#"{{"key":{{"id":1}},"value":[{PG_UPDATE}]}}"#)] {
            let error = decode_line(&line).map(|_| ()).expect_err("an array is no message").to_string();
            assert!(error.contains("JSON array"), "{line}: {error}");
        }
    }

    #[test]
    fn tombstones_and_transaction_messages() {
        assert!(matches!(decode_line(r#"{"key":{"id":1},"value":null}"#), Ok(Message::Tombstone)));
        assert!(matches!(decode_line(r#"{"schema":null,"payload":null}"#), Ok(Message::Tombstone)));
        assert!(matches!(decode_line(r#"{"status":"BEGIN","id":"5:9","event_count":null,"data_collections":null}"#), Ok(Message::Begin { id }) if id == "5"));
        // PostgreSQL's END carries the commit's LSN, not the BEGIN's: the same transaction.
        let end = decode_line(r#"{"status":"END","id":"5:12","event_count":2,"data_collections":[{"data_collection":"s.a","event_count":2}]}"#);
        match end.expect("end") {
            Message::End { id, event_count, data_collections } => {
                assert_eq!((id.as_str(), event_count), ("5", 2));
                assert_eq!(data_collections, vec![("s.a".to_string(), 2)]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn transaction_keys_drop_only_a_postgresql_lsn() {
        for (id, key) in [
            ("571:33461528", "571"),
            ("571", "571"),
            ("3E11FA47-71CA-11E1-9E33-C80AA9429562:23", "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"),
            ("mysql-bin.000003:154", "mysql-bin.000003:154"),
            ("00000025:00000098:0003", "00000025:00000098:0003"),
            ("0a001900f1200000", "0a001900f1200000"),
            (":12", ":12"),
            ("12:", "12:"),
        ] {
            assert_eq!(transaction_key(id), key, "{id}");
        }
    }

    /// Vitess (Debezium's docs' example): `db` is empty and `keyspace` names the
    /// namespace; Spanner's `sequence` is a record number, not PostgreSQL's LSN pair.
    #[test]
    fn vitess_keyspaces_and_spanner_sequences_are_read() {
        let vitess = r#"{"before":null,"after":{"id":1004},"source":{"version":"3.0.0.Final","connector":"vitess","name":"c","ts_ms":1,"snapshot":"false","db":"","sequence":null,"keyspace":"commerce","table":"customers","shard":"-80","vgtid":"[]"},"op":"c","ts_ms":2,"transaction":null}"#;
        assert_eq!(change(decode_line(vitess).expect("vitess")).table, "commerce.customers");
        let named = vitess.replace(r#""db":"""#, r#""db":"other""#);
        assert_eq!(change(decode_line(&named).expect("a db")).table, "other.customers", "a db that is named wins");
        let spanner = r#"{"before":null,"after":{"id":1},"source":{"version":"3.0.0.Final","connector":"spanner","name":"c","ts_ms":1,"snapshot":"false","db":"database","sequence":"1","table":"Users","server_transaction_id":"t"},"op":"c","ts_ms":2,"transaction":null}"#;
        let event = change(decode_line(spanner).expect("spanner"));
        assert_eq!((event.table.as_str(), event.order), ("database.Users", None));
        assert_eq!(event.source_transaction.as_deref(), Some("t"), "events of one Spanner transaction group together");
    }

    /// Only an insert marked as a snapshot row becomes an upsert; a marked delete
    /// stays a delete (it has no after-image to upsert).
    #[test]
    fn a_snapshot_marker_makes_only_inserts_upserts() {
        let marked = |op: &str, before: &str, after: &str| {
            format!(r#"{{"before":{before},"after":{after},"source":{{"connector":"postgresql","snapshot":"last_in_data_collection","db":"d","schema":"s","table":"t","txId":9,"lsn":5}},"op":"{op}"}}"#)
        };
        assert_eq!(change(decode_line(&marked("c", "null", r#"{"id":1}"#)).expect("c")).op, Op::Read);
        let line = marked("d", r#"{"id":1}"#, "null");
        let delete = change(decode_line(&line).expect("a marked delete"));
        assert_eq!((delete.op, delete.order), (Op::Delete, None));
        assert_eq!(change(decode_line(&marked("u", r#"{"id":1}"#, r#"{"id":1}"#)).expect("u")).op, Op::Update);
    }

    /// Flink CDC writes Long.MIN_VALUE as the LSN of snapshot records: no position,
    /// not an error; any other negative LSN is refused, saying so.
    #[test]
    fn a_long_min_lsn_is_no_position_and_other_negative_ones_are_refused() {
        let sentinel = PG_UPDATE.replace(r#"[\"100\",\"120\"]"#, r#"[null,\"-9223372036854775808\"]"#);
        assert_ne!(sentinel, PG_UPDATE);
        assert_eq!(change(decode_line(&sentinel).expect("sentinel")).order, None);
        let first = PG_UPDATE.replace(r#"[\"100\",\"120\"]"#, r#"[\"-9223372036854775808\",\"120\"]"#);
        assert_eq!(change(decode_line(&first).expect("sentinel first")).order, None);
        for negative in [r#"[null,\"-5\"]"#, r#"[\"-5\",\"-9223372036854775808\"]"#] {
            let line = PG_UPDATE.replace(r#"[\"100\",\"120\"]"#, negative);
            let error = decode_line(&line).expect_err("negative").to_string();
            assert!(error.contains("source.sequence") && error.contains("negative"), "{error}");
        }
        // A PostgreSQL fork naming its own connector keeps the order of its sequence.
        let fork = PG_UPDATE.replace(r#""connector":"postgresql""#, r#""connector":"yugabytedb""#);
        assert_ne!(fork, PG_UPDATE);
        assert_eq!(change(decode_line(&fork).expect("fork")).order, Some(SourceOrder(100, 120, 0)));
    }

    #[test]
    fn sequences_parse_with_nulls_and_reject_garbage() {
        assert_eq!(parse_sequence(r#"["1","2"]"#), Some((1, 2)));
        assert_eq!(parse_sequence(r#"[null,"22"]"#), Some((0, 22)));
        assert_eq!(parse_sequence(r#"["x","2"]"#), None);
        assert_eq!(parse_sequence("12"), None);
        assert_eq!(parse_sequence(r#"["+1","2"]"#), None, "a sign is not an LSN");
        fn raw(json: &str) -> &str {
            serde_json::from_str::<&RawValue>(json).expect("raw").get()
        }
        assert_eq!(raw_sequence(raw(r#""[\"100\",\"120\"]""#)), Some((100, 120)), "read from the escaped form");
        assert_eq!(raw_sequence(raw(r#""[null,\"22\"]""#)), Some((0, 22)));
        assert_eq!(raw_sequence(raw(r#""[\u0022100\u0022,\"120\"]""#)), None, "other escapes take the general path");
        let unicode_escaped = PG_UPDATE.replace(r#"[\"100\",\"120\"]"#, r#"[\u0022100\u0022,\"120\"]"#);
        assert_eq!(change(decode_line(&unicode_escaped).expect("general path")).order, Some(SourceOrder(100, 120, 0)));
        let bad = PG_UPDATE.replace(r#"[\"100\",\"120\"]"#, "oops");
        assert!(decode_line(&bad).expect_err("bad sequence").to_string().contains("source.sequence"));
    }

    #[test]
    fn mysql_order_and_gtid() {
        let line = r#"{"after":{"id":1},"source":{"connector":"mysql","db":"shop","table":"t","file":"mysql-bin.000003","pos":154,"row":1,"gtid":"u:7"},"op":"c"}"#;
        let event = change(decode_line(line).expect("mysql"));
        assert_eq!(event.table, "shop.t");
        assert_eq!(event.order, Some(SourceOrder(3, 154, 1)));
        assert_eq!(event.source_transaction.as_deref(), Some("u:7"));
    }

    #[test]
    fn bad_messages_name_the_field() {
        let cases = [
            ("{not json", "malformed"),
            (r#"{"after":{"id":1},"source":{"schema":"s","table":"t"}}"#, "field op: missing"),
            (r#"{"op":"x","after":{},"source":{"schema":"s","table":"t"}}"#, "unknown op"),
            (r#"{"op":"c","after":{"id":1}}"#, "field source: missing"),
            (r#"{"op":"c","after":{"id":1},"source":7}"#, "field source: expected an object, got 7"),
            (r#"{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t"},"transaction":[1]}"#, "field transaction: expected an object"),
            (r#"{"op":"c","after":{"id":1},"source":{"schema":"s"}}"#, "field source.table: missing"),
            (r#"{"op":"c","after":{"id":1},"source":{"schema":"s","table":5}}"#, "field source.table: expected a string"),
            (r#"{"op":"c","source":{"schema":"s","table":"t"}}"#, "field after: missing"),
            (r#"{"op":"c","after":{},"source":{"schema":"s","table":"t","txId":-1}}"#, "field source.txId: expected a non-negative integer or a string"),
            (r#"{"op":"c","after":{},"source":{"schema":"s","table":"t"},"transaction":{"id":"1"}}"#, "transaction.total_order: missing"),
            (r#"{"status":"END","id":"1"}"#, "field event_count: missing"),
            (r#"{"status":"END","id":"1","event_count":"two"}"#, "field event_count: expected"),
            (r#"{"status":"MIDDLE","id":"1"}"#, "field status"),
        ];
        for (line, expected) in cases {
            let error = decode_line(line).expect_err(line).to_string();
            assert!(error.contains(expected), "{line}: {error}");
        }
    }
}
