//! Messages in the shapes real Debezium connectors (MySQL, PostgreSQL, SQL Server)
//! and the tools around them write: tombstones, streams that start without a
//! snapshot, unchanged-TOAST placeholders, every documented logical type, captures
//! without a `source` block, and the field changes across Debezium versions. Each
//! either lands exactly or stops with an error that names table, column, key and line.

mod common;

use common::*;
use retina_cdc::debezium::{decode_line, Message};
use retina_cdc::sink::OnAbsentRow;
use retina_cdc::{Grouping, SinkOptions};
use retina_core::Value;

// ---------------------------------------------------------------------------------
// Message builders. The envelopes follow Debezium 2.x/3.x JSON (JsonConverter with
// schemas.enable=true): `{"schema": <Envelope>, "payload": {...}}`, keyed.

/// A Connect struct schema from `(type, name, parameters, field, optional)`.
fn fields(columns: &[(&str, Option<&str>, Option<&str>, &str, bool)]) -> String {
    columns
        .iter()
        .map(|(connect, name, parameters, field, optional)| {
            let name = name.map_or_else(String::new, |n| format!(r#","name":"{n}","version":1"#));
            let parameters = parameters.map_or_else(String::new, |p| format!(r#","parameters":{p}"#));
            format!(r#"{{"type":"{connect}","optional":{optional}{name}{parameters},"field":"{field}"}}"#)
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn envelope(table: &str, columns: &str, source: &str) -> String {
    format!(
        r#"{{"type":"struct","fields":[{{"type":"struct","fields":[{columns}],"optional":true,"name":"{table}.Value","field":"before"}},{{"type":"struct","fields":[{columns}],"optional":true,"name":"{table}.Value","field":"after"}},{source},{{"type":"string","optional":false,"field":"op"}},{{"type":"int64","optional":true,"field":"ts_ms"}}],"optional":false,"name":"{table}.Envelope","version":2}}"#
    )
}

const PG_SOURCE_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"string","optional":false,"field":"schema"},{"type":"string","optional":false,"field":"table"},{"type":"int64","optional":true,"field":"txId"},{"type":"int64","optional":true,"field":"lsn"},{"type":"int64","optional":true,"field":"xmin"}],"optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source"}"#;
const MYSQL_SOURCE_SCHEMA: &str = r#"{"type":"struct","fields":[{"type":"string","optional":false,"field":"version"},{"type":"string","optional":false,"field":"connector"},{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"ts_ms"},{"type":"string","optional":true,"name":"io.debezium.data.Enum","version":1,"parameters":{"allowed":"true,last,false,incremental"},"default":"false","field":"snapshot"},{"type":"string","optional":false,"field":"db"},{"type":"string","optional":true,"field":"sequence"},{"type":"string","optional":true,"field":"table"},{"type":"int64","optional":false,"field":"server_id"},{"type":"string","optional":true,"field":"gtid"},{"type":"string","optional":false,"field":"file"},{"type":"int64","optional":false,"field":"pos"},{"type":"int32","optional":false,"field":"row"},{"type":"int64","optional":true,"field":"thread"},{"type":"string","optional":true,"field":"query"}],"optional":false,"name":"io.debezium.connector.mysql.Source","field":"source"}"#;

fn pg_source(table: &str, tx: u64, lsn: u64, snapshot: &str) -> String {
    format!(
        r#"{{"version":"2.7.3.Final","connector":"postgresql","name":"dbserver1","ts_ms":1709288130000,"snapshot":"{snapshot}","db":"postgres","sequence":"[\"{}\",\"{lsn}\"]","ts_us":1709288130000000,"ts_ns":1709288130000000000,"schema":"inventory","table":"{table}","txId":{tx},"lsn":{lsn},"xmin":null}}"#,
        lsn - 8
    )
}

fn mysql_source(table: &str, pos: u64, row: u64, snapshot: &str) -> String {
    format!(
        r#"{{"version":"2.7.3.Final","connector":"mysql","name":"dbserver1","ts_ms":1709288130000,"snapshot":"{snapshot}","db":"shop","sequence":null,"ts_us":1709288130000000,"ts_ns":1709288130000000000,"table":"{table}","server_id":223344,"gtid":null,"file":"mysql-bin.000003","pos":{pos},"row":{row},"thread":7,"query":null}}"#
    )
}

/// A keyed message: `{"schema":…,"payload":{…}}` as a Kafka value, the key beside it.
fn keyed(key_schema: &str, key: &str, schema: &str, payload: &str) -> String {
    format!(r#"{{"key":{{"schema":{key_schema},"payload":{key}}},"value":{{"schema":{schema},"payload":{payload}}}}}"#)
}

fn payload(op: &str, before: &str, after: &str, source: &str) -> String {
    format!(r#"{{"before":{before},"after":{after},"source":{source},"op":"{op}","ts_ms":1709288130500,"ts_us":1709288130500000,"ts_ns":1709288130500000000,"transaction":null}}"#)
}

// PostgreSQL inventory.authors: id int4 key, name text, biography text (TOASTed),
// photo bytea (TOASTed).
fn authors_schema() -> String {
    let columns = fields(&[
        ("int32", None, None, "id", false),
        ("string", None, None, "name", true),
        ("string", None, None, "biography", true),
        ("bytes", None, None, "photo", true),
    ]);
    envelope("dbserver1.inventory.authors", &columns, PG_SOURCE_SCHEMA)
}

const AUTHORS_KEY: &str = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"dbserver1.inventory.authors.Key"}"#;

fn author(op: &str, id: i64, before: &str, after: &str, tx: u64) -> String {
    let source = pg_source("authors", tx, 1000 + tx * 16, "false");
    keyed(AUTHORS_KEY, &format!(r#"{{"id":{id}}}"#), &authors_schema(), &payload(op, before, after, &source))
}

const PLACEHOLDER: &str = "__debezium_unavailable_value";
const PLACEHOLDER_BASE64: &str = "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==";

fn utf8(text: &str) -> Value {
    Value::Utf8(text.into())
}

// ---------------------------------------------------------------------------------
// 1. Tombstones

#[test]
fn null_empty_and_keyed_null_lines_are_tombstones() {
    assert!(matches!(decode_line("null"), Ok(Message::Tombstone)), "kcat writes a null value as the literal null");
    assert!(matches!(decode_line(" null \r"), Ok(Message::Tombstone)));
    assert!(matches!(decode_line(""), Ok(Message::Tombstone)));
    assert!(matches!(decode_line("   "), Ok(Message::Tombstone)));
    assert!(matches!(decode_line(r#"{"key":{"id":1001},"value":null}"#), Ok(Message::Tombstone)));
    assert!(matches!(decode_line(r#"{"key":{"schema":{"type":"struct","fields":[]},"payload":{"id":1}},"value":null}"#), Ok(Message::Tombstone)));
    assert!(decode_line("nul").is_err(), "a broken line is still malformed");

    // A delete followed by its tombstone, as Debezium emits them, in each shape.
    let test = engine();
    let insert = author("c", 1, "null", r#"{"id":1,"name":"Ann","biography":"b","photo":null}"#, 1);
    let delete = author("d", 1, r#"{"id":1,"name":null,"biography":null,"photo":null}"#, "null", 2);
    let lines = vec![insert, delete, "null".into(), r#"{"key":{"id":1},"value":null}"#.into(), "".into()];
    let report = ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(report.stats.tombstones, 2, "the empty line is skipped by the line reader");
    assert_eq!(report.stats.row_changes_applied, 2);
    assert!(rows(&test.engine, "inventory.authors").is_empty());
}

// ---------------------------------------------------------------------------------
// 2. Updates and deletes of rows the mirror does not have

/// A stream from a connector started with snapshot.mode=never: the first events of a
/// table are an update and a delete of rows never inserted.
fn stream_without_snapshot() -> Vec<String> {
    vec![
        author("c", 1, "null", r#"{"id":1,"name":"Ann","biography":"b1","photo":null}"#, 10),
        author("u", 2, "null", r#"{"id":2,"name":"Bob","biography":"b2","photo":null}"#, 11),
        author("d", 3, r#"{"id":3,"name":null,"biography":null,"photo":null}"#, "null", 12),
        author("u", 1, "null", r#"{"id":1,"name":"Ann B.","biography":"b1","photo":null}"#, 13),
    ]
}

#[test]
fn update_of_an_absent_row_names_table_key_line_and_the_option() {
    // (Shards apply in parallel: the stream is cut after the first absent row so
    // that the error is about that one.)
    let stream = stream_without_snapshot();
    let test = engine();
    let error = ingest(&test.engine, &stream[..2], SinkOptions::default()).expect_err("absent row").to_string();
    for part in ["inventory.authors", "update", "key id=2", "line 2", "no live row", "--on-absent-row upsert", "on_absent_row=upsert"] {
        assert!(error.contains(part), "{part:?} missing from: {error}");
    }
    let test = engine();
    let error = ingest(&test.engine, &[stream[0].clone(), stream[2].clone()], SinkOptions::default()).expect_err("absent row").to_string();
    for part in ["inventory.authors", "delete", "key id=3", "line 2", "--on-absent-row upsert"] {
        assert!(error.contains(part), "{part:?} missing from: {error}");
    }
}

#[test]
fn on_absent_row_upsert_inserts_absent_updates_and_ignores_absent_deletes() {
    let test = engine();
    let options = SinkOptions { on_absent_row: OnAbsentRow::Upsert, ..SinkOptions::default() };
    let report = ingest(&test.engine, &stream_without_snapshot(), options).expect("ingest");
    assert_eq!(
        rows(&test.engine, "inventory.authors"),
        vec![
            vec![Value::Int32(1), utf8("Ann B."), utf8("b1"), Value::Null],
            vec![Value::Int32(2), utf8("Bob"), utf8("b2"), Value::Null],
        ]
    );
    assert_eq!(report.stats.absent_row_upserts, 1, "{:?}", report.stats);
    assert_eq!(report.stats.absent_row_deletes_ignored, 1, "{:?}", report.stats);
}

#[test]
fn on_absent_row_parses() {
    assert_eq!("upsert".parse::<OnAbsentRow>().ok(), Some(OnAbsentRow::Upsert));
    assert_eq!("error".parse::<OnAbsentRow>().ok(), Some(OnAbsentRow::Error));
    assert!("skip".parse::<OnAbsentRow>().expect_err("unknown").to_string().contains("error or upsert"));
}

// ---------------------------------------------------------------------------------
// 3. Unchanged TOAST values

#[test]
fn unchanged_toast_placeholders_keep_the_mirrors_previous_values() {
    let test = engine();
    let lines = vec![
        author("c", 1, "null", r#"{"id":1,"name":"Ann","biography":"a long biography","photo":"AQID"}"#, 1),
        author("c", 2, "null", r#"{"id":2,"name":"Bob","biography":"his story","photo":"BAU="}"#, 2),
        // Default replica identity: no before-image; both TOASTed columns unchanged.
        author("u", 1, "null", &format!(r#"{{"id":1,"name":"Ann Smith","biography":"{PLACEHOLDER}","photo":"{PLACEHOLDER_BASE64}"}}"#), 3),
        // REPLICA IDENTITY FULL: the before-image carries the old value.
        author(
            "u",
            2,
            r#"{"id":2,"name":"Bob","biography":"his story","photo":"BAU="}"#,
            &format!(r#"{{"id":2,"name":"Robert","biography":"{PLACEHOLDER}","photo":"Bgc="}}"#),
            4,
        ),
        // Unchanged again: the kept value is kept once more.
        author("u", 1, "null", &format!(r#"{{"id":1,"name":"Ann S.","biography":"{PLACEHOLDER}","photo":"{PLACEHOLDER_BASE64}"}}"#), 5),
    ];
    ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(
        rows(&test.engine, "inventory.authors"),
        vec![
            vec![Value::Int32(1), utf8("Ann S."), utf8("a long biography"), Value::Binary(vec![1, 2, 3])],
            vec![Value::Int32(2), utf8("Robert"), utf8("his story"), Value::Binary(vec![6, 7])],
        ]
    );
}

/// A primary-key UPDATE under REPLICA IDENTITY DEFAULT of a row with TOASTed values
/// the update left alone: Debezium sends a delete of the old key (its key only), a
/// tombstone and an insert of the new key whose after-image holds the placeholder
/// (transferia's captured PostgreSQL stream). The row moves with its values, also
/// when the two events arrive out of order within their BEGIN/END.
#[test]
fn a_primary_key_update_with_unchanged_toast_values_moves_the_row_with_them() {
    let tombstone = |id: i64| format!(r#"{{"key":{{"schema":{AUTHORS_KEY},"payload":{{"id":{id}}}}},"value":null}}"#);
    let first = r#"{"id":1,"name":"Ann","biography":"a long biography","photo":"AQID"}"#;
    let moved = format!(r#"{{"id":7,"name":"Ann","biography":"{PLACEHOLDER}","photo":"{PLACEHOLDER_BASE64}"}}"#);
    let key_only = r#"{"id":1,"name":null,"biography":null,"photo":null}"#;
    let in_transaction = |line: String, id: &str, order: u64| {
        line.replace(r#""transaction":null"#, &format!(r#""transaction":{{"id":"{id}","total_order":{order},"data_collection_order":{order}}}"#))
    };
    let without_metadata =
        vec![author("c", 1, "null", first, 1), author("d", 1, key_only, "null", 2), tombstone(1), author("c", 7, "null", &moved, 2)];
    let with_metadata = vec![
        begin("1"),
        in_transaction(author("c", 1, "null", first, 1), "1", 1),
        end("1", 1, "inventory.authors"),
        begin("2"),
        in_transaction(author("c", 7, "null", &moved, 2), "2", 2),
        in_transaction(author("d", 1, key_only, "null", 2), "2", 1),
        end("2", 2, "inventory.authors"),
    ];
    for lines in [without_metadata, with_metadata] {
        let test = engine();
        ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
        assert_eq!(
            rows(&test.engine, "inventory.authors"),
            vec![vec![Value::Int32(7), utf8("Ann"), utf8("a long biography"), Value::Binary(vec![1, 2, 3])]]
        );
    }
}

#[test]
fn unchanged_toast_without_a_previous_value_names_table_column_key_and_line() {
    // The row was never in the mirror (a stream without snapshot), even with upsert.
    for on_absent_row in [OnAbsentRow::Error, OnAbsentRow::Upsert] {
        let test = engine();
        let lines = vec![
            author("c", 1, "null", r#"{"id":1,"name":"Ann","biography":"b","photo":null}"#, 1),
            author("u", 9, "null", &format!(r#"{{"id":9,"name":"Zed","biography":"{PLACEHOLDER}","photo":null}}"#), 2),
        ];
        let options = SinkOptions { on_absent_row, ..SinkOptions::default() };
        let error = ingest(&test.engine, &lines, options).expect_err("no previous value").to_string();
        for part in ["inventory.authors", "column biography", "key id=9", "line 2"] {
            assert!(error.contains(part), "{on_absent_row:?}: {part:?} missing from: {error}");
        }
        // (Its group-commit batch, which may also hold the insert, is not visible.)
        assert!(rows(&test.engine, "inventory.authors").iter().all(|r| r[0] == Value::Int32(1)), "the placeholder is never stored");
    }
    // An insert cannot have an unchanged value.
    let test = engine();
    let line = author("c", 4, "null", &format!(r#"{{"id":4,"name":"Dee","biography":"{PLACEHOLDER}","photo":null}}"#), 1);
    let error = ingest(&test.engine, &[line], SinkOptions::default()).expect_err("insert").to_string();
    for part in ["line 1", "table inventory.authors", "column biography", "key id=4", "placeholder"] {
        assert!(error.contains(part), "{part:?} missing from: {error}");
    }
}

// ---------------------------------------------------------------------------------
// 4. Logical types

#[test]
fn mysql_logical_types_land_exactly() {
    let columns = fields(&[
        // BIGINT UNSIGNED with bigint.unsigned.handling.mode=precise: the key is bytes.
        ("bytes", Some("org.apache.kafka.connect.data.Decimal"), Some(r#"{"scale":"0","connect.decimal.precision":"20"}"#), "id", false),
        ("bytes", Some("org.apache.kafka.connect.data.Decimal"), Some(r#"{"scale":"2","connect.decimal.precision":"10"}"#), "price", true),
        // decimal.format=numeric: the schema still says bytes, the value is a number.
        ("bytes", Some("org.apache.kafka.connect.data.Decimal"), Some(r#"{"scale":"2","connect.decimal.precision":"10"}"#), "discount", true),
        ("int32", Some("io.debezium.time.Date"), None, "born", true),
        ("int64", Some("io.debezium.time.MicroTime"), None, "opens", true),
        ("int64", Some("io.debezium.time.Timestamp"), None, "created3", true),
        ("int64", Some("io.debezium.time.MicroTimestamp"), None, "created6", true),
        ("string", Some("io.debezium.time.ZonedTimestamp"), None, "updated", true),
        ("int32", Some("io.debezium.time.Year"), None, "model_year", true),
        ("string", Some("io.debezium.data.Enum"), Some(r#"{"allowed":"small,medium,large"}"#), "size", true),
        ("string", Some("io.debezium.data.EnumSet"), Some(r#"{"allowed":"a,b,c"}"#), "flags", true),
        ("string", Some("io.debezium.data.Json"), None, "attrs", true),
        ("bytes", Some("io.debezium.data.Bits"), Some(r#"{"length":"10"}"#), "mask", true),
        ("boolean", None, None, "active", true),
        ("int16", None, None, "qty", true),
        ("float", None, None, "weight", true),
        ("double", None, None, "ratio", true),
        ("struct", Some("io.debezium.data.geometry.Geometry"), None, "location", true),
    ]);
    // The geometry struct's schema carries its own fields.
    let columns = columns.replace(
        r#"{"type":"struct","optional":true,"name":"io.debezium.data.geometry.Geometry","version":1,"field":"location"}"#,
        r#"{"type":"struct","fields":[{"type":"bytes","optional":false,"field":"wkb"},{"type":"int32","optional":true,"field":"srid"}],"optional":true,"name":"io.debezium.data.geometry.Geometry","version":1,"doc":"Geometry","field":"location"}"#,
    );
    let schema = envelope("dbserver1.shop.items", &columns, MYSQL_SOURCE_SCHEMA);
    let key_schema = r#"{"type":"struct","fields":[{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"0","connect.decimal.precision":"20"},"field":"id"}],"optional":false,"name":"dbserver1.shop.items.Key"}"#;
    let after = r#"{"id":"AP//////////","price":"AeJA","discount":123.45,"born":19783,"opens":36930123456,"created3":1709288130123,"created6":1709288130123456,"updated":"2024-03-01T10:15:30.123456Z","model_year":2024,"size":"large","flags":"a,c","attrs":"{\"k\": [1, 2]}","mask":"AQI=","active":true,"qty":-3,"weight":3.140000104904175,"ratio":0.1,"location":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":4326}}"#;
    let insert = keyed(key_schema, r#"{"id":"AP//////////"}"#, &schema, &payload("c", "null", after, &mysql_source("items", 400, 0, "false")));
    // An update of the same row keyed by the base64 key; then one beyond i64 too.
    let after2 = after.replace(r#""price":"AeJA""#, r#""price":"AeJB""#).replace(r#""location":{"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":4326}"#, r#""location":null"#);
    let update = keyed(key_schema, r#"{"id":"AP//////////"}"#, &schema, &payload("u", after, &after2, &mysql_source("items", 900, 0, "false")));
    let big = after.replace(r#""id":"AP//////////""#, r#""id":"AIAAAAAAAAAA""#);
    let insert_big = keyed(key_schema, r#"{"id":"AIAAAAAAAAAA"}"#, &schema, &payload("c", "null", &big, &mysql_source("items", 1400, 0, "false")));

    let test = engine();
    ingest(&test.engine, &[insert, update, insert_big], SinkOptions::default()).expect("ingest");
    let rows = rows(&test.engine, "shop.items");
    assert_eq!(rows.len(), 2);
    let row = rows.iter().find(|r| r[0] == Value::Decimal128(18_446_744_073_709_551_615)).expect("u64::MAX key");
    let expected = vec![
        Value::Decimal128(18_446_744_073_709_551_615),
        Value::Decimal128(123_457),
        Value::Decimal128(12_345),
        Value::Date32(19_783),
        Value::Time64Micros(36_930_123_456),
        Value::TimestampMicros(1_709_288_130_123_000),
        Value::TimestampMicros(1_709_288_130_123_456),
        Value::TimestampMicros(1_709_288_130_123_456),
        Value::Int32(2024),
        utf8("large"),
        utf8("a,c"),
        utf8("{\"k\": [1, 2]}"),
        Value::Binary(vec![1, 2]),
        Value::Boolean(true),
        Value::Int16(-3),
        Value::Float32(3.14),
        Value::Float64(0.1),
        Value::Null,
    ];
    assert_eq!(row, &expected);
    assert!(rows.iter().any(|r| r[0] == Value::Decimal128(9_223_372_036_854_775_808)), "a key beyond i64");
    // The first version's geometry is EWKB: the point with SRID 4326 kept.
    let ewkb = vec![1u8, 1, 0, 0, 32, 230, 16, 0, 0, 0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64];
    let big_row = rows.iter().find(|r| r[0] == Value::Decimal128(9_223_372_036_854_775_808)).expect("big");
    assert_eq!(big_row[17], Value::Binary(ewkb));
}

/// MySQL's TIME is a duration (-838:59:59 to 838:59:59), written as MicroTime; a
/// TIME column holds a time of day. Such a value was stored as a Parquet TIME outside
/// the day, which readers wrap or fail on; now it is refused, named, and nothing of
/// its transaction is applied.
#[test]
fn a_mysql_time_beyond_a_day_is_refused_naming_table_column_and_line() {
    let columns = fields(&[("int32", None, None, "id", false), ("int64", Some("io.debezium.time.MicroTime"), None, "dur", true)]);
    let schema = envelope("dbserver1.shop.waits", &columns, MYSQL_SOURCE_SCHEMA);
    let line = |id: i64, micros: i64, pos: u64| {
        let after = format!(r#"{{"id":{id},"dur":{micros}}}"#);
        format!(r#"{{"schema":{schema},"payload":{}}}"#, payload("c", "null", &after, &mysql_source("waits", pos, 0, "false")))
    };
    let test = engine();
    let lines = [line(1, 14_400_000_000, 400), line(2, 3_020_399_000_000, 900)];
    let error = ingest(&test.engine, &lines, common::keyed("shop.waits", "id")).expect_err("838:59:59").to_string();
    for part in ["line 2", "shop.waits", "dur", "838:59:59 is not a time of day"] {
        assert!(error.contains(part), "{error} lacks {part}");
    }
    // (Line 1's group is still open when line 2 fails, so a restart reads it again.)
    assert!(rows(&test.engine, "shop.waits").iter().all(|row| row[0] != Value::Int32(2)));
}

#[test]
fn postgres_and_sqlserver_logical_types_land_exactly() {
    let columns = fields(&[
        ("int64", None, None, "id", false),
        ("struct", Some("io.debezium.data.VariableScaleDecimal"), None, "amount", true),
        ("string", Some("io.debezium.data.Uuid"), None, "uid", true),
        ("string", Some("io.debezium.time.ZonedTime"), None, "opens", true),
        ("int64", Some("io.debezium.time.NanoTime"), None, "precise_time", true),
        ("int64", Some("io.debezium.time.NanoTimestamp"), None, "precise_at", true),
        ("int64", Some("io.debezium.time.MicroDuration"), None, "duration", true),
        ("string", Some("io.debezium.data.Xml"), None, "doc", true),
        ("string", Some("io.debezium.data.Ltree"), None, "path", true),
        ("struct", Some("io.debezium.data.geometry.Point"), None, "spot", true),
        ("int32", Some("org.apache.kafka.connect.data.Time"), None, "connect_time", true),
    ]);
    let schema = envelope("dbserver1.inventory.misc", &columns, PG_SOURCE_SCHEMA);
    let key_schema = r#"{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}],"optional":false,"name":"dbserver1.inventory.misc.Key"}"#;
    let after = r#"{"id":1,"amount":{"scale":3,"value":"MDk="},"uid":"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11","opens":"10:15:30.123456Z","precise_time":36930123456789,"precise_at":1709288130123456789,"duration":3600000000,"doc":"<a>1</a>","path":"Top.Science","spot":{"x":1.0,"y":2.0,"wkb":"AQEAAAAAAAAAAADwPwAAAAAAAABA","srid":null},"connect_time":36930123}"#;
    let line = keyed(key_schema, r#"{"id":1}"#, &schema, &payload("c", "null", after, &pg_source("misc", 5, 2000, "false")));
    let test = engine();
    ingest(&test.engine, &[line], SinkOptions::default()).expect("ingest");
    assert_eq!(
        rows(&test.engine, "inventory.misc"),
        vec![vec![
            Value::Int64(1),
            utf8("12.345"),
            utf8("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            Value::Time64Micros(36_930_123_456),
            Value::Time64Nanos(36_930_123_456_789),
            Value::TimestampNanos(1_709_288_130_123_456_789),
            Value::Int64(3_600_000_000),
            utf8("<a>1</a>"),
            utf8("Top.Science"),
            Value::Binary(vec![1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 240, 63, 0, 0, 0, 0, 0, 0, 0, 64]),
            Value::Time64Micros(36_930_123_000),
        ]]
    );

    // SQL Server (datetime2(7) as NanoTimestamp, datetimeoffset as ZonedTimestamp,
    // money as Decimal), whose source block has neither txId nor binlog position.
    let columns = fields(&[
        ("int32", None, None, "id", false),
        ("int64", Some("io.debezium.time.NanoTimestamp"), None, "at", true),
        ("string", Some("io.debezium.time.ZonedTimestamp"), None, "at_offset", true),
        ("bytes", Some("org.apache.kafka.connect.data.Decimal"), Some(r#"{"scale":"4","connect.decimal.precision":"19"}"#), "price", true),
    ]);
    let schema = envelope("server1.testDB.dbo.orders", &columns, r#"{"type":"struct","fields":[],"optional":false,"name":"io.debezium.connector.sqlserver.Source","field":"source"}"#);
    let source = r#"{"version":"2.7.3.Final","connector":"sqlserver","name":"server1","ts_ms":1709288130000,"snapshot":"false","db":"testDB","sequence":null,"schema":"dbo","table":"orders","change_lsn":"00000027:00000758:0003","commit_lsn":"00000027:00000758:0005","event_serial_no":1}"#;
    let key_schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"server1.testDB.dbo.orders.Key"}"#;
    // datetimeoffset(7): SQL Server's zoned timestamps get a nanosecond column.
    let after = r#"{"id":7,"at":1709288130123456700,"at_offset":"2024-03-01T11:15:30.1234567+01:00","price":"AeJA"}"#;
    let line = keyed(key_schema, r#"{"id":7}"#, &schema, &payload("c", "null", after, source));
    let test = engine();
    ingest(&test.engine, &[line], SinkOptions::default()).expect("ingest sql server");
    assert_eq!(
        rows(&test.engine, "dbo.orders"),
        vec![vec![
            Value::Int32(7),
            Value::TimestampNanos(1_709_288_130_123_456_700),
            Value::TimestampNanos(1_709_288_130_123_456_700),
            Value::Decimal128(123_456),
        ]]
    );
}

#[test]
fn a_numeric_decimal_too_precise_for_a_double_is_refused_not_altered() {
    let columns = fields(&[
        ("int32", None, None, "id", false),
        ("bytes", Some("org.apache.kafka.connect.data.Decimal"), Some(r#"{"scale":"2","connect.decimal.precision":"38"}"#), "total", true),
    ]);
    let schema = envelope("dbserver1.shop.ledger", &columns, MYSQL_SOURCE_SCHEMA);
    let key_schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"k"}"#;
    let line = |id: i64, total: &str| {
        keyed(key_schema, &format!(r#"{{"id":{id}}}"#), &schema, &payload("c", "null", &format!(r#"{{"id":{id},"total":{total}}}"#), &mysql_source("ledger", 100 * id as u64, 0, "false")))
    };
    let test = engine();
    ingest(&test.engine, &[line(1, "12345.67")], SinkOptions::default()).expect("exact");
    assert_eq!(rows(&test.engine, "shop.ledger"), vec![vec![Value::Int32(1), Value::Decimal128(1_234_567)]]);
    let test = engine();
    let lines = [line(1, "12345.67"), line(2, "1234567890123456789.01")];
    let error = ingest(&test.engine, &lines, SinkOptions::default()).expect_err("too precise").to_string();
    for part in ["line 2", "table shop.ledger", "after.total", "JSON number", "decimal.handling.mode=string"] {
        assert!(error.contains(part), "{part:?} missing from: {error}");
    }
}

#[test]
fn snapshot_markers_of_every_version_are_upserts_and_never_duplicates() {
    // MySQL snapshot rows all carry the snapshot's binlog position (same file, pos,
    // row 0); "last" marks the final one; Debezium 1.1 wrote them as op c with
    // snapshot "true". Flink CDC's incremental snapshot writes op r with snapshot
    // "false", Debezium's own incremental snapshot "incremental", re-reading rows
    // the stream already brought.
    let columns = fields(&[("int32", None, None, "id", false), ("string", None, None, "name", true)]);
    let schema = envelope("dbserver1.shop.customers", &columns, MYSQL_SOURCE_SCHEMA);
    let key_schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"k"}"#;
    let event = |op: &str, id: i64, name: &str, pos: u64, snapshot: &str| {
        let after = format!(r#"{{"id":{id},"name":"{name}"}}"#);
        keyed(key_schema, &format!(r#"{{"id":{id}}}"#), &schema, &payload(op, "null", &after, &mysql_source("customers", pos, 0, snapshot)))
    };
    let lines = vec![
        event("r", 1, "a", 157, "true"),
        event("c", 2, "b", 157, "true"),
        event("r", 3, "c", 157, "last"),
        event("u", 1, "a2", 300, "false"),
        event("r", 1, "a3", 300, "incremental"),
        event("r", 4, "d", 300, "false"),
    ];
    for grouping in [Grouping::PerEvent, Grouping::SourceTransaction] {
        let test = engine();
        let options = SinkOptions { grouping, ..SinkOptions::default() };
        let report = ingest(&test.engine, &lines, options).expect("ingest");
        assert_eq!(report.stats.duplicate_transactions, 0, "{grouping:?}");
        assert_eq!(
            rows(&test.engine, "shop.customers"),
            vec![
                vec![Value::Int32(1), utf8("a3")],
                vec![Value::Int32(2), utf8("b")],
                vec![Value::Int32(3), utf8("c")],
                vec![Value::Int32(4), utf8("d")],
            ],
            "{grouping:?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// 5. Messages without a source block

#[test]
fn messages_without_source_need_table_and_then_land() {
    let columns = fields(&[("int32", None, None, "id", false), ("string", None, None, "name", true)]);
    let schema = format!(
        r#"{{"type":"struct","fields":[{{"type":"struct","fields":[{columns}],"optional":true,"field":"before"}},{{"type":"struct","fields":[{columns}],"optional":true,"field":"after"}},{{"type":"string","optional":false,"field":"op"}}],"optional":false,"name":"Envelope"}}"#
    );
    let key_schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"k"}"#;
    let lines = vec![
        keyed(key_schema, r#"{"id":1}"#, &schema, r#"{"before":null,"after":{"id":1,"name":"x"},"op":"c","ts_ms":1}"#),
        keyed(key_schema, r#"{"id":1}"#, &schema, r#"{"before":{"id":1,"name":"x"},"after":{"id":1,"name":"y"},"op":"u","ts_ms":2}"#),
    ];
    let test = engine();
    let error = ingest(&test.engine, &lines, SinkOptions::default()).expect_err("no table").to_string();
    assert!(error.contains("line 1") && error.contains("source") && error.contains("--table"), "{error}");
    let options = SinkOptions { table: Some("shop.things".into()), ..SinkOptions::default() };
    ingest(&test.engine, &lines, options).expect("ingest with --table");
    assert_eq!(rows(&test.engine, "shop.things"), vec![vec![Value::Int32(1), utf8("y")]]);
}

// ---------------------------------------------------------------------------------
// 6. Field order and fields across versions; multi-row statements

#[test]
fn field_order_and_fields_of_debezium_3_are_accepted() {
    // 3.x: `transaction` and `op` before the images, ts_us / ts_ns everywhere, and a
    // PostgreSQL sequence whose last-commit LSN is null (the first event after start).
    let schema = authors_schema();
    let source = pg_source("authors", 700, 5000, "false").replace(r#""sequence":"[\"4992\",\"5000\"]""#, r#""sequence":"[null,\"5000\"]""#);
    assert!(source.contains("[null,"), "{source}");
    let reordered = format!(
        r#"{{"op":"c","transaction":{{"id":"700:5000","total_order":1,"data_collection_order":1}},"ts_ns":1709288130500000000,"ts_us":1709288130500000,"ts_ms":1709288130500,"source":{source},"after":{{"photo":null,"biography":"b","name":"Ann","id":1}},"before":null}}"#
    );
    let lines = vec![
        r#"{"status":"BEGIN","id":"700:5000","ts_ms":1709288130500,"event_count":null,"data_collections":null}"#.to_string(),
        keyed(AUTHORS_KEY, r#"{"id":1}"#, &schema, &reordered),
        r#"{"status":"END","id":"700:5000","ts_ms":1709288130500,"event_count":1,"data_collections":[{"data_collection":"inventory.authors","event_count":1}]}"#.to_string(),
    ];
    let test = engine();
    ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(rows(&test.engine, "inventory.authors"), vec![vec![Value::Int32(1), utf8("Ann"), utf8("b"), Value::Null]]);
}

#[test]
fn rows_of_one_multi_row_statement_are_neither_duplicates_nor_reordered() {
    // INSERT ... VALUES (1),(2),(3) then UPDATE ... WHERE id IN (1,2): MySQL writes
    // one binlog event per statement; Debezium gives each row the event's position
    // and its index in `row`.
    let columns = fields(&[("int32", None, None, "id", false), ("int32", None, None, "qty", true)]);
    let schema = envelope("dbserver1.shop.stock", &columns, MYSQL_SOURCE_SCHEMA);
    let key_schema = r#"{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"k"}"#;
    let event = |op: &str, id: i64, before: Option<i64>, qty: i64, pos: u64, row: u64| {
        let before = before.map_or_else(|| "null".to_string(), |q| format!(r#"{{"id":{id},"qty":{q}}}"#));
        let after = format!(r#"{{"id":{id},"qty":{qty}}}"#);
        keyed(key_schema, &format!(r#"{{"id":{id}}}"#), &schema, &payload(op, &before, &after, &mysql_source("stock", pos, row, "false")))
    };
    let lines = vec![
        event("c", 1, None, 10, 500, 0),
        event("c", 2, None, 20, 500, 1),
        event("c", 3, None, 30, 500, 2),
        event("u", 1, Some(10), 11, 800, 0),
        event("u", 1, Some(11), 12, 800, 1), // the same row twice in one statement's rows
        event("u", 2, Some(20), 21, 800, 2),
    ];
    for grouping in [Grouping::PerEvent, Grouping::SourceTransaction] {
        let test = engine();
        let report = ingest(&test.engine, &lines, SinkOptions { grouping, ..SinkOptions::default() }).expect("ingest");
        assert_eq!(report.stats.duplicate_transactions, 0, "{grouping:?}");
        assert_eq!(report.stats.row_changes_applied, 6, "{grouping:?}");
        assert_eq!(
            rows(&test.engine, "shop.stock"),
            vec![vec![Value::Int32(1), Value::Int32(12)], vec![Value::Int32(2), Value::Int32(21)], vec![Value::Int32(3), Value::Int32(30)]],
            "{grouping:?}"
        );
    }
}

// ---------------------------------------------------------------------------------
// 7. Transaction metadata as the PostgreSQL connector writes it

/// Debezium's PostgreSQL connector writes transaction ids as `txId:LSN` with the LSN
/// of each message, so BEGIN, events and END of one transaction carry different ids
/// (the BEGIN and END lines are RisingWave's captured ones, `src/connector/src/parser/
/// plain_parser.rs`, their counts cut to this transaction's events). They are one
/// transaction, applied whole; MySQL's `uuid:n` GTIDs keep their whole id.
#[test]
fn postgresql_transaction_ids_carry_each_messages_lsn_and_still_group_one_transaction() {
    let begin = r#"{"schema":null,"payload":{"status":"BEGIN","id":"35352:3962948040","event_count":null,"data_collections":null,"ts_ms":1704269323180}}"#;
    let end = r#"{"schema":null,"payload":{"status":"END","id":"35352:3962950064","event_count":3,"data_collections":[{"data_collection":"inventory.authors","event_count":3}],"ts_ms":1704269323180}}"#;
    let event = |id: i64, lsn: u64, order: u64| {
        let source = pg_source("authors", 35352, lsn, "false");
        let after = format!(r#"{{"id":{id},"name":"n{id}","biography":null,"photo":null}}"#);
        let payload = payload("c", "null", &after, &source)
            .replace(r#""transaction":null"#, &format!(r#""transaction":{{"id":"35352:{lsn}","total_order":{order},"data_collection_order":{order}}}"#));
        keyed(AUTHORS_KEY, &format!(r#"{{"id":{id}}}"#), &authors_schema(), &payload)
    };
    let lines = vec![begin.to_string(), event(1, 3962948128, 1), event(2, 3962948400, 2), event(3, 3962949000, 3), end.to_string()];
    let test = engine();
    let report = ingest(&test.engine, &lines, SinkOptions::default()).expect("one transaction");
    assert_eq!(report.stats.row_changes_applied, 3);
    assert_eq!(rows(&test.engine, "inventory.authors").len(), 3);

    // Cut short (its END says 4 events): nothing of it is applied, and the error names
    // the transaction by its xid.
    let mut short = lines.clone();
    short[4] = end.replace(r#""event_count":3,"#, r#""event_count":4,"#).replace(r#""event_count":3}"#, r#""event_count":4}"#);
    let test = engine();
    let error = ingest(&test.engine, &short, SinkOptions::default()).expect_err("counts disagree").to_string();
    assert!(error.contains("transaction 35352"), "{error}");
    assert!(rows(&test.engine, "inventory.authors").is_empty());
}
