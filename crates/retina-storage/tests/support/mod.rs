//! Shared by the model-based tests: random transaction intents over two tables and
//! their translation into valid changes against the reference model.
#![allow(dead_code)] // each test binary uses a different part

pub mod lake_files;
pub mod reference_model;

use arrow_schema::DataType;
use proptest::prelude::*;
use reference_model::ReferenceModel;
use retina_core::{RowChange, TableId, TableSchema, Value};

#[derive(Clone, Debug)]
pub enum Intent {
    Insert { table: usize, key: u8, val: i64 },
    Update { table: usize, pick: usize, new_key: Option<u8>, val: i64 },
    Delete { table: usize, pick: usize },
}

#[derive(Clone, Debug)]
pub enum Step {
    Txn(Vec<Intent>),
    CheckNow,
    HoldSnapshot,
    CollectGarbage,
    Checkpoint,
    Crash,
    StorageGc,
}

pub fn intent() -> impl Strategy<Value = Intent> {
    prop_oneof![
        3 => (0..2usize, 0..40u8, any::<i64>()).prop_map(|(table, key, val)| Intent::Insert { table, key, val }),
        4 => (0..2usize, any::<usize>(), proptest::option::weighted(0.2, 0..40u8), any::<i64>())
            .prop_map(|(table, pick, new_key, val)| Intent::Update { table, pick, new_key, val }),
        2 => (0..2usize, any::<usize>()).prop_map(|(table, pick)| Intent::Delete { table, pick }),
    ]
}

/// Steps for the concurrent model test (no crashes: a reader thread holds the engine).
pub fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => proptest::collection::vec(intent(), 1..6).prop_map(Step::Txn),
        1 => Just(Step::CheckNow),
        1 => Just(Step::HoldSnapshot),
        1 => Just(Step::CollectGarbage),
        1 => Just(Step::StorageGc),
    ]
}

/// Steps for the recovery test: checkpoints and crashes among transactions.
pub fn crash_step() -> impl Strategy<Value = Step> {
    prop_oneof![
        12 => proptest::collection::vec(intent(), 1..6).prop_map(Step::Txn),
        1 => Just(Step::CheckNow),
        1 => Just(Step::CollectGarbage),
        2 => Just(Step::Checkpoint),
        2 => Just(Step::Crash),
        2 => Just(Step::StorageGc),
    ]
}

pub fn schemas() -> [TableSchema; 2] {
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

pub fn key_values(table: usize, key: u8) -> Vec<Value> {
    match table {
        0 => vec![Value::Int64(key as i64)],
        _ => vec![Value::Int32((key % 7) as i32), Value::Utf8(format!("c{}", key / 7).into())],
    }
}

pub fn row(table: usize, key: u8, val: i64) -> Vec<Value> {
    match table {
        0 => {
            let name = if val % 5 == 0 { Value::Null } else { Value::Utf8(format!("item-{val}").into()) };
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

pub fn key_of(table: usize, row: &[Value]) -> Vec<Value> {
    match table {
        0 => vec![row[0].clone()],
        _ => vec![row[0].clone(), row[1].clone()],
    }
}

/// Turns intents into valid changes against the model's live rows, applying each to
/// a scratch copy of the live set so later intents of the same transaction see it.
pub fn changes_for(intents: &[Intent], model: &ReferenceModel, ids: &[TableId; 2]) -> Vec<RowChange> {
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
pub fn key_byte(table: usize, key: &[Value]) -> u8 {
    match (table, key) {
        (0, [Value::Int64(k)]) => *k as u8,
        (_, [Value::Int32(w), Value::Utf8(code)]) => {
            let hi: u8 = code[1..].parse().expect("generated code");
            hi * 7 + *w as u8
        }
        _ => unreachable!("generated keys only"),
    }
}

