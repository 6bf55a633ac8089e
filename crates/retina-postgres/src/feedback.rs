//! What the source tells the server, and what it asks: the standby status updates
//! (written, flushed = durable here, applied = visible here) and the server's own
//! WAL position for the lag.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use retina_core::Engine;

use crate::error::PgSourceResult;
use crate::lsn::Lsn;
use crate::pgoutput::{standby_status_update, POSTGRES_EPOCH_MICROS};
use crate::replicator::{PgSource, StreamState};
use crate::wire::PgConnection;

impl PgSource {
    /// The server's current WAL position, for the lag in bytes (the stream's own
    /// positions only say how far the walsender got, not how far the server is).
    pub(crate) fn poll_server_position(&self, catalog: &mut PgConnection) -> PgSourceResult<()> {
        let rows = catalog.query_rows(
            "SELECT CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END",
        )?;
        let text = rows.into_iter().next().and_then(|row| row.into_iter().next().flatten());
        if let Some(lsn) = text.as_deref().and_then(|text| text.parse::<Lsn>().ok()) {
            let mut status = self.status.lock();
            status.server_wal_end_before = status.server_wal_end;
            status.server_wal_end = status.server_wal_end.max(lsn);
        }
        Ok(())
    }

    /// Tells the server what is written (received), flushed (durable here) and
    /// applied (visible here).
    pub(crate) fn send_feedback(&self, engine: &Engine, replication: &mut PgConnection, stream: &mut StreamState, reply: bool) -> PgSourceResult<()> {
        let durable = self.durable_lsn(engine).unwrap_or(Lsn::ZERO);
        let mut flushed = durable;
        // Idle and everything submitted is durable: the server may also forget the
        // WAL it skipped for us (other databases, unpublished tables).
        if durable >= stream.last_submitted && !stream.assembler.in_progress() && !stream.unflushed {
            flushed = flushed.max(stream.idle_point);
        }
        stream.confirmed = stream.confirmed.max(flushed);
        let (written, applied) = {
            let mut status = self.status.lock();
            status.confirmed_lsn = stream.confirmed;
            (status.received_lsn, status.applied_lsn)
        };
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as i64).unwrap_or(0) - POSTGRES_EPOCH_MICROS;
        replication.send_copy_data(&standby_status_update(written.max(stream.confirmed), stream.confirmed, applied.max(stream.confirmed), now, reply))?;
        stream.last_feedback = Instant::now();
        Ok(())
    }
}
