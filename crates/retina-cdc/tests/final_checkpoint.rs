//! A finished ingest's final checkpoint does not write full files a second time: the
//! flusher writes them as data files, and checkpoint segments hold only the rows of
//! files that are not full.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use common::*;
use retina_cdc::SinkOptions;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig};
use retina_storage::ParquetLakeStore;

/// The ids of the lake's data files, and of the files its checkpoint segments hold
/// rows of (`<file id>-<first row>-<ts>.parquet`), over all tables.
fn file_ids(lake: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let names = |folder: &Path| -> Vec<String> {
        match std::fs::read_dir(folder) {
            Ok(entries) => entries.map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect(),
            Err(_) => Vec::new(),
        }
    };
    let (mut data, mut segments) = (BTreeSet::new(), BTreeSet::new());
    for table in names(&lake.join("tables")) {
        let folder = lake.join("tables").join(table);
        data.extend(names(&folder).iter().filter_map(|name| name.strip_suffix(".parquet")).map(String::from));
        segments.extend(names(&folder.join("_segments")).iter().filter_map(|name| name.split_once('-')).map(|(id, _)| id.to_string()));
    }
    (data, segments)
}

#[test]
fn a_finished_ingest_writes_each_full_file_once() {
    // Slow flushes keep full files queued when the source ends.
    let scenario = fail::FailScenario::setup();
    fail::cfg("flush::after-write", "sleep(100)").expect("failpoint");
    let dir = tempfile::tempdir().expect("temp dir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    let config =
        EngineConfig { shards: 2, gc_interval: None, checkpoint_interval: None, block_rows: 64, file_rows: 256, ..EngineConfig::default() };
    let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(store)).expect("engine");
    let lines: Vec<String> = (0..2000).map(|id| event("c", id, Some("x"), None)).collect();
    ingest(&engine, &lines, SinkOptions::default()).expect("ingest");

    let (data, segments) = file_ids(dir.path());
    assert!(data.len() >= 4, "full files were flushed: {data:?}");
    assert!(!segments.is_empty(), "the files that are not full are in checkpoint segments");
    let twice: Vec<&String> = segments.intersection(&data).collect();
    assert!(twice.is_empty(), "written as data files and as checkpoint segments: {twice:?}");
    assert_eq!(rows(&engine, "s.t").len(), 2000);
    engine.close().expect("close");
    scenario.teardown();
}
