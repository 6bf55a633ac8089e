//! A hostile SQL client against the endpoint: nothing it sends may write a file,
//! crash the server, or keep others from being served.

use std::time::Duration;

use retina_server::client::{PgClient, StatementOutcome};

mod support;
use support::Fixture;

/// `EXPLAIN ANALYZE` runs its input: a COPY under it wrote any file the server could
/// (the read-only check looked at the top of the plan only). Refused over the simple
/// and the extended protocol, as a cursor, and as a prepared statement; no file
/// appears.
#[test]
fn no_statement_writes_a_file_whatever_wraps_it() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().expect("tempdir");
    let target = dir.path().join("authorized_keys");
    let folder = dir.path().join("made/by/copy");
    let copies = [
        format!(
            "EXPLAIN ANALYZE COPY (SELECT 'ssh-ed25519 AAAA') TO '{}' STORED AS CSV OPTIONS ('format.has_header' 'false')",
            target.display()
        ),
        format!("EXPLAIN ANALYZE COPY shop.items TO '{}/items.parquet' STORED AS PARQUET", folder.display()),
        format!("EXPLAIN VERBOSE COPY (SELECT 1) TO '{}' STORED AS CSV", target.display()),
        format!("EXPLAIN ANALYZE CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '{}'", target.display()),
        "EXPLAIN ANALYZE INSERT INTO shop.items (id) VALUES (1)".to_string(),
    ];
    for sql in &copies {
        let stderr = fx.psql_error(sql);
        assert!(stderr.contains("ERROR:  25006") || stderr.contains("ERROR:  42501"), "{sql}: {stderr}");
    }
    let address = fx.addr().to_string();
    let mut client = PgClient::connect(&address, "retina", "retina").expect("connect");
    for sql in &copies {
        let error = client.query_params(sql, &[]).expect_err("refused over the extended protocol");
        let text = error.to_string();
        assert!(text.contains("25006") || text.contains("42501"), "{sql}: {text}");
    }
    let cursor = format!("BEGIN; DECLARE c CURSOR FOR {}; FETCH 1 FROM c", copies[0]);
    let (_, error) = client.query_partial(&cursor).expect("the session answers");
    assert!(error.is_some(), "a cursor over a copy is refused");
    client.query("ROLLBACK").expect("rollback");
    let prepared = format!("PREPARE p AS {}", copies[0]);
    let (_, error) = client.query_partial(&prepared).expect("the session answers");
    if error.is_none() {
        let (_, error) = client.query_partial("EXECUTE p").expect("the session answers");
        assert!(error.is_some(), "executing a prepared copy is refused");
    }
    assert!(!target.exists(), "no file was written");
    assert!(!dir.path().join("made").exists(), "no folder was made");
    // The session and the server still answer.
    let outcomes = client.query("SELECT count(*) FROM shop.items").expect("query");
    let Some(StatementOutcome::Rows(rows)) = outcomes.first() else { panic!("rows expected") };
    assert_eq!(rows.rows[0][0].as_deref(), Some("500"));
    assert!(fx.released_within(Duration::from_secs(10)), "no query snapshot stays registered");
}

/// A 2 KB query overflowed a runtime thread's stack and aborted the process. Deep
/// expressions and long UNION chains are answered, or refused with 54001; the server
/// answers the next query either way.
#[test]
fn deep_and_long_statements_do_not_crash_the_server() {
    let fx = Fixture::new();
    let address = fx.addr().to_string();
    let mut client = PgClient::connect(&address, "retina", "retina").expect("connect");
    let sum = format!("SELECT {}", vec!["1"; 1000].join("+"));
    let unions = vec!["SELECT 1"; 1000].join(" UNION ALL ");
    let nested = format!("SELECT {}1{}", "(".repeat(500), ")".repeat(500));
    let ands = format!("SELECT count(*) FROM shop.items WHERE {}", vec!["id > 0"; 1000].join(" AND "));
    for (sql, expected) in [(&sum, Some("1000")), (&unions, None), (&nested, Some("1")), (&ands, Some("500"))] {
        match client.query_partial(sql) {
            Ok((outcomes, None)) => {
                if let (Some(expected), Some(StatementOutcome::Rows(rows))) = (expected, outcomes.first()) {
                    assert_eq!(rows.rows[0][0].as_deref(), Some(expected), "{}", &sql[..40]);
                }
            }
            Ok((_, Some(error))) => assert!(error.to_string().contains("54001"), "{}: {error}", &sql[..40]),
            Err(error) => panic!("{}…: the connection failed: {error}", &sql[..40]),
        }
        let mut next = PgClient::connect(&address, "retina", "retina").expect("the server still accepts connections");
        next.query("SELECT 1").expect("the server still answers");
    }
}

/// At most so many connections: one more is refused with PostgreSQL's 53300 (psql
/// shows it), and a freed place is taken again.
#[test]
fn connections_beyond_the_cap_are_refused_with_53300() {
    use retina_server::{ClientAuthentication, PgServer};
    let fx = Fixture::new();
    let runtime = fx.runtime.as_ref().expect("runtime");
    let server = runtime
        .block_on(PgServer::start_with_limit("127.0.0.1:0", std::sync::Arc::clone(&fx.session), ClientAuthentication::Trust, 2))
        .expect("a server of two connections");
    let address = server.local_addr().to_string();
    let first = PgClient::connect(&address, "retina", "retina").expect("first");
    let mut second = PgClient::connect(&address, "retina", "retina").expect("second");
    let refused = std::process::Command::new("psql")
        .args(["-X", "-w", "-h", "127.0.0.1", "-p", &server.local_addr().port().to_string(), "-U", "retina", "-d", "retina", "-c", "SELECT 1"])
        .env("PGCONNECT_TIMEOUT", "10")
        .env("PGSSLMODE", "prefer")
        .output()
        .expect("psql (Debian package postgresql-client)");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && stderr.contains("too many clients already"), "{stderr}");
    second.query("SELECT 1").expect("the admitted connections are served");
    drop(first);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut third = loop {
        match PgClient::connect(&address, "retina", "retina") {
            Ok(client) => break client,
            Err(error) if std::time::Instant::now() < deadline => {
                assert!(error.to_string().contains("53300"), "{error}");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(error) => panic!("the freed place was not taken again: {error}"),
        }
    };
    third.query("SELECT 1").expect("served");
    runtime.block_on(server.shutdown());
}

/// A statement beyond the size limit is refused at once (54000), and one client
/// cannot hold more cursors than its share of the engine's snapshots (53000); the
/// others still query.
#[test]
fn oversized_statements_and_cursor_floods_are_bounded() {
    let fx = Fixture::new();
    let address = fx.addr().to_string();
    let mut client = PgClient::connect(&address, "retina", "retina").expect("connect");
    let huge = format!("SELECT '{}'", "x".repeat(retina_query::session::DEFAULT_MAX_STATEMENT_BYTES));
    let started = std::time::Instant::now();
    let (_, error) = client.query_partial(&huge).expect("the session answers");
    let error = error.expect("refused").to_string();
    assert!(error.contains("54000"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(20), "refused before parsing: {:?}", started.elapsed());
    client.query("BEGIN").expect("begin");
    let mut refused = None;
    for n in 0..100 {
        let (_, error) = client.query_partial(&format!("DECLARE c{n} CURSOR FOR SELECT * FROM shop.items")).expect("answers");
        if let Some(error) = error {
            refused = Some((n, error.to_string()));
            break;
        }
    }
    let (at, error) = refused.expect("the flood is cut off");
    assert!(at <= 64 && error.contains("53000") && error.contains("too many open cursors"), "{at}: {error}");
    let mut other = PgClient::connect(&address, "retina", "retina").expect("another client");
    let outcomes = other.query("SELECT count(*) FROM shop.items").expect("another session still queries");
    let Some(StatementOutcome::Rows(rows)) = outcomes.first() else { panic!("rows expected") };
    assert_eq!(rows.rows[0][0].as_deref(), Some("500"));
    client.query("ROLLBACK").expect("rollback closes the cursors");
    assert!(fx.released_within(Duration::from_secs(10)), "the cursors' snapshots are released");
}
