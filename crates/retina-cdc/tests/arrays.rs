//! PostgreSQL array and hstore columns (Connect `array` and `map`) as Debezium writes
//! them: kept as their JSON text (elements of logical types as PostgreSQL writes
//! them), and the placeholder of an unchanged TOASTed value never stored.

mod common;

use common::*;
use retina_cdc::SinkOptions;
use retina_core::Value;

const SCHEMA: &str = r#"{"type":"struct","name":"s.a.Envelope","fields":[{"type":"struct","optional":true,"field":"before","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"scores"},{"type":"array","items":{"type":"float","optional":true},"optional":true,"name":"io.debezium.data.FloatVector","field":"embedding"}]},{"type":"struct","optional":true,"field":"after","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"array","items":{"type":"string","optional":true},"optional":true,"field":"tags"},{"type":"array","items":{"type":"int32","optional":true},"optional":true,"field":"scores"},{"type":"array","items":{"type":"float","optional":true},"optional":true,"name":"io.debezium.data.FloatVector","field":"embedding"}]},{"type":"string","optional":false,"field":"op"}]}"#;

fn line(op: &str, after: &str) -> String {
    format!(
        r#"{{"schema":{SCHEMA},"payload":{{"before":null,"after":{after},"source":{{"connector":"postgresql","schema":"s","table":"a"}},"op":"{op}"}}}}"#
    )
}

#[test]
fn arrays_are_stored_as_json_text_and_a_toasted_array_keeps_its_value() {
    let test = engine();
    let toasted_ints = format!("[{}]", b"__debezium_unavailable_value".map(|b| b.to_string()).join(","));
    let lines = vec![
        line("c", r#"{"id":1,"tags":["a","b \"q\"",null],"scores":[1, 2,3],"embedding":[0.5,1.25]}"#),
        line("c", r#"{"id":2,"tags":[],"scores":null,"embedding":[[1,2],[3]]}"#),
        // Unchanged TOASTed arrays: Debezium's placeholders for text[] and int[].
        line("u", &format!(r#"{{"id":1,"tags":["__debezium_unavailable_value"],"scores":{toasted_ints},"embedding":[2.0]}}"#)),
    ];
    ingest(&test.engine, &lines, keyed("s.a", "id")).expect("ingest");
    let text = |s: &str| Value::Utf8(s.into());
    assert_eq!(
        rows(&test.engine, "s.a"),
        vec![
            vec![Value::Int32(1), text(r#"["a","b \"q\"",null]"#), text("[1,2,3]"), text("[2.0]")],
            vec![Value::Int32(2), text("[]"), Value::Null, text("[[1,2],[3]]")],
        ]
    );
}

#[test]
fn a_toasted_array_in_an_insert_is_refused_and_an_array_in_a_number_column_names_it() {
    let test = engine();
    let lines = vec![line("c", r#"{"id":1,"tags":["__debezium_unavailable_value"],"scores":null,"embedding":null}"#)];
    let error = ingest(&test.engine, &lines, keyed("s.a", "id")).expect_err("placeholder in an insert").to_string();
    assert!(error.contains("tags") && error.contains("unavailable-value placeholder"), "{error}");

    let schemaless = r#"{"before":null,"after":{"id":[1]},"source":{"schema":"s","table":"n"},"op":"c"}"#.to_string();
    let test = engine();
    let first = r#"{"before":null,"after":{"id":1},"source":{"schema":"s","table":"n"},"op":"c"}"#.to_string();
    let options = SinkOptions { infer_schema: true, ..keyed("s.n", "id") };
    let error = ingest(&test.engine, &[first, schemaless], options).expect_err("an array for an integer").to_string();
    assert!(error.contains("line 2") && error.contains("id") && error.contains("an array where an integer was expected"), "{error}");
}

#[test]
fn maps_are_stored_as_json_objects_and_a_toasted_map_keeps_its_value() {
    let field = |image: &str| {
        format!(
            r#"{{"type":"struct","optional":true,"field":"{image}","fields":[{{"type":"int32","optional":false,"field":"id"}},{{"type":"map","keys":{{"type":"string","optional":false}},"values":{{"type":"string","optional":true}},"optional":true,"field":"attrs"}}]}}"#
        )
    };
    let schema = format!(r#"{{"type":"struct","name":"s.h.Envelope","fields":[{},{},{{"type":"string","optional":false,"field":"op"}}]}}"#, field("before"), field("after"));
    let line = |op: &str, after: &str| {
        format!(r#"{{"schema":{schema},"payload":{{"before":null,"after":{after},"source":{{"connector":"postgresql","schema":"s","table":"h"}},"op":"{op}"}}}}"#)
    };
    let test = engine();
    let lines = vec![
        line("c", r#"{"id":1,"attrs":{"b":"2","a":null}}"#),
        line("c", r#"{"id":2,"attrs":{}}"#),
        line("u", r#"{"id":1,"attrs":{"__debezium_unavailable_value":"__debezium_unavailable_value"}}"#),
    ];
    ingest(&test.engine, &lines, keyed("s.h", "id")).expect("ingest");
    let text = |s: &str| Value::Utf8(s.into());
    assert_eq!(rows(&test.engine, "s.h"), vec![vec![Value::Int32(1), text(r#"{"a":null,"b":"2"}"#)], vec![Value::Int32(2), text("{}")]]);
}

/// transferia's captured PostgreSQL 1.8 stream: `numeric(5,2)[]`, `date[]` and
/// `timestamp(6)[]` arrive as base64 unscaled bytes, day numbers and epoch
/// microseconds; a pgvector `sparsevec` as Debezium's struct. Before, the arrays were
/// stored in that wire form (the decimal's scale lost) and the vector refused.
#[test]
fn arrays_of_logical_types_and_sparse_vectors_are_stored_as_postgresql_writes_them() {
    let array = |field: &str, items: &str| format!(r#"{{"type":"array","items":{items},"optional":true,"field":"{field}"}}"#);
    let image = |name: &str| {
        let columns = [
            r#"{"type":"int32","optional":false,"field":"i"}"#.to_string(),
            array("prices", r#"{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2","connect.decimal.precision":"5"}}"#),
            array("days", r#"{"type":"int32","optional":true,"name":"io.debezium.time.Date","version":1}"#),
            array("stamps", r#"{"type":"int64","optional":true,"name":"io.debezium.time.MicroTimestamp","version":1}"#),
            r#"{"type":"struct","optional":true,"name":"io.debezium.data.SparseVector","version":1,"fields":[{"type":"int16","optional":false,"field":"dimensions"},{"type":"map","keys":{"type":"int16","optional":false},"values":{"type":"float64","optional":false},"optional":false,"field":"vector"}],"field":"sv"}"#.to_string(),
        ];
        format!(r#"{{"type":"struct","optional":true,"field":"{name}","fields":[{}]}}"#, columns.join(","))
    };
    let schema = format!(
        r#"{{"type":"struct","name":"f.public.t.Envelope","fields":[{},{},{{"type":"struct","optional":false,"name":"io.debezium.connector.postgresql.Source","field":"source","fields":[]}},{{"type":"string","optional":false,"field":"op"}}]}}"#,
        image("before"),
        image("after")
    );
    let line = |after: &str| {
        format!(r#"{{"schema":{schema},"payload":{{"before":null,"after":{after},"source":{{"connector":"postgresql","schema":"public","table":"t","txId":558,"lsn":24868272}},"op":"c"}}}}"#)
    };
    let lines = vec![
        line(r#"{"i":1,"prices":["ME8=",null],"days":[10599],"stamps":[1098181434987654],"sv":{"dimensions":25,"vector":[[5,20.0],[1,10.0]]}}"#),
        line(r#"{"i":2,"prices":[],"days":null,"stamps":[[0]],"sv":null}"#),
    ];
    let test = engine();
    ingest(&test.engine, &lines, keyed("public.t", "i")).expect("ingest");
    let text = |s: &str| Value::Utf8(s.into());
    assert_eq!(
        rows(&test.engine, "public.t"),
        vec![
            vec![Value::Int32(1), text("[123.67,null]"), text(r#"["1999-01-08"]"#), text(r#"["2004-10-19T10:23:54.987654"]"#), text("{1:10,5:20}/25")],
            vec![Value::Int32(2), text("[]"), Value::Null, text(r#"[["1970-01-01T00:00:00"]]"#), Value::Null],
        ]
    );

    // An element that is not of its type is named with its column and line.
    let test = engine();
    let bad = vec![line(r#"{"i":3,"prices":["ME8=","%%"],"days":null,"stamps":null,"sv":null}"#)];
    let error = ingest(&test.engine, &bad, keyed("public.t", "i")).expect_err("bad element").to_string();
    assert!(error.contains("line 1") && error.contains("prices") && error.contains(r#"element "%%""#), "{error}");
}
