//! Shared test helpers: an engine in a temp dir, ingesting lines, reading tables back.
#![allow(dead_code)]

use std::sync::Arc;

use retina_cdc::ingest::{run, StopWhen};
use retina_cdc::source::lines::LineSource;
use retina_cdc::{CdcResult, SinkOptions};
use retina_core::rows::rows_of;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, Row};
use retina_storage::ParquetLakeStore;

pub struct TestEngine {
    pub engine: Engine,
    pub dir: tempfile::TempDir,
}

pub fn engine() -> TestEngine {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8 temp dir")).expect("store");
    let config = EngineConfig { shards: 2, gc_interval: None, ..EngineConfig::default() };
    let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(store)).expect("engine");
    TestEngine { engine, dir }
}

pub fn ingest(engine: &Engine, lines: &[String], options: SinkOptions) -> CdcResult<retina_cdc::ingest::IngestReport> {
    let text = lines.join("\n") + "\n";
    let mut source = LineSource::from_reader("test".into(), std::io::Cursor::new(text.into_bytes()));
    run(engine, "file:test.jsonl", &mut source, options, StopWhen::default())
}

/// Default sink options, with `table`'s primary key given as `column`.
pub fn keyed(table: &str, column: &str) -> SinkOptions {
    let mut options = SinkOptions::default();
    options.primary_keys.insert(table.into(), vec![column.into()]);
    options
}

/// All visible rows of `table`, sorted by their debug text.
pub fn rows(engine: &Engine, table: &str) -> Vec<Row> {
    let Some(id) = engine.table_id(table) else { return Vec::new() };
    let snapshot = engine.snapshot().expect("snapshot");
    let batches = engine.scan(id, &snapshot, None).expect("scan");
    let mut rows = rows_of(&batches).expect("rows");
    rows.sort_by_key(|r| format!("{r:?}"));
    rows
}

pub fn begin(id: &str) -> String {
    format!(r#"{{"status":"BEGIN","id":"{id}","event_count":null,"data_collections":null}}"#)
}

pub fn end(id: &str, count: u64, table: &str) -> String {
    format!(r#"{{"status":"END","id":"{id}","event_count":{count},"data_collections":[{{"data_collection":"{table}","event_count":{count}}}]}}"#)
}

pub const SCHEMA: &str = r#"{"type":"struct","name":"s.t.Envelope","fields":[{"type":"struct","optional":true,"field":"before","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]},{"type":"struct","optional":true,"field":"after","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}]},{"type":"string","optional":false,"field":"op"}]}"#;
pub const KEY_SCHEMA: &str = r#"{"type":"struct","name":"s.t.Key","fields":[{"type":"int64","optional":false,"field":"id"}]}"#;

/// A keyed change event of table `s.t` (`id` int64 key, `name` text).
pub fn event(op: &str, id: i64, name: Option<&str>, txn: Option<(&str, u64)>) -> String {
    let image = |n: Option<&str>| match n {
        Some(n) => format!(r#"{{"id":{id},"name":"{n}"}}"#),
        None => "null".to_string(),
    };
    let (before, after) = match op {
        "d" => (format!(r#"{{"id":{id},"name":null}}"#), "null".to_string()),
        _ => ("null".to_string(), image(name)),
    };
    let transaction = match txn {
        Some((tid, order)) => format!(r#"{{"id":"{tid}","total_order":{order},"data_collection_order":{order}}}"#),
        None => "null".into(),
    };
    let payload = format!(
        r#"{{"before":{before},"after":{after},"source":{{"connector":"postgresql","db":"d","schema":"s","table":"t","txId":{}}},"op":"{op}","transaction":{transaction}}}"#,
        txn.map_or(id as u64, |(t, _)| t.len() as u64)
    );
    format!(r#"{{"key":{{"schema":{KEY_SCHEMA},"payload":{{"id":{id}}}}},"value":{{"schema":{SCHEMA},"payload":{payload}}}}}"#)
}
