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
pub(crate) fn collect_garbage(shared: &EngineShared, shard_inboxes: &[Sender<ShardMessage>]) -> Ts {
    let lwm = shared.txn.low_watermark();
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
