//! Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/): realistic
//! Debezium lines (the shapes of retina-cdc's tests and the encoder's output, every
//! column kind, all four envelope shapes) and pgoutput streams built the way
//! retina-postgres's pgoutput tests build messages.
//!
//! Run from the repo root (plain build, not instrumented):
//!     cargo run --manifest-path fuzz/Cargo.toml --example make_seeds
//! Files are numbered (seed-NN); running it again rewrites them.

use std::path::Path;
use std::sync::Arc;

use arrow_schema::{DataType, Field, Schema, TimeUnit};
use bytes::{BufMut, BytesMut};
use retina_workload::chbench::{schemas, ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_cdc::debezium::{DebeziumEncoder, EncoderOptions};
use retina_core::{RowChange, TableId, TableSchema, Value};

fn write(target: &str, name: &str, data: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus").join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    std::fs::write(dir.join(name), data).expect("seed");
}

fn main() {
    debezium_seeds();
    pgoutput_seeds();
}

// ---------------------------------------------------------------- Debezium

/// retina-cdc/tests/common: a keyed event of `s.t` with schemas and key.
const SCHEMA: &str = r#"{"type":"struct","name":"s.t.Envelope","fields":[{"type":"struct","optional":true,"field":"before","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]},{"type":"struct","optional":true,"field":"after","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]},{"type":"string","optional":false,"field":"op"}]}"#;
const KEY_SCHEMA: &str = r#"{"type":"struct","name":"s.t.Key","fields":[{"type":"int64","optional":false,"field":"id"}]}"#;

fn begin(id: &str) -> String {
    format!(r#"{{"status":"BEGIN","id":"{id}","event_count":null,"data_collections":null}}"#)
}

fn end(id: &str, count: u64, table: &str) -> String {
    format!(r#"{{"status":"END","id":"{id}","event_count":{count},"data_collections":[{{"data_collection":"{table}","event_count":{count}}}]}}"#)
}

fn event(op: &str, id: i64, name: Option<&str>, txn: Option<(&str, u64)>) -> String {
    let image = |n: Option<&str>| match n {
        Some(n) => format!(r#"{{"id":{id},"name":"{n}"}}"#),
        None => "null".to_string(),
    };
    let (before, after) = match op {
        "d" => (format!(r#"{{"id":{id},"name":null}}"#), "null".to_string()),
        _ => ("null".to_string(), image(name)),
    };
    let transaction = match txn {
        Some((tid, order)) => format!(r#"{{"id":"{tid}","total_order":{order},"data_collection_order":{order}}}"#),
        None => "null".into(),
    };
    let payload = format!(
        r#"{{"before":{before},"after":{after},"source":{{"connector":"postgresql","db":"d","schema":"s","table":"t","txId":{}}},"op":"{op}","transaction":{transaction}}}"#,
        txn.map_or(id as u64, |(t, _)| t.len() as u64)
    );
    format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":{id}}}}},"value":{{"schema":{SCHEMA},"payload":{payload}}}}}"#)
}

/// retina-cdc/src/debezium/message.rs's tests.
const PG_UPDATE: &str = r#"{"before":null,"after":{"id":1,"name":"x"},"source":{"version":"2.5","connector":"postgresql","name":"db","ts_ms":1,"snapshot":"false","db":"inventory","sequence":"[\"100\",\"120\"]","schema":"public","table":"customers","txId":571,"lsn":120,"xmin":null},"op":"u","ts_ms":2,"transaction":{"id":"571:120","total_order":2,"data_collection_order":1}}"#;

/// Semantic types the encoder never writes (VariableScaleDecimal, ZonedTimestamp,
/// Json, Uuid, Enum, Year, Bits, Connect's logical types), as Debezium does.
const SEMANTIC_SCHEMA: &str = r#"{"type":"struct","name":"db.s.sem.Envelope","fields":[{"type":"struct","optional":true,"field":"before","fields":[]},{"type":"struct","optional":true,"field":"after","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"struct","optional":true,"name":"io.debezium.data.VariableScaleDecimal","field":"v"},{"type":"string","optional":true,"name":"io.debezium.time.ZonedTimestamp","field":"z"},{"type":"string","optional":true,"name":"io.debezium.data.Json","field":"j"},{"type":"string","optional":true,"name":"io.debezium.data.Uuid","field":"u"},{"type":"string","optional":true,"name":"io.debezium.data.Enum","field":"e"},{"type":"int32","optional":true,"name":"io.debezium.time.Year","field":"y"},{"type":"bytes","optional":true,"name":"io.debezium.data.Bits","field":"b"},{"type":"int32","optional":true,"name":"org.apache.kafka.connect.data.Date","field":"cd"},{"type":"int64","optional":true,"name":"org.apache.kafka.connect.data.Timestamp","field":"ct"},{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2","connect.decimal.precision":"10"},"field":"price"},{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","field":"at"},{"type":"int32","optional":true,"name":"io.debezium.time.Time","field":"tm"},{"type":"int64","optional":true,"name":"io.debezium.time.NanoTime","field":"tn"},{"type":"int8","optional":true,"field":"i8"},{"type":"float32","optional":true,"field":"f"}]},{"type":"string","optional":false,"field":"op"}]}"#;

fn semantic_event(after: &str) -> String {
    format!(
        r#"{{"schema":{SEMANTIC_SCHEMA},"payload":{{"before":null,"after":{after},"source":{{"connector":"postgresql","db":"db","schema":"s","table":"sem","txId":9,"sequence":"[null,\"77\"]"}},"op":"c"}}}}"#
    )
}

/// A table with a column of every kind the encoder writes.
fn every_kind_table() -> TableSchema {
    let fields = vec![
        Field::new("id", DataType::Int64, false),
        Field::new("flag", DataType::Boolean, true),
        Field::new("small", DataType::Int16, true),
        Field::new("int", DataType::Int32, true),
        Field::new("real", DataType::Float32, true),
        Field::new("double", DataType::Float64, true),
        Field::new("text", DataType::Utf8, true),
        Field::new("blob", DataType::Binary, true),
        Field::new("day", DataType::Date32, true),
        Field::new("time_us", DataType::Time64(TimeUnit::Microsecond), true),
        Field::new("time_ns", DataType::Time64(TimeUnit::Nanosecond), true),
        Field::new("ts", DataType::Timestamp(TimeUnit::Microsecond, None), true),
        Field::new("ts_utc", DataType::Timestamp(TimeUnit::Microsecond, Some(Arc::from("UTC"))), true),
        Field::new("ts_ns", DataType::Timestamp(TimeUnit::Nanosecond, None), true),
        Field::new("price", DataType::Decimal128(12, 2), true),
        Field::new("wide", DataType::Decimal128(38, 10), true),
    ];
    TableSchema::new("shop.every", Schema::new(fields), vec![0]).expect("schema")
}

fn every_kind_row(id: i64, variant: u8) -> Vec<Value> {
    match variant {
        0 => vec![
            Value::Int64(id),
            Value::Boolean(true),
            Value::Int16(-32768),
            Value::Int32(2_147_483_647),
            Value::Float32(1.5),
            Value::Float64(-0.000_012_5),
            Value::Utf8("héllo \"quoted\"\n\ttab\u{1}".into()),
            Value::Binary(vec![0, 1, 2, 255]),
            Value::Date32(19_000),
            Value::Time64Micros(45_296_000_001),
            Value::Time64Nanos(86_399_999_999_999),
            Value::TimestampMicros(1_700_000_000_123_456),
            Value::TimestampMicros(-1),
            Value::TimestampNanos(1_700_000_000_123_456_789),
            Value::Decimal128(-12_345),
            Value::Decimal128(99_999_999_999_999_999_999_999_999_999_999_999_999),
        ],
        1 => vec![
            Value::Int64(id),
            Value::Boolean(false),
            Value::Int16(0),
            Value::Int32(-1),
            Value::Float32(f32::NAN),
            Value::Float64(f64::INFINITY),
            Value::Utf8(String::new()),
            Value::Binary(Vec::new()),
            Value::Date32(-719_162),
            Value::Time64Micros(0),
            Value::Time64Nanos(0),
            Value::TimestampMicros(0),
            Value::TimestampMicros(i64::MAX),
            Value::TimestampNanos(i64::MIN),
            Value::Decimal128(0),
            Value::Decimal128(-1),
        ],
        _ => {
            let mut row = vec![Value::Null; 16];
            row[0] = Value::Int64(id);
            row[5] = Value::Float64(f64::NEG_INFINITY);
            row
        }
    }
}

fn debezium_seeds() {
    let target = "debezium_message";
    let mut n = 0;
    let mut seed = |text: String| {
        n += 1;
        write(target, &format!("seed-{n:02}"), text.as_bytes());
    };

    // The tests' keyed, schema-carrying stream: a transaction of each op.
    seed([begin("1"), event("c", 1, Some("a"), Some(("1", 1))), event("c", 2, Some("b"), Some(("1", 2))), end("1", 2, "s.t")].join("\n"));
    seed([begin("2"), event("u", 1, Some("z"), Some(("2", 1))), event("d", 2, None, Some(("2", 2))), end("2", 2, "s.t")].join("\n"));
    // No transaction metadata: grouped by txId (and, with a leading space, per event).
    seed([event("c", 3, Some("c"), None), event("u", 3, Some("d"), None), event("d", 3, None, None)].join("\n"));
    seed(format!(" {}\n{}", event("c", 4, Some("e"), None), event("c", 5, Some("f"), None)));
    // Message-level shapes from the decoder's tests.
    seed(PG_UPDATE.to_string());
    seed(format!(r#"{{"schema":{{"type":"struct","fields":[]}},"payload":{PG_UPDATE}}}"#));
    seed(format!(r#"{{"key":{{"id":1}},"value":{PG_UPDATE}}}"#));
    seed([r#"{"key":{"id":1},"value":null}"#, r#"{"schema":null,"payload":null}"#].join("\n"));
    seed(r#"{"after":{"id":1},"source":{"connector":"mysql","db":"shop","table":"t","file":"mysql-bin.000003","pos":154,"row":1,"gtid":"u:7"},"op":"c"}"#.into());
    seed(r#"{"before":{"id":7,"name":"gone"},"after":null,"source":{"connector":"mysql","db":"shop","table":"t","file":"mysql-bin.000004","pos":10},"op":"d"}"#.into());
    seed(r#"{"op":"t","source":{"schema":"s","table":"t","txId":12},"before":null,"after":null}"#.into());
    seed(r#"{"op":"r","after":{"id":1,"v":{"scale":2,"value":"AQ=="},"n":1.5e3,"s":"x\"y\u00e9","b":true,"nil":null},"source":{"schema":"s","table":"inferred"}}"#.into());
    // Semantic types, with the value shapes each accepts.
    seed(semantic_event(
        r#"{"id":1,"v":{"scale":3,"value":"MDk="},"z":"2021-06-15T12:30:45.123456789+02:00","j":"{\"a\":1}","u":"4f2e8a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b","e":"red","y":2024,"b":"Aw==","cd":19000,"ct":1623760245123,"price":"MDk=","at":1623760245123456,"tm":45296001,"tn":45296000000001,"i8":-128,"f":0.25}"#,
    ));
    seed(semantic_event(
        r#"{"id":2,"v":{"scale":-2,"value":"/w=="},"z":"1970-01-01 00:00:00Z","j":null,"price":"123.45","at":"2021-06-15T12:30:45Z","tm":0,"f":"NaN","cd":"1969-12-31","ct":-1}"#,
    ));
    seed(semantic_event(r#"{"id":3,"price":123.45,"z":"+10000-01-01T00:00:00-0130","at":-1,"f":"-Infinity"}"#));
    // Transaction messages, and the errors the decoder names.
    seed(r#"{"status":"END","id":"5:9","event_count":2,"data_collections":[{"data_collection":"s.a","event_count":2}]}"#.into());
    seed(
        [
            r#"{not json"#,
            r#"{"op":"x","after":{},"source":{"schema":"s","table":"t"}}"#,
            r#"{"op":"c","after":{"id":1},"source":{"schema":"s","table":"t"},"transaction":[1]}"#,
            r#"{"op":"c","after":{},"source":{"schema":"s","table":"t","txId":"x"}}"#,
            r#"{"status":"MIDDLE","id":"1"}"#,
        ]
        .join("\n"),
    );

    // The encoder: a table of every kind in all four shapes, each op.
    let every = every_kind_table();
    let table = TableId(0);
    let transactions = [
        vec![
            RowChange::Insert { table, row: every_kind_row(1, 0) },
            RowChange::Insert { table, row: every_kind_row(2, 1) },
            RowChange::Insert { table, row: every_kind_row(3, 2) },
        ],
        vec![
            RowChange::Update { table, key: vec![Value::Int64(1)], row: every_kind_row(1, 1) },
            RowChange::Update { table, key: vec![Value::Int64(2)], row: every_kind_row(20, 0) },
            RowChange::Delete { table, key: vec![Value::Int64(3)] },
        ],
    ];
    for (with_schemas, with_keys) in [(false, false), (true, false), (true, true), (false, true)] {
        let mut encoder = DebeziumEncoder::new(std::slice::from_ref(&every), EncoderOptions { with_schemas, with_keys }).expect("encoder");
        for changes in &transactions {
            let mut text = String::new();
            encoder.encode_transaction(changes, &mut text).expect("encode");
            seed(text);
        }
    }

    // The CH-benCHmark generator's stream (the demo's), schemas and keys.
    let ids: Vec<TableId> = (0..9).map(TableId).collect();
    let mut generator = ChBenchGenerator::new(7, ChBenchScale::for_base_rows(300), ChBenchTables::from_ids(&ids));
    let mut encoder = DebeziumEncoder::new(&schemas(), EncoderOptions { with_schemas: true, with_keys: true }).expect("encoder");
    for n in 0..3 {
        let (_, changes) = generator.next_transaction(n + 2);
        let mut text = String::new();
        encoder.encode_transaction(&changes[..changes.len().min(6)], &mut text).expect("encode");
        seed(text);
    }
}

// ---------------------------------------------------------------- pgoutput

fn string(out: &mut BytesMut, text: &str) {
    out.put_slice(text.as_bytes());
    out.put_u8(0);
}

/// A tuple: `None` null, `"<toast>"` unchanged TOAST, else text.
fn tuple(out: &mut BytesMut, values: &[Option<&str>]) {
    out.put_i16(values.len() as i16);
    for value in values {
        match value {
            None => out.put_u8(b'n'),
            Some("<toast>") => out.put_u8(b'u'),
            Some(text) => {
                out.put_u8(b't');
                out.put_u32(text.len() as u32);
                out.put_slice(text.as_bytes());
            }
        }
    }
}

/// A stream of frames (the fuzz target's input): each a u16 length and its bytes.
#[derive(Default)]
struct Frames {
    out: Vec<u8>,
    lsn: u64,
}

impl Frames {
    /// A pgoutput message as it comes from the walsender: inside XLogData.
    fn wal(&mut self, message: &BytesMut) -> &mut Self {
        self.lsn += 0x100;
        let mut frame = BytesMut::new();
        frame.put_u8(b'w');
        frame.put_u64(self.lsn);
        frame.put_u64(self.lsn + 0x80);
        frame.put_i64(800_000_000_000_000);
        frame.put_slice(message);
        self.raw(&frame)
    }

    fn raw(&mut self, frame: &[u8]) -> &mut Self {
        self.out.extend_from_slice(&(frame.len() as u16).to_be_bytes());
        self.out.extend_from_slice(frame);
        self
    }

    fn keepalive(&mut self, reply: bool) -> &mut Self {
        let mut frame = BytesMut::new();
        frame.put_u8(b'k');
        frame.put_u64(self.lsn + 0x1000);
        frame.put_i64(800_000_000_000_001);
        frame.put_u8(u8::from(reply));
        self.raw(&frame)
    }
}

fn begin_message(xid: u32) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'B');
    m.put_u64(0x1_0000_0010);
    m.put_i64(123_456_789);
    m.put_u32(xid);
    m
}

fn commit_message() -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'C');
    m.put_u8(0);
    m.put_u64(0x1_0000_0010);
    m.put_u64(0x1_0000_0040);
    m.put_i64(123_456_790);
    m
}

/// A Relation message; columns are (key, name, type oid, typmod).
fn relation_message(xid: Option<u32>, oid: u32, namespace: &str, name: &str, identity: u8, columns: &[(bool, &str, u32, i32)]) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'R');
    if let Some(xid) = xid {
        m.put_u32(xid);
    }
    m.put_u32(oid);
    string(&mut m, namespace);
    string(&mut m, name);
    m.put_u8(identity);
    m.put_i16(columns.len() as i16);
    for (key, column, type_oid, typmod) in columns {
        m.put_u8(u8::from(*key));
        string(&mut m, column);
        m.put_u32(*type_oid);
        m.put_i32(*typmod);
    }
    m
}

fn insert_message(xid: Option<u32>, relation: u32, values: &[Option<&str>]) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'I');
    if let Some(xid) = xid {
        m.put_u32(xid);
    }
    m.put_u32(relation);
    m.put_u8(b'N');
    tuple(&mut m, values);
    m
}

/// `old`: (b'K' or b'O', values), or none.
fn update_message(xid: Option<u32>, relation: u32, old: Option<(u8, &[Option<&str>])>, new: &[Option<&str>]) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'U');
    if let Some(xid) = xid {
        m.put_u32(xid);
    }
    m.put_u32(relation);
    if let Some((kind, values)) = old {
        m.put_u8(kind);
        tuple(&mut m, values);
    }
    m.put_u8(b'N');
    tuple(&mut m, new);
    m
}

fn delete_message(xid: Option<u32>, relation: u32, kind: u8, old: &[Option<&str>]) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'D');
    if let Some(xid) = xid {
        m.put_u32(xid);
    }
    m.put_u32(relation);
    m.put_u8(kind);
    tuple(&mut m, old);
    m
}

fn truncate_message(xid: Option<u32>, relations: &[u32]) -> BytesMut {
    let mut m = BytesMut::new();
    m.put_u8(b'T');
    if let Some(xid) = xid {
        m.put_u32(xid);
    }
    m.put_u32(relations.len() as u32);
    m.put_u8(1);
    for r in relations {
        m.put_u32(*r);
    }
    m
}

fn numeric(precision: i32, scale: i32) -> i32 {
    ((precision << 16) | (scale & 0x7FF)) + 4
}

const ACCOUNTS: u32 = 16384;

fn accounts(xid: Option<u32>) -> BytesMut {
    relation_message(xid, ACCOUNTS, "public", "accounts", b'd', &[(true, "id", 20, -1), (false, "balance", 1700, numeric(12, 2))])
}

const EVERY: u32 = 16400;

/// Every mapped type, user types through the target's catalog, and an unmapped one.
fn every_type_relation(identity: u8) -> BytesMut {
    relation_message(
        None,
        EVERY,
        "shop",
        "every",
        identity,
        &[
            (true, "id", 23, -1),
            (false, "flag", 16, -1),
            (false, "blob", 17, -1),
            (false, "small", 21, -1),
            (false, "big", 20, -1),
            (false, "oid", 26, -1),
            (false, "real", 700, -1),
            (false, "double", 701, -1),
            (false, "price", 1700, numeric(10, 3)),
            (false, "hundreds", 1700, numeric(3, -2)),
            (false, "any_numeric", 1700, -1),
            (false, "name", 25, -1),
            (false, "code", 1042, 8),
            (false, "day", 1082, -1),
            (false, "clock", 1083, -1),
            (false, "at", 1114, -1),
            (false, "at_tz", 1184, -1),
            (false, "span", 1186, -1),
            (false, "uuid", 2950, -1),
            (false, "doc", 3802, -1),
            (false, "mood", 90000, -1),
            (false, "positive", 90001, -1),
            (false, "ints", 1007, -1),
            (false, "pair", 90002, -1),
            (false, "amount", 90004, -1),
        ],
    )
}

const EVERY_ROW: [Option<&str>; 25] = [
    Some("1"),
    Some("t"),
    Some("\\x00ff10"),
    Some("-32768"),
    Some("9223372036854775807"),
    Some("4294967295"),
    Some("1.17549435e-38"),
    Some("1.0000000000000002"),
    Some("-1234567.125"),
    Some("12300"),
    Some("3.14159265358979323846264338327950288"),
    Some("héllo"),
    Some("ab      "),
    Some("2024-02-29"),
    Some("24:00:00"),
    Some("2024-02-29 12:00:00.000001"),
    Some("1970-01-01 00:00:00-05:30"),
    Some("1 year 2 mons -3 days 04:05:06.789"),
    Some("4f2e8a3c-1b2d-4e5f-8a9b-0c1d2e3f4a5b"),
    Some("{\"a\": [1, 2]}"),
    Some("happy"),
    Some("42"),
    Some("{1,2,3}"),
    Some("(1,2)"),
    Some("0.50"),
];

const EDGE_ROW: [Option<&str>; 25] = [
    Some("2"),
    Some("f"),
    Some("\\x"),
    None,
    Some("-9223372036854775808"),
    Some("0"),
    Some("-Infinity"),
    Some("NaN"),
    Some("0.000"),
    None,
    Some("NaN"),
    Some(""),
    None,
    Some("0001-12-31 BC"),
    Some("00:00:00"),
    Some("infinity"),
    Some("275760-09-13 00:00:00+14:59:59"),
    None,
    None,
    Some("<toast>"),
    None,
    None,
    Some("{}"),
    None,
    Some("-infinity"),
];

fn pgoutput_seeds() {
    let target = "pgoutput_message";
    let mut n = 0;
    let mut seed = |frames: &Frames| {
        n += 1;
        write(target, &format!("seed-{n:02}"), &frames.out);
    };

    // Protocol 1: one transaction of every row change (tests.rs's messages).
    let mut f = Frames::default();
    f.wal(&begin_message(42))
        .wal(&accounts(None))
        .wal(&insert_message(None, ACCOUNTS, &[Some("1"), None]))
        .wal(&insert_message(None, ACCOUNTS, &[Some("2"), Some("3.50")]))
        .wal(&update_message(None, ACCOUNTS, Some((b'K', &[Some("1"), None])), &[Some("3"), Some("<toast>")]))
        .wal(&update_message(None, ACCOUNTS, None, &[Some("2"), Some("-0.05")]))
        .wal(&delete_message(None, ACCOUNTS, b'K', &[Some("2"), None]))
        .wal(&truncate_message(None, &[ACCOUNTS]))
        .wal(&commit_message())
        .keepalive(true);
    seed(&f);

    // The same messages without XLogData framing.
    let mut f = Frames::default();
    f.raw(&begin_message(43))
        .raw(&accounts(None))
        .raw(&insert_message(None, ACCOUNTS, &[Some("10"), Some("99999999.99")]))
        .raw(&delete_message(None, ACCOUNTS, b'O', &[Some("10"), Some("99999999.99")]))
        .raw(&commit_message());
    seed(&f);

    // Every type: full text values and edge values (BC, infinity, NaN, TOAST).
    for (identity, old) in [(b'd', b'K'), (b'f', b'O')] {
        let mut f = Frames::default();
        f.wal(&begin_message(50))
            .wal(&every_type_relation(identity))
            .wal(&insert_message(None, EVERY, &EVERY_ROW))
            .wal(&update_message(None, EVERY, Some((old, &EVERY_ROW)), &EDGE_ROW))
            .wal(&delete_message(None, EVERY, old, &EDGE_ROW))
            .wal(&commit_message());
        seed(&f);
    }

    // No replica identity: mirrored insert-only with a synthetic key; an update fails.
    let mut f = Frames::default();
    f.wal(&begin_message(60))
        .wal(&relation_message(None, 16500, "", "log", b'n', &[(false, "line", 25, -1), (false, "at", 1184, -1)]))
        .wal(&insert_message(None, 16500, &[Some("hello"), Some("2024-01-02 03:04:05.123456+00")]))
        .wal(&update_message(None, 16500, None, &[Some("bye"), None]))
        .wal(&commit_message());
    seed(&f);

    // A relation that gains a column, then one that changes type.
    let mut f = Frames::default();
    f.wal(&begin_message(70))
        .wal(&accounts(None))
        .wal(&insert_message(None, ACCOUNTS, &[Some("1"), Some("1.00")]))
        .wal(&relation_message(None, ACCOUNTS, "public", "accounts", b'd', &[(true, "id", 20, -1), (false, "balance", 1700, numeric(12, 2)), (false, "note", 1043, 68)]))
        .wal(&insert_message(None, ACCOUNTS, &[Some("2"), Some("2.00"), Some("new")]))
        .wal(&relation_message(None, ACCOUNTS, "public", "accounts", b'd', &[(true, "id", 23, -1), (false, "balance", 701, -1)]))
        .wal(&commit_message());
    seed(&f);

    // Protocol 2: streamed transactions, a subtransaction abort, a whole abort, and
    // a small transaction committing in between.
    let stream_start = |xid: u32, first: bool| {
        let mut m = BytesMut::new();
        m.put_u8(b'S');
        m.put_u32(xid);
        m.put_u8(u8::from(first));
        m
    };
    let stream_stop = BytesMut::from(&b"E"[..]);
    let stream_commit = |xid: u32| {
        let mut m = BytesMut::new();
        m.put_u8(b'c');
        m.put_u32(xid);
        m.put_u8(0);
        m.put_u64(0x2_0000_0000);
        m.put_u64(0x2_0000_0040);
        m.put_i64(123_456_800);
        m
    };
    let stream_abort = |xid: u32, subxid: u32| {
        let mut m = BytesMut::new();
        m.put_u8(b'A');
        m.put_u32(xid);
        m.put_u32(subxid);
        m
    };
    let mut f = Frames::default();
    f.wal(&stream_start(100, true))
        .wal(&accounts(Some(100)))
        .wal(&insert_message(Some(100), ACCOUNTS, &[Some("1"), Some("1.00")]))
        .wal(&insert_message(Some(101), ACCOUNTS, &[Some("2"), Some("2.00")]))
        .wal(&stream_stop)
        .wal(&begin_message(102))
        .wal(&insert_message(None, ACCOUNTS, &[Some("9"), None]))
        .wal(&commit_message())
        .wal(&stream_start(100, false))
        .wal(&update_message(Some(100), ACCOUNTS, Some((b'K', &[Some("1"), None])), &[Some("1"), Some("5.00")]))
        .wal(&delete_message(Some(101), ACCOUNTS, b'K', &[Some("2"), None]))
        .wal(&truncate_message(Some(100), &[ACCOUNTS]))
        .wal(&stream_stop)
        .wal(&stream_abort(100, 101))
        .wal(&stream_commit(100));
    seed(&f);
    let mut f = Frames::default();
    f.wal(&stream_start(200, true))
        .wal(&accounts(Some(200)))
        .wal(&insert_message(Some(200), ACCOUNTS, &[Some("5"), Some("0.01")]))
        .wal(&stream_stop)
        .wal(&stream_abort(200, 200))
        .wal(&stream_commit(200))
        .keepalive(false);
    seed(&f);

    // Origin, Type and logical decoding Message ('M') inside a transaction.
    let mut f = Frames::default();
    let mut origin = BytesMut::new();
    origin.put_u8(b'O');
    origin.put_u64(0x1_0000_0000);
    string(&mut origin, "upstream");
    let mut type_message = BytesMut::new();
    type_message.put_u8(b'Y');
    type_message.put_u32(90000);
    string(&mut type_message, "public");
    string(&mut type_message, "mood");
    let mut logical = BytesMut::new();
    logical.put_u8(b'M');
    logical.put_u8(1);
    logical.put_u64(0x1_0000_0020);
    string(&mut logical, "retina");
    logical.put_u32(5);
    logical.put_slice(b"hello");
    f.wal(&begin_message(80)).wal(&origin).wal(&type_message).wal(&logical).wal(&commit_message());
    seed(&f);

    // Malformed messages the decoder must reject: truncated, unknown kinds.
    let mut f = Frames::default();
    let mut bad_tuple = BytesMut::new();
    bad_tuple.put_u8(b'I');
    bad_tuple.put_u32(1);
    bad_tuple.put_u8(b'N');
    bad_tuple.put_i16(1);
    bad_tuple.put_u8(b'q');
    f.raw(b"B\x00\x01").raw(b"Z").raw(b"x").raw(&bad_tuple).raw(b"E").raw(b"");
    seed(&f);
}
