//! Memory GC: visibility folded below LWM in every file, and now and then the
//! shards' indexes pruned.

use std::sync::atomic::Ordering::Relaxed;

use crossbeam_channel::Sender;

use crate::replay::messages::ShardMessage;
use crate::replay::shared::EngineShared;
use crate::index::INDEX_PARTS;
use crate::types::Ts;

/// Index GC of one part of the shards' indexes runs once per this many memory-GC
/// runs: it walks keys, while visibility GC only touches tiles, so it would cost
/// replay far more if it ran as often. A full pass takes `INDEX_PARTS` times this
/// many runs (48: about 5 s at the default 100 ms).
const INDEX_GC_EVERY: u64 = 3;

/// Memory GC: fold visibility below LWM in every file, and now and then prune the
/// shards' indexes.
///
/// The fold runs only when LWM moved since the last one. Every delete at or below
/// an LWM was applied before that LWM could be read (it is at most HWM, and a ts
/// below HWM is applied in every shard), so a second fold at the same LWM finds
/// nothing; a delete applied since is above it, or at it when LWM was HWM, and
/// then the commit that makes it visible moves LWM. An idle engine, or one whose
/// LWM a long query holds, visited every tile of every file ten times a second
/// for nothing (~0.8% of a core at 100M rows).
pub(crate) fn collect_garbage(shared: &EngineShared, shard_inboxes: &[Sender<ShardMessage>]) -> Ts {
    let lwm = shared.txn.low_watermark();
    let mut folded_at = shared.visibility_folded_at.lock();
    if *folded_at != Some(lwm) {
        shared.stats.visibility_gc_passes.fetch_add(1, Relaxed);
        let tables = shared.registry.read().tables.clone();
        for table in tables {
            let files = table.files();
            for file in &files.flushed {
                file.visibility.collect_garbage(lwm);
            }
            fail::fail_point!("gc::between-files");
            for file in &files.virtual_files {
                file.visibility().collect_garbage(lwm);
            }
        }
        *folded_at = Some(lwm);
    }
    drop(folded_at);
    let runs = shared.stats.gc_runs.fetch_add(1, Relaxed);
    if runs % INDEX_GC_EVERY == 0 {
        let part = (runs / INDEX_GC_EVERY) as usize % INDEX_PARTS;
        for inbox in shard_inboxes {
            // A full inbox means a busy shard: skip this round rather than block GC.
            let _ = inbox.try_send(ShardMessage::CollectIndexGarbage { lwm, part });
        }
    }
    lwm
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_schema::DataType;

    use crate::replay::config::EngineConfig;
    use crate::replay::engine::Engine;
    use crate::schema::TableSchema;
    use crate::storage::MemoryLakeStore;
    use crate::txn::EmbeddedTransactionService;
    use crate::value::Value;
    use crate::RowChange;

    fn pending_entries(engine: &Engine) -> usize {
        let table = &engine.tables()[0];
        let files = table.files();
        files.flushed.iter().map(|f| f.visibility.pending_entries()).sum::<usize>()
            + files.virtual_files.iter().map(|f| f.visibility().pending_entries()).sum::<usize>()
    }

    /// The fold runs when LWM moved, and folds every delete at or below it; with
    /// no commit since, or under a snapshot that holds LWM, it is skipped.
    #[test]
    fn visibility_is_folded_once_per_lwm() {
        let config = EngineConfig { shards: 2, block_rows: 4, file_rows: 8, batch_changes: 1, gc_interval: None, checkpoint_interval: None, storage_gc_interval: None, ..EngineConfig::default() };
        let engine = Engine::start(config, Arc::new(EmbeddedTransactionService::new()), Arc::new(MemoryLakeStore::new())).expect("engine");
        let table = engine.create_table(TableSchema::from_columns("s.t", &[("id", DataType::Int64, false)], &["id"]).expect("schema")).expect("table");
        let passes = || engine.shared.stats.visibility_gc_passes.load(std::sync::atomic::Ordering::Relaxed);
        let delete = |id: i64| {
            engine.submit(vec![RowChange::Delete { table, key: vec![Value::Int64(id)] }]).expect("delete");
            engine.sync().expect("sync");
        };
        for id in 0..20 {
            engine.submit(vec![RowChange::Insert { table, row: vec![Value::Int64(id)] }]).expect("insert");
        }
        engine.wait_for_flushes().expect("flush");
        delete(1);
        delete(12);
        engine.collect_garbage();
        assert_eq!((passes(), pending_entries(&engine)), (1, 0), "both deletes folded");
        engine.collect_garbage();
        engine.collect_garbage();
        assert_eq!(passes(), 1, "nothing committed since: no fold");

        // A snapshot holds LWM: deletes after it stay pending, and folds are skipped.
        let held = engine.snapshot().expect("snapshot");
        delete(2);
        delete(13);
        engine.collect_garbage();
        let (held_passes, held_pending) = (passes(), pending_entries(&engine));
        engine.collect_garbage();
        assert_eq!(passes(), held_passes, "LWM did not move");
        assert_eq!(held_pending, 2, "deletes above LWM stay pending");
        drop(held);
        engine.collect_garbage();
        assert_eq!((passes(), pending_entries(&engine)), (held_passes + 1, 0), "LWM moved: folded");
    }
}
