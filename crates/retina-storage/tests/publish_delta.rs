//! Every checkpoint published as Delta Lake and Iceberg v3 tables, read back by
//! independent readers (DuckDB's delta and iceberg extensions, delta-rs, pyiceberg,
//! Polars; installed by `scripts/test.sh`): each
//! sees exactly the rows Retina's own snapshot at the checkpoint shows, never
//! `_create_ts`, across flushed files, checkpoint segments, updates, deletes, rows
//! created after the checkpoint, a restart, and a state file lost in a crash.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use arrow_schema::{DataType, TimeUnit};
use retina_core::rows::rows_of;
use retina_core::{Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_storage::{ParquetLakeStore, PublishOptions, PublishedCut};

/// Long enough that every version a test reads back is retained.
const RETENTION: std::time::Duration = std::time::Duration::from_secs(3600);

fn config() -> EngineConfig {
    EngineConfig {
        shards: 2,
        block_rows: 16,
        file_rows: 64,
        batch_changes: 32,
        gc_interval: None,
        checkpoint_interval: None,
        storage_gc_interval: None,
        ..EngineConfig::default()
    }
}

fn open(dir: &Path) -> (Engine, Arc<ParquetLakeStore>) {
    let store = Arc::new(ParquetLakeStore::open(dir.to_str().expect("utf-8 path")).expect("store").publishing(Some(PublishOptions::every_checkpoint(RETENTION))));
    let engine = Engine::open(config(), Arc::clone(&store) as _).expect("open");
    (engine, store)
}

fn accounts_schema() -> TableSchema {
    TableSchema::from_columns(
        "bank.accounts",
        &[
            ("id", DataType::Int64, false),
            ("owner", DataType::Utf8, true),
            ("balance", DataType::Decimal128(12, 2), false),
            ("opened", DataType::Date32, true),
        ],
        &["id"],
    )
    .expect("schema")
}

fn transfers_schema() -> TableSchema {
    TableSchema::from_columns(
        "bank.transfers",
        &[
            ("id", DataType::Int64, false),
            ("amount", DataType::Int32, false),
            ("at", DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())), true),
        ],
        &["id"],
    )
    .expect("schema")
}

fn account(table: TableId, id: i64, cents: i128) -> Vec<Value> {
    let owner = if id % 7 == 0 { Value::Null } else { Value::Utf8(format!("owner {id}").into()) };
    let _ = table;
    vec![Value::Int64(id), owner, Value::Decimal128(cents), Value::Date32(19_000 + id as i32)]
}

fn transfer(id: i64) -> Vec<Value> {
    vec![Value::Int64(id), Value::Int32(id as i32 * 3), Value::TimestampMicros(1_700_000_000_000_000 + id * 1_000_001)]
}

/// A value as Python's `str()` prints what the readers return.
fn text(value: &Value, data_type: &DataType) -> String {
    match (value, data_type) {
        (Value::Null, _) => String::new(),
        (Value::Int64(v), _) => v.to_string(),
        (Value::Int32(v), _) => v.to_string(),
        (Value::Utf8(v), _) => v.to_string(),
        (Value::Decimal128(v), DataType::Decimal128(_, scale)) => {
            let scale = *scale as u32;
            let (whole, fraction) = (v / 10i128.pow(scale), (v % 10i128.pow(scale)).abs());
            format!("{}{whole}.{fraction:0width$}", if *v < 0 && whole == 0 { "-" } else { "" }, width = scale as usize)
        }
        (Value::Date32(days), _) => {
            chrono::DateTime::from_timestamp(*days as i64 * 86_400, 0).expect("date").date_naive().format("%Y-%m-%d").to_string()
        }
        (Value::TimestampMicros(micros), _) => {
            // As Python prints a datetime: no fraction when it is zero.
            let at = chrono::DateTime::from_timestamp_micros(*micros).expect("timestamp");
            let fraction = if micros % 1_000_000 == 0 { "" } else { "%.6f" };
            at.format(&format!("%Y-%m-%d %H:%M:%S{fraction}+00:00")).to_string()
        }
        (other, _) => panic!("no text form for {other:?}"),
    }
}

/// Retina's own view of `table` at its latest snapshot, as sorted rows of text.
fn retina_rows(engine: &Engine, table: TableId, schema: &TableSchema) -> Vec<Vec<String>> {
    engine.sync().expect("sync");
    let snapshot = engine.snapshot().expect("snapshot");
    let types: Vec<DataType> = schema.columns().fields().iter().map(|f| f.data_type().clone()).collect();
    let mut rows: Vec<Vec<String>> = rows_of(&engine.scan(table, &snapshot, None).expect("scan"))
        .expect("rows")
        .iter()
        .map(|row| row.iter().zip(&types).map(|(v, t)| text(v, t)).collect())
        .collect();
    rows.sort();
    rows
}

/// What each reader saw of the Delta table at `dir/tables/<name>` (at `version`).
fn readers(dir: &Path, name: &str, version: Option<u64>) -> serde_json::Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/read_published.py");
    let mut command = Command::new(retina_test_support::venv_python());
    command.arg(script).arg(dir.join("tables").join(name));
    if let Some(version) = version {
        command.arg(version.to_string());
    }
    let output = command.output().expect("run scripts/read_published.py (run scripts/test.sh, which installs its readers)");
    assert!(output.status.success(), "read_published.py failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("reader output")
}

/// Every reader sees exactly `expected` and the user's columns, not `_create_ts`.
fn assert_readers_see(dir: &Path, schema: &TableSchema, version: Option<u64>, expected: &[Vec<String>], when: &str) {
    let seen = readers(dir, schema.name(), version);
    let columns: Vec<String> = schema.columns().fields().iter().map(|f| f.name().clone()).collect();
    for reader in ["duckdb", "deltalake", "polars"] {
        let result = &seen[reader];
        assert!(result.get("error").is_none(), "{when}: {reader} failed on {} v{version:?}: {}", schema.name(), result["error"]);
        let got_columns: Vec<String> = serde_json::from_value(result["columns"].clone()).expect("columns");
        assert_eq!(got_columns, columns, "{when}: {reader} columns of {}", schema.name());
        let rows: Vec<Vec<String>> = serde_json::from_value(result["rows"].clone()).expect("rows");
        assert_eq!(rows.len(), expected.len(), "{when}: {reader} row count of {} v{version:?}", schema.name());
        assert_eq!(rows, expected, "{when}: {reader} rows of {} v{version:?}", schema.name());
    }
}

/// Every Iceberg reader sees exactly `expected` in the snapshot of the cut's
/// metadata file for `schema`'s table.
fn assert_iceberg_readers_see(dir: &Path, cut: &PublishedCut, schema: &TableSchema, expected: &[Vec<String>], when: &str) {
    let table = cut.tables.iter().find(|t| t.table == schema.name()).unwrap_or_else(|| panic!("{} in {cut:?}", schema.name()));
    let metadata = table.iceberg_metadata.as_ref().unwrap_or_else(|| panic!("an Iceberg snapshot of {}: {cut:?}", schema.name()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/read_published.py");
    let output = Command::new(retina_test_support::venv_python()).arg(script).arg("--iceberg").arg(dir.join(metadata)).output().expect("run the Iceberg readers");
    assert!(output.status.success(), "read_published.py failed ({}): {}", output.status, String::from_utf8_lossy(&output.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&output.stdout).expect("reader output");
    let columns: Vec<String> = schema.columns().fields().iter().map(|f| f.name().clone()).collect();
    for reader in ["pyiceberg", "duckdb", "polars"] {
        let result = &seen[reader];
        assert!(result.get("error").is_none(), "{when}: Iceberg {reader} failed on {}: {}", schema.name(), result["error"]);
        let got_columns: Vec<String> = serde_json::from_value(result["columns"].clone()).expect("columns");
        assert_eq!(got_columns, columns, "{when}: Iceberg {reader} columns of {}", schema.name());
        let rows: Vec<Vec<String>> = serde_json::from_value(result["rows"].clone()).expect("rows");
        assert_eq!(rows, expected, "{when}: Iceberg {reader} rows of {}", schema.name());
    }
}

fn latest_cut(store: &ParquetLakeStore) -> PublishedCut {
    store.latest_published_cut().expect("read cut").expect("a cut is published")
}

fn version_of(cut: &PublishedCut, table: &str) -> u64 {
    cut.tables.iter().find(|t| t.table == table).unwrap_or_else(|| panic!("{table} in {cut:?}")).delta_version
}

#[test]
fn every_checkpoint_is_a_delta_version_and_an_iceberg_snapshot_that_independent_readers_see_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (accounts_schema, transfers_schema) = (accounts_schema(), transfers_schema());
    let (engine, store) = open(dir.path());
    let accounts = engine.create_table(accounts_schema.clone()).expect("accounts");
    let transfers = engine.create_table(transfers_schema.clone()).expect("transfers");

    // 300 accounts: flushed files of 64 rows and buffered rows in segments.
    for chunk in (0..300i64).collect::<Vec<_>>().chunks(25) {
        engine
            .submit(chunk.iter().map(|&id| RowChange::Insert { table: accounts, row: account(accounts, id, id as i128 * 100 + 5) }).collect())
            .expect("insert");
    }
    engine.submit((0..40).map(|id| RowChange::Insert { table: transfers, row: transfer(id) }).collect()).expect("transfers");
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint");
    let status = store.publication_status();
    assert!(status.error.is_none(), "publication failed: {:?}", status.error);
    let first_cut = latest_cut(&store);
    assert_eq!((version_of(&first_cut, "bank.accounts"), version_of(&first_cut, "bank.transfers")), (0, 0));
    let accounts_at_first = retina_rows(&engine, accounts, &accounts_schema);
    let transfers_at_first = retina_rows(&engine, transfers, &transfers_schema);
    assert_eq!(accounts_at_first.len(), 300);
    assert_readers_see(dir.path(), &accounts_schema, None, &accounts_at_first, "first checkpoint");
    assert_readers_see(dir.path(), &transfers_schema, None, &transfers_at_first, "first checkpoint");
    assert_iceberg_readers_see(dir.path(), &first_cut, &accounts_schema, &accounts_at_first, "first checkpoint");
    assert_iceberg_readers_see(dir.path(), &first_cut, &transfers_schema, &transfers_at_first, "first checkpoint");

    // Updates (a key change too), deletes in flushed and buffered rows, new rows; the
    // transfers table does not change, so it gets no new version.
    let mut changes = Vec::new();
    for id in (0..300i64).step_by(9) {
        changes.push(RowChange::Update { table: accounts, key: vec![Value::Int64(id)], row: account(accounts, id, -(id as i128) - 1) });
    }
    for id in (5..300i64).step_by(31) {
        changes.push(RowChange::Delete { table: accounts, key: vec![Value::Int64(id)] });
    }
    changes.push(RowChange::Update { table: accounts, key: vec![Value::Int64(1)], row: account(accounts, 1001, 7) });
    engine.submit(changes).expect("changes");
    engine.submit((300..330i64).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, 1) }).collect()).expect("more");
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint");
    let second_cut = latest_cut(&store);
    assert!(second_cut.ts > first_cut.ts);
    assert_eq!(version_of(&second_cut, "bank.accounts"), 1);
    assert_eq!(version_of(&second_cut, "bank.transfers"), 0, "an unchanged table keeps its version in the cut");
    let accounts_at_second = retina_rows(&engine, accounts, &accounts_schema);
    assert_readers_see(dir.path(), &accounts_schema, None, &accounts_at_second, "second checkpoint");
    assert_iceberg_readers_see(dir.path(), &second_cut, &accounts_schema, &accounts_at_second, "second checkpoint");
    // The snapshot of the first cut stays readable too.
    assert_iceberg_readers_see(dir.path(), &first_cut, &accounts_schema, &accounts_at_first, "first snapshot after the second");
    // The version before stays readable: time travel to the first cut.
    assert_readers_see(dir.path(), &accounts_schema, Some(0), &accounts_at_first, "first version after the second checkpoint");

    engine.close().expect("close");
    drop(store);

    // A restart continues the log; a lost state file is rebuilt from it.
    std::fs::remove_file(dir.path().join("_retina/published/state.json")).expect("state file");
    let (engine, store) = open(dir.path());
    let accounts = engine.table_id("bank.accounts").expect("accounts after restart");
    let deletes = (0..300i64).filter(|id| id % 4 == 2 && (id - 5) % 31 != 0);
    engine.submit(deletes.map(|id| RowChange::Delete { table: accounts, key: vec![Value::Int64(id)] }).collect()).expect("deletes");
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint after restart");
    let status = store.publication_status();
    assert!(status.error.is_none(), "publication after restart failed: {:?}", status.error);
    let third_cut = latest_cut(&store);
    assert!(version_of(&third_cut, "bank.accounts") >= 2, "{third_cut:?}");
    let accounts_at_third = retina_rows(&engine, accounts, &accounts_schema);
    assert_readers_see(dir.path(), &accounts_schema, None, &accounts_at_third, "after a restart without the state file");
    assert_iceberg_readers_see(dir.path(), &third_cut, &accounts_schema, &accounts_at_third, "after a restart without the state file");

    // An added column: a metaData action in Delta, a new schema in Iceberg; the rows
    // from before read NULL in it.
    let note = arrow_schema::Field::new("note", DataType::Utf8, true);
    engine.add_column(accounts, note.clone()).expect("add a column");
    let widened = accounts_schema.with_column(note).expect("widened schema");
    let mut row = account(accounts, 5000, 42);
    row.push(Value::Utf8("opened after the column".into()));
    engine.submit(vec![RowChange::Insert { table: accounts, row }]).expect("a row with the new column");
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint with the new column");
    let fourth_cut = latest_cut(&store);
    let accounts_at_fourth = retina_rows(&engine, accounts, &widened);
    assert!(accounts_at_fourth.iter().any(|r| r[4] == "opened after the column") && accounts_at_fourth.iter().any(|r| r[4].is_empty()));
    assert_readers_see(dir.path(), &widened, None, &accounts_at_fourth, "after an added column");
    assert_iceberg_readers_see(dir.path(), &fourth_cut, &widened, &accounts_at_fourth, "after an added column");
    engine.close().expect("close");
}

/// A long log gets Delta checkpoints: after a dozen publications, the JSON commits
/// before the latest checkpoint can go (as log retention removes them) and every
/// reader still sees the exact rows, starting from the checkpoint.
#[test]
fn a_long_log_gets_checkpoints_that_readers_start_from() {
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = accounts_schema();
    let (engine, store) = open(dir.path());
    let accounts = engine.create_table(schema.clone()).expect("accounts");
    engine.submit((0..150i64).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, 10) }).collect()).expect("load");
    for round in 1..=12i64 {
        let changes = (0..150i64)
            .filter(|id| id % 12 == round % 12)
            .map(|id| RowChange::Update { table: accounts, key: vec![Value::Int64(id)], row: account(accounts, id, round as i128) })
            .collect();
        engine.submit(changes).expect("changes");
        engine.wait_for_flushes().expect("flushes");
        engine.checkpoint().expect("checkpoint");
        assert!(store.publication_status().error.is_none(), "{:?}", store.publication_status().error);
    }
    let log = dir.path().join("tables/bank.accounts/_delta_log");
    let pointer: serde_json::Value = serde_json::from_slice(&std::fs::read(log.join("_last_checkpoint")).expect("_last_checkpoint")).expect("json");
    assert_eq!(pointer["version"], 10, "{pointer}");
    assert!(log.join("00000000000000000010.checkpoint.parquet").exists());
    for version in 0..10 {
        std::fs::remove_file(log.join(format!("{version:020}.json"))).expect("old commit");
    }
    let expected = retina_rows(&engine, accounts, &schema);
    assert_readers_see(dir.path(), &schema, None, &expected, "from the checkpoint");
    engine.close().expect("close");
}

/// Cents of a decimal(12,2) as the readers print it (`-12.05`).
fn cents(text: &str) -> i128 {
    text.replace('.', "").parse().unwrap_or_else(|_| panic!("a decimal: {text}"))
}

/// Checkpoints taken while transfers keep arriving: every published cut, read at the
/// versions it names, holds the bank's invariant across its two tables (each
/// transfer moves its amount from account 0 to another account and is recorded in
/// `bank.transfers` in the same transaction), so no reader ever sees half of one.
#[test]
fn every_cut_is_one_snapshot_across_tables_while_replay_goes_on() {
    const ACCOUNTS: i64 = 20;
    const OPENING: i128 = 100_000;
    let dir = tempfile::tempdir().expect("tempdir");
    // Every DV in a file of its own: the readers below also read publications
    // spread over several DV files (the other tests read one file per publication).
    let options = PublishOptions { dv_file_target_bytes: 1, ..PublishOptions::every_checkpoint(RETENTION) };
    let store = Arc::new(ParquetLakeStore::open(dir.path().to_str().expect("utf-8 path")).expect("store").publishing(Some(options)));
    let engine = Engine::open(config(), Arc::clone(&store) as _).expect("open");
    let engine = Arc::new(engine);
    let accounts = engine.create_table(accounts_schema()).expect("accounts");
    let transfers = engine.create_table(transfers_schema()).expect("transfers");
    engine
        .submit((0..ACCOUNTS).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, OPENING) }).collect())
        .expect("open accounts");
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (engine, stop) = (Arc::clone(&engine), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut balances = vec![OPENING; ACCOUNTS as usize];
            let mut id = 0i64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && id < 20_000 {
                let (to, amount) = (1 + id % (ACCOUNTS - 1), 1 + id % 97);
                balances[0] -= amount as i128;
                balances[to as usize] += amount as i128;
                let mut row = transfer(id);
                row[1] = Value::Int32(amount as i32);
                engine
                    .submit(vec![
                        RowChange::Update { table: accounts, key: vec![Value::Int64(0)], row: account(accounts, 0, balances[0]) },
                        RowChange::Update { table: accounts, key: vec![Value::Int64(to)], row: account(accounts, to, balances[to as usize]) },
                        RowChange::Insert { table: transfers, row },
                    ])
                    .expect("transfer");
                id += 1;
                if id % 10 == 0 {
                    std::thread::sleep(std::time::Duration::from_millis(1)); // ~5K transfers/s: reads stay quick
                }
            }
            id
        })
    };
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/read_published.py");
    let mut seen_transfers = Vec::new();
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(150));
        engine.checkpoint().expect("checkpoint while transfers arrive");
        assert!(store.publication_status().error.is_none(), "{:?}", store.publication_status().error);
        let output = Command::new(retina_test_support::venv_python()).arg(&script).arg("--cut").arg(dir.path()).output().expect("read the cut");
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        let cut: serde_json::Value = serde_json::from_slice(&output.stdout).expect("cut");
        let readers = [("delta", "duckdb"), ("delta", "deltalake"), ("delta", "polars"), ("iceberg", "pyiceberg"), ("iceberg", "duckdb"), ("iceberg", "polars")];
        for (format, reader) in readers {
            let rows = |table: &str| -> Vec<Vec<String>> {
                let result = &cut["tables"][table][format][reader];
                assert!(result.get("error").is_none(), "{format} {reader} on {table}: {}", result["error"]);
                serde_json::from_value(result["rows"].clone()).expect("rows")
            };
            let reader = format!("{format} {reader}");
            let reader = reader.as_str();
            let balances: Vec<i128> = rows("bank.accounts").iter().map(|row| cents(&row[2])).collect();
            let moved: i128 = rows("bank.transfers").iter().map(|row| row[1].parse::<i128>().expect("amount")).sum();
            assert_eq!(balances.len(), ACCOUNTS as usize, "{reader}: every account");
            assert_eq!(balances.iter().sum::<i128>(), ACCOUNTS as i128 * OPENING, "{reader}: money is neither made nor lost");
            let payer = rows("bank.accounts").iter().find(|row| row[0] == "0").map(|row| cents(&row[2])).expect("account 0");
            assert_eq!(payer, OPENING - moved, "{reader}: account 0 paid exactly the transfers the cut shows (ts {})", cut["ts"]);
            if reader == "delta duckdb" {
                seen_transfers.push(rows("bank.transfers").len());
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let submitted = writer.join().expect("writer");
    // With a 1-byte target, no two DVs of one commit share a file (3 runs here had
    // commits with 2-3 DVs, so the readers above read commits spread over files).
    for log in std::fs::read_dir(dir.path().join("tables/bank.accounts/_delta_log")).expect("log").flatten() {
        if log.path().extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(log.path()).expect("commit");
            let dvs: Vec<String> = text
                .lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .filter_map(|action| action["add"]["deletionVector"]["pathOrInlineDv"].as_str().map(str::to_string))
                .collect();
            let files: std::collections::BTreeSet<&String> = dvs.iter().collect();
            assert_eq!(files.len(), dvs.len(), "one DV per file in {}", log.path().display());
        }
    }
    assert!(seen_transfers.windows(2).all(|w| w[0] <= w[1]) && seen_transfers.last() > seen_transfers.first(), "cuts advance: {seen_transfers:?}");
    assert!(submitted as usize >= *seen_transfers.last().expect("cuts"), "{submitted} submitted, {seen_transfers:?}");
    drop(store);
    Arc::into_inner(engine).expect("the only engine handle").close().expect("close");
}

fn open_with_retention(dir: &Path, retention: std::time::Duration) -> (Engine, Arc<ParquetLakeStore>) {
    let store = Arc::new(ParquetLakeStore::open(dir.to_str().expect("utf-8 path")).expect("store").publishing(Some(PublishOptions::every_checkpoint(retention))));
    let engine = Engine::open(config(), Arc::clone(&store) as _).expect("open");
    (engine, store)
}

/// A version stays readable for the retention although storage GC replaced its
/// files, then its files go, and reading it is an error, never a silent gap.
#[test]
fn a_version_stays_readable_for_the_retention_then_reading_it_fails_clearly() {
    let retention = std::time::Duration::from_secs(3);
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = accounts_schema();
    let (engine, _store) = open_with_retention(dir.path(), retention);
    let accounts = engine.create_table(schema.clone()).expect("accounts");
    engine.submit((0..128i64).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, 1) }).collect()).expect("load");
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint");
    let first = retina_rows(&engine, accounts, &schema);
    let first_files: Vec<_> = std::fs::read_dir(dir.path().join("tables/bank.accounts")).expect("dir").flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "parquet")).collect();
    assert!(!first_files.is_empty());
    // Delete most rows, so storage GC rewrites the flushed files and retires them.
    engine.submit((0..128i64).filter(|id| id % 8 != 0).map(|id| RowChange::Delete { table: accounts, key: vec![Value::Int64(id)] }).collect()).expect("deletes");
    engine.sync().expect("sync");
    engine.collect_garbage();
    let gc = engine.collect_storage_garbage(0.5).expect("storage GC");
    assert!(gc.files_rewritten > 0, "{gc:?}");
    engine.checkpoint().expect("checkpoint");
    engine.checkpoint().expect("a later checkpoint deletes retired files");
    assert!(first_files.iter().all(|f| f.exists()), "retired files stay while version 0 is retained");
    assert_readers_see(dir.path(), &schema, Some(0), &first, "version 0 within its retention");
    std::thread::sleep(retention + std::time::Duration::from_millis(500));
    engine.submit(vec![RowChange::Insert { table: accounts, row: account(accounts, 1000, 1) }]).expect("a change");
    engine.sync().expect("visible before the checkpoint");
    engine.checkpoint().expect("checkpoint after the retention");
    assert!(first_files.iter().any(|f| !f.exists()), "retired files go once no retained version needs them");
    let seen = readers(dir.path(), schema.name(), Some(0));
    for reader in ["duckdb", "deltalake", "polars"] {
        assert!(seen[reader].get("error").is_some(), "{reader} must fail on an expired version, not return rows: {}", seen[reader]);
    }
    let latest = retina_rows(&engine, accounts, &schema);
    assert_readers_see(dir.path(), &schema, None, &latest, "the latest version after the retention");
    engine.close().expect("close");
}

/// A lake on S3 (moto, for real) publishes the same way: commits created once by
/// conditional puts, Iceberg files named by `s3://` URIs, and delta-rs, pyiceberg
/// and Polars read the tables from the bucket exactly.
#[test]
fn a_lake_on_s3_is_published_and_read_from_the_bucket() {
    let server = retina_test_support::LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("retina").unwrap_or_else(|e| panic!("{e}"));
    let location = format!(
        "s3://retina/lake?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=verysecret",
        server.endpoint()
    );
    let store = Arc::new(ParquetLakeStore::open(&location).expect("s3 store").publishing(Some(PublishOptions::every_checkpoint(RETENTION))));
    let engine = Engine::open(config(), Arc::clone(&store) as _).expect("engine");
    let schema = accounts_schema();
    let accounts = engine.create_table(schema.clone()).expect("accounts");
    engine.submit((0..150i64).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, 7) }).collect()).expect("load");
    engine.submit((0..150i64).step_by(6).map(|id| RowChange::Delete { table: accounts, key: vec![Value::Int64(id)] }).collect()).expect("deletes");
    engine.wait_for_flushes().expect("flushes");
    engine.checkpoint().expect("checkpoint to s3");
    assert!(store.publication_status().error.is_none(), "{:?}", store.publication_status().error);
    let cut = latest_cut(&store);
    let expected = retina_rows(&engine, accounts, &schema);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/read_published.py");
    let read = |args: &[String]| -> serde_json::Value {
        let output = Command::new(retina_test_support::venv_python())
            .arg(&script)
            .args(args)
            .env("READ_S3_ENDPOINT", server.endpoint())
            .output()
            .expect("run the readers");
        assert!(output.status.success(), "read_published.py: {}", String::from_utf8_lossy(&output.stderr));
        serde_json::from_slice(&output.stdout).expect("reader output")
    };
    let delta = read(&["s3://retina/lake/tables/bank.accounts".to_string()]);
    let metadata = cut.tables[0].iceberg_metadata.clone().expect("an Iceberg snapshot");
    let iceberg = read(&["--iceberg".to_string(), format!("s3://retina/lake/{metadata}")]);
    for (format, seen, reader) in [("delta", &delta, "deltalake"), ("delta", &delta, "polars"), ("iceberg", &iceberg, "pyiceberg"), ("iceberg", &iceberg, "polars")] {
        let result = &seen[reader];
        assert!(result.get("error").is_none(), "{format} {reader} on s3: {}", result["error"]);
        let rows: Vec<Vec<String>> = serde_json::from_value(result["rows"].clone()).expect("rows");
        assert_eq!(rows, expected, "{format} {reader} rows from s3");
    }
    engine.close().expect("close");
}

/// With a publication interval, checkpoints inside it are durable but not published
/// (the cut stays), and a clean shutdown publishes the last one, so readers see the
/// final state.
#[test]
fn checkpoints_inside_the_publication_interval_wait_and_a_clean_shutdown_publishes_the_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let schema = accounts_schema();
    let options = PublishOptions { interval: std::time::Duration::from_secs(3600), ..PublishOptions::every_checkpoint(RETENTION) };
    let store = Arc::new(ParquetLakeStore::open(dir.path().to_str().expect("utf-8 path")).expect("store").publishing(Some(options)));
    let engine = Engine::open(config(), Arc::clone(&store) as _).expect("open");
    // Opening takes (and publishes) the first checkpoint; the interval starts there.
    let opened = latest_cut(&store).ts;
    assert_eq!(store.publication_status().publications, 1);
    let accounts = engine.create_table(schema.clone()).expect("accounts");
    engine.submit((0..40i64).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, 5) }).collect()).expect("load");
    engine.sync().expect("sync");
    let first = engine.checkpoint().expect("a checkpoint");
    engine.submit((40..90i64).map(|id| RowChange::Insert { table: accounts, row: account(accounts, id, 7) }).collect()).expect("more");
    engine.submit(vec![RowChange::Delete { table: accounts, key: vec![Value::Int64(3)] }]).expect("a delete");
    engine.sync().expect("sync");
    let second = engine.checkpoint().expect("another checkpoint");
    assert!(second.ts > first.ts && first.ts.0 > opened);
    assert_eq!(latest_cut(&store).ts, opened, "checkpoints inside the interval are not published");
    assert_eq!(store.publication_status().publications, 1);
    let durable = retina_core::storage::CheckpointStore::load_checkpoint(store.as_ref()).expect("load").expect("a checkpoint");
    assert_eq!(durable.ts, second.ts, "yet they are durable");
    let last_rows = retina_rows(&engine, accounts, &schema);
    let closed = engine.close().expect("close");
    assert_eq!(latest_cut(&store).ts, closed.ts.0, "a clean shutdown publishes the final checkpoint");
    assert_eq!(store.publication_status().publications, 2);
    assert_readers_see(dir.path(), &schema, None, &last_rows, "the final state after shutdown");
}
