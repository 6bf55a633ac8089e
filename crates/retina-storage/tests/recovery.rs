//! Recovery, model-based: random transaction streams with checkpoints and crashes
//! (the engine dropped without a clean shutdown, Parquet files and catalog left as
//! they are). After each restart the recovered lakehouse must equal the reference
//! model at the checkpoint ts, and replaying the source from the recovered position
//! must end in the model's final state: nothing lost, nothing applied twice.

mod support;

use std::sync::Arc;

use proptest::prelude::*;
use support::reference_model::ReferenceModel;
use retina_core::rows::rows_of;
use retina_core::{Engine, EngineConfig, RowChange, TableId, Ts};
use retina_storage::ParquetLakeStore;
use support::lake_files::latest_version;
use support::{changes_for, crash_step, schemas, Step};

const SOURCE: &str = "test-source";

fn open(dir: &std::path::Path, config: &EngineConfig) -> Engine {
    let store = ParquetLakeStore::open(dir.to_str().expect("utf-8 path")).expect("store");
    Engine::open(config.clone(), Arc::new(store)).expect("open")
}

fn table_ids(engine: &Engine) -> [TableId; 2] {
    schemas().map(|schema| engine.table_id(schema.name()).expect("table exists"))
}

fn assert_matches_model(engine: &Engine, model: &ReferenceModel, ids: &[TableId; 2], context: &str) {
    let snapshot = engine.snapshot().expect("snapshot");
    for &table in ids {
        let rows = rows_of(&engine.scan(table, &snapshot, None).expect("scan")).expect("rows");
        assert_eq!(model.sorted_by_key(table, rows), model.visible_at(table, snapshot.ts()), "{context}, table {table:?} at {}", snapshot.ts());
    }
}

/// A fresh model holding `log`'s transactions with their timestamps.
fn model_of(ids: &[TableId; 2], log: &[(Ts, Vec<RowChange>)]) -> ReferenceModel {
    let mut model = ReferenceModel::new();
    for (id, schema) in ids.iter().zip(schemas()) {
        model.add_table(*id, schema);
    }
    for (ts, changes) in log {
        model.apply(*ts, changes);
    }
    model
}

fn run(config: EngineConfig, steps: Vec<Step>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut engine = open(dir.path(), &config);
    let ids = schemas().map(|schema| engine.create_table(schema).expect("table"));
    // The source: every transaction ever generated, in order; position = index.
    let mut source: Vec<Vec<RowChange>> = Vec::new();
    // What the engine applied: (ts, transaction), in ts order.
    let mut log: Vec<(Ts, Vec<RowChange>)> = Vec::new();
    let mut model = model_of(&ids, &log);
    for step in steps {
        match step {
            Step::Txn(intents) => {
                let changes = changes_for(&intents, &model, &ids);
                let position = source.len();
                source.push(changes.clone());
                let ts = engine.submit_from(SOURCE, position.to_string(), changes.clone()).expect("submit");
                model.apply(ts, &changes);
                log.push((ts, changes));
            }
            Step::CheckNow => {
                engine.sync().expect("sync");
                assert_matches_model(&engine, &model, &ids, "live");
            }
            Step::CollectGarbage => {
                engine.collect_garbage();
            }
            Step::Checkpoint => {
                engine.checkpoint().expect("checkpoint");
            }
            Step::StorageGc => {
                engine.collect_garbage();
                engine.collect_storage_garbage(0.3).expect("storage GC");
            }
            Step::Crash => {
                drop(engine);
                engine = open(dir.path(), &config);
                assert_eq!(table_ids(&engine), ids);
                let checkpoint_ts = engine.recovery_report().expect("recovered").checkpoint_ts;
                // The lakehouse is exactly the model at the checkpoint.
                log.retain(|(ts, _)| *ts <= checkpoint_ts);
                model = model_of(&ids, &log);
                assert_matches_model(&engine, &model, &ids, "after recovery");
                // Resume the source after the recovered position.
                let resume_from = match engine.recovered_positions().iter().find(|p| p.source == SOURCE) {
                    Some(position) => {
                        assert!(position.ts <= checkpoint_ts);
                        position.position.parse::<usize>().expect("our positions are indexes") + 1
                    }
                    None => 0,
                };
                assert_eq!(resume_from, log.len(), "the recovered position is the last transaction in the checkpoint");
                for (position, changes) in source.iter().enumerate().skip(resume_from) {
                    let ts = engine.submit_from(SOURCE, position.to_string(), changes.clone()).expect("replay");
                    model.apply(ts, changes);
                    log.push((ts, changes.clone()));
                }
                engine.sync().expect("sync");
                assert_matches_model(&engine, &model, &ids, "after replaying the source");
            }
            Step::HoldSnapshot => unreachable!("not generated by crash_step()"),
        }
    }
    engine.sync().expect("sync");
    assert_matches_model(&engine, &model, &ids, "at the end");
    engine.close().expect("clean shutdown");
    let engine = open(dir.path(), &config);
    assert!(engine.recovered_positions().iter().all(|p| p.position == (source.len() - 1).to_string()));
    assert_matches_model(&engine, &model, &ids, "after a clean restart");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn recovery_equals_model_and_resumes_exactly_once(
        shards in 1..4usize,
        block_rows in prop_oneof![Just(2usize), Just(4), Just(8)],
        file_rows in prop_oneof![Just(8usize), Just(16), Just(40)],
        batch_changes in 1..12usize,
        steps in proptest::collection::vec(crash_step(), 10..100),
    ) {
        let config = EngineConfig { shards, block_rows, file_rows, batch_changes, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, storage_gc_threshold: 0.5, background_nice: 0 };
        run(config, steps);
    }
}

#[test]
fn open_reports_newer_checkpoint_formats_clearly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = EngineConfig { gc_interval: None, checkpoint_interval: None, ..EngineConfig::default() };
    drop(open(dir.path(), &config));
    let latest = latest_version(dir.path(), "checkpoints", "checkpoint");
    let text = std::fs::read_to_string(&latest).expect("first checkpoint written at open");
    let (current, newer) = (retina_core::checkpoint::CHECKPOINT_FORMAT_VERSION, retina_core::checkpoint::CHECKPOINT_FORMAT_VERSION + 1);
    let rewritten = text.replace(&format!("\"format_version\":{current}"), &format!("\"format_version\":{newer}"));
    assert_ne!(rewritten, text, "the checkpoint names its format");
    std::fs::write(&latest, rewritten).expect("write");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    let error = Engine::open(config, Arc::new(store)).err().expect("newer format refused");
    assert!(error.to_string().contains(&format!("format version {newer}")), "{error}");
}
