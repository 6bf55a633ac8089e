//! Tables inferred from schemaless events (`--infer-schema`): a column is typed by
//! its first value, whenever that arrives, and fields that appear later become
//! columns.

mod common;

use arrow_schema::DataType;
use common::*;
use retina_cdc::SinkOptions;
use retina_core::Value;

fn change(op: &str, after: &str) -> String {
    format!(r#"{{"before":null,"after":{after},"source":{{"schema":"s","table":"u"}},"op":"{op}"}}"#)
}

fn inferring() -> SinkOptions {
    SinkOptions { infer_schema: true, ..keyed("s.u", "id") }
}

fn columns(test: &TestEngine) -> Vec<(String, DataType)> {
    let id = test.engine.table_id("s.u").expect("table s.u");
    let table = test.engine.table(id).expect("table");
    let schema = table.schema();
    schema.columns().fields().iter().map(|f| (f.name().clone(), f.data_type().clone())).collect()
}

#[test]
fn a_column_null_at_first_is_typed_by_its_first_value() {
    let test = engine();
    let lines = vec![
        change("c", r#"{"id":1,"deleted_at":null,"name":"a"}"#),
        change("c", r#"{"id":2,"deleted_at":1700000000000000,"name":null}"#),
        change("c", r#"{"id":3,"deleted_at":null,"name":"c","score":1.5,"never":null}"#),
        change("u", r#"{"id":1,"deleted_at":5,"name":"a","score":null}"#),
    ];
    ingest(&test.engine, &lines, inferring()).expect("ingest");
    let expected_columns = [("id", DataType::Int64), ("name", DataType::Utf8), ("deleted_at", DataType::Int64), ("score", DataType::Float64)];
    let expected_columns: Vec<(String, DataType)> = expected_columns.into_iter().map(|(n, t)| (n.to_string(), t)).collect();
    assert_eq!(columns(&test), expected_columns, "a field null in every message so far is no column yet");
    let text = |s: &str| Value::Utf8(s.into());
    assert_eq!(
        rows(&test.engine, "s.u"),
        vec![
            vec![Value::Int64(1), text("a"), Value::Int64(5), Value::Null],
            vec![Value::Int64(2), Value::Null, Value::Int64(1_700_000_000_000_000), Value::Null],
            vec![Value::Int64(3), text("c"), Value::Null, Value::Float64(1.5)],
        ]
    );
}

#[test]
fn a_restart_decodes_inferred_decimals_and_adds_fields_to_the_catalog_table() {
    let test = engine();
    let mut lines = vec![change("c", r#"{"id":1,"amount":{"scale":2,"value":"AQ=="}}"#)];
    ingest(&test.engine, &lines, inferring()).expect("first run");
    // A second run knows the table only from the catalog: `amount` is text there.
    lines.push(change("c", r#"{"id":2,"amount":{"scale":1,"value":"Cg=="},"note":"n"}"#));
    ingest(&test.engine, &lines, inferring()).expect("second run");
    let text = |s: &str| Value::Utf8(s.into());
    assert_eq!(rows(&test.engine, "s.u"), vec![vec![Value::Int64(1), text("0.01"), Value::Null], vec![Value::Int64(2), text("1.0"), text("n")]]);
}

#[test]
fn a_value_of_another_type_names_the_column_and_without_inference_new_fields_are_refused() {
    let test = engine();
    let lines = vec![change("c", r#"{"id":1,"deleted_at":null}"#), change("c", r#"{"id":2,"deleted_at":7}"#), change("c", r#"{"id":3,"deleted_at":"soon"}"#)];
    let error = ingest(&test.engine, &lines, inferring()).expect_err("text in an integer column").to_string();
    assert!(error.contains("line 3") && error.contains("table s.u") && error.contains("deleted_at"), "{error}");
    assert_eq!(rows(&test.engine, "s.u").len(), 2, "the rows before the bad one are kept");

    // A table the user made is not widened without --infer-schema, nor does a null
    // pass for a column it lacks.
    let options = keyed("s.u", "id");
    for (n, field) in [(4, r#""extra":1"#), (5, r#""extra":null"#)] {
        let mut more = lines[..2].to_vec();
        more.push(change("c", &format!(r#"{{"id":{n},{field}}}"#)));
        let error = ingest(&test.engine, &more, options.clone()).expect_err("no such column").to_string();
        assert!(error.contains("extra") && error.contains("is not a column of table s.u"), "{error}");
    }
}

/// MySQL's BIGINT UNSIGNED past i64 (Flink CDC's all-types capture): the column is a
/// 20-digit decimal, which holds it and the values after it, small ones too.
#[test]
fn an_unsigned_value_past_i64_makes_a_decimal_column() {
    let test = engine();
    let lines = vec![
        change("c", r#"{"id":1,"big_un":18446744073709551615}"#),
        change("c", r#"{"id":2,"big_un":7}"#),
    ];
    ingest(&test.engine, &lines, inferring()).expect("ingest");
    assert_eq!(columns(&test)[1], ("big_un".to_string(), DataType::Decimal128(20, 0)));
    let values: Vec<Value> = rows(&test.engine, "s.u").into_iter().map(|r| r[1].clone()).collect();
    assert_eq!(values, vec![Value::Decimal128(18_446_744_073_709_551_615), Value::Decimal128(7)]);
}
