//! PostgreSQL array and hstore columns (Connect `array` and `map`) as Debezium writes
//! them: kept as their JSON text, and the placeholder of an unchanged TOASTed value
//! never stored.

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
