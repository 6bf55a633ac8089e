//! The PostgreSQL source against a real server: the copy and the stream mirror every
//! supported type exactly, TOAST and replica identities, truncates, large streamed
//! transactions, schema changes and the set-up errors.

mod mirror;
mod support;

use std::time::Duration;

use mirror::*;
use retina_core::Value;
use support::{PgCluster, PgClusterOptions};

const TYPES_TABLE: &str = "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE kinds (
    id int8 PRIMARY KEY, b bool, s int2, i int4, f4 float4, f8 float8, money numeric(12, 2), free numeric,
    t text, vc varchar(10), ch char(3), raw bytea, d date, tm time, ts timestamp, tz timestamptz,
    span interval, u uuid, j json, jb jsonb, m mood, ints int4[], words text[], tiny numeric(5, 6), round numeric(3, -2))";

const TYPES_ROW: &str = "true, -32768, 2147483647, 1.5, 0.1, -12345.67, 3.14159265358979323846264338327950288, \
    'héllo\tworld\\n', 'abc', 'x', '\\x00ff'::bytea, '2024-02-29', '23:59:59.999999', '1999-12-31 23:59:59.5', \
    '2024-01-02 03:04:05+02', '1 year 2 mons 3 days 04:05:06', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{\"a\": [1, 2]}', \
    '{\"b\": null}', 'happy', '{1,NULL,3}', '{\"x y\",z}', 0.023456, 12345";

fn expected_types_row(id: i64) -> Vec<Value> {
    vec![
        Value::Int64(id),
        Value::Boolean(true),
        Value::Int16(-32768),
        Value::Int32(2147483647),
        Value::Float32(1.5),
        Value::Float64(0.1),
        Value::Decimal128(-1_234_567),
        Value::Utf8("3.14159265358979323846264338327950288".into()),
        Value::Utf8("héllo\tworld\\n".into()),
        Value::Utf8("abc".into()),
        Value::Utf8("x  ".into()),
        Value::Binary(vec![0, 255]),
        Value::Date32(19_782),
        Value::Time64Micros(86_399_999_999),
        Value::TimestampMicros(946_684_799_500_000),
        Value::TimestampMicros(1_704_157_445_000_000),
        Value::Utf8("1 year 2 mons 3 days 04:05:06".into()),
        Value::Utf8("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".into()),
        Value::Utf8("{\"a\": [1, 2]}".into()),
        Value::Utf8("{\"b\": null}".into()),
        Value::Utf8("happy".into()),
        Value::Utf8("{1,NULL,3}".into()),
        Value::Utf8("{\"x y\",z}".into()),
        // PostgreSQL 15's scales outside 0..=precision: Decimal128(6, 6) and (5, 0);
        // 12345 rounds to 12300 at scale -2.
        Value::Decimal128(23_456),
        Value::Decimal128(12_300),
    ]
}

fn rows_of_table(engine: &retina_core::Engine, name: &str) -> Vec<Vec<Value>> {
    let id = engine.table_id(name).expect("mirrored table");
    engine.sync().expect("sync");
    let snapshot = engine.snapshot().expect("snapshot");
    let columns: Vec<usize> = (0..engine.table(id).expect("table").schema().column_count()).collect();
    let mut rows = retina_core::rows::rows_of(&engine.scan(id, &snapshot, Some(&columns)).expect("scan")).expect("rows");
    rows.sort_by(|a, b| format!("{:?}", a[0]).cmp(&format!("{:?}", b[0])));
    rows
}

/// A fresh cluster that ran `setup_sql`, and a source streaming it into a fresh engine.
fn streaming_after(setup_sql: &str) -> (PgCluster, tempfile::TempDir, std::sync::Arc<retina_core::Engine>, RunningSource) {
    let cluster = PgCluster::new();
    cluster.psql(setup_sql);
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    (cluster, dir, engine, source)
}

#[test]
fn every_supported_type_round_trips_through_copy_and_stream() {
    let cluster = PgCluster::new();
    cluster.psql(TYPES_TABLE);
    cluster.psql(&format!("INSERT INTO kinds VALUES (1, {TYPES_ROW}); INSERT INTO kinds (id) VALUES (2)"));
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    // Streamed: an insert, and an update of the all-NULL row to the full one.
    cluster.psql(&format!("INSERT INTO kinds VALUES (3, {TYPES_ROW}); UPDATE kinds SET (b, s, i, f4, f8, money, free, t, vc, ch, raw, d, tm, ts, tz, span, u, j, jb, m, ints, words, tiny, round) = (SELECT b, s, i, f4, f8, money, free, t, vc, ch, raw, d, tm, ts, tz, span, u, j, jb, m, ints, words, tiny, round FROM kinds WHERE id = 1) WHERE id = 2"));
    eventually(Duration::from_secs(30), "the streamed rows arrive", || {
        let rows = rows_of_table(&engine, "public.kinds");
        (rows.len() == 3 && rows[1][1] != Value::Null).then_some(()).ok_or(format!("{} rows", rows.len()))
    });
    let rows = rows_of_table(&engine, "public.kinds");
    for (row, id) in rows.iter().zip([1, 2, 3]) {
        assert_eq!(row, &expected_types_row(id), "row {id}");
    }
    let table = engine.table(engine.table_id("public.kinds").expect("table")).expect("table");
    let types: Vec<String> = table.schema().columns().fields().iter().map(|f| f.data_type().to_string()).collect();
    assert_eq!(&types[6], "Decimal128(12, 2)");
    assert_eq!(&types[15], "Timestamp(µs, \"UTC\")");
    assert_eq!((types[23].as_str(), types[24].as_str()), ("Decimal128(6, 6)", "Decimal128(5, 0)"));
    source.stop().expect("stops cleanly");
}

#[test]
fn toast_values_stay_when_an_update_leaves_them_unchanged() {
    let cluster = PgCluster::new();
    cluster.psql(
        "CREATE TABLE docs (id int PRIMARY KEY, n int, body text); ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL; \
         ALTER TABLE docs REPLICA IDENTITY FULL; \
         CREATE TABLE notes (id int PRIMARY KEY, n int, body text); ALTER TABLE notes ALTER COLUMN body SET STORAGE EXTERNAL",
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    cluster.psql("INSERT INTO docs SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 200) g");
    cluster.psql("UPDATE docs SET n = 1 WHERE id = 1");
    let body = cluster.psql("SELECT body FROM docs WHERE id = 1");
    assert_eq!(body.len(), 6400);
    eventually(Duration::from_secs(30), "the update arrives", || {
        let rows = mirrored_rows(&engine, "public.docs");
        (rows == vec![format!("1|1|{body}")]).then_some(()).ok_or(format!("{:.40?}", rows))
    });
    // Without FULL the server does not send the unchanged value: the mirror keeps the
    // one it holds (the row is there), in the stream and after a restart alike.
    cluster.psql("INSERT INTO notes SELECT 1, 0, string_agg(md5(g::text), '') FROM generate_series(1, 200) g");
    cluster.psql("UPDATE notes SET n = 1 WHERE id = 1");
    let note = cluster.psql("SELECT body FROM notes WHERE id = 1");
    eventually(Duration::from_secs(30), "the update keeps the body", || {
        let rows = mirrored_rows(&engine, "public.notes");
        (rows == vec![format!("1|1|{note}")]).then_some(()).ok_or(format!("{:.40?}", rows))
    });
    source.stop().expect("stops cleanly");
    cluster.psql("UPDATE notes SET n = 2 WHERE id = 1; UPDATE notes SET n = 3, body = 'short' WHERE id = 1; UPDATE notes SET n = 4 WHERE id = 1");
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    eventually(Duration::from_secs(30), "later updates, one that changes the body", || {
        let rows = mirrored_rows(&engine, "public.notes");
        (rows == vec!["1|4|short".to_string()]).then_some(()).ok_or(format!("{:.40?}", rows))
    });
    source.stop().expect("stops cleanly");
}

#[test]
fn truncates_and_large_streamed_transactions_are_single_mirror_transactions() {
    let cluster = PgCluster::start_with(PgClusterOptions {
        settings: vec!["logical_decoding_work_mem = '64kB'".into()],
        ..PgClusterOptions::default()
    });
    cluster.psql("CREATE TABLE a (id int PRIMARY KEY, v int); CREATE TABLE b (id int PRIMARY KEY, v int); INSERT INTO a SELECT g, g FROM generate_series(1, 100) g");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    assert_eq!(mirrored_rows(&engine, "public.a").len(), 100, "copied");
    // Larger than logical_decoding_work_mem: streamed before it commits (protocol 2),
    // with an aborted subtransaction in the middle.
    cluster.psql(
        "BEGIN; INSERT INTO b SELECT g, g FROM generate_series(1, 20000) g; SAVEPOINT s; \
         INSERT INTO b SELECT g, 0 FROM generate_series(20001, 30000) g; ROLLBACK TO s; UPDATE a SET v = -v; COMMIT",
    );
    cluster.psql("BEGIN; INSERT INTO a VALUES (1000, 1); TRUNCATE a; INSERT INTO a VALUES (7, 7); COMMIT");
    eventually(Duration::from_secs(60), "both transactions arrive", || {
        let a = mirrored_rows(&engine, "public.a");
        let b = mirrored_rows(&engine, "public.b");
        (a == vec!["7|7".to_string()] && b.len() == 20000).then_some(()).ok_or(format!("a {:?}.., b {}", a.first(), b.len()))
    });
    assert!(source.status.lock().transactions >= 2);
    source.stop().expect("stops cleanly");
}

#[test]
fn set_up_errors_say_what_to_change() {
    let cluster = PgCluster::start_with(PgClusterOptions { settings: vec!["wal_level = replica".into()], ..PgClusterOptions::default() });
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let error = RunningSource::start(&engine, &cluster.url("postgres")).wait_for_end(Duration::from_secs(30)).expect_err("wal_level");
    assert!(error.to_string().contains("wal_level = logical"), "{error}");

    let cluster = PgCluster::new();
    cluster.psql("CREATE ROLE plain LOGIN; CREATE TABLE t (id int PRIMARY KEY); GRANT SELECT ON t TO plain");
    let uri = format!("postgres://plain@127.0.0.1:{}/postgres", cluster.port());
    let error = RunningSource::start(&engine, &uri).wait_for_end(Duration::from_secs(30)).expect_err("privilege");
    assert!(error.to_string().contains("ALTER ROLE \"plain\" WITH REPLICATION"), "{error}");

    cluster.psql("CREATE TABLE shapes (id int PRIMARY KEY, p point)");
    let uri = format!("{}?on_table_error=stop", cluster.url("postgres"));
    let error = RunningSource::start(&engine, &uri).wait_for_end(Duration::from_secs(30)).expect_err("point");
    assert!(error.to_string().contains("table public.shapes, column p: type point is not supported"), "{error}");
    // The slot that failed copy created is not left behind holding WAL.
    assert_eq!(cluster.psql("SELECT count(*) FROM pg_replication_slots"), "0");
}

#[test]
fn unsupported_types_as_text_and_tables_without_identity_as_insert_only() {
    let cluster = PgCluster::new();
    cluster.psql("CREATE TABLE shapes (id int PRIMARY KEY, p point); INSERT INTO shapes VALUES (1, '(1,2)'); CREATE TABLE log (msg text)");
    cluster.psql("INSERT INTO log VALUES ('copied')");
    // By default a table without identity is left out of the publication (so the
    // application's UPDATEs of it keep working) and said to be.
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(&engine, &format!("{}?unsupported_types=text&slot=first", cluster.url("postgres")));
    source.wait_streaming();
    assert_eq!(source.status.lock().left_out, ["public.log"]);
    cluster.psql("UPDATE log SET msg = 'copied' WHERE msg = 'copied'; DELETE FROM log WHERE msg = 'none'");
    assert_eq!(mirrored_rows(&engine, "public.log"), Vec::<String>::new(), "not mirrored");
    source.stop().expect("stops");

    // With no_identity=insert_only its inserts are mirrored, through a publication of
    // inserts alone, which still leaves the application's UPDATEs alone.
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let source = RunningSource::start(
        &engine,
        &format!("{}?unsupported_types=text&no_identity=insert_only&slot=second", cluster.url("postgres")),
    );
    source.wait_streaming();
    cluster.psql("INSERT INTO log VALUES ('streamed'), ('streamed'); UPDATE log SET msg = msg WHERE msg = 'copied'");
    eventually(Duration::from_secs(30), "the inserts arrive", || {
        let rows = mirrored_rows(&engine, "public.log");
        (rows.len() == 3).then_some(()).ok_or(format!("{rows:?}"))
    });
    let messages: Vec<String> = mirrored_rows(&engine, "public.log").iter().map(|r| r.split('|').next().unwrap_or("").to_string()).collect();
    assert_eq!(messages, ["copied", "streamed", "streamed"], "duplicates stay distinct rows");
    assert_eq!(mirrored_rows(&engine, "public.shapes"), vec!["1|(1,2)".to_string()]);
    source.stop().expect("stops");
}

#[test]
fn a_schema_change_stops_replay_before_it_and_names_it() {
    let (cluster, _dir, engine, source) = streaming_after("CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)");
    cluster.psql("INSERT INTO t VALUES (2, 2)");
    cluster.psql("ALTER TABLE t DROP COLUMN v");
    cluster.psql("INSERT INTO t VALUES (3)");
    // The table is paused (the source goes on), its error naming the change.
    eventually(Duration::from_secs(30), "the table is paused", || {
        let paused = source.status.lock().paused.clone();
        paused
            .iter()
            .any(|(table, error)| table == "public.t" && error.contains("table public.t: column v was dropped"))
            .then_some(())
            .ok_or(format!("{paused:?}"))
    });
    assert_eq!(source.phase(), retina_postgres::Phase::Streaming);
    assert_eq!(mirrored_rows(&engine, "public.t"), vec!["1|1".to_string(), "2|2".to_string()], "what came before stays");
    source.stop().expect("stops cleanly");
}

#[test]
fn an_added_column_is_added_to_the_mirror_and_old_rows_read_null() {
    let (cluster, _dir, engine, source) = streaming_after("CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t VALUES (1, 1)");
    cluster.psql("INSERT INTO t VALUES (2, 2)");
    // In one transaction: a row of the old shape, the new column, a row of the new one.
    cluster.psql("BEGIN; INSERT INTO t VALUES (3, 3); ALTER TABLE t ADD COLUMN note text; INSERT INTO t VALUES (4, 4, 'four'); UPDATE t SET note = 'one' WHERE id = 1; COMMIT");
    cluster.psql("INSERT INTO t VALUES (5, 5, 'five')");
    eventually(Duration::from_secs(30), "the rows arrive in the new shape", || {
        let rows = mirrored_rows(&engine, "public.t");
        (rows == ["1|1|one", "2|2|", "3|3|", "4|4|four", "5|5|five"]).then_some(()).ok_or(format!("{rows:?}"))
    });
    source.stop().expect("stops cleanly");

    // Added while the source was stopped: found when it starts again.
    cluster.psql("ALTER TABLE t ADD COLUMN n int8; INSERT INTO t VALUES (6, 6, 'six', 66)");
    let source = RunningSource::start(&engine, &cluster.url("postgres"));
    source.wait_streaming();
    eventually(Duration::from_secs(30), "the second column arrives", || {
        let rows = mirrored_rows(&engine, "public.t");
        (rows.len() == 6 && rows[5] == "6|6|six|66" && rows[0] == "1|1|one|").then_some(()).ok_or(format!("{rows:?}"))
    });
    source.stop().expect("stops cleanly");
}

#[test]
fn a_slot_held_by_another_connection_is_waited_for_then_a_clear_error() {
    let cluster = PgCluster::new();
    cluster.psql("CREATE TABLE t (id int PRIMARY KEY); CREATE PUBLICATION retina FOR ALL TABLES");
    let mut holder = cluster.connect_replication("postgres");
    holder.simple_query("CREATE_REPLICATION_SLOT retina_slot LOGICAL pgoutput").expect("create slot");
    holder
        .start_copy_both("START_REPLICATION SLOT retina_slot LOGICAL 0/0 (proto_version '1', publication_names 'retina')")
        .expect("hold the slot");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let started = std::time::Instant::now();
    let error = RunningSource::start(&engine, &format!("{}?slot_wait=1", cluster.url("postgres")))
        .wait_for_end(Duration::from_secs(30))
        .expect_err("the slot is busy");
    assert!(error.to_string().contains("replication slot retina_slot has been in use by another connection for 1 s"), "{error}");
    assert!(started.elapsed() >= Duration::from_secs(1), "it waited for the slot first");
    drop(holder);
}

#[test]
fn added_columns_with_defaults_give_existing_rows_the_value_postgres_gives_them() {
    let (cluster, _dir, engine, source) =
        streaming_after("CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, g FROM generate_series(1, 40) g");
    // A constant default: PostgreSQL writes no row, older rows read its missing value.
    cluster.psql("ALTER TABLE t ADD COLUMN d int NOT NULL DEFAULT 42");
    cluster.psql("INSERT INTO t VALUES (41, 41, 7)");
    // A volatile default: PostgreSQL rewrites the table, each row its own value, and a
    // change of a row in the same transaction as the DDL (before it) keeps its value.
    cluster.psql("BEGIN; UPDATE t SET v = -3 WHERE id = 3; ALTER TABLE t ADD COLUMN stamp timestamptz DEFAULT clock_timestamp(); UPDATE t SET v = -2 WHERE id = 2; COMMIT");
    cluster.psql("UPDATE t SET d = 0 WHERE id = 1");
    let expected = || -> Vec<String> {
        let mut rows: Vec<String> = cluster
            .psql("SELECT id, v, d, 'TimestampMicros(' || (extract(epoch FROM stamp) * 1000000)::int8 || ')' FROM t")
            .lines()
            .map(String::from)
            .collect();
        rows.sort();
        rows
    };
    eventually(Duration::from_secs(30), "the mirror equals the source, old rows included", || {
        let rows = mirrored_rows(&engine, "public.t");
        (rows == expected()).then_some(()).ok_or(format!("{:?} vs {:?}", rows.iter().take(3).collect::<Vec<_>>(), expected().iter().take(3).collect::<Vec<_>>()))
    });
    let rows = mirrored_rows(&engine, "public.t");
    assert!(rows.iter().all(|row| !row.ends_with('|')), "no NULL stamps: {rows:?}");
    assert!(rows.iter().any(|row| row.starts_with("2|") && row.contains("|42|")), "{rows:?}");
    source.stop().expect("stops cleanly");
}
