//! TLS and credentials against a real PostgreSQL that accepts only `hostssl`
//! sessions, as managed services do: each `sslmode`, certificate checks by chain and
//! by name, SCRAM bound to the TLS channel with the password from a password file,
//! client certificates, and a source mirroring through `verify-full`.

mod mirror;
mod support;

use std::time::Duration;

use mirror::{eventually, mirrored_rows, open_engine, RunningSource};
use retina_postgres::credentials::Environment;
use retina_postgres::wire::{ConnectConfig, PgConnection, WireError};
use retina_postgres::PgSourceOptions;
use support::certificates::{set_private, Issued, TestCa};
use support::{PasswordMethod, PgCluster, PgClusterOptions, ServerTls};
use tempfile::TempDir;

/// A hostssl-only cluster whose certificate names `localhost` only, signed by `ca`,
/// which also signs client certificates.
struct TlsServer {
    cluster: PgCluster,
    ca: TestCa,
    /// A CA that signed nothing the server has.
    stranger: TestCa,
    certificates: TempDir,
}

impl TlsServer {
    fn start() -> TlsServer {
        let certificates = tempfile::tempdir().expect("tempdir");
        let ca = TestCa::new(&certificates.path().join("ca"), "retina-test-ca");
        let stranger = TestCa::new(&certificates.path().join("stranger"), "stranger-ca");
        let Issued { certificate, key } = ca.issue("server", "localhost", &["DNS:localhost"]);
        let cluster = PgCluster::start_with(PgClusterOptions {
            tls: Some(ServerTls { certificate, key, client_ca: Some(ca.certificate.clone()) }),
            hostssl_only: true,
            ..PgClusterOptions::default()
        });
        TlsServer { cluster, ca, stranger, certificates }
    }

    /// The connection settings of `postgres://USER@HOST:PORT/postgres?QUERY`, parsed
    /// as the source parses them, with `environment` for what the URI leaves out.
    fn config(&self, user: &str, host: &str, query: &str, environment: &Environment) -> ConnectConfig {
        let uri = format!("postgres://{user}@{host}:{}/postgres?{query}", self.cluster.port());
        PgSourceOptions::parse_with(&uri, environment).unwrap_or_else(|error| panic!("{uri}: {error}")).connect
    }

    fn connect(&self, host: &str, query: &str) -> Result<PgConnection, WireError> {
        PgConnection::connect(&self.config("postgres", host, query, &Environment::default()), false)
    }
}

fn ca_query(ca: &TestCa, mode: &str) -> String {
    format!("sslmode={mode}&sslrootcert={}", ca.certificate.display())
}

/// Whether the session runs over TLS, as the server sees it.
fn server_sees_tls(connection: &mut PgConnection) -> bool {
    let rows = connection.query_rows("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").expect("pg_stat_ssl");
    rows == vec![vec![Some("t".to_string())]]
}

#[test]
fn a_hostssl_only_server_refuses_plain_sessions_and_every_other_mode_encrypts() {
    let server = TlsServer::start();
    let error = server.connect("127.0.0.1", "sslmode=disable").err().expect("plain is refused");
    match &error {
        WireError::Server { code, message, hint, .. } => {
            assert_eq!(code, "28000", "{error}");
            assert!(message.contains("no encryption"), "{error}");
            assert!(hint.as_deref().is_some_and(|hint| hint.contains("sslmode=require")), "{error}");
        }
        other => panic!("expected the server's refusal, got {other:?}"),
    }
    for mode in ["allow", "prefer", "require"] {
        let mut connection = server.connect("127.0.0.1", &format!("sslmode={mode}")).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert!(server_sees_tls(&mut connection), "sslmode={mode} encrypts");
    }
    // The default is libpq's: prefer.
    let mut connection = server.connect("127.0.0.1", "").expect("default sslmode");
    assert!(server_sees_tls(&mut connection));
}

#[test]
fn verify_modes_check_the_chain_and_verify_full_the_host_name() {
    let server = TlsServer::start();
    let mut connection = server.connect("localhost", &ca_query(&server.ca, "verify-full")).expect("verify-full by name");
    assert!(server_sees_tls(&mut connection));

    let error = server.connect("127.0.0.1", &ca_query(&server.ca, "verify-full")).err().expect("the name is not in the certificate");
    let text = error.to_string();
    assert!(matches!(error, WireError::Tls(_)) && text.contains("verify-ca"), "{text}");
    server.connect("127.0.0.1", &ca_query(&server.ca, "verify-ca")).expect("verify-ca ignores the name");

    for mode in ["verify-ca", "verify-full", "require"] {
        let error = server.connect("localhost", &ca_query(&server.stranger, mode)).err().expect("unknown issuer");
        let text = error.to_string();
        assert!(matches!(error, WireError::Tls(_)) && text.contains("sslrootcert"), "{mode}: {text}");
    }
    let error = server.connect("localhost", "sslmode=verify-full").err().expect("no root certificate");
    assert!(error.to_string().contains("needs sslrootcert"), "{error}");
    // A device or a folder where a certificate should be: refused without reading it.
    for (option, path) in [("sslrootcert", "/dev/zero"), ("sslrootcert", "/tmp")] {
        let error = server.connect("localhost", &format!("sslmode=verify-full&{option}={path}")).err().expect("not a file");
        assert!(error.to_string().contains("not a regular file") && error.to_string().contains(option), "{error}");
    }
    let client = server.ca.issue("client", "postgres", &[]);
    let error = server
        .connect("localhost", &format!("sslmode=require&sslcert={}&sslkey=/dev/zero", client.certificate.display()))
        .err()
        .expect("the key is a device");
    assert!(error.to_string().contains("sslkey /dev/zero: not a regular file"), "{error}");
}

#[test]
fn scram_binds_to_the_tls_channel_with_the_password_from_a_password_file() {
    let server = TlsServer::start();
    server.cluster.create_password_user("rep", "s3cret:x", PasswordMethod::ScramSha256);
    let port = server.cluster.port();
    let passfile = server.certificates.path().join("pgpass");
    std::fs::write(&passfile, format!("localhost:{port}:postgres:rep:s3cret\\:x\n")).expect("write pgpass");
    set_private(&passfile);
    let environment = Environment { passfile: Some(passfile.clone()), ..Environment::default() };

    // The server offers SCRAM-SHA-256-PLUS over TLS; a wrong end-point hash would
    // fail the exchange, so success means the binding is right.
    let config = server.config("rep", "localhost", &ca_query(&server.ca, "verify-full"), &environment);
    assert_eq!(config.password.as_deref(), Some("s3cret:x"));
    let mut connection = PgConnection::connect(&config, true).expect("SCRAM over TLS, replication session");
    assert!(connection.is_tls() && connection.is_channel_bound(), "SCRAM-SHA-256-PLUS over TLS");
    assert!(server_sees_tls(&mut connection));
    let plain_scram = server.config("rep", "localhost", "sslmode=require", &environment);
    let connection = PgConnection::connect(&plain_scram, false).expect("SCRAM over TLS");
    assert!(connection.is_channel_bound(), "bound without a root certificate too");

    std::fs::write(&passfile, format!("localhost:{port}:postgres:rep:wrong\n")).expect("write pgpass");
    let config = server.config("rep", "localhost", &ca_query(&server.ca, "verify-full"), &environment);
    let error = PgConnection::connect(&config, false).err().expect("wrong password");
    assert!(matches!(&error, WireError::Server { code, .. } if code == "28P01"), "{error}");
    assert!(!error.to_string().contains("wrong"), "the password is not echoed: {error}");
}

#[test]
fn a_client_certificate_authenticates_where_the_server_demands_one() {
    let server = TlsServer::start();
    server.cluster.psql("CREATE ROLE certuser LOGIN");
    server.cluster.add_hba_lines(&["hostssl all certuser 127.0.0.1/32 cert"]);
    let client = server.ca.issue("certuser", "certuser", &[]);
    let query = format!(
        "{}&sslcert={}&sslkey={}",
        ca_query(&server.ca, "verify-full"),
        client.certificate.display(),
        client.key.display()
    );
    let config = server.config("certuser", "localhost", &query, &Environment::default());
    let mut connection = PgConnection::connect(&config, false).expect("certificate authentication");
    assert_eq!(connection.query_rows("SELECT current_user").expect("query"), vec![vec![Some("certuser".to_string())]]);

    let without = server.config("certuser", "localhost", &ca_query(&server.ca, "verify-full"), &Environment::default());
    let error = PgConnection::connect(&without, false).err().expect("no certificate");
    assert!(error.to_string().contains("certificate"), "{error}");
}

#[test]
fn a_source_mirrors_through_verify_full() {
    let server = TlsServer::start();
    server.cluster.psql("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'copied')");
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = open_engine(dir.path());
    let uri = format!("postgres://postgres@localhost:{}/postgres?{}", server.cluster.port(), ca_query(&server.ca, "verify-full"));
    let source = RunningSource::start(&engine, &uri);
    source.wait_streaming();
    server.cluster.psql("INSERT INTO t VALUES (2, 'streamed')");
    eventually(Duration::from_secs(30), "both rows mirrored", || {
        let rows = mirrored_rows(&engine, "public.t");
        (rows == ["1|copied", "2|streamed"]).then_some(()).ok_or(format!("{rows:?}"))
    });
    let encrypted_senders = server.cluster.psql(
        "SELECT count(*) FROM pg_stat_replication r JOIN pg_stat_ssl s ON s.pid = r.pid WHERE s.ssl",
    );
    assert_eq!(encrypted_senders, "1", "the replication stream is encrypted");
    source.stop().expect("stops cleanly");
}
