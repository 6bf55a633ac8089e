//! Decimal columns whose Connect parameters Arrow does not take as they are.

mod common;

use common::*;
use retina_core::Value;

/// A table `s.d` with a key and a decimal of `scale` and `precision`.
fn line(scale: &str, precision: &str, value: &str) -> String {
    let decimal = format!(
        r#"{{"type":"bytes","optional":true,"name":"org.apache.kafka.connect.data.Decimal","parameters":{{"scale":"{scale}","connect.decimal.precision":"{precision}"}},"field":"x"}}"#
    );
    let image = format!(r#"{{"type":"struct","optional":true,"field":"after","fields":[{{"type":"int32","optional":false,"field":"id"}},{decimal}]}}"#);
    let schema = format!(r#"{{"type":"struct","name":"s.d.Envelope","fields":[{image},{{"type":"string","optional":false,"field":"op"}}]}}"#);
    format!(r#"{{"schema":{schema},"payload":{{"before":null,"after":{{"id":1,"x":"{value}"}},"source":{{"schema":"s","table":"d"}},"op":"c"}}}}"#)
}

/// PostgreSQL 15's numeric(5,6): stored as Decimal128(6,6). A worker used to panic
/// on it (Arrow refuses a scale above the precision) and the ingest never ended.
#[test]
fn a_scale_above_the_precision_widens_the_precision() {
    let test = engine();
    // 23456 unscaled, scale 6: 0.023456.
    ingest(&test.engine, &[line("6", "5", "AFug")], keyed("s.d", "id")).expect("ingest");
    let id = test.engine.table_id("s.d").expect("table");
    let schema = test.engine.table(id).expect("table").schema();
    assert_eq!(schema.columns().field(1).data_type(), &arrow_schema::DataType::Decimal128(6, 6));
    assert_eq!(rows(&test.engine, "s.d"), vec![vec![Value::Int32(1), Value::Decimal128(23_456)]]);
}

#[test]
fn a_negative_scale_is_refused_naming_the_column() {
    let test = engine();
    let error = ingest(&test.engine, &[line("-2", "5", "AFug")], keyed("s.d", "id")).expect_err("negative scale").to_string();
    assert!(error.contains("line 1") && error.contains("s.d") && error.contains("column x") && error.contains("cannot store"), "{error}");
}
