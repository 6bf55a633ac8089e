//! The wire client against a real PostgreSQL cluster (one per test, see `support`):
//! simple queries, errors, password authentication, COPY OUT, and a logical
//! replication session from slot creation to the CopyBoth stream.

mod support;

use std::net::TcpListener;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use retina_postgres::wire::{ConnectConfig, CopyBothEvent, PgConnection, WireError};
use retina_postgres::Lsn;
use support::{PasswordMethod, PgCluster};

fn some(text: &str) -> Option<String> {
    Some(text.to_string())
}

#[test]
fn trust_session_runs_several_statements_with_tags_columns_and_nulls() {
    let cluster = PgCluster::new();
    let mut connection = cluster.connect("postgres");
    assert!(connection.backend_pid() > 0);
    assert!(connection.server_parameter("server_version").is_some());
    assert_eq!(connection.server_parameter("client_encoding"), Some("UTF8"));
    assert_eq!(connection.server_parameter("DateStyle"), Some("ISO, MDY"));

    let results = connection
        .simple_query(
            "CREATE TABLE t (id int, name text); \
             INSERT INTO t VALUES (1, 'héllo ✓'), (2, NULL); \
             SELECT id, name FROM t ORDER BY id",
        )
        .expect("the statements run");
    let tags: Vec<&str> = results.iter().map(|result| result.tag.as_str()).collect();
    assert_eq!(tags, ["CREATE TABLE", "INSERT 0 2", "SELECT 2"]);
    assert!(results[0].columns.is_empty() && results[0].rows.is_empty());
    assert_eq!(results[2].columns, ["id", "name"]);
    assert_eq!(results[2].rows, vec![vec![some("1"), some("héllo ✓")], vec![some("2"), None]]);

    assert_eq!(connection.query_rows("SELECT NULL::text AS a, '' AS b").expect("select"), vec![vec![None, some("")]]);
    assert!(connection.simple_query("").expect("an empty query is fine").is_empty());
    assert!(connection.simple_query(";").expect("so is a lone semicolon").is_empty());

    // A value far larger than one read chunk is reassembled from many reads.
    let rows = connection.query_rows("SELECT repeat('x', 3000000)").expect("a 3 MB value");
    assert_eq!(rows[0][0].as_deref().map(str::len), Some(3_000_000));
}

#[test]
fn server_errors_carry_the_sqlstate_and_leave_the_session_usable() {
    let cluster = PgCluster::new();
    let mut connection = cluster.connect("postgres");

    let error = connection.simple_query("SELECT * FROM no_such_table").expect_err("the table is missing");
    match &error {
        WireError::Server { severity, code, message, position, .. } => {
            assert_eq!(severity, "ERROR");
            assert_eq!(code, "42P01");
            assert!(message.contains("no_such_table"), "{message}");
            assert_eq!(position.as_deref(), Some("15"));
        }
        other => panic!("expected a server error, got {other:?}"),
    }
    assert_eq!(error.code(), Some("42P01"));
    assert!(error.to_string().starts_with("ERROR 42P01: relation \"no_such_table\" does not exist"), "{error}");
    assert_eq!(connection.query_rows("SELECT 1").expect("still usable"), vec![vec![some("1")]]);

    // An error in the middle of a multi-statement query: the rest is skipped, the
    // session is drained to ReadyForQuery.
    let error = connection.simple_query("SELECT 1; SELECT 1/0; SELECT 2").expect_err("division by zero");
    assert_eq!(error.code(), Some("22012"));
    assert_eq!(connection.query_rows("SELECT 3").expect("still usable"), vec![vec![some("3")]]);

    // Inside an explicit transaction the session is in a failed transaction until
    // ROLLBACK, which is the server's rule, not ours.
    connection.simple_query("BEGIN").expect("begin");
    assert_eq!(connection.simple_query("SELECT 1/0").expect_err("error").code(), Some("22012"));
    assert_eq!(connection.simple_query("SELECT 1").expect_err("aborted transaction").code(), Some("25P02"));
    connection.simple_query("ROLLBACK").expect("rollback");

    // Notices are consumed silently.
    let results = connection.simple_query("DO $$ BEGIN RAISE NOTICE 'hello'; END $$; SELECT 4").expect("notice");
    assert_eq!(results.last().map(|result| result.rows.clone()), Some(vec![vec![some("4")]]));

    // copy_out on a statement that is not a COPY is refused, and the session survives.
    let error = connection.copy_out("SELECT 1", &mut |_| Ok(())).expect_err("not a COPY");
    assert!(matches!(error, WireError::Protocol(_)), "{error:?}");
    assert_eq!(connection.query_rows("SELECT 5").expect("still usable"), vec![vec![some("5")]]);
}

#[test]
fn a_terminated_backend_fails_with_fatal_and_the_session_then_says_it_is_unusable() {
    let cluster = PgCluster::new();
    let mut victim = cluster.connect("postgres");
    let pid = victim.backend_pid();
    cluster.psql(&format!("SELECT pg_terminate_backend({pid})"));

    let error = victim.simple_query("SELECT 1").expect_err("the backend is gone");
    // The FATAL message usually arrives before the close; either way it is an error.
    assert!(
        error.code() == Some("57P01") || matches!(error, WireError::Io { .. }),
        "expected FATAL 57P01 or a closed connection, got {error:?}"
    );
    let later = victim.simple_query("SELECT 1").expect_err("still gone");
    assert!(matches!(&later, WireError::Protocol(text) if text.contains("unusable")), "{later:?}");
}

fn password_config(cluster: &PgCluster, user: &str, password: Option<&str>) -> ConnectConfig {
    ConnectConfig { password: password.map(str::to_string), ..cluster.config("postgres", user) }
}

fn check_password_method(method: PasswordMethod, user: &str) {
    let cluster = PgCluster::new();
    let password = "s3cret 'pässword'";
    cluster.create_password_user(user, password, method);
    let stored = cluster.psql(&format!("SELECT left(rolpassword, 3) FROM pg_authid WHERE rolname = '{user}'"));
    assert_eq!(stored, if method == PasswordMethod::Md5 { "md5" } else { "SCR" }, "how the password is stored");

    let mut connection =
        PgConnection::connect(&password_config(&cluster, user, Some(password)), false).expect("the right password");
    assert_eq!(connection.query_rows("SELECT current_user").expect("select"), vec![vec![some(user)]]);
    let mut replication =
        PgConnection::connect(&password_config(&cluster, user, Some(password)), true).expect("replication too");
    assert_eq!(replication.simple_query("IDENTIFY_SYSTEM").expect("identify").len(), 1);

    let wrong = PgConnection::connect(&password_config(&cluster, user, Some("wrong")), false)
        .err()
        .expect("a wrong password is refused");
    assert_eq!(wrong.code(), Some("28P01"), "{wrong:?}");
    assert!(wrong.is_fatal());

    let missing =
        PgConnection::connect(&password_config(&cluster, user, None), false).err().expect("no password is refused");
    match &missing {
        WireError::Authentication(text) => {
            assert!(text.contains("no password was configured") && text.contains(user), "{text}");
        }
        other => panic!("expected an authentication error, got {other:?}"),
    }
}

#[test]
fn md5_password_authentication() {
    check_password_method(PasswordMethod::Md5, "md5_user");
}

#[test]
fn scram_sha_256_password_authentication() {
    check_password_method(PasswordMethod::ScramSha256, "scram_user");
}

#[test]
fn cleartext_password_authentication() {
    check_password_method(PasswordMethod::Cleartext, "cleartext_user");
}

#[test]
fn copy_out_streams_every_row_and_survives_a_failing_callback() {
    let cluster = PgCluster::new();
    let mut connection = cluster.connect("postgres");
    connection
        .simple_query("CREATE TABLE big AS SELECT g AS id, md5(g::text) AS digest FROM generate_series(1, 100000) g")
        .expect("create the table");

    let mut rows = 0u64;
    let mut id_sum = 0u64;
    let mut last_line = Vec::new();
    let copied = connection
        .copy_out("COPY big TO STDOUT", &mut |payload| {
            for line in payload.split_inclusive(|&byte| byte == b'\n') {
                rows += 1;
                let id = line.split(|&byte| byte == b'\t').next().unwrap_or_default();
                id_sum += std::str::from_utf8(id).map_err(|error| error.to_string())?.parse::<u64>().map_err(|e| e.to_string())?;
                last_line = line.to_vec();
            }
            Ok(())
        })
        .expect("copy out");
    assert_eq!(copied, 100_000);
    assert_eq!(rows, 100_000);
    assert_eq!(id_sum, 100_000 * 100_001 / 2);
    assert!(last_line.ends_with(b"\n"));

    // The callback fails on the 10th payload: no more payloads reach it, the rest of
    // the copy is drained, and the session stays usable.
    let mut calls = 0;
    let error = connection
        .copy_out("COPY big TO STDOUT", &mut |_| {
            calls += 1;
            if calls == 10 { Err("the sink is full".to_string()) } else { Ok(()) }
        })
        .expect_err("the callback stops the copy");
    assert!(matches!(&error, WireError::Callback(text) if text == "the sink is full"), "{error:?}");
    assert_eq!(calls, 10);
    assert_eq!(connection.query_rows("SELECT count(*) FROM big").expect("usable"), vec![vec![some("100000")]]);

    // A server error inside the copy comes back as such.
    let error = connection.copy_out("COPY (SELECT 1/(g - 5) FROM generate_series(1, 10) g) TO STDOUT", &mut |_| Ok(()));
    assert_eq!(error.expect_err("division by zero").code(), Some("22012"));
    assert_eq!(connection.query_rows("SELECT 6").expect("usable"), vec![vec![some("6")]]);
}

#[test]
fn connecting_to_a_port_without_a_server_names_the_address() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let config = ConnectConfig {
        host: "127.0.0.1".to_string(),
        port,
        user: "postgres".to_string(),
        password: None,
        database: "postgres".to_string(),
        application_name: "test".to_string(),
        connect_timeout: Duration::from_secs(5),
        tls: Default::default(),
    };
    let error = PgConnection::connect(&config, false).err().expect("nothing listens there");
    match &error {
        WireError::Connect { address, .. } => assert_eq!(address, &format!("127.0.0.1:{port}")),
        other => panic!("expected a connect error, got {other:?}"),
    }
    assert!(error.to_string().starts_with(&format!("cannot connect to postgres at 127.0.0.1:{port}: ")), "{error}");

    let unresolvable = ConnectConfig { host: "no-such-host.invalid".to_string(), ..config };
    let error = PgConnection::connect(&unresolvable, false).err().expect("the name does not resolve");
    assert!(matches!(&error, WireError::Connect { address, .. } if address.starts_with("no-such-host.invalid:")), "{error:?}");
}

/// The payload of an XLogData (`w`) message: the pgoutput message after the 24-byte
/// header (start LSN, end LSN, send time).
fn xlog_data_body(payload: &[u8]) -> Option<&[u8]> {
    (payload.first() == Some(&b'w') && payload.len() >= 25).then(|| &payload[25..])
}

/// A standby status update: write, flush and apply positions, the clock, and whether
/// the server should answer at once with a keepalive.
fn standby_status_update(position: Lsn, reply_requested: bool) -> Vec<u8> {
    const POSTGRES_EPOCH_UNIX_SECONDS: u64 = 946_684_800;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("the clock is after 1970");
    let micros = now.as_micros() as i64 - (POSTGRES_EPOCH_UNIX_SECONDS as i64) * 1_000_000;
    let mut message = vec![b'r'];
    for _ in 0..3 {
        message.extend_from_slice(&position.0.to_be_bytes());
    }
    message.extend_from_slice(&micros.to_be_bytes());
    message.push(u8::from(reply_requested));
    message
}

/// Reads the stream until a `w` message whose pgoutput message starts with `kind`,
/// collecting the kinds seen; panics after `within`.
fn read_until_kind(connection: &mut PgConnection, kind: u8, within: Duration, seen: &mut Vec<u8>) -> Vec<u8> {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match connection.read_copy_data(Duration::from_millis(200)).expect("read the stream") {
            CopyBothEvent::Data(payload) => {
                if let Some(body) = xlog_data_body(&payload) {
                    seen.push(body[0]);
                    if body[0] == kind {
                        return payload.to_vec();
                    }
                }
            }
            CopyBothEvent::Timeout => {}
            CopyBothEvent::End => panic!("the server ended the stream"),
        }
    }
    panic!("no pgoutput '{}' message within {within:?}; saw {:?}", kind as char, String::from_utf8_lossy(seen));
}

#[test]
fn logical_replication_session_from_slot_snapshot_to_the_stream() {
    let cluster = PgCluster::new();
    cluster.psql(
        "CREATE TABLE items (id int PRIMARY KEY, note text); \
         INSERT INTO items VALUES (1, 'before the slot'); \
         CREATE PUBLICATION p FOR ALL TABLES",
    );

    let mut replication = cluster.connect_replication("postgres");
    let identify = replication.simple_query("IDENTIFY_SYSTEM").expect("IDENTIFY_SYSTEM");
    assert_eq!(identify[0].columns, ["systemid", "timeline", "xlogpos", "dbname"]);
    assert_eq!(identify[0].rows[0][3].as_deref(), Some("postgres"));
    let xlogpos: Lsn = identify[0].rows[0][2].as_deref().expect("xlogpos").parse().expect("an LSN");
    assert!(xlogpos > Lsn::ZERO);

    let major = replication.server_major_version().expect("the server reports its version");
    let create_slot = if major >= 15 {
        "CREATE_REPLICATION_SLOT s LOGICAL pgoutput (SNAPSHOT 'export')"
    } else {
        "CREATE_REPLICATION_SLOT s LOGICAL pgoutput EXPORT_SNAPSHOT"
    };
    let slot = replication.simple_query(create_slot).expect("create the slot");
    assert_eq!(slot[0].columns, ["slot_name", "consistent_point", "snapshot_name", "output_plugin"]);
    let snapshot = slot[0].rows[0][2].clone().expect("an exported snapshot");

    // Committed after the slot's consistent point: in the stream, not in the snapshot.
    cluster.psql("INSERT INTO items VALUES (2, 'after the slot')");

    // The snapshot is importable while the replication session stays open and idle.
    let mut copier = cluster.connect("postgres");
    copier
        .simple_query(&format!("BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '{snapshot}'"))
        .expect("import the snapshot");
    let mut copied = Vec::new();
    let count = copier
        .copy_out("COPY items TO STDOUT", &mut |payload| {
            copied.extend_from_slice(payload);
            Ok(())
        })
        .expect("copy inside the snapshot");
    assert_eq!(count, 1);
    assert_eq!(copied, b"1\tbefore the slot\n");
    copier.simple_query("COMMIT").expect("commit");

    replication
        .start_copy_both("START_REPLICATION SLOT s LOGICAL 0/0 (proto_version '1', publication_names 'p')")
        .expect("start streaming");
    let mut seen = Vec::new();
    let insert = read_until_kind(&mut replication, b'I', Duration::from_secs(20), &mut seen);
    assert!(seen.starts_with(b"B"), "a transaction starts with Begin: {:?}", String::from_utf8_lossy(&seen));
    assert!(insert.windows(b"after the slot".len()).any(|window| window == b"after the slot"));
    let commit = read_until_kind(&mut replication, b'C', Duration::from_secs(20), &mut seen);
    // Commit: 'C', flags, commit LSN, end LSN, time (after the 25-byte XLogData header).
    let commit_end = Lsn(u64::from_be_bytes(commit[35..43].try_into().expect("8 bytes")));

    // A large row crosses many read chunks and still arrives as one message.
    cluster.psql("INSERT INTO items VALUES (3, repeat('y', 2000000))");
    let large = read_until_kind(&mut replication, b'I', Duration::from_secs(20), &mut seen);
    assert!(large.len() > 2_000_000, "{}", large.len());
    read_until_kind(&mut replication, b'C', Duration::from_secs(20), &mut seen);

    // Nothing pending: a short read times out promptly. A keepalive may slip in, so
    // allow a few tries.
    let timed_out = (0..20).any(|_| {
        let started = Instant::now();
        match replication.read_copy_data(Duration::from_millis(50)).expect("read") {
            CopyBothEvent::Timeout => {
                let waited = started.elapsed();
                assert!(waited >= Duration::from_millis(45) && waited < Duration::from_secs(2), "{waited:?}");
                true
            }
            CopyBothEvent::Data(payload) => {
                assert_eq!(payload.first(), Some(&b'k'), "only keepalives should be pending");
                false
            }
            CopyBothEvent::End => panic!("the server ended the stream"),
        }
    });
    assert!(timed_out, "every short read returned data");

    // A standby status update asking for a reply is accepted and answered with a
    // keepalive; the flush position becomes the slot's confirmed_flush_lsn.
    replication.send_copy_data(&standby_status_update(commit_end, true)).expect("send the status update");
    let deadline = Instant::now() + Duration::from_secs(20);
    let keepalive = loop {
        assert!(Instant::now() < deadline, "no keepalive answered the status update");
        if let CopyBothEvent::Data(payload) = replication.read_copy_data(Duration::from_millis(200)).expect("read") {
            if payload.first() == Some(&b'k') {
                break payload;
            }
        }
    };
    assert_eq!(keepalive.len(), 18, "k + walEnd + clock + replyRequested");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let confirmed = cluster.psql("SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = 's'");
        if confirmed.parse::<Lsn>().is_ok_and(|lsn| lsn >= commit_end) {
            break;
        }
        assert!(Instant::now() < deadline, "confirmed_flush_lsn stayed {confirmed}, expected {commit_end}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // Queries are refused while streaming, with the reason.
    let refused = replication.simple_query("SELECT 1").expect_err("streaming");
    assert!(matches!(&refused, WireError::Protocol(text) if text.contains("CopyBoth")), "{refused:?}");

    // The walsender is terminated: the stream reports it, later calls say why.
    cluster.psql(&format!("SELECT pg_terminate_backend({})", replication.backend_pid()));
    let deadline = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        assert!(Instant::now() < deadline, "the terminated stream kept going");
        match replication.read_copy_data(Duration::from_millis(200)) {
            Ok(CopyBothEvent::Data(_) | CopyBothEvent::Timeout) => {}
            Ok(CopyBothEvent::End) => panic!("a terminated walsender does not end the copy cleanly"),
            Err(error) => break error,
        }
    };
    assert!(ended.code() == Some("57P01") || matches!(ended, WireError::Io { .. }), "{ended:?}");
    let later = replication.read_copy_data(Duration::from_millis(10)).expect_err("unusable");
    assert!(matches!(&later, WireError::Protocol(text) if text.contains("unusable")), "{later:?}");
}

#[test]
fn start_replication_on_a_missing_slot_is_a_server_error_and_the_session_survives() {
    let cluster = PgCluster::new();
    let mut replication = cluster.connect_replication("postgres");
    let error = replication
        .start_copy_both("START_REPLICATION SLOT no_such_slot LOGICAL 0/0 (proto_version '1', publication_names 'p')")
        .expect_err("the slot does not exist");
    assert_eq!(error.code(), Some("42704"), "{error:?}");
    assert_eq!(replication.simple_query("IDENTIFY_SYSTEM").expect("still usable")[0].rows.len(), 1);
    let not_streaming = replication.read_copy_data(Duration::from_millis(10)).expect_err("not streaming");
    assert!(matches!(&not_streaming, WireError::Protocol(text) if text.contains("start_copy_both")), "{not_streaming:?}");
}
