//! The generated stream is valid for the engine: every update and delete finds its
//! row, no insert duplicates a key, every value fits its column.

use std::sync::Arc;

use retina_workload::chbench::{ChBenchGenerator, ChBenchScale, ChBenchTables};
use retina_core::storage::MemoryLakeStore;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig};

#[test]
fn generated_stream_replays_without_errors() {
    let config = EngineConfig { shards: 2, file_rows: 8192, gc_interval: None, ..EngineConfig::default() };
    let engine =
        Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(MemoryLakeStore::new())).expect("engine");
    let tables = ChBenchTables::create(&engine).expect("tables");
    let scale = ChBenchScale::for_base_rows(20_000);
    let mut generator = ChBenchGenerator::new(3, scale, tables);
    let loaded = generator.initial_load(1, 2048, |chunk| engine.submit(chunk).map(|_| ())).expect("load");
    for n in 0..3_000 {
        let (_, changes) = generator.next_transaction(n);
        engine.submit(changes).expect("submit");
    }
    engine.sync().expect("every change applies");
    let snapshot = engine.snapshot().expect("snapshot");
    let stock = engine.scan(tables.stock, &snapshot, None).expect("scan");
    let stock_rows: usize = stock.iter().map(|b| b.num_rows()).sum();
    assert_eq!(stock_rows as i32, scale.warehouses * scale.items, "updates keep one visible version per key");
    assert!(loaded > 15_000);
}

#[test]
fn live_workload_keeps_cross_table_invariant_and_reports_figures() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = retina_bench::live::LiveConfig { base_rows: 20_000, seconds: 1.5, rate: 20_000, seed: 5, publish: None };
    let report = retina_bench::live::run(&config, dir.path(), &mut retina_bench::progress::silent).expect("live run");
    assert_eq!(report.consistency_violations, 0);
    assert!(report.q1_latency.count > 0, "queries ran during replay");
    assert!(report.row_changes > 10_000, "{} changes", report.row_changes);
    assert!(report.freshness.count > 0);
    let committed = std::fs::read_dir(dir.path().join("catalog")).expect("catalog folder").filter_map(Result::ok);
    assert!(committed.filter_map(|entry| entry.file_name().into_string().ok()).any(|name| name.starts_with("manifest-")));
}

#[test]
fn durability_benchmark_reports_sane_figures_on_a_small_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = retina_bench::durability::DurabilityBenchConfig {
        base_rows: 5_000,
        rate: 20_000,
        seconds: 1.2,
        checkpoint_every: std::time::Duration::from_millis(200),
        seed: 9,
        gc_effect_changes: 20_000,
    };
    let report = retina_bench::durability::run(&config, dir.path(), &mut retina_bench::progress::silent).expect("run");
    assert!(report.checkpoints_taken >= 2, "{report:?}");
    assert!(report.recovered_rows > 5_000, "{report:?}");
    assert!(report.storage_gc_rows_rewritten > 0, "{report:?}");
    assert!(report.replay_changes_per_s_with_storage_gc > 0.0 && report.replay_changes_per_s_without_storage_gc > 0.0);
    assert!(report.commit_latency_with_checkpoints.count > 0);
}
