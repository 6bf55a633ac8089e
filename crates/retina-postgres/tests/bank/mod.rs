//! A bank on the source: accounts and a history of transfers between them, written by
//! concurrent clients, and the checks a mirror of it must pass. Shared by the
//! replication tests here and the process-kill test (`pg_kill.rs`).
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use retina_core::rows::rows_of;
use retina_core::{Engine, Value};
use retina_postgres::wire::PgConnection;

use super::mirror::{cents, eventually, mirrored_rows};
use super::support::PgCluster;

pub const ACCOUNTS: i64 = 20;
/// Initial balance per account, in cents.
pub const INITIAL_CENTS: i128 = 100_000;

pub fn create_bank(cluster: &PgCluster) {
    cluster.psql(&format!(
        "CREATE TABLE accounts (id int PRIMARY KEY, balance numeric(14, 2) NOT NULL);
         CREATE TABLE history (id bigserial PRIMARY KEY, src int NOT NULL, dst int NOT NULL, amount numeric(14, 2) NOT NULL);
         INSERT INTO accounts SELECT g, {} FROM generate_series(1, {ACCOUNTS}) g",
        cents(INITIAL_CENTS)
    ));
}

/// Clients running transfers until stopped; each transfer is one source transaction
/// over both tables. Errors (deadlocks, a server that went away) are retried.
pub struct Load {
    stop: Arc<AtomicBool>,
    committed: Arc<AtomicU64>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(cluster: &PgCluster, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let committed = Arc::new(AtomicU64::new(0));
        let config = cluster.config("postgres", "postgres");
        let clients = (0..clients)
            .map(|client| {
                let (stop, committed, config) = (Arc::clone(&stop), Arc::clone(&committed), config.clone());
                std::thread::spawn(move || {
                    let mut rng = rand::rngs::SmallRng::seed_from_u64(client as u64);
                    let mut connection: Option<PgConnection> = None;
                    while !stop.load(Ordering::Relaxed) {
                        let session = match &mut connection {
                            Some(session) => session,
                            None => match PgConnection::connect(&config, false) {
                                Ok(session) => connection.insert(session),
                                Err(_) => {
                                    std::thread::sleep(Duration::from_millis(50));
                                    continue;
                                }
                            },
                        };
                        let src = rng.random_range(1..=ACCOUNTS);
                        let dst = (src % ACCOUNTS) + 1;
                        let amount = cents(rng.random_range(1..5_000));
                        let sql = format!(
                            "BEGIN; UPDATE accounts SET balance = balance - {amount} WHERE id = {src}; \
                             UPDATE accounts SET balance = balance + {amount} WHERE id = {dst}; \
                             INSERT INTO history (src, dst, amount) VALUES ({src}, {dst}, {amount}); COMMIT"
                        );
                        match session.simple_query(&sql) {
                            Ok(_) => {
                                committed.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(error) if error.code().is_some() && !error.is_fatal() => {
                                let _ = session.simple_query("ROLLBACK");
                            }
                            Err(_) => connection = None,
                        }
                    }
                })
            })
            .collect();
        Load { stop, committed, clients }
    }

    pub fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for client in self.clients {
            client.join().expect("client thread");
        }
        self.committed.load(Ordering::Relaxed)
    }
}

fn decimal(value: &Value) -> i128 {
    match value {
        Value::Decimal128(v) => *v,
        other => panic!("expected a decimal, got {other:?}"),
    }
}

fn int(value: &Value) -> i64 {
    match value {
        Value::Int32(v) => i64::from(*v),
        Value::Int64(v) => *v,
        other => panic!("expected an integer, got {other:?}"),
    }
}

/// Checks the invariants on one snapshot of the mirror: the money is all there, and
/// every account's balance is its initial balance plus what the history says. A
/// transfer seen in part breaks both.
pub fn check_invariants(engine: &Engine) -> Result<usize, String> {
    let (Some(accounts), Some(history)) = (engine.table_id("public.accounts"), engine.table_id("public.history")) else {
        return Ok(0);
    };
    let snapshot = engine.snapshot().map_err(|e| e.to_string())?;
    let balances = rows_of(&engine.scan(accounts, &snapshot, Some(&[0, 1])).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    let transfers = rows_of(&engine.scan(history, &snapshot, Some(&[1, 2, 3])).map_err(|e| e.to_string())?).map_err(|e| e.to_string())?;
    if balances.is_empty() {
        return Ok(0);
    }
    if balances.len() != ACCOUNTS as usize {
        return Err(format!("{} accounts at ts {}", balances.len(), snapshot.ts().0));
    }
    let total: i128 = balances.iter().map(|row| decimal(&row[1])).sum();
    if total != INITIAL_CENTS * ACCOUNTS as i128 {
        return Err(format!("total {total} at ts {}", snapshot.ts().0));
    }
    let mut expected: HashMap<i64, i128> = (1..=ACCOUNTS).map(|id| (id, INITIAL_CENTS)).collect();
    for transfer in &transfers {
        let amount = decimal(&transfer[2]);
        *expected.entry(int(&transfer[0])).or_default() -= amount;
        *expected.entry(int(&transfer[1])).or_default() += amount;
    }
    for row in &balances {
        let id = int(&row[0]);
        if expected.get(&id) != Some(&decimal(&row[1])) {
            return Err(format!("account {id}: balance {} but history says {:?} at ts {}", decimal(&row[1]), expected.get(&id), snapshot.ts().0));
        }
    }
    Ok(transfers.len())
}

/// Waits until the mirror equals the source row for row.
pub fn assert_converges(cluster: &PgCluster, engine: &Engine) {
    let source = |sql: &str| -> Vec<String> {
        let mut rows: Vec<String> = cluster.psql(sql).lines().map(String::from).collect();
        rows.sort();
        rows
    };
    let accounts = source("SELECT id, balance FROM accounts");
    let history = source("SELECT id, src, dst, amount FROM history");
    eventually(Duration::from_secs(60), "the mirror catches up with the source", || {
        let mirrored_accounts = mirrored_rows(engine, "public.accounts");
        let mirrored_history = mirrored_rows(engine, "public.history");
        if mirrored_accounts == accounts && mirrored_history == history {
            Ok(())
        } else {
            Err(format!(
                "accounts equal: {}, history rows {} of {}",
                mirrored_accounts == accounts,
                mirrored_history.len(),
                history.len()
            ))
        }
    });
}

