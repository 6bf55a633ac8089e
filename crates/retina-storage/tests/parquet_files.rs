//! Data files are plain Parquet: one row group, `_create_ts` with statistics, readable
//! by a reader that knows nothing of Retina; the catalog survives a reopen.

use std::sync::Arc;

use arrow_schema::DataType;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;
use retina_core::storage::LakeStore;
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_storage::ParquetLakeStore;

fn schema() -> TableSchema {
    TableSchema::from_columns(
        "public.orders",
        &[("id", DataType::Int64, false), ("note", DataType::Utf8, true)],
        &["id"],
    )
    .expect("schema")
}

#[test]
fn flushed_files_are_standard_parquet_with_create_ts_statistics() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Arc::new(ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store"));
    let config = EngineConfig { shards: 1, block_rows: 16, file_rows: 64, batch_changes: 8, gc_interval: None, checkpoint_interval: None, materialize_queries_after: None, storage_gc_interval: None, storage_gc_threshold: 0.5, background_nice: 0 };
    let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), store.clone()).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..100 {
        engine
            .submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}"))] }])
            .expect("submit");
    }
    engine.wait_for_flushes().expect("flush");
    let catalog = store.load_catalog().expect("load").expect("catalog saved");
    let files = &catalog.tables[0].files;
    assert_eq!(files.len(), 1, "64 of 100 rows fill one file");
    let file = &files[0];
    assert_eq!((file.row_count, file.min_create_ts.0, file.max_create_ts.0), (64, 1, 64));

    let reader = SerializedFileReader::new(std::fs::File::open(dir.path().join(&file.path)).expect("file on disk"))
        .expect("any parquet reader opens it");
    let metadata = reader.metadata();
    assert_eq!(metadata.num_row_groups(), 1);
    let columns: Vec<_> = metadata.file_metadata().schema_descr().columns().iter().map(|c| c.name().to_string()).collect();
    assert_eq!(columns, vec!["id", "note", "_create_ts"]);
    let row_group = metadata.row_group(0);
    assert_eq!(row_group.num_rows(), 64);
    match row_group.column(2).statistics() {
        Some(Statistics::Int64(stats)) => {
            assert_eq!((stats.min_opt(), stats.max_opt()), (Some(&1), Some(&64)));
        }
        other => panic!("_create_ts needs int64 statistics, got {other:?}"),
    }
    // One process per data dir: a second open is refused while the first holds it.
    let second = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).err().expect("locked");
    assert!(second.to_string().contains("in use by another Retina process"), "{second}");
    drop(engine);
    drop(store);
    let reopened = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("lock released on drop");
    drop(reopened);
}

#[test]
fn missing_file_and_bad_location_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    let meta = retina_core::catalog::DataFileMeta {
        file_id: retina_core::FileId(7),
        path: "tables/x/0000000000000007.parquet".into(),
        row_count: 1,
        first_row_id: retina_core::RowId(0),
        min_create_ts: retina_core::Ts(1),
        max_create_ts: retina_core::Ts(1),
        size_bytes: 1,
        replaces: Vec::new(),
        column_ranges: Vec::new(),
    };
    let error = store.read_file(&schema(), &meta, &[0], None).expect_err("missing");
    assert!(error.to_string().contains("0000000000000007.parquet"), "{error}");
    let bad = ParquetLakeStore::open("nosuchscheme://bucket/x").err().expect("bad url");
    assert!(bad.to_string().contains("nosuchscheme://bucket/x"), "{bad}");
    std::fs::create_dir_all(dir.path().join("catalog")).expect("mkdir");
    std::fs::write(dir.path().join("catalog/manifest.json"), b"{\"format_version\": 0}").expect("write");
    let old = store.load_catalog().expect_err("old format");
    assert!(old.to_string().contains("format version 0"), "{old}");
}

#[test]
fn objects_round_trip_and_leftover_visibility_is_purged_when_an_engine_opens() {
    use retina_core::storage::LakeStore;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    store.put_object("visibility/1-2-3/7", vec![1, 2, 3]).expect("put");
    store.put_object("visibility/1-2-3/8", vec![4]).expect("put");
    store.put_object("other/keep", vec![5]).expect("put");
    assert_eq!(store.get_object("visibility/1-2-3/7").expect("get"), Some(vec![1, 2, 3]));
    assert_eq!(store.get_object("visibility/none").expect("get"), None);
    store.delete_objects("visibility/1-2-3").expect("delete");
    assert_eq!(store.get_object("visibility/1-2-3/8").expect("get"), None);
    store.put_object("visibility/9-9-9/1", vec![1]).expect("put");
    drop(store);
    // A crashed process left materialized visibility: opening an engine removes it.
    let store = std::sync::Arc::new(ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store"));
    let engine = retina_core::Engine::open(retina_core::EngineConfig::default(), store.clone()).expect("engine");
    assert_eq!(store.get_object("visibility/9-9-9/1").expect("get"), None);
    assert_eq!(store.get_object("other/keep").expect("get"), Some(vec![5]));
    drop(engine);
}

/// A filter on an integer column reads only the pages whose min/max can match (the
/// page index), and the deleted-rows mask still applies to the rows it decoded.
#[test]
fn page_index_skips_pages_that_cannot_match_and_keeps_the_delete_mask() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use retina_core::storage::PageBound;

    let dir = tempfile::tempdir().expect("tempdir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    let rows = 65_536i64;
    let stored = schema().stored_schema();
    let batch = arrow_array::RecordBatch::try_new(
        stored,
        vec![
            Arc::new(arrow_array::Int64Array::from_iter_values(0..rows)),
            Arc::new(arrow_array::StringArray::from_iter_values((0..rows).map(|i| format!("n{i}")))),
            Arc::new(arrow_array::Int64Array::from_iter_values((0..rows).map(|_| 1))),
        ],
    )
    .expect("batch");
    let written = store.write_file(&schema(), retina_core::FileId(3), &[batch]).expect("write");
    let meta = retina_core::catalog::DataFileMeta {
        file_id: retina_core::FileId(3),
        path: written.path,
        row_count: rows as u64,
        first_row_id: retina_core::RowId(0),
        min_create_ts: retina_core::Ts(1),
        max_create_ts: retina_core::Ts(1),
        size_bytes: written.size_bytes,
        replaces: Vec::new(),
        column_ranges: Vec::new(),
    };
    // Row 40,010 is deleted.
    let mut deleted = vec![0u64; (rows as usize).div_ceil(64)];
    deleted[40_010 / 64] |= 1 << (40_010 % 64);
    let ids = |batches: &[arrow_array::RecordBatch]| -> Vec<i64> {
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect()
    };

    let bound = PageBound { column: 0, min: Some(40_000), max: Some(40_020) };
    let (batches, skipped) = store.read_file_pruned(&schema(), &meta, &[0, 1], Some(&deleted), &[bound]).expect("read");
    assert!(skipped >= rows as u64 / 2, "most pages are skipped, {skipped} rows were");
    let kept = ids(&batches);
    assert_eq!(kept.len() as u64, rows as u64 - skipped - 1, "the deleted row is left out of what was decoded");
    assert!((40_000..=40_020).filter(|&id| id != 40_010).all(|id| kept.contains(&id)), "every matching row is read");
    assert!(!kept.contains(&40_010));
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "row order is kept");

    // A bound no page can match skips everything; no bound skips nothing.
    let none = PageBound { column: 0, min: Some(rows), max: None };
    let (batches, skipped) = store.read_file_pruned(&schema(), &meta, &[0], None, &[none]).expect("read");
    assert_eq!((ids(&batches).len(), skipped), (0, rows as u64));
    let (batches, skipped) = store.read_file_pruned(&schema(), &meta, &[0], Some(&deleted), &[]).expect("read");
    assert_eq!((ids(&batches).len() as i64, skipped), (rows - 1, 0));
}
