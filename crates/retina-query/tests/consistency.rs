//! Cross-table consistency: while transfers between rows of two tables replay, every
//! query that sums both tables sees the total unchanged (one snapshot per query,
//! shared by both scans).

mod support;

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use arrow_schema::DataType;
use retina_core::{RowChange, TableSchema, Value};
use support::*;

const ACCOUNTS: i64 = 200;
const START_BALANCE: i64 = 1000;

fn account_table(name: &str) -> TableSchema {
    TableSchema::from_columns(name, &[("id", DataType::Int64, false), ("balance", DataType::Int64, false)], &["id"])
        .expect("schema")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sums_over_two_tables_never_see_half_a_transfer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine = off(|| small_engine(dir.path()));
    let (a, b) = off(|| {
        let a = engine.create_table(account_table("bank.checking")).expect("table");
        (a, engine.create_table(account_table("bank.savings")).expect("table"))
    });
    let open = |table, id| RowChange::Insert { table, row: vec![Value::Int64(id), Value::Int64(START_BALANCE)] };
    engine.submit((0..ACCOUNTS).flat_map(|id| [open(a, id), open(b, id)]).collect()).expect("open accounts");
    engine.sync().expect("sync");

    let stop = Arc::new(AtomicBool::new(false));
    let transfers = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut checking = vec![START_BALANCE; ACCOUNTS as usize];
            let mut savings = vec![START_BALANCE; ACCOUNTS as usize];
            let mut count = 0u64;
            while !stop.load(SeqCst) {
                let from = (count * 7919 % ACCOUNTS as u64) as usize;
                let to = (count * 104_729 % ACCOUNTS as u64) as usize;
                let amount = (count % 50) as i64 + 1;
                checking[from] -= amount;
                savings[to] += amount;
                let set = |table, id: usize, balance| RowChange::Update {
                    table,
                    key: vec![Value::Int64(id as i64)],
                    row: vec![Value::Int64(id as i64), Value::Int64(balance)],
                };
                engine.submit(vec![set(a, from, checking[from]), set(b, to, savings[to])]).expect("transfer");
                count += 1;
                if count % 16 == 0 {
                    engine.flush_batch().expect("flush");
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            count
        })
    };

    let session = session(&engine);
    let expected = format!("| {} ", 2 * ACCOUNTS * START_BALANCE);
    let queries = [
        "SELECT (SELECT sum(balance) FROM bank.checking) + (SELECT sum(balance) FROM bank.savings) AS total",
        "SELECT sum(c.balance + s.balance) AS total FROM bank.checking c JOIN bank.savings s ON c.id = s.id",
    ];
    let mut snapshots = std::collections::BTreeSet::new();
    for round in 0..60 {
        let sql = queries[round % queries.len()];
        let mut stream = session.sql(sql).await.expect("query");
        snapshots.insert(stream.snapshot_ts());
        let mut batches = Vec::new();
        while let Some(batch) = futures::StreamExt::next(&mut stream).await {
            batches.push(batch.expect("batch"));
        }
        let text = pretty(&batches);
        assert!(text.contains(&expected), "round {round}: total changed:\n{text}");
    }
    stop.store(true, SeqCst);
    let transfers_done = transfers.join().expect("transfer thread");
    assert!(transfers_done > 100, "only {transfers_done} transfers ran");
    assert!(snapshots.len() > 10, "queries saw only {} distinct snapshots", snapshots.len());
    assert!(released_soon(&engine).await, "no query snapshot stays registered");
}
