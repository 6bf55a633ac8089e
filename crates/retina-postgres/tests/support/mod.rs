//! A real, throwaway PostgreSQL cluster per test: `initdb` into a temporary
//! directory, configured for logical replication, on a free TCP port of 127.0.0.1,
//! stopped and deleted on drop.
//!
//! Why real: the source's hard parts (exported snapshots, slot positions, restarts,
//! what pgoutput actually sends) cannot be mocked faithfully. `initdb` with
//! `--no-sync` takes a second or two, so every test gets its own cluster and tests
//! run in parallel without sharing state.
//!
//! When the tests run as root (containers, CI), the server programs run as the
//! `postgres` OS user through `runuser`, since PostgreSQL refuses to run as root.
//! If the binaries are missing the harness panics with the install command: these
//! tests must fail loudly, not skip.

#![allow(dead_code)] // each test binary uses a different part of the harness

pub mod certificates;
mod commands;

use std::fmt::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use retina_postgres::wire::{ConnectConfig, PgConnection, QueryResult};
use tempfile::TempDir;

pub use commands::{running_as_root, ServerBinaries};
use commands::Runner;

/// Settings for every test cluster. `wal_level=logical` and the sender/slot limits
/// are what the source needs; `fsync`/`full_page_writes` off make a test cluster fast
/// (crash safety of the OS is not under test: `stop_immediate` still exercises crash
/// recovery, which replays WAL regardless). `synchronous_commit` stays on so commit
/// means what it means in production.
const BASE_SETTINGS: &[&str] = &[
    "listen_addresses = '127.0.0.1'",
    "wal_level = logical",
    "max_wal_senders = 20",
    "max_replication_slots = 20",
    "fsync = off",
    "full_page_writes = off",
    "shared_buffers = 128MB",
    "max_connections = 100",
];

/// The trust rules after any test-specific lines: the `postgres` superuser (and
/// anyone not matched earlier) connects without a password, also for replication.
const TRUST_HBA_LINES: &[&str] = &[
    "local all all trust",
    "host all all 127.0.0.1/32 trust",
    "host replication all 127.0.0.1/32 trust",
];

/// How many fresh ports to try when another process grabs the one we picked between
/// choosing it and the server binding it.
const PORT_ATTEMPTS: usize = 5;

/// Extra configuration for [`PgCluster::start_with`].
#[derive(Debug, Clone, Default)]
pub struct PgClusterOptions {
    /// `pg_hba.conf` lines placed before the trust rules (first match wins).
    pub hba_lines: Vec<String>,
    /// Extra `postgresql.conf` lines, after (and so overriding) the base settings,
    /// e.g. `"wal_sender_timeout = '2s'"`.
    pub settings: Vec<String>,
    /// `ssl = on` with this certificate and key, and (for `cert` authentication) the
    /// CA that signs client certificates.
    pub tls: Option<ServerTls>,
    /// Only `hostssl` lines: a session without TLS is refused, as managed services do.
    pub hostssl_only: bool,
}

/// The server side of TLS.
#[derive(Debug, Clone)]
pub struct ServerTls {
    pub certificate: PathBuf,
    pub key: PathBuf,
    pub client_ca: Option<PathBuf>,
}

/// How a password user authenticates (the `pg_hba.conf` method, and the
/// `password_encryption` its password is stored with).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasswordMethod {
    /// `md5`, with an MD5-hashed stored password (a SCRAM-stored one would make the
    /// server use SCRAM instead).
    Md5,
    ScramSha256,
    /// `password`: cleartext on the wire.
    Cleartext,
}

impl PasswordMethod {
    fn hba_method(self) -> &'static str {
        match self {
            PasswordMethod::Md5 => "md5",
            PasswordMethod::ScramSha256 => "scram-sha-256",
            PasswordMethod::Cleartext => "password",
        }
    }

    fn password_encryption(self) -> &'static str {
        match self {
            PasswordMethod::Md5 => "md5",
            PasswordMethod::ScramSha256 | PasswordMethod::Cleartext => "scram-sha-256",
        }
    }
}

/// A running throwaway PostgreSQL cluster.
pub struct PgCluster {
    binaries: ServerBinaries,
    runner: Runner,
    data_dir: PathBuf,
    log_path: PathBuf,
    port: u16,
    /// Test-specific `pg_hba.conf` lines, before the trust rules.
    hba_lines: Mutex<Vec<String>>,
    /// The TCP trust rules apply to TLS sessions only.
    hostssl_only: bool,
    running: bool,
    /// Deleted after the server stopped (fields drop after `Drop::drop`).
    dir: TempDir,
}

impl PgCluster {
    /// Initializes and starts a cluster with the base settings.
    #[allow(clippy::new_without_default)] // starting a server is not a default value
    pub fn new() -> PgCluster {
        PgCluster::start_with(PgClusterOptions::default())
    }

    /// Initializes and starts a cluster with extra settings and hba lines.
    pub fn start_with(options: PgClusterOptions) -> PgCluster {
        let binaries = ServerBinaries::locate();
        let as_root = running_as_root();
        // The `postgres` user must be able to reach the directory: /tmp is
        // world-traversable, a developer's TMPDIR may not be.
        let dir = if as_root {
            tempfile::Builder::new().prefix("retina-pg-").tempdir_in("/tmp")
        } else {
            tempfile::Builder::new().prefix("retina-pg-").tempdir()
        }
        .unwrap_or_else(|error| panic!("cannot create a temporary directory for the cluster: {error}"));
        let runner = Runner::new(dir.path());
        runner.hand_over(dir.path());

        let data_dir = dir.path().join("data");
        let log_path = dir.path().join("server.log");
        let data = data_dir.to_string_lossy().into_owned();
        runner.run_checked(
            &binaries.initdb,
            &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C"],
            String::new,
        );

        let mut conf = String::from("\n# retina-postgres test harness\n");
        if let Some(tls) = &options.tls {
            let copy = |from: &PathBuf, name: &str| {
                let to = data_dir.join(name);
                std::fs::copy(from, &to).unwrap_or_else(|error| panic!("cannot copy {}: {error}", from.display()));
                certificates::set_private(&to);
                runner.hand_over(&to);
            };
            copy(&tls.certificate, "server.crt");
            copy(&tls.key, "server.key");
            let _ = writeln!(conf, "ssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'");
            if let Some(ca) = &tls.client_ca {
                copy(ca, "client_ca.crt");
                let _ = writeln!(conf, "ssl_ca_file = 'client_ca.crt'");
            }
        }
        for line in BASE_SETTINGS.iter().copied().chain(options.settings.iter().map(String::as_str)) {
            let _ = writeln!(conf, "{line}");
        }
        let _ = writeln!(conf, "unix_socket_directories = '{}'", dir.path().display());
        let _ = writeln!(conf, "include_if_exists 'retina_port.conf'");
        append(&data_dir.join("postgresql.conf"), &conf);

        let mut cluster = PgCluster {
            binaries,
            runner,
            data_dir,
            log_path,
            port: 0,
            hba_lines: Mutex::new(options.hba_lines),
            hostssl_only: options.hostssl_only,
            running: false,
            dir,
        };
        cluster.write_hba();
        cluster.start_on_a_free_port();
        cluster
    }

    /// Picks a free port and starts the server on it, picking again if someone else
    /// bound it in the meantime.
    fn start_on_a_free_port(&mut self) {
        for attempt in 1..=PORT_ATTEMPTS {
            self.port = free_port();
            std::fs::write(self.data_dir.join("retina_port.conf"), format!("port = {}\n", self.port))
                .unwrap_or_else(|error| panic!("cannot write retina_port.conf: {error}"));
            self.runner.hand_over(&self.data_dir.join("retina_port.conf"));
            let log_before = self.log().len();
            let output = self.run_pg_ctl(&["-l", &self.log_path_text(), "-w", "-t", "60", "start"]);
            if output.status.success() {
                self.running = true;
                return;
            }
            let new_log = self.log().get(log_before..).unwrap_or_default().to_string();
            let port_taken = new_log.contains("could not bind") || new_log.contains("Address already in use");
            if !(port_taken && attempt < PORT_ATTEMPTS) {
                panic!(
                    "pg_ctl start failed on port {} ({}):\n{}{}\nserver log:\n{}",
                    self.port,
                    output.status,
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr),
                    self.log()
                );
            }
        }
    }

    /// Starts the server again after [`stop_immediate`](Self::stop_immediate), on the
    /// same port and data directory.
    pub fn start(&mut self) {
        let log = self.log_path_text();
        self.pg_ctl_checked(&["-l", &log, "-w", "-t", "60", "start"]);
        self.running = true;
    }

    /// Kills the server without a shutdown checkpoint (`pg_ctl stop -m immediate`):
    /// the next start runs crash recovery, as after a power loss.
    pub fn stop_immediate(&mut self) {
        self.pg_ctl_checked(&["-m", "immediate", "-w", "stop"]);
        self.running = false;
    }

    /// A clean restart (`pg_ctl restart -m fast`): sessions are disconnected,
    /// replication slots and data survive.
    pub fn restart(&mut self) {
        let log = self.log_path_text();
        self.pg_ctl_checked(&["-m", "fast", "-l", &log, "-w", "-t", "60", "restart"]);
        self.running = true;
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Where to connect as `user` (no password) to `database`.
    pub fn config(&self, database: &str, user: &str) -> ConnectConfig {
        ConnectConfig {
            host: "127.0.0.1".to_string(),
            port: self.port,
            user: user.to_string(),
            password: None,
            database: database.to_string(),
            application_name: "retina-postgres-tests".to_string(),
            connect_timeout: Duration::from_secs(10),
            tls: Default::default(),
        }
    }

    /// `postgres://postgres@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// A session as the superuser `postgres`, panicking on failure.
    pub fn connect(&self, database: &str) -> PgConnection {
        PgConnection::connect(&self.config(database, "postgres"), false)
            .unwrap_or_else(|error| panic!("cannot connect to the test cluster: {error}\nserver log:\n{}", self.log()))
    }

    /// A replication (walsender, `replication=database`) session as `postgres`.
    pub fn connect_replication(&self, database: &str) -> PgConnection {
        PgConnection::connect(&self.config(database, "postgres"), true).unwrap_or_else(|error| {
            panic!("cannot open a replication connection to the test cluster: {error}\nserver log:\n{}", self.log())
        })
    }

    /// Runs `sql` in database `postgres` through our own client (not the `psql`
    /// binary) and returns the last result like `psql -At`: values joined by `|`, rows
    /// by newlines, NULL as the empty string. Panics with the server error.
    pub fn psql(&self, sql: &str) -> String {
        self.psql_in("postgres", sql)
    }

    /// [`psql`](Self::psql) in another database.
    pub fn psql_in(&self, database: &str, sql: &str) -> String {
        let mut connection = self.connect(database);
        let results = connection
            .simple_query(sql)
            .unwrap_or_else(|error| panic!("SQL failed in database {database}: {error}\nSQL: {sql}"));
        results.last().map(render_like_psql).unwrap_or_default()
    }

    pub fn create_database(&self, name: &str) {
        self.psql(&format!("CREATE DATABASE \"{name}\""));
    }

    /// Creates a login role with `password` (and the REPLICATION attribute) that must
    /// authenticate with `method` over TCP, for plain and replication sessions.
    pub fn create_password_user(&self, name: &str, password: &str, method: PasswordMethod) {
        self.psql(&format!(
            "SET password_encryption = '{}'; CREATE ROLE \"{name}\" LOGIN REPLICATION PASSWORD '{}'",
            method.password_encryption(),
            password.replace('\'', "''")
        ));
        let hba_method = method.hba_method();
        self.add_hba_lines(&[
            &format!("host all {name} 127.0.0.1/32 {hba_method}"),
            &format!("host replication {name} 127.0.0.1/32 {hba_method}"),
        ]);
    }

    /// Adds `pg_hba.conf` lines before the trust rules and reloads the server
    /// configuration; returns once the server has taken the new rules.
    pub fn add_hba_lines(&self, lines: &[&str]) {
        self.hba_lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .extend(lines.iter().map(|line| line.to_string()));
        self.write_hba();
        self.reload();
    }

    /// `pg_ctl reload`, waiting until the postmaster logged that it reloaded. A
    /// reload is a signal: without the wait, the next connection could still be
    /// authenticated by the old rules.
    pub fn reload(&self) {
        const MARKER: &str = "received SIGHUP, reloading configuration files";
        let reloads_before = self.log().matches(MARKER).count();
        self.pg_ctl_checked(&["reload"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.log().matches(MARKER).count() <= reloads_before {
            assert!(Instant::now() < deadline, "the server did not reload its configuration within 30 s:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(10));
        }
        // The postmaster logs the line just before it re-reads pg_hba.conf.
        std::thread::sleep(Duration::from_millis(100));
    }

    /// The server log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read(&self.log_path).map(|bytes| String::from_utf8_lossy(&bytes).into_owned()).unwrap_or_default()
    }

    /// The directory holding the data directory, the log and the Unix socket.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn binaries(&self) -> &ServerBinaries {
        &self.binaries
    }

    fn write_hba(&self) {
        let lines = self.hba_lines.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut hba = String::from("# written by the retina-postgres test harness\n");
        for line in lines.iter().map(String::as_str).chain(TRUST_HBA_LINES.iter().copied()) {
            match line.strip_prefix("host ") {
                Some(rest) if self.hostssl_only => {
                    let _ = writeln!(hba, "hostssl {rest}");
                }
                _ => {
                    let _ = writeln!(hba, "{line}");
                }
            }
        }
        let path = self.data_dir.join("pg_hba.conf");
        std::fs::write(&path, hba).unwrap_or_else(|error| panic!("cannot write {}: {error}", path.display()));
    }

    fn log_path_text(&self) -> String {
        self.log_path.to_string_lossy().into_owned()
    }

    fn run_pg_ctl(&self, args: &[&str]) -> std::process::Output {
        let data = self.data_dir.to_string_lossy().into_owned();
        let mut full = vec!["-D", data.as_str()];
        full.extend_from_slice(args);
        self.runner.run(&self.binaries.pg_ctl, &full)
    }

    fn pg_ctl_checked(&self, args: &[&str]) {
        let output = self.run_pg_ctl(args);
        if !output.status.success() {
            panic!(
                "pg_ctl {} failed ({}):\n{}{}\nserver log:\n{}",
                args.join(" "),
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                self.log()
            );
        }
    }
}

impl Drop for PgCluster {
    /// Stops the server (immediately: the data is thrown away anyway) before the
    /// temporary directory is deleted. Errors are ignored: a test that already failed
    /// should report its own failure, not this.
    fn drop(&mut self) {
        if self.running {
            let _ = self.run_pg_ctl(&["-m", "immediate", "-w", "stop"]);
        }
    }
}

/// A port nobody listens on right now (the OS picks it; we release it for the server).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|error| panic!("cannot bind 127.0.0.1:0: {error}"));
    listener.local_addr().unwrap_or_else(|error| panic!("cannot read the bound address: {error}")).port()
}

fn append(path: &std::path::Path, text: &str) {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap_or_else(|error| panic!("cannot open {} to append: {error}", path.display()));
    file.write_all(text.as_bytes()).unwrap_or_else(|error| panic!("cannot append to {}: {error}", path.display()));
}

/// Values joined by `|`, rows by newlines, NULL as empty (like `psql -At`).
pub fn render_like_psql(result: &QueryResult) -> String {
    result
        .rows
        .iter()
        .map(|row| row.iter().map(|value| value.as_deref().unwrap_or("")).collect::<Vec<_>>().join("|"))
        .collect::<Vec<_>>()
        .join("\n")
}
