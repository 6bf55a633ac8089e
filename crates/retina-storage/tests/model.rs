//! Model-based test: random multi-table transaction streams replayed into the engine
//! (real Parquet files in a temp dir) and into a naive MVCC reference model. At
//! random snapshots, held across later replay, flushes and GC, and from a reader
//! thread racing the replay, the engine's scan must equal the model exactly.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, RwLock};

use arrow_schema::DataType;
use proptest::prelude::*;
use retina_core::reference_model::ReferenceModel;
use retina_core::rows::rows_of;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableId, TableSchema, Value};
use retina_storage::ParquetLakeStore;

#[derive(Clone, Debug)]
enum Intent {
    Insert { table: usize, key: u8, val: i64 },
    Update { table: usize, pick: usize, new_key: Option<u8>, val: i64 },
    Delete { table: usize, pick: usize },
}

#[derive(Clone, Debug)]
enum Step {
    Txn(Vec<Intent>),
    CheckNow,
    HoldSnapshot,
    CollectGarbage,
}

fn intent() -> impl Strategy<Value = Intent> {
    prop_oneof![
        3 => (0..2usize, 0..40u8, any::<i64>()).prop_map(|(table, key, val)| Intent::Insert { table, key, val }),
        4 => (0..2usize, any::<usize>(), proptest::option::weighted(0.2, 0..40u8), any::<i64>())
            .prop_map(|(table, pick, new_key, val)| Intent::Update { table, pick, new_key, val }),
        2 => (0..2usize, any::<usize>()).prop_map(|(table, pick)| Intent::Delete { table, pick }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => proptest::collection::vec(intent(), 1..6).prop_map(Step::Txn),
        1 => Just(Step::CheckNow),
        1 => Just(Step::HoldSnapshot),
        1 => Just(Step::CollectGarbage),
    ]
}

fn schemas() -> [TableSchema; 2] {
    [
        TableSchema::from_columns(
            "shop.items",
            &[("id", DataType::Int64, false), ("name", DataType::Utf8, true), ("n", DataType::Int64, false)],
            &["id"],
        )
        .expect("schema"),
        TableSchema::from_columns(
            "shop.stock",
            &[("w", DataType::Int32, false), ("code", DataType::Utf8, false), ("qty", DataType::Float64, true)],
            &["w", "code"],
        )
        .expect("schema"),
    ]
}

fn key_values(table: usize, key: u8) -> Vec<Value> {
    match table {
        0 => vec![Value::Int64(key as i64)],
        _ => vec![Value::Int32((key % 7) as i32), Value::Utf8(format!("c{}", key / 7))],
    }
}

fn row(table: usize, key: u8, val: i64) -> Vec<Value> {
    match table {
        0 => {
            let name = if val % 5 == 0 { Value::Null } else { Value::Utf8(format!("item-{val}")) };
            vec![Value::Int64(key as i64), name, Value::Int64(val)]
        }
        _ => {
            let qty = if val % 3 == 0 { Value::Null } else { Value::Float64((val % 1000) as f64 / 4.0) };
            let mut row = key_values(1, key);
            row.push(qty);
            row
        }
    }
}

fn key_of(table: usize, row: &[Value]) -> Vec<Value> {
    match table {
        0 => vec![row[0].clone()],
        _ => vec![row[0].clone(), row[1].clone()],
    }
}

/// Turns intents into valid changes against the model's live rows, applying each to
/// a scratch copy of the live set so later intents of the same transaction see it.
fn changes_for(intents: &[Intent], model: &ReferenceModel, ids: &[TableId; 2]) -> Vec<RowChange> {
    let mut live: Vec<Vec<Vec<Value>>> =
        ids.iter().enumerate().map(|(t, id)| model.live_rows(*id).iter().map(|r| key_of(t, r)).collect()).collect();
    let mut changes = Vec::new();
    for intent in intents {
        match *intent {
            Intent::Insert { table, key, val } => {
                let key_vals = key_values(table, key);
                if live[table].contains(&key_vals) {
                    changes.push(RowChange::Update { table: ids[table], key: key_vals, row: row(table, key, val) });
                } else {
                    live[table].push(key_vals);
                    changes.push(RowChange::Insert { table: ids[table], row: row(table, key, val) });
                }
            }
            Intent::Update { table, pick, new_key, val } => {
                if live[table].is_empty() {
                    continue;
                }
                let index = pick % live[table].len();
                let old = live[table][index].clone();
                let target = match new_key {
                    Some(k) if !live[table].contains(&key_values(table, k)) => k,
                    _ => key_byte(table, &old),
                };
                live[table][index] = key_values(table, target);
                changes.push(RowChange::Update { table: ids[table], key: old, row: row(table, target, val) });
            }
            Intent::Delete { table, pick } => {
                if live[table].is_empty() {
                    continue;
                }
                let index = pick % live[table].len();
                let old = live[table].swap_remove(index);
                changes.push(RowChange::Delete { table: ids[table], key: old });
            }
        }
    }
    changes
}

/// Recovers the u8 a key was generated from.
fn key_byte(table: usize, key: &[Value]) -> u8 {
    match (table, key) {
        (0, [Value::Int64(k)]) => *k as u8,
        (_, [Value::Int32(w), Value::Utf8(code)]) => {
            let hi: u8 = code[1..].parse().expect("generated code");
            hi * 7 + *w as u8
        }
        _ => unreachable!("generated keys only"),
    }
}

fn scan_rows(engine: &Engine, model: &ReferenceModel, table: TableId, snapshot: &retina_core::Snapshot) -> Vec<Vec<Value>> {
    let batches = engine.scan(table, snapshot, None).expect("scan");
    model.sorted_by_key(table, rows_of(&batches).expect("rows"))
}

fn run(config: EngineConfig, steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(ParquetLakeStore::open(dir.path().to_str().expect("utf-8 path")).expect("store"));
    let engine = Arc::new(Engine::start(config, Arc::new(EmbeddedTransactionService::new()), store).expect("engine"));
    let mut model = ReferenceModel::new();
    let ids = schemas().map(|schema| {
        let id = engine.create_table(schema.clone()).expect("table");
        model.add_table(id, schema);
        id
    });
    let model = Arc::new(RwLock::new(model));
    let model_ts = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));

    // A reader racing the replay: every snapshot it takes must match the model.
    let reader = {
        let (engine, model, model_ts, stop) = (Arc::clone(&engine), Arc::clone(&model), Arc::clone(&model_ts), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut checks = 0;
            while !stop.load(SeqCst) {
                let snapshot = engine.snapshot().expect("snapshot");
                let scanned: Vec<_> = ids.iter().map(|&t| rows_of(&engine.scan(t, &snapshot, None).expect("scan")).expect("rows")).collect();
                while model_ts.load(SeqCst) < snapshot.ts().0 {
                    std::thread::yield_now();
                }
                let model = model.read().expect("model lock");
                for (table, rows) in ids.iter().zip(scanned) {
                    assert_eq!(model.sorted_by_key(*table, rows), model.visible_at(*table, snapshot.ts()), "reader at {}", snapshot.ts());
                }
                checks += 1;
            }
            checks
        })
    };

    let mut held = Vec::new();
    for step in steps {
        match step {
            Step::Txn(intents) => {
                let mut model = model.write().expect("model lock");
                let changes = changes_for(&intents, &model, &ids);
                let ts = engine.submit(changes.clone()).expect("submit");
                model.apply(ts, &changes);
                model_ts.store(ts.0, SeqCst);
            }
            Step::CheckNow => {
                engine.sync().expect("sync");
                let snapshot = engine.snapshot().expect("snapshot");
                let model = model.read().expect("model lock");
                for &table in &ids {
                    assert_eq!(scan_rows(&engine, &model, table, &snapshot), model.visible_at(table, snapshot.ts()));
                }
            }
            Step::HoldSnapshot => {
                if held.len() < 4 {
                    held.push(engine.snapshot().expect("snapshot"));
                }
            }
            Step::CollectGarbage => {
                let lwm = engine.collect_garbage();
                assert!(held.iter().all(|s| s.ts() >= lwm), "LWM {lwm} passed a held snapshot");
            }
        }
    }
    engine.wait_for_flushes().expect("flushes");
    engine.collect_garbage();
    stop.store(true, SeqCst);
    reader.join().expect("reader thread");
    let model = model.read().expect("model lock");
    for snapshot in held.iter().chain(std::iter::once(&engine.snapshot().expect("snapshot"))) {
        for &table in &ids {
            assert_eq!(
                scan_rows(&engine, &model, table, snapshot),
                model.visible_at(table, snapshot.ts()),
                "table {table:?} at {}",
                snapshot.ts()
            );
        }
    }
    assert_eq!(engine.failure().map(|e| e.to_string()), None);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn engine_scan_equals_reference_model(
        shards in 1..4usize,
        block_rows in prop_oneof![Just(2usize), Just(4), Just(8)],
        file_rows in prop_oneof![Just(8usize), Just(16), Just(40)],
        batch_changes in 1..12usize,
        steps in proptest::collection::vec(step(), 10..120),
    ) {
        run(EngineConfig { shards, block_rows, file_rows, batch_changes, gc_interval: None }, steps);
    }
}
