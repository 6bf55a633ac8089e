//! The lake on an S3-compatible server (moto, started for real): a data dir given as
//! `s3://BUCKET/PREFIX` with the endpoint and credentials in the URL's options
//! holds flushed files, checkpoints and the catalog; a reopened engine recovers
//! exactly what was written; a missing bucket or an unknown option is a clear error
//! that names the location, and secrets in the URL never appear in it.

use std::sync::Arc;

use arrow_schema::DataType;
use retina_core::rows::rows_of;
use retina_core::{Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_storage::ParquetLakeStore;
use retina_test_support::LocalS3Server;

fn schema() -> TableSchema {
    TableSchema::from_columns("shop.items", &[("id", DataType::Int64, false), ("note", DataType::Utf8, true)], &["id"]).expect("schema")
}

fn location(server: &LocalS3Server, bucket: &str) -> String {
    format!(
        "s3://{bucket}/lake?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=verysecret",
        server.endpoint()
    )
}

fn config() -> EngineConfig {
    EngineConfig { shards: 2, block_rows: 16, file_rows: 64, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() }
}

#[test]
fn a_data_dir_on_s3_holds_files_checkpoints_and_catalog_and_recovers() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("retina").unwrap_or_else(|e| panic!("{e}"));
    let location = location(&server, "retina");
    let engine = Engine::open(config(), Arc::new(ParquetLakeStore::open(&location).expect("s3 store"))).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..150 {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}"))] }]).expect("insert");
    }
    engine.submit((0..10).map(|id| RowChange::Delete { table, key: vec![Value::Int64(id)] }).collect()).expect("delete");
    engine.wait_for_flushes().expect("flush to s3");
    engine.close().expect("checkpoint to s3");

    let engine = Engine::open(config(), Arc::new(ParquetLakeStore::open(&location).expect("s3 store"))).expect("recover from s3");
    let report = engine.recovery_report().expect("recovered").clone();
    assert!(report.files >= 2, "flushed files come back from s3: {report:?}");
    let table = engine.table_id("shop.items").expect("table in the catalog");
    let snapshot = engine.snapshot().expect("snapshot");
    let mut ids: Vec<i64> = rows_of(&engine.scan(table, &snapshot, None).expect("scan"))
        .expect("rows")
        .iter()
        .map(|row| match row[0] {
            Value::Int64(id) => id,
            ref other => panic!("id {other:?}"),
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (10..150).collect::<Vec<_>>(), "exactly the rows written, deletes applied");
}

#[test]
fn a_missing_bucket_and_an_unknown_option_are_clear_errors_without_secrets() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    let missing = location(&server, "no-such-bucket");
    let engine = ParquetLakeStore::open(&missing).and_then(|store| {
        Engine::open(config(), Arc::new(store)).map_err(|e| retina_storage::StorageError::Location { location: "engine".into(), reason: e.to_string() })
    });
    let message = match engine {
        Ok(_) => panic!("a data dir in a missing bucket opened"),
        Err(error) => error.to_string(),
    };
    assert!(message.contains("no-such-bucket") || message.contains("NoSuchBucket"), "{message}");
    assert!(!message.contains("verysecret"), "the secret key leaked: {message}");

    let unknown = format!("s3://retina/lake?endpoint={}&colour=blue&secret_access_key=verysecret", server.endpoint());
    let message = ParquetLakeStore::open(&unknown).err().expect("unknown option").to_string();
    assert!(message.contains("colour") && message.contains("s3://retina/lake"), "{message}");
    assert!(message.contains("secret_access_key=***") && !message.contains("verysecret"), "{message}");
}
