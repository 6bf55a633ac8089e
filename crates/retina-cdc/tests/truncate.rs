//! Debezium truncate events become deletes of every row live at that point of the
//! transaction, including rows the same transaction inserted before the truncate.

mod common;

use common::*;
use retina_cdc::SinkOptions;
use retina_core::Value;

fn truncate(txn: Option<(&str, u64)>) -> String {
    event("c", 0, Some("x"), txn)
        .replace(r#""op":"c""#, r#""op":"t""#)
        .replace(r#""after":{"id":0,"name":"x"}"#, r#""after":null"#)
}

fn ids(test: &TestEngine) -> Vec<Value> {
    rows(&test.engine, "s.t").into_iter().map(|r| r[0].clone()).collect()
}

#[test]
fn truncate_deletes_visible_rows_and_earlier_rows_of_its_own_transaction() {
    let lines = vec![
        begin("1"),
        event("c", 1, Some("a"), Some(("1", 1))),
        event("c", 2, Some("b"), Some(("1", 2))),
        end("1", 2, "s.t"),
        begin("2"),
        event("c", 3, Some("c"), Some(("2", 1))),
        event("d", 1, None, Some(("2", 2))),
        truncate(Some(("2", 3))),
        event("c", 4, Some("d"), Some(("2", 4))),
        end("2", 4, "s.t"),
        begin("3"),
        event("c", 2, Some("again"), Some(("3", 1))),
        end("3", 1, "s.t"),
    ];
    let test = engine();
    let report = ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(report.stats.transactions_applied, 3);
    assert_eq!(ids(&test), vec![Value::Int64(2), Value::Int64(4)], "keys 1..3 are gone, 2 came back, 4 stays");
}

#[test]
fn truncate_without_transaction_metadata_is_its_own_transaction() {
    let plain = |op: &str, id: i64| event(op, id, Some("v"), None);
    let lines = vec![plain("c", 1), plain("c", 2), truncate(None), plain("c", 3)];
    let test = engine();
    ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(ids(&test), vec![Value::Int64(3)]);
}
