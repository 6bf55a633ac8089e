//! The PostgreSQL endpoint driven by the client stacks BI tools connect through:
//! SQLAlchemy over psycopg 3 (Python; what pandas and Superset use) and pgjdbc
//! (Java). Each runs what it sends on connect (server version, `current_schema()`,
//! `show standard_conforming_strings`, type look-ups, `SET`s), queries rows with a
//! bound parameter and lists tables through its introspection API.
//!
//! The clients are real: SQLAlchemy and psycopg from PyPI in the venv that
//! `scripts/test.sh` makes (`$CARGO_TARGET_DIR/py-clients`, default
//! `target/py-clients`; `RETINA_TEST_PYTHON` names another interpreter), pgjdbc from
//! Debian's `libpostgresql-jdbc-java` (`/usr/share/java/postgresql.jar`) run by the
//! JDK's `java`. A missing client fails its test, saying what to install.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use arrow_schema::DataType;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_query::{RetinaSession, SessionOptions, SourceRegistry};
use retina_server::PgServer;
use retina_storage::ParquetLakeStore;

const JDBC_JAR: &str = "/usr/share/java/postgresql.jar";

/// A served engine with `shop.items` (ids 1..=20). Field order is drop order.
struct Fixture {
    sql: Option<PgServer>,
    runtime: Option<tokio::runtime::Runtime>,
    _engine: Arc<Engine>,
    _dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = EngineConfig { shards: 2, gc_interval: None, ..EngineConfig::default() };
        let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
        let engine = Arc::new(Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(store)).expect("engine"));
        let schema = TableSchema::from_columns(
            "shop.items",
            &[("id", DataType::Int64, false), ("name", DataType::Utf8, true), ("qty", DataType::Int32, false)],
            &["id"],
        )
        .expect("schema");
        let table = engine.create_table(schema).expect("table");
        let rows = (1..=20)
            .map(|id: i64| RowChange::Insert {
                table,
                row: vec![Value::Int64(id), Value::Utf8(format!("item {id}").into()), Value::Int32((id * 10) as i32)],
            })
            .collect();
        engine.submit(rows).expect("load");
        engine.sync().expect("sync");
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        let session = Arc::new(RetinaSession::new(Arc::clone(&engine), SourceRegistry::new(), SessionOptions::default()));
        let sql = runtime.block_on(PgServer::start("127.0.0.1:0", session)).expect("sql server");
        Self { sql: Some(sql), runtime: Some(runtime), _engine: engine, _dir: dir }
    }

    fn addr(&self) -> SocketAddr {
        self.sql.as_ref().expect("server").local_addr()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let runtime = self.runtime.take().expect("runtime");
        if let Some(sql) = self.sql.take() {
            runtime.block_on(sql.shutdown());
        }
        runtime.shutdown_timeout(Duration::from_secs(2));
    }
}

fn probe_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients").join(name)
}

/// The Python with SQLAlchemy and psycopg: `RETINA_TEST_PYTHON`, else the venv
/// `scripts/test.sh` makes in the target dir (this test runs from `<target>/debug/deps`).
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("RETINA_TEST_PYTHON") {
        return PathBuf::from(python);
    }
    let exe = std::env::current_exe().expect("test executable path");
    let target = exe.ancestors().nth(3).expect("the test runs from <target>/<profile>/deps");
    target.join("py-clients/bin/python")
}

fn run(command: &mut Command, what: &str, install: &str) -> Output {
    match command.output() {
        Ok(output) => output,
        Err(error) => panic!("cannot run {what} ({error}): {install}"),
    }
}

/// Runs a probe and returns its stdout; a failed probe fails the test with its output.
fn probe(command: &mut Command, what: &str, install: &str) -> String {
    let output = run(command, what, install);
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what} failed ({}):\n{stdout}\n{stderr}", output.status);
    stdout
}

const PYTHON_INSTALL: &str = "run scripts/test.sh, which makes the venv, or: python3 -m venv target/py-clients && \
     target/py-clients/bin/pip install sqlalchemy 'psycopg[binary]'";

#[test]
fn sqlalchemy_over_psycopg_connects_queries_and_reflects_tables() {
    let python = python();
    let check = run(Command::new(&python).args(["-c", "import sqlalchemy, psycopg"]), &python.display().to_string(), PYTHON_INSTALL);
    assert!(
        check.status.success(),
        "{} has no SQLAlchemy or psycopg ({}): {PYTHON_INSTALL}",
        python.display(),
        String::from_utf8_lossy(&check.stderr).trim()
    );
    let fx = Fixture::new();
    let port = fx.addr().port().to_string();
    let stdout = probe(
        Command::new(&python).arg(probe_file("sqlalchemy_probe.py")).args(["127.0.0.1", &port]),
        "the SQLAlchemy probe",
        PYTHON_INSTALL,
    );
    let results: serde_json::Value = serde_json::from_str(stdout.trim()).expect("the probe prints one JSON object");
    assert_eq!(results["select_1"], 1);
    // Parsed by SQLAlchemy from `select pg_catalog.version()`.
    assert_eq!(results["server_version_info"], serde_json::json!([16, 6]));
    assert_eq!(results["default_schema_name"], "public");
    assert_eq!(results["rows"], serde_json::json!([[1, "item 1", 10], [2, "item 2", 20], [3, "item 3", 30]]));
    assert_eq!(results["tables"], serde_json::json!(["items"]));
    // Reflection: before, schema names failed on `LIKE ... ESCAPE '/'`, columns on
    // `pg_get_serial_sequence`, and the primary key on `unnest` of a text `indkey`.
    assert_eq!(results["schema_names"], serde_json::json!(["public", "retina", "shop"]));
    assert_eq!(results["columns"], serde_json::json!([["id", "BIGINT", false], ["name", "TEXT", true], ["qty", "INTEGER", false]]));
    assert_eq!(results["pk_constraint"], serde_json::json!({"constrained_columns": ["id"], "name": "items_pkey", "comment": null, "dialect_options": {"postgresql_include": []}}));
    assert_eq!(results["indexes"], serde_json::json!([]));
    assert_eq!(results["unique_constraints"], serde_json::json!([]));
    assert_eq!(results["foreign_keys"], serde_json::json!([]));
    assert_eq!(results["autoload"], serde_json::json!({"columns": ["id", "name", "qty"], "primary_key": ["id"], "row": [2, "item 2", 20]}));
    // Before, DECLARE was refused.
    assert_eq!(results["stream_results"], serde_json::json!((1..=20).collect::<Vec<_>>()));
    assert_eq!(
        results["named_cursor"],
        serde_json::json!({"sizes": [4, 4, 7], "first": [1, "item 1"], "last": [15, "item 15"], "binary": [[30]]})
    );
}

/// Parameters of every common Python type through psycopg 3, in its default mix of
/// text and binary formats and with `%b` (all binary). Before, a float bound into
/// `%s * 2` was cast to the integer DataFusion inferred (the answer was 2), and a
/// date, timestamp, UUID or bytes parameter was refused for its binary format.
#[test]
fn psycopg_binds_parameters_by_their_declared_types_in_text_and_binary() {
    let python = python();
    let fx = Fixture::new();
    let port = fx.addr().port().to_string();
    let stdout = probe(
        Command::new(&python).arg(probe_file("psycopg_params_probe.py")).args(["127.0.0.1", &port]),
        "the psycopg parameter probe",
        PYTHON_INSTALL,
    );
    let results: serde_json::Value = serde_json::from_str(stdout.trim()).expect("the probe prints one JSON object");
    let expected = [
        ("float_times_two", "[(3.0,)]"),
        ("float_bound_on_int_column", "[(1,)]"),
        ("decimal", "[(Decimal('12.3400000000'),)]"),
        ("int", "[(42,)]"),
        ("text", "[('plain',)]"),
        ("date", "[(datetime.date(2024, 3, 1),)]"),
        ("timestamp", "[(datetime.datetime(2024, 3, 1, 10, 15, 30, 123456),)]"),
        ("timestamptz", "[(datetime.datetime(2024, 3, 1, 9, 15, 30, tzinfo=zoneinfo.ZoneInfo(key='Etc/UTC')),)]"),
        ("uuid", "[('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',)]"),
        ("bytes", "[(b'\\x01\\xff',)]"),
        ("binary_int_on_key", "[(3, 'item 3')]"),
        ("binary_float", "[(2.5,)]"),
        ("binary_decimal", "[(Decimal('-1234.5000000000'),)]"),
        ("bigint_on_int_column", "[(0,)]"),
        ("limit", "[(2,), (3,)]"),
        ("copy_text", "b'1\\titem 1\\n2\\titem 2\\n'"),
        ("copy_binary", "[(1, 'item 1', 10), (2, 'item 2', 20)]"),
        // Before, the rollback's DEALLOCATE ALL was refused.
        ("prepared_then_rolled_back", "[1, 2, 3, 4, 5, 6, 7, 19]"),
    ];
    for (step, want) in expected {
        assert_eq!(results[step], want, "{step}: {}", results[step]);
    }
    let too_precise = results["decimal_too_precise"].as_str().unwrap_or_default();
    assert!(too_precise.starts_with("22003: parameter $1: 0.12345678901 has 11 digits after the point"), "{too_precise}");
}

#[test]
fn pgjdbc_connects_binds_parameters_and_reads_table_metadata() {
    let install = "install the Debian packages libpostgresql-jdbc-java and a JDK (scripts/test.sh installs the first)";
    assert!(Path::new(JDBC_JAR).exists(), "{JDBC_JAR} is missing: {install}");
    let fx = Fixture::new();
    let port = fx.addr().port().to_string();
    let stdout = probe(
        Command::new("java").args(["-cp", JDBC_JAR]).arg(probe_file("JdbcProbe.java")).args(["127.0.0.1", &port]),
        "the JDBC probe (java)",
        install,
    );
    let value = |name: &str| {
        let prefix = format!("{name}=");
        stdout.lines().find_map(|line| line.strip_prefix(&prefix)).unwrap_or_else(|| panic!("no {name} in:\n{stdout}")).to_string()
    };
    let version = value("version");
    assert!(version.starts_with("PostgreSQL 16.6 on x86_64-pc-linux-gnu"), "{version}");
    assert!(version.contains(&format!("Retina {}", env!("CARGO_PKG_VERSION"))), "{version}");
    assert_eq!(value("database_product"), "PostgreSQL 16.6");
    // The same rows on every run, also once pgjdbc uses a named server-side statement.
    assert_eq!(value("prepared"), "1:item 1:10,2:item 2:20");
    assert_eq!(value("text_parameter"), "1");
    // The same answer before and after pgjdbc's switch to binary parameters.
    assert_eq!(value("typed_parameters"), "2.5:-12.34:2,255:a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11:2");
    assert_eq!(value("tables"), "shop.items");
    // Before, setDate's "2024-01-01 +00" was refused, and setTimestamp in a New York
    // JVM read 17:00 (its offset applied, where PostgreSQL drops it).
    assert_eq!(value("dates"), "2024-01-01|2024-01-01 12:00:00.0");
    // Before, getPrimaryKeys failed on `information_schema._pg_expandarray`.
    assert_eq!(value("primary_keys"), "id:1:items_pkey");
    // Before, it failed: no max_index_keys in pg_settings.
    assert_eq!(value("imported_keys"), "0", "no foreign keys");
    assert_eq!(value("columns"), "id:int8:0,name:text:1,qty:int4:0");
    assert_eq!(value("current_schema"), "20", "currentSchema resolves unqualified names");
}
