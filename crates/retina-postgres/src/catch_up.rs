//! Running a source until the mirror has caught up with the server, for one-shot
//! runs (`retina ingest postgres://…`) that mirror what is there and exit, as every
//! other source's ingest does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use retina_core::Engine;

use crate::error::PgSourceResult;
use crate::lsn::Lsn;
use crate::replicator::PgSource;
use crate::status::{Phase, PgSourceStatus};

impl PgSource {
    /// Runs (copy included) until everything the server had written when streaming
    /// began is applied and no transaction arrived for `quiet`, then stops cleanly.
    /// A failure ends it with the error, like [`run`](Self::run).
    pub fn run_until_caught_up(&self, engine: &Engine, quiet: Duration) -> PgSourceResult<()> {
        let finished = AtomicBool::new(false);
        let status = self.status();
        let stop = self.stop_flag();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let mut last_count = u64::MAX;
                let mut last_change = Instant::now();
                while !finished.load(Ordering::Relaxed) {
                    let snapshot = status.lock().clone();
                    if snapshot.transactions != last_count {
                        last_count = snapshot.transactions;
                        last_change = Instant::now();
                    }
                    if caught_up(&snapshot) && last_change.elapsed() >= quiet {
                        stop.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
            let result = self.run(engine);
            finished.store(true, Ordering::Relaxed);
            result
        })
    }
}

/// Streaming, and applied at least as far as the server's position one poll ago
/// (the walsender reports WAL it skipped by the next keepalive, which the source
/// asks for at every poll).
fn caught_up(status: &PgSourceStatus) -> bool {
    status.phase == Phase::Streaming
        && status.server_wal_end_before > Lsn::ZERO
        && status.applied_lsn >= status.server_wal_end_before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caught_up_needs_streaming_and_a_polled_position_reached() {
        let mut status = PgSourceStatus { phase: Phase::Streaming, applied_lsn: Lsn(500), ..PgSourceStatus::default() };
        assert!(!caught_up(&status), "no position polled yet");
        status.server_wal_end_before = Lsn(600);
        assert!(!caught_up(&status));
        status.applied_lsn = Lsn(600);
        assert!(caught_up(&status));
        status.phase = Phase::Reconnecting;
        assert!(!caught_up(&status));
    }
}
