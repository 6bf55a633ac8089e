//! Lines whose schemas the decoder already knows skip re-reading them; the decoded
//! message must be the same as a full parse gives, through schema changes, key
//! schemas and layouts the fast path does not take.

mod common;

use common::*;
use retina_cdc::debezium::{decode_elided, decode_line, KnownSchemas, Line, Message, SchemaElider};
use retina_cdc::SinkOptions;

/// `line` decoded by a thread that has seen no schema (the full parse).
fn decoded_cold(line: &str) -> String {
    let line = line.to_string();
    std::thread::spawn(move || format!("{:?}", decode_line(&line))).join().expect("decode thread")
}

/// `event`'s line with one more nullable column, `extra`, in schema and after-image.
fn with_extra(id: i64, name: &str) -> String {
    event("c", id, Some(name), None)
        .replace(
            r#"{"type":"string","optional":true,"field":"name"}]"#,
            r#"{"type":"string","optional":true,"field":"name"},{"type":"int32","optional":true,"field":"extra"}]"#,
        )
        .replace(&format!(r#""name":"{name}"}}"#), &format!(r#""name":"{name}","extra":{id}}}"#))
}

fn stream() -> Vec<String> {
    let pretty = event("c", 4, Some("d"), None).replace(r#"{"schema":"#, "{ \"schema\" :\t ").replace(r#","payload":"#, " ,\t\"payload\": ");
    let unkeyed = {
        let line = event("c", 5, Some("e"), None);
        let value = line.split_once(r#","value":"#).expect("keyed").1;
        value[..value.len() - 1].to_string()
    };
    vec![
        event("c", 1, Some("a"), None),
        event("u", 1, Some("b"), None),
        with_extra(2, "c"),
        event("c", 3, Some("c"), None),
        with_extra(6, "x"),
        pretty,
        unkeyed,
        event("d", 1, None, None),
        // Not a layout the fast path takes (payload first): the full parse reads it.
        format!(r#"{{"payload":{{"before":null,"after":{{"id":7,"name":"p"}},"source":{{"schema":"s","table":"t"}},"op":"c"}},"schema":{SCHEMA}}}"#),
        // A known schema with a broken payload: the same error either way.
        format!(r#"{{"schema":{SCHEMA},"payload":{{"op":"c","after":{{"id":}}}}}}"#),
        format!(r#"{{"schema":{SCHEMA},"payload":null}}"#),
        // As a Kafka source wraps them: the topic's table first (a source block wins),
        // keyed and keyless, with and without a source block.
        event("c", 8, Some("k"), None).replacen(r#"{"key":"#, r#"{"table":"x.y","key":"#, 1),
        sourceless(9).replacen(r#"{"key":"#, r#"{"table":"x.y","key":"#, 1),
        {
            let line = sourceless(10);
            let value = line.split_once(r#","value":"#).expect("keyed").1;
            format!(r#"{{"table":"x.y","value":{}}}"#, &value[..value.len() - 1])
        },
    ]
}

/// `event` without its `source` block.
fn sourceless(id: i64) -> String {
    let line = event("c", id, Some("s"), None);
    let start = line.find(r#""source":"#).expect("source");
    let end = start + line[start..].find("},").expect("end of source") + 2;
    format!("{}{}", &line[..start], &line[end..])
}

#[test]
fn a_wrapper_s_table_names_events_without_a_source_block_on_both_paths() {
    let lines = [sourceless(9).replacen(r#"{"key":"#, r#"{"table":"x.y","key":"#, 1), event("c", 8, Some("k"), None).replacen(r#"{"key":"#, r#"{"table":"x.y","key":"#, 1)];
    for (line, table) in lines.iter().zip(["x.y", "s.t"]) {
        let warm = format!("{:?}", decode_line(line));
        assert_eq!(decoded_cold(line), warm, "{line}");
        assert!(warm.contains(&format!("table: \"{table}\"")), "{warm}");
    }
    let error = decode_line(&sourceless(9)).expect_err("no table").to_string();
    assert!(error.contains("source"), "{error}");
}

#[test]
fn known_schemas_decode_as_the_full_parse_does() {
    let lines = stream();
    // One thread decodes them all in order, so every schema is known after its first line.
    let warm: Vec<String> = lines.iter().map(|line| format!("{:?}", decode_line(line))).collect();
    for (line, warm) in lines.iter().zip(&warm) {
        assert_eq!(&decoded_cold(line), warm, "{line}");
    }
    // Decoding twice in a row is the same as well (the second time certainly warm).
    for line in &lines {
        assert_eq!(format!("{:?}", decode_line(line)), format!("{:?}", decode_line(line)), "{line}");
    }
    assert!(warm[9].starts_with("Err(") && warm[10] == "Ok(Tombstone)", "{warm:?}");
}

#[test]
fn schema_changes_mid_stream_land_through_the_sink() {
    let test = engine();
    let lines: Vec<String> = stream().into_iter().take(9).collect();
    let report = ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(report.stats.row_changes_applied, 9);
    let rows: Vec<String> = rows(&test.engine, "s.t").iter().map(|r| format!("{r:?}")).collect();
    assert_eq!(rows.len(), 6, "{rows:?}");
    assert!(rows.iter().any(|r| r.contains("Int64(2)") && r.contains("Int32(2)")), "{rows:?}");
    assert!(rows.iter().any(|r| r.contains("Int64(6)") && r.contains("Int32(6)")), "{rows:?}");
    assert!(rows.iter().any(|r| r.contains("Int64(3)") && r.ends_with("Null]")), "{rows:?}");
}

/// Nothing in a Connect schema has to name its table: two tables with byte-identical
/// schemas each get their own rows.
#[test]
fn tables_with_identical_schemas_stay_apart() {
    let anonymous = SCHEMA.replace(r#""name":"s.t.Envelope","#, "");
    let line = |table: &str, id: i64| {
        event("c", id, Some(table), None).replace(SCHEMA, &anonymous).replace(r#""table":"t""#, &format!(r#""table":"{table}""#))
    };
    let lines = vec![line("a", 1), line("b", 2), line("a", 3), line("b", 4), line("b", 5)];
    assert!(lines[0].contains(r#""table":"a""#), "{}", lines[0]);
    let test = engine();
    ingest(&test.engine, &lines, SinkOptions::default()).expect("ingest");
    assert_eq!(rows(&test.engine, "s.a").len(), 2);
    assert_eq!(rows(&test.engine, "s.b").len(), 3);
}

/// Interns the schemas of `line` as the sink does when it binds its table.
fn bind_schemas(known: &KnownSchemas, line: &str) {
    if let Ok(Message::Change(event)) = decode_line(line) {
        event.schema.into_iter().chain(event.key_schema).for_each(|schema| {
            known.intern(schema);
        });
    }
}

/// `line` read through `elider` and decoded as a decode worker does: the elided path
/// where it answers, else the full line. Checks the line reads back as it was.
fn decoded_elided(elider: &mut SchemaElider, line: &str) -> (String, bool) {
    let mut read = Line::default();
    elider.fill(&mut read, line.as_bytes()).expect("utf-8");
    assert_eq!(read.full(), line, "the line read back");
    let elided = !read.elided().is_empty();
    let decoded = match decode_elided(&read, None) {
        Some(decoded) => format!("{decoded:?}"),
        None => format!("{:?}", decode_line(&read.full())),
    };
    (decoded, elided)
}

/// Lines read with their known schemas left out decode as the full parse does,
/// through schema changes, keyless lines, wrappers and layouts the fast path declines.
#[test]
fn lines_with_known_schemas_left_out_decode_as_the_full_parse_does() {
    let lines = stream();
    let known = KnownSchemas::default();
    let mut elider = SchemaElider::new(known.clone());
    let mut elided = 0;
    for line in &lines {
        let (decoded, was_elided) = decoded_elided(&mut elider, line);
        assert_eq!(decoded, decoded_cold(line), "{line}");
        elided += usize::from(was_elided);
        bind_schemas(&known, line);
    }
    // Again, every schema now bound.
    for line in &lines {
        let (decoded, was_elided) = decoded_elided(&mut elider, line);
        assert_eq!(decoded, decoded_cold(line), "{line}");
        elided += usize::from(was_elided);
    }
    assert!(elided >= 12, "{elided} lines read with schemas left out");
    // A key payload holding the value's schema where a value would start: that copy
    // is left out, which the decoder must not take for the value's schema.
    let tricky = event("c", 11, Some("t"), None).replacen(r#""payload":{"id":11}"#, &format!(r#""payload":{{"id":11,"value":{{"schema":{SCHEMA}}}}}"#), 1);
    assert!(tricky.contains(r#""id":11,"value":{"schema":{"#), "{tricky}");
    let (decoded, was_elided) = decoded_elided(&mut elider, &tricky);
    assert!(was_elided);
    assert_eq!(decoded, decoded_cold(&tricky), "{tricky}");
}

/// `line` re-serialized the way Python's `json.dumps` does by default: a space after
/// every `,` and `:` outside strings.
fn spaced(line: &str) -> String {
    let (mut out, mut in_string, mut escaped) = (String::with_capacity(line.len() * 2), false, false);
    for c in line.chars() {
        out.push(c);
        match c {
            _ if escaped => escaped = false,
            '\\' if in_string => escaped = true,
            '"' => in_string = !in_string,
            ',' | ':' if !in_string => out.push(' '),
            _ => {}
        }
    }
    out
}

/// The same stream with whitespace between its tokens: schemas are left out as in
/// the compact form, and every line decodes as the full parse does.
#[test]
fn spaced_lines_with_known_schemas_left_out_decode_as_the_full_parse_does() {
    let lines: Vec<String> = stream().iter().map(|line| spaced(line)).collect();
    assert!(lines[0].contains(r#"{"schema": {"type": "struct""#) || lines[0].contains(r#"{"key": {"schema": "#), "{}", lines[0]);
    let elided = decode_with_every_schema_bound(&lines);
    assert!(elided >= 6, "{elided} of {} spaced lines read with schemas left out", lines.len());
}

/// Binds the schemas of all `lines`, then checks each decodes through the elider as
/// the full parse does; how many were read with schemas left out.
fn decode_with_every_schema_bound(lines: &[String]) -> usize {
    let known = KnownSchemas::default();
    lines.iter().for_each(|line| bind_schemas(&known, line));
    let mut elider = SchemaElider::new(known);
    let mut elided = 0;
    for line in lines {
        let (decoded, was_elided) = decoded_elided(&mut elider, line);
        assert_eq!(decoded, decoded_cold(line), "{line}");
        elided += usize::from(was_elided);
    }
    elided
}

/// Every line of the fuzz seeds (captured PostgreSQL and MySQL shapes, keyed and
/// keyless envelopes, transaction messages) decodes the same when read with its
/// schemas left out.
#[test]
fn fuzz_seeds_decode_the_same_with_schemas_left_out() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/debezium_message");
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(&seeds).expect("the fuzz seeds") {
        let bytes = std::fs::read(entry.expect("a seed").path()).expect("a seed's bytes");
        lines.extend(String::from_utf8_lossy(&bytes).lines().map(str::to_string));
    }
    let elided = decode_with_every_schema_bound(&lines);
    assert!(elided >= 30, "{elided} of {} seed lines read with schemas left out", lines.len());
}

/// A line that is not a change event gets the same named error whether its schema was
/// left out (the table's schema already bound) or not: here a row flattened by
/// `ExtractNewRecordState` under the table's own value schema.
#[test]
fn lines_that_are_not_changes_are_named_with_schemas_left_out() {
    let known = KnownSchemas::default();
    let mut elider = SchemaElider::new(known.clone());
    let bound = event("c", 7, Some("f"), None);
    bind_schemas(&known, &bound);
    let (head, _) = bound.rsplit_once(r#""payload":"#).expect("a value payload");
    let flattened = format!(r#"{head}"payload":{{"id":7,"name":"f","__deleted":"false"}}}}}}"#);
    let (decoded, was_elided) = decoded_elided(&mut elider, &flattened);
    assert!(was_elided, "{flattened}");
    assert_eq!(decoded, decoded_cold(&flattened), "{flattened}");
    assert!(decoded.contains("ExtractNewRecordState"), "{decoded}");
}
