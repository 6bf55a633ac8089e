//! The user's real streaming stack, end to end: PostgreSQL → Debezium 3.6.1 on Kafka
//! Connect 4.3 (pgoutput, JsonConverter with schemas, transaction metadata) → Apache
//! Kafka 4.4 → `retina serve --source kafka://…`, every service started by the test.
//!
//! The two ways this path stopped for good on a real deployment:
//! - Retina started before Debezium's transaction topic existed (Debezium creates it at
//!   the first transaction after its snapshot): the first streamed change stopped the
//!   source ("no transaction topic to say where that transaction ends");
//! - after a SIGKILL of the Connect worker, Debezium sends again what it had not
//!   flushed, events without their BEGIN among them: "change event (total_order 1)
//!   outside its BEGIN/END".
//!
//! Here Retina starts first, the worker is killed mid-load and restarted, and the
//! mirror must equal PostgreSQL row by row, with a cross-table invariant holding in
//! every snapshot read meanwhile.

use std::process::Command;
use std::time::{Duration, Instant};

use retina_test_support::{KafkaConnect, LocalKafkaBroker};

mod support;
#[path = "../../retina-postgres/tests/support/mod.rs"]
mod pg_support;

use pg_support::PgCluster;
use support::spawn_serve;

const ACCOUNTS: i64 = 20;
const OPENING_BALANCE: i64 = 1_000;

/// Rows of `sql` through psql against Retina's SQL endpoint (`None` on an error,
/// e.g. a table not mirrored yet).
fn retina_rows(address: &str, sql: &str) -> Option<Vec<String>> {
    let (host, port) = address.rsplit_once(':').expect("host:port");
    let output = Command::new("psql")
        .args(["-X", "-w", "-A", "-t", "-F", ",", "-h", host, "-p", port, "-U", "retina", "-d", "retina", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("psql (Debian package postgresql-client)");
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).lines().map(str::to_string).collect())
}

/// `count` transactions, each moving money out of an account into a transfer row:
/// the sum of balances and transferred amounts stays constant across both tables.
fn transfers(first: i64, count: i64) -> String {
    let mut script = String::new();
    for n in first..first + count {
        let (account, amount) = (n % ACCOUNTS + 1, n % 7 + 1);
        script.push_str(&format!(
            "BEGIN; UPDATE accounts SET balance = balance - {amount} WHERE id = {account}; \
             INSERT INTO transfers (id, account, amount) VALUES ({n}, {account}, {amount}); COMMIT;\n"
        ));
    }
    script
}

fn sorted_lines(text: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
    lines.sort();
    lines
}

#[test]
fn postgres_through_debezium_on_kafka_connect_is_mirrored_exactly_across_a_worker_crash() {
    let pg = PgCluster::new();
    pg.psql(&format!(
        "CREATE TABLE accounts (id int PRIMARY KEY, balance bigint NOT NULL); \
         CREATE TABLE transfers (id bigint PRIMARY KEY, account int NOT NULL, amount bigint NOT NULL); \
         INSERT INTO accounts SELECT g, {OPENING_BALANCE} FROM generate_series(1, {ACCOUNTS}) g;"
    ));
    let broker = LocalKafkaBroker::start().expect("Apache Kafka");
    let lake = tempfile::tempdir().expect("tempdir");
    // Retina first: Debezium's transaction topic does not exist yet.
    let source = format!("kafka://{}/dbz", broker.bootstrap());
    let retina = KilledOnDrop(spawn_serve(lake.path(), &["--source", &source, "--checkpoint-seconds", "0.5"]));
    let retina = &retina.0;

    // Offsets flushed once a minute: a crash makes Debezium send again everything
    // since the snapshot, mid-transaction positions included.
    let connect = KafkaConnect::start(&broker.bootstrap(), 60_000).expect("Kafka Connect with Debezium");
    let connector = serde_json::json!({
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "plugin.name": "pgoutput",
        "database.hostname": "127.0.0.1",
        "database.port": pg.port().to_string(),
        "database.user": "postgres",
        "database.password": "unused-trust",
        "database.dbname": "postgres",
        "topic.prefix": "dbz",
        "table.include.list": "public.accounts,public.transfers",
        "slot.name": "dbz_slot",
        "publication.autocreate.mode": "filtered",
        "provide.transaction.metadata": "true",
        "snapshot.mode": "initial",
        "tasks.max": "1",
    });
    connect.put_connector("dbz-postgres", &connector).expect("register the connector");
    connect.wait_running("dbz-postgres", Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}\n{}", connect.log()));

    let total = ACCOUNTS * OPENING_BALANCE;
    let invariant = "SELECT (SELECT coalesce(sum(balance), 0) FROM public.accounts) + (SELECT coalesce(sum(amount), 0) FROM public.transfers), \
                     (SELECT count(*) FROM public.accounts)";
    let mut snapshots_checked = 0;
    let check_invariant = |snapshots: &mut i32| {
        if let Some(rows) = retina_rows(&retina.sql, invariant) {
            let (sum, accounts) = rows[0].split_once(',').expect("two columns");
            if accounts == ACCOUNTS.to_string() {
                assert_eq!(sum, total.to_string(), "a snapshot broke the cross-table invariant");
                *snapshots += 1;
            }
        }
    };

    pg.psql(&transfers(1, 200));
    check_invariant(&mut snapshots_checked);
    // The worker dies in the middle of the next load, with a minute of offsets unflushed.
    let load = {
        let script = transfers(201, 400);
        let url = pg.url("postgres");
        std::thread::spawn(move || {
            let output = Command::new("psql").args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &url, "-c", &script]).output().expect("psql");
            assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        })
    };
    // The kill lands once part of the load has committed (or, on a fast machine, right
    // after all of it: the unflushed minute of offsets is resent either way).
    let deadline = Instant::now() + Duration::from_secs(30);
    while pg.psql("SELECT count(*) FROM transfers").trim().parse::<i64>().unwrap_or(0) <= 250 && !load.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    check_invariant(&mut snapshots_checked);
    connect.kill();
    load.join().expect("the load");
    connect.restart().expect("Connect restarts");
    connect.wait_running("dbz-postgres", Duration::from_secs(120)).unwrap_or_else(|e| panic!("{e}\n{}", connect.log()));
    pg.psql(&transfers(601, 200));

    // Caught up: equal to PostgreSQL row by row, in both tables.
    let expected_accounts = sorted_lines(&pg.psql("SELECT id || ',' || balance FROM accounts"));
    let expected_transfers = sorted_lines(&pg.psql("SELECT id || ',' || account || ',' || amount FROM transfers"));
    assert_eq!(expected_transfers.len(), 800);
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        check_invariant(&mut snapshots_checked);
        let accounts = retina_rows(&retina.sql, "SELECT id, balance FROM public.accounts").map(|rows| sorted_lines(&rows.join("\n")));
        let transfers = retina_rows(&retina.sql, "SELECT id, account, amount FROM public.transfers").map(|rows| sorted_lines(&rows.join("\n")));
        if accounts.as_ref() == Some(&expected_accounts) && transfers.as_ref() == Some(&expected_transfers) {
            break;
        }
        if Instant::now() > deadline {
            let sources = retina_rows(&retina.sql, "SELECT * FROM retina.sources").unwrap_or_default();
            panic!(
                "the mirror did not catch up: {} of 800 transfers; retina.sources: {sources:?}",
                transfers.map_or(0, |t| t.len())
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // The caught-up state is a snapshot of both tables too (on a loaded machine the
    // checks during the replay may all come before the accounts are mirrored).
    check_invariant(&mut snapshots_checked);
    assert!(
        snapshots_checked >= 1,
        "the invariant was never checked ({snapshots_checked} snapshots); the query answers {:?}",
        retina_rows(&retina.sql, invariant)
    );
    let sources = retina_rows(&retina.sql, "SELECT last_error FROM retina.sources").expect("retina.sources");
    assert!(sources.iter().all(|error| error.is_empty()), "no source error: {sources:?}");
}

/// `retina serve`, killed when the test ends, also when it fails.
struct KilledOnDrop(support::Spawned);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.child.kill();
        let _ = self.0.child.wait();
    }
}
