//! One table's problem stops that table, not the source (`on_table_error=pause`,
//! the default): a value the mirror cannot hold (a `NaN` in a constrained numeric),
//! a table without identity in a DBA's publication, a schema change the mirror
//! cannot express. The table is paused: none of its changes apply from the failing
//! transaction on (its earlier changes in that transaction are dropped with it, so
//! it stays at its last consistent state), while every other table goes on.
//! `retina.sources` names it with its error. The pause is recorded in the source
//! position (`;paused=T`), so a restart keeps it; `resync=T` copies the table again
//! at the next start and ends it. `on_table_error=stop` stops the whole source
//! instead, as before.

use std::time::Instant;

use retina_core::Engine;

use crate::error::{PgSourceError, PgSourceResult};
use crate::replicator::{PgSource, StreamState};

impl PgSource {
    /// Pauses the table `error` belongs to, or hands the error back when it is not
    /// one table's or the source is set to stop. `oid`: the relation of the message
    /// that failed.
    pub(crate) fn pause_table(
        &self,
        engine: &Engine,
        stream: &mut StreamState,
        oid: Option<u32>,
        error: PgSourceError,
    ) -> PgSourceResult<()> {
        let Some(name) = error.table().map(str::to_string) else { return Err(error) };
        if !self.options.pause_failing_tables {
            return Err(error);
        }
        if let Some(oid) = oid {
            stream.paused_oids.insert(oid);
        }
        if !stream.marks.paused.contains(&name) {
            stream.marks.paused.push(name.clone());
        }
        tracing::warn!(source = %self.name, table = %name, %error, "table paused; the others go on");
        self.status.lock().pause(name, error.to_string());
        // Recorded at once, so a crash before the next transaction keeps it paused.
        engine.submit_from(&self.name, stream.marks.position(stream.last_submitted), Vec::new())?;
        if !stream.unflushed {
            stream.unflushed = true;
            stream.unflushed_since = Instant::now();
        }
        Ok(())
    }
}
