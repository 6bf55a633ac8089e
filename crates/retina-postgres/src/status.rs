//! What the source reports about itself while it runs: phase, positions, lag, counts.
//! Shared with whoever shows it (`retina.sources`, `/metrics`, the benchmarks).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::lsn::Lsn;

/// The source's phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    #[default]
    Starting,
    Copying,
    Streaming,
    /// The session was lost; waiting to start a new one from the durable position.
    Reconnecting,
    Stopped,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Copying => "copying",
            Phase::Streaming => "streaming",
            Phase::Reconnecting => "reconnecting",
            Phase::Stopped => "stopped",
            Phase::Failed => "failed",
        }
    }
}

/// A snapshot of the source's progress.
#[derive(Clone, Debug, Default)]
pub struct PgSourceStatus {
    pub phase: Phase,
    /// The slot's consistent point when this run created it (and copied).
    pub consistent_point: Option<Lsn>,
    pub copied_rows: u64,
    /// Highest WAL position received from the server (data or keepalive).
    pub received_lsn: Lsn,
    /// The server's WAL position: polled (`pg_current_wal_lsn()`) every half second
    /// while streaming, and raised by what the stream itself says.
    pub server_wal_end: Lsn,
    /// The position polled before the last one. The walsender skips WAL that is not
    /// ours without telling us until its next keepalive, so only a position at least
    /// one poll old that is still not applied means we are really behind.
    pub server_wal_end_before: Lsn,
    /// Sessions started again after a connection loss, in all.
    pub reconnects: u64,
    /// Attempts since the last session that reached streaming.
    pub reconnect_attempts: u32,
    /// Everything before it is applied (visible soon after): the end LSN of the last
    /// source transaction submitted, or a keepalive's position while none was open.
    pub applied_lsn: Lsn,
    /// What the server was last told is flushed (durable in Retina).
    pub confirmed_lsn: Lsn,
    /// Source commit time (µs since the Unix epoch) of the last applied transaction.
    pub last_commit_micros: Option<i64>,
    pub transactions: u64,
    pub row_changes: u64,
    /// Transactions received again after a restart and dropped (already applied).
    pub duplicate_transactions: u64,
    pub error: Option<String>,
    /// Tables left out of the publication Retina created (no primary key or replica
    /// identity), so an operator sees what is not mirrored and why.
    pub left_out: Vec<String>,
    /// A table joining the publication being copied now.
    pub syncing: Option<String>,
    /// Tables that joined while the source ran, with the position of their copy.
    pub synced: Vec<String>,
    /// Tables paused after an error of theirs, with it (see `table_pause`).
    pub paused: Vec<(String, String)>,
}

impl PgSourceStatus {
    /// Records a paused table and its error (the latest error of a table wins).
    pub fn pause(&mut self, table: String, error: String) {
        self.paused.retain(|(name, _)| *name != table);
        self.paused.push((table, error));
    }

    /// Bytes of WAL the server has that are not applied here yet.
    pub fn lag_bytes(&self) -> u64 {
        self.server_wal_end.0.saturating_sub(self.applied_lsn.0)
    }

    /// Milliseconds since the last applied transaction committed at the source, while
    /// behind; zero when caught up (nothing newer to apply).
    pub fn lag_millis(&self) -> u64 {
        let behind = self.lag_bytes() > 0 && self.applied_lsn < self.server_wal_end_before.max(self.received_lsn);
        if !behind {
            return 0;
        }
        let Some(commit) = self.last_commit_micros else { return 0 };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(commit);
        (now.saturating_sub(commit) / 1000).max(0) as u64
    }
}

impl PgSourceStatus {
    /// This status in the form every source publishes (`retina.sources`, `/metrics`).
    pub fn fill(&self, status: &mut retina_core::SourceStatus) {
        status.state = self.phase.as_str().into();
        status.transactions = self.transactions;
        status.row_changes = self.row_changes + self.copied_rows;
        status.duplicate_transactions = self.duplicate_transactions;
        status.lag_bytes = Some(self.lag_bytes());
        status.lag_millis = Some(self.lag_millis());
        status.durable_position = (self.confirmed_lsn.0 > 0).then(|| self.confirmed_lsn.to_string());
        status.last_error = self.error.clone();
        status.detail = match self.phase {
            Phase::Reconnecting => Some(format!(
                "connection lost; attempt {} to resume from the durable position ({} reconnects in all)",
                self.reconnect_attempts, self.reconnects
            )),
            _ if self.reconnects > 0 => Some(format!("{} reconnects after connection losses", self.reconnects)),
            _ => None,
        };
        status.paused_tables = self.paused.iter().map(|(table, _)| table.clone()).collect();
        let mut notes = Vec::new();
        if !self.paused.is_empty() {
            let tables: Vec<String> = self.paused.iter().map(|(table, error)| format!("{table} ({error})")).collect();
            notes.push(format!("paused, the others go on: {}", tables.join("; ")));
            if status.last_error.is_none() {
                status.last_error = self.paused.last().map(|(table, error)| format!("table {table} paused: {error}"));
            }
        }
        if let Some(table) = &self.syncing {
            notes.push(format!("copying {table}, which joined the publication"));
        }
        if !self.synced.is_empty() {
            notes.push(format!("joined the publication: {}", self.synced.join(", ")));
        }
        if !self.left_out.is_empty() {
            notes.push(format!("not mirrored, having no primary key or replica identity: {}", self.left_out.join(", ")));
        }
        if !notes.is_empty() {
            let note = notes.join("; ");
            status.detail = Some(match status.detail.take() {
                Some(detail) => format!("{detail}; {note}"),
                None => note,
            });
        }
    }
}

/// The shared cell the source writes and readers copy.
pub type SharedStatus = Arc<Mutex<PgSourceStatus>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_is_zero_when_caught_up_and_grows_with_the_commit_age() {
        let mut status = PgSourceStatus { server_wal_end: Lsn(1000), applied_lsn: Lsn(1000), ..PgSourceStatus::default() };
        assert_eq!((status.lag_bytes(), status.lag_millis()), (0, 0));
        status.server_wal_end = Lsn(1500);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_micros() as i64;
        status.last_commit_micros = Some(now - 2_000_000);
        assert_eq!((status.lag_bytes(), status.lag_millis()), (500, 0), "WAL seen by one poll only may not be ours");
        status.server_wal_end_before = Lsn(1200);
        assert_eq!(status.lag_bytes(), 500);
        assert!((1_999..3_000).contains(&status.lag_millis()), "{}", status.lag_millis());
    }
}
