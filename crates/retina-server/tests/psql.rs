//! The PostgreSQL endpoint tested with the real `psql` binary (Debian package
//! `postgresql-client`) and with raw protocol clients: simple and extended protocol,
//! type OIDs, ErrorResponse SQLSTATEs, session commands, dropped connections, replay
//! while serving, password authentication (SCRAM-SHA-256), and the `/metrics`
//! endpoint.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use retina_core::{RowChange, Value};
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_server::client::{ClientError, PgClient, StatementOutcome};
use retina_server::PgServer;

mod support;
use support::{row, send_startup, Fixture};

#[test]
fn psql_simple_queries_return_rows_in_postgres_text_format() {
    let fx = Fixture::new();
    assert_eq!(fx.psql_ok("SELECT count(*) FROM shop.items"), "500");
    assert_eq!(
        fx.psql_ok("SELECT id, qty, price, name, ok, weight FROM shop.items WHERE id IN (2, 50) ORDER BY id"),
        "2|2|2.50|item 2|t|0.5\n50|0|62.50||t|12.5",
    );
    // Several statements in one Query message, session commands included.
    let out = fx.psql_ok("SET application_name = 'x'; BEGIN; SELECT 41 + 1 AS answer; COMMIT");
    assert_eq!(out, "SET\nBEGIN\n42\nCOMMIT");
    assert!(fx.released_within(Duration::from_secs(10)), "no query snapshot stays registered");
}

/// psql's `\copy … to` (a `COPY … TO STDOUT` it writes to a file) in text and CSV,
/// from a query and from a table; COPY FROM and to a server file are refused.
/// What BI tools send: the user's SQL wrapped in a subquery or a CTE, its unaliased
/// columns referred to by PostgreSQL's names (`count`, `max`, `coalesce`, …).
#[test]
fn a_query_wrapped_in_a_subquery_refers_to_its_columns_by_postgresql_names() {
    let fx = Fixture::new();
    assert_eq!(
        fx.psql_ok("SELECT count FROM (SELECT ok, count(*) FROM shop.items GROUP BY 1) AS virtual_table ORDER BY count"),
        "250\n250"
    );
    assert_eq!(
        fx.psql_ok(
            "WITH q AS (SELECT max(id), sum(qty), coalesce(name, '-'), date_trunc('day', TIMESTAMP '2024-01-02 03:04:05') \
             FROM shop.items WHERE id < 3 GROUP BY 3, 4) SELECT max, sum, coalesce, date_trunc FROM q ORDER BY max"
        ),
        "1|1|item 1|2024-01-02 00:00:00\n2|2|item 2|2024-01-02 00:00:00"
    );
    assert_eq!(fx.psql_ok("SELECT \"?column?\" FROM (SELECT 1 + 1) s"), "2", "an expression PostgreSQL leaves unnamed");
}

#[test]
fn psql_copies_query_results_and_tables_to_files() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let text = dir.path().join("items.tsv");
    let csv = dir.path().join("items.csv");
    let copy = |command: String| {
        let output = fx.psql(&["-c", &command]);
        assert!(output.status.success(), "{command}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    };
    let tag = copy(format!("\\copy (SELECT id, name, price FROM shop.items WHERE id IN (2, 50) ORDER BY id) to '{}'", text.display()));
    assert_eq!(tag, "COPY 2");
    assert_eq!(std::fs::read_to_string(&text).expect("text copy"), "2\titem 2\t2.50\n50\t\\N\t62.50\n");
    copy(format!("\\copy (SELECT id, name, count(*) FROM shop.items WHERE id < 3 GROUP BY id, name ORDER BY id) to '{}' with (format csv, header)", csv.display()));
    assert_eq!(std::fs::read_to_string(&csv).expect("csv copy"), "id,name,count\n1,item 1,1\n2,item 2,1\n");
    copy(format!("\\copy shop.items (id, ok) to '{}' csv", csv.display()));
    let lines = std::fs::read_to_string(&csv).expect("table copy");
    assert_eq!(lines.lines().count(), 500);
    assert!(lines.lines().any(|line| line == "7,f"), "{}", &lines[..80]);

    let refused = fx.psql(&["-c", "COPY shop.items FROM STDIN"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("25006"), "{}", String::from_utf8_lossy(&refused.stderr));
    let refused = fx.psql(&["-c", "COPY shop.items TO '/tmp/retina-copy'"]);
    assert!(String::from_utf8_lossy(&refused.stderr).contains("0A000"), "{}", String::from_utf8_lossy(&refused.stderr));
    assert!(fx.released_within(Duration::from_secs(10)), "no query snapshot stays registered");
}

/// `SET search_path` and pgjdbc's and libpq's start-up search paths: unqualified
/// names resolve in the path's first schema, for this connection only.
#[test]
fn search_path_resolves_unqualified_table_names_per_connection() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SET search_path TO shop, public; SELECT count(*) FROM items; SHOW search_path; SELECT current_schema(), current_setting('search_path'); \
         RESET search_path; SHOW search_path; SELECT current_schema()",
    );
    assert_eq!(out, "SET\n500\nshop\nshop|shop\nRESET\n\"$user\", public\npublic");
    // The connection's user, not a fixed name.
    assert_eq!(fx.psql_ok("SELECT current_user AS u"), "retina");
    let other = fx.psql(&["-c", "SELECT count(*) FROM items"]);
    assert!(!other.status.success(), "another connection keeps the default path");
    let port = fx.addr().port().to_string();
    let output = Command::new("psql")
        .args(["-X", "-w", "-A", "-t", "-c", "SELECT count(*) FROM items"])
        .arg(format!("host=127.0.0.1 port={port} user=retina dbname=retina options='-c search_path=shop'"))
        .output()
        .expect("psql");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "500", "{}", String::from_utf8_lossy(&output.stderr));
}

/// `SET statement_timeout` cuts a long statement short with 57014 and releases its
/// snapshot; `RESET` lifts it. Before, it was accepted and ignored.
#[test]
fn statement_timeout_cancels_a_long_query_with_57014() {
    let fx = Fixture::new();
    let long = "SELECT count(*) FROM shop.items a, shop.items b, shop.items c WHERE a.qty + b.qty + c.qty > 1";
    let started = Instant::now();
    let output = fx.psql(&["-c", &format!("SET statement_timeout = 50; SHOW statement_timeout; {long}")]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("57014") && stderr.contains("statement timeout"), "{stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("50ms"), "{}", String::from_utf8_lossy(&output.stdout));
    assert!(started.elapsed() < Duration::from_secs(20), "cut short, took {:?}", started.elapsed());
    assert!(fx.released_within(Duration::from_secs(10)), "the cancelled query's snapshot is released");
    let out = fx.psql_ok("SET statement_timeout = '5s'; RESET statement_timeout; SHOW statement_timeout; SELECT count(*) FROM shop.items");
    assert_eq!(out, "SET\nRESET\n0\n500");
}

/// Sessions run in UTC, as `SHOW TimeZone` says: `now()` and `timestamptz` values
/// carry the zone (type timestamptz, text with `+00`) and convert other offsets.
/// Before, DataFusion's session had no zone: `now()` reached clients as a timestamp
/// without one, and `'...+02'::timestamptz` lost the zone after converting.
#[test]
fn now_and_timestamptz_are_in_the_session_time_zone_utc() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SHOW TimeZone; SELECT '2024-01-01 10:00:00+02'::timestamptz; SELECT now() + interval '1 day' > now(); \
         SELECT now() > '2024-01-01 10:00:00+02'::timestamptz; SELECT CAST('2024-01-01 10:00:00' AS timestamptz) = '2024-01-01 12:00:00+02'",
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "UTC");
    assert!(lines[1].starts_with("2024-01-01 08:00:00") && lines[1].ends_with("+00"), "{out}");
    assert_eq!(&lines[2..], ["t", "t", "t"], "{out}");
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let StatementOutcome::Rows(result) = client.query_params("SELECT now() AS at", &[]).expect("query") else { panic!("expected rows") };
    assert_eq!(result.columns[0].type_oid, 1184, "now() is timestamptz");
}

/// `x AT TIME ZONE z` as PostgreSQL answers it: a timestamptz gives the wall-clock
/// time in `z` (a timestamp), a timestamp read in `z` gives the instant (a
/// timestamptz, shown in UTC). Before, a timestamptz stayed one, with `z`'s offset.
#[test]
fn at_time_zone_converts_between_instants_and_wall_clock_times() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SELECT TIMESTAMPTZ '2024-01-01 12:00:00+00' AT TIME ZONE 'America/New_York'; \
         SELECT TIMESTAMP '2024-01-01 12:00:00' AT TIME ZONE 'America/New_York'; \
         SELECT '2024-07-01 12:00:00+02' AT TIME ZONE 'Europe/Berlin'; \
         SELECT date_trunc('day', TIMESTAMPTZ '2024-01-01 03:00:00+00' AT TIME ZONE 'America/New_York'); \
         SELECT pg_typeof(now() AT TIME ZONE 'UTC'), pg_typeof(TIMESTAMP '2024-01-01' AT TIME ZONE 'UTC')",
    );
    let lines: Vec<&str> = out.lines().collect();
    // A timestamp without time zone shows no offset after its date.
    let zoneless = |line: &str| !line.contains('+') && !line[10..].contains('-');
    assert!(lines[0].starts_with("2024-01-01 07:00:00") && zoneless(lines[0]), "{out}");
    assert!(lines[1].starts_with("2024-01-01 17:00:00") && lines[1].ends_with("+00"), "{out}");
    assert!(lines[2].starts_with("2024-07-01 12:00:00") && zoneless(lines[2]), "{out}");
    assert!(lines[3].starts_with("2023-12-31 00:00:00") && zoneless(lines[3]), "{out}");
    assert_eq!(lines[4], "timestamp without time zone|timestamp with time zone", "{out}");
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT TIMESTAMPTZ '2024-01-01 12:00:00+00' AT TIME ZONE 'Asia/Tokyo'";
    let StatementOutcome::Rows(result) = client.query_params(sql, &[]).expect("query") else { panic!("expected rows") };
    assert_eq!((result.columns[0].name.as_str(), result.columns[0].type_oid), ("timezone", 1114), "a timestamp named as PostgreSQL names it");
    let out = fx.psql(&["-c", "SELECT 1 AT TIME ZONE 'UTC'"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("AT TIME ZONE takes a timestamp"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `DECLARE … CURSOR`, `FETCH` and `CLOSE` read a result in pieces (psycopg named
/// cursors, SQLAlchemy `stream_results`, pandas `chunksize`); before, DECLARE was
/// refused. A transaction's end closes its cursors, and a connection that ends with
/// a cursor open releases the cursor's snapshot.
#[test]
fn cursors_fetch_a_result_in_pieces_and_release_their_snapshot() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "BEGIN; DECLARE c CURSOR FOR SELECT id FROM shop.items ORDER BY id; FETCH 2 FROM c; FETCH NEXT FROM c; \
         FETCH FORWARD 2 FROM c; CLOSE c; COMMIT",
    );
    assert_eq!(out, "BEGIN\nDECLARE CURSOR\n1\n2\n3\n4\n5\nCLOSE CURSOR\nCOMMIT");
    let all = fx.psql_ok("DECLARE c CURSOR FOR SELECT id FROM shop.items; FETCH 10 FROM c; FETCH ALL FROM c");
    assert_eq!(all.lines().count(), 1 + 500, "10 rows, then the other 490: {all}");
    for (sql, code) in [
        ("FETCH 1 FROM nope", "34000"),
        ("BEGIN; DECLARE c CURSOR FOR SELECT 1; COMMIT; FETCH 1 FROM c", "34000"),
        ("DECLARE s SCROLL CURSOR FOR SELECT 1", "0A000"),
        ("DECLARE b CURSOR FOR SELECT 1; FETCH BACKWARD 1 FROM b", "0A000"),
        ("DECLARE d CURSOR FOR SELECT 1; DECLARE d CURSOR FOR SELECT 2", "42P03"),
    ] {
        let output = fx.psql(&["-c", sql]);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(code), "{sql}: {stderr}");
    }
    let held = fx.psql_ok("DECLARE h CURSOR WITH HOLD FOR SELECT id FROM shop.items ORDER BY id; COMMIT; FETCH 1 FROM h");
    assert_eq!(held, "DECLARE CURSOR\nCOMMIT\n1", "WITH HOLD outlives the transaction");
    assert!(fx.released_within(Duration::from_secs(10)), "the ended connection's cursor released its snapshot");
}

/// A correlated scalar subquery in a select list is answered. Before, the
/// pg_catalog emulation's parser replaced it with NULL in every query: a silent
/// wrong answer.
#[test]
fn correlated_subqueries_are_answered_not_replaced_with_null() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SELECT a.id, (SELECT count(*) FROM shop.items b WHERE b.id = a.id) AS n FROM shop.items a WHERE a.id < 4 ORDER BY a.id",
    );
    assert_eq!(out, "1|1\n2|1\n3|1");
    let out = fx.psql_ok("SELECT count(*) FROM shop.items a WHERE a.qty = (SELECT max(b.qty) FROM shop.items b WHERE b.id = a.id)");
    assert_eq!(out, "500");
    // The same query read through a cursor or COPY (named cursors, connectorx,
    // \copy) answers the same; before, those took the catalog emulation's parser.
    let query = "SELECT a.id, (SELECT count(*) FROM shop.items b WHERE b.id = a.id) AS n, (SELECT max(qty) FROM shop.items) AS m FROM shop.items a WHERE a.id < 3 ORDER BY a.id";
    let max = fx.psql_ok("SELECT max(qty) FROM shop.items");
    let expected = format!("1|1|{max}\n2|1|{max}");
    assert_eq!(fx.psql_ok(&format!("BEGIN; DECLARE c CURSOR FOR {query}; FETCH ALL FROM c; COMMIT")).lines().filter(|l| l.contains('|')).collect::<Vec<_>>().join("\n"), expected);
    assert_eq!(fx.psql_ok(&format!("COPY ({query}) TO STDOUT WITH (FORMAT csv, DELIMITER '|')")), expected);
    let plan = fx.psql_ok(&format!("EXPLAIN {query}"));
    assert!(plan.contains("logical_plan") && !plan.contains("NULL AS n"), "{plan}");
}

/// A window that extends a named one keeps the named window's partitioning: before,
/// `OVER (w ORDER BY id)` ran over the whole table (a silently wrong running total).
#[test]
fn windows_extending_a_named_window_keep_its_partitioning() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SELECT id, sum(id) OVER (w ORDER BY id), count(*) OVER (w), sum(id) OVER w, last_value(id) OVER (v ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) \
         FROM shop.items WHERE id <= 6 WINDOW w AS (PARTITION BY id % 2), v AS (w) ORDER BY id",
    );
    assert_eq!(out, "1|1|3|9|5\n2|2|3|12|6\n3|4|3|9|5\n4|6|3|12|6\n5|9|3|9|5\n6|12|3|12|6");
}

/// `float` is double precision, and the seconds field keeps its fraction, as in
/// PostgreSQL (DataFusion: `real`, and whole seconds).
#[test]
fn float_is_double_precision_and_seconds_keep_their_fraction() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SELECT 1::float / 3, pg_typeof(1::float), pg_typeof(CAST(1 AS float(10))), 16777217::float = 16777217; \
         SELECT extract(second FROM TIMESTAMP '2024-01-01 10:00:12.5'), date_part('second', TIMESTAMP '2024-01-01 10:00:59.25'), \
         extract(minute FROM TIMESTAMP '2024-01-01 10:07:12.5')",
    );
    assert_eq!(out, "0.3333333333333333|double precision|real|t\n12.5|59.25|7");
}

/// The standard's paging, as Hibernate 6 writes it for PostgreSQL, reads as LIMIT and
/// OFFSET; before, FETCH was refused (0A000).
#[test]
fn fetch_first_rows_only_pages_like_limit() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SELECT id FROM shop.items ORDER BY id OFFSET 2 ROWS FETCH NEXT 3 ROWS ONLY; \
         SELECT id FROM shop.items ORDER BY id FETCH FIRST ROW ONLY; \
         SELECT count(*) FROM (SELECT id FROM shop.items ORDER BY id DESC FETCH FIRST 7 ROWS ONLY) t",
    );
    assert_eq!(out, "3\n4\n5\n1\n7");
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let StatementOutcome::Rows(result) = client
        .query_params("SELECT id FROM shop.items ORDER BY id OFFSET $1 ROWS FETCH FIRST $2 ROWS ONLY", &[Some("10"), Some("2")])
        .expect("query")
    else {
        panic!("expected rows")
    };
    assert_eq!(result.rows, vec![vec![Some("11".to_string())], vec![Some("12".to_string())]]);
}

/// `to_char` with PostgreSQL's date patterns prints the date; before, it printed the
/// pattern itself (`YYYY-MM`) for every row. Patterns written for DataFusion still
/// work.
#[test]
fn to_char_to_date_and_to_timestamp_read_postgresql_date_patterns() {
    let fx = Fixture::new();
    let out = fx.psql_ok(
        "SELECT to_char(TIMESTAMP '2024-03-05 14:07:09.123', 'YYYY-MM-DD HH24:MI:SS.MS'), to_char(DATE '2024-03-05', 'FMDD FMMonth YYYY'), \
         to_char(TIMESTAMP '2024-03-05 14:07:09', 'HH12:MI AM'), to_char(DATE '2024-03-05', '%Y/%m')",
    );
    assert_eq!(out, "2024-03-05 14:07:09.123|5 March 2024|02:07 PM|2024/03");
    // The same patterns read text as dates and timestamps, as PostgreSQL's do.
    let read = fx.psql_ok("SELECT to_date('05/07/2024', 'MM/DD/YYYY'), to_timestamp('2024-05-07 10:11', 'YYYY-MM-DD HH24:MI'), to_date('7 May 2024', 'DD Mon YYYY')");
    assert_eq!(read, "2024-05-07|2024-05-07 10:11:00+00|2024-05-07");
}

/// PostgreSQL allows result columns that share a name; DataFusion's plan needs them
/// apart, the client still sees PostgreSQL's names.
#[test]
fn result_columns_may_share_a_name_as_in_postgresql() {
    let fx = Fixture::new();
    assert_eq!(fx.psql_ok("SELECT count(*), count(*) FROM shop.items"), "500|500");
    assert_eq!(fx.psql_ok("SELECT id, id, 1 AS a, 2 AS a FROM shop.items WHERE id = 3"), "3|3|1|2");
    assert_eq!(fx.psql_ok("SELECT arrow_typeof(id::int), arrow_typeof(id) FROM shop.items WHERE id = 3"), "Int32|Int64");
    // A CTE's select list is read by its column list.
    let fibonacci = "WITH RECURSIVE fib(a, b, n) AS (SELECT 0::bigint, 1::bigint, 1 UNION ALL SELECT b, a + b, n + 1 FROM fib WHERE n < 50) \
                     SELECT max(a), count(*) FROM fib";
    assert_eq!(fx.psql_ok(fibonacci), "7778742049|50");
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    for sql in ["SELECT count(*), count(*), id AS n, id AS \"N\", id AS n FROM shop.items WHERE id = 3 GROUP BY id ORDER BY id"] {
        let StatementOutcome::Rows(result) = client.query_params(sql, &[]).expect("query") else { panic!("expected rows") };
        let names: Vec<&str> = result.columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["count", "count", "n", "N", "n"], "{sql}");
        assert_eq!(result.rows[0].iter().map(|v| v.as_deref()).collect::<Vec<_>>(), [Some("1"), Some("1"), Some("3"), Some("3"), Some("3")]);
    }
    // A name that is taken twice but refused for another reason keeps that reason.
    let out = fx.psql(&["-c", "SELECT nope, nope FROM shop.items"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("nope"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Ranking functions are bigint, as in PostgreSQL; DataFusion's are unsigned, which
/// went out as numeric (psycopg and pandas read a Decimal).
#[test]
fn ranking_functions_are_bigint() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT id, row_number() OVER (ORDER BY id DESC) AS r, rank() OVER (ORDER BY qty), ntile(2) OVER (ORDER BY id) FROM shop.items WHERE id <= 3 ORDER BY id";
    let StatementOutcome::Rows(result) = client.query_params(sql, &[]).expect("query") else { panic!("expected rows") };
    let oids: Vec<u32> = result.columns.iter().map(|c| c.type_oid).collect();
    assert_eq!(oids, [20, 20, 20, 20]);
    assert_eq!(result.columns[1].name, "r");
    let ids_and_rows: Vec<(Option<&str>, Option<&str>)> = result.rows.iter().map(|row| (row[0].as_deref(), row[1].as_deref())).collect();
    assert_eq!(ids_and_rows, [(Some("1"), Some("3")), (Some("2"), Some("2")), (Some("3"), Some("1"))], "the order is kept");
}

/// A simple query's first result: its column names, and its rows as text (`NULL`
/// for a null).
fn text_result(client: &mut PgClient, sql: &str) -> (Vec<String>, Vec<Vec<String>>) {
    let outcomes = client.query(sql).expect(sql);
    let Some(StatementOutcome::Rows(result)) = outcomes.first() else { panic!("expected rows: {sql}") };
    let names = result.columns.iter().map(|c| c.name.clone()).collect();
    let rows = result.rows.iter().map(|row| row.iter().map(|v| v.clone().unwrap_or_else(|| "NULL".into())).collect()).collect();
    (names, rows)
}

/// `generate_series` in a select list gives a row per value, as in PostgreSQL
/// (DataFusion's own gives one array), named after the function; in FROM it is a
/// table whose column is named after the function or its alias (DataFusion named it
/// `value`). `sign` is PostgreSQL's name for `signum`.
#[test]
fn generate_series_gives_rows_named_as_in_postgresql() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    assert_eq!(text_result(&mut client, "SELECT generate_series(1, 3)"), (vec!["generate_series".to_string()], vec![vec!["1".to_string()], vec!["2".into()], vec!["3".into()]]));
    let (_, days) = text_result(&mut client, "SELECT generate_series(DATE '2024-01-30', DATE '2024-02-01', INTERVAL '1 day') AS d");
    assert_eq!(days.len(), 3, "{days:?}");
    assert!(days[0][0].starts_with("2024-01-30") && days[2][0].starts_with("2024-02-01"), "{days:?}");
    let (_, doubled) = text_result(&mut client, "SELECT generate_series(1, 2) * 10 AS g, 'x' AS tag");
    assert_eq!(doubled, [["10", "x"], ["20", "x"]]);
    let (_, from) = text_result(&mut client, "SELECT count(*) FROM generate_series(1, 5)");
    assert_eq!(from, [["5"]]);
    // In FROM, its column is named after the function, or after the alias given it.
    let (names, rows) = text_result(&mut client, "SELECT g, g * 2 FROM generate_series(1, 3) g");
    assert_eq!((names, rows), (vec!["g".to_string(), "?column?".into()], vec![vec!["1".to_string(), "2".into()], vec!["2".into(), "4".into()], vec!["3".into(), "6".into()]]));
    let (names, _) = text_result(&mut client, "SELECT * FROM generate_series(1, 2)");
    assert_eq!(names, ["generate_series"]);
    // Its arguments are read as the query is planned: a timestamp without seconds too.
    let hours = "SELECT * FROM generate_series(timestamp '2024-01-01', timestamp '2024-01-01 02:00', interval '1 hour')";
    assert_eq!(text_result(&mut client, hours).1, [["2024-01-01 00:00:00"], ["2024-01-01 01:00:00"], ["2024-01-01 02:00:00"]]);
    let (_, rows) = text_result(&mut client, "SELECT generate_series, sign(-3), sign(2.5) FROM generate_series(1, 1)");
    assert_eq!(rows, [["1", "-1", "1"]]);
}

/// `age()`, PostgreSQL's calendar difference of two timestamps, answers as
/// PostgreSQL 15 does; DataFusion has no such function.
#[test]
fn age_gives_postgresql_calendar_differences() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT age(timestamp '2024-03-15', timestamp '2023-01-01'), age(date '2024-03-01', date '2024-01-31'), \
               age(timestamp '2023-01-01', timestamp '2024-03-15 10:00'), age(timestamptz '2024-03-31 00:00+00', timestamptz '2024-02-29 12:00+00'), \
               extract(year FROM age(timestamp '2024-03-15', timestamp '1990-06-01')), age(CAST(NULL AS timestamp), timestamp '2024-01-01')";
    let (names, rows) = text_result(&mut client, sql);
    assert_eq!(rows, [["1 year 2 mons 14 days", "1 mon 1 day", "-1 years -2 mons -14 days -10:00:00", "1 mon 1 day 12:00:00", "33", "NULL"]]);
    assert_eq!(names[0], "age");
    let (_, today) = text_result(&mut client, "SELECT age(current_date) = interval '0 days', age(current_date - 1) > interval '0 days'");
    assert_eq!(today, [["t", "t"]]);
}

/// A cast of a fractional number to an integer rounds, as in PostgreSQL (DataFusion's
/// truncated: `2.7::int` was 2); a bigint stays exact; names stay PostgreSQL's.
#[test]
fn casts_to_integers_round_fractions_and_keep_integers_exact() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT 2.7::int, CAST(-2.7 AS INT), 2.5::int AS half, (-2.5)::bigint AS minus_half, \
               CAST(CAST('2.5' AS NUMERIC(5,1)) AS INT) AS numeric_half, CAST(10 / 4.0 AS SMALLINT) AS q, \
               CAST(9007199254740993 AS BIGINT) AS exact, '7'::int AS text_seven, \
               2.5::float8::int AS float_half, 3.5::float8::int AS float_odd_half, (-2.5)::float8::int AS float_minus_half, \
               2.7::float4::int AS float4";
    let (names, rows) = text_result(&mut client, sql);
    // A numeric's half rounds away from zero, a float's to even (PostgreSQL's rint).
    assert_eq!(rows, [["3", "-3", "3", "-3", "3", "3", "9007199254740993", "7", "2", "4", "-2", "3"]]);
    assert_eq!(names[..8], ["int4", "int4", "half", "minus_half", "numeric_half", "q", "exact", "text_seven"]);
    // Over a table: grouped by the rounded value, as PostgreSQL groups.
    let grouped = "SELECT CAST(x / 4.0 AS INT) AS g, count(*) AS n FROM (VALUES (1), (2), (9), (10)) AS t(x) GROUP BY CAST(x / 4.0 AS INT) ORDER BY g";
    // 0.25 -> 0, 0.5 -> 1, 2.25 -> 2, 2.5 -> 3
    assert_eq!(text_result(&mut client, grouped).1, [["0", "1"], ["1", "1"], ["2", "1"], ["3", "1"]]);
}

/// Floats in text read as PostgreSQL writes them: `2`, not `2.0`; `1e+20`, not
/// `1e20`; `Infinity`, which JDBC's `getDouble` reads (it refused `inf`); `-0`.
/// Timestamps and times carry a fraction only when they have one (they had
/// `.000000` always). COPY writes them the same way.
#[test]
fn floats_timestamps_and_times_are_written_in_text_as_postgresql_writes_them() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT 2::float8 AS two, 0.1::float8 AS tenth, CAST('1e20' AS DOUBLE PRECISION) AS big, CAST('1e-5' AS float8) AS small, \
               CAST('inf' AS float8) AS inf, CAST('-Infinity' AS float8) AS minus_inf, CAST('NaN' AS float8) AS nan, \
               CAST('-0' AS float8) AS minus_zero, 16777217::real AS r, 1::float8 / 3 AS third, CAST(NULL AS float8) AS none";
    let (_, rows) = text_result(&mut client, sql);
    assert_eq!(rows, [["2", "0.1", "1e+20", "1e-05", "Infinity", "-Infinity", "NaN", "-0", "1.6777216e+07", "0.3333333333333333", "NULL"]]);
    let times = "SELECT timestamp '2024-01-01 03:00', CAST('2024-01-01 00:00:00.5+00' AS timestamptz), time '10:00', CAST('10:00:00.25' AS time), \
                 date_trunc('hour', timestamp '2024-05-17 10:11:12'), CAST(NULL AS timestamp)";
    let (_, rows) = text_result(&mut client, times);
    assert_eq!(rows, [["2024-01-01 03:00:00", "2024-01-01 00:00:00.5+00", "10:00:00", "10:00:00.25", "2024-05-17 10:00:00", "NULL"]]);
    // A zone written in a timestamp without time zone is ignored, as PostgreSQL does.
    let zones = "SELECT timestamp '2024-01-01 03:00:00+02', CAST('2024-01-01 03:00-05:30' AS timestamp), timestamptz '2024-01-01 03:00:00+02'";
    assert_eq!(text_result(&mut client, zones).1, [["2024-01-01 03:00:00", "2024-01-01 03:00:00", "2024-01-01 01:00:00+00"]]);
    // Dates written as PostgreSQL also reads them.
    let dates = "SELECT '2024-1-5'::date, DATE '20240105', CAST('2024-01-05 10:00' AS date)";
    assert_eq!(text_result(&mut client, dates).1, [["2024-01-05", "2024-01-05", "2024-01-05"]]);
    let copied = fx.psql_ok("COPY (SELECT 2::float8, CAST('inf' AS float8), 0.5::real, timestamp '2024-01-01 03:00') TO STDOUT WITH (FORMAT csv)");
    assert_eq!(copied.trim_end(), "2,Infinity,0.5,2024-01-01 03:00:00");
}

/// `varchar(n)` and `char(n)` casts cut a text to n characters, numbers with an
/// exponent read as numerics (`SELECT 1e20` failed: DataFusion made a decimal of
/// negative scale), and `round` of a float rounds a tie to even, as in PostgreSQL.
#[test]
fn character_lengths_exponents_and_float_rounding_read_as_in_postgresql() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT 'abcdef'::varchar(3) AS v, CAST('abcdef' AS CHARACTER VARYING(2)) AS cv, CAST(12345 AS char(3)) AS c, \
               'ab'::varchar(5) AS short, CAST('abcdef' AS varchar) AS unbounded, 'xyz'::char AS one";
    assert_eq!(text_result(&mut client, sql).1, [["abc", "ab", "123", "ab", "abcdef", "x"]]);
    let (names, rows) = text_result(&mut client, "SELECT 'abcdef'::varchar(3), 1e20, 1.5e3, 2e-3, 1e20 + 1, 1.5e300::float8, pg_typeof(1.5e3)");
    assert_eq!(rows, [["abc", "100000000000000000000", "1500", "0.002", "100000000000000000001", "1.5e+300", "numeric"]]);
    assert_eq!(names[..2], ["varchar", "?column?"]);
    let (_, rounded) = text_result(&mut client, "SELECT round(2.5::float8), round(3.5::float8), round(-2.5::float8), round(2.7::real), round(weight) FROM shop.items WHERE id = 10");
    // weight is id / 4: 2.5 for id 10.
    assert_eq!(rounded, [["2", "4", "-2", "3", "2"]]);
}

/// Intervals compare and sort by their length, as in PostgreSQL (a month is 30
/// days, a day 24 hours): Arrow compared months, then days, then nanoseconds, so
/// `now() - t > interval '3 days'` was false for every row. A timestamp difference
/// reads as days and a time. `SIMILAR TO` matches the whole text, `%` and `_` as
/// wildcards (DataFusion took the pattern for an unanchored regular expression).
/// An interval times a number is PostgreSQL's `interval_mul`.
#[test]
fn intervals_compare_by_length_and_similar_to_matches_as_in_postgresql() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT interval '25 hours' > interval '1 day', interval '24 hours' = interval '1 day', interval '1 month' = interval '30 days', \
               timestamp '2024-01-03 03:00' - timestamp '2024-01-01' > interval '2 days', \
               timestamp '2024-01-03 03:00' - timestamp '2024-01-01', timestamp '2024-01-01' - timestamp '2024-01-03 03:00'";
    assert_eq!(text_result(&mut client, sql).1, [["t", "t", "t", "t", "2 days 03:00:00", "-2 days -03:00:00"]]);
    let sorted = "SELECT x FROM (VALUES (interval '25 hours'), (interval '1 day'), (interval '2 hours')) AS t(x) ORDER BY x DESC";
    assert_eq!(text_result(&mut client, sorted).1, [["25:00:00"], ["1 day"], ["02:00:00"]]);
    let justified = "SELECT justify_hours(interval '27 hours'), justify_days(interval '35 days'), justify_interval(interval '1 mon -1 day')";
    assert_eq!(text_result(&mut client, justified).1, [["1 day 03:00:00", "1 mon 5 days", "29 days"]]);
    let longest = "SELECT max(x), min(x), count(*) FROM (VALUES (interval '25 hours'), (interval '1 day'), (NULL), (interval '2 hours')) AS t(x)";
    assert_eq!(text_result(&mut client, longest).1, [["25:00:00", "02:00:00", "4"]]);
    // An interval times or divided by a number, which DataFusion refused.
    let scaled = "SELECT 7 * interval '1 day', interval '1 hour' * 1.5, interval '3 hours' / 2, 2.5 * interval '1 month', \
                  max(qty * interval '1 minute'), count(*) FILTER (WHERE now() - 7 * interval '1 day' < now()) FROM shop.items";
    let (names, rows) = text_result(&mut client, scaled);
    assert_eq!(rows, [["7 days", "01:30:00", "01:30:00", "2 mons 15 days", "00:09:00", "500"]]);
    assert_eq!(names[0], "?column?");
    let stderr = fx.psql_error("SELECT interval '1 day' / 0");
    assert!(stderr.contains("ERROR:  22012: division by zero"), "{stderr}");
    // A null interval is NULL (arrow-pg wrote 00:00:00).
    let nulls = "SELECT CAST(NULL AS interval), x FROM (VALUES (interval '1 day'), (NULL)) AS t(x) ORDER BY x NULLS FIRST";
    assert_eq!(text_result(&mut client, nulls).1, [["NULL", "NULL"], ["NULL", "1 day"]]);
    let similar = "SELECT 'abc' SIMILAR TO 'a%', 'abc' SIMILAR TO '(a|b)c', 'abc' SIMILAR TO 'a.c', 'abc' NOT SIMILAR TO 'b%', \
                   (SELECT count(*) FROM shop.items WHERE name SIMILAR TO 'item 1_')";
    assert_eq!(text_result(&mut client, similar).1, [["t", "f", "f", "t", "10"]]);
}

/// `EXISTS` in a select list (SQLAlchemy's `exists()`), correlated or not, answers
/// true or false as in PostgreSQL; DataFusion refused it outside a filter.
#[test]
fn exists_in_a_select_list_answers_true_or_false() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let (names, answer) =
        text_result(&mut client, "SELECT EXISTS (SELECT 1 FROM shop.items WHERE id < 0), NOT EXISTS (SELECT 1 FROM shop.items WHERE id < 0) AS none");
    assert_eq!((names, answer), (vec!["exists".to_string(), "none".into()], vec![vec!["f".to_string(), "t".into()]]));
    let (_, ids) = text_result(&mut client, "SELECT id FROM shop.items ORDER BY id");
    let ids: Vec<i64> = ids.iter().map(|row| row[0].parse().expect("id")).collect();
    let (_, has_next) =
        text_result(&mut client, "SELECT i.id, EXISTS (SELECT 1 FROM shop.items AS j WHERE j.id = i.id + 1) AS has_next FROM shop.items AS i ORDER BY i.id");
    let expected: Vec<Vec<String>> =
        ids.iter().map(|id| vec![id.to_string(), if ids.contains(&(id + 1)) { "t" } else { "f" }.to_string()]).collect();
    assert_eq!(has_next, expected);
    assert!(expected.iter().any(|row| row[1] == "f") && expected.iter().any(|row| row[1] == "t"), "{expected:?}");
}

/// Intervals written as times and timestamps without seconds read as PostgreSQL
/// reads them; DataFusion refused both (22P02).
#[test]
fn intervals_as_times_and_timestamps_without_seconds_are_read() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT INTERVAL '01:30:00' = INTERVAL '90 minutes', '1 day 00:00:30'::interval = INTERVAL '1 day 30 seconds', \
               TIMESTAMP '2024-01-01 10:00' = TIMESTAMP '2024-01-01 10:00:00', \
               CAST('2024-01-01 10:00' AS TIMESTAMP) + INTERVAL '00:30' = TIMESTAMP '2024-01-01 10:30:00'";
    assert_eq!(text_result(&mut client, sql).1, [["t"; 4]]);
    // Also where type coercion adds the cast, and to a date.
    let sql = "SELECT count(*) FILTER (WHERE at > '2024-01-01 10:00'), '2024-01-05 10:00'::date = DATE '2024-01-05' \
               FROM (VALUES (TIMESTAMP '2024-01-01 09:59:00'), (TIMESTAMP '2024-01-01 10:00:30')) AS t(at)";
    assert_eq!(text_result(&mut client, sql).1, [["1", "t"]]);
}

#[test]
fn result_columns_carry_postgres_type_oids() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let sql = "SELECT id, qty, price, name, ok, weight, DATE '2024-01-02' AS day, \
               arrow_cast(now(), 'Timestamp(Microsecond, Some(\"UTC\"))') AS at FROM shop.items LIMIT 1";
    let StatementOutcome::Rows(result) = client.query_params(sql, &[]).expect("query") else { panic!("expected rows") };
    let oids: Vec<u32> = result.columns.iter().map(|c| c.type_oid).collect();
    // int8, int4, numeric, text, bool, float8, date, timestamptz
    assert_eq!(oids, [20, 23, 1700, 25, 16, 701, 1082, 1184]);
    // The simple protocol describes the same types.
    let outcomes = client.query(sql).expect("query");
    let Some(StatementOutcome::Rows(simple)) = outcomes.first() else { panic!("expected rows") };
    assert_eq!(simple.columns.iter().map(|c| c.type_oid).collect::<Vec<_>>(), oids);
    assert_eq!(simple.rows[0][6].as_deref(), Some("2024-01-02"));
}

#[test]
fn errors_reach_psql_with_their_sqlstate() {
    let fx = Fixture::new();
    for (sql, code) in [
        ("SELEC 1", "42601"),
        ("SELECT * FROM shop.nope", "42P01"),
        ("SELECT nope FROM shop.items", "42703"),
        ("INSERT INTO shop.items (id) VALUES (1)", "25006"),
        ("SELECT 1 / (qty - qty) FROM shop.items", "22012"),
    ] {
        let stderr = fx.psql_error(sql);
        assert!(stderr.contains(&format!("ERROR:  {code}:")), "{sql}: expected SQLSTATE {code}, got: {stderr}");
    }
    // The session survives errors: a later statement on the same connection works.
    let output = fx.psql(&["-c", "SELECT * FROM shop.nope", "-c", "SELECT 7"]);
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "7");
    assert!(fx.released_within(Duration::from_secs(10)), "a failed query releases its snapshot");
}

/// Integer arithmetic that overflows and a float divided by zero raise PostgreSQL's
/// errors, in its words: DataFusion's operators wrapped
/// (`9223372036854775807::bigint + 1` was -9223372036854775808) and gave `inf`.
/// `sum` of a bigint is numeric, as in PostgreSQL, so it cannot wrap (it did).
#[test]
fn overflowing_integers_and_float_division_by_zero_raise_as_in_postgresql() {
    let fx = Fixture::new();
    for (sql, error) in [
        ("SELECT 9223372036854775807::bigint + 1", "22003: bigint out of range"),
        ("SELECT id * 9223372036854775807 FROM shop.items", "22003: bigint out of range"),
        ("SELECT -9223372036854775807 - id FROM shop.items", "22003: bigint out of range"),
        ("SELECT qty * CAST(2147483647 AS INT) FROM shop.items", "22003: integer out of range"),
        ("SELECT CAST(-32768 AS SMALLINT) - CAST(1 AS SMALLINT)", "22003: smallint out of range"),
        ("SELECT weight / 0 FROM shop.items", "22012: division by zero"),
        ("SELECT 1::float8 / 0", "22012: division by zero"),
        ("SELECT count(*) FROM shop.items WHERE weight / (qty - qty) > 1", "22012: division by zero"),
        ("SELECT 1 / 0", "22012: division by zero"),
        ("SELECT CAST(id * 100000000000 AS INT) FROM shop.items", "22003: integer out of range"),
    ] {
        let stderr = fx.psql_error(sql);
        assert!(stderr.contains(&format!("ERROR:  {error}")), "{sql}: expected {error}, got: {stderr}");
    }
    // In range, the answers are as before.
    let in_range = "SELECT 9223372036854775806::bigint + 1, -9223372036854775807::bigint - 1, CAST(3 AS SMALLINT) * CAST(4 AS SMALLINT), \
                    7::float8 / 2, CAST('Infinity' AS float8) / 2, max(id * 2 - qty) FROM shop.items";
    assert_eq!(fx.psql_ok(in_range), "9223372036854775807|-9223372036854775808|12|3.5|Infinity|1000");
    let sums = "SELECT sum(id * 0 + 9223372036854775807), pg_typeof(sum(id)), sum(id), pg_typeof(sum(qty)) FROM shop.items";
    assert_eq!(fx.psql_ok(sums), "4611686018427387903500|numeric|125250|bigint");
    let window = "SELECT id, sum(id * 0 + 9223372036854775807) OVER (ORDER BY id) FROM shop.items ORDER BY id LIMIT 2";
    assert_eq!(fx.psql_ok(window), "1|9223372036854775807\n2|18446744073709551614");
}

#[test]
fn extended_protocol_binds_parameters_and_reports_bad_ones() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let outcome = client
        .query_params("SELECT id, name FROM shop.items WHERE id BETWEEN $1 AND $2 AND qty <> $3 ORDER BY id", &[Some("3"), Some("6"), Some("5")])
        .expect("query");
    let StatementOutcome::Rows(result) = outcome else { panic!("expected rows") };
    let ids: Vec<_> = result.rows.iter().map(|r| r[0].clone().unwrap_or_default()).collect();
    assert_eq!(ids, ["3", "4", "6"]);
    assert_eq!(result.columns[0].type_oid, 20, "int8");
    assert_eq!(result.columns[1].type_oid, 25, "text");
    match client.query_params("SELECT id FROM shop.items WHERE id = $1", &[Some("not a number")]) {
        Err(ClientError::Server { code, .. }) => assert_eq!(code, "22P02"),
        other => panic!("expected an error, got {other:?}"),
    }
    match client.query_params("SELECT id FROM shop.items WHERE id = $1", &[]) {
        Err(ClientError::Server { code, .. }) => assert_eq!(code, "08P01"),
        other => panic!("expected an error, got {other:?}"),
    }
    // The connection is still usable after errors.
    let outcome = client.query_params("SELECT count(*) AS n FROM shop.items WHERE name IS NULL", &[]).expect("query");
    let StatementOutcome::Rows(result) = outcome else { panic!("expected rows") };
    assert_eq!(result.rows, vec![vec![Some("10".to_string())]]);
}

#[test]
fn a_client_that_vanishes_mid_result_leaves_no_snapshot_behind() {
    let fx = Fixture::new();
    for _ in 0..3 {
        let mut socket = TcpStream::connect(fx.addr()).expect("connect");
        send_startup(&mut socket);
        // A big result: 500 x 500 rows.
        let sql = b"SELECT a.id, b.name FROM shop.items a, shop.items b\0";
        let mut query = vec![b'Q'];
        query.extend_from_slice(&((sql.len() + 4) as i32).to_be_bytes());
        query.extend_from_slice(sql);
        socket.write_all(&query).expect("query");
        let mut some = [0u8; 4096];
        socket.read_exact(&mut some).expect("the first rows arrive");
        drop(socket);
    }
    assert!(fx.released_within(Duration::from_secs(10)), "a snapshot is still registered after the clients left");
    assert_eq!(fx.psql_ok("SELECT count(*) FROM shop.items"), "500", "the server still answers");
}

#[test]
fn replay_goes_on_while_queries_are_served() {
    let fx = Fixture::new();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (engine, stop, table) = (Arc::clone(&fx.engine), Arc::clone(&stop), fx.table);
        std::thread::spawn(move || {
            let mut id = 1000;
            while !stop.load(SeqCst) {
                engine.submit(vec![row(table, id)]).expect("insert");
                engine.flush_batch().expect("flush");
                id += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let mut counts = Vec::new();
    for _ in 0..5 {
        counts.push(fx.psql_ok("SELECT count(*) FROM shop.items").parse::<u64>().expect("a count"));
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, SeqCst);
    writer.join().expect("writer");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]) && counts.last() > counts.first(), "counts {counts:?}");
    let lwm = fx.engine.transaction_service().low_watermark();
    assert_eq!(lwm, fx.engine.transaction_service().high_watermark().prev(), "LWM keeps up with HWM");
}

#[test]
fn a_cancelled_query_ends_with_57014_and_releases_its_snapshot() {
    let fx = Fixture::new();
    let mut client = PgClient::connect(&fx.addr().to_string(), "retina", "retina").expect("connect");
    let token = client.cancel_token().expect("the server sends BackendKeyData");
    let running = std::thread::spawn(move || {
        // Tens of billions of joined rows: hours, unless the cancel lands while the
        // join runs (a three-way join once finished, in 2 s, before it did).
        let result = client.query(
            "SELECT count(*) FROM shop.items a, shop.items b, shop.items c, shop.items d WHERE a.qty + b.qty + c.qty + d.qty >= 0",
        );
        (result.map(|_| ()), client)
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while fx.running_queries() == 0 {
        assert!(Instant::now() < deadline, "the query never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    assert!(!fx.no_live_snapshots(), "the running query holds its snapshot");
    token.cancel().expect("cancel request");
    let (result, mut client) = running.join().expect("query thread");
    match result {
        Err(ClientError::Server { code, .. }) => assert_eq!(code, "57014"),
        other => panic!("expected query_canceled, got {other:?}"),
    }
    assert!(fx.released_within(Duration::from_secs(30)), "the cancelled query's snapshot is still registered");
    // The connection goes on.
    assert_eq!(client.query("SELECT 3 AS n").expect("query").len(), 1);
}

#[test]
fn with_a_password_psql_logs_in_with_it_and_is_refused_with_28p01_without_it() {
    let password = "correct horse battery staple";
    let fx = Fixture::with_password(password);
    let right = fx.psql_with_password(Some(password), &["-c", "SELECT count(*) FROM shop.items"]);
    assert!(right.status.success(), "right password: {}", String::from_utf8_lossy(&right.stderr));
    assert_eq!(String::from_utf8_lossy(&right.stdout).trim(), "500");

    let wrong = fx.psql_with_password(Some("correct horse battery"), &["-c", "SELECT 1"]);
    let stderr = String::from_utf8_lossy(&wrong.stderr);
    assert!(!wrong.status.success(), "a wrong password must fail");
    assert!(stderr.contains("FATAL:  password authentication failed for user \"retina\""), "{stderr}");

    let missing = fx.psql_with_password(None, &["-c", "SELECT 1"]);
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success(), "no password must fail");
    assert!(stderr.contains("no password supplied"), "{stderr}");

    // psql prints no SQLSTATE for a failed login; the wire client shows it.
    let addr = fx.addr().to_string();
    let started = Instant::now();
    match PgClient::connect_with_password(&addr, "retina", "retina", Some("Correct horse battery staple")) {
        Err(ClientError::Server { code, message }) => {
            assert_eq!(code, "28P01");
            assert_eq!(message, "password authentication failed for user \"retina\"");
        }
        other => panic!("expected 28P01, got {:?}", other.err()),
    }
    assert!(started.elapsed() >= Duration::from_millis(900), "a wrong password is answered after a delay: {:?}", started.elapsed());
    match PgClient::connect_with_password(&addr, "retina", "retina", None) {
        Err(error @ ClientError::PasswordRequired) => assert_eq!(error.to_string(), "the server asks for a password: set PGPASSWORD"),
        other => panic!("expected PasswordRequired, got {:?}", other.err()),
    }
    let mut client = PgClient::connect_with_password(&addr, "someone", "else", Some(password)).expect("any user name with the password");
    assert!(client.cancel_token().is_some(), "an authenticated connection can be cancelled");
    assert_eq!(client.query("SELECT 2 AS n").expect("query").len(), 1);
}

#[test]
fn a_client_that_skips_authentication_is_disconnected_with_a_protocol_error() {
    let fx = Fixture::with_password("pw");
    let mut socket = TcpStream::connect(fx.addr()).expect("connect");
    socket.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    send_startup(&mut socket);
    let (tag, body) = read_backend_message(&mut socket);
    assert_eq!(tag, b'R');
    assert_eq!(&body[..4], &10i32.to_be_bytes(), "AuthenticationSASL");
    assert!(body.windows(13).any(|w| w == b"SCRAM-SHA-256"), "offers SCRAM-SHA-256");
    // A query instead of a SASLInitialResponse.
    let sql = b"SELECT count(*) FROM shop.items\0";
    let mut query = vec![b'Q'];
    query.extend_from_slice(&((sql.len() + 4) as i32).to_be_bytes());
    query.extend_from_slice(sql);
    socket.write_all(&query).expect("query");
    let (tag, body) = read_backend_message(&mut socket);
    assert_eq!(tag, b'E', "an ErrorResponse, not rows");
    let fields = String::from_utf8_lossy(&body).to_string();
    assert!(fields.contains("SFATAL\0") && fields.contains("C08P01\0"), "{fields:?}");
    let mut rest = Vec::new();
    let _ = socket.read_to_end(&mut rest);
    assert!(!rest.iter().any(|&b| b == b'D'), "no row was sent");
}

fn read_backend_message(socket: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 5];
    socket.read_exact(&mut head).expect("message header");
    let len = i32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    let mut body = vec![0u8; len - 4];
    socket.read_exact(&mut body).expect("message body");
    (head[0], body)
}

fn http(addr: SocketAddr, request: &str) -> String {
    let mut socket = TcpStream::connect(addr).expect("connect");
    socket.write_all(request.as_bytes()).expect("request");
    let mut response = String::new();
    socket.read_to_string(&mut response).expect("response");
    response
}

#[test]
fn metrics_endpoint_serves_prometheus_text() {
    let fx = Fixture::new();
    fx.psql_ok("SELECT 1");
    let addr = fx.metrics.as_ref().expect("metrics").local_addr();
    let response = http(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
    assert!(response.contains("# TYPE retina_high_watermark gauge"), "{response}");
    assert!(response.contains("retina_queries_finished_total 1"), "{response}");
    assert!(response.contains("retina_query_latency_seconds_bucket{le=\"+Inf\"} 1"), "{response}");
    assert!(http(addr, "GET /nope HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(http(addr, "POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let view = fx.psql_ok("SELECT value FROM retina.metrics WHERE name = 'retina_queries_finished_total'");
    assert_eq!(view.parse::<f64>().ok(), Some(1.0), "the SQL view and /metrics read the same counters: {view}");
}

#[test]
fn binding_a_used_port_is_a_clear_error() {
    let fx = Fixture::new();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let session = Arc::new(RetinaSession::new(Arc::clone(&fx.engine), SourceRegistry::new(), SessionOptions::default()));
    let taken = fx.addr().to_string();
    let error = runtime.block_on(PgServer::start(&taken, session)).err().expect("port in use");
    assert!(error.to_string().contains(&taken), "{error}");
}

/// psql's own catalog commands and the introspection queries drivers and BI tools
/// send at connect time run on the emulated `pg_catalog`.
#[test]
fn psql_describe_commands_and_catalog_introspection_work() {
    let fx = Fixture::new();
    // \dt lists the tables of a schema (psql's query uses OPERATOR(pg_catalog.~),
    // pg_table_is_visible and COLLATE pg_catalog.default).
    let tables = fx.psql_ok("\\dt shop.*");
    assert!(tables.contains("shop|items|table"), "{tables}");
    let schemas = fx.psql_ok("\\dn");
    assert!(schemas.contains("shop") && schemas.contains("test"), "{schemas}");
    // \d TABLE: the columns with their PostgreSQL types.
    let described = fx.psql_ok("\\d shop.items");
    for column in ["id|bigint", "qty|integer", "price|numeric", "name|text", "ok|boolean", "weight|double precision"] {
        assert!(described.contains(column), "{column} in:\n{described}");
    }
    // ... with the primary key's index in its footer, and the index itself under \di.
    let output = fx.psql(&["-P", "tuples_only=off", "-c", "\\d shop.items"]);
    let footer = String::from_utf8_lossy(&output.stdout);
    assert!(footer.contains("Indexes:") && footer.contains("\"items_pkey\" PRIMARY KEY, btree (id)"), "{footer}");
    let indexes = fx.psql_ok("\\di shop.*");
    assert!(indexes.contains("shop|items_pkey|index"), "{indexes}");
    // What JDBC and psycopg ask: type OIDs by name, the server version, the schema.
    assert_eq!(fx.psql_ok("SELECT oid FROM pg_catalog.pg_type WHERE typname = 'int8'"), "20");
    assert_eq!(fx.psql_ok("SELECT current_schema()"), "public");
    let columns = fx.psql_ok(
        "SELECT a.attname FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c ON a.attrelid = c.oid \
         WHERE c.relname = 'items' AND a.attnum > 0 ORDER BY a.attnum",
    );
    assert_eq!(columns, "id\nqty\nprice\nname\nok\nweight");
    // The hidden `_create_ts` column stays hidden from the catalog too.
    assert!(!described.contains("_create_ts"), "{described}");
}

/// Runs `script` through `psql -f` (its meta-commands too) and returns stdout and stderr.
fn psql_script(fx: &Fixture, script: &str) -> (String, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("script.sql");
    std::fs::write(&path, script).expect("write the script");
    let output = fx.psql(&["-f", path.to_str().expect("utf-8")]);
    (String::from_utf8_lossy(&output.stdout).into_owned(), String::from_utf8_lossy(&output.stderr).into_owned())
}

/// Rows keep arriving in `test.ticks` until the returned flag is set.
fn ticking(fx: &Fixture) -> (Arc<std::sync::atomic::AtomicBool>, std::thread::JoinHandle<()>) {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (engine, table, flag) = (Arc::clone(&fx.engine), fx.ticks, Arc::clone(&stop));
    let thread = std::thread::spawn(move || {
        let mut id = 0;
        while !flag.load(std::sync::atomic::Ordering::Relaxed) {
            id += 1;
            engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("tick");
            engine.flush_batch().expect("flush");
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    (stop, thread)
}

#[test]
fn a_repeatable_read_transaction_reads_one_snapshot_and_read_committed_a_new_one_per_query() {
    let fx = Fixture::new();
    let (stop, thread) = ticking(&fx);
    let counts = |isolation: &str| -> Vec<u64> {
        let (out, err) = psql_script(
            &fx,
            &format!(
                "BEGIN ISOLATION LEVEL {isolation};\nSELECT count(*) FROM test.ticks;\n\\! sleep 0.3\nSELECT count(*) FROM test.ticks;\n\
                 SELECT count(*) FROM test.ticks t, shop.items i WHERE i.id = 1;\nCOMMIT;\n\\! sleep 0.3\nSELECT count(*) FROM test.ticks;\n"
            ),
        );
        let counts: Vec<u64> = out.lines().filter_map(|line| line.trim().parse().ok()).collect();
        assert_eq!(counts.len(), 4, "{out}{err}");
        counts
    };
    let repeatable = counts("REPEATABLE READ");
    assert!(repeatable[0] == repeatable[1] && repeatable[1] == repeatable[2], "one snapshot for the transaction: {repeatable:?}");
    assert!(repeatable[3] > repeatable[0], "a new one after COMMIT: {repeatable:?}");
    let serializable = counts("SERIALIZABLE");
    assert_eq!(serializable[0], serializable[1], "{serializable:?}");
    let committed = counts("READ COMMITTED");
    assert!(committed[1] > committed[0], "a snapshot per query: {committed:?}");
    // SET TRANSACTION before the first query of the block.
    let (out, err) = psql_script(
        &fx,
        "BEGIN;\nSET TRANSACTION ISOLATION LEVEL REPEATABLE READ;\nSELECT count(*) FROM test.ticks;\n\\! sleep 0.3\nSELECT count(*) FROM test.ticks;\nCOMMIT;\n",
    );
    let counts: Vec<u64> = out.lines().filter_map(|line| line.trim().parse().ok()).collect();
    assert!(counts.len() == 2 && counts[0] == counts[1], "{out}{err}");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    thread.join().expect("ticker");
}

#[test]
fn an_error_inside_a_transaction_block_aborts_it_until_it_ends() {
    let fx = Fixture::new();
    let (out, err) = psql_script(
        &fx,
        "BEGIN;\nSELECT 1;\nSELECT nope FROM shop.items;\nSELECT 2;\nCOMMIT;\nSELECT 3;\nBEGIN;\nSELECT nope;\nROLLBACK;\nSELECT 4;\n",
    );
    assert!(err.contains("25P02") && err.contains("current transaction is aborted"), "{err}");
    assert_eq!(err.matches("25P02").count(), 1, "only SELECT 2 is refused: {err}");
    let answers: Vec<&str> = out.lines().map(str::trim).filter(|line| line.parse::<u64>().is_ok()).collect();
    assert_eq!(answers, ["1", "3", "4"], "{out}");
    let tags = |tag: &str| out.lines().filter(|line| line.trim() == tag).count();
    assert_eq!((tags("ROLLBACK"), tags("COMMIT")), (2, 0), "COMMIT of a failed block answers ROLLBACK: {out}");
}
