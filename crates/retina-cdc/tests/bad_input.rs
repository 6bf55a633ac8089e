//! Every bad-input path: the error names the position, table and field; replay stops
//! without applying the bad transaction (or, with `--dead-letter`, diverts it and
//! continues).

mod common;

use common::*;
use retina_cdc::{CdcError, SinkOptions};
use retina_core::Value;

fn expect_error(lines: &[String], expected: &[&str]) -> (TestEngine, String) {
    let test = engine();
    let error = ingest(&test.engine, lines, SinkOptions::default()).expect_err("bad input must fail").to_string();
    for part in expected {
        assert!(error.contains(part), "error {error:?} lacks {part:?}");
    }
    (test, error)
}

fn good_txn(id: &str, key: i64) -> Vec<String> {
    vec![begin(id), event("c", key, Some("ok"), Some((id, 1))), end(id, 1, "s.t")]
}

#[test]
fn malformed_json_names_the_line_and_nothing_after_is_applied() {
    let mut lines = good_txn("1", 1);
    lines.push("{\"not json".into());
    lines.extend(good_txn("2", 2));
    let (test, _) = expect_error(&lines, &["line 4", "malformed JSON"]);
    assert_eq!(rows(&test.engine, "s.t"), vec![vec![Value::Int64(1), Value::Utf8("ok".into())]]);
}

#[test]
fn missing_field_names_line_and_field() {
    let line = event("c", 1, Some("a"), None).replace(r#""op":"c","#, "");
    expect_error(&[line], &["line 1", "field op: missing"]);
}

/// A schema change event or a flattened row in a stream of change events is named
/// for what it is, at its line, and nothing after it is applied.
#[test]
fn messages_that_are_not_row_changes_are_named() {
    let ddl = r#"{"source":{"connector":"mysql","db":"s","table":"t"},"databaseName":"s","ddl":"ALTER TABLE t ADD c INT","tableChanges":[]}"#;
    let flattened = r#"{"id":3,"note":"x","__deleted":"true"}"#;
    for (line, expected) in [(ddl, "a schema change event"), (flattened, "ExtractNewRecordState")] {
        let mut lines = good_txn("1", 1);
        lines.push(line.to_string());
        lines.extend(good_txn("2", 2));
        let (test, _) = expect_error(&lines, &["line 4", "not a row change event", expected]);
        assert_eq!(rows(&test.engine, "s.t"), vec![vec![Value::Int64(1), Value::Utf8("ok".into())]]);
    }
}

#[test]
fn mistyped_column_names_line_table_and_column() {
    let line = event("c", 1, Some("a"), None).replace(r#""after":{"id":1,"#, r#""after":{"id":"one","#);
    expect_error(&[line], &["line 1", "table s.t", "after.id"]);
}

#[test]
fn update_of_a_missing_key_names_the_transaction_table_and_key() {
    let mut lines = good_txn("1", 1);
    lines.extend([begin("2"), event("u", 99, Some("x"), Some(("2", 1))), end("2", 1, "s.t")]);
    let (test, error) = expect_error(&lines, &["line 4", "source transaction 2", "table s.t", "key id=99", "no live row"]);
    assert!(error.contains("line 6"), "names where the transaction ends: {error}");
    // The failed transaction never becomes visible, so the durable position stays before
    // it (its group-commit batch, which here also held transaction 1, is not visible).
    for visible in test.engine.source_positions() {
        let position = retina_cdc::SinkPosition::decode(&visible.position).expect("sink position");
        assert!(position.transport < 4, "{visible:?}");
    }
}

#[test]
fn delete_of_a_missing_key_fails() {
    let lines = vec![begin("1"), event("d", 5, None, Some(("1", 1))), end("1", 1, "s.t")];
    expect_error(&lines, &["line 1", "table s.t", "key id=5", "delete"]);
}

#[test]
fn end_without_begin() {
    expect_error(&[end("7", 1, "s.t")], &["line 1", "transaction 7", "END without BEGIN"]);
}

#[test]
fn event_count_mismatch_applies_nothing_of_the_transaction() {
    let lines = vec![
        begin("1"),
        event("c", 1, Some("a"), Some(("1", 1))),
        event("c", 2, Some("b"), Some(("1", 2))),
        end("1", 3, "s.t"),
    ];
    let (test, _) = expect_error(&lines, &["line 4", "transaction 1", "event_count 3 but 2"]);
    assert!(rows(&test.engine, "s.t").is_empty());
}

#[test]
fn total_order_gap_is_an_error() {
    let lines = vec![begin("1"), event("c", 1, Some("a"), Some(("1", 1))), event("c", 2, Some("b"), Some(("1", 3))), end("1", 2, "s.t")];
    expect_error(&lines, &["line 4", "total_order 3 where 2 was expected"]);
}

#[test]
fn event_outside_its_transaction_is_an_error() {
    expect_error(&[event("c", 1, Some("a"), Some(("9", 1)))], &["line 1", "transaction 9", "outside its BEGIN/END"]);
}

#[test]
fn stream_ending_inside_a_transaction_applies_nothing_of_it() {
    let lines = vec![begin("1"), event("c", 1, Some("a"), Some(("1", 1)))];
    let (test, _) = expect_error(&lines, &["transaction 1", "ended before its END"]);
    assert!(rows(&test.engine, "s.t").is_empty());
}

/// A logical name the decoder does not know is read as its primitive type (Kafka
/// Connect's convention); a known name over the wrong type, or an unknown struct,
/// is an error naming field and type.
#[test]
fn unknown_semantic_types_fall_back_to_their_primitive_and_contradictions_name_field_and_type() {
    let with_name = |semantic: &str, connect_type: &str| {
        event("c", 1, Some("a"), None).replace(
            r#"{"type":"string","optional":true,"field":"name"}"#,
            &format!(r#"{{"type":"{connect_type}","optional":true,"name":"{semantic}","field":"name"}}"#),
        )
    };
    let test = engine();
    ingest(&test.engine, &[with_name("io.example.Martian", "string")], SinkOptions::default()).expect("read as a string");
    assert_eq!(rows(&test.engine, "s.t"), vec![vec![Value::Int64(1), Value::Utf8("a".into())]]);
    expect_error(&[with_name("io.debezium.time.Date", "string")], &["line 1", "table s.t", "name", "io.debezium.time.Date (string)"]);
    expect_error(&[with_name("io.example.Martian", "struct")], &["line 1", "table s.t", "name", "io.example.Martian (struct)"]);
}

#[test]
fn keyless_update_of_an_unknown_table_names_the_table() {
    let line = r#"{"before":null,"after":{"id":1},"source":{"schema":"s","table":"nokey"},"op":"u"}"#.to_string();
    let test = engine();
    let options = SinkOptions { infer_schema: true, ..SinkOptions::default() };
    let error = ingest(&test.engine, std::slice::from_ref(&line), options).expect_err("no key").to_string();
    assert!(error.contains("table s.nokey") && error.contains("--primary-key"), "{error}");
    // With --primary-key the same stream fails only because the row does not exist.
    let mut options = SinkOptions { infer_schema: true, ..SinkOptions::default() };
    options.primary_keys.insert("s.nokey".into(), vec!["id".into()]);
    let test = engine();
    let error = ingest(&test.engine, &[line], options).expect_err("missing row").to_string();
    assert!(error.contains("no live row"), "{error}");
}

#[test]
fn schemaless_unknown_table_without_infer_schema_is_an_error() {
    let line = r#"{"before":null,"after":{"id":1},"source":{"schema":"s","table":"x"},"op":"c"}"#.to_string();
    let test = engine();
    let error = ingest(&test.engine, &[line], SinkOptions::default()).expect_err("no schema").to_string();
    assert!(error.contains("table s.x") && error.contains("--infer-schema"), "{error}");
}

#[test]
fn added_nullable_columns_are_added_and_incompatible_changes_name_table_and_column() {
    let first = event("c", 1, Some("a"), None);
    let with_extra = |id: i64, name: &str, optional: bool| {
        event("c", id, Some(name), None)
            .replace(
                r#"{"type":"string","optional":true,"field":"name"}]"#,
                &format!(r#"{{"type":"string","optional":true,"field":"name"}},{{"type":"int32","optional":{optional},"field":"extra"}}]"#),
            )
            .replace(&format!(r#""name":"{name}"}}"#), &format!(r#""name":"{name}","extra":{id}}}"#))
    };
    // A new nullable column is appended: earlier rows read NULL, and events still
    // carrying the old schema afterwards get NULL too.
    let test = engine();
    ingest(&test.engine, &[first.clone(), with_extra(2, "b", true), event("c", 3, Some("c"), None)], SinkOptions::default())
        .expect("added column");
    let rows: Vec<String> = rows(&test.engine, "s.t").iter().map(|r| format!("{r:?}")).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    assert!(rows[0].contains("Int64(1)") && rows[0].ends_with("Null]"), "{rows:?}");
    assert!(rows[1].contains("Int64(2)") && rows[1].contains("Int32(2)"), "{rows:?}");
    assert!(rows[2].contains("Int64(3)") && rows[2].ends_with("Null]"), "{rows:?}");

    let test = engine();
    let error = ingest(&test.engine, &[first.clone(), with_extra(2, "b", false)], SinkOptions::default()).expect_err("required column").to_string();
    assert!(error.contains("table s.t, column extra") && error.contains("non-nullable"), "{error}");
    let changed = event("c", 2, Some("b"), None).replace(r#"{"type":"string","optional":true,"field":"name"}"#, r#"{"type":"int32","optional":true,"field":"name"}"#);
    let test = engine();
    let error = ingest(&test.engine, &[first, changed], SinkOptions::default()).expect_err("changed type").to_string();
    assert!(error.contains("table s.t, column name") && error.contains("incompatible"), "{error}");
}

#[test]
fn dead_letter_diverts_bad_messages_and_whole_bad_transactions_and_continues() {
    let test = engine();
    let dead = test.dir.path().join("dead.jsonl");
    let mut lines = good_txn("1", 1);
    lines.push("garbage".into()); // line 4
    lines.extend([begin("2"), event("c", 2, Some("b"), Some(("2", 1))), end("2", 2, "s.t")]); // lines 5-7: count mismatch
    lines.push(end("3", 1, "s.t")); // line 8: END without BEGIN
    lines.extend(good_txn("4", 4));
    let options = SinkOptions { dead_letter: Some(dead.clone()), ..SinkOptions::default() };
    let report = ingest(&test.engine, &lines, options).expect("continues past bad input");
    assert_eq!(report.stats.dead_letters, 5);
    let written = std::fs::read_to_string(&dead).expect("dead letters");
    let letters: Vec<serde_json::Value> = written.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
    let positions: Vec<&str> = letters.iter().map(|l| l["position"].as_str().unwrap_or("")).collect();
    assert_eq!(positions, ["line 4", "line 5", "line 6", "line 7", "line 8"]);
    assert!(letters[0]["reason"].as_str().unwrap_or("").contains("malformed JSON"));
    assert!(letters[1]["reason"].as_str().unwrap_or("").contains("event_count 2 but 1"));
    assert_eq!(letters[0]["message"], "garbage");
    // Read with its (by then known) schemas left out, the event is written whole.
    assert_eq!(letters[2]["message"].as_str(), Some(lines[5].as_str()));
    let ids: Vec<Value> = rows(&test.engine, "s.t").into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(ids, vec![Value::Int64(1), Value::Int64(4)], "transaction 2 is not half-applied");
    // An engine failure is never dead-lettered.
    let test = engine();
    let options = SinkOptions { dead_letter: Some(test.dir.path().join("d2.jsonl")), ..SinkOptions::default() };
    let lines = vec![begin("1"), event("d", 5, None, Some(("1", 1))), end("1", 1, "s.t")];
    assert!(matches!(ingest(&test.engine, &lines, options), Err(CdcError::Apply { .. })));
}

/// An event that cannot be applied takes its whole source transaction to the dead
/// letters, the others of it too, with its reason: grouped by source transaction id
/// (no transaction metadata), where the rest of the group used to be applied, and
/// between BEGIN and END.
#[test]
fn dead_letter_takes_the_whole_transaction_of_an_event_that_cannot_be_applied() {
    let in_transaction = |line: String, from: &str, to: &str| line.replace(&format!(r#""txId":{from}"#), &format!(r#""txId":{to}"#));
    let bad = |txn| event("c", 2, Some("b"), txn).replace(r#""after":{"id":2,"#, r#""after":{"id":"two","#);
    let without_metadata = vec![
        event("c", 1, Some("a"), None),
        in_transaction(event("d", 1, None, None), "1", "7"),
        in_transaction(bad(None), "2", "7"),
        event("c", 3, Some("c"), None),
    ];
    let mut with_metadata = good_txn("1", 1);
    with_metadata.extend([begin("5"), event("d", 1, None, Some(("5", 1))), bad(Some(("5", 2))), end("5", 2, "s.t")]);
    with_metadata.extend(good_txn("6", 3));
    let cases = [(without_metadata, vec!["line 2", "line 3"], "line 3"), (with_metadata, vec!["line 4", "line 5", "line 6", "line 7"], "line 6")];
    for (lines, dead_lettered, bad_line) in cases {
        let test = engine();
        let dead = test.dir.path().join("dead.jsonl");
        let options = SinkOptions { dead_letter: Some(dead.clone()), ..SinkOptions::default() };
        let report = ingest(&test.engine, &lines, options).expect("continues past the bad transaction");
        assert_eq!(report.stats.dead_letters, dead_lettered.len() as u64);
        let written = std::fs::read_to_string(&dead).expect("dead letters");
        let letters: Vec<serde_json::Value> = written.lines().map(|l| serde_json::from_str(l).expect("json line")).collect();
        let positions: Vec<&str> = letters.iter().map(|l| l["position"].as_str().unwrap_or("")).collect();
        assert_eq!(positions, dead_lettered);
        for letter in &letters {
            let reason = letter["reason"].as_str().unwrap_or("");
            assert!(reason.contains("after.id") && reason.contains("table s.t"), "{reason}");
        }
        let ids: Vec<Value> = rows(&test.engine, "s.t").into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(ids, vec![Value::Int64(1), Value::Int64(3)], "the delete of its transaction is not applied");
        // Without dead letters the run stops at the event, naming it, and applies
        // nothing of its transaction either.
        let test = engine();
        let error = ingest(&test.engine, &lines, SinkOptions::default()).expect_err("stops").to_string();
        assert!(error.contains(bad_line) && error.contains("after.id"), "{error}");
        let ids: Vec<Value> = rows(&test.engine, "s.t").into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(ids, vec![Value::Int64(1)], "the delete before the bad event is not applied");
    }
}

/// A dead letter after the last applied transaction (the end of a file) is passed
/// by the recorded position, so a restart neither reads nor writes it again; one
/// inside an open transaction is not passed.
#[test]
fn a_dead_letter_after_the_last_transaction_is_not_written_again_by_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let lake = dir.path().join("lake");
    let dead = dir.path().join("dead.jsonl");
    let open = || {
        let store = retina_storage::ParquetLakeStore::open(lake.to_str().expect("utf-8")).expect("store");
        let config = retina_core::EngineConfig { shards: 2, gc_interval: None, ..retina_core::EngineConfig::default() };
        retina_core::Engine::open(config, std::sync::Arc::new(store)).expect("open")
    };
    let mut lines = good_txn("1", 1);
    lines.push("garbage".into());
    for run in 0..3 {
        let engine = open();
        let options = SinkOptions { dead_letter: Some(dead.clone()), ..SinkOptions::default() };
        let report = ingest(&engine, &lines, options).expect("continues past bad input");
        assert_eq!(report.stats.dead_letters, u64::from(run == 0), "run {run}");
        assert_eq!(rows(&engine, "s.t"), vec![vec![Value::Int64(1), Value::Utf8("ok".into())]]);
        engine.close().expect("close");
    }
    assert_eq!(std::fs::read_to_string(&dead).expect("dead letters").lines().count(), 1);

    // Inside an open transaction the recorded position stays before its BEGIN: a
    // restart must read the transaction again.
    let test = engine();
    let options = SinkOptions { dead_letter: Some(test.dir.path().join("d.jsonl")), ..SinkOptions::default() };
    let mut sink = retina_cdc::sink::Sink::new(&test.engine, "file:test.jsonl", options).expect("sink");
    let mut lines = good_txn("1", 1);
    lines.extend([begin("2"), "garbage".into()]);
    let transport = |sink: &mut retina_cdc::sink::Sink, lines: &[String], from: usize| {
        for (n, line) in lines.iter().enumerate().skip(from) {
            sink.handle(retina_cdc::Position::line(n as u64 + 1), line).expect("handled");
        }
        sink.idle().expect("idle");
        test.engine.sync().expect("sync");
        test.engine.source_positions().iter().find_map(|p| retina_cdc::SinkPosition::decode(&p.position)).map(|p| p.transport)
    };
    assert_eq!(transport(&mut sink, &lines, 0), Some(3), "not past BEGIN 2 at line 4");
    lines.extend([event("c", 2, Some("b"), Some(("2", 1))), end("2", 1, "s.t"), "garbage".into()]);
    assert_eq!(transport(&mut sink, &lines, 5), Some(8), "past the dead letter after END 2");
}

/// Debezium's `ByLogicalTableRouter` adds `__dbz__physicalTableIdentifier` to each
/// key (as in a captured SQL Server stream): the key is then no set of columns, so a
/// new table is refused with what to do, and `--primary-key` gives its key.
#[test]
fn a_key_with_a_routing_field_needs_and_takes_a_given_primary_key() {
    let routed = |line: String| {
        line.replace(
            r#""fields":[{"type":"int64","optional":false,"field":"id"}]}"#,
            r#""fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":false,"field":"__dbz__physicalTableIdentifier"}]}"#,
        )
        .replacen(r#""payload":{"id":"#, r#""payload":{"__dbz__physicalTableIdentifier":"srv.s.t","id":"#, 1)
    };
    let lines: Vec<String> =
        [event("c", 1, Some("a"), None), event("c", 2, Some("b"), None), event("u", 1, Some("c"), None), event("d", 2, None, None)]
            .into_iter()
            .map(routed)
            .collect();
    assert!(lines[0].contains("__dbz__physicalTableIdentifier\":\"srv.s.t\",\"id\":1"), "{}", lines[0]);
    let test = engine();
    let error = ingest(&test.engine, &lines, SinkOptions::default()).expect_err("routed key").to_string();
    assert!(error.contains("table s.t") && error.contains("__dbz__physicalTableIdentifier"), "{error}");
    assert!(error.contains("ByLogicalTableRouter") && error.contains("--primary-key s.t=COL"), "{error}");
    let test = engine();
    ingest(&test.engine, &lines, keyed("s.t", "id")).expect("with --primary-key");
    assert_eq!(rows(&test.engine, "s.t"), vec![vec![Value::Int64(1), Value::Utf8("c".into())]]);
}
