//! `retina serve` and `retina sql` end to end, as a user runs them: the server replays
//! the built-in generator through the CDC sink while `psql` (Debian package
//! `postgresql-client`) and `retina sql` query it; SIGTERM stops it cleanly and the
//! stopped data dir is queried with `retina sql --data-dir`; with `--password-file`,
//! clients log in with `PGPASSWORD` (SCRAM-SHA-256).

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod support;

use support::{spawn_serve, Spawned, RETINA};

struct Server {
    child: Child,
    sql: String,
    metrics: String,
}

impl Server {
    fn start(dir: &std::path::Path) -> Self {
        Self::start_with(dir, &["--source", "generator:chbench?rate=3000&base_rows=5000"])
    }

    fn start_with(dir: &std::path::Path, args: &[&str]) -> Self {
        let Spawned { child, sql, metrics } = spawn_serve(dir, args);
        Self { child, sql, metrics }
    }

    fn port(&self) -> &str {
        self.sql.rsplit(':').next().expect("port")
    }

    fn psql(&self, sql: &str) -> String {
        let output = Command::new("psql")
            .args(["-X", "-h", "127.0.0.1", "-p", self.port(), "-U", "retina", "-d", "retina", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("cannot run psql ({e}): install the Debian package postgresql-client"));
        assert!(output.status.success(), "psql {sql:?}: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// SIGTERM, then wait for a clean exit.
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill").args(["-TERM", &pid]).status().expect("kill");
        assert!(status.success());
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "retina serve exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "retina serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn retina_sql(args: &[&str]) -> Output {
    Command::new(RETINA).arg("sql").args(args).output().expect("run retina sql")
}

#[test]
fn serve_replays_while_psql_and_retina_sql_query_it_and_the_stopped_dir_reopens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start(dir.path());
    let first: u64 = server.psql("SELECT count(*) FROM chbench.orders").parse().expect("count");
    std::thread::sleep(Duration::from_millis(700));
    let second: u64 = server.psql("SELECT count(*) FROM chbench.orders").parse().expect("count");
    assert!(second > first, "replay goes on while serving: {first} then {second}");
    assert_eq!(server.psql("SELECT state FROM retina.sources"), "running");
    let consistent = server.psql("SELECT (SELECT count(*) FROM chbench.new_order) = (SELECT count(*) FROM chbench.orders WHERE o_carrier_id IS NULL)");
    assert_eq!(consistent, "t");

    let json = retina_sql(&["--connect", &server.sql, "--format", "json", "-c", "SELECT count(*) AS n, max(w_id) AS w FROM chbench.warehouse"]);
    assert!(json.status.success(), "{}", String::from_utf8_lossy(&json.stderr));
    let value: serde_json::Value = serde_json::from_slice(&json.stdout).expect("json output");
    assert_eq!(value[0]["n"], 1);
    let csv = retina_sql(&["--connect", &server.sql, "--format", "csv", "-c", "SELECT w_id, w_name FROM chbench.warehouse"]);
    assert_eq!(String::from_utf8_lossy(&csv.stdout), "w_id,w_name\n1,warehouse-1\n");
    let table = retina_sql(&["--connect", &server.sql, "-c", "SELECT w_id FROM chbench.warehouse"]);
    assert_eq!(String::from_utf8_lossy(&table.stdout), " w_id\n------\n    1\n(1 row)\n");
    let bad = retina_sql(&["--connect", &server.sql, "-c", "SELECT * FROM chbench.nope"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("SQLSTATE 42P01"), "{}", String::from_utf8_lossy(&bad.stderr));

    let metrics = std::net::TcpStream::connect(&server.metrics).map(|mut socket| {
        use std::io::{Read, Write};
        socket.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").expect("request");
        let mut text = String::new();
        socket.read_to_string(&mut text).expect("response");
        text
    });
    let metrics = metrics.expect("metrics endpoint");
    assert!(metrics.contains("retina_source_transactions_total{source=\"generator:chbench?rate=3000&base_rows=5000\"}"), "{metrics}");

    // Orders ever placed only grow (the generator also archives old orders, so the
    // count of rows in `orders` may drop between this query and the stop).
    const PLACED: &str = "SELECT sum(d_next_o_id) FROM chbench.district";
    let last: u64 = server.psql(PLACED).parse().expect("orders placed");
    server.stop();

    // The stopped data dir opens again (recovery) and answers the same tables, with
    // everything seen while serving and the cross-table invariant intact.
    let data_dir = dir.path().to_str().expect("utf-8");
    let reopened_figure = |sql: &str| {
        let output = retina_sql(&["--data-dir", data_dir, "--format", "csv", "-c", sql]);
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).lines().nth(1).expect("one value").to_string()
    };
    let placed: u64 = reopened_figure(PLACED).parse().expect("orders placed");
    assert!(placed >= last, "after restart: {placed} orders placed, {last} seen while serving");
    let consistent = reopened_figure(
        "SELECT (SELECT count(*) FROM chbench.new_order) = (SELECT count(*) FROM chbench.orders WHERE o_carrier_id IS NULL)",
    );
    assert_eq!(consistent, "true");

    // The shell: statements end at ';'; an error is reported and the shell goes on;
    // results before the error are printed; the exit status says something failed.
    let mut shell = Command::new(RETINA)
        .args(["sql", "--format", "csv", "--data-dir", dir.path().to_str().expect("utf-8")])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("retina sql shell");
    std::io::Write::write_all(&mut shell.stdin.take().expect("stdin"), b"SELECT 1 AS one; SELECT nope;\nSELECT 2\n  AS two;\n")
        .expect("script");
    let output = shell.wait_with_output().expect("shell");
    assert!(!output.status.success());
    assert_eq!(String::from_utf8_lossy(&output.stdout), "one\n1\ntwo\n2\n");
    assert!(String::from_utf8_lossy(&output.stderr).contains("SQLSTATE 42703"), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn with_a_password_file_psql_and_retina_sql_log_in_with_pgpassword_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "open sesame\n").expect("password file");
    let server = Server::start_with(&dir.path().join("lake"), &["--password-file", password_file.to_str().expect("utf-8")]);
    let psql = |password: Option<&str>| {
        let mut command = Command::new("psql");
        command.args(["-X", "-w", "-h", "127.0.0.1", "-p", server.port(), "-U", "retina", "-d", "retina", "-A", "-t", "-c", "SELECT 40 + 2"]);
        command.env_remove("PGPASSWORD");
        if let Some(password) = password {
            command.env("PGPASSWORD", password);
        }
        command.output().expect("run psql")
    };
    let right = psql(Some("open sesame"));
    assert!(right.status.success(), "{}", String::from_utf8_lossy(&right.stderr));
    assert_eq!(String::from_utf8_lossy(&right.stdout).trim(), "42");
    let wrong = psql(Some("open sesam"));
    assert!(String::from_utf8_lossy(&wrong.stderr).contains("password authentication failed for user \"retina\""));
    assert!(!psql(None).status.success());

    let sql = |password: Option<&str>| {
        let mut command = Command::new(RETINA);
        command.args(["sql", "--connect", &server.sql, "--format", "csv", "-c", "SELECT 7 AS n"]).env_remove("PGPASSWORD");
        if let Some(password) = password {
            command.env("PGPASSWORD", password);
        }
        command.output().expect("run retina sql")
    };
    let right = sql(Some("open sesame"));
    assert_eq!(String::from_utf8_lossy(&right.stdout), "n\n7\n", "{}", String::from_utf8_lossy(&right.stderr));
    let wrong = String::from_utf8_lossy(&sql(Some("x")).stderr).to_string();
    assert!(wrong.contains("cannot log in") && wrong.contains("SQLSTATE 28P01"), "{wrong}");
    let missing = String::from_utf8_lossy(&sql(None).stderr).to_string();
    assert!(missing.contains("the server asks for a password: set PGPASSWORD"), "{missing}");
    server.stop();
}

#[test]
fn bad_sources_and_unreachable_servers_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(RETINA)
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--source", "bogus:thing", "--seconds", "1"])
        .output()
        .expect("run retina serve");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("bogus:thing"), "{}", String::from_utf8_lossy(&output.stderr));
    // A PostgreSQL source URI with a bad option fails before anything starts.
    let output = Command::new(RETINA)
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--source", "postgres://127.0.0.1/db?colour=red", "--seconds", "1"])
        .output()
        .expect("run retina serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("unknown option 'colour'"), "{stderr}");
    // A password file that cannot be read stops the server before it starts.
    let output = Command::new(RETINA)
        .args(["serve", "--data-dir"])
        .arg(dir.path())
        .args(["--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--password-file", "/nonexistent/pw", "--seconds", "1"])
        .output()
        .expect("run retina serve");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("cannot read the password file /nonexistent/pw"), "{stderr}");

    // A port nobody listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let output = retina_sql(&["--connect", &format!("127.0.0.1:{port}"), "-c", "SELECT 1"]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("retina serve"), "{}", String::from_utf8_lossy(&output.stderr));

    let missing = retina_sql(&["--data-dir", "/nonexistent/retina", "-c", "SELECT 1"]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/retina"));
}
