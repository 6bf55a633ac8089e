//! The lake on an S3-compatible server (moto, started for real): a data dir given as
//! `s3://BUCKET/PREFIX` with the endpoint and credentials in the URL's options
//! holds flushed files, checkpoints and the catalog; a reopened engine recovers
//! exactly what was written; a missing bucket or an unknown option is a clear error
//! that names the location, and secrets in the URL never appear in it.

mod support;

use std::sync::Arc;

use arrow_schema::DataType;
use retina_core::rows::rows_of;
use retina_core::storage::CatalogStore;
use retina_core::{Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_storage::ParquetLakeStore;
use retina_test_support::{FlakyHttpProxy, LocalS3Server};
use support::lake_files::write_numbered_file;

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
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}").into())] }]).expect("insert");
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
    assert!(message.contains("taking the lease lake/retina.lease"), "names the operation and object: {message}");
    assert!(!message.contains("verysecret"), "the secret key leaked: {message}");

    let unknown = format!("s3://retina/lake?endpoint={}&colour=blue&secret_access_key=verysecret", server.endpoint());
    let message = ParquetLakeStore::open(&unknown).err().expect("unknown option").to_string();
    assert!(message.contains("colour") && message.contains("s3://retina/lake"), "{message}");
    assert!(message.contains("secret_access_key=***") && !message.contains("verysecret"), "{message}");
}

/// Two stores committing to one lake with no lease between them (as two writers
/// would if the lease were bypassed): the conditional create lets exactly one
/// commit each version, and the loser gets an error saying so, on S3 and on a local
/// directory alike. (A commit of the very bytes already there is a retry of the
/// writer's own commit and succeeds, so the two writers commit different catalogs.)
#[test]
fn of_two_writers_committing_the_same_version_exactly_one_wins() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("race").unwrap_or_else(|e| panic!("{e}"));
    let local = tempfile::tempdir().expect("tempdir");
    for lake in [location(&server, "race"), local.path().to_str().expect("utf-8").to_string()] {
        let open = || {
            let (store, prefix) = retina_storage::open_object_store(&lake).expect("object store");
            ParquetLakeStore::with_store(store, prefix).expect("store")
        };
        let (first, second) = (open(), open());
        assert_eq!(first.load_catalog().expect("load"), None);
        assert_eq!(second.load_catalog().expect("load"), None);
        let catalog = retina_core::catalog::CatalogManifest::default();
        let theirs = retina_core::catalog::CatalogManifest { next_file_id: 7, ..catalog.clone() };
        first.save_catalog(&catalog).expect("the first commit of version 1 wins");
        let lost = second.save_catalog(&theirs).expect_err("version 1 is taken").to_string();
        assert!(lost.contains("another writer committed catalog manifest version 1 first"), "{lake}: {lost}");
        first.save_catalog(&catalog).expect("the winner goes on with version 2");
        assert!(open().load_catalog().expect("a third store reads the latest").is_some());
    }
}

/// The lease: a second writer is refused naming the holder and its expiry; a
/// reader needs no lease and may not write; once the holder is gone the next
/// writer starts; a writer whose lease another took over commits nothing more.
#[test]
fn one_writer_holds_the_lease_readers_need_none() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("lease").unwrap_or_else(|e| panic!("{e}"));
    let lake = format!("{}&lease_seconds=0.9", location(&server, "lease"));
    let engine = Engine::open(config(), Arc::new(ParquetLakeStore::open(&lake).expect("first writer"))).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(1), Value::Utf8("one".into())] }]).expect("insert");
    engine.sync().expect("visible");
    engine.checkpoint().expect("checkpoint");

    let refused = ParquetLakeStore::open(&lake).err().expect("a second writer is refused").to_string();
    assert!(refused.contains("holds its lease until") && refused.contains(" pid "), "{refused}");
    assert!(!refused.contains("verysecret"), "{refused}");
    // Renewals keep the lease while the writer runs, well past its duration.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert!(ParquetLakeStore::open(&lake).is_err(), "renewed: still refused");

    let reader = ParquetLakeStore::open_reader(&lake).expect("a reader needs no lease");
    let refused_write = reader.save_catalog(&retina_core::catalog::CatalogManifest::default()).expect_err("read-only");
    assert!(refused_write.to_string().contains("read-only"), "{refused_write}");
    let read_only = Engine::open(config(), Arc::new(reader)).expect("a read-only engine over the checkpoint");
    assert!(read_only.is_read_only());
    let rows = rows_of(&read_only.scan(table, &read_only.snapshot().expect("snapshot"), None).expect("scan")).expect("rows");
    assert_eq!(rows, vec![vec![Value::Int64(1), Value::Utf8("one".into())]]);
    let change = vec![RowChange::Insert { table, row: vec![Value::Int64(2), Value::Utf8("two".into())] }];
    assert!(read_only.submit(change).expect_err("no writes").to_string().contains("read-only"));
    read_only.close().expect("a read-only close writes nothing");

    engine.close().expect("close");
    let next = ParquetLakeStore::open(&lake).expect("the lease was released with the store");

    // Another writer takes the lease over behind this one's back: it stops committing.
    let (store, prefix) = retina_storage::open_object_store(&lake).expect("object store");
    let lease_path = object_store::path::Path::from(format!("{prefix}/{}", retina_storage::LEASE_PATH));
    let usurper = br#"{"owner": "usurper", "expires_at_ms": 99999999999999}"#.to_vec();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(object_store::ObjectStoreExt::put(&*store, &lease_path, usurper.into())).expect("overwrite the lease");
    std::thread::sleep(std::time::Duration::from_millis(700));
    let lost = next.save_catalog(&retina_core::catalog::CatalogManifest::default()).expect_err("lease lost").to_string();
    assert!(lost.contains("lost its lease"), "{lost}");
    let named = ParquetLakeStore::open(&lake).err().expect("the usurper holds it").to_string();
    assert!(named.contains("usurper"), "{named}");
}

/// Reads fetch ranges, not objects: a projection, a page-pruned read and a read
/// with a cached footer each fetch measurably less than the file.
#[test]
fn reads_fetch_only_the_ranges_they_need() {
    use retina_core::storage::{DataFiles, PageBound};
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("ranges").unwrap_or_else(|e| panic!("{e}"));
    let store = ParquetLakeStore::open(&location(&server, "ranges")).expect("store");
    let rows = 65_536i64;
    let meta = write_numbered_file(&store, &schema(), 9, rows, |i| format!("note number {i}"));
    let size = meta.size_bytes;
    let first = store.read_file(&schema(), &meta, &[0, 1, 2], &[]).expect("read all");
    assert!(first.bytes_fetched >= size / 2 && first.bytes_fetched <= size + 64 * 1024, "all columns: {} of {size}", first.bytes_fetched);
    let ids = store.read_file(&schema(), &meta, &[0], &[]).expect("read ids");
    // An object-store lake favours small files (`CompressionGoal::SmallFiles`): the
    // ascending ids are Snappy-compressed to less than half of the file.
    assert!(ids.bytes_fetched * 2 < size, "one column, footer cached: {} of {size}", ids.bytes_fetched);
    let bound = PageBound { column: 0, min: Some(40_000), max: Some(40_020) };
    let both = store.read_file(&schema(), &meta, &[0, 1], &[]).expect("two columns");
    let pruned = store.read_file(&schema(), &meta, &[0, 1], &[bound.clone()]).expect("pruned read");
    assert!(pruned.skipped_rows() > rows as u64 / 2);
    assert!(pruned.bytes_fetched * 4 < both.bytes_fetched * 3, "page-pruned: {} of {}", pruned.bytes_fetched, both.bytes_fetched);
    let pruned_ids = store.read_file(&schema(), &meta, &[0], &[bound]).expect("pruned ids");
    assert!(pruned_ids.bytes_fetched * 2 < ids.bytes_fetched, "page-pruned ids: {} of {}", pruned_ids.bytes_fetched, ids.bytes_fetched);
}

/// Transient server errors are retried with backoff: with every third request
/// answered `503`, a lake still flushes, checkpoints and recovers exactly.
#[test]
fn transient_server_errors_are_retried() {
    let server = LocalS3Server::start().unwrap_or_else(|e| panic!("{e}"));
    server.create_bucket("flaky").unwrap_or_else(|e| panic!("{e}"));
    let proxy = FlakyHttpProxy::start(server.port(), 3).unwrap_or_else(|e| panic!("{e}"));
    let lake = format!("s3://flaky/lake?endpoint={}&allow_http=true&region=us-east-1&access_key_id=test&secret_access_key=test", proxy.endpoint());
    let engine = Engine::open(config(), Arc::new(ParquetLakeStore::open(&lake).expect("store through 503s"))).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..100 {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}").into())] }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flush through 503s");
    engine.close().expect("checkpoint through 503s");
    let engine = Engine::open(config(), Arc::new(ParquetLakeStore::open(&lake).expect("store"))).expect("recover through 503s");
    let table = engine.table_id("shop.items").expect("table");
    let rows = rows_of(&engine.scan(table, &engine.snapshot().expect("snapshot"), None).expect("scan")).expect("rows");
    assert_eq!(rows.len(), 100);
    assert!(proxy.failures() >= 5, "the proxy failed {} requests", proxy.failures());
}

/// A permanent refusal (403: credentials the server does not know) is a clear error
/// naming the lake, the operation and the object, at once: it is not retried.
#[test]
fn forbidden_is_a_clear_error_and_not_retried() {
    let server = LocalS3Server::start_requiring_auth().unwrap_or_else(|e| panic!("{e}"));
    let lake = format!(
        "s3://guarded/lake?endpoint={}&allow_http=true&region=us-east-1&access_key_id=nobody&secret_access_key=verysecret",
        server.endpoint()
    );
    let started = std::time::Instant::now();
    let message = ParquetLakeStore::open(&lake).err().expect("refused").to_string();
    assert!(message.contains("403") || message.contains("Forbidden") || message.contains("InvalidAccessKeyId"), "{message}");
    assert!(message.contains("s3://guarded/lake") && message.contains("lake/retina.lease"), "names the lake and object: {message}");
    assert!(!message.contains("verysecret"), "the secret leaked: {message}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "a 403 was retried for {:?}", started.elapsed());
}
