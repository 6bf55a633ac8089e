//! The engine's threads: named, and background work at a lower priority.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::{CoreError, CoreResult};

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
