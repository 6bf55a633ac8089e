//! The engine's threads: named, and background work at a lower priority.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{CoreError, CoreResult};
use crate::replay::shared::EngineShared;

pub(crate) fn sleep_unless_stopped(interval: Duration, stop: &AtomicBool) {
    let step = Duration::from_millis(20);
    let mut slept = Duration::ZERO;
    while slept < interval && !stop.load(SeqCst) {
        std::thread::sleep(step.min(interval - slept));
        slept += step;
    }
}

/// Starts an engine thread. If `body` panics, the engine is marked failed with the
/// panic's message: a shard that died mid-batch never reports its part of a
/// commit, and whoever waited for that commit to become visible (`wait_visible`
/// checks for a failure) waited forever while the checkpoint thread went on.
pub(crate) fn spawn(shared: &Arc<EngineShared>, name: &str, body: impl FnOnce() + Send + 'static) -> CoreResult<JoinHandle<()>> {
    let (shared, thread) = (Arc::clone(shared), name.to_string());
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(move || {
            if let Err(panic) = std::panic::catch_unwind(AssertUnwindSafe(body)) {
                let message = match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
                    (Some(text), _) => text.to_string(),
                    (None, Some(text)) => text.clone(),
                    (None, None) => "no message".to_string(),
                };
                shared.fail(format!("thread {thread} panicked: {message}"));
            }
        })
        .map_err(|e| CoreError::EngineStopped { reason: format!("cannot start thread {name}: {e}") })
}

/// [`spawn`] for background work (flush, checkpoints, GC) at nice value `nice`: on a
/// busy machine the replay path (sink, shards) and queries get the CPU first, so a
/// Parquet encode does not show up as a freshness spike (see `EngineConfig`).
pub(crate) fn spawn_background(shared: &Arc<EngineShared>, name: &str, nice: i32, body: impl FnOnce() + Send + 'static) -> CoreResult<JoinHandle<()>> {
    spawn(shared, name, move || {
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
