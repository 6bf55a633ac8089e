//! Data files are plain Parquet: one row group, `_create_ts` with statistics, readable
//! by a reader that knows nothing of Retina; the catalog survives a reopen.

mod support;

use std::sync::Arc;

use arrow_schema::DataType;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::statistics::Statistics;
use retina_core::storage::{CatalogStore, DataFiles};
use retina_core::{EmbeddedTransactionService, Engine, EngineConfig, RowChange, TableSchema, Value};
use retina_storage::ParquetLakeStore;
use support::lake_files::{latest_version, write_numbered_file};

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
    let config = EngineConfig { shards: 1, block_rows: 16, file_rows: 64, batch_changes: 8, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, storage_gc_threshold: 0.5, background_nice: 0 };
    let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), store.clone()).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..100 {
        engine
            .submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}").into())] }])
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
    let error = store.read_file(&schema(), &meta, &[0], &[]).expect_err("missing");
    assert!(error.to_string().contains("0000000000000007.parquet"), "{error}");
    let bad = ParquetLakeStore::open("nosuchscheme://bucket/x").err().expect("bad url");
    assert!(bad.to_string().contains("nosuchscheme://bucket/x"), "{bad}");
    std::fs::create_dir_all(dir.path().join("catalog")).expect("mkdir");
    std::fs::write(dir.path().join("catalog/manifest.json"), b"{\"format_version\": 0}").expect("write");
    let old = store.load_catalog().expect_err("old format");
    assert!(old.to_string().contains("format version 0"), "{old}");
}

/// A filter on an integer column reads only the pages whose min/max can match (the
/// page index), and says which rows it decoded (the core lines its delete mask up
/// with them).
#[test]
fn page_index_skips_pages_that_cannot_match_and_names_the_rows_it_decoded() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use retina_core::storage::PageBound;

    let dir = tempfile::tempdir().expect("tempdir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    let rows = 65_536i64;
    let meta = write_numbered_file(&store, &schema(), 3, rows, |i| format!("n{i}"));
    let ids = |batches: &[arrow_array::RecordBatch]| -> Vec<i64> {
        batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect()
    };

    let bound = PageBound { column: 0, min: Some(40_000), max: Some(40_020) };
    let decoded = store.read_file(&schema(), &meta, &[0, 1], &[bound]).expect("read");
    let skipped = decoded.skipped_rows();
    assert!(skipped >= rows as u64 / 2, "most pages are skipped, {skipped} rows were");
    let kept = ids(&decoded.batches);
    assert_eq!(kept.len() as u64, rows as u64 - skipped);
    assert!((40_000..=40_020).all(|id| kept.contains(&id)), "every matching row is read");
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "row order is kept");
    let selected = decoded.selected.as_ref().expect("pages were left out");
    let named: Vec<i64> = (0..rows).filter(|&row| selected[row as usize]).collect();
    assert_eq!(named, kept, "`selected` names exactly the decoded rows (ids equal row numbers here)");

    // A bound no page can match skips everything; no bound skips nothing.
    let none = PageBound { column: 0, min: Some(rows), max: None };
    let decoded = store.read_file(&schema(), &meta, &[0], &[none]).expect("read");
    assert_eq!((ids(&decoded.batches).len(), decoded.skipped_rows()), (0, rows as u64));
    let decoded = store.read_file(&schema(), &meta, &[0], &[]).expect("read");
    assert_eq!((ids(&decoded.batches).len() as i64, decoded.skipped_rows()), (rows, 0));
}

/// A catalog of format version 1 (files without column ranges) opens: recovery reads
/// each such file once and records the same ranges a flush records, and the next
/// catalog save writes version 2.
#[test]
fn a_version_1_catalog_gets_its_column_ranges_recorded_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = dir.path().to_str().expect("utf-8");
    let config = EngineConfig { shards: 1, block_rows: 16, file_rows: 64, batch_changes: 8, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
    let engine = Engine::open(config.clone(), Arc::new(ParquetLakeStore::open(location).expect("store"))).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    for id in 0..200 {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}").into())] }]).expect("insert");
    }
    engine.wait_for_flushes().expect("flush");
    engine.close().expect("close");

    let manifest_path = latest_version(dir.path(), "catalog", "manifest");
    let mut manifest: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest_path).expect("read")).expect("json");
    let recorded = manifest["tables"][0]["files"].clone();
    assert!(recorded.as_array().is_some_and(|files| !files.is_empty() && files.iter().all(|f| f["column_ranges"].is_array())), "{recorded}");
    manifest["format_version"] = 1.into();
    for file in manifest["tables"][0]["files"].as_array_mut().expect("files") {
        file.as_object_mut().expect("file").remove("column_ranges");
    }
    std::fs::write(&manifest_path, serde_json::to_vec(&manifest).expect("encode")).expect("write");

    let store = ParquetLakeStore::open(location).expect("store");
    let engine = Engine::open(config.clone(), Arc::new(store)).expect("open a version-1 catalog");
    let files = recorded.as_array().map_or(0, Vec::len);
    assert_eq!(engine.recovery_report().expect("recovered").files_given_column_ranges, files);
    engine.close().expect("close");
    let migrated_path = latest_version(dir.path(), "catalog", "manifest");
    assert_ne!(migrated_path, manifest_path, "the migration is committed as a new version");
    let migrated: serde_json::Value = serde_json::from_slice(&std::fs::read(&migrated_path).expect("read")).expect("json");
    assert_eq!(migrated["format_version"], 2);
    // The reopened engine may flush the checkpointed buffer too: compare the old files.
    let now = migrated["tables"][0]["files"].as_array().expect("files");
    assert_eq!(serde_json::Value::from(now[..files].to_vec()), recorded, "the same ranges a flush records");

    let engine = Engine::open(config, Arc::new(ParquetLakeStore::open(location).expect("store"))).expect("reopen");
    assert_eq!(engine.recovery_report().expect("recovered").files_given_column_ranges, 0, "recorded once");
}

/// One shard, 64-row files, no background checkpoints or GC.
fn small_files() -> EngineConfig {
    EngineConfig { shards: 1, block_rows: 16, file_rows: 64, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() }
}

/// An engine over the lake at `location` with `public.orders` rows `ids` inserted
/// one transaction each (notes `n<id>`).
fn open_with_orders(location: &str, config: &EngineConfig, ids: std::ops::Range<i64>) -> (Engine, retina_core::TableId) {
    let engine = Engine::open(config.clone(), Arc::new(ParquetLakeStore::open(location).expect("store"))).expect("engine");
    let table = engine.create_table(schema()).expect("table");
    for id in ids {
        engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id), Value::Utf8(format!("n{id}").into())] }]).expect("insert");
    }
    (engine, table)
}

/// A lake written before the catalog and checkpoint were versioned (one replaced
/// `catalog/manifest.json` and `checkpoints/latest.json`) opens as it was, and its
/// next commits move it to numbered versions, removing the old objects.
#[test]
fn a_lake_from_before_versioned_commits_opens_and_moves_to_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = dir.path().to_str().expect("utf-8");
    let config = small_files();
    let (engine, _) = open_with_orders(location, &config, 0..100);
    engine.close().expect("close");
    // Rewind the layout: the latest versions become the legacy objects.
    for (folder, stem, legacy) in [("catalog", "manifest", "catalog/manifest.json"), ("checkpoints", "checkpoint", "checkpoints/latest.json")] {
        std::fs::rename(latest_version(dir.path(), folder, stem), dir.path().join(legacy)).expect("rename");
        for entry in std::fs::read_dir(dir.path().join(folder)).expect("list").filter_map(Result::ok) {
            if entry.file_name().to_string_lossy().starts_with(&format!("{stem}-")) {
                std::fs::remove_file(entry.path()).expect("remove");
            }
        }
    }
    let engine = Engine::open(config, Arc::new(ParquetLakeStore::open(location).expect("store"))).expect("open the old layout");
    let table = engine.table_id("public.orders").expect("table");
    let rows = retina_core::rows::rows_of(&engine.scan(table, &engine.snapshot().expect("snapshot"), None).expect("scan")).expect("rows");
    assert_eq!(rows.len(), 100, "every row of the old layout");
    engine.close().expect("close");
    assert!(!dir.path().join("catalog/manifest.json").exists() && !dir.path().join("checkpoints/latest.json").exists());
    // Numbered versions from 1 on (flushes after the reopen commit more than one).
    let first_kept = std::fs::read_dir(dir.path().join("catalog")).expect("list").filter_map(Result::ok).count();
    assert!(first_kept >= 1 && latest_version(dir.path(), "checkpoints", "checkpoint").exists());
}

/// A checkpoint of format 1 (every file's delete bitmap as dense base64 words) still
/// opens with the same rows, and the next checkpoint writes format 2 (sizes: the
/// unit tests of `retina_core::checkpoint`).
#[test]
fn a_checkpoint_with_dense_bitmaps_opens_and_the_next_is_compact() {
    use base64::Engine as _;
    use retina_core::storage::CheckpointStore;

    let dir = tempfile::tempdir().expect("tempdir");
    let location = dir.path().to_str().expect("utf-8");
    let config = small_files();
    let (engine, table) = open_with_orders(location, &config, 0..200);
    // Deletes in flushed files (ids below 192) and in the write buffer.
    let deleted: Vec<i64> = vec![3, 70, 71, 150, 195];
    engine.submit(deleted.iter().map(|&id| RowChange::Delete { table, key: vec![Value::Int64(id)] }).collect()).expect("delete");
    engine.close().expect("close");

    let path = latest_version(dir.path(), "checkpoints", "checkpoint");
    let compact = std::fs::read(&path).expect("read");
    let typed = ParquetLakeStore::open(location).expect("store").load_checkpoint().expect("load").expect("a checkpoint");
    let mut json: serde_json::Value = serde_json::from_slice(&compact).expect("json");
    assert_eq!(json["format_version"], 2);
    json["format_version"] = 1.into();
    let files = json["tables"][0]["files"].as_array_mut().expect("files");
    assert!(files.iter().filter(|f| f["deleted"]["words"].as_u64().unwrap_or(0) > 0).count() >= 3, "deletes in several files");
    for (file, saved) in files.iter_mut().zip(&typed.tables[0].files) {
        let words = (saved.rows as usize).div_ceil(64);
        let dense: Vec<u8> = (0..words).flat_map(|i| saved.deleted.get(i).copied().unwrap_or(0).to_le_bytes()).collect();
        file["deleted"] = base64::engine::general_purpose::STANDARD.encode(dense).into();
    }
    std::fs::write(&path, serde_json::to_vec(&json).expect("encode")).expect("rewrite as format 1");

    let engine = Engine::open(config, Arc::new(ParquetLakeStore::open(location).expect("store"))).expect("open format 1");
    let table = engine.table_id("public.orders").expect("table");
    let rows = retina_core::rows::rows_of(&engine.scan(table, &engine.snapshot().expect("snapshot"), None).expect("scan")).expect("rows");
    let mut ids: Vec<i64> = rows.iter().map(|row| match row[0] { Value::Int64(id) => id, ref other => panic!("id {other:?}") }).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..200).filter(|id| !deleted.contains(id)).collect::<Vec<_>>());
    engine.close().expect("close");
    let next: serde_json::Value = serde_json::from_slice(&std::fs::read(latest_version(dir.path(), "checkpoints", "checkpoint")).expect("read")).expect("json");
    assert_eq!(next["format_version"], 2, "the next checkpoint is written in the current format");
}

/// A read told which rows a scan drops leaves them out as it decodes, and says so; with
/// page pruning in play it decodes every row it reads and says that instead.
#[test]
fn dropped_rows_are_left_out_while_decoding() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::Int64Type;
    use retina_core::storage::PageBound;

    let dir = tempfile::tempdir().expect("tempdir");
    let store = ParquetLakeStore::open(dir.path().to_str().expect("utf-8")).expect("store");
    let rows = 65_536i64;
    let meta = write_numbered_file(&store, &schema(), 4, rows, |i| format!("n{i}"));
    let mut dropped = vec![0u64; (rows as usize).div_ceil(64)];
    for row in (0..rows as usize).filter(|row| row % 97 == 5 || (10_000..10_300).contains(row)) {
        dropped[row / 64] |= 1 << (row % 64);
    }
    let decoded = store.read_file_dropping(&schema(), &meta, &[0, 1], &[], &dropped).expect("read");
    assert!(decoded.dropped_left_out);
    let ids: Vec<i64> = decoded.batches.iter().flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec()).collect();
    let notes: Vec<String> = decoded.batches.iter().flat_map(|b| b.column(1).as_string::<i32>().iter().map(|n| n.expect("set").to_string()).collect::<Vec<_>>()).collect();
    let expected: Vec<i64> = (0..rows).filter(|&row| dropped[row as usize / 64] >> (row % 64) & 1 == 0).collect();
    assert_eq!(ids, expected);
    assert_eq!(notes, expected.iter().map(|i| format!("n{i}")).collect::<Vec<_>>());

    let bound = PageBound { column: 0, min: Some(40_000), max: Some(40_020) };
    let pruned = store.read_file_dropping(&schema(), &meta, &[0], &[bound], &dropped).expect("read");
    assert!(!pruned.dropped_left_out && pruned.selected.is_some(), "pruned reads decode every row they keep");
}

/// A local lake favours fast scans: a column of distinct numbers is written plain and
/// uncompressed. Asked for small files, the same column is Snappy-compressed and the
/// file is smaller; both read back the same rows.
#[test]
fn a_lake_compresses_distinct_numbers_only_when_asked_for_small_files() {
    use parquet::basic::Compression;
    use retina_storage::CompressionGoal;
    let file_of = |store: ParquetLakeStore, dir: &std::path::Path| {
        let meta = write_numbered_file(&store, &schema(), 1, 65_536, |i| format!("note {}", i % 10));
        let reader = SerializedFileReader::new(std::fs::File::open(dir.join(&meta.path)).expect("file on disk")).expect("parquet");
        let id_compression = reader.metadata().row_group(0).column(0).compression();
        let read = store.read_file(&schema(), &meta, &[0, 1], &[]).expect("read back");
        let rows: usize = read.batches.iter().map(|batch| batch.num_rows()).sum();
        let ids: Vec<i64> = read
            .batches
            .iter()
            .flat_map(|batch| arrow_array::cast::AsArray::as_primitive::<arrow_array::types::Int64Type>(batch.column(0)).values().to_vec())
            .collect();
        assert_eq!((rows, ids.first(), ids.last()), (65_536, Some(&0), Some(&65_535)));
        (id_compression, meta.size_bytes)
    };
    let (fast_dir, small_dir) = (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let fast = ParquetLakeStore::open(fast_dir.path().to_str().expect("utf-8")).expect("store");
    let (fast_ids, fast_bytes) = file_of(fast, fast_dir.path());
    let small = ParquetLakeStore::open(small_dir.path().to_str().expect("utf-8")).expect("store").compressing_for(CompressionGoal::SmallFiles);
    let (small_ids, small_bytes) = file_of(small, small_dir.path());
    assert_eq!(fast_ids, Compression::UNCOMPRESSED);
    assert!(matches!(small_ids, Compression::SNAPPY), "{small_ids:?}");
    assert!(small_bytes * 4 < fast_bytes * 3, "small files: {small_bytes} bytes against {fast_bytes}");
}
