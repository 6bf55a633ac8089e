//! Background threads of an engine: memory GC and periodic checkpoints.

use std::sync::atomic::{AtomicBool, Ordering::{Relaxed, SeqCst}};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;

use super::shard::ShardMessage;
use super::shared::EngineShared;
use crate::index::INDEX_PARTS;
use crate::error::{CoreError, CoreResult};
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

pub(crate) fn sleep_unless_stopped(interval: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(20);
    let mut slept = Duration::ZERO;
    while slept < interval && !stop.load(SeqCst) {
        std::thread::sleep(step.min(interval - slept));
        slept += step;
    }
}

pub(crate) fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> CoreResult<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(body)
        .map_err(|e| CoreError::EngineStopped { reason: format!("cannot start thread {name}: {e}") })
}

/// [`spawn`] for background work (flush, checkpoints, GC) at nice value `nice`: on a
/// busy machine the replay path (sink, shards) and queries get the CPU first, so a
/// Parquet encode does not show up as a freshness spike (see `EngineConfig`).
pub(crate) fn spawn_background(name: &str, nice: i32, body: impl FnOnce() + Send + 'static) -> CoreResult<JoinHandle<()>> {
    spawn(name, move || {
        if nice != 0 {
            lower_priority(nice);
        }
        body()
    })
}

#[cfg(target_os = "linux")]
fn lower_priority(nice: i32) {
    // SAFETY: gettid and setpriority only read their integer arguments; on Linux
    // PRIO_PROCESS with a thread id sets that thread's nice value. Failure (e.g. a
    // sandbox forbidding it) leaves the priority as it was, which is harmless.
    unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, thread, nice);
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority(_nice: i32) {}
